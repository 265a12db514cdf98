//! The labels that mark what rocmatrix made in the engine: which run, cell
//! and process owns a container, so that a later start can sweep what a
//! killed run left behind.

use std::collections::HashMap;

use super::{LABEL_CELL, LABEL_HOST, LABEL_PID, LABEL_RUN};

/// This host's name, as recorded on containers.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Labels that mark a container as owned by this process, for `run` and `cell`.
pub fn owner_labels(run: &str, cell: &str) -> HashMap<String, String> {
    HashMap::from([
        (LABEL_RUN.to_string(), run.to_string()),
        (LABEL_CELL.to_string(), cell.to_string()),
        (LABEL_PID.to_string(), std::process::id().to_string()),
        (LABEL_HOST.to_string(), hostname()),
    ])
}
