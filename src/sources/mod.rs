//! Where an image comes from. A source finds the manifest for the requested platform, reads
//! and verifies the config, and streams the layers into a [`FileTree`]; it knows nothing of
//! facts or rules.

mod credentials;
pub mod deadline;
mod docker;
mod engine;
mod layers;
mod oci;
mod progress;
pub mod registry;
mod rootfs;
mod select;
mod store;
mod stream;

pub use engine::EngineOptions;
pub use progress::ProgressMode;
pub use select::Candidate;
use select::ManifestSource;
pub use store::Store;

pub(crate) use layers::{read_layers, Chosen, LayerPlan};

use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::image::{Image, ImageSource};
use crate::platform::Platform;
use crate::reference::{ArchiveInput, Reference, Selector};
use crate::tree::{Compression, Interests, Limits};
use crate::warnings::Warnings;
use oci_spec::image::ImageConfiguration;
use std::path::Path;
use std::sync::Arc;

/// What an image's config adds to the interests once it is known: a closure, so that
/// `lint --k8s` can add what the commands its manifests give the image need.
#[derive(Clone)]
pub struct ConfigInterests(pub Arc<dyn Fn(&ImageConfiguration) -> Interests + Send + Sync>);

impl std::fmt::Debug for ConfigInterests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConfigInterests")
    }
}

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
    pub config_interests: Option<ConfigInterests>,
    pub limits: Limits,
    /// Layers read at once.
    pub workers: usize,
    /// Read every platform of a multi-platform image (`--platform all`).
    pub all_platforms: bool,
    /// The layer analysis cache; `None` with `--no-cache`.
    pub cache: Option<Arc<crate::cache::LayerCache>>,
    /// Credentials, CAs and insecure hosts for `registry:` references.
    pub registry: registry::RegistryOptions,
    /// Where the engines of `docker:` and `podman:` references listen.
    pub engine: EngineOptions,
    /// The Docker CLI's config folder (`$DOCKER_CONFIG`, else `~/.docker`): registry
    /// credentials and Docker contexts.
    pub docker_config: Option<std::path::PathBuf>,
    /// How layer reads show their progress on standard error.
    pub progress: ProgressMode,
    /// Where warnings go (a Docker config that cannot be read, a layer cache that cannot be
    /// written); `commands/` prints them.
    pub warnings: Warnings,
    /// `--timeout`: how long one image's read may take; `None` has no bound.
    pub timeout: Option<std::time::Duration>,
    /// The bounds of the read under way: set by [`open_all`] from `timeout` and the
    /// `idle_timeout_secs` limit.
    pub deadline: deadline::Deadline,
    /// The end of a whole run of reads (a fleet's `fleet_timeout_secs`) and that bound: every
    /// read's deadline ends by it too; `None` has no bound.
    pub run_deadline: Option<(std::time::Instant, std::time::Duration)>,
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
            engine: EngineOptions::default(),
            docker_config: None,
            progress: ProgressMode::Off,
            warnings: Warnings::default(),
            timeout: Some(deadline::DEFAULT_TIMEOUT),
            deadline: deadline::Deadline::default(),
            run_deadline: None,
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
        crate::units::exact_bytes(v).unwrap_or_else(|| format!("{v} bytes"))
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

/// A limit hit deep inside a reader (carried in an `io::Error`) as the error that names it;
/// a timeout (a [`deadline::TimeoutHit`]) too.
pub(crate) fn limit_in_io(e: &std::io::Error, location: &str) -> Option<Error> {
    if let Some(hit) = deadline::TimeoutHit::in_io(e) {
        return Some(timeout_error(hit, "the image", location));
    }
    let hit = e.get_ref()?.downcast_ref::<crate::tree::layer::LimitHit>()?;
    Some(limit_error(hit.name, hit.limit, hit.what, location))
}

/// The error for a read that ran out of time.
pub(crate) fn timeout_error(
    hit: deadline::TimeoutHit,
    what: impl Into<String>,
    location: impl Into<String>,
) -> Error {
    Error::Timeout {
        what: what.into(),
        location: location.into(),
        reason: hit.to_string(),
        help: hit.help(),
    }
}

/// The diagnostic an `io::Error` of a reader carries (a registry's refusal, a timeout), if it
/// carries one; else the error itself, unchanged.
pub(crate) fn error_in_io(e: std::io::Error, location: &str) -> std::result::Result<Error, std::io::Error> {
    if let Some(hit) = deadline::TimeoutHit::in_io(&e) {
        return Ok(timeout_error(hit, "the image", location));
    }
    if e.get_ref().is_some_and(|inner| inner.is::<Error>()) {
        let kind = e.kind();
        return match e.into_inner().map(|inner| inner.downcast::<Error>()) {
            Some(Ok(inner)) => Ok(*inner),
            Some(Err(inner)) => Err(std::io::Error::new(kind, inner)),
            None => Err(std::io::Error::from(kind)),
        };
    }
    Err(e)
}

/// Reads the image a reference names; with `options.all_platforms`, every platform it offers.
/// Each call is one image read, with its own `--timeout` deadline.
pub fn open_all(reference_text: &str, reference: &Reference, options: &Options) -> Result<Vec<Image>> {
    let idle =
        Some(std::time::Duration::from_secs(options.limits.idle_timeout_secs)).filter(|d| !d.is_zero());
    let options = &Options {
        deadline: deadline::Deadline::start(options.timeout, idle).within_run(options.run_deadline),
        ..options.clone()
    };
    open_within(reference_text, reference, options)
}

fn open_within(reference_text: &str, reference: &Reference, options: &Options) -> Result<Vec<Image>> {
    match reference {
        Reference::OciDir { path, selector } => {
            require_dir(path)?;
            let store: Arc<dyn Store> =
                Arc::new(store::DirStore::new(path).with_max_json(options.limits.max_json_bytes));
            load(
                reference_text,
                ImageSource::OciDir,
                store,
                Format::Oci,
                selector.as_ref(),
                options,
            )
        }
        Reference::OciArchive { path, selector } => open_archive_file(
            reference_text,
            Some(ImageSource::OciArchive),
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
            Some(ImageSource::DockerArchive),
            path,
            Format::Docker,
            selector.as_ref(),
            options,
        ),
        Reference::DockerArchive {
            input: ArchiveInput::Stdin,
            selector,
        } => {
            // Read on a thread of its own, so that a pipe that stalls ends at the deadline.
            let stdin = deadline::BoundedReader::new(std::io::stdin(), options.deadline);
            let store = stream::read_sniffed(stdin, "standard input", options)?;
            load(
                reference_text,
                ImageSource::DockerArchive,
                Arc::new(store),
                Format::Docker,
                selector.as_ref(),
                options,
            )
        }
        Reference::Rootfs { path } => {
            wrong_prefix_for_dir(reference_text, path)?;
            Ok(vec![rootfs::open(reference_text, path, options)?])
        }
        Reference::Path { path } => {
            if path.is_dir() {
                if path.join("oci-layout").is_file() || path.join("index.json").is_file() {
                    open_within(
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
                open_archive_file(reference_text, None, path, Format::Detect, None, options)
            }
        }
        Reference::Registry(name) => registry::open(reference_text, name, options),
        Reference::Docker(name) => engine::open_docker(reference_text, name, options),
        Reference::Podman(name) => engine::open_podman(reference_text, name, options),
    }
}

/// `dir:` is for an unpacked root file system; an OCI layout or a `docker save` folder needs
/// another prefix, which the error names.
fn wrong_prefix_for_dir(input: &str, path: &Path) -> Result<()> {
    let shown = path.display();
    if path.join("oci-layout").is_file() || path.join("index.json").is_file() {
        return Err(Error::WrongPrefix {
            input: input.to_string(),
            what: "an OCI layout (it has oci-layout or index.json), not an unpacked root file system"
                .to_string(),
            help: format!("read it with `oci-dir:{shown}`"),
        });
    }
    if path.join("manifest.json").is_file()
        && (path.join("repositories").is_file() || path.join("blobs").is_dir())
    {
        return Err(Error::WrongPrefix {
            input: input.to_string(),
            what: "an unpacked `docker save` folder (it has manifest.json), not a root file system".to_string(),
            help: format!(
                "`docker-archive:` reads the tar itself: pack the folder with `tar -cf image.tar -C {shown} .` and read `docker-archive:image.tar`, or use the tar `docker save` wrote"
            ),
        });
    }
    Ok(())
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

/// Reads an archive file; `source` `None` recognises it by its content.
/// A FIFO (or another file that is not a regular one) named as an archive: opening it and
/// reading it may block, so both happen on a thread of their own within the read's deadline,
/// and it is read as a stream, compressed or not.
fn open_archive_pipe(
    reference_text: &str,
    source: Option<ImageSource>,
    path: &Path,
    format: Format,
    selector: Option<&Selector>,
    options: &Options,
) -> Result<Vec<Image>> {
    use std::io::Read;
    /// Opens the file at its first read, on the reading thread.
    struct OpenLater(std::path::PathBuf, Option<std::fs::File>);
    impl Read for OpenLater {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.1.is_none() {
                self.1 = Some(std::fs::File::open(&self.0)?);
            }
            match &mut self.1 {
                Some(f) => f.read(buf),
                None => Ok(0),
            }
        }
    }
    let input = deadline::BoundedReader::new(OpenLater(path.to_path_buf(), None), options.deadline);
    let label = format!("archive {}", path.display());
    let store = stream::read_sniffed(input, &label, options)?;
    let source = source.unwrap_or(ImageSource::DockerArchive);
    load(reference_text, source, Arc::new(store), format, selector, options)
}

fn open_archive_file(
    reference_text: &str,
    source: Option<ImageSource>,
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
    if !meta.is_file() {
        return open_archive_pipe(reference_text, source, path, format, selector, options);
    }
    // `docker save | gzip` output cannot be read in place: stream it.
    {
        use std::io::Read;
        let mut f = std::fs::File::open(path).map_err(|e| Error::io(path.display(), e))?;
        let mut magic = Vec::with_capacity(512);
        (&mut f)
            .take(512)
            .read_to_end(&mut magic)
            .map_err(|e| Error::io(path.display(), e))?;
        if Compression::sniff(&magic).is_none() {
            // Named by its first bytes in hex: the bytes themselves may be anything.
            return Err(Error::NotAnImage {
                location: path.display().to_string(),
                reason: format!(
                    "it is not a tar archive: {}",
                    crate::tree::layer::describe_start(&magic)
                ),
                help:
                    "give `docker save` output (plain, gzip or zstd), an OCI archive, or an OCI layout folder"
                        .to_string(),
            });
        }
        if matches!(
            Compression::sniff(&magic),
            Some(Compression::Gzip | Compression::Zstd)
        ) {
            // A compressed archive file (`docker save | gzip > image.tar.gz`): from its start,
            // sniffed and decompressed as standard input is.
            use std::io::{Seek, SeekFrom};
            f.seek(SeekFrom::Start(0))
                .map_err(|e| Error::io(path.display(), e))?;
            let label = format!("archive {}", path.display());
            let store = stream::read_sniffed(f, &label, options)?;
            let source = source.unwrap_or(ImageSource::DockerArchive);
            return load(reference_text, source, Arc::new(store), format, selector, options);
        }
    }
    let store = store::TarStore::open(path, &options.limits)?;
    let source = match (source, format) {
        (None, _) if store.has("manifest.json") => ImageSource::DockerArchive,
        (None, _) if store.has("index.json") => ImageSource::OciArchive,
        (None, _) => {
            return Err(Error::NotAnImage {
                location: path.display().to_string(),
                reason: "the archive has neither manifest.json (docker save) nor index.json (OCI layout)"
                    .to_string(),
                help: "give `docker save` output, an OCI archive, or an OCI layout folder".to_string(),
            })
        }
        (Some(s), _) => s,
    };
    load(reference_text, source, Arc::new(store), format, selector, options)
}

fn load(
    reference_text: &str,
    source: ImageSource,
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
    let platform_of = |manifest: &ManifestSource| match manifest {
        ManifestSource::Oci {
            digest, member, size, ..
        } => oci::platform_of(store.as_ref(), digest, member, *size),
        ManifestSource::Docker { config, .. } => docker::platform_of(store.as_ref(), config),
    };
    let picks = if options.all_platforms {
        select::every_platform(store.as_ref(), candidates, selector, &platform_of)?
    } else {
        vec![select::choose(
            store.as_ref(),
            candidates,
            selector,
            options.platform.as_ref(),
            &platform_of,
        )?]
    };
    let mut images = Vec::with_capacity(picks.len());
    for (candidate, platforms) in picks {
        let name = candidate.display_name();
        let Candidate {
            manifest, platform, ..
        } = candidate;
        let mut chosen = match manifest {
            ManifestSource::Oci {
                digest,
                media_type,
                member,
                size,
            } => oci::load_manifest(
                store.as_ref(),
                oci::ManifestBlob {
                    digest: &digest,
                    member: &member,
                    media_type: &media_type,
                    size,
                },
                platform.as_ref(),
                name,
                options.limits.max_layers,
            )?,
            ManifestSource::Docker {
                config,
                layers,
                layer_sources,
            } => docker::load_manifest(
                store.as_ref(),
                &config,
                layers,
                &layer_sources,
                name,
                options.limits.max_layers,
            )?,
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
    max_layers: u64,
) -> Result<Vec<Option<Digest>>> {
    let diff_ids = config.rootfs().diff_ids();
    let most = layers.max(diff_ids.len()) as u64;
    if most > max_layers {
        return Err(limit_error(
            "max_layers",
            max_layers,
            format!("the layers of the image ({most})"),
            location,
        ));
    }
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
    diff_ids
        .iter()
        .enumerate()
        .map(|(i, d)| match Digest::parse(d) {
            Some(d) => Ok(Some(d)),
            None => Err(Error::NotAnImage {
                location: location.to_string(),
                reason: format!(
                    "rootfs.diff_ids[{i}] of its config (layer {}) is not a well-formed digest: `{}`",
                    i + 1,
                    d.escape_debug()
                ),
                help: "a diff_id is `sha256:` and 64 hex digits; the config was written by a broken tool or edited by hand"
                    .to_string(),
            }),
        })
        .collect()
}
