//! What a cell runs on: `environment:` (with its `llvm:`) and `gpu:`.

use super::*;

pub(super) fn read_environment(
    cx: &Ctx,
    e: &RawEnvironment,
) -> Result<EnvironmentTemplate, SpecError> {
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

fn read_llvm(
    cx: &Ctx,
    l: Option<&crate::matrix_file::raw::RawLlvm>,
) -> crate::matrix_file::LlvmTemplate {
    use crate::matrix_file::raw::RawLlvm;
    let list = |field: &str, items: &[String]| -> Vec<Template> {
        items
            .iter()
            .enumerate()
            .map(|(i, t)| cx.template(format!("environment.llvm.{field}[{i}]"), t))
            .collect()
    };
    match l {
        None => crate::matrix_file::LlvmTemplate {
            debug: cx.template("environment.llvm", "release"),
            git: None,
            reference: None,
            version: None,
            tools: Vec::new(),
            targets: Vec::new(),
            patches: Vec::new(),
        },
        Some(RawLlvm::Flavour(s)) => crate::matrix_file::LlvmTemplate {
            debug: cx.template("environment.llvm", s),
            git: None,
            reference: None,
            version: None,
            tools: Vec::new(),
            targets: Vec::new(),
            patches: Vec::new(),
        },
        Some(RawLlvm::Source(m)) => crate::matrix_file::LlvmTemplate {
            debug: cx.template("environment.llvm.debug", &m.debug),
            git: m
                .git
                .as_ref()
                .map(|g| cx.template("environment.llvm.git", g)),
            reference: m
                .reference
                .as_ref()
                .map(|r| cx.template("environment.llvm.ref", r)),
            version: m
                .version
                .as_ref()
                .map(|v| cx.template("environment.llvm.version", v)),
            tools: list("tools", &m.tools),
            targets: list("targets", &m.targets),
            patches: list("patches", &m.patches),
        },
    }
}

pub(super) fn read_gpu(
    cx: &Ctx,
    g: Option<&RawGpu>,
    axes: &[Axis],
) -> Result<GpuTemplate, SpecError> {
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
