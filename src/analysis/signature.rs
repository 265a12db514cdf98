//! Failure signatures: failures grouped by their normalised text.
//!
//! Each failure's text — a failed or errored test's message and the first
//! lines of its body, or, for a failing cell without failing tests, the first
//! error-like line of its failing step's log tail — is normalised by removing
//! what varies between otherwise identical failures: absolute paths (down to
//! the file name), hex addresses, UUIDs and long hex ids (containers, hashes),
//! run ids, temp names, timestamps and durations. Numbers are then compared
//! across the group: texts that differ only in numbers share a skeleton, and
//! a number is kept where every member agrees and becomes `<n>` where they
//! differ. Identical normalised text is one signature, attributed to axes by
//! [`super::attribution`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;

use super::attribution::{attribute, Point};
use crate::results::model::{test_hash, CellResult, Results, TestResult};

/// Lines of a test's failure text that make its signature.
const TEXT_LINES: usize = 6;
/// Bytes kept of a signature's full example.
const EXAMPLE_BYTES: usize = 4096;

pub use crate::results::findings::{Seen, Signature};

pub use crate::store::record::TOP_FRAMES;

/// Marks each signature new or known against the baseline's, and returns
/// how many of the baseline's signatures no longer occur.
///
/// Signatures are compared by skeleton (every number as `<n>`), the key
/// failures are grouped by: which numbers a signature keeps depends on the
/// failures grouped with it (one failure keeps `line 150`, two at lines 150
/// and 157 make `line <n>`), so numbers alone do not make a cause new.
pub fn mark_against(signatures: &mut [Signature], baseline: &[Signature]) -> usize {
    let before: HashSet<String> = baseline.iter().map(|s| skeleton(&s.text)).collect();
    let mut now = HashSet::new();
    for s in signatures.iter_mut() {
        let key = skeleton(&s.text);
        s.baseline = Some(if before.contains(&key) {
            Seen::Known
        } else {
            Seen::New
        });
        now.insert(key);
    }
    before.difference(&now).count()
}

/// What failed where: a test or a step.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Place {
    Test {
        suite: String,
        classname: String,
        name: String,
    },
    Step(String),
    Cell,
}

impl Place {
    fn label(&self) -> String {
        match self {
            Place::Test {
                classname, name, ..
            } => crate::results::model::display_name(classname, name),
            Place::Step(s) => format!("step {s}"),
            Place::Cell => "cell".into(),
        }
    }

    /// Whether this place ran in `c` (for a test: it is listed, or passed).
    /// `listed` holds the hashes of the tests `c` lists (those that did not
    /// simply pass).
    fn ran_in(&self, c: &CellResult, listed: &HashSet<u64>) -> bool {
        match self {
            Place::Test {
                suite,
                classname,
                name,
            } => {
                let h = test_hash(suite, classname, name);
                listed.contains(&h) || c.passed_hashes.binary_search(&h).is_ok()
            }
            Place::Step(s) => c
                .steps
                .iter()
                .any(|st| &st.name == s && st.status != crate::store::record::RunStatus::Skipped),
            Place::Cell => true,
        }
    }
}

/// One failure before grouping.
struct Failure {
    cell: usize,
    place: Place,
    /// Normalised except for numbers.
    text: String,
    first_line: String,
    example: String,
    /// Its backtrace's top frames (or gdb's note), and whether they have
    /// source lines.
    frames: Vec<String>,
    debug_info: bool,
}

/// The signatures of `results`, most cells first.
pub fn find(results: &Results) -> Vec<Signature> {
    let (failures, skeletons): (Vec<Failure>, Vec<String>) = failures(results).into_iter().unzip();
    if failures.is_empty() {
        return Vec::new();
    }
    let listed: Vec<HashSet<u64>> = results
        .cells
        .iter()
        .map(|c| c.tests.iter().map(TestResult::hash).collect())
        .collect();
    let mut groups: BTreeMap<String, Vec<&Failure>> = BTreeMap::new();
    for (f, skeleton) in failures.iter().zip(skeletons) {
        groups.entry(skeleton).or_default().push(f);
    }
    let mut by_text: BTreeMap<String, Vec<&Failure>> = BTreeMap::new();
    for members in groups.into_values() {
        let text = merge_numbers(&members);
        by_text.entry(text).or_default().extend(members);
    }
    let mut out: Vec<Signature> = by_text
        .into_iter()
        .map(|(text, members)| signature(results, &listed, text, &members))
        .collect();
    out.sort_by(|a, b| {
        (b.cells.len(), b.count)
            .cmp(&(a.cells.len(), a.count))
            .then_with(|| a.text.cmp(&b.text))
    });
    out
}

fn signature(
    results: &Results,
    listed: &[HashSet<u64>],
    text: String,
    members: &[&Failure],
) -> Signature {
    let cells: BTreeSet<usize> = members.iter().map(|f| f.cell).collect();
    let places: BTreeSet<&Place> = members.iter().map(|f| &f.place).collect();
    let points: Vec<Point> = results
        .cells
        .iter()
        .enumerate()
        .filter(|(i, c)| cells.contains(i) || places.iter().any(|p| p.ran_in(c, &listed[*i])))
        .map(|(i, c)| Point {
            values: &c.values,
            failing: cells.contains(&i),
        })
        .collect();
    // The frames of the most telling member: debug info beats none.
    let traced = members
        .iter()
        .filter(|f| !f.frames.is_empty())
        .max_by_key(|f| f.debug_info);
    Signature {
        frames: traced.map(|f| f.frames.clone()).unwrap_or_default(),
        id: id(&text),
        text,
        message: members[0].first_line.clone(),
        count: members.len() as u64,
        places: places.iter().map(|p| p.label()).collect(),
        cells: cells.iter().map(|i| results.cells[*i].id.clone()).collect(),
        example: members[0].example.clone(),
        attribution: attribute(&results.keys, &points),
        baseline: None,
    }
}

/// Every failure of `results` with its skeleton, in cell order. The cells
/// are cut in two halves of about as many tests, worked on side by side.
fn failures(results: &Results) -> Vec<(Failure, String)> {
    let cells = &results.cells;
    let total: usize = cells.iter().map(|c| c.tests.len() + 1).sum();
    let mut seen = 0;
    let mid = cells
        .iter()
        .position(|c| {
            seen += c.tests.len() + 1;
            2 * seen >= total
        })
        .map_or(cells.len(), |i| i + 1);
    let of = |range: std::ops::Range<usize>| {
        let mut out = Vec::new();
        for i in range {
            let c = &cells[i];
            if !c.is_failure() {
                continue;
            }
            let before = out.len();
            for t in c.tests.iter().filter(|t| t.status.is_failure()) {
                out.push(test_failure(i, t));
            }
            if out.len() == before {
                out.push(cell_failure(i, c));
            }
        }
        out.into_iter()
            .map(|f| {
                let skeleton = skeleton(&f.text);
                (f, skeleton)
            })
            .collect::<Vec<_>>()
    };
    std::thread::scope(|scope| {
        let second = scope.spawn(|| of(mid..cells.len()));
        let mut out = of(0..mid);
        out.extend(
            second
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p)),
        );
        out
    })
}

fn test_failure(cell: usize, t: &TestResult) -> Failure {
    let msg = t.message.trim();
    let body = t.output.trim();
    let full = if msg.is_empty() || body.starts_with(msg) {
        body.to_string()
    } else if body.is_empty() {
        msg.to_string()
    } else {
        format!("{msg}\n{body}")
    };
    // A crash's backtrace (see `test_suite::backtrace`) is no part of what
    // groups it: the same crash without debug info is the same failure.
    let (grouped, after) = crate::debugger::gdb_output::split_off(&full);
    let frames: Vec<String> = after
        .map(|a| {
            a.lines()
                .map(str::trim_end)
                .filter(|l| !l.trim().is_empty())
                .take(2 * TOP_FRAMES)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    // A frame line with a source location: `  #1 f at file.c:12`.
    let debug_info = frames
        .iter()
        .any(|l| l.trim_start().starts_with('#') && l.contains(" at "));
    // Nothing left of the output but its label: the label is no text.
    let grouped = grouped.trim_end().trim_end_matches("--- system-out ---");
    let lines: Vec<&str> = grouped
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(TEXT_LINES)
        .collect();
    let first = lines.first().copied().unwrap_or(t.status.as_str());
    Failure {
        cell,
        place: Place::Test {
            suite: t.suite.clone(),
            classname: t.classname.clone(),
            name: t.name.clone(),
        },
        text: normalise(&lines.join("\n")),
        first_line: first.to_string(),
        example: crate::results::junit::clip(&full, EXAMPLE_BYTES),
        frames,
        debug_info,
    }
}

/// A failing cell without failing tests: its first failing step's first
/// error-like line, else the last line of its tail, else the reason.
fn cell_failure(cell: usize, c: &CellResult) -> Failure {
    let step = c.steps.iter().find(|s| s.status.is_failure());
    let backtrace = step.and_then(|s| s.backtrace.clone());
    let (place, line, example) = match step {
        Some(s) => {
            let line = hang_line(s)
                .or_else(|| error_line(&s.log_tail).map(str::to_string))
                .or_else(|| s.reason.clone())
                .unwrap_or_else(|| match s.exit_code {
                    Some(code) => format!("{}: exit code {code}", s.status.as_str()),
                    None => s.status.as_str().to_string(),
                });
            (Place::Step(s.name.clone()), line, s.log_tail.clone())
        }
        None => {
            let line = c
                .reason
                .clone()
                .unwrap_or_else(|| c.status.as_str().to_string());
            (Place::Cell, line.clone(), line)
        }
    };
    Failure {
        cell,
        place,
        text: normalise(line.trim()),
        first_line: line.trim().to_string(),
        example: with_frames(example.trim(), backtrace.as_ref()),
        frames: backtrace
            .as_ref()
            .map(|b| b.top(TOP_FRAMES))
            .unwrap_or_default(),
        debug_info: backtrace.as_ref().is_some_and(|b| b.debug_info),
    }
}

/// A step that hung, with gdb's frames of it (`backtrace: {on:
/// timeout}`): its reason and where it was stuck, `timed out after 5 s,
/// hung in spin ← work ← main` — the stuck thread's own top frames, so
/// that the same hang is one signature in every cell and two hangs in
/// different places are two.
fn hang_line(s: &crate::results::model::StepResult) -> Option<String> {
    if s.status.as_str() != "timeout" {
        return None;
    }
    let stuck = crate::debugger::attach::stuck_in(s.backtrace.as_ref()?, 3)?;
    let reason = s.reason.as_deref().unwrap_or("timed out");
    Some(format!("{reason}, hung in {stuck}"))
}

/// A failure's example (bounded) with its backtrace's top frames after
/// it, which the bound leaves room for.
fn with_frames(example: &str, bt: Option<&crate::store::record::Backtrace>) -> String {
    let Some(bt) = bt else {
        return crate::results::junit::clip(example, EXAMPLE_BYTES);
    };
    let frames = crate::results::junit::clip(
        &format!(
            "{}\n{}",
            crate::debugger::gdb_output::HEADING,
            bt.top(TOP_FRAMES).join("\n")
        ),
        EXAMPLE_BYTES / 2,
    );
    let room = EXAMPLE_BYTES.saturating_sub(frames.len() + 2);
    format!("{}\n\n{frames}", crate::results::junit::clip(example, room))
}

static ERROR_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\berror\b:|Assertion|Segmentation fault|terminate called|panicked at|\bfatal\b:|core dumped",
    )
    .expect("valid regex")
});

/// Lines that say something failed without saying what: used only when no
/// line says an error itself. A Python traceback's header, printed by a
/// helper that failed on the way (`rocm_agent_enumerator` without a KFD
/// topology), must not stand for the compiler's error after it.
static WEAK_ERROR_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\bFAILED\b|\bAborted\b|Traceback|No such file").expect("valid regex")
});

/// The first error-like line of a log tail, or its last non-empty line.
pub fn error_line(tail: &str) -> Option<&str> {
    let mut lines = tail.lines().map(str::trim).filter(|l| !l.is_empty());
    let all: Vec<&str> = lines.by_ref().collect();
    all.iter()
        .find(|l| ERROR_LINE.is_match(l))
        .or_else(|| all.iter().find(|l| WEAK_ERROR_LINE.is_match(l)))
        .or(all.last())
        .copied()
}

/// Replacements applied in order; each regex with what replaces it.
static RULES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // Timestamps, ISO and clock times.
        (
            r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?",
            "<time>",
        ),
        (r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b", "<time>"),
        // rocmatrix run ids: 20261123-103730-9c0a.
        (r"\b\d{8}-\d{6}-[0-9a-f]{4}\b", "<run>"),
        (
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
            "<id>",
        ),
        (r"\b0[xX][0-9a-fA-F]+\b", "<hex>"),
        // Absolute paths, down to the file name.
        (r#"(^|[\s'"(=\[,<])/(?:[^/\s'"()\[\],:<>]+/)+"#, "$1"),
        // Temp names: tmpXXXXXX, tmp.XXXXXX.
        (r"\btmp[._]?[A-Za-z0-9_]{6,}\b", "<tmp>"),
        // Container ids and hashes: 12+ hex digits with a digit and a letter.
        (
            r"\b[0-9a-f]*[0-9][0-9a-f]*[a-f][0-9a-f]*\b|\b[0-9a-f]*[a-f][0-9a-f]*[0-9][0-9a-f]*\b",
            "$hexword",
        ),
        (
            r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds|us|µs|ns|min|minutes)\b",
            "<duration>",
        ),
        (r"[ \t]+", " "),
    ]
    .into_iter()
    .map(|(r, with)| (Regex::new(r).expect("valid regex"), with))
    .collect()
});

/// Removes what varies from `text`, except numbers (see [`merge_numbers`]).
pub fn normalise(text: &str) -> String {
    let mut s = text.to_string();
    for (re, with) in RULES.iter() {
        s = if *with == "$hexword" {
            re.replace_all(&s, |c: &regex::Captures| {
                let w = &c[0];
                if w.len() >= 12 {
                    "<id>".to_string()
                } else {
                    w.to_string()
                }
            })
            .into_owned()
        } else {
            re.replace_all(&s, *with).into_owned()
        };
    }
    s.trim().to_string()
}

static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+").expect("valid regex"));

/// The id of a signature with normalised text `text` (see [`Signature::id`]).
pub fn id(text: &str) -> String {
    crate::digest::short(&crate::digest::sha256_hex(skeleton(text).as_bytes())).to_string()
}

/// The text with every number as `<n>`: texts differing only in numbers
/// share it.
pub fn skeleton(text: &str) -> String {
    NUMBER.replace_all(text, "<n>").into_owned()
}

/// The group's text: numbers every member agrees on are kept, the others
/// become `<n>`.
fn merge_numbers(members: &[&Failure]) -> String {
    let first = &members[0].text;
    let mut same: HashMap<usize, bool> = HashMap::new();
    let numbers: Vec<Vec<&str>> = members
        .iter()
        .map(|f| NUMBER.find_iter(&f.text).map(|m| m.as_str()).collect())
        .collect();
    for (k, n) in numbers[0].iter().enumerate() {
        same.insert(k, numbers.iter().all(|m| m.get(k) == Some(n)));
    }
    let mut k = 0;
    NUMBER
        .replace_all(first, |c: &regex::Captures| {
            let keep = same.get(&k).copied().unwrap_or(false);
            k += 1;
            if keep {
                c[0].to_string()
            } else {
                "<n>".to_string()
            }
        })
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fail(text: &str) -> Failure {
        Failure {
            cell: 0,
            place: Place::Cell,
            text: normalise(text),
            first_line: text.into(),
            example: text.into(),
            frames: Vec::new(),
            debug_info: false,
        }
    }

    /// Groups texts as [`find`] does; returns the signature texts with counts.
    fn group(texts: &[&str]) -> Vec<(String, usize)> {
        let fs: Vec<Failure> = texts.iter().map(|t| fail(t)).collect();
        let mut groups: BTreeMap<String, Vec<&Failure>> = BTreeMap::new();
        for f in &fs {
            groups.entry(skeleton(&f.text)).or_default().push(f);
        }
        groups
            .into_values()
            .map(|m| (merge_numbers(&m), m.len()))
            .collect()
    }

    fn sig(text: &str) -> Signature {
        Signature {
            id: id(text),
            text: text.into(),
            message: text.into(),
            count: 1,
            places: vec![],
            cells: vec![],
            example: text.into(),
            attribution: attribute(&[], &[]),
            baseline: None,
            frames: Vec::new(),
        }
    }

    #[test]
    fn signatures_are_new_known_or_gone_against_a_baseline() {
        let baseline = [
            sig("handlehip.cpp:150: No device"),
            sig("include_inliner.cpp:58 Which is: 127"),
        ];
        let mut now = [
            // The same cause, grouped with a second line number this time.
            sig("handlehip.cpp:<n>: No device"),
            // Different words: a different cause.
            sig("handlehip.cpp:150: Device lost"),
        ];
        let gone = mark_against(&mut now, &baseline);
        assert_eq!(now[0].baseline, Some(Seen::Known));
        assert_eq!(now[1].baseline, Some(Seen::New));
        assert_eq!(gone, 1, "the inliner failure no longer occurs");
    }

    #[test]
    fn paths_addresses_and_numbers_group_together() {
        let g = group(&[
            "error: invalid HSA metadata at /tmp/x123/k.s:31 (ptr 0x7ffd1234) after 0.52s",
            "error: invalid HSA metadata at /tmp/x98765/k.s:31 (ptr 0x55aa00) after 12 ms",
            "error: invalid HSA metadata at /build/other/dir/k.s:31 (ptr 0xdeadbeef) after 3s",
        ]);
        assert_eq!(
            g,
            [(
                "error: invalid HSA metadata at k.s:31 (ptr <hex>) after <duration>".to_string(),
                3
            )]
        );
    }

    #[test]
    fn numbers_that_vary_become_n() {
        let g = group(&[
            "hipMalloc failed; Which is: 100 at line 150",
            "hipMalloc failed; Which is: 101 at line 150",
        ]);
        assert_eq!(
            g,
            [("hipMalloc failed; Which is: <n> at line 150".to_string(), 2)]
        );
    }

    #[test]
    fn words_stay_apart() {
        let g = group(&[
            "handlehip.cpp:150: No device",
            "handlehip.cpp:150: No memory",
            "miopenCreate() failed",
        ]);
        assert_eq!(g.len(), 3);
    }

    #[test]
    fn ids_times_and_temp_names_go() {
        assert_eq!(
            normalise("container 3f4e5a6b7c8d9e0f killed at 2026-11-23T10:37:30Z in /tmp/tmpa1b2c3d4/run run 20261123-103730-9c0a"),
            "container <id> killed at <time> in run run <run>"
        );
        assert_eq!(
            normalise("file tmp_ab12cd34 at 10:37:30"),
            "file <tmp> at <time>"
        );
        // Words that happen to be hex stay.
        assert_eq!(normalise("deadbeef cafe face"), "deadbeef cafe face");
    }

    #[test]
    fn error_line_picks_the_first_error() {
        let tail = "Debian clang version 15.0.6\nk.s:31:23: error: invalid HSA metadata\n  .end_amdgpu_metadata\n";
        assert_eq!(
            error_line(tail),
            Some("k.s:31:23: error: invalid HSA metadata")
        );
        assert_eq!(error_line("one\ntwo\n\n"), Some("two"));
        // The smoke's bookworm.gfx1100: a helper's traceback, then the
        // compiler's error, which is the failure.
        let tail = "Traceback (most recent call last):\n  File \"/usr/bin/rocm_agent_enumerator\", line 257, in <module>\n\
            FileNotFoundError: [Errno 2] No such file or directory: '/sys/class/kfd/kfd/topology/nodes/'\n\
            Debian clang version 15.0.6\n\
            clang: error: cannot find ROCm device library for gfx1100; provide its path\n";
        assert_eq!(
            error_line(tail),
            Some("clang: error: cannot find ROCm device library for gfx1100; provide its path")
        );
        assert_eq!(
            error_line("Traceback (most recent call last):\nValueError: x\n"),
            Some("Traceback (most recent call last):")
        );
        assert_eq!(error_line(""), None);
    }
}
