//! Where an image comes from. A source finds the manifest for the requested platform, reads
//! and verifies the config, and streams the layers into a [`FileTree`]; it knows nothing of
//! facts or rules.

mod credentials;
pub(crate) mod deadline;
mod docker;
mod engine;
mod layers;
mod oci;
mod progress;
pub(crate) mod registry;
mod rootfs;
mod select;
mod store;
mod stream;

pub(crate) use engine::EngineOptions;
pub(crate) use progress::ProgressMode;
pub(crate) use select::Candidate;
use select::ManifestSource;
pub(crate) use store::Store;

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
pub(crate) struct ConfigInterests(pub(crate) Arc<dyn Fn(&ImageConfiguration) -> Interests + Send + Sync>);

impl std::fmt::Debug for ConfigInterests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConfigInterests")
    }
}

/// How to read an image.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// The platform to pick from an index or multi-image archive; `None` takes linux/amd64 when
    /// present, else the only linux image.
    pub(crate) platform: Option<Platform>,
    /// The file contents and ELF facts to keep, before the image's config is known. The stages
    /// that read them say which (the commands pass `facts::interests()`); none by default.
    pub(crate) interests: Interests,
    /// What the image's config adds to `interests` once it is known (the commands pass
    /// `facts::interests_for`: the scripts the entrypoint may run); `None` adds nothing.
    pub(crate) config_interests: Option<ConfigInterests>,
    pub(crate) limits: Limits,
    /// Layers read at once.
    pub(crate) workers: usize,
    /// Read every platform of a multi-platform image (`--platform all`).
    pub(crate) all_platforms: bool,
    /// The layer analysis cache; `None` with `--no-cache`.
    pub(crate) cache: Option<Arc<crate::cache::LayerCache>>,
    /// Credentials, CAs and insecure hosts for `registry:` references.
    pub(crate) registry: registry::RegistryOptions,
    /// Where the engines of `docker:` and `podman:` references listen.
    pub(crate) engine: EngineOptions,
    /// The Docker CLI's config folder (`$DOCKER_CONFIG`, else `~/.docker`): registry
    /// credentials and Docker contexts.
    pub(crate) docker_config: Option<std::path::PathBuf>,
    /// How layer reads show their progress on standard error.
    pub(crate) progress: ProgressMode,
    /// Where warnings go (a Docker config that cannot be read, a layer cache that cannot be
    /// written); `commands/` prints them.
    pub(crate) warnings: Warnings,
    /// `--timeout`: how long one image's read may take; `None` has no bound.
    pub(crate) timeout: Option<std::time::Duration>,
    /// The bounds of the read under way: set by [`open_all`] from `timeout` and the
    /// `idle_timeout_secs` limit.
    pub(crate) deadline: deadline::Deadline,
    /// The end of a whole run of reads (a fleet's `fleet_timeout_secs`) and that bound: every
    /// read's deadline ends by it too; `None` has no bound.
    pub(crate) run_deadline: Option<(std::time::Instant, std::time::Duration)>,
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
pub(crate) fn open(reference_text: &str, reference: &Reference, options: &Options) -> Result<Image> {
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
pub(crate) fn open_all(reference_text: &str, reference: &Reference, options: &Options) -> Result<Vec<Image>> {
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
                    "give `docker save` output (plain, gzip, zstd, xz or bzip2), an OCI archive, or an OCI layout folder"
                        .to_string(),
            });
        }
        if Compression::sniff(&magic).is_some_and(|c| c != Compression::None) {
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
        if chosen.platform.is_unstated() {
            options.warnings.warn(&format!(
                "{}: its config names no os and no architecture: read as a file system image of unknown platform",
                crate::tree::layer::printable(reference_text)
            ));
        }
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

/// Parses a JSON document, naming it in the error. JSON that is well-formed but not of the
/// shape expected (a key missing, a value of the wrong type) says which key and what the spec
/// gives it, rather than calling the JSON broken.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    what: &str,
    location: &str,
) -> Result<T> {
    let bad_json = |source| Error::BadJson {
        what: what.to_string(),
        location: location.to_string(),
        source,
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let source = e.into_inner();
        if source.classify() != serde_json::error::Category::Data {
            return bad_json(source);
        }
        wrong_shape(what, location, &path, &source)
    })?;
    de.end().map_err(bad_json)?;
    Ok(value)
}

/// The error for well-formed JSON of the wrong shape at `path` (`.` for the document itself).
fn wrong_shape(what: &str, location: &str, path: &str, source: &serde_json::Error) -> Error {
    // serde's message without its position (`… at line 1 column 40`), which says nothing here.
    let text = source.to_string();
    let message = text.split(" at line ").next().unwrap_or(&text);
    let at = |key: &str| match path {
        "." | "" => key.to_string(),
        p => format!("{p}.{key}"),
    };
    let reason = match message
        .strip_prefix("missing field `")
        .and_then(|m| m.strip_suffix('`'))
    {
        Some(key) => format!("{what} has no `{}` key", at(key)),
        None if path == "." || path.is_empty() => format!("{what} is not of the expected shape: {message}"),
        None => format!("{what} has a wrong `{path}`: {message}"),
    };
    Error::NotAnImage {
        location: location.to_string(),
        reason: crate::tree::layer::printable(&reason),
        help: spec_help(what).to_string(),
    }
}

/// What the OCI image spec says a document holds, for a document of the wrong shape.
fn spec_help(what: &str) -> &'static str {
    if what.starts_with("image config") {
        "the OCI image spec (config.md) gives an image config `architecture` and `os` (strings) and \
         `rootfs` ({\"type\": \"layers\", \"diff_ids\": [one digest per layer, base first]}); \
         `config` and `history` are optional. A config without them is not an image that runs \
         (`docker load` refuses it too): rebuild or export the image with a tool that writes image configs"
    } else if what.starts_with("manifest.json") {
        "`docker save` writes manifest.json as a list of objects with `Config`, `RepoTags` and `Layers`; save the image again"
    } else if what.starts_with("manifest") {
        "the OCI image spec (manifest.md) gives an image manifest `schemaVersion` 2, a `config` \
         descriptor and a `layers` list of descriptors, each with `mediaType` (string), `digest` \
         (string) and `size` (a number of bytes, not a string); export or push the image again \
         with a tool that follows the spec"
    } else if what.starts_with("index") {
        "the OCI image spec (image-index.md) gives an index `schemaVersion` 2 and a `manifests` \
         list of descriptors, each with `mediaType` (string), `digest` (string) and `size` (a \
         number of bytes); export the image again with a tool that follows the spec"
    } else {
        "the document does not have the shape memlint expects; export the image again"
    }
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
    let config = decode_config(&bytes, member, &store.location())?;
    Ok((config, actual))
}

/// The platform a config declares, read from its `os`, `architecture` and `variant` alone: the
/// choice among platforms does not depend on the rest of each candidate's config, which is
/// decoded (and refused, if it must be) only for the image chosen.
pub(crate) fn read_config_platform(
    store: &dyn Store,
    member: &str,
    expected: Option<&Digest>,
) -> Result<Platform> {
    let bytes = store::read_small(store, member, "image config")?;
    if let Some(expected) = expected.filter(|d| d.is_sha256()) {
        let actual = Digest::of(&bytes);
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
    let what = format!("image config {member}");
    let value: serde_json::Value = parse_json(&bytes, &what, &store.location())?;
    let text = |key: &str| value.get(key).and_then(|v| v.as_str()).unwrap_or_default();
    let os = match text("os") {
        "" if !text("architecture").is_empty() => "linux",
        os => os,
    };
    Ok(Platform::new(os, text("architecture"), Some(text("variant"))))
}

/// Decodes an image config as the engines read it. `rootfs.diff_ids` null or absent is an image
/// with no layers (BuildKit's `FROM scratch` + `LABEL` writes `"diff_ids": null`; the count is
/// still checked against the manifest); a config with an architecture but no `os` predates
/// Windows containers (Docker wrote them until 2016) and is linux, as `docker load` on linux
/// takes it. A config without `rootfs` is refused, naming the key, as moby refuses it.
pub(crate) fn decode_config(bytes: &[u8], member: &str, location: &str) -> Result<ImageConfiguration> {
    let what = format!("image config {member}");
    let mut value: serde_json::Value = parse_json(bytes, &what, location)?;
    if let Some(object) = value.as_object_mut() {
        let absent = |v: Option<&serde_json::Value>| v.is_none_or(serde_json::Value::is_null);
        if let Some(serde_json::Value::Object(rootfs)) = object.get_mut("rootfs") {
            if absent(rootfs.get("diff_ids")) {
                rootfs.insert("diff_ids".to_string(), serde_json::Value::Array(Vec::new()));
            }
        }
        let has_arch = object
            .get("architecture")
            .and_then(|a| a.as_str())
            .is_some_and(|a| !a.is_empty());
        if absent(object.get("os")) {
            let os = if has_arch { "linux" } else { "" };
            object.insert("os".to_string(), serde_json::Value::from(os));
        }
        if absent(object.get("architecture")) {
            object.insert("architecture".to_string(), serde_json::Value::from(""));
        }
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        wrong_shape(&what, location, &path, e.inner())
    })
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
