use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    keep_freed_buffers_off_the_heap();
    let cli = memlint::cli::Cli::parse();
    match memlint::commands::run(cli) {
        Ok(code) => code,
        Err(err) => {
            memlint::commands::eprint_diagnostic(&err);
            ExitCode::from(2)
        }
    }
}

/// memlint's own staircase, the one it lints images for: a layer's read allocates buffers of
/// 128 to 256 KiB on several threads (pipeline chunks, read buffers, ELF windows). glibc maps
/// such a block and unmaps it when freed, but then raises its mmap threshold past that size
/// (the dynamic threshold), so every later buffer comes from a thread's arena, where freed
/// memory stays: on the 10-layer benchmark image peak RSS went from 38 to 27 MiB (median of
/// 3) with the threshold fixed at glibc's own default of 128 KiB, for the same time
/// (bench/results.md). Setting it is what turns the dynamic threshold off (mallopt(3)).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_freed_buffers_off_the_heap() {
    // SAFETY: mallopt only changes a malloc parameter; it runs first thing in main, before any
    // other thread exists, and its result (0 when refused) changes nothing but memory use.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Other C libraries (musl, macOS) have no dynamic threshold to turn off.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_freed_buffers_off_the_heap() {}
