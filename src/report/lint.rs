//! The result of linting one image, shared by every output format.

use crate::commands::inspect::InspectReport;
use crate::facts::Facts;
use crate::finding::{Finding, Severity};
use crate::rules::RuleResult;
use crate::sources::Image;
use serde::Serialize;

/// One image's report: what `inspect` shows, plus the findings.
pub struct LintReport<'a> {
    pub image: &'a Image,
    pub facts: &'a Facts,
    pub results: Vec<RuleResult>,
    /// Findings after ignores, most severe first, then by rule id.
    pub findings: Vec<Finding>,
    /// Findings hidden by `--ignore`.
    pub ignored: Vec<Finding>,
}

impl<'a> LintReport<'a> {
    pub fn new(
        image: &'a Image,
        facts: &'a Facts,
        results: Vec<RuleResult>,
        ignore: &[String],
    ) -> LintReport<'a> {
        let mut findings = Vec::new();
        let mut ignored = Vec::new();
        for r in &results {
            for f in &r.outcome.findings {
                if ignore.iter().any(|i| i == f.rule) {
                    ignored.push(f.clone());
                } else {
                    findings.push(f.clone());
                }
            }
        }
        findings.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.rule.cmp(b.rule)));
        LintReport {
            image,
            facts,
            results,
            findings,
            ignored,
        }
    }

    pub fn count(&self, s: Severity) -> usize {
        self.findings.iter().filter(|f| f.severity == s).count()
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
        let doc = Doc {
            inspect: InspectReport::new(self.image, self.facts),
            findings: &self.findings,
            ignored: &self.ignored,
            summary: Summary {
                errors: self.count(Severity::Error),
                warnings: self.count(Severity::Warning),
                notes: self.count(Severity::Note),
                ignored: self.ignored.len(),
            },
        };
        serde_json::to_value(&doc).unwrap_or_default()
    }
}
