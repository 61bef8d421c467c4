use super::{Outcome, Rule};
use crate::facts::go::{read_gomemlimit, reads_gomemlimit, MemLimit};
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

/// Variables that may carry JVM options (a script may set them in a way memlint cannot tell).
const JVM_OPTION_VARIABLES: &[&str] = &["JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS", "JAVA_OPTS"];

/// One runtime's cap on its heap, and the share of the limit its guidance leaves it.
struct Cap {
    runtime: &'static str,
    /// `-Xmx2g (from JAVA_TOOL_OPTIONS)`.
    setting: String,
    bytes: u64,
    /// The most of the limit the runtime's guidance gives the cap, in percent.
    guidance: u64,
    /// What lives outside the cap.
    outside: &'static str,
    /// The cap that leaves the guidance's room, for the fix.
    fix: fn(limit: u64) -> String,
}

fn check(f: &Facts) -> Outcome {
    let Some(c) = &f.container else {
        return Outcome::none();
    };
    let Some(limit) = &c.limits_memory else {
        return Outcome::undecided("the container has no resources.limits.memory to judge a heap cap against");
    };
    let limit_bytes = limit.value.value;
    if limit_bytes == 0 {
        return Outcome::none();
    }
    let mut caps: Vec<Cap> = Vec::new();
    let mut undecided: Vec<String> = Vec::new();
    // A JVM options variable memlint cannot work out may hold an -Xmx, which wins over any
    // percentage and any -Xmx elsewhere but the command line's: the JVM's cap is not known.
    let jvm_undecided = f.env.first_undecided(JVM_OPTION_VARIABLES);
    if let (Some(_), Some(why)) = (&f.java, &jvm_undecided) {
        undecided.push(why.clone());
    }
    if let (Some(j), None) = (&f.java, &jvm_undecided) {
        let heap = j
            .effective()
            .filter(|o| o.option.starts_with("-Xmx") || o.xx_name() == Some("MaxHeapSize") && o.xx_value().is_some())
            .last();
        if let Some(o) = heap {
            let text = o.option.strip_prefix("-Xmx").or(o.xx_value()).unwrap_or("");
            if let Some(bytes) = jvm_size(text) {
                caps.push(Cap {
                    runtime: "the JVM",
                    setting: format!("{} (from {})", o.option, o.origin()),
                    bytes,
                    guidance: 75,
                    outside: "metaspace, thread stacks, the code cache, direct buffers and GC structures",
                    fix: |_| "-XX:MaxRAMPercentage=75.0 (in place of -Xmx, which wins over it)".to_string(),
                });
            }
        } else if let Some(o) = j.last_xx("MaxRAMPercentage") {
            if let Some(pct) = o.xx_value().and_then(|v| v.parse::<f64>().ok()).filter(|p| p.is_finite() && *p > 0.0) {
                caps.push(Cap {
                    runtime: "the JVM",
                    setting: format!("{} (from {})", o.option, o.origin()),
                    // `as` saturates: a percentage past what u64 holds is the most it can be.
                    bytes: (limit_bytes as f64 * pct / 100.0) as u64,
                    guidance: 75,
                    outside: "metaspace, thread stacks, the code cache, direct buffers and GC structures",
                    fix: |_| "-XX:MaxRAMPercentage=75.0".to_string(),
                });
            }
        }
    }
    if let Some(node) = &f.node {
        match &node.max_old_space_size {
            Some(old) if old.problem.is_none() => {
                if let Ok(mib) = old.value.trim().parse::<u64>() {
                    caps.push(Cap {
                        runtime: "Node",
                        setting: format!("--max-old-space-size={} (from {})", old.value, old.source),
                        bytes: mib.saturating_mul(1 << 20),
                        guidance: 75,
                        outside: "the young generation, code, and Buffer and native memory",
                        fix: |limit| format!("--max-old-space-size={}", (limit / 4 * 3) >> 20),
                    });
                }
            }
            Some(_) => {}
            None => {
                if let Some(why) = f.env.first_undecided(&["NODE_OPTIONS"]) {
                    undecided.push(why);
                }
            }
        }
    }
    if f.go.binaries.iter().any(|b| reads_gomemlimit(b.go_version.as_deref())) {
        match f.env.get("GOMEMLIMIT") {
            Some(v) => {
                if let MemLimit::Bytes(n) = read_gomemlimit(v) {
                    caps.push(Cap {
                        runtime: "the Go runtime",
                        setting: f.env.entry("GOMEMLIMIT").unwrap_or_else(|| format!("GOMEMLIMIT={v}")),
                        bytes: u64::try_from(n).unwrap_or(0),
                        guidance: 90,
                        outside: "memory the Go runtime does not manage (cgo, C libraries, mapped files)",
                        fix: |limit| format!("GOMEMLIMIT={}MiB", (limit / 10 * 9) >> 20),
                    });
                }
            }
            None => {
                if let Some(why) = f.env.first_undecided(&["GOMEMLIMIT"]) {
                    undecided.push(why);
                }
            }
        }
    }
    for app in &f.dotnet.gc.apps {
        if let Some(s) = &app.heap_hard_limit {
            caps.push(Cap {
                runtime: ".NET",
                setting: format!("GCHeapHardLimit {:#x} ({})", s.value, s.source),
                bytes: s.value,
                guidance: 75,
                outside: "native memory, thread stacks and the runtime itself",
                fix: |_| "no GCHeapHardLimit (the container default is 75 % of the limit)".to_string(),
            });
        } else if let Some(p) = app.heap_hard_limit_percent.as_ref().filter(|p| (1..100).contains(&p.value)) {
            caps.push(Cap {
                runtime: ".NET",
                setting: format!("GCHeapHardLimitPercent {:#x} = {} % ({})", p.value, p.value, p.source),
                bytes: (u128::from(limit_bytes) * u128::from(p.value) / 100) as u64,
                guidance: 75,
                outside: "native memory, thread stacks and the runtime itself",
                fix: |_| "GCHeapHardLimitPercent=0x4B (75 %)".to_string(),
            });
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
    let limit_text = format!("limits.memory {} ({})", limit.value.text, human_bytes(limit_bytes));
    let mut findings: Vec<Finding> = Vec::new();
    for cap in caps {
        let percent = (cap.bytes as u128 * 100 / u128::from(limit_bytes)) as u64;
        let finding = if cap.bytes >= limit_bytes {
            RULE.finding(format!(
                "{} caps {}'s heap at {}, which reaches the container's {limit_text}: {} come on top and the container is OOM-killed before the heap is full",
                cap.setting,
                cap.runtime,
                human_bytes(cap.bytes),
                cap.outside
            ))
        } else if u128::from(cap.bytes) * 100 > u128::from(limit_bytes) * u128::from(cap.guidance) {
            RULE.finding(format!(
                "{} gives {}'s heap {} % of the container's {limit_text}, more than the {} % its guidance leaves: {} share the rest",
                cap.setting, cap.runtime, percent, cap.guidance, cap.outside
            ))
            .severity(Severity::Warning)
        } else {
            continue;
        };
        let wanted_limit = (cap.bytes as u128 * 100).div_ceil(u128::from(cap.guidance));
        let wanted_mib = u64::try_from(wanted_limit.div_ceil(1 << 20)).unwrap_or(u64::MAX);
        findings.push(
            finding
                .evidence(Evidence::plain(format!("{} caps the heap at {}", cap.setting, human_bytes(cap.bytes))))
                .evidence(super::k8s::limit_evidence(c, "memory", limit))
                .fix(format!(
                    "# either raise the limit so the cap is at most {} % of it:\nresources:\n  limits:\n    memory: {wanted_mib}Mi\n# or lower the cap: {}",
                    cap.guidance,
                    (cap.fix)(limit_bytes)
                )),
        );
    }
    findings.into()
}

/// A HotSpot size (`-Xmx` and `-XX:MaxHeapSize`): digits with an optional k, m, g or t in
/// either case (HotSpot's `atojulong`).
fn jvm_size(text: &str) -> Option<u64> {
    let (digits, shift) = match text.as_bytes().last()? {
        b'k' | b'K' => (&text[..text.len() - 1], 10),
        b'm' | b'M' => (&text[..text.len() - 1], 20),
        b'g' | b'G' => (&text[..text.len() - 1], 30),
        b't' | b'T' => (&text[..text.len() - 1], 40),
        _ => (text, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jvm_sizes() {
        assert_eq!(jvm_size("2g"), Some(2 << 30));
        assert_eq!(jvm_size("1536M"), Some(1536 << 20));
        assert_eq!(jvm_size("1048576"), Some(1 << 20));
        assert_eq!(jvm_size("1.5g"), None);
        assert_eq!(jvm_size(""), None);
    }
}
