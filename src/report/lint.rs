//! The result of linting one image, shared by every output format.

use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Finding, Location, Severity, Suppression};
use crate::image::Image;
use crate::k8s::Container;
use crate::locate::{self, DockerfileContext};
use crate::report::inspect::InspectReport;
use crate::rules::{self, RuleResult};
use crate::settings::{Date, Settings};
use serde::Serialize;

/// One image's report: what `inspect` shows, plus the findings.
pub struct LintReport<'a> {
    pub image: &'a Image,
    pub facts: &'a Facts,
    pub results: Vec<RuleResult>,
    /// Findings after ignores, most severe first, then by rule id.
    pub findings: Vec<Finding>,
    /// Findings an ignore hides, each with its suppression.
    pub ignored: Vec<Finding>,
    /// Things the reader should know about the run itself (ignores that matched nothing,
    /// findings placed on a nominal line).
    pub notes: Vec<String>,
    /// With `--k8s`: the container this report lints the image as.
    pub k8s: Option<&'a Container>,
}

/// What shapes a report besides the image: settings and the Dockerfile.
pub struct ReportContext<'a> {
    pub settings: &'a Settings,
    pub dockerfile: Option<&'a DockerfileContext<'a>>,
    /// Where findings point when there is no Dockerfile (`--sarif-artifact`).
    pub artifact: &'a str,
    pub today: Date,
}

impl<'a> LintReport<'a> {
    pub fn new(
        image: &'a Image,
        facts: &'a Facts,
        results: Vec<RuleResult>,
        ctx: &ReportContext,
    ) -> LintReport<'a> {
        let mut all: Vec<Finding> = results
            .iter()
            .flat_map(|r| r.outcome.findings.iter().cloned())
            .collect();
        for f in &mut all {
            if let Some(s) = ctx.settings.severity.get(f.rule) {
                f.severity = *s;
            }
        }
        locate::provenance(&mut all, image);
        locate::locate(&mut all, ctx.dockerfile, ctx.artifact);
        let names: Vec<&str> = [Some(image.reference.as_str()), image.name.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        let mut used = vec![false; ctx.settings.scoped.len()];
        let mut findings = Vec::new();
        let mut ignored = Vec::new();
        for mut f in all {
            f.suppression = suppression(&mut f, ctx, &names, &mut used);
            if f.suppression.is_some() {
                ignored.push(f);
            } else {
                findings.push(f);
            }
        }
        let (mut findings, ignored) = (rules::cap(findings), rules::cap(ignored));
        let mut notes = Vec::new();
        for (i, s) in ctx.settings.scoped.iter().enumerate() {
            if !used[i] {
                notes.push(format!(
                    "the ignore of {} at {} matched no finding",
                    s.rule, s.origin
                ));
            }
        }
        if ctx.dockerfile.is_none() && !findings.is_empty() {
            notes.push(format!(
                "no Dockerfile was given (--dockerfile): findings point at {}:1",
                ctx.artifact
            ));
        }
        findings.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.rule.cmp(b.rule)));
        LintReport {
            image,
            facts,
            results,
            findings,
            ignored,
            notes,
            k8s: None,
        }
    }

    /// This report as the report of a Kubernetes container: findings that the manifest's
    /// context decides (a limit, an env entry, the command it gives) go on that line of the
    /// manifest at `manifest_path` (repository-relative); the others keep their Dockerfile line
    /// when a Dockerfile was given, else go on the container's `image:` line.
    pub fn in_container(mut self, c: &'a Container, manifest_path: &str, dockerfile_given: bool) -> Self {
        let place = |f: &mut Finding| {
            let image_line = (c.workload.line, format!("image: {}", c.image));
            let join = match f.anchor {
                Anchor::MemoryLimit => c
                    .limits_memory
                    .as_ref()
                    .map(|l| (l.line, format!("limits.memory: {}", l.value.text)))
                    .or(Some(image_line.clone())),
                Anchor::Container => Some(image_line.clone()),
                Anchor::Env(keys) => keys
                    .iter()
                    .find_map(|k| c.env.iter().rev().find(|e| e.name == *k))
                    .map(|e| (e.line, format!("env: {}", e.name))),
                Anchor::Command => c
                    .args
                    .as_ref()
                    .map(|a| (a.line, "args".to_string()))
                    .or(c.command.as_ref().map(|a| (a.line, "command".to_string()))),
                Anchor::Installs(_) | Anchor::From => None,
            };
            let spot = match join {
                Some(j) => Some(j),
                None if dockerfile_given && f.location.is_some() => None,
                None => Some(image_line),
            };
            if let Some((line, instruction)) = spot {
                f.location = Some(Location {
                    path: manifest_path.to_string(),
                    line,
                    end_line: line,
                    instruction: Some(instruction),
                });
            }
        };
        self.findings.iter_mut().for_each(place);
        self.ignored.iter_mut().for_each(place);
        self.notes.retain(|n| !n.starts_with("no Dockerfile was given"));
        self.k8s = Some(c);
        self
    }

    /// Findings of severity `s`, those past the cap included.
    pub fn count(&self, s: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == s)
            .map(Finding::count)
            .sum()
    }

    /// Findings an ignore hides, those past the cap included.
    pub fn ignored_count(&self) -> usize {
        self.ignored.iter().map(Finding::count).sum()
    }

    /// The most severe finding, if any.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// The JSON document: the inspect JSON plus `findings[]`.
    pub fn json(&self) -> serde_json::Value {
        #[derive(Serialize)]
        struct Doc<'b> {
            #[serde(flatten)]
            inspect: InspectReport<'b>,
            findings: &'b [Finding],
            ignored: &'b [Finding],
            summary: Summary,
        }
        #[derive(Serialize)]
        struct Summary {
            errors: usize,
            warnings: usize,
            notes: usize,
            ignored: usize,
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
            summary: Summary {
                errors: self.count(Severity::Error),
                warnings: self.count(Severity::Warning),
                notes: self.count(Severity::Note),
                ignored: self.ignored_count(),
            },
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

/// The ignore that hides a finding, if any: a `# memlint ignore=` comment above its Dockerfile
/// line, a rule ignored everywhere, or a scoped ignore that has not expired. An expired one
/// stops hiding the finding and says so in its evidence.
fn suppression(
    f: &mut Finding,
    ctx: &ReportContext,
    names: &[&str],
    used: &mut [bool],
) -> Option<Suppression> {
    if let (Some(df), Some(loc)) = (ctx.dockerfile, f.location.as_ref()) {
        let inline = df
            .dockerfile
            .instructions
            .iter()
            .filter(|i| i.line == loc.line)
            .flat_map(|i| i.ignores.iter())
            .find(|ig| ig.rules.iter().any(|r| r == f.rule));
        if let Some(ig) = inline {
            return Some(Suppression {
                kind: "inSource",
                justification: ig
                    .reason
                    .clone()
                    .unwrap_or_else(|| "(no reason given)".to_string()),
                origin: format!("{}:{}", df.path, ig.line),
            });
        }
    }
    if let Some((_, origin)) = ctx.settings.ignore.iter().find(|(r, _)| r == f.rule) {
        return Some(Suppression {
            kind: "external",
            justification: format!("ignored by {origin}"),
            origin: origin.clone(),
        });
    }
    for (i, s) in ctx.settings.scoped.iter().enumerate() {
        if !s.covers(f.rule, names, &f.evidence) {
            continue;
        }
        used[i] = true;
        match s.expires {
            Some(d) if d < ctx.today => {
                f.evidence.push(Evidence::plain(format!(
                    "the ignore at {} expired on {d} and no longer hides this ({})",
                    s.origin, s.reason
                )));
            }
            _ => {
                return Some(Suppression {
                    kind: "external",
                    justification: s.reason.clone(),
                    origin: s.origin.clone(),
                });
            }
        }
    }
    None
}
