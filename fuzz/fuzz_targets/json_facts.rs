//! The fuzz target `json_facts`: what it feeds where is said on `memlint::fuzzing::json_facts`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| memlint::fuzzing::json_facts(data));
