//! Images built by scripts/build-image.sh from real Debian (and npm) packages.

use crate::common;

use common::*;

#[test]
fn demo_image_from_debian_packages() {
    let r = build_image("demo");
    let v = inspect_json(&[&r]);
    assert_eq!(v["image"]["platform"]["architecture"], "amd64");
    let history: Vec<&str> = v["image"]["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["history"].as_str().unwrap_or(""))
        .collect();
    assert!(history.iter().any(|h| h.contains("libjemalloc2")), "{history:?}");
    assert!(v["image"]["config"]["env"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e == "LD_PRELOAD=/usr/lib/aarch64-linux-gnu/libjemalloc.so.2"));
    // The real files, reached through Debian 12's /lib -> usr/lib link.
    let listing = tree_listing(&r);
    for want in [
        "/lib symlink usr/lib",
        "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 file ",
        "/usr/lib/x86_64-linux-gnu/libc.so.6 file ",
        "/etc/ld.so.cache file ",
    ] {
        assert!(listing.iter().any(|l| l == want), "{want} not in the tree");
    }
    assert!(v["files"]["elf"].as_u64().unwrap() > 10);
}
