//! The image reader on images written by the fixture writer: every source form, whiteouts,
//! links, platforms, and broken inputs.

use crate::common;

use common::*;
use serde_json::json;
use std::fs;
use std::path::Path;

/// Three layers, one per compression, exercising whiteouts, opaque folders, writes through
/// symlinked folders, hard links and symlink chains.
fn sample_image(arch: &str) -> ImageSpec {
    let mut elf = vec![0u8; 64];
    elf[..4].copy_from_slice(b"\x7fELF");
    elf[4] = 2;
    elf[5] = 1;
    elf[18] = if arch == "arm64" { 183 } else { 62 };
    ImageSpec::new(arch)
        .layer(
            LayerSpec::new(Comp::Gzip)
                .by("ADD rootfs.tar /")
                .dir("usr")
                .dir("usr/lib")
                .dir("usr/bin")
                .symlink("lib", "usr/lib")
                .symlink("bin", "usr/bin")
                .file("etc/os-release", b"ID=debian\nVERSION_ID=\"12\"\n")
                .file("usr/lib/libc.so.6", b"GNU C Library")
                .exe("usr/bin/sh", &elf)
                .file("etc/a/x", b"x")
                .file("etc/a/y", b"y")
                .file("var/cache/old", b"old")
                .dir("tmp")
                .file("tmp/scratch", b"s"),
        )
        .layer(
            LayerSpec::new(Comp::Zstd)
                .by("RUN apt-get install -y libjemalloc2")
                .whiteout("etc/a/x")
                .opaque("var/cache")
                .file("var/cache/new", b"new")
                .file("lib/libjemalloc.so.2", b"jemalloc")
                .hardlink("usr/bin/sh2", "usr/bin/sh")
                .symlink("usr/local/lib/jem", "/lib/libjemalloc.so.2")
                .symlink("usr/local/lib/jem2", "jem"),
        )
        .layer(
            LayerSpec::new(Comp::Plain)
                .by("RUN rm -rf /tmp && echo ID=other > /etc/os-release")
                .file("etc/os-release", b"ID=other\n")
                .whiteout("tmp"),
        )
        .env("LD_PRELOAD=/usr/lib/libjemalloc.so.2")
}

const EXPECTED: &[&str] = &[
    "/bin symlink usr/bin",
    "/etc dir ",
    "/etc/a dir ",
    "/etc/a/y file ",
    "/etc/os-release file ",
    "/lib symlink usr/lib",
    "/usr dir ",
    "/usr/bin dir ",
    "/usr/bin/sh file ",
    "/usr/bin/sh2 file ",
    "/usr/lib dir ",
    "/usr/lib/libc.so.6 file ",
    "/usr/lib/libjemalloc.so.2 file ",
    "/usr/local dir ",
    "/usr/local/lib dir ",
    "/usr/local/lib/jem symlink /lib/libjemalloc.so.2",
    "/usr/local/lib/jem2 symlink jem",
    "/var dir ",
    "/var/cache dir ",
    "/var/cache/new file ",
];

#[test]
fn merged_tree_path_by_path() {
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("img");
    write_oci_dir(&layout, &sample_image("amd64"), "v1");
    let listing = tree_listing(&format!("oci-dir:{}", layout.display()));
    assert_eq!(listing, EXPECTED);

    let v = inspect_json(&["--files", &format!("oci-dir:{}:v1", layout.display())]);
    assert_eq!(v["image"]["platform"]["os"], "linux");
    assert_eq!(v["image"]["platform"]["architecture"], "amd64");
    assert_eq!(v["files"]["count"], EXPECTED.len());
    assert_eq!(v["files"]["hardlinks"], 1);
    assert_eq!(v["files"]["elf"], 2, "sh and its hard link are ELF");
    let layers = v["image"]["layers"].as_array().unwrap();
    let compressions: Vec<&str> = layers
        .iter()
        .map(|l| l["compression"].as_str().unwrap())
        .collect();
    assert_eq!(compressions, ["gzip", "zstd", "none"]);
    assert_eq!(layers[1]["history"], "RUN apt-get install -y libjemalloc2");
    assert!(v["image"]["config"]["env"]
        .as_array()
        .unwrap()
        .contains(&json!("LD_PRELOAD=/usr/lib/libjemalloc.so.2")));
    assert_eq!(v["image"]["config"]["cmd"], json!(["/bin/sh"]));
    let paths = v["files"]["paths"].as_array().unwrap();
    let sh2 = paths.iter().find(|p| p["path"] == "/usr/bin/sh2").unwrap();
    assert_eq!(sh2["hardlink_to"], "/usr/bin/sh");
    assert_eq!(sh2["layer"], 2);
    let os = paths.iter().find(|p| p["path"] == "/etc/os-release").unwrap();
    assert_eq!(os["layer"], 3, "the last writer wins");
}

#[test]
fn same_image_in_every_local_form() {
    let dir = tempfile::tempdir().unwrap();
    let img = sample_image("amd64");
    let layout = dir.path().join("img");
    write_oci_dir(&layout, &img, "v1");
    let oci_archive = dir.path().join("img-oci.tar");
    tar_dir(&layout, &oci_archive);
    let docker_archive = dir.path().join("img-docker.tar");
    write_docker_archive(&docker_archive, &img, "app:v1");

    let refs = [
        format!("oci-dir:{}", layout.display()),
        format!("{}", layout.display()),
        format!("oci-archive:{}", oci_archive.display()),
        format!("{}", oci_archive.display()),
        format!("docker-archive:{}", docker_archive.display()),
        format!("docker-archive:{}:app:v1", docker_archive.display()),
        format!("{}", docker_archive.display()),
    ];
    for r in &refs {
        let v = inspect_json(&[r]);
        assert_eq!(v["image"]["platform"]["architecture"], "amd64", "{r}");
        assert_eq!(v["files"]["count"], EXPECTED.len(), "{r}");
        assert_eq!(tree_listing(r), EXPECTED, "{r}");
    }
    assert_eq!(inspect_json(&[&refs[3]])["image"]["source"], "oci-archive");
    assert_eq!(inspect_json(&[&refs[6]])["image"]["source"], "docker-archive");
}

#[test]
fn docker_archive_from_stdin_and_gzipped() {
    let dir = tempfile::tempdir().unwrap();
    let img = sample_image("amd64");
    let archive = dir.path().join("img.tar");
    write_docker_archive(&archive, &img, "app:v1");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_memlint"));
    let _cache = isolate_cache(&mut cmd);
    let out = cmd
        .args(["inspect", "--format", "json", "--files", "docker-archive:-"])
        .stdin(fs::File::open(&archive).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["files"]["count"], EXPECTED.len());

    let gz = dir.path().join("img.tar.gz");
    let mut e = flate2::write::GzEncoder::new(fs::File::create(&gz).unwrap(), flate2::Compression::fast());
    std::io::copy(&mut fs::File::open(&archive).unwrap(), &mut e).unwrap();
    e.finish().unwrap();
    assert_eq!(tree_listing(&gz.display().to_string()), EXPECTED);
}

/// Docker 29 with the containerd image store saves an OCI index inside the index, gzip layers,
/// and descriptors for platforms that were never pulled, whose blobs are absent.
fn docker29_archive(dir: &Path) -> std::path::PathBuf {
    let layout = dir.join("d29");
    let w = OciWriter::new(&layout);
    let amd = w.image(&sample_image("amd64"));
    let arm = w.image(&sample_image("arm64"));
    // arm64 was never pulled: drop its manifest blob.
    let arm_hex = arm["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_string();
    fs::remove_file(layout.join("blobs/sha256").join(&arm_hex)).unwrap();
    let mut attestation = json!({
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": format!("sha256:{}", "ab".repeat(32)),
        "size": 100,
        "platform": {"os": "unknown", "architecture": "unknown"},
        "annotations": {"vnd.docker.reference.type": "attestation-manifest"}
    });
    attestation["annotations"]["vnd.docker.reference.digest"] = amd["digest"].clone();
    let index = w.index(vec![amd.clone(), arm, attestation]);
    let mut top = index.clone();
    top["annotations"] = json!({
        "io.containerd.image.name": "docker.io/library/app:1",
        "org.opencontainers.image.ref.name": "1"
    });
    w.write_index_json(vec![top]);
    let config_path = {
        let m: serde_json::Value = serde_json::from_slice(
            &fs::read(
                layout
                    .join("blobs/sha256")
                    .join(amd["digest"].as_str().unwrap().trim_start_matches("sha256:")),
            )
            .unwrap(),
        )
        .unwrap();
        format!(
            "blobs/sha256/{}",
            m["config"]["digest"]
                .as_str()
                .unwrap()
                .trim_start_matches("sha256:")
        )
    };
    let m: serde_json::Value = serde_json::from_slice(
        &fs::read(
            layout
                .join("blobs/sha256")
                .join(amd["digest"].as_str().unwrap().trim_start_matches("sha256:")),
        )
        .unwrap(),
    )
    .unwrap();
    let layers: Vec<String> = m["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            format!(
                "blobs/sha256/{}",
                l["digest"].as_str().unwrap().trim_start_matches("sha256:")
            )
        })
        .collect();
    fs::write(
        layout.join("manifest.json"),
        serde_json::to_vec(&json!([{"Config": config_path, "RepoTags": ["app:1"], "Layers": layers}]))
            .unwrap(),
    )
    .unwrap();
    let archive = dir.join("d29.tar");
    tar_dir(&layout, &archive);
    archive
}

#[test]
fn docker29_containerd_store_archive() {
    let dir = tempfile::tempdir().unwrap();
    let archive = docker29_archive(dir.path());
    let r = format!("docker-archive:{}", archive.display());
    let v = inspect_json(&[&r]);
    assert_eq!(v["image"]["platform"]["architecture"], "amd64");
    assert_eq!(v["image"]["name"], "docker.io/library/app:1");
    assert_eq!(v["files"]["count"], EXPECTED.len());
    let platforms: Vec<String> = v["image"]["platforms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            format!(
                "{}/{}",
                p["os"].as_str().unwrap(),
                p["architecture"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(platforms, ["linux/amd64", "linux/arm64"]);
    assert_eq!(
        inspect_json(&["--platform", "linux/amd64", &r])["files"]["count"],
        EXPECTED.len()
    );
    assert_eq!(
        inspect_json(&[&format!("{r}:app:1")])["files"]["count"],
        EXPECTED.len()
    );

    // The platform whose blobs were never pulled is named, not tripped over.
    let out = memlint(&["inspect", "--platform", "linux/arm64", &r]);
    assert_eq!(out.status.code(), Some(2));
    let err = error_text(&out);
    assert!(err.contains("linux/arm64") && err.contains("missing"), "{err}");

    let out = memlint(&["inspect", "--platform", "linux/s390x", &r]);
    assert_eq!(out.status.code(), Some(2));
    let err = error_text(&out);
    assert!(
        err.contains("no image for platform linux/s390x") && err.contains("linux/amd64"),
        "{err}"
    );
}

#[test]
fn index_with_two_platforms() {
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("multi");
    let w = OciWriter::new(&layout);
    let amd = w.image(&sample_image("amd64"));
    let arm = w.image(&sample_image("arm64"));
    let idx = w.index(vec![amd, arm]);
    w.write_index_json(vec![with_name(idx, "v1")]);
    let r = format!("oci-dir:{}", layout.display());
    let v = inspect_json(&[&r]);
    assert_eq!(
        v["image"]["platform"]["architecture"], "amd64",
        "linux/amd64 is the default"
    );
    let v = inspect_json(&["--platform", "linux/arm64", &r]);
    assert_eq!(v["image"]["platform"]["architecture"], "arm64");
    assert_eq!(v["files"]["count"], EXPECTED.len());

    // Without amd64 and with two linux platforms, the choice is the user's.
    let layout2 = dir.path().join("arm-only");
    let w = OciWriter::new(&layout2);
    let mut v7 = sample_image("arm");
    v7.variant = Some("v7".into());
    let arm64 = w.image(&sample_image("arm64"));
    let armv7 = w.image(&v7);
    w.write_index_json(vec![arm64, armv7]);
    let out = memlint(&["inspect", &format!("oci-dir:{}", layout2.display())]);
    assert_eq!(out.status.code(), Some(2));
    let err = error_text(&out);
    assert!(
        err.contains("--platform") && err.contains("linux/arm/v7") && err.contains("linux/arm64"),
        "{err}"
    );
    let v = inspect_json(&[
        "--platform",
        "linux/arm/v7",
        &format!("oci-dir:{}", layout2.display()),
    ]);
    assert_eq!(v["image"]["platform"]["variant"], "v7");
}

fn layer_blob_path(layout: &Path, index: usize) -> std::path::PathBuf {
    let idx: serde_json::Value =
        serde_json::from_slice(&fs::read(layout.join("index.json")).unwrap()).unwrap();
    let m = idx["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_string();
    let manifest: serde_json::Value =
        serde_json::from_slice(&fs::read(layout.join("blobs/sha256").join(m)).unwrap()).unwrap();
    let l = manifest["layers"][index]["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_string();
    layout.join("blobs/sha256").join(l)
}

fn expect_error(reference: &str, needles: &[&str]) {
    let out = memlint(&["inspect", reference]);
    let err = error_text(&out);
    assert_eq!(out.status.code(), Some(2), "{reference}: {err}");
    assert!(out.stdout.is_empty());
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "{reference}: `{n}` not in {err}");
    }
}

#[test]
fn layer_bytes_that_do_not_match_the_digest() {
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("img");
    write_oci_dir(&layout, &sample_image("amd64"), "v1");
    let blob = layer_blob_path(&layout, 1);
    let digest = format!("sha256:{}", blob.file_name().unwrap().to_string_lossy());
    // Same length, one byte changed near the end (inside the zstd frame checksum region).
    let mut bytes = fs::read(&blob).unwrap();
    let at = bytes.len() - 5;
    bytes[at] ^= 0xff;
    fs::write(&blob, &bytes).unwrap();
    expect_error(&format!("oci-dir:{}", layout.display()), &["layer 2", &digest]);
}

#[test]
fn truncated_missing_and_non_json() {
    let dir = tempfile::tempdir().unwrap();

    let layout = dir.path().join("truncated");
    write_oci_dir(&layout, &sample_image("amd64"), "v1");
    let blob = layer_blob_path(&layout, 0);
    let bytes = fs::read(&blob).unwrap();
    fs::write(&blob, &bytes[..bytes.len() / 2]).unwrap();
    expect_error(&format!("oci-dir:{}", layout.display()), &["layer 1"]);

    // A plain tar cut in the middle of a member: the tar structure can be completed, but the
    // digest check still catches it.
    let layout = dir.path().join("truncated-plain");
    write_oci_dir(&layout, &sample_image("amd64"), "v1");
    let blob = layer_blob_path(&layout, 2);
    let bytes = fs::read(&blob).unwrap();
    fs::write(&blob, &bytes[..600]).unwrap();
    expect_error(&format!("oci-dir:{}", layout.display()), &["layer 3"]);

    let layout = dir.path().join("missing");
    write_oci_dir(&layout, &sample_image("amd64"), "v1");
    fs::remove_file(layer_blob_path(&layout, 2)).unwrap();
    expect_error(&format!("oci-dir:{}", layout.display()), &["layer", "missing"]);

    let layout = dir.path().join("notjson");
    write_oci_dir(&layout, &sample_image("amd64"), "v1");
    let idx: serde_json::Value =
        serde_json::from_slice(&fs::read(layout.join("index.json")).unwrap()).unwrap();
    let m = idx["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_string();
    fs::write(layout.join("blobs/sha256").join(&m), b"this is { not json").unwrap();
    // The size and digest checks come first: a manifest that changed is reported as such
    // (here its size, 18 bytes against the descriptor's).
    expect_error(
        &format!("oci-dir:{}", layout.display()),
        &["manifest", "is 18 bytes, but its descriptor says"],
    );
    // A manifest whose digest matches but that is not JSON.
    let bad = b"this is { not json";
    let hex = sha256(bad);
    fs::write(layout.join("blobs/sha256").join(&hex), bad).unwrap();
    let mut idx2 = idx.clone();
    idx2["manifests"][0]["digest"] = json!(format!("sha256:{hex}"));
    idx2["manifests"][0]["size"] = json!(bad.len());
    fs::write(layout.join("index.json"), serde_json::to_vec(&idx2).unwrap()).unwrap();
    expect_error(&format!("oci-dir:{}", layout.display()), &["not valid JSON"]);
    fs::write(layout.join("index.json"), b"[oops").unwrap();
    expect_error(
        &format!("oci-dir:{}", layout.display()),
        &["index.json", "not valid JSON"],
    );

    // A truncated docker-archive, read in place and from stdin.
    let archive = dir.path().join("img.tar");
    write_docker_archive(&archive, &sample_image("amd64"), "app:v1");
    let bytes = fs::read(&archive).unwrap();
    let cut = dir.path().join("cut.tar");
    fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let out = memlint(&["inspect", &format!("docker-archive:{}", cut.display())]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_memlint"));
    let _cache = isolate_cache(&mut cmd);
    let out = cmd
        .args(["inspect", "docker-archive:-"])
        .stdin(fs::File::open(&cut).unwrap())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn classic_archive_layer_must_match_diff_id() {
    let dir = tempfile::tempdir().unwrap();
    let img = sample_image("amd64");
    let archive = dir.path().join("img.tar");
    write_docker_archive(&archive, &img, "app:v1");
    // Rewrite the archive with the second layer's content changed but its name kept.
    let mut a = tar::Archive::new(fs::File::open(&archive).unwrap());
    let mut b = tar::Builder::new(Vec::new());
    let second = format!("{}/layer.tar", sha256(&img.layers[1].tar()));
    for e in a.entries().unwrap() {
        let mut e = e.unwrap();
        let path = e.path().unwrap().to_string_lossy().into_owned();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut e, &mut data).unwrap();
        if path == second {
            data = LayerSpec::new(Comp::Plain).file("evil", b"changed").tar();
        }
        append(&mut b, &path, &data);
    }
    let bad = dir.path().join("bad.tar");
    fs::write(&bad, b.into_inner().unwrap()).unwrap();
    expect_error(
        &format!("docker-archive:{}", bad.display()),
        &["layer 2", "diff_id", &second],
    );
}

#[test]
fn references_reach_their_sources() {
    // Nothing listens on port 1: each source says where it looked, with exit code 2, and
    // nothing leaves the machine.
    let out = memlint(&["inspect", "registry:127.0.0.1:1/app:1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        error_text(&out).contains("registry 127.0.0.1:1"),
        "{}",
        error_text(&out)
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_memlint"))
        .args(["inspect", "docker:app:1"])
        .env("DOCKER_HOST", "unix:///definitely/not/a/socket")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        error_text(&out).contains("/definitely/not/a/socket"),
        "{}",
        error_text(&out)
    );
    let out = memlint(&["inspect", "oci-dir:/definitely/not/here"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/definitely/not/here"));
    let out = memlint(&["inspect", "--platform", "linux", "oci-dir:/x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("os/arch"));
}

#[test]
fn rootfs_folder() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("rootfs");
    fs::create_dir_all(root.join("usr/lib")).unwrap();
    fs::create_dir_all(root.join("etc")).unwrap();
    fs::write(root.join("etc/os-release"), "ID=debian\n").unwrap();
    std::os::unix::fs::symlink("usr/lib", root.join("lib")).unwrap();
    std::os::unix::fs::symlink("/", root.join("etc/evil")).unwrap();
    let mut elf = vec![0u8; 64];
    elf[..4].copy_from_slice(b"\x7fELF");
    elf[4] = 2;
    elf[5] = 1;
    elf[18] = 183;
    fs::write(root.join("usr/lib/libx.so"), &elf).unwrap();
    let r = format!("dir:{}", root.display());
    assert_eq!(
        tree_listing(&r),
        [
            "/etc dir ",
            "/etc/evil symlink /",
            "/etc/os-release file ",
            "/lib symlink usr/lib",
            "/usr dir ",
            "/usr/lib dir ",
            "/usr/lib/libx.so file ",
        ]
    );
    let v = inspect_json(&[&r]);
    assert_eq!(v["image"]["source"], "dir");
    assert_eq!(
        v["image"]["platform"]["architecture"], "arm64",
        "told by the ELF files"
    );
    assert_eq!(v["files"]["kept_files"], 1, "os-release is kept");
    // A bare folder without oci-layout is a root file system too.
    assert_eq!(
        inspect_json(&[&root.display().to_string()])["image"]["source"],
        "dir"
    );
}
