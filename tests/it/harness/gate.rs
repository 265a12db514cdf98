//! The one skip gate. A test that needs something this machine may lack (the
//! Docker engine, a tool, a header) asks here; without it the test is
//! skipped with a visible `SKIPPED` line, or fails when the environment
//! demands everything (`ROCMATRIX_REQUIRE_DOCKER=1`, as CI sets).

use std::path::Path;
use std::process::Command;
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Whether CI demands every tool and the engine (`ROCMATRIX_REQUIRE_DOCKER=1`).
pub fn required() -> bool {
    std::env::var("ROCMATRIX_REQUIRE_DOCKER").is_ok_and(|v| v == "1")
}

/// Tells the person running the tests something. Written to the stderr
/// handle directly: libtest hides `eprintln!` of passing tests.
pub fn skip_notice(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {msg}");
}

/// The gate itself: `test` cannot run because `why`. Returns `true` (the
/// caller returns early) after a `SKIPPED` line, or panics when required.
#[track_caller]
pub fn unavailable(test: &str, why: &str) -> bool {
    if required() {
        panic!("{test}: {why}; ROCMATRIX_REQUIRE_DOCKER=1 requires it");
    }
    skip_notice(&format!("{test}: {why}"));
    true
}

/// Whether `program args…` runs and exits 0; else skips (or fails) `test`.
#[track_caller]
pub fn have(program: &str, args: &[&str], test: &str) -> bool {
    let ok = Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    ok || !unavailable(
        test,
        &format!("`{program}` is not available (run .ci/install-reports.sh to install it)"),
    )
}

/// Whether a file exists (a header, a library); else skips (or fails) `test`.
#[track_caller]
pub fn have_file(path: &str, what: &str, test: &str) -> bool {
    Path::new(path).exists()
        || !unavailable(
            test,
            &format!("{what} ({path}) is not installed (run .ci/install-reports.sh)"),
        )
}

/// Engine tests hold it for reading; a test that prunes images holds it for
/// writing, so it never removes an image another test of this process uses.
static ENGINE: RwLock<()> = RwLock::new(());

/// A test's hold on the engine: drop it when the test is done with it.
#[must_use = "the test must hold the engine while it uses it"]
pub enum EngineUse {
    Shared(RwLockReadGuard<'static, ()>),
    Exclusive(RwLockWriteGuard<'static, ()>),
}

fn engine_reachable() -> Result<(), String> {
    static REACHABLE: OnceLock<Result<(), String>> = OnceLock::new();
    REACHABLE
        .get_or_init(|| {
            match Command::new("docker")
                .args(["info", "--format", "{{.ServerVersion}}"])
                .output()
            {
                Ok(o) if o.status.success() => {
                    super::label::sweep_dead_runs();
                    Ok(())
                }
                Ok(_) => Err("no Docker engine (`docker info` fails)".into()),
                Err(e) => Err(format!("no Docker engine (cannot run docker: {e})")),
            }
        })
        .clone()
}

/// The engine for a test that shares it with the others, or `None` (after
/// the gate said so) when there is none. The first call sweeps what dead
/// test runs left.
#[track_caller]
pub fn engine_or_skip(test: &str) -> Option<EngineUse> {
    match engine_reachable() {
        Ok(()) => Some(EngineUse::Shared(
            ENGINE.read().unwrap_or_else(|p| p.into_inner()),
        )),
        Err(why) => {
            unavailable(test, &why);
            None
        }
    }
}

/// The engine for a test that removes images (prune): no other engine test
/// of this process runs meanwhile.
#[track_caller]
pub fn engine_exclusive_or_skip(test: &str) -> Option<EngineUse> {
    match engine_reachable() {
        Ok(()) => Some(EngineUse::Exclusive(
            ENGINE.write().unwrap_or_else(|p| p.into_inner()),
        )),
        Err(why) => {
            unavailable(test, &why);
            None
        }
    }
}
