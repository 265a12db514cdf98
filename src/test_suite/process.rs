//! One test process in the cell's container, watched: its output streamed
//! to a callback, and a watchdog asked every tick whether to kill it (a test
//! past its per-test timeout, the step past its own). The process writes its
//! pid to a file first, so that a second exec can kill it by pid: the engine
//! API has no way to signal an exec.
//!
//! With `backtrace: {on: timeout}`, gdb looks at the process tree before
//! the kill ([`crate::debugger::attach`]).
//!
//! A process may also name a file to send back when it ends normally (exit
//! 0 or 1): the same exec then prints it behind a marker
//! ([`super::trailer`]), so the file costs no exec of its own.

use std::time::Duration;

use super::trailer::Trailer;
use crate::engine::{Engine, EngineError, ExecOutcome};

/// How often the watchdog is asked.
const TICK: Duration = Duration::from_millis(200);
/// How long to wait for the output to end after a kill before giving up on
/// the process (a child that inherited its output may keep it open).
const AFTER_KILL: Duration = Duration::from_secs(20);

/// How a watched process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended<K> {
    /// Its exit status (128 + N for signal N); `None` when its output did not
    /// end after the kill.
    pub exit: Option<i64>,
    /// Why the watchdog killed it, if it did.
    pub killed: Option<K>,
    /// The file asked for, when the process ended normally and it existed.
    pub file: Option<Vec<u8>>,
    /// What gdb saw of the process tree just before the watchdog's kill
    /// ([`crate::debugger::attach`]), when [`Process::attach`] asked.
    pub hang: Option<String>,
}

/// One process to run.
pub struct Process<'a> {
    /// The command and its arguments.
    pub argv: &'a [String],
    /// `NAME=value` pairs for its environment.
    pub env: Vec<String>,
    /// Where its pid is written.
    pub pidfile: &'a str,
    /// A file to send back when it ends with exit 0 or 1 (at most `limit`
    /// bytes of it).
    pub then_read: Option<(&'a str, usize)>,
    /// `backtrace: {on: timeout}`: gdb attaches to the process tree before
    /// a kill, within the spec's `timeout`.
    pub attach: Option<&'a crate::matrix_file::BacktraceSpec>,
}

/// Numbers the markers, which also carry the controller's pid and the time.
static MARKERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Runs `process` in `container`; `output` gets every chunk of its output;
/// `watchdog` is asked every tick and returns why to kill.
/// One piece: the script, the exec and the select loop share the pid file,
/// the trailer and the kill, and read best top to bottom.
pub async fn run_watched<K: Clone>(
    engine: &Engine,
    container: &str,
    process: Process<'_>,
    output: &mut (dyn FnMut(&[u8]) + Send),
    watchdog: &(dyn Fn() -> Option<K> + Sync),
) -> Result<Ended<K>, EngineError> {
    let Process {
        argv,
        env,
        pidfile,
        then_read,
        attach,
    } = process;
    let dir = match pidfile.rsplit_once('/') {
        Some(("", _)) => "/",
        Some((d, _)) => d,
        None => ".",
    };
    // One pipe for both streams: a test's stderr lands between its progress
    // lines in the order the process wrote it (two pipes give no order, and
    // a message printed before a crash could be lost). The pid file's
    // directory is made here, not by an exec of its own.
    let start = format!("mkdir -p '{dir}' && echo $$ > '{pidfile}'");
    let (script, mut trailer) = match then_read {
        None => (format!("{start} && exec \"$@\" 2>&1"), None),
        Some((file, limit)) => {
            let marker = format!(
                "rocmatrix-file-follows-{}-{}-{}",
                std::process::id(),
                MARKERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0)
            );
            // The shell waits for the process (it leads the process group
            // the kill signals, so a kill still ends both), then prints the
            // marker and the file when the process ended normally. The
            // marker follows the process's last byte with no line break
            // before it: one there would have to be held back (it might be
            // the process's own), and with it a test's `[ RUN ]` line.
            let script = format!(
                "{start} || exit; \"$@\" 2>&1; rc=$?; \
                 if [ $rc -le 1 ] && [ -f '{file}' ]; then printf '%s\\n' '{marker}'; cat '{file}' 2>/dev/null; fi; \
                 exit $rc"
            );
            (script, Some(Trailer::new(&marker, limit)))
        }
    };
    let mut cmd = vec!["sh".to_string(), "-c".into(), script, "sh".into()];
    cmd.extend(argv.iter().cloned());
    let mut hang = None;
    let (exit, killed) = {
        let mut split = |bytes: &[u8]| match &mut trailer {
            Some(t) => t.feed(bytes, &mut *output),
            None => output(bytes),
        };
        let exec = engine.exec(container, cmd, env, &mut split, None);
        let mut exec = std::pin::pin!(exec);
        let mut killed: Option<K> = None;
        let mut kill_deadline = None;
        loop {
            tokio::select! {
                r = &mut exec => {
                    let exit = match r? {
                        ExecOutcome::Exited(code) => Some(code),
                        ExecOutcome::TimedOut => None,
                    };
                    break (exit, killed);
                }
                _ = tokio::time::sleep(TICK) => {
                    if let Some(deadline) = kill_deadline {
                        if tokio::time::Instant::now() >= deadline {
                            break (None, killed);
                        }
                        continue;
                    }
                    if let Some(why) = watchdog() {
                        if let Some(spec) = attach {
                            let tree = crate::debugger::attach::Tree::Pidfile(pidfile);
                            hang = Some(crate::debugger::attach::take(engine, container, &tree, spec).await);
                        }
                        kill(engine, container, pidfile).await?;
                        killed = Some(why);
                        kill_deadline = Some(tokio::time::Instant::now() + AFTER_KILL);
                    }
                }
            }
        }
    };
    let file = trailer.and_then(|t| t.finish(&mut *output));
    Ok(Ended {
        exit,
        killed,
        file,
        hang,
    })
}

/// Kills the process whose pid is in `pidfile` (and its process group, where
/// it leads one).
async fn kill(engine: &Engine, container: &str, pidfile: &str) -> Result<(), EngineError> {
    let script = format!(
        "pid=$(cat '{pidfile}' 2>/dev/null) && [ -n \"$pid\" ] && {{ kill -KILL -- -\"$pid\" 2>/dev/null; kill -KILL \"$pid\"; }}"
    );
    engine
        .exec_capture(container, &["sh", "-c", &script])
        .await?;
    Ok(())
}
