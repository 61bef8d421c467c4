use super::{Outcome, Rule};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};
use crate::version::Version;

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
            let target = match Version::parse(version) {
                Some(v) if v.major >= 16 => "16.1.7",
                _ => "15.5.14",
            };
            Outcome::one(
                RULE.finding(format!("Next.js {version} has no bound on its image disk cache: upgrade to {target} or later"))
                    .evidence(evidence)
                    .evidence(Evidence::plain("maximumDiskCacheSize exists only in 15.5.14+ (15.x) and 16.1.7+ (16.x)"))
                    .fix(format!("upgrade next to {target} or later, then set images.maximumDiskCacheSize in next.config.js")),
            )
        }
    }
}
