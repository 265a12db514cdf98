//! An exec'd step's own clock, as the runner's steps have one in their end
//! marker (`protocol`): a step run by exec (a build's steps, a cell's steps
//! after a test suite) writes its exit code and how long it ran to
//! `/rocmatrix/clock/<slug>` when it ends. The controller's timer ends the
//! exec when its *end* has not reached rocmatrix in time, and that is not
//! always the step: an engine that held the end back (a busy or stopped
//! containerd shim) would make a step that ended in time a timeout. (Docker
//! ends an exec's stream about 2 s after its process exits even when a
//! child it left still holds stdout; an engine that waits for every holder
//! would make `daemon &` such a case too.) So at the timer, before gdb and
//! the kill, the file is read: a step that ended within its timeout is
//! judged by its exit code.

use std::time::Duration;

use crate::engine::{Engine, ExecOutcome};
use crate::plan::Step;

use super::log::StepLog;

/// Where the steps' clock files are, in the container.
const DIR: &str = "/rocmatrix/clock";

/// How long reading the clock may take before the step is judged by the
/// controller's timer alone.
const READ_BUDGET: Duration = Duration::from_secs(10);

/// `cmd` run by a shell that starts the clock of step `slug`, runs it with
/// `ROCMATRIX_STEP=<name>` (so that a hang's gdb finds the step's processes,
/// not this shell), writes `<rc> <ms>` (`-` for ms without bash 5's
/// `$EPOCHREALTIME`) and exits with the step's code. The clock never
/// changes how the step runs: its own failures are silent.
pub(crate) fn clocked(slug: &str, name: &str, cmd: Vec<String>) -> Vec<String> {
    let file = format!("{DIR}/{slug}");
    let script = format!(
        "{{ mkdir -p {DIR} && rm -f {file}; }} 2>/dev/null\n\
         t=${{EPOCHREALTIME/[.,]/}}\n\
         ROCMATRIX_STEP=\"$0\" \"$@\"; rc=$?\n\
         if [ -n \"$t\" ]; then ms=$(( (${{EPOCHREALTIME/[.,]/}} - t) / 1000 )); else ms=-; fi\n\
         {{ printf '%s %s\\n' \"$rc\" \"$ms\" > {file}.new && mv {file}.new {file}; }} 2>/dev/null\n\
         exit $rc\n"
    );
    let mut out = vec!["bash".to_string(), "-c".into(), script, name.to_string()];
    out.extend(cmd);
    out
}

/// How the exec of step `slug` ended, told by its own clock where the
/// controller's timer fired: a step whose clock says it ended within its
/// timeout is `Exited` with its code (a line in its log says so); anything
/// else stays as it was.
pub(crate) async fn settle(
    engine: &Engine,
    container: &str,
    slug: &str,
    step: &Step,
    outcome: ExecOutcome,
    log: &mut StepLog,
) -> ExecOutcome {
    if !matches!(outcome, ExecOutcome::TimedOut) {
        return outcome;
    }
    let file = format!("{DIR}/{slug}");
    let cat = ["cat", file.as_str()];
    let read = engine.exec_capture(container, &cat);
    let Ok(Ok((0, text))) = tokio::time::timeout(READ_BUDGET, read).await else {
        return outcome;
    };
    match ended_in_time(&text, step.timeout) {
        Some((rc, ms)) => {
            let took = ms.map_or("within its timeout".into(), |ms| format!("in {ms} ms"));
            log.note(&format!(
                "\nrocmatrix: the step's end had not come back by its timeout of {} s, \
                 but the step ended {took} by its own clock, exit {rc}\n",
                step.timeout.as_secs()
            ));
            ExecOutcome::Exited(rc)
        }
        None => outcome,
    }
}

/// The exit code and milliseconds of a clock file's `<rc> <ms>` when the
/// step ended within `timeout` (`-` ms: it ended, when is not known, and
/// the file was read at the timeout).
fn ended_in_time(text: &str, timeout: Duration) -> Option<(i64, Option<u64>)> {
    let mut words = text.split_whitespace();
    let rc = words.next()?.parse().ok()?;
    let ms = match words.next()? {
        "-" => None,
        ms => Some(ms.parse::<u64>().ok()?),
    };
    if words.next().is_some() || ms.is_some_and(|ms| u128::from(ms) > timeout.as_millis()) {
        return None;
    }
    Some((rc, ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_within_the_timeout_gives_the_steps_exit_code() {
        let t = Duration::from_secs(5);
        assert_eq!(ended_in_time("0 12\n", t), Some((0, Some(12))));
        assert_eq!(ended_in_time("3 5000\n", t), Some((3, Some(5000))));
        assert_eq!(ended_in_time("0 -\n", t), Some((0, None)));
        assert_eq!(ended_in_time("0 5001\n", t), None);
        assert_eq!(ended_in_time("", t), None);
        assert_eq!(ended_in_time("0", t), None);
        assert_eq!(ended_in_time("x 12", t), None);
        assert_eq!(ended_in_time("0 12 9", t), None);
    }

    #[test]
    fn the_clock_runs_the_command_with_the_steps_name_and_keeps_its_code() {
        let dir = tempfile::tempdir().unwrap();
        let cmd = clocked(
            "00-s",
            "my step",
            vec![
                "sh".into(),
                "-c".into(),
                "echo \"$ROCMATRIX_STEP\"; exit 3".into(),
            ],
        );
        let script = cmd[2].replace(DIR, &dir.path().display().to_string());
        let o = std::process::Command::new(&cmd[0])
            .arg(&cmd[1])
            .arg(script)
            .args(&cmd[3..])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "my step\n");
        let clock = std::fs::read_to_string(dir.path().join("00-s")).unwrap();
        let (rc, ms) = ended_in_time(&clock, Duration::from_secs(60)).unwrap();
        assert_eq!(rc, 3);
        assert!(ms.is_some(), "{clock}");
    }
}
