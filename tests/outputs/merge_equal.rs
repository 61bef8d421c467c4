//! `memlint merge` of `lint --k8s --shard I/3` JSON reports writes, byte for byte, what
//! `lint --k8s` of the whole fleet writes, in every format; the JSON contract
//! (`schema_version`, `memlint schema`) and what `merge` refuses.

use crate::common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Output;

const FORMATS: [&str; 6] = ["text", "json", "sarif", "github", "gitlab", "junit"];

/// A fleet of three images, two replicas each (one with a limit, one without), and a
/// container whose image cannot be read; `--image` stand-ins for each.
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

#[test]
fn merge_of_three_shards_is_the_unsharded_run_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let stand_ins = fleet(d);
    let mut shards = Vec::new();
    for i in 1..=3 {
        let shard = format!("{i}/3");
        let out = format!("shard-{i}.json");
        let o = memlint_in(
            d,
            &lint_args(
                &stand_ins,
                &[
                    "--shard",
                    &shard,
                    "--format",
                    "json",
                    "--fail-on",
                    "note",
                    "--output",
                    &out,
                ],
            ),
        );
        // The shard holding the unreadable image ends with 2, the others by their findings.
        assert!(matches!(o.status.code(), Some(0..=2)), "{}", stderr(&o));
        let v = valid_report(&std::fs::read(d.join(&out)).unwrap());
        assert_eq!(v["schema_version"], "1.0.0");
        shards.push(out);
    }
    for format in FORMATS {
        let whole = memlint_in(
            d,
            &lint_args(&stand_ins, &["--format", format, "--fail-on", "note"]),
        );
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
            assert_eq!(v["reports"].as_array().unwrap().len(), 7);
        }
    }
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
    edited(d, "good.json", "rule.json", |v| {
        v["reports"][0]["findings"][0]["rule"] = "no-such-rule".into()
    });
    let merge = |file: &str| memlint_in(d, &["merge", file, "--fail-on", "never"]);
    // A later minor of the same major is read.
    assert_eq!(merge("minor.json").status.code(), Some(0));
    for (file, needles) in [
        ("old.json", &["old.json", "`schema_version`"][..]),
        ("next.json", &["next.json", "`schema_version`", "2.0.0"][..]),
        (
            "severity.json",
            &["severity.json", "findings[0].severity", "fatal"][..],
        ),
        ("rule.json", &["rule.json", "no-such-rule"][..]),
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
    assert_eq!(v["schema_version"], "1.0.0");
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
