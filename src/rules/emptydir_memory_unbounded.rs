use super::k8s::{container_name, quantity_text};
use super::{Outcome, Rule};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Finding, Severity};
use crate::k8s::Mount;
use crate::units::human_bytes;

pub(crate) const RULE: Rule = Rule {
    id: "emptydir-memory-unbounded",
    severity: Severity::Warning,
    title: "A memory-backed emptyDir the container writes has no bound below its memory limit",
    doc: include_str!("../../rules/emptydir-memory-unbounded.md"),
    tags: &["kubernetes", "tmpfs", "oom"],
    check,
    anchor: Anchor::Container,
};

fn check(f: &Facts) -> Outcome {
    let Some(c) = &f.container else {
        return Outcome::none();
    };
    let limit = c.limits_memory.as_ref();
    // The heap caps the budget knows, in bytes: what the program takes besides the tmpfs.
    let heaps: Vec<_> = f
        .memory
        .runtimes
        .iter()
        .filter(|r| r.what == "heap" && r.status != "undecided")
        .filter_map(|r| r.bytes.map(|b| (r, b)))
        .collect();
    let mut findings = Vec::new();
    for (i, m) in c.mounts.iter().enumerate() {
        if !m.memory_backed || m.read_only {
            continue;
        }
        let at = where_(m);
        let volume = format!("emptyDir `{}` (medium: Memory)", m.volume);
        let size = m.size_limit.as_ref();
        let finding = match (size, limit) {
            (None, Some(l)) => RULE.finding(format!(
                "{volume}, mounted writable at {}, has no sizeLimit: the tmpfs is sized from the node, its pages count against the container's limits.memory {}, and a pod that fills it is OOM-killed again on every restart",
                m.path, l.value.text
            )),
            (None, None) => RULE.finding(format!(
                "{volume}, mounted writable at {}, has no sizeLimit and {} has no limits.memory: the tmpfs is sized from the node's memory, and what is written there stays in the node's memory until the pod goes",
                m.path,
                container_name(c)
            )),
            (Some(s), None) => RULE.finding(format!(
                "{volume}, mounted writable at {}, has sizeLimit {} but {} has no limits.memory: its pages are charged to a container the node cannot bound, and evicted only under node memory pressure",
                m.path,
                s.text,
                container_name(c)
            )),
            (Some(s), Some(l)) if s.value >= l.value.value => RULE.finding(format!(
                "{volume}, mounted writable at {}, has sizeLimit {}, at or above the container's limits.memory {}: filling it OOM-kills the container before the kubelet's sizeLimit eviction, and again on every restart",
                m.path, s.text, l.value.text
            )),
            (Some(s), Some(l)) => {
                let heap: u64 = heaps.iter().map(|(_, b)| *b).fold(0u64, u64::saturating_add);
                if heaps.is_empty() || s.value.saturating_add(heap) <= l.value.value {
                    continue;
                }
                let caps = heaps
                    .iter()
                    .map(|(r, b)| format!("{} {} {} ({})", r.runtime, r.what, human_bytes(*b), r.setting))
                    .collect::<Vec<_>>()
                    .join(", ");
                RULE.finding(format!(
                    "{volume}, mounted writable at {}, may hold sizeLimit {} beside a heap cap of {}, more than the container's limits.memory {}: a full tmpfs leaves the heap short",
                    m.path,
                    s.text,
                    human_bytes(heap),
                    l.value.text
                ))
                .severity(Severity::Note)
                .evidence(Evidence::plain(format!("heap caps: {caps}")))
            }
        };
        findings.push(finish(finding, c, m, i, &at, limit.map(|l| l.value.value)));
    }
    findings.into()
}

/// `at lines 12 (volume) and 30 (mount)`.
fn where_(m: &Mount) -> String {
    match m.volume_line {
        Some(v) => format!("volume at line {v}, mount at line {}", m.mount_line),
        None => format!("mount at line {}", m.mount_line),
    }
}

fn finish(f: Finding, c: &crate::k8s::Container, m: &Mount, i: usize, at: &str, limit: Option<u64>) -> Finding {
    let size = match (&m.size_limit, limit) {
        (Some(s), Some(l)) if s.value < l => s.value,
        (_, Some(l)) => (l / 4).max(1 << 20),
        (Some(s), None) => s.value,
        (None, None) => 256 << 20,
    };
    let size_text = quantity_text(size);
    let raise = match limit {
        Some(l) => format!(
            "# the limit holds the program and the full tmpfs: raise limits.memory if {} is not enough for the program beside {size_text}",
            quantity_text(l)
        ),
        None => format!(
            "# and give the container a memory limit that holds the program and the full tmpfs:\n        resources:\n          limits:\n            memory: …   # what the program needs + {size_text}"
        ),
    };
    f.evidence(Evidence::plain(format!(
        "{}: volume `{}` at {}{} ({at})",
        container_name(c),
        m.volume,
        m.path,
        m.size_limit
            .as_ref()
            .map(|s| format!(", sizeLimit {}", s.text))
            .unwrap_or_default()
    )))
    .anchor(Anchor::Volume(i))
    .fix(format!(
        "      volumes:\n      - name: {}\n        emptyDir:\n          medium: Memory\n          sizeLimit: {size_text}   # below limits.memory: the kubelet evicts the pod past it\n{raise}",
        m.volume
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    fn pod(resources: &str, volume: &str, mount_extra: &str) -> String {
        format!(
            "{resources}    volumeMounts:\n    - name: cache\n      mountPath: /cache\n{mount_extra}  volumes:\n  - name: cache\n    emptyDir:\n      medium: Memory\n{volume}"
        )
    }

    const LIMIT: &str = "    resources:\n      limits: {memory: 1Gi}\n";

    #[test]
    fn no_size_limit_fires_on_the_volume_line() {
        let f = TestImage::new().glibc().facts_in(&pod(LIMIT, "", ""));
        let o = check(&f);
        let finding = o.sole_finding();
        assert_eq!(finding.severity, Severity::Warning);
        assert_eq!(finding.anchor, Anchor::Volume(0));
        assert!(finding.message.contains("has no sizeLimit"), "{}", finding.message);
        assert!(finding.fix.contains("sizeLimit: 256Mi"), "{}", finding.fix);
        assert!(finding.has_evidence("Pod/p container `c`: volume `cache` at /cache (volume at line 14, mount at line 11)"), "{:?}", finding.evidence);
    }

    #[test]
    fn bounds_at_or_past_the_limit_or_no_limit() {
        let at_limit = check(&TestImage::new().glibc().facts_in(&pod(LIMIT, "      sizeLimit: 1Gi\n", "")));
        assert!(at_limit.sole_finding().message.contains("at or above"));
        let no_limit = check(&TestImage::new().glibc().facts_in(&pod("", "      sizeLimit: 256Mi\n", "")));
        assert!(no_limit.sole_finding().message.contains("no limits.memory"));
        // Bounded below the limit, read-only, or an image alone: silent.
        for o in [
            check(&TestImage::new().glibc().facts_in(&pod(LIMIT, "      sizeLimit: 256Mi\n", ""))),
            check(&TestImage::new().glibc().facts_in(&pod(LIMIT, "", "      readOnly: true\n"))),
            check(&TestImage::new().glibc().facts()),
        ] {
            assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        }
    }

    #[test]
    fn a_note_when_the_bound_and_a_known_heap_pass_the_limit() {
        let jvm = TestImage::new()
            .glibc()
            .jdk("/usr/lib/jvm/java-17-openjdk-amd64", "JAVA_VERSION=\"17.0.15\"\nIMPLEMENTOR=\"Debian\"\n")
            .env(&["JAVA_TOOL_OPTIONS=-Xmx768m"])
            .cmd(&["java", "-jar", "/app.jar"]);
        let o = check(&jvm.facts_in(&pod(LIMIT, "      sizeLimit: 512Mi\n", "")));
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Note, "{f:?}");
        assert!(f.message.contains("heap cap of 768 MiB"), "{}", f.message);
        let o = check(&jvm.facts_in(&pod(LIMIT, "      sizeLimit: 128Mi\n", "")));
        assert!(o.findings.is_empty(), "{o:?}");
    }
}
