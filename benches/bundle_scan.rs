//! Scanning every shared library of an environment image with ROCm libraries
//! for offload bundles, against plain reading of the same bytes.
//!
//!   cargo bench --bench bundle_scan [-- IMAGE_ROOT]
//!
//! Without an argument the image is prepared once (Docker, network) by
//! `tests/it/data/gpu-artifacts.sh trixie-image`: /usr/lib of debian:trixie
//! with librocfft0, librocrand1, librccl1, libamdhip64-5, libhipblas0 and
//! libhipfft0 installed (rocBLAS and rocSOLVER come as dependencies), cached
//! under $ROCMATRIX_TEST_CACHE (default target/test-cache). Both passes run
//! on a warm page cache; the best of several rounds is reported.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rocmatrix::bundle::{scan_file, Check};

fn image_root() -> Result<PathBuf, String> {
    if let Some(arg) = std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        return Ok(PathBuf::from(arg));
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cache = std::env::var_os("ROCMATRIX_TEST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("target/test-cache"));
    let dir = cache.join("bench-image");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let dir = dir.canonicalize().map_err(|e| e.to_string())?;
    let root = dir.join("trixie-image");
    if !root.join("done").exists() {
        eprintln!("preparing {} (downloads ~600 MB once)…", root.display());
        let status = Command::new("docker")
            .args(["run", "--rm", "-v"])
            .arg(format!("{}:/out", dir.display()))
            .arg("-v")
            .arg(format!(
                "{}:/data:ro",
                manifest.join("tests/it/data").display()
            ))
            .args([
                "debian:trixie",
                "bash",
                "/data/gpu-artifacts.sh",
                "trixie-image",
            ])
            .status()
            .map_err(|e| format!("docker: {e}"))?;
        if !status.success() {
            return Err(format!("preparing the image failed: {status}"));
        }
    }
    Ok(root)
}

/// Regular files named like shared libraries (`*.so`, `*.so.*`), symlinks skipped.
fn libraries(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(t) = e.file_type() else { continue };
        let p = e.path();
        if t.is_dir() {
            libraries(&p, out);
        } else if t.is_file() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".so") || name.contains(".so.") {
                out.push(p);
            }
        }
    }
}

fn best<F: FnMut() -> u64>(rounds: usize, mut f: F) -> (Duration, u64) {
    let mut best = Duration::MAX;
    let mut value = 0;
    for _ in 0..rounds {
        let t = Instant::now();
        value = std::hint::black_box(f());
        best = best.min(t.elapsed());
    }
    (best, value)
}

fn main() {
    let root = match image_root() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bundle_scan: skipped: {e}");
            return;
        }
    };
    let mut libs = Vec::new();
    libraries(&root, &mut libs);
    libs.sort();
    let rounds = 5;
    let (read_time, bytes) = best(rounds, || {
        libs.iter()
            .map(|p| std::fs::read(p).map(|d| d.len() as u64).unwrap_or(0))
            .sum()
    });
    let mut with_code = 0;
    let mut targets = 0;
    let (scan_time, _) = best(rounds, || {
        with_code = 0;
        targets = 0;
        for p in &libs {
            if let Ok(Some(r)) = scan_file(p, Check::Table) {
                let n = r.targets().len();
                if n > 0 {
                    with_code += 1;
                    targets += n;
                }
            }
        }
        with_code
    });
    let gib = bytes as f64 / (1u64 << 30) as f64;
    println!("image: {}", root.display());
    println!(
        "{} shared libraries, {:.2} GiB; {} carry device code ({} targets in all)",
        libs.len(),
        gib,
        with_code,
        targets
    );
    println!(
        "read: {:>8.1} ms  ({:.2} GiB/s)",
        read_time.as_secs_f64() * 1e3,
        gib / read_time.as_secs_f64()
    );
    println!(
        "scan: {:>8.1} ms  ({:.2} GiB/s)",
        scan_time.as_secs_f64() * 1e3,
        gib / scan_time.as_secs_f64()
    );
    println!(
        "scan / read = {:.2}x (best of {rounds} rounds each)",
        scan_time.as_secs_f64() / read_time.as_secs_f64()
    );
}
