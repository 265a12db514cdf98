//! Git sources: a repository made here, a patch series applied with git2, the
//! checkout streamed into the cell's container, commits and patch hashes in
//! the lock; a patch that does not apply is named with its hunk.

use std::path::Path;

use crate::harness::*;

/// A repository with a `rocm-6.4` branch, and a two-patch series on top of it.
fn fixture(root: &Path) -> (std::path::PathBuf, String) {
    let repo = root.join("upstream");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(
        repo.join("kernel.s"),
        "; kernel\n.amdgcn_target \"gfx900\"\narg N\narg Y\n",
    )
    .unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "initial"]);
    git(&repo, &["checkout", "-qb", "rocm-6.4"]);
    std::fs::write(repo.join("README"), "MIOpen-like\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "release branch"]);
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    // The series: rename the YAML-boolean-looking arguments, then add a file.
    git(&repo, &["checkout", "-qb", "fixes"]);
    std::fs::write(
        repo.join("kernel.s"),
        "; kernel\n.amdgcn_target \"gfx900\"\narg N_\narg Y_\n",
    )
    .unwrap();
    git(&repo, &["commit", "-qam", "rename N and Y"]);
    std::fs::write(repo.join("FIXED"), "yes\n").unwrap();
    git(&repo, &["add", "FIXED"]);
    git(&repo, &["commit", "-qm", "mark fixed"]);
    let patches = root.join("patches");
    git(
        &repo,
        &[
            "format-patch",
            "-q",
            "-o",
            patches.to_str().unwrap(),
            "rocm-6.4..fixes",
        ],
    );
    git(&repo, &["checkout", "-q", "main"]);
    (repo, commit)
}

fn matrix(dir: &Path, repo: &Path, patches: &str) -> std::path::PathBuf {
    write(
        dir,
        "m.yaml",
        &format!(
            "name: src\nmatrix:\n  rocm: ['6.4']\nenvironment:\n  base: debian:bookworm\nsources:\n  - name: miopen\n    url: {}\n    ref: rocm-{{{{ matrix.rocm }}}}\n    patches: ['{patches}']\nsteps:\n  - name: look\n    run: |\n      cat /src/miopen/kernel.s\n      test -f /src/miopen/FIXED\n      grep -q 'arg N_' /src/miopen/kernel.s\n",
            repo.display()
        ),
    )
}

#[test]
fn a_patch_series_applies_and_the_checkout_reaches_the_container() {
    let Some(_engine) =
        engine_or_skip("a_patch_series_applies_and_the_checkout_reaches_the_container")
    else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let (repo, commit) = fixture(dir.path());
    let m = matrix(dir.path(), &repo, "patches/*.patch");
    let cache = dir.path().join("cache");
    let mut locks = Vec::new();
    for n in 0..2 {
        let out = dir.path().join(format!("out{n}"));
        let o = Rocmatrix::run_matrix(&m)
            .progress_plain()
            .out(&out)
            .env("ROCMATRIX_CACHE", &cache)
            .run();
        o.assert_success();
        let run = o.run_store();
        let cell = cell_json(&run, "6.4");
        assert!(
            cell["steps"][0]["log_tail"]
                .as_str()
                .unwrap()
                .contains("arg Y_"),
            "{cell:#}"
        );
        let lock: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run.join("lock.json")).unwrap()).unwrap();
        locks.push(lock["cells"].clone());
    }
    assert_eq!(locks[0], locks[1], "the same sources in both locks");
    let src = &locks[0]["6.4"]["sources"][0];
    assert_eq!(src["commit"], commit.as_str());
    assert_eq!(src["reference"], "rocm-6.4");
    let patches = src["patches"].as_array().unwrap();
    assert_eq!(patches.len(), 2);
    assert!(patches[0]["file"]
        .as_str()
        .unwrap()
        .ends_with("0001-rename-N-and-Y.patch"));
    assert_eq!(patches[0]["sha256"].as_str().unwrap().len(), 64);
    // The mirror is cached and fetched incrementally.
    assert_eq!(std::fs::read_dir(cache.join("git")).unwrap().count(), 1);
}

#[test]
fn a_patch_that_does_not_apply_is_named_with_its_hunk() {
    let Some(_engine) = engine_or_skip("a_patch_that_does_not_apply_is_named_with_its_hunk") else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let (repo, _) = fixture(dir.path());
    // The first patch once more at the end: its context is gone by then.
    let p1 = std::fs::read_dir(dir.path().join("patches"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("0001"))
        .unwrap();
    std::fs::copy(&p1, dir.path().join("patches/0003-again.patch")).unwrap();
    let m = matrix(dir.path(), &repo, "patches/*.patch");
    let out = dir.path().join("out");
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(&out)
        .env("ROCMATRIX_CACHE", dir.path().join("cache"))
        .run();
    o.assert_code(3);
    let cell = cell_json(&o.run_store(), "6.4");
    assert_eq!(cell["status"], "error");
    let reason = cell["reason"].as_str().unwrap();
    assert!(
        reason.contains("patch 0003-again.patch does not apply"),
        "{reason}"
    );
    assert!(
        reason.contains("hunk `@@ -1,4 +1,4 @@") && reason.contains("kernel.s"),
        "{reason}"
    );
}
