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
                "{} (from {}) turns off container support: the JVM sizes its heap from the host's memory, not the container's limit",
                o.option,
                o.origin()
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
            "container support came in JDK 10 (JDK-8146115) and 8u191",
        ),
        ContainerBlindness::NoCgroupV2 => (
            format!("Java {version} reads cgroup v1 limits only: on a cgroup v2 host (current Kubernetes nodes, Docker on recent distributions) it sizes its heap from the host's memory"),
            "cgroup v2 support: JDK 15 (JDK-8230305), backported to 11.0.16 and 8u372",
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
