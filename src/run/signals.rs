//! Ctrl-C and SIGTERM: the first one asks every running cell to stop and
//! clean up; the run then removes its containers and exits 130.

use tokio::sync::watch;

/// A flag that turns true once, when the run is interrupted.
#[derive(Clone)]
pub struct Interrupt {
    rx: watch::Receiver<bool>,
}

impl Interrupt {
    /// Listens for SIGINT and SIGTERM in the background.
    pub fn install() -> Interrupt {
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(s) => s,
                    Err(_) => {
                        let _ = tokio::signal::ctrl_c().await;
                        let _ = tx.send(true);
                        return;
                    }
                };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            let _ = tx.send(true);
        });
        Interrupt { rx }
    }

    /// An interrupt that never fires (tests, library use).
    pub fn never() -> Interrupt {
        let (tx, rx) = watch::channel(false);
        std::mem::forget(tx);
        Interrupt { rx }
    }

    pub fn is_set(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves when the interrupt fires.
    pub async fn fired(&self) {
        let mut rx = self.rx.clone();
        while !*rx.borrow() {
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}
