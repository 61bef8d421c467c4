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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::{library, TestImage};

    /// An ASP.NET Core 8 image as mcr.microsoft.com/dotnet/aspnet:8.0 lays it out: Debian 12,
    /// the shared runtime, `dotnet Api.dll` from /app.
    fn aspnet() -> TestImage {
        TestImage::new()
            .glibc()
            .dotnet_runtime("8.0.11")
            .working_dir("/app")
            .entrypoint(&["dotnet", "Api.dll"])
    }

    #[test]
    fn fires_on_glibc_without_an_arena_cap() {
        let f = aspnet().facts();
        assert_eq!(f.libc.family, LibcFamily::Glibc);
        let o = check(&f);
        let finding = o.sole_finding();
        assert_eq!(finding.severity, Severity::Warning);
        assert_eq!(
            finding.message,
            ".NET runs on glibc malloc with no arena cap: native memory will climb and not come down"
        );
        assert!(
            finding.has_evidence("Microsoft.NETCore.App 8.0.11 at /usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.11"),
            "{:?}",
            finding.evidence
        );
        assert!(finding.fix.starts_with("ENV MALLOC_ARENA_MAX=2\n"), "{}", finding.fix);
    }

    #[test]
    fn silent_with_an_arena_cap_or_jemalloc() {
        let o = check(&aspnet().env(&["MALLOC_ARENA_MAX=2"]).facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        let o = check(&aspnet().env(&["GLIBC_TUNABLES=glibc.malloc.arena_max=2"]).facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        let jemalloc = aspnet()
            .jemalloc()
            .env(&["LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"])
            .facts();
        let o = check(&jemalloc);
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        // No .NET runtime: nothing to say.
        let o = check(&TestImage::new().glibc().program("/usr/bin/app").cmd(&["app"]).facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
    }

    #[test]
    fn undecided_on_musl_or_a_computed_cap() {
        // An arena cap a script computes may or may not be there.
        let f = aspnet()
            .file(
                "/entry.sh",
                "#!/bin/sh\nexport MALLOC_ARENA_MAX=$(nproc)\nexec dotnet Api.dll\n",
            )
            .entrypoint(&["/entry.sh"])
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().contains("MALLOC_ARENA_MAX"));
        // musl's malloc has no per-thread arenas.
        let f = TestImage::new()
            .musl()
            .musl_program("/usr/share/dotnet/dotnet")
            .symlink("/usr/bin/dotnet", "../share/dotnet/dotnet")
            .elf(
                "/usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.11/libcoreclr.so",
                library(&[]),
            )
            .working_dir("/app")
            .entrypoint(&["dotnet", "Api.dll"])
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert_eq!(
            o.undecided.as_deref(),
            Some("the .NET runtime runs on musl, which has no per-thread arenas")
        );
    }
}
