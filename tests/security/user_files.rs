//! Files the user names (`--config`, `--dockerfile`, a `.memlint.toml` found by walking up):
//! a character device or a FIFO is refused at once with exit 2 and a diagnostic that says what
//! the path is, instead of filling memory (`/dev/zero`) or blocking for ever (a FIFO).

use crate::common;

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

/// Secrets in this process's environment, which the runs below inherit: none may reach their
/// output, whatever the repository links its files to.
const SECRET: &str = "memlint-test-secret-9f2c1e";

fn leaks_nothing(run: &Run) {
    let out = String::from_utf8_lossy(&run.out.stdout);
    let err = String::from_utf8_lossy(&run.out.stderr);
    assert!(!out.contains(SECRET) && !err.contains(SECRET), "{out}\n{err}");
    assert!(run.peak_kib < 256 * 1024, "{} KiB", run.peak_kib);
    assert!(run.elapsed < Duration::from_secs(30), "{:?}", run.elapsed);
}

#[test]
fn repository_files_linked_to_procfs_or_out_of_the_repository_are_refused_without_printing_them() {
    let dir = tempfile::tempdir().unwrap();
    let image = image(dir.path());
    let repo = dir.path().join("repo");
    let k8s = repo.join("deploy");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(&k8s).unwrap();
    // A file of the machine, outside the repository, that a link points at.
    let outside = dir.path().join("docker-config.json");
    std::fs::write(&outside, format!("{{\"auths\": {{\"x\": \"{SECRET}\"}}}}\n")).unwrap();
    let with_secret = |c: &mut Command| {
        c.current_dir(&repo).env("MEMLINT_TEST_TOKEN", SECRET);
    };

    for target in [Path::new("/proc/self/environ"), outside.as_path()] {
        let _ = std::fs::remove_file(repo.join(".memlint.toml"));
        std::os::unix::fs::symlink(target, repo.join(".memlint.toml")).unwrap();
        for command in ["lint", "inspect"] {
            let run = run_watched(&[command, "--no-cache", &image], with_secret, DEADLINE);
            leaks_nothing(&run);
            let err = run.err();
            assert_eq!(run.code(), Some(2), "{err}");
            assert!(err.contains(".memlint.toml"), "{err}");
        }
    }
    // The same file named on the command line is the user's choice, but a kernel file is not
    // a config: refused, not printed.
    let run = run_watched(
        &["lint", "--no-cache", "--config", "/proc/self/environ", &image],
        with_secret,
        DEADLINE,
    );
    leaks_nothing(&run);
    assert_eq!(run.code(), Some(2), "{}", run.err());
    assert!(run.err().contains("proc filesystem"), "{}", run.err());

    // The manifests of a --k8s folder.
    std::fs::remove_file(repo.join(".memlint.toml")).unwrap();
    for target in [Path::new("/proc/self/environ"), outside.as_path()] {
        let link = k8s.join("deployment.yaml");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(target, &link).unwrap();
        let run = run_watched(
            &[
                "lint",
                "--no-cache",
                "--k8s",
                "deploy",
                "--image",
                &format!("x={image}"),
            ],
            with_secret,
            DEADLINE,
        );
        leaks_nothing(&run);
        let err = run.err();
        assert_eq!(run.code(), Some(2), "{err}");
        assert!(err.contains("deployment.yaml"), "{err}");
        assert!(
            err.contains("leads out of") || err.contains("proc filesystem"),
            "{err}"
        );
    }

    // A link inside the repository is followed as before.
    std::fs::remove_file(k8s.join("deployment.yaml")).unwrap();
    std::fs::write(repo.join("memlint.toml"), "fail-on = \"never\"\n").unwrap();
    std::os::unix::fs::symlink("memlint.toml", repo.join(".memlint.toml")).unwrap();
    let run = run_watched(&["lint", "--no-cache", &image], with_secret, DEADLINE);
    assert_eq!(run.code(), Some(0), "{}", run.err());
}

#[test]
fn a_syntax_error_on_a_long_line_shows_a_short_window_and_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let image = image(dir.path());
    // Past column 65,535, with a secret-looking value far from the error on the same line.
    let line = format!(
        "ignore = [\"{SECRET}\", {}\"x\" \"y\"]\n",
        "\"a\", ".repeat(20_000)
    );
    let config = dir.path().join("memlint.toml");
    std::fs::write(&config, format!("fail-on = \"never\"\n{line}")).unwrap();
    let run = run_watched(
        &["lint", "--no-cache", "--config", config.to_str().unwrap(), &image],
        |_| {},
        DEADLINE,
    );
    leaks_nothing(&run);
    let err = run.err();
    assert_eq!(run.code(), Some(2), "{err}");
    assert!(err.lines().all(|l| l.chars().count() < 400), "{err}");
    assert!(err.contains(":2:"), "{err}");

    let manifest = dir.path().join("deployment.yaml");
    let value = "x".repeat(70_000);
    std::fs::write(
        &manifest,
        format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: a, labels: {{a: {SECRET}{value}: b: c}}}}\n"),
    )
    .unwrap();
    let run = run_watched(
        &[
            "lint",
            "--no-cache",
            "--k8s",
            manifest.to_str().unwrap(),
            "--image",
            &format!("x={image}"),
        ],
        |_| {},
        DEADLINE,
    );
    leaks_nothing(&run);
    let err = run.err();
    assert_eq!(run.code(), Some(2), "{err}");
    assert!(err.lines().all(|l| l.chars().count() < 400), "{err}");
}
