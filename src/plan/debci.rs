//! The plan as the ROCm team's debci (ci.rocm.debian.net) sees its work:
//! workers labelled `ARCH+gfxNNNN` (`amd64+gfx1030`), each running the
//! autopkgtests of source packages in a suite. One line per label, suite
//! and package, with the cells it stands for, so that one matrix file
//! describes both rocmatrix's cells and the debci workers' jobs.
//!
//! The architecture is the cell's `arch` axis value where it has one, else
//! `amd64`; the GPU part is the cell's `gpu.target`, without which the label
//! is the architecture alone (a worker without a GPU). The suite is the
//! environment's preferred suite (`prefer: experimental`), else its suite,
//! else the cell's `suite` axis value. Packages are the `source:` of its
//! `autopkgtest:` steps; a cell without one gives no line.

use std::collections::BTreeMap;

use super::{Cell, TestSuite};

/// One debci job: a worker label, a suite and a source package.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Job {
    pub label: String,
    pub suite: String,
    pub package: String,
}

/// The `ARCH+gfx` label of a cell.
pub fn label(cell: &Cell) -> String {
    let arch = value(cell, "arch").unwrap_or("amd64");
    match cell.gpu.target.as_deref().filter(|t| !t.is_empty()) {
        Some(gfx) => format!("{arch}+{gfx}"),
        None => arch.to_string(),
    }
}

fn value<'a>(cell: &'a Cell, key: &str) -> Option<&'a str> {
    cell.values
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The suite debci would test the cell's packages in.
fn suite(cell: &Cell) -> String {
    let env = cell.environment.as_ref();
    env.and_then(|e| e.prefer.clone().filter(|p| !p.is_empty()))
        .or_else(|| env.and_then(|e| e.suite.clone().filter(|s| !s.is_empty())))
        .or_else(|| value(cell, "suite").map(str::to_string))
        .unwrap_or_else(|| "unstable".into())
}

/// Every job of `cells`, each with the ids of the cells it stands for, in
/// label, suite and package order.
pub fn jobs(cells: &[Cell]) -> BTreeMap<Job, Vec<String>> {
    let mut out: BTreeMap<Job, Vec<String>> = BTreeMap::new();
    for cell in cells {
        for step in &cell.steps {
            let Some(TestSuite::Autopkgtest(a)) = &step.suite else {
                continue;
            };
            let Some(package) = a.source.as_ref().filter(|s| !s.is_empty()) else {
                continue;
            };
            let job = Job {
                label: label(cell),
                suite: suite(cell),
                package: package.clone(),
            };
            out.entry(job).or_default().push(cell.id.clone());
        }
    }
    out
}

/// The jobs as text: `LABEL SUITE PACKAGE  # cells: a, b`, one a line.
pub fn render(cells: &[Cell]) -> String {
    let mut text = String::new();
    for (job, ids) in jobs(cells) {
        text.push_str(&format!(
            "{} {} {}  # cells: {}\n",
            job.label,
            job.suite,
            job.package,
            ids.join(", ")
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flagship_as_debci_jobs() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/matrix/debian-autopkgtest.yaml"
        ))
        .unwrap();
        let path = std::path::Path::new("matrix/debian-autopkgtest.yaml");
        let spec = crate::matrix_file::Spec::parse(path, &text).unwrap();
        let plan = crate::plan::Plan::build(&spec, 4096).unwrap();
        let out = render(&plan.cells);
        let lines: Vec<&str> = out.lines().collect();
        // The ROCm team's 58 (suite, source) pairs with autopkgtests in sid
        // and experimental (scripts/rocm-autopkgtests, November 2026) on
        // three gfx targets; the packaging checkout (path:) is not a debci
        // job.
        assert_eq!(lines.len(), 58 * 3, "{out}");
        assert_eq!(
            lines[0],
            "amd64+gfx1030 experimental composable-kernel  # cells: experimental.gfx1030.composable-kernel"
        );
        assert!(
            out.contains("amd64+gfx90a sid rocfft  # cells: sid.gfx90a.rocfft\n"),
            "{out}"
        );
    }
}
