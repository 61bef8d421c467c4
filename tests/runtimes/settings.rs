//! Issue 16's runtime settings on images built from real packages: the .NET GC variables as
//! the runtime reads them, each app's effective GC and the source that decided it, and the Node
//! version (from the binary's release, its header or Debian's dpkg database) that decides
//! whether it reads cgroup v2 limits.

use crate::common;

use common::*;
use serde_json::Value;

fn facts(recipe: &str) -> Value {
    let r = build_image(recipe);
    let mut v = inspect_json(&[&r]);
    v["facts"].take()
}

fn lint(recipe: &str) -> (Value, Option<i32>) {
    lint_recipe(recipe, &[])
}

fn rule<'a>(v: &'a Value, id: &str) -> Vec<&'a Value> {
    findings_of(v, id)
}

/// Done when: `DOTNET_GCHeapHardLimit=100000000` reports both readings.
#[test]
fn decimal_heap_hard_limit_reports_both_readings() {
    let (v, code) = lint("dotnet-gc-decimal");
    assert_eq!(code, Some(1), "a warning fails the default --fail-on");
    let hits = rule(&v, "dotnet-gc-env-decimal");
    assert_eq!(hits.len(), 1, "{hits:#?}");
    let message = hits[0]["message"].as_str().unwrap();
    assert!(message.contains("DOTNET_GCHeapHardLimit=100000000"), "{message}");
    assert!(message.contains("4294967296 bytes (4 GiB)"), "{message}");
    assert!(message.contains("not 100000000 bytes (100 MB"), "{message}");
    let evidence = hits[0]["evidence"].to_string();
    assert!(evidence.contains("from the image env"), "{evidence}");
    // 0x5F5E100 is 100000000: the fix is the value meant, in hexadecimal.
    assert_eq!(u64::from_str_radix("5F5E100", 16).unwrap(), 100_000_000);
    assert!(hits[0]["fix"]
        .as_str()
        .unwrap()
        .starts_with("ENV DOTNET_GCHeapHardLimit=0x5F5E100\n"));

    // The runtime's reading is a fact a later rule can compare with a container limit.
    let f = facts("dotnet-gc-decimal");
    let env = &f["dotnet"]["gc"]["env"][0];
    assert_eq!(env["variable"], "DOTNET_GCHeapHardLimit");
    assert_eq!(env["read_as"], 0x1_0000_0000u64);
    assert_eq!(env["decimal_reading"], 100_000_000);
    let app = &f["dotnet"]["gc"]["apps"][0];
    assert_eq!(app["heap_hard_limit"]["value"], 0x1_0000_0000u64);
    assert_eq!(
        app["heap_hard_limit"]["source"],
        "env DOTNET_GCHeapHardLimit=100000000 (image env)"
    );
    // A limit bounds the heaps: no Server GC note on this image.
    assert!(rule(&lint("dotnet-gc-decimal").0, "dotnet-server-gc-container").is_empty());

    let f = facts("dotnet-gc-hex");
    assert_eq!(f["dotnet"]["gc"]["env"][0]["read_as"], 100_000_000);
    assert!(f["dotnet"]["gc"]["env"][0].get("decimal_reading").is_none());
}

#[test]
fn server_gc_of_an_aspnetcore_8_app_and_what_decided_it() {
    let f = facts("dotnet-server-gc");
    let app = &f["dotnet"]["gc"]["apps"][0];
    assert_eq!(app["app"], "Orders");
    assert_eq!(app["runtimeconfig"], "/app/Orders.runtimeconfig.json");
    assert_eq!(app["aspnetcore"], true);
    assert_eq!(app["runtime_major"], 8);
    assert_eq!(app["server"]["value"], 1);
    assert_eq!(
        app["server"]["source"],
        "/app/Orders.runtimeconfig.json System.GC.Server"
    );
    assert_eq!(app["server"]["path"], "/app/Orders.runtimeconfig.json");
    assert_eq!(app["dynamic_adaptation"]["value"], 0);
    assert_eq!(app["dynamic_adaptation"]["source"], "the .NET 8 default");

    // The environment wins over runtimeconfig.json and the default.
    let f = facts("dotnet-server-gc-datas");
    let datas = &f["dotnet"]["gc"]["apps"][0]["dynamic_adaptation"];
    assert_eq!(datas["value"], 1);
    assert_eq!(
        datas["source"],
        "env DOTNET_GCDynamicAdaptationMode=1 (image env)"
    );

    // The existing .NET 10 app: DATAS is on by default, no note.
    let f = facts("dotnet-npgsql");
    let app = &f["dotnet"]["gc"]["apps"][0];
    assert_eq!(app["server"]["value"], 1);
    assert_eq!(app["dynamic_adaptation"]["value"], 1);
    assert_eq!(app["dynamic_adaptation"]["source"], "the .NET 10 default");
    assert!(rule(&lint("dotnet-npgsql").0, "dotnet-server-gc-container").is_empty());
}

/// Done when: Node 18 with no heap flag reports `node-cgroup-v2-unaware`, Node 20.3 does not.
#[test]
fn node_versions_around_20_3() {
    let (v, code) = lint("node-18");
    assert_eq!(code, Some(1));
    let hits = rule(&v, "node-cgroup-v2-unaware");
    assert_eq!(hits.len(), 1);
    assert!(hits[0]["message"].as_str().unwrap().starts_with("Node 18.20.8 "));
    let evidence = hits[0]["evidence"].to_string();
    assert!(
        evidence.contains(
            "no --max-old-space-size in NODE_OPTIONS (unset) or on node's command line (`node server.js`)"
        ),
        "{evidence}"
    );

    let (v, code) = lint("node-20-3");
    assert!(rule(&v, "node-cgroup-v2-unaware").is_empty(), "{v:#}");
    assert_eq!(code, Some(0), "{:#}", v["findings"]);
    assert_eq!(facts("node-20-3")["node"]["version"], "20.3.0");
}

/// NODE_OPTIONS exported by an entrypoint script from a file read at run time: memlint does
/// not know whether it holds a heap flag, so the rule stays silent and `-v` names the line.
#[test]
fn node_options_a_script_computes_leave_it_undecided() {
    let (v, code) = lint("node-18-script-options");
    assert!(rule(&v, "node-cgroup-v2-unaware").is_empty(), "{v:#}");
    assert_eq!(code, Some(0), "{:#}", v["findings"]);
    let out = memlint(&["lint", "-v", &build_image("node-18-script-options")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("node-cgroup-v2-unaware: NODE_OPTIONS is set by `export NODE_OPTIONS=\"$(cat /etc/node-options)\"` (exported by /usr/local/bin/start line 3)"),
        "{text}"
    );
}

#[test]
fn debian_nodejs_version_comes_from_dpkg() {
    let f = facts("node-debian");
    assert_eq!(f["node"]["binary"], "/usr/bin/node");
    assert_eq!(f["node"]["version"], "18.20.4");
    let source = f["node"]["version_source"].as_str().unwrap();
    assert!(
        source.starts_with("dpkg package nodejs 18.20.4+dfsg-1~deb12u"),
        "{source}"
    );
    let (v, _) = lint("node-debian");
    let hits = rule(&v, "node-cgroup-v2-unaware");
    assert_eq!(hits.len(), 1);
    assert!(hits[0]["evidence"]
        .to_string()
        .contains("(from dpkg package nodejs 18.20.4"));
}

/// The finding lands on the `ENV` line that wrote the decimal value; the Node one on the
/// command when the broken heap flag is there.
#[test]
fn findings_land_on_the_line_that_set_them() {
    let dir = tempfile::tempdir().unwrap();
    let dockerfile = dir.path().join("Dockerfile");
    let located = |recipe: &str, text: &str, id: &str| -> Value {
        std::fs::write(&dockerfile, text).unwrap();
        let out = memlint(&[
            "lint",
            "--format",
            "json",
            "--fail-on",
            "never",
            "--dockerfile",
            dockerfile.to_str().unwrap(),
            &build_image(recipe),
        ]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        rule(&v, id)[0]["location"].clone()
    };
    let at = located(
        "dotnet-gc-decimal",
        "FROM mcr.microsoft.com/dotnet/aspnet:8.0\nCOPY out/ /app/\nENV DOTNET_GCHeapHardLimit=100000000\nWORKDIR /app\nENTRYPOINT [\"dotnet\", \"Orders.dll\"]\n",
        "dotnet-gc-env-decimal",
    );
    assert_eq!(at["line"], 3, "{at}");
    let at = located(
        "node-20-2-bad-flag",
        "FROM node:20.2.0-bookworm-slim\nWORKDIR /app\nCOPY server.js .\nCMD [\"node\", \"--max-old-space-size\", \"384\", \"server.js\"]\n",
        "node-cgroup-v2-unaware",
    );
    assert_eq!(at["line"], 4, "{at}");
}

/// A heap flag node refuses (`--max-old-space-size 384`, no `=`) sizes nothing: node-semi-space
/// does not talk about the young generation then, and `-v` says why.
#[test]
fn a_refused_heap_flag_is_not_a_semi_space_finding() {
    let (v, _) = lint("node-20-2-bad-flag");
    assert!(rule(&v, "node-semi-space").is_empty(), "{:#}", v["findings"]);
    let out = memlint(&["lint", "-v", &build_image("node-20-2-bad-flag")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("node-semi-space: --max-old-space-size from command line is not in effect"),
        "{text}"
    );
}
