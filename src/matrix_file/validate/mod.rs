//! Turns the raw model and the positioned tree into a validated [`Spec`]:
//! the file as a whole, `ci:`, `expect:`/`flaky:` and `report:` here; the
//! matrix in [`matrix`], the steps and what they use in [`steps`], the
//! environment and GPUs in [`environment`].

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::Duration;

use super::raw::{
    RawBuild, RawCache, RawCi, RawCount, RawEnvironment, RawExpect, RawGpu, RawReport, RawSource,
    RawSpec, RawStep,
};
use super::suggest;
use super::tree::{self, Node, NodeKind};
use super::{
    parse_duration, test_suite, Axis, BuildTemplate, CacheTemplate, CiTemplate, Entry,
    EnvironmentTemplate, Expectation, GpuCount, GpuPolicy, GpuTemplate, GpuUse, ReportLayout,
    SourceTemplate, Spec, SpecError, StepTemplate, Template,
};

mod environment;
mod matrix;
mod steps;

use environment::{read_environment, read_gpu};
use matrix::read_matrix;
pub(super) use matrix::spec_keys;
use steps::{read_build, read_caches, read_sources, read_steps};

/// Default per-step timeout when the file names none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);

struct Ctx<'a> {
    path: &'a Path,
    tree: &'a Node,
    /// The matrix file's `rerun_failures:`, for suite steps without their own.
    rerun_failures: Option<u32>,
}

impl Ctx<'_> {
    fn err(&self, field: &str, message: impl Into<String>) -> SpecError {
        SpecError::new(self.path, Some(self.tree.pos_of(field)), message)
    }

    fn node_err(&self, node: &Node, message: impl Into<String>) -> SpecError {
        SpecError::new(self.path, Some(node.pos), message)
    }

    fn template(&self, field: impl Into<String>, source: &str) -> Template {
        let field = field.into();
        Template {
            source: source.to_string(),
            pos: self.tree.pos_of(&field),
            field,
        }
    }
}

/// Validates the matrix file `text` read from `path` into a [`Spec`],
/// reporting the first problem with its position.
pub fn validate(path: &Path, text: &str) -> Result<Spec, SpecError> {
    let tree = parse_tree(path, text)?;
    let raw: RawSpec = tree::from_node(&tree).map_err(|e| serde_error(path, &e))?;
    let cx = Ctx {
        path,
        tree: &tree,
        rerun_failures: raw.rerun_failures,
    };

    let (axes, include, exclude) = match tree.get("matrix") {
        Some(m) => read_matrix(&cx, m)?,
        None => (Vec::new(), Vec::new(), Vec::new()),
    };
    if axes.is_empty() && include.is_empty() {
        return Err(cx.err(
            "matrix",
            "the matrix has no axes and no include entries, so it has no cells",
        ));
    }
    let timeout = match &raw.timeout {
        Some(t) => parse_duration(t).map_err(|e| cx.err("timeout", e.to_string()))?,
        None => DEFAULT_TIMEOUT,
    };
    let steps = read_steps(&cx, "steps", &raw.steps)?;
    let sources = read_sources(&cx, &raw.sources)?;
    let caches = read_caches(&cx, &raw.cache)?;
    let environment = raw
        .environment
        .as_ref()
        .map(|e| read_environment(&cx, e))
        .transpose()?;
    let gpu = read_gpu(&cx, raw.gpu.as_ref(), &axes)?;
    let keys = spec_keys(&axes, &include);
    let build = raw
        .build
        .as_ref()
        .map(|b| read_build(&cx, b, &keys, environment.is_some()))
        .transpose()?;
    let mut expect = read_expectations(&cx, "expect", &raw.expect, &keys)?;
    expect.extend(read_expectations(&cx, "flaky", &raw.flaky, &keys)?);
    let report = read_report(&cx, raw.report.as_ref(), &keys)?;
    let classify = test_suite::read_classify(&raw.classify, &|f, m| cx.err(f, m))?;
    if raw.max_parallel == Some(0) {
        return Err(cx.err("max_parallel", "max_parallel must be at least 1"));
    }

    let name = raw.name.clone().unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "matrix".into())
    });
    Ok(Spec {
        file: path.to_path_buf(),
        source_hash: crate::digest::sha256_hex(text.as_bytes()),
        name,
        description: raw.description.clone(),
        axes,
        include,
        exclude,
        vars: raw.vars.clone(),
        environment,
        steps,
        build,
        caches,
        sources,
        gpu,
        timeout,
        retries: raw.retries.unwrap_or(1),
        fail_fast: raw.fail_fast.unwrap_or(false),
        max_parallel: raw.max_parallel,
        registry: raw
            .registry
            .as_deref()
            .map(super::registry::parse_registry)
            .transpose()
            .map_err(|e| cx.err("registry", e.to_string()))?,
        memory: match &raw.memory {
            Some(m) => Some(parse_bytes(m).map_err(|e| cx.err("memory", e.to_string()))?),
            None => None,
        },
        expect,
        classify,
        report,
        ci: read_ci(&cx, raw.ci.as_ref()),
    })
}

/// `ci:`: runner labels and tags, templates over `matrix`.
fn read_ci(cx: &Ctx, raw: Option<&RawCi>) -> CiTemplate {
    let Some(c) = raw else {
        return CiTemplate::default();
    };
    let list = |field: &str, items: &[String]| -> Vec<Template> {
        items
            .iter()
            .enumerate()
            .map(|(i, t)| cx.template(format!("ci.{field}[{i}]"), t))
            .collect()
    };
    CiTemplate {
        runs_on: list("runs_on", &c.runs_on),
        tags: list("tags", &c.tags),
        slurm: c
            .slurm
            .as_ref()
            .map(|r| crate::matrix_file::SlurmCi {
                partition: r.partition.clone(),
                account: r.account.clone(),
                time: r.time.clone(),
                args: r.args.clone(),
                gres: r.gres.clone(),
            })
            .unwrap_or_default(),
        k8s: c
            .k8s
            .as_ref()
            .map(|r| crate::matrix_file::K8sCi {
                image: r.image.clone(),
                namespace: r.namespace.clone(),
                claim: r.claim.clone(),
                nodes: r.nodes.clone(),
            })
            .unwrap_or_default(),
    }
}

/// The positioned tree of `text`, which must be a mapping at the top level.
fn parse_tree(path: &Path, text: &str) -> Result<Node, SpecError> {
    let tree = tree::parse(text)
        .map_err(|e| SpecError::new(path, Some(e.pos), format!("invalid YAML: {}", e.message)))?;
    match tree.kind {
        NodeKind::Map(_) => Ok(tree),
        NodeKind::Null => Err(SpecError::new(path, None, "the file is empty")),
        _ => Err(SpecError::new(
            path,
            Some(tree.pos),
            format!(
                "expected a mapping at the top level, found {}",
                tree.kind_name()
            ),
        )),
    }
}

/// `expect:` (or `flaky:`, `section`): each naming only known keys and
/// giving a reason; a `flaky:` entry names its tests.
fn read_expectations(
    cx: &Ctx,
    section: &str,
    raw: &[RawExpect],
    keys: &[String],
) -> Result<Vec<Expectation>, SpecError> {
    let flaky = section == "flaky";
    let mut expect = Vec::with_capacity(raw.len());
    for (i, e) in raw.iter().enumerate() {
        for k in e.cells.keys() {
            if !keys.contains(k) {
                return Err(cx.err(
                    &format!("{section}[{i}].cells.{k}"),
                    format!(
                        "{section} entry names `{k}`, which is no axis or include key (have: {})",
                        keys.join(", ")
                    ),
                ));
            }
        }
        if e.reason.trim().is_empty() {
            return Err(cx.err(
                &format!("{section}[{i}].reason"),
                if flaky {
                    "a flaky entry needs a reason"
                } else {
                    "an expectation needs a reason"
                },
            ));
        }
        if flaky && e.tests.is_empty() {
            return Err(cx.err(
                &format!("{section}[{i}]"),
                "a flaky entry names its tests (`tests: [Suite.Test]`); a whole cell cannot be flaky",
            ));
        }
        expect.push(Expectation {
            cells: e.cells.clone(),
            tests: e.tests.clone(),
            reason: e.reason.clone(),
            flaky,
        });
    }
    Ok(expect)
}

/// `report:`: rows and columns must name known keys.
fn read_report(
    cx: &Ctx,
    raw: Option<&RawReport>,
    keys: &[String],
) -> Result<ReportLayout, SpecError> {
    let Some(r) = raw else {
        return Ok(ReportLayout::default());
    };
    for (field, names) in [("rows", &r.rows), ("columns", &r.columns)] {
        for (i, n) in names.iter().enumerate() {
            if !keys.contains(n) {
                return Err(cx.err(
                    &format!("report.{field}[{i}]"),
                    format!(
                        "report {field} names `{n}`, which is no axis (have: {})",
                        keys.join(", ")
                    ),
                ));
            }
        }
    }
    for (i, g) in r.packages.iter().enumerate() {
        if g.trim().is_empty() {
            return Err(cx.err(
                &format!("report.packages[{i}]"),
                "report packages must be package-name globs, not empty".to_string(),
            ));
        }
    }
    for (i, g) in r.gfx_targets.iter().enumerate() {
        let ok = g.starts_with("gfx")
            && g.len() > 3
            && g.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-:+".contains(c));
        if !ok {
            return Err(cx.err(
                &format!("report.gfx_targets[{i}]"),
                format!("`{g}` is no gfx target (e.g. gfx1030, gfx90a:xnack+, gfx11-generic)"),
            ));
        }
    }
    Ok(ReportLayout {
        rows: r.rows.clone(),
        columns: r.columns.clone(),
        packages: r.packages.clone(),
        gfx_targets: r.gfx_targets.clone(),
        junit: r.junit,
    })
}

/// A `memory:` value that is no size of at least 4 MiB, as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a memory size of at least 4m (write e.g. 512m or 4g)")]
struct MemorySizeError(String);

/// `512m`, `4g`, `1048576` → bytes.
fn parse_bytes(text: &str) -> Result<u64, MemorySizeError> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.trim_end_matches("ib").trim_end_matches('b');
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        Some('t') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|n| *n >= 4 << 20)
        .ok_or_else(|| MemorySizeError(text.to_string()))
}

/// A refusal of the raw model: its path and message (`ci: unknown field
/// `runs-on`, expected …`), at its node's position.
fn serde_error(path: &Path, e: &tree::DeError) -> SpecError {
    SpecError::new(path, e.pos, with_suggestion(e.to_string()))
}

/// serde's "unknown field `x`, expected one of `a`, `b`" with "did you mean
/// `a`?" when `x` looks like a typo of one of them, or of a `matrix:` key.
fn with_suggestion(message: String) -> String {
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return message;
    };
    let Some((field, expected)) = rest.split_once('`') else {
        return message;
    };
    let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    if let Some(word) = suggest::closest(field, known.iter().copied()) {
        return format!("{message}; did you mean `{word}`?");
    }
    match suggest::closest(field, ["include", "exclude"]) {
        Some(word) => format!("{message}; did you mean `{word}` (it goes under `matrix:`)?"),
        None => message,
    }
}
