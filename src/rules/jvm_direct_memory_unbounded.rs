use super::java::{jvm_evidence, tool_options_with};
use super::{Outcome, Rule};
use crate::facts::java::Jvm;
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};
use crate::units::human_bytes;

pub(crate) const RULE: Rule = Rule {
    id: "jvm-direct-memory-unbounded",
    severity: Severity::Warning,
    title: "Netty's direct buffers may take as much as the heap again, past the container's memory limit",
    doc: include_str!("../../rules/jvm-direct-memory-unbounded.md"),
    tags: &["memory", "kubernetes", "oom", "java"],
    check,
    anchor: Anchor::MemoryLimit,
};

/// What the JVM needs besides the heap and direct buffers (metaspace, code cache, thread
/// stacks, GC structures), as the fix leaves it.
const NATIVE_ROOM: u64 = 250 << 20;
/// A direct-memory cap smaller than this starves Netty: the fix lowers the heap instead.
const MIN_DIRECT: u64 = 64 << 20;

fn check(f: &Facts) -> Outcome {
    let Some(j) = &f.java else {
        return Outcome::none();
    };
    if j.direct_memory_jars.is_empty() {
        return Outcome::none();
    }
    let limited = f
        .container
        .as_ref()
        .and_then(|c| c.limits_memory.as_ref().filter(|q| q.value.value > 0).map(|q| (c, q)));
    let Some((c, limit)) = limited else {
        return Outcome::none();
    };
    if j.jvm == Some(Jvm::OpenJ9) {
        return Outcome::undecided("the JVM is OpenJ9, whose direct-memory default this rule does not judge");
    }
    // Netty's own cap on the buffers it allocates without the JDK's accounting.
    if j.effective().any(|o| o.option.starts_with("-Dio.netty.maxDirectMemory=")) {
        return Outcome::none();
    }
    let Some(direct) = f.memory.commitment("jvm", "direct_memory").next() else {
        return match f.memory.commitment("jvm", "heap").find_map(|h| h.why.clone()) {
            Some(why) => Outcome::undecided(why),
            None => Outcome::none(),
        };
    };
    if direct.status != "default" {
        return Outcome::none();
    }
    let heap = f.memory.commitment("jvm", "heap").next();
    let Some(heap_bytes) = heap.and_then(|h| h.bytes) else {
        return Outcome::undecided("the JVM's heap cap is not known, and direct memory defaults to it");
    };
    let limit_bytes = limit.value.value;
    if u128::from(heap_bytes) * 2 <= u128::from(limit_bytes) {
        return Outcome::none();
    }
    let heap_setting = heap.map(|h| h.setting.clone()).unwrap_or_default();
    let room = limit_bytes.saturating_sub(heap_bytes).saturating_sub(NATIVE_ROOM);
    let fix = if room >= MIN_DIRECT {
        format!(
            "{}\n# heap {} + direct {} + ~250 MiB for metaspace, code cache and threads stay within the {} limit",
            tool_options_with(j, &format!("-XX:MaxDirectMemorySize={}m", room >> 20)),
            human_bytes(heap_bytes),
            human_bytes(room >> 20 << 20),
            limit.value.text
        )
    } else {
        // No room beside this heap: a smaller heap, and direct memory half of it.
        let heap = limit_bytes.saturating_sub(NATIVE_ROOM) / 3 * 2;
        let direct = heap / 2;
        format!(
            "{}\n# the heap cap leaves no room for direct buffers under the {} limit: heap {} + direct {} + ~250 MiB",
            tool_options_with(j, &format!("-Xmx{}m -XX:MaxDirectMemorySize={}m", heap >> 20, direct >> 20)),
            limit.value.text,
            human_bytes(heap >> 20 << 20),
            human_bytes(direct >> 20 << 20)
        )
    };
    let jars = j.direct_memory_jars.iter().take(3).cloned().collect::<Vec<_>>();
    Outcome::one(
        RULE.finding(format!(
            "Netty on the class path pools direct buffers up to the JVM's direct-memory cap, which defaults to the heap cap ({heap_setting}: {}): heap and direct buffers together may take {}, past the container's limits.memory {} ({})",
            human_bytes(heap_bytes),
            human_bytes(heap_bytes.saturating_mul(2)),
            limit.value.text,
            human_bytes(limit_bytes)
        ))
        .evidence(Evidence::naming(
            format!(
                "{} on the class path{}",
                jars.join(", "),
                if j.direct_memory_jars.len() > jars.len() { " and more" } else { "" }
            ),
            jars.clone(),
        ))
        .evidence(Evidence::plain(
            "no -XX:MaxDirectMemorySize and no -Dio.netty.maxDirectMemory",
        ))
        .evidence(jvm_evidence(j))
        .evidence(super::k8s::limit_evidence(c, "memory", limit))
        .fix(fix),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    const RELEASE: &str = "IMPLEMENTOR=\"Debian\"\nJAVA_VERSION=\"17.0.15\"\nLIBC=\"gnu\"\n";

    fn netty(env: &[&str]) -> TestImage {
        TestImage::new()
            .glibc()
            .jdk("/usr/lib/jvm/java-17-openjdk-amd64", RELEASE)
            .file("/usr/share/java/netty-buffer.jar", "PK")
            .file("/usr/share/java/netty-transport.jar", "PK")
            .env(&["PATH=/usr/lib/jvm/java-17-openjdk-amd64/bin:/usr/bin:/bin"])
            .env(env)
            .cmd(&["java", "-cp", "/usr/share/java/*:/app", "Main"])
    }

    fn limit(memory: &str) -> String {
        format!("    resources:\n      limits: {{memory: {memory}}}\n")
    }

    #[test]
    fn heap_twice_past_the_limit_warns_with_a_cap_that_fits() {
        let o = check(&netty(&["JAVA_TOOL_OPTIONS=-Xmx600m"]).facts_in(&limit("1Gi")));
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.message.contains("-Xmx600m (from JAVA_TOOL_OPTIONS): 600 MiB"), "{}", f.message);
        assert!(f.fix.starts_with("ENV JAVA_TOOL_OPTIONS=\"-Xmx600m -XX:MaxDirectMemorySize=174m\""), "{}", f.fix);
        // The cap, or Netty's own, silences it; so does a heap of half the limit.
        for env in [
            "JAVA_TOOL_OPTIONS=-Xmx600m -XX:MaxDirectMemorySize=174m",
            "JAVA_TOOL_OPTIONS=-Xmx600m -Dio.netty.maxDirectMemory=134217728",
            "JAVA_TOOL_OPTIONS=-Xmx512m",
        ] {
            let o = check(&netty(&[env]).facts_in(&limit("1Gi")));
            assert!(o.findings.is_empty() && o.undecided.is_none(), "{env}: {o:?}");
        }
        // A heap that leaves no room: a smaller heap too.
        let o = check(&netty(&["JAVA_TOOL_OPTIONS=-Xmx900m"]).facts_in(&limit("1Gi")));
        assert!(o.sole_finding().fix.contains("-Xmx516m -XX:MaxDirectMemorySize=258m"), "{}", o.sole_finding().fix);
    }

    #[test]
    fn silent_without_netty_or_without_a_limit() {
        let plain = TestImage::new()
            .glibc()
            .jdk("/usr/lib/jvm/java-17-openjdk-amd64", RELEASE)
            .env(&["PATH=/usr/lib/jvm/java-17-openjdk-amd64/bin:/usr/bin:/bin", "JAVA_TOOL_OPTIONS=-Xmx900m"])
            .cmd(&["java", "-jar", "/srv/app.jar"]);
        assert!(check(&plain.facts_in(&limit("1Gi"))).findings.is_empty());
        assert!(check(&netty(&["JAVA_TOOL_OPTIONS=-Xmx900m"]).facts()).findings.is_empty());
        // HotSpot's default heap is a quarter of the limit: twice that fits.
        assert!(check(&netty(&[]).facts_in(&limit("1Gi"))).findings.is_empty());
    }
}
