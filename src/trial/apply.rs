//! A run's plan with a try's patches in it: the tried cells, and the
//! builds they start from, get each patch appended to their `sources:`
//! entry of that name (after the matrix's own patches), and their hashes
//! fold in the patch's content. Environments are untouched, so the run's
//! environment images serve the try.
//!
//! Every patched checkout is made once here, before anything is built: a
//! patch that does not apply stops the try, naming its file and hunk.
//!
//! `--patch llvm=FILE` (when the matrix has no source named `llvm`)
//! patches the debug LLVM built from source instead: the tried cells'
//! toolchain builds get a first step applying it to the unpacked source
//! (`plan::toolchain::patch_step`), and every build and cell that starts
//! from one folds it into its hash, so the patched toolchain is a snapshot
//! of its own. Whether it applies is told by that step, before the
//! configure and the compile.

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
    let (llvm, patches): (Vec<&Patch>, Vec<&Patch>) =
        patches.iter().partition(|p| is_llvm(manifest, p));
    if !llvm.is_empty() {
        patch_llvm(&mut tried, &mut builds, &llvm)?;
    }
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
        selected_by: None,
        ..manifest.clone()
    })
}

/// The names of the `sources:` entries of the run's cells and builds.
fn source_names(manifest: &RunManifest) -> BTreeSet<&str> {
    manifest
        .cells
        .iter()
        .flat_map(|c| &c.sources)
        .chain(manifest.builds.iter().flat_map(|b| &b.sources))
        .map(|s| s.name.as_str())
        .collect()
}

/// Whether `p` is for the debug LLVM: named `llvm`, where the matrix has
/// no source of that name, or named after an LLVM git tree (whose
/// toolchain build streams the tree and applies patches as its first step).
fn is_llvm(manifest: &RunManifest, p: &Patch) -> bool {
    let names = source_names(manifest);
    (p.source == "llvm" && !names.contains("llvm"))
        || (p.source == crate::plan::toolchain::TREE && names.contains(p.source.as_str()))
}

/// `patches` as the first step of every toolchain build of `builds`,
/// folded into the hashes of those builds, the builds that start from them
/// and the cells that start from either.
fn patch_llvm(
    tried: &mut [crate::plan::Cell],
    builds: &mut [crate::plan::Build],
    patches: &[&Patch],
) -> Result<(), TrialError> {
    use crate::plan::build::BuildKind;
    use crate::plan::toolchain::patch_step;
    let toolchains: BTreeSet<String> = builds
        .iter()
        .filter(|b| b.kind == BuildKind::LlvmDebug)
        .map(|b| b.key.clone())
        .collect();
    if toolchains.is_empty() {
        return Err(TrialError(format!(
            "--patch llvm={}: none of the cells tried builds the debug LLVM from source \
             (`environment.llvm: {{debug: source}}`), and the matrix has no source named `llvm`",
            patches[0].given.display()
        )));
    }
    let names: Vec<String> = patches
        .iter()
        .map(|p| {
            p.given.file_name().map_or_else(
                || p.given.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let parts: Vec<(&str, &str, &str)> = patches
        .iter()
        .zip(&names)
        .map(|(p, n)| (n.as_str(), p.text.as_str(), p.sha256.as_str()))
        .collect();
    let step = patch_step(&parts);
    let fold_all = |hash: &str| patches.iter().fold(hash.to_string(), |h, p| fold(&h, p));
    for b in builds.iter_mut() {
        if toolchains.contains(&b.key) {
            b.steps.insert(0, step.clone());
            b.hash = fold_all(&b.hash);
        } else if b.from.as_ref().is_some_and(|f| toolchains.contains(f)) {
            b.hash = fold_all(&b.hash);
        }
    }
    let patched: BTreeSet<String> = builds
        .iter()
        .filter(|b| {
            toolchains.contains(&b.key) || b.from.as_ref().is_some_and(|f| toolchains.contains(f))
        })
        .map(|b| b.key.clone())
        .collect();
    for c in tried.iter_mut() {
        if c.build.as_ref().is_some_and(|k| patched.contains(k)) {
            c.hash = fold_all(&c.hash);
        }
    }
    Ok(())
}

/// Makes every patched checkout of `manifest` once: the first patch that
/// does not apply is the error.
pub fn check_applies(
    manifest: &RunManifest,
    patches: &[Patch],
    sources: &Sources,
) -> Result<(), TrialError> {
    // Sources::prepare checks each (source, patches) out once however many
    // cells and builds name it.
    let all = manifest
        .cells
        .iter()
        .flat_map(|c| &c.sources)
        .chain(manifest.builds.iter().flat_map(|b| &b.sources));
    for src in all {
        let kept = patches
            .iter()
            .any(|p| src.patches.contains(&p.kept.display().to_string()));
        if !kept {
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
    let names = source_names(manifest);
    let given = format!("--patch {}={}", p.source, p.given.display());
    if !names.contains(p.source.as_str()) {
        let known = match names.is_empty() {
            true => "it has no `sources:`".to_string(),
            false => format!(
                "its sources: {}",
                names.iter().copied().collect::<Vec<_>>().join(", ")
            ),
        };
        return Err(TrialError(format!(
            "{given}: the run's matrix has no source `{}` ({known})",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::build::BuildKind;
    use crate::plan::toolchain::PATCH_STEP;

    /// A run's manifest of a matrix whose debug cells build LLVM from
    /// source and a matrix build on top of it.
    fn manifest() -> RunManifest {
        let text = "matrix:\n  flavour: [release, debug]\nenvironment:\n  base: \"debian:sid\"\n  \
                    llvm:\n    debug: \"{{ 'source' if matrix.flavour == 'debug' else 'none' }}\"\n    \
                    tools: [llvm-mc]\nbuild:\n  per: [flavour]\n  steps:\n    - name: make\n      run: make\n\
                    steps:\n  - name: assemble\n    run: llvm-mc --version\n";
        let spec = crate::matrix_file::Spec::parse(std::path::Path::new("m.yaml"), text).unwrap();
        let plan = crate::plan::Plan::build(&spec, 64).unwrap();
        RunManifest {
            store_version: crate::store::record::STORE_VERSION,
            run_id: "r".into(),
            rocmatrix_version: "0".into(),
            name: "m".into(),
            matrix_file: "m.yaml".into(),
            matrix_hash: "h".into(),
            keys: plan.keys.clone(),
            expect: Vec::new(),
            classify: Vec::new(),
            report: spec.report.clone(),
            shard: None,
            selected_by: None,
            cells: plan.cells,
            builds: plan.builds,
        }
    }

    fn patch(name: &str) -> Patch {
        let text =
            "--- a/llvm/lib/MC/x.cpp\n+++ b/llvm/lib/MC/x.cpp\n@@ -1 +1 @@\n-a\n+b\n".to_string();
        Patch {
            source: "llvm".into(),
            given: format!("/tmp/{name}").into(),
            sha256: crate::digest::sha256_hex(text.as_bytes()),
            kept: "/cache/try/patches/x.patch".into(),
            text,
        }
    }

    #[test]
    fn an_llvm_patch_is_the_toolchains_first_step_and_every_hash_after_it_follows() {
        let m = manifest();
        let cells: Vec<String> = m.cells.iter().map(|c| c.id.clone()).collect();
        let tried = patched(&m, &cells, &[patch("fix-yn.patch")]).unwrap();
        let tc = tried
            .builds
            .iter()
            .find(|b| b.kind == BuildKind::LlvmDebug)
            .unwrap();
        let before = m.builds.iter().find(|b| b.key == tc.key).unwrap();
        assert_eq!(tc.steps[0].name, PATCH_STEP);
        assert!(tc.steps[0].run.contains("applying fix-yn.patch"));
        assert!(tc.steps[0].run.contains("+++ b/llvm/lib/MC/x.cpp"));
        assert_eq!(tc.steps[1..], before.steps[..]);
        assert_ne!(tc.hash, before.hash);
        for (b, was) in tried.builds.iter().zip(&m.builds) {
            // The debug build starts from the toolchain; the release one not.
            let follows = b.key == tc.key || b.from.as_deref() == Some(tc.key.as_str());
            assert_eq!(b.hash != was.hash, follows, "{}", b.key);
        }
        for (c, was) in tried.cells.iter().zip(&m.cells) {
            let debug = c.value("flavour") == Some("debug");
            assert_eq!(c.hash != was.hash, debug, "{}", c.id);
        }
    }

    #[test]
    fn an_llvm_patch_for_cells_that_build_no_llvm_is_refused() {
        let m = manifest();
        let release: Vec<String> = m
            .cells
            .iter()
            .filter(|c| c.value("flavour") == Some("release"))
            .map(|c| c.id.clone())
            .collect();
        let e = patched(&m, &release, &[patch("fix-yn.patch")]).unwrap_err();
        assert!(
            e.0.contains(
                "--patch llvm=/tmp/fix-yn.patch: none of the cells tried builds the debug LLVM"
            ),
            "{e}"
        );
    }
}
