//! A layer blob (plain, gzip or zstd tar) through the streaming reader, then merged twice onto
//! a tree (so that its whiteouts meet what it wrote), then walked and looked up.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memlint::tree::layer::{read_layer_in, Budget, GzipCrc};
use memlint::tree::{FileTree, Limits};

fuzz_target!(|data: &[u8]| {
    // Small limits keep each run fast; the limits themselves are part of what is tested.
    let limits = Limits {
        max_entries_per_layer: 4096,
        max_layer_bytes: 64 << 20,
        max_kept_bytes_per_layer: 8 << 20,
        max_kept_bytes_total: 8 << 20,
        max_metadata_bytes: 64 << 20,
        ..Limits::default()
    };
    let interests = memlint::facts::interests();
    // Both gzip paths: with the CRC-32, and without it as a digest-checked blob is read.
    let crc = if data.len() % 2 == 0 {
        GzipCrc::Check
    } else {
        GzipCrc::SkipDigestChecked
    };
    let Ok(diff) = read_layer_in(data, &interests, &limits, &Budget::new(), crc) else {
        return;
    };
    let mut tree = FileTree::with_limits(&limits).keeping(interests);
    let again = diff.clone();
    if tree.apply(diff, 0).is_ok() {
        let _ = tree.apply(again, 1);
    }
    let _ = tree.counts();
    let ids: Vec<_> = tree.walk().take(2000).collect();
    for id in ids {
        let path = tree.path_of(id);
        let _ = tree.lookup(&path);
        let _ = tree.lookup_nofollow(&path);
        let _ = tree.removed_by(&path);
        // Only where an interest asked: any other path is a caller's bug, caught in debug.
        if tree.keeps(&path) {
            let _ = tree.contents(&path);
        }
    }
});
