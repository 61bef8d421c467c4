use super::java::{jvm_evidence, tool_options_with};
use super::{fixes, Outcome, Rule};
use crate::facts::java::{flag_support, FlagSupport, Jvm};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};
use crate::facts::allocator::ARENA_CAP_VARIABLES;

pub(crate) const RULE: Rule = Rule {
    id: "jvm-glibc-arenas",
    severity: Severity::Note,
    title: "The JVM's native memory grows in glibc's per-thread arenas",
    doc: include_str!("../../rules/jvm-glibc-arenas.md"),
    tags: &["memory", "allocator", "glibc", "java"],
    check,
    // The arena cap is the fix; with none set, the final FROM.
    anchor: Anchor::Env(ARENA_CAP_VARIABLES),
};

fn check(f: &Facts) -> Outcome {
    let Some(j) = &f.java else {
        return Outcome::none();
    };
    if j.jvm == Some(Jvm::OpenJ9) {
        return Outcome::undecided("the JVM is OpenJ9; this rule judges HotSpot");
    }
    match j.libc.as_deref() {
        Some("gnu") => {}
        Some(other) => return Outcome::undecided(format!("the JVM runs on {other}, which has no per-thread arenas")),
        None => return Outcome::undecided("the JVM's C library is unknown"),
    }
    if f.allocator.is_replacement() || f.allocator.arena_cap.is_some() || j.trims_native_heap().is_some() {
        return Outcome::none();
    }
    // A preload or arena cap a script sets in a way memlint cannot work out may settle it.
    if let Some(why) = f.allocator.undecided_reason() {
        return Outcome::undecided(why);
    }
    let mut fix = "ENV MALLOC_ARENA_MAX=2".to_string();
    let trim = j
        .parsed_version()
        .and_then(|v| flag_support(v, "TrimNativeHeapInterval"))
        .unwrap_or(FlagSupport::Absent);
    match trim {
        FlagSupport::Product => fix.push_str(&format!(
            "\n# or let the JVM give freed native memory back every minute:\n# {}",
            tool_options_with(j, "-XX:TrimNativeHeapInterval=60000")
        )),
        FlagSupport::Experimental => fix.push_str(&format!(
            "\n# or let the JVM give freed native memory back every minute (experimental in this release):\n# {}",
            tool_options_with(j, "-XX:+UnlockExperimentalVMOptions -XX:TrimNativeHeapInterval=60000")
        )),
        FlagSupport::Absent => {}
    }
    fix.push_str(&format!(
        "\n# or jemalloc:\n# {}",
        fixes::jemalloc_fix(f).replace('\n', "\n# ")
    ));
    let runs = if j.entrypoint_runs_java {
        ""
    } else {
        " (present in the image; the entrypoint does not plainly run it)"
    };
    Outcome::one(
        RULE.finding(format!(
            "HotSpot runs on glibc malloc with no arena cap and no native heap trimming{runs}: native memory (metaspace, JIT, zlib, NIO, JNI) grows in per-thread arenas that glibc is slow to give back"
        ))
        .evidence(jvm_evidence(j))
        .evidence_all(f.allocator.evidence.iter().cloned())
        .evidence(Evidence::plain(
            "no MALLOC_ARENA_MAX, no glibc.malloc.arena_max in GLIBC_TUNABLES, no -XX:TrimNativeHeapInterval this JDK accepts",
        ))
        .fix(fix),
    )
}
