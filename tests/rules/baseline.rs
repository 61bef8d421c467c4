//! The baseline (issue #34 item 1): a fleet of real-package images run by the workloads of
//! `testdata/k8s/baseline-fleet.yaml` (`--image` stand-ins), its findings written as a baseline
//! and the same run judged against it; then an image rebuilt with another tag and another
//! layer order, its manifest moved and its lines shifted (no new finding), a broken container
//! added (exactly that finding is new and fails the run), a finding fixed (reported fixed, and
//! `--prune-baseline` drops it), shards merged with `merge --baseline`, and bad baselines.

use crate::common;

use common::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

const FLEET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/k8s/baseline-fleet.yaml");
const WORKER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/k8s/baseline-worker.yaml");

/// The images of the fleet, built from Debian packages (cached between runs).
struct Images {
    api: String,
    pay: String,
    worker: String,
}

fn images() -> Images {
    Images {
        api: build_image("demo"),
        pay: build_image("dotnet-npgsql"),
        worker: build_image("glibc"),
    }
}

/// `lint --k8s deploy/ …` in `dir`: its exit code, JSON (standard output) and standard error.
fn lint(dir: &Path, stand_ins: &[(&str, &str)], extra: &[&str]) -> (Option<i32>, Value, String) {
    let mut args: Vec<String> = ["lint", "--k8s", "deploy", "--format", "json"]
        .map(String::from)
        .to_vec();
    for (r, s) in stand_ins {
        args.push("--image".to_string());
        args.push(format!("{r}={s}"));
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = memlint_in(dir, &args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("JSON ({e}): {stderr}"));
    common::assert_valid_report(&v);
    (out.status.code(), v, stderr)
}

fn reports(v: &Value) -> &Vec<Value> {
    v["reports"].as_array().unwrap()
}

/// `(workload, rule)` of every finding in `key` (`findings`, `baselined`, `fixed`).
fn listed(v: &Value, key: &str) -> BTreeSet<(String, String)> {
    reports(v)
        .iter()
        .flat_map(|r| {
            let name = r["k8s"]["name"].as_str().unwrap_or("").to_string();
            r[key]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |f| (name.clone(), f["rule"].as_str().unwrap().to_string()))
        })
        .collect()
}

fn summed(v: &Value, key: &str) -> u64 {
    reports(v)
        .iter()
        .map(|r| r["summary"][key].as_u64().unwrap())
        .sum()
}

/// The fingerprints of a SARIF document's results, by rule and workload.
fn sarif_prints(path: &Path) -> BTreeSet<(String, String, String)> {
    let v: Value = serde_json::from_slice(&fs::read(path).unwrap()).unwrap();
    v["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["ruleId"].as_str().unwrap().to_string(),
                r["properties"]["k8s"]["name"].as_str().unwrap().to_string(),
                r["partialFingerprints"]["memlintFinding/v2"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect()
}

/// The demo image rebuilt: a layer put under its others (every layer's number moves), so
/// another manifest and config digest.
fn rebuilt_with_a_layer_below(base: &str, out: &Path) -> String {
    let base = Path::new(base.strip_prefix("oci-dir:").unwrap().rsplit_once(':').unwrap().0);
    run(std::process::Command::new("cp").arg("-r").arg(base).arg(out));
    let w = OciWriter::new(out);
    let blob = |d: &Value| -> Value {
        let hex = d["digest"].as_str().unwrap().strip_prefix("sha256:").unwrap();
        serde_json::from_slice(&fs::read(out.join("blobs/sha256").join(hex)).unwrap()).unwrap()
    };
    let index: Value = serde_json::from_slice(&fs::read(out.join("index.json")).unwrap()).unwrap();
    let mut manifest = blob(&index["manifests"][0]);
    let mut config = blob(&manifest["config"]);
    let extra = LayerSpec::new(Comp::Gzip)
        .by("RUN echo build 2 > /etc/build-info")
        .file("etc/build-info", b"build 2\n");
    let (bytes, media_type, diff_id) = extra.blob();
    let layer = w.blob(&bytes, media_type);
    manifest["layers"].as_array_mut().unwrap().insert(0, layer);
    config["rootfs"]["diff_ids"]
        .as_array_mut()
        .unwrap()
        .insert(0, json!(diff_id));
    config["history"]
        .as_array_mut()
        .unwrap()
        .insert(0, json!({"created_by": extra.created_by}));
    manifest["config"] = w.blob(
        &serde_json::to_vec(&config).unwrap(),
        "application/vnd.oci.image.config.v1+json",
    );
    let d = w.blob(
        &serde_json::to_vec(&manifest).unwrap(),
        "application/vnd.oci.image.manifest.v1+json",
    );
    w.write_index_json(vec![with_name(d, "2")]);
    format!("oci-dir:{}:2", out.display())
}

/// A folder `deploy/` in a new temporary folder holding the fleet's manifest.
fn fleet_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("deploy")).unwrap();
    fs::copy(FLEET, dir.path().join("deploy/fleet.yaml")).unwrap();
    dir
}

fn entries(path: &Path) -> Vec<Value> {
    let v: Value = serde_json::from_slice(&fs::read(path).unwrap()).unwrap();
    assert_eq!(v["memlint_baseline"], 1);
    v["entries"].as_array().unwrap().clone()
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_fleet_adopts_a_baseline_and_fails_only_on_new_findings() {
    let img = images();
    let dir = fleet_dir();
    let d = dir.path();
    let stand_ins = [
        ("registry.local/api:1", img.api.as_str()),
        ("registry.local/pay:1", img.pay.as_str()),
    ];

    // Without a baseline the fleet fails.
    let (code, first, _) = lint(d, &stand_ins, &["-o", "sarif=before.sarif"]);
    assert_eq!(code, Some(1));
    let found = listed(&first, "findings");
    let total = summed(&first, "errors") + summed(&first, "warnings") + summed(&first, "notes");
    assert!(found.contains(&("api".to_string(), "ld-preload-missing".to_string())));
    assert!(found.contains(&("nightly".to_string(), "ld-preload-missing".to_string())));
    assert!(found.iter().any(|(w, _)| w == "pay"), "{found:?}");
    // Each JSON finding carries its fingerprint, the SARIF's and GitLab's.
    for r in reports(&first) {
        for f in r["findings"].as_array().unwrap() {
            assert_eq!(f["fingerprint"].as_str().unwrap().len(), 32, "{f}");
        }
    }

    // --write-baseline: one sorted entry per finding, by workload and container.
    let (code, _, stderr) = lint(
        d,
        &stand_ins,
        &["--fail-on", "never", "--write-baseline", "memlint-baseline.json"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("wrote the baseline memlint-baseline.json"),
        "{stderr}"
    );
    let written = entries(&d.join("memlint-baseline.json"));
    assert_eq!(written.len() as u64, total);
    let api = written.iter().find(|e| e["workload"]["name"] == "api").unwrap();
    assert_eq!(api["rule"], "ld-preload-missing");
    assert_eq!(api["severity"], "error");
    assert_eq!(
        api["workload"],
        json!({"kind": "Deployment", "namespace": "shop", "name": "api"})
    );
    assert_eq!(api["container"], "app");
    assert!(api["paths"]
        .as_array()
        .unwrap()
        .contains(&json!("/usr/lib/aarch64-linux-gnu/libjemalloc.so.2")));
    assert_eq!(api["first_seen"].as_str().unwrap().len(), 10);
    let order: Vec<String> = written.iter().map(|e| e.to_string()).collect();
    let mut sorted = written.clone();
    sorted.sort_by_key(|e| {
        (
            e["workload"]["kind"].as_str().unwrap().to_string(),
            e["workload"]["namespace"].as_str().unwrap().to_string(),
            e["workload"]["name"].as_str().unwrap().to_string(),
            e["container"].as_str().unwrap().to_string(),
            e["rule"].as_str().unwrap().to_string(),
        )
    });
    assert_eq!(order, sorted.iter().map(|e| e.to_string()).collect::<Vec<_>>());

    // The same run with --baseline: every finding baselined, exit 0.
    let (code, same, stderr) = lint(
        d,
        &stand_ins,
        &["--baseline", "memlint-baseline.json", "-o", "sarif=same.sarif"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(listed(&same, "findings").is_empty());
    assert_eq!(listed(&same, "baselined"), found);
    assert_eq!(summed(&same, "baselined"), total);
    assert_eq!(summed(&same, "fixed"), 0);
    assert!(
        stderr.contains(&format!(
            "baseline memlint-baseline.json: {total} finding(s) baselined, 0 fixed"
        )),
        "{stderr}"
    );
    // SARIF: the same fingerprints as the run before the baseline, each result suppressed.
    assert_eq!(
        sarif_prints(&d.join("before.sarif")),
        sarif_prints(&d.join("same.sarif"))
    );
    let sarif: Value = serde_json::from_slice(&fs::read(d.join("same.sarif")).unwrap()).unwrap();
    for r in sarif["runs"][0]["results"].as_array().unwrap() {
        let s = &r["suppressions"][0];
        assert_eq!(s["kind"], "external", "{r}");
        assert!(
            s["justification"]
                .as_str()
                .unwrap()
                .starts_with("accepted in the baseline memlint-baseline.json (first seen "),
            "{s}"
        );
    }
    validate_sarif(&d.join("same.sarif"));
    // Text: the count, not the findings.
    let out = memlint_in(
        d,
        &[
            "lint",
            "--k8s",
            "deploy",
            "--image",
            &format!("registry.local/api:1={}", img.api),
            "--image",
            &format!("registry.local/pay:1={}", img.pay),
            "--baseline",
            "memlint-baseline.json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("error[ld-preload-missing]"), "{text}");
    assert!(
        text.contains("0 errors, 0 warnings, 0 notes, 1 baselined"),
        "{text}"
    );

    // Rebuilt with a new tag and another layer order, the manifest moved to another file with
    // its lines shifted: nothing new, the same fingerprints.
    let api2 = rebuilt_with_a_layer_below(&img.api, &d.join("api-2"));
    let manifest = fs::read_to_string(d.join("deploy/fleet.yaml"))
        .unwrap()
        .replace("registry.local/api:1", "registry.local/api:2");
    fs::remove_file(d.join("deploy/fleet.yaml")).unwrap();
    fs::create_dir(d.join("deploy/apps")).unwrap();
    fs::write(
        d.join("deploy/apps/shop.yaml"),
        format!("# moved\n# and\n# shifted\n\n{manifest}"),
    )
    .unwrap();
    let moved = [
        ("registry.local/api:2", api2.as_str()),
        ("registry.local/pay:1", img.pay.as_str()),
    ];
    let (code, again, stderr) = lint(
        d,
        &moved,
        &["--baseline", "memlint-baseline.json", "-o", "sarif=moved.sarif"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(listed(&again, "findings").is_empty(), "{again}");
    assert_eq!(summed(&again, "baselined"), total);
    let api_report = reports(&again)
        .iter()
        .find(|r| r["k8s"]["name"] == "api")
        .unwrap();
    assert_eq!(api_report["k8s"]["file"], "deploy/apps/shop.yaml");
    assert!(
        api_report["baselined"][0]["evidence"]
            .to_string()
            .contains("layer 9"),
        "the layer that brought the library moved: {}",
        api_report["baselined"][0]
    );
    assert_eq!(
        sarif_prints(&d.join("before.sarif")),
        sarif_prints(&d.join("moved.sarif"))
    );

    // A broken container added: exactly that finding is new, and fails the run.
    fs::copy(WORKER, d.join("deploy/worker.yaml")).unwrap();
    let with_worker = [
        moved[0],
        moved[1],
        ("registry.local/worker:1", img.worker.as_str()),
    ];
    let (code, broken, stderr) = lint(d, &with_worker, &["--baseline", "memlint-baseline.json"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(
        listed(&broken, "findings"),
        BTreeSet::from([("worker".to_string(), "ld-preload-missing".to_string())])
    );
    assert_eq!(summed(&broken, "baselined"), total);
    let out = memlint_in(
        d,
        &[
            "lint",
            "--k8s",
            "deploy",
            "--baseline",
            "memlint-baseline.json",
            "--image",
            &format!("registry.local/api:2={api2}"),
            "--image",
            &format!("registry.local/pay:1={}", img.pay),
            "--image",
            &format!("registry.local/worker:1={}", img.worker),
            "--format",
            "github",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let annotations = String::from_utf8_lossy(&out.stdout);
    assert_eq!(annotations.lines().count(), 1, "{annotations}");
    assert!(annotations.contains("libjemalloc.so.2"), "{annotations}");
    fs::remove_file(d.join("deploy/worker.yaml")).unwrap();

    // One finding fixed (the manifest preloads the folder that exists): reported fixed, and
    // --prune-baseline drops it from the file.
    let fixed_manifest = fs::read_to_string(d.join("deploy/apps/shop.yaml")).unwrap().replacen(
        "          image: registry.local/api:2\n",
        "          image: registry.local/api:2\n          env:\n            - name: LD_PRELOAD\n              value: /usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n",
        1,
    );
    fs::write(d.join("deploy/apps/shop.yaml"), fixed_manifest).unwrap();
    let (code, fixed, stderr) = lint(d, &moved, &["--baseline", "memlint-baseline.json"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        listed(&fixed, "fixed"),
        BTreeSet::from([("api".to_string(), "ld-preload-missing".to_string())])
    );
    assert_eq!(summed(&fixed, "fixed"), 1);
    assert!(stderr.contains("1 fixed (no longer found)"), "{stderr}");
    assert!(
        stderr.contains("fixed ld-preload-missing on Deployment shop/api, container app"),
        "{stderr}"
    );
    assert_eq!(
        entries(&d.join("memlint-baseline.json")).len() as u64,
        total,
        "not pruned unless asked"
    );
    let (code, _, stderr) = lint(
        d,
        &moved,
        &["--baseline", "memlint-baseline.json", "--prune-baseline"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let pruned = entries(&d.join("memlint-baseline.json"));
    assert_eq!(pruned.len() as u64, total - 1);
    assert!(!pruned.iter().any(|e| e["workload"]["name"] == "api"));
    assert!(pruned.iter().any(|e| e["workload"]["name"] == "nightly"));
    let (_, after, _) = lint(d, &moved, &["--baseline", "memlint-baseline.json"]);
    assert_eq!(summed(&after, "fixed"), 0);
}

#[test]
fn shards_merged_against_a_baseline_fail_only_on_new_findings() {
    let img = images();
    let dir = fleet_dir();
    let d = dir.path();
    fs::copy(WORKER, d.join("deploy/worker.yaml")).unwrap();
    let stand_ins = [
        ("registry.local/api:1", img.api.as_str()),
        ("registry.local/pay:1", img.pay.as_str()),
        ("registry.local/worker:1", img.worker.as_str()),
    ];
    // The baseline of the fleet without the worker.
    let out = memlint_in(
        d,
        &[
            "lint",
            "--k8s",
            "deploy/fleet.yaml",
            "--fail-on",
            "never",
            "--write-baseline",
            "b.json",
            "--image",
            &format!("registry.local/api:1={}", img.api),
            "--image",
            &format!("registry.local/pay:1={}", img.pay),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let total = entries(&d.join("b.json")).len() as u64;
    let mut shards: Vec<PathBuf> = Vec::new();
    for i in 1..=2 {
        let shard = format!("{i}/2");
        let (code, v, stderr) = lint(d, &stand_ins, &["--shard", &shard, "--fail-on", "never"]);
        assert_eq!(code, Some(0), "{stderr}");
        let path = d.join(format!("shard-{i}.json"));
        fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
        shards.push(path);
    }
    let merge = |extra: &[&str]| -> Output {
        let mut args = vec!["merge"];
        args.extend(shards.iter().map(|p| p.to_str().unwrap()));
        args.extend_from_slice(extra);
        memlint_in(d, &args)
    };
    let out = merge(&["--baseline", "b.json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        listed(&v, "findings"),
        BTreeSet::from([("worker".to_string(), "ld-preload-missing".to_string())])
    );
    assert_eq!(summed(&v, "baselined"), total);
    assert_eq!(summed(&v, "fixed"), 0);
    // Without the worker's report: nothing new.
    let without: Vec<Value> = shards
        .iter()
        .map(|p| {
            let mut v: Value = serde_json::from_slice(&fs::read(p).unwrap()).unwrap();
            v["reports"]
                .as_array_mut()
                .unwrap()
                .retain(|r| r["k8s"]["name"] != "worker");
            v
        })
        .collect();
    for (p, v) in shards.iter().zip(&without) {
        fs::write(p, serde_json::to_vec(v).unwrap()).unwrap();
    }
    let out = merge(&["--baseline", "b.json", "--format", "sarif"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len() as u64, total);
    assert!(results.iter().all(|r| r["suppressions"][0]["kind"] == "external"));
    // Without --baseline, merge fails on them as before.
    assert_eq!(merge(&[]).status.code(), Some(1));
}

#[test]
fn an_image_without_k8s_is_known_by_its_repository() {
    let api = build_image("demo");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = memlint_in(
        d,
        &["lint", "--fail-on", "never", "--write-baseline", "b.json", &api],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let written = entries(&d.join("b.json"));
    assert_eq!(written.len(), 1);
    assert_eq!(written[0]["image"], "demo");
    assert_eq!(written[0]["platform"], "linux/amd64");
    // Rebuilt with another layer order and tag: still baselined.
    let rebuilt = rebuilt_with_a_layer_below(&api, &d.join("demo"));
    let out = memlint_in(d, &["lint", "--baseline", "b.json", "--format", "json", &rebuilt]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let v = common::valid_report(&out.stdout);
    assert_eq!(v["summary"]["baselined"], 1);
    assert_eq!(v["baselined"][0]["rule"], "ld-preload-missing");
    assert_eq!(v["findings"], json!([]));
    // Written again over itself: the first day stays.
    let first_day = written[0]["first_seen"].clone();
    let out = memlint_in(
        d,
        &[
            "lint",
            "--baseline",
            "b.json",
            "--write-baseline",
            "b.json",
            &rebuilt,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(entries(&d.join("b.json"))[0]["first_seen"], first_day);
}

#[test]
fn a_missing_or_malformed_baseline_exits_2_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let image = "dir:/nonexistent-never-read";
    let out = memlint_in(d, &["lint", "--baseline", "missing.json", image]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr_of(&out);
    assert!(
        e.contains("memlint::baseline") && e.contains("missing.json"),
        "{e}"
    );
    fs::write(
        d.join("bad.json"),
        "{\n  \"memlint_baseline\": 1,\n  \"entries\": [\n    {\"rule\": \"x\"}\n  ]\n}\n",
    )
    .unwrap();
    let out = memlint_in(d, &["lint", "--baseline", "bad.json", image]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr_of(&out);
    assert!(e.contains("memlint::baseline") && e.contains("line 4"), "{e}");
    assert!(e.contains("bad.json:4:"), "file, line and column: {e}");
    // A control character in the file is shown escaped.
    fs::write(
        d.join("hostile.json"),
        "{\"memlint_baseline\": 1, \"entries\": [{\"rule\": \"x\", \"severity\": \"note\", \"image\": \"a\", \"platform\": \"p\", \"paths\": [], \"fingerprint\": \"\\u001b]0;owned\\u0007\", \"first_seen\": \"2026-01-01\"}]}",
    )
    .unwrap();
    let out = memlint_in(d, &["lint", "--baseline", "hostile.json", image]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr_of(&out);
    assert!(!e.contains('\x1b') && !e.contains('\x07'), "{e:?}");
    // A file past the bound is refused before it is read into memory.
    let big = fs::File::create(d.join("big.json")).unwrap();
    big.set_len(17 << 20).unwrap();
    let out = memlint_in(d, &["lint", "--baseline", "big.json", image]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr_of(&out);
    assert!(e.contains("larger than 16 MiB"), "{e}");
    // --prune-baseline needs --baseline; merge refuses a bad baseline too.
    let out = memlint_in(d, &["lint", "--prune-baseline", image]);
    assert_eq!(out.status.code(), Some(2));
    let out = memlint_in(d, &["merge", "--baseline", "bad.json", "-"]);
    assert_eq!(out.status.code(), Some(2));
}
