//! One test process in the cell's container, watched: its output streamed
//! to a callback, and a watchdog asked every tick whether to kill it (a test
//! past its per-test timeout, the step past its own). The process writes its
//! pid to a file first, so that a second exec can kill it by pid: the engine
//! API has no way to signal an exec.

use std::time::Duration;

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
}

/// Runs `argv` in `container` with `env`, its pid in `pidfile`; `output`
/// gets every chunk; `watchdog` is asked every tick and returns why to kill.
pub async fn run_watched<K: Clone>(
    engine: &Engine,
    container: &str,
    argv: &[String],
    env: Vec<String>,
    pidfile: &str,
    output: &mut (dyn FnMut(&[u8]) + Send),
    watchdog: &(dyn Fn() -> Option<K> + Sync),
) -> Result<Ended<K>, EngineError> {
    let dir = match pidfile.rsplit_once('/') {
        Some(("", _)) => "/",
        Some((d, _)) => d,
        None => ".",
    };
    let mut cmd = vec![
        "sh".to_string(),
        "-c".into(),
        // One pipe for both streams: a test's stderr lands between its
        // progress lines in the order the process wrote it (two pipes give
        // no order, and a message printed before a crash could be lost).
        // The pid file's directory is made here, not by an exec of its own.
        format!("mkdir -p '{dir}' && echo $$ > '{pidfile}' && exec \"$@\" 2>&1"),
        "sh".into(),
    ];
    cmd.extend(argv.iter().cloned());
    let exec = engine.exec(container, cmd, env, output, None);
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
                return Ok(Ended { exit, killed });
            }
            _ = tokio::time::sleep(TICK) => {
                if let Some(deadline) = kill_deadline {
                    if tokio::time::Instant::now() >= deadline {
                        return Ok(Ended { exit: None, killed });
                    }
                    continue;
                }
                if let Some(why) = watchdog() {
                    kill(engine, container, pidfile).await?;
                    killed = Some(why);
                    kill_deadline = Some(tokio::time::Instant::now() + AFTER_KILL);
                }
            }
        }
    }
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
