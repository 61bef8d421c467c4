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
