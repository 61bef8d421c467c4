//! The Engine API's HTTP, through reqwest (hyper parses the answers): one GET per connection to
//! a unix socket or a plain tcp:// address, one deadline for the whole response head, and a
//! body read as a stream with an idle timeout between its pieces. The engine is local and
//! trusted to be an engine, but not to be well-behaved: the head is bounded (hyper: at most
//! [`MAX_HEADERS`] headers and about 400 KiB), a body that stops early is an error rather
//! than a shorter answer, and what memlint keeps of a body it reads with a bound
//! ([`Body::read_bounded`]).
//!
//! reqwest's client is async; a current-thread tokio runtime per request drives it, and the
//! body is read through `block_on` from the caller's thread, so the rest of memlint keeps
//! reading a plain [`Read`]. A current-thread runtime starts no threads, and the tokio
//! runtime is already in the tree for the registry.

use bytes::Bytes;
use std::error::Error as StdError;
use std::fmt;
use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;

/// Headers accepted in one answer, as before reqwest.
pub(crate) const MAX_HEADERS: usize = 128;

/// Where an engine listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Unix(PathBuf),
    Tcp { host: String, port: u16 },
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(p) => write!(f, "unix://{}", p.display()),
            Endpoint::Tcp { host, port } => write!(f, "tcp://{host}:{port}"),
        }
    }
}

/// Why a request failed: before anything was sent (nobody answers), or after.
#[derive(Debug)]
pub(crate) enum RequestError {
    Connect(io::Error),
    Exchange(io::Error),
}

/// Timeouts for one request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    /// Connecting (TCP only; a unix socket connects or fails at once).
    pub(crate) connect: Duration,
    /// From sending the request until the whole head has arrived: an engine may prepare an
    /// export before it answers, so this is long for exports.
    pub(crate) head: Duration,
    /// The longest pause between two pieces of the body.
    pub(crate) idle: Duration,
    /// The `--timeout` deadline of the image read (and the timeout it came from), which ends
    /// any wait that would outlast it.
    pub(crate) overall: Option<(std::time::Instant, Duration)>,
}

impl Timeouts {
    /// The wait `bound` allows now, and the timeout that ends it when the deadline is nearer.
    fn within(&self, bound: Duration) -> (Duration, Option<crate::sources::deadline::TimeoutHit>) {
        match self.overall {
            Some((at, t)) => {
                let left = at.saturating_duration_since(std::time::Instant::now());
                if left < bound {
                    (left, Some(crate::sources::deadline::TimeoutHit::Overall(t)))
                } else {
                    (bound, None)
                }
            }
            None => (bound, None),
        }
    }
}

/// An answer whose body is still on the wire.
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) reason: String,
    pub(crate) body: Body,
}

/// Sends `GET path` and waits for the answer's head; the body is left to the caller.
pub(crate) fn get(endpoint: &Endpoint, path: &str, timeouts: Timeouts) -> Result<Response, RequestError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map(Arc::new)
        .map_err(RequestError::Connect)?;
    let mut builder = reqwest::Client::builder()
        // The engine is reached directly: no proxy, no redirect, no connection kept for later.
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .http1_only()
        .http1_max_headers(MAX_HEADERS)
        .connect_timeout(timeouts.connect)
        .user_agent(concat!("memlint/", env!("CARGO_PKG_VERSION")));
    let url = match endpoint {
        Endpoint::Unix(socket) => {
            builder = builder.unix_socket(socket.as_path());
            // The engines ignore Host on a unix socket, but HTTP/1.1 requires one.
            format!("http://docker{path}")
        }
        Endpoint::Tcp { host, port } if host.contains(':') => format!("http://[{host}]:{port}{path}"),
        Endpoint::Tcp { host, port } => format!("http://{host}:{port}{path}"),
    };
    let client = builder
        .build()
        .map_err(|e| RequestError::Connect(io::Error::other(innermost(&e))))?;
    let request = client
        .get(&url)
        .header(reqwest::header::ACCEPT, "*/*")
        .header(reqwest::header::CONNECTION, "close");
    // One deadline for sending the request and receiving the whole head: a read timeout alone
    // restarts with every byte, so an engine sending one byte a minute would never time out.
    // The timer is made inside the runtime, whose clock it needs.
    let (head, overall) = timeouts.within(timeouts.head);
    let sent = runtime.block_on(async { tokio::time::timeout(head, request.send()).await });
    let response = match sent {
        Err(_) => {
            return Err(RequestError::Exchange(match overall {
                Some(hit) => hit.into(),
                None => io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the engine did not send its whole answer head in time",
                ),
            }))
        }
        Ok(Err(e)) if e.is_connect() => return Err(RequestError::Connect(connect_error(&e))),
        Ok(Err(e)) => return Err(RequestError::Exchange(head_error(&e))),
        Ok(Ok(r)) => r,
    };
    let status = response.status();
    let reason = match response.extensions().get::<hyper::ext::ReasonPhrase>() {
        Some(r) => String::from_utf8_lossy(r.as_bytes()).trim().to_string(),
        None => status.canonical_reason().unwrap_or("").to_string(),
    };
    let framing = framing(&response).map_err(RequestError::Exchange)?;
    Ok(Response {
        status: status.as_u16(),
        reason,
        body: Body {
            runtime,
            response: Some(response),
            timeouts,
            framing,
            received: 0,
            pending: Bytes::new(),
            state: BodyState::Open,
        },
    })
}

/// How the body's end is known, for the message when it comes too early.
#[derive(Clone, Copy, Debug)]
enum Framing {
    /// Nothing follows the head (204, 304, `Content-Length: 0`).
    Empty,
    Length(u64),
    Chunked,
    /// HTTP/1.0 style: the body is whatever comes before the connection closes.
    UntilClose,
}

fn framing(response: &reqwest::Response) -> io::Result<Framing> {
    let status = response.status().as_u16();
    if status == 204 || status == 304 {
        return Ok(Framing::Empty);
    }
    let headers = response.headers();
    let codings: Vec<String> = headers
        .get_all(reqwest::header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .split(',')
                .map(|c| c.trim().to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        .filter(|c| !c.is_empty())
        .collect();
    if !codings.is_empty() {
        // Chunked must come last; any other coding (gzip) is not something we asked for, and
        // hyper would hand it over undecoded.
        if codings.iter().any(|c| c != "chunked") {
            return Err(invalid(format!(
                "unsupported transfer coding {}",
                codings.join(", ")
            )));
        }
        return Ok(Framing::Chunked);
    }
    // hyper has checked Content-Length (digits only, repeated values equal).
    Ok(match response.content_length() {
        Some(0) => Framing::Empty,
        Some(n) => Framing::Length(n),
        None => Framing::UntilClose,
    })
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// The errors an error was caused by, itself first.
fn chain<'a>(e: &'a (dyn StdError + 'static)) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(e), |&e| e.source())
}

/// The most specific cause's text: reqwest and hyper wrap it in "error sending request".
fn innermost(e: &(dyn StdError + 'static)) -> String {
    chain(e).last().map_or_else(|| e.to_string(), |c| c.to_string())
}

fn find<'a, T: StdError + 'static>(e: &'a (dyn StdError + 'static)) -> Option<&'a T> {
    chain(e).find_map(|c| c.downcast_ref::<T>())
}

/// Why nothing could be sent, as the socket said it (`NotFound`, `ConnectionRefused`,
/// `PermissionDenied` get their own words from the caller).
fn connect_error(e: &reqwest::Error) -> io::Error {
    if let Some(io) = find::<io::Error>(e) {
        return io::Error::new(io.kind(), io.to_string());
    }
    if e.is_timeout() {
        return io::Error::new(io::ErrorKind::TimedOut, "connection timed out");
    }
    io::Error::other(innermost(e))
}

/// Why the answer's head did not come whole.
fn head_error(e: &reqwest::Error) -> io::Error {
    if let Some(h) = find::<hyper::Error>(e) {
        if h.is_parse() {
            let text = h.to_string();
            return if text.contains("too large") {
                invalid(format!(
                    "the response head is too large (more than {MAX_HEADERS} headers, or about 400 KiB)"
                ))
            } else {
                invalid(format!("the answer is not HTTP/1.x ({text})"))
            };
        }
        if h.is_incomplete_message() {
            return io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the connection closed before the whole status line and headers came",
            );
        }
    }
    match find::<io::Error>(e) {
        Some(io) => io::Error::new(io.kind(), io.to_string()),
        None => io::Error::other(innermost(e)),
    }
}

enum BodyState {
    Open,
    Done,
    /// The error that ended the body, given again to every later read.
    Failed(io::ErrorKind, String),
}

/// A response body as a stream.
pub(crate) struct Body {
    runtime: Arc<Runtime>,
    response: Option<reqwest::Response>,
    timeouts: Timeouts,
    framing: Framing,
    /// Bytes of the body received so far.
    received: u64,
    /// Received but not read yet.
    pending: Bytes,
    state: BodyState,
}

impl Body {
    /// The whole body, refusing more than `max` bytes.
    pub(crate) fn read_bounded(&mut self, max: u64) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.take(max.saturating_add(1)).read_to_end(&mut out)?;
        if out.len() as u64 > max {
            return Err(invalid(format!("the answer is longer than {max} bytes")));
        }
        Ok(out)
    }

    /// The next piece of the body, waiting at most the idle timeout; `None` at its end.
    fn next_piece(&mut self) -> io::Result<Option<Bytes>> {
        let Some(response) = self.response.as_mut() else {
            return Ok(None);
        };
        if matches!(self.framing, Framing::Empty) {
            return Ok(None);
        }
        let (idle, overall) = self.timeouts.within(self.timeouts.idle);
        match self
            .runtime
            .block_on(async { tokio::time::timeout(idle, response.chunk()).await })
        {
            Err(_) => Err(match overall {
                Some(hit) => hit.into(),
                None => io::Error::new(io::ErrorKind::TimedOut, "the engine stopped sending its answer"),
            }),
            Ok(Ok(piece)) => Ok(piece),
            Ok(Err(e)) => Err(self.body_error(&e)),
        }
    }

    /// A body that broke off, in the words of the framing it had.
    fn body_error(&self, e: &reqwest::Error) -> io::Error {
        match find::<io::Error>(e) {
            Some(io) if io.kind() == io::ErrorKind::UnexpectedEof => {
                let text = match self.framing {
                    Framing::Length(n) => format!(
                        "the connection closed {} bytes before the end of the answer",
                        n.saturating_sub(self.received)
                    ),
                    _ => "the connection closed in the middle of a chunk".to_string(),
                };
                io::Error::new(io::ErrorKind::UnexpectedEof, text)
            }
            Some(io) => io::Error::new(io.kind(), io.to_string()),
            None => io::Error::other(innermost(e)),
        }
    }
}

impl Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        while self.pending.is_empty() {
            match &self.state {
                BodyState::Done => return Ok(0),
                BodyState::Failed(kind, text) => return Err(io::Error::new(*kind, text.clone())),
                BodyState::Open => {}
            }
            match self.next_piece() {
                Ok(Some(piece)) => {
                    self.received += piece.len() as u64;
                    self.pending = piece;
                }
                Ok(None) => self.state = BodyState::Done,
                Err(e) => {
                    self.state = BodyState::Failed(e.kind(), e.to_string());
                    return Err(e);
                }
            }
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending[..n]);
        self.pending = self.pending.slice(n..);
        Ok(n)
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        // The connection belongs to the runtime: let it go inside it, before the runtime.
        let _inside = self.runtime.enter();
        self.response.take();
    }
}

/// Percent-encodes an image name for a request path. `/`, `:` and `@` stay as they are, as
/// the Docker client sends them (`localhost/app:1`, `app@sha256:…`); the engines route on them.
pub(crate) fn encode_path_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;
    use std::time::Instant;

    const TIMEOUTS: Timeouts = Timeouts {
        connect: Duration::from_secs(2),
        head: Duration::from_secs(5),
        idle: Duration::from_secs(5),
        overall: None,
    };

    /// A server that answers one request with `answer`, then closes the connection; returns
    /// its endpoint and the request it got.
    fn serve(answer: Vec<u8>) -> (Endpoint, std::thread::JoinHandle<String>) {
        serve_with(move |s| {
            let _ = s.write_all(&answer);
        })
    }

    /// A server that reads one request head, then lets `answer` write to the connection as it
    /// likes (slowly, in pieces) before closing it; returns its endpoint and the request.
    fn serve_with(
        answer: impl FnOnce(&mut std::net::TcpStream) + Send + 'static,
    ) -> (Endpoint, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut request = Vec::new();
            let mut byte = [0u8; 1];
            while !request.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
                request.push(byte[0]);
            }
            answer(&mut s);
            String::from_utf8_lossy(&request).into_owned()
        });
        let endpoint = Endpoint::Tcp {
            host: "127.0.0.1".into(),
            port,
        };
        (endpoint, server)
    }

    /// The status and whole body of an answer, or the error that stopped it.
    fn exchange(answer: &[u8]) -> io::Result<(u16, String, Vec<u8>)> {
        let (endpoint, server) = serve(answer.to_vec());
        let result = match get(&endpoint, "/_ping", TIMEOUTS) {
            Ok(mut r) => {
                let mut body = Vec::new();
                r.body.read_to_end(&mut body).map(|_| (r.status, r.reason, body))
            }
            Err(RequestError::Connect(e)) => panic!("connect: {e}"),
            Err(RequestError::Exchange(e)) => Err(e),
        };
        server.join().unwrap();
        result
    }

    #[test]
    fn the_head_has_one_deadline_however_slowly_it_trickles_in() {
        let (endpoint, server) = serve_with(|s| {
            // A header line that never ends, one byte every 50 ms (well inside any read
            // timeout), for up to 5 s.
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nX-Slow: ");
            for _ in 0..100 {
                std::thread::sleep(Duration::from_millis(50));
                if s.write_all(b"a").is_err() {
                    break;
                }
            }
        });
        let timeouts = Timeouts {
            connect: Duration::from_secs(2),
            head: Duration::from_millis(400),
            idle: Duration::from_secs(10),
            overall: None,
        };
        let started = Instant::now();
        let result = get(&endpoint, "/_ping", timeouts);
        let took = started.elapsed();
        match result {
            Err(RequestError::Exchange(e)) => assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}"),
            Err(RequestError::Connect(e)) => panic!("connect: {e}"),
            Ok(_) => panic!("a head that never ends was accepted"),
        }
        assert!(took < Duration::from_secs(2), "took {took:?}");
        server.join().unwrap();
    }

    #[test]
    fn a_body_that_pauses_longer_than_the_idle_timeout_fails() {
        let (endpoint, server) = serve_with(|s| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
            std::thread::sleep(Duration::from_secs(2));
        });
        let timeouts = Timeouts {
            idle: Duration::from_millis(300),
            ..TIMEOUTS
        };
        let mut response = get(&endpoint, "/_ping", timeouts)
            .map_err(|e| format!("{e:?}"))
            .unwrap();
        let mut body = Vec::new();
        let e = response.body.read_to_end(&mut body).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert_eq!(body, b"abc");
        // The failure stays: a later read does not pass for the end of the body.
        assert!(response.body.read(&mut [0u8; 4]).is_err());
        server.join().unwrap();
    }

    #[test]
    fn an_engine_that_sends_a_byte_now_and_then_ends_at_the_read_deadline() {
        use crate::sources::deadline::TimeoutHit;
        let (endpoint, server) = serve_with(|s| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
            // Each byte comes well within the idle timeout: only the deadline can end this.
            for _ in 0..20 {
                if s.write_all(b"a").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let limit = Duration::from_millis(500);
        let timeouts = Timeouts {
            idle: Duration::from_secs(5),
            overall: Some((Instant::now() + limit, limit)),
            ..TIMEOUTS
        };
        let started = Instant::now();
        let mut response = get(&endpoint, "/images/a/get", timeouts)
            .map_err(|e| format!("{e:?}"))
            .unwrap();
        let mut body = Vec::new();
        let e = response.body.read_to_end(&mut body).unwrap_err();
        assert_eq!(TimeoutHit::in_io(&e), Some(TimeoutHit::Overall(limit)), "{e}");
        assert!(
            started.elapsed() < Duration::from_millis(1500),
            "{:?}",
            started.elapsed()
        );
        assert!(!body.is_empty() && body.len() < 100);
        server.join().unwrap();
    }

    #[test]
    fn the_request_names_memlint_and_closes_the_connection() {
        let (endpoint, server) = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK".to_vec());
        let mut response = get(&endpoint, "/images/a%20b:1/json", TIMEOUTS)
            .map_err(|e| format!("{e:?}"))
            .unwrap();
        assert_eq!(response.body.read_bounded(2).unwrap(), b"OK");
        let request = server.join().unwrap().to_ascii_lowercase();
        assert!(
            request.starts_with("get /images/a%20b:1/json http/1.1\r\n"),
            "{request}"
        );
        assert!(request.contains("\r\nhost: 127.0.0.1:"), "{request}");
        assert!(request.contains("\r\nconnection: close\r\n"), "{request}");
        assert!(
            request.contains(concat!("\r\nuser-agent: memlint/", env!("CARGO_PKG_VERSION"))),
            "{request}"
        );
    }

    #[test]
    fn content_length_body() {
        let (status, reason, body) = exchange(
            b"HTTP/1.1 200 Fine\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhello, extra",
        )
        .unwrap();
        assert_eq!((status, reason.as_str()), (200, "Fine"));
        assert_eq!(body, b"hello");
        let e = exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(
            e.to_string(),
            "the connection closed 7 bytes before the end of the answer"
        );
        for bad in ["-1", "1x", "99999999999999999999999", "3, 4"] {
            let text = format!("HTTP/1.1 200 OK\r\nContent-Length: {bad}\r\n\r\nabcd");
            assert!(exchange(text.as_bytes()).is_err(), "{bad:?}");
        }
        // Repeated but equal values are allowed.
        let (_, _, body) = exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nab").unwrap();
        assert_eq!(body, b"ab");
    }

    #[test]
    fn chunked_body() {
        let (_, _, body) = exchange(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1;name=x\r\n,\r\n006\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\nignored",
        )
        .unwrap();
        assert_eq!(body, b"hello, world");
    }

    #[test]
    fn chunked_hostile() {
        let cases: &[&[u8]] = &[
            // A huge chunk that never arrives: an early end, not an allocation.
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc",
            // More than 64 bits.
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\nabc\r\n0\r\n\r\n",
            // Not hex.
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\nabc\r\n0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\nabc\r\n0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+3\r\nabc\r\n0\r\n\r\n",
            // Truncated: no last chunk, inside a chunk, inside a size line, inside the trailers.
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: 1\r\n",
            // Data longer than its size.
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n",
            // A coding we did not ask for.
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        ];
        for case in cases {
            assert!(exchange(case).is_err(), "{}", String::from_utf8_lossy(case));
        }
        let e = exchange(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab").unwrap_err();
        assert_eq!(e.to_string(), "the connection closed in the middle of a chunk");
        // An endless size line is cut, not kept.
        let mut long = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        long.extend(std::iter::repeat_n(b'0', 64 * 1024));
        assert!(exchange(&long).is_err());
        // Too many trailers.
        let mut many = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n".to_vec();
        for i in 0..1000 {
            many.extend_from_slice(format!("X-{i}: 1\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert!(exchange(&many).is_err());
    }

    #[test]
    fn hostile_heads() {
        let cases: &[&[u8]] = &[
            b"",
            b"HTTP/1.1 200 OK\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
            b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
            b"HTTP/1.1 20 OK\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 abc OK\r\n\r\n",
            b"HTTP/2 200\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n: empty name\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nA: 1\r\n folded\r\n\r\n",
        ];
        for case in cases {
            assert!(exchange(case).is_err(), "{}", String::from_utf8_lossy(case));
        }
        // What the engine's caller reads to tell a TLS port or a closed connection.
        let e = exchange(b"\x15\x03\x01\x00\x02\x02\x50").unwrap_err();
        assert!(e.to_string().contains("not HTTP"), "{e}");
        let e = exchange(b"HTTP/1.1 200 OK\r\n").unwrap_err();
        assert!(e.to_string().contains("status line"), "{e}");
        let mut long = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        long.extend(std::iter::repeat_n(b'a', 1 << 20));
        assert!(exchange(&long).is_err());
        let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..MAX_HEADERS + 1 {
            many.extend_from_slice(format!("X-{i}: 1\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        let e = exchange(&many).unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
    }

    #[test]
    fn interim_answers_and_bodiless_ones() {
        let (status, _, body) =
            exchange(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}")
                .unwrap();
        assert_eq!(status, 404);
        assert_eq!(body, b"{}");
        let (status, _, body) = exchange(b"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n").unwrap();
        assert_eq!(status, 204);
        assert!(body.is_empty());
        let (_, _, body) = exchange(b"HTTP/1.0 200 OK\r\n\r\nuntil close").unwrap();
        assert_eq!(body, b"until close");
    }

    #[test]
    fn bounded_bodies() {
        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789";
        for (max, fits) in [(5, false), (10, true)] {
            let (endpoint, server) = serve(answer.to_vec());
            let mut response = get(&endpoint, "/", TIMEOUTS)
                .map_err(|e| format!("{e:?}"))
                .unwrap();
            let read = response.body.read_bounded(max);
            assert_eq!(read.is_ok(), fits, "{max}");
            if fits {
                assert_eq!(read.unwrap(), b"0123456789");
            } else {
                assert!(read.unwrap_err().to_string().contains("longer than 5 bytes"));
            }
            drop(response);
            server.join().unwrap();
        }
    }

    #[test]
    fn nobody_listening_is_a_connect_error() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("nobody.sock");
        match get(&Endpoint::Unix(socket.clone()), "/_ping", TIMEOUTS) {
            Err(RequestError::Connect(e)) => assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}"),
            other => panic!("{:?}", other.map(|r| r.status)),
        }
        drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
        match get(&Endpoint::Unix(socket), "/_ping", TIMEOUTS) {
            Err(RequestError::Connect(e)) => assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}"),
            other => panic!("{:?}", other.map(|r| r.status)),
        }
    }

    #[test]
    fn a_unix_socket_carries_the_request() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("engine.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut request = Vec::new();
            let mut byte = [0u8; 1];
            while !request.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
                request.push(byte[0]);
            }
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK");
            String::from_utf8_lossy(&request).into_owned()
        });
        let mut response = get(&Endpoint::Unix(socket), "/_ping", TIMEOUTS)
            .map_err(|e| format!("{e:?}"))
            .unwrap();
        assert_eq!(response.body.read_bounded(100).unwrap(), b"OK");
        let request = server.join().unwrap().to_ascii_lowercase();
        assert!(request.starts_with("get /_ping http/1.1\r\n"), "{request}");
        assert!(request.contains("\r\nhost: docker\r\n"), "{request}");
    }

    #[test]
    fn path_encoding() {
        assert_eq!(encode_path_segment("app:1"), "app:1");
        assert_eq!(encode_path_segment("localhost/app:1"), "localhost/app:1");
        assert_eq!(encode_path_segment("app@sha256:abc"), "app@sha256:abc");
        assert_eq!(encode_path_segment("a b?c#d%e"), "a%20b%3Fc%23d%25e");
        assert_eq!(encode_path_segment("é"), "%C3%A9");
    }
}
