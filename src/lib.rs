//! memlint: lint built container images for memory pitfalls.
//!
//! Data flows one way: [`reference`] → [`sources`] (where the bytes come from) → [`tree`]
//! (layers streamed into one merged file tree) → [`image`] → [`facts`] → [`rules`] →
//! [`judge`] (severity overrides, ignores, the per-rule cap) → [`report`] → [`commands`]
//! (flags, environment, printing). `tests/project/layering.rs` holds the table of which module may use
//! which.

pub mod arch;
pub mod baseline;
pub mod cache;
pub mod cli;
pub mod commands;
pub mod digest;
pub mod dockerfile;
pub mod duration;
pub mod elf;
pub mod error;
pub mod facts;
pub mod finding;
pub mod image;
pub mod judge;
pub mod k8s;
pub mod locate;
pub mod platform;
pub mod reference;
pub mod report;
pub mod rules;
pub mod settings;
pub mod shell;
pub mod sources;
pub mod tree;
pub mod units;
pub mod untrusted;
pub mod user_file;
pub mod version;
pub mod warnings;
