//! The HTML report in headless Chromium: it renders, runs its script without
//! errors, filters, and shows a test named `<img src=x onerror=alert(1)>` as
//! text. The screenshot is kept for people to look at.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::harness::*;

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// Runs headless Chromium on `url`; returns (stdout, stderr).
fn headless(browser: &str, profile: &Path, args: &[&str], url: &str) -> (String, String) {
    let o = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-dev-shm-usage",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .output()
        .expect("run chromium");
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(o.status.success(), "chromium failed:\n{err}");
    (out, err)
}

/// A run with failures, a regression, a timed-out cell and hostile strings.
fn hostile_run(tmp: &Path) -> PathBuf {
    let keys = &["distro", "gfx"];
    let mk = |id: &str, cells: Vec<CellSpec>| {
        make_run(
            tmp,
            id,
            "h",
            keys,
            json!([
                {"cells": {"gfx": "gfx1031"}, "tests": ["Conv.*"], "reason": "vanilla clang 14 <asm>"}
            ]),
            (&["distro"], &["gfx"]),
            None,
            &cells,
        )
    };
    let base = mk(
        "base",
        vec![CellSpec::new(
            "sid.gfx1030",
            &[("distro", "sid"), ("gfx", "gfx1030")],
            "passed",
        )
        .junit(
            "t.xml",
            gtest_xml(&[
                ("Hip", "<img src=x onerror=alert(1)>", "pass"),
                ("Hip", "Ok", "pass"),
            ]),
        )],
    );
    let cur = mk(
        "cur",
        vec![
            CellSpec::new(
                "sid.gfx1030",
                &[("distro", "sid"), ("gfx", "gfx1030")],
                "failed",
            )
            .junit(
                "t.xml",
                gtest_xml(&[
                    ("Hip", "<img src=x onerror=alert(1)>", "fail"),
                    ("Hip", "Ok", "pass"),
                ]),
            ),
            CellSpec::new(
                "sid.gfx1031",
                &[("distro", "sid"), ("gfx", "gfx1031")],
                "failed",
            )
            .junit(
                "t.xml",
                gtest_xml(&[
                    ("Conv", "Fwd", "fail"),
                    ("Hip", "Ok", "pass"),
                    ("Hip", "S", "skip"),
                ]),
            ),
            CellSpec {
                reason: Some("step test timed out after 10m"),
                log_tail: "make[2]: *** [kernels] <script>alert('log')</script>\n",
                ..CellSpec::new(
                    "trixie.gfx1030",
                    &[("distro", "trixie"), ("gfx", "gfx1030")],
                    "timeout",
                )
            },
            CellSpec::new(
                "trixie.gfx1031",
                &[("distro", "trixie"), ("gfx", "gfx1031")],
                "passed",
            )
            .junit(
                "t.xml",
                gtest_xml(&[("Hip", "Ok", "pass"), ("Hip", "Flaky", "flaky")]),
            ),
        ],
    );
    // The environment image's gfx coverage, as `run --coverage` writes it,
    // with a library whose name is markup.
    std::fs::create_dir_all(cur.join("images")).unwrap();
    std::fs::write(
        cur.join("images/eeeeeeeeeeee.coverage.json"),
        serde_json::to_vec(&json!({
            "environment": "e".repeat(64), "image": "rocmatrix/env:eeee",
            "cells": ["sid.gfx1030", "sid.gfx1031"], "policy": "extended",
            "gfx": ["gfx1030", "gfx1031"], "dirs": ["/usr/lib"],
            "libraries": [
                {"library": "/usr/lib/librocblas.so.4", "targets": ["gfx1030", "gfx1100"],
                 "verdicts": [{"kind": "exact", "text": "exact"},
                              {"kind": "compatible", "text": "via gfx1030 (distro-extended)"}]},
                {"library": "/usr/lib/<img src=x onerror=alert(2)>.so", "targets": ["gfx900"],
                 "verdicts": [{"kind": "missing", "text": "missing"},
                              {"kind": "missing", "text": "missing"}]}
            ],
            "problems": [], "secs": 1.5
        }))
        .unwrap(),
    )
    .unwrap();
    rocmatrix::report::write_reports(&cur, Some(&base), None).unwrap();
    cur.join("report/index.html")
}

#[test]
fn html_report_in_headless_chromium() {
    let Some(browser) = chromium() else {
        unavailable(
            "html_report_in_headless_chromium",
            "chromium is not installed (run .ci/install-reports.sh)",
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let html = hostile_run(tmp.path());
    let page = std::fs::read_to_string(&html).unwrap();
    // Self-contained: nothing is loaded from anywhere.
    for needle in ["src=\"http", "href=\"http", "<link", "@import", "url("] {
        assert!(!page.contains(needle), "external resource: {needle}");
    }
    let url = format!("file://{}", html.display());
    let profile = tmp.path().join("profile");

    let (dom, log) = headless(browser, &profile, &["--dump-dom"], &url);
    assert!(
        dom.contains("data-filter-ready=\"1\""),
        "the script did not run:\n{log}"
    );
    assert!(!log.contains("Uncaught"), "script error:\n{log}");
    // The hostile name is text, not an element; the log tail too.
    assert!(dom.contains("&lt;img src=x onerror=alert(1)&gt;"), "{dom}");
    assert!(!dom.contains("<img"), "an <img> element was injected");
    assert!(dom.contains("&lt;script&gt;alert('log')&lt;/script&gt;"));
    assert_eq!(
        dom.matches("<script>").count(),
        1,
        "only the report's own script"
    );
    // Why cells fail comes first, marked against the baseline.
    let why = dom.find("id=\"why\"").expect("a Why cells fail section");
    assert!(
        why < dom.find("id=\"matrix\"").unwrap(),
        "signatures before the grid"
    );
    assert!(dom.contains("Against the baseline: "), "{dom}");
    // Each cell's page opens on its own, hostile text still text.
    let page = html.with_file_name("cells").join("sid.gfx1030.html");
    let (cell_dom, log) = headless(
        browser,
        &profile,
        &["--dump-dom"],
        &format!("file://{}", page.display()),
    );
    assert!(!log.contains("Uncaught"), "script error:\n{log}");
    assert!(
        cell_dom.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{cell_dom}"
    );
    assert!(!cell_dom.contains("<img"), "an <img> element was injected");
    assert!(cell_dom.contains("href=\"../index.html#cell-sid.gfx1030\""));
    // Grid, regressions, expected failures.
    assert!(dom.contains("Regressions against"));
    assert!(dom.contains("▲ regression"));
    assert!(dom.contains("chip fail regressed"));
    assert!(dom.contains("chip error"));
    assert!(dom.contains("expected: vanilla clang 14 &lt;asm&gt;"));
    // The environment's gfx coverage table, the library missing a target first.
    assert!(
        dom.contains("gfx coverage of the environment images"),
        "{dom}"
    );
    let hostile = dom
        .find("/usr/lib/&lt;img src=x onerror=alert(2)&gt;.so")
        .expect("the hostile library is listed as text");
    let rocblas = dom.find("<td>/usr/lib/librocblas.so.4</td>").unwrap();
    assert!(hostile < rocblas, "libraries missing a target come first");
    assert!(dom.contains("<span class=\"badge flaky\">via gfx1030 (distro-extended)</span>"));
    assert!(
        dom.contains("<th>1 · 0 · 0 · 1</th><th>0 · 1 · 0 · 1</th>"),
        "{dom}"
    );
    assert!(dom.contains("Release view"), "{dom}");
    let md = std::fs::read_to_string(html.with_file_name("summary.md")).unwrap();
    assert!(
        md.contains("policy extended): gfx1030 1/0/0/1 · gfx1031 0/1/0/1"),
        "{md}"
    );

    // The filter box works (a link can carry a filter).
    let (dom, log) = headless(
        browser,
        &profile,
        &["--dump-dom"],
        &format!("{url}#filter=gfx1031"),
    );
    assert!(!log.contains("Uncaught"), "script error:\n{log}");
    assert!(dom.contains("2 cells match"), "{dom}");
    assert!(dom.contains("class=\"cell fail filterable hidden\" id=\"cell-sid.gfx1030\""));

    // A malformed escape in the link's filter does not stop the script.
    let (dom, log) = headless(
        browser,
        &profile,
        &["--dump-dom"],
        &format!("{url}#filter=%E0%A4%A"),
    );
    assert!(!log.contains("Uncaught"), "script error:\n{log}");
    assert!(
        dom.contains("data-filter-ready=\"1\""),
        "the script stopped:\n{log}"
    );

    // A screenshot, kept for people to look at.
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshot.png");
    let _ = std::fs::remove_file(&shot);
    let (_, log) = headless(
        browser,
        &profile,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1400,1600",
        ],
        &url,
    );
    assert!(!log.contains("Uncaught"), "script error:\n{log}");
    let png = std::fs::read(&shot).expect("screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "{} bytes",
        png.len()
    );
    eprintln!("screenshot: {}", shot.display());
}

/// The smoke's expected failure in Chromium (issue 36): a cell whose
/// compile step failed where the matrix's `expect:` said it would reads as
/// an expected failure on its page (title, teal banner, badge), on its card
/// and in the grid — never `failed` on a green banner or a red badge.
#[test]
fn an_expected_failure_in_headless_chromium() {
    let Some(browser) = chromium() else {
        unavailable(
            "an_expected_failure_in_headless_chromium",
            "chromium is not installed (run .ci/install-reports.sh)",
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let run = make_run(
        tmp.path(),
        "smoke",
        "h",
        &["suite", "gfx"],
        json!([{"cells": {"suite": "bookworm", "gfx": "gfx1100"}, "tests": [],
                "reason": "no gfx1100 device libraries in ROCm 5.2"}]),
        (&["suite"], &["gfx"]),
        None,
        &[
            CellSpec::new(
                "bookworm.gfx900",
                &[("suite", "bookworm"), ("gfx", "gfx900")],
                "passed",
            )
            .junit("t.xml", gtest_xml(&[("Smoke", "Targets", "pass")])),
            CellSpec {
                reason: Some("step `compile`: exit code 1"),
                log_tail: "clang: error: cannot find ROCm device library for gfx1100\n",
                ..CellSpec::new(
                    "bookworm.gfx1100",
                    &[("suite", "bookworm"), ("gfx", "gfx1100")],
                    "failed",
                )
            },
        ],
    );
    // The smoke's GPU step, skipped on a host without one.
    let record = run.join("cells/bookworm.gfx900/cell.json");
    let mut cell: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    cell["steps"].as_array_mut().unwrap().push(json!({
        "name": "run-on-gpu", "status": "skipped", "exit_code": null, "duration_secs": 0.0,
        "log": "logs/02-run-on-gpu.log",
        "reason": "needs a GPU: no GPU inventory: /sys/class/kfd/kfd/topology has no KFD topology"
    }));
    std::fs::write(&record, serde_json::to_vec_pretty(&cell).unwrap()).unwrap();
    rocmatrix::report::write_reports(&run, None, None).unwrap();
    let profile = tmp.path().join("profile");
    let index = format!("file://{}", run.join("report/index.html").display());
    let (dom, log) = headless(browser, &profile, &["--dump-dom"], &index);
    assert!(!log.contains("Uncaught"), "script error:\n{log}");
    // The skipped step, counted under the header and shown on its card.
    // (A badge, not the ⏭ glyph: Debian's default fonts draw it as a box.)
    assert!(
        dom.contains("<span class=\"badge skip\">skipped</span> step <b>run-on-gpu</b> skipped in 1 cell: needs a GPU: no GPU inventory"),
        "{dom}"
    );
    assert!(!dom.contains('⏭'), "{dom}");
    // A reason's `step` names are code, not backticks.
    assert!(
        dom.contains("step <code>compile</code>: exit code 1"),
        "{dom}"
    );
    assert!(!dom.contains("`compile`"), "{dom}");
    assert!(
        dom.contains(
            "<span class=\"badge skipped\">skipped</span> step <b>run-on-gpu</b> — needs a GPU"
        ),
        "{dom}"
    );
    // The expected failure's tail: its error first, open, its log linked.
    assert!(
        dom.contains("✗ <code>clang: error: cannot find ROCm device library for gfx1100</code>"),
        "{dom}"
    );
    assert!(dom.contains("the whole log</a>"), "{dom}");
    assert!(
        dom.contains("<h1>smoke: 2 cells: 1 passed, 1 expected failure</h1>"),
        "{dom}"
    );
    assert!(
        dom.contains("<span>cells:</span><span class=\"pass\">1 passed</span><span class=\"xfail\">1 expected failure</span>"),
        "{dom}"
    );
    assert!(
        dom.contains("title=\"bookworm.gfx1100: expected failure\">☑ expected failure</a>"),
        "{dom}"
    );
    assert!(
        dom.contains("bookworm.gfx1100 <span class=\"badge xfail\">expected failure</span>"),
        "{dom}"
    );
    assert!(
        !dom.contains("badge failed\">failed</span> <span class=\"muted\">"),
        "{dom}"
    );

    let page = run.join("report/cells/bookworm.gfx1100.html");
    let url = format!("file://{}", page.display());
    let (cell, log) = headless(browser, &profile, &["--dump-dom"], &url);
    assert!(!log.contains("Uncaught"), "script error:\n{log}");
    assert!(
        cell.contains("<title>bookworm.gfx1100: expected failure — smoke"),
        "{cell}"
    );
    assert!(
        cell.contains("<header class=\"xfail\">\n<h1>bookworm.gfx1100: expected failure</h1>"),
        "{cell}"
    );
    assert!(
        cell.contains(
            "as the matrix's <code>expect:</code> says: no gfx1100 device libraries in ROCm 5.2"
        ),
        "{cell}"
    );

    // The page as a reader sees it, kept to look at.
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("expected-failure-cell.png");
    let _ = std::fs::remove_file(&shot);
    let (_, log) = headless(
        browser,
        &profile,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1200,800",
        ],
        &url,
    );
    assert!(!log.contains("Uncaught"), "script error:\n{log}");
    let png = std::fs::read(&shot).expect("screenshot");
    assert!(png.starts_with(b"\x89PNG"), "{} bytes", png.len());
    eprintln!("screenshot: {}", shot.display());
}
