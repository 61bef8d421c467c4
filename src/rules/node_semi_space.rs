use super::{Outcome, Rule};
use crate::facts::node::{reads_cgroup_v2, semi_space_flag_in_node_options, semi_space_mib, FlagSource};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};
use crate::version::Version;

pub(crate) const RULE: Rule = Rule {
    id: "node-semi-space",
    severity: Severity::Note,
    title: "Node sizes its young generation from the container limit",
    doc: include_str!("../../rules/node-semi-space.md"),
    tags: &["memory", "performance", "nodejs"],
    check,
    // The fix goes where --max-old-space-size is set: `ENV NODE_OPTIONS` or the command.
    anchor: Anchor::Command,
};

fn check(f: &Facts) -> Outcome {
    let Some(node) = &f.node else {
        return Outcome::none();
    };
    if node.max_semi_space_size.is_some() {
        return Outcome::none();
    }
    // The flag may be in a NODE_OPTIONS a script sets in a way memlint cannot work out.
    if let Some(why) = &node.options_undecided {
        return Outcome::undecided(why.clone());
    }
    let version = node.parsed_version();
    // With a Kubernetes manifest the limit is known: the semi-space Node will size from it
    // (measured, ../shared/domain-sources.md 3.2: Node 18–22 and Node 24), whatever the heap
    // flags say (--max-old-space-size does not change it).
    let limit = f.container.as_ref().and_then(|c| c.limits_memory.as_ref());
    let sees_limit = version.as_ref().is_none_or(reads_cgroup_v2);
    if let (Some(l), true) = (limit, sees_limit) {
        let (semi, default) = semi_space_mib(l.value.value, version.as_ref());
        if semi >= default {
            return Outcome::none();
        }
        let flags = match &node.max_old_space_size {
            Some(old) => format!("--max-old-space-size={} and no --max-semi-space-size", old.value),
            None => "no --max-semi-space-size".to_string(),
        };
        let message = format!(
            "Node {} runs with {flags}: under this container's limits.memory {} it sizes each semi-space to about {semi} MiB (measured; {default} MiB without a limit), so short-lived objects reach the old generation and scavenges run more often",
            node.version.as_deref().unwrap_or("(version unknown)"),
            l.value.text
        );
        let finding = RULE.finding(message).evidence(Evidence::plain(format!(
            "resources.limits.memory {} at line {} of the manifest",
            l.value.text, l.line
        )));
        return Outcome::one(with_evidence(f, node, node.max_old_space_size.as_ref(), version.as_ref(), finding));
    }
    let Some(old) = &node.max_old_space_size else {
        return Outcome::undecided(
            "Node runs without --max-old-space-size, which would hint at a small memory limit",
        );
    };
    // A heap flag node refuses or ignores sizes nothing: the young generation is not what
    // goes wrong then.
    if let Some(problem) = &old.problem {
        return Outcome::undecided(format!(
            "--max-old-space-size from {} is not in effect: {problem}",
            old.source
        ));
    }
    let message = match &version {
        Some(v) if reads_cgroup_v2(v) => format!(
            "Node {v_s} runs with --max-old-space-size={} and no --max-semi-space-size: a memory limit of 2 GiB or less shrinks the young generation",
            old.value,
            v_s = node.version.as_deref().unwrap_or("")
        ),
        Some(_) => format!(
            "Node {} sizes its young generation from the memory limit only on cgroup v1 hosts; it runs with --max-old-space-size={} and no --max-semi-space-size",
            node.version.as_deref().unwrap_or(""),
            old.value
        ),
        None => format!(
            "Node (version unknown) runs with --max-old-space-size={} and no --max-semi-space-size: from 20.3 a memory limit of 2 GiB or less shrinks the young generation",
            old.value
        ),
    };
    Outcome::one(with_evidence(f, node, Some(old), version.as_ref(), RULE.finding(message)))
}

fn with_evidence(
    f: &Facts,
    node: &crate::facts::node::NodeFacts,
    old: Option<&crate::facts::node::NodeFlag>,
    version: Option<&Version>,
    finding: crate::finding::Finding,
) -> crate::finding::Finding {
    let source = old.map_or(FlagSource::NodeOptions, |o| o.source);
    let mut finding = finding.anchor(match source {
        FlagSource::NodeOptions => Anchor::Env(&["NODE_OPTIONS"]),
        FlagSource::CommandLine => Anchor::Command,
    });
    if let Some(old) = old {
        finding = finding.evidence(Evidence::plain(format!(
            "--max-old-space-size={} from {}",
            old.value, old.source
        )));
    }
    if let (Some(v), Some(src)) = (&node.version, &node.version_source) {
        // The source is `NODE_VERSION` or the image path of a node_version.h or node binary;
        // `naming` keeps it only as a path.
        finding = finding.evidence(Evidence::naming(format!("Node {v} (from {src})"), [src]));
    }
    if let Some(b) = &node.binary {
        finding = finding.evidence(Evidence::naming(format!("node binary {b}"), [b]));
    }
    let in_options_ok = version.is_none_or(semi_space_flag_in_node_options);
    let fix = if source == FlagSource::NodeOptions && in_options_ok {
        let current = node.node_options.clone().unwrap_or_default();
        let value = format!("{} --max-semi-space-size=16", current.trim()).trim().to_string();
        super::fixes::set_env_quoted(f, "NODE_OPTIONS", Some(&value))
    } else {
        let mut argv: Vec<String> = f.entrypoint.args.clone();
        if argv.is_empty() {
            argv = vec!["node".into()];
        }
        argv.insert(1.min(argv.len()), "--max-semi-space-size=16".into());
        format!(
            "CMD {}\n# 16 MiB is the default without a limit; size it to the allocation rate",
            serde_json::to_string(&argv).unwrap_or_default()
        )
    };
    finding.fix(fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    fn node(version: &str, env: &[&str]) -> TestImage {
        TestImage::new()
            .glibc()
            .node(version)
            .env(&["PATH=/usr/local/bin:/usr/bin:/bin"])
            .env(env)
            .cmd(&["node", "server.js"])
    }

    const LIMIT: &str = "    resources:\n      limits: {memory: 1Gi}\n";

    #[test]
    fn fires_with_the_semi_space_the_limit_gives() {
        let o = check(&node("22.11.0", &[]).facts_in(LIMIT));
        assert_eq!(o.findings.len(), 1, "{o:?}");
        let f = &o.findings[0];
        assert_eq!(f.severity, Severity::Note);
        assert!(f.message.contains("sizes each semi-space to about 4 MiB (measured; 16 MiB without a limit)"), "{}", f.message);
        assert!(f.fix.contains("--max-semi-space-size=16"), "{}", f.fix);
        // An image alone: a heap flag hints at a small limit.
        let o = check(&node("22.11.0", &["NODE_OPTIONS=--max-old-space-size=768"]).facts());
        assert_eq!(o.findings.len(), 1, "{o:?}");
        assert!(o.findings[0].message.contains("a memory limit of 2 GiB or less shrinks the young generation"));
        assert_eq!(o.findings[0].anchor, Anchor::Env(&["NODE_OPTIONS"]));
    }

    #[test]
    fn silent_with_the_flag_or_a_large_limit() {
        let o = check(&node("22.11.0", &["NODE_OPTIONS=--max-semi-space-size=16"]).facts_in(LIMIT));
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        let o = check(&node("22.11.0", &[]).facts_in("    resources:\n      limits: {memory: 4Gi}\n"));
        assert!(o.findings.is_empty(), "{o:?}");
    }

    #[test]
    fn undecided_alone_without_a_heap_flag_or_with_options_from_a_secret() {
        let o = check(&node("22.11.0", &[]).facts());
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.is_some_and(|w| w.contains("without --max-old-space-size")));
        let secret = format!(
            "{LIMIT}    env:\n    - name: NODE_OPTIONS\n      valueFrom: {{secretKeyRef: {{name: s, key: k}}}}\n"
        );
        let o = check(&node("22.11.0", &[]).facts_in(&secret));
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.is_some_and(|w| w.contains("NODE_OPTIONS")));
    }
}
