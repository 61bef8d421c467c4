//! Running memlint as an attacker's input would have it run: in a jail folder (its cwd and
//! TMPDIR, which must be empty afterwards), with a deadline, measuring its peak memory.
#![allow(dead_code)]

use super::error_text;
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// One run of memlint, watched.
pub struct Run {
    pub out: Output,
    /// Peak resident memory of the memlint process, in KiB.
    pub peak_kib: u64,
    pub elapsed: Duration,
}

impl Run {
    pub fn code(&self) -> Option<i32> {
        self.out.status.code()
    }
    pub fn err(&self) -> String {
        error_text(&self.out)
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.out.stdout).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}\n{}",
                String::from_utf8_lossy(&self.out.stdout),
                self.err()
            )
        })
    }
}

/// Runs memlint with `args`, the command set up further by `configure` (folder, environment,
/// standard input); fails on a panic, on an exit by a signal, and on a run longer than
/// `deadline` (the process is killed then). Measures the peak resident memory.
pub fn run_watched(args: &[&str], configure: impl FnOnce(&mut Command), deadline: Duration) -> Run {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let peak_file = std::env::temp_dir().join(format!(
        "memlint-peak-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let time = Path::new("/usr/bin/time");
    let mut cmd = if time.exists() {
        // GNU time reports the peak from wait4's rusage, exactly.
        let mut c = Command::new(time);
        c.arg("-f").arg("%M").arg("-o").arg(&peak_file);
        c.arg(env!("CARGO_BIN_EXE_memlint"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_memlint"))
    };
    cmd.args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    configure(&mut cmd);
    let start = Instant::now();
    let mut child = cmd.spawn().expect("memlint starts");
    // Drain the pipes on threads so a large output cannot block the child.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut v).ok();
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut v).ok();
        v
    });
    let mut polled_peak = 0u64;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        // Without GNU time, poll the high-water mark of the process (the child itself).
        if let Ok(s) = fs::read_to_string(format!("/proc/{}/status", child.id())) {
            if let Some(kib) = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                polled_peak = polled_peak.max(kib);
            }
        }
        if start.elapsed() > deadline {
            child.kill().ok();
            child.wait().ok();
            panic!("memlint {args:?} still running after {deadline:?}: a hang");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    let out = Output {
        status,
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
    };
    let peak_kib = fs::read_to_string(&peak_file)
        .ok()
        .and_then(|t| t.lines().last().and_then(|l| l.trim().parse::<u64>().ok()))
        .unwrap_or(polled_peak);
    fs::remove_file(&peak_file).ok();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "memlint {args:?} panicked: {stderr}"
    );
    let code = out.status.code();
    assert!(
        matches!(code, Some(0..=2)),
        "memlint {args:?} ended with {:?} (killed by a signal?): {stderr}",
        out.status
    );
    Run {
        out,
        peak_kib,
        elapsed,
    }
}

/// Runs memlint with `args` in a fresh folder (its cwd and TMPDIR), optionally feeding `stdin`;
/// fails on a panic, on a run longer than `deadline`, and when anything is left in the folder.
pub fn run_jailed(args: &[&str], env: &[(&str, &str)], stdin: Option<&Path>, deadline: Duration) -> Run {
    let jail = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let run = run_watched(
        args,
        |cmd| {
            cmd.current_dir(jail.path())
                .env("TMPDIR", jail.path())
                // Outside the jail: the cache is the one thing memlint may write.
                .env("MEMLINT_CACHE_DIR", cache.path())
                .env_remove("MEMLINT_LIMITS");
            for (k, v) in env {
                cmd.env(k, v);
            }
            if let Some(p) = stdin {
                cmd.stdin(fs::File::open(p).unwrap());
            }
        },
        deadline,
    );
    let left: Vec<PathBuf> = fs::read_dir(jail.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "memlint {args:?} wrote {left:?}");
    run
}
