use super::{Outcome, Rule};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};
use crate::facts::next::{disk_cache_size_release, disk_cache_size_releases};

pub(crate) const RULE: Rule = Rule {
    id: "next-image-disk-cache",
    severity: Severity::Note,
    title: "The Next.js image optimizer's disk cache has no bound",
    doc: include_str!("../../rules/next-image-disk-cache.md"),
    tags: &["disk", "memory", "nextjs"],
    check,
    // The instruction that builds or copies the Next.js app.
    anchor: Anchor::Installs(&[".next", "next build"]),
};

fn check(f: &Facts) -> Outcome {
    let Some(next) = &f.next else {
        return Outcome::none();
    };
    if !next.optimizer_in_use {
        return Outcome::undecided(
            "the Next.js image optimizer is not in use (unoptimized images or a custom loader)",
        );
    }
    let version = next.version.as_deref().unwrap_or("(version unknown)");
    let evidence = Evidence::naming(format!("next {version} at {}", next.package), [&next.package]);
    match next.image.disk_cache_size_supported {
        None => Outcome::undecided("the Next.js version is unknown, so whether it bounds its disk cache is too"),
        Some(true) if next.image.maximum_disk_cache_size.is_some() => Outcome::none(),
        Some(true) => Outcome::one(
            RULE.finding(format!("Next.js {version} may fill half of the free disk with optimized images: maximumDiskCacheSize is unset"))
                .evidence(evidence)
                .evidence(Evidence::plain("images.maximumDiskCacheSize is not set: the cache takes up to half the free space of its file system"))
                .fix("in next.config.js: images: { maximumDiskCacheSize: 512 * 1024 * 1024 }   // bytes; 0 turns the disk cache off"),
        ),
        Some(false) => {
            let target = disk_cache_size_release(next.parsed_version().as_ref());
            Outcome::one(
                RULE.finding(format!("Next.js {version} has no bound on its image disk cache: upgrade to {target} or later"))
                    .evidence(evidence)
                    .evidence(Evidence::plain(format!(
                        "maximumDiskCacheSize exists only in {}",
                        disk_cache_size_releases(false)
                    )))
                    .fix(format!("upgrade next to {target} or later, then set images.maximumDiskCacheSize in next.config.js")),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    use crate::facts::testing::NEXT_15_SERVER_FILES as RSF_15;
    use crate::facts::testing::NEXT_16_SERVER_FILES as RSF_16;


    #[test]
    fn fires_when_the_setting_is_unset() {
        let o = check(&TestImage::new().next_standalone("15.5.14", RSF_15).facts());
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Note);
        assert_eq!(
            f.message,
            "Next.js 15.5.14 may fill half of the free disk with optimized images: maximumDiskCacheSize is unset"
        );
        assert!(f.has_evidence("next 15.5.14 at /app/node_modules/next/package.json"));
        assert!(f.fix.contains("maximumDiskCacheSize: 512 * 1024 * 1024"));
    }

    #[test]
    fn fires_on_versions_without_the_setting() {
        let o = check(&TestImage::new().next_standalone("15.5.13", RSF_15).facts());
        assert_eq!(o.findings.len(), 1, "{o:?}");
        assert_eq!(
            o.findings[0].message,
            "Next.js 15.5.13 has no bound on its image disk cache: upgrade to 15.5.14 or later"
        );
        // 16.1.6 ignores the key its config sets.
        let o = check(&TestImage::new().next_standalone("16.1.6", RSF_16).facts());
        assert_eq!(o.findings.len(), 1, "{o:?}");
        assert_eq!(
            o.findings[0].message,
            "Next.js 16.1.6 has no bound on its image disk cache: upgrade to 16.1.7 or later"
        );
        assert_eq!(
            o.findings[0].fix,
            "upgrade next to 16.1.7 or later, then set images.maximumDiskCacheSize in next.config.js"
        );
    }

    #[test]
    fn silent_when_bounded() {
        // next-16.1.7's manifest sets maximumDiskCacheSize: 0 (no disk cache).
        let o = check(&TestImage::new().next_standalone("16.1.7", RSF_16).facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        let manifest = RSF_15.replace(
            "\"minimumCacheTTL\": 60,",
            "\"minimumCacheTTL\": 60, \"maximumDiskCacheSize\": 536870912,",
        );
        assert_ne!(manifest, RSF_15, "the manifest holds the key as written here");
        let o = check(&TestImage::new().next_standalone("15.5.14", &manifest).facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
    }

    #[test]
    fn undecided_without_the_optimizer_or_a_version() {
        let manifest = RSF_15.replace("\"unoptimized\": false", "\"unoptimized\": true");
        assert_ne!(manifest, RSF_15, "the manifest holds the key as written here");
        let o = check(&TestImage::new().next_standalone("15.5.14", &manifest).facts());
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().contains("not in use"));
        let f = TestImage::new()
            .glibc()
            .node("20.11.1")
            .file("/app/node_modules/next/package.json", r#"{"name":"next"}"#)
            .file("/app/server.js", "")
            .file("/app/.next/required-server-files.json", RSF_15)
            .working_dir("/app")
            .cmd(&["node", "server.js"])
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert_eq!(
            o.undecided.as_deref(),
            Some("the Next.js version is unknown, so whether it bounds its disk cache is too")
        );
    }
}
