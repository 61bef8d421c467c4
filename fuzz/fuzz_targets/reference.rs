//! The fuzz target `reference`: what it feeds where is said on `memlint::fuzzing::reference`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| memlint::fuzzing::reference(data));
