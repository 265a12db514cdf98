//! `gtest: adapter`: the ROCm team's `rocm-test-launcher … run-tests` tests
//! with their googletest binary run through rocmatrix's gtest adapter.
//!
//! A stanza whose `Test-Command` is `rocm-test-launcher [OPTIONS] DIR/run-tests
//! [ARGS]` (sid's rocFFT: `rocm-test-launcher
//! /usr/libexec/rocm/librocfft0-tests/run-tests`) is given to autopkgtest
//! as `rocm-test-launcher [OPTIONS] true`: autopkgtest still installs its
//! Depends and judges it, and the launcher still checks for an accessible
//! GPU (`/dev/kfd`, exit 77 without one, which `skippable` makes a SKIP).
//! When that passed, the adapter runs the binary `run-tests` would have run
//! (named in the script, beside it), with the arguments the command gave
//! `run-tests`.

use std::path::Path;
use std::time::Instant;

use super::control::Stanza;
use crate::plan::test_suite::Gtest;
use crate::test_suite::{Case, Log, TestSuiteContext, TestSuiteError};

/// How the adapter's run of one launched test went.
pub struct Adapted {
    /// The googletest cases, suites as googletest names them (with the
    /// binary's name first when `run-tests` runs several).
    pub cases: Vec<Case>,
    /// Why the test fails: (message, text).
    pub failure: Option<(String, String)>,
    /// A line for the test's own case: what ran, and how it went.
    pub note: String,
    /// The step's time ran out in it.
    pub timed_out: bool,
}

/// Runs the googletest binaries of `l`'s `run-tests` through the gtest
/// adapter (`crate::test_suite::gtest`), with the step's per-test timeout and
/// one shard per leased GPU; its JUnit files go under `out/gtest/TEST/`.
pub(super) async fn run(
    cx: &TestSuiteContext<'_>,
    per_test: Option<std::time::Duration>,
    l: &Launched,
    out: &Path,
    log: &Log<'_>,
    deadline: Instant,
) -> Result<Adapted, TestSuiteError> {
    let fail = |message: String| Adapted {
        cases: Vec::new(),
        failure: Some((message, String::new())),
        note: String::new(),
        timed_out: false,
    };
    let Some(script) = super::cat(cx, &l.run_tests).await? else {
        return Ok(fail(format!(
            "rocmatrix's gtest adapter: {} is not in the cell after autopkgtest installed the test's Depends",
            l.run_tests
        )));
    };
    let mut bins = binaries(&script, l.dir());
    bins.retain(|b| b != &l.run_tests);
    if bins.is_empty() {
        return Ok(fail(format!(
            "rocmatrix's gtest adapter: {} names no binary in {} for it to run",
            l.run_tests,
            l.dir()
        )));
    }
    let mut cases = Vec::new();
    let mut problems = Vec::new();
    let mut timed_out = false;
    for bin in &bins {
        let base = bin.rsplit('/').next().unwrap_or(bin);
        let slug = format!("{}-{}-{base}", cx.slug, l.name);
        let sub = TestSuiteContext {
            engine: cx.engine,
            container: cx.container,
            slug: &slug,
            junit_dir: out.join("gtest").join(&l.name).join(base),
            // Ends before the step does, so that its report is written.
            step_timeout: super::left(deadline)
                .saturating_sub(std::time::Duration::from_secs(10))
                .max(std::time::Duration::from_secs(1)),
            per_gpu: cx.per_gpu,
            env: cx.env.clone(),
            backtrace: cx.backtrace,
        };
        let g = Gtest {
            binary: bin.clone(),
            filter: l.filter.clone(),
            timeout_per_test: per_test,
            rerun_failures: 0,
            args: l.args.clone(),
        };
        note(
            log,
            &format!(
                "rocmatrix: {}: {bin} through the gtest adapter ({} shard(s))\n",
                l.name,
                cx.per_gpu.len().max(1)
            ),
        );
        let got = crate::test_suite::gtest::run(&sub, &g, log).await?;
        timed_out |= got.step_timed_out;
        if let Some(p) = &got.problem {
            problems.push(format!("{bin}: {p}"));
        }
        for mut c in got.cases {
            if bins.len() > 1 {
                c.suite = format!("{base}/{}", c.suite);
            }
            cases.push(c);
        }
    }
    let (failure, summary) = judge(&cases, &problems);
    Ok(Adapted {
        note: format!(
            "rocmatrix: {} through the gtest adapter: {summary}",
            bins.join(", ")
        ),
        cases,
        failure,
        timed_out,
    })
}

/// Why the adapter's run fails the launched test, if it does (a binary's
/// problem, else its failing tests), and its summary.
fn judge(cases: &[Case], problems: &[String]) -> (Option<(String, String)>, String) {
    let outcome = crate::test_suite::TestSuiteOutcome {
        cases: cases.to_vec(),
        junit: None,
        step_timed_out: false,
        problem: None,
        package: None,
    };
    let failing: Vec<String> = cases
        .iter()
        .filter(|c| c.verdict.is_failure())
        .map(|c| format!("{}.{}", c.suite, c.name))
        .collect();
    let summary = outcome.summary();
    let failure = if !problems.is_empty() {
        Some((
            format!("rocmatrix's gtest adapter: {}", problems.join("; ")),
            String::new(),
        ))
    } else if !failing.is_empty() {
        let mut text = failing
            .iter()
            .take(50)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n");
        if failing.len() > 50 {
            text.push_str(&format!("\n… and {} more", failing.len() - 50));
        }
        Some((
            format!("rocmatrix's gtest adapter: {} of {summary}", failing.len()),
            text,
        ))
    } else {
        None
    };
    (failure, summary)
}

/// A test whose command autopkgtest runs as `rocm-test-launcher … true`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launched {
    /// Index of its stanza.
    pub stanza: usize,
    /// autopkgtest's name for the test.
    pub name: String,
    /// The launcher's own options (`--cd-tmp`), kept.
    pub options: Vec<String>,
    /// The `run-tests` script (absolute, in the cell).
    pub run_tests: String,
    /// `--gtest_filter=` among the arguments, if any.
    pub filter: Option<String>,
    /// The other arguments the command gave `run-tests`.
    pub args: Vec<String>,
}

impl Launched {
    /// The directory of `run-tests`, where its binary is.
    pub fn dir(&self) -> &str {
        self.run_tests
            .rsplit_once('/')
            .map(|(d, _)| d)
            .filter(|d| !d.is_empty())
            .unwrap_or("/")
    }

    /// The command autopkgtest runs instead.
    pub fn command(&self) -> String {
        let mut words = vec!["rocm-test-launcher".to_string()];
        words.extend(self.options.iter().cloned());
        words.push("true".into());
        words.join(" ")
    }
}

/// The kept stanzas' `rocm-test-launcher … run-tests` tests. Only plain
/// commands are taken (words without quotes, variables, redirections or
/// other shell syntax but `*` and `?` in a filter), so that what is run is
/// exactly what the command says.
pub fn find(stanzas: &[Stanza], names: &[Vec<String>], keep: &[bool]) -> Vec<Launched> {
    let mut out = Vec::new();
    for (i, ((s, n), k)) in stanzas.iter().zip(names).zip(keep).enumerate() {
        if !k || s.get("Tests").is_some() || n.len() != 1 {
            continue;
        }
        let Some(cmd) = s.get("Test-Command") else {
            continue;
        };
        if let Some(l) = parse_command(cmd) {
            out.push(Launched {
                stanza: i,
                name: n[0].clone(),
                ..l
            });
        }
    }
    out
}

/// Writes `text` to the step log.
fn note(log: &Log<'_>, text: &str) {
    let mut sink = log.lock().unwrap_or_else(|p| p.into_inner());
    (*sink)(text.as_bytes());
}

/// `rocm-test-launcher [OPTIONS] [--] /DIR/run-tests [ARGS]`.
fn parse_command(cmd: &str) -> Option<Launched> {
    if cmd.contains(|c: char| "'\"`$;&|<>(){}\\[]~#\n".contains(c)) {
        return None;
    }
    let mut words = cmd.split_whitespace();
    let first = words.next()?;
    if first != "rocm-test-launcher" && first != "/usr/bin/rocm-test-launcher" {
        return None;
    }
    let mut options = Vec::new();
    let script = loop {
        let w = words.next()?;
        match w {
            "--" => break words.next()?,
            "--cd-tmp" => options.push(w.to_string()),
            _ if w.starts_with('-') => return None,
            _ => break w,
        }
    };
    if !script.starts_with('/') || !script.ends_with("/run-tests") {
        return None;
    }
    let mut filter = None;
    let mut args = Vec::new();
    for w in words {
        match w.strip_prefix("--gtest_filter=") {
            Some(f) if filter.is_none() => filter = Some(f.to_string()),
            _ => args.push(w.to_string()),
        }
    }
    Some(Launched {
        stanza: 0,
        name: String::new(),
        options,
        run_tests: script.to_string(),
        filter,
        args,
    })
}

/// The control file with the launched tests' `Test-Command` replaced by
/// [`Launched::command`] (its continuation lines dropped), only the kept
/// stanzas, each otherwise as written.
pub fn rewritten(text: &str, stanzas: &[Stanza], keep: &[bool], launched: &[Launched]) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for (i, (s, _)) in stanzas
        .iter()
        .zip(keep)
        .enumerate()
        .filter(|(_, (_, k))| **k)
    {
        let swap = launched.iter().find(|l| l.stanza == i);
        let mut in_command = false;
        for l in &lines[s.line - 1..(s.end - 1).min(lines.len())] {
            if l.starts_with('#') {
                continue;
            }
            if l.starts_with([' ', '\t']) {
                if !in_command {
                    out.push_str(l);
                    out.push('\n');
                }
                continue;
            }
            in_command = false;
            let is_command = l
                .split_once(':')
                .is_some_and(|(n, _)| n.eq_ignore_ascii_case("Test-Command"));
            match swap {
                Some(launch) if is_command => {
                    out.push_str(&format!("Test-Command: {}\n", launch.command()));
                    in_command = true;
                }
                _ => {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out.push('\n');
    }
    out
}

/// The binaries `run-tests` (the script's text, in `dir`) runs: each word
/// of a command line naming a file in `dir` (as `"$testsdir"/name`,
/// `${testsdir}/name`, `$testsdir/name` or `dir/name`), in order, once.
pub fn binaries(script: &str, dir: &str) -> Vec<String> {
    // The variables the script sets to `dir`.
    let mut prefixes: Vec<String> = vec![format!("{dir}/")];
    for l in script.lines() {
        let l = l.trim();
        if let Some((var, value)) = l.split_once('=') {
            let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
            let var = var.trim().trim_start_matches("export ").trim();
            if value.trim_end_matches('/') == dir
                && !var.is_empty()
                && var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                for p in [
                    format!("\"${var}\"/"),
                    format!("\"${{{var}}}\"/"),
                    format!("${{{var}}}/"),
                    format!("${var}/"),
                ] {
                    prefixes.push(p);
                }
            }
        }
    }
    let mut out: Vec<String> = Vec::new();
    for l in script.lines() {
        let l = l.trim();
        if l.starts_with('#') {
            continue;
        }
        for word in l.split_whitespace() {
            for p in &prefixes {
                let Some(rest) = word.strip_prefix(p.as_str()) else {
                    continue;
                };
                let name: String = rest
                    .trim_matches('"')
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || "._+-".contains(*c))
                    .collect();
                let path = format!("{dir}/{name}");
                if !name.is_empty() && name != "run-tests" && !out.contains(&path) {
                    out.push(path);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autopkgtest::control::{parse, test_names};

    /// sid's rocFFT 6.4.3-1: debian/tests/control and debian/bin/run-tests.
    const ROCFFT_CONTROL: &str = "Test-Command: rocm-test-launcher /usr/libexec/rocm/librocfft0-tests/run-tests\nFeatures: test-name=librocfft0-tests\nDepends: librocfft0-tests, pkg-rocm-tools\nRestrictions: allow-stderr, skippable\nArchitecture: amd64 arm64 ppc64el\n";
    const ROCFFT_RUN_TESTS: &str = "#!/bin/sh\n\ntestsdir=\"/usr/libexec/rocm/librocfft0-tests\"\n\n# If autopkgtest called us, pass some extra options if not set\nif [ -n \"$AUTOPKGTEST_ARTIFACTS\" ]; then\n    # Save output as XML to artifacts, for download\n    [ -n \"${GTEST_OUTPUT:-}\" ] || export GTEST_OUTPUT=\"xml:${AUTOPKGTEST_ARTIFACTS}/\"\nfi\n\n# Pass on all arguments to this script to the test binary\n\"$testsdir\"/rocfft-test \"$@\"\n";

    #[test]
    fn rocffts_test_is_launched_and_its_binary_found() {
        let text = format!("{ROCFFT_CONTROL}\nTests: other\n\nTest-Command: rocm-test-launcher sh -c 'x'\n\nTest-Command: rocm-test-launcher --cd-tmp -- /opt/t/run-tests --gtest_filter=A.* --gtest_brief=1\n");
        let s = parse("debian/tests/control", &text);
        let names = test_names(&s);
        let keep = vec![true; s.len()];
        let l = find(&s, &names, &keep);
        assert_eq!(l.len(), 2, "{l:#?}");
        assert_eq!(l[0].name, "librocfft0-tests");
        assert_eq!(l[0].dir(), "/usr/libexec/rocm/librocfft0-tests");
        assert_eq!(l[0].command(), "rocm-test-launcher true");
        assert_eq!(l[1].name, "command2");
        assert_eq!(l[1].command(), "rocm-test-launcher --cd-tmp true");
        assert_eq!(l[1].filter.as_deref(), Some("A.*"));
        assert_eq!(l[1].args, ["--gtest_brief=1"]);
        let out = rewritten(&text, &s, &keep, &l);
        assert!(out.starts_with("Test-Command: rocm-test-launcher true\nFeatures: test-name=librocfft0-tests\nDepends: librocfft0-tests, pkg-rocm-tools\n"), "{out}");
        assert!(out.contains("Test-Command: rocm-test-launcher sh -c 'x'\n"));
        assert!(out.contains("Test-Command: rocm-test-launcher --cd-tmp true\n"));
        assert_eq!(
            binaries(ROCFFT_RUN_TESTS, l[0].dir()),
            ["/usr/libexec/rocm/librocfft0-tests/rocfft-test"]
        );
    }

    #[test]
    fn binaries_by_path_and_braces() {
        let s = "#!/bin/sh\nD=/x/y\nexec ${D}/a-test \"$@\"\n/x/y/b_test --x\n\"$D\"/a-test\n";
        assert_eq!(binaries(s, "/x/y"), ["/x/y/a-test", "/x/y/b_test"]);
        assert!(binaries("#!/bin/sh\necho hi\n", "/x/y").is_empty());
    }
}
