//! Deadlines on engine calls. An engine that stops answering (a GPU hang
//! that leaves a process in uninterruptible sleep can freeze the daemon)
//! must never hold a run: short calls — inspect, kill, remove, list — give
//! up after [`call_deadline`]; [`Engine::answering`] is the cheap question
//! a run's watchdog asks over and over. Long calls (builds, pulls, commits,
//! a container's output) are bounded by that watchdog instead, since how
//! long they may take depends on what they do, not on the engine's health;
//! an image build's output also has a stall timer ([`build_stall`]), which
//! cuts a build that prints nothing while the engine still answers.

use std::future::Future;
use std::time::Duration;

use super::{Engine, EngineError};

/// The default deadline of a short engine call.
pub const DEFAULT_DEADLINE_SECS: u64 = 30;

/// How long a short call may wait for the engine: `ROCMATRIX_ENGINE_DEADLINE`
/// (seconds, at least 1), else [`DEFAULT_DEADLINE_SECS`].
pub fn call_deadline() -> Duration {
    let secs = std::env::var("ROCMATRIX_ENGINE_DEADLINE")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|s| *s >= 1)
        .unwrap_or(DEFAULT_DEADLINE_SECS);
    Duration::from_secs(secs)
}

/// The default stall limit of an image build's output.
pub const DEFAULT_BUILD_STALL_SECS: u64 = 1800;

/// How long an image build may go without a line of output before it is
/// cut as stalled (a build hung on a mirror while the engine still answers
/// the watchdog): `ROCMATRIX_BUILD_STALL` (seconds, at least 1), else
/// [`DEFAULT_BUILD_STALL_SECS`]. A build's own steps print as they go
/// (`apt-get` a line per package), so silence this long is a hang.
pub fn build_stall() -> Duration {
    let secs = std::env::var("ROCMATRIX_BUILD_STALL")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|s| *s >= 1)
        .unwrap_or(DEFAULT_BUILD_STALL_SECS);
    Duration::from_secs(secs)
}

impl Engine {
    /// Runs the engine call `fut` under the short-call deadline; past it,
    /// the error says the engine has not answered.
    pub(crate) async fn within<T>(
        &self,
        action: impl FnOnce() -> String,
        fut: impl Future<Output = Result<T, EngineError>>,
    ) -> Result<T, EngineError> {
        let limit = call_deadline();
        match tokio::time::timeout(limit, fut).await {
            Ok(r) => r.map_err(|e| self.gone_or(e)),
            Err(_) => Err(EngineError::Stalled {
                action: action(),
                address: self.address().to_string(),
                secs: limit.as_secs(),
            }),
        }
    }

    /// `Ok` while the engine answers a ping within the deadline; else the
    /// error that says how it failed (went away, or stopped answering).
    pub async fn answering(&self) -> Result<(), EngineError> {
        self.within(
            || "asking the engine whether it is alive".to_string(),
            async {
                self.docker()
                    .ping()
                    .await
                    .map(|_| ())
                    .map_err(|source| EngineError::Api {
                        action: "asking the engine whether it is alive".into(),
                        source,
                    })
            },
        )
        .await
    }

    /// `e`, or — when the engine's socket refused or dropped the connection —
    /// an error that says the engine went away.
    pub(crate) fn gone_or(&self, e: EngineError) -> EngineError {
        match e {
            EngineError::Api { action, source } => match connection_failure(&source) {
                Some(reason) => EngineError::Gone {
                    action,
                    address: self.address().to_string(),
                    reason,
                },
                None => EngineError::Api { action, source },
            },
            other => other,
        }
    }
}

/// Why a request never reached the engine (`connection refused`, `no such
/// file`), if that is what `e` says.
fn connection_failure(e: &bollard::errors::Error) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut connect = false;
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            let why = match io.kind() {
                ConnectionRefused => "connection refused",
                NotFound => "its socket is gone",
                ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof => {
                    "the connection was dropped"
                }
                _ => return connect.then(|| io.to_string()),
            };
            return Some(why.to_string());
        }
        let text = err.to_string();
        if text.contains("client error (Connect)")
            || text.contains("connection closed before message completed")
        {
            connect = true;
        }
        cur = err.source();
    }
    connect.then(|| "the connection failed".to_string())
}
