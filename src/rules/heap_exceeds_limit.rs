use super::{Outcome, Rule};
use crate::facts::memory::{Amount, Commitment, Sizing};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Finding, Severity};
use crate::units::human_bytes;

pub(crate) const RULE: Rule = Rule {
    id: "heap-exceeds-limit",
    severity: Severity::Error,
    title: "A runtime's heap cap reaches the container's memory limit",
    doc: include_str!("../../rules/heap-exceeds-limit.md"),
    tags: &["memory", "kubernetes", "oom"],
    check,
    anchor: Anchor::MemoryLimit,
};

/// What the rule says of one runtime's heap cap: the share of the limit its guidance leaves
/// it, what lives outside the cap, and the cap that leaves the guidance's room.
struct Guidance {
    runtime: &'static str,
    /// The most of the limit the runtime's guidance gives the cap, in percent.
    percent: u64,
    outside: &'static str,
    fix: fn(c: &Commitment, limit: u64) -> String,
}

const JVM_OUTSIDE: &str = "metaspace, thread stacks, the code cache, direct buffers and GC structures";
const DOTNET_OUTSIDE: &str = "native memory, thread stacks and the runtime itself";

/// The guidance for a heap commitment of `facts.memory`, for the runtimes whose cap this rule
/// judges.
fn guidance(c: &Commitment) -> Option<Guidance> {
    Some(match (c.runtime, c.what) {
        ("jvm", "heap") => Guidance {
            runtime: "the JVM",
            percent: 75,
            outside: JVM_OUTSIDE,
            fix: |c, _| match c.sizing {
                Sizing::ShareOfLimit => "-XX:MaxRAMPercentage=75.0".to_string(),
                Sizing::ShareOfMaxRam => {
                    "-XX:MaxRAMPercentage=75.0 without -XX:MaxRAM (the JVM then sizes from the container's limit)"
                        .to_string()
                }
                Sizing::Bytes => "-XX:MaxRAMPercentage=75.0 (in place of -Xmx, which wins over it)".to_string(),
            },
        },
        ("node", "heap") => Guidance {
            runtime: "Node",
            percent: 75,
            outside: "the young generation, code, and Buffer and native memory",
            fix: |_, limit| format!("--max-old-space-size={}", (limit / 4 * 3) >> 20),
        },
        ("go", "gomemlimit") => Guidance {
            runtime: "the Go runtime",
            percent: 90,
            outside: "memory the Go runtime does not manage (cgo, C libraries, mapped files)",
            fix: |_, limit| format!("GOMEMLIMIT={}MiB", (limit / 10 * 9) >> 20),
        },
        ("dotnet", "heap") => Guidance {
            runtime: ".NET",
            percent: 75,
            outside: DOTNET_OUTSIDE,
            fix: |c, _| match c.sizing {
                Sizing::ShareOfLimit => "GCHeapHardLimitPercent=0x4B (75 %)".to_string(),
                _ => "no GCHeapHardLimit (the container default is 75 % of the limit)".to_string(),
            },
        },
        _ => return None,
    })
}

fn check(f: &Facts) -> Outcome {
    let Some(c) = &f.container else {
        return Outcome::none();
    };
    let Some(limit) = &c.limits_memory else {
        return Outcome::undecided("the container has no resources.limits.memory to judge a heap cap against");
    };
    let (limit_bytes, limit_text) = match &f.memory.limit {
        Amount::Set { bytes, text, .. } if *bytes > 0 => (*bytes, text),
        _ => return Outcome::none(),
    };
    let mut caps: Vec<(&Commitment, Guidance, u64)> = Vec::new();
    let mut undecided: Vec<String> = Vec::new();
    // `-Xmx$(HEAP)` with HEAP from a secret: the cap is in a word memlint cannot read, and
    // that says more than the word itself read as a size.
    if let Some(word) = c.unresolved_args.first() {
        undecided.push(format!("the container's command has {word}"));
    }
    for commitment in &f.memory.runtimes {
        // A heap a vendor launcher decides is `launcher-heap-vs-limit`'s: one finding per heap.
        if commitment.launcher.is_some() {
            continue;
        }
        let Some(g) = guidance(commitment) else { continue };
        match (commitment.status, commitment.bytes) {
            ("set", Some(bytes)) => caps.push((commitment, g, bytes)),
            ("undecided", _) => undecided.extend(commitment.why.clone()),
            _ => {}
        }
    }
    if caps.is_empty() {
        return match undecided.into_iter().next() {
            Some(why) => Outcome::undecided(why),
            None => Outcome::none(),
        };
    }
    let limit_text = format!("limits.memory {limit_text} ({})", human_bytes(limit_bytes));
    let mut findings: Vec<Finding> = Vec::new();
    for (cap, g, bytes) in caps {
        let percent = (u128::from(bytes) * 100 / u128::from(limit_bytes)) as u64;
        let finding = if bytes >= limit_bytes {
            RULE.finding(format!(
                "{} caps {}'s heap at {}, which reaches the container's {limit_text}: {} come on top and the container is OOM-killed before the heap is full",
                cap.setting,
                g.runtime,
                human_bytes(bytes),
                g.outside
            ))
        } else if u128::from(bytes) * 100 > u128::from(limit_bytes) * u128::from(g.percent) {
            RULE.finding(format!(
                "{} gives {}'s heap {} % of the container's {limit_text}, more than the {} % its guidance leaves: {} share the rest",
                cap.setting, g.runtime, percent, g.percent, g.outside
            ))
            .severity(Severity::Warning)
        } else {
            continue;
        };
        let wanted_limit = (u128::from(bytes) * 100).div_ceil(u128::from(g.percent));
        let wanted_mib = u64::try_from(wanted_limit.div_ceil(1 << 20)).unwrap_or(u64::MAX);
        findings.push(
            finding
                .evidence(Evidence::plain(format!("{} caps the heap at {}", cap.setting, human_bytes(bytes))))
                .evidence(super::k8s::limit_evidence(c, "memory", limit))
                .fix(format!(
                    "# either raise the limit so the cap is at most {} % of it:\nresources:\n  limits:\n    memory: {wanted_mib}Mi\n# or lower the cap: {}",
                    g.percent,
                    (g.fix)(cap, limit_bytes)
                )),
        );
    }
    findings.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    const RELEASE: &str = "IMPLEMENTOR=\"Debian\"\nJAVA_VERSION=\"17.0.15\"\nLIBC=\"gnu\"\n";

    /// Debian's JDK 17 running `java -jar app.jar`, with `env`.
    fn jvm(env: &[&str]) -> TestImage {
        TestImage::new()
            .glibc()
            .jdk("/usr/lib/jvm/java-17-openjdk-amd64", RELEASE)
            .env(&["PATH=/usr/lib/jvm/java-17-openjdk-amd64/bin:/usr/bin:/bin"])
            .env(env)
            .cmd(&["java", "-jar", "/app/app.jar"])
    }

    fn limit(memory: &str) -> String {
        format!("    resources:\n      limits: {{memory: {memory}}}\n")
    }

    #[test]
    fn a_fixed_jvm_cap_that_reaches_the_limit_is_an_error() {
        let o = check(&jvm(&["JAVA_TOOL_OPTIONS=-Xmx2g"]).facts_in(&limit("2Gi")));
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Error);
        assert!(
            f.message.starts_with("-Xmx2g (from JAVA_TOOL_OPTIONS) caps the JVM's heap at 2 GiB, which reaches the container's limits.memory 2Gi (2 GiB)"),
            "{}",
            f.message
        );
        assert!(f.fix.contains("memory: 2731Mi"), "{}", f.fix);
        assert!(f.fix.contains("in place of -Xmx"), "{}", f.fix);
        // Half the limit is within the guidance.
        assert!(check(&jvm(&["JAVA_TOOL_OPTIONS=-Xmx2g"]).facts_in(&limit("4Gi"))).findings.is_empty());
    }

    #[test]
    fn a_cap_past_the_guidance_is_a_warning() {
        let o = check(&jvm(&["JAVA_TOOL_OPTIONS=-Xmx1800m"]).facts_in(&limit("2Gi")));
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.message.contains("87 % of the container's limits.memory 2Gi"), "{}", f.message);
        let o = check(&jvm(&["JAVA_TOOL_OPTIONS=-XX:MaxRAMPercentage=90.0"]).facts_in(&limit("1Gi")));
        assert_eq!(o.sole_finding().severity, Severity::Warning);
        assert!(o.sole_finding().fix.ends_with("lower the cap: -XX:MaxRAMPercentage=75.0"), "{}", o.sole_finding().fix);
        // The default share is the JVM's own choice, not a cap this rule judges.
        assert!(check(&jvm(&[]).facts_in(&limit("256Mi"))).findings.is_empty());
    }

    #[test]
    fn a_share_of_max_ram_is_judged_whatever_the_limit() {
        let env = ["JAVA_TOOL_OPTIONS=-XX:MaxRAM=4g -XX:MaxRAMPercentage=75"];
        let o = check(&jvm(&env).facts_in(&limit("2Gi")));
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Error);
        assert!(f.message.contains("caps the JVM's heap at 3 GiB"), "{}", f.message);
        assert!(f.fix.contains("without -XX:MaxRAM"), "{}", f.fix);
    }

    #[test]
    fn node_go_and_dotnet_caps() {
        let node = TestImage::new()
            .glibc()
            .node("20.11.1")
            .env(&["NODE_OPTIONS=--max-old-space-size=2048"])
            .cmd(&["node", "server.js"]);
        let o = check(&node.facts_in(&limit("2Gi")));
        assert!(o.sole_finding().message.starts_with("--max-old-space-size=2048 (from NODE_OPTIONS) caps Node's heap"), "{o:?}");
        assert!(o.sole_finding().fix.ends_with("--max-old-space-size=1536"), "{}", o.sole_finding().fix);
        let go = TestImage::new()
            .glibc()
            .go("/app/server", "go1.22.1", &[])
            .env(&["GOMEMLIMIT=1900MiB"])
            .cmd(&["/app/server"]);
        let o = check(&go.facts_in(&limit("2Gi")));
        assert_eq!(o.sole_finding().severity, Severity::Warning, "{o:?}");
        assert!(o.sole_finding().message.starts_with("GOMEMLIMIT=1900MiB gives the Go runtime's heap 92 %"), "{o:?}");
        // A Go program before 1.19 does not read GOMEMLIMIT.
        let old = TestImage::new()
            .glibc()
            .go("/app/server", "go1.18.10", &[])
            .env(&["GOMEMLIMIT=4GiB"])
            .cmd(&["/app/server"]);
        assert!(check(&old.facts_in(&limit("2Gi"))).findings.is_empty());
    }

    #[test]
    fn undecided_without_a_limit_or_with_options_memlint_cannot_read() {
        let image = jvm(&["JAVA_TOOL_OPTIONS=-Xmx2g"]);
        // An image alone: nothing to judge, and nothing to say.
        let o = check(&image.facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        let o = check(&image.facts_in("    resources: {}\n"));
        assert!(o.undecided.is_some_and(|w| w.contains("no resources.limits.memory")));
        // A JVM options variable from a secret may hold an -Xmx that wins.
        let secret = format!(
            "{}    env:\n    - name: JAVA_TOOL_OPTIONS\n      valueFrom: {{secretKeyRef: {{name: s, key: k}}}}\n",
            limit("2Gi")
        );
        let o = check(&image.facts_in(&secret));
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.is_some_and(|w| w.contains("JAVA_TOOL_OPTIONS")));
        // `-Xmx$(HEAP)` with HEAP from a secret.
        let args = format!(
            "{}    env:\n    - name: HEAP\n      valueFrom: {{secretKeyRef: {{name: s, key: k}}}}\n    args: [\"-Xmx$(HEAP)\", \"-jar\", \"/app/app.jar\"]\n    command: [java]\n",
            limit("2Gi")
        );
        let o = check(&jvm(&[]).facts_in(&args));
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.as_ref().is_some_and(|w| w.contains("the container's command has")), "{o:?}");
    }
}
