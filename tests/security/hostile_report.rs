//! Hostile images whose facts are small but whose report or loader configuration used to grow
//! without bound (issue #13, items 1 and 2): 5,000 `LD_PRELOAD` entries, and 15,000 `include`
//! lines of /etc/ld.so.conf over 2,000 files. Each is built in the test on the real Debian base
//! of the `glibc` recipe, and each run is measured: peak RSS under 256 MiB, output under 64 MiB.

use crate::common;

use common::measure::*;
use common::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const MIB: u64 = 1 << 20;
const MAX_RSS_KIB: u64 = 256 * 1024;
const MAX_OUTPUT: usize = 64 << 20;

/// The `glibc` recipe image with one more layer and, in its config, `env` added.
fn on_glibc(dir: &Path, name: &str, layer: LayerSpec, env: Option<String>) -> String {
    derive_image(&build_image("glibc"), &dir.join(name), &layer, |config| {
        if let Some(e) = &env {
            let cfg = config
                .as_object_mut()
                .unwrap()
                .entry("config")
                .or_insert(json!({}));
            let list = cfg.as_object_mut().unwrap().entry("Env").or_insert(json!([]));
            list.as_array_mut().unwrap().push(json!(e));
        }
    })
}

/// Runs memlint, checks it ends with `code` within the bounds, and returns the run.
fn bounded(args: &[&str], env: &[(&str, &str)], code: i32) -> Run {
    let run = run_jailed(args, env, None, Duration::from_secs(120));
    assert_eq!(run.code(), Some(code), "memlint {args:?}: {}", run.err());
    assert!(
        run.peak_kib < MAX_RSS_KIB,
        "memlint {args:?} peaked at {} MiB",
        run.peak_kib / 1024
    );
    assert!(
        run.out.stdout.len() < MAX_OUTPUT,
        "memlint {args:?} wrote {} MiB",
        run.out.stdout.len() as u64 / MIB
    );
    eprintln!(
        "memlint {:?}: {} KiB out, peak {} MiB, {:?}",
        &args[..args.len() - 1],
        run.out.stdout.len() / 1024,
        run.peak_kib / 1024,
        run.elapsed
    );
    run
}

#[test]
fn five_thousand_preload_entries_give_a_bounded_report_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    // Every even entry names nothing (ld-preload-missing), every odd one a file that is no
    // shared object (ld-preload-incompatible): 5,000 entries in about 45 KB of config.
    let entries: Vec<String> = (0..5000)
        .map(|i| {
            if i % 2 == 0 {
                format!("/m{i}.so")
            } else {
                "/opt/notes.so".to_string()
            }
        })
        .collect();
    let value = entries.join(":");
    let image = on_glibc(
        dir.path(),
        "preloads",
        LayerSpec::new(Comp::Gzip)
            .by("COPY notes.so /opt/")
            .file("opt/notes.so", b"plain text, not a shared object\n"),
        Some(format!("LD_PRELOAD={value}")),
    );
    // A stretch of the value that only the config itself (`image.config.env` in JSON) quotes.
    let quoted = &value[..400];

    let listed = |rule: &str, rules: Vec<&str>| -> usize { rules.iter().filter(|r| **r == rule).count() };
    for format in ["text", "json", "sarif", "github", "gitlab", "junit", "html"] {
        let run = bounded(
            &["lint", "--format", format, "--fail-on", "error", &image],
            &[],
            1,
        );
        let out = String::from_utf8_lossy(&run.out.stdout).to_string();
        assert!(
            out.matches(quoted).count() <= 1,
            "{format}: findings quote the whole LD_PRELOAD value"
        );
        for rule in ["ld-preload-missing", "ld-preload-incompatible"] {
            assert!(
                out.contains(&format!("and 2450 more {rule} findings")),
                "{format}: no finding counts the rest of {rule}"
            );
        }
        match format {
            "text" => {
                assert_eq!(out.matches("error[ld-preload-missing]").count(), 51);
                assert!(
                    out.contains("5000 errors"),
                    "{}",
                    &out[out.len().saturating_sub(300)..]
                );
            }
            "json" => {
                let v: Value = serde_json::from_str(&out).unwrap();
                assert_eq!(v["summary"]["errors"], 5000);
                let rules: Vec<&str> = v["findings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|f| f["rule"].as_str().unwrap())
                    .collect();
                assert_eq!(listed("ld-preload-missing", rules.clone()), 51);
                assert_eq!(listed("ld-preload-incompatible", rules), 51);
                // The facts still list every entry, each once.
                assert_eq!(v["facts"]["preloads"].as_array().unwrap().len(), 5000);
                let first = v["findings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|f| f["rule"] == "ld-preload-missing")
                    .unwrap();
                assert_eq!(
                    first["fix"],
                    "install the library the entry names, or drop the entry:\n# in ENV LD_PRELOAD, remove /m0.so"
                );
            }
            "sarif" => {
                let v: Value = serde_json::from_str(&out).unwrap();
                let results = v["runs"][0]["results"].as_array().unwrap();
                let rules: Vec<&str> = results.iter().map(|r| r["ruleId"].as_str().unwrap()).collect();
                assert_eq!(listed("ld-preload-missing", rules.clone()), 51);
                assert_eq!(listed("ld-preload-incompatible", rules), 51);
            }
            "gitlab" => {
                let v: Value = serde_json::from_str(&out).unwrap();
                let rules: Vec<&str> = v
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| i["check_name"].as_str().unwrap())
                    .collect();
                assert_eq!(listed("ld-preload-missing", rules.clone()), 51);
                assert_eq!(listed("ld-preload-incompatible", rules), 51);
            }
            "junit" => {
                // One failure per rule, counting all its findings and listing 51.
                assert_eq!(
                    out.matches("message=\"2500 findings at or above error; the first: ")
                        .count(),
                    2
                );
                assert_eq!(out.matches("<failure ").count(), 2);
            }
            "html" => {
                for rule in ["ld-preload-missing", "ld-preload-incompatible"] {
                    let shown = format!("<code class=\"rule\">{rule}</code>");
                    assert_eq!(out.matches(&shown).count(), 51, "{rule}");
                }
                assert!(
                    out.contains("<b>5000</b> errors</li>"),
                    "the summary counts them all"
                );
            }
            _ => {
                assert_eq!(out.lines().filter(|l| l.starts_with("::error ")).count(), 102);
            }
        }
    }
    for format in ["text", "json"] {
        bounded(&["inspect", "--format", format, &image], &[], 0);
    }
}

#[test]
fn include_fan_out_of_ld_so_conf_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    // 15,000 `include /etc/d/*` lines over 2,000 empty files: a 72 KB layer.
    let mut layer = LayerSpec::new(Comp::Gzip)
        .by("RUN hostile ld.so.conf")
        .file("etc/ld.so.conf", "include /etc/d/*\n".repeat(15_000).as_bytes())
        .dir("etc/d");
    for i in 0..2000 {
        layer = layer.file(&format!("etc/d/f{i}"), b"");
    }
    let image = on_glibc(dir.path(), "fan-out", layer, None);

    let facts = |run: &Run| run.json()["facts"]["loader"].clone();
    let run = bounded(&["inspect", "--format", "json", &image], &[], 0);
    let loader = facts(&run);
    assert!(
        loader["ld_so_conf_error"]
            .as_str()
            .is_some_and(|e| e.contains("max_ld_conf_files")),
        "{loader}"
    );
    let run = bounded(&["inspect", "--format", "text", &image], &[], 0);
    assert!(String::from_utf8_lossy(&run.out.stdout).contains("the max_ld_conf_files limit"));
    bounded(
        &["lint", "--format", "json", "--fail-on", "never", &image],
        &[],
        0,
    );

    // Each file is read once and the pattern expanded once: room for all 2,000 files costs no
    // more, and reads them all.
    let run = bounded(
        &[
            "inspect",
            "--format",
            "json",
            "--limit",
            "max_ld_conf_files=5000",
            &image,
        ],
        &[],
        0,
    );
    assert_eq!(facts(&run)["ld_so_conf_error"], Value::Null, "{}", facts(&run));
    // The names tried are the other bound; a bad value is refused before anything is read.
    let run = bounded(
        &["inspect", "--format", "json", &image],
        &[("MEMLINT_LIMITS", "max_ld_conf_files=5000,max_ld_conf_names=100")],
        0,
    );
    assert!(facts(&run)["ld_so_conf_error"]
        .as_str()
        .is_some_and(|e| e.contains("max_ld_conf_names")));
    let run = run_jailed(
        &["inspect", "--limit", "max_ld_conf_names=lots", &image],
        &[],
        None,
        Duration::from_secs(60),
    );
    assert_eq!(run.code(), Some(2), "{}", run.err());
    assert!(run.err().contains("max_ld_conf_names"), "{}", run.err());
}
