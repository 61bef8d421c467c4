//! The fuzz target `tar_merge`: what it feeds where is said on `memlint::fuzzing::tar_merge`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| memlint::fuzzing::tar_merge(data));
