//! The rules: one file per rule, each a pure function of the facts. The doc of each rule is
//! `rules/<id>.md`, compiled in: `memlint explain`, SARIF help and the docs all read it.
//!
//! A rule's file holds its whole contract: id, severity, title, doc, tags, the check, and where
//! its findings belong in a Dockerfile ([`Anchor`]). Adding a rule is that file, its doc, one
//! line in the [`registry!`] below, and a row in the fixture table of `tests/rules/rules.rs`.

pub(crate) mod fixes;
mod java;
mod k8s;
mod preload;

use crate::facts::Facts;
use crate::finding::{Anchor, Finding, Severity};
use crate::version::Version;

/// What a rule concluded about one image.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) findings: Vec<Finding>,
    /// Why the rule could not decide, when it could not: it stays silent and `-v` says why.
    pub(crate) undecided: Option<String>,
}

impl Outcome {
    pub(crate) fn none() -> Outcome {
        Outcome::default()
    }

    pub(crate) fn undecided(why: impl Into<String>) -> Outcome {
        Outcome {
            findings: Vec::new(),
            undecided: Some(why.into()),
        }
    }

    pub(crate) fn one(f: Finding) -> Outcome {
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
    pub(crate) fn sole_finding(&self) -> &Finding {
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
pub(crate) struct Rule {
    pub(crate) id: &'static str,
    pub(crate) severity: Severity,
    pub(crate) title: &'static str,
    pub(crate) doc: &'static str,
    pub(crate) tags: &'static [&'static str],
    pub(crate) check: fn(&Facts) -> Outcome,
    /// Where its findings belong in a Dockerfile, unless a finding says otherwise.
    pub(crate) anchor: Anchor,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rule({})", self.id)
    }
}

impl Rule {
    /// A finding of this rule at its default severity.
    pub(crate) fn finding(&self, message: impl Into<String>) -> Finding {
        Finding::new(self.id, self.severity, message, self.anchor)
    }

    /// When the rule arrived and when its firing conditions changed, from its doc's third
    /// line. `docs_follow_the_layout` checks that every doc has one; a doc without it would be
    /// dated this release, so a run pinned to an earlier one leaves the rule out rather than
    /// turning a pinned pipeline red.
    pub(crate) fn history(&self) -> History {
        history_of(self.doc).unwrap_or_else(|| History {
            added: this_release(),
            changed: Vec::new(),
        })
    }
}

/// A rule's versions: the memlint release that added it and each one that changed when it
/// fires, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct History {
    pub(crate) added: Version,
    pub(crate) changed: Vec<Version>,
}

impl History {
    /// Whether the rule was added or changed after `version`.
    pub(crate) fn moved_since(&self, version: &Version) -> bool {
        self.added > *version || self.changed.iter().any(|c| c > version)
    }
}

/// The history line of a rule's doc (its third line): `Added in 0.1.0.` or
/// `Added in 0.1.0; changed in 0.2.0, 0.3.1.`, versions as [`release`] reads them, each
/// change after the one before it.
pub(crate) fn history_of(doc: &str) -> Option<History> {
    let line = doc.lines().nth(2)?;
    let versions = line.strip_prefix("Added in ")?.strip_suffix('.')?;
    let (added, changed) = match versions.split_once("; changed in ") {
        Some((added, changed)) => (added, Some(changed)),
        None => (versions, None),
    };
    let added = release(added)?;
    let changed = match changed {
        None => Vec::new(),
        Some(list) => list.split(", ").map(release).collect::<Option<Vec<_>>>()?,
    };
    let mut previous = &added;
    for c in &changed {
        if c <= previous {
            return None;
        }
        previous = c;
    }
    Some(History { added, changed })
}

/// A memlint release as `--rules-version`, `rules-version` and the rule docs write it:
/// `MAJOR.MINOR.PATCH`, three numbers and nothing else.
pub(crate) fn release(text: &str) -> Option<Version> {
    let parts: Vec<&str> = text.split('.').collect();
    if parts.len() != 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let n = |p: &str| p.parse::<u64>().ok();
    Some(Version::new(n(parts[0])?, n(parts[1])?, n(parts[2])?))
}

/// This binary's release (Cargo.toml's version, without a prerelease tag).
pub(crate) fn this_release() -> Version {
    // Cargo only builds a crate whose version is semver, so the parse does not fail; were it
    // to, 0.0.0 refuses every pin rather than running rules a pin left out.
    Version::parse(env!("CARGO_PKG_VERSION"))
        .map(|v| v.core())
        .unwrap_or_else(|| Version::new(0, 0, 0))
}

/// Reads a pinned rules version (`--rules-version`, `rules-version`, `rules --since`): a
/// release no newer than this binary. The error says what is wrong with it, for the caller's
/// diagnostic.
pub(crate) fn pinned_release(text: &str) -> Result<Version, String> {
    let Some(version) = release(text) else {
        return Err(format!(
            "`{}` is not a memlint version: write MAJOR.MINOR.PATCH, e.g. {}",
            crate::untrusted::line(text),
            this_release()
        ));
    };
    let this = this_release();
    if version > this {
        return Err(format!(
            "{version} is newer than this memlint ({this}): it does not know the rules of {version}; upgrade memlint or pin {this} or earlier"
        ));
    }
    Ok(version)
}

/// The rules a run pinned to `pin` runs: those added in that release or before (a rule whose
/// firing conditions changed later still runs, as it is now). Every rule without a pin.
pub(crate) fn pinned<'r>(rules: &[&'r Rule], pin: Option<&Version>) -> Vec<&'r Rule> {
    rules
        .iter()
        .copied()
        .filter(|r| pin.is_none_or(|v| r.history().added <= *v))
        .collect()
}

/// The rules added, or changed in when they fire, after `version` (`memlint rules --since`).
pub(crate) fn since<'r>(rules: &[&'r Rule], version: &Version) -> Vec<&'r Rule> {
    rules
        .iter()
        .copied()
        .filter(|r| r.history().moved_since(version))
        .collect()
}

/// Declares each rule's module (the file `src/rules/<module>.rs`, which defines `RULE`) and
/// lists it in [`ALL`]: one line per rule.
macro_rules! registry {
    ($($module:ident),* $(,)?) => {
        $(mod $module;)*

        /// Every rule, sorted by id.
        pub(crate) const ALL: &[&Rule] = &[$(&$module::RULE),*];
    };
}

registry! {
    dev_shm_too_small,
    dotnet_gc_env_decimal,
    dotnet_glibc_allocator,
    dotnet_server_gc_container,
    emptydir_memory_unbounded,
    es_memory_lock_k8s,
    go_cgo_glibc_allocator,
    go_memlimit_missing,
    gomemlimit_malformed,
    heap_auto_without_limit,
    heap_exceeds_limit,
    jemalloc_not_preloaded,
    jvm_direct_memory_unbounded,
    jvm_flag_incompatible,
    jvm_glibc_arenas,
    jvm_not_container_aware,
    launcher_heap_vs_limit,
    ld_preload_incompatible,
    ld_preload_missing,
    malloc_conf_ineffective,
    next_cache_exceeds_ephemeral,
    next_image_cache_ttl,
    next_image_disk_cache,
    node_cgroup_v2_unaware,
    node_semi_space,
    npgsql_gssapi_missing,
    php_workers_exceed_limit,
    postgres_huge_pages,
    python_glibc_allocator,
    redis_maxmemory_unset,
    ruby_glibc_allocator,
    sharp_glibc_allocator,
    sharp_platform_mismatch,
    worker_count_host_cpus,
}

pub(crate) fn find(id: &str) -> Option<&'static Rule> {
    ALL.iter().copied().find(|r| r.id == id)
}

/// The known id closest to `id`, for "did you mean" (`explain`, `--ignore`, rule ids in
/// `.memlint.toml`): the first id that starts with it, else the nearest by Levenshtein distance
/// when that is close enough to be a typo.
pub(crate) fn nearest(id: &str) -> Option<&'static str> {
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
pub(crate) struct RuleResult {
    pub(crate) rule: &'static Rule,
    pub(crate) outcome: Outcome,
}

/// Runs every rule, or with a pin (`--rules-version`) the rules added in it or before.
pub(crate) fn run(facts: &Facts, pin: Option<&Version>) -> Vec<RuleResult> {
    pinned(ALL, pin)
        .into_iter()
        .map(|rule| RuleResult {
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
            let third = r.doc.lines().nth(2).unwrap_or("");
            let history = history_of(r.doc).unwrap_or_else(|| {
                panic!(
                    "{}: third line must be its history, `Added in X.Y.Z.` or `Added in X.Y.Z; changed in A.B.C, D.E.F.`, got {third:?}",
                    r.id
                )
            });
            assert!(
                history.added <= this_release() && history.changed.iter().all(|c| *c <= this_release()),
                "{}: its history names a release after this one ({})",
                r.id,
                this_release()
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

    /// A rule dated as the doc says, checking nothing: the registry's functions over a made-up
    /// rule list, with one rule added after today's release.
    fn dated(id: &'static str, doc: &'static str) -> Rule {
        Rule {
            id,
            severity: Severity::Note,
            title: "a made-up rule",
            doc,
            tags: &[],
            check: |_| Outcome::none(),
            anchor: Anchor::From,
        }
    }

    #[test]
    fn a_pin_runs_the_rules_added_by_then() {
        let old = dated(
            "old-rule",
            "# old-rule\nDefault severity: note. x.\nAdded in 0.1.0.\n",
        );
        let changed = dated(
            "changed-rule",
            "# changed-rule\nDefault severity: note. x.\nAdded in 0.1.0; changed in 0.1.5, 0.2.0.\n",
        );
        let new = dated(
            "new-rule",
            "# new-rule\nDefault severity: note. x.\nAdded in 0.2.0.\n",
        );
        let list = [&old, &changed, &new];
        let ids = |rules: Vec<&Rule>| rules.iter().map(|r| r.id).collect::<Vec<_>>();
        let v = |s: &str| release(s).unwrap();

        // One release back silences the rule added after it and keeps those from before,
        // changed or not.
        assert_eq!(
            ids(pinned(&list, Some(&v("0.1.0")))),
            ["old-rule", "changed-rule"]
        );
        assert_eq!(
            ids(pinned(&list, Some(&v("0.1.9")))),
            ["old-rule", "changed-rule"]
        );
        assert_eq!(
            ids(pinned(&list, Some(&v("0.2.0")))),
            ["old-rule", "changed-rule", "new-rule"]
        );
        assert_eq!(ids(pinned(&list, None)), ["old-rule", "changed-rule", "new-rule"]);

        // What moving a pin would bring: rules added or changed after it.
        assert_eq!(ids(since(&list, &v("0.1.0"))), ["changed-rule", "new-rule"]);
        assert_eq!(ids(since(&list, &v("0.1.5"))), ["changed-rule", "new-rule"]);
        assert_eq!(ids(since(&list, &v("0.2.0"))), Vec::<&str>::new());
        assert_eq!(
            ids(since(&list, &v("0.0.9"))),
            ["old-rule", "changed-rule", "new-rule"]
        );
    }

    #[test]
    fn histories_read_from_the_doc() {
        let h = |line: &str| history_of(&format!("# r\nDefault severity: note. x.\n{line}\n"));
        assert_eq!(
            h("Added in 0.1.0; changed in 0.2.0, 0.10.1."),
            Some(History {
                added: Version::new(0, 1, 0),
                changed: vec![Version::new(0, 2, 0), Version::new(0, 10, 1)],
            })
        );
        assert_eq!(h("Added in 1.2.3.").map(|h| h.added), Some(Version::new(1, 2, 3)));
        for bad in [
            "Added in 0.1.0",
            "Added in 0.1.",
            "Added in v0.1.0.",
            "Added in 0.1.0; changed in .",
            "Added in 0.2.0; changed in 0.1.0.",
            "Added in 0.1.0; changed in 0.3.0, 0.2.0.",
            "",
        ] {
            assert_eq!(h(bad), None, "{bad}");
        }
        // A doc with no history line counts as this release's: a pin before it leaves it out.
        let undated = dated(
            "undated",
            "# undated\nDefault severity: note. x.\n\n## What it does\n",
        );
        assert_eq!(undated.history().added, this_release());
    }

    #[test]
    fn pins_are_releases_up_to_this_one() {
        assert_eq!(this_release().to_string(), env!("CARGO_PKG_VERSION"));
        assert_eq!(pinned_release("0.1.0"), Ok(Version::new(0, 1, 0)));
        assert_eq!(pinned_release(&this_release().to_string()), Ok(this_release()));
        for malformed in [
            "",
            "0.1",
            "0.1.0.0",
            "v0.1.0",
            "0.1.0-rc.1",
            " 0.1.0",
            "0.x.0",
            "latest",
        ] {
            let e = pinned_release(malformed).unwrap_err();
            assert!(
                e.contains("is not a memlint version: write MAJOR.MINOR.PATCH"),
                "{malformed}: {e}"
            );
        }
        let next = Version::new(this_release().major, this_release().minor + 1, 0);
        let e = pinned_release(&next.to_string()).unwrap_err();
        assert!(e.contains("newer than this memlint"), "{e}");
        // Control characters in the given text are not echoed raw.
        assert!(!pinned_release("0.1\u{1b}[31m").unwrap_err().contains('\u{1b}'));
    }

    /// The release notes name each rule under the release that added it (`### Added`) and
    /// under each one that changed when it fires (`### Changed`).
    #[test]
    fn changelog_lists_each_rule_under_its_releases() {
        const CHANGELOG: &str = include_str!("../../CHANGELOG.md");
        // The text of `### {kind}` in `## [{version}]`, up to the next heading of either level.
        let part = |version: &Version, kind: &str| -> String {
            let release = format!("## [{version}]");
            let mut in_release = false;
            let mut in_part = false;
            let mut text = String::new();
            for line in CHANGELOG.lines() {
                if line.starts_with("## ") {
                    in_release = line == release || line.starts_with(&format!("{release} "));
                    in_part = false;
                } else if line.starts_with("### ") {
                    in_part = in_release && line == format!("### {kind}");
                } else if in_part {
                    text.push_str(line);
                    text.push('\n');
                }
            }
            text
        };
        for r in ALL {
            let history = r.history();
            let id = format!("`{}`", r.id);
            assert!(
                part(&history.added, "Added").contains(&id),
                "CHANGELOG.md: {} is not under ## [{}] / ### Added",
                r.id,
                history.added
            );
            for changed in &history.changed {
                assert!(
                    part(changed, "Changed").contains(&id),
                    "CHANGELOG.md: {} is not under ## [{changed}] / ### Changed",
                    r.id
                );
            }
        }
    }

    #[test]
    fn nearest_ids() {
        assert_eq!(nearest("ld-preload-mising"), Some("ld-preload-missing"));
        assert_eq!(nearest("sharp-glibc"), Some("sharp-glibc-allocator"));
        assert_eq!(nearest("zzzzzzzzzzzzzzzzzzzzzzzzzzzzz"), None);
    }
}
