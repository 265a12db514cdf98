//! A triage in words: the line beside each signature — `started at
//! <commit> "<subject>" (range <good>..<bad>, N probes)`, the axis value,
//! the package list, the fix range of a gone one, or `could not triage: …`
//! — and the whole triage for the terminal. Everything here reads
//! [`Triage`] and its items only.

use std::fmt::Write as _;

use super::store::{At, Change, Item, Over, Search, State, Triage};
use crate::bisect::judge::Regress;

fn short(v: &str) -> String {
    if v.len() == 40 && v.bytes().all(|b| b.is_ascii_hexdigit()) {
        crate::digest::short(v).to_string()
    } else {
        v.to_string()
    }
}

/// A point: `1a2b3c4d5e6f "subject"` for a commit, `llvm=22` for a value.
fn point(s: &Search, a: &At) -> String {
    match (s.over, &a.subject) {
        (Over::Axis, _) => format!("{}={}", s.name, a.value),
        (Over::Packages, _) => a.value.clone(),
        (_, Some(sub)) => format!("{} \"{sub}\"", short(&a.value)),
        (_, None) => short(&a.value),
    }
}

fn probes(n: usize) -> String {
    if n == 1 {
        "1 probe".into()
    } else {
        format!("{n} probes")
    }
}

/// One search's answer in words.
fn found(change: Change, s: &Search) -> String {
    let Some(first) = &s.first else {
        return s.message.clone();
    };
    let (old, new) = match s.regress {
        Regress::Error => (&s.good, &s.bad),
        Regress::Success => (&s.bad, &s.good),
    };
    let range = match s.over {
        Over::Axis => format!("{}={}..{}", s.name, old, new),
        Over::Packages => format!(
            "{} groups of moved packages, the baseline's versions to the run's",
            s.points.saturating_sub(1)
        ),
        _ => format!("{} {}..{}", s.name, short(old), short(new)),
    };
    let verb = match (change, s.regress, s.over) {
        (Change::Gone, _, Over::Packages) => "fixed with",
        (Change::New, Regress::Error, Over::Packages) => "started with",
        (Change::Gone, _, _) => "fixed at",
        (Change::New, Regress::Error, _) => "started at",
        (Change::New, Regress::Success, _) => "gone from",
    };
    let at = if s.candidates.len() > 1 {
        format!(
            "one of {} (skipped points between could not be judged)",
            s.candidates
                .iter()
                .map(|c| point(s, c))
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        point(s, first)
    };
    let mut line = format!("{verb} {at} (range {range}, {}", probes(s.probes));
    if s.reused {
        line.push_str(", answered by an earlier bisection");
    } else if s.probes_now < s.probes {
        let _ = write!(line, ", {} of them earlier", s.probes - s.probes_now);
    }
    line.push(')');
    if s.over == Over::Axis && s.regress == Regress::Success {
        if let Some(last) = &s.last {
            let _ = write!(line, "; last failing {}", point(s, last));
        }
    }
    line
}

/// The line beside a signature.
pub fn line(item: &Item, could_not: Option<&str>) -> String {
    let of = |state: State| item.searches.iter().filter(move |s| s.state == state);
    if let Some(s) = of(State::Found).next() {
        return found(item.change, s);
    }
    if let Some(s) = of(State::Unfinished).next() {
        return format!(
            "triage not finished: {} {}: {}",
            match s.over {
                Over::Axis => "axis",
                Over::Source => "source",
                Over::Packages => "packages",
            },
            s.name,
            s.message
        );
    }
    if let Some(s) = of(State::Listed).next() {
        let shown: Vec<&str> = s.packages.iter().take(6).map(String::as_str).collect();
        let more = s.packages.len().saturating_sub(shown.len());
        // Listed after probes: the baseline's end could not be installed.
        let why = if s.probes > 0 {
            "the baseline's versions are no longer served"
        } else {
            "the old versions were not probed"
        };
        return format!(
            "only packages moved: {}{} ({why}: the range is this list)",
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
    }
    let mut why: Vec<String> = could_not.map(String::from).into_iter().collect();
    for s in &item.searches {
        let what = match s.over {
            Over::Axis => format!("axis {}", s.name),
            Over::Packages => "packages".to_string(),
            Over::Source => format!("source {}", s.name),
        };
        why.push(match s.state {
            State::NotHere => format!("not in {what}: {}", s.message),
            _ if s.message.starts_with(&what) => s.message.clone(),
            _ => format!("{what}: {}", s.message),
        });
    }
    if why.is_empty() {
        why.push("nothing to search".into());
    }
    format!("could not triage: {}", why.join("; "))
}

/// The triage for the terminal.
pub fn text(t: &Triage) -> String {
    let mut s = String::new();
    let new = t.items.iter().filter(|i| i.change == Change::New).count();
    let gone = t.items.len() - new;
    let _ = writeln!(
        s,
        "triage against {}: {new} new signature(s), {gone} gone, {} in {:.0} s",
        t.baseline.as_deref().unwrap_or("-"),
        probes(
            t.items
                .iter()
                .flat_map(|i| &i.searches)
                .map(|x| x.probes_now)
                .sum()
        ),
        t.secs
    );
    for m in &t.moved {
        let _ = writeln!(s, "  moved: {}", m.text());
        for sub in m.subjects.iter().take(3) {
            let _ = writeln!(s, "    {sub}");
        }
        if let Some(e) = &m.error {
            let _ = writeln!(s, "    {e}");
        }
    }
    for i in &t.items {
        let _ = writeln!(
            s,
            "{} {} \"{}\" (cell {}): {}",
            match i.change {
                Change::New => "new",
                Change::Gone => "gone",
            },
            i.signature.id,
            i.signature.message,
            i.cell,
            i.line
        );
    }
    for u in &t.unfinished {
        let _ = writeln!(s, "not finished: {u}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bisect::judge::Shown;

    fn search(over: Over, regress: Regress, state: State) -> Search {
        Search {
            over,
            name: if over == Over::Axis { "llvm" } else { "gadget" }.into(),
            good: "a".repeat(40),
            bad: "b".repeat(40),
            regress,
            points: 37,
            state,
            first: Some(At {
                value: "c".repeat(40),
                subject: Some("commit 41".into()),
            }),
            last: None,
            candidates: vec![],
            probes: 7,
            probes_now: 7,
            bisection: None,
            reused: false,
            message: "m".into(),
            packages: vec![],
        }
    }

    fn item(change: Change, searches: Vec<Search>) -> Item {
        Item {
            change,
            signature: Shown::plain("sum: FAILED"),
            cell: "c".into(),
            baseline: None,
            searches,
            state: State::Found,
            line: String::new(),
        }
    }

    #[test]
    fn lines_name_the_commit_its_subject_the_range_and_the_probes() {
        let s = search(Over::Source, Regress::Error, State::Found);
        let l = line(&item(Change::New, vec![s.clone()]), None);
        assert_eq!(
            l,
            "started at cccccccccccc \"commit 41\" (range gadget aaaaaaaaaaaa..bbbbbbbbbbbb, 7 probes)"
        );
        let mut fix = s.clone();
        fix.regress = Regress::Success;
        let l = line(&item(Change::Gone, vec![fix]), None);
        assert!(
            l.starts_with(
                "fixed at cccccccccccc \"commit 41\" (range gadget bbbbbbbbbbbb..aaaaaaaaaaaa"
            ),
            "{l}"
        );
        let mut ax = search(Over::Axis, Regress::Success, State::Found);
        ax.good = "22".into();
        ax.bad = "15".into();
        ax.first = Some(At {
            value: "22".into(),
            subject: None,
        });
        ax.last = Some(At {
            value: "21".into(),
            subject: None,
        });
        ax.probes = 4;
        ax.probes_now = 4;
        let l = line(&item(Change::New, vec![ax]), None);
        assert_eq!(
            l,
            "gone from llvm=22 (range llvm=15..22, 4 probes); last failing llvm=21"
        );
        let mut no = search(Over::Source, Regress::Error, State::CouldNot);
        no.message = "source gadget: the baseline's commit is gone".into();
        let l = line(&item(Change::New, vec![no]), None);
        assert_eq!(
            l,
            "could not triage: source gadget: the baseline's commit is gone"
        );
        let l = line(
            &item(Change::New, vec![]),
            Some("the baseline has no cell x"),
        );
        assert_eq!(l, "could not triage: the baseline has no cell x");
    }
}
