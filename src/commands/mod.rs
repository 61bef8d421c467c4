//! One file per subcommand.

mod baseline;
mod completions;
mod explain;
mod fleet;
mod hook;
pub(crate) mod inspect;
pub(crate) mod lint;
mod man;
mod merge;
mod output;
mod rules;
pub(crate) mod schema;

use crate::cache::{LayerCache, DEFAULT_MAX_BYTES};
use crate::cli::{Cli, Command};
use crate::error::{Error, Result};
use crate::sources::{EngineOptions, ProgressMode};
use crate::tree::limits::{parse_size, Limits};
use crate::untrusted::{line, Allow, SafeWriter};
use crate::warnings::Warnings;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Lint(args) => lint::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Rules(args) => rules::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Hook(cmd) => hook::run(cmd),
        Command::Completions(args) => completions::run(args),
        Command::Man(args) => man::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Schema(args) => schema::run(args),
    }
}

/// Writes a report to a file, or to standard output; a closed pipe is not an error.
pub(crate) fn emit(output: Option<&Path>, text: &str) -> Result<()> {
    emit_with(output, Allow::default(), |w| w.write_all(text.as_bytes()))
}

/// Streams a report to a file (through a temporary file renamed over it: see [`output`]), or
/// to standard output, through a buffer and the last check of [`SafeWriter`]; a closed pipe is
/// not an error. `allow`: memlint's own colour or workflow commands, when this report has them.
pub(crate) fn emit_with(
    output: Option<&Path>,
    allow: Allow,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    match output {
        Some(path) => output::write_file(path, allow, write),
        None => {
            let mut w = SafeWriter::new(std::io::BufWriter::new(std::io::stdout().lock()), allow);
            match write(&mut w).and_then(|_| w.finish()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::Output {
                    path: "standard output".to_string(),
                    source: e,
                }),
                _ => Ok(()),
            }
        }
    }
}

/// Writes a lint report in `format` to `output` (or standard output, in colour when `color`),
/// and in each `-o FORMAT=FILE` to its file; `render` writes one format.
pub(crate) fn emit_formats(
    output: Option<&Path>,
    format: crate::cli::LintFormat,
    outputs: &[(crate::cli::LintFormat, PathBuf)],
    color: bool,
    render: impl Fn(crate::cli::LintFormat, bool, &mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    use crate::cli::LintFormat;
    // memlint's own colour on text, its own workflow commands in GitHub's format.
    let allow = |format: LintFormat, color: bool| Allow {
        sgr: color && format == LintFormat::Text,
        commands: format == LintFormat::Github,
    };
    emit_with(output, allow(format, color), |w| render(format, color, w))?;
    for (format, path) in outputs {
        emit_with(Some(path), allow(*format, false), |w| render(*format, false, w))?;
    }
    Ok(())
}

/// What shapes a document of many reports (`lint --k8s`, `merge`) besides its format.
pub(crate) struct DocumentOptions {
    pub(crate) fail_on: crate::finding::FailOn,
    pub(crate) text: crate::report::text::TextOptions,
    /// SARIF's `automationDetails.id`.
    pub(crate) automation_id: String,
    /// More than one report: each Code Quality issue names its image.
    pub(crate) several: bool,
}

/// The renderer of a document of many reports in `format` (text in colour when `color`).
pub(crate) fn document_format(
    format: crate::cli::LintFormat,
    color: bool,
    o: &DocumentOptions,
) -> Box<dyn crate::report::document::Format> {
    use crate::cli::LintFormat;
    use crate::report::document as d;
    match format {
        LintFormat::Text => Box::new(d::Text {
            options: crate::report::text::TextOptions { color, ..o.text },
        }),
        LintFormat::Json => Box::new(d::Json { fail_on: o.fail_on }),
        LintFormat::Sarif => Box::new(d::Sarif {
            automation_id: o.automation_id.clone(),
        }),
        LintFormat::Github => Box::new(d::Github),
        LintFormat::Gitlab => Box::new(d::Gitlab { several: o.several }),
        LintFormat::Junit => Box::new(d::Junit { fail_on: o.fail_on }),
        LintFormat::Html => Box::new(d::Html { fail_on: o.fail_on }),
    }
}

/// Refuses, before any work, report paths that are not regular files (FIFOs, devices,
/// folders): `--output` and each `-o FORMAT=PATH`.
pub(crate) fn check_outputs(
    output: Option<&Path>,
    outputs: &[(crate::cli::LintFormat, PathBuf)],
) -> Result<()> {
    if let Some(p) = output {
        output::check_destination(&format!("--output {}", p.display()), p)?;
    }
    for (format, p) in outputs {
        output::check_destination(&format!("-o {}={}", format_name(*format), p.display()), p)?;
    }
    Ok(())
}

/// A format as `--format` spells it.
fn format_name(format: crate::cli::LintFormat) -> String {
    clap::ValueEnum::to_possible_value(&format)
        .map(|v| v.get_name().to_string())
        .unwrap_or_default()
}

/// The exit code of a run that read every image: 1 when its worst finding reaches `fail_on`.
pub(crate) fn exit_for(fail_on: crate::cli::FailOn, worst: Option<crate::finding::Severity>) -> ExitCode {
    match (fail_on.threshold(), worst) {
        (Some(t), Some(w)) if w >= t => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    }
}

/// Writes text that is memlint's own from end to end (a completion script, a man page: made
/// from its flags and help, with no word from an image or a registry) to standard output as
/// it is. Not through [`SafeWriter`]: those formats have their own tabs and lines that start
/// with `::` or `#`, which escaping would break. A closed pipe is not an error.
pub(crate) fn emit_own(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::Output {
            path: "standard output".to_string(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// A line of memlint's own on standard error, its external parts already made safe: checked
/// once more by [`SafeWriter`].
pub(crate) fn eprint_line(text: &str) {
    let mut w = SafeWriter::new(std::io::stderr().lock(), Allow::default());
    let _ = writeln!(w, "{text}");
}

/// A diagnostic on standard error, its words made safe (`untrusted::diagnostic`).
pub fn eprint_diagnostic(diag: &dyn miette::Diagnostic) {
    use std::io::IsTerminal;
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    eprint!("{}", crate::untrusted::diagnostic(diag, color));
}

/// Warnings of the deep modules, printed on standard error as they come.
pub(crate) fn stderr_warnings() -> Warnings {
    Warnings::to(|message| eprint_line(&format!("memlint: warning: {}", line(message))))
}

/// The environment variable that bounds the layer cache folder, e.g. `MEMLINT_CACHE_MAX_BYTES=512M`.
pub(crate) const CACHE_MAX_BYTES_ENV: &str = "MEMLINT_CACHE_MAX_BYTES";

/// The bound of the layer cache folder: `MEMLINT_CACHE_MAX_BYTES` when it is set and a size,
/// else the default (with a warning when it is set but not a size).
fn cache_max_bytes(warnings: &Warnings) -> u64 {
    match std::env::var(CACHE_MAX_BYTES_ENV) {
        Ok(v) if !v.trim().is_empty() => parse_size(&v).unwrap_or_else(|| {
            warnings.warn(&format!(
                "{CACHE_MAX_BYTES_ENV}={v} is not a size (e.g. 512M, 4G); the layer cache keeps its default bound of 2 GiB"
            ));
            DEFAULT_MAX_BYTES
        }),
        _ => DEFAULT_MAX_BYTES,
    }
}

/// The environment variable that overrides the reader's limits: `name=value` pairs separated
/// by commas, e.g. `MEMLINT_LIMITS=max_layer_bytes=128G,max_path_len=8192`.
pub(crate) const LIMITS_ENV: &str = "MEMLINT_LIMITS";

/// The reader's limits from their three sources, weakest first: the config file's `[limits]`
/// table, `MEMLINT_LIMITS`, then each `--limit` of the command line.
fn layered_limits(config: &[(String, String)], flags: &[String]) -> Result<Limits> {
    let mut limits = Limits::default();
    for (name, value) in config {
        limits.set(name, value).map_err(|reason| Error::BadLimits {
            origin: format!("{} [limits]", crate::settings::FILE_NAME),
            reason,
        })?;
    }
    if let Some(spec) = env_text(LIMITS_ENV) {
        limits.apply(&spec).map_err(|reason| Error::BadLimits {
            origin: LIMITS_ENV.to_string(),
            reason,
        })?;
    }
    for flag in flags {
        let bad = |reason| Error::BadLimits {
            origin: format!("--limit {flag}"),
            reason,
        };
        // One NAME=VALUE per flag: a comma here is a typo, not a second limit.
        let (name, value) = flag
            .split_once('=')
            .ok_or_else(|| bad(format!("`{flag}` is not of the form NAME=VALUE")))?;
        limits.set(name.trim(), value.trim()).map_err(bad)?;
    }
    Ok(limits)
}

/// The value of an environment variable, when it is set and not blank.
fn env_text(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Where the environment says the engines listen.
fn engine_options() -> EngineOptions {
    EngineOptions {
        docker_host: env_text("DOCKER_HOST"),
        docker_tls_verify: env_text("DOCKER_TLS_VERIFY"),
        docker_context: env_text("DOCKER_CONTEXT"),
        container_host: env_text("CONTAINER_HOST"),
        xdg_runtime_dir: env_text("XDG_RUNTIME_DIR").map(PathBuf::from),
    }
}

/// The Docker CLI's config folder: `$DOCKER_CONFIG`, else `~/.docker`.
fn docker_config_dir() -> Option<PathBuf> {
    match std::env::var_os("DOCKER_CONFIG").filter(|v| !v.is_empty()) {
        Some(d) => Some(PathBuf::from(d)),
        None => Some(PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".docker")),
    }
}

/// The config file: the one given (`--config`), else `.memlint.toml` in the current folder or
/// the nearest one above it; for a file found, the folder its links must stay inside (see
/// [`crate::user_file::read_inside`]).
pub(crate) fn config_path(given: Option<&Path>) -> Option<(PathBuf, Option<PathBuf>)> {
    match given {
        Some(p) => Some((p.to_path_buf(), None)),
        None => {
            let found = std::env::current_dir()
                .ok()
                .and_then(|d| crate::settings::Settings::find(&d))?;
            let folder = found.parent().map(crate::user_file::repository_of);
            Some((found, folder))
        }
    }
}

/// The most `--password-stdin` reads: registry passwords and tokens (JWTs included) are a few
/// KiB at most.
pub(crate) const PASSWORD_MAX_BYTES: u64 = 64 << 10;

/// The reader options that `--jobs`, `--platform` and the source flags give.
///
/// `config_limits` is the `[limits]` table of `.memlint.toml`.
pub(crate) fn source_options(
    source: &crate::cli::SourceArgs,
    config_limits: &[(String, String)],
    jobs: Option<usize>,
    quiet: bool,
    stdin_taken_by: Option<&str>,
) -> Result<crate::sources::Options> {
    use crate::sources::{registry::RegistryOptions, Options};
    use std::io::IsTerminal;
    let mut options = Options {
        interests: crate::facts::interests(),
        config_interests: Some(crate::sources::ConfigInterests(std::sync::Arc::new(
            crate::facts::interests_for,
        ))),
        ..Options::default()
    };
    if let Some(j) = jobs {
        options.workers = j.max(1);
    }
    options.warnings = stderr_warnings();
    options.engine = engine_options();
    options.docker_config = docker_config_dir();
    options.cache = if source.no_cache {
        None
    } else {
        source
            .cache_dir
            .clone()
            .or_else(|| {
                LayerCache::default_dir(
                    std::env::var_os("XDG_CACHE_HOME").as_deref(),
                    std::env::var_os("HOME").as_deref(),
                )
            })
            .map(|dir| {
                let max_bytes = cache_max_bytes(&options.warnings);
                std::sync::Arc::new(LayerCache::new(&dir, max_bytes, options.warnings.clone()))
            })
    };
    if let Some(t) = source.timeout {
        options.timeout = t.0;
    }
    let password = if source.no_explicit_credentials {
        None
    } else if source.password_stdin {
        if let Some(reader) = stdin_taken_by {
            return Err(Error::BadArgument {
                what: format!("--password-stdin with {reader}"),
                help: format!(
                    "standard input already carries {reader}; give the password in MEMLINT_PASSWORD instead"
                ),
            });
        }
        // Bounded: a password or token is small, and standard input may be endless.
        let bytes = crate::user_file::read_stream(std::io::stdin().lock(), PASSWORD_MAX_BYTES).map_err(|e| match e {
            crate::user_file::ReadError::TooLarge { .. } => Error::BadArgument {
                what: format!("--password-stdin (standard input holds more than {} KiB)", PASSWORD_MAX_BYTES >> 10),
                help: "pipe in the password or token alone, e.g. `printf %s \"$TOKEN\" | memlint … --password-stdin`".to_string(),
            },
            e => Error::user_file("standard input", e),
        })?;
        let text = String::from_utf8(bytes).map_err(|_| Error::BadArgument {
            what: "--password-stdin (standard input is not UTF-8 text)".to_string(),
            help: "pipe in the password or token alone".to_string(),
        })?;
        Some(text.trim_end_matches(['\r', '\n']).to_string())
    } else {
        std::env::var("MEMLINT_PASSWORD").ok().filter(|p| !p.is_empty())
    };
    let username = source
        .username
        .clone()
        .filter(|u| !u.is_empty() && !source.no_explicit_credentials);
    if password.is_some() != username.is_some() {
        return Err(Error::BadArgument {
            what: if username.is_some() {
                "--username (MEMLINT_USERNAME) without a password".to_string()
            } else {
                "a registry password without a user name".to_string()
            },
            help: "give both: --username (or MEMLINT_USERNAME) and MEMLINT_PASSWORD (or --password-stdin)"
                .to_string(),
        });
    }
    options.registry = RegistryOptions {
        insecure: source.insecure_registry.clone(),
        ca_files: source.registry_ca.clone(),
        username,
        password,
        ..Default::default()
    };
    options.progress = match (quiet, std::io::stderr().is_terminal(), source.progress) {
        (true, _, _) => ProgressMode::Off,
        (false, true, _) => ProgressMode::Bars,
        (false, false, true) => ProgressMode::Lines,
        (false, false, false) => ProgressMode::Off,
    };
    options.limits = layered_limits(config_limits, &source.limits)?;
    Ok(options)
}

/// Explicit registry credentials go only to registries the command line names: each
/// `--credentials-registry HOST`, else the one registry the IMAGE references (and, with
/// `--k8s`, the `--image` SOURCEs that are registry references) name. Without a flag, when
/// they name several, which one the user meant cannot be known, so nothing is sent; with
/// `--k8s` (`stand_ins` is `Some`) and no registry named, the run is refused: the manifests'
/// own registries are the repository's (a pull request's) choice, not the user's.
pub(crate) fn bind_credentials(
    options: &mut crate::sources::Options,
    source: &crate::cli::SourceArgs,
    references: &[String],
    stand_ins: Option<&[(String, String)]>,
) -> Result<()> {
    use crate::sources::registry::registry_host;
    let mut flagged: Vec<String> = Vec::new();
    for host in &source.credentials_registry {
        let h = registry_host(host);
        if h.is_empty() || h.contains('/') || h.contains(|c: char| c.is_whitespace() || c.is_control()) {
            return Err(Error::BadArgument {
                what: format!("--credentials-registry {}", line(host)),
                help: "give a registry host, with its port when it has one: e.g. ghcr.io, registry.example.com:5000 or docker.io".to_string(),
            });
        }
        flagged.push(h);
    }
    if options.registry.username.is_none() {
        return Ok(());
    }
    let registry_of = |r: &String| match crate::reference::Reference::parse(r) {
        Ok(crate::reference::Reference::Registry(name)) => crate::sources::registry::parse_reference(&name)
            .ok()
            .map(|r| registry_host(r.registry())),
        _ => None,
    };
    let mut registries: Vec<String> = references
        .iter()
        .chain(stand_ins.unwrap_or_default().iter().map(|(_, s)| s))
        .filter_map(registry_of)
        .collect();
    registries.sort();
    registries.dedup();
    if !flagged.is_empty() {
        registries.extend(flagged);
        registries.sort();
        registries.dedup();
        options.registry.explicit_registries = registries;
        return Ok(());
    }
    match registries.as_slice() {
        [] if stand_ins.is_some() => Err(Error::BadArgument {
            what: "explicit registry credentials (--username/MEMLINT_USERNAME with MEMLINT_PASSWORD or --password-stdin) with --k8s, and no registry named for them".to_string(),
            help: "the manifests do not choose where credentials go: name the registry they are for with --credentials-registry HOST (repeatable), an IMAGE argument or an --image REF=SOURCE whose SOURCE is in that registry; or log in with `docker login` (memlint reads ~/.docker/config.json and its credential helpers, per registry)".to_string(),
        }),
        [] => Ok(()),
        [_] => {
            options.registry.explicit_registries = registries;
            Ok(())
        }
        many => Err(Error::BadArgument {
            what: format!(
                "--username/MEMLINT_USERNAME with references to {} registries ({})",
                many.len(),
                many.join(", ")
            ),
            help: "explicit credentials go to the registries you name: give each with --credentials-registry HOST, lint each registry in its own run, or log in with `docker login` (memlint reads ~/.docker/config.json); a path that does not exist is read as a Docker Hub reference".to_string(),
        }),
    }
}

/// The path relative to the git work tree (or the current folder), `/`-separated.
pub(crate) fn repo_relative(path: &Path) -> String {
    repo_relative_or(path, "Dockerfile")
}

/// [`repo_relative`], or `fallback` when the path cannot be a SARIF artifact.
pub(crate) fn repo_relative_or(path: &Path, fallback: &str) -> String {
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let root = abs
        .ancestors()
        .skip(1)
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
        .or_else(|| std::env::current_dir().ok());
    let rel = root
        .as_deref()
        .and_then(|r| abs.strip_prefix(r).ok())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| path.to_path_buf());
    let s = rel.to_string_lossy().replace('\\', "/");
    if crate::report::sarif::valid_artifact_uri(&s) {
        s
    } else {
        fallback.to_string()
    }
}
