//! Images from the test suites of apko, buildah, containerd, containers/storage, cosign,
//! distribution, image-spec, imgutil, jib, moby, notation, oras, oras-go and podman
//! (`shared/peer-fixtures/peer3/`, listed with what their origins expect in its README.md):
//! each reads or is refused as its row says, plus one regression test per item of reader
//! issue #29, on fixtures copied into `testdata/peer3/` (see its NOTICE.md) or built here.

use crate::common;

use super::fixture_table::*;
use common::*;
use serde_json::Value;

fn peer3(name: &str) -> String {
    format!(
        "{}/../shared/peer-fixtures/peer3/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A fixture copied into `testdata/peer3/` for the regression tests.
fn kept(name: &str) -> String {
    format!("{}/testdata/peer3/{name}", env!("CARGO_MANIFEST_DIR"))
}

const EXPECT: &[Expect] = &[
    ok(
        "jib__docker-save.tar",
        "docker-archive:",
        "",
        &[],
        2,
        "linux/amd64",
        &[],
    ),
    ok(
        "jib__jib-image.tar",
        "docker-archive:",
        "",
        &[],
        2,
        "linux/amd64",
        &[],
    ),
    ok(
        "jib__busybox-jib.tar",
        "docker-archive:",
        "",
        &[],
        2,
        "linux/amd64",
        &["/hello", "/bin/busybox"],
    ),
    ok(
        "oras-go__hello-world.tar",
        "",
        "",
        &[],
        1,
        "linux/amd64",
        &["/hello"],
    ),
    ok(
        "oras-go__hello-world-prefixed-path.tar",
        "",
        "",
        &[],
        1,
        "linux/amd64",
        &["/hello"],
    ),
    refused_with_args(
        "oras__zot-images",
        "oci-dir:",
        ":multi",
        &["--platform", "linux/amd64"],
        &["has no `rootfs` key", "config.md"],
    ),
    refused_with_args(
        "oras__zot-artifacts",
        "oci-dir:",
        ":multi",
        &["--platform", "linux/amd64"],
        &["has no `rootfs` key", "config.md"],
    ),
    refused_with_args(
        "notation__e2e-valid-signature",
        "oci-dir:",
        "",
        &[],
        &["memlint::artifact", "application/vnd.notation.config"],
    ),
    refused_with_args(
        "notation__e2e-with-timestamped-signature",
        "oci-dir:",
        "",
        &[],
        &["memlint::artifact"],
    ),
    ok(
        "apko__golden",
        "oci-dir:",
        "",
        &[],
        1,
        "linux/amd64",
        &[],
    ),
    ok(
        "apko__top_image",
        "oci-dir:",
        "",
        &[],
        2,
        "linux/amd64",
        &[],
    ),
    ok(
        "apko__base_image",
        "oci-dir:",
        "",
        &[],
        1,
        "linux/amd64",
        &[],
    ),
    ok(
        "imgutil__busybox",
        "oci-dir:",
        "",
        &[],
        1,
        "linux/amd64",
        &["/bin/busybox"],
    ),
    refused_with_args(
        "imgutil__busybox-sparse",
        "oci-dir:",
        "",
        &[],
        &["memlint::missing_blob", "layer"],
    ),
    ok(
        "imgutil__my-previous-image",
        "oci-dir:",
        "",
        &[],
        1,
        "unknown platform",
        &["/some-file"],
    ),
    refused_with_args(
        "imgutil__index-with-docker-media-type",
        "oci-dir:",
        "",
        &[],
        &["memlint::missing_blob"],
    ),
    refused_with_args(
        "imgutil__busybox-multi-platform",
        "oci-dir:",
        "",
        &[],
        &["memlint::missing_blob"],
    ),
    refused_with_args(
        "podman__docker-two-images.tar.xz",
        "docker-archive:",
        "",
        &[],
        &["memlint::ambiguous", "example.com/empty:latest", "example.com/empty/but:different"],
    ),
    ok(
        "podman__docker-unnamed.tar.xz",
        "docker-archive:",
        "",
        &[],
        1,
        "linux/amd64",
        &[],
    ),
    ok(
        "podman__docker-two-names.tar.xz",
        "docker-archive:",
        "",
        &[],
        1,
        "linux/amd64",
        &[],
    ),
    ok(
        "podman__oci-unnamed.tar.gz",
        "oci-archive:",
        "",
        &[],
        1,
        "linux/amd64",
        &[],
    ),
    ok(
        "podman__oci-non-docker-name.tar.gz",
        "oci-archive:",
        ":UPPERCASE-IS-INVALID",
        &[],
        1,
        "linux/amd64",
        &[],
    ),
    refused_with_args(
        "moby__emptyLayer.tar",
        "",
        "",
        &[],
        &["neither manifest.json"],
    ),
    ok(
        "moby-special__emptyfs.tar",
        "docker-archive:",
        "",
        &[],
        1,
        "linux/amd64",
        &[],
    ),
    ok(
        "moby-special__dangling.tar",
        "",
        "",
        &[],
        0,
        "linux/amd64",
        &[],
    ),
    ok(
        "moby-special__multilayer.tar",
        "",
        "",
        &[],
        3,
        "linux/amd64",
        &["/foo", "/bar", "/hello"],
    ),
    refused_with_args(
        "moby-special__configtarget",
        "oci-dir:",
        "",
        &[],
        &["config"],
    ),
    refused_with_args(
        "moby-special__emptyindex",
        "oci-dir:",
        "",
        &[],
        &["lists no manifests"],
    ),
    refused_with_args(
        "moby-special__textplain",
        "oci-dir:",
        "",
        &[],
        &["memlint::artifact", "application/vnd.oci.empty.v1+json"],
    ),
    ok(
        "moby-special__twoplatform",
        "oci-dir:",
        "",
        &[],
        1,
        "linux/amd64",
        &["/bash"],
    ),
    ok(
        "moby-special__partial-without-native",
        "oci-dir:",
        "",
        &["--platform", "linux/arm64"],
        1,
        "linux/arm64",
        &[],
    ),
    ok(
        "containerd-breakout__SymlinkAbsolute",
        "oci-dir:",
        "",
        &[],
        1,
        "linux/amd64",
        &["/etc/unbroken"],
    ),
    ok(
        "containerd-breakout__HardlinkRelative",
        "oci-dir:",
        "",
        &[],
        1,
        "linux/amd64",
        &["/breakouts/mypasswd", "/etc/passwd"],
    ),
    ok(
        "containerd-breakout__HardlinkDirectRelative",
        "oci-dir:",
        "",
        &[],
        1,
        "linux/amd64",
        &["/localpasswd", "/etc/passwd"],
    ),
    ok(
        "containerd-breakout__SymlinkOverrideDirectory",
        "oci-dir:",
        "",
        &[],
        2,
        "linux/amd64",
        &["/etc/localpasswd"],
    ),
    ok(
        "containerd-breakout__DirectoryOverrideSymlink",
        "oci-dir:",
        "",
        &[],
        2,
        "linux/amd64",
        &["/localetc/localpasswd"],
    ),
    refused_with_args(
        "containerd-breakout__WhiteoutRoot",
        "oci-dir:",
        "",
        &[],
        &["memlint::layer", "invalid whiteout", "`.wh..`"],
    ),
    refused_with_args(
        "containerd-breakout__WhiteoutParent",
        "oci-dir:",
        "",
        &[],
        &["memlint::layer", "invalid whiteout", "`etc/.wh...`"],
    ),
    ok(
        "containerd-breakout__WhiteoutSymlinkPath",
        "oci-dir:",
        "",
        &[],
        2,
        "linux/amd64",
        &["/etc/passwd"],
    ),
    ok(
        "containerd-breakout__WhiteoutDirectoryName",
        "oci-dir:",
        "",
        &[],
        2,
        "linux/amd64",
        &["/.wh.etc/somefile", "/etc/passwd"],
    ),
    ok(
        "containerd-breakout__WhiteoutRelativePath",
        "oci-dir:",
        "",
        &[],
        2,
        "linux/amd64",
        &[],
    ),
    ok(
        "containerd-breakout__SymlinkOverridePath",
        "oci-dir:",
        "",
        &[],
        1,
        "linux/amd64",
        &["/foo/tmp/breakout-peer3", "/tmp/breakout-peer3"],
    ),
    ok(
        "containerd-breakout__HardlinkSymlinkBeforeCreateTarget",
        "oci-dir:",
        "",
        &[],
        1,
        "linux/amd64",
        &["/localpasswd-dup", "/etc/passwd"],
    ),
    ok(
        "buildah-conformance__add-dir-not-dir",
        "oci-dir:",
        "",
        &[],
        2,
        "linux/amd64",
        &["/fileone"],
    ),
    ok(
        "buildah-conformance__add-not-dir-dir",
        "oci-dir:",
        "",
        &[],
        2,
        "linux/amd64",
        &["/new-directory"],
    ),
    ok(
        "buildah-conformance__add-populated-dir-not-dir",
        "oci-dir:",
        "",
        &[],
        4,
        "linux/amd64",
        &["/dirone"],
    ),
    ok(
        "buildah-conformance__add-parent-symlink",
        "oci-dir:",
        "",
        &[],
        1,
        "linux/amd64",
        &["/etc/myfile"],
    ),
    ok(
        "containers-storage__broken-tar-layer",
        "oci-dir:",
        "",
        &[],
        1,
        "linux/amd64",
        &["/root/.cpanm/work/1395823785.24209/Plack-1.0030/blib/man3/Plack::Middleware::LighttpdScriptNameFix.3pm"],
    ),
    ok(
        "containers-storage__zstd-chunked-layer",
        "oci-dir:",
        "",
        &[],
        1,
        "linux/amd64",
        &[],
    ),
    ok(
        "cosign__save-layout",
        "oci-dir:",
        "",
        &[],
        1,
        "linux/amd64",
        &[],
    ),
    refused_with_args(
        "image-spec__layer-size-string",
        "oci-dir:",
        "",
        &[],
        &["layers[0].size", "manifest.md"],
    ),
    refused_with_args(
        "distribution__foreign-layer",
        "oci-dir:",
        "",
        &[],
        &["foreign", "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", "https://foo/bar"],
    ),
];

/// One path's row of `inspect --files --format json`.
fn file_row<'v>(v: &'v Value, path: &str) -> &'v Value {
    v["files"]["paths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["path"] == path)
        .unwrap_or_else(|| panic!("{path} not in {:?}", listed_paths(v)))
}

fn files_json(args: &[&str]) -> Value {
    let mut all = vec!["--no-cache", "--files"];
    all.extend_from_slice(args);
    inspect_json(&all)
}

#[test]
fn every_fixture_reads_or_is_refused_as_its_origin_expects() {
    let rows = readme_fixtures(&peer3("README.md"), "## Copied fixtures");
    check_every_fixture(
        EXPECT,
        &rows,
        52,
        "tests/reading/peer3.rs",
        peer3,
        &["not valid JSON", "broken tool"],
    );
}

/// Builds an OCI layout at `root` with one image whose layer blob is `blob` (media type
/// `media_type`, the tar `tar` inside it) and names it `latest`.
fn layout_with_blob(root: &std::path::Path, tar: &[u8], blob: &[u8], media_type: &str) {
    let w = OciWriter::new(root);
    let layer = w.blob(blob, media_type);
    let diff_id = format!("sha256:{}", sha256(tar));
    let config = w.blob(
        &ImageSpec::new("amd64")
            .layer(LayerSpec::new(Comp::Plain))
            .config_json(&[diff_id]),
        "application/vnd.oci.image.config.v1+json",
    );
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config,
        "layers": [layer],
    });
    let d = w.blob(
        &serde_json::to_vec(&manifest).unwrap(),
        "application/vnd.oci.image.manifest.v1+json",
    );
    w.write_index_json(vec![with_name(d, "latest")]);
}

fn xz_bytes(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut out = Vec::new();
    let mut w = lzma_rust2::XzWriter::new(&mut out, lzma_rust2::XzOptions::default()).unwrap();
    w.write_all(data).unwrap();
    w.finish().unwrap();
    out
}

fn bzip2_bytes(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut w = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    w.write_all(data).unwrap();
    w.finish().unwrap()
}

/// #29 item 1: an index entry whose `artifactType` is the image config media type (apko, ko,
/// crane) is an image: linux/amd64 by default, linux/arm64 on request.
#[test]
fn image_config_artifact_type_is_an_image() {
    let golden = format!("oci-dir:{}", kept("apko__golden"));
    let v = inspect_json(&["--no-cache", &golden]);
    assert_eq!(platform_of(&v), "linux/amd64");
    assert_eq!(
        v["image"]["manifest_digest"],
        "sha256:69f0237c7f8cf0b8a329d1bf1d6870c870c4ec323e39d3a6da59596632d0f2f4"
    );
    let arm = inspect_json(&["--no-cache", "--platform", "linux/arm64", &golden]);
    assert_eq!(platform_of(&arm), "linux/arm64");
    assert_eq!(
        arm["image"]["manifest_digest"],
        "sha256:124c885f834cfaf1329987457a9651a68c4fb9733d4462ae6288b98011277858"
    );
    // Any other artifactType is still an artifact.
    let tmp = tempfile::tempdir().unwrap();
    let w = OciWriter::new(tmp.path());
    let mut d = w.image(&ImageSpec::new("amd64").layer(LayerSpec::new(Comp::Plain).file("a", b"a")));
    d["artifactType"] = Value::from("application/vnd.example.sbom+json");
    w.write_index_json(vec![d]);
    fails_with(
        &[
            "inspect",
            "--no-cache",
            &format!("oci-dir:{}", tmp.path().display()),
        ],
        &["memlint::artifact", "application/vnd.example.sbom+json"],
    );
}

/// #29 item 2: jib's `manifest.json` keys (`config`, `repoTags`, `layers`) match as Go matches
/// them, whatever their case.
#[test]
fn jib_manifest_keys_match_without_case() {
    let v = inspect_json(&[
        "--no-cache",
        &format!("docker-archive:{}", kept("jib__jib-image.tar")),
    ]);
    let layers = v["image"]["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 2);
    let starts = |key: &str, i: usize, prefix: &str| {
        let d = layers[i][key].as_str().unwrap();
        assert!(d.starts_with(prefix), "layer {i} {key} {d}");
    };
    starts("diff_id", 0, "sha256:5e701122");
    starts("diff_id", 1, "sha256:f1ac3015");
    starts("digest", 0, "sha256:0011328a");
    starts("digest", 1, "sha256:c10ef24a");
    // Chosen by the name under `repoTags`.
    let by_name = inspect_json(&[
        "--no-cache",
        &format!(
            "docker-archive:{}:extraction.test:latest",
            kept("jib__jib-image.tar")
        ),
    ]);
    assert_eq!(by_name["image"]["name"], "extraction.test:latest");
    // busybox-jib: the `/hello` its test runs.
    let busybox = files_json(&[&format!("docker-archive:{}", peer3("jib__busybox-jib.tar"))]);
    assert!(listed_paths(&busybox).iter().any(|p| p == "/hello"));
    // A key of the wrong type is named.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bad.tar");
    let mut b = tar::Builder::new(Vec::new());
    append(&mut b, "manifest.json", br#"[{"config": 7, "layers": []}]"#);
    std::fs::write(&out, b.into_inner().unwrap()).unwrap();
    let err = fails_with(
        &[
            "inspect",
            "--no-cache",
            &format!("docker-archive:{}", out.display()),
        ],
        &["`Config` is a JSON number, not a string", "RepoTags"],
    );
    assert!(!err.contains("not valid JSON"), "{err}");
}

/// #29 item 3: a header with ustar magic and GNU version bytes keeps its `prefix`.
#[test]
fn ustar_prefix_under_gnu_version_bytes_is_kept() {
    let v = files_json(&[&format!(
        "oci-dir:{}",
        kept("containers-storage__broken-tar-layer")
    )]);
    let paths = listed_paths(&v);
    let deep = "/root/.cpanm/work/1395823785.24209/Plack-1.0030/blib/man3/Plack::Middleware::LighttpdScriptNameFix.3pm";
    assert!(paths.iter().any(|p| p == deep), "{paths:?}");
    assert!(
        !paths
            .iter()
            .any(|p| p == "/Plack::Middleware::LighttpdScriptNameFix.3pm"),
        "{paths:?}"
    );
}

/// #29 item 4: `"diff_ids": null` is an image with no layers, checked against the manifest.
#[test]
fn null_diff_ids_is_no_layers() {
    let v = inspect_json(&["--no-cache", &kept("moby-special__dangling.tar")]);
    assert_eq!(v["image"]["layers"].as_array().unwrap().len(), 0);
    assert_eq!(platform_of(&v), "linux/amd64");
    // A manifest that lists a layer beside it does not agree with it.
    let tmp = tempfile::tempdir().unwrap();
    let w = OciWriter::new(tmp.path());
    let (blob, mt, _) = LayerSpec::new(Comp::Plain).file("a", b"a").blob();
    let layer = w.blob(&blob, mt);
    let config = w.blob(
        br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":null}}"#,
        "application/vnd.oci.image.config.v1+json",
    );
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config,
        "layers": [layer],
    });
    let d = w.blob(
        &serde_json::to_vec(&manifest).unwrap(),
        "application/vnd.oci.image.manifest.v1+json",
    );
    w.write_index_json(vec![d]);
    fails_with(
        &[
            "inspect",
            "--no-cache",
            &format!("oci-dir:{}", tmp.path().display()),
        ],
        &["the manifest lists 1 layers but the config's rootfs.diff_ids lists 0"],
    );
}

/// #29 item 5: JSON of the wrong shape names the key and what the spec says; a config with no
/// `os` (2013) is linux; the default platform is found past a config that cannot be read; an
/// empty index named says so.
#[test]
fn wrong_shapes_name_the_key() {
    let zot = kept("oras__zot-images");
    let err = fails_with(
        &["inspect", "--no-cache", &format!("oci-dir:{zot}:multi")],
        &[
            "memlint::not_an_image",
            "has no `rootfs` key",
            "config.md",
            "rootfs",
        ],
    );
    assert!(
        !err.contains("not valid JSON") && !err.contains("broken tool"),
        "{err}"
    );
    fails_with(
        &["inspect", "--no-cache", &format!("oci-dir:{zot}:empty_index")],
        &["`empty_index` is an image index that lists no manifests", "multi"],
    );
    let err = fails_with(
        &[
            "inspect",
            "--no-cache",
            &format!("oci-dir:{}", kept("image-spec__layer-size-string")),
        ],
        &[
            "`layers[0].size`",
            "string \"10240\"",
            "manifest.md",
            "a number of bytes",
        ],
    );
    assert!(!err.contains("not valid JSON"), "{err}");
    let v = inspect_json(&["--no-cache", &kept("moby-special__emptyfs.tar")]);
    assert_eq!(platform_of(&v), "linux/amd64");
    assert_eq!(v["image"]["layers"].as_array().unwrap().len(), 1);

    // Two unnamed images without platforms in the index: the first's config is absent, the
    // second is linux/amd64 and is read.
    let tmp = tempfile::tempdir().unwrap();
    let w = OciWriter::new(tmp.path());
    let mut broken = w.image(&ImageSpec::new("arm64").layer(LayerSpec::new(Comp::Plain).file("x", b"x")));
    let good = w.image(&ImageSpec::new("amd64").layer(LayerSpec::new(Comp::Plain).file("y", b"y")));
    let manifest_path = tmp
        .path()
        .join("blobs/sha256")
        .join(broken["digest"].as_str().unwrap().trim_start_matches("sha256:"));
    let manifest: Value = serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    let config_hex = manifest["config"]["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:");
    std::fs::remove_file(tmp.path().join("blobs/sha256").join(config_hex)).unwrap();
    broken.as_object_mut().unwrap().remove("platform");
    let mut good_entry = good.clone();
    good_entry.as_object_mut().unwrap().remove("platform");
    w.write_index_json(vec![broken, good_entry]);
    let v = inspect_json(&["--no-cache", &format!("oci-dir:{}", tmp.path().display())]);
    assert_eq!(platform_of(&v), "linux/amd64");
    assert_eq!(v["image"]["manifest_digest"], good["digest"]);
}

/// #29 item 6: whiteouts whose target is not inside their folder end the run, naming the
/// layer and the entry, as containerd refuses them.
#[test]
fn invalid_whiteouts_are_refused() {
    for (fixture, entry) in [
        ("containerd-breakout__WhiteoutRoot", "`.wh..`"),
        ("containerd-breakout__WhiteoutParent", "`etc/.wh...`"),
    ] {
        let err = fails_with(
            &["inspect", "--no-cache", &format!("oci-dir:{}", kept(fixture))],
            &[
                "memlint::layer",
                "cannot read layer 2",
                entry,
                "invalid whiteout",
                "containerd",
            ],
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    // A whiteout named `.wh.` alone deletes nothing inside its folder either.
    let tmp = tempfile::tempdir().unwrap();
    let img = ImageSpec::new("amd64")
        .layer(LayerSpec::new(Comp::Plain).file("etc/passwd", b"root"))
        .layer(LayerSpec::new(Comp::Plain).file("etc/.wh.", b""));
    write_oci_dir(tmp.path(), &img, "latest");
    fails_with(
        &[
            "inspect",
            "--no-cache",
            &format!("oci-dir:{}", tmp.path().display()),
        ],
        &["cannot read layer 2", "`etc/.wh.`", "invalid whiteout"],
    );
}

/// #29 item 7: xz and bzip2 archives (path and standard input) and layers read as gzip and
/// zstd do, bounded by the same limits.
#[test]
fn xz_and_bzip2_read_like_gzip() {
    let two = kept("podman__docker-two-images.tar.xz");
    fails_with(
        &["inspect", "--no-cache", &format!("docker-archive:{two}")],
        &[
            "memlint::ambiguous",
            "example.com/empty:latest",
            "example.com/empty/but:different",
        ],
    );
    for pick in [
        "@0",
        "@1",
        "example.com/empty:latest",
        "example.com/empty/but:different",
    ] {
        let v = inspect_json(&["--no-cache", &format!("docker-archive:{two}:{pick}")]);
        assert_eq!(v["image"]["layers"].as_array().unwrap().len(), 1, "{pick}");
    }
    fails_with(
        &[
            "inspect",
            "--no-cache",
            &format!("docker-archive:{two}:foo.com/does/not/exist:latest"),
        ],
        &["memlint::no_such_name"],
    );
    fails_with(
        &["inspect", "--no-cache", &format!("docker-archive:{two}:@2")],
        &["memlint::position_out_of_range", "holds 2 images"],
    );
    // Standard input, xz and bzip2.
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("plain.tar");
    let img = ImageSpec::new("amd64").layer(LayerSpec::new(Comp::Gzip).file("etc/hello", b"hi"));
    write_docker_archive(&plain, &img, "app:1");
    let bytes = std::fs::read(&plain).unwrap();
    for (name, packed) in [("a.tar.xz", xz_bytes(&bytes)), ("a.tar.bz2", bzip2_bytes(&bytes))] {
        let path = tmp.path().join(name);
        std::fs::write(&path, &packed).unwrap();
        let v = files_json(&[&path.display().to_string()]);
        assert!(listed_paths(&v).iter().any(|p| p == "/etc/hello"), "{name}");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_memlint"))
            .args(["inspect", "--no-cache", "--format", "json", "docker-archive:-"])
            .stdin(std::fs::File::open(&path).unwrap())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{name}: {}", error_text(&out));
    }
    // Layers: `tar+xz` and `tar+bzip2`, and their compression named.
    let tar = LayerSpec::new(Comp::Plain)
        .file("etc/os-release", b"ID=test\n")
        .tar();
    for (blob, mt, word) in [
        (xz_bytes(&tar), "application/vnd.oci.image.layer.v1.tar+xz", "xz"),
        (
            bzip2_bytes(&tar),
            "application/vnd.oci.image.layer.v1.tar+bzip2",
            "bzip2",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        layout_with_blob(dir.path(), &tar, &blob, mt);
        let v = files_json(&[&format!("oci-dir:{}", dir.path().display())]);
        assert_eq!(v["image"]["layers"][0]["compression"], word);
        assert!(listed_paths(&v).iter().any(|p| p == "/etc/os-release"), "{word}");
    }
    // A bomb: 16 MiB of zeros, over the unpacked-size limit, is stopped by it.
    let zeros = LayerSpec::new(Comp::Plain)
        .file("zeros", &vec![0u8; 16 << 20])
        .tar();
    for (blob, mt) in [
        (xz_bytes(&zeros), "application/vnd.oci.image.layer.v1.tar+xz"),
        (
            bzip2_bytes(&zeros),
            "application/vnd.oci.image.layer.v1.tar+bzip2",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        layout_with_blob(dir.path(), &zeros, &blob, mt);
        fails_with(
            &[
                "inspect",
                "--no-cache",
                "--limit",
                "max_layer_bytes=1048576",
                &format!("oci-dir:{}", dir.path().display()),
            ],
            &["memlint::limit", "max_layer_bytes"],
        );
    }
}

/// #29 item 7 also: an xz layer whose block asks for a 1 GiB dictionary is refused before the
/// dictionary is allocated, saying why.
#[test]
fn xz_dictionary_over_the_memory_limit_is_refused() {
    let tar = LayerSpec::new(Comp::Plain).file("a", b"a").tar();
    let mut stream = xz_bytes(&tar);
    // The first block header follows the 12-byte stream header: its size byte, its flags,
    // optional sizes (xz varints), then the LZMA2 filter (0x21, one property byte: the
    // dictionary size), padding and the header's CRC32.
    let start = 12;
    let header_len = (stream[start] as usize + 1) * 4;
    let flags = stream[start + 1];
    let mut at = start + 2;
    for present in [flags & 0x40 != 0, flags & 0x80 != 0] {
        if present {
            while stream[at] & 0x80 != 0 {
                at += 1;
            }
            at += 1;
        }
    }
    assert_eq!(&stream[at..at + 2], &[0x21, 0x01], "the LZMA2 filter");
    stream[at + 2] = 36;
    let mut crc = flate2::Crc::new();
    crc.update(&stream[start..start + header_len - 4]);
    stream[start + header_len - 4..start + header_len].copy_from_slice(&crc.sum().to_le_bytes());
    let dir = tempfile::tempdir().unwrap();
    layout_with_blob(
        dir.path(),
        &tar,
        &stream,
        "application/vnd.oci.image.layer.v1.tar+xz",
    );
    fails_with(
        &[
            "inspect",
            "--no-cache",
            &format!("oci-dir:{}", dir.path().display()),
        ],
        &[
            "memlint::layer",
            "more memory than memlint gives one layer (96 MiB)",
            "xz -9",
        ],
    );
}

/// #29 item 8: a config with no os or architecture over tar layers is a file system image of
/// unknown platform, read; over cosign's layers a signature, over DSSE layers an attestation.
#[test]
fn unplatformed_configs_are_told_apart() {
    let out = memlint(&[
        "inspect",
        "--no-cache",
        "--files",
        "--format",
        "json",
        &format!("oci-dir:{}", kept("imgutil__my-previous-image")),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", error_text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(platform_of(&v), "unknown platform");
    assert!(listed_paths(&v).iter().any(|p| p == "/some-file"));
    assert!(
        v["image"]["layers"][0]["diff_id"]
            .as_str()
            .unwrap()
            .starts_with("sha256:ebc931a4"),
        "{v}"
    );
    let warned = String::from_utf8_lossy(&out.stderr);
    assert!(
        warned.contains("file system image of unknown platform"),
        "{warned}"
    );

    let cosign = format!("oci-dir:{}", kept("cosign__save-layout"));
    let v = inspect_json(&["--no-cache", &cosign]);
    assert_eq!(platform_of(&v), "linux/amd64");
    let err = fails_with(
        &["inspect", "--no-cache", &format!("{cosign}:@1")],
        &["memlint::artifact", "a signature", "cosign"],
    );
    assert!(!err.contains("attestation"), "{err}");
    fails_with(
        &["inspect", "--no-cache", &format!("{cosign}:@2")],
        &["memlint::artifact", "an attestation", "DSSE"],
    );
}

/// #29 item 9: a foreign layer is named with its media type and URL, not sent to `skopeo`.
#[test]
fn foreign_layer_names_its_url() {
    let err = fails_with(
        &[
            "inspect",
            "--no-cache",
            &format!("oci-dir:{}", kept("distribution__foreign-layer")),
        ],
        &[
            "memlint::layer",
            "cannot read layer 2",
            "foreign (non-distributable) layer",
            "`application/vnd.docker.image.rootfs.foreign.diff.tar.gzip`",
            "`https://foo/bar`",
            "does not download them",
        ],
    );
    assert!(!err.contains("skopeo copy"), "{err}");
}

/// #29 item 10: every `--files` entry has its layer (a folder no entry gave: the layer that
/// implied it), and `hardlink_to` is the file itself, past the symlinks in its folders.
#[test]
fn files_have_layers_and_canonical_hardlinks() {
    let v = files_json(&[&format!(
        "oci-dir:{}",
        kept("containerd-breakout__HardlinkRelative")
    )]);
    assert_eq!(file_row(&v, "/breakouts/mypasswd")["hardlink_to"], "/etc/passwd");
    let tmp = tempfile::tempdir().unwrap();
    let img = ImageSpec::new("amd64")
        .layer(LayerSpec::new(Comp::Plain).file("base", b"b"))
        .layer(LayerSpec::new(Comp::Plain).file("usr/share/doc/readme", b"r"));
    write_oci_dir(tmp.path(), &img, "latest");
    let v = files_json(&[&format!("oci-dir:{}", tmp.path().display())]);
    for row in v["files"]["paths"].as_array().unwrap() {
        assert!(row["layer"].is_u64(), "no layer: {row}");
    }
    assert_eq!(file_row(&v, "/usr")["layer"], 2);
    assert_eq!(file_row(&v, "/usr/share/doc")["layer"], 2);
    assert_eq!(file_row(&v, "/base")["layer"], 1);
}
