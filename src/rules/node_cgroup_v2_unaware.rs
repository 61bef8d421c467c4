use super::{Outcome, Rule};
use crate::facts::node::{reads_cgroup_v2, FlagSource};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};

pub(crate) const RULE: Rule = Rule {
    id: "node-cgroup-v2-unaware",
    severity: Severity::Warning,
    title: "Node before 20.3 sizes its heap from the node's memory under cgroup v2",
    doc: include_str!("../../rules/node-cgroup-v2-unaware.md"),
    tags: &["memory", "nodejs", "containers", "cgroup"],
    check,
    // The fix is a heap flag in NODE_OPTIONS (or an upgrade).
    anchor: Anchor::Env(&["NODE_OPTIONS"]),
};

fn check(f: &Facts) -> Outcome {
    let Some(node) = &f.node else {
        return Outcome::none();
    };
    if !node.runs {
        return Outcome::undecided(
            "Node is installed but the entrypoint does not run it (as far as memlint can follow it)",
        );
    }
    let Some(version) = node.parsed_version() else {
        return Outcome::undecided(
            "Node is present but its version is unknown (no NODE_VERSION, node_version.h, release string or dpkg entry)",
        );
    };
    if reads_cgroup_v2(&version) {
        return Outcome::none();
    }
    let in_effect = node.max_old_space_size.as_ref().filter(|f| f.problem.is_none());
    if in_effect.is_some() {
        return Outcome::none();
    }
    // A heap flag may be in a NODE_OPTIONS a script sets in a way memlint cannot work out.
    if let Some(why) = &node.options_undecided {
        return Outcome::undecided(why.clone());
    }
    let v = node.version.as_deref().unwrap_or_default();
    let mut finding = RULE.finding(format!(
        "Node {v} does not read cgroup v2 memory limits (its libuv is older than 1.45) and runs with no --max-old-space-size: on a cgroup v2 node the heap limit is sized from the node's memory, and the kernel kills the container before V8 collects"
    ));
    if let Some(src) = &node.version_source {
        finding = finding.evidence(Evidence::naming(format!("Node {v} (from {src})"), [src]));
    }
    if let Some(b) = &node.binary {
        finding = finding.evidence(Evidence::naming(format!("node binary {b}"), [b]));
    }
    finding = finding.evidence(Evidence::plain(match &node.max_old_space_size {
        Some(flag) => format!(
            "--max-old-space-size={} from {} is not in effect: {}",
            flag.value,
            flag.source,
            flag.problem.as_deref().unwrap_or_default()
        ),
        None => format!(
            "no --max-old-space-size in NODE_OPTIONS ({}) or on node's command line ({})",
            node.node_options
                .as_deref()
                .map_or("unset".to_string(), |o| format!("`{o}`")),
            if f.entrypoint.args.is_empty() {
                "none".to_string()
            } else {
                format!("`{}`", f.entrypoint.args.join(" "))
            }
        ),
    }));
    // A flag written wrongly on the command line is mended there; otherwise NODE_OPTIONS.
    let on_command_line = node
        .max_old_space_size
        .as_ref()
        .is_some_and(|flag| flag.source == FlagSource::CommandLine);
    let heap = "--max-old-space-size=384";
    let fix = if on_command_line {
        let mut argv = f.entrypoint.args.clone();
        if argv.is_empty() {
            argv = vec!["node".into()];
        }
        argv = without_heap_flag(&argv);
        argv.insert(1.min(argv.len()), heap.into());
        format!(
            "CMD {}",
            serde_json::to_string(&argv).unwrap_or_default()
        )
    } else {
        let current = node.node_options.as_deref().unwrap_or_default().trim();
        let kept: Vec<String> = current
            .split(' ')
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect();
        let mut words = without_heap_flag(&kept).join(" ");
        if !words.is_empty() {
            words.push(' ');
        }
        super::fixes::set_env_quoted(f, "NODE_OPTIONS", Some(&format!("{words}{heap}")))
    };
    if on_command_line {
        finding = finding.anchor(Anchor::Command);
    }
    Outcome::one(finding.fix(format!(
        "{fix}\n# about 75 % of the container's memory limit, in MiB (384 for 512 MiB); or move to Node 20.3 or later (e.g. FROM node:22-slim), which reads the limit itself"
    )))
}

/// The words without any `--max-old-space-size` (and the value word after one written without
/// `=`).
fn without_heap_flag(words: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_next = false;
    for w in words {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        let name = w.split('=').next().unwrap_or_default().replace('_', "-");
        if name == "--max-old-space-size" {
            skip_next = !w.contains('=');
            continue;
        }
        out.push(w.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    fn node(version: &str, env: &[&str], cmd: &[&str]) -> Outcome {
        let f = TestImage::new()
            .glibc()
            .node(version)
            .env(&["PATH=/usr/local/bin:/usr/bin:/bin"])
            .env(env)
            .cmd(cmd)
            .facts();
        check(&f)
    }

    #[test]
    fn fires_for_node_before_20_3_with_no_heap_flag() {
        let o = node("18.19.0", &[], &["node", "server.js"]);
        assert_eq!(o.findings.len(), 1, "{o:?}");
        let f = &o.findings[0];
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.message.starts_with("Node 18.19.0 does not read cgroup v2 memory limits"), "{}", f.message);
        assert!(f.fix.starts_with("ENV NODE_OPTIONS=\"--max-old-space-size=384\""), "{}", f.fix);
        // A flag on the command line is mended there.
        let o = node("18.19.0", &[], &["node", "--max-old-space-size=abc", "server.js"]);
        assert_eq!(o.findings.len(), 1, "{o:?}");
        assert_eq!(o.findings[0].anchor, Anchor::Command);
    }

    #[test]
    fn silent_from_20_3_or_with_a_heap_flag() {
        for (version, env) in [("20.3.0", &[][..]), ("18.19.0", &["NODE_OPTIONS=--max-old-space-size=384"])] {
            let o = node(version, env, &["node", "server.js"]);
            assert!(o.findings.is_empty() && o.undecided.is_none(), "{version}: {o:?}");
        }
    }

    #[test]
    fn undecided_when_node_is_not_run_or_its_options_are_unknown() {
        let o = node("18.19.0", &[], &["/bin/true"]);
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.is_some_and(|w| w.contains("does not run it")));
    }

    #[test]
    fn heap_flags_are_taken_out_with_their_value() {
        let words = |l: &[&str]| l.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        assert_eq!(
            without_heap_flag(&words(&["node", "--max-old-space-size", "384", "server.js"])),
            words(&["node", "server.js"])
        );
        assert_eq!(
            without_heap_flag(&words(&["node", "--max_old_space_size=", "--trace-gc", "a.js"])),
            words(&["node", "--trace-gc", "a.js"])
        );
    }
}
