//! The result of linting one image, shared by every output format.

use crate::baseline::{Baseline, Entry, Subject};
use crate::facts::Facts;
use crate::finding::{Finding, Severity};
use crate::image::Image;
use crate::judge::{self, Policy, Verdict};
use crate::k8s::Container;
use crate::locate::{self, DockerfileContext};
use crate::report::inspect::InspectReport;
use crate::report::model::{View, WorkloadDoc};
use crate::rules::RuleResult;
use crate::settings::{Date, ScopedIgnore, Settings};
use serde::Serialize;

/// One image's report: what `inspect` shows, plus the findings.
pub(crate) struct LintReport<'a> {
    pub(crate) image: &'a Image,
    pub(crate) facts: &'a Facts,
    pub(crate) results: Vec<RuleResult>,
    /// Findings after ignores, most severe first, then by rule id.
    pub(crate) findings: Vec<Finding>,
    /// Findings an ignore hides, each with its suppression.
    pub(crate) ignored: Vec<Finding>,
    /// Findings the baseline holds (`--baseline`), each with a suppression that names it.
    pub(crate) baselined: Vec<Finding>,
    /// What the findings were found in, as their fingerprints name it.
    pub(crate) subject: Subject,
    /// Every finding no ignore hides, before the cap, as a baseline entry of today.
    pub(crate) seen: Vec<Entry>,
    /// The fingerprints of the findings an ignore hides.
    pub(crate) ignored_fingerprints: Vec<String>,
    /// The baseline's entries of this report's subject that no longer occur; the command sets
    /// them once it knows every finding of the run.
    pub(crate) fixed: Vec<Entry>,
    /// Things the reader should know about the run itself (ignores that matched nothing,
    /// findings placed on a nominal line).
    pub(crate) notes: Vec<String>,
    /// With `--k8s`: the container this report lints the image as.
    pub(crate) k8s: Option<&'a Container>,
    /// The last of `notes` says findings point at the nominal `artifact:1`.
    nominal_note: bool,
    /// The `--rules-version` pin the rules ran under, for the JSON (`rules_version`).
    rules_version: Option<String>,
}

/// What shapes a report besides the image: settings and the Dockerfile.
pub(crate) struct ReportContext<'a> {
    pub(crate) settings: &'a Settings,
    pub(crate) dockerfile: Option<&'a DockerfileContext<'a>>,
    /// Where findings point when there is no Dockerfile (`--sarif-artifact`).
    pub(crate) artifact: &'a str,
    pub(crate) today: Date,
    /// The ignores the linted container's workload carries (`memlint/ignore`), as
    /// [`Policy::in_source`] takes them.
    pub(crate) in_source: &'a [ScopedIgnore],
    /// The accepted findings (`--baseline`).
    pub(crate) baseline: Option<&'a Baseline>,
    /// With `--k8s`: the workload of the container the image is linted as, which names its
    /// findings' fingerprints in place of the image.
    pub(crate) workload: Option<&'a crate::k8s::Workload>,
}

impl<'a> LintReport<'a> {
    pub(crate) fn new(
        image: &'a Image,
        facts: &'a Facts,
        results: Vec<RuleResult>,
        ctx: &ReportContext,
    ) -> LintReport<'a> {
        let names: Vec<&str> = [Some(image.reference.as_str()), image.name.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        let subject = match ctx.workload {
            Some(w) => Subject::container(&w.kind, w.namespace.as_deref(), &w.name, &w.container),
            None => Subject::image(
                &image.reference,
                image.name.as_deref(),
                &image.platform.to_string(),
            ),
        };
        let policy = Policy {
            subject: &subject,
            baseline: ctx.baseline,
            settings: ctx.settings,
            dockerfile: ctx.dockerfile,
            artifact: ctx.artifact,
            image_names: &names,
            today: ctx.today,
            in_source: ctx.in_source,
        };
        let Verdict {
            findings,
            ignored,
            baselined,
            seen,
            ignored_fingerprints,
            notes,
            nominal_note,
        } = judge::judge(&results, &policy, |all| {
            locate::provenance(all, image);
            locate::locate(all, ctx.dockerfile, ctx.artifact);
        });
        LintReport {
            image,
            facts,
            results,
            findings,
            ignored,
            baselined,
            subject,
            seen,
            ignored_fingerprints,
            fixed: Vec::new(),
            notes,
            k8s: None,
            nominal_note,
            rules_version: ctx.settings.rules_version.as_ref().map(ToString::to_string),
        }
    }

    /// This report as the report of a Kubernetes container: findings that the manifest's
    /// context decides (a limit, an env entry, the command it gives) go on that line of the
    /// manifest at `manifest_path` (repository-relative); the others keep their Dockerfile line
    /// when a Dockerfile was given, else go on the container's `image:` line.
    pub(crate) fn in_container(
        mut self,
        c: &'a Container,
        manifest_path: &str,
        dockerfile_given: bool,
    ) -> Self {
        locate::in_manifest(&mut self.findings, c, manifest_path, dockerfile_given);
        locate::in_manifest(&mut self.ignored, c, manifest_path, dockerfile_given);
        locate::in_manifest(&mut self.baselined, c, manifest_path, dockerfile_given);
        if std::mem::take(&mut self.nominal_note) {
            self.notes.pop();
        }
        self.k8s = Some(c);
        self
    }

    /// Findings of severity `s`, those past the cap included.
    pub(crate) fn count(&self, s: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == s)
            .map(Finding::count)
            .sum()
    }

    /// Findings an ignore hides, those past the cap included.
    pub(crate) fn ignored_count(&self) -> usize {
        self.ignored.iter().map(Finding::count).sum()
    }

    /// Findings the baseline holds, those past the cap included.
    pub(crate) fn baselined_count(&self) -> usize {
        self.baselined.iter().map(Finding::count).sum()
    }

    /// The most severe finding, if any.
    pub(crate) fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// The view every format renders.
    pub(crate) fn view(&self) -> View<'a> {
        let libc = match &self.facts.libc.version {
            Some(v) => format!("{} {v}", self.facts.libc.family),
            None => self.facts.libc.family.to_string(),
        };
        View {
            reference: self.image.reference.clone(),
            platform: self.image.platform.to_string(),
            manifest_digest: self.image.manifest_digest.as_ref().map(ToString::to_string),
            libc,
            k8s: self.k8s.map(|c| WorkloadDoc::from(&c.workload)),
            error: None,
            findings: self.findings.clone(),
            ignored: self.ignored.clone(),
            baselined: self.baselined.clone(),
            summary: self.summary(),
            notes: self.notes.clone(),
            rules: self
                .results
                .iter()
                .map(|res| {
                    (
                        res.rule.id,
                        res.outcome.undecided.as_ref().map(ToString::to_string),
                    )
                })
                .collect(),
            facts: Some(self.facts),
            json: None,
            facts_doc: None,
        }
    }

    /// The counts of the findings by severity, those past the cap included.
    pub(crate) fn summary(&self) -> super::model::Summary {
        super::model::Summary {
            errors: self.count(Severity::Error),
            warnings: self.count(Severity::Warning),
            notes: self.count(Severity::Note),
            ignored: self.ignored_count(),
            baselined: self.baselined_count(),
            fixed: self.fixed.len(),
        }
    }

    /// The JSON document: the inspect JSON plus `findings[]`.
    pub(crate) fn json(&self) -> serde_json::Value {
        #[derive(Serialize)]
        struct Doc<'b> {
            #[serde(flatten)]
            inspect: InspectReport<'b>,
            findings: &'b [Finding],
            ignored: &'b [Finding],
            baselined: &'b [Finding],
            /// Baseline entries of this report's subject that no longer occur.
            fixed: &'b [Entry],
            summary: super::model::Summary,
            /// Absent when there is nothing to say.
            #[serde(skip_serializing_if = "<[String]>::is_empty")]
            notes: &'b [String],
            /// Absent without a pin.
            #[serde(skip_serializing_if = "Option::is_none")]
            rules_version: Option<&'b str>,
        }
        #[derive(Serialize)]
        struct WithK8s<'b> {
            k8s: &'b crate::k8s::Workload,
            #[serde(flatten)]
            doc: Doc<'b>,
        }
        let doc = Doc {
            inspect: InspectReport::new(self.image, self.facts),
            findings: &self.findings,
            ignored: &self.ignored,
            baselined: &self.baselined,
            fixed: &self.fixed,
            summary: self.summary(),
            notes: &self.notes,
            rules_version: self.rules_version.as_deref(),
        };
        match self.k8s {
            Some(c) => serde_json::to_value(WithK8s {
                k8s: &c.workload,
                doc,
            })
            .unwrap_or_default(),
            None => serde_json::to_value(&doc).unwrap_or_default(),
        }
    }
}
