//! The baseline: findings a team has accepted (`lint --write-baseline FILE`), so that a later
//! run (`lint --baseline FILE`) reports, counts and fails only on the findings that are new.
//!
//! A finding is known by its fingerprint: the rule, what it was found in (the image's
//! repository and platform, or with `--k8s` the workload and container) and the image paths
//! it names, never its words, its line or the image's tag, digest or registry. So a rebuilt,
//! retagged or moved image, a manifest that moved or gained lines, and a reworded message keep
//! the fingerprint; another path, rule, workload or container makes another. SARIF's
//! `partialFingerprints` (`memlintFinding/v2`) and GitLab's `fingerprint` are the same value,
//! so code scanning follows one alert across runs.

use crate::digest::Digest;
use crate::error::{BaselineError, Error, SourceWindow};
use crate::finding::{Finding, Severity};
use jiff::civil::Date;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

/// The most a baseline file may hold: it is read into memory whole.
pub(crate) const MAX_BASELINE_BYTES: u64 = 16 << 20;

/// The version of the file's layout, written as `memlint_baseline`.
pub(crate) const FORMAT_VERSION: u32 = 1;

/// What a finding was found in, as its fingerprint names it.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(untagged)]
pub(crate) enum Subject {
    /// With `--k8s`: the workload and container that run the image (not the manifest file,
    /// not the image the container runs).
    Container { workload: WorkloadId, container: String },
    /// Without `--k8s`: the image's repository, without registry, tag or digest, and its
    /// platform (the findings of each platform of a multi-platform image are their own).
    Image { image: String, platform: String },
}

/// A workload as a baseline names it.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkloadId {
    pub(crate) kind: String,
    /// `default` when the manifest names none.
    pub(crate) namespace: String,
    pub(crate) name: String,
}

impl Subject {
    /// The subject of a workload's container.
    pub(crate) fn container(kind: &str, namespace: Option<&str>, name: &str, container: &str) -> Subject {
        Subject::Container {
            workload: WorkloadId {
                kind: kind.to_string(),
                namespace: namespace.unwrap_or("default").to_string(),
                name: name.to_string(),
            },
            container: container.to_string(),
        }
    }

    /// The subject of an image read from `reference` (as given) and chosen by `name` (its tag
    /// or `ref.name`, when it has one).
    pub(crate) fn image(reference: &str, name: Option<&str>, platform: &str) -> Subject {
        Subject::Image {
            image: repository(reference, name),
            platform: platform.to_string(),
        }
    }

    /// What the fingerprint hashes of the subject; each part ends with a NUL, which no part
    /// holds where it matters (a manifest's name cannot).
    fn key(&self) -> String {
        match self {
            Subject::Container { workload, container } => format!(
                "k8s\0{}\0{}\0{}\0{container}\0",
                workload.namespace, workload.kind, workload.name
            ),
            Subject::Image { image, platform } => format!("image\0{image}\0{platform}\0"),
        }
    }

    /// `Deployment shop/api, container app` or `acme/api (linux/amd64)`, for people.
    pub(crate) fn describe(&self) -> String {
        match self {
            Subject::Container { workload, container } => format!(
                "{} {}/{}, container {container}",
                workload.kind, workload.namespace, workload.name
            ),
            Subject::Image { image, platform } => format!("{image} ({platform})"),
        }
    }
}

/// The repository of an image without registry host, tag or digest: `ghcr.io/acme/api:1.4`
/// and `registry.example:5000/acme/api@sha256:…` are both `acme/api`. The name the image was
/// chosen by when it is a whole reference, else the reference: a registry reference as it is, a
/// file or folder by its last path element (`oci-archive:out/api.tar` is `api`).
pub(crate) fn repository(reference: &str, name: Option<&str>) -> String {
    if let Some(n) = name.filter(|n| n.contains('/') || n.contains(':')) {
        return strip_reference(n);
    }
    const FILES: [&str; 4] = ["oci-dir:", "oci-archive:", "docker-archive:", "dir:"];
    const NAMED: [&str; 3] = ["registry:", "docker:", "podman:"];
    if let Some(rest) = NAMED.iter().find_map(|s| reference.strip_prefix(s)) {
        return strip_reference(rest);
    }
    let path = match FILES.iter().find_map(|s| reference.strip_prefix(s)) {
        Some(p) => p,
        // Without a prefix: a path that exists, else a registry reference (as memlint reads it).
        None if Path::new(reference).exists() => reference,
        None => return strip_reference(reference),
    };
    let last = path.trim_end_matches('/').rsplit('/').next().unwrap_or(path);
    // `demo:latest` (a name chosen in the layout) → `demo`; `api.tar.gz` → `api`.
    let last = last.split(':').next().unwrap_or(last);
    let mut stem = last;
    for ext in [".tar.gz", ".tar.zst", ".tgz", ".tar", ".oci"] {
        if let Some(s) = stem.strip_suffix(ext) {
            stem = s;
            break;
        }
    }
    if stem.is_empty() {
        last.to_string()
    } else {
        stem.to_string()
    }
}

/// `registry.example:5000/acme/api:1@sha256:…` → `acme/api`; `nginx` → `library/nginx`, as a
/// registry reads it.
fn strip_reference(r: &str) -> String {
    let r = r.split('@').next().unwrap_or(r);
    let (path, last) = match r.rsplit_once('/') {
        Some((p, l)) => (Some(p), l),
        None => (None, r),
    };
    let last = last.split(':').next().unwrap_or(last);
    let mut parts: Vec<&str> = path.map(|p| p.split('/').collect()).unwrap_or_default();
    // A first element with a dot or a port, or `localhost`, is a registry host (docker's rule).
    if parts
        .first()
        .is_some_and(|h| h.contains('.') || h.contains(':') || *h == "localhost")
    {
        parts.remove(0);
    }
    if parts.is_empty() {
        parts.push("library");
    }
    parts.push(last);
    parts.join("/")
}

/// The fingerprint of a finding of `rule` on `subject` naming `paths` (sorted, each once);
/// `occurrence`: its place among the findings of the same subject that share the rest (two
/// relative `LD_PRELOAD` entries name no path), 0 for the first; `rest`: the finding that
/// counts a rule's findings past the report's cap. 32 hex digits of a SHA-256.
pub(crate) fn fingerprint(
    rule: &str,
    subject: &Subject,
    paths: &[&str],
    rest: bool,
    occurrence: usize,
) -> String {
    let mut key = format!("memlintFinding/v2\0{rule}\0{}{}", subject.key(), paths.len());
    for p in paths {
        key.push('\0');
        key.push_str(p);
    }
    if rest {
        key.push_str("\0rest");
    }
    if occurrence > 0 {
        key.push_str(&format!("\0#{occurrence}"));
    }
    Digest::of(key.as_bytes()).hex()[..32].to_string()
}

/// The image paths of a finding as its fingerprint names them: sorted, each once.
fn typed_paths(f: &Finding) -> Vec<&str> {
    let mut paths: Vec<&str> = f.paths().collect();
    paths.sort_unstable();
    paths.dedup();
    paths
}

/// Gives each finding of one subject its fingerprint, in their order (the rules' order).
pub(crate) fn assign(findings: &mut [Finding], subject: &Subject) {
    let mut seen: HashMap<(&'static str, Vec<String>, bool), usize> = HashMap::new();
    for f in findings {
        let paths = typed_paths(f);
        let rest = f.omitted > 0;
        let key = (f.rule, paths.iter().map(|p| p.to_string()).collect(), rest);
        let n = seen.entry(key).or_insert(0);
        f.fingerprint = fingerprint(f.rule, subject, &paths, rest, *n);
        *n += 1;
    }
}

/// One accepted finding. (Unknown keys are let be: serde cannot refuse them beside the
/// flattened subject.)
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct Entry {
    pub(crate) rule: String,
    pub(crate) severity: Severity,
    #[serde(flatten)]
    pub(crate) subject: Subject,
    /// The image paths the finding names, sorted.
    pub(crate) paths: Vec<String>,
    pub(crate) fingerprint: String,
    /// The day memlint first wrote it into a baseline; kept when the baseline is written again.
    /// `YYYY-MM-DD`.
    #[serde(with = "date_text")]
    #[schemars(with = "String")]
    pub(crate) first_seen: Date,
}

impl Entry {
    /// The entry of a finding seen today.
    pub(crate) fn of(f: &Finding, subject: &Subject, today: Date) -> Entry {
        Entry {
            rule: f.rule.to_string(),
            severity: f.severity,
            subject: subject.clone(),
            paths: typed_paths(f).into_iter().map(str::to_string).collect(),
            fingerprint: f.fingerprint.clone(),
            first_seen: today,
        }
    }
}

/// A date as `2026-12-03`.
mod date_text {
    use jiff::civil::Date;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(d: &Date, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(d)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Date, D::Error> {
        let text = String::deserialize(d)?;
        text.parse::<Date>().map_err(|e| {
            serde::de::Error::custom(format!(
                "`{}` is not a date (YYYY-MM-DD): {e}",
                crate::untrusted::line(&text)
            ))
        })
    }
}

/// A baseline file as read.
#[derive(Debug, Default)]
pub(crate) struct Baseline {
    /// Where it was read from, as given.
    pub(crate) path: String,
    pub(crate) entries: Vec<Entry>,
    by_fingerprint: HashMap<String, usize>,
}

/// The file's layout.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    memlint_baseline: u32,
    entries: Vec<Entry>,
}

const WRITE_HELP: &str = "write it with `memlint lint … --write-baseline FILE` (a JSON file memlint writes; edit it only to delete entries)";

impl Baseline {
    /// Reads and checks a baseline file: exit code 2 for a missing, oversized or malformed one.
    pub(crate) fn load(path: &Path) -> Result<Baseline, Error> {
        let shown = path.display().to_string();
        let text = crate::user_file::read_to_string(path, MAX_BASELINE_BYTES).map_err(|e| {
            let reason = e.reason();
            let (src, span) = SourceWindow::around(shown.clone(), "", None);
            Error::Baseline(Box::new(BaselineError {
                message: format!("cannot read the baseline {shown}: {reason}"),
                help: format!("{}; {WRITE_HELP}", e.help()),
                src,
                span,
            }))
        })?;
        Baseline::parse(&text, &shown).map_err(Error::Baseline)
    }

    /// A baseline from its text; `path` names it in diagnostics.
    pub(crate) fn parse(text: &str, path: &str) -> Result<Baseline, Box<BaselineError>> {
        let at = |line: usize, column: usize, message: String, help: &str| {
            let start: usize = text
                .split_inclusive('\n')
                .take(line.saturating_sub(1))
                .map(str::len)
                .sum();
            let rest = &text[start.min(text.len())..];
            let len = rest.find('\n').unwrap_or(rest.len());
            let col = rest[..len]
                .char_indices()
                .nth(column.saturating_sub(1))
                .map_or(len, |(b, _)| b);
            let span = (line > 0).then(|| start + col..start + len);
            let (src, span) = SourceWindow::around(path.to_string(), text, span);
            Box::new(BaselineError {
                message,
                help: help.to_string(),
                src,
                span,
            })
        };
        let file: File = serde_json::from_str(text).map_err(|e| {
            at(
                e.line(),
                e.column(),
                format!(
                    "the baseline {} is not valid (line {}, column {}): {}",
                    crate::untrusted::line(path),
                    e.line(),
                    e.column(),
                    crate::untrusted::line(&e.to_string())
                ),
                WRITE_HELP,
            )
        })?;
        if file.memlint_baseline != FORMAT_VERSION {
            return Err(at(
                0,
                0,
                format!(
                    "the baseline {} has layout version {}; this memlint reads version {FORMAT_VERSION}",
                    crate::untrusted::line(path),
                    file.memlint_baseline
                ),
                "write it again with this memlint (`--write-baseline FILE`), or use the memlint that wrote it",
            ));
        }
        let mut by_fingerprint = HashMap::with_capacity(file.entries.len());
        for (i, e) in file.entries.iter().enumerate() {
            let well_formed = e.fingerprint.len() == 32
                && e.fingerprint
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
            if !well_formed {
                let needle = format!("\"{}\"", e.fingerprint);
                let line = text
                    .find(&needle)
                    .map(|o| text[..o].matches('\n').count() + 1)
                    .unwrap_or(0);
                return Err(at(
                    line,
                    1,
                    format!(
                        "entry {} of the baseline {} has the fingerprint `{}`: a fingerprint is 32 lower-case hex digits",
                        i + 1,
                        crate::untrusted::line(path),
                        crate::untrusted::line(&e.fingerprint.chars().take(80).collect::<String>())
                    ),
                    WRITE_HELP,
                ));
            }
            by_fingerprint.entry(e.fingerprint.clone()).or_insert(i);
        }
        Ok(Baseline {
            path: path.to_string(),
            entries: file.entries,
            by_fingerprint,
        })
    }

    /// The entry of a fingerprint, when the baseline holds it.
    pub(crate) fn get(&self, fingerprint: &str) -> Option<&Entry> {
        self.by_fingerprint
            .get(fingerprint)
            .and_then(|i| self.entries.get(*i))
    }

    /// The entries that no longer occur: their subject was linted in this run (`linted`), their
    /// rule ran (`rules_run`), and no finding of the run has their fingerprint (`seen`,
    /// findings an ignore hides included). Entries of a subject this run did not lint (another
    /// shard, an image not given or not read) are neither fixed nor dropped.
    pub(crate) fn fixed(
        &self,
        linted: &HashSet<Subject>,
        rules_run: &HashSet<&str>,
        seen: &HashSet<String>,
    ) -> Vec<&Entry> {
        self.entries
            .iter()
            .filter(|e| linted.contains(&e.subject))
            .filter(|e| rules_run.contains(e.rule.as_str()))
            .filter(|e| !seen.contains(&e.fingerprint))
            .collect()
    }
}

/// Writes a baseline: `current` (each finding not hidden by an ignore, with the day it was
/// first seen taken from `previous` when it holds the fingerprint), plus the entries of
/// `previous` that `keep` says to keep as they are. Sorted by subject, rule, paths and
/// fingerprint, each fingerprint once, so that a file in version control changes only where
/// the findings do.
pub(crate) fn render(
    current: Vec<Entry>,
    previous: Option<&Baseline>,
    keep: impl Fn(&Entry) -> bool,
) -> Vec<u8> {
    let mut entries: Vec<Entry> = Vec::with_capacity(current.len());
    let mut written: BTreeSet<String> = BTreeSet::new();
    for mut e in current {
        if let Some(old) = previous.and_then(|p| p.get(&e.fingerprint)) {
            e.first_seen = old.first_seen.min(e.first_seen);
        }
        if written.insert(e.fingerprint.clone()) {
            entries.push(e);
        }
    }
    for old in previous.into_iter().flat_map(|p| p.entries.iter()) {
        if keep(old) && written.insert(old.fingerprint.clone()) {
            entries.push(old.clone());
        }
    }
    entries.sort_by(|a, b| {
        (&a.subject, &a.rule, &a.paths, &a.fingerprint).cmp(&(&b.subject, &b.rule, &b.paths, &b.fingerprint))
    });
    let mut out = Vec::new();
    let file = File {
        memlint_baseline: FORMAT_VERSION,
        entries,
    };
    // Writing JSON to memory fails only on a map with non-string keys, which File has none of.
    let _ = crate::untrusted::write_json(&mut out, &file);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::{Anchor, Evidence};

    fn finding(rule: &'static str, message: &str, paths: &[&str]) -> Finding {
        let mut f = Finding::new(rule, Severity::Error, message, Anchor::From);
        for p in paths {
            f.evidence
                .push(Evidence::naming(format!("{message} at {p}"), [*p]));
        }
        f
    }

    fn deployment(name: &str, container: &str) -> Subject {
        Subject::container("Deployment", Some("shop"), name, container)
    }

    #[test]
    fn the_fingerprint_ignores_words_and_follows_rule_paths_and_subject() {
        let s = deployment("api", "app");
        let print = |f: Finding, s: &Subject| {
            let mut all = [f];
            assign(&mut all, s);
            all[0].fingerprint.clone()
        };
        let a = print(
            finding(
                "ld-preload-missing",
                "LD_PRELOAD names /usr/lib/libjemalloc.so.2, which is missing",
                &["/usr/lib/libjemalloc.so.2"],
            ),
            &s,
        );
        assert_eq!(a.len(), 32);
        // Another message and evidence wording, the same paths: the same finding.
        let reworded = print(
            finding(
                "ld-preload-missing",
                "the preload /usr/lib/libjemalloc.so.2 resolves to nothing",
                &["/usr/lib/libjemalloc.so.2"],
            ),
            &s,
        );
        assert_eq!(a, reworded);
        // Placement and severity do not count either.
        let mut placed =
            finding("ld-preload-missing", "x", &["/usr/lib/libjemalloc.so.2"]).severity(Severity::Note);
        placed.location = Some(crate::finding::Location {
            path: "deploy/moved.yaml".to_string(),
            line: 99,
            end_line: 99,
            instruction: None,
        });
        assert_eq!(a, print(placed, &s));
        // Another path, rule, workload or container: another finding.
        let others = [
            print(
                finding("ld-preload-missing", "x", &["/usr/lib64/libjemalloc.so.2"]),
                &s,
            ),
            print(
                finding("ld-preload-incompatible", "x", &["/usr/lib/libjemalloc.so.2"]),
                &s,
            ),
            print(
                finding("ld-preload-missing", "x", &["/usr/lib/libjemalloc.so.2"]),
                &deployment("web", "app"),
            ),
            print(
                finding("ld-preload-missing", "x", &["/usr/lib/libjemalloc.so.2"]),
                &deployment("api", "sidecar"),
            ),
            print(
                finding("ld-preload-missing", "x", &["/usr/lib/libjemalloc.so.2"]),
                &Subject::container("StatefulSet", Some("shop"), "api", "app"),
            ),
        ];
        for o in &others {
            assert_ne!(&a, o);
        }
        let unique: BTreeSet<&String> = others.iter().collect();
        assert_eq!(unique.len(), others.len());
    }

    #[test]
    fn findings_that_name_no_path_are_told_apart_by_their_place() {
        let s = deployment("api", "app");
        let mut all = [
            finding("ld-preload-missing", "libone.so", &[]),
            finding("ld-preload-missing", "libtwo.so", &[]),
            finding("go-memlimit-missing", "g", &[]),
        ];
        assign(&mut all, &s);
        let prints: BTreeSet<&str> = all.iter().map(|f| f.fingerprint.as_str()).collect();
        assert_eq!(prints.len(), 3);
        let mut reworded = [
            finding("ld-preload-missing", "libuno.so", &[]),
            finding("ld-preload-missing", "libdos.so", &[]),
            finding("go-memlimit-missing", "reworded", &[]),
        ];
        assign(&mut reworded, &s);
        assert!(all
            .iter()
            .zip(&reworded)
            .all(|(a, b)| a.fingerprint == b.fingerprint));
    }

    #[test]
    fn an_image_is_its_repository_without_registry_tag_or_digest() {
        for (reference, name, want) in [
            ("registry:ghcr.io/acme/api:1.4", None, "acme/api"),
            ("registry.example:5000/acme/api@sha256:00", None, "acme/api"),
            ("oci-archive:out/api.tar", Some("ghcr.io/acme/api:2"), "acme/api"),
            ("oci-archive:out/api-build.tar", None, "api-build"),
            ("oci-dir:/x/images/demo:latest", Some("latest"), "demo"),
            ("docker:nginx", None, "library/nginx"),
            ("localhost/app:1", Some("localhost/app:1"), "library/app"),
        ] {
            assert_eq!(repository(reference, name), want, "{reference}");
        }
        assert_eq!(
            Subject::image("registry:docker.io/acme/api:1", None, "linux/amd64"),
            Subject::image("registry:ghcr.io/acme/api:2@sha256:11", None, "linux/amd64")
        );
    }

    #[test]
    fn a_baseline_keeps_first_seen_dates_and_reads_back_sorted() {
        let s = deployment("api", "app");
        let day = |d: &str| d.parse::<Date>().unwrap();
        let mut fs = [
            finding("ld-preload-missing", "b", &["/b"]),
            finding("ld-preload-missing", "a", &["/a"]),
        ];
        assign(&mut fs, &s);
        let first = render(
            fs.iter().map(|f| Entry::of(f, &s, day("2026-01-01"))).collect(),
            None,
            |_| false,
        );
        let b = Baseline::parse(std::str::from_utf8(&first).unwrap(), "b.json").unwrap();
        assert_eq!(b.entries.len(), 2);
        assert_eq!(b.entries[0].paths, ["/a"], "sorted by paths within a rule");
        // Written again later: the first day stays; a new finding gets today.
        let mut later = [fs[0].clone(), finding("node-semi-space", "n", &[])];
        assign(&mut later, &s);
        let again = render(
            later
                .iter()
                .map(|f| Entry::of(f, &s, day("2026-06-01")))
                .collect(),
            Some(&b),
            |_| false,
        );
        let b2 = Baseline::parse(std::str::from_utf8(&again).unwrap(), "b.json").unwrap();
        let days: Vec<(String, String)> = b2
            .entries
            .iter()
            .map(|e| (e.rule.clone(), e.first_seen.to_string()))
            .collect();
        assert_eq!(
            days,
            [
                ("ld-preload-missing".to_string(), "2026-01-01".to_string()),
                ("node-semi-space".to_string(), "2026-06-01".to_string()),
            ]
        );
    }

    #[test]
    fn malformed_baselines_point_at_their_line() {
        let e = Baseline::parse(
            "{\n  \"memlint_baseline\": 1,\n  \"entries\": [ 3 ]\n}\n",
            "b.json",
        )
        .unwrap_err();
        assert!(e.message.contains("line 3"), "{}", e.message);
        assert!(e.span.is_some());
        let e = Baseline::parse("{\"memlint_baseline\": 2, \"entries\": []}", "b.json").unwrap_err();
        assert!(e.message.contains("layout version 2"), "{}", e.message);
        let e = Baseline::parse(
            "{\"memlint_baseline\": 1, \"entries\": [{\"rule\": \"x\", \"severity\": \"note\", \"image\": \"a\", \"platform\": \"linux/amd64\", \"paths\": [], \"fingerprint\": \"\\u001b[2J\", \"first_seen\": \"2026-01-01\"}]}",
            "b.json",
        )
        .unwrap_err();
        assert!(!e.message.contains('\x1b'), "escaped: {}", e.message);
    }
}
