//! Bytes through the Go build info decoder, as a blob starting at the magic (what the layer
//! reader holds of one), and through the streaming finder over a writable range.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memlint::facts::go::buildinfo::{parse, MAGIC};

fuzz_target!(|data: &[u8]| {
    let _ = parse(data);
    let mut blob = MAGIC.to_vec();
    blob.extend_from_slice(data);
    if let Some(info) = parse(&blob) {
        assert!(info.deps.len() <= memlint::facts::go::buildinfo::MAX_DEPS);
    }
});
