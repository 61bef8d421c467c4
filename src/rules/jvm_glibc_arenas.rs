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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    /// eclipse-temurin:17 (Debian) running `java -jar app.jar`.
    fn temurin17() -> TestImage {
        TestImage::new().temurin("17.0.15", "gnu", "Hotspot")
    }

    #[test]
    fn fires_for_hotspot_on_glibc_without_a_cap_or_trimming() {
        let o = check(&temurin17().facts());
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Note);
        assert_eq!(
            f.message,
            "HotSpot runs on glibc malloc with no arena cap and no native heap trimming: native memory (metaspace, JIT, zlib, NIO, JNI) grows in per-thread arenas that glibc is slow to give back"
        );
        assert!(
            f.fix.starts_with(
                "ENV MALLOC_ARENA_MAX=2\n# or let the JVM give freed native memory back every minute:\n# ENV JAVA_TOOL_OPTIONS=\"-XX:TrimNativeHeapInterval=60000\""
            ),
            "{}",
            f.fix
        );
        // A JDK the entrypoint does not plainly run still counts, and says so.
        let o = check(&temurin17().program("/usr/local/bin/app").cmd(&["app"]).facts());
        assert_eq!(o.findings.len(), 1, "{o:?}");
        assert!(o.findings[0]
            .message
            .contains("(present in the image; the entrypoint does not plainly run it)"));
    }

    #[test]
    fn silent_with_a_cap_trimming_or_jemalloc() {
        for fixed in [
            temurin17().env(&["MALLOC_ARENA_MAX=2"]),
            temurin17().env(&["JAVA_TOOL_OPTIONS=-XX:TrimNativeHeapInterval=60000"]),
            temurin17()
                .jemalloc()
                .env(&["LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"]),
        ] {
            let o = check(&fixed.facts());
            assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        }
        // Trimming this JDK refuses (experimental, not unlocked) settles nothing.
        let locked = TestImage::new()
            .temurin("17.0.10", "gnu", "Hotspot")
            .env(&["JAVA_TOOL_OPTIONS=-XX:TrimNativeHeapInterval=60000"])
            .facts();
        assert_eq!(check(&locked).findings.len(), 1);
    }

    #[test]
    fn undecided_on_musl_or_openj9() {
        let f = TestImage::new()
            .temurin("17.0.15", "musl", "Hotspot")
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert_eq!(
            o.undecided.as_deref(),
            Some("the JVM runs on musl, which has no per-thread arenas")
        );
        let f = TestImage::new()
            .temurin("17.0.15", "gnu", "Openj9")
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert_eq!(
            o.undecided.as_deref(),
            Some("the JVM is OpenJ9; this rule judges HotSpot")
        );
    }
}
