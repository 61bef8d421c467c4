//! Images from the test suites of dive, containers/image, regclient, snyk-docker-plugin, trivy
//! and stereoscope (`shared/peer-fixtures/peer2/`, listed with what their origins expect in its
//! README.md): each reads or is refused as its row says, plus one regression test per selection
//! case of reader issue #14.

use crate::common;

use super::fixture_table::*;
use common::*;
use serde_json::Value;

fn peer2(name: &str) -> String {
    format!(
        "{}/../shared/peer-fixtures/peer2/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

const EXPECT: &[Expect] = &[
    ok(
        "containers-image__almostempty.tar",
        "docker-archive:",
        "",
        &[],
        1,
        "linux/amd64",
        &["/emptyfile"],
    ),
    // Index and blob look-ups only in the origin; as an image its config is 584 bytes, its
    // descriptor says 585.
    refused(
        "containers-image__delete_image_multiple_images",
        "oci-dir:",
        "",
        &["584 bytes", "585 bytes"],
    ),
    refused(
        "containers-image__delete_image_only_one_image",
        "oci-dir:",
        "",
        &["740 bytes", "585 bytes"],
    ),
    refused("containers-image__two_images_manifest", "", "", &["ppc64le"]),
    ok("dive__test-docker-image.tar", "", "", &[], 14, "linux/amd64", &[]),
    refused("dive__test-gzip-image.tar", "", "", &["neither manifest.json"]),
    ok(
        "dive__test-kaniko-image.tar",
        "docker-archive:",
        "",
        &[],
        14,
        "linux/amd64",
        &[],
    ),
    ok(
        "dive__test-oci-estargz-image.tar",
        "docker-archive:",
        "",
        &[],
        1,
        "linux/arm64",
        &["/README.md"],
    ),
    ok(
        "dive__test-oci-gzip-image.tar",
        "docker-archive:",
        "",
        &[],
        1,
        "linux/arm64",
        &["/README.md"],
    ),
    ok(
        "dive__test-oci-uncompressed-image.tar",
        "docker-archive:",
        "",
        &[],
        1,
        "linux/arm64",
        &["/README.md"],
    ),
    ok(
        "dive__test-oci-zstd-image.tar",
        "docker-archive:",
        "",
        &[],
        1,
        "linux/arm64",
        &["/README.md"],
    ),
    refused(
        "regclient__external",
        "oci-dir:",
        "",
        &["memlint::artifact", "not a runnable image"],
    ),
    refused("regclient__layer-wh.tar", "", "", &["neither manifest.json"]),
    ok(
        "regclient__testrepo",
        "oci-dir:",
        ":v1",
        &[],
        2,
        "linux/amd64",
        &[],
    ),
    ok(
        "snyk__containerd-archives_alpine.tar",
        "",
        "",
        &["--platform", "linux/amd64"],
        1,
        "linux/amd64",
        &["/etc/alpine-release"],
    ),
    ok(
        "snyk__containerd-archives_busybox-single-arch-with-attestation-manifest.tar",
        "",
        "",
        &[],
        1,
        "linux/arm64",
        &["/bin/busybox"],
    ),
    ok(
        "snyk__containerd-archives_busybox.arm64.tar",
        "",
        "",
        &["--platform", "linux/arm64"],
        1,
        "linux/arm64",
        &["/bin/busybox"],
    ),
    ok(
        "snyk__docker-oci-archives_busybox.armv7.tar",
        "",
        "",
        &[],
        1,
        "linux/arm/v7",
        &["/bin/busybox"],
    ),
    refused(
        "snyk__docker-oci-archives_unsupported-image.tar",
        "",
        "",
        &["neither manifest.json"],
    ),
    ok(
        "snyk__docker-save_hello-world.tar",
        "",
        "",
        &[],
        1,
        "linux/amd64",
        &["/hello"],
    ),
    // Edited by hand (snyk does not check digests): refused, naming the layer.
    refused(
        "snyk__docker-save_java-windows.tar",
        "",
        "",
        &["memlint::digest", "layer 1"],
    ),
    refused(
        "snyk__docker-save_nginx-os-release-link.tar",
        "",
        "",
        &["rootfs.diff_ids lists 3"],
    ),
    refused(
        "snyk__oci-archives_alpine-3.12.0.tar",
        "",
        "",
        &["memlint::digest", "layer 1"],
    ),
    ok(
        "snyk__oci-archives_busybox-1.31.1.tar",
        "",
        "",
        &[],
        1,
        "linux/amd64",
        &["/bin/busybox"],
    ),
    refused(
        "snyk__oci-archives_nginx.tar",
        "",
        "",
        &["memlint::size_mismatch", "812 bytes", "971 bytes"],
    ),
    refused("snyk__oci-archives_oci-with-manifest.tar", "", "", &["missing"]),
    refused(
        "snyk__skopeo-copy_centos-6.tar",
        "",
        "",
        &["memlint::digest", "layer 1"],
    ),
    refused(
        "snyk__skopeo-copy_nginx-compressed-layers.tar",
        "",
        "",
        &["rootfs.diff_ids lists 3"],
    ),
    ok(
        "snyk__skopeo-copy_node-removed.tar",
        "",
        "",
        &[],
        3,
        "linux/amd64",
        &["/bin/busybox"],
    ),
    ok(
        "snyk__skopeo-copy_nodes-fake-multi.tar",
        "",
        "",
        &[],
        2,
        "linux/amd64",
        &[],
    ),
    refused(
        "stereoscope__invalid_file",
        "oci-dir:",
        "",
        &["index.json", "not valid JSON"],
    ),
    ok(
        "stereoscope__multiplatform_oci_dir",
        "oci-dir:",
        "",
        &[],
        1,
        "linux/amd64",
        &["/linux/amd64/README.md"],
    ),
    refused(
        "stereoscope__no_manifests",
        "oci-dir:",
        "",
        &["index.json is an image manifest", "not an OCI image index"],
    ),
    refused("stereoscope__valid_manifest", "oci-dir:", "", &["0 bytes"]),
    ok(
        "stereoscope__valid_oci_dir",
        "oci-dir:",
        "",
        &[],
        1,
        "linux/amd64",
        &["/README.md"],
    ),
    ok(
        "trivy__alpine-311.tar.gz",
        "",
        "",
        &[],
        1,
        "linux/amd64",
        &["/etc/alpine-release"],
    ),
    ok(
        "trivy__test.oci",
        "oci-dir:",
        "",
        &[],
        1,
        "linux/amd64",
        &["/hello"],
    ),
    refused(
        "trivy__test_bad_index_json.oci",
        "oci-dir:",
        "",
        &["index.json", "not valid JSON"],
    ),
    ok(
        "trivy__test_image_tag.oci",
        "oci-dir:",
        ":0.0.1",
        &[],
        1,
        "linux/amd64",
        &["/hello"],
    ),
    refused(
        "trivy__test_index_json_dir.oci",
        "oci-dir:",
        "",
        &["no index.json"],
    ),
    refused(
        "trivy__test_invalid_oci_image.oci",
        "oci-dir:",
        "",
        &["application/badmedia+json"],
    ),
    refused(
        "trivy__test_no_valid_manifests.oci",
        "oci-dir:",
        "",
        &["index.json lists no manifests"],
    ),
];

/// The fixture names of the README's fixture table.
#[test]
fn every_fixture_reads_or_is_refused_as_its_origin_expects() {
    let rows = readme_fixtures(&peer2("README.md"), "## Fixtures");
    check_every_fixture(EXPECT, &rows, 42, "tests/reading/peer2.rs", peer2, &[]);
}

/// #14 item 1: referrers and attestations beside images are left out; naming one says so.
#[test]
fn artifacts_are_left_out_and_refused_by_name() {
    let repo = peer2("regclient__testrepo");
    let err = fails_with(
        &["inspect", &format!("oci-dir:{repo}")],
        &["memlint::ambiguous", "v1 (linux/amd64", "b1 (linux/amd64"],
    );
    assert!(!err.contains("a-docker"), "{err}");
    assert!(!err.contains("missing field"), "{err}");
    fails_with(
        &["inspect", &format!("oci-dir:{repo}:a-docker")],
        &[
            "memlint::artifact",
            "`a-docker`",
            "not a runnable image",
            "attestation",
        ],
    );
    fails_with(
        &["inspect", &format!("oci-dir:{repo}:a1")],
        &["memlint::artifact", "artifactType", "not a runnable image"],
    );
    // The attestation manifest beside a single-platform image leaves one image.
    let v = inspect_json(&[
        "--no-cache",
        &peer2("snyk__containerd-archives_busybox-single-arch-with-attestation-manifest.tar"),
    ]);
    assert_eq!(v["image"]["platform"]["architecture"], "arm64");
    // `--platform linux/unknown` is no image.
    fails_with(
        &[
            "inspect",
            "--platform",
            "linux/unknown",
            &format!("oci-dir:{repo}:v1"),
        ],
        &["memlint::platform", "linux/amd64"],
    );
}

/// #14 item 3: two tags on one manifest are one image, with both names.
#[test]
fn two_tags_on_one_manifest_are_one_image() {
    let layout = peer2("stereoscope__valid_oci_dir");
    let v = inspect_json(&["--no-cache", &format!("oci-dir:{layout}")]);
    assert_eq!(v["image"]["layers"].as_array().unwrap().len(), 1);
    let by_other = inspect_json(&["--no-cache", &format!("oci-dir:{layout}:1.0")]);
    assert_eq!(
        by_other["image"]["manifest_digest"],
        v["image"]["manifest_digest"]
    );
    // Without a name the image is chosen; the ambiguity list shows each image once with all
    // its names (the unit tests of sources::select cover the list's form).
}

/// #14 item 5: a name or a position that is not there, each with its own code; the platform
/// comes from the config when the index has none.
#[test]
fn missing_name_and_position_say_what_is_there() {
    let layout = peer2("trivy__test_image_tag.oci");
    let err = fails_with(
        &["inspect", &format!("oci-dir:{layout}:0.0.0")],
        &[
            "memlint::no_such_name",
            "no image named `0.0.0`",
            "it has: 0.0.1 (linux/amd64)",
        ],
    );
    assert!(!err.contains("unknown platform"), "{err}");
    assert!(!err.contains("several images"), "{err}");
    fails_with(
        &["inspect", &format!("oci-dir:{layout}:@1")],
        &[
            "memlint::position_out_of_range",
            "position @1 is out of range",
            "holds 1 image",
        ],
    );
    fails_with(
        &[
            "inspect",
            &format!("docker-archive:{}:@3", peer2("containers-image__almostempty.tar")),
        ],
        &[
            "memlint::position_out_of_range",
            "holds 1 image",
            "emptyimage:latest (linux/amd64)",
        ],
    );
    fails_with(
        &[
            "inspect",
            &format!("oci-dir:{}:nope", peer2("regclient__testrepo")),
        ],
        &["memlint::no_such_name", "`nope`", "v1 (linux/amd64; linux/arm64)"],
    );
}

/// #14 item 6: `--platform all` is always the reports shape and says which platforms are absent.
#[test]
fn platform_all_is_always_the_reports_shape() {
    let archive = peer2("snyk__containerd-archives_busybox.arm64.tar");
    let out = memlint(&[
        "lint",
        "--no-cache",
        "--platform",
        "all",
        "--format",
        "json",
        "--fail-on",
        "never",
        &archive,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", error_text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let reports = v["reports"].as_array().expect("reports");
    assert_eq!(reports.len(), 1);
    assert!(v["differences"].as_array().unwrap().is_empty());
    assert_eq!(reports[0]["image"]["platform"]["architecture"], "arm64");
    let absent: Vec<&str> = reports[0]["platforms_absent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(absent.contains(&"linux/amd64"), "{absent:?}");
    assert!(absent.contains(&"linux/s390x"), "{absent:?}");
    assert!(!absent.contains(&"linux/arm64"), "{absent:?}");
    let text = memlint(&[
        "lint",
        "--no-cache",
        "--platform",
        "all",
        "--fail-on",
        "never",
        &archive,
    ]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Listed by the index but not in this copy: linux/amd64"),
        "{text}"
    );
    // Every platform present: nothing absent.
    let out = memlint(&[
        "lint",
        "--no-cache",
        "--platform",
        "all",
        "--format",
        "json",
        "--fail-on",
        "never",
        &format!("oci-dir:{}", peer2("stereoscope__multiplatform_oci_dir")),
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["reports"].as_array().unwrap().len(), 2, "{v}");
    assert!(v["reports"][0]["platforms_absent"].as_array().unwrap().is_empty());
}

/// #14 item 9: well-formed JSON of the wrong shape says what it is.
#[test]
fn index_json_of_the_wrong_shape_says_what_it_is() {
    fails_with(
        &[
            "inspect",
            &format!("oci-dir:{}", peer2("stereoscope__no_manifests")),
        ],
        &[
            "index.json is an image manifest (mediaType",
            "not an OCI image index",
        ],
    );
    let err = fails_with(
        &[
            "inspect",
            &format!("oci-dir:{}", peer2("trivy__test_no_valid_manifests.oci")),
        ],
        &["index.json lists no manifests"],
    );
    assert!(!err.contains("not valid JSON"), "{err}");
}

/// Also: a blob whose size is not its descriptor's names both numbers.
#[test]
fn size_differs_from_descriptor() {
    fails_with(
        &[
            "inspect",
            &format!(
                "oci-dir:{}",
                peer2("containers-image__delete_image_only_one_image")
            ),
        ],
        &[
            "memlint::size_mismatch",
            "is 740 bytes, but its descriptor says 585 bytes",
        ],
    );
}

/// Also: `--platform linux/arm` with arm/v6 and arm/v7 lists both.
#[test]
fn arm_without_variant_lists_the_variants() {
    let v3 = format!("oci-dir:{}:v3", peer2("regclient__testrepo"));
    fails_with(
        &["inspect", "--platform", "linux/arm", &v3],
        &["memlint::ambiguous", "linux/arm/v6", "linux/arm/v7"],
    );
    let v = inspect_json(&["--no-cache", "--platform", "linux/arm/v6", &v3]);
    assert_eq!(v["image"]["platform"]["variant"], "v6");
}

/// Also: `dir:` at an OCI layout or a `docker save` folder names the prefix meant.
#[test]
fn dir_prefix_at_a_layout_names_the_right_one() {
    let layout = peer2("trivy__test.oci");
    fails_with(
        &["inspect", &format!("dir:{layout}")],
        &["memlint::wrong_prefix", "an OCI layout", "read it with `oci-dir:"],
    );
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("manifest.json"), b"[]").unwrap();
    std::fs::write(tmp.path().join("repositories"), b"{}").unwrap();
    fails_with(
        &["inspect", &format!("dir:{}", tmp.path().display())],
        &[
            "memlint::wrong_prefix",
            "docker save",
            "tar -cf",
            "docker-archive:",
        ],
    );
}

/// #13 also: a named limit on layers per manifest.
#[test]
fn max_layers_is_a_named_limit() {
    let archive = peer2("dive__test-docker-image.tar");
    fails_with(
        &["inspect", "--no-cache", "--limit", "max_layers=13", &archive],
        &["memlint::limit", "max_layers", "(14)"],
    );
    let v = inspect_json(&["--no-cache", "--limit", "max_layers=14", &archive]);
    assert_eq!(v["image"]["layers"].as_array().unwrap().len(), 14);
}

/// #13 also: a diff_id that is not a well-formed digest is an error.
#[test]
fn malformed_diff_id_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bad.tar");
    let img = ImageSpec::new("amd64").layer(LayerSpec::new(Comp::Plain).file("a", b"a"));
    write_docker_archive(&out, &img, "bad:1");
    // Rewrite the config with a diff_id that is not a digest.
    let file = std::fs::File::open(&out).unwrap();
    let mut archive = tar::Archive::new(file);
    let mut b = tar::Builder::new(Vec::new());
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().to_string();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut data).unwrap();
        let mut name = path.clone();
        if path == "manifest.json" {
            let mut v: Value = serde_json::from_slice(&data).unwrap();
            v[0]["Config"] = Value::from("config.json");
            data = serde_json::to_vec(&v).unwrap();
        } else if path.ends_with(".json") {
            // Named `config.json`, so no digest is expected of it.
            let mut v: Value = serde_json::from_slice(&data).unwrap();
            v["rootfs"]["diff_ids"][0] = Value::from("sha256:not-hex");
            data = serde_json::to_vec(&v).unwrap();
            name = "config.json".to_string();
        }
        append(&mut b, &name, &data);
    }
    std::fs::write(&out, b.into_inner().unwrap()).unwrap();
    fails_with(
        &[
            "inspect",
            "--no-cache",
            &format!("docker-archive:{}", out.display()),
        ],
        &["rootfs.diff_ids[0]", "not a well-formed digest", "sha256:not-hex"],
    );
}
