//! A triage from start to `triage.json`: the run (and the baseline, or the
//! history's last good run per signature) read, the searches planned
//! ([`super::targets`]), and each carried out as a bisection through
//! `crate::bisect` — the same one-cell probes, signature judge, skips, and
//! both ends probed before the search (the range validated). A bisection
//! of the same question made earlier (by a triage or by `rocmatrix
//! bisect`) is reused when it has its answer, resumed when it has not: a
//! second triage probes nothing, and an interrupted one goes on where it
//! stopped. `--triage-budget` bounds the probes (or the time); what it
//! left undone is said.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::report::line;
use super::store::{self, At, Change, Item, MovedSource, Over, Search, State, Triage};
use super::targets::{self, Plan, RunSide, Task};
use super::TriageError;
use crate::bisect::store::{AnswerOutcome, BisectStore, Bisection, Request};
use crate::bisect::{Begin, What};
use crate::engine::Engine;
use crate::stop::signals::{Interrupt, Stop};

/// `--triage-budget`: probes, or wall time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    Probes(usize),
    Time(Duration),
}

impl Budget {
    /// `12` (probes), `90s`, `30m`, `2h`.
    pub fn parse(text: &str) -> Result<Budget, TriageError> {
        let t = text.trim();
        let bad = || {
            TriageError::Usage(format!(
                "--triage-budget {text}: give a number of probes (12) or a time (90s, 30m, 2h)"
            ))
        };
        if let Ok(n) = t.trim_end_matches("probes").trim().parse::<usize>() {
            return if n == 0 {
                Err(bad())
            } else {
                Ok(Budget::Probes(n))
            };
        }
        let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?);
        let n: u64 = num.parse().map_err(|_| bad())?;
        let secs = match unit {
            "s" => n,
            "m" => n * 60,
            "h" => n * 3600,
            _ => return Err(bad()),
        };
        if secs == 0 {
            return Err(bad());
        }
        Ok(Budget::Time(Duration::from_secs(secs)))
    }
}

/// How triage probes and where it keeps things.
pub struct Options {
    /// The run root: bisections go under its `bisects/`.
    pub out: PathBuf,
    /// Each bisection's options (`out` is replaced by the run root).
    pub bisect: crate::bisect::Options,
    pub budget: Option<Budget>,
    /// The budget as given, for triage.json.
    pub budget_text: Option<String>,
    /// The history that names the good end without a baseline.
    pub history: crate::history::Location,
}

/// How a triage ended.
pub struct Finished {
    pub triage: Triage,
    /// A signal stopped it: triage again to go on.
    pub interrupted: bool,
}

/// Triage `run_dir` against `baseline` (or the history); `say` gets a line
/// per search and per probe.
pub async fn triage(
    engine: &Engine,
    run_dir: &Path,
    baseline: Option<&Path>,
    opts: Options,
    interrupt: Interrupt,
    say: &(dyn Fn(&str) + Sync),
) -> Result<Finished, TriageError> {
    let t0 = Instant::now();
    let Prepared {
        run,
        tasks,
        moved,
        baseline_label,
    } = prepare_off_runtime(run_dir, baseline, &opts).await?;
    let mut t = Triage {
        triage_version: store::TRIAGE_VERSION,
        rocmatrix_version: env!("CARGO_PKG_VERSION").to_string(),
        run: run.manifest.run_id.clone(),
        baseline: baseline_label,
        budget: opts.budget_text.clone(),
        moved,
        items: Vec::new(),
        unfinished: Vec::new(),
        started: crate::store::now_rfc3339(),
        finished: None,
        secs: 0.0,
    };
    let mut d = Driver {
        engine,
        opts: &opts,
        matrix: PathBuf::from(&run.manifest.matrix_file),
        matrix_hash: run.manifest.matrix_hash.clone(),
        interrupt,
        say,
        spent: AtomicUsize::new(0),
        deadline: match opts.budget {
            Some(Budget::Time(d)) => Some(t0 + d),
            _ => None,
        },
        stopped: None,
    };
    say(&format!(
        "triage: {} signature(s) to triage in run {}",
        tasks.len(),
        t.run
    ));
    for task in &tasks {
        let item = d.triage_task(task, &mut t, &run.dir, t0).await?;
        t.items.push(item);
        t.secs = t0.elapsed().as_secs_f64();
        store::save(&run.dir, &t)?;
    }
    t.unfinished = unfinished(&t, &run.dir);
    let interrupted = d.stopped == Some(Stopped::Signal);
    if !interrupted {
        t.finished = Some(crate::store::now_rfc3339());
    }
    t.secs = t0.elapsed().as_secs_f64();
    store::save(&run.dir, &t)?;
    Ok(Finished {
        triage: t,
        interrupted,
    })
}

/// [`prepare`] on a blocking thread: it reads run stores and the history.
async fn prepare_off_runtime(
    run_dir: &Path,
    baseline: Option<&Path>,
    opts: &Options,
) -> Result<Prepared, TriageError> {
    let (run, base) = (run_dir.to_path_buf(), baseline.map(Path::to_path_buf));
    let (out, cache, location) = (
        opts.out.clone(),
        opts.bisect.cache.clone(),
        opts.history.clone(),
    );
    tokio::task::spawn_blocking(move || prepare(&run, base.as_deref(), &out, &cache, &location))
        .await
        .map_err(|e| TriageError::Join(e.to_string()))?
}

/// What the budget left undone, one line per search.
fn unfinished(t: &Triage, run_dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for i in &t.items {
        for s in i.searches.iter().filter(|s| s.state == State::Unfinished) {
            out.push(format!(
                "{} \"{}\" over {} {}: {}; `rocmatrix triage {}` goes on",
                i.signature.id,
                i.signature.message,
                over_word(s.over),
                s.name,
                s.message,
                run_dir.display()
            ));
        }
    }
    out
}

fn over_word(o: Over) -> &'static str {
    match o {
        Over::Source => "source",
        Over::Axis => "axis",
        Over::Packages => "packages",
    }
}

/// The item's state and line from its searches.
fn finish_item(item: &mut Item, task: &Task) {
    let found = item.searches.iter().any(|s| s.state == State::Found);
    let unfinished = item.searches.iter().any(|s| s.state == State::Unfinished);
    let listed = item.searches.iter().any(|s| s.state == State::Listed);
    item.state = if found {
        State::Found
    } else if unfinished {
        State::Unfinished
    } else if listed {
        State::Listed
    } else if item.searches.iter().all(|s| s.state == State::NotHere) && !item.searches.is_empty() {
        State::NotHere
    } else {
        State::CouldNot
    };
    item.line = line(item, task.could_not.as_deref());
}

struct Prepared {
    run: RunSide,
    tasks: Vec<Task>,
    moved: Vec<MovedSource>,
    baseline_label: Option<String>,
}

/// Reads the run and its baseline (or the history's), refuses what cannot
/// be triaged, and plans the searches.
fn prepare(
    run_dir: &Path,
    baseline: Option<&Path>,
    out: &Path,
    cache: &Path,
    history: &crate::history::Location,
) -> Result<Prepared, TriageError> {
    let mut run = targets::read(run_dir)?;
    let matrix = Path::new(&run.manifest.matrix_file);
    let spec = crate::matrix_file::Spec::load(matrix).map_err(|e| {
        TriageError::Usage(format!(
            "run {}: its matrix file {} cannot be read ({e}); triage runs probes from the \
             file the run was made from",
            run.manifest.run_id,
            matrix.display()
        ))
    })?;
    if spec.source_hash != run.manifest.matrix_hash {
        return Err(TriageError::Usage(format!(
            "run {}: its matrix file {} changed since the run; triage probes the matrix the \
             run was made from",
            run.manifest.run_id,
            matrix.display()
        )));
    }
    let mut tasks = Vec::new();
    let mut moved: Vec<MovedSource> = Vec::new();
    let label = match baseline {
        Some(b) => {
            if !crate::store::layout::is_run(b) {
                return Err(TriageError::Usage(format!(
                    "--baseline {}: not a run directory; triage needs the baseline's lock.json \
                     (its source commits and packages), which a results.json does not carry",
                    b.display()
                )));
            }
            let base = targets::read(b)?;
            if base.manifest.name != run.manifest.name {
                return Err(TriageError::Usage(format!(
                    "--baseline {} is a run of the matrix '{}', {} one of '{}': triage compares \
                     two runs of one matrix",
                    b.display(),
                    base.manifest.name,
                    run.manifest.run_id,
                    run.manifest.name
                )));
            }
            if base.manifest.run_id == run.manifest.run_id {
                return Err(TriageError::Usage(format!(
                    "--baseline {} is the run itself",
                    b.display()
                )));
            }
            let (new, gone) = targets::changed(&mut run.results, &base.results);
            for s in &new {
                tasks.push(targets::task(Change::New, s, &run, &base, cache));
            }
            for s in &gone {
                tasks.push(targets::task(Change::Gone, s, &run, &base, cache));
            }
            if let (Some(bl), Some(rl)) = (&base.lock, &run.lock) {
                for cell in rl.cells.keys() {
                    for m in super::ranges::sources(bl, rl, cell) {
                        if !moved.iter().any(|x| {
                            x.name == m.run.name && x.from == m.base.commit && x.to == m.run.commit
                        }) {
                            moved.push(super::ranges::describe(cache, &m));
                        }
                    }
                }
            }
            Some(b.display().to_string())
        }
        None => {
            tasks.extend(from_history(&run, out, cache, history)?);
            Some("history".into())
        }
    };
    Ok(Prepared {
        run,
        tasks,
        moved,
        baseline_label: label,
    })
}

/// The searches without `--baseline`: each signature of the run from the
/// history's last run where its cell ran without it, and each signature
/// gone since the history's run before it, back to that run.
fn from_history(
    run: &targets::RunSide,
    out: &Path,
    cache: &Path,
    history: &crate::history::Location,
) -> Result<Vec<Task>, TriageError> {
    let mut tasks = Vec::new();
    let mut h = crate::history::History::open(history).map_err(|e| {
        TriageError::Usage(format!(
            "no --baseline and no history to find the good end in: {e}"
        ))
    })?;
    let sigs = run.results.signatures.clone();
    for s in &sigs {
        let cell = s.cells.first().cloned().unwrap_or_default();
        match super::history::good_run(
            &mut h,
            &run.manifest.name,
            &run.manifest.run_id,
            &cell,
            &s.id,
            out,
        )? {
            super::history::Found::Run(dir) => {
                let base = targets::read(&dir)?;
                tasks.push(targets::task(Change::New, s, run, &base, cache));
            }
            // No earlier good run (a first run): an ordered axis the
            // signature's attribution names is searched within the run,
            // from a value where the cell passed in it.
            super::history::Found::None(why) => {
                let plans: Vec<_> = targets::pinned_axis_plan(s, run, &cell)
                    .into_iter()
                    .collect();
                tasks.push(Task {
                    change: Change::New,
                    signature: crate::bisect::judge::Shown::of(s),
                    could_not: plans.is_empty().then_some(why),
                    cell,
                    baseline: None,
                    plans,
                })
            }
        }
    }
    // What the run before it showed and this run does not: gone,
    // fixed somewhere between the two.
    let previous =
        super::history::previous_run(&mut h, &run.manifest.name, &run.manifest.run_id, out)?;
    if let super::history::Found::Run(dir) = previous {
        let base = targets::read(&dir)?;
        let (_, gone) = targets::changed(&mut run.results.clone(), &base.results);
        for s in &gone {
            tasks.push(targets::task(Change::Gone, s, run, &base, cache));
        }
    }
    Ok(tasks)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopped {
    Signal,
    Budget,
}

struct Driver<'a> {
    engine: &'a Engine,
    opts: &'a Options,
    matrix: PathBuf,
    matrix_hash: String,
    interrupt: Interrupt,
    say: &'a (dyn Fn(&str) + Sync),
    /// Probes made so far.
    spent: AtomicUsize,
    deadline: Option<Instant>,
    stopped: Option<Stopped>,
}

impl Driver<'_> {
    fn budget_left(&self) -> bool {
        match self.opts.budget {
            Some(Budget::Probes(n)) => self.spent.load(Ordering::SeqCst) < n,
            Some(Budget::Time(_)) => self.deadline.is_none_or(|d| Instant::now() < d),
            None => true,
        }
    }

    /// Carries out one task's searches, `t` (with the item so far) saved
    /// in `run_dir` after each, and says the task's line.
    async fn triage_task(
        &mut self,
        task: &Task,
        t: &mut Triage,
        run_dir: &Path,
        t0: Instant,
    ) -> Result<Item, TriageError> {
        let mut item = Item {
            change: task.change,
            signature: task.signature.clone(),
            cell: task.cell.clone(),
            baseline: task.baseline.as_ref().map(|p| p.display().to_string()),
            searches: Vec::new(),
            state: State::CouldNot,
            line: String::new(),
        };
        if let Some(why) = &task.could_not {
            item.line = format!("could not triage: {why}");
        }
        for plan in &task.plans {
            let s = self.search(task, plan).await?;
            item.searches.push(s);
            finish_item(&mut item, task);
            t.secs = t0.elapsed().as_secs_f64();
            let mut saved = t.clone();
            saved.items.push(item.clone());
            store::save(run_dir, &saved)?;
        }
        finish_item(&mut item, task);
        (self.say)(&format!(
            "{} {} \"{}\": {}",
            match task.change {
                Change::New => "new",
                Change::Gone => "gone",
            },
            item.signature.id,
            item.signature.message,
            item.line
        ));
        Ok(item)
    }

    /// Carries out one search.
    async fn search(&mut self, task: &Task, plan: &Plan) -> Result<Search, TriageError> {
        let mut s = unstarted(plan);
        if self.settled_without_probes(plan, &mut s) {
            return Ok(s);
        }
        let request = request(task, plan);
        let earlier = self.earlier(plan, &request).await?;
        let begin = match &earlier {
            Some((dir, b)) if b.answer.is_some() => {
                self.reuse(&mut s, plan, dir, b);
                return Ok(s);
            }
            Some((dir, _)) => Begin::Resume(dir.clone()),
            None => self.begin_new(plan, request),
        };
        let before = earlier.as_ref().map(|(_, b)| b.probes.len()).unwrap_or(0);
        self.say_started(task, plan, earlier.is_some());
        let done = match self.bisect(begin).await {
            Ok(d) => d,
            Err(e) if e.is_usage() => {
                s.message = e.to_string();
                return Ok(s);
            }
            Err(e) => return Err(e.into()),
        };
        s.bisection = Some(done.store.dir.display().to_string());
        s.probes = done.bisection.probes.len();
        s.probes_now = s.probes.saturating_sub(before);
        if done.interrupted {
            self.stopped_during(&mut s);
            return Ok(s);
        }
        answer(&mut s, &done.bisection);
        Ok(s)
    }

    /// Settles `s` where nothing is to be probed: the plan could not be
    /// made, only packages moved, or the triage is stopped or its budget
    /// spent. False when the search is to run.
    fn settled_without_probes(&self, plan: &Plan, s: &mut Search) -> bool {
        if let Some(why) = &plan.could_not {
            s.message = why.clone();
            return true;
        }
        if plan.over == Over::Packages && plan.package_space.is_none() {
            s.state = State::Listed;
            s.message = "only packages moved; the old versions are not probed (the range is \
                         this list)"
                .into();
            return true;
        }
        if self.stopped.is_some() || !self.budget_left() {
            s.state = State::Unfinished;
            s.message = match self.stopped {
                Some(Stopped::Signal) => "not started: interrupted".into(),
                _ => "not started: the triage budget was spent".into(),
            };
            return true;
        }
        false
    }

    /// An earlier bisection of the plan's question, read off the runtime.
    async fn earlier(
        &self,
        plan: &Plan,
        request: &Request,
    ) -> Result<Option<(PathBuf, Bisection)>, TriageError> {
        let (out, hash, r, over, name) = (
            self.opts.out.clone(),
            self.matrix_hash.clone(),
            request.clone(),
            plan.over,
            plan.name.clone(),
        );
        tokio::task::spawn_blocking(move || earlier(&out, &hash, &r, over, &name))
            .await
            .map_err(|e| TriageError::Join(e.to_string()))
    }

    /// The search answered by the earlier bisection `b` in `dir`, without
    /// a probe.
    fn reuse(&self, s: &mut Search, plan: &Plan, dir: &Path, b: &Bisection) {
        s.reused = true;
        s.bisection = Some(dir.display().to_string());
        s.probes = b.probes.len();
        (self.say)(&format!(
            "  {} {}: answered by the earlier bisection {}",
            over_word(plan.over),
            plan.name,
            dir.display()
        ));
        answer(s, b);
    }

    /// A new bisection of the plan's question: over its axis or source.
    fn begin_new(&self, plan: &Plan, request: Request) -> Begin {
        Begin::New {
            matrix: self.matrix.clone(),
            what: match (plan.over, &plan.package_space) {
                (Over::Axis, _) => What::Axis(plan.name.clone()),
                (Over::Packages, Some(p)) => What::Packages(p.clone()),
                _ => What::Source {
                    name: plan.name.clone(),
                    all_commits: false,
                },
            },
            request,
        }
    }

    /// The line that says a search starts (or resumes).
    fn say_started(&self, task: &Task, plan: &Plan, resuming: bool) {
        let (what, range) = match plan.over {
            Over::Packages => (
                "packages".to_string(),
                "the baseline's versions..the run's".to_string(),
            ),
            _ => (
                format!("{} {}", over_word(plan.over), plan.name),
                format!("{}..{}", short(&plan.good), short(&plan.bad)),
            ),
        };
        (self.say)(&format!(
            "  {what} for {}: {range} ({} points){}",
            task.signature.id,
            plan.points,
            if resuming {
                ", resuming an earlier bisection"
            } else {
                ""
            }
        ));
    }

    /// Runs the bisection, its probes counted against the budget; the
    /// signal, the deadline or the last probe allowed stop it.
    async fn bisect(
        &self,
        begin: Begin,
    ) -> Result<crate::bisect::Finished, crate::bisect::BisectError> {
        // A child interrupt of its own: the budget stops this bisection
        // without looking like a signal to the rest.
        let child = Interrupt::never();
        let watch = self.watch_budget(&child);
        let limit = match self.opts.budget {
            Some(Budget::Probes(n)) => Some(n),
            _ => None,
        };
        let (spent, say, c2) = (&self.spent, self.say, child.clone());
        let counting = move |l: &str| {
            for part in l.lines() {
                say(&format!("    {part}"));
            }
            if l.starts_with("probe ") {
                let n = spent.fetch_add(1, Ordering::SeqCst) + 1;
                if limit.is_some_and(|lim| n >= lim) {
                    c2.stop(Stop::Signal);
                }
            }
        };
        let mut bopts = clone_options(&self.opts.bisect);
        bopts.out = self.opts.out.clone();
        let done = crate::bisect::bisect(self.engine, begin, bopts, child, &counting).await;
        watch.abort();
        done
    }

    /// A task that stops `child` on the triage's signal or at its deadline.
    fn watch_budget(&self, child: &Interrupt) -> tokio::task::JoinHandle<()> {
        let (global, c, deadline) = (self.interrupt.clone(), child.clone(), self.deadline);
        tokio::spawn(async move {
            let until = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = global.fired() => c.stop(Stop::Signal),
                _ = until => c.stop(Stop::Signal),
                _ = c.fired() => {}
            }
        })
    }

    /// A bisection stopped before its answer: by the signal, or by the
    /// budget; the triage stops with it.
    fn stopped_during(&mut self, s: &mut Search) {
        let by_signal = self.interrupt.is_set();
        self.stopped = Some(if by_signal {
            Stopped::Signal
        } else {
            Stopped::Budget
        });
        s.state = State::Unfinished;
        s.message = format!(
            "stopped after {} probes ({})",
            s.probes,
            if by_signal {
                "interrupted"
            } else {
                "the triage budget was spent"
            }
        );
    }
}

/// A search of `plan` before anything is known of it.
fn unstarted(plan: &Plan) -> Search {
    Search {
        over: plan.over,
        name: plan.name.clone(),
        good: plan.good.clone(),
        bad: plan.bad.clone(),
        regress: plan.regress,
        points: plan.points,
        state: State::CouldNot,
        first: None,
        last: None,
        candidates: Vec::new(),
        probes: 0,
        probes_now: 0,
        bisection: None,
        reused: false,
        message: String::new(),
        packages: plan.packages.clone(),
    }
}

/// The bisection's request for the plan's question about the task's
/// signature: one probe at a time, no retries, a timeout a skip.
fn request(task: &Task, plan: &Plan) -> Request {
    Request {
        matrix_file: String::new(),
        matrix_hash: String::new(),
        only: plan.only.clone(),
        good: plan.good.clone(),
        bad: plan.bad.clone(),
        regress: plan.regress,
        signature: Some(task.signature.id.clone()),
        timeout_is: crate::bisect::judge::TimeoutIs::Skip,
        retries: 0,
        jobs: 1,
        pins: plan.pins.clone(),
    }
}

/// A search's answer from its bisection's.
fn answer(s: &mut Search, b: &Bisection) {
    let Some(a) = &b.answer else {
        s.state = State::Unfinished;
        s.message = "the bisection has no answer yet".into();
        return;
    };
    let at = |i: usize| {
        b.space.points.get(i).map(|p| At {
            value: p.value.clone(),
            subject: p.subject.clone(),
        })
    };
    s.points = b.space.points.len();
    s.message = a.message.clone();
    match a.outcome {
        AnswerOutcome::Found => {
            s.state = State::Found;
            s.first = a.first_new.and_then(at);
            s.last = a.last_old.and_then(at);
            s.candidates = a.candidates.iter().filter_map(|&i| at(i)).collect();
        }
        AnswerOutcome::WrongEnds => s.state = State::NotHere,
        // The baseline's versions cannot be installed any more: the range
        // is the list of moved packages.
        AnswerOutcome::Infrastructure
            if s.over == Over::Packages && a.message.contains(crate::image::PINS_GONE) =>
        {
            s.state = State::Listed;
        }
        AnswerOutcome::Infrastructure => s.state = State::CouldNot,
    }
}

/// An earlier bisection of the same question under `out`: one with its
/// answer first, else the newest without.
fn earlier(
    out: &Path,
    hash: &str,
    r: &Request,
    over: Over,
    name: &str,
) -> Option<(PathBuf, Bisection)> {
    let dir = crate::store::layout::bisects_in(out);
    let mut found: Vec<(PathBuf, Bisection)> = std::fs::read_dir(&dir)
        .ok()?
        .filter_map(|e| {
            let path = e.ok()?.path();
            let b = BisectStore::open(&path, out).ok()?.load().ok()?;
            let kind = match over {
                Over::Axis => crate::bisect::space::Kind::Axis,
                Over::Packages => crate::bisect::space::Kind::Packages,
                _ => crate::bisect::space::Kind::Git,
            };
            let q = &b.request;
            (q.matrix_hash == hash
                && q.only == r.only
                && q.good == r.good
                && q.bad == r.bad
                && q.regress == r.regress
                && q.signature == r.signature
                && q.pins == r.pins
                && b.space.kind == kind
                && b.space.name == name)
                .then_some((path, b))
        })
        .collect();
    found.sort_by(|a, b| {
        (a.1.answer.is_some(), &a.1.started).cmp(&(b.1.answer.is_some(), &b.1.started))
    });
    found.pop()
}

fn clone_options(o: &crate::bisect::Options) -> crate::bisect::Options {
    crate::bisect::Options {
        out: o.out.clone(),
        max_cells: o.max_cells,
        run: o.run.clone(),
        progress: o.progress,
        gpus: o.gpus.clone(),
        cache: o.cache.clone(),
        probe_reports: o.probe_reports,
    }
}

fn short(v: &str) -> String {
    if v.len() == 40 && v.bytes().all(|b| b.is_ascii_hexdigit()) {
        crate::digest::short(v).to_string()
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_probes_or_times() {
        let ok = |t: &str| Budget::parse(t).ok();
        assert_eq!(ok("12"), Some(Budget::Probes(12)));
        assert_eq!(ok("12 probes"), Some(Budget::Probes(12)));
        assert_eq!(ok("90s"), Some(Budget::Time(Duration::from_secs(90))));
        assert_eq!(ok("30m"), Some(Budget::Time(Duration::from_secs(1800))));
        assert_eq!(ok("2h"), Some(Budget::Time(Duration::from_secs(7200))));
        for bad in ["0", "", "m", "3d", "-1"] {
            assert!(Budget::parse(bad).is_err(), "{bad}");
        }
    }
}
