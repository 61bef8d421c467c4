//! OCI image layouts (a folder, or a tar of one, including Docker 25+ `docker save` output):
//! `index.json`, nested indexes, image manifests.

use super::select::{Candidate, ManifestSource};
use super::store::{read_small, Store};
use super::{check_layer_count, config_platform, layer_history, parse_json, read_config, Chosen, LayerPlan};
use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::platform::Platform;
use oci_spec::image::{Descriptor, ImageConfiguration, ImageIndex, ImageManifest};
use std::collections::{HashMap, HashSet};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";

/// Indexes nest (an image index inside the layout's index.json); deeper than this is a loop.
const MAX_DEPTH: usize = 8;

enum Kind {
    Manifest,
    Index,
}

/// The blob path of a digest in an OCI layout.
pub(crate) fn blob_member(digest: &Digest) -> String {
    format!("blobs/{}/{}", digest.algorithm(), digest.hex())
}

fn descriptor_digest(d: &Descriptor, location: &str) -> Result<Digest> {
    let text = d.digest().to_string();
    Digest::parse(&text).ok_or_else(|| Error::NotAnImage {
        location: location.to_string(),
        reason: format!("descriptor digest `{text}` is malformed"),
        help: "the index was written by a broken tool; export the image again".to_string(),
    })
}

/// Every image manifest reachable from index.json.
pub(crate) fn candidates(store: &dyn Store, limits: &crate::tree::Limits) -> Result<Vec<Candidate>> {
    let location = store.location();
    if store.size("index.json").is_none() {
        return Err(Error::NotAnImage {
            location,
            reason: "it has no index.json".to_string(),
            help: "an OCI layout has `oci-layout` and `index.json` at its top; `docker save` output needs `docker-archive:`"
                .to_string(),
        });
    }
    let bytes = read_small(store, "index.json", "index")?;
    let value: serde_json::Value = parse_json(&bytes, "index.json", &location)?;
    index_shape(&value, &location)?;
    let index: ImageIndex = parse_json(&bytes, "index.json", &location)?;
    let mut walker = Walker {
        store,
        out: Vec::new(),
        skipped: Vec::new(),
        walked: 0,
        max_walked: limits.max_index_entries,
        indexes: HashSet::new(),
        manifests: HashMap::new(),
        kinds: HashMap::new(),
    };
    for (i, d) in index.manifests().iter().enumerate() {
        walker.walk(d, 0, i, None, None)?;
    }
    let Walker { out, skipped, .. } = walker;
    if out.is_empty() {
        let reason = if skipped.is_empty() {
            "its index lists no image manifest".to_string()
        } else {
            format!(
                "its index lists no image manifest that can be read: {}",
                skipped.join("; ")
            )
        };
        return Err(Error::NotAnImage {
            location,
            reason,
            help: "check that this is a container image and that it was copied with its blobs".to_string(),
        });
    }
    Ok(out)
}

/// Well-formed JSON that is not an index: say what it is and what was expected.
fn index_shape(value: &serde_json::Value, location: &str) -> Result<()> {
    let not = |reason: String, help: &str| Error::NotAnImage {
        location: location.to_string(),
        reason,
        help: help.to_string(),
    };
    let Some(obj) = value.as_object() else {
        return Err(not(
            "index.json is not a JSON object, so not an OCI image index".to_string(),
            "an OCI layout's index.json is an object with `schemaVersion` and `manifests`; export the image again",
        ));
    };
    let media_type = obj.get("mediaType").and_then(|m| m.as_str());
    if matches!(media_type, Some(OCI_MANIFEST | DOCKER_MANIFEST))
        || (obj.get("config").is_some() && obj.get("layers").is_some())
    {
        return Err(not(
            format!(
                "index.json is an image manifest (mediaType {}), not an OCI image index",
                media_type.map_or_else(|| "not given".to_string(), |m| format!("`{m}`"))
            ),
            "an OCI layout's index.json lists manifests; write the manifest as a blob and list it in index.json (`skopeo copy` or `oras` write layouts correctly)",
        ));
    }
    match obj.get("manifests") {
        Some(serde_json::Value::Array(a)) if !a.is_empty() => Ok(()),
        Some(serde_json::Value::Array(_)) | None => Err(not(
            "index.json lists no manifests".to_string(),
            "the layout holds no image; export the image again",
        )),
        Some(_) => Err(not(
            "index.json's `manifests` is not a list".to_string(),
            "the index was written by a broken tool; export the image again",
        )),
    }
}

/// Why a manifest is not a runnable image: an artifact (`artifactType`, a config media type
/// that is not an image config) or an attestation (an image config with no os/architecture).
/// `None` when it looks like an image, or cannot be read (reading it will then say why).
fn artifact_kind(store: &dyn Store, d: &Descriptor, member: &str) -> Option<String> {
    if let Some(t) = d
        .artifact_type()
        .as_ref()
        .filter(|t| !is_image_artifact_type(t.as_ref()))
    {
        return Some(format!("artifactType `{t}`"));
    }
    let bytes = read_small(store, member, "manifest").ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    if let Some(t) = value
        .get("artifactType")
        .and_then(|t| t.as_str())
        .filter(|t| !is_image_artifact_type(t))
    {
        return Some(format!("artifactType `{t}`"));
    }
    let config = value.get("config")?;
    let config_type = config.get("mediaType").and_then(|t| t.as_str())?;
    if config_type != OCI_CONFIG && config_type != DOCKER_CONFIG {
        return Some(format!("config media type `{config_type}`"));
    }
    let digest = Digest::parse(config.get("digest")?.as_str()?)?;
    let bytes = read_small(store, &blob_member(&digest), "image config").ok()?;
    let config: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let has = |k: &str| {
        config
            .get(k)
            .and_then(|v| v.as_str())
            .is_some_and(|v| !v.is_empty())
    };
    if !has("os") && !has("architecture") {
        return unplatformed_kind(&value);
    }
    None
}

/// What a manifest whose config names no os and no architecture is, by its layers: over file
/// system layers, an image of unknown platform (buildpacks' imgutil writes them from
/// go-containerregistry's `empty.Image`), to be read; over cosign's signature layers, a
/// signature; over in-toto or DSSE layers, an attestation; over other layers, an artifact.
fn unplatformed_kind(manifest: &serde_json::Value) -> Option<String> {
    let types: Vec<&str> = manifest
        .get("layers")
        .and_then(|l| l.as_array())
        .map(|l| {
            l.iter()
                .map(|d| d.get("mediaType").and_then(|m| m.as_str()).unwrap_or_default())
                .collect()
        })
        .unwrap_or_default();
    if types.iter().all(|t| is_layer_type(t)) {
        return None;
    }
    let any = |f: &dyn Fn(&str) -> bool| types.iter().any(|t| f(t));
    if any(&|t| t.starts_with("application/vnd.dev.cosign.")) {
        return Some("a signature: cosign signature layers (`application/vnd.dev.cosign.simplesigning.v1+json`) under a config with no os or architecture".to_string());
    }
    if any(&|t| t.contains("in-toto") || t.contains("dsse")) {
        return Some(
            "an attestation: in-toto/DSSE layers under a config with no os or architecture".to_string(),
        );
    }
    let first = types
        .iter()
        .find(|t| !is_layer_type(t))
        .map(|t| crate::tree::layer::printable(t))
        .unwrap_or_default();
    Some(format!(
        "an attestation or other artifact: its config has no os or architecture and its layers are not file systems (media type `{first}`)"
    ))
}

/// An `artifactType` that says the manifest is an image: the image spec's descriptor text
/// gives an image manifest's entry the config's media type as its `artifactType`, and
/// go-containerregistry's `mutate.AppendManifests` (apko, ko, crane) writes it so.
fn is_image_artifact_type(t: &str) -> bool {
    t == OCI_CONFIG || t == DOCKER_CONFIG
}

/// An index entry that names a real platform (an os and an architecture, neither `unknown`)
/// and no `artifactType` but an image config's is an image of that platform, as every multi-platform index writes
/// its images: only other entries are opened by [`artifact_kind`], so choosing among the
/// platforms of a registry index fetches no manifest or config besides the chosen one's.
fn names_a_platform(d: &Descriptor) -> bool {
    d.artifact_type()
        .as_ref()
        .is_none_or(|t| is_image_artifact_type(t.as_ref()))
        && d.platform().as_ref().is_some_and(|p| {
            let (os, arch) = (p.os().to_string(), p.architecture().to_string());
            !os.is_empty() && !arch.is_empty() && os != "unknown" && arch != "unknown"
        })
}

fn ref_names(d: &Descriptor) -> Vec<String> {
    let mut names = Vec::new();
    if let Some(a) = d.annotations() {
        for key in ["io.containerd.image.name", "org.opencontainers.image.ref.name"] {
            if let Some(v) = a.get(key) {
                names.push(v.clone());
            }
        }
    }
    names
}

fn is_attestation(d: &Descriptor) -> bool {
    d.annotations()
        .as_ref()
        .and_then(|a| a.get("vnd.docker.reference.type"))
        .is_some_and(|t| t == "attestation-manifest")
}

/// Collects the image manifests an index reaches, and why others were passed over.
struct Walker<'a> {
    store: &'a dyn Store,
    out: Vec<Candidate>,
    skipped: Vec<String>,
    /// Descriptors walked so far, and the most that may be ([`Limits::max_index_entries`]).
    ///
    /// [`Limits::max_index_entries`]: crate::tree::Limits::max_index_entries
    walked: u64,
    max_walked: u64,
    /// Nested indexes already walked, by digest, top-level entry and the names they carry: an
    /// index listed again under the same names adds nothing.
    indexes: HashSet<(String, usize, Vec<String>)>,
    /// Candidates already added, by manifest digest, platform, top-level entry and group, to
    /// their place in `out`: the same manifest listed again only adds its names.
    manifests: HashMap<(String, Option<String>, usize, String), usize>,
    /// What each manifest read so far is, by digest (see [`artifact_kind`]).
    kinds: HashMap<String, Option<String>>,
}

impl Walker<'_> {
    fn walk(
        &mut self,
        d: &Descriptor,
        depth: usize,
        top: usize,
        inherited: Option<&[String]>,
        group: Option<&str>,
    ) -> Result<()> {
        let store = self.store;
        let location = store.location();
        self.walked += 1;
        if self.walked > self.max_walked {
            return Err(super::limit_error(
                "max_index_entries",
                self.max_walked,
                "descriptors listed by the image's indexes",
                location,
            ));
        }
        let digest = descriptor_digest(d, &location)?;
        let member = blob_member(&digest);
        let media_type = d.media_type().to_string();
        // A nested entry can be picked by its own names and by those of the index above it.
        let mut names = ref_names(d);
        names.extend(inherited.unwrap_or_default().iter().cloned());
        if is_attestation(d) {
            return Ok(());
        }
        let present = store.size(&member).is_some();
        let kind = match media_type.as_str() {
            OCI_MANIFEST | DOCKER_MANIFEST => Kind::Manifest,
            OCI_INDEX | DOCKER_LIST => Kind::Index,
            other => match self.kind_from_blob(other, present, &digest, &member)? {
                Some(kind) => kind,
                None => return Ok(()),
            },
        };
        // Entries reached through one top-level index are platforms of one image; unnamed
        // top-level manifests are taken as platforms of one unnamed image.
        let group = match group {
            Some(g) => g.to_string(),
            None => names.first().cloned().unwrap_or_default(),
        };
        match kind {
            Kind::Manifest => {
                let platform = d.platform().as_ref().map(|p| {
                    Platform::new(
                        &p.os().to_string(),
                        &p.architecture().to_string(),
                        p.variant().as_deref(),
                    )
                });
                if platform.as_ref().is_some_and(Platform::is_unknown) {
                    return Ok(());
                }
                let key = (
                    digest.to_string(),
                    platform.as_ref().map(Platform::to_string),
                    top,
                    group.clone(),
                );
                if let Some(&at) = self.manifests.get(&key) {
                    let known = &mut self.out[at].names;
                    for n in names {
                        if !known.contains(&n) {
                            known.push(n);
                        }
                    }
                    return Ok(());
                }
                self.manifests.insert(key, self.out.len());
                let artifact = if present && !names_a_platform(d) {
                    self.kinds
                        .entry(digest.to_string())
                        .or_insert_with(|| artifact_kind(store, d, &member))
                        .clone()
                } else {
                    None
                };
                self.out.push(Candidate {
                    artifact,
                    names,
                    group,
                    platform,
                    present,
                    index: top,
                    manifest: ManifestSource::Oci {
                        digest,
                        media_type,
                        member,
                        size: Some(d.size()),
                    },
                });
            }
            Kind::Index => {
                if depth >= MAX_DEPTH {
                    return Err(Error::NotAnImage {
                        location,
                        reason: format!("indexes nest more than {MAX_DEPTH} deep (a loop?)"),
                        help: "the layout is damaged; export the image again".to_string(),
                    });
                }
                if !present {
                    self.skipped.push(format!("index {} is absent", digest.short()));
                    return Ok(());
                }
                if !self.indexes.insert((digest.to_string(), top, names.clone())) {
                    return Ok(());
                }
                let bytes = read_small(store, &member, "index")?;
                verify(&bytes, &digest, "index", &member, &location)?;
                let index: ImageIndex = parse_json(&bytes, &format!("index {member}"), &location)?;
                // Platforms of one nested index belong to one image, even without a name.
                let group = if group.is_empty() {
                    format!("@{top}")
                } else {
                    group
                };
                if index.manifests().is_empty() {
                    // Kept, so that naming it says what it is rather than that no such name
                    // exists; choosing leaves it out like an artifact.
                    self.out.push(Candidate {
                        artifact: Some(super::select::EMPTY_INDEX.to_string()),
                        names,
                        group,
                        platform: None,
                        present,
                        index: top,
                        manifest: ManifestSource::Oci {
                            digest,
                            media_type,
                            member,
                            size: Some(d.size()),
                        },
                    });
                    return Ok(());
                }
                for child in index.manifests() {
                    self.walk(child, depth + 1, top, Some(&names), Some(&group))?;
                }
            }
        }
        Ok(())
    }

    /// What a descriptor of the unknown media type `other` points at, from its blob's own
    /// `mediaType` or shape (some writers put a generic media type on index entries); `None`
    /// when it is absent or not an image (noted in `skipped`).
    fn kind_from_blob(
        &mut self,
        other: &str,
        present: bool,
        digest: &Digest,
        member: &str,
    ) -> Result<Option<Kind>> {
        let store = self.store;
        let location = store.location();
        if !present {
            self.skipped.push(format!(
                "{} has unknown media type `{other}` and its blob is absent",
                digest.short()
            ));
            return Ok(None);
        }
        let bytes = read_small(store, member, "manifest")?;
        let value: serde_json::Value = parse_json(&bytes, &format!("manifest {member}"), &location)?;
        Ok(match value.get("mediaType").and_then(|m| m.as_str()) {
            Some(OCI_MANIFEST | DOCKER_MANIFEST) => Some(Kind::Manifest),
            Some(OCI_INDEX | DOCKER_LIST) => Some(Kind::Index),
            _ if value.get("manifests").is_some() => Some(Kind::Index),
            _ if value.get("layers").is_some() && value.get("config").is_some() => Some(Kind::Manifest),
            _ => {
                self.skipped.push(format!(
                    "{} has media type `{other}`, which is not an image",
                    digest.short()
                ));
                return Ok(None);
            }
        })
    }
}

fn verify(bytes: &[u8], expected: &Digest, what: &str, member: &str, location: &str) -> Result<()> {
    if expected.is_sha256() {
        let actual = Digest::of(bytes);
        if actual != *expected {
            return Err(Error::DigestMismatch {
                what: what.to_string(),
                member: member.to_string(),
                location: location.to_string(),
                expected: expected.to_string(),
                actual: actual.to_string(),
            });
        }
    }
    Ok(())
}

/// A blob whose size differs from its descriptor's is not to be trusted (OCI image spec,
/// "Descriptor": `size`).
fn check_size(store: &dyn Store, what: &str, member: &str, expected: Option<u64>) -> Result<()> {
    if let (Some(expected), Some(actual)) = (expected, store.size(member)) {
        if expected != actual {
            return Err(Error::SizeMismatch {
                what: what.to_string(),
                member: member.to_string(),
                location: store.location(),
                expected,
                actual,
            });
        }
    }
    Ok(())
}

/// Reads and checks the config a manifest names.
fn manifest_config(store: &dyn Store, manifest: &ImageManifest) -> Result<(ImageConfiguration, Digest)> {
    let config_digest = descriptor_digest(manifest.config(), &store.location())?;
    let member = blob_member(&config_digest);
    check_size(store, "image config", &member, Some(manifest.config().size()))?;
    read_config(store, &member, Some(&config_digest))
}

fn read_manifest(
    store: &dyn Store,
    digest: &Digest,
    member: &str,
    size: Option<u64>,
) -> Result<ImageManifest> {
    let location = store.location();
    check_size(store, "manifest", member, size)?;
    let bytes = read_small(store, member, "manifest")?;
    verify(&bytes, digest, "manifest", member, &location)?;
    let value: serde_json::Value = parse_json(&bytes, &format!("manifest {member}"), &location)?;
    if value.get("schemaVersion").and_then(|v| v.as_u64()) == Some(1) {
        return Err(Error::NotAnImage {
            location,
            reason: "it uses Docker's schema 1 manifest, retired in 2019".to_string(),
            help: "convert it with `skopeo copy --format v2s2` or rebuild it".to_string(),
        });
    }
    let manifest: ImageManifest = parse_json(&bytes, &format!("manifest {member}"), &location)?;
    let config_type = manifest.config().media_type().to_string();
    if config_type != OCI_CONFIG && config_type != DOCKER_CONFIG {
        return Err(Error::NotAnImage {
            location,
            reason: format!("manifest {} is an artifact with config type `{config_type}`", digest.short()),
            help: "memlint reads container images; this one holds something else (a Helm chart, a signature, an SBOM…)"
                .to_string(),
        });
    }
    Ok(manifest)
}

/// The platform of a manifest that its index entry did not state, from its config.
pub(crate) fn platform_of(
    store: &dyn Store,
    digest: &Digest,
    member: &str,
    size: Option<u64>,
) -> Result<Platform> {
    let manifest = read_manifest(store, digest, member, size)?;
    let config_digest = descriptor_digest(manifest.config(), &store.location())?;
    let config_member = blob_member(&config_digest);
    check_size(
        store,
        "image config",
        &config_member,
        Some(manifest.config().size()),
    )?;
    super::read_config_platform(store, &config_member, Some(&config_digest))
}

fn is_layer_type(mt: &str) -> bool {
    mt.starts_with("application/vnd.oci.image.layer.")
        || mt.starts_with("application/vnd.docker.image.rootfs.")
        || mt == "application/vnd.docker.image.rootfs.diff.tar"
}

/// The chosen manifest blob: its digest, where it is stored, its media type and the size its
/// descriptor gives.
pub(crate) struct ManifestBlob<'a> {
    pub(crate) digest: &'a Digest,
    pub(crate) member: &'a str,
    pub(crate) media_type: &'a str,
    pub(crate) size: Option<u64>,
}

/// Reads the chosen manifest and its config and plans the layers. `index_platform` is what the
/// index said of it, `name` the name it was chosen by.
pub(crate) fn load_manifest(
    store: &dyn Store,
    blob: ManifestBlob<'_>,
    index_platform: Option<&Platform>,
    name: Option<String>,
    max_layers: u64,
) -> Result<Chosen> {
    let ManifestBlob {
        digest,
        member,
        media_type,
        size,
    } = blob;
    let location = store.location();
    let manifest = read_manifest(store, digest, member, size)?;
    let (config, config_digest) = manifest_config(store, &manifest)?;
    let diff_ids = check_layer_count(&config, manifest.layers().len(), &location, max_layers)?;
    let mut history = layer_history(&config).into_iter();
    let mut layers = Vec::new();
    for (l, diff_id) in manifest.layers().iter().zip(diff_ids) {
        let mt = l.media_type().to_string();
        if !is_layer_type(&mt) {
            return Err(Error::NotAnImage {
                location,
                reason: format!("layer media type `{mt}` is not a file system layer"),
                help: "memlint reads container images; this manifest holds other content".to_string(),
            });
        }
        let d = descriptor_digest(l, &location)?;
        layers.push(LayerPlan {
            member: blob_member(&d),
            media_type: mt,
            digest: Some(d),
            size: Some(l.size()),
            diff_id,
            history: history.next().flatten(),
            urls: l.urls().clone().unwrap_or_default(),
        });
    }
    // The config is the truth for os and architecture; an index may add the variant.
    let mut platform = config_platform(&config);
    if let Some(p) = index_platform.filter(|p| p.os == platform.os && p.architecture == platform.architecture)
    {
        if platform.variant.is_none() {
            platform.variant = p.variant.clone();
        }
    }
    Ok(Chosen {
        name,
        manifest_digest: Some(digest.clone()),
        manifest_media_type: Some(media_type.to_string()),
        config_digest: Some(config_digest),
        platforms: vec![platform.clone()],
        platform,
        config,
        layers,
    })
}
