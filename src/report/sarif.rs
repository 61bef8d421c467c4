//! SARIF 2.1.0 for GitHub code scanning: one run per image (and platform), every rule in
//! `tool.driver.rules` with its documentation, results with a repository-relative location,
//! stable fingerprints, and suppressions for ignored findings.

use super::lint::LintReport;
use crate::digest::Digest;
use crate::finding::{Finding, Severity};
use crate::rules::{Rule, ALL};
use serde_json::{json, Value};

/// GitHub code scanning keeps at most this many results per run.
pub const MAX_RESULTS: usize = 25_000;
pub const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";
pub const INFORMATION_URI: &str = "https://github.com/memlint/memlint";

/// Options of the SARIF report.
pub struct SarifOptions<'a> {
    /// `--category`: the code scanning category of the upload.
    pub category: Option<&'a str>,
}

pub fn render(reports: &[LintReport], o: &SarifOptions) -> Value {
    let several = reports.len() > 1;
    document(reports.iter().map(|r| run(r, o, several)).collect())
}

/// The SARIF document of runs made ahead with [`run`].
pub fn document(runs: Vec<Value>) -> Value {
    json!({ "$schema": SCHEMA, "version": "2.1.0", "runs": runs })
}

/// One report's run; `several`: the document has more than one run.
pub fn run(r: &LintReport, o: &SarifOptions, several: bool) -> Value {
    let image = RunImage {
        reference: &r.image.reference,
        platform: r.image.platform.to_string(),
        manifest_digest: r.image.manifest_digest.as_ref().map(ToString::to_string),
    };
    run_of(
        &derived_category(r),
        &image,
        r.findings.iter().chain(r.ignored.iter()),
        o,
        several,
    )
}

/// What a run says of its image.
struct RunImage<'a> {
    reference: &'a str,
    platform: String,
    manifest_digest: Option<String>,
}

/// A run of `findings` (the ignored ones too) under the category derived from the image.
fn run_of<'f>(
    derived: &str,
    image: &RunImage,
    findings: impl Iterator<Item = &'f Finding>,
    o: &SarifOptions,
    several: bool,
) -> Value {
    let category = match o.category {
        Some(c) if several => format!("{}/{derived}", c.trim_end_matches('/')),
        Some(c) => c.trim_end_matches('/').to_string(),
        None => format!("memlint/{derived}"),
    };
    let mut results: Vec<Value> = findings.map(result).collect();
    let dropped = results.len().saturating_sub(MAX_RESULTS);
    results.truncate(MAX_RESULTS);
    let mut run = json!({
        "tool": { "driver": driver() },
        "automationDetails": { "id": format!("{category}/") },
        "results": results,
        "columnKind": "unicodeCodePoints",
        "properties": {
            "image": image.reference,
            "platform": image.platform,
        },
    });
    if let Some(d) = &image.manifest_digest {
        run["properties"]["manifestDigest"] = json!(d);
    }
    if dropped > 0 {
        run["properties"]["droppedResults"] = json!(dropped);
    }
    run
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

/// SARIF of reports already in memlint's JSON (`memlint merge`): one run per report, the
/// results as [`render`] makes them from the same findings.
pub fn render_json_reports(reports: &[Value], o: &SarifOptions) -> Value {
    use super::json::{finding_of_json, platform_of_json};
    let several = reports.len() > 1;
    let runs: Vec<Value> = reports
        .iter()
        .filter(|r| r.get("findings").is_some())
        .map(|r| {
            let k8s = &r["k8s"];
            let text = |k: &str| k8s[k].as_str().unwrap_or("");
            let derived = k8s_category(
                text("file"),
                k8s["namespace"].as_str(),
                text("kind"),
                text("name"),
                text("container"),
            );
            let image = RunImage {
                reference: r["reference"].as_str().unwrap_or(""),
                platform: platform_of_json(&r["image"]["platform"]),
                manifest_digest: r["image"]["manifest_digest"].as_str().map(str::to_string),
            };
            let findings = r["findings"].as_array().into_iter().flatten();
            let ignored = r["ignored"].as_array().into_iter().flatten();
            let parsed: Vec<Finding> = findings.chain(ignored).filter_map(finding_of_json).collect();
            run_of(&derived, &image, parsed.iter(), o, several)
        })
        .collect();
    document(runs)
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
            json!({
                "id": r.id,
                "name": pascal(r.id),
                "shortDescription": { "text": r.title },
                "fullDescription": { "text": what_it_does(r) },
                "help": { "text": r.doc, "markdown": r.doc },
                "helpUri": format!("{INFORMATION_URI}/blob/main/rules/{}.md", r.id),
                "defaultConfiguration": { "level": level(r.severity) },
                "properties": { "tags": r.tags, "precision": "high" },
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

fn result(f: &Finding) -> Value {
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
    // Stable across runs of the same image: the rule and what the finding says.
    let fingerprint = Digest::of(format!("{}\0{}", f.rule, f.message).as_bytes()).hex()[..32].to_string();
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
        "partialFingerprints": { "memlintFinding/v1": fingerprint },
    });
    if let Some(s) = &f.suppression {
        v["suppressions"] =
            json!([{ "kind": s.kind, "justification": s.justification, "status": "accepted" }]);
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
pub fn uri_path(path: &str) -> String {
    path.split('/')
        .map(|seg| percent_encoding::utf8_percent_encode(seg, SEGMENT).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

/// Whether a path is fit to be a SARIF artifact URI that GitHub accepts: relative, `/`
/// separated, no scheme, colon, space, `..` or backslash.
pub fn valid_artifact_uri(path: &str) -> bool {
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
