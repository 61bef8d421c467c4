//! Images from the test suites of apko, buildah, containerd, containers/storage, cosign,
//! distribution, image-spec, imgutil, jib, moby, notation, oras, oras-go and podman
//! (`shared/peer-fixtures/peer3/`, listed with what their origins expect in its README.md):
//! each reads or is refused as its row says, plus one regression test per item of reader
//! issue #29, on fixtures copied into `testdata/peer3/` (see its NOTICE.md) or built here.

mod common;

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

/// What memlint must do with one fixture.
struct Expect {
    fixture: &'static str,
    /// Prefix and suffix around the fixture's path (`oci-dir:`, `:multi`); "" for a bare path.
    prefix: &'static str,
    suffix: &'static str,
    args: &'static [&'static str],
    /// `Ok((layers, platform, paths that must be in the tree))`, or `Err(needles in the error)`.
    outcome: Result<(usize, &'static str, &'static [&'static str]), &'static [&'static str]>,
}

const fn ok(
    fixture: &'static str,
    prefix: &'static str,
    suffix: &'static str,
    args: &'static [&'static str],
    layers: usize,
    platform: &'static str,
    paths: &'static [&'static str],
) -> Expect {
    Expect {
        fixture,
        prefix,
        suffix,
        args,
        outcome: Ok((layers, platform, paths)),
    }
}

const fn refused(
    fixture: &'static str,
    prefix: &'static str,
    suffix: &'static str,
    args: &'static [&'static str],
    needles: &'static [&'static str],
) -> Expect {
    Expect {
        fixture,
        prefix,
        suffix,
        args,
        outcome: Err(needles),
    }
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
    refused(
        "oras__zot-images",
        "oci-dir:",
        ":multi",
        &["--platform", "linux/amd64"],
        &["has no `rootfs` key", "config.md"],
    ),
    refused(
        "oras__zot-artifacts",
        "oci-dir:",
        ":multi",
        &["--platform", "linux/amd64"],
        &["has no `rootfs` key", "config.md"],
    ),
    refused(
        "notation__e2e-valid-signature",
        "oci-dir:",
        "",
        &[],
        &["memlint::artifact", "application/vnd.notation.config"],
    ),
    refused(
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
    refused(
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
    refused(
        "imgutil__index-with-docker-media-type",
        "oci-dir:",
        "",
        &[],
        &["memlint::missing_blob"],
    ),
    refused(
        "imgutil__busybox-multi-platform",
        "oci-dir:",
        "",
        &[],
        &["memlint::missing_blob"],
    ),
    refused(
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
    refused(
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
    refused(
        "moby-special__configtarget",
        "oci-dir:",
        "",
        &[],
        &["config"],
    ),
    refused(
        "moby-special__emptyindex",
        "oci-dir:",
        "",
        &[],
        &["lists no manifests"],
    ),
    refused(
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
    refused(
        "containerd-breakout__WhiteoutRoot",
        "oci-dir:",
        "",
        &[],
        &["memlint::layer", "invalid whiteout", "`.wh..`"],
    ),
    refused(
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
    refused(
        "image-spec__layer-size-string",
        "oci-dir:",
        "",
        &[],
        &["layers[0].size", "manifest.md"],
    ),
    refused(
        "distribution__foreign-layer",
        "oci-dir:",
        "",
        &[],
        &["foreign", "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", "https://foo/bar"],
    ),
];

/// The fixture names of the README's two fixture tables.
fn readme_fixtures() -> Vec<String> {
    let readme = std::fs::read_to_string(peer3("README.md")).expect("peer3/README.md");
    let tables = readme
        .split("## Copied fixtures")
        .nth(1)
        .expect("a `## Copied fixtures` section");
    tables
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('`').nth(1))
        .map(|n| n.trim_end_matches('/').to_string())
        .collect()
}

/// `os/arch[/variant]`, or `unknown platform` when the config names neither.
fn platform_of(v: &Value) -> String {
    let p = &v["image"]["platform"];
    let (os, arch) = (p["os"].as_str().unwrap(), p["architecture"].as_str().unwrap());
    if os.is_empty() && arch.is_empty() {
        return "unknown platform".to_string();
    }
    let mut s = format!("{os}/{arch}");
    if let Some(variant) = p["variant"].as_str() {
        s.push('/');
        s.push_str(variant);
    }
    s
}

fn listed_paths(v: &Value) -> Vec<String> {
    v["files"]["paths"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["path"].as_str().map(str::to_string))
        .collect()
}

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
    let rows = readme_fixtures();
    assert_eq!(rows.len(), 52, "the README lists {} fixtures", rows.len());
    for row in &rows {
        assert!(
            EXPECT.iter().any(|e| e.fixture == row),
            "README row `{row}` has no expectation in tests/peer3.rs"
        );
    }
    for e in EXPECT {
        assert!(
            rows.iter().any(|r| r == e.fixture),
            "expectation `{}` has no README row",
            e.fixture
        );
        let reference = format!("{}{}{}", e.prefix, peer3(e.fixture), e.suffix);
        let mut args = vec!["inspect", "--no-cache", "--files", "--format", "json"];
        args.extend_from_slice(e.args);
        args.push(&reference);
        let out = memlint(&args);
        let err = error_text(&out);
        assert!(!err.contains("panicked"), "{reference}: {err}");
        match e.outcome {
            Ok((layers, platform, paths)) => {
                assert_eq!(out.status.code(), Some(0), "{reference}: {err}");
                let v: Value = serde_json::from_slice(&out.stdout).expect("inspect prints JSON");
                assert_eq!(
                    v["image"]["layers"].as_array().unwrap().len(),
                    layers,
                    "{reference}"
                );
                assert_eq!(platform_of(&v), platform, "{reference}");
                let listed = listed_paths(&v);
                for p in paths {
                    assert!(listed.iter().any(|l| l == p), "{reference}: {p} not in {listed:?}");
                }
            }
            Err(needles) => {
                assert_eq!(out.status.code(), Some(2), "{reference}: {err}");
                assert!(!err.contains("not valid JSON"), "{reference}: {err}");
                assert!(!err.contains("broken tool"), "{reference}: {err}");
                for n in needles {
                    assert!(err.contains(n), "{reference}: `{n}` not in {err}");
                }
            }
        }
    }
}
