//! Editing a matrix file's `expect:` and `flaky:` lists in place: every
//! change is a replacement of whole lines found through the positioned
//! YAML tree (`src/yaml/`), so the rest of the file — comments,
//! order, quoting, blank lines — stays byte for byte. The changes are shown
//! as a unified diff and written by applying exactly those replacements.

use std::collections::BTreeMap;

use crate::matrix_file::tree::{Node, NodeKind};

use super::findings::{Drop, Findings, NewEntry, Section};
use super::ExpectError;

/// Lines `start..end` (0-based) of the old text replaced by `lines`
/// (each with its line break, but for a last line that had none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub start: usize,
    pub end: usize,
    pub lines: Vec<String>,
}

/// The file being edited: its lines (with their breaks) and its tree.
pub struct Doc<'a> {
    file: &'a str,
    lines: Vec<&'a str>,
    root: &'a Node,
}

impl<'a> Doc<'a> {
    pub fn new(file: &'a str, text: &'a str, root: &'a Node) -> Doc<'a> {
        Doc {
            file,
            lines: text.split_inclusive('\n').collect(),
            root,
        }
    }

    fn is_blank_or_comment(&self, i: usize) -> bool {
        let t = self.lines[i].trim();
        t.is_empty() || t.starts_with('#')
    }

    fn is_comment(&self, i: usize) -> bool {
        self.lines[i].trim_start().starts_with('#')
    }

    /// The top-level key `key`: its line, its value, and the line the next
    /// top-level key is on (or the end).
    fn section(&self, key: &str) -> Option<(usize, &'a Node, usize)> {
        let NodeKind::Map(pairs) = &self.root.kind else {
            return None;
        };
        let at = pairs.iter().position(|(k, _)| k.as_scalar() == Some(key))?;
        let (k, v) = &pairs[at];
        let next = pairs
            .iter()
            .map(|(k, _)| k.pos.line.saturating_sub(1))
            .filter(|l| *l > k.pos.line.saturating_sub(1))
            .min()
            .unwrap_or(self.lines.len());
        Some((k.pos.line.saturating_sub(1), v, next))
    }

    /// One past the section's last line that is not blank or a comment
    /// (trailing comments belong to what follows).
    fn content_end(&self, key_line: usize, next: usize) -> usize {
        let mut end = next.min(self.lines.len());
        while end > key_line + 1 && self.is_blank_or_comment(end - 1) {
            end -= 1;
        }
        end
    }

    /// The line of an item's `-`, from its node.
    fn dash_line(&self, item: &Node, floor: usize) -> usize {
        let mut l = item.pos.line.saturating_sub(1).min(self.lines.len() - 1);
        while l > floor && !self.lines[l].trim_start().starts_with('-') {
            l -= 1;
        }
        l
    }

    /// An item's first line: its `-` line and the comment lines right above.
    fn item_start(&self, item: &Node, key_line: usize) -> usize {
        let mut l = self.dash_line(item, key_line + 1);
        while l > key_line + 1 && self.is_comment(l - 1) {
            l -= 1;
        }
        l
    }

    /// Whether a node is written in flow style (`[…]`, `{…}`).
    fn is_flow(&self, node: &Node) -> bool {
        let (l, c) = (
            node.pos.line.saturating_sub(1),
            node.pos.col.saturating_sub(1),
        );
        self.lines
            .get(l)
            .and_then(|line| line.get(c..))
            .is_some_and(|rest| rest.starts_with('[') || rest.starts_with('{'))
    }

    fn flow_error(&self, key: &str, line: usize) -> ExpectError {
        ExpectError::Flow {
            file: self.file.to_string(),
            line: line + 1,
            key: key.to_string(),
        }
    }

    /// The edits that make `findings` true of the file.
    pub fn edits(&self, findings: &Findings) -> Result<Vec<Edit>, ExpectError> {
        let mut edits = Vec::new();
        for (section, adds) in [
            (Section::Expect, &findings.expect),
            (Section::Flaky, &findings.flaky),
        ] {
            let drops: Vec<&Drop> = findings
                .drops
                .iter()
                .filter(|d| d.section == section)
                .collect();
            if adds.is_empty() && drops.is_empty() {
                continue;
            }
            edits.extend(self.section_edits(section.key(), adds, &drops)?);
        }
        edits.sort_by_key(|e| (e.start, e.end));
        Ok(edits)
    }

    fn section_edits(
        &self,
        key: &str,
        adds: &[NewEntry],
        drops: &[&Drop],
    ) -> Result<Vec<Edit>, ExpectError> {
        let Some((key_line, value, next)) = self.section(key) else {
            // No such list yet: a new one at the end of the file.
            return Ok(vec![self.append_section(key, adds)]);
        };
        let items: &[Node] = match &value.kind {
            NodeKind::Seq(items) => items,
            NodeKind::Null => &[],
            _ => return Err(self.flow_error(key, key_line)),
        };
        if matches!(value.kind, NodeKind::Seq(_)) && self.is_flow(value) {
            if !items.is_empty() {
                return Err(self.flow_error(key, key_line));
            }
            // `expect: []`: the key alone, then the entries.
            let line = self.lines[key_line];
            let mut head = line.replacen("[]", "", 1).trim_end().to_string();
            head.push('\n');
            let mut lines = vec![head];
            lines.extend(render(adds, "  "));
            return Ok(vec![Edit {
                start: key_line,
                end: key_line + 1,
                lines,
            }]);
        }
        let end = self.content_end(key_line, next);
        let indent = items
            .first()
            .map(|i| {
                let l = self.lines[self.dash_line(i, key_line + 1)];
                l[..l.len() - l.trim_start().len()].to_string()
            })
            .unwrap_or_else(|| "  ".to_string());
        let mut edits = Vec::new();
        let whole: Vec<usize> = drops.iter().filter(|d| d.whole).map(|d| d.index).collect();
        for d in drops {
            let Some(item) = items.get(d.index) else {
                continue;
            };
            let start = self.item_start(item, key_line);
            let stop = match items.get(d.index + 1) {
                Some(n) => self.item_start(n, key_line),
                None => end,
            };
            if d.whole {
                edits.push(Edit {
                    start,
                    end: stop,
                    lines: Vec::new(),
                });
            } else {
                edits.extend(self.drop_tests(key, item, &d.tests)?);
            }
        }
        if !adds.is_empty() {
            edits.push(Edit {
                start: end,
                end,
                lines: render(adds, &indent),
            });
        } else if !items.is_empty() && whole.len() == items.len() {
            // Every entry goes: keep the key, as an empty list.
            let line = self.lines[key_line];
            let mut emptied = line.replacen(&format!("{key}:"), &format!("{key}: []"), 1);
            if !emptied.ends_with('\n') {
                emptied.push('\n');
            }
            edits.push(Edit {
                start: key_line,
                end: key_line + 1,
                lines: vec![emptied],
            });
        }
        Ok(edits)
    }

    /// Some patterns of an entry's `tests:` removed.
    fn drop_tests(
        &self,
        key: &str,
        item: &Node,
        which: &[usize],
    ) -> Result<Vec<Edit>, ExpectError> {
        let Some(tests) = item.get("tests") else {
            return Ok(Vec::new());
        };
        let NodeKind::Seq(names) = &tests.kind else {
            return Ok(Vec::new());
        };
        if !self.is_flow(tests) {
            // A block list: one `- name` line each.
            return Ok(which
                .iter()
                .filter_map(|i| names.get(*i))
                .map(|n| {
                    let l = n.pos.line.saturating_sub(1);
                    Edit {
                        start: l,
                        end: l + 1,
                        lines: Vec::new(),
                    }
                })
                .collect());
        }
        let (l0, c0) = (tests.pos.line - 1, tests.pos.col - 1);
        let Some((l1, c1)) = self.closing_bracket(l0, c0) else {
            return Err(self.flow_error(key, l0));
        };
        let kept: Vec<String> = names
            .iter()
            .enumerate()
            .filter(|(i, _)| !which.contains(i))
            .filter_map(|(_, n)| n.as_scalar().map(scalar))
            .collect();
        let text = format!(
            "{}[{}]{}",
            &self.lines[l0][..c0],
            kept.join(", "),
            &self.lines[l1][c1 + 1..]
        );
        Ok(vec![Edit {
            start: l0,
            end: l1 + 1,
            lines: vec![text],
        }])
    }

    /// The `]` closing the `[` at line `l`, byte `c` (quotes skipped).
    fn closing_bracket(&self, l: usize, c: usize) -> Option<(usize, usize)> {
        let mut depth = 0usize;
        let mut quote: Option<char> = None;
        for (li, line) in self.lines.iter().enumerate().skip(l) {
            let from = if li == l { c } else { 0 };
            for (ci, ch) in line[from..].char_indices() {
                match (quote, ch) {
                    (Some(q), ch) if ch == q => quote = None,
                    (Some(_), _) => {}
                    (None, '"' | '\'') => quote = Some(ch),
                    (None, '[') => depth += 1,
                    (None, ']') => {
                        depth -= 1;
                        if depth == 0 {
                            return Some((li, from + ci));
                        }
                    }
                    _ => {}
                }
            }
        }
        None
    }

    /// A new list at the end of the file.
    fn append_section(&self, key: &str, adds: &[NewEntry]) -> Edit {
        let mut lines = Vec::new();
        let n = self.lines.len();
        let (start, end) = match self.lines.last() {
            Some(last) if !last.ends_with('\n') => {
                lines.push(format!("{last}\n"));
                (n - 1, n)
            }
            _ => (n, n),
        };
        if n > 0 {
            lines.push("\n".to_string());
        }
        lines.push(format!("{key}:\n"));
        lines.extend(render(adds, "  "));
        Edit { start, end, lines }
    }

    /// The text with `edits` applied.
    pub fn apply(&self, edits: &[Edit]) -> String {
        let mut out = String::new();
        let mut at = 0;
        for e in edits {
            for l in &self.lines[at.min(e.start)..e.start] {
                out.push_str(l);
            }
            for l in &e.lines {
                out.push_str(l);
            }
            at = at.max(e.end);
        }
        for l in &self.lines[at.min(self.lines.len())..] {
            out.push_str(l);
        }
        out
    }

    /// `edits` as a unified diff of `name` (three lines of context).
    pub fn diff(&self, name: &str, edits: &[Edit]) -> String {
        if edits.is_empty() {
            return String::new();
        }
        const CONTEXT: usize = 3;
        let mut out = format!("--- {name}\n+++ {name}\n");
        // Edits whose context touches go into one hunk.
        let mut hunks: Vec<Vec<&Edit>> = Vec::new();
        for e in edits {
            match hunks.last_mut() {
                Some(h) if h.last().is_some_and(|p| p.end + 2 * CONTEXT >= e.start) => h.push(e),
                _ => hunks.push(vec![e]),
            }
        }
        let mut delta: isize = 0;
        for h in hunks {
            let first = h[0].start.saturating_sub(CONTEXT);
            let last = (h[h.len() - 1].end + CONTEXT).min(self.lines.len());
            let mut body = String::new();
            let (mut old_n, mut new_n) = (0usize, 0usize);
            let mut at = first;
            let mut hunk_delta: isize = 0;
            for e in &h {
                for l in &self.lines[at..e.start] {
                    line(&mut body, ' ', l);
                    old_n += 1;
                    new_n += 1;
                }
                for l in &self.lines[e.start..e.end] {
                    line(&mut body, '-', l);
                    old_n += 1;
                }
                for l in &e.lines {
                    line(&mut body, '+', l);
                    new_n += 1;
                }
                hunk_delta += e.lines.len() as isize - (e.end - e.start) as isize;
                at = e.end;
            }
            for l in &self.lines[at..last] {
                line(&mut body, ' ', l);
                old_n += 1;
                new_n += 1;
            }
            let old_start = if old_n == 0 { first } else { first + 1 };
            let new_first = (first as isize + delta).max(0) as usize;
            let new_start = if new_n == 0 { new_first } else { new_first + 1 };
            out.push_str(&format!(
                "@@ -{old_start},{old_n} +{new_start},{new_n} @@\n"
            ));
            out.push_str(&body);
            delta += hunk_delta;
        }
        out
    }
}

/// One diff line; a line without a break is marked as the format says.
fn line(out: &mut String, mark: char, l: &str) {
    out.push(mark);
    out.push_str(l);
    if !l.ends_with('\n') {
        out.push_str("\n\\ No newline at end of file\n");
    }
}

/// Entries as block-list lines at `indent`.
fn render(adds: &[NewEntry], indent: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in adds {
        for c in &e.comments {
            out.push(format!("{indent}# {}\n", c.replace('\n', " ")));
        }
        let mut keys = Vec::new();
        if !e.cells.is_empty() {
            keys.push(format!("cells: {}", flow_map(&e.cells)));
        }
        let tests: Vec<String> = e.tests.iter().map(|t| scalar(t)).collect();
        // A few tests on one line; more, one a line (a diff to review).
        match tests.len() {
            0 => {}
            1..=4 => keys.push(format!("tests: [{}]", tests.join(", "))),
            _ => keys.push(format!(
                "tests:\n{}",
                tests
                    .iter()
                    .map(|t| format!("{indent}    - {t}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            )),
        }
        keys.push(format!("reason: {}", scalar(&e.reason)));
        for (i, k) in keys.iter().enumerate() {
            let lead = if i == 0 { "- " } else { "  " };
            out.extend(
                format!("{indent}{lead}{k}\n")
                    .split_inclusive('\n')
                    .map(str::to_string),
            );
        }
    }
    out
}

fn flow_map(m: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("{}: {}", scalar(k), scalar(v)))
        .collect();
    format!("{{{}}}", pairs.join(", "))
}

/// A YAML scalar for `s`: plain where that reads back as the same string
/// in flow and block context, else double-quoted.
pub fn scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n"
        );
    if plain {
        s.to_string()
    } else {
        serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(cells: &[(&str, &str)], tests: &[&str], reason: &str) -> NewEntry {
        NewEntry {
            comments: vec!["why".into()],
            cells: cells
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            tests: tests.iter().map(|t| t.to_string()).collect(),
            reason: reason.into(),
        }
    }

    fn edited(text: &str, f: &Findings) -> (String, String) {
        let root = crate::matrix_file::tree::parse(text).unwrap();
        let doc = Doc::new("m.yaml", text, &root);
        let edits = doc.edits(f).unwrap();
        (doc.apply(&edits), doc.diff("m.yaml", &edits))
    }

    const FILE: &str = "name: m   # the name\nmatrix:\n  gfx: [a, b]\n\
# expected failures\nexpect:\n    # old one\n    - cells: {gfx: a}\n      tests: [T.Old, T.Keep]\n      reason: \"old\"\n    - tests:\n        - T.Gone\n      reason: gone\n\n# reports\nreport: {rows: [gfx]}\n";

    #[test]
    fn entries_are_added_and_dropped_by_line_keeping_everything_else() {
        let f = Findings {
            expect: vec![entry(&[("gfx", "b")], &["T.New"], "known failure: boom: 1")],
            flaky: vec![entry(&[], &["T.Flaky"], "flaky: 1 of 4 runs failed")],
            drops: vec![
                Drop {
                    section: Section::Expect,
                    index: 0,
                    tests: vec![0],
                    whole: false,
                    what: String::new(),
                    why: String::new(),
                },
                Drop {
                    section: Section::Expect,
                    index: 1,
                    tests: vec![0],
                    whole: true,
                    what: String::new(),
                    why: String::new(),
                },
            ],
            runs: 5,
        };
        let (text, diff) = edited(FILE, &f);
        assert_eq!(
            text,
            "name: m   # the name\nmatrix:\n  gfx: [a, b]\n\
# expected failures\nexpect:\n    # old one\n    - cells: {gfx: a}\n      tests: [T.Keep]\n      reason: \"old\"\n    # why\n    - cells: {gfx: b}\n      tests: [T.New]\n      reason: \"known failure: boom: 1\"\n\n# reports\nreport: {rows: [gfx]}\n\nflaky:\n  # why\n  - tests: [T.Flaky]\n    reason: \"flaky: 1 of 4 runs failed\"\n"
        );
        crate::matrix_file::Spec::parse(std::path::Path::new("m.yaml"), &text)
            .map(|_| ())
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        // One hunk: the edits' contexts touch.
        assert!(
            diff.starts_with("--- m.yaml\n+++ m.yaml\n@@ -5,11 +5,17 @@\n"),
            "{diff}"
        );
        assert_eq!(diff.matches("@@ -").count(), 1, "{diff}");
        assert!(
            diff.contains("-      tests: [T.Old, T.Keep]\n+      tests: [T.Keep]\n"),
            "{diff}"
        );
    }

    #[test]
    fn an_emptied_list_stays_as_an_empty_one_and_flow_lists_are_refused() {
        let f = Findings {
            drops: vec![Drop {
                section: Section::Expect,
                index: 0,
                tests: vec![],
                whole: true,
                what: String::new(),
                why: String::new(),
            }],
            ..Findings::default()
        };
        let (text, _) = edited("name: m\nexpect:\n  - cells: {gfx: a}\n    reason: r\n", &f);
        assert_eq!(text, "name: m\nexpect: []\n");
        let text = "name: m\nexpect: [{tests: [A], reason: r}]\n";
        let root = crate::matrix_file::tree::parse(text).unwrap();
        let f = Findings {
            expect: vec![entry(&[], &["B"], "r")],
            ..Findings::default()
        };
        let e = Doc::new("m.yaml", text, &root).edits(&f).unwrap_err();
        assert!(e.to_string().contains("m.yaml:2"), "{e}");
        // An empty flow list takes block entries; a file without a final
        // line break gets one.
        let (text, diff) = edited("name: m\nexpect: []", &f);
        assert_eq!(
            text,
            "name: m\nexpect:\n  # why\n  - tests: [B]\n    reason: r\n"
        );
        assert!(diff.contains("\\ No newline at end of file"), "{diff}");
    }

    #[test]
    fn a_block_list_of_tests_loses_only_the_dropped_lines() {
        let text = "name: m\nmatrix:\n  gfx: [a]\nflaky:\n\n  # about A and B\n  - tests:\n      - T.A   # the first\n      - T.B\n    reason: r\n";
        let f = Findings {
            drops: vec![Drop {
                section: Section::Flaky,
                index: 0,
                tests: vec![1],
                whole: false,
                what: String::new(),
                why: String::new(),
            }],
            ..Findings::default()
        };
        let (out, diff) = edited(text, &f);
        assert_eq!(out, text.replace("      - T.B\n", ""));
        assert!(diff.contains("\n-      - T.B\n"), "{diff}");
    }

    #[test]
    fn many_tests_are_a_block_list_that_reads_back() {
        let names = ["A.a", "A.b", "A.c", "A.d", "A.e"];
        let f = Findings {
            expect: vec![entry(&[], &names, "r")],
            ..Findings::default()
        };
        let (text, _) = edited("name: m\nmatrix:\n  gfx: [a]\n", &f);
        assert!(
            text.contains("  - tests:\n      - A.a\n      - A.b\n"),
            "{text}"
        );
        let spec = crate::matrix_file::Spec::parse(std::path::Path::new("m.yaml"), &text).unwrap();
        assert_eq!(spec.expect[0].tests, names);
    }

    #[test]
    fn scalars_are_quoted_only_when_plain_would_read_otherwise() {
        assert_eq!(scalar("Suite.Test/0"), "Suite.Test/0");
        assert_eq!(scalar("6.10"), "\"6.10\"");
        assert_eq!(scalar("no"), "\"no\"");
        assert_eq!(scalar("a: b"), "\"a: b\"");
        assert_eq!(scalar("x, y"), "\"x, y\"");
    }
}
