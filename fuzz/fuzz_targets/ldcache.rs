//! The fuzz target `ldcache`: what it feeds where is said on `memlint::fuzzing::ldcache`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| memlint::fuzzing::ldcache(data));
