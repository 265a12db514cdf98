//! Readable, stable, file-system-safe cell ids.
//!
//! An id is the cell's values joined with `.`: axis values in axis order,
//! and for a combination that an include created, its values in the order the
//! entry wrote them. Characters outside `[A-Za-z0-9._+-]` become `-`.
//! When two cells would share an id, each of them gets `-` and the first
//! eight hex digits of the SHA-256 of its key/value pairs appended, so an id
//! does not depend on which other cells exist beside it.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use super::{Combination, Origin, Spec};

/// The longest id, in bytes, before the disambiguating suffix.
const MAX_ID_LEN: usize = 120;

/// Ids for `combos`, in the same order, all distinct.
pub fn cell_ids(spec: &Spec, combos: &[Combination]) -> Vec<String> {
    let base: Vec<String> = combos.iter().map(|c| readable(spec, c)).collect();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for id in &base {
        *counts.entry(id.as_str()).or_default() += 1;
    }
    let mut ids: Vec<String> = base
        .iter()
        .zip(combos)
        .map(|(id, c)| {
            if counts[id.as_str()] > 1 {
                format!("{id}-{}", short_hash(c))
            } else {
                id.clone()
            }
        })
        .collect();
    // A suffixed id can, in theory, equal another cell's plain id.
    let mut seen: HashMap<String, usize> = HashMap::new();
    for id in ids.iter_mut() {
        let n = seen.entry(id.clone()).or_default();
        *n += 1;
        if *n > 1 {
            id.push_str(&format!("~{n}"));
        }
    }
    ids
}

fn readable(spec: &Spec, c: &Combination) -> String {
    let parts: Vec<&str> = match c.origin {
        Origin::Product => spec.axes.iter().filter_map(|a| c.get(&a.name)).collect(),
        Origin::Include(_) => c.values.iter().map(|(_, v)| v.as_str()).collect(),
    };
    let mut id = sanitize(&parts.join("."));
    if id.len() > MAX_ID_LEN {
        id.truncate(MAX_ID_LEN);
    }
    if id.is_empty() || id.chars().all(|ch| ch == '.') {
        "cell".into()
    } else {
        id
    }
}

/// Replaces everything outside `[A-Za-z0-9._+-]` by `-`, collapsing runs,
/// and never starts with `.` (hidden files, `..`).
pub fn sanitize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        let ok = ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | '+' | '-');
        let ch = if ok { ch } else { '-' };
        if ch == '-' && out.ends_with('-') {
            continue;
        }
        out.push(ch);
    }
    while out.starts_with('.') {
        out.remove(0);
    }
    out.replace("..", ".-.")
}

fn short_hash(c: &Combination) -> String {
    let mut h = Sha256::new();
    for (k, v) in &c.values {
        h.update(k.as_bytes());
        h.update([0]);
        h.update(v.as_bytes());
        h.update([0]);
    }
    crate::digest::hex(&h.finalize()[..4])
}

#[cfg(test)]
mod tests {
    use super::sanitize;

    #[test]
    fn sanitizes() {
        assert_eq!(sanitize("debian-sid.6.4.gfx1030"), "debian-sid.6.4.gfx1030");
        assert_eq!(sanitize("ubuntu 22.04/x"), "ubuntu-22.04-x");
        assert_eq!(sanitize("../etc"), "-etc");
        assert!(!sanitize("a..b").contains(".."));
    }
}
