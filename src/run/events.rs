//! Everything that happens in a run is an [`Event`]. The scheduler emits
//! events; listeners (the journal, the progress display) consume them and
//! never reach back into the scheduler.

use std::sync::Arc;

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
}
