//! Diagnostics for input that cannot be read. Every variant says what failed, where, and what
//! to do; all of them end the run with exit code 2.

use miette::{Diagnostic, NamedSource, SourceSpan};
use thiserror::Error;

/// Anything that stops memlint from reading an image or its own input.
#[derive(Debug, Error, Diagnostic)]
pub enum Error {
    #[error("`{input}` is not an image reference: {reason}")]
    #[diagnostic(
        code(memlint::reference),
        help(
            "use one of oci-dir:PATH, oci-archive:PATH, docker-archive:PATH (or docker-archive:- for stdin), \
             dir:PATH, registry:REF, docker:REF, podman:REF, or a path that exists"
        )
    )]
    BadReference { input: String, reason: String },

    #[error("cannot pull {what} from registry {registry} (repository {repository}): {reason}")]
    #[diagnostic(code(memlint::registry), help("{help}"))]
    Registry {
        registry: String,
        repository: String,
        what: String,
        reason: String,
        help: String,
    },

    #[error("cannot read {path}: {source}")]
    #[diagnostic(code(memlint::io), help("{help}"))]
    Io {
        path: String,
        help: String,
        #[source]
        source: std::io::Error,
    },

    #[error("{location} is not a container image: {reason}")]
    #[diagnostic(code(memlint::not_an_image), help("{help}"))]
    NotAnImage {
        location: String,
        reason: String,
        help: String,
    },

    #[error("{what} in {location} is not valid JSON: {source}")]
    #[diagnostic(
        code(memlint::bad_json),
        help("the image was written by a broken tool or edited by hand; export it again")
    )]
    BadJson {
        what: String,
        location: String,
        #[source]
        source: serde_json::Error,
    },

    #[error("{what} {member} is missing from {location}")]
    #[diagnostic(
        code(memlint::missing_blob),
        help(
            "the image is incomplete: copy it again with all its blobs (`skopeo copy --all`, or `docker save` after pulling the platform you need)"
        )
    )]
    MissingBlob {
        what: String,
        member: String,
        location: String,
    },

    #[error("{what} {member} in {location} does not match its digest (expected {expected}, got {actual})")]
    #[diagnostic(
        code(memlint::digest),
        help("the blob was cut short or changed after it was written; export or pull the image again")
    )]
    DigestMismatch {
        what: String,
        member: String,
        location: String,
        expected: String,
        actual: String,
    },

    #[error("cannot read layer {layer} in {location}: {reason}")]
    #[diagnostic(code(memlint::layer), help("{help}"))]
    Layer {
        layer: String,
        location: String,
        reason: String,
        help: String,
    },

    #[error("no image for platform {wanted} in {location}")]
    #[diagnostic(code(memlint::platform), help("pass --platform with one of: {available}"))]
    NoPlatform {
        wanted: String,
        location: String,
        available: String,
    },

    #[error("{location} holds several images and none was chosen")]
    #[diagnostic(code(memlint::ambiguous), help("{help}"))]
    Ambiguous { location: String, help: String },

    /// The name given is not in the index or archive.
    #[error("no image named `{name}` in {location}; it has: {available}")]
    #[diagnostic(
        code(memlint::no_such_name),
        help("name one of the images listed (`oci-dir:PATH:NAME`, `docker-archive:PATH:NAME`), or pick one by position (`:@N`)")
    )]
    NoSuchName {
        name: String,
        location: String,
        available: String,
    },

    /// A position `:@N` past the last image.
    #[error("position @{position} is out of range: {location} holds {count} image{plural}")]
    #[diagnostic(
        code(memlint::position_out_of_range),
        help("positions count the top-level entries from @0; the images are: {available}")
    )]
    PositionOutOfRange {
        position: usize,
        location: String,
        count: usize,
        plural: &'static str,
        available: String,
    },

    /// The name chosen (or everything the layout holds) is an artifact, a signature or an
    /// attestation, not an image that runs.
    #[error("{what} in {location} is an artifact ({kind}), not a runnable image")]
    #[diagnostic(code(memlint::artifact), help("{help}"))]
    Artifact {
        what: String,
        location: String,
        kind: String,
        help: String,
    },

    /// A blob whose size is not what its descriptor says; the OCI image spec says such content
    /// must not be trusted.
    #[error("{what} {member} in {location} is {actual} bytes, but its descriptor says {expected} bytes")]
    #[diagnostic(
        code(memlint::size_mismatch),
        help("the blob or its descriptor was changed after it was written; export or pull the image again")
    )]
    SizeMismatch {
        what: String,
        member: String,
        location: String,
        expected: u64,
        actual: u64,
    },

    /// A reference whose prefix does not fit what the path holds.
    #[error("`{input}` names {what}")]
    #[diagnostic(code(memlint::wrong_prefix), help("{help}"))]
    WrongPrefix {
        input: String,
        what: String,
        help: String,
    },

    #[error("{what} in {location} is larger than the {limit}-byte limit ({size} bytes)")]
    #[diagnostic(
        code(memlint::too_large),
        help("a real image never has metadata this large; check that this is the file you meant")
    )]
    TooLarge {
        what: String,
        location: String,
        size: u64,
        limit: u64,
    },

    /// An image read passed `--timeout`, or one transfer stayed silent for
    /// `idle_timeout_secs`.
    #[error("cannot read {what} from {location}: {reason}")]
    #[diagnostic(code(memlint::timeout), help("{help}"))]
    Timeout {
        what: String,
        location: String,
        reason: String,
        help: String,
    },

    /// A registry asked for credentials to be sent somewhere only plain HTTP reaches.
    #[error("registry {registry} sends its credentials to {realm}, a token service on plain HTTP")]
    #[diagnostic(code(memlint::insecure_realm), help("{help}"))]
    InsecureRealm {
        registry: String,
        realm: String,
        help: String,
    },

    /// One of the reader's limits (`tree::Limits`) was hit; `name` is the limit's name.
    #[error("{what} in {location} passed the {name} limit ({limit})")]
    #[diagnostic(
        code(memlint::limit),
        help(
            "real images stay well below this limit, so the image may be hostile or damaged; if it is genuine, \
             raise the limit, e.g. --limit {name}={suggested} (or MEMLINT_LIMITS={name}={suggested}, or \
             {name} = \"{suggested}\" under [limits] in .memlint.toml)"
        )
    )]
    LimitExceeded {
        /// The limit's name, e.g. `max_layer_bytes`.
        name: String,
        /// The limit's value as shown (`16 MiB`, `40`).
        limit: String,
        /// A larger value to try.
        suggested: String,
        what: String,
        location: String,
    },

    #[error("{origin} is not valid: {reason}")]
    #[diagnostic(
        code(memlint::limits_syntax),
        help(
            "write NAME=VALUE with a limit's name and a size, e.g. --limit max_layer_bytes=128G; \
             MEMLINT_LIMITS takes several separated by commas: MEMLINT_LIMITS=max_layer_bytes=128G,max_path_len=8192"
        )
    )]
    BadLimits {
        /// Where the text came from: `MEMLINT_LIMITS`, `--limit …` or `.memlint.toml [limits]`.
        origin: String,
        reason: String,
    },

    #[error("invalid platform `{input}`: {reason}")]
    #[diagnostic(
        code(memlint::platform_syntax),
        help("write it as os/arch or os/arch/variant, e.g. linux/amd64 or linux/arm64/v8")
    )]
    BadPlatform { input: String, reason: String },

    #[error(transparent)]
    #[diagnostic(transparent)]
    Config(Box<ConfigError>),

    #[error(transparent)]
    #[diagnostic(transparent)]
    Manifest(Box<ManifestError>),

    #[error("{what} is not valid")]
    #[diagnostic(code(memlint::argument), help("{help}"))]
    BadArgument { what: String, help: String },

    #[error("there is no rule `{id}`")]
    #[diagnostic(code(memlint::unknown_rule), help("{help}"))]
    UnknownRule { id: String, help: String },

    #[error("cannot write {path}: {source}")]
    #[diagnostic(code(memlint::output), help("check that the folder exists and is writable"))]
    Output {
        path: String,
        #[source]
        source: std::io::Error,
    },

    /// No Docker or Podman engine answers where one was expected, or `podman` is missing.
    #[error("cannot reach {what}: {reason}")]
    #[diagnostic(code(memlint::engine_unreachable), help("{help}"))]
    EngineUnreachable {
        /// "the Docker Engine at unix:///var/run/docker.sock (the default; DOCKER_HOST is not set)".
        what: String,
        reason: String,
        help: String,
    },

    /// DOCKER_HOST or CONTAINER_HOST names a transport memlint does not speak (TLS, ssh).
    #[error("{variable}={value} is not supported: {reason}")]
    #[diagnostic(code(memlint::engine_host), help("{help}"))]
    EngineHost {
        variable: String,
        value: String,
        reason: String,
        help: String,
    },

    #[error("there is no image `{image}` in {what}")]
    #[diagnostic(code(memlint::engine_no_image), help("{help}"))]
    EngineNoImage {
        image: String,
        what: String,
        help: String,
    },

    /// The engine answered, but not with what was asked for.
    #[error("{what} failed: {reason}")]
    #[diagnostic(code(memlint::engine), help("{help}"))]
    Engine {
        what: String,
        reason: String,
        help: String,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An I/O error on a host path, with a hint that fits the error kind.
    /// A file the user named that was not read: not a regular file, too large, or unreadable.
    pub fn user_file(path: impl std::fmt::Display, e: crate::user_file::ReadError) -> Self {
        Error::Io {
            path: path.to_string(),
            help: e.help().to_string(),
            source: e.into_io(),
        }
    }

    pub fn io(path: impl std::fmt::Display, source: std::io::Error) -> Self {
        let help = match source.kind() {
            std::io::ErrorKind::NotFound => "check the path; relative paths start at the current folder",
            std::io::ErrorKind::PermissionDenied => "run memlint as a user that can read this file",
            std::io::ErrorKind::UnexpectedEof => {
                "the file ends too early: it was cut short while being written or copied; write it again"
            }
            _ => "check that the file is complete and readable",
        };
        Error::Io {
            path: path.to_string(),
            help: help.to_string(),
            source,
        }
    }
}

/// A Kubernetes manifest that cannot be read (`lint --k8s`), pointing at the line.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("{message}")]
#[diagnostic(code(memlint::manifest), help("{help}"))]
pub struct ManifestError {
    pub message: String,
    pub help: String,
    #[source_code]
    pub src: NamedSource<String>,
    #[label("here")]
    pub span: Option<SourceSpan>,
}

/// A mistake in the config file, pointing at the key.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("{message}")]
#[diagnostic(code(memlint::config), help("{help}"))]
pub struct ConfigError {
    pub message: String,
    pub help: String,
    #[source_code]
    pub src: NamedSource<String>,
    #[label("here")]
    pub span: Option<SourceSpan>,
}
