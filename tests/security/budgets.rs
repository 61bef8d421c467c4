//! Per-script, per-container and per-image budgets (issue #28, defects 3, 4 and 6): entrypoint
//! scripts and manifests written to cost memory or time as entries × look-ups. Each run ends
//! with exit 0 within 30 s and 256 MiB (peak resident memory, and an address-space cap set with
//! `prlimit` on top), and the value that passed a bound is undecided with the bound in its why.

use crate::common;

use common::measure::*;
use common::*;
use serde_json::Value;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The memory every run here must stay under.
const MAX_RSS_KIB: u64 = 256 * 1024;
/// The wall time every run here must stay under (a debug build, on a shared machine).
const WALL: Duration = Duration::from_secs(30);
/// The address space memlint is started with: the runtime's threads reserve stacks and
/// allocator arenas they never touch, so the cap on address space sits above the RSS bound.
const MAX_ADDRESS_SPACE: u64 = 2 << 30;

/// An image whose Entrypoint is the chain of `scripts` (each `exec`s the next, the last
/// `exec "$@"`), then `/app/server`, with `env` in its config.
fn script_image(dir: &Path, scripts: &[String], env: &[String], extra: LayerSpec) -> String {
    let mut layer = LayerSpec::new(Comp::Gzip).exe("app/server", b"not a script");
    for (i, body) in scripts.iter().enumerate() {
        let next = if i + 1 < scripts.len() {
            format!("exec /usr/local/bin/entry{} \"$@\"\n", i + 1)
        } else {
            "exec \"$@\"\n".to_string()
        };
        let text = format!("#!/bin/sh\n{body}\n{next}");
        assert!(text.len() <= 64 * 1024, "script {i} is longer than memlint keeps");
        layer = layer.exe(&format!("usr/local/bin/entry{i}"), text.as_bytes());
    }
    let mut spec = ImageSpec::new("amd64").layer(layer).layer(extra);
    spec.env.extend(env.iter().cloned());
    spec.entrypoint = Some(vec!["/usr/local/bin/entry0".into()]);
    spec.cmd = Some(vec!["/app/server".into()]);
    let root = dir.join("img");
    write_oci_dir(&root, &spec, "latest");
    format!("oci-dir:{}:latest", root.display())
}

/// memlint `args` in a jail folder under the address-space cap, with the checks every run here
/// makes: exit 0, no panic, under [`MAX_RSS_KIB`] and [`WALL`].
fn run_bounded(args: &[&str]) -> Run {
    let run = run_jailed(args, &[], None, WALL);
    assert_eq!(run.code(), Some(0), "{}", run.err());
    assert!(
        run.peak_kib < MAX_RSS_KIB,
        "peak RSS {} KiB > {MAX_RSS_KIB} KiB",
        run.peak_kib
    );
    assert!(run.elapsed < WALL, "{:?}", run.elapsed);
    // The same run under a hard cap on address space: an allocation past it aborts.
    let cache = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--as={MAX_ADDRESS_SPACE}"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_memlint"))
        .args(args)
        .env("NO_COLOR", "1")
        .env("MEMLINT_CACHE_DIR", cache.path())
        .env_remove("MEMLINT_LIMITS");
    let out = cmd.output();
    assert!(out.is_ok(), "prlimit (util-linux) runs: {out:?}");
    if let Ok(out) = out {
        assert_eq!(
            out.status.code(),
            Some(0),
            "under prlimit --as: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    eprintln!("{args:?}: {:?}, peak RSS {} KiB", run.elapsed, run.peak_kib);
    run
}

fn lint_json(reference: &str) -> Value {
    run_bounded(&["lint", "--format", "json", "--fail-on", "never", reference]).json()
}

/// The settings the entrypoint's scripts export, in order.
fn exports(report: &Value) -> Vec<Value> {
    let report = report.get("reports").and_then(|r| r.get(0)).unwrap_or(report);
    report["facts"]["entrypoint"]["exports"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn last_export<'a>(exports: &'a [Value], name: &str) -> &'a Value {
    exports
        .iter()
        .rev()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| {
            let names: Vec<&str> = exports
                .iter()
                .filter_map(|e| e["name"].as_str())
                .take(50)
                .collect();
            panic!("{name} is not exported: {names:?}…")
        })
}

fn assert_undecided(setting: &Value, needles: &[&str]) {
    assert_eq!(setting["status"], "undecided", "{setting}");
    let why = setting["why"].as_str().unwrap_or_default();
    for n in needles {
        assert!(why.contains(n), "`{n}` not in the why: {why}");
    }
}

/// Defect 3: 400 bytes of `A="$A$A"` would double a value forty times (a terabyte): past
/// MAX_ARG_STRLEN the value is undecided.
#[test]
fn a_value_doubled_forty_times_is_undecided_past_max_arg_strlen() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!("set -a\nA=x\n{}", "A=\"$A$A\"\n".repeat(40));
    let r = script_image(dir.path(), &[script], &[], LayerSpec::new(Comp::Gzip));
    let v = lint_json(&r);
    let e = exports(&v);
    assert_undecided(last_export(&e, "A"), &["128 KiB", "MAX_ARG_STRLEN"]);
    // The last decided value is the one within the bound: 2^17 bytes.
    let decided = e
        .iter()
        .rev()
        .find(|s| s["name"] == "A" && s["status"] == "set")
        .unwrap();
    assert_eq!(decided["value"].as_str().unwrap().len(), 1 << 17);
}

/// Defect 3: one 64 KiB line of `set -a;A=;A=;…` kept the whole line twice per assignment, and
/// the exports again per script of a chain of eight and per container.
#[test]
fn a_line_of_thousands_of_assignments_is_kept_once_in_a_chain_of_eight() {
    let dir = tempfile::tempdir().unwrap();
    let line = format!("set -a;{}", "A=;".repeat(21_000));
    let scripts: Vec<String> = (0..8).map(|_| line.clone()).collect();
    let r = script_image(dir.path(), &scripts, &[], LayerSpec::new(Comp::Gzip));
    let v = lint_json(&r);
    let e = exports(&v);
    // The line as written is an excerpt, the same for every setting it makes.
    let text = e[0]["text"].as_str().unwrap();
    assert!(text.len() < 300 && text.ends_with('…'), "{text}");
    assert_eq!(last_export(&e, "A")["status"], "set");
    // 2,048 settings, then one that says any variable may be set from there on.
    assert_eq!(e.len(), 2048 + 1);
    assert_undecided(last_export(&e, "*"), &["2048 settings", "/usr/local/bin/entry0"]);

    // Twenty containers of the image, each with its own env so that none shares another's
    // entrypoint: the budget holds per container.
    let mut yaml = String::new();
    for i in 0..20 {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}}}\nspec:\n  containers:\n  - name: c\n    image: registry.local/app:1\n    env: [{{name: NUM, value: \"{i}\"}}]\n"
        ));
    }
    fs::write(dir.path().join("pods.yaml"), yaml).unwrap();
    let manifest = dir.path().join("pods.yaml");
    let stand_in = format!("registry.local/app:1={r}");
    let run = run_bounded(&[
        "lint",
        "--k8s",
        manifest.to_str().unwrap(),
        "--image",
        &stand_in,
        "--format",
        "sarif",
        "--fail-on",
        "never",
    ]);
    assert!(!run.out.stdout.is_empty());
}

/// Defect 3: what the scripts of one container assign, all together, past ARG_MAX (2 MiB) is
/// undecided: values of 64 KiB copied to forty names.
#[test]
fn values_past_arg_max_per_container_are_undecided() {
    let dir = tempfile::tempdir().unwrap();
    let mut script = format!("A=x\n{}", "A=\"$A$A\"\n".repeat(16));
    for i in 0..40 {
        script.push_str(&format!("export B{i}=\"$A\"\n"));
    }
    let r = script_image(dir.path(), &[script], &[], LayerSpec::new(Comp::Gzip));
    let e = exports(&lint_json(&r));
    assert_eq!(last_export(&e, "B0")["status"], "set");
    // Twenty-nine copies of 64 KiB fit in 2 MiB with A; from the one that does not, any variable is
    // undecided.
    assert_eq!(last_export(&e, "B28")["status"], "set");
    assert!(!e.iter().any(|s| s["name"] == "B39"));
    assert_undecided(last_export(&e, "*"), &["2 MiB", "ARG_MAX"]);
}

/// Defect 6: the image's `Env` of 150,000 entries, and scripts of 8 × 10,000 references to it:
/// each look-up is by name, not a scan of the whole `Env`.
#[test]
fn references_to_an_image_env_of_150000_entries_are_looked_up_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let env: Vec<String> = (0..150_000).map(|i| format!("V{i}=")).collect();
    let refs: String = (0..10_000).map(|i| format!("$V{}", i * 13)).collect();
    let script = format!("export X=\"{}\"", &refs[..refs.len().min(60_000)]);
    let scripts: Vec<String> = (0..8).map(|_| script.clone()).collect();
    let r = script_image(dir.path(), &scripts, &env, LayerSpec::new(Comp::Gzip));
    let e = exports(&lint_json(&r));
    assert_eq!(last_export(&e, "X")["status"], "set");
}

/// Defect 6: `$(find …)` over 60,000 files, 1,200 times with another name each: one search
/// budget for the image, not 200,000 entries a call.
#[test]
fn finds_share_one_budget_per_image() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = LayerSpec::new(Comp::Gzip);
    for i in 0..60_000 {
        files = files.file(&format!("data/d{}/f{i}", i / 1000), b"");
    }
    let mut script = String::new();
    for i in 0..1_200 {
        script.push_str(&format!("export F{i}=$(find /data -name n{i} -print -quit)\n"));
    }
    let r = script_image(dir.path(), &[script], &[], files);
    let e = exports(&lint_json(&r));
    // The first searches fit; past 200,000 entries in all, a search is undecided.
    assert_eq!(last_export(&e, "F0")["status"], "set");
    assert_eq!(last_export(&e, "F0")["value"], "");
    assert_undecided(
        last_export(&e, "F1199"),
        &["searches more of the image than memlint follows", "200000"],
    );
}

/// A pod of `containers`, each named `c{i}` with `env` (YAML lines, indented for the list).
fn pod(name: &str, containers: &[String]) -> String {
    let mut y = format!("---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n");
    for (i, env) in containers.iter().enumerate() {
        y.push_str(&format!(
            "  - name: c{i}\n    image: registry.local/app:1\n    env:\n{env}"
        ));
    }
    y
}

fn lint_k8s(dir: &Path, yaml: &str, reference: &str) -> Value {
    let manifest = dir.join("pods.yaml");
    fs::write(&manifest, yaml).unwrap();
    let stand_in = format!("registry.local/app:1={reference}");
    run_bounded(&[
        "lint",
        "--k8s",
        manifest.to_str().unwrap(),
        "--image",
        &stand_in,
        "--format",
        "json",
        "--fail-on",
        "never",
    ])
    .json()
}

/// The `env` of a container's report, as the manifest reader resolved it.
fn manifest_env(report: &Value) -> Vec<Value> {
    report["facts"]["container"]["env"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Defect 4: containers that each double a value twenty times (2 MiB with 630 bytes of YAML):
/// a value past 128 KiB, a container past 2 MiB, and the run past 16 MiB of expansion are
/// undecided with the bound.
#[test]
fn manifest_expansion_is_bounded_per_value_per_container_and_per_run() {
    let dir = tempfile::tempdir().unwrap();
    let r = script_image(dir.path(), &["true".to_string()], &[], LayerSpec::new(Comp::Gzip));
    // One container: A0 of 8 bytes doubled into A1…A15 (A14 is 128 KiB, A15 twice that), then
    // B0…B39 copies of A13 (64 KiB each): the copies pass 2 MiB.
    let mut env = String::from("    - {name: A0, value: xxxxxxxx}\n");
    for i in 1..16 {
        env.push_str(&format!(
            "    - {{name: A{i}, value: \"$(A{})$(A{})\"}}\n",
            i - 1,
            i - 1
        ));
    }
    for i in 0..40 {
        env.push_str(&format!("    - {{name: B{i}, value: \"$(A13)\"}}\n"));
    }
    let v = lint_k8s(dir.path(), &pod("one", &[env]), &r);
    let e = manifest_env(&v["reports"][0]);
    let by_name = |n: &str| e.iter().find(|x| x["name"] == n).unwrap().clone();
    assert_eq!(by_name("A13")["value"].as_str().unwrap().len(), 64 << 10);
    assert_eq!(by_name("A14")["value"].as_str().unwrap().len(), 128 << 10);
    let a15 = by_name("A15");
    assert_eq!(a15["from"], "unknown", "{a15}");
    assert!(a15["why"].as_str().unwrap().contains("MAX_ARG_STRLEN"), "{a15}");
    assert_eq!(by_name("B0")["from"], "value");
    let b39 = by_name("B39");
    assert_eq!(b39["from"], "unknown", "{b39}");
    assert!(
        b39["why"].as_str().unwrap().contains("2 MiB") && b39["why"].as_str().unwrap().contains("ARG_MAX"),
        "{b39}"
    );

    // 300 KB of containers that each reach 2 MiB: the run stops expanding at 16 MiB.
    let mut env = String::from("    - {name: A0, value: xxxxxxxx}\n");
    for i in 1..15 {
        env.push_str(&format!(
            "    - {{name: A{i}, value: \"$(A{})$(A{})\"}}\n",
            i - 1,
            i - 1
        ));
    }
    for i in 0..15 {
        env.push_str(&format!("    - {{name: B{i}, value: \"$(A13)\"}}\n"));
    }
    let containers: Vec<String> = (0..8).map(|_| env.clone()).collect();
    let yaml: String = (0..32).map(|p| pod(&format!("p{p}"), &containers)).collect();
    assert!(yaml.len() > 290_000, "{}", yaml.len());
    let v = lint_k8s(dir.path(), &yaml, &r);
    let reports = v["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 256);
    let last = manifest_env(reports.last().unwrap());
    let a13 = last.iter().find(|x| x["name"] == "A13").unwrap();
    assert_eq!(a13["from"], "unknown");
    assert!(a13["why"].as_str().unwrap().contains("16 MiB"), "{}", a13["why"]);
    // The JSON holds what the budgets let through: well under the gigabytes it was.
    assert!(serde_json::to_vec(&v).unwrap().len() < 64 << 20);
}

/// Defect 6: a 5.6 MB manifest of 1,100,000 `$(NAME)` references among 2,000 entries: each
/// looked up by name, not by a scan back through the entries before it (entries × references,
/// a billion comparisons).
#[test]
fn many_manifest_references_are_looked_up_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let r = script_image(dir.path(), &["true".to_string()], &[], LayerSpec::new(Comp::Gzip));
    let refs = "$(V0)".repeat(560);
    let mut env = String::from("    - {name: V0, value: x}\n");
    for i in 1..2_000 {
        env.push_str(&format!("    - {{name: V{i}, value: \"{refs}\"}}\n"));
    }
    let yaml = pod("refs", &[env]);
    assert!(yaml.len() > 5_600_000, "{}", yaml.len());
    let v = lint_k8s(dir.path(), &yaml, &r);
    let e = manifest_env(&v["reports"][0]);
    assert_eq!(e.len(), 2_000);
    assert_eq!(e[1_999]["value"], "x".repeat(560));
}
