//! Toolchain builds: `environment.llvm: {debug: source, …}` as a build
//! stage of its own, one per environment, that compiles the environment's
//! LLVM from the distribution's source with full debug info.
//!
//! The image build has already unpacked and patched the source at
//! `/usr/src/llvm-source` (the family's `llvm_source` script); these steps
//! configure it for the tools and targets asked for, compile, keep the split
//! DWARF (`.dwo`) where the tools name it and put the tools first on `PATH`. The snapshot
//! is committed as `rocmatrix/llvm-debug:<hash>`: content-addressed by the
//! environment image (which holds the source and its checksums) and these
//! steps, so it is built once and every later run reuses it. A matrix's own
//! `build:` then starts from it, or, without one, the cells do.

use std::time::Duration;

use super::build::{Build, BuildKind};
use super::{CacheMount, Cell, Llvm, LlvmSource, Renderer, ResolveTree, SourceRef, Step};
use crate::matrix_file::{GpuUse, LlvmTemplate, Spec, SpecError};

/// The name of an LLVM git tree among its toolchain build's sources.
pub const TREE: &str = "llvm-tree";

/// Where the tools are installed in the snapshot; first on its `PATH`.
pub const PREFIX: &str = "/opt/rocmatrix/llvm-debug";
/// The snapshot's `PATH`.
pub const PATH: &str =
    "/opt/rocmatrix/llvm-debug/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// The compiler cache mounted in every toolchain build (ccache is content
/// addressed, so one volume serves every version and environment).
pub const CCACHE_KEY: &str = "llvm-debug-ccache";
const CCACHE_DIR: &str = "/root/.cache/rocmatrix-llvm-ccache";
/// A debug LLVM takes most of an hour on two cores.
const TIMEOUT: Duration = Duration::from_secs(4 * 3600);

/// Whether `name` can be an LLVM tool (a ninja target and a file name).
pub fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && !name.starts_with(['-', '.'])
}

/// Adds one toolchain build per environment whose LLVM is built from source
/// and points its cells (or the matrix builds of its cells) at it.
pub fn assign(cells: &mut [Cell], builds: &mut Vec<Build>) {
    let mut toolchains: Vec<Build> = Vec::new();
    for c in cells.iter_mut() {
        let Some(Llvm::Source(src)) = c.environment.as_ref().map(|e| &e.llvm) else {
            continue;
        };
        let key = key_of(&c.environment_hash, src);
        if !toolchains.iter().any(|b| b.key == key) {
            toolchains.push(toolchain(&key, &c.environment_hash, src));
        }
        let tc = toolchains
            .iter()
            .find(|b| b.key == key)
            .expect("just added");
        c.hash = crate::digest::sha256_hex(format!("{}\ntoolchain {}", c.hash, tc.hash).as_bytes());
        match &c.build {
            // The matrix's build starts from the toolchain's snapshot.
            Some(k) => {
                if let Some(b) = builds.iter_mut().find(|b| &b.key == k && b.from.is_none()) {
                    b.from = Some(key.clone());
                    b.hash = crate::digest::sha256_hex(
                        format!("{}\ntoolchain {}", b.hash, tc.hash).as_bytes(),
                    );
                }
            }
            None => c.build = Some(key.clone()),
        }
    }
    // Toolchains first: the plan lists builds in the order they run.
    toolchains.append(builds);
    *builds = toolchains;
}

/// `llvm-debug-<environment>`, and `-<patches>` when the source is patched:
/// one toolchain per environment and set of patches.
/// A git tree adds its commit's first 12 digits (`-<commit>`; the hash of
/// its URL and ref where it is resolved only when it builds).
fn key_of(environment_hash: &str, src: &LlvmSource) -> String {
    let mut key = format!("llvm-debug-{}", crate::digest::short(environment_hash));
    if let Some(t) = &src.tree {
        let named = format!("{}\n{}", t.url, t.reference);
        let c = (t.commit.clone()).unwrap_or_else(|| crate::digest::sha256_hex(named.as_bytes()));
        key.push_str(&format!("-{}", crate::digest::short(&c)));
    }
    if !src.patches.is_empty() {
        let all: Vec<&str> = src.patches.iter().map(|p| p.sha256.as_str()).collect();
        let patches = crate::digest::sha256_hex(all.join("\n").as_bytes());
        key.push_str(&format!("-{}", crate::digest::short(&patches)));
    }
    key
}

/// `environment.llvm.git` and `ref` of one cell: the tree as the
/// toolchain build's source, resolved to its commit by `resolve` if given.
pub(super) fn render_tree(
    spec: &Spec,
    r: &Renderer,
    l: &LlvmTemplate,
    (ctx, id): (&minijinja::Value, &str),
    resolve: Option<ResolveTree>,
) -> Result<Option<Box<SourceRef>>, SpecError> {
    let Some(git) = &l.git else {
        return match &l.reference {
            Some(t) => Err(spec.error_at(
                t.pos,
                "environment.llvm.ref needs `git:`, the tree it names",
            )),
            None => Ok(None),
        };
    };
    let url = r.render(git, ctx, id)?.trim().to_string();
    if url.is_empty() {
        return Ok(None);
    }
    let base = spec.file.parent().unwrap_or(std::path::Path::new(""));
    let url = super::sources::url_from(base, &url);
    let reference = match &l.reference {
        Some(t) => r.render(t, ctx, id)?.trim().to_string(),
        None => String::new(),
    };
    let reference = if reference.is_empty() {
        "HEAD".to_string()
    } else {
        reference
    };
    let commit = match resolve {
        Some(f) => Some(f(&url, &reference).map_err(|e| {
            spec.error_at(git.pos, format!("environment.llvm.git: {e} (cell {id})"))
        })?),
        None => None,
    };
    Ok(Some(Box::new(SourceRef {
        name: TREE.to_string(),
        url,
        reference,
        patches: Vec::new(),
        commit,
    })))
}

fn toolchain(key: &str, environment_hash: &str, src: &LlvmSource) -> Build {
    let mut steps = vec![
        step("configure", configure(src)),
        step("compile", compile(src)),
        step("install", install(src)),
    ];
    if !src.patches.is_empty() {
        let parts: Vec<(&str, &str, &str)> = src
            .patches
            .iter()
            .map(|p| (p.name.as_str(), p.text.as_str(), p.sha256.as_str()))
            .collect();
        steps.insert(0, patch_step(&parts));
    }
    let mut payload = serde_json::json!({
        "toolchain": "llvm-debug",
        "environment": environment_hash,
        "llvm": src,
        "steps": steps,
    });
    if let Some(t) = &src.tree {
        // Its URL, ref and commit: a new commit is a new toolchain.
        payload["tree"] = serde_json::json!(t);
    }
    let hash = crate::digest::sha256_hex(payload.to_string().as_bytes());
    Build {
        key: key.to_string(),
        kind: BuildKind::LlvmDebug,
        from: None,
        values: Vec::new(),
        environment_hash: environment_hash.to_string(),
        steps,
        sources: src.tree.iter().map(|t| (**t).clone()).collect(),
        caches: vec![CacheMount {
            path: CCACHE_DIR.to_string(),
            key: CCACHE_KEY.to_string(),
            volume: super::cache::volume_name(CCACHE_KEY),
        }],
        hash,
    }
}

/// The name of the step that applies patches to the unpacked LLVM source
/// before it is configured (`rocmatrix try --patch llvm=FILE`).
pub const PATCH_STEP: &str = "patch";

/// A step applying `patches` (a name and its text each, in order) to
/// `/usr/src/llvm-source` with `patch -p1`, each from a here-document
/// whose end marker is the patch's hash (its text cannot hold it): the
/// patch is in the step's script, so the build's hash, and its snapshot's
/// name, follow its content.
pub fn patch_step(patches: &[(&str, &str, &str)]) -> Step {
    let mut run = String::from("set -euo pipefail\ncd /usr/src/llvm-source\n");
    for (name, text, sha256) in patches {
        let end = format!("ROCMATRIX_PATCH_{}", &sha256[..sha256.len().min(32)]);
        run.push_str(&format!(
            "echo {}\npatch -p1 --forward --batch --no-backup-if-mismatch <<'{end}'\n{text}{}{end}\n",
            crate::plan::ci::shell_quote(&format!("rocmatrix: applying {name}")),
            if text.ends_with('\n') { "" } else { "\n" },
        ));
    }
    step(PATCH_STEP, run)
}

fn step(name: &str, run: String) -> Step {
    Step {
        name: name.to_string(),
        run,
        suite: None,
        timeout: TIMEOUT,
        junit: Vec::new(),
        gpu: GpuUse::None,
        continue_on_error: false,
        backtrace: None,
        rerun_failures: 0,
    }
}

/// The configure's flag that builds clang (a tool asked for it).
const CLANG: &str = "-DLLVM_ENABLE_PROJECTS=clang";

/// Whether a toolchain build configures clang: its tree then brings `clang/`.
pub fn needs_clang(build: &Build) -> bool {
    build.steps.iter().any(|s| s.run.contains(CLANG))
}

fn configure(src: &LlvmSource) -> String {
    let clang = src.tools.iter().any(|t| t.starts_with("clang"));
    let projects = if clang {
        format!(" \\\n  {CLANG}")
    } else {
        String::new()
    };
    format!(
        r#"s=/usr/src/llvm-source
cat "$s/.rocmatrix/source"
echo "Debian patches applied: $(wc -l < "$s/.rocmatrix/patches-applied")"
echo "Debian patches not applied (they touch what an LLVM-only build leaves out, or no longer fit):"
sed 's/^/  /' "$s/.rocmatrix/patches-not-applied"
# Full debug info, split into .dwo files (linking stays within memory),
# tablegen optimised (a debug tablegen takes longer than the build), one
# link job at a time; nothing but the tools asked for.
cmake -G Ninja -S "$s/llvm" -B /work/llvm-build \
  -DCMAKE_BUILD_TYPE=Debug \
  -DLLVM_TARGETS_TO_BUILD='{targets}' \
  -DLLVM_OPTIMIZED_TABLEGEN=ON \
  -DLLVM_USE_SPLIT_DWARF=ON \
  -DLLVM_PARALLEL_LINK_JOBS=1 \
  -DLLVM_INCLUDE_TESTS=OFF -DLLVM_INCLUDE_BENCHMARKS=OFF \
  -DLLVM_INCLUDE_EXAMPLES=OFF -DLLVM_INCLUDE_DOCS=OFF \
  -DLLVM_ENABLE_BINDINGS=OFF -DLLVM_ENABLE_ZLIB=OFF \
  -DLLVM_ENABLE_ZSTD=OFF -DLLVM_ENABLE_LIBXML2=OFF \
  -DLLVM_CCACHE_BUILD=ON -DLLVM_CCACHE_DIR={CCACHE_DIR} -DLLVM_CCACHE_MAXSIZE=12G{projects}
"#,
        targets = src.targets.join(";"),
    )
}

fn compile(src: &LlvmSource) -> String {
    format!(
        r#"export CCACHE_DIR={CCACHE_DIR}
ccache --zero-stats >/dev/null
# Low priority: the host's other work goes first.
/usr/bin/time -f 'compile: %e s wall, %U s user, largest process %M KiB' \
  nice -n 19 ninja -C /work/llvm-build -j "$(nproc)" {tools}
ccache --show-stats | sed -n '1,12p'
# The container's peak memory, where the kernel keeps it (cgroup v2 from
# Linux 5.19, or v1).
for f in /sys/fs/cgroup/memory.peak /sys/fs/cgroup/memory/memory.max_usage_in_bytes; do
  if [ -r "$f" ]; then
    echo "build container's peak memory: $(( $(cat "$f") / 1048576 )) MiB"
    break
  fi
done
"#,
        tools = src.tools.join(" "),
    )
}

fn install(src: &LlvmSource) -> String {
    format!(
        r#"s=/usr/src/llvm-source
v=$(awk '$1 == "llvm" {{ print $2 }}' "$s/.rocmatrix/source")
mkdir -p {PREFIX}/bin
for t in {tools}; do
  install -m 755 "/work/llvm-build/bin/$t" "{PREFIX}/bin/$t"
  # The versioned name (llvm-mc-21) runs this build too.
  ln -f "{PREFIX}/bin/$t" "{PREFIX}/bin/$t-$v"
done
# The split DWARF stays where the compiler wrote it: each tool names its
# .dwo files by the build directory and the object's path, and gdb reads
# them there. (They are not packed: llvm-dwp 21 on GCC 16's split DWARF
# ran for minutes at full CPU without writing a byte.) The rest of the
# build tree goes.
find /work/llvm-build -type f ! -name '*.dwo' -delete
find /work/llvm-build -depth -type d -empty -delete
echo "split DWARF kept: $(find /work/llvm-build -name '*.dwo' | wc -l) files, $(du -sh /work/llvm-build | cut -f1)"
for t in {tools}; do
  gdb -batch -ex 'info line main' "{PREFIX}/bin/$t" 2>&1 | tail -n 1
done
cp -r "$s/.rocmatrix" {PREFIX}/source
du -sh {PREFIX}
ls -l {PREFIX}/bin
"#,
        tools = src.tools.join(" "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_step_holds_each_patch_in_a_here_document_ended_by_its_hash() {
        let sha = "ab".repeat(32);
        let s = patch_step(&[("fix.patch", "--- a/x\n+++ b/x\n", &sha)]);
        assert_eq!(s.name, PATCH_STEP);
        assert_eq!(
            s.run,
            format!(
                "set -euo pipefail\ncd /usr/src/llvm-source\necho 'rocmatrix: applying fix.patch'\n\
                 patch -p1 --forward --batch --no-backup-if-mismatch <<'ROCMATRIX_PATCH_{0}'\n\
                 --- a/x\n+++ b/x\nROCMATRIX_PATCH_{0}\n",
                &sha[..32]
            )
        );
    }

    #[test]
    fn tool_names_are_plain_words() {
        assert!(is_tool_name("llvm-mc"));
        assert!(is_tool_name("clang"));
        assert!(!is_tool_name("llvm-mc; rm -rf /"));
        assert!(!is_tool_name("-j9"));
        assert!(!is_tool_name(""));
    }
}
