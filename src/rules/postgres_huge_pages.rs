use super::k8s::container_name;
use super::{Outcome, Rule};
use crate::facts::postgres::HUGE_PAGES;
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};

pub(crate) const RULE: Rule = Rule {
    id: "postgres-huge-pages",
    severity: Severity::Note,
    title: "PostgreSQL tries huge pages in a container that requests none",
    doc: include_str!("../../rules/postgres-huge-pages.md"),
    tags: &["kubernetes", "postgresql", "hugepages"],
    check,
    anchor: Anchor::Container,
};

fn check(f: &Facts) -> Outcome {
    let (Some(c), Some(pg)) = (&f.container, &f.postgres) else {
        return Outcome::none();
    };
    if c.hugepages.iter().any(|h| h.page_size == "2Mi" && h.quantity.value > 0) {
        return Outcome::none();
    }
    let setting = pg.setting(HUGE_PAGES);
    match setting.map(|s| s.value.as_str()) {
        Some("off" | "false" | "no" | "0") => return Outcome::none(),
        // `on` fails at start without huge pages, visibly: not this rule's case.
        Some("on" | "true" | "yes" | "1") => return Outcome::none(),
        _ => {}
    }
    if setting.is_none() {
        if let Some(why) = &pg.undecided {
            return Outcome::undecided(why.clone());
        }
    }
    let shown = match setting {
        Some(s) => format!("huge_pages = {} ({})", s.value, s.source),
        None => format!(
            "huge_pages is try (the default): {} does not set it",
            pg.config.as_deref().unwrap_or("no configuration file in the image")
        ),
    };
    let finding = RULE
        .finding(format!(
            "PostgreSQL in {} leaves huge_pages at try and the container requests no hugepages-2Mi: on a node with huge pages configured the mapping succeeds, and the server (or initdb) dies with SIGBUS when it touches pages the pod's hugetlb limit does not allow",
            container_name(c)
        ))
        .evidence(Evidence::naming(
            format!(
                "PostgreSQL{} at {}",
                pg.major.as_deref().map(|m| format!(" {m}")).unwrap_or_default(),
                pg.binary
            ),
            [pg.binary.clone()],
        ))
        .evidence(match setting.and_then(|s| s.path.clone()) {
            Some(p) => Evidence::naming(shown, [p]),
            None => Evidence::plain(shown),
        })
        .anchor(Anchor::Command)
        .fix(
            "# turn huge pages off for the server (and for initdb, through POSTGRES_INITDB_ARGS on the official image)\n        args: [\"postgres\", \"-c\", \"huge_pages=off\"]\n# or request them, so that the pod may use them:\n        resources:\n          limits:\n            hugepages-2Mi: 256Mi   # at least shared_buffers and its overhead\n            memory: …".to_string(),
        );
    Outcome::one(finding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    fn postgres() -> TestImage {
        TestImage::new()
            .glibc()
            .program("/usr/lib/postgresql/15/bin/postgres")
            .file("/usr/share/postgresql/15/postgresql.conf.sample", "#huge_pages = try\n")
            .cmd(&["/usr/lib/postgresql/15/bin/postgres"])
    }

    #[test]
    fn fires_in_a_pod_without_hugepages() {
        let o = check(&postgres().facts_in("    resources:\n      limits: {memory: 1Gi}\n"));
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Note);
        assert!(f.has_evidence("huge_pages is try (the default): /usr/share/postgresql/15/postgresql.conf.sample does not set it"), "{:?}", f.evidence);
    }

    #[test]
    fn silent_with_off_with_hugepages_or_alone() {
        for o in [
            check(&postgres().facts_in("    args: [\"-c\", \"huge_pages=off\"]\n")),
            check(&postgres().facts_in("    resources:\n      limits: {memory: 1Gi, hugepages-2Mi: 512Mi}\n")),
            check(&postgres().facts()),
        ] {
            assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        }
    }
}
