//! A bisection from start to answer: the space and `bisect.json` made (or
//! reloaded with `--resume`), the bad end probed first — its signatures
//! become the judge unless `--signature` gave one — then the good end, and
//! the search between them, `--jobs` points at a time. Each point is
//! probed once, or `1 + --retries` times when it passes or shows the
//! signature: probes that disagree make the point flaky, and a flaky point
//! counts as skipped. `bisect.json` and the reports are rewritten after
//! every probe, so an interrupted bisection loses at most the probes that
//! were running.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures_util::future::join_all;

use super::judge::{self, ProbeVerdict, Regress, Target as Judged};
use super::probe::{self, Setup};
use super::search::Search;
use super::space::{self, Space};
use super::store::{Answer, AnswerOutcome, BisectStore, Bisection, Probe, Request, BISECT_VERSION};
use super::BisectError;
use crate::engine::Engine;
use crate::gpu::gate::GpuGate;
use crate::matrix_file::Spec;
use crate::plan::Plan;
use crate::run::progress::ProgressMode;
use crate::run::RunOptions;
use crate::stop::signals::Interrupt;
use crate::store::record::RunStatus;

/// What is searched.
#[derive(Debug, Clone)]
pub enum Target {
    /// `--axis AXIS`.
    Axis(String),
    /// `--source NAME`, first-parent unless `all_commits`.
    Source { name: String, all_commits: bool },
    /// The packages that moved between two locks (a triage's search).
    Packages(Box<super::packages::PackageSpace>),
}

/// A new bisection, or one to resume (made once per bisection: its size
/// does not matter).
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum Begin {
    New {
        matrix: PathBuf,
        what: Target,
        /// `matrix_file` and `matrix_hash` are filled in here.
        request: Request,
    },
    Resume(PathBuf),
}

/// How probes run.
pub struct Options {
    /// Parent of `bisects/`.
    pub out: PathBuf,
    pub max_cells: usize,
    /// Each probe's run options (one cell per run).
    pub run: RunOptions,
    pub progress: ProgressMode,
    pub gpus: Arc<dyn GpuGate>,
    /// The cache directory (git mirrors under `git/`).
    pub cache: PathBuf,
    /// Writes a finished probe's reports into its run store, for people to
    /// read (the CLI gives the report writer: bisection stands below the
    /// reports and never calls them itself).
    pub probe_reports: ProbeReports,
}

/// What writes a probe run's reports (its run directory); it says itself
/// why it could not.
pub type ProbeReports = fn(&std::path::Path);

/// How a bisection ended.
pub struct Finished {
    pub store: BisectStore,
    pub bisection: Bisection,
    /// Interrupted before an answer: resume it.
    pub interrupted: bool,
}

/// Carries out (or resumes) a bisection; `say` gets a line per probe.
pub async fn bisect(
    engine: &Engine,
    begin: Begin,
    opts: Options,
    interrupt: Interrupt,
    say: &(dyn Fn(&str) + Sync),
) -> Result<Finished, BisectError> {
    let (out, max_cells, cache) = (opts.out.clone(), opts.max_cells, opts.cache.clone());
    let (spec, bisection, store) =
        tokio::task::spawn_blocking(move || prepare(begin, &out, max_cells, &cache))
            .await
            .map_err(|e| BisectError::Join(e.to_string()))??;
    let space = bisection.space.clone();
    let request = bisection.request.clone();
    let setup = Setup {
        engine,
        spec: &spec,
        space: &space,
        only: &request.only,
        max_cells,
        options: &opts.run,
        progress: opts.progress,
        gpus: opts.gpus.clone(),
        dir: store.dir.clone(),
        interrupt,
        reports: opts.probe_reports,
    };
    let d = Driver {
        setup,
        store: &store,
        shared: Mutex::new(bisection),
        say,
    };
    say(&super::report::heading(&d.snapshot()));
    let interrupted = d.drive().await?;
    let mut bisection = d.shared.into_inner().unwrap_or_else(|p| p.into_inner());
    if !interrupted {
        bisection.finished = Some(crate::store::now_rfc3339());
    }
    store.save(&bisection)?;
    super::report::write_all(&store, &bisection)?;
    Ok(Finished {
        store,
        bisection,
        interrupted,
    })
}

/// The spec, `bisect.json` and its directory: made, or loaded to resume.
fn prepare(
    begin: Begin,
    out: &std::path::Path,
    max_cells: usize,
    cache: &std::path::Path,
) -> Result<(Spec, Bisection, BisectStore), BisectError> {
    match begin {
        Begin::Resume(path) => {
            let store = BisectStore::open(&path, out)?;
            let b = store.load()?;
            let spec = Spec::load(std::path::Path::new(&b.request.matrix_file))?;
            let spec = space::pinned_all(&spec, &b.request.pins);
            if spec.source_hash != b.request.matrix_hash {
                return Err(BisectError::Usage(format!(
                    "{}: the matrix file changed since this bisection started; start a new one",
                    b.request.matrix_file
                )));
            }
            Ok((spec, b, store))
        }
        Begin::New {
            matrix,
            what,
            mut request,
        } => {
            let loaded = Spec::load(&matrix)?;
            let spec = space::pinned_all(&loaded, &request.pins);
            let plan = Plan::build(&spec, max_cells)?;
            plan.clone()
                .select(&request.only)
                .map_err(|e| BisectError::Usage(e.to_string()))?;
            let space: Space = match &what {
                Target::Axis(axis) => space::axis(
                    &plan,
                    axis,
                    &request.only,
                    &request.good,
                    &request.bad,
                    request.regress,
                )?,
                Target::Source { name, all_commits } => {
                    let cell = space::one_cell(&plan, &request.only, "--only")?;
                    let ends = space::GitEnds {
                        name,
                        good: &request.good,
                        bad: &request.bad,
                        regress: request.regress,
                        all_commits: *all_commits,
                    };
                    space::git(&spec, &cell, ends, cache)?
                }
                Target::Packages(p) => {
                    space::one_cell(&plan, &request.only, "--only")?;
                    space::packages((**p).clone())
                }
            };
            request.matrix_file = std::path::absolute(&matrix)
                .unwrap_or(matrix.clone())
                .display()
                .to_string();
            request.matrix_hash = spec.source_hash.clone();
            let id = crate::store::new_run_id();
            let store = BisectStore::create(out, &id)?;
            let b = Bisection {
                bisect_version: BISECT_VERSION,
                id,
                rocmatrix_version: env!("CARGO_PKG_VERSION").to_string(),
                target: request.signature.clone().map(Judged::Given),
                request,
                space,
                probes: Vec::new(),
                answer: None,
                started: crate::store::now_rfc3339(),
                finished: None,
            };
            store.save(&b)?;
            Ok((spec, b, store))
        }
    }
}

/// A point's verdict once its probes settle it: `(verdict, flaky)`.
pub fn settled(verdicts: &[ProbeVerdict], retries: u32) -> Option<(ProbeVerdict, bool)> {
    let first = *verdicts.first()?;
    if verdicts.iter().any(|v| *v != first) {
        return Some((ProbeVerdict::Skip, true));
    }
    if first == ProbeVerdict::Skip || verdicts.len() > retries as usize {
        return Some((first, false));
    }
    None
}

struct Driver<'a> {
    setup: Setup<'a>,
    store: &'a BisectStore,
    shared: Mutex<Bisection>,
    say: &'a (dyn Fn(&str) + Sync),
}

impl Driver<'_> {
    fn snapshot(&self) -> Bisection {
        self.shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn verdicts(&self, point: usize) -> Vec<ProbeVerdict> {
        self.snapshot()
            .probes
            .iter()
            .filter(|p| p.point == point)
            .map(|p| p.verdict)
            .collect()
    }

    /// Returns whether it was interrupted.
    /// One piece: the search loop, whose ends, skips and probes all move
    /// the same two bounds.
    async fn drive(&self) -> Result<bool, BisectError> {
        let b = self.snapshot();
        if b.answer.is_some() {
            return Ok(false);
        }
        let n = b.space.points.len();
        let regress = b.request.regress;
        let (bad_end, good_end) = match regress {
            Regress::Error => (n - 1, 0),
            Regress::Success => (0, n - 1),
        };
        for (end, want) in [(bad_end, ProbeVerdict::Bad), (good_end, ProbeVerdict::Good)] {
            let Some((verdict, _)) = self.settle(end, end == bad_end).await? else {
                return Ok(true);
            };
            if verdict != want {
                self.wrong_end(end, want);
                return Ok(false);
            }
        }
        let mut search = Search::new(n);
        for point in 1..n - 1 {
            if let Some((v, _)) = settled(&self.verdicts(point), b.request.retries) {
                search.record(point, regress.state(v));
            }
        }
        loop {
            let next = search.next(b.request.jobs);
            if next.is_empty() {
                break;
            }
            let results = join_all(next.iter().map(|&p| self.settle(p, false))).await;
            let mut interrupted = false;
            for (point, r) in next.iter().zip(results) {
                match r? {
                    Some((v, _)) => search.record(*point, regress.state(v)),
                    None => interrupted = true,
                }
            }
            if interrupted {
                return Ok(true);
            }
        }
        let outcome = search
            .outcome()
            .ok_or_else(|| BisectError::Usage("the search ended without an answer".into()))?;
        let mut b = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        let flaky = flaky_points(&b);
        let label = |i: usize| b.space.points[i].label(b.space.kind);
        let (old_word, new_word) = words(regress);
        let mut message = format!(
            "{old_word} {}, first {new_word} {}",
            label(outcome.last_old),
            label(outcome.first_new)
        );
        if outcome.is_ambiguous() {
            message = format!(
                "{old_word} {}; the first {new_word} is one of {} (skipped points could not be judged)",
                label(outcome.last_old),
                outcome
                    .candidates
                    .iter()
                    .map(|&i| label(i))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let reproduce = [outcome.last_old, outcome.first_new]
            .iter()
            .filter_map(|&i| b.probes.iter().rev().find(|p| p.point == i))
            .flat_map(|p| {
                let run = self.store.dir.join(&p.run);
                [
                    format!("rocmatrix repro {} {}", run.display(), p.cell),
                    format!(
                        "rocmatrix export {} {} repro-{}",
                        run.display(),
                        p.cell,
                        crate::matrix_file::cell_id::sanitize(&label(p.point))
                    ),
                ]
            })
            .collect();
        b.answer = Some(Answer {
            outcome: AnswerOutcome::Found,
            message,
            last_old: Some(outcome.last_old),
            first_new: Some(outcome.first_new),
            candidates: if outcome.is_ambiguous() {
                outcome.candidates.clone()
            } else {
                Vec::new()
            },
            flaky,
            reproduce,
        });
        Ok(false)
    }

    /// Records why an end does not behave as claimed.
    fn wrong_end(&self, end: usize, want: ProbeVerdict) {
        let mut b = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        let last = b.probes.iter().rev().find(|p| p.point == end).cloned();
        let label = b.space.points[end].label(b.space.kind);
        let flag = if want == ProbeVerdict::Bad {
            "--bad"
        } else {
            "--good"
        };
        let (outcome, message) = match &last {
            Some(p) if p.verdict == ProbeVerdict::Skip && infrastructure(&p.status) => (
                AnswerOutcome::Infrastructure,
                format!(
                    "the {} end {label} could not be probed: {}",
                    &flag[2..],
                    p.why
                ),
            ),
            Some(p) => {
                let shown = p
                    .signature
                    .as_ref()
                    .map(|s| format!(": {} \"{}\"", s.id, s.message))
                    .unwrap_or_default();
                let what = match (want, p.verdict) {
                    (ProbeVerdict::Bad, ProbeVerdict::Good) => {
                        "passes: there is no failure to look for".to_string()
                    }
                    (ProbeVerdict::Good, ProbeVerdict::Bad) => {
                        "shows the signature too".to_string()
                    }
                    (ProbeVerdict::Bad, _) => {
                        format!("does not show the signature ({}){shown}", p.why)
                    }
                    _ => format!("cannot be judged ({}){shown}", p.why),
                };
                (
                    AnswerOutcome::WrongEnds,
                    format!("the ends do not behave as claimed: {flag} {label} {what}"),
                )
            }
            None => (
                AnswerOutcome::WrongEnds,
                format!("{flag} {label} was not probed"),
            ),
        };
        b.answer = Some(Answer {
            outcome,
            message,
            last_old: None,
            first_new: None,
            candidates: Vec::new(),
            flaky: flaky_points(&b),
            reproduce: last
                .map(|p| {
                    vec![format!(
                        "rocmatrix repro {} {}",
                        self.store.dir.join(&p.run).display(),
                        p.cell
                    )]
                })
                .unwrap_or_default(),
        });
    }

    /// Probes `point` until its verdict is settled; `None` when
    /// interrupted. The bad end's first probe teaches the judge its
    /// signatures when `--signature` was not given.
    async fn settle(
        &self,
        point: usize,
        learn: bool,
    ) -> Result<Option<(ProbeVerdict, bool)>, BisectError> {
        let (retries, timeout_is) = {
            let b = self.snapshot();
            (b.request.retries, b.request.timeout_is)
        };
        loop {
            let before = self.verdicts(point);
            if let Some(s) = settled(&before, retries) {
                return Ok(Some(s));
            }
            // A budget (or a signal) that stopped the bisection between
            // probes starts no new one.
            if self.setup.interrupt.is_set() {
                return Ok(None);
            }
            // A point's first probe may take an earlier probe's outcome
            // of the same content; a retry runs again.
            let ran = probe::run(&self.setup, point, before.is_empty()).await?;
            if ran.interrupted {
                return Ok(None);
            }
            let line = {
                let mut b = self.shared.lock().unwrap_or_else(|p| p.into_inner());
                let obs = &ran.observation;
                if learn
                    && b.target.is_none()
                    && matches!(obs.status, Some(RunStatus::Failed | RunStatus::Oom))
                    && !obs.build_failed
                    && !obs.signatures.is_empty()
                {
                    b.target = Some(Judged::Learned(obs.signatures.clone()));
                }
                let target = b.target.clone().unwrap_or(Judged::Learned(Vec::new()));
                let j = judge::judge(obs, &target, timeout_is);
                let p = &b.space.points[point];
                let probe = Probe {
                    n: b.probes.len() + 1,
                    point,
                    value: p.value.clone(),
                    subject: p.subject.clone(),
                    verdict: j.verdict,
                    status: obs
                        .status
                        .map(|s| s.as_str().to_string())
                        .unwrap_or_else(|| "not run".into()),
                    why: j.why,
                    signature: j.signature,
                    run: ran.run.clone(),
                    cell: ran.cell.clone(),
                    started: ran.started.clone(),
                    secs: ran.secs,
                    build: ran.build.clone(),
                    retry: !before.is_empty(),
                    reused: ran.reused,
                };
                let line = super::report::probe_line(&b, &probe);
                b.probes.push(probe);
                self.store.save(&b)?;
                super::report::write_all(self.store, &b)?;
                line
            };
            (self.say)(&line);
        }
    }
}

/// The state words of a mode: what the old and new sides are called.
pub fn words(regress: Regress) -> (&'static str, &'static str) {
    match regress {
        Regress::Error => ("last good", "bad"),
        Regress::Success => ("last bad", "good"),
    }
}

/// A status that says the probe never got to run its steps.
fn infrastructure(status: &str) -> bool {
    status == "not run" || status == RunStatus::Error.as_str()
}

/// Points whose probes disagree.
fn flaky_points(b: &Bisection) -> Vec<usize> {
    let mut points: Vec<usize> = b.probes.iter().map(|p| p.point).collect();
    points.sort_unstable();
    points.dedup();
    points
        .into_iter()
        .filter(|&i| {
            let v: Vec<ProbeVerdict> = b
                .probes
                .iter()
                .filter(|p| p.point == i)
                .map(|p| p.verdict)
                .collect();
            settled(&v, b.request.retries).is_some_and(|(_, flaky)| flaky)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_settles_when_its_probes_agree_or_disagree() {
        use ProbeVerdict::*;
        assert_eq!(settled(&[], 0), None);
        assert_eq!(settled(&[Bad], 0), Some((Bad, false)));
        assert_eq!(settled(&[Bad], 2), None);
        assert_eq!(settled(&[Bad, Bad], 2), None);
        assert_eq!(settled(&[Bad, Bad, Bad], 2), Some((Bad, false)));
        assert_eq!(settled(&[Bad, Good], 2), Some((Skip, true)));
        // A first skip is not repeated; a skip after a verdict is a flip.
        assert_eq!(settled(&[Skip], 2), Some((Skip, false)));
        assert_eq!(settled(&[Good, Skip], 2), Some((Skip, true)));
    }
}
