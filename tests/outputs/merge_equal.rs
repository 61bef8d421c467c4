//! `memlint merge` of `lint --k8s --shard I/3` JSON reports writes, byte for byte, what
//! `lint --k8s` of the whole fleet writes, in every format; the JSON contract
//! (`schema_version`, `memlint schema`) and what `merge` refuses.

use crate::common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Output;

const FORMATS: [&str; 7] = ["text", "json", "sarif", "github", "gitlab", "junit", "html"];

/// Memory volumes without a `sizeLimit` of the `cache` Deployment: more findings of
/// `emptydir-memory-unbounded` than a report lists (`judge::MAX_FINDINGS_PER_RULE`, 50).
const VOLUMES: usize = 55;

/// A fleet of three images, two replicas each (one with a limit, one without), a container
/// with more memory volumes than a rule's findings a report lists, and a container whose
/// image cannot be read; `--image` stand-ins for each.
fn fleet(dir: &Path) -> Vec<String> {
    let images = ["node-old-space", "java17-options", "next-15"].map(build_image);
    let mut yaml = String::new();
    let mut stand_ins = Vec::new();
    for (i, image) in images.iter().enumerate() {
        for replica in 0..2 {
            let limits = if replica == 0 {
                "        resources: {limits: {memory: 1Gi}}\n"
            } else {
                ""
            };
            yaml.push_str(&format!(
                "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: app-{i}-{replica}, namespace: shop}}\nspec:\n  template:\n    spec:\n      containers:\n      - name: main\n        image: registry.local/app-{i}:1\n{limits}"
            ));
        }
        stand_ins.push(format!("registry.local/app-{i}:1={image}"));
    }
    yaml.push_str("---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: cache, namespace: shop}\nspec:\n  template:\n    spec:\n      containers:\n      - name: main\n        image: registry.local/app-0:1\n        resources: {limits: {memory: 512Mi}}\n        volumeMounts:\n");
    for v in 0..VOLUMES {
        yaml.push_str(&format!("        - {{name: m{v}, mountPath: /m{v}}}\n"));
    }
    yaml.push_str("      volumes:\n");
    for v in 0..VOLUMES {
        yaml.push_str(&format!("      - {{name: m{v}, emptyDir: {{medium: Memory}}}}\n"));
    }
    yaml.push_str("---\napiVersion: v1\nkind: Pod\nmetadata: {name: broken}\nspec:\n  containers:\n  - name: x\n    image: registry.local/missing:1\n");
    stand_ins.push(format!(
        "registry.local/missing:1={}",
        dir.join("no-such-layout").display()
    ));
    std::fs::write(dir.join("fleet.yaml"), yaml).unwrap();
    stand_ins
}

fn lint_args<'a>(stand_ins: &'a [String], extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["lint", "--k8s", "fleet.yaml", "--no-cache"];
    for s in stand_ins {
        args.extend(["--image", s.as_str()]);
    }
    args.extend_from_slice(extra);
    args
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Lints the fleet in three shards (with `pin`'s arguments), then checks that `merge` of the
/// shards writes what the unsharded run writes in every format; returns the shards' file names
/// and each format's output.
fn merge_equals_unsharded(
    d: &Path,
    stand_ins: &[String],
    pin: &[&str],
) -> (Vec<String>, Vec<(&'static str, String)>) {
    let mut shards = Vec::new();
    for i in 1..=3 {
        let shard = format!("{i}/3");
        let out = format!("shard-{i}.json");
        let mut extra = vec![
            "--shard",
            &shard,
            "--format",
            "json",
            "--fail-on",
            "note",
            "--output",
            &out,
        ];
        extra.extend_from_slice(pin);
        let o = memlint_in(d, &lint_args(stand_ins, &extra));
        // The shard holding the unreadable image ends with 2, the others by their findings.
        assert!(matches!(o.status.code(), Some(0..=2)), "{}", stderr(&o));
        let v = valid_report(&std::fs::read(d.join(&out)).unwrap());
        assert_eq!(v["schema_version"], "1.1.0");
        shards.push(out);
    }
    let mut outputs = Vec::new();
    for format in FORMATS {
        let mut extra = vec!["--format", format, "--fail-on", "note"];
        extra.extend_from_slice(pin);
        let whole = memlint_in(d, &lint_args(stand_ins, &extra));
        let mut args = vec!["merge"];
        args.extend(shards.iter().map(String::as_str));
        args.extend(["--format", format, "--fail-on", "note"]);
        let merged = memlint_in(d, &args);
        assert_eq!(whole.status.code(), Some(2), "{format}: {}", stderr(&whole));
        assert_eq!(merged.status.code(), Some(2), "{format}: {}", stderr(&merged));
        assert!(!whole.stdout.is_empty(), "{format}");
        assert_eq!(
            String::from_utf8_lossy(&merged.stdout),
            String::from_utf8_lossy(&whole.stdout),
            "{format}"
        );
        if format == "json" {
            let v = valid_report(&merged.stdout);
            assert_eq!(v["reports"].as_array().unwrap().len(), 8);
        }
        outputs.push((format, String::from_utf8(merged.stdout).unwrap()));
    }
    (shards, outputs)
}

fn output<'a>(outputs: &'a [(&str, String)], format: &str) -> &'a str {
    outputs
        .iter()
        .find(|(f, _)| *f == format)
        .map(|(_, o)| o.as_str())
        .unwrap()
}

#[test]
fn merge_of_three_shards_is_the_unsharded_run_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let stand_ins = fleet(d);
    let (shards, outputs) = merge_equals_unsharded(d, &stand_ins, &[]);
    // The findings past the cap: one finding stands for them, in JSON, JUnit's count and HTML.
    let json: Value = serde_json::from_str(output(&outputs, "json")).unwrap();
    let cache = json["reports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["k8s"]["name"] == "cache")
        .unwrap();
    let unbounded: Vec<&Value> = cache["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "emptydir-memory-unbounded")
        .collect();
    assert_eq!(unbounded.len(), 51);
    assert_eq!(unbounded[50]["omitted"], VOLUMES - 50);
    assert!(unbounded[..50].iter().all(|f| f.get("omitted").is_none()));
    assert!(output(&outputs, "junit").contains(&format!("{VOLUMES} findings at or above note")));
    assert!(output(&outputs, "html").contains(&format!("stands for {} findings", VOLUMES - 50)));
    // Each finding carries the image paths its evidence names.
    let paths: Vec<&Value> = json["reports"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["findings"].as_array().into_iter().flatten())
        .flat_map(|f| f["paths"].as_array().unwrap())
        .collect();
    assert!(paths.iter().any(|p| *p == "/usr/local/bin/node"), "{paths:?}");
    assert!(paths.iter().all(|p| p.as_str().unwrap().starts_with('/')));
    // The page: the summary's counts, and a budget picture per linted container, one of them
    // a heap inside a limit.
    let html = output(&outputs, "html");
    assert!(
        html.contains("<li class=\"containers\"><b>8</b> containers</li>"),
        "{html}"
    );
    assert!(
        html.contains("<li class=\"images\"><b>3</b> images</li>"),
        "{html}"
    );
    assert_eq!(html.matches("<svg class=\"budget\"").count(), 7);
    assert!(html.contains("<rect class=\"part heap\""), "{html}");
    assert!(html.contains("<tr class=\"unread\">"), "{html}");
    // Anchors by place in the fleet, the unread container's (the 8th) included.
    for i in 1..=7 {
        assert!(html.contains(&format!("<a href=\"#r{i}\">")), "r{i}");
        assert!(html.contains(&format!("\" id=\"r{i}\">\n<h2>")), "r{i}");
    }
    assert!(!html.contains('\0'));
    // `-o FORMAT=FILE` writes the same documents beside the one on standard output.
    let mut args = vec!["merge"];
    args.extend(shards.iter().map(String::as_str));
    args.extend([
        "--format",
        "text",
        "--fail-on",
        "note",
        "-o",
        "html=merged.html",
        "-o",
        "gitlab=merged-gl.json",
    ]);
    let o = memlint_in(d, &args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(String::from_utf8(o.stdout).unwrap(), output(&outputs, "text"));
    assert_eq!(std::fs::read_to_string(d.join("merged.html")).unwrap(), html);
    assert_eq!(
        std::fs::read_to_string(d.join("merged-gl.json")).unwrap(),
        output(&outputs, "gitlab")
    );
    // The text of the merge is the full report: places, evidence, fixes, the table.
    let mut args = vec!["merge"];
    args.extend(shards.iter().map(String::as_str));
    args.extend(["--format", "text"]);
    let text = String::from_utf8(memlint_in(d, &args).stdout).unwrap();
    for needle in [
        "== Deployment shop/app-0-0, container main (fleet.yaml:",
        "  evidence:\n",
        "  fix:\n",
        "brought /usr/local/bin/node",
        "error: the image ",
        "WORKLOAD",
    ] {
        assert!(text.contains(needle), "{needle:?} in\n{text}");
    }
}

#[test]
fn merge_of_shards_pinned_to_a_rules_version_is_the_pinned_unsharded_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let stand_ins = fleet(d);
    let (shards, outputs) = merge_equals_unsharded(d, &stand_ins, &["--rules-version", "0.1.0"]);
    let shard: Value = serde_json::from_slice(&std::fs::read(d.join(&shards[0])).unwrap()).unwrap();
    assert_eq!(shard["reports"][0]["rules_version"], "0.1.0");
    // JUnit has a test per rule that ran: the pin's, not this memlint's.
    let junit = output(&outputs, "junit");
    assert!(!junit.contains("name=\"emptydir-memory-unbounded\""), "{junit}");
    assert!(
        junit.contains("<testcase name=\"dotnet-gc-env-decimal\""),
        "{junit}"
    );
}

/// A shard's JSON with `edit` applied, written to `name`.
fn edited(d: &Path, from: &str, name: &str, edit: impl FnOnce(&mut Value)) {
    let mut v: Value = serde_json::from_slice(&std::fs::read(d.join(from)).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(d.join(name), serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

#[test]
fn merge_refuses_other_majors_unversioned_reports_and_unknown_severities() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let image = build_image("node-old-space");
    std::fs::write(
        d.join("one.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: one}\nspec:\n  containers:\n  - name: main\n    image: registry.local/one:1\n    resources: {limits: {memory: 1Gi}}\n",
    )
    .unwrap();
    let stand_in = format!("registry.local/one:1={image}");
    let o = memlint_in(
        d,
        &[
            "lint",
            "--k8s",
            "one.yaml",
            "--image",
            &stand_in,
            "--no-cache",
            "--format",
            "json",
            "--fail-on",
            "never",
            "--output",
            "good.json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let good: Value = serde_json::from_slice(&std::fs::read(d.join("good.json")).unwrap()).unwrap();
    assert!(!good["reports"][0]["findings"].as_array().unwrap().is_empty());
    edited(d, "good.json", "old.json", |v| {
        v.as_object_mut().unwrap().remove("schema_version");
    });
    edited(d, "good.json", "next.json", |v| {
        v["schema_version"] = "2.0.0".into()
    });
    edited(d, "good.json", "minor.json", |v| {
        v["schema_version"] = "1.7.0".into()
    });
    edited(d, "good.json", "severity.json", |v| {
        v["reports"][0]["findings"][0]["severity"] = "fatal".into()
    });
    edited(d, "good.json", "budget.json", |v| {
        v["reports"][0]["facts"]["memory"]["limit"] = 3.into()
    });
    edited(d, "good.json", "hostile.json", |v| {
        v["reports"][0]["facts"]["memory"]["dev_shm"]["source"] =
            "</style><script>x</script>\u{0}\u{1b}[31m".into();
        v["reports"][0]["facts"]["memory"]["dev_shm"]["from"] = "host_ipc".into();
    });
    edited(d, "good.json", "pin.json", |v| {
        v["reports"][0]["rules_version"] = "0.1".into()
    });
    // A report of 1.0.0 (no `paths`, no `omitted`) is read.
    edited(d, "good.json", "v1.0.json", |v| {
        v["schema_version"] = "1.0.0".into();
        for f in v["reports"][0]["findings"].as_array_mut().unwrap() {
            f.as_object_mut().unwrap().remove("paths");
        }
    });
    edited(d, "good.json", "rule.json", |v| {
        v["reports"][0]["findings"][0]["rule"] = "no-such-rule".into()
    });
    let merge = |file: &str| memlint_in(d, &["merge", file, "--fail-on", "never"]);
    // A later minor of the same major is read.
    assert_eq!(merge("minor.json").status.code(), Some(0));
    assert_eq!(
        merge("v1.0.json").status.code(),
        Some(0),
        "{}",
        stderr(&merge("v1.0.json"))
    );
    for (file, needles) in [
        ("old.json", &["old.json", "`schema_version`"][..]),
        ("next.json", &["next.json", "`schema_version`", "2.0.0"][..]),
        (
            "severity.json",
            &["severity.json", "findings[0].severity", "fatal"][..],
        ),
        ("rule.json", &["rule.json", "no-such-rule"][..]),
        ("pin.json", &["pin.json", "`rules_version`", "0.1"][..]),
        ("budget.json", &["budget.json", "`facts.memory.limit`"][..]),
    ] {
        let o = merge(file);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{file}: {err}");
        assert!(o.stdout.is_empty(), "{file}");
        for n in needles {
            assert!(err.contains(n), "{file}: {n:?} in {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    }
    // A hostile string in the facts a budget picture draws stays text on the page.
    let o = memlint_in(
        d,
        &["merge", "hostile.json", "--fail-on", "never", "--format", "html"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let page = String::from_utf8(o.stdout).unwrap();
    assert!(
        page.contains("/dev/shm: &lt;/style&gt;&lt;script&gt;x&lt;/script&gt;\\x00\\x1b[31m"),
        "{page}"
    );
    assert!(!page.contains("<script>") && !page.contains('\0') && !page.contains('\u{1b}'));
}

#[test]
fn published_schemas_are_what_memlint_schema_prints() {
    for (doc, file) in [("report", "schema/report.json"), ("facts", "schema/facts.json")] {
        let o = memlint(&["schema", doc]);
        assert_eq!(o.status.code(), Some(0));
        let committed = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap();
        assert_eq!(
            String::from_utf8(o.stdout).unwrap(),
            committed,
            "{file} is stale: memlint schema {doc} > {file}"
        );
        let schema: Value = serde_json::from_str(&committed).unwrap();
        assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    }
}

#[test]
fn inspect_json_carries_the_version_and_facts_of_the_facts_schema() {
    let image = build_image("node-old-space");
    let o = memlint(&["inspect", "--format", "json", &image]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema_version"], "1.1.0");
    let schema: Value = serde_json::from_slice(
        &std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/facts.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::draft202012::new(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&v["facts"])
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    // And a facts object that is not one fails.
    assert!(!validator.is_valid(&serde_json::json!({"libc": 3})));
}
