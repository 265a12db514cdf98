//! gdb's command file for a backtrace, and the shell that runs a command
//! under it within bounds.

use crate::matrix_file::{BacktraceOn, BacktraceSpec};

/// The line gdb echoes right before the backtrace, so that the parser
/// knows where the program's own output ends.
pub const MARK: &str = "@@rocmatrix-backtrace@@";
/// The line gdb echoes when the program ran to its end instead.
pub const EXITED: &str = "@@rocmatrix-no-stop@@";

/// gdb's commands: quiet and unpaged, frame arguments left out (they are
/// long and say little in a report), the breakpoints (pending, for
/// libraries not loaded yet), run, then a backtrace at each stop: each
/// breakpoint is temporary and gives one, at its first hit; a signal or
/// the exit ends it. Without breakpoints, `on: error` stops where the
/// program exits.
pub fn script(spec: &BacktraceSpec) -> String {
    let mut s = String::from(
        "set pagination off\n\
         set confirm off\n\
         set width 0\n\
         set print frame-arguments none\n\
         set print address off\n\
         set breakpoint pending on\n",
    );
    // No network in a cell to wait for (gdb 10 and later know the setting;
    // bookworm has 13).
    s.push_str("set debuginfod enabled off\n");
    // Temporary: each deletes itself at its first hit, and the program
    // goes on to the next (even without debug info, where `clear` fails).
    for b in &spec.breaks {
        s.push_str(&format!("tbreak {b}\n"));
    }
    if spec.breaks.is_empty() && spec.on == Some(BacktraceOn::Error) {
        s.push_str("catch syscall exit_group\n");
    }
    s.push_str("run\n");
    // `$_exitcode` is set once the program has exited; `$_siginfo` is
    // SIGTRAP (5) at a breakpoint, the signal otherwise (a crash ends the
    // loop).
    s.push_str(&format!(
        "set $rocmatrix_stops = 0\n\
         while $_isvoid($_exitcode) && $rocmatrix_stops < {limit}\n\
         \x20 echo \\n{MARK}\\n\n\
         \x20 info program\n\
         \x20 bt {frames}\n\
         \x20 set $rocmatrix_stops = $rocmatrix_stops + 1\n\
         \x20 if $_siginfo.si_signo != 5 || {catch}\n\
         \x20   loop_break\n\
         \x20 end\n\
         \x20 continue\n\
         end\n\
         if $rocmatrix_stops == 0\n\
         \x20 echo \\n{EXITED}\\n\n\
         \x20 print $_exitcode\n\
         end\n\
         kill\n",
        frames = spec.frames.max(1),
        // One stop per breakpoint, and one for a signal after them.
        limit = spec.breaks.len() + 1,
        catch = if spec.breaks.is_empty() { 1 } else { 0 },
    ));
    s
}

/// What the rerun notes when the image has no gdb.
pub const MISSING: &str = "gdb is not installed in this image (add it to environment.packages)";

/// Shell that writes gdb's commands for `spec` to `gdb_file` and runs
/// `"$@"` under them ([`run_line`]); gdb failing fails nothing.
pub fn rerun(spec: &BacktraceSpec, gdb_file: &str, out: &str) -> String {
    format!(
        "cat > {gdb_file} <<'__ROCMATRIX_GDB__'\n{}__ROCMATRIX_GDB__\n( set +e; {} ) || true\n",
        script(spec),
        run_line(spec, gdb_file, out),
    )
}

/// Shell running `"$@"` under gdb with the command file `gdb_file`,
/// killed after the timeout (gdb kills the program it started when it is
/// terminated), its output cut at [`super::MAX_OUTPUT`] into `out`.
pub fn run_line(spec: &BacktraceSpec, gdb_file: &str, out: &str) -> String {
    format!(
        "timeout -k 10 {secs} gdb -batch -nx -x {gdb_file} --args \"$@\" </dev/null 2>&1 | head -c {max} > {out}",
        secs = spec.timeout.as_secs().max(1),
        max = super::MAX_OUTPUT,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn spec(on: BacktraceOn, breaks: &[&str]) -> BacktraceSpec {
        BacktraceSpec {
            on: Some(on),
            on_timeout: false,
            breaks: breaks.iter().map(|s| s.to_string()).collect(),
            timeout: Duration::from_secs(30),
            frames: 16,
        }
    }

    #[test]
    fn breakpoints_come_before_run_and_the_backtrace_after() {
        let s = script(&spec(BacktraceOn::Error, &["llvm::MCAsmParser::Error"]));
        let b = s.find("tbreak llvm::MCAsmParser::Error").unwrap();
        let r = s.find("\nrun\n").unwrap();
        let bt = s.find("  bt 16").unwrap();
        assert!(b < r && r < bt, "{s}");
        assert!(!s.contains("catch syscall"));
        assert!(s.contains("$rocmatrix_stops < 2"), "{s}");
    }

    #[test]
    fn an_error_without_breakpoints_stops_at_exit_and_a_crash_at_its_signal() {
        assert!(script(&spec(BacktraceOn::Error, &[])).contains("catch syscall exit_group"));
        assert!(!script(&spec(BacktraceOn::Crash, &[])).contains("catch syscall"));
    }

    #[test]
    fn the_run_line_is_bounded() {
        let l = run_line(&spec(BacktraceOn::Crash, &[]), "/x.gdb", "/x.txt");
        assert!(l.starts_with("timeout -k 10 30 gdb -batch -nx -x /x.gdb --args \"$@\""));
        assert!(l.contains("head -c 262144 > /x.txt"));
    }
}
