//! What a cell's `autopkgtest:` steps installed when their tests ran:
//! autopkgtest's own list per test, `<test>-packages` (`package\tversion`
//! a line), in each step's output directory under the cell
//! (`autopkgtest/<NN-step>/`). No lock holds these: a test installs its
//! `Depends:` as it starts. `testbed-packages` (the whole testbed before
//! the tests) is not read: the lock has it.

use std::collections::BTreeMap;
use std::path::Path;

/// The folder of a cell's autopkgtest output directories, one per step.
pub const AUTOPKGTEST: &str = "autopkgtest";

/// The most step folders, and files in each, looked at.
const MAX_ENTRIES: usize = 256;
/// The largest list read.
const MAX_LIST: u64 = 1 << 20;
/// autopkgtest's list of the testbed, not of a test.
const TESTBED: &str = "testbed-packages";

/// Package → version, every test of every autopkgtest step of cell `cell`
/// in run `run_dir` together; empty when it has none (or they cannot be
/// read: this only widens what a change selects).
pub fn of_cell(run_dir: &Path, cell: &str) -> BTreeMap<String, String> {
    let steps = run_dir
        .join(super::layout::CELLS)
        .join(cell)
        .join(AUTOPKGTEST);
    let mut out = BTreeMap::new();
    for step in entries(&steps) {
        for list in entries(&step) {
            let name = list.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !name.ends_with("-packages") || name == TESTBED {
                continue;
            }
            let Ok(text) = crate::safe_read::read_bounded_string(&list, MAX_LIST, "", "") else {
                continue;
            };
            for line in text.lines() {
                let mut words = line.split_whitespace();
                if let (Some(p), Some(v)) = (words.next(), words.next()) {
                    out.insert(p.to_string(), v.to_string());
                }
            }
        }
    }
    out
}

/// A folder's entries, sorted, at most [`MAX_ENTRIES`]; none when it is not one.
fn entries(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<_> = read
        .take(MAX_ENTRIES)
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_kept_cells_tests_installed_what_autopkgtest_listed() {
        let run = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/debian-autopkgtest/run");
        let rocsolver = super::of_cell(&run, "sid.gfx1030.rocsolver");
        assert_eq!(
            rocsolver.get("librocblas4").map(String::as_str),
            Some("6.4.4-4")
        );
        // The testbed's own list is the lock's business.
        assert!(!rocsolver.contains_key("base-files"), "{rocsolver:?}");
        assert!(super::of_cell(&run, "sid.gfx1030.amdsmi").is_empty());
    }
}
