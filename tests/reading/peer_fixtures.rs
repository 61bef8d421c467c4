//! Images from go-containerregistry's own test suite (testdata/go-containerregistry, Apache-2.0):
//! what memlint must do with each, as listed in its NOTICE.md and the project's shared notes.

use crate::common;

use common::*;

fn fixture(name: &str) -> String {
    format!(
        "{}/testdata/go-containerregistry/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn docker25_save_archive_reads() {
    let v = inspect_json(&[&fixture("hello-world-v25.tar")]);
    assert_eq!(v["image"]["source"], "docker-archive");
    assert_eq!(v["image"]["platform"]["architecture"], "arm64");
    assert_eq!(v["image"]["layers"].as_array().unwrap().len(), 1);
    assert_eq!(tree_listing(&fixture("hello-world-v25.tar")), ["/hello file "]);
}

#[test]
fn classic_archives_read() {
    for name in [
        "test_image_1.tar",
        "test_image_2.tar",
        "test_load_manifest.tar",
        "source_image.tar",
    ] {
        let v = inspect_json(&[&format!("docker-archive:{}", fixture(name))]);
        assert_eq!(v["image"]["platform"]["os"], "linux", "{name}");
        assert!(v["files"]["count"].as_u64().unwrap() >= 1, "{name}");
    }
}

#[test]
fn whiteouts_and_last_writer() {
    assert_eq!(tree_listing(&fixture("whiteout_image.tar")), ["/bar.txt file "]);
    assert_eq!(
        tree_listing(&fixture("overwritten_file.tar")),
        ["/bar.txt file ", "/foo.txt symlink bar.txt"]
    );
}

#[test]
fn multi_image_archives_list_their_images() {
    fails_with(
        &["inspect", &fixture("test_bundle.tar")],
        &["several images", "test_image_1", "test_image_2"],
    );
    let by_tag = inspect_json(&[&format!(
        "docker-archive:{}:test_image_1",
        fixture("test_bundle.tar")
    )]);
    assert_eq!(by_tag["image"]["name"], "test_image_1");
    let by_index = inspect_json(&[&format!("docker-archive:{}:@0", fixture("test_bundle.tar"))]);
    assert_eq!(by_index["image"]["name"], "test_image_2");

    // Layers shared through symlinked members.
    fails_with(
        &["inspect", &fixture("test_link.tar")],
        &["test_image_1", "test_image_3"],
    );
    let v = inspect_json(&[&format!(
        "docker-archive:{}:bazel/v1/tarball:test_image_3",
        fixture("test_link.tar")
    )]);
    assert_eq!(v["image"]["layers"].as_array().unwrap().len(), 2);
    assert_eq!(v["files"]["count"], 3);
}

#[test]
fn archives_without_a_usable_manifest() {
    fails_with(&["inspect", &fixture("no_manifest.tar")], &["manifest.json"]);
    fails_with(
        &[
            "inspect",
            &format!("docker-archive:{}", fixture("no_manifest.tar")),
        ],
        &["manifest.json"],
    );
    fails_with(&["inspect", &fixture("null_manifest.tar")], &["lists no image"]);
}

#[test]
fn oci_layouts() {
    let v = inspect_json(&[&fixture("layout-test_index_one_image")]);
    assert_eq!(v["image"]["source"], "oci-dir");
    assert_eq!(v["image"]["platform"]["architecture"], "amd64");

    fails_with(
        &["inspect", &fixture("layout-test_index")],
        &["several images", "pick one by name", ":@N"],
    );
    for name in ["1", "2", "3", "4"] {
        let out = memlint(&[
            "inspect",
            &format!("oci-dir:{}:{name}", fixture("layout-test_index")),
        ]);
        assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
        assert!(matches!(out.status.code(), Some(0 | 2)), "{name}");
    }
    assert_eq!(
        inspect_json(&[&format!("oci-dir:{}:1", fixture("layout-test_index"))])["image"]["name"],
        "1"
    );

    fails_with(
        &["inspect", &fixture("layout-test_index_media_type")],
        &["memlint::artifact", "not a runnable image", "helm"],
    );
    fails_with(
        &["inspect", &fixture("layout-test_gc_image_unknown_mediatype")],
        &["not a container image", "unknown media type", "absent"],
    );
}
