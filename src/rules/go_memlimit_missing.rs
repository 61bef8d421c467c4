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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    fn server(go: &str, deps: &[&str], env: &[&str]) -> TestImage {
        TestImage::new()
            .glibc()
            .go("/app/server", go, deps)
            .env(env)
            .cmd(&["/app/server"])
    }

    const LIMIT: &str = "    resources:\n      limits: {memory: 512Mi}\n";

    #[test]
    fn fires_under_a_limit_with_no_gomemlimit() {
        let o = check(&server("go1.22.1", &[], &[]).facts_in(LIMIT));
        assert_eq!(o.findings.len(), 1, "{o:?}");
        let f = &o.findings[0];
        assert_eq!(f.severity, Severity::Note);
        assert!(f.message.starts_with("/app/server (go1.22.1) runs under limits.memory 512Mi with no GOMEMLIMIT"), "{}", f.message);
        assert!(f.fix.contains("value: \"460MiB\""), "{}", f.fix);
        // An empty GOMEMLIMIT is no limit to the runtime.
        assert_eq!(check(&server("go1.22.1", &[], &["GOMEMLIMIT="]).facts_in(LIMIT)).findings.len(), 1);
    }

    #[test]
    fn silent_when_set_sized_by_a_module_too_old_or_alone() {
        for env in [&["GOMEMLIMIT=400MiB"][..], &["GOMEMLIMIT=off"]] {
            let o = check(&server("go1.22.1", &[], env).facts_in(LIMIT));
            assert!(o.findings.is_empty() && o.undecided.is_none(), "{env:?}: {o:?}");
        }
        let o = check(&server("go1.22.1", &[LIMIT_SETTERS[0]], &[]).facts_in(LIMIT));
        assert!(o.findings.is_empty(), "{o:?}");
        let o = check(&server("go1.18.10", &[], &[]).facts_in(LIMIT));
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(check(&server("go1.22.1", &[], &[]).facts()).findings.is_empty());
    }

    #[test]
    fn undecided_from_a_secret_or_env_from() {
        let secret = format!(
            "{LIMIT}    env:\n    - name: GOMEMLIMIT\n      valueFrom: {{secretKeyRef: {{name: s, key: k}}}}\n"
        );
        let o = check(&server("go1.22.1", &[], &[]).facts_in(&secret));
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.is_some_and(|w| w.contains("GOMEMLIMIT")));
        let env_from = format!("{LIMIT}    envFrom:\n    - configMapRef: {{name: settings}}\n");
        let o = check(&server("go1.22.1", &[], &[]).facts_in(&env_from));
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.is_some_and(|w| w.contains("may set GOMEMLIMIT")));
    }
}
