//! One layer, read once as a stream: the compressed bytes are hashed (the blob digest), then
//! decompressed (gzip, zstd or none, told by magic bytes) and hashed again (the diff_id), and
//! each tar entry becomes a [`LayerEntry`] with the contents an interest asked for.
//!
//! Every input is untrusted: the [`Limits`] bound the memory and time one layer (and one image,
//! through a shared [`Budget`]) may take, and a limit that is hit is named in the error.

use super::entries::Entries;
pub(crate) use super::entry::{EntryKind, LayerEntry};
pub(crate) use super::gzip::GzipCrc;
use super::gzip::GzipReader;
use super::interest::{Interests, SCRIPT_CAP};
use super::limits::{Limits, RATIO_GRACE};
use crate::digest::{Digest, HashingReader};
use crate::elf::{ElfHead, ElfInfo, ElfScanner, HEAD_LEN};
use sha2::{Digest as _, Sha256};
use std::cell::Cell;
use std::io::{self, BufReader, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

/// What the layers of one image (or of one streamed archive) have taken so far, shared by the
/// threads that read them, so that the image-wide limits hold however the work is split.
#[derive(Debug, Default)]
pub(crate) struct Budget {
    kept: AtomicU64,
    metadata: AtomicU64,
}

impl Budget {
    pub(crate) fn new() -> Budget {
        Budget::default()
    }

    #[cfg(test)]
    /// Bytes of kept contents so far.
    pub(crate) fn kept(&self) -> u64 {
        self.kept.load(Ordering::Relaxed)
    }

    /// Takes `n` kept bytes; fails (taking nothing) when that would pass `cap`.
    pub(crate) fn take_kept(&self, n: u64, cap: u64) -> Result<(), LayerError> {
        take(&self.kept, n, cap).map_err(|_| LayerError::Limit {
            name: "max_kept_bytes_total",
            limit: cap,
            what: "kept file contents of the image",
        })
    }

    /// Takes what a layer that was not read here (the layer cache) holds, with the per-layer
    /// limits a read would have checked, so that the image-wide limits hold however each layer
    /// was obtained.
    pub(crate) fn take_layer(&self, diff: &LayerDiff, limits: &Limits) -> Result<(), LayerError> {
        if diff.uncompressed_size > limits.max_layer_bytes {
            return Err(LayerError::Limit {
                name: "max_layer_bytes",
                limit: limits.max_layer_bytes,
                what: "the unpacked size of the layer",
            });
        }
        if diff.entries.len() as u64 > limits.max_entries_per_layer {
            return Err(LayerError::Limit {
                name: "max_entries_per_layer",
                limit: limits.max_entries_per_layer,
                what: "the number of entries in the layer",
            });
        }
        let kept: u64 = diff.entries.kept().map(|c| c.bytes.len() as u64).sum();
        if kept > limits.max_kept_bytes_per_layer {
            return Err(LayerError::Limit {
                name: "max_kept_bytes_per_layer",
                limit: limits.max_kept_bytes_per_layer,
                what: "kept file contents of the layer",
            });
        }
        self.take_kept(kept, limits.max_kept_bytes_total)?;
        let metadata = diff.entries.metadata_bytes() + diff.entries.len() as u64 * super::NODE_BYTES;
        self.take_metadata(metadata, limits.max_metadata_bytes)
    }

    fn take_metadata(&self, n: u64, cap: u64) -> Result<(), LayerError> {
        take(&self.metadata, n, cap).map_err(|_| LayerError::Limit {
            name: "max_metadata_bytes",
            limit: cap,
            what: "paths, links and ELF facts of the image's entries (estimated memory)",
        })
    }
}

fn take(counter: &AtomicU64, n: u64, cap: u64) -> Result<(), ()> {
    counter
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |have| {
            have.checked_add(n).filter(|&total| total <= cap)
        })
        .map(|_| ())
        .map_err(|_| ())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Compression {
    None,
    Gzip,
    Zstd,
    Xz,
    Bzip2,
}

impl Compression {
    /// Tells the compression from the first bytes of a blob.
    pub(crate) fn sniff(head: &[u8]) -> Option<Compression> {
        if head.starts_with(&[0x1f, 0x8b]) {
            Some(Compression::Gzip)
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Some(Compression::Zstd)
        } else if super::xz_bzip2::is_xz(head) {
            Some(Compression::Xz)
        } else if super::xz_bzip2::is_bzip2(head) {
            Some(Compression::Bzip2)
        } else if head.len() >= 262 && &head[257..262] == b"ustar" {
            Some(Compression::None)
        } else if head.len() >= 512 && tar_checksum_ok(&head[..512]) {
            // Pre-POSIX tar headers have no magic; their checksum still tells them apart.
            Some(Compression::None)
        } else if !head.is_empty() && head.iter().all(|&b| b == 0) {
            // An empty layer: just the two zero end-of-archive blocks.
            Some(Compression::None)
        } else {
            None
        }
    }
}

/// The first bytes of a stream that is not a tar archive, for a message: in hex (never the
/// bytes themselves, which may be anything) and, for a few common formats, their name.
pub(crate) fn describe_start(head: &[u8]) -> String {
    if head.is_empty() {
        return "it is empty".to_string();
    }
    let hex: Vec<String> = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let known = [
        (&[0x1f, 0x8b][..], "gzip"),
        (&[0x28, 0xb5, 0x2f, 0xfd][..], "zstd"),
        (&[0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00][..], "xz"),
        (&b"BZh"[..], "bzip2"),
        (&b"PK\x03\x04"[..], "zip"),
        (&b"{"[..], "JSON"),
    ];
    match known.iter().find(|(magic, _)| head.starts_with(magic)) {
        Some((_, name)) => format!("it starts with bytes {} ({name})", hex.join(" ")),
        None => format!("it starts with bytes {}", hex.join(" ")),
    }
}

/// What the tar reader found wrong, without the header bytes it quotes: its messages embed
/// the raw field and the entry's name ("numeric field did not have utf-8 text: ␛… when
/// getting cksum for …"), which may be any binary. Other messages are kept, with control
/// characters and undecodable bytes escaped.
pub(crate) fn tar_reason(e: &io::Error) -> String {
    let text = e.to_string();
    if let Some((_, rest)) = text.split_once(" when getting ") {
        let field = rest.split_whitespace().next().unwrap_or("a");
        let field = if field.chars().all(|c| c.is_ascii_alphabetic()) {
            field
        } else {
            "a"
        };
        return format!("a tar header is damaged: its {field} field is not a number");
    }
    if text.starts_with("numeric field") {
        return "a tar header is damaged: a numeric field is not a number".to_string();
    }
    printable(&text)
}

/// Text read from an input (a member or entry name), for a message: control characters and
/// undecodable bytes escaped (`\u{1b}`), so no error carries a terminal escape or raw bytes.
pub(crate) fn printable(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escape = c.is_control() || c == char::REPLACEMENT_CHARACTER;
            let shown: Vec<char> = if escape {
                c.escape_unicode().collect()
            } else {
                vec![c]
            };
            shown
        })
        .collect()
}

fn tar_checksum_ok(block: &[u8]) -> bool {
    let field = &block[148..156];
    let text: String = field
        .iter()
        .take_while(|&&b| b != 0 && b != b' ')
        .map(|&b| b as char)
        .collect();
    let Ok(stored) = u32::from_str_radix(text.trim(), 8) else {
        return false;
    };
    let sum: u32 = block
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                b' ' as u32
            } else {
                b as u32
            }
        })
        .sum();
    stored == sum && block[0] != 0
}

/// A layer's contribution to the image: its entries in archive order and its digests.
#[derive(Clone, Debug)]
pub(crate) struct LayerDiff {
    pub(crate) entries: Entries,
    /// sha256 of the blob as stored (compressed).
    pub(crate) blob_digest: Digest,
    pub(crate) blob_size: u64,
    /// sha256 of the uncompressed tar (the config's diff_id).
    pub(crate) diff_id: Digest,
    pub(crate) uncompressed_size: u64,
    pub(crate) compression: Compression,
}

impl LayerDiff {
    /// Entries that were not read from a blob (a root folder on disk, tests): no digests.
    pub(crate) fn unhashed(entries: Vec<LayerEntry>) -> LayerDiff {
        LayerDiff {
            entries: Entries::from(entries),
            blob_digest: Digest::of(b""),
            blob_size: 0,
            diff_id: Digest::of(b""),
            uncompressed_size: 0,
            compression: Compression::None,
        }
    }
}

/// Why a layer could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LayerError {
    #[error("it is not a tar archive, nor a gzip, zstd, xz or bzip2 compressed one")]
    NotATar,
    #[error("{}", tar_reason(.0))]
    Io(#[from] io::Error),
    #[error("entry `{}`: {}", printable(.path), tar_reason(.source))]
    Entry { path: String, source: io::Error },
    /// A limit of [`Limits`] was hit; `name` is its field name.
    #[error("{what} passed the {name} limit ({limit})")]
    Limit {
        name: &'static str,
        limit: u64,
        what: &'static str,
    },
    #[error("entry `{}…` passed the {name} limit ({limit} bytes)", printable(.start))]
    PathTooLong {
        name: &'static str,
        limit: usize,
        start: String,
    },
    /// A whiteout whose target is not inside its folder: `.wh.` followed by nothing, `.` or
    /// `..`. containerd refuses the layer (`errInvalidArchive`).
    #[error(
        "entry `{}` is an invalid whiteout: what it would delete (`{}`) is not inside its folder",
        printable(.entry),
        printable(.target)
    )]
    InvalidWhiteout { entry: String, target: String },
}

impl LayerError {
    #[cfg(test)]
    /// The name of the limit that stopped the read, when one did.
    pub(crate) fn limit_name(&self) -> Option<&'static str> {
        match self {
            LayerError::Limit { name, .. } | LayerError::PathTooLong { name, .. } => Some(name),
            LayerError::Io(e) | LayerError::Entry { source: e, .. } => e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<LimitHit>())
                .map(|hit| hit.name),
            LayerError::NotATar | LayerError::InvalidWhiteout { .. } => None,
        }
    }

    /// `Io` errors that carry a [`LimitHit`] (raised deep inside a decoder or the tar reader)
    /// become `Limit` errors.
    fn lift(self) -> LayerError {
        let hit = match &self {
            LayerError::Io(e) | LayerError::Entry { source: e, .. } => e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<LimitHit>())
                .cloned(),
            _ => None,
        };
        match hit {
            Some(h) => LayerError::Limit {
                name: h.name,
                limit: h.limit,
                what: h.what,
            },
            None => self,
        }
    }
}

/// A limit hit inside a reader, carried through `io::Error` to [`LayerError::lift`].
#[derive(Clone, Debug, thiserror::Error)]
#[error("{what} passed the {name} limit ({limit})")]
pub(crate) struct LimitHit {
    pub(crate) name: &'static str,
    pub(crate) limit: u64,
    pub(crate) what: &'static str,
}

impl From<LimitHit> for io::Error {
    fn from(hit: LimitHit) -> io::Error {
        io::Error::other(hit)
    }
}

const BUF: usize = 256 * 1024;

/// Counts the stored bytes read, for the compression ratio check.
struct Counting<'a, R> {
    inner: R,
    count: &'a Cell<u64>,
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

/// Stops a layer that unpacks to more than `max_layer_bytes`, or more than
/// `max_compression_ratio` times its stored size.
struct Unpacked<'a, R> {
    inner: R,
    stored: &'a Cell<u64>,
    unpacked: u64,
    max_bytes: u64,
    max_ratio: u64,
}

impl<'a, R> Unpacked<'a, R> {
    fn new(inner: R, stored: &'a Cell<u64>, limits: &Limits) -> Self {
        Unpacked {
            inner,
            stored,
            unpacked: 0,
            max_bytes: limits.max_layer_bytes,
            max_ratio: limits.max_compression_ratio,
        }
    }
}

impl<R: Read> Read for Unpacked<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.unpacked += n as u64;
        if self.unpacked > self.max_bytes {
            return Err(LimitHit {
                name: "max_layer_bytes",
                limit: self.max_bytes,
                what: "the unpacked size of the layer",
            }
            .into());
        }
        if self.max_ratio > 0
            && self.unpacked > RATIO_GRACE
            && self.unpacked / self.stored.get().max(1) > self.max_ratio
        {
            return Err(LimitHit {
                name: "max_compression_ratio",
                limit: self.max_ratio,
                what: "the layer's unpacked-to-stored size ratio (a compression bomb?)",
            }
            .into());
        }
        Ok(n)
    }
}

#[cfg(test)]
/// Reads a whole layer blob, with a budget of its own, checking a gzip stream's CRC-32.
pub(crate) fn read_layer(
    blob: impl Read,
    interests: &Interests,
    limits: &Limits,
) -> Result<LayerDiff, LayerError> {
    read_layer_in(blob, interests, limits, &Budget::new(), GzipCrc::Check)
}

/// Reads a whole layer blob, taking image-wide resources from `budget`. `crc` says whether a
/// gzip blob's CRC-32 is computed: skip it only when the caller checks the blob's digest.
pub(crate) fn read_layer_in(
    blob: impl Read,
    interests: &Interests,
    limits: &Limits,
    budget: &Budget,
    crc: GzipCrc,
) -> Result<LayerDiff, LayerError> {
    read_layer_inner(blob, interests, limits, budget, crc).map_err(LayerError::lift)
}

fn read_layer_inner(
    blob: impl Read,
    interests: &Interests,
    limits: &Limits,
    budget: &Budget,
    crc: GzipCrc,
) -> Result<LayerDiff, LayerError> {
    // The blob digest is taken on a thread of its own, fed copies of the stored bytes as they
    // are read: the thread that unpacks does not hash them too. Its channel is bounded like the
    // pipeline's, and it ends when the read drops its end, whether the read succeeded or not.
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(PIPE_DEPTH);
    let (back_tx, back_rx) = mpsc::sync_channel::<Vec<u8>>(PIPE_DEPTH + 2);
    std::thread::scope(|scope| {
        let hasher = scope.spawn(move || {
            let mut h = Sha256::new();
            for buf in rx {
                h.update(&buf);
                let _ = back_tx.try_send(buf);
            }
            h.finalize()
        });
        let outer = HashedAside {
            inner: blob,
            tx,
            back: back_rx,
            count: 0,
        };
        let read = read_layer_unhashed(outer, interests, limits, budget, crc);
        let digest = match hasher.join() {
            Ok(d) => Digest::from_sha256(d.into()),
            Err(panic) => std::panic::resume_unwind(panic),
        };
        read.map(|mut diff| {
            diff.blob_digest = digest;
            diff
        })
    })
}

/// Sends a copy of what it reads to the blob digest's thread, and counts it.
struct HashedAside<R> {
    inner: R,
    tx: mpsc::SyncSender<Vec<u8>>,
    back: mpsc::Receiver<Vec<u8>>,
    count: u64,
}

impl<R: Read> Read for HashedAside<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 {
            let mut copy = self.back.try_recv().unwrap_or_default();
            copy.clear();
            copy.extend_from_slice(&buf[..n]);
            // The hashing thread only stops when this end is dropped.
            let _ = self.tx.send(copy);
            self.count += n as u64;
        }
        Ok(n)
    }
}

impl<R: Read> HashedAside<R> {
    /// Reads what is left, so that the digest covers every stored byte; returns the count.
    fn finish(mut self) -> io::Result<u64> {
        io::copy(&mut self, &mut io::sink())?;
        Ok(self.count)
    }
}

/// A layer's read, the blob digest left to the caller.
fn read_layer_unhashed<B: Read>(
    outer: HashedAside<B>,
    interests: &Interests,
    limits: &Limits,
    budget: &Budget,
    crc: GzipCrc,
) -> Result<LayerDiff, LayerError> {
    let stored = Cell::new(0u64);
    let mut outer = Counting {
        inner: outer,
        count: &stored,
    };
    let mut head = Vec::with_capacity(512);
    (&mut outer).take(512).read_to_end(&mut head)?;
    let compression = Compression::sniff(&head).ok_or(LayerError::NotATar)?;
    let raw = BufReader::with_capacity(BUF, io::Cursor::new(head).chain(outer));
    let (entries, inner, raw) = match compression {
        Compression::Gzip => {
            let dec = Unpacked::new(GzipReader::new(raw, crc), &stored, limits);
            let (entries, diff, n, dec) = pipelined(dec, interests, limits, budget)?;
            (entries, (diff, n), dec.inner.into_inner())
        }
        Compression::Zstd => {
            let dec = Unpacked::new(zstd::stream::read::Decoder::with_buffer(raw)?, &stored, limits);
            let (entries, diff, n, dec) = pipelined(dec, interests, limits, budget)?;
            (entries, (diff, n), dec.inner.finish())
        }
        Compression::Xz => {
            let dec = Unpacked::new(super::xz_bzip2::xz(raw), &stored, limits);
            let (entries, diff, n, dec) = pipelined(dec, interests, limits, budget)?;
            (entries, (diff, n), dec.inner.into_inner())
        }
        Compression::Bzip2 => {
            let dec = Unpacked::new(super::xz_bzip2::bzip2(raw), &stored, limits);
            let (entries, diff, n, dec) = pipelined(dec, interests, limits, budget)?;
            (entries, (diff, n), dec.inner.into_inner())
        }
        Compression::None => {
            let (entries, diff, n, raw) =
                pipelined(Unpacked::new(raw, &stored, limits), interests, limits, budget)?;
            (entries, (diff, n), raw.inner)
        }
    };
    // The blob digest covers every stored byte, trailing garbage after the stream included.
    let (_, outer) = raw.into_inner().into_inner();
    let blob_size = outer.inner.finish()?;
    Ok(LayerDiff {
        entries,
        blob_digest: Digest::of(b""),
        blob_size,
        diff_id: inner.0,
        uncompressed_size: inner.1,
        compression,
    })
}

/// Buffers of the unpacked stream between the two stages of a layer's read.
const PIPE_CHUNK: usize = 128 * 1024;
/// Buffers in flight between the stages: what memory the pipeline adds, per layer read.
const PIPE_DEPTH: usize = 4;

/// Reads a layer in two stages on two threads, so that one layer keeps two cores busy: this
/// thread reads the blob (hashing it for the blob digest) and unpacks it, the other hashes the
/// unpacked tar (the diff_id) and walks it. They are joined by a bounded channel: at most
/// [`PIPE_DEPTH`] buffers of [`PIPE_CHUNK`] bytes wait between them, whatever the layer holds.
/// An error of either stage ends both: an unpacking error (a limit, damage) reaches the walk
/// as the error of its next read, as it would in one thread, and a walk that stops drops its
/// end of the channel, which stops the unpacking. The walk's thread is joined before this
/// returns. Returns the entries, the diff_id and unpacked size, and the unpacking reader (for
/// the bytes after the compressed stream).
fn pipelined<D: Read>(
    mut unpacked: D,
    interests: &Interests,
    limits: &Limits,
    budget: &Budget,
) -> Result<(Entries, Digest, u64, D), LayerError> {
    let (tx, rx) = mpsc::sync_channel::<io::Result<(Vec<u8>, usize)>>(PIPE_DEPTH);
    let (back_tx, back_rx) = mpsc::sync_channel::<Vec<u8>>(PIPE_DEPTH + 2);
    std::thread::scope(|scope| {
        let walk = scope.spawn(move || -> Result<(Entries, Digest, u64), LayerError> {
            let piped = Piped {
                rx,
                back: back_tx,
                buf: Vec::new(),
                len: 0,
                pos: 0,
                failed: false,
            };
            let (entries, inner) = read_entries(HashingReader::new(piped), interests, limits, budget)?;
            let (diff, n, _) = finish(inner)?;
            Ok((entries, diff, n))
        });
        loop {
            let mut buf = back_rx.try_recv().unwrap_or_else(|_| vec![0u8; PIPE_CHUNK]);
            // What was unpacked before an error reaches the walk before the error does.
            let mut n = 0;
            let mut failed = None;
            while n < buf.len() {
                match unpacked.read(&mut buf[n..]) {
                    Ok(0) => break,
                    Ok(k) => n += k,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            // A send fails when the walk stopped: its result says why.
            if n > 0 && tx.send(Ok((buf, n))).is_err() {
                break;
            }
            if let Some(e) = failed {
                let _ = tx.send(Err(e));
                break;
            }
            if n == 0 {
                break;
            }
        }
        drop(tx);
        match walk.join() {
            Ok(result) => result.map(|(entries, diff, n)| (entries, diff, n, unpacked)),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// The walk's end of the pipeline: the unpacked stream, as it arrives.
struct Piped {
    rx: mpsc::Receiver<io::Result<(Vec<u8>, usize)>>,
    /// Emptied buffers go back to be filled again.
    back: mpsc::SyncSender<Vec<u8>>,
    buf: Vec<u8>,
    len: usize,
    pos: usize,
    failed: bool,
}

impl Read for Piped {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        while self.pos == self.len {
            if self.failed {
                return Err(io::Error::other("the layer could not be unpacked"));
            }
            match self.rx.recv() {
                Ok(Ok((buf, len))) => {
                    let used = std::mem::replace(&mut self.buf, buf);
                    if !used.is_empty() {
                        let _ = self.back.try_send(used);
                    }
                    self.len = len;
                    self.pos = 0;
                }
                Ok(Err(e)) => {
                    self.failed = true;
                    return Err(e);
                }
                // The unpacking ended.
                Err(_) => return Ok(0),
            }
        }
        let n = (self.len - self.pos).min(out.len());
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Drains what the tar reader left (padding, trailing blocks) into the diff_id hash.
fn finish<R: Read>(mut r: HashingReader<R>) -> io::Result<(Digest, u64, R)> {
    io::copy(&mut r, &mut io::sink())?;
    let (digest, count) = r.digest_and_count();
    Ok((digest, count, r.into_inner()))
}

/// Completes a tar stream that stops right after its last member's data, without the padding
/// to 512 bytes and the two zero blocks that end an archive. umoci 0.4 writes layers like that.
/// Nothing is lost: the diff_id is taken on the real bytes before this reader, so a layer that
/// was cut short still fails its digest check.
struct EndPadding<R> {
    inner: R,
    pos: u64,
    /// Zero bytes still to hand out once the inner stream has ended.
    pad: Option<u64>,
}

impl<R: Read> Read for EndPadding<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if let Some(left) = self.pad.as_mut() {
            let n = (*left).min(buf.len() as u64) as usize;
            buf[..n].fill(0);
            *left -= n as u64;
            return Ok(n);
        }
        let n = self.inner.read(buf)?;
        if n == 0 {
            let to_block = (512 - self.pos % 512) % 512;
            self.pad = Some(to_block + 1024);
            return self.read(buf);
        }
        self.pos += n as u64;
        Ok(n)
    }
}

/// Bounds what the tar reader reads by itself between two entries. It reads PAX and GNU long
/// name headers whole into memory, whatever size they claim; while it looks for the next entry
/// it may read no further than an absolute position in the stream, set by [`Guard::arm_after`].
pub(crate) struct Guard {
    pos: Cell<u64>,
    limit: Cell<Option<u64>>,
    max: u64,
}

/// Slack for the fixed-size blocks read between two entries besides extended header data: the
/// previous entry's padding, headers, GNU sparse extension blocks.
const HEADER_SLACK: u64 = 64 * 1024;

impl Guard {
    /// A guard for `max_extended_header_bytes` = `max`, armed for the first entry.
    pub(crate) fn new(max: u64) -> Guard {
        Guard {
            pos: Cell::new(0),
            limit: Cell::new(Some(max.saturating_add(HEADER_SLACK))),
            max,
        }
    }

    /// Wraps the reader the tar reader reads.
    pub(crate) fn reader<R>(&self, inner: R) -> HeaderGuard<'_, R> {
        HeaderGuard { inner, guard: self }
    }

    /// An entry was returned: its data is the caller's to read, without bound.
    pub(crate) fn disarm(&self) {
        self.limit.set(None);
    }

    /// Before asking for the next entry: the tar reader may read up to `data_end` (the end of
    /// the current entry's data) and the extended headers of the next one.
    pub(crate) fn arm_after(&self, data_end: u64) {
        self.limit.set(Some(
            data_end.saturating_add(self.max).saturating_add(HEADER_SLACK),
        ));
    }

    /// [`Guard::arm_after`] for an entry just returned, whose stored data is `stored_size`.
    pub(crate) fn end_of(&self, stored_size: u64) -> u64 {
        self.pos.get().saturating_add(round_up_512(stored_size))
    }
}

pub(crate) struct HeaderGuard<'a, R> {
    inner: R,
    guard: &'a Guard,
}

impl<R: Read> Read for HeaderGuard<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let pos = self.guard.pos.get();
        let want = match self.guard.limit.get() {
            Some(limit) if pos >= limit => {
                return Err(LimitHit {
                    name: "max_extended_header_bytes",
                    limit: self.guard.max,
                    what: "the extended headers (PAX, GNU long name or long link) of a tar entry",
                }
                .into())
            }
            Some(limit) => buf.len().min(usize::try_from(limit - pos).unwrap_or(usize::MAX)),
            None => buf.len(),
        };
        let n = self.inner.read(&mut buf[..want])?;
        self.guard.pos.set(pos + n as u64);
        Ok(n)
    }
}

impl<R: io::Seek> io::Seek for HeaderGuard<'_, R> {
    fn seek(&mut self, to: io::SeekFrom) -> io::Result<u64> {
        let p = self.inner.seek(to)?;
        self.guard.pos.set(p);
        Ok(p)
    }
}

fn round_up_512(n: u64) -> u64 {
    n.saturating_add(511) & !511
}

/// The bytes an entry's data takes in the stream. For a GNU sparse file that is its data
/// blocks, not its holes: the PAX `size` when there is one, else the header's.
pub(crate) fn stored_size<R: Read>(entry: &mut tar::Entry<'_, R>) -> u64 {
    if !entry.header().entry_type().is_gnu_sparse() {
        return entry.size();
    }
    let from_pax = entry.pax_extensions().ok().flatten().and_then(|mut exts| {
        exts.find_map(|e| {
            let e = e.ok()?;
            (e.key_bytes() == b"size")
                .then(|| std::str::from_utf8(e.value_bytes()).ok()?.parse::<u64>().ok())
                .flatten()
        })
    });
    from_pax.or_else(|| entry.header().entry_size().ok()).unwrap_or(0)
}

fn read_entries<R: Read>(
    reader: HashingReader<R>,
    interests: &Interests,
    limits: &Limits,
    budget: &Budget,
) -> Result<(Entries, HashingReader<R>), LayerError> {
    let guard = Guard::new(limits.max_extended_header_bytes);
    let mut archive = tar::Archive::new(guard.reader(EndPadding {
        inner: reader,
        pos: 0,
        pad: None,
    }));
    let mut entries = Entries::new();
    let mut kept_total = 0u64;
    let mut scratch = Scratch::new();
    let no_scan = Interests {
        elf_scan: false,
        ..interests.clone()
    };
    let mut iter = archive.entries()?;
    loop {
        let next = iter.next();
        // Whatever the entry's data needs is the caller's to read: only the search for the next
        // header is bounded.
        guard.disarm();
        let Some(entry) = next else { break };
        let mut entry = entry?;
        // Where the tar reader will look for the next header: after this entry's stored data.
        let sparse = entry.header().entry_type().is_gnu_sparse();
        let data_end = guard.end_of(stored_size(&mut entry));
        let arm = || guard.arm_after(data_end);
        if entries.len() as u64 >= limits.max_entries_per_layer {
            return Err(LayerError::Limit {
                name: "max_entries_per_layer",
                limit: limits.max_entries_per_layer,
                what: "the number of entries in the layer",
            });
        }
        let raw_path = entry_path(&entry);
        if raw_path.len() > limits.max_path_len {
            return Err(path_too_long(&raw_path, limits));
        }
        let shown = || String::from_utf8_lossy(&raw_path).into_owned();
        let mut path = normalize(&raw_path);
        let header = entry.header();
        let mode = header.mode().unwrap_or(0o644);
        let uid = header.uid().unwrap_or(0);
        let gid = header.gid().unwrap_or(0);
        let size = entry.size();
        let etype = header.entry_type();

        let link_name = || -> Result<Vec<u8>, LayerError> {
            let t = entry
                .link_name_bytes()
                .map(|t| t.into_owned())
                .unwrap_or_default();
            if t.len() > limits.max_path_len {
                return Err(path_too_long(&t, limits));
            }
            Ok(t)
        };
        let mut kind = if etype.is_dir() {
            EntryKind::Dir
        } else if etype.is_symlink() {
            EntryKind::Symlink(String::from_utf8_lossy(&link_name()?).into_owned())
        } else if etype.is_hard_link() {
            EntryKind::Hardlink(normalize(&link_name()?).join("/"))
        } else if etype.is_file() || etype.is_contiguous() || etype.is_gnu_sparse() {
            EntryKind::File
        } else if etype.is_character_special() || etype.is_block_special() || etype.is_fifo() {
            EntryKind::Special
        } else {
            // PAX and GNU extension headers are consumed by the tar reader; anything else
            // (global PAX headers, unknown types) is not part of the file system.
            arm();
            continue;
        };

        if let Some(name) = path.last() {
            if name == ".wh..wh..opq" {
                path.pop();
                kind = EntryKind::OpaqueWhiteout;
            } else if name.starts_with(".wh..wh.") {
                // aufs bookkeeping (.wh..wh.plnk, .wh..wh.aufs): not part of the image.
                arm();
                continue;
            } else if let Some(hidden) = name.strip_prefix(".wh.") {
                if matches!(hidden, "" | "." | "..") {
                    return Err(LayerError::InvalidWhiteout {
                        entry: shown(),
                        target: hidden.to_string(),
                    });
                }
                let hidden = hidden.to_string();
                path.pop();
                path.push(hidden);
                kind = EntryKind::Whiteout;
            }
        }

        let mut content = None;
        let mut elf = None;
        if kind == EntryKind::File && size > 0 {
            let parts: Vec<&str> = path.iter().map(String::as_str).collect();
            let per_file = |c: u64| c.min(limits.max_kept_bytes_per_file);
            let cap = interests.keep_cap(&parts).map(per_file);
            let script_cap = interests.wants_script(&parts).then_some(per_file(SCRIPT_CAP));
            // A sparse file's holes are not in the stream: reading it to its end to scan it
            // could mean terabytes of zeros, so only its head is looked at.
            let wants = if sparse { &no_scan } else { interests };
            (content, elf) =
                probe_file(&mut entry, size, cap, script_cap, wants, &mut scratch).map_err(|e| {
                    LayerError::Entry {
                        path: shown(),
                        source: e,
                    }
                })?;
            let kept = content
                .as_ref()
                .map_or(0, |c: &super::Content| c.bytes.len() as u64);
            kept_total += kept;
            if kept_total > limits.max_kept_bytes_per_layer {
                return Err(LayerError::Limit {
                    name: "max_kept_bytes_per_layer",
                    limit: limits.max_kept_bytes_per_layer,
                    what: "kept file contents of the layer",
                });
            }
            budget.take_kept(kept, limits.max_kept_bytes_total)?;
        }
        let entry = LayerEntry {
            path,
            kind,
            mode,
            uid,
            gid,
            size,
            content,
            elf,
        };
        let packed = entries.push(entry);
        budget.take_metadata(packed + super::NODE_BYTES, limits.max_metadata_bytes)?;
        arm();
    }
    Ok((entries, archive.into_inner().inner.inner))
}

/// An entry's path as Go's archive/tar, GNU tar and umoci read it: with the ustar `prefix`
/// whenever the magic is `ustar\0`, whatever the version bytes say. The tar crate takes the
/// prefix only with version `00`, so a header with POSIX magic and GNU version bytes (the layer
/// of containers/storage's `TestUntarUstarGnuConflict`) would lose its folders. A PAX `path`
/// or GNU long name, when there is one, is the path as it is.
fn entry_path<R: Read>(entry: &tar::Entry<'_, R>) -> Vec<u8> {
    let path = entry.path_bytes();
    let header = entry.header();
    let block = header.as_bytes();
    let posix_magic = &block[257..263] == b"ustar\0";
    if posix_magic && header.as_ustar().is_none() && path == header.path_bytes() {
        let prefix = &block[345..500];
        let prefix = &prefix[..prefix.iter().position(|&b| b == 0).unwrap_or(prefix.len())];
        if !prefix.is_empty() {
            return [prefix, b"/", &path].concat();
        }
    }
    path.into_owned()
}

fn path_too_long(raw: &[u8], limits: &Limits) -> LayerError {
    LayerError::PathTooLong {
        name: "max_path_len",
        limit: limits.max_path_len,
        start: printable(&String::from_utf8_lossy(&raw[..raw.len().min(64)])),
    }
}

/// Reads what the interests want of one regular file: its first bytes (is it ELF?), the
/// kept contents up to `cap`, and for ELF files the rest of the stream through an
/// [`ElfScanner`]. Other bytes are left unread for the caller to skip.
pub(crate) fn probe_file(
    r: &mut impl Read,
    size: u64,
    cap: Option<u64>,
    script_cap: Option<u64>,
    interests: &Interests,
    scratch: &mut Scratch,
) -> io::Result<(Option<super::Content>, Option<Box<ElfInfo>>)> {
    if !interests.elf_heads && cap.is_none() && script_cap.is_none() {
        return Ok((None, None));
    }
    let Scratch {
        read: buf,
        elf_prefix,
    } = scratch;
    let head_len = HEAD_LEN.min(buf.len());
    let n = read_up_to(r, &mut buf[..head_len])?;
    let cap = cap.or(script_cap.filter(|_| buf[..n].starts_with(b"#!")));
    let head = ElfHead::parse(&buf[..n]).filter(|_| interests.elf_heads);
    let mut kept = cap.map(|c| buf[..n.min(c as usize)].to_vec());
    let mut scanner = head.as_ref().filter(|_| interests.elf_scan).map(|h| {
        let mut s = ElfScanner::reusing(&buf[..n], h, &interests.elf_markers, std::mem::take(elf_prefix));
        s.feed(&buf[..n]);
        s
    });
    let mut read = n as u64;
    let wants_more = |kept: &Option<Vec<u8>>, scanning: bool| {
        scanning || matches!((kept, cap), (Some(k), Some(c)) if (k.len() as u64) < c)
    };
    while read < size && wants_more(&kept, scanner.is_some()) {
        let k = r.read(buf)?;
        if k == 0 {
            break;
        }
        read += k as u64;
        if let Some(s) = scanner.as_mut() {
            s.feed(&buf[..k]);
        }
        if let (Some(bytes), Some(c)) = (kept.as_mut(), cap) {
            let room = (c as usize).saturating_sub(bytes.len()).min(k);
            bytes.extend_from_slice(&buf[..room]);
        }
    }
    let content = kept.map(|bytes| {
        let truncated = (bytes.len() as u64) < size;
        super::Content { bytes, truncated }
    });
    let scan = scanner.map(|s| {
        let (scan, prefix) = s.finish_into();
        *elf_prefix = prefix;
        scan
    });
    let elf = head.map(|head| {
        Box::new(ElfInfo {
            head,
            scan: scan.unwrap_or_default(),
        })
    });
    Ok((content, elf))
}

/// The buffers [`probe_file`] reuses from one file of a walk to the next: a read buffer, and
/// the ELF scanner's prefix, which grows up to [`crate::elf::PREFIX_CAP`]. A prefix grown
/// afresh for every ELF file was most of a layer read's page faults once freed memory went back
/// to the system (main.rs).
pub(crate) struct Scratch {
    read: Vec<u8>,
    elf_prefix: Vec<u8>,
}

impl Scratch {
    pub(crate) fn new() -> Scratch {
        Scratch {
            read: vec![0u8; 64 * 1024],
            elf_prefix: Vec::new(),
        }
    }
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Splits a tar path into components, dropping `.` and empty ones and clamping `..` at the
/// root, as containerd does when it applies a layer.
pub(crate) fn normalize(raw: &[u8]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for comp in raw.split(|&b| b == b'/') {
        match comp {
            b"" | b"." => {}
            b".." => {
                out.pop();
            }
            c => out.push(String::from_utf8_lossy(c).into_owned()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_hostile_paths() {
        assert_eq!(normalize(b"./usr/lib/"), vec!["usr", "lib"]);
        assert_eq!(normalize(b"../../etc/passwd"), vec!["etc", "passwd"]);
        assert_eq!(normalize(b"/a/../../b"), vec!["b"]);
        assert!(normalize(b"./").is_empty());
    }

    /// A 512-byte ustar header with a valid checksum.
    fn header(name: &[u8], typ: u8, size: u64) -> Vec<u8> {
        let mut h = vec![0u8; 512];
        h[..name.len()].copy_from_slice(name);
        h[100..108].copy_from_slice(b"0000644\0");
        h[108..116].copy_from_slice(b"0000000\0");
        h[116..124].copy_from_slice(b"0000000\0");
        if size < 1 << 33 {
            h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
        } else {
            // GNU base-256 for sizes octal cannot hold.
            h[124] = 0x80;
            h[128..136].copy_from_slice(&size.to_be_bytes());
        }
        h[136..148].copy_from_slice(b"00000000000\0");
        h[156] = typ;
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[148..156].fill(b' ');
        let sum: u32 = h.iter().map(|&b| b as u32).sum();
        h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        h
    }

    fn file(name: &[u8], data: &[u8]) -> Vec<u8> {
        let mut out = header(name, b'0', data.len() as u64);
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
        out
    }

    #[test]
    fn gnu_long_name_claiming_gigabytes_is_cut_at_the_limit() {
        // Found by review: the tar reader reads a long name whole into memory, whatever size
        // its header claims. 8 GiB claimed, 3 MiB there.
        let mut tar = header(b"././@LongLink", b'L', 8 << 30);
        tar.resize(tar.len() + (3 << 20), b'a');
        let err = read_layer(&tar[..], &Interests::default(), &Limits::default()).unwrap_err();
        assert_eq!(err.limit_name(), Some("max_extended_header_bytes"), "{err}");
        assert!(err.to_string().contains("max_extended_header_bytes"), "{err}");
        // A long name within the limit, after a large file, still reads.
        let mut ok = file(b"big", &vec![1u8; 3 << 20]);
        let name = [b"d/".repeat(1000), b"f".to_vec(), vec![0]].concat();
        ok.extend_from_slice(&header(b"././@LongLink", b'L', name.len() as u64));
        ok.extend_from_slice(&name);
        ok.resize(ok.len().div_ceil(512) * 512, 0);
        ok.extend_from_slice(&file(b"short", b"x"));
        ok.extend_from_slice(&[0u8; 1024]);
        let diff = read_layer(&ok[..], &Interests::default(), &Limits::default()).unwrap();
        assert_eq!(diff.entries.len(), 2);
        assert_eq!(diff.entries.to_vec()[1].path.len(), 1001);
    }

    #[test]
    fn unpacked_size_and_ratio_limits() {
        let mut tar = file(b"zeros", &vec![0u8; 3 << 20]);
        tar.extend_from_slice(&[0u8; 1024]);
        let limits = Limits {
            max_layer_bytes: 1 << 20,
            ..Limits::default()
        };
        let err = read_layer(&tar[..], &Interests::default(), &limits).unwrap_err();
        assert_eq!(err.limit_name(), Some("max_layer_bytes"));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        std::io::Write::write_all(&mut gz, &tar).unwrap();
        let gz = gz.finish().unwrap();
        // 3 MiB of zeros is far below the 1 GiB grace: the ratio is not checked yet.
        read_layer(&gz[..], &Interests::default(), &Limits::default()).unwrap();
    }

    #[test]
    fn kept_bytes_per_file_layer_and_image() {
        let mut tar = file(b"etc/os-release", &vec![b'a'; 5000]);
        tar.extend_from_slice(&file(b"etc/ld.so.conf", &vec![b'b'; 5000]));
        tar.extend_from_slice(&[0u8; 1024]);
        let interests = Interests::default()
            .keep("/etc/os-release", 256 * 1024)
            .keep("/etc/ld.so.conf", 256 * 1024);
        let per_file = Limits {
            max_kept_bytes_per_file: 100,
            ..Limits::default()
        };
        let diff = read_layer(&tar[..], &interests, &per_file).unwrap();
        let kept: Vec<_> = diff.entries.kept().collect();
        assert_eq!(kept.len(), 2);
        assert!(kept.iter().all(|c| c.bytes.len() == 100 && c.truncated));
        let per_layer = Limits {
            max_kept_bytes_per_layer: 6000,
            ..Limits::default()
        };
        let err = read_layer(&tar[..], &interests, &per_layer).unwrap_err();
        assert_eq!(err.limit_name(), Some("max_kept_bytes_per_layer"));
        // The image-wide budget is shared by every layer read with it.
        let total = Limits {
            max_kept_bytes_total: 15_000,
            ..Limits::default()
        };
        let budget = Budget::new();
        read_layer_in(&tar[..], &interests, &total, &budget, GzipCrc::Check).unwrap();
        assert_eq!(budget.kept(), 10_000);
        let err = read_layer_in(&tar[..], &interests, &total, &budget, GzipCrc::Check).unwrap_err();
        assert_eq!(err.limit_name(), Some("max_kept_bytes_total"));
        let tight = Limits {
            max_metadata_bytes: 100,
            ..Limits::default()
        };
        let err = read_layer(&tar[..], &interests, &tight).unwrap_err();
        assert_eq!(err.limit_name(), Some("max_metadata_bytes"));
    }

    #[test]
    fn path_limit_shorter_than_the_shown_start() {
        // Found by review: the error showed the first 64 bytes of the path, which panicked
        // when max_path_len was set below 64.
        let mut tar = file(b"a/b/c", b"x");
        tar.extend_from_slice(&[0u8; 1024]);
        let limits = Limits {
            max_path_len: 2,
            ..Limits::default()
        };
        let err = read_layer(&tar[..], &Interests::default(), &limits).unwrap_err();
        assert_eq!(err.limit_name(), Some("max_path_len"));
    }

    #[test]
    fn sniffs_compression() {
        assert_eq!(Compression::sniff(&[0x1f, 0x8b, 8]), Some(Compression::Gzip));
        assert_eq!(
            Compression::sniff(&[0x28, 0xb5, 0x2f, 0xfd]),
            Some(Compression::Zstd)
        );
        assert_eq!(Compression::sniff(&[0u8; 1024]), Some(Compression::None));
        assert_eq!(Compression::sniff(b"{\"json\": true}"), None);
    }
}
