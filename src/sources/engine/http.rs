//! Just enough HTTP/1.1 to talk to a Docker-compatible engine: one GET per connection
//! (`Connection: close`), a bounded response head, and a body read as a stream (by
//! Content-Length, chunked, or until the connection closes). The engine is local and trusted
//! to be an engine, but not to be well-behaved: every line and header is bounded, and a body
//! that stops early is an error rather than a shorter answer.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The longest status line, header line or chunk-size line accepted.
const MAX_LINE: usize = 8 * 1024;
/// The whole response head (status line and headers).
const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 128;
/// Trailer lines after the last chunk; engines send none.
const MAX_TRAILERS: usize = 32;
/// 1xx answers skipped before the real one.
const MAX_INTERIM: usize = 4;

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

/// A connected socket of either kind.
enum Socket {
    Unix(UnixStream),
    Tcp(TcpStream),
}

/// A connected socket, with an optional deadline that every read must finish by (the response
/// head must arrive whole in time, however slowly its bytes trickle in).
pub(crate) struct Conn {
    socket: Socket,
    deadline: Option<Instant>,
}

impl Conn {
    pub(crate) fn connect(endpoint: &Endpoint, timeout: Duration) -> io::Result<Conn> {
        let socket = match endpoint {
            Endpoint::Unix(path) => UnixStream::connect(path).map(Socket::Unix)?,
            Endpoint::Tcp { host, port } => {
                let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"));
                let mut connected = None;
                for addr in (host.as_str(), *port).to_socket_addrs()? {
                    match TcpStream::connect_timeout(&addr, timeout) {
                        Ok(s) => {
                            connected = Some(s);
                            break;
                        }
                        Err(e) => last = e,
                    }
                }
                Socket::Tcp(connected.ok_or(last)?)
            }
        };
        Ok(Conn {
            socket,
            deadline: None,
        })
    }

    pub(crate) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match &self.socket {
            Socket::Unix(s) => s.set_read_timeout(t),
            Socket::Tcp(s) => s.set_read_timeout(t),
        }
    }

    fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match &self.socket {
            Socket::Unix(s) => s.set_write_timeout(t),
            Socket::Tcp(s) => s.set_write_timeout(t),
        }
    }

    /// Every read from now on must end by `deadline` (`None`: only the read timeout holds).
    fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(deadline) = self.deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the engine did not send its whole answer head in time",
                ));
            }
            self.set_read_timeout(Some(left))?;
        }
        match &mut self.socket {
            Socket::Unix(s) => s.read(buf),
            Socket::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.socket {
            Socket::Unix(s) => s.write(buf),
            Socket::Tcp(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match &mut self.socket {
            Socket::Unix(s) => s.flush(),
            Socket::Tcp(s) => s.flush(),
        }
    }
}

/// Why a request failed: before anything was sent (nobody answers), or after.
#[derive(Debug)]
pub(crate) enum RequestError {
    Connect(io::Error),
    Exchange(io::Error),
}

/// Status line and headers.
#[derive(Debug)]
pub(crate) struct Head {
    pub status: u16,
    pub reason: String,
    /// Names lowercased, values trimmed, in the order received.
    pub headers: Vec<(String, String)>,
}

#[cfg(test)]
impl Head {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An answer whose body is still on the wire.
pub(crate) struct Response<R> {
    pub head: Head,
    pub body: Body<R>,
}

/// Timeouts for one request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    /// Connecting (TCP only; a unix socket connects or fails at once).
    pub connect: Duration,
    /// From sending the request until the whole head has arrived: an engine may prepare an
    /// export before it answers, so this is long for exports.
    pub head: Duration,
    /// The longest pause between two reads of the body.
    pub idle: Duration,
}

/// Sends `GET path` and reads the answer's head; the body is left to the caller.
pub(crate) fn get(
    endpoint: &Endpoint,
    path: &str,
    timeouts: Timeouts,
) -> Result<Response<BufReader<Conn>>, RequestError> {
    let mut conn = Conn::connect(endpoint, timeouts.connect).map_err(RequestError::Connect)?;
    let exchange = RequestError::Exchange;
    // One deadline for sending the request and receiving the whole head: a read timeout alone
    // restarts with every byte, so an engine sending one byte a minute would never time out.
    conn.set_deadline(Some(Instant::now() + timeouts.head));
    conn.set_write_timeout(Some(timeouts.head)).map_err(exchange)?;
    conn.set_read_timeout(Some(timeouts.head)).map_err(exchange)?;
    let host = match endpoint {
        // The engines ignore Host on a unix socket, but HTTP/1.1 requires one.
        Endpoint::Unix(_) => "docker".to_string(),
        Endpoint::Tcp { host, port } if host.contains(':') => format!("[{host}]:{port}"),
        Endpoint::Tcp { host, port } => format!("{host}:{port}"),
    };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: memlint/{}\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    );
    conn.write_all(request.as_bytes()).map_err(exchange)?;
    conn.flush().map_err(exchange)?;
    let mut reader = BufReader::with_capacity(64 * 1024, conn);
    let head = read_head(&mut reader).map_err(exchange)?;
    reader.get_mut().set_deadline(None);
    reader
        .get_ref()
        .set_read_timeout(Some(timeouts.idle))
        .map_err(exchange)?;
    let body = Body::new(reader, &head).map_err(exchange)?;
    Ok(Response { head, body })
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// One line ending in LF (a CR before it is dropped), at most `max` bytes. The line is taken
/// from the buffer piece by piece so an endless line costs `max` bytes, not all of it.
pub(crate) fn read_line<R: BufRead>(r: &mut R, max: usize, what: &str) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the connection closed in the middle of the {what}"),
            ));
        }
        let (take, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if line.len() + take > max + 2 {
            return Err(invalid(format!("the {what} is longer than {max} bytes")));
        }
        line.extend_from_slice(&buf[..take]);
        r.consume(take);
        if done {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.len() > max {
                return Err(invalid(format!("the {what} is longer than {max} bytes")));
            }
            return Ok(line);
        }
    }
}

/// Reads the status line and headers, skipping interim (1xx) answers.
pub(crate) fn read_head<R: BufRead>(r: &mut R) -> io::Result<Head> {
    for _ in 0..=MAX_INTERIM {
        let head = read_one_head(r)?;
        // 101 switches protocols and is never the answer to a plain GET either.
        if !(100..200).contains(&head.status) {
            return Ok(head);
        }
    }
    Err(invalid(format!("more than {MAX_INTERIM} interim (1xx) answers")))
}

fn read_one_head<R: BufRead>(r: &mut R) -> io::Result<Head> {
    let status_line = read_line(r, MAX_LINE, "status line")?;
    let text = std::str::from_utf8(&status_line)
        .map_err(|_| invalid("the answer is not HTTP (the status line is not text)"))?;
    let mut parts = text.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    let code = parts.next().unwrap_or("");
    let reason = parts.next().unwrap_or("").trim().to_string();
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(invalid(format!(
            "the answer is not HTTP/1.x (it starts with {:?})",
            text.chars().take(32).collect::<String>()
        )));
    }
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(format!("bad status code {code:?}")));
    }
    let status: u16 = code
        .parse()
        .map_err(|_| invalid(format!("bad status code {code:?}")))?;
    let mut headers = Vec::new();
    let mut total = status_line.len();
    loop {
        let line = read_line(r, MAX_LINE, "header line")?;
        if line.is_empty() {
            break;
        }
        total += line.len() + 2;
        if total > MAX_HEAD {
            return Err(invalid(format!(
                "the response head is longer than {MAX_HEAD} bytes"
            )));
        }
        if headers.len() == MAX_HEADERS {
            return Err(invalid(format!("more than {MAX_HEADERS} headers")));
        }
        if line[0] == b' ' || line[0] == b'\t' {
            return Err(invalid("a folded header line (obsolete in HTTP/1.1)"));
        }
        let line = String::from_utf8_lossy(&line);
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| invalid(format!("a header line without a colon: {:?}", truncate(&line))))?;
        if name.is_empty() || name.bytes().any(|b| b <= b' ' || b >= 0x7f) {
            return Err(invalid(format!("a bad header name {:?}", truncate(name))));
        }
        headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
    }
    Ok(Head {
        status,
        reason,
        headers,
    })
}

fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

/// A response body as a stream.
pub(crate) struct Body<R> {
    kind: BodyKind<R>,
}

enum BodyKind<R> {
    Empty,
    Length {
        r: R,
        left: u64,
    },
    Chunked(Chunked<R>),
    /// HTTP/1.0 style: the body is whatever comes before the connection closes.
    UntilClose(R),
}

impl<R: BufRead> Body<R> {
    pub(crate) fn new(r: R, head: &Head) -> io::Result<Body<R>> {
        if head.status == 204 || head.status == 304 {
            return Ok(Body {
                kind: BodyKind::Empty,
            });
        }
        let codings: Vec<String> = head
            .headers
            .iter()
            .filter(|(n, _)| n == "transfer-encoding")
            .flat_map(|(_, v)| v.split(','))
            .map(|c| c.trim().to_ascii_lowercase())
            .filter(|c| !c.is_empty())
            .collect();
        if !codings.is_empty() {
            // Chunked must come last; any other coding (gzip) is not something we asked for.
            if codings.iter().any(|c| c != "chunked") {
                return Err(invalid(format!(
                    "unsupported transfer coding {}",
                    codings.join(", ")
                )));
            }
            return Ok(Body {
                kind: BodyKind::Chunked(Chunked {
                    r,
                    state: ChunkState::Size,
                }),
            });
        }
        let mut length: Option<u64> = None;
        for (_, v) in head.headers.iter().filter(|(n, _)| n == "content-length") {
            for part in v.split(',') {
                let part = part.trim();
                if part.is_empty() || part.len() > 19 || !part.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(invalid(format!("a bad Content-Length {:?}", truncate(v))));
                }
                let n: u64 = part
                    .parse()
                    .map_err(|_| invalid(format!("a bad Content-Length {:?}", truncate(v))))?;
                if length.is_some_and(|l| l != n) {
                    return Err(invalid("several different Content-Length values"));
                }
                length = Some(n);
            }
        }
        Ok(Body {
            kind: match length {
                Some(0) => BodyKind::Empty,
                Some(left) => BodyKind::Length { r, left },
                None => BodyKind::UntilClose(r),
            },
        })
    }

    /// The whole body, refusing more than `max` bytes.
    pub(crate) fn read_bounded(&mut self, max: u64) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.take(max.saturating_add(1)).read_to_end(&mut out)?;
        if out.len() as u64 > max {
            return Err(invalid(format!("the answer is longer than {max} bytes")));
        }
        Ok(out)
    }
}

impl<R: BufRead> Read for Body<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.kind {
            BodyKind::Empty => Ok(0),
            BodyKind::Length { r, left } => {
                if *left == 0 || buf.is_empty() {
                    return Ok(0);
                }
                let want = buf.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                let n = r.read(&mut buf[..want])?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("the connection closed {left} bytes before the end of the answer"),
                    ));
                }
                *left -= n as u64;
                Ok(n)
            }
            BodyKind::Chunked(c) => c.read(buf),
            BodyKind::UntilClose(r) => r.read(buf),
        }
    }
}

enum ChunkState {
    /// Before a chunk-size line.
    Size,
    /// Inside a chunk, with this many bytes left.
    Data(u64),
    /// After a chunk's data, before its CRLF.
    DataEnd,
    /// After the last (zero) chunk.
    Trailers,
    Done,
}

/// The chunked transfer coding, decoded as it is read.
pub(crate) struct Chunked<R> {
    r: R,
    state: ChunkState,
}

/// The size of a chunk-size line (`1a2b;ext=1`).
fn chunk_size(line: &[u8]) -> io::Result<u64> {
    let end = line.iter().position(|&b| b == b';').unwrap_or(line.len());
    let hex = line[..end].trim_ascii();
    let digits = {
        let first = hex.iter().position(|&b| b != b'0').unwrap_or(hex.len());
        // Leading zeros are allowed; what is left must fit 64 bits.
        if hex.is_empty() {
            hex
        } else if first == hex.len() {
            &hex[hex.len() - 1..]
        } else {
            &hex[first..]
        }
    };
    if digits.is_empty() || digits.len() > 16 || !digits.iter().all(u8::is_ascii_hexdigit) {
        return Err(invalid(format!(
            "a bad chunk size {:?}",
            String::from_utf8_lossy(&line[..line.len().min(32)])
        )));
    }
    // Only ASCII hex digits are left, at most 16 of them.
    let text = std::str::from_utf8(digits).map_err(|_| invalid("a bad chunk size"))?;
    u64::from_str_radix(text, 16).map_err(|_| invalid("a bad chunk size"))
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            match self.state {
                ChunkState::Size => {
                    let line = read_line(&mut self.r, MAX_LINE, "chunk size line")?;
                    let size = chunk_size(&line)?;
                    self.state = if size == 0 {
                        ChunkState::Trailers
                    } else {
                        ChunkState::Data(size)
                    };
                }
                ChunkState::Data(left) => {
                    let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    let n = self.r.read(&mut buf[..want])?;
                    if n == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the connection closed in the middle of a chunk",
                        ));
                    }
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(left)
                    };
                    return Ok(n);
                }
                ChunkState::DataEnd => {
                    let line = read_line(&mut self.r, MAX_LINE, "end of a chunk")?;
                    if !line.is_empty() {
                        return Err(invalid("a chunk is longer than its size says"));
                    }
                    self.state = ChunkState::Size;
                }
                ChunkState::Trailers => {
                    let mut n = 0;
                    while !read_line(&mut self.r, MAX_LINE, "trailer")?.is_empty() {
                        n += 1;
                        if n > MAX_TRAILERS {
                            return Err(invalid(format!("more than {MAX_TRAILERS} trailer lines")));
                        }
                    }
                    self.state = ChunkState::Done;
                }
                ChunkState::Done => return Ok(0),
            }
        }
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
    use std::io::Cursor;

    fn response(bytes: &[u8]) -> io::Result<(Head, Vec<u8>)> {
        let mut r = Cursor::new(bytes.to_vec());
        let head = read_head(&mut r)?;
        let mut body = Body::new(r, &head)?;
        let mut out = Vec::new();
        body.read_to_end(&mut out)?;
        Ok((head, out))
    }

    #[test]
    fn the_head_has_one_deadline_however_slowly_it_trickles_in() {
        use std::net::TcpListener;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let _ = s.read(&mut request);
            // A header line that never ends, one byte every 50 ms (well inside the read
            // timeout), for up to 5 s.
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nX-Slow: ");
            for _ in 0..100 {
                std::thread::sleep(Duration::from_millis(50));
                if s.write_all(b"a").is_err() {
                    break;
                }
            }
        });
        let endpoint = Endpoint::Tcp {
            host: "127.0.0.1".into(),
            port,
        };
        let timeouts = Timeouts {
            connect: Duration::from_secs(2),
            head: Duration::from_millis(400),
            idle: Duration::from_secs(10),
        };
        let started = Instant::now();
        let result = get(&endpoint, "/_ping", timeouts);
        let took = started.elapsed();
        match result {
            Err(RequestError::Exchange(e)) => assert!(
                matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock),
                "{e}"
            ),
            Err(RequestError::Connect(e)) => panic!("connect: {e}"),
            Ok(_) => panic!("a head that never ends was accepted"),
        }
        assert!(took < Duration::from_secs(2), "took {took:?}");
        server.join().unwrap();
    }

    #[test]
    fn content_length_body() {
        let (head, body) = response(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhello, extra",
        )
        .unwrap();
        assert_eq!(head.status, 200);
        assert_eq!(head.reason, "OK");
        assert_eq!(head.header("content-type"), Some("application/json"));
        assert_eq!(body, b"hello");
    }

    #[test]
    fn content_length_short_is_an_error() {
        let e = response(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        for bad in ["-1", "1x", "99999999999999999999999", "", "3, 4"] {
            let text = format!("HTTP/1.1 200 OK\r\nContent-Length: {bad}\r\n\r\nabcd");
            assert!(response(text.as_bytes()).is_err(), "{bad:?}");
        }
        // Repeated but equal values are allowed.
        let (_, body) = response(b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nab").unwrap();
        assert_eq!(body, b"ab");
    }

    #[test]
    fn chunked_body() {
        let (_, body) = response(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1;name=x\r\n,\r\n006\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\nignored",
        )
        .unwrap();
        assert_eq!(body, b"hello, world");
        // LF-only line ends are accepted, as most servers do.
        let (_, body) = response(b"HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n").unwrap();
        assert_eq!(body, b"abc");
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
            assert!(response(case).is_err(), "{}", String::from_utf8_lossy(case));
        }
        // An endless size line is cut at the line limit.
        let mut long = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        long.extend(std::iter::repeat_n(b'0', MAX_LINE * 4));
        let e = response(&long).unwrap_err();
        assert!(e.to_string().contains("longer than"), "{e}");
        // Too many trailers.
        let mut many = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n".to_vec();
        for _ in 0..100 {
            many.extend_from_slice(b"X: 1\r\n");
        }
        many.extend_from_slice(b"\r\n");
        assert!(response(&many).is_err());
    }

    #[test]
    fn chunk_sizes() {
        assert_eq!(chunk_size(b"0").unwrap(), 0);
        assert_eq!(chunk_size(b"000").unwrap(), 0);
        assert_eq!(chunk_size(b"1A; x=y").unwrap(), 26);
        assert_eq!(chunk_size(b"00000000000000000000ff").unwrap(), 255);
        assert_eq!(chunk_size(b"ffffffffffffffff").unwrap(), u64::MAX);
        assert_eq!(chunk_size(b"a ").unwrap(), 10);
        for bad in [&b""[..], b";x", b"0x10", b"1 2", b"g", b"\xff"] {
            assert!(chunk_size(bad).is_err(), "{bad:?}");
        }
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
            assert!(response(case).is_err(), "{}", String::from_utf8_lossy(case));
        }
        let mut long = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        long.extend(std::iter::repeat_n(b'a', MAX_LINE * 2));
        assert!(response(&long).is_err());
        let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..MAX_HEADERS + 1 {
            many.extend_from_slice(format!("X-{i}: 1\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert!(response(&many).is_err());
        let mut big = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..100 {
            big.extend_from_slice(format!("X-{i}: {}\r\n", "v".repeat(1000)).as_bytes());
        }
        big.extend_from_slice(b"\r\n");
        assert!(response(&big).is_err());
    }

    #[test]
    fn interim_answers_and_bodiless_ones() {
        let (head, body) =
            response(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}")
                .unwrap();
        assert_eq!(head.status, 404);
        assert_eq!(body, b"{}");
        let (head, body) = response(b"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n").unwrap();
        assert_eq!(head.status, 204);
        assert!(body.is_empty());
        let (_, body) = response(b"HTTP/1.0 200 OK\r\n\r\nuntil close").unwrap();
        assert_eq!(body, b"until close");
        let endless = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(MAX_INTERIM + 2);
        assert!(response(&endless).is_err());
    }

    #[test]
    fn bounded_bodies() {
        let mut r = Cursor::new(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789".to_vec());
        let head = read_head(&mut r).unwrap();
        let mut body = Body::new(r, &head).unwrap();
        assert!(body.read_bounded(5).is_err());
        let mut r = Cursor::new(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789".to_vec());
        let head = read_head(&mut r).unwrap();
        let mut body = Body::new(r, &head).unwrap();
        assert_eq!(body.read_bounded(10).unwrap(), b"0123456789");
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
