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
