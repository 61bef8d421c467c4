//! Reports of the images `lint` reads without `--k8s`: one image, several, or every platform
//! of one (`--platform all`: each report says which listed platforms this copy lacks, and the
//! document ends with where the platforms differ).

use super::lint::LintReport;
use super::text::TextOptions;
use crate::finding::FailOn;
use crate::platform::Platform;
use std::io::Write;

/// With `--platform all`: the platforms the index of `r`'s image lists whose blobs are not in
/// this copy (none of the reports read from the same reference has them).
fn platforms_absent(reports: &[LintReport], r: &LintReport) -> Vec<String> {
    let read: Vec<&Platform> = reports
        .iter()
        .filter(|o| o.image.reference == r.image.reference)
        .map(|o| &o.image.platform)
        .collect();
    let mut out: Vec<String> = Vec::new();
    for p in &r.image.platforms {
        let have = read.iter().any(|q| q.satisfies(p) || p.satisfies(q));
        if !have && !out.contains(&p.to_string()) {
            out.push(p.to_string());
        }
    }
    out
}

/// With `--platform all` the shape is always `{"reports": [...], "differences": [...]}`, and
/// each report says which listed platforms are absent (`platforms_absent`).
pub(crate) fn json(
    w: &mut dyn Write,
    reports: &[LintReport],
    fail_on: FailOn,
    all_platforms: bool,
) -> std::io::Result<()> {
    let mut value = if reports.len() == 1 && !all_platforms {
        reports[0].json()
    } else {
        let each = reports
            .iter()
            .map(|r| {
                let mut v = r.json();
                if all_platforms {
                    if let Some(obj) = v.as_object_mut() {
                        obj.insert(
                            "platforms_absent".to_string(),
                            serde_json::json!(platforms_absent(reports, r)),
                        );
                    }
                }
                v
            })
            .collect::<Vec<_>>();
        serde_json::json!({
            "reports": each,
            "differences": differences(reports),
        })
    };
    if let Some(obj) = value.as_object_mut() {
        obj.insert("fail_on".to_string(), serde_json::json!(fail_on.as_str()));
        obj.insert(
            "schema_version".to_string(),
            serde_json::json!(crate::report::model::SCHEMA_VERSION),
        );
    }
    crate::untrusted::write_json(w, &value)
}

pub(crate) fn text(
    w: &mut dyn Write,
    reports: &[LintReport],
    o: TextOptions,
    all_platforms: bool,
) -> std::io::Result<()> {
    let mut told: Vec<&str> = Vec::new();
    for r in reports {
        super::text::write(w, r, o)?;
        let absent = platforms_absent(reports, r);
        if all_platforms && !absent.is_empty() && !told.contains(&r.image.reference.as_str()) {
            told.push(&r.image.reference);
            writeln!(
                w,
                "{}",
                crate::untrusted::line(&format!(
                    "Listed by the index but not in this copy: {}",
                    absent.join(", ")
                ))
            )?;
        }
        if reports.len() > 1 {
            writeln!(w)?;
        }
    }
    let diffs = differences(reports);
    if !diffs.is_empty() && !o.quiet {
        writeln!(w, "Where the platforms differ:")?;
        for d in diffs {
            writeln!(w, "  - {}", crate::untrusted::line(&d))?;
        }
    }
    Ok(())
}

/// How the platforms of one image differ: libc, allocator, preloads, findings.
fn differences(reports: &[LintReport]) -> Vec<String> {
    let mut out = Vec::new();
    let Some(base) = reports.first() else { return out };
    let same_image = reports.iter().all(|r| r.image.reference == base.image.reference);
    if reports.len() < 2 || !same_image {
        return out;
    }
    let bp = &base.image.platform;
    for r in &reports[1..] {
        let p = &r.image.platform;
        if r.facts.libc.family != base.facts.libc.family {
            out.push(format!(
                "{p} runs on {} where {bp} runs on {}",
                r.facts.libc.family, base.facts.libc.family
            ));
        }
        if r.facts.allocator.name != base.facts.allocator.name {
            out.push(format!(
                "{p} uses {} malloc where {bp} uses {}",
                r.facts.allocator.name, base.facts.allocator.name
            ));
        }
        for pre in &r.facts.preloads {
            let other = base.facts.preloads.iter().find(|b| b.entry == pre.entry);
            if let Some(o) = other.filter(|o| o.status != pre.status) {
                // The words of the JSON (`ok`, `missing`, `incompatible`); the entry, the
                // platforms and the reason as they are.
                let word = |s: crate::facts::preload::PreloadStatus| {
                    serde_json::to_value(s)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                };
                out.push(format!(
                    "preload `{}` is {} on {p} but {} on {bp}: {}",
                    pre.entry,
                    word(pre.status),
                    word(o.status),
                    pre.reason
                ));
            }
        }
        let keys = |r: &LintReport| -> Vec<(String, String)> {
            r.findings
                .iter()
                .map(|f| (f.rule.to_string(), f.message.clone()))
                .collect()
        };
        let (a, b) = (keys(base), keys(r));
        for (rule, msg) in b.iter().filter(|k| !a.contains(k)) {
            out.push(format!("only on {p}: [{rule}] {msg}"));
        }
        for (rule, msg) in a.iter().filter(|k| !b.contains(k)) {
            out.push(format!("only on {bp}: [{rule}] {msg}"));
        }
    }
    out
}
