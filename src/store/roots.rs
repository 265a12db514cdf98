//! Who on this machine still needs an image: the run roots (every `--out`
//! a run store was made under, whichever directory it ran from) and the
//! runs that are running now. `images --prune` keeps what any of them
//! names, so a prune in one checkout or CI job never removes the locked
//! images of another's runs, nor the image a concurrent run is using.
//!
//! Both live under the state directory ([`crate::dirs::state_dir`], the
//! cache directory unless `ROCMATRIX_STATE` says otherwise), one file per
//! entry so that two processes never rewrite one file:
//!
//! - `<state>/run-roots/<hash>`: the absolute path of one run root, written
//!   when a run store is made there; a root that no longer exists is
//!   forgotten by the next reader.
//! - `<state>/holds/<pid>-<start>.json`: the images one running process
//!   uses, written as it prepares them; a hold whose process is gone (pid
//!   not alive, or alive with another start time) is stale and removed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

fn roots_dir() -> PathBuf {
    crate::dirs::state_dir().join("run-roots")
}

fn holds_dir() -> PathBuf {
    crate::dirs::state_dir().join("holds")
}

/// Records `out` (the parent of `runs/`) as a run root of this machine.
/// Best effort: a failure is logged and only loses the protection.
pub fn register(out: &Path) {
    let Ok(abs) = std::path::absolute(out) else {
        return;
    };
    let abs = abs.canonicalize().unwrap_or(abs);
    let text = abs.to_string_lossy().into_owned();
    let file = roots_dir().join(crate::digest::short(&crate::digest::sha256_hex(
        text.as_bytes(),
    )));
    if std::fs::read_to_string(&file).is_ok_and(|t| t == text) {
        return;
    }
    if let Err(e) = super::write_atomic(&file, text.as_bytes()) {
        tracing::warn!("could not record the run root {text}: {e}");
    }
}

/// Every run root recorded on this machine that still exists.
pub fn roots() -> Vec<PathBuf> {
    let mut out = BTreeSet::new();
    let Ok(rd) = std::fs::read_dir(roots_dir()) else {
        return Vec::new();
    };
    for entry in rd.flatten() {
        let file = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let Ok(text) =
            crate::safe_read::read_bounded_string(&file, 64 * 1024, "run-root records", "")
        else {
            continue;
        };
        let root = PathBuf::from(text.trim());
        if root.is_dir() {
            out.insert(root);
        } else {
            let _ = std::fs::remove_file(&file);
        }
    }
    out.into_iter().collect()
}

/// One process's hold on the images it uses.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Hold {
    pub pid: u32,
    /// The process's start time (field 22 of `/proc/<pid>/stat`), so a
    /// reused pid is not taken for the holder.
    pub start: u64,
    /// The run root it writes to, for the reader's message.
    pub out: Option<PathBuf>,
    pub images: BTreeSet<String>,
}

/// This process's hold, as last written.
static MINE: Mutex<Option<Hold>> = Mutex::new(None);

/// Adds `tags` to this process's hold (the images of the run it runs).
/// Best effort, as [`register`].
pub fn hold(out: &Path, tags: impl IntoIterator<Item = String>) {
    let pid = std::process::id();
    let Some(start) = start_time(pid) else {
        return;
    };
    let mut mine = MINE.lock().unwrap_or_else(|p| p.into_inner());
    let h = mine.get_or_insert_with(|| Hold {
        pid,
        start,
        out: std::path::absolute(out).ok(),
        images: BTreeSet::new(),
    });
    let before = h.images.len();
    h.images.extend(tags);
    if h.images.len() == before {
        return;
    }
    let file = holds_dir().join(format!("{pid}-{start}.json"));
    let written = serde_json::to_vec_pretty(&*h)
        .map_err(|e| e.to_string())
        .and_then(|b| super::write_atomic(&file, &b).map_err(|e| e.to_string()));
    if let Err(e) = written {
        tracing::warn!("could not record the images this run holds: {e}");
    }
}

/// The holds of processes that are still running; stale ones are removed.
pub fn live_holds() -> Vec<Hold> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(holds_dir()) else {
        return out;
    };
    for entry in rd.flatten() {
        let file = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let hold: Option<Hold> =
            crate::safe_read::read_bounded_string(&file, 4 << 20, "image holds", "")
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok());
        match hold {
            Some(h) if start_time(h.pid) == Some(h.start) => out.push(h),
            // Its process is gone (or the file is not a hold): nothing
            // holds those images any more.
            _ => {
                let _ = std::fs::remove_file(&file);
            }
        }
    }
    out
}

/// When process `pid` started, in clock ticks since boot; `None` when it
/// is not running.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields
    // are counted after its closing parenthesis.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_start_time_and_a_dead_pid_has_none() {
        assert!(start_time(std::process::id()).is_some());
        // Above the kernel's largest pid.
        assert_eq!(start_time(u32::MAX - 1), None);
    }
}
