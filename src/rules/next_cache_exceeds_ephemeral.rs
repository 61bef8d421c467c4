use super::{Outcome, Rule};
use crate::facts::next::{disk_cache_size_releases, DiskCacheBound};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};
use crate::units::human_bytes;
use crate::k8s::Mount;

pub(crate) const RULE: Rule = Rule {
    id: "next-cache-exceeds-ephemeral",
    severity: Severity::Warning,
    title: "The Next.js image cache can outgrow the container's ephemeral-storage limit",
    doc: include_str!("../../rules/next-cache-exceeds-ephemeral.md"),
    tags: &["storage", "kubernetes", "nextjs"],
    check,
    anchor: Anchor::Container,
};

fn check(f: &Facts) -> Outcome {
    let (Some(c), Some(next)) = (&f.container, &f.next) else {
        return Outcome::none();
    };
    if !next.optimizer_in_use {
        return Outcome::none();
    }
    let Some(limit) = &c.limits_ephemeral_storage else {
        return Outcome::none();
    };
    let Some(cache) = cache_folder(next) else {
        return Outcome::undecided("the folder of the Next.js build is not known");
    };
    let bound = match next.image.disk_cache_bound() {
        DiskCacheBound::Off => return Outcome::none(),
        DiskCacheBound::Bytes(n) => Some(n),
        DiskCacheBound::Unreadable(v) => {
            return Outcome::undecided(format!("images.maximumDiskCacheSize is {v}, not a number of bytes"))
        }
        DiskCacheBound::Unbounded => None,
    };
    if bound.is_some_and(|b| b < limit.value.value) {
        return Outcome::none();
    }
    let mount = c
        .mounts
        .iter()
        .filter(|m| within(&cache, &m.path))
        .max_by_key(|m| m.path.len());
    let place = match mount {
        Some(m) if m.memory_backed && m.size_limit.is_some() => return Outcome::none(),
        Some(m) if !m.memory_backed && !m.disk_empty_dir => return Outcome::none(),
        Some(m) if m.memory_backed => format!(
            "on the memory-backed emptyDir `{}` at {} with no sizeLimit, which fills the memory limit instead",
            m.volume, m.path
        ),
        Some(m) => format!(
            "on the disk-backed emptyDir `{}` at {}, which counts toward the same ephemeral storage{}",
            m.volume,
            m.path,
            size_limit(m)
        ),
        None => "on the container's writable layer".to_string(),
    };
    let how_big = match bound {
        Some(b) => format!(
            "images.maximumDiskCacheSize {} is at or above",
            human_bytes(b)
        ),
        None if next.image.disk_cache_size_supported == Some(false) => format!(
            "Next.js {} has no images.maximumDiskCacheSize, so the cache has no bound below",
            next.version.as_deref().unwrap_or("")
        ),
        None => "images.maximumDiskCacheSize is not set, so the cache takes half of the free space of its file system, past".to_string(),
    };
    let fix_size = limit.value.value / 2;
    Outcome::one(
        RULE.finding(format!(
            "the Next.js image cache {cache} is {place}, and {how_big} the container's limits.ephemeral-storage {}: the kubelet evicts the pod",
            limit.value.text
        ))
        .evidence(Evidence::naming(
            format!(
                "Next.js {} serves images through its optimizer, caching them in {cache}",
                next.version.as_deref().unwrap_or("")
            ),
            [next.package.clone()],
        ))
        .evidence(super::k8s::limit_evidence(c, "ephemeral-storage", limit))
        .fix(format!(
            "// next.config.js (Next.js {}): below the ephemeral-storage limit, with room for logs\nimages: {{ maximumDiskCacheSize: {fix_size} }}\n# or mount a memory-backed emptyDir with a sizeLimit on {cache} (it counts toward the memory limit)",
            disk_cache_size_releases(true)
        )),
    )
}

fn size_limit(m: &Mount) -> String {
    match &m.size_limit {
        Some(q) => format!(" and evicts the pod past its sizeLimit {}", q.text),
        None => String::new(),
    }
}

/// `<distDir>/cache/images` of the build: beside `required-server-files.json`, else under the
/// app folder that holds `node_modules/next`.
fn cache_folder(next: &crate::facts::next::NextFacts) -> Option<String> {
    if let Some(manifest) = &next.standalone {
        let dist = manifest.rsplit_once('/')?.0;
        return Some(format!("{dist}/cache/images"));
    }
    let app = next.package.split_once("/node_modules/")?.0;
    Some(format!("{}/.next/cache/images", if app.is_empty() { "" } else { app }))
}

/// Whether `path` is `folder` or under it.
fn within(path: &str, folder: &str) -> bool {
    let folder = folder.trim_end_matches('/');
    folder.is_empty() || path == folder || path.starts_with(&format!("{folder}/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    use crate::facts::testing::NEXT_15_SERVER_FILES as RSF_15;

    /// A standalone Next.js 15.5.14 build in /app (no maximumDiskCacheSize), run by node.
    fn standalone() -> TestImage {
        TestImage::new().next_standalone("15.5.14", RSF_15)
    }

    const LIMITED: &str = "    resources:\n      limits: {memory: 1Gi, ephemeral-storage: 1Gi}\n";

    #[test]
    fn fires_for_an_unbounded_cache_on_the_writable_layer() {
        let o = check(&standalone().facts_in(LIMITED));
        assert_eq!(o.findings.len(), 1, "{o:?}");
        let f = &o.findings[0];
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.message.contains("on the container's writable layer"), "{}", f.message);
    }

    #[test]
    fn silent_on_a_bounded_memory_volume_or_without_a_limit() {
        let tmpfs = format!(
            "{LIMITED}    volumeMounts:\n    - {{name: cache, mountPath: /app/.next/cache}}\n  volumes:\n  - name: cache\n    emptyDir: {{medium: Memory, sizeLimit: 256Mi}}\n"
        );
        let o = check(&standalone().facts_in(&tmpfs));
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        let o = check(&standalone().facts_in("    resources:\n      limits: {memory: 1Gi}\n"));
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        // An image alone has no ephemeral-storage limit to outgrow.
        assert!(check(&standalone().facts()).findings.is_empty());
    }

    #[test]
    fn undecided_when_the_cache_bound_is_not_a_number() {
        let rsf = RSF_15.replacen("\"images\": {", "\"images\": {\"maximumDiskCacheSize\": \"1gb\",", 1);
        assert_ne!(rsf, RSF_15, "the manifest has an images object");
        let o = check(&standalone().file("/app/.next/required-server-files.json", &rsf).facts_in(LIMITED));
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.is_some_and(|w| w.contains("not a number of bytes")));
    }

    #[test]
    fn mounts_cover_their_subfolders_only() {
        assert!(within("/app/.next/cache/images", "/app/.next/cache"));
        assert!(within("/app/.next/cache/images", "/app/.next/cache/images/"));
        assert!(!within("/app/.next/cache/images", "/app/.next/cach"));
        assert!(within("/app/.next/cache/images", "/"));
    }
}
