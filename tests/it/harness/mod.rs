//! The integration tests' one harness.
//!
//! * [`Rocmatrix`]: a builder for `rocmatrix` invocations; every one carries
//!   this test run's label (`ROCMATRIX_LABEL`), so whatever it makes in the
//!   engine can be found and removed afterwards.
//! * [`engine_or_skip`] / [`engine_exclusive_or_skip`], [`have`], [`have_file`]:
//!   the one skip gate ([`unavailable`]): a missing engine or tool skips the
//!   test with a visible message, or fails it under `ROCMATRIX_REQUIRE_DOCKER=1`.
//! * [`bases`]: the one place that knows the shared Debian base images;
//!   `bases::ensure("sid")` uses the engine's or bootstraps it, once per process.
//! * [`label`]: the per-test-run label and the sweep of what dead test runs left.
//! * [`podman`]: a Podman API service of the test's own, beside Docker.
//! * [`private_engine`]: a Docker engine of the test's own (data root, exec
//!   root, socket, pidfile, bridge), to freeze and kill.
//! * [`postgres`]: a PostgreSQL server of the test's own (the shared history).
//! * [`slurm`]: a one-node Slurm cluster of the test's own (munged, slurmctld, slurmd).
//! * [`store`]: run stores (reading real ones, crafting fake ones) and JUnit helpers.

#![allow(dead_code)]

pub mod bases;
mod cmd;
pub mod docker;
mod gate;
pub mod label;
pub mod podman;
pub mod postgres;
pub mod private_engine;
pub mod registry;
pub mod slurm;
mod store;

pub use cmd::{run_into, Ran, Rocmatrix};
pub use docker::{containers_of, RemoveOnDrop};
pub use gate::{engine_exclusive_or_skip, engine_or_skip, have, have_file, unavailable, EngineUse};
pub use store::*;

use std::process::Output;

/// Stand-in device nodes under `dev` (character devices numbered like
/// /dev/null, made with mknod: root only), e.g. `kfd`, `dri/renderD128`.
/// Whether all of them were made.
pub fn stand_in_nodes(dev: &std::path::Path, names: &[&str]) -> bool {
    names.iter().all(|n| {
        let node = dev.join(n);
        node.parent()
            .is_some_and(|d| std::fs::create_dir_all(d).is_ok())
            && std::process::Command::new("mknod")
                .arg(&node)
                .args(["c", "1", "3"])
                .status()
                .is_ok_and(|s| s.success())
    })
}

/// The standard output of any finished command, as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The standard error of any finished command, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `git ARGS` in `dir` as a test's author (user `t`, branch `main` for a
/// new repository); its standard output, trimmed. A failing git fails the test.
pub fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let o = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
        .args(["-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {}", stderr(&o));
    stdout(&o).trim().to_string()
}
