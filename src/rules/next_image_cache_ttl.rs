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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    use crate::facts::testing::NEXT_15_SERVER_FILES as RSF_15;
    use crate::facts::testing::NEXT_16_SERVER_FILES as RSF_16;


    #[test]
    fn fires_on_next_15s_default_of_a_minute() {
        let o = check(&TestImage::new().next_standalone("15.5.14", RSF_15).facts());
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Note);
        assert_eq!(
            f.message,
            "Next.js 15.5.14 keeps optimized images for only 60 s (the default of this version)"
        );
        assert!(f.has_evidence("images.minimumCacheTTL = 60 in /app/.next/required-server-files.json"));
        assert!(f.fix.contains("minimumCacheTTL: 14400"));
        // Set lower on purpose: "as configured".
        let manifest = RSF_16.replace("\"minimumCacheTTL\": 14400", "\"minimumCacheTTL\": 30");
        assert_ne!(manifest, RSF_16, "the manifest holds the key as written here");
        let o = check(&TestImage::new().next_standalone("16.1.7", &manifest).facts());
        assert_eq!(o.findings.len(), 1, "{o:?}");
        assert_eq!(
            o.findings[0].message,
            "Next.js 16.1.7 keeps optimized images for only 30 s (as configured)"
        );
    }

    #[test]
    fn silent_with_a_longer_ttl() {
        let o = check(&TestImage::new().next_standalone("16.1.7", RSF_16).facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        let manifest = RSF_15.replace("\"minimumCacheTTL\": 60", "\"minimumCacheTTL\": 3600");
        assert_ne!(manifest, RSF_15, "the manifest holds the key as written here");
        let o = check(&TestImage::new().next_standalone("15.5.14", &manifest).facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        // No Next.js at all.
        let o = check(&TestImage::new().glibc().node("20.11.1").cmd(&["node", "server.js"]).facts());
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
    }

    #[test]
    fn undecided_without_the_optimizer_or_a_known_ttl() {
        let manifest = RSF_15.replace("\"unoptimized\": false", "\"unoptimized\": true");
        assert_ne!(manifest, RSF_15, "the manifest holds the key as written here");
        let o = check(&TestImage::new().next_standalone("15.5.14", &manifest).facts());
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().contains("not in use"));
        // A package.json with no version and no build manifest: the default is unknown.
        let f = TestImage::new()
            .glibc()
            .node("20.11.1")
            .file("/app/node_modules/next/package.json", r#"{"name":"next"}"#)
            .working_dir("/app")
            .cmd(&["node", "server.js"])
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().starts_with("the effective minimumCacheTTL is unknown"));
    }
}
