use super::{fixes, Outcome, Rule};
use crate::facts::allocator::Allocator;
use crate::facts::libc::LibcFamily;
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Finding, Severity};
use crate::facts::allocator::{
    glibc_malloc_settings, known_jemalloc_pairs, unknown_jemalloc_options, ALLOCATOR_SETTING_VARIABLES, JEMALLOC_OPTIONS,
};

pub(crate) const RULE: Rule = Rule {
    id: "malloc-conf-ineffective",
    severity: Severity::Note,
    title: "An allocator setting does nothing in this image",
    doc: include_str!("../../rules/malloc-conf-ineffective.md"),
    tags: &["memory", "allocator", "configuration"],
    check,
    // Each finding names the variable it is about.
    anchor: Anchor::Env(ALLOCATOR_SETTING_VARIABLES),
};

/// Where a finding about `key` belongs: its `ENV`, or the ENTRYPOINT when a script exports it.
fn anchor_for(f: &Facts, key: &'static str) -> Anchor {
    if f.env.set_by_script(key) {
        return Anchor::Command;
    }
    match ALLOCATOR_SETTING_VARIABLES.iter().position(|k| *k == key) {
        Some(i) => Anchor::Env(&ALLOCATOR_SETTING_VARIABLES[i..=i]),
        None => Anchor::Env(&ALLOCATOR_SETTING_VARIABLES[3..]),
    }
}

/// How to drop a setting: its `ENV`, or the script line that exports it.
fn drop_fix(f: &Facts, key: &str) -> String {
    match f.env.var(key).and_then(|v| v.script()) {
        Some((script, line)) => format!("# in {script} line {line}, drop the export of {key}"),
        None => super::fixes::set_env(f, key, None),
    }
}

/// How to drop glibc's malloc settings: `MALLOC_ARENA_MAX` whole; from `GLIBC_TUNABLES` only
/// the `glibc.malloc.*` entries, keeping the others (they still apply).
fn tunables_fix(f: &Facts, key: &str) -> String {
    if key != "GLIBC_TUNABLES" {
        return drop_fix(f, key);
    }
    let others: Vec<&str> = f
        .env
        .get(key)
        .unwrap_or("")
        .split(':')
        .filter(|kv| !kv.trim().is_empty() && !kv.trim_start().starts_with("glibc.malloc."))
        .collect();
    match (others.is_empty(), f.env.var(key).and_then(|v| v.script())) {
        (true, _) => drop_fix(f, key),
        (false, None) => format!("ENV GLIBC_TUNABLES={}", others.join(":")),
        (false, Some((script, line))) => format!(
            "# in {script} line {line}, export GLIBC_TUNABLES={} instead",
            others.join(":")
        ),
    }
}

/// The variable tikv-jemallocator's prefixed jemalloc reads.
const PREFIXED_CONF: &str = "_RJEM_MALLOC_CONF";

/// `MALLOC_CONF` set while files of the image carry a prefixed jemalloc and `_RJEM_MALLOC_CONF`
/// is not set: a warning, since the settings meant for that allocator never reach it.
fn prefixed_jemalloc(f: &Facts) -> Option<Finding> {
    let carriers: Vec<_> = f
        .allocator
        .prefixed_jemalloc
        .iter()
        .filter(|p| p.variable == PREFIXED_CONF)
        .collect();
    let first = carriers.first()?;
    let key = ALLOCATOR_SETTING_VARIABLES[0];
    let value = f.env.non_empty(key)?;
    // Set, or set by a script in a way memlint cannot work out: possibly in place.
    if f.env.var(PREFIXED_CONF).is_some() {
        return None;
    }
    let mut evidence = vec![f.env.evidence(key).unwrap_or_else(|| Evidence::plain(format!("{key}={value}")))];
    for c in &carriers {
        evidence.push(Evidence::naming(
            format!(
                "{} carries a jemalloc built with the `_rjem_` prefix (`{}` in its read-only data, tikv-jemallocator's default): it reads {} and never {key}",
                c.path, c.variable, c.variable
            ),
            [c.path.clone()],
        ));
    }
    let jemalloc_in_effect = f.allocator.name == Allocator::Jemalloc || f.ruby.as_ref().is_some_and(|r| r.jemalloc_linked);
    let keep = if jemalloc_in_effect {
        format!("\n# keep {key}: the unprefixed jemalloc in effect reads it")
    } else {
        format!("\n{}\n# nothing else in the image reads {key}", drop_fix(f, key))
    };
    Some(
        RULE.finding(format!(
            "{key} is set but {} carries a prefixed jemalloc that reads only {PREFIXED_CONF}: the settings never reach it",
            first.path
        ))
        .severity(Severity::Warning)
        .anchor(anchor_for(f, key))
        .evidence_all(evidence)
        .fix(format!(
            "{}{keep}\n# tikv-jemallocator's jemalloc reads {PREFIXED_CONF} (same syntax as {key})",
            fixes::set_env(f, PREFIXED_CONF, Some(value))
        )),
    )
}

fn check(f: &Facts) -> Outcome {
    let jemalloc = f.allocator.name == Allocator::Jemalloc || f.ruby.as_ref().is_some_and(|r| r.jemalloc_linked);
    let replacement = f.allocator.is_replacement() || jemalloc;
    let mut findings: Vec<Finding> = Vec::new();
    let mut undecided = None;
    let possibly = f.allocator.undecided_reason();
    let prefixed = prefixed_jemalloc(f);
    let prefixed_reported = prefixed.is_some();
    findings.extend(prefixed);
    for &key in &ALLOCATOR_SETTING_VARIABLES[..2] {
        let Some(value) = f.env.non_empty(key) else { continue };
        let evidence = f.env.evidence(key).unwrap_or_else(|| Evidence::plain(format!("{key}={value}")));
        if !jemalloc {
            // The prefixed jemalloc's finding says it already, and what to set instead.
            if prefixed_reported && key == ALLOCATOR_SETTING_VARIABLES[0] {
                continue;
            }
            if let Some(why) = &possibly {
                undecided = Some(why.clone());
                continue;
            }
            findings.push(
                RULE.finding(format!("{key} is set but no jemalloc is in effect: nothing reads it"))
                    .anchor(anchor_for(f, key))
                    .evidence(evidence)
                    .evidence_all(f.allocator.evidence.iter().take(1).cloned())
                    .fix(format!("{}\n# or put jemalloc in effect so that it applies:\n# {}", drop_fix(f, key), fixes::jemalloc_fix(f).replace('\n', "\n# "))),
            );
            continue;
        }
        let unknown = unknown_jemalloc_options(value);
        if unknown.is_empty() {
            continue;
        }
        let mut finding = RULE
            .finding(format!(
                "{key} names {} jemalloc does not know: it prints `<jemalloc>: Invalid conf pair` and ignores {}",
                unknown.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "),
                if unknown.len() == 1 { "it" } else { "them" }
            ))
            .anchor(anchor_for(f, key))
            .evidence(evidence);
        for k in &unknown {
            let near = JEMALLOC_OPTIONS
                .iter()
                .map(|o| (strsim::levenshtein(k, o), *o))
                .min()
                .filter(|(d, _)| *d <= k.len() / 3 + 1);
            if let Some((_, o)) = near {
                finding = finding.evidence(Evidence::plain(format!("`{k}` is close to jemalloc's `{o}`")));
            }
        }
        let kept = known_jemalloc_pairs(value);
        let fix = if kept.is_empty() {
            drop_fix(f, key)
        } else {
            format!("ENV {key}={}", kept.join(","))
        };
        findings.push(finding.fix(format!("{fix}\n# jemalloc's options: `man 3 jemalloc` (libjemalloc-dev), section TUNING")));
    }
    let musl = f.libc.family == LibcFamily::Musl;
    let glibc_settings = glibc_malloc_settings(&f.env);
    for (key, value) in glibc_settings {
        let why = if musl {
            "musl's malloc has no arenas and reads no glibc setting".to_string()
        } else if replacement {
            let name = if jemalloc { Allocator::Jemalloc } else { f.allocator.name };
            format!("{name} replaces glibc's malloc, so glibc's arena settings do not apply")
        } else {
            continue;
        };
        let evidence = f.env.evidence(key).unwrap_or_else(|| Evidence::plain(format!("{key}={value}")));
        let tip = if jemalloc && !musl {
            "\n# jemalloc's own arena count: MALLOC_CONF=narenas:2"
        } else {
            ""
        };
        let shown = if key == "GLIBC_TUNABLES" { format!("{key} ({value})") } else { key.to_string() };
        findings.push(
            RULE.finding(format!("{shown} does nothing here: {why}"))
                .anchor(anchor_for(f, key))
                .evidence(evidence)
                // What is in effect (the first line); not the arena cap it reports on.
                .evidence_all(f.allocator.evidence.iter().take(1).cloned())
                .fix(format!("{}{tip}", tunables_fix(f, key))),
        );
    }
    if findings.is_empty() {
        if let Some(why) = undecided {
            return Outcome::undecided(why);
        }
    }
    findings.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    const PRELOAD: &str = "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";

    fn glibc_app(env: &[&str]) -> TestImage {
        TestImage::new()
            .glibc()
            .jemalloc()
            .program("/usr/local/bin/app")
            .cmd(&["app"])
            .env(env)
    }

    fn messages(o: &Outcome) -> Vec<&str> {
        o.findings.iter().map(|f| f.message.as_str()).collect()
    }

    #[test]
    fn fires_for_malloc_conf_without_jemalloc() {
        let o = check(&glibc_app(&["MALLOC_CONF=narenas:2,background_thread:true"]).facts());
        assert!(o.undecided.is_none(), "{o:?}");
        assert_eq!(
            messages(&o),
            ["MALLOC_CONF is set but no jemalloc is in effect: nothing reads it"]
        );
        assert_eq!(o.findings[0].severity, Severity::Note);
        assert_eq!(o.findings[0].anchor, Anchor::Env(&["MALLOC_CONF"]));
        assert!(o.findings[0].fix.starts_with("remove `ENV MALLOC_CONF`\n"), "{}", o.findings[0].fix);
    }

    #[test]
    fn fires_for_an_option_jemalloc_does_not_know() {
        let o = check(&glibc_app(&[PRELOAD, "MALLOC_CONF=narena:2,background_thread:true"]).facts());
        assert_eq!(
            messages(&o),
            ["MALLOC_CONF names `narena` jemalloc does not know: it prints `<jemalloc>: Invalid conf pair` and ignores it"]
        );
        let f = &o.findings[0];
        assert!(f.has_evidence("`narena` is close to jemalloc's `narenas`"));
        assert!(f.fix.starts_with("ENV MALLOC_CONF=background_thread:true\n"), "{}", f.fix);
    }

    #[test]
    fn fires_for_glibc_settings_that_nothing_reads() {
        // jemalloc replaces glibc's malloc; GLIBC_TUNABLES keeps its other entries.
        let o = check(
            &glibc_app(&[
                PRELOAD,
                "MALLOC_ARENA_MAX=2",
                "GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.pthread.rseq=0",
            ])
            .facts(),
        );
        assert_eq!(
            messages(&o),
            [
                "MALLOC_ARENA_MAX does nothing here: jemalloc replaces glibc's malloc, so glibc's arena settings do not apply",
                "GLIBC_TUNABLES (glibc.malloc.arena_max=2) does nothing here: jemalloc replaces glibc's malloc, so glibc's arena settings do not apply",
            ]
        );
        assert!(o.findings[1].fix.starts_with("ENV GLIBC_TUNABLES=glibc.pthread.rseq=0\n"));
        // musl has no arenas.
        let f = TestImage::new()
            .musl()
            .musl_program("/usr/local/bin/app")
            .cmd(&["app"])
            .env(&["MALLOC_ARENA_MAX=2"])
            .facts();
        let o = check(&f);
        assert_eq!(
            messages(&o),
            ["MALLOC_ARENA_MAX does nothing here: musl's malloc has no arenas and reads no glibc setting"]
        );
        assert_eq!(o.findings[0].fix, "remove `ENV MALLOC_ARENA_MAX`");
    }

    #[test]
    fn silent_when_each_setting_has_its_reader() {
        for env in [
            &[PRELOAD, "MALLOC_CONF=narenas:2,background_thread:true"][..],
            &["MALLOC_ARENA_MAX=2"],
            &["GLIBC_TUNABLES=glibc.malloc.arena_max=2"],
            &[PRELOAD, "GLIBC_TUNABLES=glibc.pthread.rseq=0"],
            &[],
        ] {
            let o = check(&glibc_app(env).facts());
            assert!(o.findings.is_empty() && o.undecided.is_none(), "{env:?}: {o:?}");
        }
    }

    /// A Python extension built with tikv-jemallocator, as the polars-runtime-32 wheel ships it.
    fn polars(env: &[&str]) -> TestImage {
        let mut so = crate::facts::testing::library(&["libc.so.6"]);
        so.scan.markers.set(&crate::facts::preload::EMBEDDED_ALLOCATOR, crate::elf::marker::Found::Text("jemalloc".into()));
        so.scan.markers.set(&crate::facts::allocator::PREFIXED_JEMALLOC, crate::elf::marker::Found::Text("_RJEM_MALLOC_CONF".into()));
        TestImage::new()
            .glibc()
            .program("/usr/bin/python3.11")
            .elf(POLARS, so)
            .cmd(&["python3.11", "app.py"])
            .env(env)
    }

    const POLARS: &str = "/usr/local/lib/python3.11/site-packages/_polars_runtime_32/_polars_runtime_32.abi3.so";

    #[test]
    fn warns_when_a_prefixed_jemalloc_never_sees_malloc_conf() {
        let o = check(&polars(&["MALLOC_CONF=background_thread:true"]).facts());
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            f.message,
            format!("MALLOC_CONF is set but {POLARS} carries a prefixed jemalloc that reads only _RJEM_MALLOC_CONF: the settings never reach it")
        );
        assert!(f.fix.starts_with("ENV _RJEM_MALLOC_CONF=background_thread:true\n"), "{}", f.fix);
        assert_eq!(f.anchor, Anchor::Env(&["MALLOC_CONF"]));
        // Set as the fix says: silent; not set at all: nothing to say either.
        for env in [&["_RJEM_MALLOC_CONF=background_thread:true"][..], &[]] {
            let o = check(&polars(env).facts());
            assert!(o.findings.is_empty() && o.undecided.is_none(), "{env:?}: {o:?}");
        }
        // Both: the prefixed jemalloc has its options; MALLOC_CONF is then read by nothing.
        let o = check(&polars(&["MALLOC_CONF=background_thread:true", "_RJEM_MALLOC_CONF=background_thread:true"]).facts());
        assert_eq!(messages(&o), ["MALLOC_CONF is set but no jemalloc is in effect: nothing reads it"]);
        // Under a preloaded jemalloc MALLOC_CONF is read there: the fix keeps it.
        let t = polars(&[PRELOAD, "MALLOC_CONF=narenas:2"]).jemalloc();
        let f = check(&t.facts()).sole_finding().clone();
        assert!(f.fix.contains("# keep MALLOC_CONF"), "{}", f.fix);
        // A file outside the extension folders that the program does not load is not counted.
        let mut tool = crate::facts::testing::library(&[]);
        tool.scan.markers.set(&crate::facts::allocator::PREFIXED_JEMALLOC, crate::elf::marker::Found::Text("_RJEM_MALLOC_CONF".into()));
        let t = glibc_app(&["MALLOC_CONF=narenas:2"]).elf("/opt/tools/lib/libtool.so", tool);
        assert_eq!(messages(&check(&t.facts())), ["MALLOC_CONF is set but no jemalloc is in effect: nothing reads it"]);
    }

    #[test]
    fn undecided_when_a_script_may_preload_jemalloc() {
        let f = glibc_app(&["MALLOC_CONF=narenas:2"])
            .file(
                "/entry.sh",
                "#!/bin/sh\nexport LD_PRELOAD=$(cat /etc/jemalloc-path)\nexec app\n",
            )
            .entrypoint(&["/entry.sh"])
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().contains("possibly in effect"));
    }
}
