//! Turns the raw model and the positioned tree into a validated [`Spec`].

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
    parse_duration, suite, Axis, BuildTemplate, CacheTemplate, CiTemplate, Entry,
    EnvironmentTemplate, Expectation, GpuCount, GpuPolicy, GpuTemplate, GpuUse, ReportLayout,
    SourceTemplate, Spec, SpecError, StepTemplate, Template,
};

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
    let classify = suite::read_classify(&raw.classify, &|f, m| cx.err(f, m))?;
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
            .map(|r| crate::spec::SlurmCi {
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
            .map(|r| crate::spec::K8sCi {
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

/// `build:`: keys that are keys of the matrix, each once, and steps that
/// are scripts (a build has no GPU, and tests belong in `steps:`).
fn read_build(
    cx: &Ctx,
    raw: &RawBuild,
    keys: &[String],
    has_environment: bool,
) -> Result<BuildTemplate, SpecError> {
    if !has_environment {
        return Err(cx.err(
            "build",
            "`build:` needs an `environment:`: the build runs in the environment's image",
        ));
    }
    for (i, axis) in raw.per.iter().enumerate() {
        if !keys.contains(axis) {
            return Err(cx.err(
                &format!("build.per[{i}]"),
                format!(
                    "`{axis}` is no key of the matrix (keys: {})",
                    keys.join(", ")
                ),
            ));
        }
        if raw.per[..i].contains(axis) {
            return Err(cx.err(
                &format!("build.per[{i}]"),
                format!("`{axis}` is named twice"),
            ));
        }
    }
    if raw.steps.is_empty() {
        return Err(cx.err("build", "`build:` has no steps"));
    }
    let steps = read_steps(cx, "build.steps", &raw.steps)?;
    for (i, (s, r)) in steps.iter().zip(&raw.steps).enumerate() {
        let f = format!("build.steps[{i}]");
        let refused = if s.suite.is_some() {
            Some("runs a test suite; tests belong in `steps:`, which start from the build")
        } else if !s.junit.is_empty() {
            Some("names JUnit files; tests belong in `steps:`, which start from the build")
        } else if r.gpu.is_some() {
            Some("asks for a GPU; a build runs without one (cells lease GPUs)")
        } else {
            None
        };
        if let Some(why) = refused {
            return Err(cx.err(&f, format!("build step `{}` {why}", s.name)));
        }
    }
    Ok(BuildTemplate {
        per: raw.per.clone(),
        steps,
    })
}

/// `steps:` (or `build.steps:`, `field`): each with a unique non-empty
/// name, a valid timeout and GPU need.
fn read_steps(cx: &Ctx, field: &str, raw: &[RawStep]) -> Result<Vec<StepTemplate>, SpecError> {
    let mut steps = Vec::with_capacity(raw.len());
    for (i, s) in raw.iter().enumerate() {
        let f = format!("{field}[{i}]");
        if s.name.trim().is_empty() {
            return Err(cx.err(&format!("{f}.name"), "a step needs a non-empty name"));
        }
        if let Some(prev) = steps.iter().position(|p: &StepTemplate| p.name == s.name) {
            return Err(cx.err(
                &format!("{f}.name"),
                format!(
                    "step name `{}` is already used by step {}",
                    s.name,
                    prev + 1
                ),
            ));
        }
        let timeout = match &s.timeout {
            Some(t) => Some(
                parse_duration(t).map_err(|e| cx.err(&format!("{f}.timeout"), e.to_string()))?,
            ),
            None => None,
        };
        let gpu = match &s.gpu {
            Some(g) => Some(GpuUse::parse(g).ok_or_else(|| {
                cx.err(
                    &format!("{f}.gpu"),
                    format!("gpu must be none, optional or required, not `{g}`"),
                )
            })?),
            None => None,
        };
        let suite = suite::read_suite(
            &f,
            s.gtest.as_ref(),
            s.ctest.as_ref(),
            cx.rerun_failures,
            &|field, src| cx.template(field, src),
            &|field, m| cx.err(field, m),
        )?;
        let suite = match (&s.autopkgtest, suite) {
            (Some(_), Some(_)) => {
                return Err(cx.err(
                    &format!("{f}.autopkgtest"),
                    "a step runs one suite: give `gtest`, `ctest` or `autopkgtest`, not two",
                ))
            }
            (Some(a), None) => Some(suite::read_autopkgtest(
                &f,
                a,
                &|field, src| cx.template(field, src),
                &|field, m| cx.err(field, m),
            )?),
            (None, suite) => suite,
        };
        let backtrace = match &s.backtrace {
            Some(b) => Some(read_backtrace(cx, &format!("{f}.backtrace"), b)?),
            None => None,
        };
        let rerun_failures = suite::read_step_reruns(
            &f,
            s.rerun_failures,
            cx.rerun_failures,
            suite.is_some(),
            !s.junit.is_empty(),
            &|field, m| cx.err(field, m),
        )?;
        if s.run.is_none() && suite.is_none() {
            return Err(cx.err(
                &f,
                format!(
                    "step `{}` has nothing to run: give `run`, `gtest`, `ctest` or `autopkgtest`",
                    s.name
                ),
            ));
        }
        steps.push(StepTemplate {
            name: s.name.clone(),
            run: s.run.as_ref().map(|r| cx.template(format!("{f}.run"), r)),
            suite,
            timeout,
            junit: s
                .junit
                .iter()
                .enumerate()
                .map(|(j, g)| cx.template(format!("{f}.junit[{j}]"), g))
                .collect(),
            gpu,
            continue_on_error: s.continue_on_error,
            backtrace,
            rerun_failures,
        });
    }
    Ok(steps)
}

/// `backtrace:` of a step: `on` error or crash, breakpoints as gdb takes
/// them (one line each), a timeout (2 minutes) and a frame count (32).
fn read_backtrace(
    cx: &Ctx,
    f: &str,
    b: &super::raw::RawBacktrace,
) -> Result<super::BacktraceSpec, SpecError> {
    let on = match b.on.as_str() {
        "error" => super::BacktraceOn::Error,
        "crash" => super::BacktraceOn::Crash,
        other => {
            return Err(cx.err(
                &format!("{f}.on"),
                format!("backtrace.on must be error or crash, not `{other}`"),
            ))
        }
    };
    if let Some(bad) = b
        .breaks
        .iter()
        .find(|x| x.trim().is_empty() || x.contains(['\n', '\r', '\'', '"', '\\']))
    {
        return Err(cx.err(
            &format!("{f}.break"),
            format!(
                "a breakpoint is one location gdb understands (a function, file:line), not `{bad}`"
            ),
        ));
    }
    let timeout = match &b.timeout {
        Some(t) => parse_duration(t).map_err(|e| cx.err(&format!("{f}.timeout"), e.to_string()))?,
        None => std::time::Duration::from_secs(120),
    };
    let frames = b.frames.unwrap_or(32);
    if !(1..=256).contains(&frames) {
        return Err(cx.err(
            &format!("{f}.frames"),
            format!("backtrace.frames must be between 1 and 256, not {frames}"),
        ));
    }
    Ok(super::BacktraceSpec {
        on,
        breaks: b.breaks.iter().map(|x| x.trim().to_string()).collect(),
        timeout,
        frames,
    })
}

/// `cache:`: absolute paths, each once, not the root or a directory
/// rocmatrix puts files in.
fn read_caches(cx: &Ctx, raw: &[RawCache]) -> Result<Vec<CacheTemplate>, SpecError> {
    let mut caches: Vec<CacheTemplate> = Vec::new();
    for (i, c) in raw.iter().enumerate() {
        let f = format!("cache[{i}]");
        let path = c.path.trim_end_matches('/');
        let bad = if !c.path.starts_with('/') {
            Some("must be an absolute path")
        } else if path.is_empty() {
            Some("may not be `/`")
        } else if path.split('/').any(|p| p == "." || p == "..") {
            Some("may not contain `.` or `..`")
        } else if path == "/rocmatrix" || path.starts_with("/rocmatrix/") {
            Some("may not be under /rocmatrix, where rocmatrix puts the step scripts")
        } else {
            None
        };
        if let Some(why) = bad {
            return Err(cx.err(
                &format!("{f}.path"),
                format!("cache path `{}` {why}", c.path),
            ));
        }
        if let Some(prev) = caches.iter().position(|x| x.path == path) {
            return Err(cx.err(
                &format!("{f}.path"),
                format!("cache path `{path}` is already cache[{prev}]"),
            ));
        }
        if c.key.trim().is_empty() {
            return Err(cx.err(&format!("{f}.key"), "a cache needs a non-empty key"));
        }
        caches.push(CacheTemplate {
            path: path.to_string(),
            key: cx.template(format!("{f}.key"), &c.key),
        });
    }
    Ok(caches)
}

/// `sources:`: each named once, with a name usable as a directory name.
fn read_sources(cx: &Ctx, raw: &[RawSource]) -> Result<Vec<SourceTemplate>, SpecError> {
    let mut sources: Vec<SourceTemplate> = Vec::new();
    for (i, src) in raw.iter().enumerate() {
        let f = format!("sources[{i}]");
        let ok = !src.name.is_empty()
            && src
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
            && !src.name.starts_with('.');
        if !ok {
            return Err(cx.err(
                &format!("{f}.name"),
                format!(
                    "source name `{}` must be a plain directory name ([A-Za-z0-9._-])",
                    src.name
                ),
            ));
        }
        if sources.iter().any(|s| s.name == src.name) {
            return Err(cx.err(
                &format!("{f}.name"),
                format!("source `{}` is declared twice", src.name),
            ));
        }
        sources.push(SourceTemplate {
            name: src.name.clone(),
            url: cx.template(format!("{f}.url"), &src.url),
            reference: cx.template(
                format!("{f}.ref"),
                src.reference.as_deref().unwrap_or("HEAD"),
            ),
            patches: src
                .patches
                .iter()
                .enumerate()
                .map(|(j, p)| cx.template(format!("{f}.patches[{j}]"), p))
                .collect(),
        });
    }
    Ok(sources)
}

/// The keys a cell can have: the axes in order, then keys only includes add.
pub(super) fn spec_keys(axes: &[Axis], include: &[Entry]) -> Vec<String> {
    let mut keys: Vec<String> = axes.iter().map(|a| a.name.clone()).collect();
    let mut seen: HashSet<&str> = axes.iter().map(|a| a.name.as_str()).collect();
    for e in include {
        for (k, _) in &e.pairs {
            if seen.insert(k) {
                keys.push(k.clone());
            }
        }
    }
    keys
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

type MatrixParts = (Vec<Axis>, Vec<Entry>, Vec<Entry>);

fn read_matrix(cx: &Ctx, m: &Node) -> Result<MatrixParts, SpecError> {
    let pairs = match &m.kind {
        NodeKind::Map(p) => p,
        _ => {
            return Err(cx.node_err(
                m,
                format!(
                    "`matrix` must be a mapping of axes, found {}",
                    m.kind_name()
                ),
            ))
        }
    };
    let mut axes: Vec<Axis> = Vec::new();
    let mut axis_names: HashSet<&str> = HashSet::new();
    let mut include = Vec::new();
    let mut exclude = Vec::new();
    for (k, v) in pairs {
        let key = k
            .as_scalar()
            .ok_or_else(|| cx.node_err(k, "a matrix key must be a plain name"))?;
        match key {
            "include" => include = read_entries(cx, v, "include")?,
            "exclude" => exclude = read_entries(cx, v, "exclude")?,
            _ => {
                let items = match &v.kind {
                    NodeKind::Seq(items) => items,
                    _ => {
                        return Err(cx.node_err(
                            v,
                            format!(
                                "axis `{key}` must be a list of values, found {}",
                                v.kind_name()
                            ),
                        ))
                    }
                };
                if items.is_empty() {
                    return Err(cx.node_err(
                        v,
                        format!("axis `{key}` is empty; give it at least one value"),
                    ));
                }
                let mut values: Vec<String> = Vec::with_capacity(items.len());
                let mut seen: HashSet<&str> = HashSet::with_capacity(items.len());
                for item in items {
                    let value = item.as_scalar().ok_or_else(|| {
                        let hint = match suggest::closest(key, ["include", "exclude"]) {
                            Some(word) => format!("; did you mean `{word}`?"),
                            None => String::new(),
                        };
                        cx.node_err(
                            item,
                            format!(
                                "values of axis `{key}` must be scalars, found {}{hint}",
                                item.kind_name()
                            ),
                        )
                    })?;
                    if !seen.insert(value) {
                        return Err(
                            cx.node_err(item, format!("axis `{key}` lists `{value}` twice"))
                        );
                    }
                    values.push(value.to_string());
                }
                if !axis_names.insert(key) {
                    return Err(cx.node_err(k, format!("axis `{key}` is declared twice")));
                }
                axes.push(Axis {
                    name: key.to_string(),
                    values,
                    pos: k.pos,
                });
            }
        }
    }
    for e in &exclude {
        for (k, _) in &e.pairs {
            if !axis_names.contains(k.as_str()) {
                let names: Vec<&str> = axes.iter().map(|a| a.name.as_str()).collect();
                return Err(SpecError::new(
                    cx.path,
                    Some(e.pos),
                    format!(
                        "exclude entry names `{k}`, which is no axis (axes: {})",
                        names.join(", ")
                    ),
                ));
            }
        }
    }
    Ok((axes, include, exclude))
}

fn read_entries(cx: &Ctx, v: &Node, what: &str) -> Result<Vec<Entry>, SpecError> {
    let items = match &v.kind {
        NodeKind::Seq(items) => items,
        NodeKind::Null => return Ok(Vec::new()),
        _ => {
            return Err(cx.node_err(
                v,
                format!(
                    "`{what}` must be a list of mappings, found {}",
                    v.kind_name()
                ),
            ))
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let pairs = match &item.kind {
            NodeKind::Map(p) => p,
            _ => {
                return Err(cx.node_err(
                    item,
                    format!(
                        "each `{what}` entry must be a mapping, found {}",
                        item.kind_name()
                    ),
                ))
            }
        };
        if pairs.is_empty() {
            return Err(cx.node_err(item, format!("an empty `{what}` entry matches nothing")));
        }
        let mut entry = Vec::with_capacity(pairs.len());
        for (k, val) in pairs {
            let key = k
                .as_scalar()
                .ok_or_else(|| cx.node_err(k, format!("`{what}` keys must be plain names")))?;
            let value = val.as_scalar().ok_or_else(|| {
                cx.node_err(
                    val,
                    format!(
                        "`{what}` value of `{key}` must be a scalar, found {}",
                        val.kind_name()
                    ),
                )
            })?;
            entry.push((key.to_string(), value.to_string()));
        }
        out.push(Entry {
            pairs: entry,
            pos: item.pos,
        });
    }
    Ok(out)
}

fn read_environment(cx: &Ctx, e: &RawEnvironment) -> Result<EnvironmentTemplate, SpecError> {
    let base = e.base.as_deref().ok_or_else(|| {
        cx.err(
            "environment",
            "environment needs `base`: an image reference (debian:bookworm) or a rootfs tarball path",
        )
    })?;
    let opt = |field: &str, v: &Option<String>| {
        v.as_ref()
            .map(|s| cx.template(format!("environment.{field}"), s))
    };
    Ok(EnvironmentTemplate {
        family: cx.template(
            "environment.family",
            e.family.as_deref().unwrap_or("debian"),
        ),
        base: cx.template("environment.base", base),
        suite: opt("suite", &e.suite),
        mirror: opt("mirror", &e.mirror),
        packages: e
            .packages
            .iter()
            .enumerate()
            .map(|(i, p)| cx.template(format!("environment.packages[{i}]"), p))
            .collect(),
        llvm: read_llvm(cx, e.llvm.as_ref()),
        setup: opt("setup", &e.setup),
        env: e
            .env
            .iter()
            .map(|(k, v)| (k.clone(), cx.template(format!("environment.env.{k}"), v)))
            .collect::<BTreeMap<_, _>>(),
        network: opt("network", &e.network),
        suites: e
            .suites
            .iter()
            .enumerate()
            .map(|(i, p)| cx.template(format!("environment.suites[{i}]"), p))
            .collect(),
        prefer: opt("prefer", &e.prefer),
    })
}

fn read_llvm(cx: &Ctx, l: Option<&super::raw::RawLlvm>) -> super::LlvmTemplate {
    use super::raw::RawLlvm;
    let list = |field: &str, items: &[String]| -> Vec<Template> {
        items
            .iter()
            .enumerate()
            .map(|(i, t)| cx.template(format!("environment.llvm.{field}[{i}]"), t))
            .collect()
    };
    match l {
        None => super::LlvmTemplate {
            debug: cx.template("environment.llvm", "release"),
            version: None,
            tools: Vec::new(),
            targets: Vec::new(),
        },
        Some(RawLlvm::Flavour(s)) => super::LlvmTemplate {
            debug: cx.template("environment.llvm", s),
            version: None,
            tools: Vec::new(),
            targets: Vec::new(),
        },
        Some(RawLlvm::Source(m)) => super::LlvmTemplate {
            debug: cx.template("environment.llvm.debug", &m.debug),
            version: m
                .version
                .as_ref()
                .map(|v| cx.template("environment.llvm.version", v)),
            tools: list("tools", &m.tools),
            targets: list("targets", &m.targets),
        },
    }
}

fn read_gpu(cx: &Ctx, g: Option<&RawGpu>, axes: &[Axis]) -> Result<GpuTemplate, SpecError> {
    let default_target = || {
        axes.iter().any(|a| a.name == "gfx").then(|| Template {
            source: "{{ matrix.gfx }}".into(),
            field: "gpu.target".into(),
            pos: cx.tree.pos_of("gpu"),
        })
    };
    let Some(g) = g else {
        return Ok(GpuTemplate {
            need: GpuUse::None,
            count: GpuCount::N(1),
            target: default_target(),
            policy: GpuPolicy::Exact,
            cdi: Vec::new(),
        });
    };
    let need = match &g.need {
        Some(n) => GpuUse::parse(n).ok_or_else(|| {
            cx.err(
                "gpu.need",
                format!("gpu.need must be none, optional or required, not `{n}`"),
            )
        })?,
        None => GpuUse::None,
    };
    let policy = match &g.policy {
        Some(p) => GpuPolicy::parse(p).ok_or_else(|| {
            cx.err(
                "gpu.policy",
                format!("gpu.policy must be exact, compatible, override or extended, not `{p}`"),
            )
        })?,
        None => GpuPolicy::Exact,
    };
    let count = match &g.count {
        None => GpuCount::N(1),
        Some(RawCount::Number(0)) => {
            return Err(cx.err("gpu.count", "gpu.count must be at least 1 (or `all`)"))
        }
        Some(RawCount::Number(n)) => GpuCount::N(*n),
        Some(RawCount::Word(w)) if w == "all" => GpuCount::All,
        Some(RawCount::Word(w)) => {
            return Err(cx.err(
                "gpu.count",
                format!("gpu.count must be a number or `all`, not `{w}`"),
            ))
        }
    };
    Ok(GpuTemplate {
        need,
        count,
        target: match &g.target {
            Some(t) => Some(cx.template("gpu.target", t)),
            None => default_target(),
        },
        policy,
        cdi: g
            .cdi
            .iter()
            .enumerate()
            .map(|(i, n)| cx.template(format!("gpu.cdi[{i}]"), n))
            .collect(),
    })
}
