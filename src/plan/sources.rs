//! Rendering a cell's `sources:`: URLs and refs from templates, local paths
//! and patch files resolved against the matrix file's directory, patch globs
//! expanded in name order.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::Renderer;
use crate::matrix_file::{SourceTemplate, Spec, SpecError};

/// A source as one cell sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceRef {
    pub name: String,
    /// A URL git understands, or an absolute local path.
    pub url: String,
    /// Branch, tag or commit.
    pub reference: String,
    /// Absolute paths of the patches, in the order they apply.
    pub patches: Vec<String>,
    /// The commit `reference` was resolved to when the plan was made (an
    /// LLVM tree's); none: it is resolved at checkout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

pub fn render(
    spec: &Spec,
    r: &Renderer,
    src: &SourceTemplate,
    ctx: &minijinja::Value,
    cell: &str,
) -> Result<SourceRef, SpecError> {
    let base = spec
        .file
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let url = url_from(&base, r.render(&src.url, ctx, cell)?.trim());
    let mut patches = Vec::new();
    for t in &src.patches {
        let pattern = r.render(t, ctx, cell)?.trim().to_string();
        if pattern.is_empty() {
            continue;
        }
        let full = base.join(&pattern);
        let name = full
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.contains(['*', '?', '[']) {
            let dir = full.parent().unwrap_or(Path::new("."));
            let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
                .map(|rd| {
                    rd.filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|p| {
                            p.is_file()
                                && p.file_name().is_some_and(|n| {
                                    crate::plan::glob::matches(&name, &n.to_string_lossy())
                                })
                        })
                        .collect()
                })
                .unwrap_or_default();
            found.sort();
            if found.is_empty() {
                return Err(spec.error_at(
                    t.pos,
                    format!(
                        "sources: patch glob `{pattern}` matches no file in {}",
                        dir.display()
                    ),
                ));
            }
            patches.extend(found.iter().map(|p| absolute(p).display().to_string()));
        } else {
            if !full.is_file() {
                return Err(spec.error_at(
                    t.pos,
                    format!("sources: patch `{pattern}` not found ({})", full.display()),
                ));
            }
            patches.push(absolute(&full).display().to_string());
        }
    }
    Ok(SourceRef {
        name: src.name.clone(),
        url,
        reference: r.render(&src.reference, ctx, cell)?.trim().to_string(),
        patches,
        commit: None,
    })
}

/// A URL git understands as it is, or a path relative to `base` made
/// absolute.
pub fn url_from(base: &Path, url: &str) -> String {
    if url.contains("://") || url.contains('@') || Path::new(url).is_absolute() {
        url.to_string()
    } else {
        absolute(&base.join(url)).display().to_string()
    }
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}
