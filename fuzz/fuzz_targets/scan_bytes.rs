//! Any bytes, as a file: ELF, plain or compressed bundles, code objects or
//! garbage. Must return Ok or Err, never panic, loop or blow up memory.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use rocmatrix::bundle::{compressed, elf, plain, scan_bytes};

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz");
    if let Ok(Some(report)) = scan_bytes(path, data) {
        let _ = report.targets();
    }
    // Each layer on its own too, so the fuzzer reaches it without the framing.
    let _ = plain::parse(data);
    if let Ok(Some(h)) = compressed::header(data) {
        let _ = compressed::decompress(data, &h);
    }
    if let Ok(h) = elf::header(data) {
        let _ = elf::code_object_target(&h);
    }
    let _ = elf::sections(data);
});
