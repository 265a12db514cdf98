//! Any bytes as a JUnit file: the streaming reader must never panic, and
//! what it keeps per test case stays within its limits. Seeds:
//! tests/fixtures/fuzz/junit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocmatrix::results::junit::{self, Case, Limits, Visitor};

struct Check;

impl Visitor for Check {
    fn case(&mut self, _suite: &str, case: Case) {
        let l = Limits::default();
        assert!(case.message.len() <= l.message);
        assert!(case.text.text.len() <= l.text);
        assert!(case.system_out.text.len() <= l.output);
        assert!(case.system_err.text.len() <= l.output);
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = junit::read(data, Limits::default(), &mut Check);
});
