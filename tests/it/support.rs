//! Helpers shared by the integration tests: running the binary, and the
//! Docker engine gate (skip with a message, or fail when
//! `ROCMATRIX_REQUIRE_DOCKER=1`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rocmatrix"))
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Whether the Docker engine is there. Without it the test is skipped with a
/// visible message, unless CI demands the engine.
pub fn docker_available(test: &str) -> bool {
    let ok = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var("ROCMATRIX_REQUIRE_DOCKER").as_deref() == Ok("1") {
            panic!("{test}: the Docker engine is required (ROCMATRIX_REQUIRE_DOCKER=1) but `docker info` fails");
        }
        eprintln!("SKIPPED {test}: no Docker engine (set ROCMATRIX_REQUIRE_DOCKER=1 to make this a failure)");
    }
    ok
}

/// The base image the engine tests share. When the engine lacks it, the
/// first test to ask bootstraps it through rocmatrix itself; the others wait.
pub const BASE: &str = "debian:bookworm";

static BASE_LOCK: Mutex<()> = Mutex::new(());

pub fn ensure_base() {
    let _guard = BASE_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let present = Command::new("docker")
        .args(["image", "inspect", BASE])
        .output()
        .is_ok_and(|o| o.status.success());
    if present {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let m = write(
        dir.path(),
        "base.yaml",
        &format!("matrix:\n  x: [a]\nenvironment:\n  base: {BASE}\nsteps:\n  - name: s\n    run: 'true'\n"),
    );
    let o = bin()
        .args(["run", m.to_str().unwrap(), "--progress", "plain", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "bootstrapping {BASE}: {}", stderr(&o));
}

/// Containers of run `run_id`, running or not.
pub fn containers_of(run_id: &str) -> Vec<String> {
    let o = Command::new("docker")
        .args([
            "ps",
            "-a",
            "-q",
            "--filter",
            &format!("label=rocmatrix.run={run_id}"),
        ])
        .output()
        .unwrap();
    stdout(&o).lines().map(str::to_string).collect()
}

/// The only run directory under `out`.
pub fn run_dir(out: &Path) -> PathBuf {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(out.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    runs.sort();
    runs.pop().expect("a run directory")
}

pub fn cell_json(run: &Path, cell: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(run.join("cells").join(cell).join("cell.json"))
        .unwrap_or_else(|e| panic!("cell {cell}: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// Engine tests hold this for reading; a test that prunes images holds it
/// for writing, so it never removes an image another test is using.
pub static ENGINE: std::sync::RwLock<()> = std::sync::RwLock::new(());

pub fn engine_shared() -> std::sync::RwLockReadGuard<'static, ()> {
    ENGINE.read().unwrap_or_else(|p| p.into_inner())
}

pub fn engine_exclusive() -> std::sync::RwLockWriteGuard<'static, ()> {
    ENGINE.write().unwrap_or_else(|p| p.into_inner())
}
