use super::java::{anchor_of, jvm_evidence, option_evidence, rewrite};
use super::{Outcome, Rule};
use crate::facts::java::{
    trim_native_heap_history, trim_native_heap_product_release, JavaFacts, JavaOption, JavaVersion, Jvm, Refusal, CONTAINER_SUPPORT_JDK8,
    LAUNCHER_VARIABLES,
};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Finding, Severity};

pub(crate) const RULE: Rule = Rule {
    id: "jvm-flag-incompatible",
    severity: Severity::Error,
    title: "A JVM option makes this JDK refuse to start",
    doc: include_str!("../../rules/jvm-flag-incompatible.md"),
    tags: &["memory", "java", "startup"],
    check,
    // Each finding names the ENV or command that set its option.
    anchor: Anchor::Env(LAUNCHER_VARIABLES),
};

fn check(f: &Facts) -> Outcome {
    let Some(j) = &f.java else {
        return Outcome::none();
    };
    if j.jvm == Some(Jvm::OpenJ9) {
        return Outcome::undecided("the JVM is OpenJ9, which takes other options than HotSpot");
    }
    let Some(v) = j.parsed_version() else {
        return Outcome::undecided("a JVM is present but its version is unknown");
    };
    let mut findings = Vec::new();
    for (i, o) in j.options.iter().enumerate().filter(|(_, o)| o.ignored.is_none()) {
        let Some(name) = o.xx_name() else { continue };
        let Some(refusal) = j.refusal(v, i) else { continue };
        findings.push(finding(f, j, v, o, name, refusal));
    }
    findings.into()
}

fn finding(f: &Facts, j: &JavaFacts, v: JavaVersion, o: &JavaOption, name: &str, refusal: Refusal) -> Finding {
    let version = j.version.as_deref().unwrap_or("");
    // HotSpot names the option without `-XX:` and its `+`/`-`.
    let written = o.option.trim_start_matches("-XX:").trim_start_matches(['+', '-']);
    let said = match refusal {
        Refusal::Unrecognized => format!("Unrecognized VM option '{written}'"),
        Refusal::Experimental => format!(
            "VM option '{name}' is experimental and must be enabled via -XX:+UnlockExperimentalVMOptions"
        ),
        Refusal::ImproperlySpecified => format!("Improperly specified VM option '{written}'"),
    };
    let message = format!(
        "{} stops Java {version} from starting: \"{said}\"",
        o.described()
    );
    let mut ev = vec![option_evidence(o), jvm_evidence(j)];
    if matches!(refusal, Refusal::Experimental) && j.ignores_unrecognized().is_some() {
        ev.push(Evidence::plain(
            "-XX:+IgnoreUnrecognizedVMOptions does not cover a locked experimental flag (JDK 9 and later)",
        ));
    }
    let fix = match (name, refusal) {
        ("UseCGroupMemoryLimitForHeap", Refusal::Unrecognized) if v.feature >= 11 => format!(
            "{}\n# JDK {} reads the container's memory limit by itself (UseContainerSupport is on by default); size the heap with -XX:MaxRAMPercentage=75.0 if you need to",
            rewrite(f, j, o, None),
            v.feature
        ),
        (_, Refusal::ImproperlySpecified) => {
            let value = o.xx_value().unwrap_or("");
            let fixed = format!("-XX:{name}={value}.0");
            format!("{}\n# JDK 8 reads {name} as a double: write {value}.0", rewrite(f, j, o, Some(&fixed)))
        }
        ("TrimNativeHeapInterval", Refusal::Experimental) => format!(
            "{}\n# or move to {} or later, where TrimNativeHeapInterval is a product flag (JDK-8325496)",
            unlock_fix(f, j, o),
            trim_native_heap_product_release(v)
        ),
        ("TrimNativeHeapInterval", _) => format!(
            "{}\n# TrimNativeHeapInterval is {}: move to {} or later to use it",
            rewrite(f, j, o, None),
            trim_native_heap_history(),
            trim_native_heap_product_release(v)
        ),
        (_, Refusal::Experimental) => unlock_fix(f, j, o),
        _ if v.feature == 8 => format!(
            "{}\n# or move to {CONTAINER_SUPPORT_JDK8} or later of the same vendor{}, which has {name} (container support, JDK-8146115)",
            rewrite(f, j, o, None),
            j.vendor.as_deref().map(|v| format!(" ({v})")).unwrap_or_default()
        ),
        _ => rewrite(f, j, o, None),
    };
    RULE.finding(message)
        .anchor(anchor_of(o))
        .evidence_all(ev)
        .fix(fix)
}

/// The same source with `-XX:+UnlockExperimentalVMOptions` put before the option.
fn unlock_fix(f: &Facts, j: &JavaFacts, o: &JavaOption) -> String {
    let both = format!("-XX:+UnlockExperimentalVMOptions {}", o.option);
    rewrite(f, j, o, Some(&both))
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    /// eclipse-temurin of `version` (as its release file writes it: `17.0.15`, `1.8.0_412`) on
    /// Debian, running `java -jar app.jar` with `env`.
    fn temurin(version: &str, variant: &str, env: &[&str]) -> Outcome {
        check(&TestImage::new().temurin(version, "gnu", variant).env(env).facts())
    }

    fn hotspot(version: &str, env: &[&str]) -> Outcome {
        temurin(version, "Hotspot", env)
    }

    #[test]
    fn fires_for_an_option_this_jdk_does_not_know() {
        let o = hotspot("17.0.15", &["JAVA_TOOL_OPTIONS=-XX:+UseCGroupMemoryLimitForHeap"]);
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Error);
        assert!(f.message.starts_with("-XX:+UseCGroupMemoryLimitForHeap (from "), "{}", f.message);
        assert!(
            f.message.ends_with(
                "stops Java 17.0.15 from starting: \"Unrecognized VM option 'UseCGroupMemoryLimitForHeap'\""
            ),
            "{}",
            f.message
        );
        assert!(f.fix.contains("remove `ENV JAVA_TOOL_OPTIONS`"), "{}", f.fix);
        assert_eq!(f.anchor, Anchor::Env(&["JAVA_TOOL_OPTIONS"]));
    }

    #[test]
    fn fires_for_an_integer_percentage_on_jdk_8() {
        let o = hotspot("1.8.0_412", &["JAVA_TOOL_OPTIONS=-XX:MaxRAMPercentage=75"]);
        assert_eq!(o.findings.len(), 1, "{o:?}");
        let f = &o.findings[0];
        assert!(
            f.message.ends_with(
                "stops Java 8.0.412 from starting: \"Improperly specified VM option 'MaxRAMPercentage=75'\""
            ),
            "{}",
            f.message
        );
        assert!(f.fix.starts_with("ENV JAVA_TOOL_OPTIONS=\"-XX:MaxRAMPercentage=75.0\""), "{}", f.fix);
    }

    #[test]
    fn fires_for_a_locked_experimental_flag() {
        let o = hotspot("17.0.10", &["JAVA_TOOL_OPTIONS=-XX:TrimNativeHeapInterval=60000"]);
        assert_eq!(o.findings.len(), 1, "{o:?}");
        let f = &o.findings[0];
        assert!(f.message.ends_with(
            "\"VM option 'TrimNativeHeapInterval' is experimental and must be enabled via -XX:+UnlockExperimentalVMOptions\""
        ));
        assert!(f
            .fix
            .contains("-XX:+UnlockExperimentalVMOptions -XX:TrimNativeHeapInterval=60000"));
        assert!(f.fix.contains("17.0.12"), "{}", f.fix);
    }

    #[test]
    fn silent_for_options_this_jdk_takes() {
        for (version, options) in [
            ("17.0.15", "JAVA_TOOL_OPTIONS=-XX:MaxRAMPercentage=75.0"),
            ("1.8.0_412", "JAVA_TOOL_OPTIONS=-XX:MaxRAMPercentage=75.0"),
            ("17.0.15", "JAVA_TOOL_OPTIONS=-XX:TrimNativeHeapInterval=60000"),
            (
                "17.0.10",
                "JAVA_TOOL_OPTIONS=-XX:+UnlockExperimentalVMOptions -XX:TrimNativeHeapInterval=60000",
            ),
            // JDK 17 ignores what it does not know when told to.
            (
                "17.0.15",
                "JAVA_TOOL_OPTIONS=-XX:+IgnoreUnrecognizedVMOptions -XX:+UseCGroupMemoryLimitForHeap",
            ),
        ] {
            let o = hotspot(version, &[options]);
            assert!(o.findings.is_empty() && o.undecided.is_none(), "{version} {options}: {o:?}");
        }
    }

    #[test]
    fn undecided_on_openj9_or_an_unknown_version() {
        let o = temurin("17.0.15", "Openj9", &["JAVA_TOOL_OPTIONS=-XX:+UseCGroupMemoryLimitForHeap"]);
        assert!(o.findings.is_empty(), "{o:?}");
        assert_eq!(
            o.undecided.as_deref(),
            Some("the JVM is OpenJ9, which takes other options than HotSpot")
        );
        let o = hotspot("", &["JAVA_TOOL_OPTIONS=-XX:+UseCGroupMemoryLimitForHeap"]);
        assert!(o.findings.is_empty(), "{o:?}");
        assert_eq!(
            o.undecided.as_deref(),
            Some("a JVM is present but its version is unknown")
        );
    }
}
