//! The fuzz target `go_buildinfo`: what it feeds where is said on `memlint::fuzzing::go_buildinfo`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| memlint::fuzzing::go_buildinfo(data));
