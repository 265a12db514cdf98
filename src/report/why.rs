//! "Why cells fail": the failure signatures of a run as the reports and
//! `rocmatrix explain` show them — the normalised text, how many failures
//! and which cells it covers, the axis rule, and one example.

use serde::Serialize;

use crate::analysis::signature::{Seen, Signature};
use crate::results::junit::clip;
use crate::results::{CellVerdict, Results};

/// Cell ids and places listed per signature before "and N more".
const LISTED: usize = 24;
/// Lines of an example on the terminal.
const EXAMPLE_LINES: usize = 12;

/// One signature, capped for display.
#[derive(Debug, Serialize)]
pub struct SignatureView {
    /// The signature's id.
    pub id: String,
    pub text: String,
    pub message: String,
    pub count: u64,
    pub cell_count: usize,
    /// Cell ids, capped, comma-separated.
    pub cells: String,
    /// Test names or `step <name>`, capped, comma-separated.
    pub places: String,
    /// The attribution in one sentence.
    pub rule: String,
    pub exact: bool,
    pub example: String,
    /// A backtrace's top frames (or gdb's note), when a failure has one.
    pub frames: Vec<String>,
    /// Against a baseline: "new" or "known"; empty without one.
    pub baseline: &'static str,
    /// Where it started, from the run's triage (`started at …`); empty
    /// when the run was not triaged.
    pub triage: String,
}

/// The first `max` signatures, each example cut to `example` bytes.
pub fn views(signatures: &[Signature], max: usize, example: usize) -> Vec<SignatureView> {
    signatures
        .iter()
        .take(max)
        .map(|s| SignatureView {
            id: s.id.clone(),
            text: s.text.clone(),
            message: s.message.clone(),
            count: s.count,
            cell_count: s.cells.len(),
            cells: listed(&s.cells),
            places: listed(&s.places),
            rule: s.attribution.text.clone(),
            exact: s.attribution.exact,
            example: clip(&s.example, example),
            frames: s.frames.clone(),
            baseline: match s.baseline {
                Some(Seen::New) => "new",
                Some(Seen::Known) => "known",
                None => "",
            },
            triage: String::new(),
        })
        .collect()
}

fn listed(items: &[String]) -> String {
    let mut s = items
        .iter()
        .take(LISTED)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > LISTED {
        s.push_str(&format!(" and {} more", items.len() - LISTED));
    }
    s
}

/// The signatures as plain text for a terminal.
pub fn text(signatures: &[Signature]) -> String {
    if signatures.is_empty() {
        return "No cell fails.\n".into();
    }
    let mut out = format!(
        "Why cells fail: {} signature{}\n",
        signatures.len(),
        if signatures.len() == 1 { "" } else { "s" }
    );
    for (i, v) in views(signatures, usize::MAX, 1024).iter().enumerate() {
        let failures = if v.count == 1 { "failure" } else { "failures" };
        let cells = if v.cell_count == 1 { "cell" } else { "cells" };
        let seen = match v.baseline {
            "" => String::new(),
            b => format!(" [{b}]"),
        };
        out.push_str(&format!(
            "\n{}.{seen} {}\n   {} {failures} in {} {cells}: {}\n   where: {}\n   rule: {}\n",
            i + 1,
            indent(&v.text),
            v.count,
            v.cell_count,
            v.cells,
            v.places,
            v.rule
        ));
        // The frames are printed on their own below.
        let example = match crate::debugger::gdb_output::split_off(&v.example) {
            (before, Some(_)) if !v.frames.is_empty() => before,
            _ => v.example.as_str(),
        };
        if example.trim() != v.text.trim() {
            let lines: Vec<&str> = example.lines().take(EXAMPLE_LINES).collect();
            let more = example.lines().count().saturating_sub(EXAMPLE_LINES);
            out.push_str(&format!(
                "   example:\n     {}\n",
                indent_by(&lines.join("\n"), "     ")
            ));
            if more > 0 {
                out.push_str(&format!("     … {more} more lines\n"));
            }
        }
        if !v.frames.is_empty() {
            out.push_str(&format!(
                "   backtrace:\n     {}\n",
                indent_by(&v.frames.join("\n"), "     ")
            ));
        }
    }
    out
}

/// What `rocmatrix explain` prints: the signatures ([`text`]), then the
/// cells that failed as the matrix expected, named with their reasons —
/// they fail nothing, and no signature stands for them.
pub fn explain(results: &Results) -> String {
    let expected = super::view::expected_failures(results);
    let mut out = if results.signatures.is_empty() && !expected.is_empty() {
        "No cell fails unexpectedly.\n".to_string()
    } else {
        text(&results.signatures)
    };
    if expected.is_empty() {
        return out;
    }
    let n = expected.len();
    out.push_str(&format!(
        "\n{} ({} that failed where the matrix's `expect:` said {}):\n",
        CellVerdict::ExpectedFailure.count(n),
        if n == 1 { "a cell" } else { "cells" },
        if n == 1 { "it would" } else { "they would" },
    ));
    for e in &expected {
        let reason = if e.reason.is_empty() {
            String::new()
        } else {
            format!(" ({})", e.reason)
        };
        out.push_str(&format!("  {}: {}{reason}\n", e.id, e.status));
        let why = if e.expected.is_empty() {
            "only tests expected to fail failed"
        } else {
            e.expected.as_str()
        };
        out.push_str(&format!("    expected: {}\n", indent_by(why, "      ")));
    }
    out
}

fn indent(s: &str) -> String {
    indent_by(s, "   ")
}

fn indent_by(s: &str, pad: &str) -> String {
    s.trim_end().replace('\n', &format!("\n{pad}"))
}
