use super::{fixes, Outcome, Rule};
use crate::facts::allocator::Allocator;
use crate::facts::libc::LibcFamily;
use crate::facts::preload::PreloadStatus;
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};

pub(crate) const RULE: Rule = Rule {
    id: "jemalloc-not-preloaded",
    severity: Severity::Warning,
    title: "An allocator is installed but the entrypoint does not use it",
    doc: include_str!("../../rules/jemalloc-not-preloaded.md"),
    tags: &["memory", "allocator", "glibc"],
    check,
    // The instruction that installed the allocator.
    anchor: Anchor::Installs(&["jemalloc", "tcmalloc", "mimalloc", "gperftools"]),
};

fn check(f: &Facts) -> Outcome {
    if f.allocator.is_replacement() || f.allocator.installed_not_in_effect.is_empty() {
        return Outcome::none();
    }
    if f.libc.family != LibcFamily::Glibc {
        return Outcome::undecided(format!(
            "the entrypoint runs on {}, whose malloc has no per-thread arenas",
            f.libc.family
        ));
    }
    if let Some(why) = f.allocator.undecided_reason() {
        return Outcome::undecided(why);
    }
    // A preload that names an allocator but does not work is the other rules' finding.
    if f.preloads
        .iter()
        .any(|p| p.allocator.is_some() && p.status != PreloadStatus::Ok)
    {
        return Outcome::undecided("a preload names an allocator but does not work; ld-preload-missing or ld-preload-incompatible reports it");
    }
    let mut workloads = Vec::new();
    for s in &f.sharp.installs {
        workloads.push(Evidence::naming(
            format!(
                "sharp {} at {}",
                s.version.as_deref().unwrap_or("(unknown version)"),
                s.path
            ),
            [&s.path],
        ));
    }
    if f.sharp.installs.is_empty() {
        for l in f.sharp.libvips.iter().take(3) {
            workloads.push(Evidence::naming(format!("libvips at {l}"), [l]));
        }
    }
    for r in &f.dotnet.runtimes {
        let version = if r.version.is_empty() {
            String::new()
        } else {
            format!(" {}", r.version)
        };
        workloads.push(Evidence::naming(
            format!(".NET runtime {}{version} at {}", r.name, r.path),
            [&r.path],
        ));
    }
    if workloads.is_empty() {
        return Outcome::undecided(
            "no workload that needs another allocator (sharp/libvips, .NET) is in the image",
        );
    }
    let lib = &f.allocator.installed_not_in_effect[0];
    let finding = RULE
        .finding(format!("{} is installed at {} but the entrypoint runs on glibc malloc", lib.name, lib.path))
        .evidence_all(
            f.allocator
                .installed_not_in_effect
                .iter()
                .map(|l| Evidence::naming(format!("{} installed at {}", l.name, l.path), [&l.path])),
        )
        .evidence_all(workloads)
        .evidence_all(f.allocator.evidence.iter().cloned())
        .fix(if lib.name == Allocator::Jemalloc {
            fixes::preload_env_with(f, &lib.path)
        } else {
            format!("{}\n# or, to use the {} that is installed (sharp stays single-threaded without jemalloc):\n# {}", fixes::jemalloc_fix(f), lib.name, fixes::preload_env_with(f, &lib.path))
        });
    Outcome::one(finding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    const JEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";

    /// node:20-bookworm-slim with sharp and Debian's libjemalloc2 installed, `node server.js`.
    fn sharp_with_jemalloc() -> TestImage {
        TestImage::new()
            .glibc()
            .node("20.11.1")
            .sharp("/app", "0.34.1", "linux-x64")
            .jemalloc()
            .working_dir("/app")
            .cmd(&["node", "server.js"])
    }

    #[test]
    fn fires_when_jemalloc_sits_unused_beside_sharp() {
        let o = check(&sharp_with_jemalloc().facts());
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            f.message,
            format!("jemalloc is installed at {JEMALLOC} but the entrypoint runs on glibc malloc")
        );
        assert!(f.has_evidence("sharp 0.34.1 at /app/node_modules/sharp"));
        assert_eq!(f.fix, format!("ENV LD_PRELOAD={JEMALLOC}"));
    }

    #[test]
    fn silent_once_it_is_preloaded() {
        let o = check(&sharp_with_jemalloc().env(&[&format!("LD_PRELOAD={JEMALLOC}")]).facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        // No allocator installed: nothing unused.
        let o = check(
            &TestImage::new()
                .glibc()
                .node("20.11.1")
                .sharp("/app", "0.34.1", "linux-x64")
                .working_dir("/app")
                .cmd(&["node", "server.js"])
                .facts(),
        );
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
    }

    #[test]
    fn undecided_without_a_workload_or_with_a_broken_preload() {
        // jemalloc beside a program that needs no other allocator.
        let f = TestImage::new()
            .glibc()
            .jemalloc()
            .program("/usr/local/bin/app")
            .cmd(&["app"])
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert_eq!(
            o.undecided.as_deref(),
            Some("no workload that needs another allocator (sharp/libvips, .NET) is in the image")
        );
        // A preload that names jemalloc at another architecture's path: ld-preload-missing's.
        let f = sharp_with_jemalloc()
            .env(&["LD_PRELOAD=/usr/lib/aarch64-linux-gnu/libjemalloc.so.2"])
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().contains("ld-preload-missing"));
    }
}
