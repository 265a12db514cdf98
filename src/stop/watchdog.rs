//! The engine's watchdog: while a run goes on, the engine is asked every
//! [`INTERVAL`] whether it is alive ([`Engine::answering`], a ping under the
//! engine-call deadline). When it went away (its socket refuses) or has not
//! answered within the deadline (frozen: a GPU hang can stop the daemon),
//! the run is stopped with [`Stop::EngineLost`]: the cells it cut short
//! are recorded `error`, which `--resume` runs again, and the run exits 3.
//! So a frozen engine is noticed within the deadline plus one interval,
//! whatever the run was waiting for (a build's stream, a silent step).

use std::time::Duration;

use super::signals::{Interrupt, Stop};
use crate::engine::{Engine, EngineError};

/// How often the engine is asked.
pub const INTERVAL: Duration = Duration::from_secs(2);

/// Watches `engine` until dropped; stops `interrupt` when the engine is lost.
pub struct Watchdog {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts watching.
pub fn start(engine: &Engine, interrupt: &Interrupt) -> Watchdog {
    let engine = engine.clone();
    let interrupt = interrupt.clone();
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(INTERVAL) => {}
                _ = interrupt.fired() => return,
            }
            if lost(&engine, &interrupt).await.is_some() {
                return;
            }
        }
    });
    Watchdog { task }
}

/// Whether the engine is lost: already known, or found now by a ping (which
/// then stops the run). Asked when an engine call failed, so that a cell
/// broken by an engine that went away says so, and is not retried on it.
pub async fn lost(engine: &Engine, interrupt: &Interrupt) -> Option<String> {
    if let Some(why) = interrupt.engine_lost() {
        return Some(why);
    }
    // An engine that answers, even with an error status, is there.
    let why = match engine.answering().await {
        Err(EngineError::Stalled { address, secs, .. }) => {
            format!("the engine at {address} has not answered for {secs} s")
        }
        Err(EngineError::Gone {
            address, reason, ..
        }) => format!("the engine at {address} went away ({reason})"),
        _ => return None,
    };
    interrupt.stop(Stop::EngineLost(why));
    interrupt.engine_lost()
}
