use super::k8s::container_name;
use super::{Outcome, Rule};
use crate::facts::memory::{Amount, Sizing};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};

pub(crate) const RULE: Rule = Rule {
    id: "heap-auto-without-limit",
    severity: Severity::Note,
    title: "A runtime sizes its heap from the memory it sees, in a container with no memory limit",
    doc: include_str!("../../rules/heap-auto-without-limit.md"),
    tags: &["kubernetes", "heap", "jvm", "node", "dotnet", "go"],
    check,
    anchor: Anchor::Container,
};

/// The Go module that sets GOMEMLIMIT from the cgroup's limit at start.
const AUTOMEMLIMIT: &str = "github.com/KimMachineGun/automemlimit";

fn check(f: &Facts) -> Outcome {
    let Some(c) = &f.container else {
        return Outcome::none();
    };
    if f.memory.limit_bytes().is_some() {
        return Outcome::none();
    }
    let mut sized: Vec<String> = Vec::new();
    let es_auto = f.search_engine.as_ref().filter(|s| s.heap_sized_automatically());
    if let Some(es) = es_auto {
        sized.push(format!(
            "Elasticsearch {} sizes its heap at start from the memory it sees (half of it, up to 31 GiB): no -Xmx in ES_JAVA_OPTS, jvm.options or jvm.options.d",
            es.version.as_deref().unwrap_or("")
        ));
    }
    for r in &f.memory.runtimes {
        if r.what != "heap" || r.status == "undecided" {
            continue;
        }
        let from_memory = r.percent_of_limit.is_some() || (r.status == "default" && r.sizing == Sizing::Bytes);
        match r.runtime {
            // Elasticsearch's launcher passes the JVM the -Xmx it computes: said once above.
            "jvm" if es_auto.is_none() && from_memory && r.sizing != Sizing::ShareOfMaxRam => {
                sized.push(format!("the JVM's heap: {}", r.setting))
            }
            "dotnet" if from_memory => sized.push(format!("the .NET GC's heap: {}", r.setting)),
            "node" if r.status == "default" => {
                let v = f.node.as_ref().and_then(|n| n.parsed_version());
                if v.as_ref().is_some_and(|v| v.major >= 20) {
                    sized.push(format!(
                        "Node.js {}: {}",
                        f.node.as_ref().and_then(|n| n.version.as_deref()).unwrap_or(""),
                        r.setting
                    ));
                }
            }
            _ => {}
        }
    }
    let gomemlimit_unset = f
        .memory
        .commitment("go", "gomemlimit")
        .all(|g| g.status == "default");
    for b in &f.go.binaries {
        if gomemlimit_unset && b.deps.iter().any(|d| d.path == AUTOMEMLIMIT) {
            sized.push(format!(
                "{} sets GOMEMLIMIT from the limit it finds ({AUTOMEMLIMIT}): with none, it sets nothing, or with its system fallback a share of the node's memory",
                b.path
            ));
        }
    }
    if sized.is_empty() {
        return Outcome::none();
    }
    let request = match &f.memory.request {
        Amount::Set { text, .. } => Some(text.clone()),
        Amount::Undecided { .. } => None,
    };
    let limit = request.clone().unwrap_or_else(|| "1Gi".into());
    let finding = RULE
        .finding(format!(
            "{} sets no limits.memory, and {} the memory it sees: in a pod that is the node's, so the heap grows past what the pod was scheduled for and the node evicts or OOM-kills it",
            container_name(c),
            if sized.len() == 1 { "a runtime sizes its heap from" } else { "runtimes size their heaps from" }
        ))
        .evidence_all(sized.into_iter().map(Evidence::plain))
        .evidence(Evidence::plain(match &request {
            Some(r) => format!("resources.requests.memory {r}, and no resources.limits.memory"),
            None => "no resources.limits.memory and no resources.requests.memory".into(),
        }))
        .fix(format!(
            "        resources:\n          requests:\n            memory: {limit}\n          limits:\n            memory: {limit}   # what the program needs at its peak{}",
            if request.is_some() { ": here its request" } else { "" }
        ));
    Outcome::one(finding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    fn jvm(options: &str) -> TestImage {
        TestImage::new()
            .glibc()
            .jdk("/usr/lib/jvm/java-17-openjdk-amd64", "JAVA_VERSION=\"17.0.15\"\nIMPLEMENTOR=\"Debian\"\n")
            .env(&[&format!("JAVA_TOOL_OPTIONS={options}")])
            .cmd(&["/usr/lib/jvm/java-17-openjdk-amd64/bin/java", "-jar", "/app.jar"])
    }

    #[test]
    fn a_jvm_percentage_or_default_with_no_limit() {
        let o = check(&jvm("-XX:MaxRAMPercentage=75.0").facts_in("    resources:\n      requests: {memory: 512Mi}\n"));
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Note);
        assert!(f.fix.contains("memory: 512Mi"), "{}", f.fix);
        let o = check(&jvm("-Dx=y").facts_in(""));
        assert_eq!(o.findings.len(), 1, "{o:?}");
    }

    #[test]
    fn silent_with_a_limit_a_fixed_heap_or_alone() {
        for o in [
            check(&jvm("-XX:MaxRAMPercentage=75.0").facts_in("    resources:\n      limits: {memory: 1Gi}\n")),
            check(&jvm("-Xmx512m").facts_in("")),
            check(&jvm("-XX:MaxRAMPercentage=75.0").facts()),
        ] {
            assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        }
    }

    #[test]
    fn node_20_but_not_18_and_elasticsearch() {
        let node = |v: &str| TestImage::new().glibc().node(v).cmd(&["node", "server.js"]);
        assert_eq!(check(&node("20.11.1").facts_in("")).findings.len(), 1);
        assert!(check(&node("18.20.8").facts_in("")).findings.is_empty());
        let es = TestImage::new()
            .glibc()
            .file("/usr/share/elasticsearch/bin/elasticsearch", "#!/bin/bash\n")
            .empty("/usr/share/elasticsearch/lib/elasticsearch-8.15.0.jar");
        let o = check(&es.facts_in(""));
        assert!(o.sole_finding().has_evidence(
            "Elasticsearch 8.15.0 sizes its heap at start from the memory it sees (half of it, up to 31 GiB): no -Xmx in ES_JAVA_OPTS, jvm.options or jvm.options.d"
        ));
    }
}
