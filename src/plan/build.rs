//! Build stages: the matrix's `build:` steps rendered once per build key.
//!
//! Cells that share an environment and the values of the `build.per` axes
//! share a build. Its steps see `matrix.<key>` for the keys that have one
//! value in all its cells (the `per` axes at least) and `build.<key>`: every
//! value that key has among the build's cells (all gfx targets its cells
//! test, say). Keys are computed over the whole plan,
//! before `--only` and `--shard`, so every shard and CI job of a matrix
//! names the same build and can share its snapshot.

use serde::Serialize;

use super::{render, Cell, Renderer, SourceRef, Step};
use crate::matrix_file::{BuildTemplate, Spec, SpecError};

/// What a build makes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BuildKind {
    /// The matrix's `build:` steps.
    #[default]
    Matrix,
    /// LLVM from the distribution's source with debug info
    /// (`environment.llvm: {debug: source}`, [`super::toolchain`]).
    LlvmDebug,
}

impl BuildKind {
    /// Whether this is a matrix build: one that holds its cells' sources.
    pub fn is_matrix(&self) -> bool {
        *self == BuildKind::Matrix
    }

    /// The repository of its snapshots, and their `rocmatrix.kind` label.
    pub fn repository(&self) -> (&'static str, &'static str) {
        match self {
            BuildKind::Matrix => ("rocmatrix/build", "build"),
            BuildKind::LlvmDebug => ("rocmatrix/llvm-debug", "llvm-debug"),
        }
    }
}

/// One build of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Build {
    /// Readable and unique in the plan: the `per` values joined by `-`
    /// (`all` without `per`), with the environment's short hash where
    /// several environments share those values; `llvm-debug-<env>` for a
    /// toolchain build.
    pub key: String,
    #[serde(default, skip_serializing_if = "BuildKind::is_matrix")]
    pub kind: BuildKind,
    /// The build whose snapshot this one starts from (a toolchain build),
    /// instead of the environment image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The `per` axes' values.
    #[serde(serialize_with = "super::pairs_as_map")]
    pub values: Vec<(String, String)>,
    pub environment_hash: String,
    pub steps: Vec<Step>,
    /// The sources every cell of the build has; uploaded into the build.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceRef>,
    /// Cache directories mounted in the build (`cache:`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caches: Vec<super::CacheMount>,
    /// SHA-256 over the environment, the `per` values, the build's values,
    /// steps and sources as rendered (hex). The snapshot's name adds the
    /// environment image and the sources' commits, known only when it runs.
    pub hash: String,
}

/// (environment hash, `per` values) and the indices of the cells with
/// them, in plan order.
type Group = ((String, Vec<(String, String)>), Vec<usize>);

/// Groups `cells` into builds, renders each build's steps, sets each
/// cell's `build` and folds the build's hash into the cell's.
pub fn assign(
    spec: &Spec,
    template: &BuildTemplate,
    r: &Renderer,
    cells: &mut [Cell],
) -> Result<Vec<Build>, SpecError> {
    let mut groups: Vec<Group> = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        let per: Vec<(String, String)> = template
            .per
            .iter()
            .filter_map(|k| c.value(k).map(|v| (k.clone(), v.to_string())))
            .collect();
        let key = (c.environment_hash.clone(), per);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(i),
            None => groups.push((key, vec![i])),
        }
    }
    let names = keys(&groups);
    let mut builds = Vec::with_capacity(groups.len());
    for (((environment_hash, per), members), key) in groups.into_iter().zip(names) {
        let first = &cells[members[0]];
        if let Some(other) = members
            .iter()
            .map(|&i| &cells[i])
            .find(|c| c.sources != first.sources)
        {
            return Err(SpecError::new(
                &spec.file,
                None,
                format!(
                    "build `{key}`: cells {} and {} check out different sources, but a build \
                     has one checkout; add the axis their sources depend on to `build.per`",
                    first.id, other.id
                ),
            ));
        }
        let sources = first.sources.clone();
        let values = build_values(spec, cells, &members);
        let ctx = render::build_context(&uniform(&values), &values, &spec.vars);
        let mut steps = Vec::with_capacity(template.steps.len());
        for s in &template.steps {
            steps.push(Step {
                name: s.name.clone(),
                run: match &s.run {
                    Some(t) => r.render_for(t, &ctx, render::Subject::Build(&key))?,
                    None => String::new(),
                },
                suite: None,
                timeout: s.timeout.unwrap_or(spec.timeout),
                junit: Vec::new(),
                gpu: crate::matrix_file::GpuUse::None,
                continue_on_error: s.continue_on_error,
                backtrace: s.backtrace.clone(),
                rerun_failures: 0,
            });
        }
        let caches = super::cache::render(spec, r, &ctx, render::Subject::Build(&key))?;
        let hash = crate::digest::sha256_hex(
            serde_json::json!({
                "environment": environment_hash,
                "values": super::PairsRef(&per),
                "build": values,
                "steps": steps,
                "sources": sources,
            })
            .to_string()
            .as_bytes(),
        );
        for &i in &members {
            let c = &mut cells[i];
            c.build = Some(key.clone());
            c.hash = crate::digest::sha256_hex(format!("{}\nbuild {hash}", c.hash).as_bytes());
        }
        builds.push(Build {
            key,
            kind: BuildKind::Matrix,
            from: None,
            values: per,
            environment_hash,
            steps,
            sources,
            caches,
            hash,
        });
    }
    Ok(builds)
}

/// The keys with one value in every cell of a build (the `per` axes, and
/// any key that the environment or `per` decide): the build's `matrix`.
fn uniform(values: &std::collections::BTreeMap<String, Vec<String>>) -> Vec<(String, String)> {
    values
        .iter()
        .filter(|(_, v)| v.len() == 1)
        .map(|(k, v)| (k.clone(), v[0].clone()))
        .collect()
}

/// `build.<key>` of one build: each key's distinct values among its
/// cells, in the order the plan has them.
fn build_values(
    spec: &Spec,
    cells: &[Cell],
    members: &[usize],
) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut out = std::collections::BTreeMap::new();
    for key in spec.keys() {
        let mut values: Vec<String> = Vec::new();
        for &i in members {
            if let Some(v) = cells[i].value(&key) {
                if !values.iter().any(|x| x == v) {
                    values.push(v.to_string());
                }
            }
        }
        out.insert(key, values);
    }
    out
}

/// The readable key of each group: its `per` values, or `all`; where two
/// groups would read the same (their environments differ), each gets its
/// environment's short hash.
fn keys(groups: &[Group]) -> Vec<String> {
    let plain: Vec<String> = groups
        .iter()
        .map(|((_, per), _)| {
            if per.is_empty() {
                "all".to_string()
            } else {
                let joined: Vec<&str> = per.iter().map(|(_, v)| v.as_str()).collect();
                crate::matrix_file::cell_id::sanitize(&joined.join("-"))
            }
        })
        .collect();
    plain
        .iter()
        .zip(groups)
        .map(|(name, ((env, _), _))| {
            if plain.iter().filter(|n| *n == name).count() > 1 {
                format!("{name}-{}", crate::digest::short(env))
            } else {
                name.clone()
            }
        })
        .collect()
}
