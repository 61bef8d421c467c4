//! Local image stores: `docker:REF` through the Docker Engine API, `podman:REF` through
//! Podman's Docker-compatible API or, when no Podman service runs, `podman image save`. Either
//! way the export is one `docker save` stream, read in one pass like `docker-archive:-`; the
//! engine resolves the name (Podman turns `app:1` into `localhost/app:1` or
//! `docker.io/library/app:1`), memlint passes it through.

mod cached;
mod client;

use super::{load, stream, Format, Image, Options};
use crate::error::{Error, Result};
use client::{Body, Endpoint, RequestError, Response, Timeouts};
use serde::Deserialize;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Where the Docker CLI looks when DOCKER_HOST is not set.
const DEFAULT_DOCKER_SOCKET: &str = "/var/run/docker.sock";
/// Where rootful Podman's API socket lives (`podman.socket`).
const ROOTFUL_PODMAN_SOCKET: &str = "/run/podman/podman.sock";
/// Error bodies are short JSON documents; anything longer is cut.
const MAX_ERROR_BODY: u64 = 64 * 1024;
/// podman's stderr kept for the error message.
const MAX_STDERR: usize = 16 * 1024;

const API_TIMEOUTS: Timeouts = Timeouts {
    overall: None,
    connect: Duration::from_secs(10),
    head: Duration::from_secs(120),
    idle: Duration::from_secs(120),
};

/// Podman's compat export writes the whole archive to a temporary file before it answers, so
/// the head of a large image's export can take minutes.
const EXPORT_TIMEOUTS: Timeouts = Timeouts {
    overall: None,
    connect: Duration::from_secs(10),
    head: Duration::from_secs(30 * 60),
    idle: Duration::from_secs(5 * 60),
};

/// Which engine, for messages and `Image.source`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Docker,
    Podman,
}

impl Kind {
    fn source(self) -> crate::image::ImageSource {
        match self {
            Kind::Docker => crate::image::ImageSource::Docker,
            Kind::Podman => crate::image::ImageSource::Podman,
        }
    }
    fn product(self) -> &'static str {
        match self {
            Kind::Docker => "Docker Engine",
            Kind::Podman => "Podman API",
        }
    }
    fn cli(self) -> &'static str {
        self.source().as_str()
    }
}

/// An engine API endpoint and where its address came from.
struct Engine {
    kind: Kind,
    endpoint: Endpoint,
    /// "from DOCKER_HOST", "the default; DOCKER_HOST is not set", "from CONTAINER_HOST", …
    origin: String,
    /// The `--timeout` deadline of the image read under way, and the timeout it came from.
    overall: Option<(std::time::Instant, Duration)>,
}

impl Engine {
    /// "Docker Engine at unix:///var/run/docker.sock": the image's location.
    fn label(&self) -> String {
        format!("{} at {}", self.kind.product(), self.endpoint)
    }

    /// The label with where the address came from, for errors about reaching it.
    fn described(&self) -> String {
        format!("the {} ({})", self.label(), self.origin)
    }

    fn get(&self, path: &str, timeouts: Timeouts) -> Result<Response, RequestError> {
        let timeouts = Timeouts {
            overall: self.overall,
            ..timeouts
        };
        client::get(&self.endpoint, path, timeouts)
    }

    fn unreachable(&self, e: &io::Error) -> Error {
        let socket = match &self.endpoint {
            Endpoint::Unix(p) => Some(p.as_path()),
            Endpoint::Tcp { .. } => None,
        };
        let reason = match (e.kind(), socket) {
            (io::ErrorKind::NotFound, Some(p)) => format!("the socket {} does not exist", p.display()),
            (io::ErrorKind::ConnectionRefused, Some(p)) => {
                format!("nothing listens on {} (a stale socket file)", p.display())
            }
            (io::ErrorKind::PermissionDenied, Some(p)) => {
                format!("permission denied on {}", p.display())
            }
            _ => e.to_string(),
        };
        let help = match (self.kind, e.kind()) {
            (Kind::Docker, io::ErrorKind::PermissionDenied) => format!(
                "run memlint as a user that may use {} (e.g. one in the `docker` group), or export the image yourself: \
                 `docker save IMAGE | memlint lint docker-archive:-`",
                self.endpoint
            ),
            (Kind::Docker, _) => "start the Docker daemon, or point DOCKER_HOST at one that runs \
                 (Podman: `podman system service` and DOCKER_HOST=unix://$XDG_RUNTIME_DIR/podman/podman.sock); \
                 or export the image yourself: `docker save IMAGE | memlint lint docker-archive:-`"
                .to_string(),
            (Kind::Podman, _) => format!(
                "start the service (`podman system service --time=0 {}`), or unset CONTAINER_HOST to read local storage \
                 with `podman image save`",
                self.endpoint
            ),
        };
        Error::EngineUnreachable {
            what: self.described(),
            reason,
            help,
        }
    }

    /// A request that connected but went wrong; `waited` is the read timeout that applied.
    fn exchange_failed(&self, what: &str, e: &io::Error, waited: Duration) -> Error {
        if let Some(hit) = crate::sources::deadline::TimeoutHit::in_io(e) {
            return crate::sources::timeout_error(hit, what, self.label());
        }
        let tls_hint = matches!(self.endpoint, Endpoint::Tcp { .. })
            && (e.to_string().contains("not HTTP") || e.to_string().contains("status line"));
        Error::Engine {
            what: format!("{what} from the {}", self.label()),
            reason: describe_io(e, waited),
            help: if tls_hint {
                "the port answers with something other than plain HTTP (a TLS port?); memlint speaks plain HTTP only: \
                 use a unix socket, or `docker save IMAGE | memlint lint docker-archive:-`"
                    .to_string()
            } else {
                format!(
                    "check that the {} runs and is healthy (`{} info`), then try again",
                    self.kind.product(),
                    self.kind.cli()
                )
            },
        }
    }

    /// `GET path`; a non-2xx answer becomes an error carrying the daemon's `message`, except
    /// 404, which is `Ok(None)`.
    fn request(&self, path: &str, what: &str, timeouts: Timeouts) -> Result<Option<Body>> {
        let response = match self.get(path, timeouts) {
            Ok(r) => r,
            Err(RequestError::Connect(e)) => return Err(self.unreachable(&e)),
            Err(RequestError::Exchange(e)) => return Err(self.exchange_failed(what, &e, timeouts.head)),
        };
        let Response {
            status,
            reason,
            mut body,
        } = response;
        if (200..300).contains(&status) {
            return Ok(Some(body));
        }
        if status == 404 {
            return Ok(None);
        }
        let message = error_message(&mut body);
        Err(Error::Engine {
            what: format!("{what} from the {}", self.label()),
            reason: format!("it answered {status} {reason}: {message}"),
            help: format!(
                "the {} refused the request; check `{} info` and its logs",
                self.kind.product(),
                self.kind.cli()
            ),
        })
    }

    fn no_image(&self, name: &str) -> Error {
        let help = match self.kind {
            Kind::Docker => "docker pull / docker build it first, or check the name with `docker images`",
            Kind::Podman => "podman pull / podman build it first, or check the name with `podman images`",
        };
        Error::EngineNoImage {
            image: name.to_string(),
            what: format!("the {}", self.label()),
            help: help.to_string(),
        }
    }

    fn inspect(&self, name: &str, max_json: u64) -> Result<Inspect> {
        let path = format!("/images/{}/json", client::encode_path_segment(name));
        let what = format!("inspecting image `{name}`");
        let mut body = self
            .request(&path, &what, API_TIMEOUTS)?
            .ok_or_else(|| self.no_image(name))?;
        let bytes = body
            .read_bounded(max_json)
            .map_err(|e| self.exchange_failed(&what, &e, API_TIMEOUTS.idle))?;
        super::parse_json(&bytes, &format!("the inspect answer for `{name}`"), &self.label())
    }

    /// The image's history, or `None` when the engine will not say; it only labels layers.
    fn history(&self, name: &str, max_json: u64) -> Option<Vec<HistoryItem>> {
        let path = format!("/images/{}/history", client::encode_path_segment(name));
        let mut body = self.request(&path, "reading the history", API_TIMEOUTS).ok()??;
        let bytes = body.read_bounded(max_json).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    fn export(&self, name: &str) -> Result<Body> {
        let path = format!("/images/{}/get", client::encode_path_segment(name));
        // A 404 here means the image went away after it was inspected.
        self.request(&path, &format!("exporting image `{name}`"), EXPORT_TIMEOUTS)?
            .ok_or_else(|| self.no_image(name))
    }
}

/// The daemon's `{"message": "..."}`, else the start of the body as text.
fn error_message(body: &mut impl Read) -> String {
    let mut bytes = Vec::new();
    if body.take(MAX_ERROR_BODY).read_to_end(&mut bytes).is_err() && bytes.is_empty() {
        return "(no message)".to_string();
    }
    #[derive(Deserialize)]
    struct Message {
        message: String,
    }
    match serde_json::from_slice::<Message>(&bytes) {
        Ok(m) => m.message,
        Err(_) => {
            let text = String::from_utf8_lossy(&bytes);
            let text = text.trim();
            if text.is_empty() {
                "(no message)".to_string()
            } else {
                text.chars().take(500).collect()
            }
        }
    }
}

/// The parts of `GET /images/{name}/json` memlint uses; Docker and Podman both answer it.
/// Loosely typed where engines differ (Docker's `Created` was once a number), since only an
/// answer that fits is used in place of an export.
#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "PascalCase", default)]
struct Inspect {
    id: String,
    repo_tags: Option<Vec<String>>,
    created: Option<serde_json::Value>,
    author: Option<String>,
    os: Option<String>,
    architecture: Option<String>,
    variant: Option<String>,
    os_version: Option<String>,
    config: Option<serde_json::Value>,
    #[serde(rename = "RootFS")]
    root_fs: Option<RootFs>,
    /// Docker 25+ with the containerd image store: what `Id` is the digest of.
    descriptor: Option<Descriptor>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "PascalCase", default)]
struct RootFs {
    layers: Option<Vec<String>>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(default)]
struct Descriptor {
    #[serde(rename = "mediaType")]
    media_type: String,
    digest: String,
}

/// One line of `GET /images/{name}/history` (newest first).
#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "PascalCase", default)]
struct HistoryItem {
    created_by: String,
    size: i64,
    comment: String,
}

/// Names go into a request path or onto podman's command line: refuse what could change
/// their meaning there (`..` segments reach other endpoints, a leading `-` is an option).
fn check_name(name: &str, scheme: &str) -> Result<()> {
    let bad = |reason: &str| Error::BadReference {
        input: format!("{scheme}:{name}"),
        reason: reason.to_string(),
    };
    if name.starts_with('-') {
        return Err(bad("an image name cannot start with `-`"));
    }
    if name.starts_with('/') {
        return Err(bad("an image name cannot start with `/`"));
    }
    if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("an image name cannot contain spaces or control characters"));
    }
    if name.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return Err(bad(
            "an image name cannot have empty, `.` or `..` path components",
        ));
    }
    Ok(())
}

/// What the environment says about where the engines listen; `commands/` reads it. A variable
/// that is unset or blank is `None`.
#[derive(Clone, Debug, Default)]
pub(crate) struct EngineOptions {
    /// `DOCKER_HOST`.
    pub(crate) docker_host: Option<String>,
    /// `DOCKER_TLS_VERIFY`: set, it asks for TLS, which memlint refuses up front.
    pub(crate) docker_tls_verify: Option<String>,
    /// `DOCKER_CONTEXT`.
    pub(crate) docker_context: Option<String>,
    /// `CONTAINER_HOST`.
    pub(crate) container_host: Option<String>,
    /// `XDG_RUNTIME_DIR`, where rootless Podman puts its API socket.
    pub(crate) xdg_runtime_dir: Option<PathBuf>,
}

/// Parses a DOCKER_HOST / CONTAINER_HOST value into an endpoint memlint can talk to.
fn parse_host(variable: &str, value: &str, kind: Kind) -> Result<Endpoint> {
    let value = value.trim();
    let unsupported = |reason: &str| {
        let help = match kind {
            Kind::Docker => "use a unix socket (DOCKER_HOST=unix:///var/run/docker.sock) or a plain tcp:// address, \
                 or export the image yourself: `docker save IMAGE | memlint lint docker-archive:-`",
            Kind::Podman => "use a unix socket (CONTAINER_HOST=unix:///run/podman/podman.sock), or unset \
                 CONTAINER_HOST to read local storage with `podman image save`, or export the image yourself: \
                 `podman save IMAGE | memlint lint docker-archive:-`",
        };
        Error::EngineHost {
            variable: variable.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
            help: help.to_string(),
        }
    };
    let (scheme, rest) = value
        .split_once("://")
        .ok_or_else(|| unsupported("it is not an address of the form unix:///PATH or tcp://HOST:PORT"))?;
    match scheme {
        "unix" => {
            if rest.is_empty() || !rest.starts_with('/') {
                return Err(unsupported("a unix:// address needs an absolute socket path"));
            }
            Ok(Endpoint::Unix(PathBuf::from(rest)))
        }
        "tcp" | "http" => {
            let hostport = rest.trim_end_matches('/');
            if hostport.contains('/') || hostport.is_empty() {
                return Err(unsupported("a tcp:// address is HOST[:PORT] without a path"));
            }
            let (host, port) =
                split_host_port(hostport).ok_or_else(|| unsupported("the port is not a number"))?;
            Ok(Endpoint::Tcp {
                host,
                port: port.unwrap_or(2375),
            })
        }
        "https" => Err(unsupported("memlint does not speak TLS to the engine")),
        "ssh" => Err(unsupported("memlint does not tunnel through ssh")),
        "npipe" => Err(unsupported("Windows named pipes are not supported")),
        _ => Err(unsupported(&format!(
            "the scheme `{scheme}://` is not one memlint knows"
        ))),
    }
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`.
fn split_host_port(s: &str) -> Option<(String, Option<u16>)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse().ok()?),
            None if after.is_empty() => None,
            None => return None,
        };
        return Some((host.to_string(), port));
    }
    match s.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => Some((host.to_string(), Some(port.parse().ok()?))),
        Some(_) => Some((s.to_string(), None)),
        None => Some((s.to_string(), None)),
    }
}

/// The Docker Engine as the Docker CLI finds it: DOCKER_HOST, else the default socket.
fn docker_engine(options: &Options) -> Result<Engine> {
    let environment = &options.engine;
    if let Some(verify) = environment.docker_tls_verify.clone() {
        return Err(Error::EngineHost {
            variable: "DOCKER_TLS_VERIFY".to_string(),
            value: verify,
            reason: "memlint does not speak TLS to the engine".to_string(),
            help: "use a unix socket (unset DOCKER_TLS_VERIFY and set DOCKER_HOST=unix:///var/run/docker.sock), \
                   or export the image yourself: `docker save IMAGE | memlint lint docker-archive:-`"
                .to_string(),
        });
    }
    if let Some(host) = &environment.docker_host {
        return Ok(Engine {
            kind: Kind::Docker,
            endpoint: parse_host("DOCKER_HOST", host, Kind::Docker)?,
            origin: "from DOCKER_HOST".to_string(),
            overall: None,
        });
    }
    let config_dir = options.docker_config.as_deref();
    if let Some((name, variable)) = docker_context(config_dir, environment.docker_context.as_deref()) {
        return context_engine(config_dir, &name, variable);
    }
    Ok(Engine {
        kind: Kind::Docker,
        endpoint: Endpoint::Unix(PathBuf::from(DEFAULT_DOCKER_SOCKET)),
        origin: "the default; DOCKER_HOST is not set".to_string(),
        overall: None,
    })
}

/// The largest Docker CLI file (config.json, a context's meta.json) read.
const MAX_DOCKER_FILE: u64 = 4 << 20;

/// A small JSON file of the Docker CLI: `Ok(None)` when it is not there; only a regular file
/// of at most 4 MiB is read (a FIFO or a device there must not hang or fill memory).
fn read_docker_file(path: &Path) -> std::result::Result<Option<serde_json::Value>, String> {
    let meta = match std::fs::metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
        Ok(m) => m,
    };
    if !meta.is_file() {
        return Err("it is not a regular file".to_string());
    }
    if meta.len() > MAX_DOCKER_FILE {
        return Err("it is over 4 MiB".to_string());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_DOCKER_FILE + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_DOCKER_FILE {
        return Err("it is over 4 MiB".to_string());
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| format!("it is not valid JSON: {e}"))
}

/// The Docker context selected other than `default`, and what selected it: DOCKER_CONTEXT,
/// else `currentContext` in config.json (a config that cannot be read selects none, as for
/// credentials).
fn docker_context(config_dir: Option<&Path>, docker_context: Option<&str>) -> Option<(String, &'static str)> {
    let (name, variable) = match docker_context {
        Some(name) => (name.trim().to_string(), "DOCKER_CONTEXT"),
        None => {
            let config = read_docker_file(&config_dir?.join("config.json")).ok()??;
            let name = config.get("currentContext")?.as_str()?.trim().to_string();
            (name, "currentContext")
        }
    };
    (!name.is_empty() && name != "default").then_some((name, variable))
}

/// The engine a Docker context names: its `docker` endpoint, when it is a unix socket or a
/// plain tcp:// address.
fn context_engine(config_dir: Option<&Path>, name: &str, variable: &str) -> Result<Engine> {
    let refuse = |reason: String| {
        Error::EngineHost {
        variable: variable.to_string(),
        value: name.to_string(),
        reason,
        help: format!(
            "set DOCKER_HOST to the engine of the Docker context `{name}` (e.g. DOCKER_HOST=unix:///var/run/docker.sock), \
             or export the image yourself: `docker save IMAGE | memlint lint docker-archive:-`"
        ),
    }
    };
    let Some(dir) = config_dir else {
        return Err(refuse(format!(
            "the Docker context `{name}` cannot be looked up: neither DOCKER_CONFIG nor HOME is set"
        )));
    };
    let hash = crate::digest::Digest::of(name.as_bytes());
    let meta_path = dir.join("contexts/meta").join(hash.hex()).join("meta.json");
    let meta = match read_docker_file(&meta_path) {
        Ok(Some(m)) => m,
        Ok(None) => {
            return Err(refuse(format!(
                "there is no Docker context `{name}` ({} does not exist)",
                meta_path.display()
            )))
        }
        Err(e) => {
            return Err(refuse(format!(
                "the Docker context `{name}` cannot be read from {}: {e}",
                meta_path.display()
            )))
        }
    };
    let docker = meta.get("Endpoints").and_then(|e| e.get("docker"));
    let Some(host) = docker
        .and_then(|d| d.get("Host"))
        .and_then(|h| h.as_str())
        .filter(|h| !h.trim().is_empty())
    else {
        return Err(refuse(format!(
            "the Docker context `{name}` names no docker endpoint in {}",
            meta_path.display()
        )));
    };
    let host = host.trim();
    let tls = dir.join("contexts/tls").join(hash.hex()).join("docker");
    let uses_tls = std::fs::symlink_metadata(&tls).is_ok()
        || docker
            .and_then(|d| d.get("SkipTLSVerify"))
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
    if host.starts_with("tcp://") && uses_tls {
        return Err(refuse(format!(
            "the Docker context `{name}` reaches {host} over TLS, which memlint does not speak"
        )));
    }
    if !host.starts_with("unix://") && !host.starts_with("tcp://") {
        return Err(refuse(format!(
            "the Docker context `{name}` reaches the engine at {host}; memlint speaks to unix:// and plain tcp:// only"
        )));
    }
    Ok(Engine {
        kind: Kind::Docker,
        endpoint: parse_host(&format!("the Docker context `{name}`: host"), host, Kind::Docker)?,
        origin: format!("from the Docker context `{name}` ({variable})"),
        overall: None,
    })
}

/// Reads `docker:NAME`.
pub(super) fn open_docker(reference_text: &str, name: &str, options: &Options) -> Result<Vec<Image>> {
    check_name(name, "docker")?;
    let engine = docker_engine(options)?;
    open_through_api(reference_text, name, &engine, options)
}

/// Reads `podman:NAME`: the API socket when one answers, else `podman image save`.
pub(super) fn open_podman(reference_text: &str, name: &str, options: &Options) -> Result<Vec<Image>> {
    check_name(name, "podman")?;
    if let Some(host) = &options.engine.container_host {
        if host.trim().starts_with("ssh://") {
            // podman itself knows the ssh connection (keys, known hosts); let it export.
            return podman_save(reference_text, name, options);
        }
        let engine = Engine {
            kind: Kind::Podman,
            endpoint: parse_host("CONTAINER_HOST", host, Kind::Podman)?,
            origin: "from CONTAINER_HOST".to_string(),
            overall: None,
        };
        // With CONTAINER_HOST set, `podman` goes to that service too, so a dead one is an
        // error here rather than a reason to read some other storage.
        return open_through_api(reference_text, name, &engine, options);
    }
    let mut sockets = Vec::new();
    if let Some(dir) = &options.engine.xdg_runtime_dir {
        sockets.push((
            dir.join("podman/podman.sock"),
            "$XDG_RUNTIME_DIR/podman/podman.sock",
        ));
    }
    sockets.push((PathBuf::from(ROOTFUL_PODMAN_SOCKET), "the rootful default"));
    for (path, origin) in sockets {
        // A socket that accepts is a service (or systemd starting one); one that does not is
        // left for the next place, and in the end for `podman image save`.
        if std::os::unix::net::UnixStream::connect(&path).is_ok() {
            let engine = Engine {
                kind: Kind::Podman,
                endpoint: Endpoint::Unix(path),
                origin: origin.to_string(),
                overall: None,
            };
            return open_through_api(reference_text, name, &engine, options);
        }
    }
    podman_save(reference_text, name, options)
}

fn open_through_api(
    reference_text: &str,
    name: &str,
    engine: &Engine,
    options: &Options,
) -> Result<Vec<Image>> {
    let engine = &Engine {
        kind: engine.kind,
        endpoint: engine.endpoint.clone(),
        origin: engine.origin.clone(),
        overall: options.deadline.overall,
    };
    // Inspect first: a missing image is a clear 404 here, and its diff_ids tell whether the
    // layer cache already has every layer.
    let inspect = engine.inspect(name, options.limits.max_json_bytes)?;
    if let Some(images) = cached::open(reference_text, name, engine, &inspect, options)? {
        return Ok(images);
    }
    let body = engine.export(name)?;
    let label = engine.label();
    let failure = Arc::new(std::sync::Mutex::new(None));
    let watched = Watched {
        inner: body,
        failure: failure.clone(),
    };
    let store = stream::read(watched, &label, options).map_err(|e| {
        // The archive reader would call a connection that broke "not a tar archive".
        match failure.lock().unwrap_or_else(|p| p.into_inner()).take() {
            // A timeout is named as such.
            Some(_) if matches!(e, Error::Timeout { .. }) => e,
            Some(reason) => Error::Engine {
                what: format!("exporting image `{name}` from the {label}"),
                reason,
                help: format!(
                    "the {} stopped sending the image; check that it still runs (`{} info`) and try again",
                    engine.kind.product(),
                    engine.kind.cli()
                ),
            },
            None => e,
        }
    })?;
    load(
        reference_text,
        engine.kind.source(),
        Arc::new(store),
        Format::Docker,
        None,
        options,
    )
}

/// An I/O error as people read it: a read timeout says how long nothing came.
fn describe_io(e: &io::Error, waited: Duration) -> String {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            format!("nothing came for {} seconds", waited.as_secs())
        }
        _ => e.to_string(),
    }
}

/// A reader that remembers its first error, so that a broken transport can be told from a
/// damaged archive after the archive reader has turned both into its own error.
struct Watched<R> {
    inner: R,
    failure: Arc<std::sync::Mutex<Option<String>>>,
}

impl<R: Read> Read for Watched<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).inspect_err(|e| {
            let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
            failure.get_or_insert_with(|| describe_io(e, EXPORT_TIMEOUTS.idle));
        })
    }
}

/// `podman image save` into a pipe, read as it comes.
fn podman_save(reference_text: &str, name: &str, options: &Options) -> Result<Vec<Image>> {
    use std::process::{Command, Stdio};
    let command = format!("podman image save --format docker-archive {name}");
    let mut child = Command::new("podman")
        .args(["image", "save", "--format", "docker-archive", name])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            let reason = if e.kind() == io::ErrorKind::NotFound {
                "no Podman API socket answers ($XDG_RUNTIME_DIR/podman/podman.sock, /run/podman/podman.sock) and \
                 `podman` is not installed"
                    .to_string()
            } else {
                format!("cannot run `podman`: {e}")
            };
            Error::EngineUnreachable {
                what: "Podman".to_string(),
                reason,
                help: "install podman, or start its API service (`podman system service --time=0`) and set \
                       CONTAINER_HOST to its socket; or export the image yourself: \
                       `podman save IMAGE | memlint lint docker-archive:-`"
                    .to_string(),
            }
        })?;
    // stderr is read beside stdout so podman never blocks on a full stderr pipe.
    let stderr = child.stderr.take().map(|mut err| {
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let _ = (&mut err).take(MAX_STDERR as u64).read_to_end(&mut kept);
            let _ = io::copy(&mut err, &mut io::sink());
            kept
        })
    });
    let label = format!("`{command}`");
    let mut killed = false;
    let read = match child.stdout.take() {
        Some(stdout) => {
            // Read on a thread of its own, so that a podman that stalls ends at the deadline.
            let mut stdout = crate::sources::deadline::BoundedReader::new(stdout, options.deadline);
            let result = stream::read(BufReader::with_capacity(256 * 1024, &mut stdout), &label, options);
            if result.is_ok() {
                // The tar ends before the pipe does; podman dies of SIGPIPE if nobody reads
                // the rest.
                let _ = io::copy(&mut stdout, &mut io::sink());
            } else {
                killed = child.kill().is_ok();
            }
            result
        }
        None => Err(Error::Engine {
            what: format!("running `{command}`"),
            reason: "its output could not be read".to_string(),
            help: "run the command by hand to see what it does".to_string(),
        }),
    };
    let status = child.wait().map_err(|e| Error::Engine {
        what: format!("running `{command}`"),
        reason: e.to_string(),
        help: "run the command by hand to see what it does".to_string(),
    })?;
    let stderr = stderr
        .and_then(|t| t.join().ok())
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    // When podman failed, the stream's own error is only a consequence of it; when memlint
    // stopped it, the stream's error is the one that counts.
    let stopped_by_memlint = killed && status.code().is_none();
    if !status.success() && !stopped_by_memlint {
        if stderr.contains("image not known") || stderr.contains("no such image") {
            return Err(Error::EngineNoImage {
                image: name.to_string(),
                what: "Podman's local storage".to_string(),
                help: "podman pull / podman build it first, or check the name with `podman images`"
                    .to_string(),
            });
        }
        return Err(Error::Engine {
            what: format!("`{command}`"),
            reason: if stderr.is_empty() {
                format!("it exited with {status}")
            } else {
                stderr
            },
            help: "run the command by hand to see what it does; `podman images` lists the images it has"
                .to_string(),
        });
    }
    let store = read?;
    load(
        reference_text,
        Kind::Podman.source(),
        Arc::new(store),
        Format::Docker,
        None,
        options,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        let d = |v: &str| parse_host("DOCKER_HOST", v, Kind::Docker);
        assert_eq!(
            d("unix:///var/run/docker.sock").unwrap(),
            Endpoint::Unix("/var/run/docker.sock".into())
        );
        assert_eq!(
            d("tcp://127.0.0.1:2375").unwrap(),
            Endpoint::Tcp {
                host: "127.0.0.1".into(),
                port: 2375
            }
        );
        assert_eq!(
            d("tcp://docker/").unwrap(),
            Endpoint::Tcp {
                host: "docker".into(),
                port: 2375
            }
        );
        assert_eq!(
            d("tcp://[::1]:1234").unwrap(),
            Endpoint::Tcp {
                host: "::1".into(),
                port: 1234
            }
        );
        for bad in [
            "ssh://me@host",
            "https://host:2376",
            "npipe:////./pipe/docker_engine",
            "unix://relative.sock",
            "/var/run/docker.sock",
            "tcp://host:port",
            "tcp://host:2375/path",
            "fd://",
        ] {
            assert!(d(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names() {
        for good in [
            "app:1",
            "localhost/app:1",
            "docker.io/library/app@sha256:abc",
            "21ac9a7744eb",
        ] {
            assert!(check_name(good, "docker").is_ok(), "{good}");
        }
        for bad in [
            "-x",
            "/abs",
            "a/../b",
            "../../containers/json",
            "a b",
            "a\nb",
            "a//b",
            "./a",
        ] {
            assert!(check_name(bad, "docker").is_err(), "{bad}");
        }
    }

    #[test]
    fn error_messages() {
        let mut body: &[u8] = br#"{"cause":"x","message":"failed to find image nope:1","response":404}"#;
        assert_eq!(error_message(&mut body), "failed to find image nope:1");
        let mut body: &[u8] = b"plain text\n";
        assert_eq!(error_message(&mut body), "plain text");
        let mut body: &[u8] = b"";
        assert_eq!(error_message(&mut body), "(no message)");
    }
}
