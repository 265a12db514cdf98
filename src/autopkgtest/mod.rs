//! `autopkgtest:` steps: a Debian source package's own tests
//! (`debian/tests/control`) run by Debian's `autopkgtest` in the cell, the
//! cell being the testbed (its `null` virtualisation server), so that every
//! verdict is autopkgtest's own.
//!
//! - [`control`]: the control file read per stanza, with `file:line` for
//!   the stanzas autopkgtest would refuse the whole run over;
//! - [`summary`]: autopkgtest's summary file, one verdict per test;
//! - [`script`]: the shell run in the cell (fetching the source package
//!   against the signed Sources index, installing autopkgtest, running it);
//! - [`cases`]: verdicts, the tests' output and googletest XML left in
//!   their artifacts, as JUnit test cases.
//!
//! Called by the cell runner (`src/run/steps.rs`) like the `gtest:` and
//! `ctest:` adapters of `src/test_suite/`, on which it stands, and returning
//! their [`TestSuiteOutcome`].

pub mod cases;
pub mod control;
pub mod launcher;
pub mod script;
pub mod summary;
pub mod verdict;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::engine::ExecOutcome;
use crate::matrix_file::source_pin::parse_source;
use crate::plan::test_suite::Autopkgtest;
use crate::store::record::PackageVerdict;
use crate::test_suite::{
    Case, CaseVerdict, Log, TestSuiteContext, TestSuiteError, TestSuiteOutcome,
};

/// Where the step's work lives in the container.
const WORK_ROOT: &str = "/rocmatrix/autopkgtest";

/// The directory of the cell (on the host) that holds each step's
/// autopkgtest output directory, `autopkgtest/NN-step/`.
pub const CELL_DIR: &str = crate::store::test_installs::AUTOPKGTEST;

/// How much of autopkgtest's console output reaches the step log (all of
/// it is in `log` of its output directory).
const LOG_BYTES: u64 = 8 * 1024 * 1024;

/// The largest output directory copied out of the container.
const MAX_OUTPUT: u64 = 512 * 1024 * 1024;

/// One autopkgtest step as it runs: the cell, the step's settings, its log,
/// its work directory in the container and its deadline.
struct Step<'s, 'l> {
    cx: &'s TestSuiteContext<'s>,
    a: &'s Autopkgtest,
    log: &'s Log<'l>,
    /// `WORK_ROOT/<step slug>`.
    work: String,
    deadline: Instant,
}

impl Step<'_, '_> {
    /// What is left of the step.
    fn left(&self) -> Duration {
        left(self.deadline)
    }

    /// Runs bash `script` with `args` within what is left of the step.
    async fn shell(
        &self,
        script: &str,
        args: &[&str],
    ) -> Result<(Option<i64>, String), TestSuiteError> {
        shell(self.cx, script, args, self.log, self.left()).await
    }

    /// A line of rocmatrix's own in the step log.
    fn say(&self, line: &str) {
        (*self.log.lock().unwrap_or_else(|p| p.into_inner()))(line.as_bytes());
    }
}

/// The tree's `debian/tests/control` as read: its text, its stanzas, and
/// which of them run (the others autopkgtest would refuse the whole run
/// over, with why).
struct Control {
    text: String,
    stanzas: Vec<control::Stanza>,
    names: Vec<Vec<String>>,
    /// Per stanza, the first test file it names that the tree lacks.
    missing: Vec<Option<String>>,
    keep: Vec<bool>,
}

/// Runs the step's autopkgtests in the cell.
pub async fn run(
    cx: &TestSuiteContext<'_>,
    a: &Autopkgtest,
    log: &Log<'_>,
) -> Result<TestSuiteOutcome, TestSuiteError> {
    let s = Step {
        cx,
        a,
        log,
        work: format!("{WORK_ROOT}/{}", cx.slug),
        deadline: Instant::now() + cx.step_timeout,
    };
    let (tree, mut package) = match (&a.source, &a.path) {
        (Some(src), None) => fetch(&s, src).await?,
        (None, Some(p)) => (p.clone(), String::new()),
        (Some(src), Some(p)) => {
            return Ok(problem(&format!(
                "autopkgtest's source ({src}) and path ({p}) both rendered non-empty for this cell: give one"
            )))
        }
        (None, None) => {
            return Ok(problem(
                "autopkgtest's source and path both rendered empty for this cell: give one",
            ))
        }
    };
    if s.shell(script::INSTALL, &[]).await?.0 != Some(0) {
        return Err(infra(
            "autopkgtest",
            "could not be installed from the cell's archive (apt-get install autopkgtest dpkg-dev failed; see the step log)",
        ));
    }
    let control_path = format!("{tree}/debian/tests/control");
    let Some(text) = cat(cx, &control_path).await? else {
        return Ok(problem(&format!(
            "{control_path}: no such file: the tree has no autopkgtests"
        )));
    };
    if package.is_empty() {
        package = source_name(cx, &tree).await?;
    }
    let control = read_control(cx, &tree, text).await?;
    let launched = if a.gtest_adapter {
        launcher::find(&control.stanzas, &control.names, &control.keep)
    } else {
        Vec::new()
    };
    let run_tree = run_tree(&s, &tree, &control, &launched).await?;
    let ran = if control.keep.iter().any(|k| *k) {
        Some(run_autopkgtest(&s, &run_tree).await?)
    } else {
        None
    };
    judge(&s, &package, &control, &launched, ran).await
}

/// The control file's stanzas, and which of them run.
async fn read_control(
    cx: &TestSuiteContext<'_>,
    tree: &str,
    text: String,
) -> Result<Control, TestSuiteError> {
    let stanzas = control::parse("debian/tests/control", &text);
    let names = control::test_names(&stanzas);
    let missing = missing_files(cx, tree, &stanzas).await?;
    let keep = stanzas
        .iter()
        .zip(&missing)
        .map(|(s, m)| s.problem.is_none() && m.is_none())
        .collect();
    Ok(Control {
        text,
        stanzas,
        names,
        missing,
        keep,
    })
}

/// Judges how autopkgtest's run went (`None`: every stanza was left out):
/// its summary and output directory copied out, the launched tests run
/// through the gtest adapter, the JUnit file written, and the package's
/// verdict from its exit status — a testbed failure an infrastructure
/// error of the cell.
async fn judge(
    s: &Step<'_, '_>,
    package: &str,
    control: &Control,
    launched: &[launcher::Launched],
    ran: Option<Ran>,
) -> Result<TestSuiteOutcome, TestSuiteError> {
    let (cx, work) = (s.cx, &s.work);
    let host_out = cell_dir(cx).join(CELL_DIR).join(cx.slug);
    let mut judged = cases::Judged::new(package);
    let mut adapted = AdapterRun::default();
    let mut lines = Vec::new();
    if let Some(ran) = &ran {
        copy_out(cx, &format!("{work}/out"), &host_out).await?;
        let summary_text = cat(cx, &format!("{work}/summary"))
            .await?
            .unwrap_or_default();
        lines = summary::parse(&summary_text);
        judged.add_summary(&lines, &host_out);
        judged.not_run(&control.names, &control.keep, &ran.ending());
        adapted = adapt(s, launched, &control.stanzas, &mut judged, &host_out).await?;
        let at = host_out.join("summary");
        on_disk(at, move |p| {
            crate::test_suite::junit_out::save(p, summary_text.as_bytes())
        })
        .await?;
    }
    judged.bad_stanzas(&control.stanzas, &control.names, &control.missing);
    judged.artifacts(&host_out);
    let cases = judged.into_cases();
    let path = cx.junit_dir.join("autopkgtest.xml");
    let for_write = cases.clone();
    on_disk(path.clone(), move |p| {
        crate::test_suite::junit_out::write(p, "autopkgtest", &for_write)
    })
    .await?;
    let step_timed_out = ran.as_ref().is_some_and(|r| r.timed_out) || adapted.timed_out;
    // A run cut short has no status to judge the package by.
    let package = match &ran {
        Some(r) if r.timed_out => None,
        _ => Some(verdict::judge(&verdict::Seen {
            exit: ran.as_ref().and_then(|r| r.exit),
            lines: &lines,
            left_out: &cases::left_out(&control.stanzas, &control.missing),
            adapter_failed: adapted.failed,
        })),
    };
    if let Some(p) = package
        .as_ref()
        .filter(|p| p.verdict == PackageVerdict::Tmpfail)
    {
        let said = ran
            .as_ref()
            .and_then(|r| r.error.as_ref())
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        return Err(infra("autopkgtest", &format!("{}{said}", p.line())));
    }
    if let Some(p) = &package {
        s.say(&format!("rocmatrix: the package: {}\n", p.line()));
    }
    Ok(TestSuiteOutcome {
        problem: None,
        cases,
        junit: Some(path),
        step_timed_out,
        package,
    })
}

/// The tree autopkgtest runs: `tree` itself, or a copy at `WORK/tree`
/// whose control file leaves out the bad stanzas and gives the `launched`
/// tests `rocm-test-launcher … true` (`gtest: adapter`).
async fn run_tree(
    s: &Step<'_, '_>,
    tree: &str,
    control: &Control,
    launched: &[launcher::Launched],
) -> Result<String, TestSuiteError> {
    let Control {
        text,
        stanzas,
        keep,
        ..
    } = control;
    let partial = keep.iter().any(|k| !k) && keep.iter().any(|k| *k);
    if !partial && launched.is_empty() {
        return Ok(tree.to_string());
    }
    let run_tree = format!("{}/tree", s.work);
    let filtered = if launched.is_empty() {
        control::filtered(text, stanzas, keep)
    } else {
        launcher::rewritten(text, stanzas, keep, launched)
    };
    let copy = "rm -rf \"$2\" && mkdir -p \"${2%/*}\" && cp -a \"$1\" \"$2\" && printf %s \"$3\" > \"$2/debian/tests/control\"";
    let args = [tree, run_tree.as_str(), filtered.as_str()];
    if s.shell(copy, &args).await?.0 != Some(0) {
        return Err(infra(
            &run_tree,
            "could not copy the test tree to leave out its bad stanzas",
        ));
    }
    Ok(run_tree)
}

/// How the launched tests went through the gtest adapter.
#[derive(Default)]
struct AdapterRun {
    /// The step's time ran out in it.
    timed_out: bool,
    /// Tests that failed there and count against the package (a `flaky`
    /// test's failure does not, as autopkgtest ignores it).
    failed: usize,
}

/// `gtest: adapter`: each launched test that autopkgtest passed (the
/// launcher found a GPU) has its googletest binary run through the gtest
/// adapter (`out`: the output directory on the host).
async fn adapt(
    s: &Step<'_, '_>,
    launched: &[launcher::Launched],
    stanzas: &[control::Stanza],
    judged: &mut cases::Judged,
    out: &Path,
) -> Result<AdapterRun, TestSuiteError> {
    let mut run = AdapterRun::default();
    for l in launched {
        if !judged.passed(&l.name) {
            continue;
        }
        let got = launcher::run(s.cx, s.a.timeout_per_test, l, out, s.log, s.deadline).await?;
        run.timed_out |= got.timed_out;
        let flaky = stanzas[l.stanza].restrictions().contains(&"flaky");
        run.failed += usize::from(got.failure.is_some() && !flaky);
        judged.adapted(&l.name, flaky, got);
    }
    Ok(run)
}

/// How autopkgtest's run ended.
struct Ran {
    /// autopkgtest's exit status (`None`: killed at the step's timeout).
    exit: Option<i64>,
    timed_out: bool,
    /// Its last `ERROR:` line, if it printed one.
    error: Option<String>,
}

impl Ran {
    /// Why a test it did not judge was not run.
    fn ending(&self) -> String {
        if self.timed_out {
            return "not run: the step's timeout ended autopkgtest first".into();
        }
        match (&self.error, self.exit) {
            (Some(e), _) => format!("not run: autopkgtest stopped: {e}"),
            (None, Some(c)) => format!("not run: autopkgtest exited with status {c} before it"),
            (None, None) => "not run: autopkgtest did not finish".into(),
        }
    }
}

/// Runs [`script::RUN`] on `tree` within what is left of the step.
async fn run_autopkgtest(s: &Step<'_, '_>, tree: &str) -> Result<Ran, TestSuiteError> {
    // autopkgtest and `timeout` end before the step does, so that its
    // summary and output directory are still there to read.
    let whole = s.left().saturating_sub(Duration::from_secs(30));
    let whole = whole.max(Duration::from_secs(5));
    // By default a test may take what is left, less a margin in which
    // autopkgtest still writes its own `timed out` verdict before `timeout`
    // ends it.
    let per_test =
        s.a.timeout_per_test
            .unwrap_or(whole.saturating_sub(Duration::from_secs(15)))
            .min(whole)
            .max(Duration::from_secs(1));
    let args = [
        tree.to_string(),
        s.work.clone(),
        per_test.as_secs().to_string(),
        whole.as_secs().to_string(),
        LOG_BYTES.to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (exit, text) = s.shell(script::RUN, &args).await?;
    let status = text
        .lines()
        .rev()
        .find_map(|l| {
            l.strip_prefix(script::MARK)
                .and_then(|r| r.trim().strip_prefix("exit "))
        })
        .and_then(|c| c.trim().parse::<i64>().ok());
    let error = text
        .lines()
        .rev()
        .find_map(|l| l.split_once("ERROR: ").map(|(_, e)| e.trim().to_string()));
    let timed_out = exit.is_none() || matches!(status, Some(124) | Some(137));
    Ok(Ran {
        exit: status.filter(|_| exit.is_some()),
        timed_out,
        error,
    })
}

/// Fetches source package `src` (`NAME` or `NAME=VERSION`) into
/// `WORK/src` with [`script::FETCH`]: the tree and the package's name.
async fn fetch(s: &Step<'_, '_>, src: &str) -> Result<(String, String), TestSuiteError> {
    // The plan holds only sources that parse (checked as it was made).
    let pin = parse_source(src)
        .map_err(|e| infra(&format!("autopkgtest source {src}"), &e.to_string()))?;
    let dest = format!("{}/src", s.work);
    let args = [pin.name, &dest, pin.version.unwrap_or("")];
    let (exit, text) = s.shell(script::FETCH, &args).await?;
    let said = |what: &str| {
        text.lines()
            .filter_map(|l| l.strip_prefix(script::MARK))
            .filter_map(|l| l.trim().strip_prefix(what))
            .next_back()
            .map(|s| s.trim().to_string())
    };
    match exit {
        Some(0) => Ok((dest, pin.name.to_string())),
        Some(script::EXIT_UNSERVED) => Err(infra(
            &format!("autopkgtest source {src}"),
            &said("unserved:").unwrap_or_else(|| "the archive does not serve it".into()),
        )),
        _ => Err(infra(
            &format!("autopkgtest source {src}"),
            &said("infra:").unwrap_or_else(|| {
                "fetching its test tree failed in the cell (see the step log)".into()
            }),
        )),
    }
}

/// The package's name from `TREE/debian/control` (its `Source:`), else
/// from `debian/changelog`'s first word, else the tree's directory name.
async fn source_name(cx: &TestSuiteContext<'_>, tree: &str) -> Result<String, TestSuiteError> {
    if let Some(text) = cat(cx, &format!("{tree}/debian/control")).await? {
        let stanzas = control::parse("debian/control", &text);
        if let Some(s) = stanzas.first().and_then(|s| s.get("Source")) {
            return Ok(s.trim().to_string());
        }
    }
    if let Some(text) = cat(cx, &format!("{tree}/debian/changelog")).await? {
        if let Some(w) = text.split_whitespace().next() {
            return Ok(w.to_string());
        }
    }
    Ok(Path::new(tree)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "autopkgtest".into()))
}

/// Per stanza, the first test file it names that is not in the tree,
/// in autopkgtest's words (`debian/tests/x does not exist`).
async fn missing_files(
    cx: &TestSuiteContext<'_>,
    tree: &str,
    stanzas: &[control::Stanza],
) -> Result<Vec<Option<String>>, TestSuiteError> {
    let mut wanted = Vec::new();
    for (i, s) in stanzas.iter().enumerate() {
        if s.problem.is_none() && s.get("Test-Command").is_none() {
            for f in s.test_files() {
                wanted.push((i, format!("{}/{f}", s.tests_directory())));
            }
        }
    }
    let mut out = vec![None; stanzas.len()];
    if wanted.is_empty() {
        return Ok(out);
    }
    let mut cmd = vec![
        "bash".to_string(),
        "-c".into(),
        "cd \"$1\" || exit 1; shift; for f; do [ -f \"$f\" ] || printf '%s\\n' \"$f\"; done".into(),
        "_".into(),
        tree.into(),
    ];
    cmd.extend(wanted.iter().map(|(_, f)| f.clone()));
    let mut text = Vec::new();
    cx.engine
        .exec(
            cx.container,
            cmd,
            Vec::new(),
            &mut |b: &[u8]| text.extend_from_slice(b),
            Some(Duration::from_secs(60)),
        )
        .await?;
    let text = String::from_utf8_lossy(&text);
    for line in text.lines() {
        if let Some((i, f)) = wanted.iter().find(|(_, f)| f == line) {
            out[*i].get_or_insert_with(|| format!("{f} does not exist"));
        }
    }
    Ok(out)
}

/// Runs the bash `script` with `args` as `$1…`, its output into the step
/// log and returned; `None` as the exit when it ran past `limit`.
async fn shell(
    cx: &TestSuiteContext<'_>,
    script: &str,
    args: &[&str],
    log: &Log<'_>,
    limit: Duration,
) -> Result<(Option<i64>, String), TestSuiteError> {
    let mut cmd = vec![
        "bash".to_string(),
        "-c".into(),
        script.into(),
        "rocmatrix".into(),
    ];
    cmd.extend(args.iter().map(|a| a.to_string()));
    let mut kept = Vec::new();
    let outcome = cx
        .engine
        .exec(
            cx.container,
            cmd,
            cx.env.clone(),
            &mut |b: &[u8]| {
                if kept.len() < LOG_BYTES as usize + 64 * 1024 {
                    kept.extend_from_slice(b);
                }
                let mut sink = log.lock().unwrap_or_else(|p| p.into_inner());
                (*sink)(b);
            },
            Some(limit.max(Duration::from_secs(1))),
        )
        .await?;
    let text = String::from_utf8_lossy(&kept).into_owned();
    Ok(match outcome {
        ExecOutcome::Exited(c) => (Some(c), text),
        ExecOutcome::TimedOut => (None, text),
    })
}

/// A file of the container as text, if it is there (64 MiB at most).
async fn cat(cx: &TestSuiteContext<'_>, path: &str) -> Result<Option<String>, TestSuiteError> {
    let mut out = Vec::new();
    let outcome = cx
        .engine
        .exec(
            cx.container,
            vec!["cat".into(), path.into()],
            Vec::new(),
            &mut |b: &[u8]| {
                if out.len() < 64 * 1024 * 1024 {
                    out.extend_from_slice(b);
                }
            },
            Some(Duration::from_secs(120)),
        )
        .await?;
    Ok(match outcome {
        ExecOutcome::Exited(0) => Some(String::from_utf8_lossy(&out).into_owned()),
        _ => None,
    })
}

/// Copies the container's `path` (autopkgtest's output directory) to
/// `dest` on the host, through the engine's archive and the safe unpacker.
async fn copy_out(
    cx: &TestSuiteContext<'_>,
    path: &str,
    dest: &Path,
) -> Result<(), TestSuiteError> {
    let parent = dest.parent().unwrap_or(dest).to_path_buf();
    let archive = parent.join(format!(".{}.tar", cx.slug));
    let made = parent.clone();
    on_disk(made, |p| std::fs::create_dir_all(p)).await?;
    match cx
        .engine
        .download(cx.container, path, &archive, MAX_OUTPUT)
        .await
    {
        Ok(_) => {}
        // No output directory (autopkgtest never started): nothing to copy.
        Err(_) => return Ok(()),
    }
    let target = dest.to_path_buf();
    on_disk(archive.clone(), move |a| {
        std::fs::create_dir_all(&target)?;
        let file = std::fs::File::open(a)?;
        // The archive's top directory is `out/`: unpack beside, then move.
        let scratch = target.with_extension("unpack");
        let _ = std::fs::remove_dir_all(&scratch);
        std::fs::create_dir_all(&scratch)?;
        crate::image::untar::unpack(
            file,
            &scratch,
            crate::image::untar::Limits::default(),
            "autopkgtest output",
        )?;
        let top = scratch.join("out");
        if top.is_dir() {
            for e in std::fs::read_dir(&top)? {
                let e = e?;
                std::fs::rename(e.path(), target.join(e.file_name()))?;
            }
        }
        std::fs::remove_dir_all(&scratch)?;
        std::fs::remove_file(a)
    })
    .await
}

/// The cell's directory on the host: the JUnit directory is
/// `CELL/junit/NN-step`.
fn cell_dir(cx: &TestSuiteContext<'_>) -> PathBuf {
    cx.junit_dir
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| cx.junit_dir.clone())
}

/// What is left until `deadline`.
fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// An infrastructure error: the cell is recorded as `error` with
/// `what: why`.
fn infra(what: &str, why: &str) -> TestSuiteError {
    TestSuiteError::Io {
        path: PathBuf::from(what),
        source: std::io::Error::other(why.to_string()),
    }
}

fn problem(why: &str) -> TestSuiteOutcome {
    TestSuiteOutcome {
        cases: Vec::new(),
        junit: None,
        step_timed_out: false,
        package: None,
        problem: Some(why.to_string()),
    }
}

/// Runs `work` on the host path off the async threads.
async fn on_disk<T, F>(path: PathBuf, work: F) -> Result<T, TestSuiteError>
where
    T: Send + 'static,
    F: FnOnce(&Path) -> std::io::Result<T> + Send + 'static,
{
    let at = path.clone();
    tokio::task::spawn_blocking(move || work(&at))
        .await
        .map_err(|e| TestSuiteError::Io {
            path: path.clone(),
            source: std::io::Error::other(e.to_string()),
        })?
        .map_err(|source| TestSuiteError::Io { path, source })
}

/// A verdict's failing case for tests the run could not judge.
pub(crate) fn not_judged(package: &str, name: &str, message: String) -> Case {
    Case {
        suite: package.to_string(),
        name: name.to_string(),
        param: None,
        verdict: CaseVerdict::Error {
            kind: "not-run".into(),
            message,
        },
        time: None,
        output: String::new(),
        shard: 0,
        reruns: Vec::new(),
    }
}
