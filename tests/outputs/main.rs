//! Reports: every format, the contracts review can see (diagnostic codes, help, JSON), what `inspect` says to people.
//!
//! One test binary for the group (each binary links the whole crate); a module per file.

#[path = "../common/mod.rs"]
mod common;

mod contracts;
mod formats;
mod html;
mod inspect_text;
mod merge_equal;
