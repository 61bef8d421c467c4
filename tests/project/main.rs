//! memlint in CI and in releases, and the one-way layering of its modules checked on the source.
//!
//! One test binary for the group (each binary links the whole crate); a module per file.

#[path = "../common/mod.rs"]
mod common;

mod ci;
mod layering;
mod release;
