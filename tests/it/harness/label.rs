//! The per-test-run label. One value per `cargo test` process —
//! `<hostname>-<pid>-<unix time>`, or the value `scripts/test` made and
//! passed in `ROCMATRIX_TEST_RUN` (then the pid is the script's), so that the
//! script's final cleanup and the tests agree on it.
//!
//! Every `rocmatrix` invocation gets `rocmatrix.test-run=<value>` through
//! `ROCMATRIX_LABEL`; containers and images the tests make with the docker CLI
//! get it with `--label`. Things a test makes to stand for a *user's* (which
//! must not carry the test-run label) carry `rocmatrix.test-fixture=<value>`
//! instead, which the cleanup removes too.

use std::path::Path;
use std::process::Command;
use std::sync::{Once, OnceLock};

/// The label key that marks what a test run made.
pub const KEY: &str = "rocmatrix.test-run";
/// The label key of things made to stand for a user's (see the module docs).
pub const FIXTURE_KEY: &str = "rocmatrix.test-fixture";
/// The variable `scripts/test` passes the value in.
pub const ENV: &str = "ROCMATRIX_TEST_RUN";

/// This test run's label value.
pub fn value() -> &'static str {
    static VALUE: OnceLock<String> = OnceLock::new();
    VALUE.get_or_init(|| match std::env::var(ENV) {
        Ok(v) if valid(&v) => v,
        Ok(v) => panic!("{ENV}={v:?}: want <hostname>-<pid>-<time>, without `,`, `=` or spaces"),
        Err(_) => {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            format!("{}-{}-{secs}", hostname(), std::process::id())
        }
    })
}

/// `rocmatrix.test-run=<value>`: for `ROCMATRIX_LABEL`, `--label` and `--filter label=`.
pub fn label() -> String {
    format!("{KEY}={}", value())
}

/// `rocmatrix.test-fixture=<value>`.
pub fn fixture_label() -> String {
    format!("{FIXTURE_KEY}={}", value())
}

fn valid(v: &str) -> bool {
    !v.is_empty() && !v.contains([',', '=', ' ', '\t', '\n'])
}

/// This host's name, as `sweep.sh` reads it.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The script that removes what test runs made (shared with `scripts/test`).
pub fn sweep_script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/data/sweep.sh")
}

/// Once per process, before the first test touches the engine: removes the
/// containers, images, volumes and networks of earlier test runs on this host
/// whose process is gone. Never fails a test: it reports and goes on.
pub fn sweep_dead_runs() {
    static SWEEP: Once = Once::new();
    SWEEP.call_once(|| {
        let o = Command::new("bash")
            .arg(sweep_script())
            .args(["--dead", "--keep", value()])
            .output();
        let mut err = std::io::stderr();
        use std::io::Write;
        match o {
            Ok(o) => {
                // Straight to fd 2: libtest hides what passing tests print.
                let _ = err.write_all(&o.stderr);
                if !o.status.success() {
                    let _ = writeln!(err, "sweep.sh --dead: {}", o.status);
                }
            }
            Err(e) => {
                let _ = writeln!(err, "cannot run sweep.sh: {e}");
            }
        }
    });
}
