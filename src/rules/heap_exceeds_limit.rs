use super::{Outcome, Rule};
use crate::facts::memory::{Amount, Commitment};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Finding, Severity};
use crate::k8s::quantity::human_bytes;

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
            fix: |c, _| match c.percent_of_limit {
                Some(_) => "-XX:MaxRAMPercentage=75.0".to_string(),
                None if c.setting.contains("MaxRAM=") => {
                    "-XX:MaxRAMPercentage=75.0 without -XX:MaxRAM (the JVM then sizes from the container's limit)"
                        .to_string()
                }
                None => "-XX:MaxRAMPercentage=75.0 (in place of -Xmx, which wins over it)".to_string(),
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
            fix: |c, _| match c.percent_of_limit {
                Some(_) => "GCHeapHardLimitPercent=0x4B (75 %)".to_string(),
                None => "no GCHeapHardLimit (the container default is 75 % of the limit)".to_string(),
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
    for commitment in &f.memory.runtimes {
        let Some(g) = guidance(commitment) else { continue };
        match (commitment.status, commitment.bytes) {
            ("set", Some(bytes)) => caps.push((commitment, g, bytes)),
            ("undecided", _) => undecided.extend(commitment.why.clone()),
            _ => {}
        }
    }
    // `-Xmx$(HEAP)` with HEAP from a secret: the cap is in a word memlint cannot read.
    if let Some(word) = c.unresolved_args.first() {
        undecided.push(format!("the container's command has {word}"));
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
