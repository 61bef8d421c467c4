use super::{Outcome, Rule};
use crate::facts::go::memlimit::GoMemLimit;
use crate::facts::go::reads_gomemlimit;
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};

pub(crate) const RULE: Rule = Rule {
    id: "go-memlimit-missing",
    severity: Severity::Note,
    title: "A Go program runs under a memory limit with no GOMEMLIMIT",
    doc: include_str!("../../rules/go-memlimit-missing.md"),
    tags: &["memory", "kubernetes", "go"],
    check,
    anchor: Anchor::Container,
};

/// Modules that set the memory limit from the cgroup at start.
const LIMIT_SETTERS: &[&str] = &["github.com/KimMachineGun/automemlimit"];

fn check(f: &Facts) -> Outcome {
    let Some(c) = &f.container else {
        return Outcome::none();
    };
    let Some(limit) = &c.limits_memory else {
        return Outcome::none();
    };
    let Some(program) = f
        .go
        .binaries
        .iter()
        .find(|b| b.on_entrypoint && reads_gomemlimit(b.go_version.as_deref()))
    else {
        return Outcome::none();
    };
    // Set (to any value, `off` included: a choice) or set in a way memlint cannot tell. Empty
    // is no limit to the runtime (`readGOMEMLIMIT`), as when it is unset.
    match &f.go.memlimit {
        GoMemLimit::Known { value, .. } if !value.is_empty() => return Outcome::none(),
        GoMemLimit::Undecided { why } => return Outcome::undecided(why.clone()),
        GoMemLimit::Known { .. } | GoMemLimit::Unset => {}
    }
    if program.modules().any(|m| LIMIT_SETTERS.contains(&m)) {
        return Outcome::none();
    }
    if !c.env_from.is_empty() {
        return Outcome::undecided(format!(
            "the container takes its env from {}, which may set GOMEMLIMIT",
            c.env_from.join(", ")
        ));
    }
    if !program.deps_complete {
        return Outcome::undecided(format!(
            "the build info of {} is longer than memlint keeps: a module that sets the limit may be in the part left out",
            program.path
        ));
    }
    let suggested = (limit.value.value / 10 * 9) >> 20;
    Outcome::one(
        RULE.finding(format!(
            "{} ({}) runs under limits.memory {} with no GOMEMLIMIT: its GC paces by GOGC alone and lets the heap grow to about twice the live data, past the limit on a spike",
            program.path,
            program.go_version.as_deref().unwrap_or("Go"),
            limit.value.text
        ))
        .evidence(Evidence::naming(
            format!(
                "{} is built by {}, which reads GOMEMLIMIT; its build info names no module that sets the limit ({})",
                program.path,
                program.go_version.as_deref().unwrap_or("Go"),
                LIMIT_SETTERS.join(", ")
            ),
            [program.path.clone()],
        ))
        .evidence(super::k8s::limit_evidence(c, "memory", limit))
        .fix(format!(
            "# about 90 % of the limit, in the Go runtime's syntax (MiB, not Mi):\nenv:\n- name: GOMEMLIMIT\n  value: \"{suggested}MiB\""
        )),
    )
}
