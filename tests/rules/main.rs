//! Rules as users meet them: every rule on its fixture image, rules dated by release (`--rules-version`), the baseline.
//!
//! One test binary for the group (each binary links the whole crate); a module per file.

#[path = "../common/mod.rs"]
mod common;

mod baseline;
mod rules;
mod rules_version;
