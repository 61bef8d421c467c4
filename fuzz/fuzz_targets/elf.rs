//! A file's bytes through the ELF head parser and the streaming scanner, fed in chunks of a size
//! the input chooses, as the layer reader feeds it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memlint::elf::{ElfHead, ElfScanner, HEAD_LEN};

fuzz_target!(|data: &[u8]| {
    let head = &data[..data.len().min(HEAD_LEN)];
    let Some(parsed) = ElfHead::parse(head) else {
        return;
    };
    // Every marker the facts declare, as a lint's read looks for them.
    let markers = memlint::facts::interests().elf_markers;
    let mut scanner = ElfScanner::new(head, &parsed, &markers);
    // Chunks of 64 bytes to 16 KiB: markers and the dynamic section cut at every kind of place.
    let step = 64 + data.last().copied().unwrap_or(0) as usize * 64;
    for chunk in data.chunks(step) {
        scanner.feed(chunk);
    }
    let _ = scanner.finish();
});
