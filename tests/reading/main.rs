//! Reading images: every source form (registry, archives, OCI layouts, Docker/Podman stores, rootfs), the layer cache, round trips through skopeo and umoci, and other projects' fixture images.
//!
//! One test binary for the group (each binary links the whole crate); a module per file.

#[path = "../common/mod.rs"]
mod common;

mod cache;
mod cache_faithful;
mod fixture_table;
mod local_store;
mod peer2;
mod peer3;
mod peer_fixtures;
mod reader;
mod real_images;
mod registry;
mod roundtrip;
