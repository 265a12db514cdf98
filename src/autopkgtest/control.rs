//! `debian/tests/control` read as autopkgtest reads it (Deb822 paragraphs,
//! field names case-insensitive, `#` comments, continuation lines), every
//! stanza with the line it starts on.
//!
//! The reader is lenient per stanza: a line that is neither a field nor a
//! continuation, a stanza with neither `Tests` nor `Test-Command` (or both),
//! an empty `Tests` or a `test-name` where it cannot be, each make *that*
//! stanza [`Stanza::problem`] with its file and line, and the others are
//! still read. Debian's `autopkgtest` stops the whole run at the first such
//! stanza ("erroneous package"); the adapter gives the bad stanza's tests a
//! failing verdict of their own and lets autopkgtest run the rest.

/// The fields autopkgtest knows (`_debian_check_unknown_fields` in its
/// `lib/testdesc.py`, 5.28 to 6.0); autopkgtest itself skips a test with
/// another one ("unknown field X"), so rocmatrix leaves that verdict to it.
pub const KNOWN_FIELDS: [&str; 8] = [
    "Tests",
    "Test-Command",
    "Restrictions",
    "Features",
    "Depends",
    "Tests-Directory",
    "Classes",
    "Architecture",
];

/// One paragraph of the control file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stanza {
    /// 1-based line of its first field.
    pub line: usize,
    /// 1-based line just past its last line.
    pub end: usize,
    /// Fields in order, names as written, values with continuation lines
    /// joined by `\n`.
    pub fields: Vec<(String, String)>,
    /// Why autopkgtest would refuse the whole control file over this
    /// stanza, in words that name `file:line`.
    pub problem: Option<String>,
}

impl Stanza {
    /// A field's value by autopkgtest's case-insensitive name.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// `Tests:` names (comma or space separated).
    pub fn test_files(&self) -> Vec<String> {
        self.get("Tests")
            .map(|t| split_list(t).into_iter().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// `Tests-Directory:`, else `debian/tests`.
    pub fn tests_directory(&self) -> &str {
        self.get("Tests-Directory")
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .unwrap_or("debian/tests")
    }

    /// `Restrictions:` entries.
    pub fn restrictions(&self) -> Vec<&str> {
        self.get("Restrictions").map(split_list).unwrap_or_default()
    }

    /// The `test-name=` feature's value, if given.
    pub fn test_name_feature(&self) -> Option<&str> {
        self.get("Features")
            .map(split_list)
            .unwrap_or_default()
            .into_iter()
            .find_map(|f| f.strip_prefix("test-name="))
    }
}

/// autopkgtest's list splitting: commas and white space both separate.
pub fn split_list(value: &str) -> Vec<&str> {
    value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Reads `text` (the file `file`, for messages) into stanzas.
pub fn parse(file: &str, text: &str) -> Vec<Stanza> {
    let mut stanzas = Vec::new();
    let mut cur: Option<Stanza> = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        if raw.starts_with('#') {
            continue;
        }
        if raw.trim().is_empty() {
            if let Some(s) = cur.take() {
                stanzas.push(s);
            }
            continue;
        }
        let s = cur.get_or_insert_with(|| Stanza {
            line: n,
            end: n + 1,
            fields: Vec::new(),
            problem: None,
        });
        s.end = n + 1;
        if raw.starts_with([' ', '\t']) {
            match s.fields.last_mut() {
                Some((_, v)) => {
                    v.push('\n');
                    v.push_str(raw.trim());
                }
                None => set_problem(s, file, n, "a continuation line before any field"),
            }
            continue;
        }
        match raw.split_once(':') {
            Some((name, value)) if is_field_name(name) => {
                s.fields.push((name.to_string(), value.trim().to_string()));
            }
            _ => set_problem(
                s,
                file,
                n,
                &format!("`{}` is not a field (expected `Name: value`)", raw.trim()),
            ),
        }
    }
    stanzas.extend(cur);
    for s in &mut stanzas {
        check(s, file);
    }
    stanzas
}

/// A Deb822 field name: printable ASCII without spaces or a colon, not
/// starting with `-` or `#`.
fn is_field_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(['-', '#'])
        && name.bytes().all(|b| b.is_ascii_graphic() && b != b':')
}

fn set_problem(s: &mut Stanza, file: &str, line: usize, what: &str) {
    if s.problem.is_none() {
        s.problem = Some(format!("{file}:{line}: {what}"));
    }
}

/// The rules autopkgtest enforces with `InvalidControl` (which stop its
/// whole run), in its own words after the position.
fn check(s: &mut Stanza, file: &str) {
    let line = s.line;
    let tests = s.get("Tests").map(split_list);
    let command = s.get("Test-Command");
    let names: Vec<&str> = split_list(s.get("Features").unwrap_or(""))
        .into_iter()
        .filter(|f| *f == "test-name" || f.starts_with("test-name="))
        .collect();
    let what = match (&tests, command) {
        (None, None) => Some("missing \"Tests\" or \"Test-Command\" field"),
        (Some(_), Some(_)) => Some("Only one of \"Tests\" or \"Test-Command\" may be given"),
        (Some(t), None) if t.is_empty() => Some("\"Tests\" field is empty"),
        (Some(_), None) if !names.is_empty() => Some("test-name feature incompatible with Tests"),
        _ if names.len() > 1 => Some("only one test-name feature allowed"),
        _ if names.first() == Some(&"test-name") => Some("test-name feature with no argument"),
        _ => None,
    };
    if let Some(what) = what {
        set_problem(s, file, line, what);
    }
}

/// The names autopkgtest gives a file's tests, stanza by stanza: each
/// `Tests:` entry, or a `Test-Command`'s `test-name=` feature, else
/// `command1`, `command2`… counting the unnamed commands. A stanza too
/// broken to tell gets `control:LINE`.
pub fn test_names(stanzas: &[Stanza]) -> Vec<Vec<String>> {
    let mut commands = 0;
    stanzas
        .iter()
        .map(|s| {
            let files = s.test_files();
            if !files.is_empty() && s.get("Test-Command").is_none() {
                return files;
            }
            if s.get("Test-Command").is_some() && s.get("Tests").is_none() {
                if let Some(n) = s.test_name_feature().filter(|n| !n.is_empty()) {
                    return vec![n.to_string()];
                }
                if s.problem.is_none() {
                    commands += 1;
                    return vec![format!("command{commands}")];
                }
            }
            vec![format!("control:{}", s.line)]
        })
        .collect()
}

/// The control file again with only the stanzas `keep` says yes to, each
/// as it was written (comments dropped), so autopkgtest numbers and names
/// the kept tests as it would have in the whole file.
pub fn filtered(text: &str, stanzas: &[Stanza], keep: &[bool]) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for (s, _) in stanzas.iter().zip(keep).filter(|(_, k)| **k) {
        for l in &lines[s.line - 1..(s.end - 1).min(lines.len())] {
            if !l.starts_with('#') {
                out.push_str(l);
                out.push('\n');
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "debian/tests/control";

    #[test]
    fn reads_stanzas_with_lines_and_continuations() {
        let text = "# comment\nTests: a, b\nDepends: foo,\n bar\n\nTest-Command: run-it\nFeatures: test-name=named\nRestrictions: allow-stderr skippable\n\n\nTest-Command: x\n";
        let s = parse(FILE, text);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].line, 2);
        assert_eq!(s[0].test_files(), ["a", "b"]);
        assert_eq!(s[0].get("depends"), Some("foo,\nbar"));
        assert_eq!(s[1].line, 6);
        assert_eq!(s[1].restrictions(), ["allow-stderr", "skippable"]);
        assert!(s.iter().all(|s| s.problem.is_none()));
        assert_eq!(
            test_names(&s),
            [vec!["a", "b"], vec!["named"], vec!["command1"]]
        );
    }

    #[test]
    fn a_bad_stanza_names_its_line_and_spares_the_others() {
        let text = "Tests: good\n\nTests fails-to-parse\nDepends:\n\nDepends: x\n\nTests: t\nTest-Command: c\n\nTests: ok\n";
        let s = parse(FILE, text);
        assert_eq!(s.len(), 5);
        assert_eq!(s[0].problem, None);
        assert_eq!(
            s[1].problem.as_deref(),
            Some("debian/tests/control:3: `Tests fails-to-parse` is not a field (expected `Name: value`)")
        );
        assert_eq!(
            s[2].problem.as_deref(),
            Some("debian/tests/control:6: missing \"Tests\" or \"Test-Command\" field")
        );
        assert_eq!(
            s[3].problem.as_deref(),
            Some("debian/tests/control:8: Only one of \"Tests\" or \"Test-Command\" may be given")
        );
        assert_eq!(s[4].problem, None);
        let keep: Vec<bool> = s.iter().map(|s| s.problem.is_none()).collect();
        assert_eq!(filtered(text, &s, &keep), "Tests: good\n\nTests: ok\n\n");
        assert_eq!(test_names(&s)[1], ["control:3"]);
    }

    #[test]
    fn test_name_rules() {
        let s = parse(
            FILE,
            "Test-Command: a\nFeatures: test-name\n\nTests: x\nFeatures: test-name=y\n",
        );
        assert!(s[0]
            .problem
            .as_deref()
            .unwrap()
            .ends_with("test-name feature with no argument"));
        assert!(s[1]
            .problem
            .as_deref()
            .unwrap()
            .ends_with("incompatible with Tests"));
    }
}
