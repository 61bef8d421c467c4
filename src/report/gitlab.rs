//! GitLab's Code Quality report (`artifacts:reports:codequality`): one JSON array of issues
//! for every image (and platform) of the run, each with `description`, `check_name`,
//! `fingerprint`, `severity` and `location` (`path`, `lines.begin`), the subset of the Code
//! Climate issue format that GitLab reads, plus `type`, `engine_name` and `content.body` (the
//! evidence and the fix) from the Code Climate format, which GitLab ignores.

use super::lint::LintReport;
use super::model::View;
use crate::finding::{Finding, Severity};
use serde_json::{json, Value};

/// GitLab's severity for memlint's: `critical` for an error (a fix that silently does not
/// work, or cannot), `major` for a warning (memory that climbs), `info` for a note (a setting
/// worth a look). `minor` and `blocker` are not used: whether a finding blocks is `--fail-on`'s
/// to say.
pub(crate) fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Error => "critical",
        Severity::Warning => "major",
        Severity::Note => "info",
    }
}

/// The Code Quality issues of every report, in report order. Ignored findings are left out
/// (GitLab has no notion of a suppressed issue).
pub(crate) fn render(reports: &[LintReport]) -> Value {
    let several = reports.len() > 1;
    Value::Array(
        reports
            .iter()
            .flat_map(|r| issues_of_view(&r.view(), several))
            .collect(),
    )
}

/// The issues of one report; `several`: the run has more than one report. Each issue's
/// fingerprint is the finding's ([`crate::baseline`]), as SARIF's `partialFingerprints` has it
/// and the JSON carries it.
pub(crate) fn issues_of_view(r: &View, several: bool) -> Vec<Value> {
    r.findings.iter().map(|f| issue(r, f, several)).collect()
}

fn issue(r: &View, f: &Finding, several: bool) -> Value {
    let description = if several {
        format!("{} ({}, {})", f.message, r.reference, r.platform)
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
        "fingerprint": f.fingerprint,
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
    fn severities() {
        assert_eq!(severity(Severity::Error), "critical");
        assert_eq!(severity(Severity::Warning), "major");
        assert_eq!(severity(Severity::Note), "info");
    }
}
