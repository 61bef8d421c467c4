//! Choosing one image manifest from an index or a multi-image archive, by name, by position and
//! by platform. Never a silent choice: when several images fit, the error lists them.

use super::store::Store;
use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::platform::Platform;
use crate::reference::Selector;

/// Where the chosen image's manifest is.
#[derive(Clone, Debug)]
pub(crate) enum ManifestSource {
    /// An OCI or Docker v2 manifest blob.
    Oci {
        digest: Digest,
        media_type: String,
        member: String,
        /// The size its descriptor gives.
        size: Option<u64>,
    },
    /// An entry of `docker save`'s manifest.json.
    Docker {
        config: String,
        layers: Vec<String>,
        /// Media types and blob digests of layers from `LayerSources`, by diff_id.
        layer_sources: std::collections::HashMap<String, (String, Option<Digest>)>,
    },
}

/// One image manifest an index or archive offers.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    /// Names it can be picked by (tags, `org.opencontainers.image.ref.name`, image names).
    pub(crate) names: Vec<String>,
    /// Candidates with the same group are platforms of one image.
    pub(crate) group: String,
    pub(crate) platform: Option<Platform>,
    /// Whether the manifest blob is in the store (Docker 29 lists platforms it never pulled).
    pub(crate) present: bool,
    /// Position among the top-level entries, for `:@N`.
    pub(crate) index: usize,
    pub(crate) manifest: ManifestSource,
    /// Why this manifest is not a runnable image (an artifact, a signature, an attestation):
    /// left out when choosing, refused when named.
    pub(crate) artifact: Option<String>,
}

impl Candidate {
    /// The name people know this image by: the top-level entry's name, else its own.
    pub(crate) fn display_name(&self) -> Option<String> {
        if !self.group.is_empty() && !self.group.starts_with('#') && !self.group.starts_with('@') {
            Some(self.group.clone())
        } else {
            self.names.first().cloned()
        }
    }

    fn label(&self) -> String {
        let mut all: Vec<String> = Vec::new();
        if !self.group.is_empty() && !self.group.starts_with('#') && !self.group.starts_with('@') {
            all.push(self.group.clone());
        }
        for n in &self.names {
            if !all.contains(n) {
                all.push(n.clone());
            }
        }
        let name = if all.is_empty() {
            format!("@{}", self.index)
        } else {
            all.join(", ")
        };
        let platform = self
            .platform
            .as_ref()
            .map(|p| p.to_string())
            .unwrap_or_else(|| "unknown platform".into());
        if self.present {
            format!("{name} ({platform})")
        } else {
            format!("{name} ({platform}, not in this copy)")
        }
    }
}

/// The `artifact` of a candidate that is an image index listing no manifests.
pub(crate) const EMPTY_INDEX: &str =
    "an empty image index: it lists no manifests, so no image for any platform";

/// Strips what docker adds to short names, so `hello-world`, `hello-world:latest` and
/// `docker.io/library/hello-world:latest` compare equal.
fn normalize_name(name: &str) -> String {
    let n = name
        .strip_prefix("docker.io/library/")
        .or_else(|| name.strip_prefix("docker.io/"))
        .or_else(|| name.strip_prefix("library/"))
        .unwrap_or(name);
    let last = n.rsplit('/').next().unwrap_or(n);
    if last.contains(':') || n.contains('@') {
        n.to_string()
    } else {
        format!("{n}:latest")
    }
}

fn name_matches(names: &[String], wanted: &str) -> bool {
    names
        .iter()
        .any(|n| n == wanted || normalize_name(n) == normalize_name(wanted))
}

/// Reads the platform of a manifest that its index entry did not state (from its config);
/// the format that listed the candidate knows how.
pub(crate) type PlatformOf<'a> = dyn Fn(&ManifestSource) -> Result<Platform> + 'a;

/// Picks the image to read; also returns every platform its name offers.
pub(crate) fn choose(
    store: &dyn Store,
    candidates: Vec<Candidate>,
    selector: Option<&Selector>,
    wanted: Option<&Platform>,
    platform_of: &PlatformOf,
) -> Result<(Candidate, Vec<Platform>)> {
    let candidates = narrow(store, candidates, selector, platform_of)?;
    pick(store, candidates, wanted)
}

/// Each image once: the platforms of one name are listed together, `b1 (linux/amd64,
/// linux/arm64)`.
fn all_labels(c: &[Candidate]) -> String {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for label in c.iter().map(Candidate::label) {
        let (name, platform) = match label.rsplit_once(" (") {
            Some((n, p)) => (n.to_string(), p.trim_end_matches(')').to_string()),
            None => (label.clone(), String::new()),
        };
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, ps)) => {
                if !ps.contains(&platform) {
                    ps.push(platform)
                }
            }
            None => out.push((name, vec![platform])),
        }
    }
    out.iter()
        .map(|(n, ps)| format!("{n} ({})", ps.join("; ")))
        .collect::<Vec<_>>()
        .join(", ")
}

fn no_manifest(location: String) -> Error {
    Error::NotAnImage {
        location,
        reason: "it lists no image manifest".to_string(),
        help: "the index or manifest.json is empty; export the image again".to_string(),
    }
}

/// What identifies one image among candidates: its manifest and platform.
fn identity(c: &Candidate) -> (String, Option<String>) {
    let m = match &c.manifest {
        ManifestSource::Oci { digest, .. } => format!("m:{digest}"),
        ManifestSource::Docker { config, layers, .. } => format!("c:{config}:{}", layers.join(",")),
    };
    (m, c.platform.as_ref().map(Platform::to_string))
}

/// Merges candidates that are the same manifest on the same platform (two tags on one
/// digest): one image, all its names, its first position.
fn merge(candidates: Vec<Candidate>) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = Vec::with_capacity(candidates.len());
    let mut at: std::collections::HashMap<(String, Option<String>), usize> = std::collections::HashMap::new();
    for c in candidates {
        let key = identity(&c);
        match at.get(&key) {
            Some(&i) => {
                let known = &mut out[i];
                let mut extra: Vec<String> = Vec::new();
                if !c.group.is_empty() && !c.group.starts_with('#') && !c.group.starts_with('@') {
                    extra.push(c.group.clone());
                }
                extra.extend(c.names.iter().cloned());
                for n in extra {
                    if !known.names.contains(&n) && known.group != n {
                        known.names.push(n);
                    }
                }
            }
            None => {
                at.insert(key, out.len());
                out.push(c);
            }
        }
    }
    out
}

/// Fills in the platforms that index entries did not state, from each manifest's config, reading
/// each distinct manifest once. Returns, by position, the candidates whose platform could not
/// be read and why; their platform stays unknown.
fn fill_platforms(candidates: &mut [Candidate], platform_of: &PlatformOf) -> Vec<(usize, Error)> {
    let mut known: std::collections::HashMap<String, Platform> = std::collections::HashMap::new();
    let mut failed = Vec::new();
    for (i, c) in candidates.iter_mut().enumerate() {
        if c.platform.is_none() && c.present && c.artifact.is_none() {
            let key = match &c.manifest {
                ManifestSource::Oci { member, .. } => format!("m:{member}"),
                ManifestSource::Docker { config, .. } => format!("c:{config}"),
            };
            let platform = match known.get(&key) {
                Some(p) => p.clone(),
                None => match platform_of(&c.manifest) {
                    Ok(p) => {
                        known.insert(key, p.clone());
                        p
                    }
                    Err(e) => {
                        failed.push((i, e));
                        continue;
                    }
                },
            };
            c.platform = Some(platform);
        }
    }
    failed
}

/// Each image once, with all its names and its platform, for messages.
fn listing(candidates: &[Candidate], platform_of: &PlatformOf) -> String {
    let mut all: Vec<Candidate> = candidates
        .iter()
        .filter(|c| c.artifact.is_none())
        .cloned()
        .collect();
    if all.is_empty() {
        all = candidates.to_vec();
    }
    let _ = fill_platforms(&mut all, platform_of);
    all_labels(&merge(all))
}

/// Keeps the candidates the selector names, leaves out artifacts, merges what is one image,
/// and fills in the platforms their index entries did not state.
fn narrow(
    store: &dyn Store,
    mut candidates: Vec<Candidate>,
    selector: Option<&Selector>,
    platform_of: &PlatformOf,
) -> Result<Vec<Candidate>> {
    let location = store.location();
    if candidates.is_empty() {
        return Err(no_manifest(location));
    }
    let everything = candidates.clone();
    if let Some(sel) = selector {
        match sel {
            Selector::Name(n) => {
                // A top-level name beats the same name on an entry nested deeper.
                let top = |c: &Candidate| name_matches(std::slice::from_ref(&c.group), n);
                if candidates.iter().any(top) {
                    candidates.retain(top);
                } else {
                    candidates.retain(|c| name_matches(&c.names, n));
                }
                if candidates.is_empty() {
                    return Err(Error::NoSuchName {
                        name: n.clone(),
                        location,
                        available: listing(&everything, platform_of),
                    });
                }
            }
            Selector::Index(i) => {
                candidates.retain(|c| c.index == *i);
                if candidates.is_empty() {
                    let count = everything.iter().map(|c| c.index + 1).max().unwrap_or(0);
                    return Err(Error::PositionOutOfRange {
                        position: *i,
                        location,
                        count,
                        plural: if count == 1 { "" } else { "s" },
                        available: listing(&everything, platform_of),
                    });
                }
            }
        }
    }
    if candidates.iter().all(|c| c.artifact.is_some()) {
        let c = &candidates[0];
        if candidates
            .iter()
            .all(|c| c.artifact.as_deref() == Some(EMPTY_INDEX))
        {
            let (what, help) = match selector {
                Some(sel) if everything.iter().any(|c| c.artifact.is_none()) => (
                    format!("`{sel}` is an image index that lists no manifests"),
                    format!(
                        "it holds no image for any platform (docker: \"doesn't provide the requested platform\"); name an image instead; the images are: {}",
                        listing(&everything, platform_of)
                    ),
                ),
                Some(sel) => (
                    format!("`{sel}` is an image index that lists no manifests"),
                    "it holds no image for any platform, and the layout holds no other image; push or export the image with its platforms".to_string(),
                ),
                None => (
                    "its only image is an index that lists no manifests".to_string(),
                    "it holds no image for any platform (docker: \"doesn't provide the requested platform\"); push or export the image with its platforms".to_string(),
                ),
            };
            return Err(Error::NotAnImage {
                location,
                reason: what,
                help,
            });
        }
        let (what, help) = match selector {
            Some(sel) => (
                format!("`{sel}`"),
                match everything.iter().any(|c| c.artifact.is_none()) {
                    true => format!(
                        "name an image instead; the images are: {}",
                        listing(&everything, platform_of)
                    ),
                    false => "this layout holds no container image".to_string(),
                },
            ),
            None => (
                "every manifest".to_string(),
                "this layout holds only artifacts (signatures, SBOMs, attestations, other content); memlint reads container images".to_string(),
            ),
        };
        return Err(Error::Artifact {
            what,
            location,
            kind: c.artifact.clone().unwrap_or_default(),
            help,
        });
    }
    candidates.retain(|c| c.artifact.is_none());
    // A candidate whose config cannot be read (absent, not JSON) is left out of the choice, so
    // that the default platform is still found among the others; when nothing else is left,
    // its error is the answer. A blob that is not what its descriptor says ends the run: the
    // copy is damaged or was changed, whichever image is read.
    let failed = fill_platforms(&mut candidates, platform_of);
    let mut first_failure = None;
    for (i, e) in failed.into_iter().rev() {
        if matches!(e, Error::DigestMismatch { .. } | Error::SizeMismatch { .. }) {
            return Err(e);
        }
        candidates.remove(i);
        first_failure = Some(e);
    }
    if let (true, Some(e)) = (candidates.is_empty(), first_failure) {
        return Err(e);
    }
    Ok(merge(candidates))
}

/// Picks one of the narrowed candidates, for `wanted` or by the default platform rules.
fn pick(
    store: &dyn Store,
    mut candidates: Vec<Candidate>,
    wanted: Option<&Platform>,
) -> Result<(Candidate, Vec<Platform>)> {
    let location = store.location();
    if candidates.is_empty() {
        return Err(no_manifest(location));
    }
    if let Some(w) = wanted {
        let available = all_labels(&candidates);
        candidates.retain(|c| c.platform.as_ref().is_some_and(|p| p.satisfies(w)));
        if candidates.is_empty() {
            return Err(Error::NoPlatform {
                wanted: w.to_string(),
                location,
                available,
            });
        }
        // `linux/arm` with arm/v6 and arm/v7 present: which one is for the user to say.
        if w.variant.is_none() {
            let mut variants: Vec<String> = Vec::new();
            for c in candidates.iter().filter(|c| c.present) {
                if let Some(p) = &c.platform {
                    let v = p.to_string();
                    if !variants.contains(&v) {
                        variants.push(v);
                    }
                }
            }
            if variants.len() > 1 && candidates.iter().all(|c| c.group == candidates[0].group) {
                return Err(Error::Ambiguous {
                    location,
                    help: format!(
                        "--platform {w} fits several variants; pass one of: {}",
                        variants.join(", ")
                    ),
                });
            }
        }
    }
    let first_group = candidates[0].group.clone();
    if candidates.iter().any(|c| c.group != first_group) {
        return Err(Error::Ambiguous {
            location,
            help: format!(
                "pick one by name (`oci-dir:PATH:NAME`, `docker-archive:PATH:NAME`) or by position (`:@N`); the images are: {}",
                all_labels(&candidates)
            ),
        });
    }
    let platforms: Vec<Platform> = candidates.iter().filter_map(|c| c.platform.clone()).collect();
    let pick = if wanted.is_some() {
        candidates.iter().position(|c| c.present).unwrap_or(0)
    } else {
        let present: Vec<usize> = (0..candidates.len()).filter(|&i| candidates[i].present).collect();
        let amd64 = Platform::linux_amd64();
        let linux: Vec<usize> = present
            .iter()
            .copied()
            .filter(|&i| candidates[i].platform.as_ref().is_some_and(|p| p.os == "linux"))
            .collect();
        if let Some(&i) = present.iter().find(|&&i| {
            candidates[i]
                .platform
                .as_ref()
                .is_some_and(|p| p.satisfies(&amd64))
        }) {
            i
        } else if linux.len() == 1 {
            linux[0]
        } else if present.len() == 1
            && candidates[present[0]]
                .platform
                .as_ref()
                .is_none_or(Platform::is_unstated)
        {
            // A file system image whose config names no platform, alone: nothing to choose.
            present[0]
        } else if present.is_empty() {
            0
        } else {
            return Err(Error::Ambiguous {
                location,
                help: format!("pass --platform with one of: {}", all_labels(&candidates)),
            });
        }
    };
    let chosen = candidates.swap_remove(pick);
    if !chosen.present {
        let member = match &chosen.manifest {
            ManifestSource::Oci { member, .. } => member.clone(),
            ManifestSource::Docker { config, .. } => config.clone(),
        };
        return Err(Error::MissingBlob {
            what: format!("the manifest of {}", chosen.label()),
            member,
            location,
        });
    }
    let mut chosen = chosen;
    chosen.names.dedup();
    Ok((chosen, platforms))
}

/// Every platform of one image whose manifest is in the store (`--platform all`); platforms
/// that were never pulled are skipped.
pub(crate) fn every_platform(
    store: &dyn Store,
    candidates: Vec<Candidate>,
    selector: Option<&Selector>,
    platform_of: &PlatformOf,
) -> Result<Vec<(Candidate, Vec<Platform>)>> {
    let mut out = Vec::new();
    let mut seen: Vec<Platform> = Vec::new();
    // Narrowed once (platforms read once); each platform is then picked by the same rules as
    // `choose`, among the candidates that platform can pick.
    let candidates = narrow(store, candidates, selector, platform_of)?;
    let of = |p: &Platform| -> Vec<Candidate> {
        candidates
            .iter()
            .filter(|c| c.platform.as_ref().is_some_and(|cp| cp.satisfies(p)))
            .cloned()
            .collect()
    };
    let (first, platforms) = pick(store, candidates.clone(), None).or_else(|_| {
        let p = candidates
            .iter()
            .find_map(|c| c.platform.clone())
            .ok_or_else(|| Error::NotAnImage {
                location: store.location(),
                reason: "no platform of the image is known".to_string(),
                help: "pass --platform os/arch".to_string(),
            })?;
        pick(store, of(&p), Some(&p))
    })?;
    for p in platforms {
        if seen.contains(&p) {
            continue;
        }
        seen.push(p.clone());
        match pick(store, of(&p), Some(&p)) {
            Ok(pick) if pick.0.present => out.push(pick),
            Ok(_) | Err(Error::MissingBlob { .. }) => {}
            // A variant-less platform beside variants of it: each variant is read on its own.
            Err(Error::Ambiguous { .. }) if p.variant.is_none() => {}
            Err(e) => return Err(e),
        }
    }
    if out.is_empty() {
        out.push((first, Vec::new()));
    }
    let all: Vec<Platform> = seen;
    Ok(out.into_iter().map(|(c, _)| (c, all.clone())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oci(names: &[&str], group: &str, hex: char, platform: &str, index: usize) -> Candidate {
        Candidate {
            names: names.iter().map(|n| n.to_string()).collect(),
            group: group.to_string(),
            platform: Platform::parse(platform).ok(),
            present: true,
            index,
            manifest: ManifestSource::Oci {
                digest: Digest::parse(&format!("sha256:{}", hex.to_string().repeat(64))).unwrap(),
                media_type: "application/vnd.oci.image.manifest.v1+json".to_string(),
                member: format!("blobs/sha256/{}", hex.to_string().repeat(64)),
                size: None,
            },
            artifact: None,
        }
    }

    #[test]
    fn tags_on_one_manifest_merge_and_list_once() {
        let merged = merge(vec![
            oci(&["latest"], "latest", 'a', "linux/amd64", 0),
            oci(&["1.0"], "1.0", 'a', "linux/amd64", 1),
            oci(&["1.0"], "1.0", 'b', "linux/arm64", 1),
        ]);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].names, ["latest", "1.0"]);
        assert_eq!(
            all_labels(&merged),
            "latest, 1.0 (linux/amd64), 1.0 (linux/arm64)"
        );
        // Platforms of one name are listed together.
        let one = vec![
            oci(&["v1"], "v1", 'a', "linux/amd64", 0),
            oci(&["v1"], "v1", 'b', "linux/arm64", 0),
        ];
        assert_eq!(all_labels(&one), "v1 (linux/amd64; linux/arm64)");
        // The same digest on another platform is another image.
        assert_eq!(
            merge(vec![
                oci(&["x"], "x", 'a', "linux/amd64", 0),
                oci(&["x"], "x", 'a', "linux/arm64", 0)
            ])
            .len(),
            2
        );
    }

    #[test]
    fn names_compare_like_docker() {
        assert!(name_matches(
            &["docker.io/library/hello-world:latest".into()],
            "hello-world"
        ));
        assert!(name_matches(&["hello-world:latest".into()], "hello-world:latest"));
        assert!(name_matches(&["1".into()], "1"));
        assert!(!name_matches(&["app:1".into()], "app:2"));
        assert!(!name_matches(&["localhost:5000/app".into()], "app"));
    }
}
