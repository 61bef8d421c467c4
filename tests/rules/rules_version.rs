//! Issue 34, item 3: rules dated by the release that added them. `--rules-version` and
//! `rules-version` in `.memlint.toml` pin the rules a run uses; `rules --since` lists what a
//! move of the pin brings; `rules`, `explain` and SARIF show each rule's releases. Today every
//! rule is from 0.1.0, so a pin of 0.1.0 keeps every finding (the unit tests of
//! `rules::pinned` over a made-up later rule show one added after a pin staying silent).

use crate::common;

use common::*;
use serde_json::Value;
use std::path::Path;

/// An image whose `LD_PRELOAD` names a library it does not have (ld-preload-missing, an error).
fn broken_image(dir: &Path) -> String {
    let layer = LayerSpec::new(Comp::Gzip).exe("app/server", b"not a program");
    let spec = ImageSpec::new("amd64")
        .layer(layer)
        .env("LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
    let root = dir.join("img");
    write_oci_dir(&root, &spec, "latest");
    format!("oci-dir:{}:latest", root.display())
}

fn rule_ids(report: &Value) -> Vec<String> {
    let mut ids: Vec<String> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["rule"].as_str().expect("a rule id").to_string())
        .collect();
    ids.sort();
    ids
}

fn lint_json(dir: &Path, args: &[&str]) -> (Value, Option<i32>) {
    let mut all = vec!["lint", "--format", "json"];
    all.extend_from_slice(args);
    let out = memlint_in(dir, &all);
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("lint prints JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (report, out.status.code())
}

#[test]
fn a_pin_of_today_keeps_every_finding() {
    let dir = tempfile::tempdir().unwrap();
    let image = broken_image(dir.path());
    let (unpinned, code) = lint_json(dir.path(), &[&image]);
    assert_eq!(code, Some(1));
    assert!(
        rule_ids(&unpinned).contains(&"ld-preload-missing".to_string()),
        "{unpinned}"
    );

    let (pinned, code) = lint_json(dir.path(), &["--rules-version", "0.1.0", &image]);
    assert_eq!(code, Some(1));
    assert_eq!(rule_ids(&pinned), rule_ids(&unpinned));

    // The same pin from .memlint.toml.
    std::fs::write(dir.path().join(".memlint.toml"), "rules-version = \"0.1.0\"\n").unwrap();
    let (from_config, code) = lint_json(dir.path(), &[&image]);
    assert_eq!(code, Some(1));
    assert_eq!(rule_ids(&from_config), rule_ids(&unpinned));
}

/// A pin one release before today's rules (0.0.9) silences every rule, since each was added
/// in 0.1.0; the flag wins over the file's key both ways.
#[test]
fn a_pin_before_a_rule_silences_it_and_the_flag_wins() {
    let dir = tempfile::tempdir().unwrap();
    let image = broken_image(dir.path());
    let (before, code) = lint_json(dir.path(), &["--rules-version", "0.0.9", &image]);
    assert_eq!(code, Some(0), "{before}");
    assert!(rule_ids(&before).is_empty(), "{before}");

    std::fs::write(dir.path().join(".memlint.toml"), "rules-version = \"0.0.9\"\n").unwrap();
    let (from_config, code) = lint_json(dir.path(), &[&image]);
    assert_eq!(code, Some(0));
    assert!(rule_ids(&from_config).is_empty(), "{from_config}");
    let (flag_wins, code) = lint_json(dir.path(), &["--rules-version", "0.1.0", &image]);
    assert_eq!(code, Some(1));
    assert!(
        rule_ids(&flag_wins).contains(&"ld-preload-missing".to_string()),
        "{flag_wins}"
    );

    std::fs::write(dir.path().join(".memlint.toml"), "rules-version = \"0.1.0\"\n").unwrap();
    let (flag_wins, code) = lint_json(dir.path(), &["--rules-version", "0.0.9", &image]);
    assert_eq!(code, Some(0));
    assert!(rule_ids(&flag_wins).is_empty(), "{flag_wins}");
}

#[test]
fn bad_pins_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let image = broken_image(dir.path());
    for (pin, needle) in [
        ("0.1", "is not a memlint version: write MAJOR.MINOR.PATCH"),
        ("latest", "is not a memlint version"),
        ("v0.1.0", "is not a memlint version"),
        (
            "99.0.0",
            concat!(
                "99.0.0 is newer than this memlint (",
                env!("CARGO_PKG_VERSION"),
                ")"
            ),
        ),
    ] {
        let err = fails_with(&["lint", "--rules-version", pin, &image], &[needle]);
        assert!(err.contains(&format!("--rules-version `{pin}`")), "{err}");
        fails_with(&["rules", "--since", pin], &[needle, &format!("--since `{pin}`")]);
    }

    // In the config file: a config error at the key's value.
    std::fs::write(dir.path().join(".memlint.toml"), "rules-version = \"0.2\"\n").unwrap();
    let out = memlint_in(dir.path(), &["lint", &image]);
    assert_eq!(out.status.code(), Some(2));
    let err = error_text(&out);
    assert!(
        err.contains("rules-version: `0.2` is not a memlint version"),
        "{err}"
    );
    assert!(err.contains(".memlint.toml"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    // A bad flag over a good key fails on the flag.
    std::fs::write(dir.path().join(".memlint.toml"), "rules-version = \"0.1.0\"\n").unwrap();
    let out = memlint_in(dir.path(), &["lint", "--rules-version", "5.0.0", &image]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        error_text(&out).contains("--rules-version `5.0.0`"),
        "{}",
        error_text(&out)
    );
}

#[test]
fn rules_since_today_lists_nothing_and_rules_show_their_releases() {
    // Nothing is newer than this release.
    let out = memlint(&["rules", "--since", "0.2.0"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "No rule was added or changed after 0.2.0.\n"
    );
    let out = memlint(&["rules", "--since", "0.2.0", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed, serde_json::json!([]));

    // Every rule is newer than 0.0.0.
    let all: Value = serde_json::from_slice(&memlint(&["rules", "--format", "json"]).stdout).unwrap();
    let since: Value =
        serde_json::from_slice(&memlint(&["rules", "--since", "0.0.0", "--format", "json"]).stdout).unwrap();
    assert_eq!(since, all);
    // Since 0.1.0: exactly the rules 0.2.0 added or changed (issue #30 added some).
    let moved: Vec<&Value> = all
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["added"] != "0.1.0" || r["changed"] != serde_json::json!([]))
        .collect();
    assert!(!moved.is_empty());
    let since: Value =
        serde_json::from_slice(&memlint(&["rules", "--since", "0.1.0", "--format", "json"]).stdout).unwrap();
    assert_eq!(since.as_array().unwrap().iter().collect::<Vec<_>>(), moved);
    for rule in all.as_array().unwrap() {
        assert!(rule["added"] == "0.1.0" || rule["added"] == "0.2.0", "{rule}");
        let changed = rule["changed"].as_array().unwrap();
        assert!(
            changed.iter().all(|c| c == "0.2.0" && rule["added"] == "0.1.0"),
            "{rule}"
        );
    }

    let text = String::from_utf8_lossy(&memlint(&["rules"]).stdout).to_string();
    assert!(
        text.lines().all(|l| l.ends_with(" (added in 0.1.0)")
            || l.ends_with(" (added in 0.2.0)")
            || l.ends_with(" (added in 0.1.0, changed in 0.2.0)")),
        "{text}"
    );
    let explained = String::from_utf8_lossy(&memlint(&["explain", "node-semi-space"]).stdout).to_string();
    assert_eq!(explained.lines().nth(2), Some("Added in 0.1.0."), "{explained}");
}

#[test]
fn sarif_rules_carry_their_releases() {
    let dir = tempfile::tempdir().unwrap();
    let image = broken_image(dir.path());
    let out = memlint_in(
        dir.path(),
        &["lint", "--format", "sarif", "--rules-version", "0.1.0", &image],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rules = sarif["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .expect("driver rules");
    assert!(!rules.is_empty());
    for rule in rules {
        // The driver lists every rule with its releases (0.2.0 added some and changed others).
        let added = &rule["properties"]["added"];
        assert!(added == "0.1.0" || added == "0.2.0", "{rule}");
        let changed = rule["properties"]["changed"].as_array().expect("changed");
        assert!(changed.iter().all(|c| c == "0.2.0" && added == "0.1.0"), "{rule}");
        assert!(rule["properties"]["tags"].is_array(), "{rule}");
    }
    let sarif_path = dir.path().join("out.sarif");
    std::fs::write(&sarif_path, &out.stdout).unwrap();
    validate_sarif(&sarif_path);
}
