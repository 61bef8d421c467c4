//! memlint: lint built container images for memory pitfalls.
//!
//! Data flows one way: [`reference`] → [`sources`] (where the bytes come from) → [`tree`]
//! (layers streamed into one merged file tree) → [`image`] → [`facts`] → [`rules`] →
//! [`judge`] (severity overrides, ignores, the per-rule cap) → [`report`] → [`commands`]
//! (flags, environment, printing). `tests/project/layering.rs` holds the table of which module may use
//! which.
//!
//! Visibility is the crate's boundary: every item is `pub(crate)` unless another crate needs it,
//! so the compiler reports what nothing uses. `pub` is only what these use: the binary
//! (`src/main.rs`: [`cli::Cli`], [`commands::run`], [`commands::eprint_diagnostic`], the
//! [`error::Error`] they return), `tests/runtimes/gomem.rs` (`facts::go::read_gomemlimit` and
//! its `MemLimit`, checked against the Go runtime), and the fuzz targets in `fuzz/`
//! ([`fuzzing`], one function per target).

pub(crate) mod arch;
pub(crate) mod baseline;
pub(crate) mod cache;
pub mod cli;
pub mod commands;
pub(crate) mod digest;
pub(crate) mod dockerfile;
pub(crate) mod duration;
pub(crate) mod elf;
pub mod error;
pub mod facts;
pub(crate) mod finding;
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod image;
pub(crate) mod judge;
pub(crate) mod k8s;
pub(crate) mod locate;
pub(crate) mod platform;
pub(crate) mod reference;
pub(crate) mod report;
pub(crate) mod rules;
pub(crate) mod settings;
pub(crate) mod shell;
pub(crate) mod sources;
pub(crate) mod tree;
pub(crate) mod units;
pub(crate) mod untrusted;
pub(crate) mod user_file;
pub(crate) mod version;
pub(crate) mod warnings;
