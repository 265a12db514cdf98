//! Keeps `docs/architecture.md` true to the code.
//!
//! - every `src/…` path (and other repository path) the doc names exists, and
//!   every top-level module declared in `src/lib.rs` is named in it;
//! - the floor rule: no module imports (`crate::<module>`, grouped
//!   `use crate::{a, b::c}` included) from a floor above its own. The floors
//!   live in [`FLOORS`] here, and the doc's marked floor table must say the
//!   same, so neither can drift from the other;
//! - no loops between modules: no two top-level modules import each other,
//!   directly or through others (a loop on one floor is as hard to read as
//!   an import that climbs);
//! - the blocking rule: no `block_in_place` in the code of `src/`;
//! - library functions return typed errors, not `Result<_, String>`;
//! - nothing in the repository points at the design file the project
//!   started from, which lives outside it.
//!
//! The Rust sources are read as text with comments, strings and character
//! literals blanked out (line numbers kept), which is enough for paths,
//! `fn` signatures and names.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Floors, bottom (0) to top: a module may import from its own floor and
/// the floors below it. `docs/architecture.md` has the same table.
const FLOORS: &[(&str, u32)] = &[
    ("budget", 0),
    ("digest", 0),
    ("dirs", 0),
    ("safe_read", 0),
    ("junit", 0),
    ("yaml", 0),
    ("matrix_file", 1),
    ("plan", 2),
    ("store", 3),
    ("outcome", 3),
    ("timeline", 3),
    ("affected", 3),
    ("engine", 4),
    ("image", 4),
    ("source", 4),
    ("gpu", 4),
    ("host", 4),
    ("bundle", 4),
    ("debugger", 4),
    ("test_suite", 4),
    ("autopkgtest", 4),
    ("stop", 4),
    ("prepare", 5),
    ("step", 5),
    ("build_stage", 5),
    ("run", 5),
    ("results", 6),
    ("analysis", 6),
    ("merged_junit", 6),
    ("reproduce", 6),
    ("report", 7),
    ("cluster", 7),
    ("bisect", 7),
    ("triage", 7),
    ("trial", 7),
    ("history", 7),
    ("expect", 7),
    ("finish", 7),
    ("serve", 7),
    ("cli", 8),
    ("error", 8),
];

const DOC: &str = "docs/architecture.md";
/// This file: it names the design file to forbid it.
const SELF: &str = "tests/it/architecture_tests.rs";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn floor_of(module: &str) -> Option<u32> {
    FLOORS.iter().find(|(m, _)| *m == module).map(|(_, f)| *f)
}

/// Repository-relative paths of the files under `dir` (recursively) that
/// `keep` accepts, sorted. `.git`, `target` and `.rocmatrix` are skipped.
fn walk(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy();
        if path.is_dir() {
            if name != ".git" && name != "target" && name != ".rocmatrix" {
                walk(&path, keep, out);
            }
        } else if keep(&path) {
            let rel = path.strip_prefix(root()).unwrap();
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// Every `.rs` file under `src/`, repository-relative.
fn src_files() -> Vec<String> {
    let mut out = Vec::new();
    walk(
        &root().join("src"),
        &|p| p.extension().is_some_and(|e| e == "rs"),
        &mut out,
    );
    out
}

/// The top-level module a file of `src/` belongs to; `None` for the crate
/// root and the binary.
fn module_of(rel: &str) -> Option<&str> {
    let rest = rel.strip_prefix("src/")?;
    match rest.split_once('/') {
        Some((dir, _)) => Some(dir),
        None if rest == "lib.rs" || rest == "main.rs" => None,
        None => rest.strip_suffix(".rs"),
    }
}

/// The modules `src/lib.rs` declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn lib_modules() -> Vec<String> {
    let lib = code(&read("src/lib.rs"));
    lib.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l
                .strip_prefix("pub(crate) ")
                .or_else(|| l.strip_prefix("pub "))
                .unwrap_or(l);
            let name = l.strip_prefix("mod ")?.strip_suffix(';')?.trim();
            Some(name.to_string())
        })
        .collect()
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Rust source with comments, string literals and character literals
/// blanked (newlines kept, so byte offsets map to the same lines).
fn code(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let prev_ident = i > 0 && is_ident(chars[i - 1]);
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
        } else if !prev_ident && (c == 'r' || (c == 'b' && next == Some('r'))) && {
            // A raw string: r"…", r#"…"#, br"…".
            let mut j = i + if c == 'b' { 2 } else { 1 };
            while chars.get(j) == Some(&'#') {
                j += 1;
            }
            chars.get(j) == Some(&'"')
        } {
            let start = i + if c == 'b' { 2 } else { 1 };
            let mut j = start;
            while chars[j] == '#' {
                j += 1;
            }
            let hashes = j - start;
            out.push('"');
            for _ in i + 1..=j {
                out.push(' ');
            }
            i = j + 1;
            while i < chars.len() {
                if chars[i] == '"' && (0..hashes).all(|k| chars.get(i + 1 + k) == Some(&'#')) {
                    out.push('"');
                    for _ in 0..hashes {
                        out.push(' ');
                    }
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
                if i < chars.len() {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{1F}') or a lifetime ('a).
            let end = if next == Some('\\') {
                (i + 2..chars.len()).find(|&j| chars[j] == '\'')
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    out.push('\'');
                    for _ in i + 1..end {
                        out.push(' ');
                    }
                    out.push('\'');
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// 1-based line of byte offset `at`.
fn line_at(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

/// Offsets of `word` in `text` where it stands as a whole word.
fn word_offsets<'a>(text: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    text.match_indices(word)
        .map(|(at, _)| at)
        .filter(move |&at| {
            let before = text[..at].chars().next_back();
            let after = text[at + word.len()..].chars().next();
            !before.is_some_and(|c| is_ident(c) || c == '$') && !after.is_some_and(is_ident)
        })
}

fn ident_at(text: &str, at: usize) -> &str {
    let rest = &text[at..];
    let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
    &rest[..end]
}

fn skip_ws(text: &str, mut at: usize) -> usize {
    while text[at..].starts_with(char::is_whitespace) {
        at += text[at..].chars().next().unwrap().len_utf8();
    }
    at
}

/// Every top-level module a piece of code names through `crate::`, with the
/// byte offset of the name: `crate::run::X`, `use crate::{a, b::c}` (each
/// item of a group, on whatever line it stands).
fn crate_uses(code: &str) -> Vec<(usize, String)> {
    let mut uses = Vec::new();
    for at in word_offsets(code, "crate") {
        let mut p = skip_ws(code, at + "crate".len());
        if !code[p..].starts_with("::") {
            continue;
        }
        p = skip_ws(code, p + 2);
        if code[p..].starts_with('{') {
            let mut depth = 0;
            let mut item_start = true;
            for (off, c) in code[p..].char_indices() {
                match c {
                    '{' => {
                        depth += 1;
                        item_start = depth == 1;
                    }
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => item_start = true,
                    c if item_start && depth == 1 && is_ident(c) => {
                        let name = ident_at(code, p + off);
                        if name != "self" {
                            uses.push((p + off, name.to_string()));
                        }
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident_at(code, p);
            if !name.is_empty() {
                uses.push((p, name.to_string()));
            }
        }
    }
    uses
}

/// `(start, end)` byte ranges of the items marked `#[cfg(test)]`.
fn test_regions(code: &str) -> Vec<(usize, usize)> {
    let mut regions = Vec::new();
    for (at, _) in code.match_indices("#[cfg(test)]") {
        let Some(open) = code[at..].find(['{', ';']).map(|o| at + o) else {
            continue;
        };
        if code[open..].starts_with(';') {
            continue;
        }
        let mut depth = 0;
        for (off, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        regions.push((at, open + off));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    regions
}

/// The return type of every `fn` in `code`, with the offset of its `fn`.
fn return_types(code: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for at in word_offsets(code, "fn") {
        let name_at = skip_ws(code, at + 2);
        if name_at == at + 2 || ident_at(code, name_at).is_empty() {
            continue; // `fn(` pointer types
        }
        let Some(open) = code[name_at..].find('(').map(|o| name_at + o) else {
            continue;
        };
        let mut depth = 0;
        let mut close = None;
        for (off, c) in code[open..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(open + off);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(close) = close else { continue };
        let p = skip_ws(code, close + 1);
        if !code[p..].starts_with("->") {
            continue;
        }
        let mut ty = String::new();
        let mut depth = 0i32;
        let rest = &code[p + 2..];
        let mut chars = rest.char_indices().peekable();
        while let Some((off, c)) = chars.next() {
            if depth == 0
                && (c == '{' || c == ';' || (rest[off..].starts_with("where") && !ty.is_empty()))
            {
                break;
            }
            match c {
                '-' if chars.peek().is_some_and(|&(_, n)| n == '>') => {
                    chars.next();
                    ty.push_str("->");
                    continue;
                }
                '<' | '(' | '[' => depth += 1,
                '>' | ')' | ']' => depth -= 1,
                _ => {}
            }
            if !c.is_whitespace() {
                ty.push(c);
            }
        }
        found.push((at, ty));
    }
    found
}

/// Whether a return type (whitespace removed) is `Result<_, String>`.
fn is_string_result(ty: &str) -> bool {
    let inner = ["Result<", "std::result::Result<", "core::result::Result<"]
        .iter()
        .find_map(|p| ty.strip_prefix(p))
        .and_then(|t| t.strip_suffix('>'));
    let Some(inner) = inner else { return false };
    let mut depth = 0;
    let mut last = 0;
    for (off, c) in inner.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' => depth -= 1,
            ',' if depth == 0 => last = off + 1,
            _ => {}
        }
    }
    last > 0
        && matches!(
            &inner[last..],
            "String" | "std::string::String" | "alloc::string::String"
        )
}

/// Markdown with its fenced code blocks blanked (lines kept).
fn prose(markdown: &str) -> String {
    let mut fenced = false;
    let mut out = String::with_capacity(markdown.len());
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// Backticked spans of `text`.
fn backticked(text: &str) -> Vec<(usize, &str)> {
    let mut spans = Vec::new();
    let mut rest = text;
    let mut base = 0;
    while let Some(open) = rest.find('`') {
        let Some(close) = rest[open + 1..].find('`') else {
            break;
        };
        let span = &rest[open + 1..open + 1 + close];
        spans.push((base + open + 1, span));
        base += open + close + 2;
        rest = &rest[open + close + 2..];
    }
    spans
}

fn fail_with(what: &str, problems: &[String]) {
    assert!(problems.is_empty(), "{what}:\n  {}", problems.join("\n  "));
}

#[test]
fn architecture_doc_names_only_paths_that_exist() {
    let doc = prose(&read(DOC));
    let prefixes = [
        "src/",
        "docs/",
        "tests/",
        "reports/",
        "containers/",
        "matrix/",
        "scripts/",
        "benches/",
    ];
    let mut problems = Vec::new();
    for (at, span) in backticked(&doc) {
        let is_path =
            prefixes.iter().any(|p| span.starts_with(p)) && !span.contains(['<', '*', ' ', '…']);
        if is_path && !root().join(span).exists() {
            problems.push(format!(
                "{DOC}:{}: `{span}` does not exist",
                line_at(&doc, at)
            ));
        }
    }
    fail_with(
        "docs/architecture.md names paths that do not exist",
        &problems,
    );
}

#[test]
fn architecture_doc_names_every_top_level_module() {
    let doc = read(DOC);
    let mut problems = Vec::new();
    for m in lib_modules() {
        let dir = format!("src/{m}/");
        let file = format!("src/{m}.rs");
        let path = if root().join(&dir).is_dir() {
            dir
        } else {
            file
        };
        if !doc.contains(&format!("`{path}`")) {
            problems.push(format!("`{path}` (declared in src/lib.rs)"));
        }
    }
    fail_with(
        "docs/architecture.md does not name these modules",
        &problems,
    );
}

#[test]
fn architecture_every_module_has_a_floor() {
    let declared: BTreeSet<String> = lib_modules().into_iter().collect();
    let floored: BTreeSet<String> = FLOORS.iter().map(|(m, _)| m.to_string()).collect();
    assert_eq!(
        declared, floored,
        "src/lib.rs's modules and the floors of {SELF} (and {DOC}) differ: give a new module a floor"
    );
}

#[test]
fn architecture_doc_floor_table_matches_the_test() {
    let doc = read(DOC);
    let start = doc
        .find("<!-- floors")
        .expect("docs/architecture.md has no `<!-- floors … -->` marker");
    let end = doc[start..]
        .find("<!-- /floors -->")
        .map(|e| start + e)
        .expect("docs/architecture.md has no `<!-- /floors -->` marker");
    let mut rows = Vec::new();
    for line in doc[start..end].lines() {
        let cols: Vec<&str> = line.split('|').map(str::trim).collect();
        // | floor | module | job | may use floors |
        if cols.len() < 5 {
            continue;
        }
        let Ok(floor) = cols[1].parse::<u32>() else {
            continue;
        };
        let path = cols[2].trim_matches('`');
        let module = path
            .strip_prefix("src/")
            .map(|m| m.trim_end_matches('/').trim_end_matches(".rs"))
            .unwrap_or(path);
        let may_use = if floor == 0 {
            "0".to_string()
        } else {
            format!("0–{floor}")
        };
        assert_eq!(
            cols[4], may_use,
            "{DOC}: `{path}` on floor {floor} may use floors {may_use}"
        );
        rows.push((module.to_string(), floor));
    }
    let want: Vec<(String, u32)> = FLOORS.iter().map(|(m, f)| (m.to_string(), *f)).collect();
    assert_eq!(
        rows, want,
        "{DOC}'s floor table and FLOORS in {SELF} differ"
    );
}

#[test]
fn architecture_no_module_imports_a_higher_floor() {
    let mut problems = Vec::new();
    for rel in src_files() {
        let Some(module) = module_of(&rel) else {
            continue;
        };
        let own =
            floor_of(module).unwrap_or_else(|| panic!("{rel}: module `{module}` has no floor"));
        let text = code(&read(&rel));
        for (at, used) in crate_uses(&text) {
            if used == module {
                continue;
            }
            match floor_of(&used) {
                Some(f) if f > own => problems.push(format!(
                    "{rel}:{}: `{module}` (floor {own}) uses `crate::{used}` (floor {f})",
                    line_at(&text, at)
                )),
                Some(_) => {}
                None => problems.push(format!(
                    "{rel}:{}: `crate::{used}` is not a module with a floor",
                    line_at(&text, at)
                )),
            }
        }
    }
    fail_with("imports from a higher floor", &problems);
}

/// Modules beside each other on one floor where the first never imports the
/// second: the second stands on the first (the results model and its
/// reading know nothing of the analysis made from them; one step's
/// primitives know nothing of the cells and builds that use them).
const ONE_WAY: &[(&str, &str)] = &[
    ("prepare", "run"),
    ("step", "run"),
    ("step", "build_stage"),
    ("build_stage", "run"),
    ("results", "analysis"),
    ("report", "finish"),
    ("history", "finish"),
    ("finish", "cluster"),
    ("finish", "triage"),
    ("finish", "bisect"),
    ("finish", "trial"),
];

#[test]
fn architecture_one_way_between_neighbours() {
    let mut problems = Vec::new();
    for rel in src_files() {
        let Some(module) = module_of(&rel) else {
            continue;
        };
        let text = code(&read(&rel));
        for (at, used) in crate_uses(&text) {
            if ONE_WAY.contains(&(module, used.as_str())) {
                problems.push(format!(
                    "{rel}:{}: `{module}` uses `crate::{used}`, which stands on it",
                    line_at(&text, at)
                ));
            }
        }
    }
    for (lower, upper) in ONE_WAY {
        assert_eq!(
            floor_of(lower),
            floor_of(upper),
            "{SELF}: ONE_WAY pairs `{lower}` and `{upper}` of different floors"
        );
    }
    fail_with("imports against a one-way pair", &problems);
}

/// Every module's imports of other top-level modules, with the first place
/// each is imported from (`file:line`).
fn module_graph() -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>
{
    let mut graph: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>> =
        std::collections::BTreeMap::new();
    for rel in src_files() {
        let Some(module) = module_of(&rel) else {
            continue;
        };
        let text = code(&read(&rel));
        let uses = graph.entry(module.to_string()).or_default();
        for (at, used) in crate_uses(&text) {
            if used != module {
                uses.entry(used)
                    .or_insert_with(|| format!("{rel}:{}", line_at(&text, at)));
            }
        }
    }
    graph
}

/// The loops of `graph`: each as the modules around it, from its smallest
/// name, and where each step of it is imported.
fn loops(
    graph: &std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
) -> Vec<String> {
    let mut found: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut out = Vec::new();
    // A depth-first walk from every module; a path that comes back to its
    // start is a loop (kept once, rotated to start at its smallest name).
    fn walk(
        graph: &std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
        path: &mut Vec<String>,
        found: &mut BTreeSet<Vec<String>>,
    ) {
        let last = path.last().cloned().unwrap_or_default();
        for next in graph.get(&last).map(|m| m.keys()).into_iter().flatten() {
            if *next == path[0] {
                let min = path
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, m)| *m)
                    .map(|(i, _)| i)
                    .unwrap_or(0);
                let mut cycle = path[min..].to_vec();
                cycle.extend_from_slice(&path[..min]);
                found.insert(cycle);
            } else if !path.contains(next) && path.len() < 8 {
                path.push(next.clone());
                walk(graph, path, found);
                path.pop();
            }
        }
    }
    for start in graph.keys() {
        walk(graph, &mut vec![start.clone()], &mut found);
    }
    for cycle in found {
        let steps: Vec<String> = cycle
            .iter()
            .zip(cycle.iter().cycle().skip(1))
            .map(|(a, b)| format!("{a} → {b} ({})", graph[a][b]))
            .collect();
        out.push(steps.join(", "));
    }
    out
}

#[test]
fn architecture_no_loops_between_modules() {
    fail_with("loops between modules", &loops(&module_graph()));
}

#[test]
fn architecture_a_loop_between_two_modules_is_found() {
    let mut graph = module_graph();
    // A deliberate one: the results room importing the reports.
    graph
        .entry("results".into())
        .or_default()
        .insert("report".into(), "src/results/deliberate.rs:1".into());
    let found = loops(&graph);
    assert!(
        found
            .iter()
            .any(|l| l.contains("results → report (src/results/deliberate.rs:1)")),
        "{found:?}"
    );
}

#[test]
fn architecture_no_block_in_place() {
    let mut problems = Vec::new();
    for rel in src_files() {
        let text = code(&read(&rel));
        for at in word_offsets(&text, "block_in_place") {
            problems.push(format!("{rel}:{}", line_at(&text, at)));
        }
    }
    fail_with(
        "block_in_place in src/ (blocking work goes through spawn_blocking)",
        &problems,
    );
}

#[test]
fn architecture_no_library_function_returns_a_string_error() {
    let mut problems = Vec::new();
    for rel in src_files() {
        if rel == "src/main.rs" {
            continue;
        }
        let text = code(&read(&rel));
        let tests = test_regions(&text);
        for (at, ty) in return_types(&text) {
            if tests.iter().any(|&(s, e)| s <= at && at <= e) {
                continue;
            }
            if is_string_result(&ty) {
                problems.push(format!("{rel}:{}: -> {ty}", line_at(&text, at)));
            }
        }
    }
    fail_with("functions returning Result<_, String>", &problems);
}

/// Repository files that mention the design file, except this one.
fn design_mentions() -> Vec<String> {
    let mut files = Vec::new();
    walk(&root(), &|_| true, &mut files);
    files
        .into_iter()
        .filter(|rel| rel != SELF)
        .filter(|rel| {
            let bytes = std::fs::read(root().join(rel)).unwrap_or_default();
            bytes.windows(9).any(|w| w == b"DESIGN.md")
        })
        .collect()
}

#[test]
fn architecture_nothing_points_at_the_design_file() {
    let found: Vec<String> = design_mentions()
        .into_iter()
        .filter(|f| f != "src/error.rs")
        .collect();
    fail_with(
        "these files mention DESIGN.md, which is not in the repository (point at docs/architecture.md)",
        &found,
    );
}

#[test]
fn architecture_error_rs_does_not_point_at_the_design_file() {
    let found = design_mentions();
    fail_with(
        "these files mention DESIGN.md, which is not in the repository (point at docs/architecture.md)",
        &found,
    );
}

#[test]
fn architecture_source_scanner_sees_what_the_checks_need() {
    let src = r##"
use crate::{a, b::{c, d}, self};
use crate::{
    e::f,
    g,
};
// crate::commented
let s = "crate::in_string";
let r = r#"crate::raw"#;
let c = '{'; let l: &'static str = x; crate :: h ::i();
pub fn one(x: &str) -> Result<u8, String> { todo!() }
fn two(
    x: &str,
) -> std::result::Result<Vec<(u8, u8)>, String>
where T: Sized { todo!() }
fn three() -> Result<String, MyError>;
fn four(f: fn(u8) -> Result<u8, String>) -> Option<u8> { None }
"##;
    let text = code(src);
    let uses: Vec<(usize, String)> = crate_uses(&text)
        .into_iter()
        .map(|(at, m)| (line_at(&text, at), m))
        .collect();
    let want = [(2, "a"), (2, "b"), (4, "e"), (5, "g"), (10, "h")];
    assert_eq!(
        uses,
        want.map(|(l, m)| (l, m.to_string())).to_vec(),
        "{text}"
    );
    let strings: Vec<usize> = return_types(&text)
        .into_iter()
        .filter(|(_, ty)| is_string_result(ty))
        .map(|(at, _)| line_at(&text, at))
        .collect();
    assert_eq!(strings, [11, 12]);
}

/// The names of the run store's files, as code would spell them to build a
/// path: `"plan.json"`, or the end of a format string (`/cell.json"`).
const STORE_FILES: [&str; 10] = [
    "plan.json",
    "run.json",
    "lock.json",
    "journal.jsonl",
    "cell.json",
    "results.json",
    "bisect.json",
    "build.json",
    "triage.json",
    "try.json",
];

#[test]
fn architecture_only_the_store_names_run_store_files() {
    let mut problems = Vec::new();
    for rel in src_files() {
        if rel.starts_with("src/store/") {
            continue;
        }
        let text = read(&rel);
        for (n, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("//") {
                continue;
            }
            for name in STORE_FILES {
                if line.contains(&format!("\"{name}\"")) || line.contains(&format!("/{name}\"")) {
                    problems.push(format!("{rel}:{}: {}", n + 1, trimmed));
                }
            }
        }
    }
    fail_with(
        "run-store file names outside src/store/ (use store::layout)",
        &problems,
    );
}

/// The most lines a room (a folder of `src/`) may have: a room that grows
/// past it is split into rooms a newcomer can name.
const ROOM_LINES: usize = 3_500;
/// The most lines one file of `src/` may have.
const FILE_LINES: usize = 900;

fn line_count(rel: &str) -> usize {
    read(rel).lines().count()
}

#[test]
fn architecture_rooms_and_files_stay_small() {
    let mut rooms: std::collections::BTreeMap<String, usize> = Default::default();
    let mut problems = Vec::new();
    for rel in src_files() {
        let lines = line_count(&rel);
        if let Some((dir, _)) = rel.strip_prefix("src/").and_then(|r| r.split_once('/')) {
            *rooms.entry(format!("src/{dir}/")).or_default() += lines;
        }
        if lines > FILE_LINES {
            problems.push(format!("{rel}: {lines} lines (at most {FILE_LINES})"));
        }
    }
    for (room, lines) in rooms {
        if lines > ROOM_LINES {
            problems.push(format!("{room}: {lines} lines (at most {ROOM_LINES})"));
        }
    }
    fail_with("rooms or files too large (split them)", &problems);
}

#[test]
fn architecture_no_allow_too_many_arguments() {
    let mut problems = Vec::new();
    for rel in src_files() {
        let text = code(&read(&rel));
        for at in word_offsets(&text, "too_many_arguments") {
            problems.push(format!("{rel}:{}", line_at(&text, at)));
        }
    }
    fail_with(
        "allow(clippy::too_many_arguments) in src/ (pass a struct of the arguments)",
        &problems,
    );
}

/// The most lines a function of `src/` may have, from its `fn` line to its
/// closing brace.
const FUNCTION_LINES: usize = 100;

/// The name of the function a line of blanked source declares: `fn NAME`
/// at its start, after any of `pub(…)`, `const`, `async`, `unsafe`,
/// `extern "…"`, `default`.
fn declared_fn(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    loop {
        let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        let after = &rest[end..];
        match &rest[..end] {
            "pub" | "const" | "async" | "unsafe" | "extern" | "default" => {
                rest = after.trim_start();
                if let Some(r) = rest.strip_prefix('(') {
                    rest = r.split_once(')')?.1.trim_start();
                } else if let Some(r) = rest.strip_prefix('"') {
                    rest = r.split_once('"')?.1.trim_start();
                }
            }
            "fn" if after.starts_with(char::is_whitespace) => {
                let name = after.trim_start();
                let n = name.find(|c: char| !is_ident(c)).unwrap_or(name.len());
                return (n > 0).then(|| &name[..n]);
            }
            _ => return None,
        }
    }
}

/// The functions with a body in blanked source `code` (see [`code`], so
/// braces in strings, characters and comments do not count): each one's
/// name, the line of its `fn` and its length in lines, to its closing
/// brace.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    let mut line_start = 0;
    for line in code.split('\n') {
        let at = line_start;
        line_start += line.len() + 1;
        let Some(name) = declared_fn(line) else {
            continue;
        };
        // The body's `{`, past the parameters and the return type (whose
        // `[u8; 4]` is no `;` of a declaration).
        let from = name.as_ptr() as usize - code.as_ptr() as usize + name.len();
        let mut depth = 0i32;
        let mut open = None;
        for (k, b) in code[from..].bytes().enumerate() {
            match b {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => break,
                b'{' if depth == 0 => {
                    open = Some(from + k);
                    break;
                }
                _ => {}
            }
        }
        let Some(open) = open else {
            continue;
        };
        let mut braces = 0;
        let close = code[open..].bytes().position(|b| {
            match b {
                b'{' => braces += 1,
                b'}' => braces -= 1,
                _ => {}
            }
            braces == 0
        });
        let first = line_at(code, at);
        let last = close.map_or(line_at(code, code.len()), |k| line_at(code, open + k));
        out.push((name.to_string(), first, last - first + 1));
    }
    out
}

#[test]
fn architecture_no_function_over_100_lines() {
    let fixture = code(
        r###"
fn short() -> &'static str {
    r#"}}}"#
}
pub(crate) async fn braces_in_literals(x: [u8; 2]) -> char {
    let _ = "{"; // }
    '{'
}
fn declared(f: fn(u8) -> u8);
"###,
    );
    assert_eq!(
        functions(&fixture),
        [
            ("short".to_string(), 2, 3),
            ("braces_in_literals".to_string(), 5, 4)
        ],
        "the scanner itself"
    );
    let mut problems = Vec::new();
    for rel in src_files() {
        for (name, line, lines) in functions(&code(&read(&rel))) {
            if lines > FUNCTION_LINES {
                problems.push(format!(
                    "{rel}:{line}: fn {name}: {lines} lines (at most {FUNCTION_LINES})"
                ));
            }
        }
    }
    fail_with(
        "functions too long (split them into named steps)",
        &problems,
    );
}
