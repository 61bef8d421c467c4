//! Files the user names (`--config`, `--dockerfile`, a `.memlint.toml` found by walking up):
//! a character device or a FIFO is refused at once with exit 2 and a diagnostic that says what
//! the path is, instead of filling memory (`/dev/zero`) or blocking for ever (a FIFO).

mod common;

use common::measure::*;
use common::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Far more than a refusal takes, far less than a hang.
const DEADLINE: Duration = Duration::from_secs(10);

fn image(dir: &Path) -> String {
    let layout = dir.join("image");
    let spec =
        ImageSpec::new("amd64").layer(LayerSpec::new(Comp::Gzip).file("etc/os-release", b"ID=debian\n"));
    write_oci_dir(&layout, &spec, "latest");
    format!("oci-dir:{}:latest", layout.display())
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success());
}

fn refused(run: &Run, path: &Path, kind: &str) {
    let err = run.err();
    assert_eq!(run.code(), Some(2), "{err}");
    assert!(
        err.contains(&path.display().to_string()) && err.contains(kind),
        "{err}"
    );
    assert!(err.contains("name a regular file"), "{err}");
    assert!(run.peak_kib < 256 * 1024, "{} KiB", run.peak_kib);
}

#[test]
fn a_device_or_fifo_as_config_or_dockerfile_exits_2_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let image = image(dir.path());
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let zero = Path::new("/dev/zero");
    for (flag, path, kind) in [
        ("--config", zero, "a character device"),
        ("--config", fifo.as_path(), "a FIFO"),
        ("--dockerfile", zero, "a character device"),
        ("--dockerfile", fifo.as_path(), "a FIFO"),
        ("--config", dir.path(), "a folder"),
    ] {
        let p = path.to_str().unwrap();
        let run = run_watched(&["lint", "--no-cache", flag, p, &image], |_| {}, DEADLINE);
        refused(&run, path, kind);
    }
}

#[test]
fn a_fifo_named_memlint_toml_in_the_current_folder_exits_2_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let image = image(dir.path());
    let cwd = dir.path().join("repo");
    std::fs::create_dir(&cwd).unwrap();
    let fifo = cwd.join(".memlint.toml");
    mkfifo(&fifo);
    for command in ["lint", "inspect"] {
        let run = run_watched(
            &[command, "--no-cache", &image],
            |c| {
                c.current_dir(&cwd);
            },
            DEADLINE,
        );
        refused(&run, &fifo, "a FIFO");
    }
    // `hook run` reads it as well.
    let run = run_watched(
        &["hook", "run"],
        |c| {
            c.current_dir(&cwd);
        },
        DEADLINE,
    );
    refused(&run, &fifo, "a FIFO");
}

#[test]
fn a_config_over_the_bound_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let image = image(dir.path());
    let big = dir.path().join("big.toml");
    // A valid TOML comment, 5 MiB long.
    let mut text = vec![b'#'; 5 << 20];
    text.push(b'\n');
    std::fs::write(&big, text).unwrap();
    let run = run_watched(
        &["lint", "--no-cache", "--config", big.to_str().unwrap(), &image],
        |_| {},
        DEADLINE,
    );
    let err = run.err();
    assert_eq!(run.code(), Some(2), "{err}");
    assert!(err.contains("larger than 4 MiB"), "{err}");
}

#[test]
fn password_stdin_is_bounded() {
    let run = run_watched(
        &[
            "lint",
            "--no-cache",
            "--username",
            "u",
            "--password-stdin",
            "registry:127.0.0.1:1/x:y",
        ],
        |c| {
            c.stdin(std::fs::File::open("/dev/zero").unwrap());
        },
        DEADLINE,
    );
    let err = run.err();
    assert_eq!(run.code(), Some(2), "{err}");
    assert!(err.contains("more than 64 KiB"), "{err}");
}
