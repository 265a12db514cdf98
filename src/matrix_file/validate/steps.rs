//! The steps of a matrix file and what they use: `build:`, `steps:` (with
//! their `backtrace:`), `cache:` and `sources:`.

use super::*;

/// `build:`: keys that are keys of the matrix, each once, and steps that
/// are scripts (a build has no GPU, and tests belong in `steps:`).
pub(super) fn read_build(
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
/// One piece: one check per field of a step, in the order the file's
/// documentation gives them, each error naming its field.
pub(super) fn read_steps(
    cx: &Ctx,
    field: &str,
    raw: &[RawStep],
) -> Result<Vec<StepTemplate>, SpecError> {
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
        let suite = test_suite::read_suite(
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
            (Some(a), None) => Some(test_suite::read_autopkgtest(
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
        let rerun_failures = test_suite::read_step_reruns(
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
pub(super) fn read_backtrace(
    cx: &Ctx,
    f: &str,
    b: &crate::matrix_file::raw::RawBacktrace,
) -> Result<crate::matrix_file::BacktraceSpec, SpecError> {
    let (on, on_timeout) = read_backtrace_on(cx, f, &b.on)?;
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
    Ok(crate::matrix_file::BacktraceSpec {
        on,
        on_timeout,
        breaks: b.breaks.iter().map(|x| x.trim().to_string()).collect(),
        timeout,
        frames,
    })
}

/// `backtrace.on`: `error`, `crash`, `timeout`, or a list of them (each
/// once; `error` already covers `crash`). Which failing commands run again
/// under gdb, and whether a step past its timeout gets gdb attached.
fn read_backtrace_on(
    cx: &Ctx,
    f: &str,
    on: &crate::matrix_file::raw::RawBacktraceOn,
) -> Result<(Option<crate::matrix_file::BacktraceOn>, bool), SpecError> {
    use crate::matrix_file::raw::RawBacktraceOn;
    use crate::matrix_file::BacktraceOn;
    let words: Vec<(String, &str)> = match on {
        RawBacktraceOn::One(w) => vec![(format!("{f}.on"), w.as_str())],
        RawBacktraceOn::Many(ws) => ws
            .iter()
            .enumerate()
            .map(|(i, w)| (format!("{f}.on[{i}]"), w.as_str()))
            .collect(),
    };
    if words.is_empty() {
        return Err(cx.err(
            &format!("{f}.on"),
            "backtrace.on needs at least one of error, crash, timeout".to_string(),
        ));
    }
    let (mut failing, mut timeout) = (None, false);
    for (place, word) in words {
        let was = match word {
            "error" | "crash" if failing.is_some() => true,
            "error" => failing.replace(BacktraceOn::Error).is_some(),
            "crash" => failing.replace(BacktraceOn::Crash).is_some(),
            "timeout" => std::mem::replace(&mut timeout, true),
            other => {
                return Err(cx.err(
                    &place,
                    format!("backtrace.on must be error or crash, not `{other}` (or timeout, or a list of them: [error, timeout])"),
                ))
            }
        };
        if was {
            return Err(cx.err(
                &place,
                format!("backtrace.on names `{word}` twice, or both error and crash (error already covers a crash)"),
            ));
        }
    }
    Ok((failing, timeout))
}

/// `cache:`: absolute paths, each once, not the root or a directory
/// rocmatrix puts files in.
pub(super) fn read_caches(cx: &Ctx, raw: &[RawCache]) -> Result<Vec<CacheTemplate>, SpecError> {
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
pub(super) fn read_sources(cx: &Ctx, raw: &[RawSource]) -> Result<Vec<SourceTemplate>, SpecError> {
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
