use super::{Outcome, Rule};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};

pub(crate) const RULE: Rule = Rule {
    id: "next-image-cache-ttl",
    severity: Severity::Note,
    title: "The Next.js image optimizer re-encodes images every minute",
    doc: include_str!("../../rules/next-image-cache-ttl.md"),
    tags: &["performance", "memory", "nextjs", "sharp"],
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
    let Some(ttl) = next.image.minimum_cache_ttl else {
        return Outcome::undecided(
            "the effective minimumCacheTTL is unknown (no config found, or an unknown Next.js version)",
        );
    };
    if ttl > 60 {
        return Outcome::none();
    }
    let how = if next.image.minimum_cache_ttl_default {
        "the default of this version"
    } else {
        "as configured"
    };
    let version = next.version.as_deref().unwrap_or("(version unknown)");
    Outcome::one(
        RULE.finding(format!(
            "Next.js {version} keeps optimized images for only {ttl} s ({how})"
        ))
        .evidence(Evidence::naming(
            format!("next {version} at {}", next.package),
            [&next.package],
        ))
        .evidence(Evidence::naming(
            format!(
                "images.minimumCacheTTL = {ttl}{}",
                next.standalone
                    .as_deref()
                    .map(|s| format!(" in {s}"))
                    .unwrap_or_default()
            ),
            &next.standalone,
        ))
        .fix("in next.config.js: images: { minimumCacheTTL: 14400 }   // 4 hours, the Next.js 16 default"),
    )
}
