//! One layer, read once as a stream: the compressed bytes are hashed (the blob digest), then
//! decompressed (gzip, zstd or none, told by magic bytes) and hashed again (the diff_id), and
//! each tar entry becomes a [`LayerEntry`] with the contents an interest asked for.

use super::interest::{Interests, SCRIPT_CAP};
use crate::digest::{Digest, HashingReader};
use crate::elf::{ElfHead, ElfInfo, ElfScanner, HEAD_LEN};
use std::io::{self, BufReader, Read};

/// Caps that keep memory bounded whatever the layer holds.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Tar entries in one layer.
    pub max_entries_per_layer: u64,
    /// Bytes of one path.
    pub max_path_len: usize,
    /// Kept file contents in one layer, all files together.
    pub max_kept_bytes_per_layer: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_entries_per_layer: 2_000_000,
            max_path_len: 4096,
            max_kept_bytes_per_layer: 256 * 1024 * 1024,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    /// Tells the compression from the first bytes of a blob.
    pub fn sniff(head: &[u8]) -> Option<Compression> {
        if head.starts_with(&[0x1f, 0x8b]) {
            Some(Compression::Gzip)
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Some(Compression::Zstd)
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

/// What a tar entry is, after whiteouts are recognised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    File,
    Symlink(String),
    /// A hard link to another path (relative to the image root).
    Hardlink(String),
    Special,
    /// `.wh.NAME`: NAME is deleted from lower layers.
    Whiteout,
    /// `.wh..wh..opq`: the folder's lower-layer contents are hidden.
    OpaqueWhiteout,
}

/// One entry of a layer.
#[derive(Clone, Debug)]
pub struct LayerEntry {
    /// Components from the image root, `..` already clamped at the root. For a whiteout,
    /// the path of what it deletes (or of the opaque folder).
    pub path: Vec<String>,
    pub kind: EntryKind,
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    pub size: u64,
    pub content: Option<super::Content>,
    pub elf: Option<ElfInfo>,
}

/// A layer's contribution to the image: its entries in archive order and its digests.
#[derive(Clone, Debug)]
pub struct LayerDiff {
    pub entries: Vec<LayerEntry>,
    /// sha256 of the blob as stored (compressed).
    pub blob_digest: Digest,
    pub blob_size: u64,
    /// sha256 of the uncompressed tar (the config's diff_id).
    pub diff_id: Digest,
    pub uncompressed_size: u64,
    pub compression: Compression,
}

/// Why a layer could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("it is not a tar archive, nor a gzip or zstd compressed one")]
    NotATar,
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("entry `{path}`: {source}")]
    Entry { path: String, source: io::Error },
    #[error("it has more than {0} entries")]
    TooManyEntries(u64),
    #[error("entry path is longer than {limit} bytes: `{start}…`")]
    PathTooLong { limit: usize, start: String },
}

const BUF: usize = 256 * 1024;

/// Reads a whole layer blob.
pub fn read_layer(blob: impl Read, interests: &Interests, limits: &Limits) -> Result<LayerDiff, LayerError> {
    let mut outer = HashingReader::new(blob);
    let mut head = Vec::with_capacity(512);
    (&mut outer).take(512).read_to_end(&mut head)?;
    let compression = Compression::sniff(&head).ok_or(LayerError::NotATar)?;
    let raw = BufReader::with_capacity(BUF, io::Cursor::new(head).chain(outer));
    let (entries, inner, raw) = match compression {
        Compression::Gzip => {
            let dec = flate2::bufread::MultiGzDecoder::new(raw);
            let (entries, inner) = read_entries(HashingReader::new(dec), interests, limits)?;
            let (diff, n, dec) = finish(inner)?;
            (entries, (diff, n), dec.into_inner())
        }
        Compression::Zstd => {
            let dec = zstd::stream::read::Decoder::with_buffer(raw)?;
            let (entries, inner) = read_entries(HashingReader::new(dec), interests, limits)?;
            let (diff, n, dec) = finish(inner)?;
            (entries, (diff, n), dec.finish())
        }
        Compression::None => {
            let (entries, inner) = read_entries(HashingReader::new(raw), interests, limits)?;
            let (diff, n, raw) = finish(inner)?;
            (entries, (diff, n), raw)
        }
    };
    // The blob digest covers every stored byte, trailing garbage after the stream included.
    let (_, outer) = raw.into_inner().into_inner();
    let (blob_digest, blob_size) = outer.finish()?;
    Ok(LayerDiff {
        entries,
        blob_digest,
        blob_size,
        diff_id: inner.0,
        uncompressed_size: inner.1,
        compression,
    })
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

fn read_entries<R: Read>(
    reader: HashingReader<R>,
    interests: &Interests,
    limits: &Limits,
) -> Result<(Vec<LayerEntry>, HashingReader<R>), LayerError> {
    let mut archive = tar::Archive::new(EndPadding {
        inner: reader,
        pos: 0,
        pad: None,
    });
    let mut entries = Vec::new();
    let mut kept_total = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    for entry in archive.entries()? {
        let mut entry = entry?;
        if entries.len() as u64 >= limits.max_entries_per_layer {
            return Err(LayerError::TooManyEntries(limits.max_entries_per_layer));
        }
        let raw_path = entry.path_bytes().into_owned();
        if raw_path.len() > limits.max_path_len {
            return Err(LayerError::PathTooLong {
                limit: limits.max_path_len,
                start: String::from_utf8_lossy(&raw_path[..64]).into_owned(),
            });
        }
        let shown = || String::from_utf8_lossy(&raw_path).into_owned();
        let mut path = normalize(&raw_path);
        let header = entry.header();
        let mode = header.mode().unwrap_or(0o644);
        let uid = header.uid().unwrap_or(0);
        let gid = header.gid().unwrap_or(0);
        let size = entry.size();
        let etype = header.entry_type();

        let mut kind = if etype.is_dir() {
            EntryKind::Dir
        } else if etype.is_symlink() {
            let target = entry
                .link_name_bytes()
                .map(|t| String::from_utf8_lossy(&t).into_owned());
            EntryKind::Symlink(target.unwrap_or_default())
        } else if etype.is_hard_link() {
            let target = entry.link_name_bytes().map(|t| normalize(&t)).unwrap_or_default();
            EntryKind::Hardlink(target.join("/"))
        } else if etype.is_file() || etype.is_contiguous() || etype.is_gnu_sparse() {
            EntryKind::File
        } else if etype.is_character_special() || etype.is_block_special() || etype.is_fifo() {
            EntryKind::Special
        } else {
            // PAX and GNU extension headers are consumed by the tar reader; anything else
            // (unknown types) is not part of the file system.
            continue;
        };

        if let Some(name) = path.last() {
            if name == ".wh..wh..opq" {
                path.pop();
                kind = EntryKind::OpaqueWhiteout;
            } else if name.starts_with(".wh..wh.") {
                // aufs bookkeeping (.wh..wh.plnk, .wh..wh.aufs): not part of the image.
                continue;
            } else if let Some(hidden) = name.strip_prefix(".wh.") {
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
            let budget = limits.max_kept_bytes_per_layer.saturating_sub(kept_total);
            let cap = interests.keep_cap(&parts).map(|c| c.min(budget));
            let script_cap = interests.wants_script(&parts).then_some(SCRIPT_CAP.min(budget));
            (content, elf) =
                probe_file(&mut entry, size, cap, script_cap, interests, &mut buf).map_err(|e| {
                    LayerError::Entry {
                        path: shown(),
                        source: e,
                    }
                })?;
            kept_total += content
                .as_ref()
                .map_or(0, |c: &super::Content| c.bytes.len() as u64);
        }
        entries.push(LayerEntry {
            path,
            kind,
            mode,
            uid,
            gid,
            size,
            content,
            elf,
        });
    }
    Ok((entries, archive.into_inner().inner))
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
    buf: &mut [u8],
) -> io::Result<(Option<super::Content>, Option<ElfInfo>)> {
    if !interests.elf_heads && cap.is_none() && script_cap.is_none() {
        return Ok((None, None));
    }
    let head_len = HEAD_LEN.min(buf.len());
    let n = read_up_to(r, &mut buf[..head_len])?;
    let cap = cap.or(script_cap.filter(|_| buf[..n].starts_with(b"#!")));
    let head = ElfHead::parse(&buf[..n]).filter(|_| interests.elf_heads);
    let mut kept = cap.map(|c| buf[..n.min(c as usize)].to_vec());
    let mut scanner = head.as_ref().filter(|_| interests.elf_scan).map(|h| {
        let mut s = ElfScanner::new(&buf[..n], h);
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
    let elf = head.map(|head| ElfInfo {
        head,
        scan: scanner.map(ElfScanner::finish).unwrap_or_default(),
    });
    Ok((content, elf))
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
pub fn normalize(raw: &[u8]) -> Vec<String> {
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
