//! Showing a run as it happens: an indicatif display (an overall bar, a
//! line per environment being prepared and a line per running cell with its
//! current step) on a terminal, or one plain line per event otherwise.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::events::{Event, Listener, RunContext};
use crate::outcome::{CellTally, CellVerdict};
use crate::store::record::RunStatus;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    /// Bars on a terminal, plain lines otherwise.
    Auto,
    Bar,
    Plain,
    /// Nothing but errors.
    Quiet,
}

/// Builds the listener for `mode`, for a run of `total` cells.
pub fn listener(mode: ProgressMode, total: usize) -> Box<dyn Listener> {
    let mode = match mode {
        ProgressMode::Auto if std::io::stderr().is_terminal() => ProgressMode::Bar,
        ProgressMode::Auto => ProgressMode::Plain,
        m => m,
    };
    match mode {
        ProgressMode::Bar => Box::new(Bars::new(total)),
        ProgressMode::Quiet => Box::new(Quiet),
        _ => Box::new(Plain::default()),
    }
}

struct Quiet;

impl Listener for Quiet {
    fn on_event(&self, event: &Event) {
        if let Event::ImageFailed { .. } | Event::RegistryUnavailable { .. } = event {
            eprintln!("{}", plain(&line(event).unwrap_or_default()));
        }
    }
}

/// One line per event on stderr.
#[derive(Default)]
pub struct Plain {
    context: OnceLock<Arc<RunContext>>,
}

impl Listener for Plain {
    fn on_event(&self, event: &Event) {
        if let Some(l) = line_in(event, self.context.get().map(|c| &**c)) {
            eprintln!("{}", plain(&l));
        }
    }

    fn on_context(&self, context: &Arc<RunContext>) {
        let _ = self.context.set(context.clone());
    }
}

/// `1 cell`, `3 cells`.
pub fn count(n: usize, one: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// `image 317e88931530 (suite=bookworm)`: an environment with the axis
/// values its cells share, when the context knows them.
fn image(environment: &str, context: Option<&RunContext>) -> String {
    match context.and_then(|c| c.environment(environment)) {
        Some(values) => format!("image {environment} ({values})"),
        None => format!("image {environment}"),
    }
}

/// The plain-text line for an event, if it is worth one.
pub fn line(event: &Event) -> Option<String> {
    line_in(event, None)
}

/// The plain-text line for an event in a run of `context`: a cell that
/// failed where the matrix expected it to says so, an environment names the
/// axis values it is for.
pub fn line_in(event: &Event, context: Option<&RunContext>) -> Option<String> {
    match event {
        Event::BaseImage { .. }
        | Event::ImageStarted { .. }
        | Event::ImageFinished { .. }
        | Event::RegistryUnavailable { .. }
        | Event::ImagePushed { .. }
        | Event::ImageFailed { .. } => image_line(event, context),
        Event::BuildStarted { .. }
        | Event::BuildStepFinished { .. }
        | Event::BuildFinished { .. }
        | Event::BuildPushed { .. } => build_line(event),
        Event::CellStarted { .. }
        | Event::StepStarted { .. }
        | Event::StepFinished { .. }
        | Event::CellRetry { .. }
        | Event::CellFinished { .. }
        | Event::CellNotRun { .. } => cell_line(event, context),
        Event::RunStarted { .. }
        | Event::CoverageScanned { .. }
        | Event::Warning { .. }
        | Event::RunFinished { .. } => run_line(event),
    }
}

/// The line for a base or an environment image being prepared.
fn image_line(event: &Event, context: Option<&RunContext>) -> Option<String> {
    Some(match event {
        Event::BaseImage { message, .. } => message.clone(),
        Event::ImageStarted { environment, cells } => {
            format!(
                "{}: preparing for {}",
                image(environment, context),
                count(*cells, "cell")
            )
        }
        Event::ImageFinished {
            environment,
            tag,
            pulled: true,
            secs,
            ..
        } => {
            format!(
                "{}: pulled {tag} in {secs:.0} s",
                image(environment, context)
            )
        }
        Event::RegistryUnavailable { registry, reason } => {
            format!("warning: registry {registry} unavailable, building locally: {reason}")
        }
        Event::ImagePushed {
            environment,
            reference,
        } => {
            format!("image {environment}: pushed {reference}")
        }
        Event::ImageFinished {
            environment,
            tag,
            reused,
            secs,
            ..
        } => {
            if *reused {
                format!("{}: reusing {tag}", image(environment, context))
            } else {
                format!(
                    "{}: built {tag} in {secs:.0} s",
                    image(environment, context)
                )
            }
        }
        Event::ImageFailed { environment, error } => {
            format!("{}: FAILED: {error}", image(environment, context))
        }
        _ => return None,
    })
}

/// The line for a build stage.
fn build_line(event: &Event) -> Option<String> {
    Some(match event {
        Event::BuildStarted { build, cells } => {
            format!("build {build}: starting for {}", count(*cells, "cell"))
        }
        Event::BuildStepFinished {
            build,
            step,
            status,
            exit_code,
            secs,
        } => format!(
            "build {build}: step {step} {}{} ({secs:.1} s)",
            status.as_str(),
            exit_code.map(|c| format!(", exit {c}")).unwrap_or_default()
        ),
        Event::BuildFinished {
            build,
            snapshot,
            pulled: true,
            ..
        } => {
            format!("build {build}: pulled {snapshot} from the registry")
        }
        Event::BuildPushed { build, reference } => format!("build {build}: pushed {reference}"),
        Event::BuildFinished {
            build,
            snapshot,
            reused: true,
            ..
        } => {
            format!("build {build}: reusing {snapshot}")
        }
        Event::BuildFinished {
            build,
            snapshot,
            status: RunStatus::Passed,
            secs,
            ..
        } => {
            format!("build {build}: built {snapshot} in {secs:.0} s")
        }
        Event::BuildFinished {
            build,
            status,
            reason,
            secs,
            ..
        } => format!(
            "build {build}: {}{} ({secs:.0} s)",
            status.as_str().to_uppercase(),
            reason
                .as_ref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ),
        _ => return None,
    })
}

/// The line for a cell or one of its steps.
fn cell_line(event: &Event, context: Option<&RunContext>) -> Option<String> {
    Some(match event {
        Event::CellStarted { cell, attempt } if *attempt > 1 => {
            format!("{cell}: attempt {attempt}")
        }
        Event::CellStarted { cell, .. } => format!("{cell}: started"),
        Event::StepStarted {
            cell,
            step,
            index,
            total,
        } => format!("{cell}: step {index}/{total} {step}"),
        Event::StepFinished {
            cell,
            step,
            status,
            exit_code,
            secs,
        } => format!(
            "{cell}: step {step} {}{} ({secs:.1} s)",
            status.as_str(),
            exit_code.map(|c| format!(", exit {c}")).unwrap_or_default()
        ),
        Event::CellRetry {
            cell,
            attempt,
            error,
        } => {
            format!("{cell}: infrastructure error on attempt {attempt}, retrying: {error}")
        }
        Event::CellFinished {
            cell,
            status,
            verdict,
            reason,
            secs,
        } => format!(
            "{cell}: {}{}{} ({secs:.1} s)",
            status.as_str().to_uppercase(),
            // The cell's verdict (crate::outcome::judge_cell), as the summary
            // table and the reports give it; an event without one (an
            // earlier journal's) by its whole-cell expectation.
            match verdict {
                Some(v) => verdict_note(*v),
                None => match context.and_then(|c| c.expected(cell)) {
                    Some(_) if crate::outcome::is_test_failure(*status) => " (expected)",
                    _ => "",
                },
            },
            reason
                .as_ref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ),
        Event::CellNotRun { cell, reason } => format!("{cell}: not run: {reason}"),
        _ => return None,
    })
}

/// The line for the run as a whole: its start, coverage, warnings, its end.
fn run_line(event: &Event) -> Option<String> {
    Some(match event {
        Event::RunStarted { run_id, name, cells, to_run, environments, jobs } => format!(
            "run {run_id}: {name}, {to_run} of {} to run in {}, {jobs} at a time",
            count(*cells, "cell"),
            count(*environments, "environment")
        ),
        Event::CoverageScanned { environment, libraries, secs } => format!(
            "image {environment}: gfx coverage of {libraries} libraries with device code ({secs:.0} s)"
        ),
        Event::Warning { message } => message.clone(),
        Event::RunFinished { passed, failed, expected, classified, errors, skipped, not_run, interrupted, secs } => {
            let tally = CellTally {
                passed: *passed,
                failed: *failed,
                expected: *expected,
                classified: *classified,
                skipped: *skipped,
                errors: *errors,
            };
            format!(
                "{}: {}",
                if *interrupted { "interrupted" } else { "finished" },
                tally_line(&tally, *not_run, *secs)
            )
        }
        _ => return None,
    })
}

/// What a cell's line says after its status when its verdict is not what
/// the status alone says: ` (expected)`, ` (classified)`.
pub fn verdict_note(verdict: CellVerdict) -> &'static str {
    match verdict {
        CellVerdict::ExpectedFailure => " (expected)",
        CellVerdict::Classified => " (classified)",
        CellVerdict::Failing | CellVerdict::Passed | CellVerdict::Skipped => "",
    }
}

/// `2 passed, 1 failed, 1 expected failure, 0 skipped, 0 errors, 0 not run
/// in 5 s`: cells counted by their verdicts, as the last progress line and
/// the run's summary table give them (cells that failed only in classified
/// tests are named when there are any).
pub fn tally_line(t: &CellTally, not_run: usize, secs: f64) -> String {
    let classified = match t.classified {
        0 => String::new(),
        n => format!(", {}", CellVerdict::Classified.count(n)),
    };
    format!(
        "{} passed, {} failed, {}{classified}, {} skipped, {}, {not_run} not run in {secs:.0} s",
        t.passed,
        t.failed,
        count(t.expected, "expected failure"),
        t.skipped,
        count(t.errors, "error")
    )
}

/// `s` without terminal escapes or control characters (a builder's colours,
/// `\x1b[91m`, arrive inside build errors and step reasons): CSI and OSC
/// sequences are dropped whole, other controls but newline and tab too.
pub fn plain(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameters and intermediates up to a final byte @..~.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC (and DCS, PM, APC, SOS): up to BEL or ESC \.
                Some(']' | 'P' | '^' | '_' | 'X') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' {
                            if chars.peek() == Some(&'\\') {
                                chars.next();
                            }
                            break;
                        }
                    }
                }
                _ => {}
            },
            // The 8-bit CSI.
            '\u{9b}' => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// An overall bar plus one spinner per environment being prepared and per
/// running cell.
struct Bars {
    multi: MultiProgress,
    overall: ProgressBar,
    cells: Mutex<HashMap<String, ProgressBar>>,
    context: OnceLock<Arc<RunContext>>,
}

impl Bars {
    fn new(total: usize) -> Bars {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let overall = multi.add(ProgressBar::new(total as u64));
        overall.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} cells {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        overall.enable_steady_tick(Duration::from_millis(250));
        Bars {
            multi,
            overall,
            cells: Mutex::new(HashMap::new()),
            context: OnceLock::new(),
        }
    }

    fn cell_bar(&self, cell: &str) -> ProgressBar {
        let mut cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
        cells
            .entry(cell.to_string())
            .or_insert_with(|| {
                let b = self.multi.add(ProgressBar::new_spinner());
                b.set_style(
                    ProgressStyle::with_template("  {spinner} {prefix} {msg} {elapsed}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                b.set_prefix(cell.to_string());
                b.enable_steady_tick(Duration::from_millis(120));
                b
            })
            .clone()
    }

    fn finish_cell(&self, cell: &str) {
        let mut cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = cells.remove(cell) {
            b.finish_and_clear();
            self.multi.remove(&b);
        }
    }
}

impl Listener for Bars {
    fn on_context(&self, context: &Arc<RunContext>) {
        let _ = self.context.set(context.clone());
    }

    fn on_event(&self, event: &Event) {
        let context = self.context.get().map(|c| &**c);
        let line = |e: &Event| line_in(e, context);
        match event {
            Event::StepStarted {
                cell,
                step,
                index,
                total,
            } => self
                .cell_bar(cell)
                .set_message(format!("{index}/{total} {step}")),
            Event::CellStarted { cell, .. } => self.cell_bar(cell).set_message("starting"),
            Event::CellFinished { cell, .. } | Event::CellNotRun { cell, .. } => {
                self.finish_cell(cell);
                self.overall.inc(1);
                let _ = self.multi.println(plain(&line(event).unwrap_or_default()));
            }
            // One spinner per environment being prepared: several at once.
            Event::ImageStarted { environment, cells } => {
                let values = context
                    .and_then(|c| c.environment(environment))
                    .map(|v| format!(" ({v})"))
                    .unwrap_or_default();
                self.cell_bar(&format!("image {environment}"))
                    .set_message(format!("preparing for {}{values}", count(*cells, "cell")))
            }
            Event::ImageFinished { environment, .. } | Event::ImageFailed { environment, .. } => {
                self.finish_cell(&format!("image {environment}"));
                let _ = self.multi.println(line(event).unwrap_or_default());
            }
            Event::RunFinished { .. } => {
                self.overall.finish_and_clear();
                eprintln!("{}", plain(&line(event).unwrap_or_default()));
            }
            other => {
                if let Some(l) = line(other) {
                    let _ = self.multi.println(plain(&l));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_drops_escapes_and_controls() {
        assert_eq!(
            plain("\u{1b}[91mE: Unable to locate package x\u{1b}[0m\r\nnext\tline"),
            "E: Unable to locate package x\nnext\tline"
        );
        assert_eq!(
            plain("a\u{1b}]0;title\u{7}b\u{1b}]8;;u\u{1b}\\c\u{9b}1mdé"),
            "abcdé"
        );
        assert_eq!(plain("trailing \u{1b}["), "trailing ");
    }

    /// The smoke matrix's shape: each suite its own environment,
    /// and bookworm.gfx1100 expected to fail.
    fn smoke_context() -> RunContext {
        let text = "matrix:\n  suite: [bookworm, trixie]\n  gfx: [gfx900, gfx1100]\n\
            environment:\n  family: debian\n  base: \"debian:{{ matrix.suite }}\"\n  packages: [hipcc]\n\
            steps:\n  - name: compile\n    run: hipcc --offload-arch={{ matrix.gfx }}\n\
            expect:\n  - cells: {suite: bookworm, gfx: gfx1100}\n    reason: no gfx1100 device libraries\n";
        let spec = crate::matrix_file::Spec::parse(std::path::Path::new("m.yaml"), text)
            .unwrap_or_else(|e| panic!("{e}"));
        let plan = crate::plan::Plan::build(&spec, 100).unwrap_or_else(|e| panic!("{e}"));
        RunContext::new(&plan.cells, &spec.expect)
    }

    #[test]
    fn a_cell_that_fails_as_expected_says_so_in_the_live_log() {
        let ctx = smoke_context();
        assert_eq!(
            ctx.expected("bookworm.gfx1100"),
            Some("no gfx1100 device libraries")
        );
        let finished = |cell: &str, status| Event::CellFinished {
            cell: cell.into(),
            status,
            verdict: None,
            reason: Some("step `compile`: exit code 1".into()),
            secs: 1.2,
        };
        assert_eq!(
            line_in(&finished("bookworm.gfx1100", RunStatus::Failed), Some(&ctx)).unwrap(),
            "bookworm.gfx1100: FAILED (expected): step `compile`: exit code 1 (1.2 s)"
        );
        // Only the expected cell, and only when it failed.
        assert_eq!(
            line_in(&finished("trixie.gfx1100", RunStatus::Failed), Some(&ctx)).unwrap(),
            "trixie.gfx1100: FAILED: step `compile`: exit code 1 (1.2 s)"
        );
        assert!(
            !line_in(&finished("bookworm.gfx1100", RunStatus::Error), Some(&ctx))
                .unwrap()
                .contains("expected")
        );
    }

    #[test]
    fn environments_name_their_axis_values_and_counts_their_plurals() {
        let ctx = smoke_context();
        let bookworm = ctx
            .environments
            .iter()
            .find(|(_, v)| v.as_str() == "suite=bookworm")
            .map(|(k, _)| k.clone())
            .expect("an environment for suite=bookworm");
        assert_eq!(bookworm.len(), 12, "the short hash: {bookworm}");
        assert_eq!(ctx.environments.len(), 2, "{:?}", ctx.environments);
        let started = Event::ImageStarted {
            environment: bookworm.clone(),
            cells: 2,
        };
        assert_eq!(
            line_in(&started, Some(&ctx)).unwrap(),
            format!("image {bookworm} (suite=bookworm): preparing for 2 cells")
        );
        let built = Event::ImageFinished {
            environment: bookworm.clone(),
            tag: "rocmatrix/env:x".into(),
            reused: true,
            pulled: false,
            secs: 0.0,
        };
        assert_eq!(
            line_in(&built, Some(&ctx)).unwrap(),
            format!("image {bookworm} (suite=bookworm): reusing rocmatrix/env:x")
        );
        // Without a context, or for an environment it does not know: the hash alone.
        assert_eq!(
            line(&started).unwrap(),
            format!("image {bookworm}: preparing for 2 cells")
        );
        let one = Event::ImageStarted {
            environment: "0123456789ab".into(),
            cells: 1,
        };
        assert_eq!(
            line_in(&one, Some(&ctx)).unwrap(),
            "image 0123456789ab: preparing for 1 cell"
        );
        let run = Event::RunStarted {
            run_id: "r".into(),
            name: "smoke".into(),
            cells: 9,
            to_run: 3,
            environments: 1,
            jobs: 2,
        };
        assert_eq!(
            line(&run).unwrap(),
            "run r: smoke, 3 of 9 cells to run in 1 environment, 2 at a time"
        );
        let finished = Event::RunFinished {
            passed: 8,
            failed: 0,
            expected: 1,
            classified: 0,
            errors: 1,
            skipped: 0,
            not_run: 0,
            interrupted: false,
            secs: 5.0,
        };
        assert_eq!(
            line(&finished).unwrap(),
            "finished: 8 passed, 0 failed, 1 expected failure, 0 skipped, 1 error, 0 not run in 5 s"
        );
    }

    #[test]
    fn plain_lines_carry_no_escape_from_a_build_error() {
        let l = line(&Event::ImageFailed {
            environment: "abc".into(),
            error: "step 3: \u{1b}[91mE: broken\u{1b}[0m".into(),
        })
        .unwrap();
        assert_eq!(plain(&l), "image abc: FAILED: step 3: E: broken");
    }
}
