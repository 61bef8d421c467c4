//! The fuzz target `elf`: what it feeds where is said on `memlint::fuzzing::elf`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| memlint::fuzzing::elf(data));
