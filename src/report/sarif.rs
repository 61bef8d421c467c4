//! SARIF 2.1.0 for GitHub code scanning: one run per document (code scanning refuses an upload
//! of more than 20 runs, and two runs of one tool and category), every rule once in
//! `tool.driver.rules` with its documentation, results with a repository-relative location,
//! stable fingerprints, the image (and with `--k8s` the container) in their `properties`, and
//! suppressions for ignored findings. Written a result at a time: a fleet's document is never
//! whole in memory.

use super::lint::LintReport;
use super::{write_json_at, JsonArray};
use crate::finding::{Finding, Severity};
use crate::rules::{Rule, ALL};
use serde_json::{json, Value};
use std::io::{self, Write};

/// The key of memlint's fingerprint in `partialFingerprints` (`memlintFinding/v1`, made of the
/// message, was dropped in 0.2.0: alerts re-key once).
pub(crate) const FINGERPRINT_KEY: &str = "memlintFinding/v2";

/// GitHub code scanning keeps at most this many results per run.
pub(crate) const MAX_RESULTS: usize = 25_000;
pub(crate) const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";
pub(crate) const INFORMATION_URI: &str = "https://github.com/memlint/memlint";

/// Options of the SARIF report.
pub(crate) struct SarifOptions<'a> {
    /// `--category`: the code scanning category of the upload.
    pub(crate) category: Option<&'a str>,
}

/// The run's `automationDetails.id`: `--category`, else `default`, with the final `/` code
/// scanning reads as "no run id".
pub(crate) fn automation_id(category: Option<&str>, default: &str) -> String {
    format!("{}/", category.unwrap_or(default).trim_end_matches('/'))
}

/// The SARIF document of lint reports: one run, each report's results in turn.
pub(crate) fn write(w: &mut dyn Write, reports: &[LintReport], o: &SarifOptions) -> io::Result<()> {
    // One image: the category it always had, so code scanning keeps matching its alerts.
    let default = match reports {
        [one] => format!("memlint/{}", derived_category(one)),
        _ => "memlint".to_string(),
    };
    let mut s = SarifWriter::start(w, &automation_id(o.category, &default))?;
    for r in reports {
        s.report(
            &Subject::of(r),
            r.findings.iter().chain(&r.ignored).chain(&r.baselined),
        )?;
    }
    s.finish()
}

/// What a report's results say of where they were found.
pub(crate) struct Subject<'a> {
    reference: &'a str,
    platform: String,
    manifest_digest: Option<String>,
    /// With `--k8s`: the container, as the JSON report's `k8s` object.
    k8s: Option<Value>,
}

impl<'a> Subject<'a> {
    pub(crate) fn of(r: &'a LintReport) -> Subject<'a> {
        Subject {
            reference: &r.image.reference,
            platform: r.image.platform.to_string(),
            manifest_digest: r.image.manifest_digest.as_ref().map(ToString::to_string),
            k8s: r.k8s.and_then(|c| serde_json::to_value(&c.workload).ok()),
        }
    }

    /// A report's view (`lint --k8s`, `memlint merge`).
    pub(crate) fn of_view(v: &'a super::model::View) -> Subject<'a> {
        Subject {
            reference: &v.reference,
            platform: v.platform.clone(),
            manifest_digest: v.manifest_digest.clone(),
            k8s: v.k8s.as_ref().and_then(|k| serde_json::to_value(k).ok()),
        }
    }

    /// The run's `properties` when this is its one report.
    pub(crate) fn run_properties(&self) -> Value {
        let mut p = json!({ "image": self.reference, "platform": self.platform });
        if let Some(d) = &self.manifest_digest {
            p["manifestDigest"] = json!(d);
        }
        p
    }

    /// Each result's `properties`.
    fn result_properties(&self) -> Value {
        let mut p = json!({ "image": self.reference, "platform": self.platform });
        if let Some(k) = &self.k8s {
            p["k8s"] = k.clone();
        }
        p
    }
}

/// The results of one report, each rendered as it sits in the document.
pub(crate) fn rendered_results<'f>(
    subject: &Subject,
    findings: impl Iterator<Item = &'f Finding>,
) -> io::Result<Vec<Vec<u8>>> {
    findings
        .map(|f| {
            let mut out = Vec::new();
            write_json_at(&mut out, &result(f, subject), RESULT_DEPTH)?;
            Ok(out)
        })
        .collect()
}

/// How deep a result sits: document, `runs`, the run, `results`.
const RESULT_DEPTH: usize = 4;

/// A SARIF document being written: its one run's tool and category first, then results as
/// they come, then the run's properties.
pub(crate) struct SarifWriter<'w> {
    w: &'w mut dyn Write,
    results: JsonArray,
    written: usize,
    dropped: usize,
    reports: usize,
    first: Option<Value>,
}

impl<'w> SarifWriter<'w> {
    /// Writes the document's head: the run's tool, with every rule once, and its category.
    pub(crate) fn start(w: &'w mut dyn Write, automation_id: &str) -> io::Result<SarifWriter<'w>> {
        w.write_all(b"{\n  \"$schema\": ")?;
        write_json_at(w, SCHEMA, 1)?;
        w.write_all(b",\n  \"version\": \"2.1.0\",\n  \"runs\": [\n    {\n      \"tool\": ")?;
        write_json_at(w, &json!({ "driver": driver() }), 3)?;
        w.write_all(b",\n      \"automationDetails\": ")?;
        write_json_at(w, &json!({ "id": automation_id }), 3)?;
        w.write_all(b",\n      \"columnKind\": \"unicodeCodePoints\",\n      \"results\": [")?;
        Ok(SarifWriter {
            w,
            results: JsonArray::new(3),
            written: 0,
            dropped: 0,
            reports: 0,
            first: None,
        })
    }

    /// Writes one report's results.
    pub(crate) fn report<'f>(
        &mut self,
        subject: &Subject,
        findings: impl Iterator<Item = &'f Finding>,
    ) -> io::Result<()> {
        self.note_report(|| subject.run_properties());
        for f in findings {
            if self.room() {
                self.results.next(self.w)?;
                write_json_at(self.w, &result(f, subject), RESULT_DEPTH)?;
            }
        }
        Ok(())
    }

    /// Counts a report whose results come rendered ([`rendered_results`]); `properties`: the
    /// run's properties should it be the only one.
    pub(crate) fn note_report(&mut self, properties: impl FnOnce() -> Value) {
        self.reports += 1;
        if self.first.is_none() {
            self.first = Some(properties());
        }
    }

    /// Writes one result rendered by [`rendered_results`].
    pub(crate) fn rendered(&mut self, result: &[u8]) -> io::Result<()> {
        if self.room() {
            self.results.next(self.w)?;
            self.w.write_all(result)?;
        }
        Ok(())
    }

    /// Whether the run takes one more result; counts it, written or dropped.
    fn room(&mut self) -> bool {
        if self.written < MAX_RESULTS {
            self.written += 1;
            true
        } else {
            self.dropped += 1;
            false
        }
    }

    /// Ends the run and the document.
    pub(crate) fn finish(self) -> io::Result<()> {
        let SarifWriter {
            w,
            results,
            dropped,
            reports,
            first,
            ..
        } = self;
        results.end(w)?;
        let mut properties = match (reports, first) {
            (1, Some(p)) => p,
            _ => json!({}),
        };
        if dropped > 0 {
            properties["droppedResults"] = json!(dropped);
        }
        w.write_all(b",\n      \"properties\": ")?;
        write_json_at(w, &properties, 3)?;
        w.write_all(b"\n    }\n  ]\n}\n")
    }
}

/// `app-1/linux-amd64` from the image name (or the reference, when the name is only a tag)
/// and platform, in the characters a category may hold.
fn derived_category(r: &LintReport) -> String {
    if let Some(c) = r.k8s {
        let w = &c.workload;
        return k8s_category(&w.file, w.namespace.as_deref(), &w.kind, &w.name, &w.container);
    }
    let reference = r.image.reference.as_str();
    let name = match r.image.name.as_deref() {
        Some(n) if n.contains([':', '/']) => n.to_string(),
        _ => {
            // `oci-dir:/x/images/demo:latest` → `demo:latest`
            let without_scheme = ["oci-dir:", "oci-archive:", "docker-archive:", "dir:", "oci:"]
                .iter()
                .find_map(|s| reference.strip_prefix(s))
                .unwrap_or(reference);
            without_scheme
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .unwrap_or(without_scheme)
                .to_string()
        }
    };
    let name = name.rsplit('/').next().unwrap_or(&name).to_string();
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    };
    format!(
        "{}/{}",
        clean(&name).trim_matches('-'),
        clean(&r.image.platform.to_string())
    )
}

/// The category of a container's run: one per manifest file, workload and container, as code
/// scanning wants one per run (two files may hold workloads of the same name).
fn k8s_category(file: &str, namespace: Option<&str>, kind: &str, name: &str, container: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|ch| {
                if ch.is_ascii_alphanumeric() || ch == '.' || ch == '_' || ch == '-' {
                    ch
                } else {
                    '-'
                }
            })
            .collect::<String>()
            .trim_matches('-')
            .to_string()
    };
    let file = if file == "-" {
        "stdin".to_string()
    } else {
        clean(file)
    };
    format!(
        "k8s/{file}/{}/{}/{}/{}",
        clean(namespace.unwrap_or("default")),
        clean(&kind.to_ascii_lowercase()),
        clean(name),
        clean(container)
    )
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Note => "note",
    }
}

/// `ld-preload-missing` → `LdPreloadMissing`.
fn pascal(id: &str) -> String {
    id.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// The first paragraph under "## What it does".
fn what_it_does(rule: &Rule) -> String {
    rule.doc
        .split("## What it does")
        .nth(1)
        .and_then(|s| s.split("\n\n").find(|p| !p.trim().is_empty()))
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| rule.title.to_string())
}

fn driver() -> Value {
    let rules: Vec<Value> = ALL
        .iter()
        .map(|r| {
            let history = r.history();
            json!({
                "id": r.id,
                "name": pascal(r.id),
                "shortDescription": { "text": r.title },
                "fullDescription": { "text": what_it_does(r) },
                "help": { "text": r.doc, "markdown": r.doc },
                "helpUri": format!("{INFORMATION_URI}/blob/main/rules/{}.md", r.id),
                "defaultConfiguration": { "level": level(r.severity) },
                "properties": {
                    "tags": r.tags,
                    "precision": "high",
                    // The releases that added the rule and changed when it fires, for
                    // `--rules-version` pins.
                    "added": history.added.to_string(),
                    "changed": history.changed.iter().map(ToString::to_string).collect::<Vec<_>>(),
                },
            })
        })
        .collect();
    json!({
        "name": "memlint",
        "semanticVersion": env!("CARGO_PKG_VERSION"),
        "version": env!("CARGO_PKG_VERSION"),
        "informationUri": INFORMATION_URI,
        "rules": rules,
    })
}

fn result(f: &Finding, subject: &Subject) -> Value {
    let index = ALL.iter().position(|r| r.id == f.rule).unwrap_or(0);
    let mut text = f.message.clone();
    if !f.evidence.is_empty() {
        text.push_str("\n\nEvidence:");
        for e in &f.evidence {
            text.push_str("\n- ");
            text.push_str(e.text());
        }
    }
    if !f.fix.is_empty() {
        text.push_str("\n\nFix:\n");
        text.push_str(&f.fix);
    }
    let loc = f.location.clone().unwrap_or(crate::finding::Location {
        path: "Dockerfile".to_string(),
        line: 1,
        end_line: 1,
        instruction: None,
    });
    let mut v = json!({
        "ruleId": f.rule,
        "ruleIndex": index,
        "level": level(f.severity),
        "message": { "text": text },
        "locations": [{
            "physicalLocation": {
                "artifactLocation": { "uri": uri_path(&loc.path), "uriBaseId": "%SRCROOT%" },
                "region": { "startLine": loc.line, "endLine": loc.end_line.max(loc.line) },
            }
        }],
        "properties": subject.result_properties(),
    });
    // The baseline's fingerprint ([`crate::baseline`]): the same finding keeps it across
    // rebuilds, retags, moved manifests and reworded messages, so code scanning keeps one
    // alert. A finding read back from JSON written before fingerprints has none to give.
    if !f.fingerprint.is_empty() {
        v["partialFingerprints"] = json!({ FINGERPRINT_KEY: f.fingerprint });
    }
    if let Some(s) = &f.suppression {
        let mut suppression =
            json!({ "kind": s.kind, "justification": s.justification, "status": "accepted" });
        // An ignore written in the source (a Dockerfile comment, a workload's annotation) is
        // at `path:line`: code scanning shows where.
        if let Some((path, line)) = s.origin.rsplit_once(':').filter(|_| s.kind == "inSource") {
            if let Ok(line) = line.parse::<u32>() {
                suppression["location"] = json!({
                    "physicalLocation": {
                        "artifactLocation": { "uri": uri_path(path), "uriBaseId": "%SRCROOT%" },
                        "region": { "startLine": line },
                    }
                });
            }
        }
        v["suppressions"] = json!([suppression]);
    }
    v
}

/// What a path segment keeps as it is (RFC 3986 `pchar` without `:`, so that a first segment
/// never reads as a scheme): unreserved characters and sub-delimiters, plus `@`.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b'@');

/// A repository path as a relative URI reference: each `/`-separated segment percent-encoded
/// (`%` first of all, so a folder named `%2e%2e` stays a name and never reads as `..`).
pub(crate) fn uri_path(path: &str) -> String {
    path.split('/')
        .map(|seg| percent_encoding::utf8_percent_encode(seg, SEGMENT).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

/// Whether a path is fit to be a SARIF artifact URI that GitHub accepts: relative, `/`
/// separated, no scheme, colon, space, `..` or backslash.
pub(crate) fn valid_artifact_uri(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains([':', ' ', '\\', '\t', '\n'])
        && path.split('/').all(|c| !c.is_empty() && c != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_uris() {
        assert_eq!(pascal("ld-preload-missing"), "LdPreloadMissing");
        assert!(valid_artifact_uri("Dockerfile"));
        assert!(valid_artifact_uri("docker/app/Dockerfile"));
        for bad in [
            "",
            "/abs/Dockerfile",
            "app:1",
            "a b",
            "../Dockerfile",
            "c:\\x",
            "docker://x",
        ] {
            assert!(!valid_artifact_uri(bad), "{bad}");
        }
        assert!(what_it_does(ALL[0]).len() > 40);
        assert_eq!(uri_path("docker/app/Dockerfile"), "docker/app/Dockerfile");
        assert_eq!(uri_path("%2e%2e/Dockerfile"), "%252e%252e/Dockerfile");
        assert_eq!(uri_path("a b/#?[x]/é:1"), "a%20b/%23%3F%5Bx%5D/%C3%A9%3A1");
        assert_eq!(uri_path("dir@v1/Docker-file_~.prod"), "dir@v1/Docker-file_~.prod");
    }
}
