//! A warm layer cache changes nothing `inspect` reports but `from_cache`: for every source
//! kind (written here, pushed to a local registry, and every peer fixture that reads), the
//! JSON of `inspect` and of `inspect --files` is the same cold and warm, and a fixture that is
//! refused is refused the same way both times. The cache says what a layer contributes; what
//! its blob is (digest, size, compression) comes from the image.

use crate::common;

use common::podman::Podman;
use common::registry::{Registry, Setup};
use common::*;
use serde_json::{json, Value};
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const PEERS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/peer-fixtures");

/// One run of `inspect --format json`.
struct Run {
    code: Option<i32>,
    json: Option<Value>,
    stderr: String,
}

/// `inspect --format json [--files]` with `cache` as the cache folder, an empty home (no
/// docker config) and `stdin` piped in when given.
fn inspect_in(cache: &Path, reference: &str, files: bool, stdin: Option<&[u8]>) -> Run {
    inspect_with(cache, reference, files, stdin, &|_| {})
}

/// [`inspect_in`] with more environment set by `env`.
fn inspect_with(
    cache: &Path,
    reference: &str,
    files: bool,
    stdin: Option<&[u8]>,
    env: &dyn Fn(&mut Command),
) -> Run {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memlint"));
    cmd.args(["inspect", "--format", "json", "--cache-dir"])
        .arg(cache)
        .args(files.then_some("--files"))
        .arg(reference)
        .env("NO_COLOR", "1")
        .env("HOME", home.path())
        .env("DOCKER_CONFIG", home.path().join("docker"))
        .env_remove("MEMLINT_CACHE_DIR")
        .env_remove("MEMLINT_USERNAME")
        .env_remove("MEMLINT_PASSWORD")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    env(&mut cmd);
    let mut child = cmd.spawn().expect("memlint runs");
    if let Some(bytes) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        // memlint may refuse the stream before reading all of it.
        let _ = pipe.write_all(bytes);
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code(),
        json: serde_json::from_slice(&out.stdout).ok(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Takes `from_cache` out of every layer; returns how many were `true`.
fn strip_from_cache(v: &mut Value) -> usize {
    let mut hits = 0;
    if let Some(layers) = v["image"]["layers"].as_array_mut() {
        for l in layers {
            let flag = l.as_object_mut().and_then(|o| o.remove("from_cache"));
            assert!(flag.is_some(), "every layer has from_cache: {l}");
            hits += usize::from(flag == Some(json!(true)));
        }
    }
    hits
}

/// What a source gave in [`assert_faithful`].
#[derive(Debug, Default)]
struct Outcome {
    read: bool,
    /// Layers the warm runs took from the cache (`inspect` and `inspect --files`).
    hits: usize,
    layers: usize,
}

/// Reads `reference` cold and warm, with and without `--files`, each pair with a new cache
/// folder, and asserts the two runs agree in everything but `from_cache`.
fn assert_faithful(reference: &str, stdin: Option<&[u8]>) -> Outcome {
    assert_faithful_with(reference, stdin, &|_| {})
}

/// [`assert_faithful`] with more environment set by `env`.
fn assert_faithful_with(reference: &str, stdin: Option<&[u8]>, env: &dyn Fn(&mut Command)) -> Outcome {
    let mut outcome = Outcome::default();
    for files in [false, true] {
        let cache = tempfile::tempdir().unwrap();
        let cold = inspect_with(cache.path(), reference, files, stdin, env);
        let warm = inspect_with(cache.path(), reference, files, stdin, env);
        assert_eq!(
            cold.code, warm.code,
            "{reference} (--files: {files}): exit code cold {:?}, warm {:?}\ncold: {}\nwarm: {}",
            cold.code, warm.code, cold.stderr, warm.stderr
        );
        if cold.code != Some(0) {
            assert_eq!(
                cold.code,
                Some(2),
                "{reference}: a refusal exits 2: {}",
                cold.stderr
            );
            assert_eq!(cold.stderr, warm.stderr, "{reference}: refused differently warm");
            continue;
        }
        let (mut c, mut w) = (cold.json.expect("cold JSON"), warm.json.expect("warm JSON"));
        assert_eq!(
            strip_from_cache(&mut c),
            0,
            "{reference}: a cold read used no cache"
        );
        outcome.hits += strip_from_cache(&mut w);
        outcome.layers += c["image"]["layers"].as_array().map_or(0, Vec::len);
        outcome.read = true;
        if c != w {
            let (cs, ws) = (
                serde_json::to_string_pretty(&c).unwrap(),
                serde_json::to_string_pretty(&w).unwrap(),
            );
            let first = cs
                .lines()
                .zip(ws.lines())
                .enumerate()
                .find(|(_, (a, b))| a != b)
                .map(|(i, (a, b))| format!("line {}: cold `{a}`, warm `{b}`", i + 1))
                .unwrap_or_else(|| "the documents differ in length".to_string());
            panic!("{reference} (--files: {files}) differs warm: {first}");
        }
    }
    outcome
}

/// Three layers, one per compression, with files the facts read.
fn image() -> ImageSpec {
    ImageSpec::new("amd64")
        .layer(
            LayerSpec::new(Comp::Gzip)
                .by("ADD rootfs /")
                .dir("etc")
                .file("etc/os-release", b"ID=debian\nVERSION_ID=\"12\"\n")
                .dir("bin")
                .file("bin/sh", b"#!/bin/busybox sh\n"),
        )
        .layer(
            LayerSpec::new(Comp::Zstd)
                .by("RUN add app")
                .dir("app")
                .file("app/run", b"#!/bin/sh\nexec /app/server\n")
                .symlink("app/current", "run"),
        )
        .layer(
            LayerSpec::new(Comp::Plain)
                .by("RUN remove")
                .whiteout("app/current")
                .file("app/data.txt", b"data"),
        )
}

/// A `docker save` as kaniko and go-containerregistry write it: the layer members are the
/// gzip blobs themselves, named by their digest, and the manifest gives no digest or media type.
fn write_kaniko_archive(out: &Path, img: &ImageSpec, tag: &str) {
    let mut b = tar::Builder::new(Vec::new());
    let (mut members, mut diff_ids) = (Vec::new(), Vec::new());
    for l in &img.layers {
        let mut gz = l.clone();
        gz.comp = Comp::Gzip;
        let (blob, _, diff_id) = gz.blob();
        let name = format!("{}.tar.gz", sha256(&blob));
        append(&mut b, &name, &blob);
        members.push(name);
        diff_ids.push(diff_id);
    }
    let config = img.config_json(&diff_ids);
    let config_name = format!("sha256:{}", sha256(&config));
    append(&mut b, &config_name, &config);
    let manifest = json!([{"Config": config_name, "RepoTags": [tag], "Layers": members}]);
    append(&mut b, "manifest.json", &serde_json::to_vec(&manifest).unwrap());
    fs::write(out, b.into_inner().unwrap()).unwrap();
}

#[test]
fn every_written_source_kind_reads_the_same_warm() {
    let dir = tempfile::tempdir().unwrap();
    let img = image();
    let layout = dir.path().join("layout");
    write_oci_dir(&layout, &img, "v1");
    let oci_archive = dir.path().join("oci.tar");
    tar_dir(&layout, &oci_archive);
    let classic = dir.path().join("classic.tar");
    write_docker_archive(&classic, &img, "app:1");
    let kaniko = dir.path().join("kaniko.tar");
    write_kaniko_archive(&kaniko, &img, "app:1");

    for reference in [
        format!("oci-dir:{}:v1", layout.display()),
        format!("oci-archive:{}", oci_archive.display()),
        format!("docker-archive:{}", classic.display()),
        format!("docker-archive:{}", kaniko.display()),
    ] {
        let o = assert_faithful(&reference, None);
        assert!(o.read, "{reference} reads");
        // Both warm runs took every layer from the cache: the comparison covered cached layers.
        assert_eq!((o.layers, o.hits), (6, 6), "{reference}");
    }

    // A kaniko archive's blobs are gzip whatever the manifest's default media type says, and
    // their digest is the member's, not the diff_id.
    let v = inspect_json(&[&format!("docker-archive:{}", kaniko.display())]);
    for l in v["image"]["layers"].as_array().unwrap() {
        assert_eq!(l["compression"], "gzip", "{l}");
        assert_ne!(l["digest"], l["diff_id"], "{l}");
    }

    // Standard input, plain and compressed: read as it streams, so the warm run reads it too.
    let plain = fs::read(&classic).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&plain).unwrap();
    let gzip = gz.finish().unwrap();
    let zstd = zstd::encode_all(&plain[..], 3).unwrap();
    let mut reads = Vec::new();
    for stdin in [&plain, &gzip, &zstd] {
        let o = assert_faithful("docker-archive:-", Some(stdin));
        assert!(o.read, "docker-archive:- reads");
        let cache = tempfile::tempdir().unwrap();
        let mut run = inspect_in(cache.path(), "docker-archive:-", true, Some(stdin))
            .json
            .unwrap();
        strip_from_cache(&mut run);
        for key in ["reference", "location"] {
            run["image"].as_object_mut().unwrap().remove(key);
        }
        run.as_object_mut().unwrap().remove("reference");
        reads.push(run);
    }
    // The compressed streams give what the plain one gives.
    assert_eq!(reads[0], reads[1]);
    assert_eq!(reads[0], reads[2]);
}

/// Issue #14, item 4: on the second run, `dive__test-kaniko-image.tar` said `none` and the
/// diff_id for its gzip members.
#[test]
fn kaniko_fixture_reads_the_same_warm() {
    let path = format!("{PEERS}/peer2/dive__test-kaniko-image.tar");
    let o = assert_faithful(&path, None);
    assert_eq!(
        (o.layers, o.hits),
        (28, 28),
        "every layer of both warm runs from the cache"
    );
}

#[test]
fn every_peer_fixture_reads_the_same_warm() {
    let (mut read, mut hits, mut refused) = (0, 0, 0);
    for folder in ["peer2", "go-containerregistry"] {
        let mut entries: Vec<_> = fs::read_dir(format!("{PEERS}/{folder}"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().is_some_and(|n| n != "README.md"))
            .collect();
        entries.sort();
        for path in entries {
            let o = assert_faithful(path.to_str().unwrap(), None);
            if o.read {
                read += 1;
                hits += o.hits;
            } else {
                refused += 1;
            }
        }
    }
    eprintln!("peer fixtures: {read} read, {refused} refused, {hits} layers from the cache warm");
    assert!(read >= 20, "most peer fixtures read ({read})");
    assert!(hits > 0, "the warm runs used the cache");
}

#[test]
fn registry_reads_the_same_warm() {
    require_tool("skopeo");
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    write_oci_dir(&layout, &image(), "v1");
    let registry = Registry::start(Setup::default());
    registry.push(&format!("oci:{}:v1", layout.display()), "app:1", &[]);
    let reference = format!("registry:{}/app:1", registry.host());
    let o = assert_faithful(&reference, None);
    assert_eq!((o.layers, o.hits), (6, 6), "{reference}");
}

/// `docker:` and `podman:` through a private `podman system service`: cold, the image is
/// exported; warm, it is read from the cache without an export.
#[test]
fn engine_reads_the_same_warm() {
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    // A docker-archive (what `podman load` takes) has no zstd layers.
    let mut img = image();
    for l in &mut img.layers {
        if l.comp == Comp::Zstd {
            l.comp = Comp::Gzip;
        }
    }
    write_oci_dir(&layout, &img, "v1");
    let podman = Podman::new();
    podman.load(&format!("{}:v1", layout.display()));
    let _service = podman.serve();
    let host = format!("unix://{}", podman.socket().display());
    for (reference, var) in [
        ("docker:app:1", "DOCKER_HOST"),
        ("podman:app:1", "CONTAINER_HOST"),
    ] {
        let env = |cmd: &mut Command| {
            podman.env(cmd);
            cmd.env(var, &host);
        };
        // Podman cannot give this image's history (its config's history has no `created`), so
        // the warm run exports it too rather than lose the history lines.
        let o = assert_faithful_with(reference, None, &env);
        assert_eq!(o.layers, 6, "{reference}");
    }
    // An image whose history Podman gives is read from the cache without an export.
    podman.podman(&[
        "load",
        "--quiet",
        "-i",
        &format!("{PEERS}/peer2/dive__test-docker-image.tar"),
    ]);
    for (reference, var) in [
        ("docker:dive-test:latest", "DOCKER_HOST"),
        ("podman:dive-test:latest", "CONTAINER_HOST"),
    ] {
        let env = |cmd: &mut Command| {
            podman.env(cmd);
            cmd.env(var, &host);
        };
        let o = assert_faithful_with(reference, None, &env);
        assert_eq!((o.layers, o.hits), (28, 28), "{reference}");
    }
}
