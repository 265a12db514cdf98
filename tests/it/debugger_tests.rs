//! Backtraces (`backtrace:`) on the real engine: a small C tool and a
//! googletest binary built in a build stage with and without debug info;
//! the tool's diagnostic and the test's crash come back as backtraces that
//! name functions, files and lines (or say there is no debug info); gdb's
//! timeout holds against a command that never stops; the snapshot is
//! reused by a second run and survives `images --prune`.

use std::path::Path;

use serde_json::Value;

use crate::harness::*;
use rocmatrix::matrix_file::Spec;
use rocmatrix::plan::Plan;

fn plan(text: &str) -> Result<Plan, String> {
    let s = Spec::parse(Path::new("m.yaml"), text).map_err(|e| e.to_string())?;
    Plan::build(&s, 4096).map_err(|e| e.to_string())
}

const SOURCE: &str = r#"matrix:
  flavour: [release, debug]
  gfx: [gfx900, gfx1030]
environment:
  base: "debian:sid"
  packages: [llvm-21]
  llvm:
    debug: "{{ 'source' if matrix.flavour == 'debug' else 'none' }}"
    tools: [llvm-mc]
steps:
  - name: assemble
    backtrace: {on: error, break: [llvm::MCAsmParser::Error]}
    run: llvm-mc-21 --version
"#;

#[test]
fn a_source_llvm_is_one_toolchain_build_per_environment_that_its_cells_start_from() {
    let p = plan(SOURCE).unwrap();
    let keys: Vec<&str> = p.builds.iter().map(|b| b.key.as_str()).collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let tc = &p.builds[0];
    assert!(tc.key.starts_with("llvm-debug-"), "{}", tc.key);
    assert_eq!(tc.kind, rocmatrix::plan::build::BuildKind::LlvmDebug);
    let steps: Vec<&str> = tc.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(steps, ["configure", "compile", "install"]);
    assert!(tc.steps[0].run.contains("-DLLVM_TARGETS_TO_BUILD='AMDGPU'"));
    assert!(tc.steps[0].run.contains("-DCMAKE_BUILD_TYPE=Debug"));
    assert!(tc.steps[1]
        .run
        .contains("ninja -C /work/llvm-build -j \"$(nproc)\" llvm-mc"));
    for c in &p.cells {
        let debug = c.value("flavour") == Some("debug");
        assert_eq!(
            c.build.as_deref() == Some(tc.key.as_str()),
            debug,
            "{}",
            c.id
        );
        assert!(c.steps[0].backtrace.is_some());
    }
    // The release cells' environment is exactly `llvm: release`'s.
    let plain = plan(&SOURCE.replace(
        "  llvm:\n    debug: \"{{ 'source' if matrix.flavour == 'debug' else 'none' }}\"\n    tools: [llvm-mc]\n",
        "",
    ))
    .unwrap();
    assert_eq!(p.cells[0].environment_hash, plain.cells[0].environment_hash);
    assert_ne!(p.cells[0].environment_hash, p.cells[2].environment_hash);
}

/// `environment.llvm.patches`: the toolchain build applies them first, is a
/// toolchain of its own (key and hash), and the environment's image is the
/// unpatched one's; a missing or binary patch is refused at its line.
#[test]
fn llvm_patches_are_the_toolchains_first_step_and_leave_the_environment_alone() {
    let dir = tempfile::tempdir().unwrap();
    let fix = "--- a/llvm/lib/Support/YAMLTraits.cpp\n+++ b/llvm/lib/Support/YAMLTraits.cpp\n@@ -1 +1 @@\n-a\n+b\n";
    std::fs::write(dir.path().join("fix-yn.patch"), fix).unwrap();
    let file = dir.path().join("m.yaml");
    let at = |text: &str| {
        let s = Spec::parse(&file, text).map_err(|e| e.to_string())?;
        Plan::build(&s, 4096).map_err(|e| e.to_string())
    };
    let patched_text = SOURCE.replace(
        "    tools: [llvm-mc]\n",
        "    tools: [llvm-mc]\n    patches: [fix-yn.patch]\n",
    );
    let plain = at(SOURCE).unwrap();
    let patched = at(&patched_text).unwrap();
    let tc = |p: &Plan| {
        p.builds
            .iter()
            .find(|b| b.key.starts_with("llvm-debug-"))
            .unwrap()
            .clone()
    };
    let (was, now) = (tc(&plain), tc(&patched));
    assert!(now.key.starts_with(&format!("{}-", was.key)), "{}", now.key);
    assert_eq!(now.steps[0].name, "patch");
    assert!(now.steps[0].run.contains("applying fix-yn.patch"));
    assert!(now.steps[0].run.contains(fix));
    assert_eq!(now.steps[1..], was.steps[..]);
    assert_ne!(now.hash, was.hash);
    for (a, b) in plain.cells.iter().zip(&patched.cells) {
        assert_eq!(a.environment_hash, b.environment_hash, "{}", a.id);
        let debug = a.value("flavour") == Some("debug");
        assert_eq!(a.hash != b.hash, debug, "{}", a.id);
    }
    let e = at(&patched_text.replace("fix-yn.patch", "gone.patch")).unwrap_err();
    assert!(
        e.contains("environment.llvm.patches: `gone.patch`") && e.contains("m.yaml:10"),
        "{e}"
    );
    std::fs::write(dir.path().join("bin.patch"), b"\x7fELF\0\0").unwrap();
    let e = at(&patched_text.replace("fix-yn.patch", "bin.patch")).unwrap_err();
    assert!(e.contains("NUL bytes"), "{e}");
}

#[test]
fn a_matrix_build_starts_from_the_toolchain_and_its_hash_follows_it() {
    let with_build = SOURCE.replace(
        "steps:\n  - name: assemble",
        "build:\n  per: [flavour]\n  steps:\n    - name: make\n      run: make\nsteps:\n  - name: assemble",
    );
    let p = plan(&with_build).unwrap();
    let tc = p
        .builds
        .iter()
        .find(|b| b.key.starts_with("llvm-debug-"))
        .unwrap();
    let debug = p.builds.iter().find(|b| b.key == "debug").unwrap();
    let release = p.builds.iter().find(|b| b.key == "release").unwrap();
    assert_eq!(debug.from.as_deref(), Some(tc.key.as_str()));
    assert_eq!(release.from, None);
    // Toolchains are listed first: the plan's builds in the order they run.
    assert_eq!(p.builds[0].key, tc.key);
    let cell = p
        .cells
        .iter()
        .find(|c| c.value("flavour") == Some("debug"))
        .unwrap();
    let chain: Vec<&str> = cell
        .build_chain(&p.builds)
        .iter()
        .map(|b| b.key.as_str())
        .collect();
    assert_eq!(chain, [tc.key.as_str(), "debug"]);
    let other = plan(&with_build.replace("tools: [llvm-mc]", "tools: [llvm-mc, llc]")).unwrap();
    let debug2 = other.builds.iter().find(|b| b.key == "debug").unwrap();
    assert_ne!(
        debug.hash, debug2.hash,
        "a different toolchain is a different build"
    );
}

#[test]
fn bad_llvm_and_backtrace_settings_are_refused_with_their_place() {
    let cases = [
        (
            SOURCE.replace("    tools: [llvm-mc]\n", ""),
            "needs `tools`",
        ),
        (
            SOURCE.replace("tools: [llvm-mc]", "tools: [\"llvm-mc; rm -rf /\"]"),
            "is no LLVM tool name",
        ),
        (
            SOURCE.replace(
                "tools: [llvm-mc]",
                "tools: [llvm-mc]\n    targets: [\"AMDGPU;X86\"]",
            ),
            "is no LLVM target name",
        ),
        (
            SOURCE.replace(
                "tools: [llvm-mc]",
                "tools: [llvm-mc]\n    version: \"21.1\"",
            ),
            "major version",
        ),
        (
            SOURCE.replace("else 'none'", "else 'banana'"),
            "must be none, packages or source, not `banana`",
        ),
        (
            SOURCE.replace("on: error", "on: failure"),
            "backtrace.on must be error or crash, not `failure`",
        ),
        (
            SOURCE.replace("break: [llvm::MCAsmParser::Error]", "break: [\"a\\nb\"]"),
            "a breakpoint is one location",
        ),
        (
            SOURCE.replace("on: error,", "on: error, frames: 0,"),
            "between 1 and 256",
        ),
        (
            SOURCE.replace("on: error,", "on: error, timeout: soon,"),
            "`soon` is not a duration",
        ),
    ];
    for (text, want) in cases {
        let e = plan(&text)
            .err()
            .unwrap_or_else(|| panic!("accepted:\n{text}"));
        assert!(e.contains(want), "{want}: {e}");
        assert!(e.contains("m.yaml:"), "{e}");
    }
}

fn matrix(nonce: &str) -> String {
    format!(
        r#"name: backtraces
matrix:
  symbols: [debug, release]
environment:
  base: "debian:bookworm"
  packages: [gcc, g++, libc6-dev, libgtest-dev, gdb]
  env: {{BT_NONCE: "{nonce}"}}
retries: 0
build:
  per: [symbols]
  steps:
    - name: compile
      run: |
        # {nonce}
        flags="-O0 {{{{ '-g' if matrix.symbols == 'debug' else '' }}}}"
        mkdir -p /work/src /work/bin && cd /work/src
        cat > tool.c <<'C'
        #include <stdio.h>
        #include <string.h>
        int report_error(const char *file, int line, const char *what) {{
          fprintf(stderr, "%s:%d: error: %s\n", file, line, what);
          return 1;
        }}
        int parse_line(const char *file, int line, const char *text) {{
          if (strcmp(text, "Y") == 0)
            return report_error(file, line, "invalid metadata: Y reads as a boolean");
          return 0;
        }}
        int main(int argc, char **argv) {{
          const char *items[] = {{"k", "n", "Y"}};
          for (int i = 0; i < 3; i++)
            if (parse_line(argc > 1 ? argv[1] : "in.txt", i + 1, items[i]))
              return 1;
          return 0;
        }}
        C
        cat > crash.cpp <<'CPP'
        #include <gtest/gtest.h>
        int deref_bad(int *p) {{ return *p; }}
        TEST(Crash, Null) {{ int *p = nullptr; EXPECT_EQ(deref_bad(p), 0); }}
        TEST(Crash, Fine) {{ EXPECT_EQ(1, 1); }}
        CPP
        gcc $flags -o /work/bin/tool tool.c
        g++ $flags -o /work/bin/crash crash.cpp -lgtest -lgtest_main -pthread
steps:
  - name: check
    continue_on_error: true
    backtrace: {{on: error, break: [report_error]}}
    run: |
      cd /work/src
      /work/bin/tool meta.yaml
  - name: tests
    continue_on_error: true
    backtrace: {{on: crash}}
    gtest:
      binary: /work/bin/crash
  - name: hang
    continue_on_error: true
    backtrace: {{on: error, timeout: 5s}}
    run: |
      rm -f /tmp/ran
      # Fails at once; run again (under gdb) it never stops.
      sh -c 'if [ -e /tmp/ran ]; then while :; do :; done; fi; touch /tmp/ran; exit 3'
"#
    )
}

fn junit_text(run: &Path, cell: &str) -> String {
    let dir = run.join("cells").join(cell).join("junit/02-tests");
    std::fs::read_to_string(dir.join("gtest.xml")).unwrap_or_else(|e| panic!("{cell}: {e}"))
}

#[test]
fn failing_commands_and_crashing_tests_come_back_as_backtraces_for_real() {
    let Some(_engine) =
        engine_or_skip("failing_commands_and_crashing_tests_come_back_as_backtraces_for_real")
    else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let nonce = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    let m = write(dir.path(), "backtraces.yaml", &matrix(&nonce));
    let mine = format!(
        "{},rocmatrix.test-bt={}",
        label::label(),
        std::process::id()
    );
    let run = |out: &str| {
        let o = Rocmatrix::run_matrix(&m)
            .env("ROCMATRIX_LABEL", &mine)
            .progress_plain()
            .out(dir.path().join("store").join(out))
            .run();
        o.assert_code(1);
        o.run_store()
    };
    let first = run("first");

    // With debug info: the breakpoint's frames name functions, file, line.
    let debug = cell_json(&first, "debug");
    let bt = &step_of(&debug, "check")["backtrace"];
    assert_eq!(bt["debug_info"], true, "{bt}");
    assert_eq!(bt["command"], "/work/bin/tool meta.yaml", "{bt}");
    let stop = &bt["stops"][0];
    assert_eq!(stop["at"], "breakpoint report_error", "{bt}");
    assert_eq!(
        frame_functions(stop)[..3],
        ["report_error", "parse_line", "main"],
        "{bt}"
    );
    let f0 = &stop["frames"][0];
    assert!(f0["file"].as_str().unwrap().ends_with("tool.c"), "{bt}");
    assert_eq!(f0["line"], 4, "{bt}");
    assert_eq!(stop["frames"][1]["line"], 9, "{bt}");
    let artifact = first
        .join("cells/debug")
        .join(bt["artifact"].as_str().unwrap());
    let raw = std::fs::read_to_string(&artifact).unwrap();
    assert!(raw.starts_with("$ /work/bin/tool meta.yaml\n"), "{raw}");
    // The step itself failed as it would have without gdb.
    assert_eq!(step_of(&debug, "check")["exit_code"], 1);

    // The crashing test: its backtrace beside its error, in the JUnit.
    let junit = junit_text(&first, "debug");
    assert!(junit.contains("backtrace (gdb):"), "{junit}");
    assert!(
        junit.contains("stopped at signal SIGSEGV (Segmentation fault):"),
        "{junit}"
    );
    assert!(junit.contains("#0 deref_bad at "), "{junit}");
    assert!(junit.contains("crash.cpp:2"), "{junit}");
    assert!(junit.contains("Crash_Null_Test::TestBody at "), "{junit}");

    // gdb's bound: the command that never stops under gdb is cut off.
    let hang = step_of(&debug, "hang");
    assert_eq!(hang["exit_code"], 3, "{hang}");
    assert!(hang["duration_secs"].as_f64().unwrap() < 60.0, "{hang}");
    let note = hang["backtrace"]["note"].as_str().unwrap();
    assert!(note.contains("timed out"), "{note}");

    // Without debug info: the same stops, and the report says there is none.
    let release = cell_json(&first, "release");
    let bt = &step_of(&release, "check")["backtrace"];
    assert_eq!(bt["debug_info"], false, "{bt}");
    assert_eq!(
        frame_functions(&bt["stops"][0])[..3],
        ["report_error", "parse_line", "main"]
    );
    assert!(
        bt["note"].as_str().unwrap().starts_with("no debug info: "),
        "{bt}"
    );
    let junit = junit_text(&first, "release");
    assert!(junit.contains("no debug info: "), "{junit}");

    // The reports show the step's frames beside its log tail.
    let summary = std::fs::read_to_string(first.join("report/summary.md")).unwrap();
    assert!(summary.contains("#1 parse_line at "), "{summary}");
    assert!(summary.contains("tool.c:9"), "{summary}");
    // The crash is one signature in both cells (frames are no part of
    // it), shown with the frames of the cell that has debug info.
    let explain = Rocmatrix::new().arg("explain").arg(&first).run();
    explain.assert_success();
    let text = explain.stdout();
    assert!(text.contains("killed by SIGSEGV"), "{text}");
    assert!(
        text.contains("   backtrace:\n     stopped at signal SIGSEGV (Segmentation fault):"),
        "{text}"
    );
    let sigs: Value = serde_json::from_str(
        &Rocmatrix::new()
            .arg("explain")
            .arg(&first)
            .arg("--json")
            .run()
            .stdout(),
    )
    .unwrap();
    let crash = sigs
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["text"].as_str().unwrap().contains("SIGSEGV"))
        .unwrap_or_else(|| panic!("{sigs}"));
    assert_eq!(crash["cells"].as_array().unwrap().len(), 2, "{crash}");
    assert!(
        crash["frames"][1]
            .as_str()
            .unwrap()
            .contains("deref_bad at "),
        "{crash}"
    );

    // A second run builds nothing and takes the backtraces again.
    let second = run("second");
    let reused: Vec<bool> = std::fs::read_to_string(second.join("journal.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "build_finished")
        .map(|e| e["reused"].as_bool().unwrap())
        .collect();
    assert_eq!(reused, [true, true]);
    let again = cell_json(&second, "debug");
    assert_eq!(
        step_of(&again, "check")["backtrace"]["stops"][0]["frames"][0]["line"],
        4
    );

    // The snapshot survives a prune while the runs' locks name it.
    let lock: Value =
        serde_json::from_str(&std::fs::read_to_string(second.join("lock.json")).unwrap()).unwrap();
    let snapshot = lock["builds"]["debug"]["snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    Rocmatrix::new()
        .env("ROCMATRIX_LABEL", &mine)
        .args(["images", "--prune"])
        .arg("--out")
        .arg(dir.path().join("store").join("second"))
        .run()
        .assert_success();
    assert!(docker::image_exists(&snapshot), "{snapshot} was pruned");
}
