//! Stopping a run early: Ctrl-C and SIGTERM, or an engine that went away or
//! stopped answering ([`super::watchdog`]).
//!
//! The first signal asks every running cell to stop and clean up; the run
//! then writes its records and reports, removes its containers (each engine
//! call under its deadline, so this is bounded even on a stuck engine) and
//! exits 130. A second signal exits at once with 130, naming what may be
//! left behind and what removes it. A lost engine stops the run the same
//! way, except that the cells it cut short are recorded `error` (so
//! `--resume` runs them again) and the exit code is 3.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// Why the run stops early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// SIGINT or SIGTERM.
    Signal,
    /// The engine went away or stopped answering; the message says which.
    EngineLost(String),
}

/// A flag that is set once, when the run must stop early.
#[derive(Clone)]
pub struct Interrupt {
    tx: Arc<watch::Sender<Option<Stop>>>,
    rx: watch::Receiver<Option<Stop>>,
    /// The run id, once known, for the message of a second signal.
    run: Arc<Mutex<Option<String>>>,
}

impl Interrupt {
    fn new() -> Interrupt {
        let (tx, rx) = watch::channel(None);
        Interrupt {
            tx: Arc::new(tx),
            rx,
            run: Arc::new(Mutex::new(None)),
        }
    }

    /// Listens for SIGINT and SIGTERM in the background.
    pub fn install() -> Interrupt {
        let me = Interrupt::new();
        let it = me.clone();
        tokio::spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut int), Ok(mut term)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                return;
            };
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            it.stop(Stop::Signal);
            eprintln!(
                "interrupted: stopping the running cells and removing their containers \
                 (press Ctrl-C again to quit at once)"
            );
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            eprintln!("{}", it.abandon_message());
            std::process::exit(130);
        });
        me
    }

    /// An interrupt that no signal sets (tests, library use); a lost engine
    /// still can.
    pub fn never() -> Interrupt {
        Interrupt::new()
    }

    /// Names the run, for the message of a second signal.
    pub fn set_run(&self, run_id: &str) {
        *self.run.lock().unwrap_or_else(|p| p.into_inner()) = Some(run_id.to_string());
    }

    /// Stops the run; the first reason wins.
    pub fn stop(&self, why: Stop) {
        self.tx.send_if_modified(|cur| {
            if cur.is_some() {
                return false;
            }
            *cur = Some(why);
            true
        });
    }

    /// Whether the run must stop (a signal or a lost engine).
    pub fn is_set(&self) -> bool {
        self.rx.borrow().is_some()
    }

    /// Whether a signal stopped the run (exit 130).
    pub fn by_signal(&self) -> bool {
        *self.rx.borrow() == Some(Stop::Signal)
    }

    /// Why the engine was given up on, if it was.
    pub fn engine_lost(&self) -> Option<String> {
        match &*self.rx.borrow() {
            Some(Stop::EngineLost(why)) => Some(why.clone()),
            _ => None,
        }
    }

    /// Resolves when the run must stop.
    pub async fn fired(&self) {
        let mut rx = self.rx.clone();
        // The sender lives in `self`: `wait_for` ends only when it is set.
        let _ = rx.wait_for(Option::is_some).await;
    }

    /// What a second signal says before it exits.
    fn abandon_message(&self) -> String {
        let run = self.run.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let which = match run {
            Some(r) => format!("containers labelled rocmatrix.run={r}"),
            None => "containers labelled rocmatrix.run".to_string(),
        };
        format!(
            "quitting at once: {which} may be left in the engine, and an image build's \
             intermediate container; the next `rocmatrix run` on this host removes them \
             (its sweep of dead runs), as does `rocmatrix images --prune`"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_reason_wins_and_says_which() {
        let i = Interrupt::never();
        assert!(!i.is_set());
        i.stop(Stop::EngineLost("the engine at unix:///x went away".into()));
        i.stop(Stop::Signal);
        i.fired().await;
        assert!(i.is_set());
        assert!(!i.by_signal());
        assert_eq!(
            i.engine_lost().unwrap(),
            "the engine at unix:///x went away"
        );
        let j = Interrupt::never();
        j.set_run("r1");
        j.clone().stop(Stop::Signal);
        assert!(j.by_signal() && j.engine_lost().is_none());
        assert!(j.abandon_message().contains("rocmatrix.run=r1"));
    }
}
