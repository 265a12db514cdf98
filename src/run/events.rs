//! Everything that happens in a run is an [`Event`]. The scheduler emits
//! events; listeners (the journal, the progress display) consume them and
//! never reach back into the scheduler.

use std::sync::Arc;

use crate::image::registry::Fetched;
pub use crate::store::journal::Event;

/// Consumes events. Implementations must be cheap: they run inline.
pub trait Listener: Send + Sync {
    fn on_event(&self, event: &Event);
}

/// Fans events out to listeners.
#[derive(Clone, Default)]
pub struct Events {
    listeners: Vec<Arc<dyn Listener>>,
}

impl Events {
    pub fn new(listeners: Vec<Arc<dyn Listener>>) -> Self {
        Events { listeners }
    }

    pub fn emit(&self, event: Event) {
        for l in &self.listeners {
            l.on_event(&event);
        }
    }

    /// What a registry gave, if anything; a registry that just failed is
    /// reported (once per run: it is not asked again).
    pub fn fetched<T>(&self, f: Fetched<T>) -> Option<T> {
        match f {
            Fetched::Done(t) => Some(t),
            Fetched::Unavailable { registry, reason } => {
                self.emit(Event::RegistryUnavailable { registry, reason });
                None
            }
            Fetched::Missing | Fetched::Skipped => None,
        }
    }
}
