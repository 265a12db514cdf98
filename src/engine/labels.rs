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

/// On an image this process made, which of its labels are the handle's
/// `--label` ones (`ROCMATRIX_LABEL`), comma-separated. An image built FROM
/// it inherits them; [`handed_down`] blanks those that are not the
/// building handle's own, so that whoever sweeps by `--label` removes only
/// what its own runs made (an environment built on a base that another,
/// labelled invocation bootstrapped is not that invocation's).
pub const LABEL_KEYS: &str = "rocmatrix.labels";

/// The labels an image built FROM an image labelled `from` needs beside
/// the build's own, for a handle whose `--label` labels are `own`: each
/// inherited `--label` key that is not one of `own` emptied, and
/// [`LABEL_KEYS`] naming `own`'s keys.
pub fn handed_down(
    from: &HashMap<String, String>,
    own: &HashMap<String, String>,
) -> HashMap<String, String> {
    let mut out: HashMap<String, String> = from
        .get(LABEL_KEYS)
        .into_iter()
        .flat_map(|keys| keys.split(','))
        .filter(|k| !k.is_empty() && !own.contains_key(*k))
        .map(|k| (k.to_string(), String::new()))
        .collect();
    out.insert(LABEL_KEYS.to_string(), keys_of(own));
    out
}

/// `own`'s keys, sorted and comma-separated (the value of [`LABEL_KEYS`]).
pub fn keys_of(own: &HashMap<String, String>) -> String {
    let mut keys: Vec<&str> = own.keys().map(String::as_str).collect();
    keys.sort_unstable();
    keys.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn inherited_label_keys_not_of_the_builder_are_emptied() {
        let base = map(&[
            ("rocmatrix.test-run", "vm-1-2"),
            ("ci-job", "7"),
            ("org.opencontainers.image.title", "debian"),
            (LABEL_KEYS, "ci-job,rocmatrix.test-run"),
        ]);
        let own = map(&[("ci-job", "8")]);
        let got = handed_down(&base, &own);
        assert_eq!(
            got,
            map(&[("rocmatrix.test-run", ""), (LABEL_KEYS, "ci-job")]),
            "the builder's own key is set by its handle, other image labels stay"
        );
        // A base made without `--label`, built on without one.
        assert_eq!(handed_down(&map(&[]), &map(&[])), map(&[(LABEL_KEYS, "")]));
    }
}
