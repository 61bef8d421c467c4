use super::java::{anchor_of, jvm_evidence, option_evidence, rewrite, tool_options_with};
use super::{Outcome, Rule};
use crate::facts::java::{cgroup_v2_release, container_blindness, ContainerBlindness, Jvm};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};

pub(crate) const RULE: Rule = Rule {
    id: "jvm-not-container-aware",
    severity: Severity::Warning,
    title: "The JDK sizes its heap from the host, not the container's memory limit",
    doc: include_str!("../../rules/jvm-not-container-aware.md"),
    tags: &["memory", "java", "cgroup", "container"],
    check,
    // The JDK comes with the base image.
    anchor: Anchor::From,
};

fn check(f: &Facts) -> Outcome {
    let Some(j) = &f.java else {
        return Outcome::none();
    };
    if j.jvm == Some(Jvm::OpenJ9) {
        return Outcome::undecided("the JVM is OpenJ9, whose container support this rule does not judge");
    }
    if let Some(why) = &j.buildpack_calculator {
        return Outcome::undecided(format!("the heap is not the image's to judge: {why}"));
    }
    if j.heap_bound().is_some() {
        return Outcome::none();
    }
    // A heap bound may be in a JVM options variable a script sets in a way memlint cannot
    // work out.
    if let Some(why) = &j.options_undecided {
        return Outcome::undecided(why.clone());
    }
    if let Some((false, o)) = j.xx_bool("UseContainerSupport") {
        return Outcome::one(
            RULE.finding(format!(
                "{} turns off container support: the JVM sizes its heap from the host's memory, not the container's limit",
                o.described()
            ))
            .anchor(anchor_of(o))
            .evidence(option_evidence(o))
            .evidence(jvm_evidence(j))
            .evidence(Evidence::plain("no -Xmx, -XX:MaxHeapSize or -XX:MaxRAM bounds the heap"))
            .fix(format!(
                "{}\n# keep container support on; to size the heap, use -XX:MaxRAMPercentage=75.0",
                rewrite(f, j, o, None)
            )),
        );
    }
    let Some(v) = j.parsed_version() else {
        return Outcome::undecided("a JVM is present but its version is unknown");
    };
    let Some(b) = container_blindness(v) else {
        return Outcome::none();
    };
    let version = j.version.as_deref().unwrap_or("");
    let (message, why) = match b {
        ContainerBlindness::NoContainerSupport => (
            format!("Java {version} has no container support: it sizes its heap (a quarter of RAM by default) and its GC threads from the host, not the container's memory limit"),
            b.history(),
        ),
        ContainerBlindness::NoCgroupV2 => (
            format!("Java {version} reads cgroup v1 limits only: on a cgroup v2 host (current Kubernetes nodes, Docker on recent distributions) it sizes its heap from the host's memory"),
            b.history(),
        ),
    };
    let vendor = j.vendor.as_deref().map(|v| format!(" ({v})")).unwrap_or_default();
    Outcome::one(
        RULE.finding(message)
            .evidence(jvm_evidence(j))
            .evidence(Evidence::plain(why))
            .evidence(Evidence::plain("no -Xmx, -XX:MaxHeapSize or -XX:MaxRAM bounds the heap"))
            .fix(format!(
                "# move to Java {} or later of the same vendor{vendor} (a newer base image tag)\n# or bound the heap yourself, e.g. for a 1 GiB limit:\n{}",
                cgroup_v2_release(v),
                tool_options_with(j, "-Xmx768m")
            )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    /// A JDK of `version` (as its release file writes it) at /opt/java/openjdk on Debian,
    /// running `java -jar app.jar`, with `env`.
    fn jdk(version: &str, variant: &str, env: &[&str]) -> TestImage {
        TestImage::new().temurin(version, "gnu", variant).env(env)
    }

    fn hotspot(version: &str, env: &[&str]) -> Outcome {
        check(&jdk(version, "Hotspot", env).facts())
    }

    #[test]
    fn fires_for_jdks_blind_to_the_container() {
        let o = hotspot("1.8.0_181", &[]);
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Warning);
        assert!(
            f.message.starts_with("Java 8.0.181 has no container support: it sizes its heap"),
            "{}",
            f.message
        );
        assert!(f.fix.contains("move to Java 8u372 or later of the same vendor (Eclipse Adoptium)"), "{}", f.fix);
        assert!(f.fix.ends_with("ENV JAVA_TOOL_OPTIONS=\"-Xmx768m\""), "{}", f.fix);
        let o = hotspot("11.0.15", &[]);
        assert_eq!(o.findings.len(), 1, "{o:?}");
        assert!(o.findings[0]
            .message
            .starts_with("Java 11.0.15 reads cgroup v1 limits only"));
        // Container support turned off by hand.
        let o = hotspot("17.0.15", &["JAVA_TOOL_OPTIONS=-XX:-UseContainerSupport"]);
        assert_eq!(o.findings.len(), 1, "{o:?}");
        assert!(o.findings[0].message.starts_with("-XX:-UseContainerSupport (from "));
        assert!(o.findings[0].message.contains("turns off container support"));
    }

    #[test]
    fn silent_for_aware_jdks_or_a_heap_bound() {
        for (version, env) in [
            ("17.0.15", &[][..]),
            ("1.8.0_372", &[]),
            ("11.0.16", &[]),
            ("1.8.0_181", &["JAVA_TOOL_OPTIONS=-Xmx512m"]),
            ("17.0.15", &["JAVA_TOOL_OPTIONS=-XX:-UseContainerSupport -XX:MaxRAM=1g"]),
        ] {
            let o = hotspot(version, env);
            assert!(o.findings.is_empty() && o.undecided.is_none(), "{version} {env:?}: {o:?}");
        }
    }

    #[test]
    fn undecided_on_openj9_or_options_set_at_run_time() {
        let o = check(&jdk("1.8.0_181", "Openj9", &[]).facts());
        assert!(o.findings.is_empty(), "{o:?}");
        assert_eq!(
            o.undecided.as_deref(),
            Some("the JVM is OpenJ9, whose container support this rule does not judge")
        );
        // The manifest takes JAVA_TOOL_OPTIONS from a ConfigMap: it may hold -Xmx.
        let f = jdk("1.8.0_181", "Hotspot", &[]).facts_in(
            "    env:\n    - name: JAVA_TOOL_OPTIONS\n      valueFrom: {configMapKeyRef: {name: jvm, key: options}}\n",
        );
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().contains("JAVA_TOOL_OPTIONS"));
    }
}
