//! Benchmark: expanding and rendering a 10-axis matrix of 100,000 cells and
//! writing it as `plan --format json`, in-process and through the binary.
//!
//! Run with `cargo bench --bench plan`. Prints wall times; no assertions.

use std::path::Path;
use std::time::Instant;

use rocmatrix::matrix_file::{expand, Spec};
use rocmatrix::plan::Plan;

fn matrix() -> String {
    // 104,000 combinations; the exclude removes 4,000 and the include adds a key.
    let sizes = [13, 8, 5, 5, 5, 4, 2, 1, 1, 1];
    let mut s = String::from("name: bench\nmatrix:\n");
    for (a, n) in sizes.iter().enumerate() {
        let vals: Vec<String> = (0..*n).map(|v| format!("{a}.{v}0")).collect();
        s += &format!("  ax{a}: [{}]\n", vals.join(", "));
    }
    s += "  exclude:\n    - ax0: 0.00\n      ax6: 6.00\n";
    s += "  include:\n    - ax0: 0.10\n      extra: yes\n";
    s += "environment:\n  base: debian:{{ matrix.ax0 }}\n  packages: [hipcc, 'rocm-{{ matrix.ax1 }}']\n";
    s += "steps:\n";
    for i in 0..3 {
        s += &format!(
            "  - name: step{i}\n    run: |\n      echo {{{{ matrix.ax2 }}}} {{{{ matrix.ax3 }}}}\n      make -j GFX={{{{ matrix.ax4 }}}} {{{{ vars.flags }}}}\n    junit: ['/out/{{{{ matrix.ax5 }}}}/*.xml']\n"
        );
    }
    s += "vars:\n  flags: -O2\n";
    s
}

fn main() {
    let text = matrix();
    let t = Instant::now();
    let spec = Spec::parse(Path::new("bench.yaml"), &text).expect("valid");
    let parse = t.elapsed();

    let t = Instant::now();
    let combos = expand(&spec, 200_000).expect("expands");
    let expand_t = t.elapsed();

    let t = Instant::now();
    let plan = Plan::build(&spec, 200_000).expect("renders");
    let build = t.elapsed();

    let t = Instant::now();
    let json = serde_json::to_string(&plan.summary_json()).expect("json");
    let json_t = t.elapsed();

    println!(
        "cells: {} ({} combinations)",
        plan.cells.len(),
        combos.len()
    );
    println!(
        "parse+validate:        {:>8.1} ms",
        parse.as_secs_f64() * 1e3
    );
    println!(
        "expand only:           {:>8.1} ms",
        expand_t.as_secs_f64() * 1e3
    );
    println!(
        "expand+render+hash:    {:>8.1} ms",
        build.as_secs_f64() * 1e3
    );
    println!(
        "plan JSON ({:.1} MB):   {:>8.1} ms",
        json.len() as f64 / 1e6,
        json_t.as_secs_f64() * 1e3
    );

    // End to end through the binary, as a user runs it.
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/rocmatrix");
    let bin = std::env::var("ROCMATRIX_BIN")
        .map(Into::into)
        .unwrap_or(bin);
    if bin.exists() {
        let dir = std::env::temp_dir().join(format!("rocmatrix-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("bench.yaml");
        std::fs::write(&file, &text).expect("write matrix");
        let t = Instant::now();
        let out = std::process::Command::new(&bin)
            .args(["plan", "--format", "json", "--max-cells", "200000"])
            .arg(&file)
            .output()
            .expect("run rocmatrix");
        let e2e = t.elapsed();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        println!(
            "`rocmatrix plan --format json` end to end: {:>8.1} ms ({} bytes)",
            e2e.as_secs_f64() * 1e3,
            out.stdout.len()
        );
        let _ = std::fs::remove_dir_all(dir);
    } else {
        println!("(build with `cargo build --release` to time the binary end to end)");
    }
}
