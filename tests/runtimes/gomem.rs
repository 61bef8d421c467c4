//! gomemlimit-malformed against the real Go runtime: a program built here with Debian's Go
//! (testdata/recipes/gomem/server, the program the gomem-* images run) is started with each
//! GOMEMLIMIT value of a table, and memlint's reading of the value must be the runtime's:
//! refused values die with "malformed GOMEMLIMIT", accepted ones print the limit in bytes.
//! Then the rule on images built from that program (scripts/recipes/gomem.sh).

use crate::common;

use common::*;
use memlint::facts::go::{read_gomemlimit, MemLimit};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds testdata/recipes/gomem/server with the host's Go (Debian's golang-go) into the
/// test's temporary folder, offline.
fn probe() -> PathBuf {
    require_tool("go");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/recipes/gomem/server");
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gomem");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = tmp.join("server");
    let status = Command::new("go")
        .args(["build", "-trimpath", "-buildvcs=false", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(&src)
        .env("CGO_ENABLED", "0")
        .env("GOPROXY", "off")
        .env("GOFLAGS", "-mod=mod")
        .env("GOCACHE", tmp.join("cache"))
        .env("GOPATH", tmp.join("gopath"))
        .status()
        .expect("go runs");
    assert!(status.success(), "go build failed");
    out
}

/// What the runtime did with `value`: the limit it printed, or `Err(stderr)` when it died.
fn run_with(probe: &Path, value: &str) -> Result<i64, String> {
    let out = Command::new(probe)
        .env_clear()
        .env("GOMEMLIMIT", value)
        .output()
        .expect("the probe runs");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().parse().unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn memlint_reads_gomemlimit_as_the_go_runtime_does() {
    let probe = probe();
    let table = [
        "512Mi",
        "400m",
        "1G",
        "1Gi",
        "512MB",
        "512mib",
        " 512MiB",
        "512MiB ",
        "512 MiB",
        "512MiB",
        "1GiB",
        "1KiB",
        "2TiB",
        "off",
        "OFF",
        "",
        "0",
        "-0",
        "-1",
        "+1",
        "-KiB",
        "KiB",
        "B",
        "123",
        "123B",
        "1.5GiB",
        "0x100",
        "1_000",
        "1PiB",
        "\"512MiB\"",
        "9223372036854775807",
        "9223372036854775808",
        "99999999999999999999",
        "8388607TiB",
        "8388608TiB",
        "9007199254740992KiB",
    ];
    for value in table {
        let runtime = run_with(&probe, value);
        match (read_gomemlimit(value), &runtime) {
            (MemLimit::Malformed, Err(stderr)) => assert!(
                stderr.contains("fatal error: malformed GOMEMLIMIT"),
                "{value:?}: {stderr}"
            ),
            (MemLimit::Bytes(n), Ok(limit)) => assert_eq!(n, *limit, "{value:?}"),
            (MemLimit::Off, Ok(limit)) => assert_eq!(*limit, i64::MAX, "{value:?}"),
            (mine, theirs) => panic!("{value:?}: memlint reads {mine:?}, the runtime {theirs:?}"),
        }
    }
}

fn lint(recipe: &str, extra: &[&str]) -> (Value, Option<i32>) {
    lint_recipe(recipe, extra)
}

fn hits(v: &Value) -> Vec<&Value> {
    findings_of(v, "gomemlimit-malformed")
}

/// The GOMEMLIMIT an image's config sets.
fn image_gomemlimit(recipe: &str) -> String {
    let v = inspect_json(&[&build_image(recipe)]);
    v["image"]["config"]["env"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|e| e.as_str().unwrap().strip_prefix("GOMEMLIMIT="))
        .unwrap()
        .to_string()
}

/// Done when: `GOMEMLIMIT=512Mi` on an image with a Go program exits 1 with the fix
/// `GOMEMLIMIT=512MiB`; the runtime refuses the first value and accepts the second.
#[test]
fn image_env_512mi_is_an_error_and_512mib_is_fine() {
    let probe = probe();
    let (v, code) = lint("gomem-mi", &[]);
    assert_eq!(code, Some(1));
    let h = hits(&v);
    assert_eq!(h.len(), 1, "{h:#?}");
    assert_eq!(h[0]["severity"], "error");
    let message = h[0]["message"].as_str().unwrap();
    assert!(
        message.contains("GOMEMLIMIT=512Mi (set by the image's ENV)"),
        "{message}"
    );
    assert!(message.contains("/app/server (go1.19"), "{message}");
    assert_eq!(h[0]["fix"], "ENV GOMEMLIMIT=512MiB");
    let value = image_gomemlimit("gomem-mi");
    assert!(run_with(&probe, &value)
        .unwrap_err()
        .contains("malformed GOMEMLIMIT"));
    assert_eq!(run_with(&probe, "512MiB"), Ok(512 << 20));

    let (v, code) = lint("gomem-mib", &[]);
    assert!(hits(&v).is_empty(), "{v:#}");
    assert_eq!(code, Some(0));
    assert_eq!(run_with(&probe, &image_gomemlimit("gomem-mib")), Ok(512 << 20));
}

#[test]
fn script_export_wins_over_the_image_env_and_is_named() {
    let (v, _) = lint("gomem-script-400m", &["--fail-on", "never"]);
    let h = hits(&v);
    assert_eq!(h.len(), 1, "{v:#}");
    let message = h[0]["message"].as_str().unwrap();
    assert!(
        message.contains("GOMEMLIMIT=400m (exported by /usr/local/bin/start line 3)"),
        "{message}"
    );
    // Both readings: Docker's and the JVM's 400 MiB, and Kubernetes' milli.
    assert!(message.contains("400 MiB as Docker"), "{message}");
    assert!(message.contains("Kubernetes"), "{message}");
    assert_eq!(
        h[0]["fix"],
        "# in /usr/local/bin/start line 3:\nexport GOMEMLIMIT=400MiB"
    );
    assert!(h[0]["evidence"].to_string().contains("/usr/local/bin/start"));
}

#[test]
fn env_in_the_command_gives_both_readings_of_1g() {
    let (v, _) = lint("gomem-command-1g", &["--fail-on", "never"]);
    let h = hits(&v);
    assert_eq!(h.len(), 1, "{v:#}");
    let message = h[0]["message"].as_str().unwrap();
    assert!(
        message.contains("passed by the image's command `env GOMEMLIMIT=1G /app/server`"),
        "{message}"
    );
    let fix = h[0]["fix"].as_str().unwrap();
    assert!(
        fix.contains("GOMEMLIMIT=1GiB") && fix.contains("GOMEMLIMIT=1000000000"),
        "{fix}"
    );
}

#[test]
fn undecided_script_value_and_no_go_program_stay_silent() {
    let (v, code) = lint("gomem-script-undecided", &[]);
    assert!(hits(&v).is_empty());
    assert_eq!(code, Some(0));
    let out = memlint(&["lint", "-v", &build_image("gomem-script-undecided")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("gomemlimit-malformed: GOMEMLIMIT is set by `export GOMEMLIMIT=\"$(cat /etc/gomemlimit)\"` (exported by /usr/local/bin/start line 3)"),
        "{text}"
    );
    let (v, _) = lint("gomem-no-go", &["--fail-on", "never"]);
    assert!(hits(&v).is_empty(), "{v:#}");
}
