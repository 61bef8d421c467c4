//! `docker:` and `podman:` against a real Podman: its storage (vfs, in a temp folder) holds a
//! real-package image loaded with `podman load`, `podman system service` serves the Docker
//! API on a socket in the same folder, and memlint must read the same image through the API
//! (as `docker:` and `podman:`) and through `podman image save` as from the OCI layout.

use crate::common;

use common::podman::*;
use common::*;
use serde_json::Value;
use std::fs;
use std::path::Path;
use std::process::Command;

/// What must not depend on where the image was read from: the layers as unpacked, the
/// config, the tree and the facts (the blob digests and sizes differ, since an engine exports
/// uncompressed layers).
fn same_image(v: &Value) -> Value {
    let image = &v["image"];
    let layers: Vec<Value> = image["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .map(|l| {
            serde_json::json!({
                "diff_id": l["diff_id"],
                "uncompressed_size": l["uncompressed_size"],
                "entries": l["entries"],
                "history": l["history"],
            })
        })
        .collect();
    serde_json::json!({
        "platform": image["platform"],
        "config": image["config"],
        "layers": layers,
        "files": v["files"],
        "facts": v["facts"],
    })
}

/// Error text without spaces: miette wraps long paths at a `/`.
fn squashed(text: &str) -> String {
    text.replace(' ', "")
}

/// The findings of a report without their fingerprints: a fingerprint names the image's
/// repository (`app` read from the engine, the layout's folder name read from the layout), so
/// the same image read two ways differs there only.
fn findings(v: &Value) -> Value {
    let mut findings = v["findings"].clone();
    for f in findings.as_array_mut().into_iter().flatten() {
        if let Some(f) = f.as_object_mut() {
            f.remove("fingerprint");
        }
    }
    findings
}

/// The fingerprints of a report's findings, in order.
fn fingerprints(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| f["fingerprint"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn docker_and_podman_api_read_what_the_oci_layout_holds() {
    let reference = build_image("demo");
    let podman = Podman::new();
    podman.load(&reference);
    let _service = podman.serve();
    let docker_host = format!("unix://{}", podman.socket().display());
    let docker = [("DOCKER_HOST", docker_host.as_str())];
    let container = [("CONTAINER_HOST", docker_host.as_str())];

    let expected = podman.json(&["inspect", "--format", "json", "--no-cache", &reference], &[]);
    let via_docker = podman.json(
        &["inspect", "--format", "json", "--no-cache", "docker:app:1"],
        &docker,
    );
    assert_eq!(same_image(&via_docker), same_image(&expected));
    assert_eq!(via_docker["image"]["source"], "docker");
    assert_eq!(
        via_docker["image"]["location"],
        format!("Docker Engine at {docker_host}")
    );
    assert_eq!(
        via_docker["image"]["config_digest"], expected["image"]["config_digest"],
        "the engine exports the config as it was loaded"
    );

    let via_podman = podman.json(
        &["inspect", "--format", "json", "--no-cache", "podman:app:1"],
        &container,
    );
    assert_eq!(same_image(&via_podman), same_image(&expected));
    assert_eq!(via_podman["image"]["source"], "podman");
    assert_eq!(
        via_podman["image"]["location"],
        format!("Podman API at {docker_host}")
    );

    // The service found where rootless Podman puts it, without CONTAINER_HOST.
    let xdg = podman.path("xdg-with-socket");
    fs::create_dir_all(xdg.join("podman")).unwrap();
    std::os::unix::fs::symlink(podman.socket(), xdg.join("podman/podman.sock")).unwrap();
    let via_xdg = podman.json(
        &["inspect", "--format", "json", "--no-cache", "podman:app:1"],
        &[("XDG_RUNTIME_DIR", xdg.to_str().unwrap())],
    );
    assert_eq!(
        via_xdg["image"]["location"],
        via_podman["image"]["location"].as_str().unwrap().replace(
            &docker_host,
            &format!("unix://{}", xdg.join("podman/podman.sock").display()),
        )
    );
    assert_eq!(same_image(&via_xdg), same_image(&expected));

    // `memlint lint docker:app:1` against a Podman service: the same findings.
    let lint_expected = podman.json(&["lint", "--format", "json", "--no-cache", &reference], &[]);
    let lint_docker = podman.json(
        &["lint", "--format", "json", "--no-cache", "docker:app:1"],
        &docker,
    );
    assert!(
        !findings(&lint_expected).as_array().unwrap().is_empty(),
        "the demo image has findings"
    );
    assert_eq!(findings(&lint_docker), findings(&lint_expected));
    let lint_podman = podman.json(
        &["lint", "--format", "json", "--no-cache", "podman:app:1"],
        &container,
    );
    assert_eq!(findings(&lint_podman), findings(&lint_expected));
    // `app:1` read through either API is one repository: its findings keep their fingerprints,
    // so a baseline written from one holds for the other.
    assert_eq!(fingerprints(&lint_podman), fingerprints(&lint_docker));
    assert!(fingerprints(&lint_podman).iter().all(|f| f.len() == 32));

    // With every layer in the layer cache, the image is not exported: the inspect answer,
    // the history and the cache give the same image.
    let cache = podman.path("cache");
    let cache_dir = cache.to_str().unwrap();
    let from_cache = |v: &Value| -> Vec<bool> {
        v["image"]["layers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["from_cache"].as_bool().unwrap())
            .collect()
    };
    let args = [
        "inspect",
        "--format",
        "json",
        "--cache-dir",
        cache_dir,
        "docker:app:1",
    ];
    let first = podman.json(&args, &docker);
    assert!(from_cache(&first).iter().all(|c| !c), "the cache starts empty");
    let second = podman.json(&args, &docker);
    assert!(
        from_cache(&second).iter().all(|c| *c),
        "every layer from the cache, so nothing exported"
    );
    assert_eq!(same_image(&second), same_image(&expected));
    assert_eq!(
        second["image"]["config_digest"],
        expected["image"]["config_digest"]
    );
    assert_eq!(second["image"]["name"], via_docker["image"]["name"]);
    let lint_cached = podman.json(
        &[
            "lint",
            "--format",
            "json",
            "--cache-dir",
            cache_dir,
            "podman:app:1",
        ],
        &container,
    );
    assert_eq!(findings(&lint_cached), findings(&lint_expected));
    assert!(from_cache(&lint_cached).iter().all(|c| *c));
    // A damaged entry is a miss: the image is exported after all.
    let entry = fs::read_dir(cache.join("layers"))
        .unwrap()
        .flat_map(|v| fs::read_dir(v.unwrap().path().join("sha256")).unwrap())
        .map(|e| e.unwrap().path())
        .find(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .expect("a cache entry");
    fs::write(&entry, b"damaged").unwrap();
    let third = podman.json(&args, &docker);
    assert_eq!(same_image(&third), same_image(&expected));
    assert!(from_cache(&third).iter().all(|c| !c), "exported");

    // A Docker context, chosen by config.json or DOCKER_CONTEXT, whose endpoint is the service.
    let config = podman.path("docker-config");
    let meta = config.join("contexts/meta").join(sha256(b"podtest"));
    fs::create_dir_all(&meta).unwrap();
    fs::write(
        meta.join("meta.json"),
        serde_json::to_vec(&serde_json::json!({
            "Name": "podtest",
            "Metadata": {},
            "Endpoints": {"docker": {"Host": docker_host, "SkipTLSVerify": false}},
        }))
        .unwrap(),
    )
    .unwrap();
    fs::write(config.join("config.json"), br#"{"currentContext": "podtest"}"#).unwrap();
    let config_var = ("DOCKER_CONFIG", config.to_str().unwrap());
    for vars in [vec![config_var], vec![config_var, ("DOCKER_CONTEXT", "podtest")]] {
        let via_context = podman.json(
            &["inspect", "--format", "json", "--no-cache", "docker:app:1"],
            &vars,
        );
        assert_eq!(same_image(&via_context), same_image(&expected));
    }
    // DOCKER_CONTEXT=default is the default socket, not the config's context; DOCKER_HOST wins.
    let out = podman.memlint(
        &["inspect", "--no-cache", "docker:app:1"],
        &[
            config_var,
            ("DOCKER_CONTEXT", "default"),
            ("DOCKER_HOST", "unix:///nonexistent/docker.sock"),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(error_text(&out).contains("/nonexistent/docker.sock"));
    // A context that is not there: exit 2, naming it and DOCKER_HOST.
    for vars in [
        vec![config_var, ("DOCKER_CONTEXT", "nosuch")],
        vec![
            ("DOCKER_CONFIG", podman.path("tmp").to_str().unwrap()),
            ("DOCKER_CONTEXT", "nosuch"),
        ],
    ] {
        let out = podman.memlint(&["inspect", "--no-cache", "docker:app:1"], &vars);
        assert_eq!(out.status.code(), Some(2), "{vars:?}");
        let text = error_text(&out);
        assert!(text.contains("nosuch"), "{text}");
        assert!(text.contains("DOCKER_HOST"), "{text}");
    }

    // A name the engine does not have: exit 2, naming the image and the engine.
    for (reference, vars) in [("docker:nope:1", &docker), ("podman:nope:1", &container)] {
        let out = podman.memlint(&["inspect", "--no-cache", reference], vars);
        assert_eq!(out.status.code(), Some(2), "{reference}");
        let text = error_text(&out);
        assert!(text.contains("no image `nope:1`"), "{text}");
        assert!(squashed(&text).contains(&docker_host), "{text}");
        assert!(text.contains("pull"), "{text}");
    }
}

#[test]
fn podman_without_a_service_saves_the_image() {
    let reference = build_image("demo");
    let podman = Podman::new();
    podman.load(&reference);
    if Path::new("/run/podman/podman.sock").exists() {
        // memlint would rightly use the machine's rootful service, which does not hold
        // this test's storage.
        eprintln!("skipped: /run/podman/podman.sock exists on this machine");
        return;
    }
    // XDG_RUNTIME_DIR is an empty folder and CONTAINER_HOST is unset: no socket anywhere.
    let expected = podman.json(&["inspect", "--format", "json", "--no-cache", &reference], &[]);
    let saved = podman.json(
        &["inspect", "--format", "json", "--no-cache", "podman:app:1"],
        &[],
    );
    assert_eq!(same_image(&saved), same_image(&expected));
    assert_eq!(saved["image"]["source"], "podman");
    assert_eq!(
        saved["image"]["location"],
        "`podman image save --format docker-archive app:1`"
    );
    let lint_expected = podman.json(&["lint", "--format", "json", "--no-cache", &reference], &[]);
    let lint_saved = podman.json(&["lint", "--format", "json", "--no-cache", "podman:app:1"], &[]);
    assert_eq!(findings(&lint_saved), findings(&lint_expected));

    let out = podman.memlint(&["inspect", "--no-cache", "podman:nope:1"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let text = error_text(&out);
    assert!(text.contains("no image `nope:1`"), "{text}");
    assert!(text.contains("podman pull"), "{text}");

    // podman missing as well: say so, and what to do.
    let out = podman.memlint(
        &["inspect", "--no-cache", "podman:app:1"],
        &[("PATH", podman.path("tmp").to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(2));
    let text = error_text(&out);
    assert!(text.contains("`podman` is not installed"), "{text}");
}

#[test]
fn no_daemon_names_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nobody.sock");
    let host = format!("unix://{}", socket.display());
    let cases = [
        ("docker:app:1", "DOCKER_HOST"),
        ("podman:app:1", "CONTAINER_HOST"),
    ];
    for (reference, variable) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_memlint"))
            .args(["lint", "--no-cache", reference])
            .env("NO_COLOR", "1")
            .env_remove("MEMLINT_CACHE_DIR")
            .env_remove("DOCKER_HOST")
            .env_remove("CONTAINER_HOST")
            .env_remove("DOCKER_TLS_VERIFY")
            .env(variable, &host)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{reference}");
        let text = error_text(&out);
        assert!(squashed(&text).contains(&host), "{text}");
        assert!(text.contains(variable), "{text}");
        assert!(text.contains("does not exist"), "{text}");
    }
    // A stale socket file that nobody listens on.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let out = Command::new(env!("CARGO_BIN_EXE_memlint"))
        .args(["lint", "--no-cache", "docker:app:1"])
        .env("NO_COLOR", "1")
        .env_remove("MEMLINT_CACHE_DIR")
        .env("DOCKER_HOST", &host)
        .env_remove("DOCKER_TLS_VERIFY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let text = error_text(&out);
    assert!(text.contains("nothing listens"), "{text}");
    // TLS and ssh are refused up front, with the way around them.
    for (variable, value) in [("DOCKER_TLS_VERIFY", "1"), ("DOCKER_HOST", "ssh://me@host")] {
        let out = Command::new(env!("CARGO_BIN_EXE_memlint"))
            .args(["lint", "--no-cache", "docker:app:1"])
            .env("NO_COLOR", "1")
            .env_remove("MEMLINT_CACHE_DIR")
            .env_remove("DOCKER_HOST")
            .env_remove("DOCKER_TLS_VERIFY")
            .env(variable, value)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let text = error_text(&out);
        assert!(text.contains("not supported"), "{text}");
        assert!(text.contains("docker-archive:-"), "{text}");
    }
}

/// A daemon that answers each request from a script: what memlint does with an engine that
/// fails halfway.
fn fake_daemon(socket: &Path, answers: Vec<(&'static str, Vec<u8>)>) -> std::thread::JoinHandle<Vec<String>> {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::os::unix::net::UnixListener::bind(socket).unwrap();
    std::thread::spawn(move || {
        let mut requests = Vec::new();
        for (expected, answer) in answers {
            let (mut conn, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap() == 0 || header == "\r\n" {
                    break;
                }
            }
            assert!(line.contains(expected), "{line:?} is not {expected:?}");
            requests.push(line.trim().to_string());
            let _ = conn.write_all(&answer);
        }
        requests
    })
}

#[test]
fn an_engine_that_fails_halfway() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("fake.sock");
    let inspect = br#"{"Id":"sha256:21ac9a7744eb69176ab85c8adea49d927c4f45b7c0b09491d184b03fece36b7b","Os":"linux","Architecture":"amd64","RootFS":{"Layers":[]}}"#;
    let ok_json = [
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            inspect.len()
        )
        .into_bytes(),
        inspect.to_vec(),
    ]
    .concat();
    let failed =
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 26\r\n\r\n{\"message\":\"disk on fire\"}"
            .to_vec();
    let truncated =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffff\r\nmanifest.json\0\0\0".to_vec();
    let run = |socket: &Path| {
        Command::new(env!("CARGO_BIN_EXE_memlint"))
            .args(["inspect", "--no-cache", "docker:app:1"])
            .env("NO_COLOR", "1")
            .env_remove("MEMLINT_CACHE_DIR")
            .env_remove("DOCKER_TLS_VERIFY")
            .env("DOCKER_HOST", format!("unix://{}", socket.display()))
            .output()
            .unwrap()
    };

    let daemon = fake_daemon(
        &socket,
        vec![
            ("GET /images/app:1/json HTTP/1.1", ok_json.clone()),
            ("GET /images/app:1/get HTTP/1.1", failed),
        ],
    );
    let out = run(&socket);
    assert_eq!(daemon.join().unwrap().len(), 2);
    assert_eq!(out.status.code(), Some(2));
    let text = error_text(&out);
    assert!(text.contains("500 Internal Server Error: disk on fire"), "{text}");

    fs::remove_file(&socket).unwrap();
    let daemon = fake_daemon(
        &socket,
        vec![("/images/app:1/json", ok_json), ("/images/app:1/get", truncated)],
    );
    let out = run(&socket);
    daemon.join().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let text = error_text(&out);
    assert!(text.contains("exporting image `app:1`"), "{text}");
    assert!(
        text.contains("connection closed in the middle of a chunk"),
        "{text}"
    );
}
