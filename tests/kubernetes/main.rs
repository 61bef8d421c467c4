//! `lint --k8s`: manifests as people write them, and the pod's own memory.
//!
//! One test binary for the group (each binary links the whole crate); a module per file.

#[path = "../common/mod.rs"]
mod common;

mod k8s;
mod pod;
