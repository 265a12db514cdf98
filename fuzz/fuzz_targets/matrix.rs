//! Any bytes as a matrix file: parse, validate, expand and render. Must
//! return Ok or an error naming the file, never panic, loop or blow up
//! memory. Seeds: tests/fixtures/fuzz/matrix (`cargo fuzz run matrix
//! fuzz/corpus/matrix ../tests/fixtures/fuzz/matrix`).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use rocmatrix::plan::Plan;
use rocmatrix::matrix_file::Spec;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz.yaml");
    match Spec::parse(path, text) {
        Ok(spec) => {
            if let Err(e) = Plan::build(&spec, 512) {
                assert!(e.to_string().starts_with("fuzz.yaml"), "{e}");
            }
        }
        Err(e) => assert!(e.to_string().starts_with("fuzz.yaml"), "{e}"),
    }
});
