//! Diagnostics for input that cannot be read. Every variant says what failed, where, and what
//! to do; all of them end the run with exit code 2.

use miette::{Diagnostic, SourceSpan};
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

    #[error(transparent)]
    #[diagnostic(transparent)]
    Baseline(Box<BaselineError>),

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
    pub(crate) fn user_file(path: impl std::fmt::Display, e: crate::user_file::ReadError) -> Self {
        Error::Io {
            path: path.to_string(),
            help: e.help().to_string(),
            source: e.into_io(),
        }
    }

    pub(crate) fn io(path: impl std::fmt::Display, source: std::io::Error) -> Self {
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
    pub(crate) message: String,
    pub(crate) help: String,
    #[source_code]
    pub(crate) src: SourceWindow,
    #[label("here")]
    pub(crate) span: Option<SourceSpan>,
}

/// Why a baseline file cannot be used.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("{message}")]
#[diagnostic(code(memlint::baseline), help("{help}"))]
pub struct BaselineError {
    pub(crate) message: String,
    pub(crate) help: String,
    #[source_code]
    pub(crate) src: SourceWindow,
    #[label("here")]
    pub(crate) span: Option<SourceSpan>,
}

/// A mistake in the config file, pointing at the key.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("{message}")]
#[diagnostic(code(memlint::config), help("{help}"))]
pub struct ConfigError {
    pub(crate) message: String,
    pub(crate) help: String,
    #[source_code]
    pub(crate) src: SourceWindow,
    #[label("here")]
    pub(crate) span: Option<SourceSpan>,
}

/// The characters shown on each side of a diagnostic's span, and the most of the span itself.
pub(crate) const WINDOW_CHARS: usize = 60;

/// The source a config or manifest diagnostic shows: at most [`WINDOW_CHARS`] characters on
/// each side of the error, on its own line, never the whole file or line.
///
/// Why: a file can be anything a repository links it to (a line of `/proc/self/environ` is the
/// whole environment of the job), and miette renders every line its context reaches, padding
/// each label to its column (a column past 65,535 made it panic). Line and column numbers stay
/// those of the whole file.
#[derive(Debug)]
pub(crate) struct SourceWindow {
    name: String,
    /// The window's text and its offset, 0-based line and 0-based column in the whole file.
    text: String,
    offset: usize,
    line: usize,
    column: usize,
}

impl SourceWindow {
    /// A window of `text` around `span` (byte offsets into `text`), and the span to label in
    /// it: the error's own span, shortened to at most [`WINDOW_CHARS`] characters and to its
    /// line. Without a span, nothing of the file is shown.
    pub(crate) fn around(
        name: impl Into<String>,
        text: &str,
        span: Option<std::ops::Range<usize>>,
    ) -> (Self, Option<SourceSpan>) {
        let name = name.into();
        let Some(range) = span else {
            let empty = SourceWindow {
                name,
                text: String::new(),
                offset: 0,
                line: 0,
                column: 0,
            };
            return (empty, None);
        };
        let start = floor_char_boundary(text, range.start.min(text.len()));
        let end = floor_char_boundary(text, range.end.clamp(start, text.len()));
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[start..].find(['\n', '\r']).map_or(text.len(), |i| start + i);
        // The label: the span on its own line, at most WINDOW_CHARS characters of it.
        let label_end = {
            let on_line = &text[start..end.min(line_end)];
            start
                + on_line
                    .char_indices()
                    .nth(WINDOW_CHARS)
                    .map_or(on_line.len(), |(i, _)| i)
        };
        let before = &text[line_start..start];
        let window_start = before
            .char_indices()
            .rev()
            .nth(WINDOW_CHARS.saturating_sub(1))
            .map_or(line_start, |(i, _)| line_start + i);
        let after = &text[label_end..line_end];
        let window_end = label_end
            + after
                .char_indices()
                .nth(WINDOW_CHARS)
                .map_or(after.len(), |(i, _)| i);
        let line = text[..line_start].matches('\n').count();
        let column = text[line_start..window_start].chars().count();
        let window = SourceWindow {
            name,
            text: text[window_start..window_end].to_string(),
            offset: window_start,
            line,
            column,
        };
        (window, Some(SourceSpan::from(start..label_end)))
    }
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

impl miette::SourceCode for SourceWindow {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> std::result::Result<Box<dyn miette::SpanContents<'a> + 'a>, miette::MietteError> {
        let end = self.offset + self.text.len();
        if span.offset() < self.offset || span.offset() > end {
            return Err(miette::MietteError::OutOfBounds);
        }
        // With context (the snippet): the whole window, which is all of the line there is to
        // show. Without (the header's line:column): from the span's start.
        let from = if context_lines_before == 0 && context_lines_after == 0 {
            floor_char_boundary(&self.text, span.offset() - self.offset)
        } else {
            0
        };
        let data = &self.text[from..];
        let offset = self.offset + from;
        let column = self.column + self.text[..from].chars().count();
        Ok(Box::new(miette::MietteSpanContents::new_named(
            self.name.clone(),
            data.as_bytes(),
            SourceSpan::from((offset, data.len())),
            self.line,
            column,
            1,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(text: &str, span: std::ops::Range<usize>) -> String {
        let (src, span) = SourceWindow::around("memlint.toml", text, Some(span));
        let error = ConfigError {
            message: "memlint.toml: unexpected key".to_string(),
            help: "fix it".to_string(),
            src,
            span,
        };
        let mut out = String::new();
        miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
            .render_report(&mut out, &error)
            .unwrap();
        out
    }

    #[test]
    fn a_diagnostic_shows_a_short_window_of_its_line_with_the_whole_file_s_line_and_column() {
        let secret = "SECRET_TOKEN=hunter2";
        let long_line = format!(
            "{secret}\0{}\0bad = [\0{}\0{secret}",
            "A=1\0".repeat(30_000),
            "B=2\0".repeat(30_000)
        );
        let text = format!("[limits]\nmax_path_len = 1\n{long_line}\nlast = 1\n");
        let at = text.find("bad").unwrap();
        let out = rendered(&text, at..at + 3);
        assert!(out.len() < 1_000, "{out}");
        assert!(!out.contains("hunter2"), "{out}");
        assert!(!out.contains("last = 1"), "{out}");
        let column = long_line.find("bad").unwrap() + 1;
        assert!(out.contains(&format!("[memlint.toml:3:{column}]")), "{out}");
        assert!(out.contains("bad = ["), "{out}");
    }

    #[test]
    fn a_span_past_column_65535_renders_without_panicking() {
        let text = format!("x = \"{}\"\ny = [", "é".repeat(70_000));
        let at = text.len() - 1;
        let out = rendered(&text, at..at + 1);
        assert!(out.contains("[memlint.toml:2:5]"), "{out}");
        let line_one = text.find('\n').unwrap() - 3;
        let out = rendered(&text, line_one..line_one + 200);
        assert!(out.lines().all(|l| l.chars().count() < 200), "{out}");
        assert!(out.contains("[memlint.toml:1:"), "{out}");
    }

    #[test]
    fn without_a_span_nothing_of_the_file_is_shown() {
        let (src, span) = SourceWindow::around("x", "secret", None);
        assert!(span.is_none());
        assert!(miette::SourceCode::read_span(&src, &SourceSpan::from(0..0), 1, 1)
            .map(|c| c.data().is_empty())
            .unwrap_or(true));
    }
}
