use super::{fixes, preload, Outcome, Rule};
use crate::facts::allocator::Allocator;
use crate::facts::libc::LibcFamily;
use crate::facts::os::Distro;
use crate::facts::preload::PreloadStatus;
use crate::facts::Facts;
use crate::finding::{Evidence, Severity};

pub(crate) const RULE: Rule = Rule {
    id: "ld-preload-incompatible",
    severity: Severity::Error,
    title: "A preloaded library cannot work in this image",
    doc: include_str!("../../rules/ld-preload-incompatible.md"),
    tags: &["memory", "allocator", "ld-preload", "correctness"],
    check,
    // Each finding names its own preload's source.
    anchor: preload::ENV_ANCHOR,
};

fn check(f: &Facts) -> Outcome {
    f.preloads
        .iter()
        .filter(|p| p.status == PreloadStatus::Incompatible)
        .map(|p| {
            let resolved = p.resolved.as_deref().unwrap_or(&p.entry);
            let message = if p.fatal {
                format!("preload `{}` cannot load: every process in the container fails to start", p.entry)
            } else {
                format!("preload `{}` names a library the loader rejects", p.entry)
            };
            let mut finding = RULE
                .finding(message)
                .anchor(preload::anchor(p))
                .evidence(preload::listed(f, p))
                .evidence(Evidence::naming(p.reason.clone(), &p.reason_paths));
            for c in &p.candidates {
                finding = finding.evidence(Evidence::naming(format!("the image has {c}"), [c]));
            }
            let fix = if !p.unresolved_needed.is_empty() {
                let pkgs: Vec<&str> = p.unresolved_needed.iter().filter_map(|n| fixes::debian_package_for(n)).collect();
                if f.os.distro == Distro::Debian && pkgs.len() == p.unresolved_needed.len() {
                    format!(
                        "install what {resolved} needs:\nRUN apt-get update && apt-get install -y --no-install-recommends {} && rm -rf /var/lib/apt/lists/*",
                        pkgs.join(" ")
                    )
                } else {
                    format!(
                        "install the packages that provide {} (the distribution's package of the library brings them), or drop the entry:\n{}",
                        p.unresolved_needed.join(", "),
                        fixes::replace_preload(f, p, None)
                    )
                }
            } else if let Some(c) = p.candidates.first() {
                fixes::replace_preload(f, p, Some(c))
            } else if p.allocator == Some(Allocator::Jemalloc) {
                let install = match f.libc.family {
                    LibcFamily::Musl => "RUN apk add --no-cache jemalloc   # built for musl".to_string(),
                    _ => fixes::install_jemalloc(f),
                };
                format!("{install}\n{}", fixes::replace_preload(f, p, Some(&fixes::jemalloc_path(f))))
            } else {
                format!("point the entry at a shared library built for this image, or drop it:\n{}", fixes::replace_preload(f, p, None))
            };
            finding.fix(fix)
        })
        .collect::<Vec<_>>()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::{library, library_for, TestImage, AARCH64, LIB};

    const JEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";

    /// Debian 12 running `app`, with `LD_PRELOAD` naming jemalloc.
    fn preloading() -> TestImage {
        TestImage::new()
            .glibc()
            .program("/usr/local/bin/app")
            .cmd(&["app"])
            .env(&[&format!("LD_PRELOAD={JEMALLOC}")])
    }

    #[test]
    fn fires_for_a_preload_whose_needs_are_missing() {
        // A jemalloc built with C++ support copied in without libstdc++.
        let f = preloading()
            .elf(JEMALLOC, library(&["libc.so.6", "libstdc++.so.6"]))
            .facts();
        let o = check(&f);
        let finding = o.sole_finding();
        assert_eq!(finding.severity, Severity::Error);
        assert_eq!(
            finding.message,
            format!("preload `{JEMALLOC}` cannot load: every process in the container fails to start")
        );
        assert!(finding.has_evidence(&format!("LD_PRELOAD={JEMALLOC}")));
        assert!(
            finding
                .fix
                .contains("apt-get install -y --no-install-recommends libstdc++6"),
            "{}",
            finding.fix
        );
    }

    #[test]
    fn fires_for_a_library_of_another_machine() {
        let f = preloading().elf(JEMALLOC, library_for(AARCH64, &["libc.so.6"])).facts();
        let o = check(&f);
        assert_eq!(o.findings.len(), 1, "{o:?}");
        assert_eq!(
            o.findings[0].message,
            format!("preload `{JEMALLOC}` names a library the loader rejects")
        );
        assert!(o.findings[0]
            .evidence
            .iter()
            .any(|e| e.text().contains("built for arm64")));
    }

    #[test]
    fn silent_when_the_preload_loads_or_is_missing() {
        let o = check(&preloading().jemalloc().facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        // Its needs installed.
        let f = preloading()
            .elf(JEMALLOC, library(&["libc.so.6", "libstdc++.so.6"]))
            .elf(&format!("{LIB}/libstdc++.so.6"), library(&["libc.so.6"]))
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        // A missing file is ld-preload-missing's finding, not this rule's.
        let o = check(&preloading().facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
    }
}
