use super::k8s::container_name;
use super::{Outcome, Rule};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};

pub(crate) const RULE: Rule = Rule {
    id: "es-memory-lock-k8s",
    severity: Severity::Warning,
    title: "Elasticsearch or OpenSearch locks its memory, which a Kubernetes pod cannot allow",
    doc: include_str!("../../rules/es-memory-lock-k8s.md"),
    tags: &["kubernetes", "elasticsearch", "opensearch"],
    check,
    anchor: Anchor::Container,
};

fn check(f: &Facts) -> Outcome {
    let (Some(c), Some(es)) = (&f.container, &f.search_engine) else {
        return Outcome::none();
    };
    let Some(lock) = es.memory_lock.as_ref().filter(|l| l.enabled) else {
        return Outcome::none();
    };
    let product = if es.product == "opensearch" { "OpenSearch" } else { "Elasticsearch" };
    let version = es.version.as_deref().map(|v| format!(" {v}")).unwrap_or_default();
    let evidence = match &lock.path {
        Some(p) => Evidence::naming(format!("bootstrap.memory_lock: true ({})", lock.source), [p.clone()]),
        None => Evidence::plain(format!("bootstrap.memory_lock: true ({})", lock.source)),
    };
    let (env_off, anchor) = if es.product == "opensearch" {
        ("bootstrap.memory_lock", Anchor::Env(&["bootstrap.memory_lock"]))
    } else {
        (
            "bootstrap.memory_lock",
            Anchor::Env(&["bootstrap.memory_lock", "ES_SETTING_BOOTSTRAP_MEMORY__LOCK"]),
        )
    };
    let finding = RULE
        .finding(format!(
            "{product}{version} in {} sets bootstrap.memory_lock: true: its bootstrap check needs an unlimited memlock ulimit, which a pod cannot set, so {product} refuses to start (\"memory locking requested for {} process but memory is not locked\")",
            container_name(c),
            es.product
        ))
        .evidence(Evidence::naming(
            format!("{product}{version} at {}", es.home),
            [es.home.clone()],
        ))
        .evidence(evidence)
        .anchor(anchor)
        .fix(format!(
            "# turn the lock off, and keep the heap from being swapped by giving the node no swap (the kubelet's default)\n        env:\n        - name: {env_off}\n          value: \"false\"\n# or remove `bootstrap.memory_lock: true` from {}",
            lock.path.as_deref().unwrap_or("the settings file")
        ));
    Outcome::one(finding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    fn es() -> TestImage {
        TestImage::new()
            .glibc()
            .file("/usr/share/elasticsearch/bin/elasticsearch", "#!/bin/bash\n")
            .empty("/usr/share/elasticsearch/lib/elasticsearch-8.15.0.jar")
    }

    #[test]
    fn fires_in_a_pod_from_the_file_or_the_environment() {
        let file = es().file("/usr/share/elasticsearch/config/elasticsearch.yml", "bootstrap.memory_lock: true\n");
        let o = check(&file.facts_in(""));
        assert!(o.sole_finding().message.contains("Elasticsearch 8.15.0"), "{o:?}");
        let env = es().facts_in("    env:\n    - {name: bootstrap.memory_lock, value: \"true\"}\n");
        assert_eq!(check(&env).findings.len(), 1);
        // The manifest turns it off; an image alone is not a pod.
        let off = file.facts_in("    env:\n    - {name: bootstrap.memory_lock, value: \"false\"}\n");
        assert!(check(&off).findings.is_empty());
        assert!(check(&file.facts()).findings.is_empty());
    }
}
