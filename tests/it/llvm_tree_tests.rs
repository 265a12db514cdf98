//! A debug LLVM from a contributor's own git tree (`environment.llvm:
//! {debug: source, git, ref}`): the plan names the tree's commit (key,
//! hash, the toolchain build's source), a new commit is a new toolchain and
//! the same commit the same one, `--locked` keeps the locked commit, bad
//! trees are refused at their line; and on the real engine, a tree whose
//! `llvm/` is a small CMake project standing in for LLVM (the real one takes
//! an hour) goes through the toolchain build as LLVM would: only the paths
//! an LLVM-only build needs arrive in `/usr/src/llvm-source`, the lock names
//! the commit, a rerun reuses the snapshot and a new commit builds a new one.

use std::path::Path;

use rocmatrix::matrix_file::Spec;
use rocmatrix::plan::{build::BuildKind, Build, Plan};
use rocmatrix::source::Sources;
use serde_json::Value;

use crate::harness::*;

/// A git repository laid out as llvm-project: `llvm/` (a CMake project
/// building `llvm-mc`, which prints `word`), its tests, `cmake/` with the
/// version, `third-party/`, `clang/`, `lldb/` and a README. Its HEAD.
fn llvm_tree(dir: &Path, word: &str) -> String {
    let files: &[(&str, String)] = &[
        (
            "llvm/CMakeLists.txt",
            "cmake_minimum_required(VERSION 3.13)\nproject(FakeLLVM C)\n\
             add_executable(llvm-mc tools/llvm-mc/llvm-mc.c)\n\
             set_target_properties(llvm-mc PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)\n"
                .into(),
        ),
        (
            "llvm/tools/llvm-mc/llvm-mc.c",
            format!("#include <stdio.h>\nint main(void) {{\n  puts(\"fake llvm-mc {word}\");\n  return 0;\n}}\n"),
        ),
        ("llvm/test/MC/AMDGPU/hsa.s", "; a test\n".into()),
        ("llvm/unittests/Support/YAMLIOTest.cpp", "// a unit test\n".into()),
        ("cmake/Modules/LLVMVersion.cmake", "if(NOT DEFINED LLVM_VERSION_MAJOR)\n  set(LLVM_VERSION_MAJOR 23)\nendif()\n".into()),
        ("third-party/siphash/include/siphash/SipHash.h", "// siphash\n".into()),
        ("clang/CMakeLists.txt", "# clang\n".into()),
        ("lldb/CMakeLists.txt", "# lldb\n".into()),
        ("README.md", "llvm-project\n".into()),
    ];
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    if !dir.join(".git").exists() {
        git(dir, &["init", "-q"]);
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", word]);
    git(dir, &["rev-parse", "HEAD"])
}

fn matrix(tree: &Path, extra: &str) -> String {
    format!(
        "matrix:\n  flavour: [debug]\nenvironment:\n  base: \"debian:bookworm\"\n  llvm:\n    debug: source\n    git: {}\n    ref: main\n    tools: [llvm-mc]\n{extra}steps:\n  - name: look\n    run: |\n      llvm-mc-23\n      cat /opt/rocmatrix/llvm-debug/source/source\n      cd /usr/src/llvm-source && find . -type f | sort\n",
        tree.display()
    )
}

/// The plan of `text` (as `m.yaml` in `dir`), trees resolved on the host
/// with `lock`'s commits where it has them.
fn plan_in(
    dir: &Path,
    text: &str,
    lock: Option<&rocmatrix::store::lock::Lock>,
) -> Result<Plan, String> {
    let s = Spec::parse(&dir.join("m.yaml"), text).map_err(|e| e.to_string())?;
    let sources = Sources::new(&dir.join("cache"));
    let resolve = |url: &str, r: &str| {
        sources
            .tree_commit(url, r, lock)
            .map_err(rocmatrix::plan::TreeError::from)
    };
    Plan::build_with(&s, 64, Some(&resolve)).map_err(|e| e.to_string())
}

fn toolchain(p: &Plan) -> &Build {
    p.builds
        .iter()
        .find(|b| b.kind == BuildKind::LlvmDebug)
        .unwrap()
}

#[test]
fn the_plan_names_the_trees_commit_and_a_new_commit_is_a_new_toolchain() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("llvm-project");
    let first = llvm_tree(&tree, "one");
    let text = matrix(&tree, "");
    let p = plan_in(dir.path(), &text, None).unwrap();
    let tc = toolchain(&p);
    assert!(
        tc.key.ends_with(&format!("-{}", &first[..12])),
        "{}",
        tc.key
    );
    assert_eq!(tc.sources.len(), 1);
    assert_eq!(tc.sources[0].name, "llvm-tree");
    assert_eq!(tc.sources[0].url, tree.display().to_string());
    assert_eq!(tc.sources[0].reference, "main");
    assert_eq!(tc.sources[0].commit.as_deref(), Some(first.as_str()));
    assert_eq!(p.cells[0].build.as_deref(), Some(tc.key.as_str()));
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(
        json["cells"][0]["environment"]["llvm"]["source"]["git"], true,
        "{json}"
    );

    // The same commit: the same toolchain; a new one: a new key and hash,
    // the cell's hash with them, the environment (its image) unchanged.
    let again = plan_in(dir.path(), &text, None).unwrap();
    assert_eq!(
        (&toolchain(&again).key, &toolchain(&again).hash),
        (&tc.key, &tc.hash)
    );
    let second = llvm_tree(&tree, "two");
    let moved = plan_in(dir.path(), &text, None).unwrap();
    let tc2 = toolchain(&moved);
    assert!(
        tc2.key.ends_with(&format!("-{}", &second[..12])),
        "{}",
        tc2.key
    );
    assert_ne!(tc2.hash, tc.hash);
    assert_ne!(moved.cells[0].hash, p.cells[0].hash);
    assert_eq!(moved.cells[0].environment_hash, p.cells[0].environment_hash);

    // A tree's environment is not the Debian source's (its image fetches
    // no source), and patches still make a toolchain of their own.
    let debian = plan_in(
        dir.path(),
        &text.replace(&format!("    git: {}\n    ref: main\n", tree.display()), ""),
        None,
    )
    .unwrap();
    assert!(toolchain(&debian).sources.is_empty());
    assert_ne!(
        debian.cells[0].environment_hash,
        p.cells[0].environment_hash
    );
    std::fs::write(
        dir.path().join("fix.patch"),
        "--- a/llvm/x\n+++ b/llvm/x\n@@ -1 +1 @@\n-a\n+b\n",
    )
    .unwrap();
    let patched = plan_in(
        dir.path(),
        &text.replace(
            "    tools: [llvm-mc]\n",
            "    tools: [llvm-mc]\n    patches: [fix.patch]\n",
        ),
        None,
    )
    .unwrap();
    let tp = toolchain(&patched);
    assert!(tp.key.starts_with(&format!("{}-", tc2.key)), "{}", tp.key);
    assert_eq!(tp.steps[0].name, "patch");

    // --locked: the lock's commit, though main has moved on.
    let lock: rocmatrix::store::lock::Lock = serde_json::from_value(serde_json::json!({
        "lock_version": 1, "rocmatrix_version": "0", "matrix_file": "m.yaml", "matrix_hash": "",
        "environments": {}, "cells": {},
        "builds": {tc.key.clone(): {"hash": tc.hash, "environment": "", "snapshot": "", "id": "",
            "sources": [{"name": "llvm-tree", "url": tree.display().to_string(), "reference": "main",
                         "commit": first, "patches": []}]}}
    }))
    .unwrap();
    let locked = plan_in(dir.path(), &text, Some(&lock)).unwrap();
    assert_eq!(
        (&toolchain(&locked).key, &toolchain(&locked).hash),
        (&tc.key, &tc.hash)
    );
    assert_eq!(
        toolchain(&locked).sources[0].commit.as_deref(),
        Some(first.as_str())
    );
}

#[test]
fn bad_trees_are_refused_at_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("llvm-project");
    llvm_tree(&tree, "one");
    let text = matrix(&tree, "");
    let at = |t: &str| plan_in(dir.path(), t, None).unwrap_err();
    // Line 7 is `git:`.
    let plain = dir.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let e = at(&text.replace(&tree.display().to_string(), &plain.display().to_string()));
    assert!(
        e.contains("m.yaml:7") && e.contains("is not a git repository"),
        "{e}"
    );
    let e = at(&text.replace("ref: main", "ref: no-such-branch"));
    assert!(
        e.contains("m.yaml:7") && e.contains("ref `no-such-branch` not found"),
        "{e}"
    );
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("README"), "not llvm\n").unwrap();
    git(&other, &["init", "-q"]);
    git(&other, &["add", "-A"]);
    git(&other, &["commit", "-q", "-m", "x"]);
    let e = at(&text.replace(&tree.display().to_string(), &other.display().to_string()));
    assert!(
        e.contains("m.yaml:7") && e.contains("has no llvm/CMakeLists.txt: not an LLVM tree"),
        "{e}"
    );
    let e = at(&text.replace("debug: source", "debug: packages"));
    assert!(
        e.contains("m.yaml:7") && e.contains("environment.llvm.git needs `debug: source`"),
        "{e}"
    );
    let e = at(&text.replace(&format!("    git: {}\n", tree.display()), ""));
    assert!(
        e.contains("m.yaml:7") && e.contains("environment.llvm.ref needs `git:`"),
        "{e}"
    );
    // A path relative to the matrix file, and file:// URLs, are trees too.
    plan_in(
        dir.path(),
        &text.replace(&tree.display().to_string(), "llvm-project"),
        None,
    )
    .unwrap();
    plan_in(
        dir.path(),
        &text.replace(
            &tree.display().to_string(),
            &format!("file://{}", tree.display()),
        ),
        None,
    )
    .unwrap();
}

#[test]
fn validate_refuses_a_ref_that_does_not_resolve_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("llvm-project");
    llvm_tree(&tree, "one");
    let m = write(
        dir.path(),
        "m.yaml",
        &matrix(&tree, "").replace("ref: main", "ref: gone"),
    );
    let o = Rocmatrix::new().arg("validate").arg(&m).run();
    o.assert_code(2);
    assert!(
        o.text().contains("m.yaml:7") && o.text().contains("ref `gone` not found"),
        "{}",
        o.text()
    );
}

/// The paths the look step listed under /usr/src/llvm-source.
fn arrived(run: &Path) -> Vec<String> {
    let log = std::fs::read_to_string(run.join("cells/debug/logs/01-look.log")).unwrap();
    log.lines()
        .filter(|l| l.starts_with("./"))
        .map(str::to_string)
        .collect()
}

fn build_json(run: &Path, key: &str) -> Value {
    read_json(&run.join("builds").join(key).join("build.json"))
}

#[test]
fn an_llvm_tree_is_streamed_into_its_toolchain_build_reused_at_the_same_commit_and_rebuilt_at_a_new_one_for_real(
) {
    let Some(_engine) = engine_or_skip(
        "an_llvm_tree_is_streamed_into_its_toolchain_build_reused_at_the_same_commit_and_rebuilt_at_a_new_one_for_real",
    ) else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("llvm-project");
    let first = llvm_tree(&tree, "one");
    let m = write(dir.path(), "m.yaml", &matrix(&tree, ""));
    let t = std::time::Instant::now();
    let (o, run1) = run_into(dir.path(), &m, "first", &[]);
    eprintln!("llvm tree: run first: {:.0?}", t.elapsed());
    o.assert_success();
    let log = std::fs::read_to_string(run1.join("cells/debug/logs/01-look.log")).unwrap();
    assert!(log.contains("fake llvm-mc one"), "{log}");
    assert!(
        log.contains(&format!("commit {first}")) && log.contains("llvm 23"),
        "{log}"
    );
    let expected: Vec<String> = [
        "./.rocmatrix/patches-applied",
        "./.rocmatrix/patches-not-applied",
        "./.rocmatrix/source",
        "./cmake/Modules/LLVMVersion.cmake",
        "./llvm/CMakeLists.txt",
        "./llvm/tools/llvm-mc/llvm-mc.c",
        "./third-party/siphash/include/siphash/SipHash.h",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(arrived(&run1), expected);
    let lock = read_json(&run1.join("lock.json"));
    let key = lock["cells"]["debug"]["build"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(key.ends_with(&format!("-{}", &first[..12])), "{key}");
    let src = &lock["builds"][&key]["sources"][0];
    assert_eq!(
        (
            src["name"].as_str(),
            src["reference"].as_str(),
            src["commit"].as_str()
        ),
        (Some("llvm-tree"), Some("main"), Some(first.as_str())),
        "{lock}"
    );
    let snapshot1 = lock["builds"][&key]["snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        snapshot1.starts_with("rocmatrix/llvm-debug:"),
        "{snapshot1}"
    );
    assert_eq!(build_json(&run1, &key)["reused"], false);

    // The same commit: nothing built.
    let t = std::time::Instant::now();
    let (o, run2) = run_into(dir.path(), &m, "second", &[]);
    eprintln!("llvm tree: run second: {:.0?}", t.elapsed());
    o.assert_success();
    assert_eq!(build_json(&run2, &key)["reused"], true);
    assert_eq!(
        read_json(&run2.join("lock.json"))["builds"][&key]["snapshot"],
        snapshot1.as_str()
    );

    // A new commit: a new toolchain, its snapshot beside the first.
    let second = llvm_tree(&tree, "two");
    let t = std::time::Instant::now();
    let (o, run3) = run_into(dir.path(), &m, "third", &[]);
    eprintln!("llvm tree: run third: {:.0?}", t.elapsed());
    o.assert_success();
    let lock3 = read_json(&run3.join("lock.json"));
    let key3 = lock3["cells"]["debug"]["build"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(key3.ends_with(&format!("-{}", &second[..12])), "{key3}");
    assert_eq!(build_json(&run3, &key3)["reused"], false);
    assert_ne!(lock3["builds"][&key3]["snapshot"], snapshot1.as_str());
    let log = std::fs::read_to_string(run3.join("cells/debug/logs/01-look.log")).unwrap();
    assert!(log.contains("fake llvm-mc two"), "{log}");

    // The moved ref is in the diff of the two runs.
    let d = Rocmatrix::new().arg("diff").arg(&run1).arg(&run3).run();
    assert!(
        d.text().contains("source llvm-tree (main)")
            && d.text().contains(&first[..7])
            && d.text().contains(&second[..7]),
        "{}",
        d.text()
    );
}
