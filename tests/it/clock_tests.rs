//! Clocks on what a run waits for (issue 34, item 7): an image build that
//! prints nothing for `ROCMATRIX_BUILD_STALL` seconds is cut as stalled,
//! while the engine still answers (a build hung on a mirror).

use std::time::{Duration, Instant};

use crate::harness::docker::tag_for_run;
use crate::harness::*;

/// How long the hanging setup sleeps: only a cut ends the build before it.
const SETUP_SLEEP: u64 = 3600;

#[test]
fn an_image_build_that_prints_nothing_is_cut_by_its_stall_timer() {
    let Some(_engine) =
        engine_or_skip("an_image_build_that_prints_nothing_is_cut_by_its_stall_timer")
    else {
        return;
    };
    bases::ensure("sid");
    let dir = tempfile::tempdir().unwrap();
    // The setup hangs (as `apt-get` on a mirror that stopped sending)
    // while the engine answers every ping of the watchdog.
    let m = write(
        dir.path(),
        "m.yaml",
        &format!(
            "name: stall\nmatrix:\n  x: [a]\nenvironment:\n  base: debian:sid\n  suite: sid\n  \
             setup: 'sleep {SETUP_SLEEP}'\n  env:\n    STALL_NONCE: \"{}\"\nretries: 0\nsteps:\n  - name: t\n    run: 'true'\n",
            tag_for_run("stall")
        ),
    );
    let t0 = Instant::now();
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .env("ROCMATRIX_BUILD_STALL", "5")
        .out(dir.path().join("out"))
        .run();
    let took = t0.elapsed();
    o.assert_code(3);
    assert!(
        o.text()
            .contains("no output for 5 s: the build stalled and was cut"),
        "{}",
        o.context()
    );
    // Cut by the stall timer, not ended by the setup's sleep: a run that
    // outlived the sleep was not cut (a logical bound, not a speed target).
    assert!(
        took < Duration::from_secs(SETUP_SLEEP),
        "{took:?}: {}",
        o.context()
    );
    let store = o.run_store();
    let log = std::fs::read_dir(store.join("images"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.ends_with(".log") && !name.starts_with("base-") && !name.starts_with("package-")
        })
        .expect("the environment's build log");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("the build stalled"),
        "{}: {text}",
        log.display()
    );
}
