//! Round trips through real tools: skopeo converts a fixture between forms, umoci unpacks it
//! to disk, and memlint must see the same tree in every case.

use crate::common;

use common::*;
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::Command;

/// umoci 0.4 and skopeo's docker-archive writer do not take zstd layers, so the round trips use
/// gzip and plain layers; `zstd_layers_survive_oci_copies` covers zstd where the tools allow it.
fn image(second: Comp) -> ImageSpec {
    ImageSpec::new("amd64")
        .layer(
            LayerSpec::new(Comp::Gzip)
                .dir("usr")
                .dir("usr/lib")
                .symlink("lib", "usr/lib")
                .file("usr/lib/libc.so.6", b"libc")
                .file("etc/a/x", b"x")
                .file("etc/a/y", b"y")
                .file("var/cache/old", b"old")
                .file("opt/keep", b"k"),
        )
        .layer(
            LayerSpec::new(second)
                .whiteout("etc/a/x")
                .opaque("var/cache")
                .file("var/cache/new", b"new")
                .file("usr/lib/libjemalloc.so.2", b"jemalloc")
                .hardlink("opt/keep2", "opt/keep")
                .symlink("usr/local/lib/jem", "/lib/libjemalloc.so.2"),
        )
        .layer(
            LayerSpec::new(Comp::Plain)
                .whiteout("opt/keep")
                .file("etc/os-release", b"ID=test\n"),
        )
}

/// `path type target` for every path under a folder unpacked on the host.
fn host_listing(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = format!("/{}", p.strip_prefix(root).unwrap().display());
            let m = fs::symlink_metadata(&p).unwrap();
            let line = if m.file_type().is_symlink() {
                format!("{rel} symlink {}", fs::read_link(&p).unwrap().display())
            } else if m.is_dir() {
                stack.push(p.clone());
                format!("{rel} dir ")
            } else {
                format!("{rel} file ")
            };
            out.insert(line);
        }
    }
    out
}

#[test]
fn skopeo_conversions_give_the_same_tree() {
    require_tool("skopeo");
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("img");
    write_oci_dir(&layout, &image(Comp::Gzip), "v1");
    let src = format!("oci:{}:v1", layout.display());
    let docker = dir.path().join("docker.tar");
    let oci_archive = dir.path().join("oci.tar");
    let copy = dir.path().join("copy");
    run(Command::new("skopeo").args([
        "copy",
        &src,
        &format!("docker-archive:{}:app:v1", docker.display()),
    ]));
    run(Command::new("skopeo").args(["copy", &src, &format!("oci-archive:{}:v1", oci_archive.display())]));
    run(Command::new("skopeo").args(["copy", &src, &format!("oci:{}:v1", copy.display())]));

    let reference = format!("oci-dir:{}", layout.display());
    let expected = tree_listing(&reference);
    let expected_json = inspect_json(&[&reference]);
    for r in [
        format!("docker-archive:{}", docker.display()),
        format!("oci-archive:{}", oci_archive.display()),
        format!("oci-dir:{}:v1", copy.display()),
        docker.display().to_string(),
    ] {
        assert_eq!(tree_listing(&r), expected, "{r}");
        let v = inspect_json(&[&r]);
        assert_eq!(v["files"]["count"], expected_json["files"]["count"], "{r}");
        assert_eq!(v["image"]["platform"], expected_json["image"]["platform"], "{r}");
        let diff_ids = |v: &serde_json::Value| -> Vec<serde_json::Value> {
            v["image"]["layers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l["diff_id"].clone())
                .collect()
        };
        assert_eq!(
            diff_ids(&v),
            diff_ids(&expected_json),
            "{r}: same uncompressed layers"
        );
    }
}

#[test]
fn umoci_unpack_agrees_with_the_merged_tree() {
    require_tool("umoci");
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("img");
    write_oci_dir(&layout, &image(Comp::Gzip), "v1");
    let bundle = dir.path().join("bundle");
    run(Command::new("umoci").args([
        "unpack",
        "--rootless",
        "--image",
        &format!("{}:v1", layout.display()),
        &bundle.display().to_string(),
    ]));
    let on_disk = host_listing(&bundle.join("rootfs"));
    let ours: BTreeSet<String> = tree_listing(&format!("oci-dir:{}", layout.display()))
        .into_iter()
        .collect();
    assert_eq!(ours, on_disk);
    // And reading the unpacked folder as a root file system gives the same again.
    let rootfs: BTreeSet<String> = tree_listing(&format!("dir:{}", bundle.join("rootfs").display()))
        .into_iter()
        .collect();
    assert_eq!(rootfs, on_disk);
}

#[test]
fn zstd_layers_survive_oci_copies() {
    require_tool("skopeo");
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("img");
    write_oci_dir(&layout, &image(Comp::Zstd), "v1");
    let src = format!("oci:{}:v1", layout.display());
    let oci_archive = dir.path().join("oci.tar");
    run(Command::new("skopeo").args(["copy", &src, &format!("oci-archive:{}:v1", oci_archive.display())]));
    let expected = tree_listing(&format!("oci-dir:{}", layout.display()));
    assert_eq!(
        tree_listing(&format!("oci-archive:{}", oci_archive.display())),
        expected
    );
    let v = inspect_json(&[&format!("oci-archive:{}", oci_archive.display())]);
    assert_eq!(v["image"]["layers"][1]["compression"], "zstd");
}
