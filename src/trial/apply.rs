//! A run's plan with a try's patches in it: the tried cells, and the
//! builds they start from, get each patch appended to their `sources:`
//! entry of that name (after the matrix's own patches), and their hashes
//! fold in the patch's content. Environments are untouched, so the run's
//! environment images serve the try.
//!
//! Every patched checkout is made once here, before anything is built: a
//! patch that does not apply stops the try, naming its file and hunk.

use std::collections::BTreeSet;

use super::patch::Patch;
use super::TrialError;
use crate::plan::SourceRef;
use crate::source::{SourceError, Sources};
use crate::store::record::RunManifest;

/// `manifest` cut to `cells` (and the builds they start from) with
/// `patches` applied to their sources.
pub fn patched(
    manifest: &RunManifest,
    cells: &[String],
    patches: &[Patch],
) -> Result<RunManifest, TrialError> {
    let mut tried: Vec<_> = manifest
        .cells
        .iter()
        .filter(|c| cells.contains(&c.id))
        .cloned()
        .collect();
    let mut keys: BTreeSet<String> = tried.iter().filter_map(|c| c.build.clone()).collect();
    // A build starts from another (a toolchain build): keep the chain.
    loop {
        let from: BTreeSet<String> = manifest
            .builds
            .iter()
            .filter(|b| keys.contains(&b.key))
            .filter_map(|b| b.from.clone())
            .filter(|k| !keys.contains(k))
            .collect();
        if from.is_empty() {
            break;
        }
        keys.extend(from);
    }
    let mut builds: Vec<_> = manifest
        .builds
        .iter()
        .filter(|b| keys.contains(&b.key))
        .cloned()
        .collect();
    for p in patches {
        check_named(manifest, &tried, &builds, p)?;
        for c in &mut tried {
            if add(&mut c.sources, p) {
                c.hash = fold(&c.hash, p);
            }
        }
        for b in &mut builds {
            if add(&mut b.sources, p) {
                b.hash = fold(&b.hash, p);
            }
        }
    }
    Ok(RunManifest {
        cells: tried,
        builds,
        ..manifest.clone()
    })
}

/// Makes every patched checkout of `manifest` once: the first patch that
/// does not apply is the error.
pub fn check_applies(
    manifest: &RunManifest,
    patches: &[Patch],
    sources: &Sources,
) -> Result<(), TrialError> {
    let mut seen = BTreeSet::new();
    let all = manifest
        .cells
        .iter()
        .flat_map(|c| &c.sources)
        .chain(manifest.builds.iter().flat_map(|b| &b.sources));
    for src in all {
        let kept = patches
            .iter()
            .any(|p| src.patches.contains(&p.kept.display().to_string()));
        if !kept || !seen.insert(format!("{src:?}")) {
            continue;
        }
        sources.prepare(src).map_err(|e| words(e, src, patches))?;
    }
    Ok(())
}

/// The error of a patched checkout, naming the patch as it was given.
fn words(e: SourceError, src: &SourceRef, patches: &[Patch]) -> TrialError {
    if let SourceError::Patch { patch, hunk, .. } = &e {
        if let Some(p) = patches.iter().find(|p| {
            p.kept
                .file_name()
                .is_some_and(|n| n.to_string_lossy() == *patch)
        }) {
            return TrialError(format!(
                "--patch {}={}: does not apply to {} at {}: {hunk}; nothing was built",
                p.source,
                p.given.display(),
                src.url,
                src.reference
            ));
        }
    }
    TrialError(format!("{e}; nothing was built"))
}

/// Whether the run's matrix has the source `p` names and the tried cells
/// check it out.
fn check_named(
    manifest: &RunManifest,
    tried: &[crate::plan::Cell],
    builds: &[crate::plan::Build],
    p: &Patch,
) -> Result<(), TrialError> {
    let names: BTreeSet<&str> = manifest
        .cells
        .iter()
        .flat_map(|c| &c.sources)
        .chain(manifest.builds.iter().flat_map(|b| &b.sources))
        .map(|s| s.name.as_str())
        .collect();
    let given = format!("--patch {}={}", p.source, p.given.display());
    if !names.contains(p.source.as_str()) {
        let known = match names.is_empty() {
            true => "it has no `sources:`".to_string(),
            false => format!(
                "its sources: {}",
                names.iter().copied().collect::<Vec<_>>().join(", ")
            ),
        };
        let llvm = match p.source == "llvm" {
            true => "; try cannot patch the debug LLVM (`environment.llvm`) yet",
            false => "",
        };
        return Err(TrialError(format!(
            "{given}: the run's matrix has no source `{}` ({known}){llvm}",
            p.source
        )));
    }
    let used = tried
        .iter()
        .flat_map(|c| &c.sources)
        .chain(builds.iter().flat_map(|b| &b.sources))
        .any(|s| s.name == p.source);
    if !used {
        return Err(TrialError(format!(
            "{given}: none of the cells tried ({}) checks out source `{}`",
            tried
                .iter()
                .map(|c| c.id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            p.source
        )));
    }
    Ok(())
}

/// Appends `p` to the source it names in `sources`: whether there was one.
fn add(sources: &mut [SourceRef], p: &Patch) -> bool {
    let mut added = false;
    for s in sources.iter_mut().filter(|s| s.name == p.source) {
        s.patches.push(p.kept.display().to_string());
        added = true;
    }
    added
}

/// `hash` with the patch's content folded in.
fn fold(hash: &str, p: &Patch) -> String {
    crate::digest::sha256_hex(format!("{hash}\0try\0{}\0{}", p.source, p.sha256).as_bytes())
}
