//! GitLab's Code Quality report (`artifacts:reports:codequality`): one JSON array of issues
//! for every image (and platform) of the run, each with `description`, `check_name`,
//! `fingerprint`, `severity` and `location` (`path`, `lines.begin`), the subset of the Code
//! Climate issue format that GitLab reads, plus `type`, `engine_name` and `content.body` (the
//! evidence and the fix) from the Code Climate format, which GitLab ignores.

use super::lint::LintReport;
use crate::digest::Digest;
use crate::finding::{Finding, Severity};
use serde_json::{json, Value};
use std::collections::HashMap;

/// GitLab's severity for memlint's: `critical` for an error (a fix that silently does not
/// work, or cannot), `major` for a warning (memory that climbs), `info` for a note (a setting
/// worth a look). `minor` and `blocker` are not used: whether a finding blocks is `--fail-on`'s
/// to say.
pub fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Error => "critical",
        Severity::Warning => "major",
        Severity::Note => "info",
    }
}

/// The Code Quality issues of every report, in report order. Ignored findings are left out
/// (GitLab has no notion of a suppressed issue).
pub fn render(reports: &[LintReport]) -> Value {
    let several = reports.len() > 1;
    Value::Array(reports.iter().flat_map(|r| issues_of(r, several)).collect())
}

/// The issues of one report; `several`: the run has more than one report.
pub fn issues_of(r: &LintReport, several: bool) -> Vec<Value> {
    let mut issues = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for f in &r.findings {
        let key = identity(r, f);
        let occurrence = seen.entry(key.clone()).or_insert(0);
        issues.push(issue(r, f, &key, *occurrence, several));
        *occurrence += 1;
    }
    issues
}

/// What identifies a finding across runs, and across rebuilds of its image: the rule, the
/// image as named on the command line (not its digest, which every build changes) and its
/// platform, the file the finding is placed on (not the line, which moves when lines are added
/// above it), the image paths the finding names (not the words of its message or evidence,
/// which carry versions and may be reworded), and whether it is the finding that counts the
/// rest past the cap.
fn identity(r: &LintReport, f: &Finding) -> String {
    let mut paths: Vec<&str> = f.paths().collect();
    paths.sort_unstable();
    paths.dedup();
    let file = f.location.as_ref().map(|l| l.path.as_str()).unwrap_or("");
    let mut key = format!(
        "memlint-codequality/v1\0{}\0{}\0{}\0{file}\0{}",
        f.rule,
        r.image.reference,
        r.image.platform,
        paths.len()
    );
    for p in paths {
        key.push('\0');
        key.push_str(p);
    }
    if f.omitted > 0 {
        key.push_str("\0rest");
    }
    // One image run by several containers (`lint --k8s`): an issue of each.
    if let Some(c) = r.k8s {
        let w = &c.workload;
        let ns = w.namespace.as_deref().unwrap_or("");
        key.push_str(&format!(
            "\0k8s\0{}\0{}\0{ns}\0{}\0{}",
            w.file, w.kind, w.name, w.container
        ));
    }
    key
}

/// 32 hex digits of the SHA-256 of the identity; findings of one report that share an identity
/// (two relative `LD_PRELOAD` entries that name no image path, say) add their position among
/// those, so that every fingerprint of a report is its own (GitLab shows one issue per
/// fingerprint).
fn fingerprint(key: &str, occurrence: usize) -> String {
    let text = if occurrence == 0 {
        key.to_string()
    } else {
        format!("{key}\0#{occurrence}")
    };
    Digest::of(text.as_bytes()).hex()[..32].to_string()
}

fn issue(r: &LintReport, f: &Finding, key: &str, occurrence: usize, several: bool) -> Value {
    let description = if several {
        format!("{} ({}, {})", f.message, r.image.reference, r.image.platform)
    } else {
        f.message.clone()
    };
    let mut body = String::new();
    if !f.evidence.is_empty() {
        body.push_str("Evidence:");
        for e in &f.evidence {
            body.push_str("\n- ");
            body.push_str(e.text());
        }
    }
    if !f.fix.is_empty() {
        if !body.is_empty() {
            body.push_str("\n\n");
        }
        body.push_str("Fix:\n");
        body.push_str(&f.fix);
    }
    let (path, begin, end) = f
        .location
        .as_ref()
        .map(|l| (l.path.as_str(), l.line, l.end_line.max(l.line)))
        .unwrap_or(("Dockerfile", 1, 1));
    json!({
        "type": "issue",
        "engine_name": "memlint",
        "check_name": f.rule,
        "description": description,
        "content": { "body": body },
        "fingerprint": fingerprint(key, occurrence),
        "severity": severity(f.severity),
        "location": {
            "path": path,
            "lines": { "begin": begin.max(1), "end": end.max(1) },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_differ_by_occurrence_and_are_32_hex_digits() {
        let a = fingerprint("k", 0);
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(a, fingerprint("k", 0));
        assert_ne!(a, fingerprint("k", 1));
        assert_ne!(fingerprint("k", 1), fingerprint("k", 2));
        assert_eq!(severity(Severity::Error), "critical");
        assert_eq!(severity(Severity::Warning), "major");
        assert_eq!(severity(Severity::Note), "info");
    }
}
