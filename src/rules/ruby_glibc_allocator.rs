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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::{executable, TestImage, GLIBC_LOADER};

    const GEMFILE_LOCK: &str = "GEM\n  remote: https://rubygems.org/\n  specs:\n    nio4r (2.7.4)\n    puma (6.4.3)\n      nio4r (~> 2.0)\n    rails (7.2.2)\n\nPLATFORMS\n  x86_64-linux\n\nDEPENDENCIES\n  puma (>= 5.0)\n  rails (~> 7.2.2)\n";

    /// A Rails app on ruby:3.3-slim (Debian 12): `bundle exec puma` from /rails.
    fn rails() -> TestImage {
        TestImage::new()
            .glibc()
            .program("/usr/local/bin/ruby")
            .file("/usr/local/bin/bundle", "#!/usr/local/bin/ruby\n# bundler\n")
            .file("/rails/Gemfile.lock", GEMFILE_LOCK)
            .env(&["RUBY_VERSION=3.3.6"])
            .working_dir("/rails")
            .cmd(&["bundle", "exec", "puma", "-C", "config/puma.rb"])
    }

    #[test]
    fn fires_for_a_server_on_glibc_malloc() {
        let f = rails().facts();
        assert_eq!(f.ruby.as_ref().map(|r| r.binary.as_str()), Some("/usr/local/bin/ruby"));
        let o = check(&f);
        let finding = o.sole_finding();
        assert_eq!(finding.severity, Severity::Warning);
        assert_eq!(
            finding.message,
            "Ruby (puma, rails) runs on glibc malloc with no jemalloc and no arena cap: resident memory will climb and not come down"
        );
        assert!(finding.has_evidence("puma 6.4.3 (from /rails/Gemfile.lock)"));
        assert!(finding.fix.contains("libjemalloc2"), "{}", finding.fix);
        assert!(finding.fix.contains("# ENV MALLOC_ARENA_MAX=2"), "{}", finding.fix);
    }

    #[test]
    fn silent_with_jemalloc_or_an_arena_cap() {
        let o = check(&rails().env(&["MALLOC_ARENA_MAX=2"]).facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        let o = check(
            &rails()
                .jemalloc()
                .env(&["LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"])
                .facts(),
        );
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        // Ruby built --with-jemalloc (fullstaq-ruby).
        let built_with = rails()
            .jemalloc()
            .elf(
                "/usr/local/bin/ruby",
                executable(GLIBC_LOADER, &["libjemalloc.so.2", "libc.so.6"]),
            )
            .facts();
        assert!(built_with.ruby.as_ref().is_some_and(|r| r.jemalloc_linked));
        let o = check(&built_with);
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
    }

    #[test]
    fn undecided_without_a_known_server_or_on_musl() {
        let f = TestImage::new()
            .glibc()
            .program("/usr/local/bin/ruby")
            .file("/app/report.rb", "puts 1\n")
            .working_dir("/app")
            .cmd(&["ruby", "report.rb"])
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().starts_with("Ruby at /usr/local/bin/ruby runs no server memlint knows"));
        let f = TestImage::new()
            .musl()
            .musl_program("/usr/local/bin/ruby")
            .file("/rails/Gemfile.lock", GEMFILE_LOCK)
            .working_dir("/rails")
            .cmd(&["ruby", "bin/rails", "server"])
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert_eq!(
            o.undecided.as_deref(),
            Some("Ruby at /usr/local/bin/ruby runs on musl, whose malloc has no per-thread arenas")
        );
    }
}
