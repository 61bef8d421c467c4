//! Facts per runtime on images built from real packages: libc and loader, Java, Go, Python, .NET settings, servers (Redis, JVM launchers, PHP) and their workers.
//!
//! One test binary for the group (each binary links the whole crate); a module per file.

#[path = "../common/mod.rs"]
mod common;

mod facts;
mod gomem;
mod java;
mod python_go;
mod servers;
mod settings;
mod worker_count;
mod workers_php;
