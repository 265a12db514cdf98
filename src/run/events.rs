//! Everything that happens in a run is an [`Event`]. The scheduler emits
//! events; listeners (the journal, the progress display) consume them and
//! never reach back into the scheduler.

use std::collections::HashMap;
use std::sync::Arc;

use crate::image::registry::Fetched;
pub use crate::store::journal::Event;

/// Consumes events. Implementations must be cheap: they run inline.
pub trait Listener: Send + Sync {
    fn on_event(&self, event: &Event);

    /// What the run is about, once, before its first cell or image event;
    /// listeners that show events to people keep it to say more than the
    /// events carry.
    fn on_context(&self, _context: &Arc<RunContext>) {}
}

/// What the events of a run refer to and do not carry themselves: which
/// cells the matrix expects to fail, and which axis values each
/// environment is for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunContext {
    /// Cell id → the reason of the whole-cell `expect:` that covers it.
    pub expected: HashMap<String, String>,
    /// Short environment hash → the axis values its cells share
    /// (`suite=bookworm`); absent when they share none.
    pub environments: HashMap<String, String>,
}

impl RunContext {
    /// The context of a run of `cells` under the matrix's `expect:` rules.
    pub fn new(cells: &[crate::plan::Cell], expect: &[crate::spec::Expectation]) -> RunContext {
        let expected = cells
            .iter()
            .filter_map(|c| {
                let value = |k: &str| {
                    c.values
                        .iter()
                        .find(|(key, _)| key == k)
                        .map(|(_, v)| v.as_str())
                };
                expect
                    .iter()
                    .find(|e| e.is_whole_cell() && e.matches_cell(value))
                    .map(|e| (c.id.clone(), e.reason.clone()))
            })
            .collect();
        let mut by_env: Vec<(&str, Vec<&crate::plan::Cell>)> = Vec::new();
        for c in cells {
            match by_env.iter_mut().find(|(h, _)| *h == c.environment_hash) {
                Some((_, v)) => v.push(c),
                None => by_env.push((&c.environment_hash, vec![c])),
            }
        }
        let environments = by_env
            .into_iter()
            .filter_map(|(hash, cells)| {
                let first = cells.first()?;
                let shared: Vec<String> = first
                    .values
                    .iter()
                    .filter(|kv| cells.iter().all(|c| c.values.contains(kv)))
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                (!shared.is_empty())
                    .then(|| (crate::digest::short(hash).to_string(), shared.join(" · ")))
            })
            .collect();
        RunContext {
            expected,
            environments,
        }
    }

    /// Why the matrix expects `cell` to fail, if it does.
    pub fn expected(&self, cell: &str) -> Option<&str> {
        self.expected.get(cell).map(String::as_str)
    }

    /// The axis values environment `short` is for, if its cells share any.
    pub fn environment(&self, short: &str) -> Option<&str> {
        self.environments.get(short).map(String::as_str)
    }
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

    /// Tells every listener what the run is about ([`Listener::on_context`]).
    pub fn context(&self, context: RunContext) {
        let context = Arc::new(context);
        for l in &self.listeners {
            l.on_context(&context);
        }
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
