//! `rocmatrix serve` (issue 53) over real histories made by real runs: the
//! H100 run kept in `tests/fixtures/gpu-runs/h100/run`, finished four times
//! with `rocmatrix report` (its googletest XML edited per run so that one
//! test breaks at the third run, one fails now and then, one fails always
//! and one is named `<img src=x onerror=alert(1)>`), recorded into SQLite
//! beside the stores and imported into a real PostgreSQL server. Every page
//! and its JSON are fetched from the server on a free port, and their words
//! held to `history show` and `history flaky`; each hostile case is a test.
//! Headless Chromium loads the pages when it is installed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Child;

use serde_json::Value;

use crate::harness::postgres::{Postgres, PASSWORD};
use crate::harness::*;

const XSS: &str = "<img src=x onerror=alert(1)>";
const MATRIX: &str = "cuda-smoke";

/// The store id of run `k` (1–4).
fn id(k: usize) -> String {
    format!("20261123-11112{k}-c73{k}")
}

/// Four runs of the H100 matrix under `root/runs/`, each finished by
/// `rocmatrix report` into `root/history.sqlite`, in order.
fn four_runs(root: &Path) -> Vec<PathBuf> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut runs = Vec::new();
    for k in 1..=4 {
        let run = root.join("runs").join(id(k));
        std::fs::create_dir_all(run.parent().unwrap()).unwrap();
        copy_dir(&fixtures.join("gpu-runs/h100/run"), &run);
        std::fs::remove_dir_all(run.join("report")).unwrap();
        for (file, key, value) in [
            ("run.json", "run_id", Value::from(id(k))),
            (
                "run.json",
                "started",
                format!("2026-11-23T11:1{k}:20.188Z").into(),
            ),
            ("plan.json", "run_id", Value::from(id(k))),
        ] {
            let mut doc = read_json(&run.join(file));
            doc[key] = value;
            std::fs::write(run.join(file), doc.to_string()).unwrap();
        }
        let xml = run.join("cells/sm_90/junit/02-smoke/gtest.xml");
        let fail = r#"><failure message="wrong sum">wrong sum</failure></testcase>"#;
        let mut text = std::fs::read_to_string(&xml).unwrap();
        if k >= 3 {
            text = text.replace(
                r#"name="Adds" classname="Gpu" time="0.325"/>"#,
                &format!(r#"name="Adds" classname="Gpu" time="0.325"{fail}"#),
            );
        }
        if k == 1 || k == 3 {
            text = text.replace(
                r#"name="SeesOneDevice" classname="Gpu" time="0.000"/>"#,
                &format!(r#"name="SeesOneDevice" classname="Gpu" time="0.000"{fail}"#),
            );
        }
        text = text.replace(
            r#"name="AfterHang" classname="Gpu" time="0.208"/>"#,
            &format!(
                r#"name="&lt;img src=x onerror=alert(1)&gt;" classname="Gpu" time="0.208"{fail}"#
            ),
        );
        std::fs::write(&xml, text).unwrap();
        let o = Rocmatrix::new().arg("report").arg(&run).run();
        assert!(o.stdout().contains("history: recorded"), "{}", o.context());
        runs.push(run);
    }
    runs
}

/// A running `rocmatrix serve`, stopped when dropped.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(out: &Path, history: Option<&str>) -> Server {
        let mut cmd = Rocmatrix::new()
            .args(["serve", "--listen", "127.0.0.1:0", "--out"])
            .arg(out)
            .env_remove_history();
        if let Some(h) = history {
            cmd = cmd.args(["--history", h]);
        }
        let mut child = cmd.spawn();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .strip_prefix("serving http://")
            .and_then(|l| l.split('/').next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        Server { child, addr }
    }

    /// (status, body) of `GET target`.
    fn get(&self, target: &str) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        write!(
            s,
            "GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let text = String::from_utf8_lossy(&raw).into_owned();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (status, body)
    }

    fn ok(&self, target: &str) -> String {
        let (status, body) = self.get(target);
        assert_eq!(status, 200, "{target}: {body}");
        body
    }

    fn json(&self, target: &str) -> Value {
        let body = self.ok(target);
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{target}: {e}: {body}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

trait NoHistoryEnv {
    fn env_remove_history(self) -> Self;
}

impl NoHistoryEnv for Rocmatrix {
    /// The server's history is the one the test gives, never the caller's.
    fn env_remove_history(self) -> Self {
        self.env("ROCMATRIX_HISTORY", "")
    }
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `history ARGS --json` on `history` (a URL, or the SQLite file under `out`).
fn cli_json(out: &Path, history: Option<&str>, args: &[&str]) -> Value {
    let mut cmd = Rocmatrix::new()
        .args(["history", "--json", "--out"])
        .arg(out);
    cmd = cmd.env("ROCMATRIX_HISTORY", history.unwrap_or(""));
    let o = cmd.args(args).run();
    o.assert_success();
    serde_json::from_str(&o.stdout()).unwrap()
}

/// Every page and its JSON answer, and their words are the CLI's.
fn pages_hold_the_clis_words(server: &Server, out: &Path, history: Option<&str>) {
    let home = server.json("/api");
    let m = &home["matrices"][0];
    assert_eq!(
        (m["name"].as_str(), m["runs"].as_u64()),
        (Some(MATRIX), Some(4)),
        "{home:#}"
    );
    assert_eq!(m["verdict"], "failed");
    assert!(server.ok("/").contains(MATRIX));

    // The matrix: the failing tests of the last run in the report's words.
    let matrix = server.json(&format!("/api/matrix?name={MATRIX}"));
    let failing = matrix["failing"].as_array().unwrap();
    let words = |test: &str| -> String {
        failing
            .iter()
            .find(|t| t["test"] == test && t["cell"] == "sm_90")
            .unwrap_or_else(|| panic!("{test} not failing: {matrix:#}"))["words"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // The test: its verdict per cell as `history show` says it.
    for test in ["Gpu.Adds", "Gpu.FailsOnGpuResult", "Gpu.SeesOneDevice"] {
        let shown = cli_json(out, history, &["show", test]);
        let page = server.json(&format!("/api/test?name={}", enc(test)));
        for row in shown.as_array().unwrap() {
            let cell = page["cells"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["cell"] == row["cell"] && c["matrix"] == row["matrix"])
                .unwrap_or_else(|| panic!("{test} in {}: {page:#}", row["cell"]));
            assert_eq!(cell["verdict"], row["verdict"], "{test}");
            let marks: Vec<&Value> = row["runs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| &r["mark"])
                .collect();
            let strip: Vec<&Value> = cell["strip"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| &r["mark"])
                .collect();
            assert_eq!(strip, marks, "{test}");
        }
        let html = server.ok(&format!("/test?name={}", enc(test)));
        let verdict = shown[0]["verdict"].as_str().unwrap();
        assert!(html.contains(verdict), "{test}: {verdict}: {html}");
    }
    let since = |k: usize| format!("{} (2026-11-23T11:1{k}:20Z)", id(k));
    assert!(words("Gpu.Adds").starts_with(&format!("failing since {}", since(3))));
    assert!(words("Gpu.FailsOnGpuResult").starts_with(&format!("known since {}", since(1))));
    let shown = cli_json(out, history, &["show", "Gpu.Adds"]);
    assert_eq!(shown[0]["verdict"], format!("failing since {}", since(3)));
    let html = server.ok(&format!("/matrix?name={MATRIX}"));
    assert!(
        html.contains(&format!("failing since {}", since(3))),
        "{html}"
    );
    assert!(html.contains("<svg"), "the plot");
    // The last run's counts: 11 googletest cases in sm_90, 5 failing.
    let last = &matrix["per_run"][3];
    assert_eq!(
        (last["passed"].as_u64(), last["failed"].as_u64()),
        (Some(6), Some(5)),
        "{last:#}"
    );

    // The flaky tests: `history flaky`'s, with where.
    let flaky_cli = cli_json(out, history, &["flaky"]);
    let flaky = server.json("/api/flaky");
    let key = |v: &Value| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["test"].clone(),
                    t["cell"].clone(),
                    t["failures"].clone(),
                    t["runs"].clone(),
                    t["where"].clone(),
                    t["where_host"].clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    let mut a = key(&flaky_cli);
    let mut b = key(&flaky["tests"]);
    a.sort_by_key(|k| format!("{k:?}"));
    b.sort_by_key(|k| format!("{k:?}"));
    assert_eq!(a, b);
    assert!(
        a.iter().any(|k| k.0 == "Gpu.SeesOneDevice"),
        "{flaky_cli:#}"
    );
    assert!(server.ok("/flaky").contains("Gpu.SeesOneDevice"));

    // The runs, newest first, each with a link to its own report.
    let runs = server.json("/api/runs");
    assert_eq!(runs["runs"][0]["run"], id(4));
    let report = runs["runs"][0]["report"].as_str().unwrap().to_string();
    assert!(server.ok(&report).contains("<html"), "{report}");
    assert!(server.ok("/runs").contains(&id(1)));
    let hosts = server.json("/api/hosts");
    assert!(hosts["hosts"].is_array(), "{hosts:#}");
    server.ok("/hosts");
    // A test page has the commands to reproduce it.
    let page = server.json("/api/test?name=Gpu.Adds");
    let repro = page["cells"][0]["repro"].as_array().unwrap();
    assert!(
        repro[0]
            .as_str()
            .unwrap()
            .starts_with(&format!("rocmatrix repro {} sm_90", id(4))),
        "{page:#}"
    );
}

#[test]
fn serve_pages_over_sqlite_hold_the_clis_words() {
    let root = tempfile::tempdir().unwrap();
    let runs = four_runs(root.path());
    // A triage of the run Gpu.Adds broke in, with its range.
    let db = rusqlite::Connection::open(root.path().join("history.sqlite")).unwrap();
    let sig: String = db
        .query_row(
            "SELECT signature FROM tests WHERE test = 'Gpu.Adds' AND run = ?1",
            [id(3)],
            |r| r.get(0),
        )
        .unwrap();
    assert!(!sig.is_empty());
    let line = "started between rocm 6.4.1 and 6.4.2 (2 commits: abc1234..def5678)";
    let triage = serde_json::json!({
        "triage_version": 1, "rocmatrix_version": "0.1.0", "run": id(3),
        "items": [{"change": "new", "signature": {"id": sig, "text": "wrong sum", "message": "wrong sum"},
                   "cell": "sm_90", "searches": [], "state": "found", "line": line}],
        "started": "2026-11-23T11:14:00Z"
    });
    std::fs::write(runs[2].join("triage.json"), triage.to_string()).unwrap();
    let server = Server::start(root.path(), None);
    pages_hold_the_clis_words(&server, root.path(), None);
    let matrix = server.json(&format!("/api/matrix?name={MATRIX}"));
    let adds = matrix["failing"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["test"] == "Gpu.Adds")
        .unwrap();
    assert_eq!(adds["triage"], line, "{matrix:#}");
    assert!(server
        .ok(&format!("/matrix?name={MATRIX}"))
        .contains("triage: started between rocm 6.4.1"));
    // A run recorded after the server started is there without a restart.
    let run5 = root
        .path()
        .join("runs")
        .join(id(4))
        .with_file_name("20261123-111125-c735");
    copy_dir(&root.path().join("runs").join(id(4)), &run5);
    for file in ["run.json", "plan.json"] {
        let mut doc = read_json(&run5.join(file));
        doc["run_id"] = "20261123-111125-c735".into();
        if file == "run.json" {
            doc["started"] = "2026-11-23T11:15:20.188Z".into();
        }
        std::fs::write(run5.join(file), doc.to_string()).unwrap();
    }
    Rocmatrix::new().arg("report").arg(&run5).run();
    assert_eq!(server.json("/api")["matrices"][0]["runs"], 5);
}

#[test]
fn serve_pages_over_postgresql_hold_the_clis_words_and_never_show_the_password() {
    let test = "serve_pages_over_postgresql_hold_the_clis_words_and_never_show_the_password";
    let root = tempfile::tempdir().unwrap();
    let runs = four_runs(root.path());
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    pg.create_db("served");
    let url = pg.url("served");
    let o = Rocmatrix::new()
        .args(["history", "import"])
        .args(&runs)
        .env("ROCMATRIX_HISTORY", &url)
        .run();
    o.assert_success();
    let server = Server::start(root.path(), Some(&url));
    pages_hold_the_clis_words(&server, root.path(), Some(&url));
    for page in ["/", "/runs", "/flaky", "/hosts", "/api", "/api/runs"] {
        let (_, body) = server.get(page);
        assert!(!body.contains(PASSWORD), "{page}: {body}");
    }
    assert!(server.ok("/").contains("postgres:***@127.0.0.1"));
    let home = server.json("/api");
    assert!(
        home["history"]
            .as_str()
            .unwrap()
            .starts_with("postgres://postgres:***@127.0.0.1"),
        "{home:#}"
    );
}

#[test]
fn serve_hostile_test_names_show_as_text() {
    let root = tempfile::tempdir().unwrap();
    four_runs(root.path());
    let server = Server::start(root.path(), None);
    let name = format!("Gpu.{XSS}");
    for page in [
        format!("/matrix?name={MATRIX}"),
        format!("/test?name={}", enc(&name)),
    ] {
        let html = server.ok(&page);
        assert!(
            html.contains("Gpu.&lt;img src=x onerror=alert(1)&gt;"),
            "{page}: {html}"
        );
        assert!(!html.contains(XSS), "{page}: {html}");
    }
    // The JSON keeps the name as it is.
    let v = server.json(&format!("/api/test?name={}", enc(&name)));
    assert_eq!(v["name"], name);
}

#[test]
fn serve_hostile_paths_never_leave_the_run_stores() {
    let root = tempfile::tempdir().unwrap();
    let runs = four_runs(root.path());
    let secret = root.path().join("secret.txt");
    std::fs::write(&secret, "not to be served").unwrap();
    std::os::unix::fs::symlink(&secret, runs[0].join("link.txt")).unwrap();
    std::os::unix::fs::symlink(root.path(), runs[0].join("up")).unwrap();
    let server = Server::start(root.path(), None);
    let run = id(1);
    assert!(server
        .ok(&format!("/store/{run}/report/index.html"))
        .contains("<html"));
    for bad in [
        "/store/../secret.txt".to_string(),
        "/store/%2e%2e/secret.txt".into(),
        "/store/%2E%2E%2Fsecret.txt".into(),
        format!("/store/{run}/%2e%2e/%2e%2e/secret.txt"),
        format!("/store/{run}/../../history.sqlite"),
        "/store//etc/passwd".into(),
        "/store/%2fetc%2fpasswd".into(),
        format!("/store/{run}/link.txt"),
        format!("/store/{run}/up/secret.txt"),
        format!("/store/{run}"),
    ] {
        let (status, body) = server.get(&bad);
        assert_eq!(status, 404, "{bad}: {body}");
        assert!(!body.contains("not to be served"), "{bad}");
    }
}

#[test]
fn serve_hostile_counts_are_clamped() {
    let root = tempfile::tempdir().unwrap();
    four_runs(root.path());
    let server = Server::start(root.path(), None);
    let v = server.json(&format!("/api/matrix?name={MATRIX}&n=10000000"));
    assert_eq!(v["n"], 100);
    assert_eq!(v["shown"], 4);
    let v = server.json("/api/runs?n=1");
    assert_eq!(v["runs"].as_array().unwrap().len(), 1);
    let v = server.json("/api/runs?n=-5");
    assert_eq!(v["n"], 20);
    let (status, _) = server.get(&format!("/test?name={}", "x".repeat(20_000)));
    assert_eq!(status, 414);
}

#[test]
fn serve_a_corrupt_or_unreachable_history_is_a_page_and_the_rest_still_answers() {
    let root = tempfile::tempdir().unwrap();
    let runs = root.path().join("runs/r1/report");
    std::fs::create_dir_all(&runs).unwrap();
    std::fs::write(root.path().join("runs/r1/plan.json"), "{}").unwrap();
    std::fs::write(runs.join("index.html"), "<html>kept</html>").unwrap();
    std::fs::write(
        root.path().join("history.sqlite"),
        b"not a database, not at all, really not",
    )
    .unwrap();
    let server = Server::start(root.path(), None);
    for page in ["/", "/matrix?name=x", "/flaky", "/runs", "/hosts"] {
        let (status, body) = server.get(page);
        assert_eq!(status, 503, "{page}: {body}");
        assert!(
            body.contains("the history cannot be read"),
            "{page}: {body}"
        );
    }
    let (status, body) = server.get("/api/runs");
    assert_eq!(status, 503);
    assert!(body.contains("history.sqlite"), "{body}");
    assert!(server.ok("/store/r1/report/index.html").contains("kept"));
    assert!(server.ok("/style.css").contains("body"));
    drop(server);

    // An unreachable PostgreSQL server, with a password in its URL.
    let url = "postgres://ci:hunter2-pw@127.0.0.1:1/rocm?connect_timeout=2";
    let server = Server::start(root.path(), Some(url));
    let (status, body) = server.get("/");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("ci:***@127.0.0.1:1"), "{body}");
    assert!(!body.contains("hunter2"), "{body}");
    let (_, body) = server.get("/api/runs");
    assert!(
        body.contains("postgres://ci:***@127.0.0.1:1/rocm"),
        "{body}"
    );
    assert!(!body.contains("hunter2"), "{body}");
    assert!(server.ok("/store/r1/report/index.html").contains("kept"));
    let (status, body) = server.get("/api/nothing");
    assert_eq!(status, 404);
    assert!(body.starts_with('{'), "{body}");
    // Nothing but GET and HEAD.
    let mut s = TcpStream::connect(&server.addr).unwrap();
    write!(
        s,
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    assert!(raw.starts_with("HTTP/1.1 405"), "{raw}");
}

#[test]
fn serve_listens_on_loopback_by_default() {
    let o = Rocmatrix::new().args(["serve", "--help"]).run();
    assert!(o.stdout().contains("127.0.0.1:8080"), "{}", o.context());
}

/// An address another process holds is the machine's state (exit 3); an
/// address this host does not have is the command line's (exit 2). Either
/// way `serve` says which address and stops.
#[test]
fn serve_an_address_in_use_or_not_here_is_said_with_its_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    for (listen, code) in [(addr.as_str(), 3), ("192.0.2.1:8080", 2)] {
        let o = Rocmatrix::new()
            .args(["serve", "--listen", listen])
            .out(dir.path())
            .run();
        assert_eq!(o.code(), code, "{listen}: {}", o.context());
        let says = format!("cannot listen on {listen}");
        assert!(o.stderr().contains(&says), "{}", o.context());
    }
}

/// Headless Chromium loads the matrix page and a test page: the hostile
/// name is text in the DOM it built, and each page makes a screenshot
/// (written to `$SERVE_SCREENSHOTS` when set: docs/serve.md's).
#[test]
fn serve_pages_load_in_headless_chromium() {
    let test = "serve_pages_load_in_headless_chromium";
    let chromium = Path::new("/usr/bin/chromium");
    if !chromium.is_file() {
        unavailable(
            test,
            "no /usr/bin/chromium (.ci/install-reports.sh installs it)",
        );
        return;
    }
    let root = tempfile::tempdir().unwrap();
    four_runs(root.path());
    let server = Server::start(root.path(), None);
    let shots = std::env::var_os("SERVE_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.path().join("shots"));
    std::fs::create_dir_all(&shots).unwrap();
    let profile = root.path().join("profile");
    let chrome = |args: &[String]| {
        std::process::Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(args)
            .output()
            .unwrap()
    };
    let base = format!("http://{}", server.addr);
    let pages = [
        (
            "serve-matrix.png",
            1400,
            format!("{base}/matrix?name={MATRIX}"),
        ),
        (
            "serve-test.png",
            500,
            format!("{base}/test?name={}", enc("Gpu.SeesOneDevice")),
        ),
    ];
    for (png, height, url) in &pages {
        let path = shots.join(png);
        let o = chrome(&[
            format!("--screenshot={}", path.display()),
            format!("--window-size=1280,{height}"),
            url.clone(),
        ]);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        assert!(
            size > 10_000,
            "{png}: {size} bytes: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = chrome(&["--dump-dom".into(), format!("{base}/matrix?name={MATRIX}")]);
    let dom = String::from_utf8_lossy(&o.stdout);
    assert!(
        dom.contains("Gpu.&lt;img src=x onerror=alert(1)&gt;"),
        "{dom}"
    );
    assert!(!dom.contains("<img"), "{dom}");
}
