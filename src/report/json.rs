//! memlint's own JSON read back (`memlint merge` of `lint --k8s` shards): what the other
//! formats need from a report that is no longer in memory.

use crate::finding::{Finding, Severity};
use serde_json::Value;

/// A finding back from memlint's JSON (`memlint merge`): its evidence as words alone (the JSON
/// keeps no paths); `None` for a rule this memlint does not know.
pub fn finding_of_json(f: &Value) -> Option<Finding> {
    let rule = crate::rules::ALL
        .iter()
        .find(|r| Some(r.id) == f["rule"].as_str())?;
    let severity = match f["severity"].as_str()? {
        "error" => Severity::Error,
        "warning" => Severity::Warning,
        _ => Severity::Note,
    };
    let mut finding = rule.finding(f["message"].as_str().unwrap_or(""));
    finding.severity = severity;
    for e in f["evidence"].as_array().into_iter().flatten() {
        finding = finding.evidence(crate::finding::Evidence::plain(e.as_str().unwrap_or("")));
    }
    finding.fix = f["fix"].as_str().unwrap_or("").to_string();
    finding.location = serde_json::from_value(f["location"].clone()).ok();
    finding.fingerprint = f["fingerprint"].as_str().unwrap_or("").to_string();
    finding.suppression = f["suppression"].as_object().map(|s| crate::finding::Suppression {
        kind: if s.get("kind").and_then(Value::as_str) == Some("inSource") {
            "inSource"
        } else {
            "external"
        },
        justification: s
            .get("justification")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        origin: s.get("origin").and_then(Value::as_str).unwrap_or("").to_string(),
    });
    Some(finding)
}

/// `linux/arm64/v8` from a report's `image.platform` object, as `Platform` prints it.
pub fn platform_of_json(p: &Value) -> String {
    let part = |k: &str| p[k].as_str().filter(|s| !s.is_empty());
    [part("os"), part("architecture"), part("variant")]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("/")
}
