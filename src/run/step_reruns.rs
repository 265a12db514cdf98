//! `rerun_failures:` of a `run:` step with `junit:`: while the step's JUnit
//! has failing tests, the step runs again (up to N times, each run with the
//! step's own timeout) and each attempt's JUnit is folded into the first's
//! as Surefire tells reruns (`crate::test_suite::rerun`): a test that passes on a
//! later attempt is flaky, one that fails every time keeps its last failure
//! with the earlier ones as `<rerunFailure>`s.
//!
//! Attempt 1's files stay where any step's go (`junit/NN-step/`), the later
//! attempts' beside them (`junit/NN-step.rerun-K/`), and the step's results
//! are the one file that folds them (`junit/NN-step/reruns.xml`), holding
//! attempt 1's tests. Only attempt 1's failing tests are followed: a test
//! that passed first and failed on a rerun counts as the pass it was. Before
//! each rerun the files attempt 1 left are removed in the container (files
//! the globs match, and the `.xml` files of directories they match), so a
//! rerun that writes no JUnit is seen as one, not as the last attempt again.

use std::path::Path;

use crate::step::junit::{collect_junit, MAX_JUNIT_ARCHIVE};
use crate::step::log::StepLog;
use crate::step::protocol::step_slug;
use crate::step::{blocking, CellEnv, CellError, StepAt};
use crate::store::record::RunStatus;
use crate::test_suite::{gtest_output, junit_out, rerun, Case};

/// How the step ended after its reruns, and its JUnit files and messages.
pub(super) struct Reran {
    pub judged: (RunStatus, Option<i64>, Option<String>),
    pub files: Vec<String>,
    pub messages: Vec<String>,
}

/// Collects the JUnit of the step's first run (`first`: how it ended) and
/// runs it again while tests fail.
pub(super) async fn run_again_while_failing(
    cx: &CellEnv<'_>,
    at: &StepAt<'_>,
    log: &mut StepLog,
    first: (RunStatus, Option<i64>, Option<String>),
    ooms_seen: &mut u64,
) -> Result<Reran, CellError> {
    let step = at.step;
    let slug = step_slug(at.index, &step.name);
    let junit_root = at.cell_dir.join("junit");
    let (files, mut messages) = collect_junit(
        cx.engine,
        at.container,
        &step.junit,
        &junit_root.join(&slug),
        at.cell_dir,
    )
    .await?;
    let mut judged = first;
    let mut cases = match read_cases(at.cell_dir, &files).await? {
        Some(cases) => cases,
        None => {
            return Ok(Reran {
                judged,
                files,
                messages,
            })
        }
    };
    let mut failing = cases.iter().filter(|c| c.verdict.is_failure()).count();
    let mut folded = 0;
    for attempt in 1..=step.rerun_failures {
        if failing == 0 {
            break;
        }
        log.note(&format!(
            "\nrocmatrix: rerun_failures: {}; running the step again ({attempt} of {})\n",
            super::progress::count(failing, "failing test"),
            step.rerun_failures
        ));
        clear_junit(cx, at).await?;
        judged = super::steps::exec_script(cx, at, log, ooms_seen).await?;
        if judged.0 == RunStatus::Timeout {
            break;
        }
        let dest = junit_root.join(format!("{slug}.rerun-{attempt}"));
        let (again, msgs) =
            collect_junit(cx.engine, at.container, &step.junit, &dest, at.cell_dir).await?;
        messages.extend(msgs);
        let Some(again) = read_cases(at.cell_dir, &again).await? else {
            log.note("rocmatrix: rerun_failures: the rerun left no readable JUnit; the earlier failures stand\n");
            break;
        };
        failing = rerun::fold_attempt(&mut cases, again);
        folded += 1;
    }
    if folded == 0 {
        return Ok(Reran {
            judged,
            files,
            messages,
        });
    }
    let merged = junit_root.join(&slug).join("reruns.xml");
    let (name, path) = (step.name.clone(), merged.clone());
    blocking("writing the reruns' JUnit", move || {
        junit_out::write(&path, &name, &cases).map_err(|e| CellError::io(&path, e))
    })
    .await??;
    let rel = merged
        .strip_prefix(at.cell_dir)
        .unwrap_or(&merged)
        .to_string_lossy()
        .into_owned();
    Ok(Reran {
        judged,
        files: vec![rel],
        messages,
    })
}

/// The tests in `files` (relative to `cell_dir`); `None` when there are
/// none or one file is not JUnit a rerun can be told from.
async fn read_cases(cell_dir: &Path, files: &[String]) -> Result<Option<Vec<Case>>, CellError> {
    let paths: Vec<_> = files.iter().map(|f| cell_dir.join(f)).collect();
    blocking("reading a step's JUnit", move || {
        let mut cases = Vec::new();
        for path in &paths {
            let bytes = crate::safe_read::read_bounded(path, MAX_JUNIT_ARCHIVE, "JUnit files", "");
            let Ok(bytes) = bytes else {
                return None;
            };
            cases.extend(gtest_output::parse_xml(&String::from_utf8_lossy(&bytes))?);
        }
        (!cases.is_empty()).then_some(cases)
    })
    .await
}

/// Removes what attempt 1 left where the step's globs point: the files they
/// match and the `.xml` files of the directories they match.
async fn clear_junit(cx: &CellEnv<'_>, at: &StepAt<'_>) -> Result<(), CellError> {
    let script = format!(
        "shopt -s nullglob globstar; for f in {}; do \
         if [ -d \"$f\" ]; then find \"$f\" -type f -name '*.xml' -delete; \
         elif [ -e \"$f\" ] || [ -L \"$f\" ]; then rm -f -- \"$f\"; fi; done; true",
        at.step.junit.join(" ")
    );
    cx.engine
        .exec_capture(at.container, &["bash", "-c", &script])
        .await?;
    Ok(())
}
