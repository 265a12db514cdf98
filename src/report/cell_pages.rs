//! One page per cell: `report/cells/<cell>.html`, with the cell's
//! non-passing tests and its failing steps' log tails.
//!
//! A browser lays out every element of a page before it answers, so a
//! million-test report whose index listed each cell's tests took seconds to
//! open. index.html lists the tests itself only while they are small
//! ([`INLINE_BYTES`]); beyond that each cell in it links to its page and the
//! index holds the signatures, the grid and the cells' summaries. The pages
//! are written either way, so a link to a cell's page always works.

use std::collections::HashSet;
use std::path::Path;

use serde::Serialize;

use super::cell_view::CellView;
use super::view::View;
use super::ReportError;

/// index.html lists the cells' tests and log tails itself while their text
/// stays under this; above it, the cells' pages carry them.
pub const INLINE_BYTES: usize = 512 * 1024;

/// The directory of the pages, under the report directory.
pub const DIR: &str = "cells";

/// A page's file name for a cell id: see [`file_stem`].
pub fn file_name(id: &str) -> String {
    format!("{}.html", file_stem(id))
}

/// A file name (without extension) for a cell id: the id itself where it is
/// a safe file name, else the id with other characters as `_` and a hash of
/// the id, so that two ids never share a file. Only `[A-Za-z0-9._-]`.
pub fn file_stem(id: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if !id.is_empty() && id.len() <= 120 && !id.starts_with('.') && id.chars().all(safe) {
        return id.to_string();
    }
    let stem: String = id
        .chars()
        .take(80)
        .map(|c| if safe(c) { c } else { '_' })
        .collect();
    let hash = crate::results::model::test_hash("cell", "", id);
    format!("{}-{hash:016x}", stem.trim_start_matches('.'))
}

/// Bytes of the tests and log tails the cells of `view` list.
pub fn details_bytes(view: &View) -> usize {
    view.cells
        .iter()
        .map(|c| {
            c.tests
                .iter()
                .map(|t| t.name.len() + t.message.len() + t.output.len() + 200)
                .sum::<usize>()
                + c.steps.iter().map(|s| s.log_tail.len()).sum::<usize>()
        })
        .sum()
}

#[derive(Serialize)]
struct Page<'a> {
    name: &'a str,
    cell: &'a CellView,
}

/// Writes one page per cell into `out/cells/`, replacing the pages an
/// earlier report wrote there. Returns how many it wrote.
pub fn write(name: &str, cells: &[CellView], out: &Path) -> Result<usize, ReportError> {
    let dir = out.join(DIR);
    std::fs::create_dir_all(&dir).map_err(super::io(&dir))?;
    let mut env = super::env();
    super::add_templates(&mut env)?;
    let template = env
        .get_template("cell.html")
        .map_err(|e| ReportError::Template {
            name: "cell.html",
            source: e,
        })?;
    let mut written = HashSet::new();
    for cell in cells {
        let file = file_name(&cell.id);
        let html = template
            .render(Page { name, cell })
            .map_err(|e| ReportError::Template {
                name: "cell.html",
                source: e,
            })?;
        super::write_atomic(&dir.join(&file), html.as_bytes())?;
        written.insert(file);
    }
    remove_stale(&dir, ".html", &written)?;
    Ok(written.len())
}

/// Removes the files ending in `ext` in `dir` (of cells an earlier report
/// had) that are not in `keep`.
pub fn remove_stale(dir: &Path, ext: &str, keep: &HashSet<String>) -> Result<(), ReportError> {
    for entry in std::fs::read_dir(dir).map_err(super::io(dir))? {
        let entry = entry.map_err(super::io(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(ext) && !keep.contains(&name) {
            let path = entry.path();
            std::fs::remove_file(&path).map_err(super::io(&path))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_names_are_safe_and_distinct() {
        assert_eq!(file_name("sid.gfx1030"), "sid.gfx1030.html");
        let a = file_name("../etc/passwd");
        let b = file_name(".._etc_passwd");
        assert!(!a.contains('/') && !a.starts_with('.'), "{a}");
        assert_ne!(a, b);
        assert_ne!(file_name("a b"), file_name("a_b"));
        assert!(file_name(&"x".repeat(500)).len() < 120);
        assert!(!file_name("").is_empty());
    }
}
