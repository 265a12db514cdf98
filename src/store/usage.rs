//! When each image rocmatrix made was last used by a run, kept in
//! `<cache>/image-use.json` (the engine records creation, not use), so that
//! `images` can show it and `images --prune --older-than` can go by it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn path() -> PathBuf {
    crate::dirs::cache_dir().join("image-use.json")
}

/// Image tag → RFC 3339 time of last use.
pub fn load() -> BTreeMap<String, String> {
    load_from(&path())
}

/// The file at `p` ([`super::read::MAX_IMAGE_USE`] at most); empty when
/// it is missing or unreadable.
fn load_from(p: &Path) -> BTreeMap<String, String> {
    super::read::json(p, super::read::MAX_IMAGE_USE, "image-use files").unwrap_or_default()
}

/// Records that `tags` were used now. Best effort: a failure only loses the record.
pub fn record(tags: &[String]) {
    let p = path();
    let mut uses = load_from(&p);
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    for t in tags {
        uses.insert(t.clone(), now.clone());
    }
    if let Ok(text) = serde_json::to_vec_pretty(&uses) {
        let _ = crate::store::write_atomic(&p, &text);
    }
}
