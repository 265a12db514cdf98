//! The one place that knows the Debian base images the engine tests share.
//!
//! `ensure("sid")` returns `debian:sid` once the engine has it: an image that
//! is there is used as it is (and never removed by the tests); one that is
//! not is bootstrapped through rocmatrix itself (debootstrap from Debian's
//! mirror, 1–3 minutes), once per test process while other tests asking for
//! it wait. What the harness bootstrapped carries the test-run label, so the
//! cleanup after the tests removes it again.

use std::sync::Mutex;

use super::{docker, label, Rocmatrix};

/// The suites the tests use.
pub const SUITES: [&str; 3] = ["bookworm", "trixie", "sid"];

/// How the engine came to have a base image in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// It was there before: not ours, never removed.
    Present,
    /// The harness bootstrapped it, labelled with this test run.
    Bootstrapped,
}

/// What this process knows of each of [`SUITES`]; a test bootstrapping one
/// holds its slot, and the others asking for it wait there.
static SLOTS: [Mutex<Option<Origin>>; SUITES.len()] = [const { Mutex::new(None) }; SUITES.len()];

fn slot(suite: &str) -> &'static Mutex<Option<Origin>> {
    let i = SUITES
        .iter()
        .position(|s| *s == suite)
        .unwrap_or_else(|| panic!("bases: {suite} is not one of {SUITES:?}"));
    &SLOTS[i]
}

/// `debian:<suite>`, present in the engine. The caller holds the engine
/// ([`super::engine_or_skip`]). Panics (with rocmatrix's output) when the
/// bootstrap fails.
#[track_caller]
pub fn ensure(suite: &str) -> String {
    let slot = slot(suite);
    let reference = format!("debian:{suite}");
    label::sweep_dead_runs();
    let mut origin = slot.lock().unwrap_or_else(|p| p.into_inner());
    if origin.is_some() && docker::image_exists(&reference) {
        return reference;
    }
    if docker::image_exists(&reference) {
        *origin = Some(Origin::Present);
        return reference;
    }
    *origin = Some(bootstrap(suite, &reference));
    reference
}

/// How this process got `debian:<suite>`, if it asked for it.
pub fn origin(suite: &str) -> Option<Origin> {
    *slot(suite).lock().unwrap_or_else(|p| p.into_inner())
}

fn bootstrap(suite: &str, reference: &str) -> Origin {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "{reference} is not in the engine: bootstrapping it through rocmatrix (labelled {})",
        label::label()
    );
    let dir = tempfile::tempdir().unwrap();
    let m = super::write(
        dir.path(),
        "base.yaml",
        &format!(
            "name: base-{suite}\nmatrix:\n  x: [a]\nenvironment:\n  base: {reference}\n  suite: {suite}\nsteps:\n  - name: s\n    run: 'true'\n"
        ),
    );
    let ran = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(dir.path())
        .run();
    assert!(
        ran.status.success(),
        "bootstrapping {reference}: {}",
        ran.context()
    );
    let labels = docker::image_labels(reference)
        .unwrap_or_else(|| panic!("{reference} is still missing after: {}", ran.context()));
    if labels.get(label::KEY).map(String::as_str) == Some(label::value()) {
        return Origin::Bootstrapped;
    }
    // Another process may have made it meanwhile; if this one imported it,
    // rocmatrix did not label it.
    assert!(
        !ran.text()
            .contains(&format!("base image {reference}: bootstrapped")),
        "rocmatrix imported {reference} without the test-run label of ROCMATRIX_LABEL \
         ({labels:?}): {}",
        ran.context()
    );
    Origin::Present
}
