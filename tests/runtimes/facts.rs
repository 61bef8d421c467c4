//! Facts on images built from real Debian packages (scripts/build-image.sh): libc family and
//! version, preload statuses with their reasons, and the allocator in effect.

use crate::common;

use common::*;
use serde_json::Value;

fn facts(recipe: &str) -> Value {
    let r = build_image(recipe);
    let mut v = inspect_json(&[&r]);
    v["facts"].take()
}

fn preload(f: &Value) -> &Value {
    let p = f["preloads"].as_array().expect("preloads");
    assert_eq!(p.len(), 1, "{p:?}");
    &p[0]
}

#[test]
fn glibc_without_preload() {
    let f = facts("glibc");
    assert_eq!(f["libc"]["family"], "glibc");
    assert_eq!(f["libc"]["version"], "2.36");
    assert_eq!(f["libc"]["entrypoint"], "glibc");
    assert_eq!(f["preloads"].as_array().unwrap().len(), 0);
    assert_eq!(f["allocator"]["name"], "glibc");
    assert_eq!(f["allocator"]["via"], "libc");
    assert_eq!(f["entrypoint"]["program"], "/usr/bin/dash");
    assert_eq!(f["entrypoint"]["interpreter"], "/lib64/ld-linux-x86-64.so.2");
    assert_eq!(f["platform"]["binaries"], "amd64");
    assert_eq!(f["platform"]["mismatch"], false);
    assert_eq!(f["os"]["release"]["id"], "debian");
}

#[test]
fn jemalloc_preloaded_by_full_path() {
    let f = facts("glibc-jemalloc");
    let p = preload(&f);
    assert_eq!(p["entry"], "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
    assert_eq!(p["source"], "env");
    assert_eq!(p["status"], "ok");
    assert_eq!(p["resolved"], "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
    assert_eq!(p["allocator"], "jemalloc");
    assert_eq!(f["allocator"]["name"], "jemalloc");
    assert_eq!(f["allocator"]["via"], "preload");
    assert_eq!(
        f["allocator"]["installed_not_in_effect"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

#[test]
fn jemalloc_preloaded_by_bare_name_through_the_cache() {
    let f = facts("glibc-jemalloc-bare");
    let p = preload(&f);
    assert_eq!(p["entry"], "libjemalloc.so.2");
    assert_eq!(p["status"], "ok");
    assert_eq!(p["resolved"], "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
    assert_eq!(p["via"], "ld-so-cache");
    assert!(p["reason"].as_str().unwrap().contains("/etc/ld.so.cache"));
    assert_eq!(f["allocator"]["name"], "jemalloc");
    assert!(f["loader"]["ld_so_cache_entries"].as_u64().unwrap() > 5);
}

#[test]
fn preload_path_of_another_architecture() {
    let f = facts("demo");
    let p = preload(&f);
    assert_eq!(p["status"], "missing");
    assert_eq!(p["resolved"], Value::Null);
    let reason = p["reason"].as_str().unwrap();
    assert!(
        reason.contains("aarch64-linux-gnu is another architecture's folder"),
        "{reason}"
    );
    assert!(reason.contains("cannot be preloaded"), "{reason}");
    assert_eq!(p["candidates"][0], "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
    assert_eq!(f["allocator"]["name"], "glibc");
    assert_eq!(
        f["allocator"]["installed_not_in_effect"][0]["path"],
        "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
    );

    let f = facts("arm64-jemalloc-amd64-path");
    assert_eq!(f["platform"]["declared"]["architecture"], "arm64");
    assert_eq!(f["platform"]["binaries"], "arm64");
    assert_eq!(f["libc"]["family"], "glibc");
    assert_eq!(f["entrypoint"]["interpreter"], "/lib/ld-linux-aarch64.so.1");
    let p = preload(&f);
    assert_eq!(p["status"], "missing");
    assert!(p["reason"]
        .as_str()
        .unwrap()
        .contains("x86_64-linux-gnu is another architecture's folder"));
    assert_eq!(p["candidates"][0], "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2");

    let f = facts("arm64-jemalloc");
    assert_eq!(preload(&f)["status"], "ok");
    assert_eq!(f["allocator"]["name"], "jemalloc");
}

#[test]
fn preload_removed_by_a_later_layer() {
    let f = facts("glibc-jemalloc-removed");
    let p = preload(&f);
    assert_eq!(p["status"], "missing");
    assert!(p["removed_in_layer"].as_u64().is_some());
    assert_eq!(p["removed_by"], "RUN apt-get purge -y libjemalloc2");
    assert!(p["reason"].as_str().unwrap().contains("was removed by layer"));
    assert_eq!(f["allocator"]["name"], "glibc");
}

#[test]
fn symlinked_preload() {
    let f = facts("glibc-jemalloc-symlink");
    let p = preload(&f);
    assert_eq!(p["entry"], "/usr/local/lib/libjemalloc.so");
    assert_eq!(p["status"], "ok");
    assert_eq!(p["resolved"], "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
    assert_eq!(f["allocator"]["name"], "jemalloc");
}

#[test]
fn preload_whose_dependencies_are_missing() {
    let f = facts("glibc-jemalloc-no-deps");
    let p = preload(&f);
    assert_eq!(p["status"], "incompatible");
    assert_eq!(p["unresolved_needed"], serde_json::json!(["libstdc++.so.6"]));
    assert!(p["reason"].as_str().unwrap().contains("exit 127"));
    assert_eq!(f["allocator"]["name"], "glibc");
}

#[test]
fn musl_image() {
    let f = facts("musl");
    assert_eq!(f["libc"]["family"], "musl");
    assert_eq!(f["libc"]["version"], "1.2.3");
    assert_eq!(f["libc"]["entrypoint"], "musl");
    assert_eq!(f["entrypoint"]["interpreter"], "/lib/ld-musl-x86_64.so.1");
    assert_eq!(f["allocator"]["name"], "musl");
    assert_eq!(f["libc"]["present"], serde_json::json!(["musl"]));
}

#[test]
fn glibc_jemalloc_preloaded_on_musl() {
    let f = facts("musl-glibc-jemalloc");
    assert_eq!(f["libc"]["family"], "musl");
    let p = preload(&f);
    assert_eq!(p["status"], "incompatible");
    assert_eq!(p["resolved"], "/usr/lib/libjemalloc.so.2");
    assert!(
        p["reason"].as_str().unwrap().contains("built for glibc"),
        "{}",
        p["reason"]
    );
    assert_eq!(f["allocator"]["name"], "musl");
}

// --- Ruby and entrypoint-script exports ------------------------------------------------------

/// Rails 7.2's `bin/docker-entrypoint` is the only preload: it counts, with its script and line.
#[test]
fn rails_7_2_entrypoint_preload_is_a_script_preload() {
    let f = facts("ruby-rails-7-2");
    let p = preload(&f);
    assert_eq!(p["source"], "script");
    assert_eq!(p["script"], "/rails/bin/docker-entrypoint");
    assert_eq!(p["line"], 5);
    assert_eq!(p["status"], "ok");
    assert_eq!(p["entry"], "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
    assert_eq!(f["allocator"]["name"], "jemalloc");
    assert_eq!(f["allocator"]["via"], "preload");
    let e = &f["entrypoint"]["exports"][0];
    assert_eq!(e["name"], "LD_PRELOAD");
    assert_eq!(e["status"], "set");
    assert_eq!(
        e["text"],
        r#"export LD_PRELOAD="$(echo /usr/lib/*/libjemalloc.so.2)""#
    );
    let r = &f["ruby"];
    assert_eq!(r["binary"], "/usr/bin/ruby3.1");
    assert_eq!(r["version"], "3.1.2");
    assert_eq!(r["library"], "/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1.2");
    assert_eq!(r["jemalloc_linked"], false);
    let servers: Vec<&str> = r["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(servers, ["puma", "rails"]);
    assert_eq!(r["servers"][0]["source"], "/rails/Gemfile.lock");
}

#[test]
fn rails_8_0_find_and_8_1_symlink_forms() {
    let f = facts("ruby-rails-8-0");
    let p = preload(&f);
    assert_eq!(
        (p["source"].as_str(), p["line"].as_u64()),
        (Some("script"), Some(5))
    );
    assert_eq!(p["status"], "ok");
    assert_eq!(f["allocator"]["name"], "jemalloc");
    // 8.1: ENV LD_PRELOAD to the link the Dockerfile makes; the entrypoint exports nothing.
    let f = facts("ruby-rails-8-1");
    let p = preload(&f);
    assert_eq!(p["source"], "env");
    assert_eq!(p["resolved"], "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
    assert!(f["entrypoint"].get("exports").is_none());
    // Without jemalloc in the image the 7.2 guard exports nothing.
    let f = facts("ruby-rails");
    assert!(f["preloads"].as_array().unwrap().is_empty());
    assert_eq!(f["allocator"]["name"], "glibc");
}

#[test]
fn script_preload_of_another_architecture_is_missing_at_its_line() {
    let f = facts("ruby-script-arm64-path");
    let p = preload(&f);
    assert_eq!(p["source"], "script");
    assert_eq!(p["line"], 4);
    assert_eq!(p["status"], "missing");
    assert_eq!(p["candidates"][0], "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
}

/// A script value memlint cannot work out is kept, undecided, with the line.
#[test]
fn script_preload_from_another_command_is_undecided() {
    let f = facts("ruby-rails-undecided");
    let p = preload(&f);
    assert_eq!(p["source"], "script");
    assert_eq!(p["script"], "/rails/bin/docker-entrypoint");
    assert_eq!(p["line"], 4);
    assert_eq!(p["status"], "undecided");
    assert_eq!(p["entry"], r#"export LD_PRELOAD="$(cat /etc/jemalloc-path)""#);
    assert!(p["reason"]
        .as_str()
        .unwrap()
        .contains("runs a command memlint does not model"));
    assert_eq!(f["allocator"]["name"], "glibc");
    assert!(f["allocator"]["undecided"][0]
        .as_str()
        .unwrap()
        .contains("possibly in effect"));
    assert_eq!(f["entrypoint"]["exports"][0]["status"], "undecided");
}
