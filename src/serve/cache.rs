//! The pages already answered, kept until the history changes: each is
//! kept with the history's stamp (how many runs, when the latest was
//! recorded) and given again while the stamp is the same, so that a page a
//! release manager opens every morning is worked out once per new run, not
//! once per request. At most [`ENTRIES`] pages are kept, the oldest put
//! first out; only what was answered `200 OK`.

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::Bytes;

/// How many answers are kept.
pub const ENTRIES: usize = 32;

/// A history's stamp (`History::stamp`).
pub type Stamp = (i64, i64);

/// An answer: content type and body.
pub type Kept = (&'static str, Bytes);

#[derive(Default)]
pub struct Cache {
    entries: Mutex<VecDeque<(String, Stamp, Kept)>>,
}

impl Cache {
    /// The answer to `target` kept at `stamp`.
    pub fn get(&self, target: &str, stamp: Stamp) -> Option<Kept> {
        let entries = self.entries.lock().ok()?;
        entries
            .iter()
            .find(|(t, s, _)| t == target && *s == stamp)
            .map(|(_, _, k)| k.clone())
    }

    /// Keeps `kept` as the answer to `target` at `stamp` (replacing one
    /// kept at another stamp).
    pub fn put(&self, target: &str, stamp: Stamp, kept: Kept) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        entries.retain(|(t, _, _)| t != target);
        if entries.len() >= ENTRIES {
            entries.pop_front();
        }
        entries.push_back((target.to_string(), stamp, kept));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_cache_keeps_pages_until_the_history_changes() {
        let c = Cache::default();
        c.put("/", (1, 10), ("text/html", Bytes::from_static(b"one")));
        assert_eq!(c.get("/", (1, 10)).unwrap().1, "one");
        assert!(c.get("/", (2, 20)).is_none(), "a new run");
        assert!(c.get("/runs", (1, 10)).is_none());
        for i in 0..ENTRIES {
            c.put(&format!("/p{i}"), (1, 10), ("text/html", Bytes::new()));
        }
        assert!(c.get("/", (1, 10)).is_none(), "the oldest went first");
        assert_eq!(c.entries.lock().unwrap().len(), ENTRIES);
    }
}
