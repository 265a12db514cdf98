//! Fuzzing without a nightly toolchain: proptest mutates a seed corpus kept
//! in the repository (`tests/fixtures/fuzz/{matrix,junit}`) and feeds the
//! matrix front end (YAML, templates, validation, expansion, rendering) and
//! the JUnit reader. Nothing may panic, hang or grow without bound; a
//! matrix error must name the file. `ROCMATRIX_FUZZ_CASES` sets the number
//! of cases per target (CI runs the default; raise it to fuzz longer). The
//! cargo-fuzz targets in `fuzz/` take the same corpus.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use rocmatrix::matrix_file::Spec;
use rocmatrix::plan::Plan;
use rocmatrix::results::junit::{self, Case, Limits, Visitor};

fn cases() -> u32 {
    std::env::var("ROCMATRIX_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5000)
}

fn corpus(kind: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz")
        .join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no seeds in {}", dir.display());
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

/// One edit of a seed: replace a range by a token, or by random bytes.
#[derive(Debug, Clone)]
enum Edit {
    Token(usize, usize, usize),
    Bytes(usize, usize, Vec<u8>),
}

fn edits(tokens: usize) -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec(
        prop_oneof![
            3 => (any::<usize>(), 0usize..8, 0..tokens).prop_map(|(a, n, t)| Edit::Token(a, n, t)),
            1 => (any::<usize>(), 0usize..8, prop::collection::vec(any::<u8>(), 0..6))
                .prop_map(|(a, n, b)| Edit::Bytes(a, n, b)),
        ],
        1..6,
    )
}

fn apply(seed: &[u8], edits: &[Edit], tokens: &[&str]) -> Vec<u8> {
    let mut doc = seed.to_vec();
    for e in edits {
        let (at, n, with): (usize, usize, Vec<u8>) = match e {
            Edit::Token(a, n, t) => (*a, *n, tokens[*t].as_bytes().to_vec()),
            Edit::Bytes(a, n, b) => (*a, *n, b.clone()),
        };
        let at = at % (doc.len() + 1);
        let end = (at + n).min(doc.len());
        doc.splice(at..end, with);
    }
    doc
}

const YAML_TOKENS: &[&str] = &[
    "&a ",
    "*a",
    "&b [*a, *a, *a]",
    "[",
    "]",
    "{",
    "}",
    ": ",
    "\n",
    "\n  ",
    "\n    - ",
    "- ",
    ", ",
    "include",
    "exclude",
    "exlcude",
    "matrix",
    "steps",
    "vars",
    "\u{feff}",
    "'",
    "\"",
    "#",
    "{{ matrix.x }}",
    "{{ vars.v }}",
    "{{",
    "}}",
    "{%",
    "%}",
    "{% for i in range(99) %}",
    "{% endfor %}",
    "{% set s = 'ab' ~ 'cd' %}",
    "~",
    "|upper",
    "|replace('a','bb')",
    "!!str ",
    "null",
    "6.10",
    "x: [1, 2]",
    "- {x: 1, y: 2}",
    "gfx: [gfx900]",
    "---\n",
    "...\n",
];

const XML_TOKENS: &[&str] = &[
    "<testsuite name=\"n\">",
    "</testsuite>",
    "<testcase name=\"t\" time=\"1\">",
    "</testcase>",
    "<testcase/>",
    "<failure message=\"m\">",
    "</failure>",
    "<error/>",
    "<skipped/>",
    "<system-out>",
    "</system-out>",
    "<![CDATA[",
    "]]>",
    "<!--",
    "-->",
    "&amp;",
    "&lt;",
    "&x;",
    "&#0;",
    "&#x110000;",
    "<?xml version=\"1.0\"?>",
    "<!DOCTYPE t [<!ENTITY x \"y\">]>",
    "\"",
    "'",
    "<",
    ">",
    "/>",
    "=",
    " a=\"b\"",
    "<flakyFailure/>",
    "time=\"1,5s\"",
    "\u{0}",
    "\u{fffd}",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    /// The matrix front end on mutated seeds: Ok, or an error naming the file.
    #[test]
    fn fuzz_matrix_front_end(seed in 0usize..64, e in edits(YAML_TOKENS.len())) {
        let seeds = corpus("matrix");
        let doc = apply(&seeds[seed % seeds.len()], &e, YAML_TOKENS);
        let path = Path::new("fuzz.yaml");
        let Ok(text) = String::from_utf8(doc) else { return Ok(()) };
        match Spec::parse(path, &text) {
            Ok(spec) => {
                if let Err(e) = Plan::build(&spec, 512) {
                    prop_assert!(e.to_string().starts_with("fuzz.yaml"), "{e}");
                }
            }
            Err(e) => prop_assert!(e.to_string().starts_with("fuzz.yaml"), "{e}"),
        }
    }

    /// The JUnit reader on mutated seeds: never panics, keeps texts bounded.
    #[test]
    fn fuzz_junit_reader(seed in 0usize..64, e in edits(XML_TOKENS.len())) {
        let seeds = corpus("junit");
        let doc = apply(&seeds[seed % seeds.len()], &e, XML_TOKENS);
        let mut c = Bound(0);
        let _ = junit::read(&doc[..], Limits::default(), &mut c);
    }
}

struct Bound(usize);
impl Visitor for Bound {
    fn case(&mut self, suite: &str, case: &mut Case) {
        let l = Limits::default();
        assert!(suite.len() <= 1 << 20);
        assert!(case.message.len() <= l.message);
        assert!(case.text.text.len() <= l.text);
        assert!(case.system_out.text.len() <= l.output);
        self.0 += 1;
    }
}

/// The seeds themselves are valid: a fuzz run starts from real inputs.
#[test]
fn fuzz_seeds_are_valid() {
    for (i, s) in corpus("matrix").iter().enumerate() {
        let text = String::from_utf8(s.clone()).unwrap();
        let spec =
            Spec::parse(Path::new("seed.yaml"), &text).unwrap_or_else(|e| panic!("seed {i}: {e}"));
        Plan::build(&spec, 4096).unwrap_or_else(|e| panic!("seed {i}: {e}"));
    }
    for s in corpus("junit") {
        let mut c = Bound(0);
        let r = junit::read(&s[..], Limits::default(), &mut c);
        assert!(r.problem.is_none(), "{:?}", r.problem);
        assert!(c.0 > 0);
    }
}
