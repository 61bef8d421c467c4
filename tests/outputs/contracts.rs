//! Contracts that review can see: every diagnostic code (`memlint::…`) with its message, the
//! `--help` of memlint and of each subcommand, and the rule registry, each compared with a
//! file under tests/snapshots/contracts/. A change to any of them shows up in the diff of that
//! file; run with UPDATE_SNAPSHOTS=1 to write the new version.

use crate::common;

use common::memlint;
use std::fs;
use std::path::{Path, PathBuf};

fn assert_snapshot(name: &str, actual: &str) {
    common::assert_snapshot("contracts", name, actual)
}

fn stdout_of(args: &[&str]) -> String {
    let out = memlint(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "memlint {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

#[test]
fn help_of_memlint_and_every_subcommand() {
    let commands: &[&[&str]] = &[
        &[],
        &["lint"],
        &["inspect"],
        &["rules"],
        &["explain"],
        &["hook"],
        &["hook", "install"],
        &["hook", "run"],
        &["completions"],
        &["man"],
    ];
    for cmd in commands {
        let mut args = cmd.to_vec();
        args.push("--help");
        let name = if cmd.is_empty() {
            "help-memlint.txt".to_string()
        } else {
            format!("help-{}.txt", cmd.join("-"))
        };
        // clap shows the value of a flag's environment variable: none is set here.
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_memlint"));
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("MEMLINT_") {
                cmd.env_remove(k);
            }
        }
        let out = cmd.args(&args).output().expect("memlint runs");
        assert_eq!(out.status.code(), Some(0), "memlint {args:?}");
        assert_snapshot(&name, &String::from_utf8(out.stdout).expect("UTF-8 help"));
    }
}

#[test]
fn rule_registry() {
    let text = stdout_of(&["rules"]);
    let json = stdout_of(&["rules", "--format", "json"]);
    assert_snapshot("rules.txt", &text);
    assert_snapshot("rules.json", &json);
    // Every rule in the registry explains itself from its rules/<id>.md.
    let list: serde_json::Value = serde_json::from_str(&json).expect("rules --format json is JSON");
    for rule in list.as_array().expect("a list of rules") {
        let id = rule["id"].as_str().expect("an id");
        let doc = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("rules/{id}.md")))
            .unwrap_or_else(|_| panic!("rules/{id}.md is missing"));
        assert_eq!(
            stdout_of(&["explain", id]).trim_end(),
            doc.trim_end(),
            "explain {id}"
        );
    }
}

/// Each `code(memlint::…)` in the source with the message of its diagnostic, sorted by code.
#[test]
fn diagnostic_codes() {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in fs::read_dir(dir).expect("readable") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
    let mut codes = Vec::new();
    for f in files {
        let text = fs::read_to_string(&f).expect("UTF-8 source");
        let mut last_message = None;
        for line in text.lines() {
            let line = line.trim();
            if let Some(m) = line.strip_prefix("#[error(").and_then(|m| m.strip_suffix(")]")) {
                last_message = Some(m.to_string());
            }
            let mut rest = line;
            while let Some(at) = rest.find("code(memlint::") {
                let after = &rest[at + "code(".len()..];
                let end = after.find(')').unwrap_or(after.len());
                codes.push(format!(
                    "{}  {}",
                    &after[..end],
                    last_message
                        .take()
                        .unwrap_or_else(|| "(message built at run time)".to_string())
                ));
                rest = &after[end..];
            }
        }
    }
    codes.sort();
    let mut seen = std::collections::BTreeSet::new();
    for c in &codes {
        let code = c.split_whitespace().next().unwrap_or_default();
        assert!(
            seen.insert(code.to_string()),
            "diagnostic code {code} is used twice"
        );
    }
    assert!(
        codes.len() >= 10,
        "found only {} diagnostic codes: is the scan broken?",
        codes.len()
    );
    assert_snapshot("diagnostic-codes.txt", &(codes.join("\n") + "\n"));
}
