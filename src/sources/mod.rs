//! Where an image comes from. A source finds the manifest for the requested platform, reads
//! and verifies the config, and streams the layers into a [`FileTree`]; it knows nothing of
//! facts or rules.

mod credentials;
mod docker;
mod engine;
mod oci;
mod progress;
pub mod registry;
mod rootfs;
mod select;
mod store;
mod stream;

pub use select::Candidate;
pub use store::Store;

use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::image::{Image, Layer};
use crate::platform::Platform;
use crate::reference::{ArchiveInput, Reference, Selector};
use crate::tree::build::{build, BuildErrorKind, LayerInput};
use crate::tree::{Compression, Interests, LayerDiff, Limits};
use oci_spec::image::ImageConfiguration;
use std::path::Path;
use std::sync::Arc;

/// How to read an image.
#[derive(Clone, Debug)]
pub struct Options {
    /// The platform to pick from an index or multi-image archive; `None` takes linux/amd64 when
    /// present, else the only linux image.
    pub platform: Option<Platform>,
    /// The file contents and ELF facts to keep, before the image's config is known. The stages
    /// that read them say which (the commands pass `facts::interests()`); none by default.
    pub interests: Interests,
    /// What the image's config adds to `interests` once it is known (the commands pass
    /// `facts::interests_for`: the scripts the entrypoint may run); `None` adds nothing.
    pub config_interests: Option<fn(&ImageConfiguration) -> Interests>,
    pub limits: Limits,
    /// Layers read at once.
    pub workers: usize,
    /// Read every platform of a multi-platform image (`--platform all`).
    pub all_platforms: bool,
    /// The layer analysis cache; `None` with `--no-cache`.
    pub cache: Option<Arc<crate::cache::LayerCache>>,
    /// Credentials, CAs and insecure hosts for `registry:` references.
    pub registry: registry::RegistryOptions,
    /// Draw progress bars on standard error.
    pub progress: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            platform: None,
            interests: Interests::default(),
            config_interests: None,
            limits: Limits::default(),
            workers: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            all_platforms: false,
            cache: None,
            registry: registry::RegistryOptions::default(),
            progress: false,
        }
    }
}

/// Reads the image a reference names.
pub fn open(reference_text: &str, reference: &Reference, options: &Options) -> Result<Image> {
    let single = Options {
        all_platforms: false,
        ..options.clone()
    };
    let mut images = open_all(reference_text, reference, &single)?;
    Ok(images.remove(0))
}

/// The environment variable that overrides the reader's limits: `name=value` pairs separated
/// by commas, e.g. `MEMLINT_LIMITS=max_layer_bytes=128G,max_path_len=8192`.
pub const LIMITS_ENV: &str = "MEMLINT_LIMITS";

/// Reads the image a reference names; with `options.all_platforms`, every platform it offers.
/// `MEMLINT_LIMITS`, when set, overrides `options.limits`.
pub fn open_all(reference_text: &str, reference: &Reference, options: &Options) -> Result<Vec<Image>> {
    match std::env::var(LIMITS_ENV) {
        Ok(spec) if !spec.trim().is_empty() => {
            let mut limits = options.limits.clone();
            limits
                .apply(&spec)
                .map_err(|reason| Error::BadLimits { reason })?;
            let options = Options {
                limits,
                ..options.clone()
            };
            open_all_with(reference_text, reference, &options)
        }
        _ => open_all_with(reference_text, reference, options),
    }
}

/// The error for a limit of [`Limits`] that was hit, with its value shown for people.
pub(crate) fn limit_error(
    name: &str,
    value: u64,
    what: impl Into<String>,
    location: impl Into<String>,
) -> Error {
    let bytes = name.contains("_bytes") || name == "max_path_len";
    let show = |v: u64| {
        if !bytes {
            return v.to_string();
        }
        for (unit, size) in [
            ("TiB", 1u64 << 40),
            ("GiB", 1 << 30),
            ("MiB", 1 << 20),
            ("KiB", 1 << 10),
        ] {
            if v >= size && v % size == 0 {
                return format!("{} {unit}", v / size);
            }
        }
        format!("{v} bytes")
    };
    let suggested = value.saturating_mul(4).max(1);
    let suggested_text = match show(suggested).split_once(' ') {
        Some((n, "bytes")) => n.to_string(),
        Some((n, unit)) => format!("{n}{}", &unit[..1]),
        None => suggested.to_string(),
    };
    Error::LimitExceeded {
        name: name.to_string(),
        limit: show(value),
        suggested: suggested_text,
        what: what.into(),
        location: location.into(),
    }
}

/// A limit hit deep inside a reader (carried in an `io::Error`) as the error that names it.
pub(crate) fn limit_in_io(e: &std::io::Error, location: &str) -> Option<Error> {
    let hit = e.get_ref()?.downcast_ref::<crate::tree::layer::LimitHit>()?;
    Some(limit_error(hit.name, hit.limit, hit.what, location))
}

fn open_all_with(reference_text: &str, reference: &Reference, options: &Options) -> Result<Vec<Image>> {
    match reference {
        Reference::OciDir { path, selector } => {
            require_dir(path)?;
            let store: Arc<dyn Store> =
                Arc::new(store::DirStore::new(path).with_max_json(options.limits.max_json_bytes));
            load(
                reference_text,
                "oci-dir",
                store,
                Format::Oci,
                selector.as_ref(),
                options,
            )
        }
        Reference::OciArchive { path, selector } => open_archive_file(
            reference_text,
            "oci-archive",
            path,
            Format::Oci,
            selector.as_ref(),
            options,
        ),
        Reference::DockerArchive {
            input: ArchiveInput::File(path),
            selector,
        } => open_archive_file(
            reference_text,
            "docker-archive",
            path,
            Format::Docker,
            selector.as_ref(),
            options,
        ),
        Reference::DockerArchive {
            input: ArchiveInput::Stdin,
            selector,
        } => {
            let stdin = std::io::stdin().lock();
            let store = stream::read(stdin, "standard input", options)?;
            load(
                reference_text,
                "docker-archive",
                Arc::new(store),
                Format::Docker,
                selector.as_ref(),
                options,
            )
        }
        Reference::Rootfs { path } => Ok(vec![rootfs::open(reference_text, path, options)?]),
        Reference::Path { path } => {
            if path.is_dir() {
                if path.join("oci-layout").is_file() || path.join("index.json").is_file() {
                    open_all_with(
                        reference_text,
                        &Reference::OciDir {
                            path: path.clone(),
                            selector: None,
                        },
                        options,
                    )
                } else {
                    Ok(vec![rootfs::open(reference_text, path, options)?])
                }
            } else {
                open_archive_file(reference_text, "archive", path, Format::Detect, None, options)
            }
        }
        Reference::Registry(name) => registry::open(reference_text, name, options),
        Reference::Docker(name) => engine::open_docker(reference_text, name, options),
        Reference::Podman(name) => engine::open_podman(reference_text, name, options),
    }
}

fn require_dir(path: &Path) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(Error::NotAnImage {
            location: path.display().to_string(),
            reason: "it is a file, not an OCI layout folder".to_string(),
            help: "for a tar of an OCI layout use `oci-archive:PATH`; for `docker save` output use `docker-archive:PATH`"
                .to_string(),
        }),
        Err(e) => Err(Error::io(path.display(), e)),
    }
}

/// Which manifest format to look for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// index.json (an OCI layout).
    Oci,
    /// manifest.json, or an OCI index.json beside it (Docker 25 and later write both).
    Docker,
    /// Whichever the archive has.
    Detect,
}

fn open_archive_file(
    reference_text: &str,
    source: &'static str,
    path: &Path,
    format: Format,
    selector: Option<&Selector>,
    options: &Options,
) -> Result<Vec<Image>> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path.display(), e))?;
    if meta.is_dir() {
        return Err(Error::NotAnImage {
            location: path.display().to_string(),
            reason: "it is a folder, not an archive".to_string(),
            help:
                "for an OCI layout folder use `oci-dir:PATH`; for an unpacked root file system use `dir:PATH`"
                    .to_string(),
        });
    }
    // `docker save | gzip` output cannot be read in place: stream it.
    let mut magic = [0u8; 4];
    {
        use std::io::Read;
        let mut f = std::fs::File::open(path).map_err(|e| Error::io(path.display(), e))?;
        let n = f.read(&mut magic).map_err(|e| Error::io(path.display(), e))?;
        if n == 4
            && matches!(
                Compression::sniff(&magic),
                Some(Compression::Gzip | Compression::Zstd)
            )
        {
            let store = stream::read_compressed(f, path, &magic, options)?;
            let source = if source == "archive" {
                "docker-archive"
            } else {
                source
            };
            return load(reference_text, source, Arc::new(store), format, selector, options);
        }
    }
    let store = store::TarStore::open(path, &options.limits)?;
    let source = match (source, format) {
        ("archive", _) if store.has("manifest.json") => "docker-archive",
        ("archive", _) if store.has("index.json") => "oci-archive",
        ("archive", _) => {
            return Err(Error::NotAnImage {
                location: path.display().to_string(),
                reason: "the archive has neither manifest.json (docker save) nor index.json (OCI layout)"
                    .to_string(),
                help: "give `docker save` output, an OCI archive, or an OCI layout folder".to_string(),
            })
        }
        (s, _) => s,
    };
    load(reference_text, source, Arc::new(store), format, selector, options)
}

/// The manifest chosen for an image and what it needs to be read.
pub(crate) struct Chosen {
    pub name: Option<String>,
    pub manifest_digest: Option<Digest>,
    pub manifest_media_type: Option<String>,
    pub config_digest: Option<Digest>,
    pub config: ImageConfiguration,
    pub platform: Platform,
    pub platforms: Vec<Platform>,
    pub layers: Vec<LayerPlan>,
}

/// A layer to read and what it must hash to.
pub(crate) struct LayerPlan {
    pub member: String,
    pub media_type: String,
    /// The blob digest the manifest gives (or the member name implies).
    pub digest: Option<Digest>,
    pub size: Option<u64>,
    pub diff_id: Option<Digest>,
    pub history: Option<String>,
}

fn load(
    reference_text: &str,
    source: &'static str,
    store: Arc<dyn Store>,
    format: Format,
    selector: Option<&Selector>,
    options: &Options,
) -> Result<Vec<Image>> {
    let candidates = match format {
        Format::Oci => oci::candidates(store.as_ref(), &options.limits)?,
        Format::Docker | Format::Detect => {
            // Docker 25+ writes an OCI index too; it carries platforms, so prefer it when it
            // lists images (Docker 25 leaves it empty for some images).
            let from_index = if store.size("index.json").is_some() {
                oci::candidates(store.as_ref(), &options.limits)
                    .ok()
                    .filter(|c| !c.is_empty())
            } else {
                None
            };
            match from_index {
                Some(c) => c,
                None if store.size("manifest.json").is_some() => {
                    docker::candidates(store.as_ref(), &options.limits)?
                }
                None if format == Format::Detect => oci::candidates(store.as_ref(), &options.limits)?,
                None => {
                    return Err(Error::NotAnImage {
                        location: store.location(),
                        reason: "it has no manifest.json, so it is not `docker save` output".to_string(),
                        help: "for an OCI archive use `oci-archive:PATH`".to_string(),
                    })
                }
            }
        }
    };
    let picks = if options.all_platforms {
        select::every_platform(store.as_ref(), candidates, selector)?
    } else {
        vec![select::choose(
            store.as_ref(),
            candidates,
            selector,
            options.platform.as_ref(),
        )?]
    };
    let mut images = Vec::with_capacity(picks.len());
    for (candidate, platforms) in picks {
        let mut chosen = match &candidate.manifest {
            select::ManifestSource::Oci { .. } => oci::load_manifest(store.as_ref(), candidate)?,
            select::ManifestSource::Docker { .. } => docker::load_manifest(store.as_ref(), candidate)?,
        };
        chosen.platforms = platforms;
        images.push(read_layers(
            reference_text,
            source,
            store.clone(),
            chosen,
            options,
        )?);
    }
    Ok(images)
}

/// The compression a layer media type names, when it names one.
fn compression_of(media_type: &str) -> Option<Compression> {
    if media_type.ends_with("gzip") {
        Some(Compression::Gzip)
    } else if media_type.ends_with("zstd") {
        Some(Compression::Zstd)
    } else if media_type.ends_with(".tar") {
        Some(Compression::None)
    } else {
        None
    }
}

/// Reads the chosen image's layers into a tree. With a layer cache, a layer whose diff_id has a
/// usable entry is taken from it and its blob never opened (for a registry: never downloaded);
/// every layer read and verified here is written to it.
fn read_layers(
    reference_text: &str,
    source: &'static str,
    store: Arc<dyn Store>,
    chosen: Chosen,
    options: &Options,
) -> Result<Image> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let location = store.location();
    let interests = Arc::new(match options.config_interests {
        Some(for_config) => options.interests.clone().union(for_config(&chosen.config)),
        None => options.interests.clone(),
    });
    let cache = options.cache.as_ref();
    let count = chosen.layers.len();
    let hits: Arc<Vec<AtomicBool>> = Arc::new((0..count).map(|_| AtomicBool::new(false)).collect());
    // Layers a streamed archive read before the config was known, with `options.interests`.
    let mut streamed = vec![false; count];
    let mut inputs = Vec::with_capacity(count);
    let progress = Arc::new(progress::Progress::new(options.progress, count));
    for (i, plan) in chosen.layers.iter().enumerate() {
        if let Some(diff) = store.take_read_layer(&plan.member) {
            inputs.push(LayerInput::Read(Box::new(diff)));
            streamed[i] = true;
            continue;
        }
        let key = plan.diff_id.clone().filter(|d| d.is_sha256());
        let cached = match (cache, key) {
            (Some(c), Some(k)) if c.contains(&k) => Some((c.clone(), k)),
            _ => None,
        };
        // A cached layer needs no blob (a local store may not have exported it).
        if cached.is_none() && store.size(&plan.member).is_none() {
            return Err(Error::MissingBlob {
                what: "layer".to_string(),
                member: plan.member.clone(),
                location: location.clone(),
            });
        }
        let blob: crate::tree::build::OpenBlob = {
            let (store, member, progress) = (store.clone(), plan.member.clone(), progress.clone());
            let label = plan
                .digest
                .as_ref()
                .map_or_else(|| plan.member.clone(), |d| d.to_string());
            let size = plan.size.or_else(|| store.size(&plan.member));
            Box::new(move || {
                store.open(&member).map(|r| progress.track(i, &label, size, r)).map_err(|e| {
                    if e.kind() == std::io::ErrorKind::NotFound {
                        std::io::Error::new(
                            e.kind(),
                            format!("the image does not hold the blob {member}, and its layer cache entry could not be used ({e})"),
                        )
                    } else {
                        e
                    }
                })
            })
        };
        let Some((cache, key)) = cached else {
            inputs.push(LayerInput::Blob(blob));
            continue;
        };
        let (store, hits, interests, limits) = (
            store.clone(),
            hits.clone(),
            interests.clone(),
            options.limits.clone(),
        );
        let (member, media_type, digest, size) = (
            plan.member.clone(),
            plan.media_type.clone(),
            plan.digest.clone(),
            plan.size,
        );
        let lookup: crate::tree::build::Lookup = Box::new(move || {
            let mut diff = cache.load(&key, &interests, &limits)?;
            // The entry may have been read from another blob of the same layer (gzip from a
            // registry, plain in an archive): say what this image stores, as far as is known
            // without opening its blob.
            diff.compression = compression_of(&media_type).unwrap_or(diff.compression);
            let plain = diff.compression == Compression::None;
            diff.blob_digest = match digest {
                Some(d) => d,
                // An uncompressed blob is the tar the diff_id hashes.
                None if plain => diff.diff_id.clone(),
                None => diff.blob_digest,
            };
            diff.blob_size = size.or_else(|| store.size(&member)).unwrap_or(if plain {
                diff.uncompressed_size
            } else {
                diff.blob_size
            });
            hits[i].store(true, Ordering::SeqCst);
            Some(diff)
        });
        inputs.push(LayerInput::Cached { lookup, blob });
    }
    let plans = &chosen.layers;
    let check = |i: usize, diff: &LayerDiff| -> Result<()> {
        let plan = &plans[i];
        let mismatch = |what: &str, expected: &Digest, actual: &Digest| Error::DigestMismatch {
            what: format!("layer {} ({what})", i + 1),
            member: plan.member.clone(),
            location: location.clone(),
            expected: expected.to_string(),
            actual: actual.to_string(),
        };
        let hit = hits[i].load(Ordering::SeqCst);
        // A cached layer's blob was never opened: only its diff_id can be compared.
        if let Some(expected) = plan.digest.as_ref().filter(|d| d.is_sha256() && !hit) {
            if *expected != diff.blob_digest {
                return Err(mismatch("blob", expected, &diff.blob_digest));
            }
        }
        if let Some(size) = plan.size.filter(|_| !hit) {
            if size != diff.blob_size {
                return Err(Error::Layer {
                    layer: format!("{} ({})", i + 1, plan.member),
                    location: location.clone(),
                    reason: format!("the manifest says {size} bytes, the blob has {}", diff.blob_size),
                    help: "the blob was cut short or changed after it was written; export or pull the image again"
                        .to_string(),
                });
            }
        }
        if let Some(expected) = plan.diff_id.as_ref().filter(|d| d.is_sha256()) {
            if *expected != diff.diff_id {
                return Err(mismatch(
                    "uncompressed, against the config's diff_id",
                    expected,
                    &diff.diff_id,
                ));
            }
            // Verified against the config: only now may the cache vouch for it.
            if let (Some(cache), false) = (cache, hit) {
                if !streamed[i] {
                    cache.store(diff, &interests, &options.limits);
                } else if !cache.contains(&diff.diff_id) {
                    // Read for fewer interests than the config adds: never in place of an
                    // entry that may hold more.
                    cache.store(diff, &options.interests, &options.limits);
                }
            }
        }
        Ok(())
    };
    let built = build(inputs, &interests, &options.limits, options.workers, check);
    if let Some(cache) = cache {
        cache.evict();
    }
    let (tree, stats) = built.map_err(|e| {
        let plan = &plans[e.index];
        let layer = match &plan.digest {
            Some(d) => format!("{} ({d})", e.index + 1),
            None => format!("{} ({})", e.index + 1, plan.member),
        };
        match *e.kind {
            BuildErrorKind::Rejected(err) => *err,
            BuildErrorKind::Read(err) => {
                if let crate::tree::layer::LayerError::Limit { name, limit, what } = &err {
                    return limit_error(name, *limit, format!("layer {layer}: {what}"), location.clone());
                }
                if let crate::tree::layer::LayerError::PathTooLong { name, limit, start } = &err {
                    return limit_error(
                        name,
                        *limit as u64,
                        format!("layer {layer}: the path of entry `{start}…`"),
                        location.clone(),
                    );
                }
                let truncated = matches!(&err, crate::tree::layer::LayerError::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof)
                    || err.to_string().contains("unexpected end");
                Error::Layer {
                    layer,
                    location: location.clone(),
                    reason: err.to_string(),
                    help: if truncated {
                        "the layer ends too early: the file was cut short while being written or copied; export the image again".to_string()
                    } else {
                        "the layer is damaged or not a tar stream; export or pull the image again".to_string()
                    },
                }
            }
            BuildErrorKind::Merge(crate::tree::merge::MergeError::Loop { path, limit }) => limit_error(
                "max_link_depth",
                limit as u64,
                format!("layer {layer}: the symbolic links in the folders of `/{path}`"),
                location.clone(),
            ),
            BuildErrorKind::Merge(crate::tree::merge::MergeError::PathTooLong { path, limit }) => limit_error(
                "max_path_len",
                limit as u64,
                format!(
                    "layer {layer}: the path that entry `/{}…` lands at once its links are followed",
                    path.chars().take(64).collect::<String>()
                ),
                location.clone(),
            ),
            BuildErrorKind::Merge(err) => Error::Layer {
                layer,
                location: location.clone(),
                reason: err.to_string(),
                help: "container runtimes refuse this layer too; rebuild the image".to_string(),
            },
        }
    })?;
    let layers = chosen
        .layers
        .into_iter()
        .zip(stats)
        .zip(hits.iter())
        .map(|((plan, s), hit)| Layer {
            digest: plan.digest.unwrap_or_else(|| s.blob_digest.clone()),
            media_type: plan.media_type,
            size: s.blob_size,
            uncompressed_size: s.uncompressed_size,
            diff_id: s.diff_id,
            compression: s.compression,
            entries: s.entries,
            history: plan.history,
            from_cache: hit.load(Ordering::SeqCst),
        })
        .collect();
    Ok(Image {
        reference: reference_text.to_string(),
        source,
        location,
        name: chosen.name,
        manifest_digest: chosen.manifest_digest,
        manifest_media_type: chosen.manifest_media_type,
        config_digest: chosen.config_digest,
        platform: chosen.platform,
        platforms: chosen.platforms,
        config: Some(chosen.config),
        layers,
        tree,
    })
}

/// Parses a JSON document, naming it in the error.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    what: &str,
    location: &str,
) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|source| Error::BadJson {
        what: what.to_string(),
        location: location.to_string(),
        source,
    })
}

/// Reads the config, checks its digest, and pairs its history with the layers.
pub(crate) fn read_config(
    store: &dyn Store,
    member: &str,
    expected: Option<&Digest>,
) -> Result<(ImageConfiguration, Digest)> {
    let bytes = store::read_small(store, member, "image config")?;
    let actual = Digest::of(&bytes);
    if let Some(expected) = expected.filter(|d| d.is_sha256()) {
        if *expected != actual {
            return Err(Error::DigestMismatch {
                what: "image config".to_string(),
                member: member.to_string(),
                location: store.location(),
                expected: expected.to_string(),
                actual: actual.to_string(),
            });
        }
    }
    let config: ImageConfiguration =
        parse_json(&bytes, &format!("image config {member}"), &store.location())?;
    Ok((config, actual))
}

/// The `created_by` of each non-empty history entry, in layer order.
pub(crate) fn layer_history(config: &ImageConfiguration) -> Vec<Option<String>> {
    config
        .history()
        .as_ref()
        .map(|h| {
            h.iter()
                .filter(|e| !e.empty_layer().unwrap_or(false))
                .map(|e| e.created_by().clone())
                .collect()
        })
        .unwrap_or_default()
}

/// The platform an image config declares.
pub(crate) fn config_platform(config: &ImageConfiguration) -> Platform {
    Platform::new(
        &config.os().to_string(),
        &config.architecture().to_string(),
        config.variant().as_deref(),
    )
}

/// Pairs the config's diff_ids and history with the manifest's layers; their counts must agree.
pub(crate) fn check_layer_count(
    config: &ImageConfiguration,
    layers: usize,
    location: &str,
) -> Result<Vec<Option<Digest>>> {
    let diff_ids = config.rootfs().diff_ids();
    if diff_ids.len() != layers {
        return Err(Error::NotAnImage {
            location: location.to_string(),
            reason: format!(
                "the manifest lists {layers} layers but the config's rootfs.diff_ids lists {}",
                diff_ids.len()
            ),
            help: "the manifest and config do not belong together; export the image again".to_string(),
        });
    }
    Ok(diff_ids.iter().map(|d| Digest::parse(d)).collect())
}
