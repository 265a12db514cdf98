//! Plans: every cell of a matrix rendered — environment, steps, GPU needs —
//! with its content hashes, plus selection (`--only`) and sharding.

pub mod build;
pub mod cache;
pub mod ci;
pub mod debci;
pub mod glob;
pub mod jobs;
pub mod k8s;
pub mod patch_file;
mod render;
pub mod shard;
pub mod slurm;
pub mod sources;
pub mod test_suite;
pub mod toolchain;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::matrix_file::{self, cell_id, GpuCount, GpuPolicy, GpuUse, Spec, SpecError};
pub use build::Build;
pub use cache::CacheMount;
pub use render::Renderer;
pub use shard::{Shard, ShardError};
pub use sources::SourceRef;
pub use test_suite::TestSuite;

/// The LLVM flavour of an environment. Serialised as `"release"`,
/// `"debug"` or `{"source": {…}}`, so that the hashes of environments
/// without a source build are what they were before it existed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Llvm {
    /// The distribution's packages as they are.
    Release,
    /// The distribution's debug-symbol packages beside them.
    Debug,
    /// LLVM built from the distribution's source with debug info, in a
    /// toolchain build ([`toolchain`]).
    Source(LlvmSource),
}

/// What `environment.llvm: {debug: source, …}` builds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LlvmSource {
    /// The LLVM major version (`21`); none: that of the installed LLVM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Tools built and put first on `PATH` (`llvm-mc`).
    pub tools: Vec<String>,
    /// `LLVM_TARGETS_TO_BUILD` (`AMDGPU`).
    pub targets: Vec<String>,
    /// Patches applied to the source before it is configured: the
    /// toolchain build's first step holds them, so they are out of the
    /// environment's hash (its image does not change with them).
    #[serde(skip)]
    pub patches: Vec<patch_file::LlvmPatch>,
    /// Built from a git tree instead of the distribution's source: in the
    /// environment's hash (its image fetches no source) as `"git": true`.
    #[serde(rename = "git", skip_serializing_if = "std::ops::Not::not")]
    pub from_tree: bool,
    /// That tree (URL, ref, commit): the toolchain build's source
    /// ([`toolchain`]), in its key and hash.
    #[serde(skip)]
    pub tree: Option<Box<SourceRef>>,
}

/// Resolves an LLVM tree's URL and ref to a commit on the host
/// (`src/source/` has one); its error is said at `environment.llvm.git`.
pub type ResolveTree<'a> = &'a dyn Fn(&str, &str) -> Result<String, TreeError>;

/// Why an LLVM tree could not be resolved: the resolver's own error
/// (`source::TreeUnresolved`, of a floor this one cannot name), kept
/// whole and said by its `Display`.
pub type TreeError = Box<dyn std::error::Error + Send + Sync>;

/// A cell's rendered image recipe. Cells with equal environments share an image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Environment {
    pub family: String,
    pub base: String,
    pub suite: Option<String>,
    pub mirror: Option<String>,
    pub packages: Vec<String>,
    pub llvm: Llvm,
    pub setup: Option<String>,
    pub env: BTreeMap<String, String>,
    pub network: Option<String>,
    /// Archives added beside the base's suite (left out when empty, so that
    /// the hashes of environments without them do not change).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suites: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer: Option<String>,
}

/// A rendered step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    pub name: String,
    /// The script; empty for a step that only runs a suite.
    pub run: String,
    /// The test suite run after the script, through its adapter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<TestSuite>,
    #[serde(serialize_with = "secs")]
    pub timeout: Duration,
    pub junit: Vec<String>,
    pub gpu: GpuUse,
    pub continue_on_error: bool,
    /// Run the failing command again under gdb (`backtrace:`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backtrace: Option<matrix_file::BacktraceSpec>,
    /// Run the step again, up to this many times, while its JUnit has
    /// failing tests (a `run:` step with `junit:`; suites rerun their own).
    #[serde(default, skip_serializing_if = "test_suite::is_zero")]
    pub rerun_failures: u32,
}

/// What GPUs a cell asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuRequest {
    pub need: GpuUse,
    pub count: GpuCount,
    pub target: Option<String>,
    pub policy: GpuPolicy,
    /// CDI devices asked for by name (`vendor.com/class=name`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cdi: Vec<String>,
}

/// One rendered cell of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cell {
    pub id: String,
    #[serde(serialize_with = "pairs_as_map")]
    pub values: Vec<(String, String)>,
    pub environment: Option<Environment>,
    /// SHA-256 of the rendered environment (hex); equal hashes share an image.
    pub environment_hash: String,
    pub steps: Vec<Step>,
    /// Git sources checked out into the container at `/src/<name>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceRef>,
    pub gpu: GpuRequest,
    /// Memory limit of the cell's container, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// The key of the build the cell starts from ([`Plan::builds`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// Cache directories mounted from named volumes (`cache:`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caches: Vec<CacheMount>,
    /// SHA-256 over everything that decides the cell's outcome (hex).
    pub hash: String,
}

impl Cell {
    /// Whether the cell, or any of its steps, asks for a GPU.
    pub fn wants_gpu(&self) -> bool {
        self.gpu.need != GpuUse::None
            || !self.gpu.cdi.is_empty()
            || self.steps.iter().any(|s| s.gpu != GpuUse::None)
    }

    /// The build this cell starts from, if any.
    pub fn build<'p>(&self, plan_builds: &'p [Build]) -> Option<&'p Build> {
        let key = self.build.as_deref()?;
        plan_builds.iter().find(|b| b.key == key)
    }

    /// The builds this cell's image is made of, in the order they run: a
    /// toolchain build its build starts from, then the build itself.
    pub fn build_chain<'p>(&self, plan_builds: &'p [Build]) -> Vec<&'p Build> {
        let mut chain = Vec::new();
        let mut next = self.build(plan_builds);
        while let Some(b) = next {
            if chain.iter().any(|c: &&Build| c.key == b.key) {
                break;
            }
            chain.insert(0, b);
            next = b
                .from
                .as_deref()
                .and_then(|k| plan_builds.iter().find(|x| x.key == k));
        }
        chain
    }

    pub fn value(&self, key: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// An `--only AXIS=VALUE` filter that selects nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error("--only {key}={value}: `{key}` is no axis of this matrix (axes: {})", axes.join(", "))]
    NoAxis {
        key: String,
        value: String,
        axes: Vec<String>,
    },
    #[error("--only {key}={value}: no cell has {key}={value} (values: {})", values.join(", "))]
    NoCell {
        key: String,
        value: String,
        /// The values the cells have for `key`, in order of first appearance.
        values: Vec<String>,
    },
}

/// An expanded, rendered matrix.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub name: String,
    /// The keys of the cells: axes in order, then include-added keys.
    pub keys: Vec<String>,
    pub cells: Vec<Cell>,
    /// The builds the cells start from (`build:`), over the whole plan.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub builds: Vec<Build>,
    /// Which shard of the whole plan this is, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// How many cells the whole (unsharded, unfiltered) plan has.
    pub total_cells: usize,
}

impl Plan {
    /// Expands and renders `spec`; fails on the first template error.
    pub fn build(spec: &Spec, max_cells: usize) -> Result<Plan, SpecError> {
        Plan::build_with(spec, max_cells, None)
    }

    /// [`Plan::build`], each LLVM git tree resolved to its commit by
    /// `resolve` (without one, it is resolved when its toolchain builds).
    pub fn build_with(
        spec: &Spec,
        max_cells: usize,
        resolve: Option<ResolveTree>,
    ) -> Result<Plan, SpecError> {
        let combos = matrix_file::expand(spec, max_cells)?;
        let ids = cell_id::cell_ids(spec, &combos);
        let mut r = Renderer::new(&spec.file);
        for t in all_templates(spec) {
            r.add(t)?;
        }
        // Compiled here so that `validate` reports their syntax errors;
        // rendered per job by `ci`, and hashed nowhere.
        for t in spec.ci.templates() {
            r.add(t)?;
        }
        let mut cells = Vec::with_capacity(combos.len());
        // Many cells share an environment; hash each distinct one once.
        let mut env_hashes: std::collections::HashMap<String, String> = Default::default();
        for (combo, id) in combos.into_iter().zip(ids) {
            let ctx = render::context(&combo.values, &spec.vars, &id);
            let environment = match &spec.environment {
                Some(e) => Some(render_environment(spec, &r, e, (&ctx, &id), resolve)?),
                None => None,
            };
            let env_json = serde_json::to_string(&environment).unwrap_or_default();
            let environment_hash = env_hashes
                .entry(env_json)
                .or_insert_with_key(|json| crate::digest::sha256_hex(json.as_bytes()))
                .clone();
            let steps = render_steps(spec, &r, &ctx, &id)?;
            let mut sources = Vec::with_capacity(spec.sources.len());
            for src in &spec.sources {
                sources.push(sources::render(spec, &r, src, &ctx, &id)?);
            }
            let caches = cache::render(spec, &r, &ctx, render::Subject::Cell(&id))?;
            let gpu = render_gpu(spec, &r, &ctx, &id)?;
            let hash = {
                let payload = serde_json::json!({
                    "values": PairsRef(&combo.values),
                    "environment": environment,
                    "steps": steps,
                    "sources": sources,
                    "gpu": gpu,
                    "memory": spec.memory,
                });
                crate::digest::sha256_hex(payload.to_string().as_bytes())
            };
            cells.push(Cell {
                id,
                values: combo.values,
                environment,
                environment_hash,
                steps,
                sources,
                gpu,
                memory: spec.memory,
                build: None,
                caches,
                hash,
            });
        }
        let mut builds = match &spec.build {
            Some(b) => build::assign(spec, b, &r, &mut cells)?,
            None => Vec::new(),
        };
        toolchain::assign(&mut cells, &mut builds);
        let total_cells = cells.len();
        Ok(Plan {
            name: spec.name.clone(),
            keys: spec.keys(),
            cells,
            builds,
            shard: None,
            total_cells,
        })
    }

    /// Keeps the cells matching every `--only AXIS=VALUE` filter (values of
    /// one axis are alternatives). A filter that matches no cell is an error.
    pub fn select(mut self, only: &[(String, String)]) -> Result<Plan, SelectError> {
        if only.is_empty() {
            return Ok(self);
        }
        for (k, v) in only {
            if !self.keys.contains(k) {
                return Err(SelectError::NoAxis {
                    key: k.clone(),
                    value: v.clone(),
                    axes: self.keys.clone(),
                });
            }
            if !self.cells.iter().any(|c| c.value(k) == Some(v)) {
                let mut have: Vec<&str> = self.cells.iter().filter_map(|c| c.value(k)).collect();
                have.dedup();
                let mut values: Vec<String> = Vec::new();
                for h in have {
                    if !values.iter().any(|x| x == h) {
                        values.push(h.to_string());
                    }
                }
                return Err(SelectError::NoCell {
                    key: k.clone(),
                    value: v.clone(),
                    values,
                });
            }
        }
        let mut by_key: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (k, v) in only {
            by_key.entry(k.as_str()).or_default().push(v.as_str());
        }
        self.cells.retain(|c| {
            by_key
                .iter()
                .all(|(k, vs)| c.value(k).is_some_and(|v| vs.contains(&v)))
        });
        Ok(self)
    }

    /// Keeps only shard `shard` of the cells.
    pub fn shard(mut self, shard: Shard) -> Plan {
        let range = shard.range(self.cells.len());
        self.cells = self.cells.drain(range).collect();
        self.shard = Some(shard);
        self
    }

    /// The distinct environments, in order of first use, with their cells.
    pub fn environments(&self) -> Vec<(&str, &Environment, Vec<&Cell>)> {
        let mut out: Vec<(&str, &Environment, Vec<&Cell>)> = Vec::new();
        for c in &self.cells {
            let Some(env) = &c.environment else { continue };
            match out.iter_mut().find(|(h, _, _)| *h == c.environment_hash) {
                Some((_, _, cells)) => cells.push(c),
                None => out.push((&c.environment_hash, env, vec![c])),
            }
        }
        out
    }

    /// The documented `plan --format json` document (see docs/plan-json.md).
    pub fn summary_json(&self) -> serde_json::Value {
        let cells: Vec<serde_json::Value> = self
            .cells
            .iter()
            .map(|c| {
                let mut cell = serde_json::json!({
                    "id": c.id,
                    "values": PairsRef(&c.values),
                    "environment": c.environment_hash,
                    "hash": c.hash,
                });
                if let Some(b) = &c.build {
                    cell["build"] = serde_json::json!(b);
                }
                cell
            })
            .collect();
        let mut doc = serde_json::json!({ "name": self.name, "cells": cells });
        if let Some(s) = self.shard {
            doc["shard"] = serde_json::json!(s.to_string());
        }
        doc
    }
}

fn all_templates(spec: &Spec) -> Vec<&matrix_file::Template> {
    let mut out = Vec::new();
    if let Some(e) = &spec.environment {
        out.extend([&e.family, &e.base]);
        out.extend(e.llvm.templates());
        out.extend(
            e.suite
                .iter()
                .chain(&e.mirror)
                .chain(&e.setup)
                .chain(&e.network),
        );
        out.extend(&e.packages);
        out.extend(&e.suites);
        out.extend(&e.prefer);
        out.extend(e.env.values());
    }
    for s in &spec.steps {
        out.extend(&s.run);
        out.extend(s.suite.iter().flat_map(|t| t.templates()));
        out.extend(&s.junit);
    }
    for s in spec.build.iter().flat_map(|b| &b.steps) {
        out.extend(&s.run);
    }
    for src in &spec.sources {
        out.extend([&src.url, &src.reference]);
        out.extend(&src.patches);
    }
    out.extend(&spec.gpu.target);
    out.extend(&spec.gpu.cdi);
    out.extend(spec.caches.iter().map(|c| &c.key));
    out
}

/// `environment.llvm` of one cell. `none` and `packages` are the mapping's
/// words for `release` and `debug`.
fn render_llvm(
    spec: &Spec,
    r: &Renderer,
    l: &matrix_file::LlvmTemplate,
    ctx: &minijinja::Value,
    id: &str,
) -> Result<Llvm, SpecError> {
    let list = |ts: &[matrix_file::Template]| -> Result<Vec<String>, SpecError> {
        let mut out = Vec::new();
        for t in ts {
            out.extend(r.render(t, ctx, id)?.split_whitespace().map(str::to_string));
        }
        Ok(out)
    };
    Ok(match r.render(&l.debug, ctx, id)?.trim() {
        "release" | "none" => Llvm::Release,
        "debug" | "packages" => Llvm::Debug,
        "source" => {
            let tools = list(&l.tools)?;
            if tools.is_empty() {
                return Err(spec.error_at(
                    l.debug.pos,
                    format!(
                        "environment.llvm: `debug: source` needs `tools`, the LLVM tools to build \
                         (llvm-mc, llc, opt, clang…) (cell {id})"
                    ),
                ));
            }
            if let Some(bad) = tools.iter().find(|t| !toolchain::is_tool_name(t)) {
                return Err(spec.error_at(
                    l.debug.pos,
                    format!("environment.llvm.tools: `{bad}` is no LLVM tool name (cell {id})"),
                ));
            }
            let mut targets = list(&l.targets)?;
            if let Some(bad) = targets.iter().find(|t| !toolchain::is_tool_name(t)) {
                return Err(spec.error_at(
                    l.debug.pos,
                    format!("environment.llvm.targets: `{bad}` is no LLVM target name (cell {id})"),
                ));
            }
            if targets.is_empty() {
                targets.push("AMDGPU".to_string());
            }
            let version = match &l.version {
                Some(t) => Some(r.render(t, ctx, id)?.trim().to_string()).filter(|v| !v.is_empty()),
                None => None,
            };
            if let Some(v) = version
                .as_deref()
                .filter(|v| !v.bytes().all(|b| b.is_ascii_digit()))
            {
                return Err(spec.error_at(
                    l.debug.pos,
                    format!("environment.llvm.version must be a major version such as 21, not `{v}` (cell {id})"),
                ));
            }
            Llvm::Source(LlvmSource {
                version,
                tools,
                targets,
                patches: llvm_patches(spec, r, &l.patches, ctx, id)?,
                from_tree: false,
                tree: None,
            })
        }
        other => {
            let field = if l.tools.is_empty() && l.version.is_none() && l.targets.is_empty() {
                "environment.llvm must be release, debug or a mapping {debug: source, tools: […]}"
            } else {
                "environment.llvm.debug must be none, packages or source"
            };
            return Err(spec.error_at(l.debug.pos, format!("{field}, not `{other}` (cell {id})")));
        }
    })
}

/// `environment.llvm.patches`, rendered and read: paths relative to the
/// matrix file, each a text patch.
fn llvm_patches(
    spec: &Spec,
    r: &Renderer,
    templates: &[matrix_file::Template],
    ctx: &minijinja::Value,
    id: &str,
) -> Result<Vec<patch_file::LlvmPatch>, SpecError> {
    let base = spec.file.parent().unwrap_or(std::path::Path::new(""));
    let mut out = Vec::new();
    for t in templates {
        let rel = r.render(t, ctx, id)?.trim().to_string();
        if rel.is_empty() {
            continue;
        }
        let path = base.join(&rel);
        let text = patch_file::read_text(&path).map_err(|why| {
            spec.error_at(
                t.pos,
                format!(
                    "environment.llvm.patches: `{rel}` ({}): {why} (cell {id})",
                    path.display()
                ),
            )
        })?;
        out.push(patch_file::LlvmPatch {
            name: rel,
            sha256: crate::digest::sha256_hex(text.as_bytes()),
            text,
        });
    }
    Ok(out)
}

/// The steps of one cell, rendered in its context.
fn render_steps(
    spec: &Spec,
    r: &Renderer,
    ctx: &minijinja::Value,
    id: &str,
) -> Result<Vec<Step>, SpecError> {
    let mut steps = Vec::with_capacity(spec.steps.len());
    for s in &spec.steps {
        let mut junit = Vec::with_capacity(s.junit.len());
        for g in &s.junit {
            let g = r.render(g, ctx, id)?;
            if !g.trim().is_empty() {
                junit.push(g);
            }
        }
        steps.push(Step {
            name: s.name.clone(),
            run: match &s.run {
                Some(t) => r.render(t, ctx, id)?,
                None => String::new(),
            },
            suite: match &s.suite {
                Some(t) => Some(test_suite::render(r, t, ctx, id)?),
                None => None,
            },
            timeout: s.timeout.unwrap_or(spec.timeout),
            junit,
            gpu: s.gpu.unwrap_or(spec.gpu.need),
            continue_on_error: s.continue_on_error,
            backtrace: s.backtrace.clone(),
            rerun_failures: s.rerun_failures,
        });
    }
    Ok(steps)
}

/// The GPU request of one cell, its target and CDI names rendered.
fn render_gpu(
    spec: &Spec,
    r: &Renderer,
    ctx: &minijinja::Value,
    id: &str,
) -> Result<GpuRequest, SpecError> {
    Ok(GpuRequest {
        need: spec.gpu.need,
        count: spec.gpu.count,
        target: match &spec.gpu.target {
            Some(t) => Some(r.render(t, ctx, id)?).filter(|s| !s.trim().is_empty()),
            None => None,
        },
        policy: spec.gpu.policy,
        cdi: {
            let mut names = Vec::new();
            for t in &spec.gpu.cdi {
                names.extend(r.render(t, ctx, id)?.split_whitespace().map(String::from));
            }
            names
        },
    })
}

fn render_environment(
    spec: &Spec,
    r: &Renderer,
    e: &matrix_file::EnvironmentTemplate,
    (ctx, id): (&minijinja::Value, &str),
    resolve: Option<ResolveTree>,
) -> Result<Environment, SpecError> {
    let opt = |t: &Option<matrix_file::Template>| -> Result<Option<String>, SpecError> {
        Ok(match t {
            Some(t) => Some(r.render(t, ctx, id)?.trim().to_string()).filter(|s| !s.is_empty()),
            None => None,
        })
    };
    let mut llvm = render_llvm(spec, r, &e.llvm, ctx, id)?;
    match (&mut llvm, &e.llvm.git) {
        (Llvm::Source(src), _) => {
            src.tree = toolchain::render_tree(spec, r, &e.llvm, (ctx, id), resolve)?;
            src.from_tree = src.tree.is_some();
        }
        // A templated `debug:` leaves the tree to the cells it renders `source` in.
        (_, Some(git)) if !e.llvm.debug.source.contains(['{', '%']) => {
            return Err(spec.error_at(
                git.pos,
                format!("environment.llvm.git needs `debug: source`: a tree is built from source (cell {id})"),
            ))
        }
        _ => {}
    }
    let mut packages = Vec::with_capacity(e.packages.len());
    for p in &e.packages {
        // A package template may render to several names, or to none.
        packages.extend(r.render(p, ctx, id)?.split_whitespace().map(str::to_string));
    }
    let mut env = BTreeMap::new();
    for (k, t) in &e.env {
        env.insert(k.clone(), r.render(t, ctx, id)?);
    }
    let family = r.render(&e.family, ctx, id)?.trim().to_string();
    let base = r.render(&e.base, ctx, id)?.trim().to_string();
    if base.is_empty() {
        return Err(spec.error_at(
            e.base.pos,
            format!("environment.base renders empty for cell {id}"),
        ));
    }
    Ok(Environment {
        family,
        base,
        suite: opt(&e.suite)?,
        mirror: opt(&e.mirror)?,
        packages,
        llvm,
        setup: opt(&e.setup)?,
        env,
        network: opt(&e.network)?,
        suites: {
            let mut v = Vec::new();
            for t in &e.suites {
                v.extend(r.render(t, ctx, id)?.split_whitespace().map(str::to_string));
            }
            v
        },
        prefer: opt(&e.prefer)?,
    })
}

fn secs<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_secs())
}

pub(crate) fn pairs_as_map<S: Serializer>(
    pairs: &[(String, String)],
    s: S,
) -> Result<S::Ok, S::Error> {
    PairsRef(pairs).serialize(s)
}

/// Serializes ordered pairs as a JSON object, keeping their order.
pub struct PairsRef<'a>(pub &'a [(String, String)]);

impl Serialize for PairsRef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}
