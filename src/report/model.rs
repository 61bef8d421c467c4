//! The one report model: what every format renders of one image's (or container's) report,
//! built from a live run (`LintReport::view`) or from memlint's JSON read back
//! ([`View::of_doc`], `memlint merge`), and the typed JSON document that carries it both ways
//! ([`ContainerDoc`]). A format renders a [`View`] and nothing else, so a merged report says
//! what the unsharded run said.

use crate::facts::Facts;
use crate::finding::{Finding, Severity};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The version of the JSON contract (`schema_version`, the top level of every JSON report and
/// of `inspect --format json`): a new key bumps the minor, a key removed or changed the major.
pub(crate) const SCHEMA_VERSION: &str = "1.1.0";

/// The major version of [`SCHEMA_VERSION`]: the reports `merge` reads.
pub(crate) fn schema_major() -> &'static str {
    SCHEMA_VERSION.split('.').next().unwrap_or(SCHEMA_VERSION)
}

/// Where a container is declared: the JSON `k8s` object (`lint --k8s`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct WorkloadDoc {
    /// The manifest file as given on the command line (`-` for standard input), `/`-separated.
    pub(crate) file: String,
    /// The line of the container's `image:`.
    pub(crate) line: u32,
    pub(crate) kind: String,
    pub(crate) namespace: Option<String>,
    pub(crate) name: String,
    pub(crate) container: String,
    /// The container's image as the manifest spells it.
    pub(crate) image: String,
    /// An init container.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) init: bool,
}

impl From<&crate::k8s::Workload> for WorkloadDoc {
    fn from(w: &crate::k8s::Workload) -> WorkloadDoc {
        WorkloadDoc {
            file: w.file.clone(),
            line: w.line,
            kind: w.kind.clone(),
            namespace: w.namespace.clone(),
            name: w.name.clone(),
            container: w.container.clone(),
            image: w.image.clone(),
            init: w.init,
        }
    }
}

impl WorkloadDoc {
    /// `Deployment shop/web, container app (deploy.yaml:12)`: the heading of its reports.
    pub(crate) fn describe(&self) -> String {
        let ns = self
            .namespace
            .as_deref()
            .map(|n| format!("{n}/"))
            .unwrap_or_default();
        format!(
            "{} {ns}{}, {}container {} ({}:{})",
            self.kind,
            self.name,
            if self.init { "init " } else { "" },
            self.container,
            self.file,
            self.line
        )
    }
}

/// An image's platform as the JSON writes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct PlatformDoc {
    pub(crate) os: String,
    pub(crate) architecture: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) variant: Option<String>,
}

/// The part of a report's `image` object the formats show; the rest is kept as written.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub(crate) struct ImageDoc {
    /// The name the image was pulled or saved under, when known.
    pub(crate) name: Option<String>,
    pub(crate) manifest_digest: Option<String>,
    pub(crate) platform: PlatformDoc,
    /// `source`, `location`, `manifest_media_type`, `config_digest`, `platforms`, `layers`,
    /// `config` (as `memlint inspect --format json` writes them).
    #[serde(flatten)]
    pub(crate) rest: BTreeMap<String, Value>,
}

/// A finding in memlint's JSON: [`Finding`] as it serialises, read back by `merge`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct FindingDoc {
    /// The rule's id (`memlint rules`).
    pub(crate) rule: String,
    pub(crate) severity: Severity,
    /// One matter-of-fact clause.
    pub(crate) message: String,
    /// The paths, env entries, versions and layers that led to the finding.
    pub(crate) evidence: Vec<String>,
    /// The image paths (absolute, as in the image's merged file tree) the evidence names, each
    /// once, in the order it first names them: what a scoped ignore's `path` and layer
    /// provenance match (since schema 1.1.0; a report of 1.0.0 has none).
    #[serde(default)]
    pub(crate) paths: Vec<String>,
    /// What to change in this image.
    pub(crate) fix: String,
    /// The Dockerfile (or manifest) line the finding belongs to, when one is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) location: Option<crate::finding::Location>,
    /// Why the finding is hidden, when an ignore covers it (or a baseline holds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) suppression: Option<SuppressionDoc>,
    /// What tells this finding from every other across runs: the baseline's key, SARIF's
    /// `partialFingerprints` and GitLab's `fingerprint`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) fingerprint: String,
    /// Present on the one finding that stands for the findings of its rule past the per-rule
    /// cap: how many it stands for (since schema 1.1.0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) omitted: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// An ignore that hides a finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct SuppressionDoc {
    pub(crate) kind: SuppressionKind,
    pub(crate) justification: String,
    /// Where the ignore is written.
    pub(crate) origin: String,
}

/// SARIF's suppression kinds: `inSource` for a Dockerfile comment or a workload's annotation,
/// `external` for the config, the command line or a baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub(crate) enum SuppressionKind {
    #[serde(rename = "inSource")]
    InSource,
    #[serde(rename = "external")]
    External,
}

impl FindingDoc {
    /// The finding, its rule this memlint's; `Err` names a rule it does not know.
    pub(crate) fn finding(&self) -> Result<Finding, String> {
        let rule = crate::rules::ALL
            .iter()
            .find(|r| r.id == self.rule)
            .ok_or_else(|| {
                format!(
                    "unknown rule `{}`: not a rule of memlint {}",
                    crate::untrusted::line(&self.rule),
                    env!("CARGO_PKG_VERSION")
                )
            })?;
        let mut f = rule.finding(self.message.clone());
        f.severity = self.severity;
        // The JSON keeps the paths per finding, not per line: the first line names them all, so
        // that the finding names the same paths in the same order.
        f.evidence = self
            .evidence
            .iter()
            .enumerate()
            .map(|(i, e)| match i {
                0 => crate::finding::Evidence::naming(e.clone(), self.paths.iter().cloned()),
                _ => crate::finding::Evidence::plain(e.clone()),
            })
            .collect();
        f.omitted = self.omitted;
        f.fix = self.fix.clone();
        f.location = self.location.clone();
        f.fingerprint = self.fingerprint.clone();
        f.suppression = self.suppression.as_ref().map(|s| crate::finding::Suppression {
            kind: match s.kind {
                SuppressionKind::InSource => "inSource",
                SuppressionKind::External => "external",
            },
            justification: s.justification.clone(),
            origin: s.origin.clone(),
        });
        Ok(f)
    }
}

/// Why a container's image could not be read (`lint --k8s`; the run ends with exit code 2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct ReadFailure {
    /// The diagnostic's code, e.g. `memlint::size_mismatch`.
    pub(crate) code: String,
    pub(crate) message: String,
}

/// The findings of a report by severity, those past the cap included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct Summary {
    pub(crate) errors: usize,
    pub(crate) warnings: usize,
    pub(crate) notes: usize,
    pub(crate) ignored: usize,
    pub(crate) baselined: usize,
    pub(crate) fixed: usize,
}

impl Summary {
    pub(crate) fn of(&self, s: Severity) -> usize {
        match s {
            Severity::Error => self.errors,
            Severity::Warning => self.warnings,
            Severity::Note => self.notes,
        }
    }
    fn of_mut(&mut self, s: Severity) -> &mut usize {
        match s {
            Severity::Error => &mut self.errors,
            Severity::Warning => &mut self.warnings,
            Severity::Note => &mut self.notes,
        }
    }
}

/// One image's (or container's) report in memlint's JSON: the inspect document plus the
/// findings, or with `lint --k8s` a container whose image could not be read (`error`, no
/// findings). Keys are a contract with users' scripts: see `memlint schema report`.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub(crate) struct ContainerDoc {
    /// With `lint --k8s`: the container the image is linted as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) k8s: Option<WorkloadDoc>,
    /// The image as given (`--image`, the manifest's reference, or the command line).
    pub(crate) reference: String,
    /// The image could not be read: no findings, no facts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<ReadFailure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) image: Option<ImageDoc>,
    /// File counts by type (and with `inspect --files`, every path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) files: Option<Value>,
    /// What memlint found out about the image: see `memlint schema facts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<crate::facts::Facts>")]
    pub(crate) facts: Option<Value>,
    /// Findings after ignores, most severe first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) findings: Option<Vec<FindingDoc>>,
    /// Findings an ignore hides, each with its suppression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ignored: Option<Vec<FindingDoc>>,
    /// Findings the baseline holds (`--baseline`), each with a suppression naming it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) baselined: Option<Vec<FindingDoc>>,
    /// Baseline entries of this report's subject that no longer occur (as the baseline file
    /// writes them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fixed: Option<Vec<crate::baseline::Entry>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) summary: Option<Summary>,
    /// What the reader should know about the run itself (ignores that matched nothing,
    /// findings placed on a nominal line). Absent when there is nothing to say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) notes: Vec<String>,
    /// `lint --platform all`: the platforms the index lists that this copy lacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) platforms_absent: Option<Vec<String>>,
    /// The `--rules-version` (or `rules-version`) pin the report was linted with: only the
    /// rules added in it or before ran. Absent without a pin (since schema 1.1.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) rules_version: Option<String>,
}

/// A JSON report: one image's report (`lint --format json`), or a list of them (`lint --k8s`,
/// `merge`, `lint --platform all`).
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum ReportFile {
    Many(ManyReports),
    One(Box<OneReport>),
}

/// The reports of a fleet (`lint --k8s`, `merge`) or of an image's platforms.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct ManyReports {
    /// The version of this contract (semantic: a new key bumps the minor).
    schema_version: String,
    /// The least severity that fails the run.
    fail_on: crate::finding::FailOn,
    /// In manifest order (`--k8s`), or by platform.
    reports: Vec<ContainerDoc>,
    /// `--platform all`: how the platforms differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    differences: Option<Vec<String>>,
}

/// One image's report.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct OneReport {
    /// The version of this contract (semantic: a new key bumps the minor).
    schema_version: String,
    /// The least severity that fails the run.
    fail_on: crate::finding::FailOn,
    #[serde(flatten)]
    report: ContainerDoc,
}

/// Schemas of what memlint writes (a key it leaves out when empty is not required).
fn generator() -> schemars::SchemaGenerator {
    schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
}

/// The JSON Schema (draft 2020-12) of memlint's JSON reports.
pub(crate) fn report_schema() -> schemars::Schema {
    let mut s = generator().into_root_schema_for::<ReportFile>();
    s.insert("title".to_string(), "memlint report".into());
    s.insert(
        "$comment".to_string(),
        format!("schema_version {SCHEMA_VERSION}").into(),
    );
    s
}

/// The JSON Schema (draft 2020-12) of the facts (`inspect --format json`'s and each report's
/// `facts`).
pub(crate) fn facts_schema() -> schemars::Schema {
    let mut s = generator().into_root_schema_for::<crate::facts::Facts>();
    s.insert("title".to_string(), "memlint facts".into());
    s.insert(
        "$comment".to_string(),
        format!("schema_version {SCHEMA_VERSION}").into(),
    );
    s
}

/// What the HTML page's summary needs of one container's report (`report/html.rs` draws it
/// from a [`View`] and its [`super::budget::FactsDoc`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct HtmlRow {
    /// The section's anchor (`r3`: its place on the page, the unread included).
    pub(crate) anchor: String,
    /// The container as a person names it (`Deployment shop/api, container app
    /// (deploy.yaml:19)`), or the image reference.
    pub(crate) heading: String,
    pub(crate) image: String,
    /// A Kubernetes container's report (`--k8s`), not an image's.
    pub(crate) container: bool,
    /// Findings by severity: error, warning, note (those past the per-rule cap included).
    pub(crate) counts: [usize; 3],
    pub(crate) ignored: usize,
    pub(crate) baselined: usize,
    /// Findings by rule, with the rule's severity in this report.
    pub(crate) by_rule: Vec<(&'static str, Severity, usize)>,
    /// The memory limit, in words (`1 GiB` or `none`).
    pub(crate) limit: String,
    /// What the settings commit of the limit, in bytes, and whether that passes the limit.
    pub(crate) committed: u64,
    pub(crate) over: bool,
}

/// One image's (or container's) report as every format renders it.
pub(crate) struct View<'a> {
    pub(crate) reference: String,
    /// `linux/amd64`, as `Platform` prints it.
    pub(crate) platform: String,
    pub(crate) manifest_digest: Option<String>,
    /// `glibc 2.36`: the C library of the text report's heading.
    pub(crate) libc: String,
    pub(crate) k8s: Option<WorkloadDoc>,
    /// The image could not be read (`lint --k8s`): the report says why, and nothing else.
    pub(crate) error: Option<ReadFailure>,
    pub(crate) findings: Vec<Finding>,
    pub(crate) ignored: Vec<Finding>,
    pub(crate) baselined: Vec<Finding>,
    pub(crate) summary: Summary,
    pub(crate) notes: Vec<String>,
    /// The rules that ran, each with why it could not decide when it could not (a live run
    /// only: the JSON keeps no reasons, so a document of many reports leaves them out of JUnit;
    /// `-v` text, which `merge` has not, shows them).
    pub(crate) rules: Vec<(&'static str, Option<String>)>,
    /// The facts, for `-v` (a live run only).
    pub(crate) facts: Option<&'a Facts>,
    /// The report's JSON document, for the formats that write it.
    pub(crate) json: Option<Value>,
    /// What the formats read of the facts, read back from the JSON (`merge`); a live run's are
    /// read from [`View::facts`] when a format needs them ([`View::facts_doc`]).
    pub(crate) facts_doc: Option<super::budget::FactsDoc>,
}

impl<'a> View<'a> {
    /// The view of a report read back from JSON (`memlint merge`). The rules that ran are
    /// those of its `rules_version` pin, every rule of this memlint without one.
    pub(crate) fn of_doc(d: ContainerDoc) -> Result<View<'static>, String> {
        let json = serde_json::to_value(&d).map_err(|e| e.to_string())?;
        let platform = d.image.as_ref().map(|i| {
            crate::platform::Platform {
                os: i.platform.os.clone(),
                architecture: i.platform.architecture.clone(),
                variant: i.platform.variant.clone(),
            }
            .to_string()
        });
        let facts_doc = d
            .facts
            .as_ref()
            .map(super::budget::FactsDoc::of_json)
            .transpose()?;
        let libc = facts_doc.as_ref().map(|f| f.libc.describe()).unwrap_or_default();
        let rules_run = d.rules_run()?;
        let findings = |list: Option<Vec<FindingDoc>>| -> Result<Vec<Finding>, String> {
            list.unwrap_or_default().iter().map(FindingDoc::finding).collect()
        };
        Ok(View {
            manifest_digest: d.image.as_ref().and_then(|i| i.manifest_digest.clone()),
            platform: platform.unwrap_or_default(),
            reference: d.reference,
            libc,
            k8s: d.k8s,
            error: d.error,
            findings: findings(d.findings)?,
            ignored: findings(d.ignored)?,
            baselined: findings(d.baselined)?,
            summary: d.summary.unwrap_or_default(),
            notes: d.notes,
            rules: rules_run.into_iter().map(|id| (id, None)).collect(),
            facts: None,
            json: Some(json),
            facts_doc,
        })
    }

    /// The report of a container whose image could not be read (`lint --k8s`).
    pub(crate) fn unread(k8s: WorkloadDoc, reference: String, error: ReadFailure) -> View<'static> {
        let doc = ContainerDoc {
            k8s: Some(k8s.clone()),
            reference: reference.clone(),
            error: Some(error.clone()),
            image: None,
            files: None,
            facts: None,
            findings: None,
            ignored: None,
            baselined: None,
            fixed: None,
            summary: None,
            notes: Vec::new(),
            platforms_absent: None,
            rules_version: None,
        };
        View {
            json: serde_json::to_value(&doc).ok(),
            reference,
            platform: String::new(),
            manifest_digest: None,
            libc: String::new(),
            k8s: Some(k8s),
            error: Some(error),
            findings: Vec::new(),
            ignored: Vec::new(),
            baselined: Vec::new(),
            summary: Summary::default(),
            notes: Vec::new(),
            rules: Vec::new(),
            facts: None,
            facts_doc: None,
        }
    }

    /// What the formats read of the facts: read back from the JSON, or from the live facts'
    /// JSON; `None` for a report whose image was not read.
    pub(crate) fn facts_doc(&self) -> Option<Result<std::borrow::Cow<'_, super::budget::FactsDoc>, String>> {
        match (&self.facts_doc, self.facts) {
            (Some(f), _) => Some(Ok(std::borrow::Cow::Borrowed(f))),
            (None, Some(f)) => Some(super::budget::FactsDoc::of_facts(f).map(std::borrow::Cow::Owned)),
            (None, None) => None,
        }
    }

    /// The most severe finding, if any.
    pub(crate) fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// It was linted (its image was read).
    pub(crate) fn linted(&self) -> bool {
        self.error.is_none()
    }
}

impl ContainerDoc {
    /// The ids of the rules that ran: those of the report's `rules_version` pin, every rule of
    /// this memlint without one; `Err` names the key.
    pub(crate) fn rules_run(&self) -> Result<Vec<&'static str>, String> {
        let pin = self
            .rules_version
            .as_deref()
            .map(crate::rules::pinned_release)
            .transpose()
            .map_err(|why| format!("key `rules_version`: {why}"))?;
        Ok(crate::rules::pinned(crate::rules::ALL, pin.as_ref())
            .iter()
            .map(|r| r.id)
            .collect())
    }

    /// Sets apart the findings the baseline holds (into `baselined`, with a suppression
    /// naming the baseline, as `lint --baseline` does), counts them in `summary`, and lists
    /// the baseline's entries of this container that no longer occur under `fixed`
    /// (`rules_run`: the rules whose entries can be fixed). Returns the container's subject
    /// and the fingerprints of every finding it has, for the baseline's tally; `None` for a
    /// report that is not a linted container's.
    pub(crate) fn judge_against(
        &mut self,
        b: &crate::baseline::Baseline,
        rules_run: &std::collections::HashSet<&'static str>,
    ) -> Option<(crate::baseline::Subject, Vec<String>)> {
        if self.error.is_some() {
            return None;
        }
        let k = self.k8s.as_ref()?;
        let subject =
            crate::baseline::Subject::container(&k.kind, k.namespace.as_deref(), &k.name, &k.container);
        let mut summary = self.summary.unwrap_or_default();
        let mut new = Vec::new();
        let mut baselined = self.baselined.take().unwrap_or_default();
        for mut f in self.findings.take().unwrap_or_default() {
            match b.get(&f.fingerprint) {
                Some(e) => {
                    f.suppression = Some(SuppressionDoc {
                        kind: SuppressionKind::External,
                        justification: format!(
                            "accepted in the baseline {} (first seen {})",
                            b.path, e.first_seen
                        ),
                        origin: b.path.clone(),
                    });
                    let n = summary.of_mut(f.severity);
                    *n = n.saturating_sub(1);
                    summary.baselined += 1;
                    baselined.push(f);
                }
                None => new.push(f),
            }
        }
        let ignored = self.ignored.as_deref().unwrap_or_default();
        let all: Vec<String> = new
            .iter()
            .chain(&baselined)
            .chain(ignored)
            .map(|f| f.fingerprint.clone())
            .collect();
        let linted = std::collections::HashSet::from([subject.clone()]);
        let seen: std::collections::HashSet<String> = all.iter().cloned().collect();
        let fixed: Vec<crate::baseline::Entry> =
            b.fixed(&linted, rules_run, &seen).into_iter().cloned().collect();
        summary.fixed = fixed.len();
        self.summary = Some(summary);
        self.findings = Some(new);
        self.baselined = Some(baselined);
        self.fixed = Some(fixed);
        Some((subject, all))
    }
}
