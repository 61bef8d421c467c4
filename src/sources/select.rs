//! Choosing one image manifest from an index or a multi-image archive, by name, by position and
//! by platform. Never a silent choice: when several images fit, the error lists them.

use super::store::Store;
use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::platform::Platform;
use crate::reference::Selector;

/// Where the chosen image's manifest is.
#[derive(Clone, Debug)]
pub enum ManifestSource {
    /// An OCI or Docker v2 manifest blob.
    Oci {
        digest: Digest,
        media_type: String,
        member: String,
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
pub struct Candidate {
    /// Names it can be picked by (tags, `org.opencontainers.image.ref.name`, image names).
    pub names: Vec<String>,
    /// Candidates with the same group are platforms of one image.
    pub group: String,
    pub platform: Option<Platform>,
    /// Whether the manifest blob is in the store (Docker 29 lists platforms it never pulled).
    pub present: bool,
    /// Position among the top-level entries, for `:@N`.
    pub index: usize,
    pub manifest: ManifestSource,
}

impl Candidate {
    /// The name people know this image by: the top-level entry's name, else its own.
    pub fn display_name(&self) -> Option<String> {
        if !self.group.is_empty() && !self.group.starts_with('#') && !self.group.starts_with('@') {
            Some(self.group.clone())
        } else {
            self.names.first().cloned()
        }
    }

    fn label(&self) -> String {
        let name = if !self.group.is_empty() && !self.group.starts_with('#') {
            self.group.clone()
        } else {
            self.names
                .first()
                .cloned()
                .unwrap_or_else(|| format!("@{}", self.index))
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
pub type PlatformOf<'a> = dyn Fn(&ManifestSource) -> Result<Platform> + 'a;

/// Picks the image to read; also returns every platform its name offers.
pub fn choose(
    store: &dyn Store,
    candidates: Vec<Candidate>,
    selector: Option<&Selector>,
    wanted: Option<&Platform>,
    platform_of: &PlatformOf,
) -> Result<(Candidate, Vec<Platform>)> {
    let candidates = narrow(store, candidates, selector, platform_of)?;
    pick(store, candidates, wanted)
}

fn all_labels(c: &[Candidate]) -> String {
    c.iter().map(Candidate::label).collect::<Vec<_>>().join(", ")
}

fn no_manifest(location: String) -> Error {
    Error::NotAnImage {
        location,
        reason: "it lists no image manifest".to_string(),
        help: "the index or manifest.json is empty; export the image again".to_string(),
    }
}

/// Keeps the candidates the selector names and fills in the platforms their index entries did
/// not state, reading each distinct manifest (and its config) once.
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
    if let Some(sel) = selector {
        let before = all_labels(&candidates);
        match sel {
            Selector::Name(n) => {
                // A top-level name beats the same name on an entry nested deeper.
                let top = |c: &Candidate| name_matches(std::slice::from_ref(&c.group), n);
                if candidates.iter().any(top) {
                    candidates.retain(top);
                } else {
                    candidates.retain(|c| name_matches(&c.names, n));
                }
            }
            Selector::Index(i) => candidates.retain(|c| c.index == *i),
        }
        if candidates.is_empty() {
            return Err(Error::Ambiguous {
                location,
                help: format!("nothing is named `{sel}` here; the images are: {before}"),
            });
        }
    }
    let mut known: std::collections::HashMap<String, Platform> = std::collections::HashMap::new();
    for c in candidates.iter_mut() {
        if c.platform.is_none() && c.present {
            let key = match &c.manifest {
                ManifestSource::Oci { member, .. } => format!("m:{member}"),
                ManifestSource::Docker { config, .. } => format!("c:{config}"),
            };
            let platform = match known.get(&key) {
                Some(p) => p.clone(),
                None => {
                    let p = platform_of(&c.manifest)?;
                    known.insert(key, p.clone());
                    p
                }
            };
            c.platform = Some(platform);
        }
    }
    Ok(candidates)
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
pub fn every_platform(
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
