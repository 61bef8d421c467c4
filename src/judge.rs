//! The judge, between the rules and the report: what the user's policy makes of the rules'
//! findings. It applies the severity overrides of the settings, hides what an ignore covers (a
//! `# memlint ignore=` comment above the finding's Dockerfile line, a rule ignored everywhere, a
//! scoped `[[ignores]]` entry that has not expired), caps each rule's findings, and says what
//! the reader should know about the run (an ignore that matched nothing, findings on a nominal
//! line). Where a finding sits is [`crate::locate`]'s to decide; the judge calls it back at the
//! one point of its order where placement belongs, since inline ignores read the placed line.

use crate::baseline::{self, Baseline, Entry, Subject};
use crate::finding::{Evidence, Finding, Suppression};
use crate::locate::DockerfileContext;
use crate::rules::{self, RuleResult};
use crate::settings::{Date, ScopedIgnore, Settings};

/// What the judge weighs besides the findings.
pub(crate) struct Policy<'a> {
    pub(crate) settings: &'a Settings,
    /// The Dockerfile whose `# memlint ignore=` comments count, when one was given.
    pub(crate) dockerfile: Option<&'a DockerfileContext<'a>>,
    /// Where findings point when there is no Dockerfile (`--sarif-artifact`).
    pub(crate) artifact: &'a str,
    /// The image's reference and name, which a scoped ignore's `image` glob matches.
    pub(crate) image_names: &'a [&'a str],
    /// The day an ignore's `expires` is compared with.
    pub(crate) today: Date,
    /// Ignores written beside what is linted (a workload's `memlint/ignore` annotation), each
    /// scoped as a `[[ignores]]` entry is and placed at its line: SARIF's `inSource`.
    pub(crate) in_source: &'a [ScopedIgnore],
    /// What the findings were found in, as their fingerprints name it.
    pub(crate) subject: &'a Subject,
    /// The accepted findings (`--baseline`): those it holds are set apart, after ignores.
    pub(crate) baseline: Option<&'a Baseline>,
}

/// The judge's decision on one image's findings.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Verdict {
    /// Findings no ignore hides, capped per rule, most severe first, then by rule id.
    pub(crate) findings: Vec<Finding>,
    /// Findings an ignore hides, each with its suppression, capped per rule.
    pub(crate) ignored: Vec<Finding>,
    /// Findings the baseline holds (no ignore hides them), capped per rule, in the order of
    /// `findings`.
    pub(crate) baselined: Vec<Finding>,
    /// Every finding no ignore hides, new or baselined, before the cap: what
    /// `--write-baseline` writes.
    pub(crate) seen: Vec<Entry>,
    /// The fingerprints of the findings an ignore hides, before the cap: they still occur, so
    /// their baseline entries are not fixed.
    pub(crate) ignored_fingerprints: Vec<String>,
    /// Things the reader should know about the run itself.
    pub(crate) notes: Vec<String>,
    /// Whether the last note says that findings point at the nominal `artifact:1` (no
    /// Dockerfile was given): a report placed on a manifest's lines drops it.
    pub(crate) nominal_note: bool,
}

/// Judges the rules' findings. In this order, which the reports' snapshots depend on: severity
/// overrides, then `place` (provenance and Dockerfile lines, see [`crate::locate`]), then
/// fingerprints, then ignores, then the baseline, then the cap, then the notes, then the sort.
pub(crate) fn judge(results: &[RuleResult], policy: &Policy, place: impl FnOnce(&mut [Finding])) -> Verdict {
    let mut all: Vec<Finding> = results
        .iter()
        .flat_map(|r| r.outcome.findings.iter().cloned())
        .collect();
    for f in &mut all {
        if let Some(s) = policy.settings.severity.get(f.rule) {
            f.severity = *s;
        }
    }
    place(&mut all);
    // Before ignores: a finding's fingerprint is the same whether an ignore hides it or not.
    baseline::assign(&mut all, policy.subject);
    let mut used = vec![false; policy.settings.scoped.len()];
    let mut used_in_source = vec![false; policy.in_source.len()];
    let mut findings = Vec::new();
    let mut ignored = Vec::new();
    for mut f in all {
        f.suppression = suppression(&mut f, policy, &mut used, &mut used_in_source);
        if f.suppression.is_some() {
            ignored.push(f);
        } else {
            findings.push(f);
        }
    }
    let ignored_fingerprints = ignored.iter().map(|f| f.fingerprint.clone()).collect();
    let (findings, baselined) = match policy.baseline {
        Some(b) => set_apart(findings, b),
        None => (findings, Vec::new()),
    };
    let seen = findings
        .iter()
        .chain(&baselined)
        .map(|f| Entry::of(f, policy.subject, policy.today))
        .collect();
    let refingerprinted = |mut list: Vec<Finding>| {
        // The finding that counts the rest stands for many: its own fingerprint.
        for f in list.iter_mut().filter(|f| f.omitted > 0) {
            f.fingerprint = baseline::fingerprint(f.rule, policy.subject, &[], true, 0);
        }
        list
    };
    let mut findings = refingerprinted(cap(findings));
    let ignored = refingerprinted(cap(ignored));
    let mut baselined = refingerprinted(cap(baselined));
    let mut notes = Vec::new();
    let unused = policy
        .in_source
        .iter()
        .zip(&used_in_source)
        .chain(policy.settings.scoped.iter().zip(&used));
    for (s, used) in unused {
        if !used {
            notes.push(format!(
                "the ignore of {} at {} matched no finding",
                s.rule, s.origin
            ));
        }
    }
    let nominal_note = policy.dockerfile.is_none() && !findings.is_empty();
    if nominal_note {
        notes.push(format!(
            "no Dockerfile was given (--dockerfile): findings point at {}:1",
            policy.artifact
        ));
    }
    findings.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.rule.cmp(b.rule)));
    baselined.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.rule.cmp(b.rule)));
    Verdict {
        findings,
        ignored,
        baselined,
        seen,
        ignored_fingerprints,
        notes,
        nominal_note,
    }
}

/// The findings the baseline does not hold, and those it does, each with a suppression that
/// names the baseline (SARIF's `external`: the acceptance is written outside the source).
fn set_apart(findings: Vec<Finding>, b: &Baseline) -> (Vec<Finding>, Vec<Finding>) {
    let mut new = Vec::new();
    let mut held = Vec::new();
    for mut f in findings {
        match b.get(&f.fingerprint) {
            Some(e) => {
                f.suppression = Some(Suppression {
                    kind: "external",
                    justification: format!(
                        "accepted in the baseline {} (first seen {})",
                        b.path, e.first_seen
                    ),
                    origin: b.path.clone(),
                });
                held.push(f);
            }
            None => new.push(f),
        }
    }
    (new, held)
}

/// The ignore that hides a finding, if any: a `# memlint ignore=` comment above its Dockerfile
/// line, an ignore written on the workload, a rule ignored everywhere, or a scoped ignore that
/// has not expired. An expired one stops hiding the finding and says so in its evidence.
fn suppression(
    f: &mut Finding,
    policy: &Policy,
    used: &mut [bool],
    used_in_source: &mut [bool],
) -> Option<Suppression> {
    if let (Some(df), Some(loc)) = (policy.dockerfile, f.location.as_ref()) {
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
    // The workload's own ignores before the config file's: they say why for this workload.
    if let Some(s) = scoped(f, policy, policy.in_source, used_in_source, "inSource") {
        return Some(s);
    }
    if let Some((_, origin)) = policy.settings.ignore.iter().find(|(r, _)| r == f.rule) {
        return Some(Suppression {
            kind: "external",
            justification: format!("ignored by {origin}"),
            origin: origin.clone(),
        });
    }
    scoped(f, policy, &policy.settings.scoped, used, "external")
}

/// The first of `ignores` that covers the finding and has not expired, as a suppression of
/// `kind`; each that covers it is marked in `used`, and each expired one says so in its
/// evidence.
fn scoped(
    f: &mut Finding,
    policy: &Policy,
    ignores: &[ScopedIgnore],
    used: &mut [bool],
    kind: &'static str,
) -> Option<Suppression> {
    for (i, s) in ignores.iter().enumerate() {
        if !s.covers(f.rule, policy.image_names, &f.evidence) {
            continue;
        }
        used[i] = true;
        match s.expires {
            Some(d) if d < policy.today => {
                f.evidence.push(Evidence::plain(format!(
                    "the ignore at {} expired on {d} and no longer hides this ({})",
                    s.origin, s.reason
                )));
            }
            _ => {
                return Some(Suppression {
                    kind,
                    justification: s.reason.clone(),
                    origin: s.origin.clone(),
                });
            }
        }
    }
    None
}

/// The findings of one rule on one image that a report lists; [`cap`] counts the rest in one
/// more finding. An image config of 35 KB can list 5,000 preloads: a report that lists each
/// one helps no reader, and every format (text, JSON, SARIF, GitHub annotations) grows with it.
pub(crate) const MAX_FINDINGS_PER_RULE: usize = 50;

/// Keeps the first [`MAX_FINDINGS_PER_RULE`] findings of each rule, in their order, and adds
/// for each rule that had more one finding that counts the rest ("and N more …"; its
/// [`Finding::omitted`] is N). That finding takes the place, anchor and suppression of the
/// first finding it stands for, and the highest severity among them. For every rule alike,
/// whatever its check: the judge applies it once ignores have been decided, so that an ignore
/// still hides exactly the findings it covers.
pub(crate) fn cap(findings: Vec<Finding>) -> Vec<Finding> {
    let mut listed: std::collections::HashMap<&'static str, usize> = Default::default();
    let mut kept = Vec::with_capacity(findings.len().min(MAX_FINDINGS_PER_RULE * rules::ALL.len()));
    // One counting finding per rule, in the order the rules first went past the cap.
    let mut rest: Vec<Finding> = Vec::new();
    for f in findings {
        let n = listed.entry(f.rule).or_default();
        *n += 1;
        if *n <= MAX_FINDINGS_PER_RULE {
            kept.push(f);
        } else if let Some(more) = rest.iter_mut().find(|m| m.rule == f.rule) {
            more.omitted += f.count();
            more.severity = more.severity.max(f.severity);
        } else {
            rest.push(Finding {
                message: String::new(),
                evidence: Vec::new(),
                fix: String::new(),
                omitted: f.count(),
                ..f
            });
        }
    }
    for mut more in rest {
        more.message = format!(
            "and {} more {} findings on this image, not listed: a report lists the first {MAX_FINDINGS_PER_RULE} of a rule",
            more.omitted, more.rule
        );
        more.fix = format!(
            "fix the {MAX_FINDINGS_PER_RULE} findings listed and run memlint again to see the rest; `memlint inspect` shows every fact behind them"
        );
        kept.push(more);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dockerfile::Dockerfile;
    use crate::finding::{Anchor, Severity};
    use crate::rules::{Outcome, Rule};

    fn rule(id: &str) -> &'static Rule {
        rules::find(id).unwrap()
    }

    fn results(findings: Vec<Finding>) -> Vec<RuleResult> {
        // The judge reads findings in rule order; one result per rule, as `rules::run` gives.
        let mut out: Vec<RuleResult> = Vec::new();
        for f in findings {
            match out.iter_mut().find(|r| r.rule.id == f.rule) {
                Some(r) => r.outcome.findings.push(f),
                None => out.push(RuleResult {
                    rule: rule(f.rule),
                    outcome: Outcome::one(f),
                }),
            }
        }
        out
    }

    fn settings(toml: &str) -> Settings {
        Settings::parse(toml, ".memlint.toml").unwrap()
    }

    fn subject() -> Subject {
        Subject::image("registry:registry.example/app:1.2", None, "linux/amd64")
    }

    fn today() -> Date {
        "2026-03-01".parse().unwrap()
    }

    /// Judges without a Dockerfile, placing nothing.
    fn judged(findings: Vec<Finding>, settings: &Settings, names: &[&str]) -> Verdict {
        let policy = Policy {
            settings,
            dockerfile: None,
            artifact: "Dockerfile",
            image_names: names,
            today: today(),
            in_source: &[],
            subject: &subject(),
            baseline: None,
        };
        judge(&results(findings), &policy, |_| {})
    }

    /// The hidden findings' rules, each with the suppression that hides it.
    fn hidden(v: &Verdict) -> Vec<(&'static str, Suppression)> {
        v.ignored
            .iter()
            .map(|f| (f.rule, f.suppression.clone().unwrap()))
            .collect()
    }

    fn preload(path: &str) -> Finding {
        let mut f = rule("ld-preload-missing").finding(format!("{path} is missing"));
        f.evidence
            .push(Evidence::naming(format!("LD_PRELOAD names {path}"), [path]));
        f
    }

    #[test]
    fn severity_overrides_apply_before_placement_and_the_sort() {
        let s = settings("[severity]\nld-preload-missing = \"note\"\ngo-memlimit-missing = \"error\"\n");
        let policy = Policy {
            settings: &s,
            dockerfile: None,
            artifact: "Dockerfile",
            image_names: &[],
            today: today(),
            in_source: &[],
            subject: &subject(),
            baseline: None,
        };
        let findings = vec![
            preload("/usr/lib/libjemalloc.so.2"),
            rule("sharp-glibc-allocator").finding("s"),
            rule("go-memlimit-missing").finding("g"),
        ];
        let mut seen = Vec::new();
        let v = judge(&results(findings), &policy, |all| {
            seen = all.iter().map(|f| (f.rule, f.severity)).collect();
        });
        assert_eq!(
            seen,
            [
                ("ld-preload-missing", Severity::Note),
                ("sharp-glibc-allocator", Severity::Warning),
                ("go-memlimit-missing", Severity::Error),
            ]
        );
        let order: Vec<_> = v.findings.iter().map(|f| (f.rule, f.severity)).collect();
        assert_eq!(
            order,
            [
                ("go-memlimit-missing", Severity::Error),
                ("sharp-glibc-allocator", Severity::Warning),
                ("ld-preload-missing", Severity::Note),
            ]
        );
        assert!(v.ignored.is_empty());
        assert_eq!(
            v.notes,
            ["no Dockerfile was given (--dockerfile): findings point at Dockerfile:1"]
        );
    }

    #[test]
    fn a_scoped_ignore_hides_what_it_covers() {
        let s = settings(
            "[[ignores]]\nrule = \"ld-preload-missing\"\npath = \"/usr/lib\"\nreason = \"arm64 only\"\n\
             \n[[ignores]]\nrule = \"sharp-glibc-allocator\"\nimage = \"registry.example/app:*\"\nreason = \"sharp is unused\"\n",
        );
        let findings = vec![
            preload("/usr/lib/libjemalloc.so.2"),
            preload("/usr/lib64/libjemalloc.so.2"),
            rule("sharp-glibc-allocator").finding("s"),
        ];
        let v = judged(findings, &s, &["registry.example/app:1.2"]);
        let hidden = hidden(&v);
        assert_eq!(
            hidden,
            [
                (
                    "ld-preload-missing",
                    Suppression {
                        kind: "external",
                        justification: "arm64 only".to_string(),
                        origin: ".memlint.toml:1".to_string(),
                    }
                ),
                (
                    "sharp-glibc-allocator",
                    Suppression {
                        kind: "external",
                        justification: "sharp is unused".to_string(),
                        origin: ".memlint.toml:6".to_string(),
                    }
                ),
            ]
        );
        // `/usr/lib` does not cover `/usr/lib64`.
        assert_eq!(v.findings.len(), 1);
        assert_eq!(v.findings[0].message, "/usr/lib64/libjemalloc.so.2 is missing");
        assert!(v.findings[0].suppression.is_none());
        // Another image: the image-scoped ignore does not apply, and says it matched nothing.
        let other = judged(vec![rule("sharp-glibc-allocator").finding("s")], &s, &["other:1"]);
        assert_eq!(other.findings.len(), 1);
        assert!(other.ignored.is_empty());
        assert_eq!(
            other.notes[..2],
            [
                "the ignore of ld-preload-missing at .memlint.toml:1 matched no finding",
                "the ignore of sharp-glibc-allocator at .memlint.toml:6 matched no finding",
            ]
        );
    }

    #[test]
    fn an_expired_ignore_adds_evidence_and_hides_nothing() {
        let s = settings(
            "[[ignores]]\nrule = \"ld-preload-missing\"\npath = \"/usr/lib\"\nreason = \"until the rebuild\"\nexpires = 2026-02-28\n",
        );
        let v = judged(vec![preload("/usr/lib/libjemalloc.so.2")], &s, &[]);
        assert!(v.ignored.is_empty());
        assert_eq!(v.findings.len(), 1);
        assert!(v.findings[0].suppression.is_none());
        assert_eq!(
            v.findings[0].evidence.last().map(|e| e.text()),
            Some(
                "the ignore at .memlint.toml:1 expired on 2026-02-28 and no longer hides this (until the rebuild)"
            )
        );
        // It matched a finding: no "matched no finding" note.
        assert!(
            v.notes.iter().all(|n| !n.contains("matched no finding")),
            "{:?}",
            v.notes
        );
        // On its last day it still hides.
        let s = settings(
            "[[ignores]]\nrule = \"ld-preload-missing\"\npath = \"/usr/lib\"\nreason = \"until the rebuild\"\nexpires = 2026-03-01\n",
        );
        let v = judged(vec![preload("/usr/lib/libjemalloc.so.2")], &s, &[]);
        assert!(v.findings.is_empty());
        assert_eq!(v.ignored.len(), 1);
        assert_eq!(v.ignored[0].evidence.len(), 1);
    }

    #[test]
    fn an_ignore_that_matches_nothing_is_noted() {
        let s = settings(
            "ignore = [\"sharp-glibc-allocator\"]\n\n[[ignores]]\nrule = \"ld-preload-missing\"\npath = \"/opt\"\nreason = \"vendored\"\n",
        );
        let v = judged(
            vec![
                preload("/usr/lib/libjemalloc.so.2"),
                rule("sharp-glibc-allocator").finding("s"),
            ],
            &s,
            &[],
        );
        assert_eq!(v.findings.len(), 1);
        assert_eq!(v.ignored.len(), 1);
        let global = v.ignored[0].suppression.clone().unwrap();
        assert_eq!(
            (global.kind, global.justification.as_str(), global.origin.as_str()),
            ("external", "ignored by .memlint.toml:1", ".memlint.toml:1")
        );
        assert_eq!(
            v.notes,
            [
                "the ignore of ld-preload-missing at .memlint.toml:3 matched no finding",
                "no Dockerfile was given (--dockerfile): findings point at Dockerfile:1",
            ]
        );
        // With nothing left to report, no note about where findings point.
        let v = judged(Vec::new(), &Settings::default(), &[]);
        assert_eq!(v, Verdict::default());
    }

    #[test]
    fn a_workload_ignore_hides_in_source_expires_and_notes_when_unused() {
        let annotation = |rule: &str, expires: Option<Date>, line: u32| ScopedIgnore {
            rule: rule.to_string(),
            image: None,
            path: None,
            reason: "sized by the operator".to_string(),
            expires,
            origin: format!("deploy/app.yaml:{line}"),
        };
        // The config file ignores the same rule: the workload's own reason is the one given.
        let s =
            settings("[[ignores]]\nrule = \"ld-preload-missing\"\nimage = \"*\"\nreason = \"fleet-wide\"\n");
        let in_source = [
            annotation("ld-preload-missing", Some("2026-03-01".parse().unwrap()), 7),
            annotation("go-memlimit-missing", None, 8),
            annotation("sharp-glibc-allocator", Some("2026-02-01".parse().unwrap()), 9),
        ];
        let policy = Policy {
            settings: &s,
            dockerfile: None,
            artifact: "Dockerfile",
            image_names: &["app:1"],
            today: today(),
            in_source: &in_source,
            subject: &subject(),
            baseline: None,
        };
        let findings = vec![
            preload("/usr/lib/libjemalloc.so.2"),
            rule("sharp-glibc-allocator").finding("s"),
        ];
        let v = judge(&results(findings), &policy, |_| {});
        assert_eq!(
            hidden(&v),
            [(
                "ld-preload-missing",
                Suppression {
                    kind: "inSource",
                    justification: "sized by the operator".to_string(),
                    origin: "deploy/app.yaml:7".to_string(),
                }
            )]
        );
        // Expired: the finding is back, and says which ignore expired.
        assert_eq!(v.findings.len(), 1);
        assert_eq!(
            v.findings[0].evidence.last().map(|e| e.text()),
            Some("the ignore at deploy/app.yaml:9 expired on 2026-02-01 and no longer hides this (sized by the operator)")
        );
        assert_eq!(
            v.notes[..2],
            [
                "the ignore of go-memlimit-missing at deploy/app.yaml:8 matched no finding",
                "the ignore of ld-preload-missing at .memlint.toml:1 matched no finding",
            ]
        );
    }

    #[test]
    fn the_baseline_sets_apart_what_it_holds_after_ignores() {
        let s = settings(
            "[[ignores]]\nrule = \"ld-preload-missing\"\npath = \"/usr/lib\"\nreason = \"arm64 only\"\n",
        );
        let all = || {
            vec![
                preload("/usr/lib/libjemalloc.so.2"),
                preload("/opt/libjemalloc.so.2"),
                rule("sharp-glibc-allocator").finding("s"),
            ]
        };
        // The baseline of a run that saw every finding (no ignores then).
        let before = judged(all(), &Settings::default(), &[]);
        let text = crate::baseline::render(before.seen.clone(), None, |_| false);
        let b = Baseline::parse(std::str::from_utf8(&text).unwrap(), "memlint-baseline.json").unwrap();
        assert_eq!(b.entries.len(), 3);
        // Now with the ignore, and a new finding.
        let policy = Policy {
            settings: &s,
            dockerfile: None,
            artifact: "Dockerfile",
            image_names: &[],
            today: today(),
            in_source: &[],
            subject: &subject(),
            baseline: Some(&b),
        };
        let mut findings = all();
        findings.push(rule("node-semi-space").finding("n"));
        let v = judge(&results(findings), &policy, |_| {});
        // Ignores first: the ignored finding is ignored, not baselined.
        assert_eq!(v.ignored.len(), 1);
        assert_eq!(v.ignored_fingerprints.len(), 1);
        let rules_of = |l: &[Finding]| l.iter().map(|f| f.rule).collect::<Vec<_>>();
        assert_eq!(rules_of(&v.findings), ["node-semi-space"]);
        assert_eq!(
            rules_of(&v.baselined),
            ["ld-preload-missing", "sharp-glibc-allocator"]
        );
        let why = v.baselined[0].suppression.clone().unwrap();
        assert_eq!(why.kind, "external");
        assert_eq!(why.origin, "memlint-baseline.json");
        assert!(
            why.justification
                .starts_with("accepted in the baseline memlint-baseline.json (first seen 2026-03-01)"),
            "{}",
            why.justification
        );
        // What --write-baseline would write: every finding no ignore hides, new or baselined.
        assert_eq!(v.seen.len(), 3);
    }

    #[test]
    fn an_inline_ignore_hides_the_finding_on_the_line_below_it() {
        let d = Dockerfile::parse(
            "FROM debian:12\n# memlint ignore=ld-preload-missing reason=\"arm64 only\"\nENV LD_PRELOAD=/usr/lib/libjemalloc.so.2\n# memlint ignore=node-semi-space\nCMD [\"node\"]\n",
        );
        let ctx = DockerfileContext::new(&d, "app/Dockerfile", None).unwrap();
        let s = Settings::default();
        let policy = Policy {
            settings: &s,
            dockerfile: Some(&ctx),
            artifact: "Dockerfile",
            image_names: &[],
            today: today(),
            in_source: &[],
            subject: &subject(),
            baseline: None,
        };
        let findings = vec![
            preload("/usr/lib/libjemalloc.so.2"),
            // Placed on the FROM line: the comment above the ENV does not cover it.
            preload("/usr/lib/libtcmalloc.so").anchor(Anchor::From),
            rule("node-semi-space").finding("n"),
        ];
        let v = judge(&results(findings), &policy, |all| {
            crate::locate::locate(all, Some(&ctx), "Dockerfile")
        });
        let hidden = hidden(&v);
        assert_eq!(
            hidden,
            [
                (
                    "ld-preload-missing",
                    Suppression {
                        kind: "inSource",
                        justification: "arm64 only".to_string(),
                        origin: "app/Dockerfile:2".to_string(),
                    }
                ),
                (
                    "node-semi-space",
                    Suppression {
                        kind: "inSource",
                        justification: "(no reason given)".to_string(),
                        origin: "app/Dockerfile:4".to_string(),
                    }
                ),
            ]
        );
        assert_eq!(v.findings.len(), 1);
        assert_eq!(v.findings[0].location.as_ref().map(|l| l.line), Some(1));
        assert!(v.notes.is_empty(), "{:?}", v.notes);
    }

    #[test]
    fn each_rule_lists_at_most_50_findings_and_counts_the_rest() {
        let a = rules::find("ld-preload-missing").unwrap_or(rules::ALL[0]);
        let b = rules::find("ld-preload-incompatible").unwrap_or(rules::ALL[1]);
        let mut findings: Vec<Finding> = (0..120)
            .map(|i| a.finding(format!("a{i}")).severity(Severity::Note))
            .collect();
        findings.insert(7, b.finding("b0"));
        findings.push(b.finding("b1"));
        // The first past the cap (a50) gives its place to the finding that counts; the highest
        // severity past the cap is its severity.
        findings[51] = findings[51].clone().anchor(Anchor::From);
        findings[60] = findings[60].clone().severity(Severity::Warning);
        let capped = cap(findings);
        let of = |rule: &str| capped.iter().filter(|f| f.rule == rule).collect::<Vec<_>>();
        let listed = of(a.id);
        assert_eq!(listed.len(), MAX_FINDINGS_PER_RULE + 1);
        assert_eq!(listed[49].message, "a49");
        let more = listed[50];
        assert_eq!(more.omitted, 70);
        assert!(
            more.message
                .starts_with("and 70 more ld-preload-missing findings"),
            "{}",
            more.message
        );
        assert!(more.evidence.is_empty());
        assert_eq!(more.anchor, Anchor::From);
        assert_eq!(more.severity, Severity::Warning);
        assert_eq!(of(b.id).len(), 2, "another rule keeps its own count");
        assert_eq!(capped.iter().map(Finding::count).sum::<usize>(), 122);
        // Capping again changes nothing: the counting finding keeps counting.
        let again = cap(capped.clone());
        assert_eq!(again, capped);
        let few: Vec<Finding> = (0..3).map(|i| a.finding(format!("a{i}"))).collect();
        assert_eq!(cap(few.clone()), few);
    }

    #[test]
    fn the_cap_counts_after_ignores_each_side_apart() {
        // 70 findings under /usr/lib (ignored) and 60 under /opt (reported): each side lists 50
        // and counts the rest, so that the ignore hides exactly what it covers.
        let s = settings("[[ignores]]\nrule = \"ld-preload-missing\"\npath = \"/usr/lib\"\nreason = \"r\"\n");
        let findings: Vec<Finding> = (0..70)
            .map(|i| preload(&format!("/usr/lib/l{i}.so")))
            .chain((0..60).map(|i| preload(&format!("/opt/l{i}.so"))))
            .collect();
        let v = judged(findings, &s, &[]);
        assert_eq!(v.ignored.len(), MAX_FINDINGS_PER_RULE + 1);
        assert_eq!(v.ignored[MAX_FINDINGS_PER_RULE].omitted, 20);
        assert!(v.ignored[MAX_FINDINGS_PER_RULE].suppression.is_some());
        assert_eq!(v.findings.len(), MAX_FINDINGS_PER_RULE + 1);
        assert_eq!(v.findings.iter().map(Finding::count).sum::<usize>(), 60);
        assert!(v.findings.iter().all(|f| f.suppression.is_none()));
    }
}
