//! The rules: one file per rule, each a pure function of the facts. The doc of each rule is
//! `rules/<id>.md`, compiled in: `memlint explain`, SARIF help and the docs all read it.
//!
//! A rule's file holds its whole contract: id, severity, title, doc, tags, the check, and where
//! its findings belong in a Dockerfile ([`Anchor`]). Adding a rule is that file, its doc, one
//! line in the [`registry!`] below, and a row in the fixture table of `tests/rules.rs`.

pub mod fixes;
mod java;
mod k8s;
mod preload;

use crate::facts::Facts;
use crate::finding::{Anchor, Finding, Severity};

/// What a rule concluded about one image.
#[derive(Debug, Default)]
pub struct Outcome {
    pub findings: Vec<Finding>,
    /// Why the rule could not decide, when it could not: it stays silent and `-v` says why.
    pub undecided: Option<String>,
}

impl Outcome {
    pub fn none() -> Outcome {
        Outcome::default()
    }

    pub fn undecided(why: impl Into<String>) -> Outcome {
        Outcome {
            findings: Vec::new(),
            undecided: Some(why.into()),
        }
    }

    pub fn one(f: Finding) -> Outcome {
        Outcome {
            findings: vec![f],
            undecided: None,
        }
    }
}

#[cfg(test)]
impl Outcome {
    /// The one finding of a decided outcome: a test that expects a rule to fire once asserts
    /// that it decided and found exactly one thing.
    pub fn sole_finding(&self) -> &Finding {
        assert!(self.undecided.is_none(), "{self:?}");
        assert_eq!(self.findings.len(), 1, "{self:?}");
        &self.findings[0]
    }
}

impl From<Vec<Finding>> for Outcome {
    fn from(findings: Vec<Finding>) -> Self {
        Outcome {
            findings,
            undecided: None,
        }
    }
}

/// A rule: its contract with users (id, default severity, title) and its check.
pub struct Rule {
    pub id: &'static str,
    pub severity: Severity,
    pub title: &'static str,
    pub doc: &'static str,
    pub tags: &'static [&'static str],
    pub check: fn(&Facts) -> Outcome,
    /// Where its findings belong in a Dockerfile, unless a finding says otherwise.
    pub anchor: Anchor,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rule({})", self.id)
    }
}

impl Rule {
    /// A finding of this rule at its default severity.
    pub fn finding(&self, message: impl Into<String>) -> Finding {
        Finding::new(self.id, self.severity, message, self.anchor)
    }
}

/// Declares each rule's module (the file `src/rules/<module>.rs`, which defines `RULE`) and
/// lists it in [`ALL`]: one line per rule.
macro_rules! registry {
    ($($module:ident),* $(,)?) => {
        $(mod $module;)*

        /// Every rule, sorted by id.
        pub const ALL: &[&Rule] = &[$(&$module::RULE),*];
    };
}

registry! {
    dotnet_gc_env_decimal,
    dotnet_glibc_allocator,
    dotnet_server_gc_container,
    go_cgo_glibc_allocator,
    go_memlimit_missing,
    gomemlimit_malformed,
    heap_exceeds_limit,
    jemalloc_not_preloaded,
    jvm_flag_incompatible,
    jvm_glibc_arenas,
    jvm_not_container_aware,
    ld_preload_incompatible,
    ld_preload_missing,
    malloc_conf_ineffective,
    next_cache_exceeds_ephemeral,
    next_image_cache_ttl,
    next_image_disk_cache,
    node_cgroup_v2_unaware,
    node_semi_space,
    npgsql_gssapi_missing,
    python_glibc_allocator,
    ruby_glibc_allocator,
    sharp_glibc_allocator,
    sharp_platform_mismatch,
    worker_count_host_cpus,
}

pub fn find(id: &str) -> Option<&'static Rule> {
    ALL.iter().copied().find(|r| r.id == id)
}

/// The known id closest to `id`, for "did you mean" (`explain`, `--ignore`, rule ids in
/// `.memlint.toml`): the first id that starts with it, else the nearest by Levenshtein distance
/// when that is close enough to be a typo.
pub fn nearest(id: &str) -> Option<&'static str> {
    if !id.is_empty() {
        if let Some(r) = ALL.iter().find(|r| r.id.starts_with(id)) {
            return Some(r.id);
        }
    }
    ALL.iter()
        .map(|r| (strsim::levenshtein(id, r.id), r.id))
        .min()
        .filter(|(d, _)| *d <= id.len().max(4) / 2 + 2)
        .map(|(_, r)| r)
}

/// A rule's outcome on one image.
pub struct RuleResult {
    pub rule: &'static Rule,
    pub outcome: Outcome,
}

/// Runs every rule.
pub fn run(facts: &Facts) -> Vec<RuleResult> {
    ALL.iter()
        .map(|&rule| RuleResult {
            rule,
            outcome: (rule.check)(facts),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_sorted_unique_kebab_case() {
        let ids: Vec<&str> = ALL.iter().map(|r| r.id).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(ids, sorted);
        for id in ids {
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'-' || b.is_ascii_digit()),
                "{id}"
            );
        }
    }

    #[test]
    fn docs_follow_the_layout() {
        for r in ALL {
            let first = r.doc.lines().next().unwrap_or("");
            assert_eq!(first, format!("# {}", r.id));
            let second = r.doc.lines().nth(1).unwrap_or("");
            assert!(
                second.starts_with(&format!("Default severity: {}.", r.severity)),
                "{}: second line must state the default severity, got {second:?}",
                r.id
            );
            // Each section once, as a heading line of its own, in the order every doc has.
            let headings: Vec<&str> = r.doc.lines().filter(|l| l.starts_with("## ")).collect();
            assert_eq!(
                headings,
                [
                    "## What it does",
                    "## Why it matters",
                    "## How to fix",
                    "## Example",
                    "## Known limits",
                    "## How to silence",
                    "## References",
                ],
                "{}: its sections, in order",
                r.id
            );
            // None is left empty.
            let mut bodies = r.doc.split("\n## ").skip(1);
            assert!(
                bodies.all(|b| b.lines().skip(1).any(|l| !l.trim().is_empty())),
                "{}: a section is empty",
                r.id
            );
        }
    }

    /// The README's rules table: one row per rule of the registry, with its default severity.
    #[test]
    fn readme_lists_every_rule_with_its_severity() {
        const README: &str = include_str!("../../README.md");
        let mut lines = README
            .lines()
            .skip_while(|l| l.trim() != "| rule | default | fires when |");
        assert!(lines.next().is_some(), "the README has no rules table");
        assert!(
            lines.next().is_some_and(|l| l.starts_with("|---")),
            "the rules table's header is followed by its separator"
        );
        let rows: Vec<(&str, &str)> = lines
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let id = cells.get(1).copied().unwrap_or("").trim_matches('`');
                (id, cells.get(2).copied().unwrap_or(""))
            })
            .collect();
        for (id, severity) in &rows {
            let rule = find(id).unwrap_or_else(|| panic!("the README lists `{id}`, which is no rule"));
            assert_eq!(
                *severity,
                rule.severity.to_string(),
                "the README's severity of {id}"
            );
        }
        for r in ALL {
            let n = rows.iter().filter(|(id, _)| *id == r.id).count();
            assert_eq!(n, 1, "the README lists {} {n} times", r.id);
        }
        assert_eq!(rows.len(), ALL.len());
    }

    #[test]
    fn nearest_ids() {
        assert_eq!(nearest("ld-preload-mising"), Some("ld-preload-missing"));
        assert_eq!(nearest("sharp-glibc"), Some("sharp-glibc-allocator"));
        assert_eq!(nearest("zzzzzzzzzzzzzzzzzzzzzzzzzzzzz"), None);
    }
}
