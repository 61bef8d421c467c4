//! What a rule reports: a finding with its evidence and the fix for this image.

use serde::Serialize;
use std::fmt;

/// How bad a finding is. Ordered: a note is below a warning, a warning below an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Note,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem found in an image. JSON keys are a contract with users' scripts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub rule: &'static str,
    pub severity: Severity,
    /// One matter-of-fact clause, no capital letter, no closing period.
    pub message: String,
    /// The paths, env entries, versions and layers that led to the finding.
    pub evidence: Vec<String>,
    /// What to change in this image, as Dockerfile lines where that is the fix.
    pub fix: String,
    /// The Dockerfile line the finding belongs to, when one is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    /// Why the finding is hidden, when an ignore covers it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppression: Option<Suppression>,
}

/// A place in the repository: a Dockerfile and a line range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Location {
    /// Repository-relative path, `/`-separated.
    pub path: String,
    pub line: u32,
    pub end_line: u32,
    /// The instruction there, as written (first line), or why the location is only nominal.
    pub instruction: Option<String>,
}

/// An ignore that hides a finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Suppression {
    /// `inSource` for a Dockerfile comment, `external` for the config or the command line
    /// (SARIF's suppression kinds).
    pub kind: &'static str,
    pub justification: String,
    /// Where the ignore is written.
    pub origin: String,
}

impl Finding {
    pub fn evidence(mut self, e: impl Into<String>) -> Self {
        self.evidence.push(e.into());
        self
    }

    pub fn evidence_all(mut self, e: impl IntoIterator<Item = String>) -> Self {
        self.evidence.extend(e);
        self
    }

    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = fix.into();
        self
    }

    pub fn severity(mut self, s: Severity) -> Self {
        self.severity = s;
        self
    }
}
