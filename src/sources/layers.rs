//! Reading the chosen image's layers into its tree, in named steps: each layer becomes an
//! input (a layer a streamed archive already read, a layer cache lookup that falls back to the
//! blob, or the blob), the tree builder reads and merges them on worker threads, and each
//! layer it read is checked against the manifest and config ([`check_layer`]) before the layer
//! cache may keep it ([`remember_layer`]). A failure names its layer ([`build_error`]).

use super::progress::Progress;
use super::{limit_error, Options, Store};
use crate::cache::{LayerCache, ReadClaim};
use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::image::{Image, ImageSource, Layer};
use crate::platform::Platform;
use crate::tree::build::{build, Blob, BuildError, BuildErrorKind, LayerInput, Lookup, OpenBlob};
use crate::tree::layer::{GzipCrc, LayerError};
use crate::tree::merge::MergeError;
use crate::tree::{Compression, Interests, LayerDiff};
use oci_spec::image::ImageConfiguration;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The manifest chosen for an image and what it needs to be read.
pub(crate) struct Chosen {
    pub(crate) name: Option<String>,
    pub(crate) manifest_digest: Option<Digest>,
    pub(crate) manifest_media_type: Option<String>,
    pub(crate) config_digest: Option<Digest>,
    pub(crate) config: ImageConfiguration,
    pub(crate) platform: Platform,
    pub(crate) platforms: Vec<Platform>,
    pub(crate) layers: Vec<LayerPlan>,
}

/// A layer to read and what it must hash to.
pub(crate) struct LayerPlan {
    pub(crate) member: String,
    pub(crate) media_type: String,
    /// The blob digest the manifest gives (or the member name implies).
    pub(crate) digest: Option<Digest>,
    pub(crate) size: Option<u64>,
    pub(crate) diff_id: Option<Digest>,
    pub(crate) history: Option<String>,
    /// Where a foreign (non-distributable) layer is kept, as its descriptor's `urls` say.
    pub(crate) urls: Vec<String>,
}

/// Which layers the layer cache served, set by the lookups on the worker threads.
type Hits = Arc<Vec<AtomicBool>>;

/// Reads the chosen image's layers into a tree. With a layer cache, a layer whose diff_id has a
/// usable entry is taken from it and its blob never opened (for a registry: never downloaded);
/// every layer read and verified here is written to it.
pub(crate) fn read_layers(
    reference_text: &str,
    source: ImageSource,
    store: Arc<dyn Store>,
    chosen: Chosen,
    options: &Options,
) -> Result<Image> {
    let location = store.location();
    let interests = Arc::new(match &options.config_interests {
        Some(for_config) => options.interests.clone().union((for_config.0)(&chosen.config)),
        None => options.interests.clone(),
    });
    let count = chosen.layers.len();
    let hits: Hits = Arc::new((0..count).map(|_| AtomicBool::new(false)).collect());
    let claims: Claims = Arc::new((0..count).map(|_| Mutex::new(None)).collect());
    let progress = Arc::new(Progress::new(options.progress, count));
    // Layers a streamed archive read before the config was known, with `options.interests`.
    let mut streamed = vec![false; count];
    // A layout or archive on this machine can say what a blob is for the cost of its first
    // bytes; a registry or engine blob would have to be fetched, so its manifest says it.
    let local = matches!(
        source,
        ImageSource::OciDir | ImageSource::OciArchive | ImageSource::DockerArchive
    );
    let mut inputs = Vec::with_capacity(count);
    for (i, plan) in chosen.layers.iter().enumerate() {
        if let Some(diff) = store.take_read_layer(&plan.member) {
            inputs.push(LayerInput::Read(Box::new(diff)));
            streamed[i] = true;
            continue;
        }
        let blob = Blob {
            open: open_blob(&store, plan, i, &progress),
            // `check_layer` compares a blob with its sha256 digest: the CRC adds nothing then.
            crc: if plan.digest.as_ref().is_some_and(Digest::is_sha256) {
                GzipCrc::SkipDigestChecked
            } else {
                GzipCrc::Check
            },
        };
        let mut cached = false;
        let lookup = match cached_key(options.cache.as_ref(), plan) {
            Some((cache, key)) => {
                cached = cache.contains(&key);
                let hit = CacheHit {
                    index: i,
                    hits: hits.clone(),
                    claims: claims.clone(),
                };
                Some(cache_lookup(
                    cache, key, plan, &store, &interests, options, hit, local,
                ))
            }
            None => None,
        };
        // A cached layer needs no blob (a local store may not have exported it).
        if !cached && store.size(&plan.member).is_none() {
            if is_foreign(plan) {
                return Err(foreign_layer(plan, i, &location));
            }
            return Err(Error::MissingBlob {
                what: "layer".to_string(),
                member: plan.member.clone(),
                location,
            });
        }
        inputs.push(match lookup {
            Some(lookup) => LayerInput::Cached { lookup, blob },
            None => LayerInput::Blob(blob),
        });
    }
    let plans = &chosen.layers;
    let check = |i: usize, diff: &LayerDiff| -> Result<()> {
        let hit = hits[i].load(Ordering::SeqCst);
        // The claim on the layer's read ends with this check, once its entry is written (or
        // the layer refused): images waiting for the same layer then find the entry.
        let _claim = claims[i].lock().unwrap_or_else(|e| e.into_inner()).take();
        check_layer(&plans[i], i, diff, hit, &location)?;
        if let (Some(cache), false) = (options.cache.as_ref(), hit) {
            if plans[i].diff_id.as_ref().is_some_and(Digest::is_sha256) {
                remember_layer(cache, diff, streamed[i], &interests, options);
            }
        }
        Ok(())
    };
    let built = build(inputs, &interests, &options.limits, options.workers, check);
    if let Some(cache) = &options.cache {
        cache.evict();
    }
    let (tree, stats) = built.map_err(|e| build_error(e, plans, &location))?;
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

/// Opens a layer's blob when the builder asks for it (not at all when the layer cache serves
/// the layer), its reads moving the progress display.
fn open_blob(store: &Arc<dyn Store>, plan: &LayerPlan, index: usize, progress: &Arc<Progress>) -> OpenBlob {
    let (store, member, progress) = (store.clone(), plan.member.clone(), progress.clone());
    let label = plan
        .digest
        .as_ref()
        .map_or_else(|| plan.member.clone(), |d| d.to_string());
    let size = plan.size.or_else(|| store.size(&plan.member));
    Box::new(move || {
        store
            .open(&member)
            .map(|r| progress.track(index, &label, size, r))
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    std::io::Error::new(
                        e.kind(),
                        format!(
                            "the image does not hold the blob {member}, and its layer cache entry could not be used ({e})"
                        ),
                    )
                } else {
                    e
                }
            })
    })
}

/// The layer cache and the key of a layer it has an entry for: its sha256 diff_id.
fn cached_key(cache: Option<&Arc<LayerCache>>, plan: &LayerPlan) -> Option<(Arc<LayerCache>, Digest)> {
    let cache = cache?;
    let key = plan.diff_id.clone().filter(Digest::is_sha256)?;
    Some((cache.clone(), key))
}

/// Each layer's claim on its read ([`LayerCache::claim_read`]), held from a lookup that found
/// nothing until the layer's check has written its entry.
type Claims = Arc<Vec<Mutex<Option<ReadClaim>>>>;

/// Marks one layer as served by the layer cache, or keeps its read's claim.
struct CacheHit {
    index: usize,
    hits: Hits,
    claims: Claims,
}

/// Looks a layer up in the layer cache on a worker, completing the entry with what this image
/// stores of it. The entry says what the layer contributes (its files, diff_id, unpacked
/// size); what the blob is (digest, size, compression) comes from this image, since the entry
/// may have been read from another blob of the same layer (gzip from a registry, plain in an
/// archive). With `local`, when the manifest does not give both the digest and the compression,
/// the blob's first bytes say its compression, as a read would, and a compressed blob whose
/// manifest gives no digest is hashed (not unpacked) for it.
#[allow(clippy::too_many_arguments)]
fn cache_lookup(
    cache: Arc<LayerCache>,
    key: Digest,
    plan: &LayerPlan,
    store: &Arc<dyn Store>,
    interests: &Arc<Interests>,
    options: &Options,
    hit: CacheHit,
    local: bool,
) -> Lookup {
    let (store, interests, limits) = (store.clone(), interests.clone(), options.limits.clone());
    let (member, media_type, digest, size) = (
        plan.member.clone(),
        plan.media_type.clone(),
        plan.digest.clone(),
        plan.size,
    );
    Box::new(move || {
        // Another image of this run may be reading the layer now: wait for its entry rather
        // than read the blob a second time.
        let mut diff = loop {
            // `contains` first: a look-up of an absent entry says nothing, even in a folder
            // that cannot be read (which `contains` leaves to the write's one warning).
            if let Some(diff) = cache
                .contains(&key)
                .then(|| cache.load(&key, &interests, &limits))
                .flatten()
            {
                break diff;
            }
            if let Some(claim) = cache.claim_read(&key) {
                *hit.claims[hit.index].lock().unwrap_or_else(|e| e.into_inner()) = Some(claim);
                return None;
            }
        };
        // A manifest that gives the digest and names the compression says what the blob is
        // (and its size): the blob is never opened, so a layout whose blobs were removed
        // still reads from the cache. Otherwise (a `docker save` member, which has neither)
        // the blob's first bytes say it, as a read would.
        let named = compression_of(&media_type);
        let blob = match (local, &digest, named) {
            (true, None, _) | (true, _, None) => local_blob(store.as_ref(), &member, digest.is_none()),
            _ => None,
        };
        match blob {
            Some(blob) => {
                diff.compression = blob.compression;
                diff.blob_size = size.unwrap_or(blob.size);
                diff.blob_digest = match (digest, blob.digest) {
                    (Some(d), _) | (None, Some(d)) => d,
                    // An uncompressed blob is the tar the diff_id hashes.
                    (None, None) => diff.diff_id.clone(),
                };
            }
            None => {
                diff.compression = named.unwrap_or(diff.compression);
                let plain = diff.compression == Compression::None;
                diff.blob_digest = match digest {
                    Some(d) => d,
                    None if plain => diff.diff_id.clone(),
                    None => diff.blob_digest,
                };
                diff.blob_size = size.or_else(|| store.size(&member)).unwrap_or(if plain {
                    diff.uncompressed_size
                } else {
                    diff.blob_size
                });
            }
        }
        hit.hits[hit.index].store(true, Ordering::SeqCst);
        Some(diff)
    })
}

/// What a blob on this machine is, as far as its cache entry cannot say.
struct LocalBlob {
    compression: Compression,
    size: u64,
    /// Only when asked for and the blob is compressed (a plain blob's digest is its diff_id).
    digest: Option<Digest>,
}

/// Reads a blob's first bytes for its compression, and with `want_digest` hashes a compressed
/// blob whole; `None` when it cannot be opened or is not a layer (then the manifest's word
/// stands, and reading the blob, if the entry cannot serve, gives the error).
fn local_blob(store: &dyn Store, member: &str, want_digest: bool) -> Option<LocalBlob> {
    use std::io::Read;
    let mut reader = crate::digest::HashingReader::new(store.open(member).ok()?);
    let mut head = Vec::with_capacity(512);
    (&mut reader).take(512).read_to_end(&mut head).ok()?;
    let compression = Compression::sniff(&head)?;
    if want_digest && compression != Compression::None {
        let (digest, size) = reader.finish().ok()?;
        return Some(LocalBlob {
            compression,
            size,
            digest: Some(digest),
        });
    }
    Some(LocalBlob {
        compression,
        size: store.size(member)?,
        digest: None,
    })
}

/// A foreign (non-distributable) layer: one that registries and `docker save` leave out and
/// engines fetch from its descriptor's `urls` (Windows base layers), by its media type or URLs.
fn is_foreign(plan: &LayerPlan) -> bool {
    plan.media_type.contains(".foreign.")
        || plan.media_type.contains(".nondistributable.")
        || !plan.urls.is_empty()
}

/// The error for a foreign layer whose blob is not in the image: its media type and URLs.
fn foreign_layer(plan: &LayerPlan, index: usize, location: &str) -> Error {
    let printable = crate::tree::layer::printable;
    let urls = if plan.urls.is_empty() {
        "no URL (its descriptor has no `urls`)".to_string()
    } else {
        plan.urls
            .iter()
            .map(|u| format!("`{}`", printable(u)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Error::Layer {
        layer: format!("{} ({})", index + 1, plan.member),
        location: location.to_string(),
        reason: format!(
            "it is a foreign (non-distributable) layer, media type `{}`, kept outside the image at {urls}; its blob is not in the image",
            printable(&plan.media_type)
        ),
        help: "foreign layers (Windows base layers) are left out by registries and `docker save`, and memlint does not download them: \
               fetch the blob from that URL yourself, if you trust it, and put it in the image beside the others \
               (in an OCI layout, as blobs/sha256/<its digest>), or read the image from the engine that runs it"
            .to_string(),
    }
}

/// The compression a layer media type names, when it names one.
fn compression_of(media_type: &str) -> Option<Compression> {
    if media_type.ends_with("gzip") {
        Some(Compression::Gzip)
    } else if media_type.ends_with("zstd") {
        Some(Compression::Zstd)
    } else if media_type.ends_with("+xz") {
        Some(Compression::Xz)
    } else if media_type.ends_with("+bzip2") {
        Some(Compression::Bzip2)
    } else if media_type.ends_with(".tar") {
        Some(Compression::None)
    } else {
        None
    }
}

/// Checks a layer against what the manifest and config say of it: blob digest and size (not
/// for a layer the cache served, whose blob was never opened) and diff_id.
fn check_layer(
    plan: &LayerPlan,
    index: usize,
    diff: &LayerDiff,
    from_cache: bool,
    location: &str,
) -> Result<()> {
    let mismatch = |what: &str, expected: &Digest, actual: &Digest| Error::DigestMismatch {
        what: format!("layer {} ({what})", index + 1),
        member: plan.member.clone(),
        location: location.to_string(),
        expected: expected.to_string(),
        actual: actual.to_string(),
    };
    if let Some(expected) = plan.digest.as_ref().filter(|d| d.is_sha256() && !from_cache) {
        if *expected != diff.blob_digest {
            return Err(mismatch("blob", expected, &diff.blob_digest));
        }
    }
    if let Some(size) = plan.size.filter(|_| !from_cache) {
        if size != diff.blob_size {
            return Err(Error::Layer {
                layer: format!("{} ({})", index + 1, plan.member),
                location: location.to_string(),
                reason: format!("the manifest says {size} bytes, the blob has {}", diff.blob_size),
                help:
                    "the blob was cut short or changed after it was written; export or pull the image again"
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
    }
    Ok(())
}

/// Writes a layer that was read from its blob and verified against the config's diff_id to the
/// layer cache: only then may the cache vouch for it.
fn remember_layer(
    cache: &LayerCache,
    diff: &LayerDiff,
    streamed: bool,
    interests: &Interests,
    options: &Options,
) {
    if !streamed {
        cache.store(diff, interests, &options.limits);
    } else if !cache.contains(&diff.diff_id) {
        // Read for fewer interests than the config adds: never in place of an entry that may
        // hold more.
        cache.store(diff, &options.interests, &options.limits);
    }
}

/// A failed layer as the error that names it, its limit, and what to do.
fn build_error(e: BuildError, plans: &[LayerPlan], location: &str) -> Error {
    let plan = &plans[e.index];
    let layer = match &plan.digest {
        Some(d) => format!("{} ({d})", e.index + 1),
        None => format!("{} ({})", e.index + 1, plan.member),
    };
    match *e.kind {
        BuildErrorKind::Rejected(err) => *err,
        BuildErrorKind::Read(err) => read_error(err, layer, location),
        BuildErrorKind::Merge(MergeError::Loop { path, limit }) => limit_error(
            "max_link_depth",
            limit as u64,
            format!("layer {layer}: the symbolic links in the folders of `/{path}`"),
            location,
        ),
        BuildErrorKind::Merge(MergeError::PathTooLong { path, limit }) => limit_error(
            "max_path_len",
            limit as u64,
            format!(
                "layer {layer}: the path that entry `/{}…` lands at once its links are followed",
                crate::tree::layer::printable(&path.chars().take(64).collect::<String>())
            ),
            location,
        ),
        BuildErrorKind::Merge(err) => Error::Layer {
            layer,
            location: location.to_string(),
            reason: err.to_string(),
            help: "container runtimes refuse this layer too; rebuild the image".to_string(),
        },
    }
}

/// A layer that could not be read: a limit it passed, or what is wrong with it.
fn read_error(err: LayerError, layer: String, location: &str) -> Error {
    // A registry's refusal or a timeout, raised under the decoder: its words and its help,
    // for this layer.
    let inner = |inner: Error| match inner {
        Error::Timeout {
            location,
            reason,
            help,
            ..
        } => Error::Timeout {
            what: format!("layer {layer}"),
            location,
            reason,
            help,
        },
        other => Error::Layer {
            layer: layer.clone(),
            location: location.to_string(),
            reason: other.to_string(),
            help: miette::Diagnostic::help(&other)
                .map(|h| h.to_string())
                .unwrap_or_else(|| "pull the image again".to_string()),
        },
    };
    let err = match err {
        LayerError::Io(e) => match super::error_in_io(e, location) {
            Ok(e) => return inner(e),
            Err(e) => LayerError::Io(e),
        },
        LayerError::Entry { source, path } => match super::error_in_io(source, location) {
            Ok(e) => return inner(e),
            Err(source) => LayerError::Entry { source, path },
        },
        other => other,
    };
    if let LayerError::Limit { name, limit, what } = &err {
        return limit_error(name, *limit, format!("layer {layer}: {what}"), location);
    }
    if let LayerError::PathTooLong { name, limit, start } = &err {
        return limit_error(
            name,
            *limit as u64,
            format!("layer {layer}: the path of entry `{start}…`"),
            location,
        );
    }
    if matches!(&err, LayerError::Io(io) if io.kind() == std::io::ErrorKind::OutOfMemory) {
        return Error::Layer {
            layer,
            location: location.to_string(),
            reason: format!(
                "its xz stream asks for more memory than memlint gives one layer ({} MiB): {err}",
                crate::tree::xz_bzip2::XZ_MEMORY_KIB / 1024
            ),
            help: "`xz -9`, the largest preset, needs 64 MiB; recompress the layer with a standard preset (or gzip or zstd)"
                .to_string(),
        };
    }
    if let LayerError::InvalidWhiteout { .. } = &err {
        return Error::Layer {
            layer,
            location: location.to_string(),
            reason: err.to_string(),
            help: "container runtimes refuse to unpack this layer (containerd: invalid archive), so the image cannot run; \
                   rebuild it with a tool that writes whiteouts as `.wh.<name>` beside the file they delete"
                .to_string(),
        };
    }
    let truncated = matches!(&err, LayerError::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof)
        || err.to_string().contains("unexpected end");
    Error::Layer {
        layer,
        location: location.to_string(),
        reason: err.to_string(),
        help: if truncated {
            "the layer ends too early: the file was cut short while being written or copied; export the image again"
                .to_string()
        } else {
            "the layer is damaged or not a tar stream; export or pull the image again".to_string()
        },
    }
}
