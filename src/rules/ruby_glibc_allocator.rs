use super::{fixes, Outcome, Rule};
use crate::facts::libc::LibcFamily;
use crate::facts::os::Distro;
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};
use crate::facts::allocator::PRELOAD_OR_ARENA_CAP_VARIABLES;

pub(crate) const RULE: Rule = Rule {
    id: "ruby-glibc-allocator",
    severity: Severity::Warning,
    title: "A Ruby server runs on glibc malloc with no jemalloc and no arena cap",
    doc: include_str!("../../rules/ruby-glibc-allocator.md"),
    tags: &["memory", "allocator", "glibc", "ruby"],
    check,
    // The preload or the arena cap is the fix; with neither set, the final FROM.
    anchor: Anchor::Env(PRELOAD_OR_ARENA_CAP_VARIABLES),
};

fn check(f: &Facts) -> Outcome {
    let Some(r) = &f.ruby else {
        return Outcome::none();
    };
    if r.servers.is_empty() {
        return Outcome::undecided(format!(
            "Ruby at {} runs no server memlint knows (puma, sidekiq, unicorn, rails) in a Gemfile.lock or the entrypoint",
            r.binary
        ));
    }
    let family = match r.interpreter.as_deref() {
        Some(i) if i.contains("ld-musl") => LibcFamily::Musl,
        Some(i) if i.contains("ld-linux") => LibcFamily::Glibc,
        _ => f.libc.family,
    };
    match family {
        LibcFamily::Glibc => {}
        LibcFamily::Musl => {
            return Outcome::undecided(format!(
                "Ruby at {} runs on musl, whose malloc has no per-thread arenas",
                r.binary
            ))
        }
        other => return Outcome::undecided(format!("the C library Ruby runs on is {other}")),
    }
    if r.jemalloc_linked || f.allocator.is_replacement() || f.allocator.arena_cap.is_some() {
        return Outcome::none();
    }
    if let Some(why) = f.allocator.undecided_reason() {
        return Outcome::undecided(why);
    }
    let mut evidence = vec![Evidence::naming(
        format!(
            "Ruby {} at {}{}, not built with jemalloc",
            r.version.as_deref().unwrap_or("(version unknown)"),
            r.binary,
            r.library.as_deref().map(|l| format!(" with {l}")).unwrap_or_default()
        ),
        [Some(&r.binary), r.library.as_ref()].into_iter().flatten(),
    )];
    for s in &r.servers {
        let v = s.version.as_deref().map(|v| format!(" {v}")).unwrap_or_default();
        evidence.push(Evidence::naming(format!("{}{v} (from {})", s.name, s.source), [&s.source]));
    }
    evidence.extend(f.allocator.evidence.iter().cloned());
    let multiarch = if f.os.distro == Distro::Debian {
        "\n# for images built for several architectures, Rails 8.1's lines:\n# RUN ln -s /usr/lib/$(uname -m)-linux-gnu/libjemalloc.so.2 /usr/local/lib/libjemalloc.so\n# ENV LD_PRELOAD=/usr/local/lib/libjemalloc.so"
    } else {
        ""
    };
    Outcome::one(
        RULE.finding(format!(
            "Ruby ({}) runs on glibc malloc with no jemalloc and no arena cap: resident memory will climb and not come down",
            r.servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
        ))
        .evidence_all(evidence)
        .fix(format!(
            "{}{multiarch}\n# or, without a package, cap the arenas:\n# ENV MALLOC_ARENA_MAX=2",
            fixes::jemalloc_fix(f)
        )),
    )
}
