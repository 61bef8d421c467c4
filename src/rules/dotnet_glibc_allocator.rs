use super::{fixes, Outcome, Rule};
use crate::facts::libc::LibcFamily;
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};
use crate::facts::allocator::ARENA_CAP_VARIABLES;

pub(crate) const RULE: Rule = Rule {
    id: "dotnet-glibc-allocator",
    severity: Severity::Warning,
    title: "A .NET runtime runs on glibc malloc with no arena cap",
    doc: include_str!("../../rules/dotnet-glibc-allocator.md"),
    tags: &["memory", "allocator", "glibc", "dotnet"],
    check,
    // The arena cap is the fix; with none set, the final FROM.
    anchor: Anchor::Env(ARENA_CAP_VARIABLES),
};

fn check(f: &Facts) -> Outcome {
    if f.dotnet.runtimes.is_empty() {
        return Outcome::none();
    }
    match f.libc.family {
        LibcFamily::Glibc => {}
        LibcFamily::Unknown => {
            return Outcome::undecided("a .NET runtime is present but the entrypoint's C library is unknown")
        }
        other => {
            return Outcome::undecided(format!(
                "the .NET runtime runs on {other}, which has no per-thread arenas"
            ))
        }
    }
    if f.allocator.is_replacement() || f.allocator.arena_cap.is_some() {
        return Outcome::none();
    }
    if let Some(why) = f.allocator.undecided_reason() {
        return Outcome::undecided(why);
    }
    let evidence = f
        .dotnet
        .runtimes
        .iter()
        .map(|r| {
            let kind = if r.self_contained { "self-contained " } else { "" };
            let version = if r.version.is_empty() {
                String::new()
            } else {
                format!(" {}", r.version)
            };
            Evidence::naming(format!("{kind}{}{version} at {}", r.name, r.path), [&r.path])
        })
        .chain(std::iter::once(Evidence::plain(format!(
            "glibc {} with no MALLOC_ARENA_MAX or GLIBC_TUNABLES arena cap",
            f.libc.version.as_deref().unwrap_or("")
        ))))
        .chain(f.allocator.evidence.iter().cloned());
    Outcome::one(
        RULE.finding(
            ".NET runs on glibc malloc with no arena cap: native memory will climb and not come down",
        )
        .evidence_all(evidence)
        .fix(format!(
            "ENV MALLOC_ARENA_MAX=2\n# or jemalloc:\n# {}",
            fixes::jemalloc_fix(f).replace('\n', "\n# ")
        )),
    )
}
