use super::{fixes, Outcome, Rule};
use crate::facts::allocator::ArenaCapSource;
use crate::facts::libc::LibcFamily;
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};
use crate::facts::allocator::ARENA_CAP_VARIABLES;

pub(crate) const RULE: Rule = Rule {
    id: "sharp-glibc-allocator",
    severity: Severity::Warning,
    title: "sharp or libvips runs on glibc malloc",
    doc: include_str!("../../rules/sharp-glibc-allocator.md"),
    tags: &["memory", "allocator", "glibc", "sharp", "nodejs"],
    check,
    // An arena cap is where the allocator is set today; with none set, the final FROM.
    anchor: Anchor::Env(ARENA_CAP_VARIABLES),
};

fn check(f: &Facts) -> Outcome {
    if f.sharp.installs.is_empty() && f.sharp.libvips.is_empty() {
        return Outcome::none();
    }
    match f.libc.family {
        LibcFamily::Glibc => {}
        LibcFamily::Unknown => {
            return Outcome::undecided("sharp is present but the entrypoint's C library is unknown")
        }
        other => {
            return Outcome::undecided(format!(
                "sharp is present but the entrypoint runs on {other}, which has no per-thread arenas"
            ))
        }
    }
    if f.allocator.is_replacement() {
        return Outcome::none();
    }
    if let Some(why) = f.allocator.undecided_reason() {
        return Outcome::undecided(why);
    }
    let mut evidence: Vec<Evidence> = f
        .sharp
        .installs
        .iter()
        .map(|s| {
            Evidence::naming(
                format!(
                    "sharp {} at {}",
                    s.version.as_deref().unwrap_or("(version unknown)"),
                    s.path
                ),
                [&s.path],
            )
        })
        .collect();
    evidence.extend(
        f.sharp
            .libvips
            .iter()
            .take(3)
            .map(|l| Evidence::naming(format!("libvips at {l}"), [l])),
    );
    evidence.push(Evidence::naming(
        format!(
            "the entrypoint {} runs on glibc {}",
            f.entrypoint.program.as_deref().unwrap_or("(unknown)"),
            f.libc.version.as_deref().unwrap_or("")
        ),
        &f.entrypoint.program,
    ));
    evidence.extend(f.allocator.evidence.iter().cloned());
    match &f.allocator.arena_cap {
        Some(cap) => {
            let old_sharp = f.sharp.installs.iter().any(|s| s.limits_concurrency_under_arena_cap());
            let mut finding = RULE
                .finding("sharp runs on glibc malloc with only an arena cap: growth stops but the level stays high")
                .severity(Severity::Note)
                .evidence_all(evidence)
                .evidence(Evidence::plain(format!("{}={} caps the arenas", cap.source, cap.value)));
            if old_sharp && cap.source == ArenaCapSource::MallocArenaMax {
                finding = finding.evidence(Evidence::plain(
                    "sharp older than 0.35.3 keeps its concurrency at 1 despite MALLOC_ARENA_MAX",
                ));
            }
            Outcome::one(finding.fix(fixes::jemalloc_fix(f)))
        }
        None => Outcome::one(
            RULE.finding("sharp runs on glibc malloc: resident memory will climb and not come down")
                .evidence_all(evidence)
                .fix(format!(
                    "{}\n# or, without jemalloc, cap the arenas (growth stops earlier, the level stays higher):\n# ENV MALLOC_ARENA_MAX=2",
                    fixes::jemalloc_fix(f)
                )),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    /// node:20-bookworm-slim with sharp 0.34.1 in /app, `node server.js`.
    fn node_sharp() -> TestImage {
        TestImage::new()
            .glibc()
            .node("20.11.1")
            .sharp("/app", "0.34.1", "linux-x64")
            .working_dir("/app")
            .cmd(&["node", "server.js"])
    }

    #[test]
    fn fires_on_glibc_malloc() {
        let o = check(&node_sharp().facts());
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            f.message,
            "sharp runs on glibc malloc: resident memory will climb and not come down"
        );
        assert!(f.has_evidence("the entrypoint /usr/local/bin/node runs on glibc 2.36"));
        assert!(
            f.fix.contains("ENV LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"),
            "{}",
            f.fix
        );
    }

    #[test]
    fn an_arena_cap_alone_is_a_note() {
        let o = check(&node_sharp().env(&["MALLOC_ARENA_MAX=2"]).facts());
        assert_eq!(o.findings.len(), 1, "{o:?}");
        let f = &o.findings[0];
        assert_eq!(f.severity, Severity::Note);
        assert_eq!(
            f.message,
            "sharp runs on glibc malloc with only an arena cap: growth stops but the level stays high"
        );
        assert!(f.has_evidence("sharp older than 0.35.3 keeps its concurrency at 1 despite MALLOC_ARENA_MAX"));
    }

    #[test]
    fn silent_with_jemalloc() {
        let f = node_sharp()
            .jemalloc()
            .env(&["LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"])
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        let o = check(&TestImage::new().glibc().node("20.11.1").cmd(&["node", "server.js"]).facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
    }

    #[test]
    fn undecided_on_musl_or_a_computed_preload() {
        let f = TestImage::new()
            .musl()
            .musl_program("/usr/local/bin/node")
            .sharp("/app", "0.34.1", "linuxmusl-x64")
            .working_dir("/app")
            .cmd(&["node", "server.js"])
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert_eq!(
            o.undecided.as_deref(),
            Some("sharp is present but the entrypoint runs on musl, which has no per-thread arenas")
        );
        let f = node_sharp()
            .file(
                "/entry.sh",
                "#!/bin/sh\nexport LD_PRELOAD=$(cat /etc/jemalloc-path)\nexec node server.js\n",
            )
            .entrypoint(&["/entry.sh"])
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().contains("possibly in effect"));
    }
}
