//! The history's parts of index.html and the cell pages as HTML the
//! templates print as it is (the failing tests' table, the cards' strips,
//! each test's badge and strip): the bytes the templates wrote, each field
//! escaped as minijinja's auto-escape does, without a lookup per field.

use std::fmt::Write;

use minijinja::{HtmlEscape, Value};

use super::history_view::HistoryRow;
use crate::history::past::{Mark, TestPast};

/// The rows of index.html's table of failing tests across runs, each
/// followed by a line break.
pub fn rows(rows: &[HistoryRow]) -> Value {
    let mut out = String::with_capacity(rows.len() * 320);
    for r in rows {
        let search = format!("{} {} {}", r.cell, r.test, r.kind).to_lowercase();
        let _ = write!(
            out,
            r##"<tr class="filterable" data-search="{}"><td><a href="#cell-{}">{}</a></td><td>{}</td><td>{}"##,
            HtmlEscape(&search),
            HtmlEscape(&r.cell),
            HtmlEscape(&r.cell),
            HtmlEscape(&r.test),
            HtmlEscape(&r.words),
        );
        if !r.changed.is_empty() {
            let _ = write!(
                out,
                r#"<br><span class="muted">changed since the run before: {}</span>"#,
                HtmlEscape(&r.changed)
            );
        }
        let _ = writeln!(
            out,
            r#"</td><td class="strip">{}</td></tr>"#,
            HtmlEscape(&r.marks)
        );
    }
    Value::from_safe_string(out)
}

/// A cell card's marks, one `<span>` a run.
pub fn cell_strip(marks: &[Mark]) -> Value {
    let mut out = String::with_capacity(marks.len() * 90);
    for m in marks {
        let mut mark = [0u8; 4];
        let _ = write!(
            out,
            r#"<span class="m {}" title="{}">{}</span>"#,
            HtmlEscape(m.css),
            HtmlEscape(&m.title),
            HtmlEscape(m.mark.encode_utf8(&mut mark)),
        );
    }
    Value::from_safe_string(out)
}

/// A failing test's badge (its words) and strip, after its summary line.
pub fn test_badge(p: &TestPast) -> Value {
    let css = match p.kind.word() {
        "new" | "failing since an earlier run" => "new",
        "flaky" => "flaky",
        _ => "skip",
    };
    let mut out = format!(r#" <span class="badge {css}">"#);
    escape_into(&mut out, &p.words);
    out.push_str(r#"</span> <span class="strip" title="its last runs, oldest first: ✓ passed ✗ failed ~ passed on a rerun · not run">"#);
    escape_into(&mut out, &p.strip);
    out.push_str("</span>");
    Value::from_safe_string(out)
}

/// Appends `s` to `out` escaped as [`HtmlEscape`] writes it.
fn escape_into(out: &mut String, s: &str) {
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let with = match b {
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'&' => "&amp;",
            b'"' => "&quot;",
            b'\'' => "&#x27;",
            b'/' => "&#x2f;",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        out.push_str(with);
        start = i + 1;
    }
    out.push_str(&s[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_writes_what_minijinja_writes() {
        for s in "|plain|a<b>&\"c'/d|r (2026) </script>|✓✗~·|&&|ünï/cö'".split('|') {
            let mut out = String::new();
            escape_into(&mut out, s);
            assert_eq!(out, HtmlEscape(s).to_string(), "{s}");
        }
    }
}
