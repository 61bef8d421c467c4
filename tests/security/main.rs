//! Hostile input: images, registries, reports, untrusted text, files the user names, and the budgets that bound them.
//!
//! One test binary for the group (each binary links the whole crate); a module per file.

#[path = "../common/mod.rs"]
mod common;

mod budgets;
mod hostile;
mod hostile_output;
mod hostile_registry;
mod hostile_report;
mod untrusted_text;
mod user_files;
