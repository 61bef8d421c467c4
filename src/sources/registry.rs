//! `registry:REF`: images pulled from an OCI distribution registry with oci-client. The
//! registry is presented to the OCI layout reader as a [`Store`]: `index.json` names the
//! manifest the reference resolves to, and `blobs/sha256/…` members are fetched on demand,
//! manifests from the manifests endpoint and everything else streamed from the blobs
//! endpoint straight into the layer reader, never written to disk.

use super::credentials::{self, Origin};
use super::deadline::{Deadline, TimeoutHit};
use super::store::Store;
use super::{Format, Image, Options};
use crate::error::{Error, Result};
use bytes::Bytes;
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_client::Reference;
use std::collections::HashMap;
use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How to reach registries: what `--insecure-registry`, `--registry-ca`, `--username` and the
/// password give.
#[derive(Clone, Debug, Default)]
pub(crate) struct RegistryOptions {
    /// Hosts (host or host:port) spoken to over HTTPS without verification, or plain HTTP.
    pub(crate) insecure: Vec<String>,
    /// PEM files of extra CAs to trust.
    pub(crate) ca_files: Vec<PathBuf>,
    /// Explicit credentials; they go only to the registries of `explicit_registries`.
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    /// The registries the explicit credentials belong to, as `commands::bind_credentials`
    /// names them from the command line (normalised by [`registry_host`]); no other registry
    /// gets them, whatever it is and whenever it is read.
    pub(crate) explicit_registries: Vec<String>,
    /// What the run's reads share on the network.
    pub(crate) session: Arc<Session>,
}

/// What the images of one run share on the network: one runtime, and per registry host the
/// HTTP client (its connection pool, its TLS set-up with the system's CAs) and whether the
/// host answered in plain HTTP. A fleet's images on one registry reuse its connections, rather
/// than each building a runtime and a client (loading every system CA again) and, on a
/// plain-HTTP registry, trying TLS again first: a warm fleet run spent more time on that than
/// on its images (issue #35's fleet benchmark).
#[derive(Default)]
pub(crate) struct Session {
    runtime: Mutex<Option<Arc<tokio::runtime::Runtime>>>,
    /// By registry host (as the reference resolves it) and whether certificates go unchecked.
    clients: Mutex<HashMap<(String, bool), reqwest::Client>>,
    /// Registry hosts that were spoken to in plain HTTP, after TLS failed.
    plain_http: Mutex<std::collections::HashSet<String>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

impl Session {
    /// The runtime every registry request of the run runs on, built on first use.
    fn runtime(&self) -> Result<Arc<tokio::runtime::Runtime>> {
        let mut runtime = lock(&self.runtime);
        if let Some(r) = runtime.as_ref() {
            return Ok(r.clone());
        }
        let built = Arc::new(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(|e| Error::io("the network runtime", e))?,
        );
        *runtime = Some(built.clone());
        Ok(built)
    }

    /// The client for `host`, made by `make` the first time.
    fn client(
        &self,
        host: &str,
        skip_verify: bool,
        make: impl FnOnce() -> Result<reqwest::Client>,
    ) -> Result<reqwest::Client> {
        let key = (host.to_string(), skip_verify);
        if let Some(c) = lock(&self.clients).get(&key) {
            return Ok(c.clone());
        }
        // Made outside the lock: loading the CAs takes a while, and another image may wait.
        let made = make()?;
        Ok(lock(&self.clients).entry(key).or_insert(made).clone())
    }
}

/// A registry host as credentials are matched by it: lower case, without a scheme or a final
/// `/`, Docker Hub's other names as `docker.io`.
pub(crate) fn registry_host(host: &str) -> String {
    let h = host
        .trim()
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_ascii_lowercase();
    match h.as_str() {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".to_string(),
        _ => h,
    }
}

const MANIFEST_TYPES: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

/// Attempts for one request when the registry answers 5xx, resets or times out.
const ATTEMPTS: u32 = 5;

/// Reads the image a registry reference names.
pub(super) fn open(reference_text: &str, name: &str, options: &Options) -> Result<Vec<Image>> {
    let reference = parse_reference(name)?;
    let store = RegistryStore::connect(reference, options)?;
    super::load(
        reference_text,
        crate::image::ImageSource::Registry,
        Arc::new(store),
        Format::Oci,
        None,
        options,
    )
}

/// Docker's normalisation: `node:24-slim` is docker.io/library/node:24-slim.
pub(crate) fn parse_reference(name: &str) -> Result<Reference> {
    name.parse::<Reference>().map_err(|e| Error::BadReference {
        input: name.to_string(),
        reason: format!("it is not a registry reference ({e})"),
    })
}

/// Registries docker talks to without TLS verification unless told otherwise: loopback.
fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => registry.rsplit_once(':').map_or(registry, |(h, _)| h),
    };
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn named_insecure(registry: &str, insecure: &[String]) -> bool {
    insecure.iter().any(|h| {
        let h = h
            .trim()
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .trim_end_matches('/');
        h == registry || registry.rsplit_once(':').is_some_and(|(host, _)| host == h)
    })
}

/// The kind of network an address is on, for the rule on where a registry may send memlint
/// (its token service, a redirect of a blob or a manifest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NetClass {
    Public,
    /// 127.0.0.0/8, ::1, and the unspecified addresses (0.0.0.0 and :: reach the host itself).
    Loopback,
    /// 169.254.0.0/16 (the cloud metadata services) and fe80::/10.
    LinkLocal,
    /// 10/8, 172.16/12, 192.168/16, 100.64/10 (carrier-grade NAT), fc00::/7, and multicast
    /// and broadcast.
    Private,
}

impl std::fmt::Display for NetClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NetClass::Public => "public",
            NetClass::Loopback => "loopback",
            NetClass::LinkLocal => "link-local",
            NetClass::Private => "private",
        })
    }
}

pub(crate) fn net_class(ip: std::net::IpAddr) -> NetClass {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            if v4.is_loopback() || v4.is_unspecified() || a == 0 {
                NetClass::Loopback
            } else if v4.is_link_local() {
                NetClass::LinkLocal
            } else if v4.is_private()
                || (a == 100 && (64..128).contains(&b))
                || v4.is_multicast()
                || v4.is_broadcast()
            {
                NetClass::Private
            } else {
                NetClass::Public
            }
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return net_class(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            if v6.is_loopback() || v6.is_unspecified() {
                NetClass::Loopback
            } else if first & 0xffc0 == 0xfe80 {
                NetClass::LinkLocal
            } else if first & 0xfe00 == 0xfc00 || v6.is_multicast() {
                NetClass::Private
            } else {
                NetClass::Public
            }
        }
    }
}

/// The host of a `host[:port]` or `[v6]:port` registry name.
fn host_part(registry: &str) -> &str {
    match registry.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => registry.rsplit_once(':').map_or(registry, |(h, _)| h),
    }
}

/// A host memlint was sent to (by a token realm or a redirect) whose address is on a kind of
/// network the registry is not on.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{host} is at {address}, a {class} address, and the registry is not on such a network")]
pub(crate) struct RefusedTarget {
    host: String,
    address: std::net::IpAddr,
    class: NetClass,
}

/// Where a registry may send memlint: its own host, public addresses, and addresses on the
/// kinds of network the registry itself is on (a registry on a private network may have its
/// token service there too; a public one may not send memlint to 169.254.169.254). Checked
/// on the address connected to: names are resolved by [`GuardedResolver`], which hands the
/// HTTP client only the addresses that pass, so a name that resolves one way when checked and
/// another when connected (DNS rebinding) gains nothing; address literals are checked on the
/// URL, which the client does not resolve.
#[derive(Clone, Debug)]
struct TargetGuard {
    /// The registry's host, lower case, without its port.
    registry_host: String,
    /// The kinds of network the registry's addresses are on.
    registry_classes: Arc<Vec<NetClass>>,
    /// The hosts of the user's proxies (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`): the HTTP
    /// client resolves them like any name, and they are the user's choice, often on a private
    /// network. Through a proxy, the names of the targets are resolved by the proxy.
    proxy_hosts: Arc<Vec<String>>,
}

/// The hosts of the proxies the environment names (as reqwest reads them).
fn proxy_hosts() -> Vec<String> {
    [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .iter()
    .filter_map(|name| std::env::var(name).ok())
    .filter(|v| !v.trim().is_empty())
    .filter_map(|v| {
        let v = v.trim();
        let url = if v.contains("://") {
            v.to_string()
        } else {
            format!("http://{v}")
        };
        reqwest::Url::parse(&url)
            .ok()?
            .host_str()
            .map(|h| h.to_ascii_lowercase())
    })
    .collect()
}

impl TargetGuard {
    /// The guard of `registry` (`host[:port]`), its host resolved now.
    fn of(registry: &str) -> TargetGuard {
        use std::net::ToSocketAddrs;
        let host = host_part(registry).to_ascii_lowercase();
        let mut classes: Vec<NetClass> = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![net_class(ip)],
            Err(_) => (host.as_str(), 443)
                .to_socket_addrs()
                .map(|addrs| addrs.map(|a| net_class(a.ip())).collect())
                .unwrap_or_default(),
        };
        classes.sort_by_key(|c| *c as u8);
        classes.dedup();
        TargetGuard {
            registry_host: host,
            registry_classes: Arc::new(classes),
            proxy_hosts: Arc::new(proxy_hosts()),
        }
    }

    /// Whether `host` resolves freely: the registry's own, or a proxy's.
    fn is_free(&self, host: &str) -> bool {
        host.eq_ignore_ascii_case(&self.registry_host)
            || self.proxy_hosts.iter().any(|p| host.eq_ignore_ascii_case(p))
    }

    fn permits(&self, ip: std::net::IpAddr) -> bool {
        let class = net_class(ip);
        class == NetClass::Public || self.registry_classes.contains(&class)
    }

    /// Checks a URL whose host is an address literal (which no resolver sees).
    fn check_url(&self, url: &reqwest::Url) -> std::result::Result<(), RefusedTarget> {
        let Some(host) = url.host_str() else { return Ok(()) };
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        match bare.parse::<std::net::IpAddr>() {
            Ok(ip) if !bare.eq_ignore_ascii_case(&self.registry_host) && !self.permits(ip) => {
                Err(RefusedTarget {
                    host: host.to_string(),
                    address: ip,
                    class: net_class(ip),
                })
            }
            _ => Ok(()),
        }
    }
}

/// The HTTP client's resolver: the registry's own host resolves as it does; any other name
/// only to the addresses [`TargetGuard`] permits, and to an error when none is left.
struct GuardedResolver(TargetGuard);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.0.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let looked_up = host.clone();
            let addrs: Vec<std::net::SocketAddr> = tokio::task::spawn_blocking(move || {
                use std::net::ToSocketAddrs;
                (looked_up.as_str(), 0).to_socket_addrs().map(Iterator::collect)
            })
            .await
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)??;
            if guard.is_free(&host) {
                return Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs);
            }
            let refused = addrs.iter().find(|a| !guard.permits(a.ip())).map(|a| a.ip());
            let kept: Vec<std::net::SocketAddr> =
                addrs.into_iter().filter(|a| guard.permits(a.ip())).collect();
            match (kept.is_empty(), refused) {
                (true, Some(address)) => Err(Box::new(RefusedTarget {
                    host,
                    address,
                    class: net_class(address),
                }) as Box<dyn std::error::Error + Send + Sync>),
                _ => Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs),
            }
        })
    }
}

/// The [`RefusedTarget`] an error of the HTTP client carries, if it carries one.
fn refused_in(e: &(dyn std::error::Error + 'static)) -> Option<RefusedTarget> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        if let Some(r) = err.downcast_ref::<RefusedTarget>() {
            return Some(r.clone());
        }
        next = err.source();
    }
    None
}

/// `scheme://host[:port]` of a URL: what a message says of a host that is not the registry.
fn origin_of(url: &reqwest::Url) -> String {
    match (url.host_str(), url.port()) {
        (Some(h), Some(p)) => format!("{}://{h}:{p}", url.scheme()),
        (Some(h), None) => format!("{}://{h}", url.scheme()),
        (None, _) => url.scheme().to_string(),
    }
}

/// What talks to the registry: cheap to clone into the tasks that stream blobs, so that no task
/// holds the runtime it runs on.
///
/// Every request is memlint's own (reqwest), not oci-client's: oci-client 0.18 reads the token
/// service's answer and the body of a failed blob request whole (`text()`, `bytes()`), so a
/// hostile server could fill memory with an endless body. Here every body read is bounded
/// (`max_json_bytes` for documents and tokens, [`MAX_ERROR_BODY`] for refusals), and every
/// wait by the read's [`Deadline`].
#[derive(Clone)]
struct Puller {
    http: reqwest::Client,
    scheme: &'static str,
    /// The bearer token (`None`: basic or anonymous), once fetched; fetched again once when a
    /// blob request is refused with it (it expired).
    token: Arc<tokio::sync::Mutex<Option<Option<String>>>>,
    reference: Reference,
    auth: RegistryAuth,
    origin: Origin,
    max_json: u64,
    /// `--insecure-registry` hosts: a token service there may get credentials over plain HTTP.
    insecure: Arc<Vec<String>>,
    deadline: Deadline,
    /// Where the registry may send memlint.
    guard: TargetGuard,
}

/// What is kept of a refusal's body, for the message.
const MAX_ERROR_BODY: usize = 4096;

/// Why a request failed.
enum ManifestFailure {
    Registry(OciDistributionError),
    /// A document or the token service's answer passed `max_json_bytes`.
    TooLarge(&'static str),
    Digest {
        expected: String,
        actual: String,
    },
    Timeout(TimeoutHit),
    /// The token service is on plain HTTP on a host that may not get credentials that way.
    InsecureRealm(String),
    /// The registry sent memlint (a token realm, a redirect) to a network it is not on.
    Refused(RefusedTarget),
}

impl From<TimeoutHit> for ManifestFailure {
    fn from(hit: TimeoutHit) -> Self {
        ManifestFailure::Timeout(hit)
    }
}

fn request_failure(e: reqwest::Error) -> ManifestFailure {
    match refused_in(&e) {
        Some(r) => ManifestFailure::Refused(r),
        None => ManifestFailure::Registry(OciDistributionError::RequestError(e)),
    }
}

/// A body read to its end within the deadline, refusing more than `max` bytes (`Ok(None)`).
async fn read_body(
    response: &mut reqwest::Response,
    max: u64,
    deadline: &Deadline,
) -> std::result::Result<Option<Vec<u8>>, ManifestFailure> {
    if response.content_length().is_some_and(|n| n > max) {
        return Ok(None);
    }
    let mut body = Vec::new();
    while let Some(chunk) = deadline.bound(response.chunk()).await?.map_err(request_failure)? {
        if (body.len() + chunk.len()) as u64 > max {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// The first [`MAX_ERROR_BODY`] bytes of a refusal's body, as text.
async fn error_text(response: &mut reqwest::Response, deadline: &Deadline) -> String {
    let mut message = Vec::new();
    while message.len() < MAX_ERROR_BODY {
        match deadline.bound(response.chunk()).await {
            Ok(Ok(Some(chunk))) => {
                let room = MAX_ERROR_BODY - message.len();
                message.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            _ => break,
        }
    }
    String::from_utf8_lossy(&message).into_owned()
}

/// How the message of a refusal from another host than the registry's begins.
const ANSWERED_BY: &str = "answered by";

/// A refusal as the error oci-client would have given, its body bounded. The body of an answer
/// from another host (a redirect's target) is not read: only its status and host are told.
async fn refusal(mut response: reqwest::Response, url: String, deadline: &Deadline) -> OciDistributionError {
    let code = response.status().as_u16();
    let asked = reqwest::Url::parse(&url).ok();
    let same_host = asked.as_ref().is_some_and(|a| {
        a.host_str() == response.url().host_str()
            && a.port_or_known_default() == response.url().port_or_known_default()
    });
    if !same_host {
        return OciDistributionError::ServerError {
            code,
            url,
            message: format!("{ANSWERED_BY} {} after a redirect", origin_of(response.url())),
        };
    }
    let message = error_text(&mut response, deadline).await;
    match code {
        401 => OciDistributionError::UnauthorizedError { url },
        _ => match serde_json::from_str::<oci_client::errors::OciEnvelope>(&message) {
            Ok(envelope) if !envelope.errors.is_empty() => {
                OciDistributionError::RegistryError { envelope, url }
            }
            _ => OciDistributionError::ServerError { code, url, message },
        },
    }
}

/// The `Bearer` challenge of a `WWW-Authenticate` header: the token service and its service
/// name; `None` for any other scheme (basic).
fn bearer_challenge(header: &reqwest::header::HeaderValue) -> Option<(String, Option<String>)> {
    let text = header.to_str().ok()?;
    http_auth::parser::ChallengeParser::new(text)
        .filter_map(|c| c.ok())
        .find(|c| c.scheme.eq_ignore_ascii_case("bearer"))
        .and_then(|c| {
            let param = |name: &str| {
                c.params
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.to_unescaped())
            };
            Some((param("realm")?, param("service")))
        })
}

/// What the token service answers.
#[derive(serde::Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
}

impl Puller {
    fn registry(&self) -> &str {
        self.reference.registry()
    }

    fn repository(&self) -> &str {
        self.reference.repository()
    }

    /// The manifest (or index) with this digest, or the one the reference names, read no
    /// further than `max_json_bytes`.
    async fn manifest(&self, digest: Option<&str>) -> std::result::Result<(Bytes, String), ManifestFailure> {
        let mut attempt = 0;
        loop {
            match self.manifest_once(digest).await {
                Err(ManifestFailure::Registry(e)) if attempt + 1 < ATTEMPTS && transient(&e) => {
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// Sends a request; the wait for its answer's head is bounded by the read's deadline.
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> std::result::Result<reqwest::Response, ManifestFailure> {
        self.deadline
            .bound(request.send())
            .await?
            .map_err(request_failure)
    }

    /// The registry's auth flow, as docker runs it: `GET /v2/`; a `Bearer` challenge names a
    /// token service, asked (with the basic credentials, if any) for a pull token. `None`:
    /// no token, basic credentials (if any) go to the registry itself.
    async fn authenticate(&self) -> std::result::Result<Option<String>, ManifestFailure> {
        if let RegistryAuth::Bearer(t) = &self.auth {
            return Ok(Some(t.clone()));
        }
        let r = &self.reference;
        let url = format!("{}://{}/v2/", self.scheme, r.resolve_registry());
        let response = self.send(self.http.get(&url)).await?;
        // The body of `/v2/` says nothing memlint needs: it is never read.
        let Some((realm, service)) = response
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(bearer_challenge)
        else {
            return Ok(None);
        };
        drop(response);
        let realm_url = reqwest::Url::parse(&realm).map_err(|e| {
            ManifestFailure::Registry(OciDistributionError::AuthenticationFailure(format!(
                "the token service `{realm}` the registry names is not a URL ({e})"
            )))
        })?;
        self.guard
            .check_url(&realm_url)
            .map_err(ManifestFailure::Refused)?;
        let credentials = match &self.auth {
            RegistryAuth::Basic(u, p) => Some((u, p)),
            _ => None,
        };
        if credentials.is_some() && realm_url.scheme() != "https" {
            let host = match (realm_url.host_str(), realm_url.port()) {
                (Some(h), Some(p)) => format!("{h}:{p}"),
                (Some(h), None) => h.to_string(),
                (None, _) => String::new(),
            };
            let bare = host.trim_start_matches('[').split(']').next().unwrap_or_default();
            if !(is_loopback(&host) || is_loopback(bare) || named_insecure(&host, &self.insecure)) {
                return Err(ManifestFailure::InsecureRealm(realm));
            }
        }
        let scope = format!("repository:{}:pull", r.repository());
        let mut query = vec![("scope", scope)];
        if let Some(s) = service {
            query.push(("service", s));
        }
        let mut request = self.http.get(realm_url.clone()).query(&query);
        if let Some((u, p)) = credentials {
            request = request.basic_auth(u, Some(p));
        }
        let mut response = self.send(request).await?;
        if !response.status().is_success() {
            let code = response.status().as_u16();
            // A token service on another host than the registry's: its words are not
            // repeated, only its status and host.
            let own = realm_url
                .host_str()
                .is_some_and(|h| h.eq_ignore_ascii_case(&self.guard.registry_host))
                && response.url().host_str() == realm_url.host_str();
            let (url, message) = if own {
                (realm, error_text(&mut response, &self.deadline).await)
            } else {
                let origin = origin_of(response.url());
                let message = format!("the token service at {origin} answered {code}");
                (origin, message)
            };
            return Err(ManifestFailure::Registry(match code {
                401 | 403 => OciDistributionError::AuthenticationFailure(message),
                _ => OciDistributionError::ServerError { code, url, message },
            }));
        }
        let body = read_body(&mut response, self.max_json, &self.deadline)
            .await?
            .ok_or(ManifestFailure::TooLarge("the token service's answer"))?;
        let answer: TokenAnswer = serde_json::from_slice(&body).map_err(|e| {
            ManifestFailure::Registry(OciDistributionError::RegistryTokenDecodeError(e.to_string()))
        })?;
        Ok(answer.token.or(answer.access_token).filter(|t| !t.is_empty()))
    }

    /// The token for requests: fetched once, or again when `stale` is the one a request was
    /// refused with.
    async fn token(
        &self,
        stale: Option<&Option<String>>,
    ) -> std::result::Result<Option<String>, ManifestFailure> {
        let mut cell = self.token.lock().await;
        match (&*cell, stale) {
            (Some(t), None) => return Ok(t.clone()),
            (Some(t), Some(s)) if t != s => return Ok(t.clone()),
            _ => {}
        }
        let fresh = self.authenticate().await?;
        *cell = Some(fresh.clone());
        Ok(fresh)
    }

    /// A request with the token, or the basic credentials when there is none.
    fn authorised(
        &self,
        request: reqwest::RequestBuilder,
        token: &Option<String>,
    ) -> reqwest::RequestBuilder {
        match (token, &self.auth) {
            (Some(t), _) => request.bearer_auth(t),
            (None, RegistryAuth::Basic(u, p)) => request.basic_auth(u, Some(p)),
            (None, _) => request,
        }
    }

    async fn manifest_once(
        &self,
        digest: Option<&str>,
    ) -> std::result::Result<(Bytes, String), ManifestFailure> {
        use reqwest::header;
        let r = &self.reference;
        let target = digest
            .or(r.digest())
            .map(str::to_string)
            .unwrap_or_else(|| r.tag().unwrap_or("latest").to_string());
        let url = format!(
            "{}://{}/v2/{}/manifests/{target}",
            self.scheme,
            r.resolve_registry(),
            r.repository()
        );
        let token = self.token(None).await?;
        let request = self
            .http
            .get(&url)
            .header(header::ACCEPT, MANIFEST_TYPES.join(", "));
        let request = self.authorised(request, &token);
        let mut response = self.send(request).await?;
        if !response.status().is_success() {
            return Err(ManifestFailure::Registry(
                refusal(response, url, &self.deadline).await,
            ));
        }
        let body = read_body(&mut response, self.max_json, &self.deadline)
            .await?
            .ok_or(ManifestFailure::TooLarge("the manifest"))?;
        let actual = crate::digest::Digest::of(&body).to_string();
        if let Some(expected) = digest.or(r.digest()) {
            if expected != actual {
                return Err(ManifestFailure::Digest {
                    expected: expected.to_string(),
                    actual,
                });
            }
        }
        Ok((Bytes::from(body), actual))
    }

    fn manifest_error(&self, what: &str, failure: ManifestFailure) -> Error {
        match failure {
            ManifestFailure::Registry(e) => {
                registry_error(self.registry(), self.repository(), what, &self.origin, &e)
            }
            ManifestFailure::TooLarge(body) => super::limit_error(
                "max_json_bytes",
                self.max_json,
                format!("{body} for {what}"),
                format!("registry {}, repository {}", self.registry(), self.repository()),
            ),
            ManifestFailure::Timeout(hit) => super::timeout_error(
                hit,
                what.to_string(),
                format!("registry {}, repository {}", self.registry(), self.repository()),
            ),
            ManifestFailure::InsecureRealm(realm) => Error::InsecureRealm {
                registry: self.registry().to_string(),
                realm,
                help: format!(
                    "memlint does not send credentials over plain HTTP: ask the registry's operator to serve the token service over HTTPS; if this network is trusted, name its host with --insecure-registry, or pull anonymously (unset MEMLINT_USERNAME, or remove {} from the docker config)",
                    self.registry()
                ),
            },
            ManifestFailure::Refused(target) => Error::Registry {
                registry: self.registry().to_string(),
                repository: self.repository().to_string(),
                what: what.to_string(),
                reason: format!("the registry sent memlint to another host (its token service or a redirect), refused: {target}"),
                help: "a registry may send memlint only to public addresses or to the kind of network it is on itself (loopback, link-local, private), so that a reference in a manifest cannot make memlint reach a cloud metadata service or the runner's own network; read the image from a registry on that network, or copy it into one (`skopeo copy`)".to_string(),
            },
            ManifestFailure::Digest { expected, actual } => Error::DigestMismatch {
                what: what.to_string(),
                member: format!("/v2/{}/manifests", self.repository()),
                location: format!("registry {}", self.registry()),
                expected,
                actual,
            },
        }
    }
}

/// A store's registry side: the puller and the runtime its requests run on.
struct Remote {
    runtime: Arc<tokio::runtime::Runtime>,
    puller: Puller,
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(250u64 << attempt.min(5))
}

fn transient(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::ServerError { code, .. } => *code >= 500,
        OciDistributionError::RequestError(r) => !r.is_connect() && !r.is_builder() && !r.is_status(),
        OciDistributionError::IoError(_) => true,
        _ => false,
    }
}

/// Whether an error happened below HTTP: no connection, or TLS refused.
fn transport_failure(e: &OciDistributionError) -> bool {
    matches!(e, OciDistributionError::RequestError(r) if r.is_connect() || r.is_request())
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

fn certificate_problem(e: &OciDistributionError) -> bool {
    let text = error_chain(e).to_ascii_lowercase();
    text.contains("certificate") || text.contains("unknownissuer") || text.contains("invalid peer")
}

/// The HTTP status an error stands for, when it stands for one.
fn status_of(e: &OciDistributionError) -> Option<u16> {
    match e {
        OciDistributionError::UnauthorizedError { .. } | OciDistributionError::AuthenticationFailure(_) => {
            Some(401)
        }
        OciDistributionError::ServerError { code, .. } => Some(*code),
        OciDistributionError::ImageManifestNotFoundError(_) => Some(404),
        OciDistributionError::RegistryError { envelope, .. } => {
            envelope.errors.iter().find_map(|err| match err.code {
                OciErrorCode::Unauthorized => Some(401),
                OciErrorCode::Denied => Some(403),
                OciErrorCode::ManifestUnknown
                | OciErrorCode::NameUnknown
                | OciErrorCode::BlobUnknown
                | OciErrorCode::NotFound
                | OciErrorCode::ManifestBlobUnknown => Some(404),
                OciErrorCode::Toomanyrequests => Some(429),
                _ => None,
            })
        }
        OciDistributionError::RequestError(r) => r.status().map(|s| s.as_u16()),
        _ => None,
    }
}

/// How the reason of a registry that cannot be reached begins (a fleet counts these reads as
/// timeouts, `max_registry_timeouts`).
pub(crate) const NO_ANSWER: &str = "the registry does not answer";

/// A registry failure as a diagnostic that names the registry, the repository and what to do.
fn registry_error(
    remote_registry: &str,
    repository: &str,
    what: &str,
    origin: &Origin,
    e: &OciDistributionError,
) -> Error {
    let login = if remote_registry == "docker.io" {
        "docker login".to_string()
    } else {
        format!("docker login {remote_registry}")
    };
    let (reason, help) = match status_of(e) {
        Some(401) => (
            format!("the registry refused {origin} (401 Unauthorized)"),
            format!(
                "`{login}`, or set MEMLINT_USERNAME and MEMLINT_PASSWORD (or --password-stdin) to an account that can pull {repository}"
            ),
        ),
        Some(403) => (
            format!("{origin} may not pull {repository} (403 Forbidden)"),
            format!("ask for pull access to {repository}, or log in as another account (`{login}`)"),
        ),
        Some(404) => (
            "it is not there (404 Not Found)".to_string(),
            match origin {
                Origin::Anonymous => format!(
                    "check the repository and tag (`skopeo list-tags docker://{remote_registry}/{repository}`); a private repository also answers 404 to a client without credentials: `{login}`, or set MEMLINT_USERNAME and MEMLINT_PASSWORD"
                ),
                _ => format!(
                    "check the repository and tag (`skopeo list-tags docker://{remote_registry}/{repository}`); a private repository also answers 404 to an account that may not see it"
                ),
            },
        ),
        Some(429) => (
            "the registry is rate limiting this client (429 Too Many Requests)".to_string(),
            format!("wait and try again, or log in (`{login}`): registries allow more pulls to logged-in users"),
        ),
        Some(code) if code >= 500 => (
            format!("the registry failed {ATTEMPTS} times with {code}: {e}"),
            "the registry is having trouble; try again later".to_string(),
        ),
        _ if certificate_problem(e) => (
            format!("the registry's TLS certificate is not trusted ({})", error_chain(e)),
            format!(
                "give the registry's CA with --registry-ca FILE, or, for a test registry, --insecure-registry {remote_registry}"
            ),
        ),
        _ if transport_failure(e) => (
            format!("{NO_ANSWER} ({})", error_chain(e)),
            if is_loopback(remote_registry) {
                "check the port and that the registry runs".to_string()
            } else {
                format!(
                    "check the address and that the registry runs; a registry without TLS needs --insecure-registry {remote_registry}"
                )
            },
        ),
        _ => (error_chain(e), "check the reference; run again with a working network".to_string()),
    };
    // Which host refused, when it is not the registry (a redirect's target).
    let reason = match e {
        OciDistributionError::ServerError { message, .. } if message.starts_with(ANSWERED_BY) => {
            format!("{reason}, {message}")
        }
        _ => reason,
    };
    Error::Registry {
        registry: remote_registry.to_string(),
        repository: repository.to_string(),
        what: what.to_string(),
        reason,
        help,
    }
}

fn read_certificates(files: &[PathBuf]) -> Result<Vec<Vec<u8>>> {
    files
        .iter()
        .map(|path| {
            let data = crate::user_file::read(path, crate::user_file::MAX_BYTES)
                .map_err(|e| Error::user_file(path.display(), e))?;
            if !data.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
                return Err(Error::BadArgument {
                    what: format!("--registry-ca {}", path.display()),
                    help: "give a PEM file with `-----BEGIN CERTIFICATE-----` blocks (the CA that signed the registry's certificate)".to_string(),
                });
            }
            Ok(data)
        })
        .collect()
}

const USER_AGENT: &str = concat!("memlint/", env!("CARGO_PKG_VERSION"));

/// The HTTP client for registries. A CA that cannot be loaded is an error here. reqwest
/// drops the `Authorization` header on a redirect to another host, so credentials never
/// follow a blob redirect to a storage service.
fn client(
    skip_verify: bool,
    certificates: &[Vec<u8>],
    ca_files: &[PathBuf],
    guard: &TargetGuard,
) -> Result<reqwest::Client> {
    let bad_ca = |e: &dyn std::fmt::Display| {
        Error::BadArgument {
        what: format!(
            "--registry-ca {}",
            ca_files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        ),
        help: format!("the certificates cannot be loaded ({e}); give PEM files of the CA that signed the registry's certificate"),
    }
    };
    let mut roots = Vec::new();
    for c in certificates {
        roots.extend(reqwest::Certificate::from_pem_bundle(c).map_err(|e| bad_ca(&e))?);
    }
    // The waits themselves are bounded by the read's deadline and idle timeout.
    let redirects = guard.clone();
    reqwest::Client::builder()
        .dns_resolver(GuardedResolver(guard.clone()))
        .redirect(reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= 10 {
                return attempt.error("more than 10 redirects");
            }
            match redirects.check_url(attempt.url()) {
                Ok(()) => attempt.follow(),
                Err(refused) => attempt.error(refused),
            }
        }))
        .danger_accept_invalid_certs(skip_verify)
        .tls_certs_merge(roots)
        .connect_timeout(Duration::from_secs(15))
        .user_agent(USER_AGENT)
        .build()
        .map_err(|e| bad_ca(&e))
}

/// A registry seen as an OCI layout.
pub(crate) struct RegistryStore {
    remote: Remote,
    /// JSON documents fetched so far, by member name (`index.json`, `blobs/sha256/…`).
    documents: Mutex<HashMap<String, Bytes>>,
    /// Descriptors named by the documents served so far: member → (media type, size).
    descriptors: Mutex<HashMap<String, (String, u64)>>,
    max_json: u64,
}

impl RegistryStore {
    fn connect(reference: Reference, options: &Options) -> Result<RegistryStore> {
        let registry = reference.registry().to_string();
        let repository = reference.repository().to_string();
        let settings = &options.registry;
        let certificates = read_certificates(&settings.ca_files)?;
        // `commands::bind_credentials` names the registries they belong to, from the command
        // line only: a registry that a manifest or a config file names does not get them.
        let explicit = settings
            .username
            .clone()
            .zip(settings.password.clone())
            .filter(|_| settings.explicit_registries.contains(&registry_host(&registry)));
        let (auth, origin) = match explicit {
            Some((u, p)) => (RegistryAuth::Basic(u, p), Origin::Explicit),
            None => credentials::from_docker_config(
                &registry,
                options.docker_config.as_deref(),
                &options.warnings,
            ),
        };
        let session = &settings.session;
        let runtime = session.runtime()?;
        let named = named_insecure(&registry, &settings.insecure);
        let may_fall_back = named || is_loopback(&registry);
        let host = reference.resolve_registry().to_string();
        let guard = TargetGuard::of(&host);
        let make = |skip_verify: bool| {
            session.client(&host, skip_verify, || {
                client(skip_verify, &certificates, &settings.ca_files, &guard)
            })
        };
        // A host that answered an earlier image of the run in plain HTTP is not tried with TLS
        // again.
        let plain = may_fall_back && lock(&session.plain_http).contains(&host);
        let mut puller = Puller {
            http: make(named && !plain)?,
            scheme: if plain { "http" } else { "https" },
            token: Arc::default(),
            reference,
            auth,
            origin,
            max_json: options.limits.max_json_bytes,
            insecure: Arc::new(settings.insecure.clone()),
            deadline: options.deadline,
            guard: guard.clone(),
        };
        let wanted = match (puller.reference.digest(), puller.reference.tag()) {
            (Some(d), _) => format!("manifest {d}"),
            (None, t) => format!("the manifest of tag {}", t.unwrap_or("latest")),
        };
        let (bytes, digest) = match runtime.block_on(puller.manifest(None)) {
            Ok(found) => found,
            // Like docker: a loopback or --insecure-registry host that does not speak TLS is
            // spoken to in plain HTTP. A certificate it presents but that is not trusted is
            // an error, not a reason to drop TLS.
            Err(ManifestFailure::Registry(e))
                if !plain
                    && may_fall_back
                    && transport_failure(&e)
                    && (named || !certificate_problem(&e)) =>
            {
                puller.http = make(false)?;
                puller.scheme = "http";
                puller.token = Arc::default();
                let found = runtime
                    .block_on(puller.manifest(None))
                    .map_err(|f| puller.manifest_error(&wanted, f))?;
                lock(&session.plain_http).insert(host.clone());
                found
            }
            Err(f) => return Err(puller.manifest_error(&wanted, f)),
        };
        let media_type = document_media_type(&bytes).ok_or_else(|| Error::NotAnImage {
            location: format!("registry {registry}, repository {repository}"),
            reason: "the reference resolves to something that is neither an image manifest nor an index".to_string(),
            help: "check the reference: it may name an artifact (a Helm chart, a signature) rather than an image".to_string(),
        })?;
        let name = puller.reference.whole();
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{
                "mediaType": media_type,
                "digest": digest,
                "size": bytes.len(),
                "annotations": { "org.opencontainers.image.ref.name": name },
            }],
        });
        let store = RegistryStore {
            remote: Remote { runtime, puller },
            documents: Mutex::new(HashMap::new()),
            descriptors: Mutex::new(HashMap::new()),
            max_json: options.limits.max_json_bytes,
        };
        let index_bytes = Bytes::from(serde_json::to_vec(&index).unwrap_or_default());
        store.remember("index.json", index_bytes);
        if let Some(d) = crate::digest::Digest::parse(&digest) {
            store.remember(&super::oci::blob_member(&d), bytes);
        }
        Ok(store)
    }

    /// Keeps a document and the descriptors it names, so that `size` can answer for them.
    fn remember(&self, member: &str, bytes: Bytes) {
        if let Ok(value) = serde_json::from_slice::<serde_json::Value>(&bytes) {
            let mut descriptors = lock(&self.descriptors);
            let listed = ["manifests", "layers"]
                .iter()
                .filter_map(|k| value.get(*k).and_then(|v| v.as_array()))
                .flatten()
                .chain(value.get("config"));
            for d in listed {
                let (Some(digest), Some(size)) = (
                    d.get("digest")
                        .and_then(|v| v.as_str())
                        .and_then(crate::digest::Digest::parse),
                    d.get("size").and_then(|v| v.as_u64()),
                ) else {
                    continue;
                };
                let media_type = d.get("mediaType").and_then(|v| v.as_str()).unwrap_or_default();
                descriptors.insert(super::oci::blob_member(&digest), (media_type.to_string(), size));
            }
        }
        lock(&self.documents).insert(member.to_string(), bytes);
    }

    fn digest_of(member: &str) -> Option<String> {
        let hex = member.strip_prefix("blobs/sha256/")?;
        Some(format!("sha256:{hex}"))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn document_media_type(bytes: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    if let Some(mt) = value.get("mediaType").and_then(|v| v.as_str()) {
        return Some(mt.to_string());
    }
    if value.get("manifests").is_some() {
        Some(MANIFEST_TYPES[0].to_string())
    } else if value.get("layers").is_some() && value.get("config").is_some() {
        Some(MANIFEST_TYPES[1].to_string())
    } else {
        None
    }
}

impl Store for RegistryStore {
    fn location(&self) -> String {
        format!(
            "registry {}, repository {}",
            self.remote.puller.registry(),
            self.remote.puller.repository()
        )
    }

    fn size(&self, member: &str) -> Option<u64> {
        if let Some(b) = lock(&self.documents).get(member) {
            return Some(b.len() as u64);
        }
        lock(&self.descriptors).get(member).map(|(_, size)| *size)
    }

    fn open(&self, member: &str) -> io::Result<Box<dyn Read + Send>> {
        if let Some(b) = lock(&self.documents).get(member) {
            return Ok(Box::new(io::Cursor::new(b.clone())));
        }
        let (media_type, size) = lock(&self.descriptors).get(member).cloned().ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("no descriptor names {member}"))
        })?;
        let digest = Self::digest_of(member).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("{member} is not a sha256 blob"))
        })?;
        let remote = &self.remote;
        if MANIFEST_TYPES.contains(&media_type.as_str()) {
            let (bytes, _) = remote
                .runtime
                .block_on(remote.puller.manifest(Some(&digest)))
                .map_err(|f| {
                    io::Error::other(remote.puller.manifest_error(&format!("manifest {digest}"), f))
                })?;
            self.remember(member, bytes.clone());
            return Ok(Box::new(io::Cursor::new(bytes)));
        }
        Ok(Box::new(BlobReader::start(remote, digest, size)))
    }

    fn max_json(&self) -> u64 {
        self.max_json
    }
}

/// A blob streamed from the registry: a task on the runtime fetches it (resuming with a
/// range request after a reset) and hands chunks over a small bounded channel, so at most a
/// few chunks wait in memory whatever the blob's size.
struct BlobReader {
    chunks: tokio::sync::mpsc::Receiver<io::Result<Bytes>>,
    current: Bytes,
    done: bool,
    /// The task that fetches it: the runtime outlives the image's read (it is the run's), so
    /// a read that stops early stops its download here rather than when the runtime ends.
    task: tokio::task::JoinHandle<()>,
}

impl Drop for BlobReader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl BlobReader {
    fn start(remote: &Remote, digest: String, size: u64) -> BlobReader {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        // The task owns a clone of the puller, never the runtime: a runtime must not be
        // dropped by one of its own tasks.
        let puller = remote.puller.clone();
        let task = remote.runtime.spawn(async move {
            if let Err(e) = fetch(&puller, &digest, size, &tx).await {
                let _ = tx.send(Err(e)).await;
            }
        });
        BlobReader {
            chunks: rx,
            current: Bytes::new(),
            done: false,
            task,
        }
    }
}

/// One blob request: the answer, whether it is the part asked for (206) rather than the whole
/// blob, or why there is none.
async fn blob_response(
    puller: &Puller,
    digest: &str,
    offset: u64,
    length: Option<u64>,
) -> std::result::Result<(reqwest::Response, bool), ManifestFailure> {
    let r = &puller.reference;
    let url = format!(
        "{}://{}/v2/{}/blobs/{digest}",
        puller.scheme,
        r.resolve_registry(),
        r.repository()
    );
    let mut stale = None;
    loop {
        let token = puller.token(stale.as_ref()).await?;
        let mut request = puller.http.get(&url);
        if let Some(n) = length {
            request = request.header(
                reqwest::header::RANGE,
                format!("bytes={offset}-{}", offset + n - 1),
            );
        }
        let request = puller.authorised(request, &token);
        let response = puller.send(request).await?;
        match response.status().as_u16() {
            200 => return Ok((response, false)),
            206 => return Ok((response, true)),
            // A token that expired during a long pull: fetch a new one, once.
            401 if token.is_some() && stale.is_none() => stale = Some(token),
            _ => {
                return Err(ManifestFailure::Registry(
                    refusal(response, url, &puller.deadline).await,
                ))
            }
        }
    }
}

async fn fetch(
    puller: &Puller,
    digest: &str,
    size: u64,
    tx: &tokio::sync::mpsc::Sender<io::Result<Bytes>>,
) -> io::Result<()> {
    let what = format!("blob {digest}");
    let fail = |f: ManifestFailure| match f {
        ManifestFailure::Timeout(hit) => io::Error::from(hit),
        f => io::Error::other(puller.manifest_error(&what, f)),
    };
    let mut offset = 0u64;
    let mut attempt = 0u32;
    loop {
        // Always a range request: a resumed download asks for the rest the same way. memlint
        // hashes every blob itself while reading it, and compares it with the manifest.
        let length = size.checked_sub(offset).filter(|n| *n > 0);
        let (mut response, mut skip) = match blob_response(puller, digest, offset, length).await {
            // The registry ignored the range: skip what was already passed on.
            Ok((r, partial)) => (r, if partial { 0 } else { offset }),
            Err(ManifestFailure::Registry(e)) if attempt + 1 < ATTEMPTS && transient(&e) => {
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
                continue;
            }
            Err(f) => return Err(fail(f)),
        };
        let mut broken = None;
        loop {
            let chunk = match puller.deadline.bound(response.chunk()).await {
                Ok(c) => c,
                Err(hit) => return Err(hit.into()),
            };
            match chunk {
                Ok(Some(mut bytes)) => {
                    if skip > 0 {
                        let n = skip.min(bytes.len() as u64);
                        skip -= n;
                        bytes = bytes.slice(n as usize..);
                        if bytes.is_empty() {
                            continue;
                        }
                    }
                    // More than the manifest says: pass on one byte too many, so the layer
                    // reader's size check reports it, and stop.
                    let room = size.saturating_add(1).saturating_sub(offset);
                    let over = bytes.len() as u64 > room;
                    if over {
                        bytes = bytes.slice(..room as usize);
                    }
                    offset += bytes.len() as u64;
                    if tx.send(Ok(bytes)).await.is_err() || over {
                        // Either the reader stopped (an error elsewhere) or the blob is too long.
                        return Ok(());
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    broken = Some(e);
                    break;
                }
            }
        }
        match broken {
            // Everything the manifest promised has passed: the layer reader's checks decide.
            _ if offset >= size && size > 0 => return Ok(()),
            None if size == 0 => return Ok(()),
            // The body ended early, with or without an error: a dropped connection. Resume.
            _ if attempt + 1 < ATTEMPTS => {
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
            Some(e) => {
                return Err(io::Error::other(format!(
                    "blob {digest} from {}: {}",
                    puller.registry(),
                    error_chain(&e)
                )))
            }
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "blob {digest} from {} ended after {offset} of {size} bytes",
                        puller.registry()
                    ),
                ))
            }
        }
    }
}

impl Read for BlobReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            if self.done {
                return Ok(0);
            }
            match self.chunks.blocking_recv() {
                Some(Ok(bytes)) => self.current = bytes,
                Some(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                None => {
                    self.done = true;
                    return Ok(0);
                }
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current = self.current.slice(n..);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_hub_names_are_normalised() {
        let r = parse_reference("node:24-slim").map_err(|e| e.to_string());
        let r = r.as_ref().map(|r| (r.registry(), r.repository(), r.tag()));
        assert_eq!(r, Ok(("docker.io", "library/node", Some("24-slim"))));
        let r = parse_reference("127.0.0.1:5000/app:1").map_err(|e| e.to_string());
        let r = r.as_ref().map(|r| (r.registry(), r.repository(), r.tag()));
        assert_eq!(r, Ok(("127.0.0.1:5000", "app", Some("1"))));
        // Credentials are matched by host, however it is written.
        assert_eq!(registry_host("https://Index.Docker.io/"), "docker.io");
        assert_eq!(registry_host("GHCR.io"), "ghcr.io");
        assert_eq!(registry_host("127.0.0.1:5000"), "127.0.0.1:5000");
    }

    #[test]
    fn loopback_hosts_are_recognised() {
        for h in [
            "localhost:5000",
            "127.0.0.1:5000",
            "127.0.0.1",
            "[::1]:5000",
            "localhost",
        ] {
            assert!(is_loopback(h), "{h}");
        }
        for h in ["ghcr.io", "docker.io", "10.0.0.1:5000", "localhost.example.com"] {
            assert!(!is_loopback(h), "{h}");
        }
    }

    #[test]
    fn network_kinds_of_addresses() {
        let class = |a: &str| {
            a.parse::<std::net::IpAddr>()
                .map(net_class)
                .map_err(|e| e.to_string())
        };
        for (a, c) in [
            ("127.0.0.2", NetClass::Loopback),
            ("0.0.0.0", NetClass::Loopback),
            ("::1", NetClass::Loopback),
            ("::ffff:127.0.0.1", NetClass::Loopback),
            ("169.254.169.254", NetClass::LinkLocal),
            ("fe80::1", NetClass::LinkLocal),
            ("::ffff:169.254.169.254", NetClass::LinkLocal),
            ("10.0.0.1", NetClass::Private),
            ("172.16.5.4", NetClass::Private),
            ("192.168.1.1", NetClass::Private),
            ("100.64.0.1", NetClass::Private),
            ("fd00::1", NetClass::Private),
            ("140.82.112.3", NetClass::Public),
            ("172.32.0.1", NetClass::Public),
            ("2606:4700::1111", NetClass::Public),
        ] {
            assert_eq!(class(a), Ok(c), "{a}");
        }
    }

    #[test]
    fn a_registry_sends_memlint_only_to_public_addresses_or_its_own_kind_of_network() {
        let guard = |classes: Vec<NetClass>| TargetGuard {
            registry_host: "registry.example".to_string(),
            registry_classes: Arc::new(classes),
            proxy_hosts: Arc::new(vec!["proxy.example".to_string()]),
        };
        let url = |u: &str| reqwest::Url::parse(u).map_err(|e| e.to_string());
        let public = guard(vec![NetClass::Public]);
        let private = guard(vec![NetClass::Private]);
        let checked = |g: &TargetGuard, u: &str| url(u).map(|u| g.check_url(&u).is_ok());
        assert_eq!(checked(&public, "http://169.254.169.254/latest"), Ok(false));
        assert_eq!(checked(&public, "http://127.0.0.1:5000/t"), Ok(false));
        assert_eq!(checked(&public, "http://[::1]/t"), Ok(false));
        assert_eq!(checked(&public, "http://10.1.1.1/t"), Ok(false));
        assert_eq!(checked(&public, "https://140.82.112.3/t"), Ok(true));
        assert_eq!(checked(&private, "http://10.1.1.1/t"), Ok(true));
        assert_eq!(checked(&private, "http://169.254.169.254/t"), Ok(false));
        // A name is left to the resolver, which checks what it resolves to.
        assert_eq!(checked(&public, "http://localhost/t"), Ok(true));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let Ok(runtime) = runtime else { return };
        let resolve = |g: &TargetGuard, name: &str| {
            let name: reqwest::dns::Name = name.parse().map_err(|_| "name".to_string())?;
            let resolver = GuardedResolver(g.clone());
            runtime
                .block_on(reqwest::dns::Resolve::resolve(&resolver, name))
                .map(|addrs| addrs.count())
                .map_err(|e| {
                    refused_in(e.as_ref())
                        .map(|r| r.class.to_string())
                        .unwrap_or(e.to_string())
                })
        };
        // `localhost` is loopback: refused to a public registry, given to a loopback one.
        assert_eq!(resolve(&public, "localhost"), Err("loopback".to_string()));
        assert!(resolve(&guard(vec![NetClass::Loopback]), "localhost").is_ok_and(|n| n > 0));
        // The registry's own name resolves as it does.
        let own = TargetGuard {
            registry_host: "localhost".to_string(),
            registry_classes: Arc::new(vec![NetClass::Public]),
            proxy_hosts: Arc::default(),
        };
        assert!(resolve(&own, "localhost").is_ok_and(|n| n > 0));
        // The user's proxy is the user's choice, wherever it is.
        let proxied = TargetGuard {
            proxy_hosts: Arc::new(vec!["localhost".to_string()]),
            ..public.clone()
        };
        assert!(resolve(&proxied, "localhost").is_ok_and(|n| n > 0));
    }

    #[test]
    fn insecure_hosts_match_with_or_without_port() {
        let list = vec!["registry.lan".to_string(), "https://other.lan:5000/".to_string()];
        assert!(named_insecure("registry.lan:5000", &list));
        assert!(named_insecure("registry.lan", &list));
        assert!(named_insecure("other.lan:5000", &list));
        assert!(!named_insecure("other.lan:5001", &list));
        assert!(!named_insecure("ghcr.io", &list));
    }

    #[test]
    fn each_refusal_says_what_to_do() {
        let server = |code: u16| OciDistributionError::ServerError {
            code,
            url: "http://r.example/v2/team/app/manifests/1".to_string(),
            message: String::new(),
        };
        let text = |e: &OciDistributionError, origin: &Origin| {
            let err = registry_error("r.example", "team/app", "the manifest of tag 1", origin, e);
            let help = miette::Diagnostic::help(&err)
                .map(|h| h.to_string())
                .unwrap_or_default();
            format!("{err} / {help}")
        };
        let anonymous = Origin::Anonymous;
        let cases: [(u16, &[&str]); 5] = [
            (401, &["401", "docker login r.example", "MEMLINT_USERNAME"]),
            (403, &["403", "pull access to team/app"]),
            (
                404,
                &[
                    "404",
                    "skopeo list-tags docker://r.example/team/app",
                    "without credentials",
                ],
            ),
            (429, &["429", "wait and try again"]),
            (503, &["503", "try again later"]),
        ];
        for (code, needles) in cases {
            let t = text(&server(code), &anonymous);
            assert!(t.contains("registry r.example (repository team/app)"), "{t}");
            for n in needles {
                assert!(t.contains(n), "{code}: {n}: {t}");
            }
        }
        let t = text(&server(404), &Origin::Explicit);
        assert!(t.contains("an account that may not see it"), "{t}");
        assert!(transient(&server(502)) && !transient(&server(404)) && !transient(&server(429)));
    }

    #[test]
    fn document_types_are_read_or_inferred() {
        assert_eq!(
            document_media_type(br#"{"schemaVersion":2,"manifests":[]}"#).as_deref(),
            Some(MANIFEST_TYPES[0])
        );
        assert_eq!(
            document_media_type(br#"{"schemaVersion":2,"config":{},"layers":[]}"#).as_deref(),
            Some(MANIFEST_TYPES[1])
        );
        assert_eq!(document_media_type(br#"{"schemaVersion":1}"#), None);
    }
}
