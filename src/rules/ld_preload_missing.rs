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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    const JEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";

    fn app() -> TestImage {
        TestImage::new().glibc().program("/usr/local/bin/app").cmd(&["app"])
    }

    #[test]
    fn fires_when_the_preloaded_file_is_not_there() {
        let o = check(&app().env(&[&format!("LD_PRELOAD={JEMALLOC}")]).facts());
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Error);
        assert_eq!(
            f.message,
            format!("preload `{JEMALLOC}` resolves to nothing: the loader prints a warning and runs without it")
        );
        assert!(f
            .evidence
            .iter()
            .any(|e| e.text().starts_with(&format!("{JEMALLOC} does not exist in the image"))));
        assert!(f.fix.contains("apt-get install -y --no-install-recommends libjemalloc2"), "{}", f.fix);
        assert!(f.fix.contains(&format!("ENV LD_PRELOAD={JEMALLOC}")), "{}", f.fix);
    }

    #[test]
    fn fires_for_another_architectures_path_and_names_the_right_one() {
        // A Dockerfile written on an arm64 Mac, built for amd64.
        let f = app()
            .jemalloc()
            .env(&["LD_PRELOAD=/usr/lib/aarch64-linux-gnu/libjemalloc.so.2"])
            .facts();
        let o = check(&f);
        assert_eq!(o.findings.len(), 1, "{o:?}");
        let f = &o.findings[0];
        assert!(f.has_evidence(&format!("the image has {JEMALLOC}")));
        assert!(f.fix.starts_with(&format!("ENV LD_PRELOAD={JEMALLOC}\n")), "{}", f.fix);
    }

    #[test]
    fn says_musl_skips_it() {
        let f = TestImage::new()
            .musl()
            .musl_program("/usr/local/bin/app")
            .cmd(&["app"])
            .env(&["LD_PRELOAD=/usr/lib/libjemalloc.so.2"])
            .facts();
        let o = check(&f);
        assert_eq!(o.findings.len(), 1, "{o:?}");
        assert_eq!(
            o.findings[0].message,
            "preload `/usr/lib/libjemalloc.so.2` resolves to nothing: musl skips it without a word"
        );
        assert!(o.findings[0].fix.contains("apk add --no-cache jemalloc"), "{}", o.findings[0].fix);
    }

    #[test]
    fn silent_when_the_preload_resolves() {
        let o = check(&app().jemalloc().env(&[&format!("LD_PRELOAD={JEMALLOC}")]).facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        // By its name alone, found in the system folders.
        let o = check(&app().jemalloc().env(&["LD_PRELOAD=libjemalloc.so.2"]).facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        let o = check(&app().facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
    }
}
