//! `registry:` references against Debian's docker-registry (the CNCF distribution registry)
//! started on 127.0.0.1: anonymous, htpasswd basic auth, and TLS with a CA made here. Images
//! are pushed with skopeo; linting by reference must give what linting the oci-dir gives.

use crate::common;

use common::registry::*;
use common::*;
use serde_json::Value;
use std::fs;
use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// memlint with an empty docker config, no cache and the given environment.
fn memlint_isolated(args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memlint"));
    cmd.args(args)
        .env("NO_COLOR", "1")
        .env("HOME", home.path())
        .env("DOCKER_CONFIG", home.path().join("docker"))
        .env_remove("MEMLINT_USERNAME")
        .env_remove("MEMLINT_PASSWORD")
        .env_remove("MEMLINT_CACHE_DIR")
        .env("XDG_CACHE_HOME", home.path().join("cache"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("memlint runs");
    if let Some(text) = stdin {
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    child.wait_with_output().unwrap()
}

/// The findings of `lint --format json`, without the fields that name the image.
fn findings(out: &Output) -> Vec<Value> {
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "lint failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let reports = match v.get("reports") {
        Some(r) => r.as_array().unwrap().clone(),
        None => vec![v],
    };
    let mut all = Vec::new();
    for image in &reports {
        for f in image["findings"].as_array().unwrap() {
            all.push(serde_json::json!({
                "rule": f["rule"], "severity": f["severity"], "message": f["message"],
                "evidence": f["evidence"], "fix": f["fix"],
            }));
        }
    }
    all
}

fn lint_json(reference: &str, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut args = vec!["lint", "--format", "json", "--no-cache"];
    args.extend_from_slice(extra);
    args.push(reference);
    memlint_isolated(&args, env, None)
}

fn facts_of(reference: &str, extra: &[&str], env: &[(&str, &str)]) -> Value {
    let mut args = vec!["inspect", "--format", "json", "--no-cache"];
    args.extend_from_slice(extra);
    args.push(reference);
    let out = memlint_isolated(&args, env, None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["facts"].clone()
}

fn oci_path(reference: &str) -> &str {
    reference
        .trim_start_matches("oci-dir:")
        .trim_end_matches(":latest")
}

#[test]
fn anonymous_registry_gives_what_the_oci_dir_gives() {
    let image = build_image("node-sharp");
    let registry = Registry::start(Setup::default());
    registry.push(&format!("oci:{}", oci_path(&image)), "app:1", &[]);
    let reference = format!("registry:{}/app:1", registry.host());
    let by_ref = findings(&lint_json(&reference, &[], &[]));
    let by_dir = findings(&lint_json(&image, &[], &[]));
    assert!(!by_dir.is_empty(), "the node-sharp image has findings");
    assert_eq!(by_ref, by_dir);
    assert_eq!(facts_of(&reference, &[], &[]), facts_of(&image, &[], &[]));
    // A bare reference is a registry reference too, and a digest pins the same image.
    let v: Value = serde_json::from_slice(
        &memlint_isolated(
            &["inspect", "--format", "json", "--no-cache", &reference],
            &[],
            None,
        )
        .stdout,
    )
    .unwrap();
    let digest = v["image"]["manifest_digest"].as_str().unwrap().to_string();
    let pinned = format!("{}/app@{digest}", registry.host());
    assert_eq!(findings(&lint_json(&pinned, &[], &[])), by_dir);
}

#[test]
fn a_second_pull_downloads_no_layer() {
    let image = build_image("node-sharp");
    let registry = Registry::start(Setup::default());
    registry.push(&format!("oci:{}", oci_path(&image)), "app:1", &[]);
    let reference = format!("registry:{}/app:1", registry.host());
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().to_str().unwrap();
    let inspect = |extra: &[&str]| {
        let mut args = vec!["inspect", "--format", "json", "--cache-dir", cache_dir];
        args.extend_from_slice(extra);
        args.push(&reference);
        let out = memlint_isolated(&args, &[], None);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        (
            serde_json::from_slice::<Value>(&out.stdout).unwrap(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // --progress without a terminal: one line per large layer.
    let (first, stderr) = inspect(&["--progress"]);
    assert!(
        stderr.contains("memlint: layer ") && stderr.contains(" MiB in "),
        "{stderr}"
    );
    let layers = first["image"]["layers"].as_array().unwrap().clone();
    assert!(layers.iter().all(|l| l["from_cache"] == false));
    // The layer blobs leave the registry: a second run needs none of them.
    for l in &layers {
        let data = registry.blob_data(l["digest"].as_str().unwrap());
        fs::remove_file(&data).unwrap();
    }
    let (second, stderr) = inspect(&["--progress"]);
    assert!(!stderr.contains("memlint: layer "), "{stderr}");
    assert!(second["image"]["layers"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["from_cache"] == true));
    assert_eq!(second["facts"], first["facts"]);
}

#[test]
fn basic_auth_from_every_source_of_credentials() {
    let image = build_image("glibc-jemalloc-removed");
    let registry = Registry::start(Setup {
        basic_auth: true,
        ..Setup::default()
    });
    registry.push(&format!("oci:{}", oci_path(&image)), "team/app:1", &[]);
    let reference = format!("registry:{}/team/app:1", registry.host());
    let expected = findings(&lint_json(&image, &[], &[]));

    // No credentials: a 401 that names the registry, the repository and what to do.
    let out = lint_json(&reference, &[], &[]);
    assert_eq!(out.status.code(), Some(2));
    let text = error_text(&out);
    for needle in [registry.host().as_str(), "team/app", "401", "MEMLINT_USERNAME"] {
        assert!(text.contains(needle), "{needle}: {text}");
    }

    // MEMLINT_USERNAME / MEMLINT_PASSWORD.
    let env = [("MEMLINT_USERNAME", USER), ("MEMLINT_PASSWORD", PASSWORD)];
    assert_eq!(findings(&lint_json(&reference, &[], &env)), expected);
    // A wrong password is refused.
    let out = lint_json(
        &reference,
        &[],
        &[("MEMLINT_USERNAME", USER), ("MEMLINT_PASSWORD", "nope")],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(error_text(&out).contains("401"), "{}", error_text(&out));

    // --username with --password-stdin.
    let out = memlint_isolated(
        &[
            "lint",
            "--format",
            "json",
            "--no-cache",
            "--username",
            USER,
            "--password-stdin",
            &reference,
        ],
        &[],
        Some(&format!("{PASSWORD}\n")),
    );
    assert_eq!(findings(&out), expected);

    // The docker config: an `auths` entry, then a credential helper.
    let home = tempfile::tempdir().unwrap();
    let config_dir = home.path().join("docker");
    fs::create_dir_all(&config_dir).unwrap();
    let auth = base64_encode(format!("{USER}:{PASSWORD}").as_bytes());
    fs::write(
        config_dir.join("config.json"),
        serde_json::json!({"auths": {registry.host(): {"auth": auth}}}).to_string(),
    )
    .unwrap();
    let config_env = [("DOCKER_CONFIG", config_dir.to_str().unwrap())];
    assert_eq!(findings(&lint_json(&reference, &[], &config_env)), expected);

    let bin = home.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    let helper = bin.join("docker-credential-memlinttest");
    fs::write(
        &helper,
        format!(
            "#!/bin/sh\n[ \"$1\" = get ] || exit 1\nread server\n[ \"$server\" = \"{}\" ] || {{ echo 'credentials not found in native keychain'; exit 1; }}\necho '{{\"ServerURL\":\"'$server'\",\"Username\":\"{USER}\",\"Secret\":\"{PASSWORD}\"}}'\n",
            registry.host()
        ),
    )
    .unwrap();
    fs::set_permissions(&helper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    fs::write(
        config_dir.join("config.json"),
        serde_json::json!({"credHelpers": {registry.host(): "memlinttest"}}).to_string(),
    )
    .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let helper_env = [
        ("DOCKER_CONFIG", config_dir.to_str().unwrap()),
        ("PATH", path.as_str()),
    ];
    assert_eq!(findings(&lint_json(&reference, &[], &helper_env)), expected);
}

#[test]
fn explicit_credentials_go_only_to_the_registry_of_the_reference() {
    let image = build_image("glibc-jemalloc");
    let first = Registry::start(Setup {
        basic_auth: true,
        ..Setup::default()
    });
    let second = Registry::start(Setup::default());
    first.push(&format!("oci:{}", oci_path(&image)), "app:1", &[]);
    second.push(&format!("oci:{}", oci_path(&image)), "app:1", &[]);
    let creds = [("MEMLINT_USERNAME", USER), ("MEMLINT_PASSWORD", PASSWORD)];
    // Two images of the registry they are for: both read.
    let a = format!("registry:{}/app:1", first.host());
    let out = memlint_isolated(&["lint", "--format", "json", "--no-cache", &a, &a], &creds, None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // References to two registries: which one the credentials are for cannot be known, so
    // nothing is pulled and the message names both.
    let b = format!("registry:{}/app:1", second.host());
    let out = memlint_isolated(&["lint", "--no-cache", &a, &b], &creds, None);
    assert_eq!(out.status.code(), Some(2));
    let text = error_text(&out);
    assert!(
        text.contains(&first.host()) && text.contains(&second.host()),
        "{text}"
    );
    // A mistyped archive path reads as a Docker Hub reference: refused the same way, before
    // anything is sent anywhere.
    let out = memlint_isolated(&["lint", "--no-cache", "no-such-app.tar", &a], &creds, None);
    assert_eq!(out.status.code(), Some(2));
    let text = error_text(&out);
    assert!(
        text.contains("docker.io") && text.contains("path that does not exist"),
        "{text}"
    );
}

#[test]
fn an_index_gives_each_platform_like_its_oci_dir() {
    let amd64 = build_image("glibc-jemalloc");
    let arm64 = build_image("arm64-jemalloc-amd64-path");
    let dir = tempfile::tempdir().unwrap();
    let layout = merge_layouts(dir.path(), &[&amd64, &arm64]);
    let registry = Registry::start(Setup::default());
    registry.push(
        &format!("oci:{}:multi", layout.display()),
        "app:multi",
        &["--all"],
    );
    let reference = format!("registry:{}/app:multi", registry.host());
    assert_eq!(
        findings(&lint_json(&reference, &["--platform", "linux/arm64"], &[])),
        findings(&lint_json(&arm64, &[], &[]))
    );
    assert_eq!(
        findings(&lint_json(&reference, &[], &[])),
        findings(&lint_json(&amd64, &[], &[]))
    );
    let out = lint_json(&reference, &["--platform", "all"], &[]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["reports"].as_array().unwrap().len(), 2, "{v}");
    let out = lint_json(&reference, &["--platform", "linux/s390x"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(error_text(&out).contains("arm64"), "{}", error_text(&out));
}

#[test]
fn zstd_layers_give_the_same_facts() {
    let image = build_image("node-sharp-jemalloc");
    let registry = Registry::start(Setup::default());
    registry.push(
        &format!("oci:{}", oci_path(&image)),
        "app:zstd",
        &["--dest-compress-format", "zstd", "--dest-compress-level", "3"],
    );
    let reference = format!("registry:{}/app:zstd", registry.host());
    let out = memlint_isolated(
        &["inspect", "--format", "json", "--no-cache", &reference],
        &[],
        None,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["image"]["layers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["compression"] == "zstd"),
        "{}",
        v["image"]["layers"]
    );
    assert_eq!(v["facts"], facts_of(&image, &[], &[]));
}

#[test]
fn tls_with_a_private_ca() {
    let image = build_image("glibc-jemalloc");
    let registry = Registry::start(Setup {
        tls: true,
        ..Setup::default()
    });
    assert!(registry.tls);
    registry.push(&format!("oci:{}", oci_path(&image)), "app:1", &[]);
    let reference = format!("registry:{}/app:1", registry.host());
    // Loopback needs no flag for plain HTTP, but a certificate it presents must be trusted.
    let out = lint_json(&reference, &[], &[]);
    assert_eq!(out.status.code(), Some(2));
    let text = error_text(&out);
    assert!(
        text.contains("certificate") && text.contains("--registry-ca"),
        "{text}"
    );
    let ca = registry.ca();
    let expected = findings(&lint_json(&image, &[], &[]));
    assert_eq!(
        findings(&lint_json(
            &reference,
            &["--registry-ca", ca.to_str().unwrap()],
            &[]
        )),
        expected
    );
    assert_eq!(
        findings(&lint_json(
            &reference,
            &["--insecure-registry", &registry.host()],
            &[]
        )),
        expected
    );
    // A file that is not a PEM certificate is refused up front.
    let out = lint_json(&reference, &["--registry-ca", "/etc/hostname"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        error_text(&out).contains("BEGIN CERTIFICATE"),
        "{}",
        error_text(&out)
    );
    // So is one that looks like PEM but holds no certificate.
    let fake = registry.dir.path().join("fake.pem");
    fs::write(
        &fake,
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let out = lint_json(&reference, &["--registry-ca", fake.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(2));
    let text = error_text(&out);
    assert!(
        text.contains("--registry-ca") && text.contains("cannot be loaded"),
        "{text}"
    );
}

#[test]
fn registry_errors_name_the_registry_and_what_to_do() {
    let image = build_image("glibc");
    let registry = Registry::start(Setup::default());
    registry.push(&format!("oci:{}", oci_path(&image)), "app:1", &[]);
    let out = lint_json(&format!("registry:{}/app:2", registry.host()), &[], &[]);
    assert_eq!(out.status.code(), Some(2));
    let text = error_text(&out);
    for needle in [
        registry.host().as_str(),
        "repository app",
        "404",
        "skopeo list-tags",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    let out = lint_json(&format!("registry:{}/nothing-here:1", registry.host()), &[], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(error_text(&out).contains("404"), "{}", error_text(&out));

    // A manifest is read no further than max_json_bytes.
    let out = lint_json(
        &format!("registry:{}/app:1", registry.host()),
        &[],
        &[("MEMLINT_LIMITS", "max_json_bytes=100")],
    );
    assert_eq!(out.status.code(), Some(2));
    let text = error_text(&out);
    assert!(
        text.contains("max_json_bytes") && text.contains("manifest of tag 1"),
        "{text}"
    );

    // Nothing listens: the port is named and nothing panics.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = lint_json(&format!("registry:127.0.0.1:{free}/app:1"), &[], &[]);
    assert_eq!(out.status.code(), Some(2));
    let text = error_text(&out);
    assert!(
        text.contains(&format!("127.0.0.1:{free}")) && text.contains("does not answer"),
        "{text}"
    );

    // A blob that the registry lost midway is an error for that layer, not a hang.
    let v: Value = serde_json::from_slice(
        &memlint_isolated(
            &[
                "inspect",
                "--format",
                "json",
                "--no-cache",
                &format!("registry:{}/app:1", registry.host()),
            ],
            &[],
            None,
        )
        .stdout,
    )
    .unwrap();
    let layer = v["image"]["layers"][1]["digest"].as_str().unwrap().to_string();
    let hex = layer.trim_start_matches("sha256:");
    let data = registry.blob_data(hex);
    fs::remove_file(&data).unwrap_or_else(|e| panic!("{}: {e}", data.display()));
    let out = lint_json(&format!("registry:{}/app:1", registry.host()), &[], &[]);
    assert_eq!(out.status.code(), Some(2));
    let text = error_text(&out);
    assert!(text.contains("layer 2") && text.contains(hex), "{text}");

    // A blob whose bytes changed in the registry's storage: an error that names the layer,
    // at once, without retrying a bad blob.
    registry.push(&format!("oci:{}", oci_path(&image)), "app:1", &[]);
    let layer = v["image"]["layers"][3]["digest"].as_str().unwrap().to_string();
    let hex = layer.trim_start_matches("sha256:");
    let data = registry.blob_data(hex);
    let mut bytes = fs::read(&data).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    fs::write(&data, bytes).unwrap();
    let started = Instant::now();
    let out = lint_json(
        &format!("registry:{}/app:1", registry.host()),
        &["--jobs", "1"],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    let text = error_text(&out);
    assert!(text.contains("layer 4") && text.contains(hex), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "retried a bad blob: {:?}",
        started.elapsed()
    );
}

fn base64_encode(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
