//! Ignores written on the workload: the `memlint/ignore` annotation (one `RULE: reason` or
//! `RULE@container: reason` a line) and `memlint/ignore-until` (the day they stop hiding
//! findings), on a workload's `metadata` or its pod template's. Read here, with the line of
//! each entry; the judge applies them as it applies the config file's `[[ignores]]`.

use jiff::civil::Date;

/// The annotation that lists a workload's ignores: a contract, as kube-score's `kube-score/ignore`.
pub(crate) const IGNORE: &str = "memlint/ignore";
/// The annotation that gives the day a workload's ignores expire after.
pub(crate) const IGNORE_UNTIL: &str = "memlint/ignore-until";

/// The most an annotation value may hold: Kubernetes refuses more than 256 KiB of annotations
/// on an object altogether, so a longer one is no manifest the API server would take.
pub(crate) const MAX_ANNOTATION_BYTES: usize = 256 << 10;

/// One entry of a `memlint/ignore` annotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WorkloadIgnore {
    pub(crate) rule: String,
    /// `RULE@container`: only that container of the workload; else every container.
    pub(crate) container: Option<String>,
    pub(crate) reason: String,
    /// The `memlint/ignore-until` beside it: the last day it hides findings.
    pub(crate) expires: Option<Date>,
    /// The manifest line the entry is written on.
    pub(crate) line: u32,
}

impl WorkloadIgnore {
    /// Whether it is about the container named `container` of its workload.
    pub(crate) fn applies_to(&self, container: &str) -> bool {
        self.container.as_deref().is_none_or(|c| c == container)
    }
}

/// A malformed entry: which line of the value (from 0), what is wrong, what to do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Malformed {
    pub(crate) index: usize,
    pub(crate) message: String,
    pub(crate) help: String,
}

/// An entry of a `memlint/ignore` value before it has a manifest line: the line of the value it
/// is on (from 0), the rule, the container, the reason.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) index: usize,
    pub(crate) rule: String,
    pub(crate) container: Option<String>,
    pub(crate) reason: String,
}

/// The entries of a `memlint/ignore` value: one `RULE: reason` or `RULE@container: reason` a
/// line; blank lines are skipped. A container left empty after `@` or an entry with no reason
/// is refused: an ignore whose reason the next reader cannot learn is worse than an error.
/// Whether the rule exists is the caller's to check (`commands::fleet`): this module reads
/// YAML and knows no rules.
pub(crate) fn parse_ignore(value: &str) -> Result<Vec<Entry>, Malformed> {
    let mut out = Vec::new();
    for (index, text) in value.lines().enumerate() {
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let fail = |message: String, help: String| Malformed { index, message, help };
        let (target, reason) = match text.split_once(':') {
            Some((t, r)) => (t.trim(), r.trim()),
            None => (text, ""),
        };
        let (rule, container) = match target.split_once('@') {
            Some((r, c)) => (r.trim(), Some(c.trim())),
            None => (target, None),
        };
        if rule.is_empty() {
            return Err(fail(
                "an entry names no rule".to_string(),
                "write one `RULE: reason` a line; `memlint rules` lists every rule".to_string(),
            ));
        }
        if container.is_some_and(str::is_empty) {
            return Err(fail(
                format!("the ignore of {rule} names no container after `@`"),
                format!("write `{rule}@CONTAINER: reason`, or `{rule}: reason` for every container of the workload"),
            ));
        }
        if reason.is_empty() {
            return Err(fail(
                format!("the ignore of {rule} has no reason"),
                format!("write `{target}: why it is fine here`, so that the next reader knows why"),
            ));
        }
        out.push(Entry {
            index,
            rule: rule.to_string(),
            container: container.map(str::to_string),
            reason: reason.to_string(),
        });
    }
    if out.is_empty() {
        return Err(Malformed {
            index: 0,
            message: format!("`{IGNORE}` lists no rule"),
            help: format!("write one `RULE: reason` a line, e.g. `{IGNORE}: \"redis-maxmemory-unset: the operator sizes the cache\"`"),
        });
    }
    Ok(out)
}

/// The day of a `memlint/ignore-until` value (`YYYY-MM-DD`).
pub(crate) fn parse_until(value: &str) -> Result<Date, String> {
    value.trim().parse::<Date>().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_several_rules_and_a_container() {
        let e = parse_ignore("go-memlimit-missing: the operator sets it").unwrap();
        assert_eq!(
            e,
            [Entry {
                index: 0,
                rule: "go-memlimit-missing".into(),
                container: None,
                reason: "the operator sets it".into()
            }]
        );
        let e = parse_ignore("\nld-preload-missing@app: arm64 only: for now\n\n  node-semi-space : tuned \n")
            .unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(
            (
                e[0].index,
                e[0].rule.as_str(),
                e[0].container.as_deref(),
                e[0].reason.as_str()
            ),
            (1, "ld-preload-missing", Some("app"), "arm64 only: for now")
        );
        assert_eq!(
            (
                e[1].index,
                e[1].rule.as_str(),
                e[1].container.as_deref(),
                e[1].reason.as_str()
            ),
            (3, "node-semi-space", None, "tuned")
        );
        let ignore = WorkloadIgnore {
            rule: "r".into(),
            container: Some("app".into()),
            reason: "x".into(),
            expires: None,
            line: 1,
        };
        assert!(ignore.applies_to("app") && !ignore.applies_to("sidecar"));
        let everywhere = WorkloadIgnore {
            container: None,
            ..ignore
        };
        assert!(everywhere.applies_to("sidecar"));
    }

    #[test]
    fn malformed_entries_say_which_line_and_what_to_do() {
        for (value, index, says, help) in [
            (
                "node-semi-space: ok\ngo-memlimit-missing",
                1,
                "the ignore of go-memlimit-missing has no reason",
                "go-memlimit-missing: why",
            ),
            (
                "go-memlimit-missing:   ",
                0,
                "has no reason",
                "why it is fine here",
            ),
            (
                "go-memlimit-missing@: x",
                0,
                "names no container after `@`",
                "go-memlimit-missing@CONTAINER",
            ),
            (": x", 0, "names no rule", "RULE: reason"),
            ("\n  \n", 0, "lists no rule", "RULE: reason"),
        ] {
            let m = parse_ignore(value).unwrap_err();
            assert_eq!(m.index, index, "{value:?}");
            assert!(m.message.contains(says), "{value:?}: {}", m.message);
            assert!(m.help.contains(help), "{value:?}: {}", m.help);
        }
    }

    #[test]
    fn until_is_a_calendar_day() {
        assert_eq!(parse_until(" 2027-01-31 "), Ok(jiff::civil::date(2027, 1, 31)));
        for bad in ["2026-02-30", "2026-1-5", "soon", "", "2026-13-01"] {
            assert!(parse_until(bad).is_err(), "{bad}");
        }
    }
}
