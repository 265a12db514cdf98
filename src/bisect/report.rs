//! A bisection for people: a line per probe while it runs, the answer on
//! the terminal, and `bisect.md` and `bisect.html` beside `bisect.json`
//! (rewritten after every probe). Everything here reads a [`Bisection`]
//! only.

use std::fmt::Write as _;

use super::drive::words;
use super::judge::Regress;
use super::space::Kind;
use super::store::{Answer, BisectStore, Bisection, Probe};
use super::BisectError;

/// One point as shown: `21`, or `1a2b3c4d5e6f subject`.
fn point(b: &Bisection, i: usize) -> String {
    let p = &b.space.points[i];
    match (&p.subject, b.space.kind) {
        (Some(s), Kind::Git) => format!("{} {s}", p.label(b.space.kind)),
        _ => p.label(b.space.kind),
    }
}

fn what(b: &Bisection) -> String {
    match b.space.kind {
        Kind::Axis => format!("axis {}", b.space.name),
        Kind::Packages => "the packages that moved, in groups joining one at a time".to_string(),
        Kind::Git => format!(
            "source {} ({}{})",
            b.space.name,
            b.space.url.as_deref().unwrap_or(""),
            if b.space.first_parent {
                ", first-parent"
            } else {
                ", all commits"
            }
        ),
    }
}

/// ⌈log2 m⌉.
fn log2_ceil(m: usize) -> usize {
    (usize::BITS - m.max(1).saturating_sub(1).leading_zeros()) as usize
}

/// The first line: what is searched, over how many points.
pub fn heading(b: &Bisection) -> String {
    let n = b.space.points.len();
    let goal = match b.request.regress {
        Regress::Error => "the first point that shows the signature",
        Regress::Success => "the first point where the signature is gone",
    };
    let mut s = format!(
        "bisect {}: {n} points from {} to {}, looking for {goal}; at most {} probes besides the ends, plus one per skipped point",
        what(b),
        b.space.points[0].label(b.space.kind),
        b.space.points[n - 1].label(b.space.kind),
        log2_ceil(n - 1),
    );
    if !b.space.left_out.is_empty() {
        let _ = write!(
            s,
            " ({} left out: no cell under --only)",
            b.space.left_out.join(", ")
        );
    }
    if let Some(t) = &b.target {
        let _ = write!(s, "\njudged by the signature {}", t.describe());
    }
    s
}

fn build_word(p: &Probe) -> &'static str {
    match &p.build {
        Some(b) if b.reused => "reused",
        Some(_) if p.why.starts_with("its build failed") => "failed",
        Some(_) => "built",
        None => "-",
    }
}

fn shown(p: &Probe) -> String {
    match &p.signature {
        Some(s) => format!("{} {}", s.id, s.message),
        None => String::new(),
    }
}

/// A probe, on one line.
pub fn probe_line(b: &Bisection, p: &Probe) -> String {
    format!(
        "probe {}: {} -> {}{}{} ({}, {:.1} s{}){}",
        p.n,
        point(b, p.point),
        p.verdict.as_str(),
        if p.retry { " (again)" } else { "" },
        if p.reused { " (outcome reused)" } else { "" },
        p.why,
        p.secs,
        match &p.build {
            Some(_) => format!(", build {}", build_word(p)),
            None => String::new(),
        },
        match &p.signature {
            Some(_) => format!(": {}", shown(p)),
            None => String::new(),
        }
    )
}

/// The answer, for the terminal.
pub fn text(b: &Bisection, store: &BisectStore) -> String {
    let mut s = String::new();
    let Some(a) = &b.answer else {
        let _ = writeln!(
            s,
            "interrupted after {} probes: finish it with `rocmatrix bisect --resume {}`",
            b.probes.len(),
            store.dir.display()
        );
        return s;
    };
    let (old_word, new_word) = words(b.request.regress);
    if let Some(t) = &b.target {
        let _ = writeln!(s, "judged by: {}", t.describe());
    }
    ends(&mut s, b, a, old_word, new_word);
    let skipped = skips(&mut s, b, a);
    tally(&mut s, b, skipped);
    let _ = writeln!(
        s,
        "bisection: {} (bisect.json, bisect.md, bisect.html)",
        store.dir.display()
    );
    s
}

/// The ends the search found (or why there are none) and the signature
/// where the failure shows.
fn ends(s: &mut String, b: &Bisection, a: &Answer, old_word: &str, new_word: &str) {
    match (a.last_old, a.first_new) {
        (Some(lo), Some(hi)) => {
            let _ = writeln!(s, "{old_word}: {}", point(b, lo));
            if a.candidates.is_empty() {
                let _ = writeln!(s, "first {new_word}: {}", point(b, hi));
            } else {
                let _ = writeln!(
                    s,
                    "first {new_word}: one of these {} (skipped points between could not be judged):",
                    a.candidates.len()
                );
                for &c in &a.candidates {
                    let _ = writeln!(s, "  {}", point(b, c));
                }
            }
            // The signature where it shows: at the first bad point, or at
            // the last bad one when looking for a fix.
            let at = match b.request.regress {
                Regress::Error => hi,
                Regress::Success => lo,
            };
            if let Some(sig) = b
                .probes
                .iter()
                .rev()
                .find(|p| p.point == at)
                .and_then(|p| p.signature.as_ref())
            {
                let _ = writeln!(
                    s,
                    "signature at {}: {} {}",
                    b.space.points[at].label(b.space.kind),
                    sig.id,
                    sig.text,
                );
                if sig.message != sig.text {
                    let _ = writeln!(s, "  as written: {}", sig.message);
                }
            }
        }
        _ => {
            let _ = writeln!(s, "{}", a.message);
        }
    }
}

/// The skipped and flaky points and the commands that reproduce the
/// answer; returns how many probes were skipped.
fn skips(s: &mut String, b: &Bisection, a: &Answer) -> usize {
    let skipped: Vec<&Probe> = b
        .probes
        .iter()
        .filter(|p| p.verdict == super::judge::ProbeVerdict::Skip)
        .collect();
    for p in &skipped {
        let _ = writeln!(
            s,
            "skipped {}: {}{}",
            point(b, p.point),
            p.why,
            match &p.signature {
                Some(_) => format!(" ({})", shown(p)),
                None => String::new(),
            }
        );
    }
    let other = skipped
        .iter()
        .filter(|p| p.why == super::judge::OTHER_SIGNATURE)
        .count();
    if other > 0 {
        let _ = writeln!(
            s,
            "warning: the failure changes inside the range: {other} probe(s) failed with another signature"
        );
    }
    for &f in &a.flaky {
        let _ = writeln!(
            s,
            "flaky: {} (its probes disagreed; counted as skipped)",
            point(b, f)
        );
    }
    for r in &a.reproduce {
        let _ = writeln!(s, "reproduce: {r}");
    }
    skipped.len()
}

/// Probes, points, seconds and builds reused.
fn tally(s: &mut String, b: &Bisection, skipped: usize) {
    let with_build: Vec<&Probe> = b.probes.iter().filter(|p| p.build.is_some()).collect();
    let reused = with_build
        .iter()
        .filter(|p| p.build.as_ref().is_some_and(|x| x.reused))
        .count();
    let secs: f64 = b.probes.iter().map(|p| p.secs).sum();
    let _ = writeln!(
        s,
        "{} probe{} ({} skipped) for {} points in {:.0} s{}",
        b.probes.len(),
        if b.probes.len() == 1 { "" } else { "s" },
        skipped,
        b.space.points.len(),
        secs,
        if with_build.is_empty() {
            String::new()
        } else {
            format!("; builds reused by {reused} of {} probes", with_build.len())
        }
    );
}

/// `bisect.md`.
pub fn markdown(b: &Bisection) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Bisection {}\n", b.id);
    let _ = writeln!(s, "{}\n", heading(b).replace('\n', "  \n"));
    if let Some(a) = &b.answer {
        let _ = writeln!(s, "**{}**\n", a.message);
        for r in &a.reproduce {
            let _ = writeln!(s, "    {r}");
        }
        if !a.reproduce.is_empty() {
            s.push('\n');
        }
    } else {
        let _ = writeln!(s, "*not finished*\n");
    }
    let _ = writeln!(
        s,
        "| # | point | verdict | status | why | signature | time | build | run |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let cell = |t: &str| t.replace('|', "\\|").replace('\n', " ");
    for p in &b.probes {
        let _ = writeln!(
            s,
            "| {} | {} | {}{} | {} | {} | {} | {:.1} s | {} | {}/cells/{} |",
            p.n,
            cell(&point(b, p.point)),
            p.verdict.as_str(),
            if p.retry { " (again)" } else { "" },
            p.status,
            cell(&p.why),
            cell(&shown(p)),
            p.secs,
            build_word(p),
            p.run,
            p.cell
        );
    }
    s
}

fn esc(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `bisect.html`: the same as the Markdown, one self-contained page.
pub fn html(b: &Bisection) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>bisection {}</title>\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:.2em .5em;text-align:left}}\
         .good{{background:#dfd}}.bad{{background:#fdd}}.skip{{background:#eee}}\
         code{{white-space:pre-wrap}}</style></head><body>\n<h1>Bisection {}</h1>\n<p>{}</p>\n",
        esc(&b.id),
        esc(&b.id),
        esc(&heading(b)).replace('\n', "<br>")
    );
    match &b.answer {
        Some(a) => {
            let _ = writeln!(s, "<p><strong>{}</strong></p>", esc(&a.message));
            for r in &a.reproduce {
                let _ = writeln!(s, "<p><code>{}</code></p>", esc(r));
            }
        }
        None => s.push_str("<p><em>not finished</em></p>\n"),
    }
    s.push_str("<table><tr><th>#</th><th>point</th><th>verdict</th><th>status</th><th>why</th><th>signature</th><th>time</th><th>build</th><th>run</th></tr>\n");
    for p in &b.probes {
        let report = format!("{}/report/index.html", p.run);
        let _ = writeln!(
            s,
            "<tr class=\"{v}\"><td>{}</td><td>{}</td><td>{v}{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{:.1} s</td><td>{}</td><td><a href=\"{}\">{}</a></td></tr>",
            p.n,
            esc(&point(b, p.point)),
            if p.retry { " (again)" } else { "" },
            esc(&p.status),
            esc(&p.why),
            esc(&shown(p)),
            p.secs,
            build_word(p),
            esc(&report),
            esc(&p.run),
            v = p.verdict.as_str(),
        );
    }
    s.push_str("</table>\n</body></html>\n");
    s
}

/// Writes `bisect.md` and `bisect.html`.
pub fn write_all(store: &BisectStore, b: &Bisection) -> Result<(), BisectError> {
    store.write("bisect.md", &markdown(b))?;
    store.write("bisect.html", &html(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bisect::judge::{ProbeVerdict, Shown, Target, TimeoutIs};
    use crate::bisect::space::{Point, Space};
    use crate::bisect::store::{Answer, ProbeBuild, Request};

    fn probe(n: usize, point: usize, verdict: ProbeVerdict, why: &str, sig: Option<&str>) -> Probe {
        Probe {
            n,
            point,
            value: format!("{:040x}", point + 1),
            subject: Some(format!("commit {}", point + 1)),
            verdict,
            status: "failed".into(),
            why: why.into(),
            signature: sig.map(Shown::plain),
            run: format!("runs/r{n}"),
            cell: "bookworm".into(),
            started: String::new(),
            secs: 1.0,
            build: Some(ProbeBuild {
                key: "all".into(),
                reused: n % 2 == 0,
                snapshot: String::new(),
            }),
            retry: false,
            reused: false,
        }
    }

    fn bisection() -> Bisection {
        Bisection {
            bisect_version: 1,
            id: "b".into(),
            rocmatrix_version: "0".into(),
            request: Request {
                matrix_file: "m.yaml".into(),
                matrix_hash: String::new(),
                only: vec![],
                good: "a".into(),
                bad: "b".into(),
                regress: Regress::Error,
                signature: None,
                timeout_is: TimeoutIs::Skip,
                retries: 0,
                jobs: 1,
                pins: vec![],
            },
            space: Space {
                kind: Kind::Git,
                name: "proj".into(),
                url: Some("/r".into()),
                first_parent: true,
                points: (0..8)
                    .map(|i| Point {
                        value: format!("{:040x}", i + 1),
                        subject: Some(format!("commit {}", i + 1)),
                    })
                    .collect(),
                left_out: vec![],
                packages: None,
            },
            target: Some(Target::Learned(vec![Shown::plain("sum: FAILED")])),
            probes: vec![
                probe(
                    1,
                    7,
                    ProbeVerdict::Bad,
                    "shows the signature",
                    Some("sum: FAILED"),
                ),
                probe(2, 0, ProbeVerdict::Good, "passed", None),
                probe(
                    3,
                    3,
                    ProbeVerdict::Skip,
                    crate::bisect::judge::OTHER_SIGNATURE,
                    Some("error: locked"),
                ),
                probe(
                    4,
                    4,
                    ProbeVerdict::Bad,
                    "shows the signature",
                    Some("sum: FAILED"),
                ),
                probe(5, 2, ProbeVerdict::Good, "passed", None),
            ],
            answer: Some(Answer {
                outcome: crate::bisect::store::AnswerOutcome::Found,
                message: String::new(),
                last_old: Some(2),
                first_new: Some(4),
                candidates: vec![3, 4],
                flaky: vec![],
                reproduce: vec!["rocmatrix repro x bookworm".into()],
            }),
            started: String::new(),
            finished: None,
        }
    }

    #[test]
    fn the_answer_lists_candidates_skips_and_how_to_reproduce() {
        let b = bisection();
        let store = BisectStore {
            dir: "/tmp/bisects/b".into(),
        };
        let t = text(&b, &store);
        let want = [
            "last good: 000000000000 commit 3\n",
            "first bad: one of these 2 (skipped points between could not be judged):\n  000000000000 commit 4\n  000000000000 commit 5\n",
            "skipped 000000000000 commit 4: fails with another signature (",
            "warning: the failure changes inside the range: 1 probe(s)",
            "reproduce: rocmatrix repro x bookworm\n",
            "5 probes (1 skipped) for 8 points in 5 s; builds reused by 2 of 5 probes\n",
        ];
        for w in want {
            assert!(t.contains(w), "missing {w:?} in:\n{t}");
        }
        let md = markdown(&b);
        assert!(md.contains("| 3 | 000000000000 commit 4 | skip |"), "{md}");
        let html = html(&b);
        assert!(html.contains("<tr class=\"skip\">"), "{html}");
        assert!(
            html.contains("href=\"runs/r1/report/index.html\""),
            "{html}"
        );
    }

    #[test]
    fn an_interrupted_bisection_says_how_to_resume() {
        let mut b = bisection();
        b.answer = None;
        let store = BisectStore {
            dir: "/tmp/bisects/b".into(),
        };
        assert_eq!(
            text(&b, &store),
            "interrupted after 5 probes: finish it with `rocmatrix bisect --resume /tmp/bisects/b`\n"
        );
    }

    #[test]
    fn log2_is_rounded_up() {
        assert_eq!(
            [1, 2, 3, 4, 5, 63, 64, 65].map(log2_ceil),
            [0, 1, 2, 2, 3, 6, 6, 7]
        );
    }
}
