//! Python and Go facts on images built from real things (scripts/recipes/python.sh, go.sh):
//! Debian's python3.11 with numpy and gunicorn wheels from PyPI, and Go programs built here
//! with and without cgo. The cgo program's build info names github.com/mattn/go-sqlite3
//! through a local `replace` (the module proxy is not reachable from the test machines): a
//! stand-in module with that path, which calls C's malloc.

use crate::common;

use common::*;
use serde_json::Value;

fn facts(recipe: &str) -> Value {
    let r = build_image(recipe);
    let mut v = inspect_json(&[&r]);
    v["facts"].take()
}

fn rules(recipe: &str, extra: &[&str]) -> Value {
    let r = build_image(recipe);
    let mut args = vec!["lint", "--format", "json", "--fail-on", "never"];
    args.extend_from_slice(extra);
    args.push(&r);
    let out = memlint(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn python_version_packages_and_server() {
    let f = facts("python-numpy-gunicorn");
    let py = &f["python"];
    assert_eq!(py["version"], "3.11.2", "{py:#}");
    assert!(py["version_source"]
        .as_str()
        .unwrap()
        .contains("python3.11-minimal"));
    assert_eq!(py["interpreters"], serde_json::json!(["/usr/bin/python3.11"]));
    let packages = py["packages"].as_array().unwrap();
    let find = |n: &str| {
        packages
            .iter()
            .find(|p| p["name"] == n)
            .unwrap_or_else(|| panic!("{n}: {py:#}"))
    };
    assert_eq!(find("numpy")["version"], "1.26.4");
    assert_eq!(
        find("numpy")["path"],
        "/usr/local/lib/python3.11/dist-packages/numpy-1.26.4.dist-info"
    );
    assert_eq!(find("gunicorn")["version"], "23.0.0");
    let server = &py["servers"][0];
    assert_eq!(server["name"], "gunicorn");
    assert_eq!(server["concurrency"], "threads");
    assert!(
        server["evidence"]
            .as_str()
            .unwrap()
            .contains("4 threads per worker"),
        "{server}"
    );
    assert_eq!(py["pythonmalloc"], Value::Null);
    // The entrypoint went through gunicorn's console script to its #! interpreter.
    assert_eq!(f["entrypoint"]["program"], "/usr/bin/python3.11");
    // No Go program in it.
    assert_eq!(f["go"]["binaries"], serde_json::json!([]));
}

#[test]
fn go_build_info_of_cgo_and_pure_programs() {
    let f = facts("go-nocgo");
    let bins = f["go"]["binaries"].as_array().unwrap();
    assert_eq!(bins.len(), 2, "{bins:#?}");
    let server = &bins[0];
    assert_eq!(server["path"], "/app/server");
    assert_eq!(server["cgo"], false);
    assert_eq!(server["on_entrypoint"], true);
    assert_eq!(server["deps"], serde_json::json!([]));
    assert!(server["go_version"].as_str().unwrap().starts_with("go1."));
    let cgo = &bins[1];
    assert_eq!(cgo["path"], "/usr/local/bin/cgoapp");
    assert_eq!(cgo["cgo"], true);
    assert_eq!(cgo["on_entrypoint"], false);
    assert_eq!(cgo["main_module"], "example.com/memlint/cgoapp");
    assert_eq!(cgo["deps"][0]["path"], "github.com/mattn/go-sqlite3");
    assert_eq!(cgo["deps"][0]["version"], "v1.14.22");
    assert_eq!(cgo["needed"], serde_json::json!(["libc.so.6"]));
    // No CPython in it.
    assert_eq!(f["python"], Value::Null);
}

/// A cgo program in a PATH folder that the entrypoint does not run is not judged; `-v` says so.
#[test]
fn cgo_program_off_the_entrypoint_is_undecided() {
    let v = rules("go-nocgo", &[]);
    assert!(
        !v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["rule"] == "go-cgo-glibc-allocator"),
        "{:#}",
        v["findings"]
    );
    let r = build_image("go-nocgo");
    let out = memlint(&["lint", "-v", "--fail-on", "never", &r]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("go-cgo-glibc-allocator: /usr/local/bin/cgoapp (cgo, module github.com/mattn/go-sqlite3) is in a PATH folder but not on the entrypoint's path"),
        "{text}"
    );
}

/// A layer cache written by one read gives the same Go build info on the next.
#[test]
fn build_info_comes_back_from_the_layer_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().to_str().unwrap();
    let r = build_image("go-cgo-sqlite");
    let cold = inspect_json(&["--cache-dir", cache, &r]);
    let warm = inspect_json(&["--cache-dir", cache, &r]);
    assert!(warm["image"]["layers"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["from_cache"] == true));
    assert_eq!(cold["facts"]["go"], warm["facts"]["go"]);
    assert_eq!(warm["facts"]["go"]["binaries"][0]["cgo"], true);
}

/// The same cgo program linked against musl, on a musl root: never a finding; `-v` says why.
#[test]
fn cgo_program_on_musl_is_not_judged() {
    let v = rules("go-cgo-sqlite-musl", &[]);
    assert_eq!(v["findings"], serde_json::json!([]), "{:#}", v["findings"]);
    let f = facts("go-cgo-sqlite-musl");
    assert_eq!(f["libc"]["family"], "musl");
    assert_eq!(f["go"]["binaries"][0]["cgo"], true);
    assert_eq!(f["go"]["binaries"][0]["on_entrypoint"], true);
    let r = build_image("go-cgo-sqlite-musl");
    let out = memlint(&["lint", "-v", "--fail-on", "never", &r]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("go-cgo-glibc-allocator: the cgo program runs on musl, which has no per-thread arenas"),
        "{text}"
    );
}

/// jemalloc preloaded for the interpreter settles it as an arena cap does.
#[test]
fn python_with_jemalloc_preloaded_is_not_reported() {
    let f = facts("python-numpy-gunicorn-jemalloc");
    assert_eq!(f["allocator"]["name"], "jemalloc", "{:#}", f["allocator"]);
    let v = rules("python-numpy-gunicorn-jemalloc", &[]);
    assert!(
        !v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["rule"] == "python-glibc-allocator"),
        "{:#}",
        v["findings"]
    );
}

/// A cgo program linked against Debian's shared libsqlite3, with no Go module naming SQLite:
/// the rule knows it from DT_NEEDED.
#[test]
fn cgo_program_needing_libsqlite3_is_reported() {
    let v = rules("go-cgo-libsqlite", &[]);
    let hits: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "go-cgo-glibc-allocator")
        .collect();
    assert_eq!(hits.len(), 1, "{:#}", v["findings"]);
    let evidence = hits[0]["evidence"].to_string();
    assert!(
        evidence.contains("DT_NEEDED libsqlite3.so.0 (SQLite)"),
        "{evidence}"
    );
    assert_eq!(hits[0]["severity"], "note");
}
