//! Ingest benchmark: 1,000,000 test cases in 500 generated GoogleTest-like
//! files (2% failures, about 110 MB), measured as
//!
//! - `tokenize`: the physical floor — one quick-xml pass over the same bytes
//!   that only counts `<testcase>` elements;
//! - `merge`: rocmatrix collecting the files and writing the merged junit.xml;
//! - `report`: the full report (junit.xml, results.json, summary.md, index.html);
//! - `signatures`: collecting, then grouping the failures into signatures
//!   and attributing them once more on their own, to show their share;
//! - `junitparser`: `junitparser merge` from PyPI on the same files;
//! - then the sizes of what `report` wrote, and the time until headless
//!   Chromium answers with index.html's DOM (`--dump-dom`), against an empty
//!   page opened the same way (the browser's own start), median of 5 each.
//!
//! Each runs in its own process under `/usr/bin/time -v` for its peak
//! memory, timed by this process; the rocmatrix rows run
//! `ROCMATRIX_BENCH_ROUNDS` times each (default 5), interleaved, and the
//! median counts. Run with `cargo bench --bench ingest`; set
//! `ROCMATRIX_BENCH_DIR` to keep the generated files somewhere else, and
//! `ROCMATRIX_BENCH_SKIP_JUNITPARSER=1` to skip the (slow) Python reference.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const FILES: usize = 500;
const CELLS: usize = 20;
const CASES_PER_FILE: usize = 2000;

fn generate(dir: &Path) -> std::io::Result<u64> {
    let done = dir.join(".complete");
    if done.is_file() {
        return Ok(std::fs::read_to_string(&done)?.trim().parse().unwrap_or(0));
    }
    let _ = std::fs::remove_dir_all(dir);
    let mut total = 0u64;
    // Deterministic pseudo-random failures: a 64-bit LCG.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    for f in 0..FILES {
        let cell = dir.join(format!("cell{:02}", f % CELLS));
        std::fs::create_dir_all(&cell)?;
        let mut s = String::with_capacity(CASES_PER_FILE * 120);
        s.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"2000\" failures=\"40\" disabled=\"0\" errors=\"0\" time=\"1.5\" timestamp=\"2026-01-01T00:00:00.000\" name=\"AllTests\">\n");
        for suite in 0..20 {
            let _ = writeln!(
                s,
                "  <testsuite name=\"Kernel{f:03}Suite{suite:02}\" tests=\"100\" failures=\"2\" disabled=\"0\" skipped=\"0\" errors=\"0\" time=\"0.1\" timestamp=\"2026-01-01T00:00:00.000\">"
            );
            for t in 0..CASES_PER_FILE / 20 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let fail = (seed >> 33) % 50 == 0;
                let _ = write!(
                    s,
                    "    <testcase name=\"Case{t:03}\" status=\"run\" result=\"completed\" time=\"0.001\" classname=\"Kernel{f:03}Suite{suite:02}\""
                );
                if fail {
                    let _ = write!(
                        s,
                        ">\n      <failure message=\"kernel.cpp:{t}&#x0A;Expected equality of these values:&#x0A;  out[{t}]&#x0A;    Which is: 1&#x0A;  2\" type=\"\"><![CDATA[kernel.cpp:{t}\nExpected equality of these values:\n  out[{t}]\n    Which is: 1\n  2]]></failure>\n    </testcase>\n"
                    );
                } else {
                    s.push_str(" />\n");
                }
            }
            s.push_str("  </testsuite>\n");
        }
        s.push_str("</testsuites>\n");
        total += s.len() as u64;
        std::fs::write(cell.join(format!("gtest-{f:03}.xml")), s)?;
    }
    std::fs::write(&done, total.to_string())?;
    Ok(total)
}

fn cell_dirs(dir: &Path) -> Vec<PathBuf> {
    (0..CELLS)
        .map(|c| dir.join(format!("cell{c:02}")))
        .collect()
}

fn child(mode: &str, dir: &Path, out: &Path) {
    let t0 = Instant::now();
    match mode {
        "tokenize" => {
            let mut n = 0u64;
            for c in cell_dirs(dir) {
                let mut files: Vec<PathBuf> = std::fs::read_dir(&c)
                    .expect("cell dir")
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .collect();
                files.sort();
                for f in files {
                    let file = std::fs::File::open(&f).expect("open");
                    let mut r =
                        quick_xml::Reader::from_reader(BufReader::with_capacity(256 * 1024, file));
                    let mut buf = Vec::new();
                    loop {
                        match r.read_event_into(&mut buf) {
                            Ok(quick_xml::events::Event::Start(e))
                            | Ok(quick_xml::events::Event::Empty(e))
                                if e.local_name().as_ref() == b"testcase" =>
                            {
                                n += 1
                            }
                            Ok(quick_xml::events::Event::Eof) => break,
                            Err(e) => panic!("{e}"),
                            _ => {}
                        }
                        buf.clear();
                    }
                }
            }
            println!("testcases {n}");
        }
        "collect" => {
            let src = rocmatrix::results::Source::junit_dirs(&cell_dirs(dir)).expect("source");
            let r = rocmatrix::analysis::collect(
                &src,
                Default::default(),
                &mut rocmatrix::results::NoSink,
            );
            println!("testcases {}", r.totals().total());
        }
        "merge" => {
            let src = rocmatrix::results::Source::junit_dirs(&cell_dirs(dir)).expect("source");
            std::fs::create_dir_all(out).expect("out");
            let mut w =
                rocmatrix::merged_junit::JunitWriter::create(&out.join("junit.xml"), "bench")
                    .expect("junit");
            let r = rocmatrix::analysis::collect(&src, Default::default(), &mut w);
            let bytes = w.finish().expect("finish");
            println!("testcases {} junit.xml {bytes} bytes", r.totals().total());
        }
        "signatures" => {
            let src = rocmatrix::results::Source::junit_dirs(&cell_dirs(dir)).expect("source");
            let r = rocmatrix::analysis::collect(
                &src,
                Default::default(),
                &mut rocmatrix::results::NoSink,
            );
            let t = Instant::now();
            let sigs = rocmatrix::analysis::signature::find(&r);
            let find = t.elapsed().as_secs_f64();
            // `collect` finds the signatures too: take them out once to
            // compare with collecting alone.
            let without = t0.elapsed().as_secs_f64() - 2.0 * find;
            println!(
                "signatures {} over {} failures: {find:.3}s, collecting alone about {without:.3}s (+{:.1}%)",
                sigs.len(),
                r.totals().failures(),
                100.0 * find / without
            );
        }
        "report" => {
            let src = rocmatrix::results::Source::junit_dirs(&cell_dirs(dir)).expect("source");
            let s = rocmatrix::report::build(&src, out, None).expect("report");
            println!("{}", s.line());
        }
        other => panic!("unknown mode {other}"),
    }
    eprintln!("inner wall {:.3}s", t0.elapsed().as_secs_f64());
}

/// The sizes of what `report` wrote.
fn report_sizes(report: &Path) {
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let pages: Vec<u64> = std::fs::read_dir(report.join("cells"))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| size(&e.path())).collect())
        .unwrap_or_default();
    println!(
        "report sizes: index.html {} B, summary.md {} B, results.json {} B, junit.xml {} B, \
         cells/ {} pages, {} B in all, largest {} B",
        size(&report.join("index.html")),
        size(&report.join("summary.md")),
        size(&report.join("results.json")),
        size(&report.join("junit.xml")),
        pages.len(),
        pages.iter().sum::<u64>(),
        pages.iter().max().copied().unwrap_or(0)
    );
}

/// Seconds until headless Chromium prints the DOM of `url`.
fn dump_dom(browser: &str, profile: &Path, url: &str) -> Option<f64> {
    let t = Instant::now();
    let o = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-dev-shm-usage",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .output()
        .ok()?;
    o.status.success().then(|| t.elapsed().as_secs_f64())
}

/// index.html in headless Chromium against an empty page, median of 5.
fn browser_open(report: &Path) {
    let Some(browser) = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| Command::new(b).arg("--version").output().is_ok())
    else {
        println!("browser: no chromium here (.ci/install-reports.sh installs it); skipped");
        return;
    };
    let profile = std::env::temp_dir().join("rocmatrix-bench-chromium");
    let empty = std::env::temp_dir().join("rocmatrix-bench-empty.html");
    let _ = std::fs::write(&empty, "<!DOCTYPE html><html><body>x</body></html>");
    let pages = [
        ("empty page", empty),
        ("index.html", report.join("index.html")),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); pages.len()];
    for _ in 0..5 {
        for (i, (_, p)) in pages.iter().enumerate() {
            if let Some(t) = dump_dom(browser, &profile, &format!("file://{}", p.display())) {
                times[i].push(t);
            }
        }
    }
    let (e, i) = (
        median(&mut times[0]).unwrap_or(f64::NAN),
        median(&mut times[1]).unwrap_or(f64::NAN),
    );
    println!(
        "headless Chromium --dump-dom, median of 5: {} {e:.2}s, {} {i:.2}s: index.html answers {:.2}s after the browser's own start",
        pages[0].0,
        pages[1].0,
        i - e
    );
}

struct Measure {
    /// Wall seconds, timed around the child by this process (`/usr/bin/time`
    /// rounds to 10 ms, a fifth of the floor's spread).
    wall: f64,
    rss_kib: u64,
}

/// How many times each rocmatrix row runs (interleaved); the median counts.
fn rounds() -> usize {
    std::env::var("ROCMATRIX_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(5)
}

/// The median of `v` (the upper one of an even count).
fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// The median wall and the largest peak of `runs`.
fn typical(runs: &[Measure]) -> Option<Measure> {
    let mut walls: Vec<f64> = runs.iter().map(|m| m.wall).collect();
    Some(Measure {
        wall: median(&mut walls)?,
        rss_kib: runs.iter().map(|m| m.rss_kib).max().unwrap_or(0),
    })
}

fn timed(cmd: &mut Command, quiet: bool) -> Option<Measure> {
    let t0 = Instant::now();
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("cannot run {cmd:?}: {e}");
            return None;
        }
    };
    if !out.status.success() {
        eprintln!("{cmd:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    let wall = t0.elapsed().as_secs_f64();
    if !quiet {
        print!("{}", String::from_utf8_lossy(&out.stdout));
    }
    let mut rss_kib = 0;
    for line in BufReader::new(&out.stderr[..])
        .lines()
        .map_while(Result::ok)
    {
        let l = line.trim();
        if let Some(v) = l.strip_prefix("Maximum resident set size (kbytes): ") {
            rss_kib = v.parse().unwrap_or(0);
        }
    }
    Some(Measure { wall, rss_kib })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(
            &args[i + 1],
            Path::new(&args[i + 2]),
            Path::new(&args[i + 3]),
        );
        return;
    }
    let dir = std::env::var_os("ROCMATRIX_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("rocmatrix-bench-ingest"));
    let t0 = Instant::now();
    let bytes = generate(&dir).expect("generate");
    println!(
        "input: {FILES} files, {} test cases, {:.1} MB in {} ({:.1}s to generate or find)",
        FILES * CASES_PER_FILE,
        bytes as f64 / 1e6,
        dir.display(),
        t0.elapsed().as_secs_f64()
    );
    let me = std::env::current_exe().expect("current exe");
    let out = std::env::temp_dir().join("rocmatrix-bench-out");
    let mut rows: Vec<(String, Measure)> = Vec::new();
    let modes = ["tokenize", "merge", "signatures", "report"];
    let mut runs: Vec<Vec<Measure>> = modes.iter().map(|_| Vec::new()).collect();
    // Interleaved, so that the machine's drift hits every row alike.
    for round in 0..rounds() {
        for (mode, runs) in modes.iter().zip(&mut runs) {
            let mut cmd = Command::new("/usr/bin/time");
            cmd.arg("-v")
                .arg(&me)
                .args(["--child", mode])
                .arg(&dir)
                .arg(out.join(mode));
            runs.extend(timed(&mut cmd, round > 0));
        }
    }
    for (mode, runs) in modes.iter().zip(runs) {
        rows.extend(typical(&runs).map(|m| (mode.to_string(), m)));
    }
    if std::env::var_os("ROCMATRIX_BENCH_SKIP_JUNITPARSER").is_none() {
        let _ = std::fs::create_dir_all(&out);
        let mut cmd = Command::new("/usr/bin/time");
        cmd.args(["-v", "junitparser", "merge", "--glob"])
            .arg(format!("{}/cell*/*.xml", dir.display()))
            .arg(out.join("junitparser.xml"));
        if let Some(m) = timed(&mut cmd, false) {
            rows.push(("junitparser merge".to_string(), m));
        }
    }
    report_sizes(&out.join("report"));
    browser_open(&out.join("report"));
    let mut stdout = std::io::stdout().lock();
    let floor = rows
        .iter()
        .find(|(n, _)| n == "tokenize")
        .map(|(_, m)| m.wall);
    let _ = writeln!(
        stdout,
        "\n{:<20} {:>12} {:>14} {:>12}   (median of {} runs each; junitparser once)",
        "what",
        "wall",
        "peak RSS",
        "× tokenize",
        rounds()
    );
    for (name, m) in &rows {
        let ratio = match floor {
            Some(f) if f > 0.0 => format!("{:.1}×", m.wall / f),
            _ => String::new(),
        };
        let _ = writeln!(
            stdout,
            "{:<20} {:>11.3}s {:>10.1} MiB {:>12}",
            name,
            m.wall,
            m.rss_kib as f64 / 1024.0,
            ratio
        );
    }
}
