//! What a rule reports: a finding with its evidence, the fix for this image, and where in a
//! Dockerfile it belongs.

use serde::{Serialize, Serializer};
use std::fmt;

/// How bad a finding is. Ordered: a note is below a warning, a warning below an error.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Severity {
    Note,
    Warning,
    Error,
}

impl Severity {
    pub(crate) fn as_str(self) -> &'static str {
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

/// The least severity that fails a run (`--fail-on`, `fail-on` in `.memlint.toml`), or never.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub(crate) enum FailOn {
    Error,
    Warning,
    Note,
    Never,
}

impl FailOn {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FailOn::Error => "error",
            FailOn::Warning => "warning",
            FailOn::Note => "note",
            FailOn::Never => "never",
        }
    }

    /// The name as written in `.memlint.toml` or on the command line.
    pub(crate) fn parse(name: &str) -> Option<FailOn> {
        [FailOn::Error, FailOn::Warning, FailOn::Note, FailOn::Never]
            .into_iter()
            .find(|f| f.as_str() == name)
    }

    /// The least severity that fails the run; `None` for never.
    pub(crate) fn threshold(self) -> Option<Severity> {
        match self {
            FailOn::Error => Some(Severity::Error),
            FailOn::Warning => Some(Severity::Warning),
            FailOn::Note => Some(Severity::Note),
            FailOn::Never => None,
        }
    }
}

impl fmt::Display for FailOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line of evidence: the words a reader sees, and the image paths it names. Scoped ignores
/// (`path =`) and layer provenance match on the paths, never on the words, so rewording a line
/// cannot silently change what an ignore hides. Serialised as its words alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Evidence {
    text: String,
    paths: Vec<String>,
}

impl Evidence {
    /// A line that names no image path.
    pub(crate) fn plain(text: impl Into<String>) -> Evidence {
        Evidence {
            text: text.into(),
            paths: Vec::new(),
        }
    }

    /// A line that names these image paths. Only absolute paths (as in the merged file tree)
    /// are kept: ignores and layer provenance match from the image root, and a relative name
    /// (an `LD_PRELOAD` entry as written, say) names no one file.
    pub(crate) fn naming<P: Into<String>>(
        text: impl Into<String>,
        paths: impl IntoIterator<Item = P>,
    ) -> Evidence {
        Evidence {
            text: text.into(),
            paths: paths
                .into_iter()
                .map(Into::into)
                .filter(|p: &String| p.starts_with('/'))
                .collect(),
        }
    }

    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    pub(crate) fn paths(&self) -> &[String] {
        &self.paths
    }
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl schemars::JsonSchema for Evidence {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Evidence".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string" })
    }
}

impl Serialize for Evidence {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

/// Where in a Dockerfile a finding belongs: the instruction that caused it or should carry its
/// fix. Each rule names it (per finding where it depends on the finding); `locate` finds the
/// instruction in the target stage's chain, and when there is none, the target stage's `FROM`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Anchor {
    /// The last `ENV` that sets the first of these keys that any `ENV` sets.
    Env(&'static [&'static str]),
    /// The last `RUN`, `COPY` or `ADD` whose arguments mention one of these words: the
    /// instruction that installs a package or puts a file in place.
    Installs(&'static [&'static str]),
    /// The last `CMD` or `ENTRYPOINT`.
    Command,
    /// The target stage's `FROM`.
    From,
    /// With `--k8s`: the container's `resources.limits.memory` line in the manifest (the
    /// target stage's `FROM` in a Dockerfile).
    MemoryLimit,
    /// With `--k8s`: the container's `image:` line in the manifest (the target stage's `FROM`
    /// in a Dockerfile).
    Container,
    /// With `--k8s`: the pod's `volumes` entry of the container's mount at this index of
    /// `facts.container.mounts` (else the mount's line; the target stage's `FROM` in a
    /// Dockerfile).
    Volume(usize),
}

/// One problem found in an image. JSON keys are a contract with users' scripts: as
/// [`crate::report::model::FindingDoc`] describes them (its `Serialize` below writes them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Finding {
    pub(crate) rule: &'static str,
    pub(crate) severity: Severity,
    /// One matter-of-fact clause, no capital letter, no closing period.
    pub(crate) message: String,
    /// The paths, env entries, versions and layers that led to the finding.
    pub(crate) evidence: Vec<Evidence>,
    /// What to change in this image, as Dockerfile lines where that is the fix.
    pub(crate) fix: String,
    /// The Dockerfile line the finding belongs to, when one is known.
    pub(crate) location: Option<Location>,
    /// Why the finding is hidden, when an ignore covers it (or a baseline holds it).
    pub(crate) suppression: Option<Suppression>,
    /// What tells this finding from every other across runs ([`crate::baseline`]'s
    /// fingerprint); given by the judge, empty until then.
    pub(crate) fingerprint: String,
    /// Where in a Dockerfile it belongs.
    pub(crate) anchor: Anchor,
    /// 0 for a finding a rule made; N for the one that counts, in its place, the N findings of
    /// its rule past the cap ([`crate::judge::MAX_FINDINGS_PER_RULE`]).
    pub(crate) omitted: usize,
}

/// The finding's JSON: its fields, the image paths its evidence names (`paths`, each once, in
/// the order the evidence first names them), and `omitted` for the one that stands for the findings past the
/// cap. The anchor stays out: `location` is where it led.
impl Serialize for Finding {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("Finding", 10)?;
        s.serialize_field("rule", self.rule)?;
        s.serialize_field("severity", &self.severity)?;
        s.serialize_field("message", &self.message)?;
        s.serialize_field("evidence", &self.evidence)?;
        let mut seen = std::collections::BTreeSet::new();
        let paths: Vec<&str> = self.paths().filter(|p| seen.insert(*p)).collect();
        s.serialize_field("paths", &paths)?;
        s.serialize_field("fix", &self.fix)?;
        match &self.location {
            Some(l) => s.serialize_field("location", l)?,
            None => s.skip_field("location")?,
        }
        match &self.suppression {
            Some(x) => s.serialize_field("suppression", x)?,
            None => s.skip_field("suppression")?,
        }
        if self.fingerprint.is_empty() {
            s.skip_field("fingerprint")?;
        } else {
            s.serialize_field("fingerprint", &self.fingerprint)?;
        }
        if self.omitted == 0 {
            s.skip_field("omitted")?;
        } else {
            s.serialize_field("omitted", &self.omitted)?;
        }
        s.end()
    }
}

/// A place in the repository: a Dockerfile and a line range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct Location {
    /// Repository-relative path, `/`-separated.
    pub(crate) path: String,
    pub(crate) line: u32,
    pub(crate) end_line: u32,
    /// The instruction there, as written (first line), or why the location is only nominal.
    pub(crate) instruction: Option<String>,
}

/// An ignore that hides a finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Suppression {
    /// `inSource` for a Dockerfile comment or a workload's annotation, `external` for the
    /// config, the command line or a baseline (SARIF's suppression kinds).
    pub(crate) kind: &'static str,
    pub(crate) justification: String,
    /// Where the ignore is written.
    pub(crate) origin: String,
}

impl Finding {
    /// A finding of `rule` with its message, placed by `anchor`; evidence, fix and placement
    /// come after.
    pub(crate) fn new(
        rule: &'static str,
        severity: Severity,
        message: impl Into<String>,
        anchor: Anchor,
    ) -> Finding {
        Finding {
            rule,
            severity,
            message: message.into(),
            evidence: Vec::new(),
            fix: String::new(),
            location: None,
            suppression: None,
            fingerprint: String::new(),
            anchor,
            omitted: 0,
        }
    }

    /// Whether one of its evidence lines reads `text` exactly (for tests).
    #[cfg(test)]
    pub(crate) fn has_evidence(&self, text: &str) -> bool {
        self.evidence.iter().any(|e| e.text() == text)
    }

    pub(crate) fn evidence(mut self, e: Evidence) -> Self {
        self.evidence.push(e);
        self
    }

    pub(crate) fn evidence_all(mut self, e: impl IntoIterator<Item = Evidence>) -> Self {
        self.evidence.extend(e);
        self
    }

    /// The image paths the finding names, in the order its evidence names them.
    pub(crate) fn paths(&self) -> impl Iterator<Item = &str> {
        self.evidence
            .iter()
            .flat_map(|e| e.paths.iter().map(String::as_str))
    }

    /// Places this finding somewhere other than its rule's usual anchor.
    pub(crate) fn anchor(mut self, anchor: Anchor) -> Self {
        self.anchor = anchor;
        self
    }

    pub(crate) fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = fix.into();
        self
    }

    /// How many findings this one stands for: 1, or N for the one that counts N findings past
    /// the cap. Summaries count these, not the findings listed.
    pub(crate) fn count(&self) -> usize {
        self.omitted.max(1)
    }

    pub(crate) fn severity(mut self, s: Severity) -> Self {
        self.severity = s;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_serialises_as_its_words_alone() {
        let e = Evidence::naming(
            "sharp 0.34.5 at /app/node_modules/sharp",
            ["/app/node_modules/sharp"],
        );
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            "sharp 0.34.5 at /app/node_modules/sharp"
        );
        assert_eq!(e.to_string(), e.text());
        assert_eq!(e.paths(), ["/app/node_modules/sharp"]);
        assert!(Evidence::plain("LD_PRELOAD=/usr/lib/libjemalloc.so.2")
            .paths()
            .is_empty());
    }

    #[test]
    fn fail_on_names() {
        for f in [FailOn::Error, FailOn::Warning, FailOn::Note, FailOn::Never] {
            assert_eq!(FailOn::parse(f.as_str()), Some(f));
            assert_eq!(serde_json::to_value(f).unwrap(), f.as_str());
            assert_eq!(<FailOn as clap::ValueEnum>::from_str(f.as_str(), false), Ok(f));
        }
        assert_eq!(FailOn::parse("Error"), None);
        assert_eq!(FailOn::Never.threshold(), None);
        assert_eq!(FailOn::Note.threshold(), Some(Severity::Note));
    }
}
