//! The shell a step with `backtrace:` runs before its own script.
//!
//! An `ERR` trap (inherited by functions and subshells, `set -E`) fires on
//! the command that fails the step. When the failure is what the step asked
//! for (`on: error`: any exit but 77, the skip code; `on: crash`: death by a
//! signal, an exit status above 128), the trap splits the failing command
//! into words in the step shell itself — its variables, positional
//! parameters and directory are those the command saw — and runs it again
//! under gdb ([`super::gdb`]). It writes, under [`super::DIR`]:
//! `<slug>.cmd` (the command as written), `<slug>.gdb` (gdb's commands) and
//! `<slug>.txt` (gdb's output). The controller reads them after the step.
//!
//! Only a simple command that names a program can be run again: a builtin,
//! a function or a command with redirections is noted as such.

use super::{gdb, DIR};
use crate::matrix_file::{BacktraceOn, BacktraceSpec};

/// The files of step `slug` under [`DIR`]: command, gdb commands, output.
pub fn files(slug: &str) -> (String, String, String) {
    (
        format!("{DIR}/{slug}.cmd"),
        format!("{DIR}/{slug}.gdb"),
        format!("{DIR}/{slug}.txt"),
    )
}

/// `script` with the capture in front (as it is when the spec asks only
/// for hangs, `on: timeout`).
pub fn instrument(slug: &str, spec: &BacktraceSpec, script: &str) -> String {
    let Some(on) = spec.on else {
        return script.to_string();
    };
    let (cmd, gdb_file, out) = files(slug);
    let wanted = match on {
        BacktraceOn::Error => "[ \"$rc\" != 77 ]",
        BacktraceOn::Crash => "[ \"$rc\" -gt 128 ] && [ \"$rc\" -lt 160 ]",
    };
    let rerun = gdb::rerun(spec, &gdb_file, &out);
    format!(
        r#"# rocmatrix: backtrace ({on}) — a failing command runs again under gdb
__rocmatrix_bt() {{
  local rc=$1; shift
  {wanted} || return 0
  trap - ERR
  mkdir -p {DIR}
  printf '%s\n' "$__rocmatrix_cmd" > {cmd}
  if [ "$__rocmatrix_split" != ok ] || [ $# = 0 ]; then
    echo "{not_rerun} not a simple command: $__rocmatrix_cmd" > {out}; return 0
  fi
  if ! command -v gdb >/dev/null 2>&1; then
    echo "{not_rerun} {missing}" > {out}; return 0
  fi
  local prog=
  [ "$(type -t -- "$1")" = file ] && prog=$(type -P -- "$1")
  if [ -z "$prog" ]; then
    echo "{not_rerun} not a program (a builtin, function or keyword): $1" > {out}; return 0
  fi
  shift
  echo "rocmatrix: exit $rc; running \`$__rocmatrix_cmd\` again under gdb (backtrace: {out})" >&2
  set -- "$prog" "$@"
{rerun}}}
set -E
trap '__rocmatrix_rc=$?; __rocmatrix_cmd=$BASH_COMMAND; __rocmatrix_split=no; __rocmatrix_argv=(); eval "__rocmatrix_argv=( $__rocmatrix_cmd )" 2>/dev/null && __rocmatrix_split=ok; __rocmatrix_bt "$__rocmatrix_rc" "${{__rocmatrix_argv[@]}}"' ERR
{script}"#,
        missing = gdb::MISSING,
        not_rerun = super::gdb_output::NOT_RERUN,
        on = match on {
            BacktraceOn::Error => "on error",
            BacktraceOn::Crash => "on crash",
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::Duration;

    fn spec(on: BacktraceOn) -> BacktraceSpec {
        BacktraceSpec {
            on: Some(on),
            on_timeout: false,
            breaks: Vec::new(),
            timeout: Duration::from_secs(20),
            frames: 8,
        }
    }

    /// Runs the instrumented script with bash, as a step runs, with `DIR`
    /// replaced by a temporary directory; returns bash's exit code and
    /// the directory.
    fn run(on: BacktraceOn, script: &str) -> (i32, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let text = instrument("00-s", &spec(on), script).replace(DIR, dir.path().to_str().unwrap());
        let st = Command::new("bash")
            .args(["-eo", "pipefail", "-c", &text])
            .current_dir(dir.path())
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .output()
            .unwrap();
        (st.status.code().unwrap_or(-1), dir)
    }

    #[test]
    fn the_step_fails_as_it_would_have_and_the_command_is_recorded_expanded_in_its_shell() {
        let (code, dir) = run(
            BacktraceOn::Error,
            "x=sh\nset -- 7\n$x -c \"exit $1\"\necho never\n",
        );
        assert_eq!(code, 7);
        let cmd = std::fs::read_to_string(dir.path().join("00-s.cmd")).unwrap();
        assert_eq!(cmd.trim(), "$x -c \"exit $1\"");
        // Run again under gdb (.ci/install-debugger.sh installs it), which
        // stops where the command exits, with the arguments it had.
        assert!(
            which("gdb"),
            "gdb is not installed: run .ci/install-debugger.sh"
        );
        let out = std::fs::read_to_string(dir.path().join("00-s.txt")).unwrap();
        assert!(out.contains(super::super::gdb::MARK), "{out}");
        assert!(out.contains("exit_group"), "{out}");
    }

    #[test]
    fn a_crash_step_ignores_plain_errors_and_skips_stay_skips() {
        let (code, dir) = run(BacktraceOn::Crash, "false\n");
        assert_eq!(code, 1);
        assert!(!dir.path().join("00-s.cmd").exists());
        let (code, dir) = run(BacktraceOn::Error, "exit 77\n");
        assert_eq!(code, 77);
        assert!(!dir.path().join("00-s.cmd").exists());
    }

    #[test]
    fn builtins_are_not_run_again() {
        let (code, dir) = run(BacktraceOn::Error, "[ 1 = 2 ]\n");
        assert_eq!(code, 1);
        let out = std::fs::read_to_string(dir.path().join("00-s.txt")).unwrap();
        assert!(out.contains("@@rocmatrix-not-rerun@@"), "{out}");
    }

    fn which(p: &str) -> bool {
        Command::new("sh")
            .args(["-c", &format!("command -v {p}")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    }
}
