use super::{Outcome, Rule};
use crate::facts::java::launcher::{Launcher, LauncherHeap, Vendor};
use crate::facts::java::OptionSource;
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};
use crate::units::human_bytes;

pub(crate) const RULE: Rule = Rule {
    id: "launcher-heap-vs-limit",
    severity: Severity::Error,
    title: "A vendor launcher (Elasticsearch, OpenSearch, Kafka, Cassandra) sets a heap that does not fit the container's memory limit",
    doc: include_str!("../../rules/launcher-heap-vs-limit.md"),
    tags: &["memory", "kubernetes", "oom", "java"],
    check,
    anchor: Anchor::MemoryLimit,
};

/// Cassandra's formula on any node of 2 GiB or more: at least 1024 MB.
const CASSANDRA_NODE_HEAP_FLOOR: u64 = 1024 << 20;

fn check(f: &Facts) -> Outcome {
    let Some(l) = f.java.as_ref().and_then(|j| j.launcher.as_ref()) else {
        return Outcome::none();
    };
    if let LauncherHeap::Refuses { why } = &l.heap {
        return Outcome::one(
            RULE.finding(format!("{}'s launcher {} does not start the JVM: {why}", l.vendor.name(), l.script))
                .anchor(Anchor::Env(&["MAX_HEAP_SIZE", "HEAP_NEWSIZE"]))
                .evidence(Evidence::naming(format!("{} runs {}", l.vendor.name(), l.script), [l.script.clone()]))
                .fix("# set both, or neither:\nENV MAX_HEAP_SIZE=512M HEAP_NEWSIZE=128M"),
        );
    }
    let limited = f
        .container
        .as_ref()
        .and_then(|c| c.limits_memory.as_ref().filter(|q| q.value.value > 0).map(|q| (c, q)));
    let Some((c, limit)) = limited else {
        return Outcome::none();
    };
    let limit_bytes = limit.value.value;
    let limit_text = format!("limits.memory {} ({})", limit.value.text, human_bytes(limit_bytes));
    let Some(heap) = f.memory.commitment("jvm", "heap").find(|h| h.launcher.is_some()) else {
        // An option outside the launcher (`_JAVA_OPTIONS`) decides the heap: heap-exceeds-limit's.
        return Outcome::none();
    };
    let guidance = l.vendor.guidance_percent();
    let finding = match (&l.heap, heap.status, heap.bytes) {
        (LauncherHeap::FromNode, _, _) => {
            let f = RULE.finding(format!(
                "{} sizes Cassandra's heap from the node's memory (free -m), not the container's {limit_text}: max(min(1/2 RAM, 1024 MB), min(1/4 RAM, 8192 MB)), at least 1 GiB on any node of 2 GiB or more and up to 8 GiB",
                heap_source(l)
            ));
            if limit_bytes > CASSANDRA_NODE_HEAP_FLOOR {
                f.severity(Severity::Warning)
            } else {
                f
            }
        }
        (_, "set", Some(bytes)) if bytes >= limit_bytes => RULE.finding(format!(
            "{} caps {}'s heap at {}, which reaches the container's {limit_text}: metaspace, thread stacks, direct buffers and the page cache come on top and the container is OOM-killed",
            heap.setting,
            l.vendor.name(),
            human_bytes(bytes)
        )),
        (_, "set", Some(bytes)) if u128::from(bytes) * 100 > u128::from(limit_bytes) * u128::from(guidance) => RULE
            .finding(format!(
                "{} gives {}'s heap {} % of the container's {limit_text}, more than the {guidance} % its guidance leaves",
                heap.setting,
                l.vendor.name(),
                u128::from(bytes) * 100 / u128::from(limit_bytes)
            ))
            .severity(Severity::Warning),
        _ => return Outcome::none(),
    };
    Outcome::one(
        finding
            .evidence(Evidence::naming(
                format!("{} starts the JVM through {}", l.vendor.name(), l.script),
                [l.script.clone()],
            ))
            .evidence(Evidence::plain(format!("heap: {}", heap.setting)))
            .evidence(super::k8s::limit_evidence(c, "memory", limit))
            .fix(fix(f, l, limit_bytes)),
    )
}

fn heap_source(l: &Launcher) -> String {
    format!("{}'s launcher {}", l.vendor.name(), l.script)
}

/// The heap the guidance leaves under `limit`, in MiB.
fn heap_mib(vendor: Vendor, limit: u64) -> u64 {
    ((u128::from(limit) * u128::from(vendor.guidance_percent()) / 100) >> 20) as u64
}

/// The variable's value with the heap replaced, keeping its other words.
fn fix(f: &Facts, l: &Launcher, limit: u64) -> String {
    let mib = heap_mib(l.vendor, limit);
    let var = l.vendor.heap_variable();
    if l.vendor == Vendor::Cassandra {
        let new = (mib / 4).max(1);
        return format!(
            "ENV MAX_HEAP_SIZE={mib}M HEAP_NEWSIZE={new}M\n# or in the container:\n# env:\n# - {{name: MAX_HEAP_SIZE, value: \"{mib}M\"}}\n# - {{name: HEAP_NEWSIZE, value: \"{new}M\"}}\n# {mib}M is {} % of the limit; set both (cassandra-env.sh stops on one alone)",
            l.vendor.guidance_percent()
        );
    }
    let heap = match l.vendor {
        Vendor::Kafka => format!("-Xmx{mib}m -Xms{mib}m"),
        _ => format!("-Xms{mib}m -Xmx{mib}m"),
    };
    // The variable's other options, as the launcher facts read them.
    let kept: Vec<&str> = l
        .options
        .iter()
        .filter(|o| o.variable.as_deref() == Some(var) && o.source == OptionSource::EnvVar)
        .map(|o| o.option.as_str())
        .filter(|w| !w.starts_with("-Xmx") && !w.starts_with("-Xms") && !w.starts_with("-XX:MaxHeapSize"))
        .collect();
    let value = if kept.is_empty() {
        heap
    } else {
        format!("{} {heap}", kept.join(" "))
    };
    let mut fix = super::fixes::set_env_quoted(f, var, Some(&value));
    if fix.starts_with("ENV ") {
        fix.push_str(&format!("\n# or in the container:\n# env:\n# - name: {var}\n#   value: \"{value}\""));
    }
    fix.push_str(&format!(
        "\n# {mib} MiB is {} % of the limit, the share {}'s guidance leaves the heap",
        l.vendor.guidance_percent(),
        l.vendor.name()
    ));
    fix
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    const RELEASE: &str = "IMPLEMENTOR=\"Eclipse Adoptium\"\nJAVA_VERSION=\"21.0.5\"\nLIBC=\"gnu\"\n";

    /// OpenSearch 2.x's layout: its launcher, its bundled JDK, its shipped heap lines.
    fn opensearch(env: &[&str]) -> TestImage {
        TestImage::new()
            .glibc()
            .jdk("/usr/share/opensearch/jdk", RELEASE)
            .file("/usr/share/opensearch/bin/opensearch", "#!/bin/bash\nexec \"$JAVA\" $OPENSEARCH_JAVA_OPTS -cp \"$OPENSEARCH_CLASSPATH\" org.opensearch.bootstrap.OpenSearch \"$@\"\n")
            .file("/usr/share/opensearch/config/jvm.options", "## JVM configuration\n-Xms1g\n-Xmx1g\n8-10:-XX:+UseConcMarkSweepGC\n11-:-XX:+UseG1GC\n")
            .file("/usr/share/opensearch/opensearch-docker-entrypoint.sh", "#!/bin/bash\nexec \"$@\"\n")
            .env(env)
            .entrypoint(&["/usr/share/opensearch/opensearch-docker-entrypoint.sh"])
            .cmd(&["opensearch"])
    }

    fn limit(memory: &str) -> String {
        format!("    resources:\n      limits: {{memory: {memory}}}\n")
    }

    #[test]
    fn opensearch_shipped_heap_under_1gi_is_an_error_with_the_variable_as_fix() {
        let f = opensearch(&[]).facts_in(&limit("1Gi"));
        let o = check(&f);
        let finding = o.sole_finding();
        assert_eq!(finding.severity, Severity::Error);
        assert!(finding.message.starts_with("-Xmx1g (from /usr/share/opensearch/config/jvm.options) caps OpenSearch's heap at 1 GiB"), "{}", finding.message);
        assert!(finding.fix.starts_with("ENV OPENSEARCH_JAVA_OPTS=\"-Xms512m -Xmx512m\""), "{}", finding.fix);
        // One finding per heap: heap-exceeds-limit leaves it to this rule.
        assert!((super::super::heap_exceeds_limit::RULE.check)(&f).findings.is_empty());
        // The launcher's ergonomics bound direct memory to half the heap.
        let direct = f.memory.commitment("jvm", "direct_memory").next().and_then(|c| c.bytes);
        assert_eq!(direct, Some(512 << 20));
        // The fix silences it.
        let fixed = opensearch(&["OPENSEARCH_JAVA_OPTS=-Xms512m -Xmx512m"]).facts_in(&limit("1Gi"));
        let o = check(&fixed);
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        // An image alone: nothing to judge.
        assert!(check(&opensearch(&[]).facts()).findings.is_empty());
    }

    #[test]
    fn kafka_default_and_cassandra_pairs() {
        let kafka = |env: &[&str]| {
            TestImage::new()
                .temurin("17.0.15", "gnu", "Hotspot")
                .file("/opt/kafka/bin/kafka-server-start.sh", "#!/bin/bash\nif [ \"x$KAFKA_HEAP_OPTS\" = \"x\" ]; then\n    export KAFKA_HEAP_OPTS=\"-Xmx1G -Xms1G\"\nfi\nexec $base_dir/kafka-run-class.sh $EXTRA_ARGS kafka.Kafka \"$@\"\n")
                .env(env)
                .cmd(&["/opt/kafka/bin/kafka-server-start.sh", "/opt/kafka/config/server.properties"])
        };
        let o = check(&kafka(&[]).facts_in(&limit("1280Mi")));
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Warning, "{f:?}");
        assert!(f.message.contains("-Xmx1G (from KAFKA_HEAP_OPTS in /opt/kafka/bin/kafka-server-start.sh)"), "{}", f.message);
        assert!(f.fix.starts_with("ENV KAFKA_HEAP_OPTS=\"-Xmx960m -Xms960m\""), "{}", f.fix);
        assert!(check(&kafka(&["KAFKA_HEAP_OPTS=-Xmx512m -Xms512m"]).facts_in(&limit("1280Mi"))).findings.is_empty());

        let env_sh = "#MAX_HEAP_SIZE=\"4G\"\n#HEAP_NEWSIZE=\"800M\"\nif [ \"x$MALLOC_ARENA_MAX\" = \"x\" ] ; then\n    export MALLOC_ARENA_MAX=4\nfi\n";
        let cassandra = |env: &[&str]| {
            TestImage::new()
                .temurin("11.0.25", "gnu", "Hotspot")
                .file("/opt/cassandra/bin/cassandra", "#!/bin/sh\n. \"$CASSANDRA_CONF/cassandra-env.sh\"\nexec $NUMACTL \"$JAVA\" $JVM_OPTS $cassandra_parms -cp \"$CLASSPATH\" $props \"$class\"\n")
                .file("/etc/cassandra/cassandra-env.sh", env_sh)
                .file("/usr/local/bin/docker-entrypoint.sh", "#!/bin/bash\nexec \"$@\"\n")
                .env(env)
                .entrypoint(&["docker-entrypoint.sh"])
                .cmd(&["cassandra", "-f"])
        };
        let facts = cassandra(&[]).facts_in(&limit("512Mi"));
        let o = check(&facts);
        assert_eq!(o.sole_finding().severity, Severity::Error, "{o:?}");
        assert!(o.sole_finding().fix.starts_with("ENV MAX_HEAP_SIZE=256M HEAP_NEWSIZE=64M"), "{}", o.sole_finding().fix);
        // The script's arena cap reaches the allocator facts.
        assert_eq!(facts.env.get("MALLOC_ARENA_MAX"), Some("4"));
        assert!(facts.allocator.arena_cap.is_some());
        let o = check(&cassandra(&[]).facts_in(&limit("4Gi")));
        assert_eq!(o.sole_finding().severity, Severity::Warning);
        // The pair within guidance: silent; one alone: the script stops.
        assert!(check(&cassandra(&["MAX_HEAP_SIZE=256M", "HEAP_NEWSIZE=64M"]).facts_in(&limit("512Mi"))).findings.is_empty());
        let o = check(&cassandra(&["MAX_HEAP_SIZE=256M"]).facts());
        assert!(o.sole_finding().message.contains("in pairs"), "{o:?}");
    }
}
