use super::{fixes, preload, Outcome, Rule};
use crate::facts::allocator::Allocator;
use crate::facts::libc::LibcFamily;
use crate::facts::preload::PreloadStatus;
use crate::facts::Facts;
use crate::finding::{Evidence, Severity};

pub(crate) const RULE: Rule = Rule {
    id: "ld-preload-missing",
    severity: Severity::Error,
    title: "A preloaded library resolves to nothing",
    doc: include_str!("../../rules/ld-preload-missing.md"),
    tags: &["memory", "allocator", "ld-preload", "correctness"],
    check,
    // Each finding names its own preload's source.
    anchor: preload::ENV_ANCHOR,
};

fn check(f: &Facts) -> Outcome {
    f.preloads
        .iter()
        .filter(|p| p.status == PreloadStatus::Missing)
        .map(|p| {
            let silently = match f.libc.family {
                LibcFamily::Musl => "musl skips it without a word",
                _ => "the loader prints a warning and runs without it",
            };
            let mut finding = RULE
                .finding(format!("preload `{}` resolves to nothing: {silently}", p.entry))
                .anchor(preload::anchor(p))
                .evidence(preload::listed(f, p))
                .evidence(Evidence::naming(p.reason.clone(), &p.reason_paths));
            if let Some(n) = p.removed_in_layer {
                finding = finding.evidence(Evidence::plain(format!(
                    "layer {n} removed it{}",
                    p.removed_by.as_deref().map(|h| format!(": {}", h.trim())).unwrap_or_default()
                )));
            }
            for c in &p.candidates {
                finding = finding.evidence(Evidence::naming(format!("the image has {c}"), [c]));
            }
            let fix = match (p.candidates.first(), p.removed_in_layer, p.allocator) {
                (Some(c), _, _) => format!(
                    "{}\n# the path that exists in this image; for images built for several architectures, link it to a fixed path:\n# RUN ln -s /usr/lib/$(uname -m)-linux-gnu/libjemalloc.so.2 /usr/local/lib/libjemalloc.so.2",
                    fixes::replace_preload(f, p, Some(c))
                ),
                (None, Some(_), Some(Allocator::Jemalloc)) => format!(
                    "keep the library: do not remove it in the later layer{}, or install it again:\n{}",
                    p.removed_by.as_deref().map(|h| format!(" (`{}`)", h.trim())).unwrap_or_default(),
                    fixes::install_jemalloc(f)
                ),
                (None, _, Some(Allocator::Jemalloc)) => format!("{}\n{}", fixes::install_jemalloc(f), fixes::replace_preload(f, p, Some(&fixes::jemalloc_path(f)))),
                _ => format!(
                    "install the library the entry names, or drop the entry:\n{}",
                    fixes::replace_preload(f, p, None)
                ),
            };
            finding.fix(fix)
        })
        .collect::<Vec<_>>()
        .into()
}
