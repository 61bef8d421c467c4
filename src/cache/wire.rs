//! The wire format of a layer cache entry: the postcard encoding of a layer's entries and the
//! interests it was read with, compressed, framed and checksummed, and the conversions between
//! the layer reader's types and the wire types. Where entries live and when they go is the
//! folder's business ([`super::folder`]).

use crate::digest::Digest;
use crate::elf::marker::{ElfMarker, Finds, Found, MarkerSet};
use crate::elf::{ElfClass, ElfDynamic, ElfHead, ElfInfo, ElfScan, ElfType};
use crate::tree::interest::{KeepRule, PathPattern};
use crate::tree::{Compression, Content, Entries, Interests, LayerDiff};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::borrow::Cow;
use std::io::{self, Read};

/// The layout of an entry. Bump it whenever the wire types below or what the layer reader
/// records change (a new field): the memlint version alone does not change between
/// development builds. What the ELF markers find needs no bump: an entry records each marker's
/// fingerprint ([`ElfMarker::fingerprint`]) and serves only a read with the same ones.
pub(crate) const FORMAT: u32 = 5;
const MAGIC: &[u8; 8] = b"MLLAYER\0";
/// The memlint that wrote an entry; only the same one reads it.
pub(super) const VERSION: &str = env!("CARGO_PKG_VERSION");
const ZSTD_LEVEL: i32 = 3;

// The wire format. These types are the format: they are written out field by field, so a
// change here (or in what the conversions carry) needs a new FORMAT.

#[derive(Serialize, Deserialize)]
struct Stored<'a, P, C, E> {
    diff_id: Cow<'a, str>,
    blob_digest: Cow<'a, str>,
    blob_size: u64,
    uncompressed_size: u64,
    compression: u8,
    made_with: WireInterests<'a>,
    /// The layer's packed entries ([`crate::tree::Entries`]): their buffer and count.
    packed: P,
    count: u64,
    /// The kept contents and ELF facts the entries point at, in order.
    contents: C,
    elves: E,
}

#[derive(Serialize, Deserialize)]
struct WireInterests<'a> {
    keep: Vec<(Cow<'a, str>, u64)>,
    scripts: Vec<Cow<'a, str>>,
    elf_heads: bool,
    elf_scan: bool,
    /// The key and fingerprint of each marker searched for.
    elf_markers: Vec<(Cow<'a, str>, Cow<'a, str>)>,
}

#[derive(Serialize, Deserialize)]
struct WireElf<'a> {
    class: u8,
    little_endian: bool,
    elf_type: u8,
    machine: u16,
    interpreter: Option<Cow<'a, str>>,
    dynamic: bool,
    scan_dynamic: Option<WireDynamic<'a>>,
    /// What each marker found, by key.
    found: Vec<(Cow<'a, str>, WireFound<'a>)>,
}

#[derive(Serialize, Deserialize)]
enum WireFound<'a> {
    Text(Cow<'a, str>),
    Bytes(Bytes<'a>),
}

#[derive(Serialize, Deserialize)]
struct WireDynamic<'a> {
    needed: Cow<'a, [String]>,
    soname: Option<Cow<'a, str>>,
    rpath: Cow<'a, [String]>,
    runpath: Cow<'a, [String]>,
    complete: bool,
}

/// File contents as one length-prefixed run of bytes rather than a sequence of numbers.
struct Bytes<'a>(Cow<'a, [u8]>);

impl Serialize for Bytes<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Bytes<'_> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
                Ok(v)
            }
        }
        d.deserialize_byte_buf(Visitor).map(|v| Bytes(Cow::Owned(v)))
    }
}

/// Lets the side tables be written straight from the layer, without a copy.
struct Contents<'a>(&'a [Option<Content>]);

impl Serialize for Contents<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|c| {
            c.as_ref()
                .map(|Content { bytes, truncated }| (Bytes(Cow::Borrowed(bytes)), *truncated))
        }))
    }
}

struct Elves<'a>(&'a [Option<Box<ElfInfo>>]);

impl Serialize for Elves<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|e| e.as_deref().map(wire_elf)))
    }
}

fn compression_code(c: Compression) -> u8 {
    match c {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Zstd => 2,
        Compression::Xz => 3,
        Compression::Bzip2 => 4,
    }
}

fn wire_elf(e: &ElfInfo) -> WireElf<'_> {
    let ElfInfo { head, scan } = e;
    let ElfHead {
        class,
        little_endian,
        elf_type,
        machine,
        interpreter,
        dynamic,
    } = head;
    let ElfScan {
        dynamic: scan_dynamic,
        markers,
    } = scan;
    WireElf {
        class: match class {
            ElfClass::Elf32 => 0,
            ElfClass::Elf64 => 1,
        },
        little_endian: *little_endian,
        elf_type: match elf_type {
            ElfType::Relocatable => 0,
            ElfType::Executable => 1,
            ElfType::Shared => 2,
            ElfType::Core => 3,
            ElfType::Other => 4,
        },
        machine: *machine,
        interpreter: interpreter.as_deref().map(Cow::Borrowed),
        dynamic: *dynamic,
        scan_dynamic: scan_dynamic.as_ref().map(|d| {
            let ElfDynamic {
                needed,
                soname,
                rpath,
                runpath,
                complete,
            } = d;
            WireDynamic {
                needed: Cow::Borrowed(needed),
                soname: soname.as_deref().map(Cow::Borrowed),
                rpath: Cow::Borrowed(rpath),
                runpath: Cow::Borrowed(runpath),
                complete: *complete,
            }
        }),
        found: markers
            .found
            .iter()
            .map(|(m, f)| {
                let f = match f {
                    Found::Text(t) => WireFound::Text(Cow::Borrowed(t)),
                    Found::Bytes(b) => WireFound::Bytes(Bytes(Cow::Borrowed(b))),
                };
                (Cow::Borrowed(m.key), f)
            })
            .collect(),
    }
}

/// The ELF facts of an entry, with the finds of the markers in `known` (those whose
/// fingerprints the entry recorded); finds of other markers are left out, as a read that
/// searched only for `known` would.
fn from_wire_elf(w: WireElf, known: &MarkerSet) -> Result<ElfInfo, String> {
    let owned = |s: Option<Cow<str>>| s.map(Cow::into_owned);
    Ok(ElfInfo {
        head: ElfHead {
            class: match w.class {
                0 => ElfClass::Elf32,
                1 => ElfClass::Elf64,
                n => return Err(format!("unknown ELF class {n}")),
            },
            little_endian: w.little_endian,
            elf_type: match w.elf_type {
                0 => ElfType::Relocatable,
                1 => ElfType::Executable,
                2 => ElfType::Shared,
                3 => ElfType::Core,
                4 => ElfType::Other,
                n => return Err(format!("unknown ELF type {n}")),
            },
            machine: w.machine,
            interpreter: owned(w.interpreter),
            dynamic: w.dynamic,
        },
        scan: ElfScan {
            dynamic: w.scan_dynamic.map(|d| ElfDynamic {
                needed: d.needed.into_owned(),
                soname: owned(d.soname),
                rpath: d.rpath.into_owned(),
                runpath: d.runpath.into_owned(),
                complete: d.complete,
            }),
            markers: from_wire_found(w.found, known)?,
        },
    })
}

fn from_wire_found(found: Vec<(Cow<str>, WireFound)>, known: &MarkerSet) -> Result<Finds, String> {
    let mut finds = Finds::default();
    finds.retain(known);
    for (key, f) in found {
        let Some(marker) = known.iter().find(|m| m.key == key) else {
            continue;
        };
        let f = match f {
            WireFound::Text(t) => Found::Text(t.into_owned()),
            WireFound::Bytes(b) => Found::Bytes(b.0.into_owned()),
        };
        if !marker.accepts(&f) {
            return Err(format!("marker `{key}` holds what it cannot find"));
        }
        finds.set(marker, f);
    }
    Ok(finds)
}

fn wire_interests(i: &Interests) -> WireInterests<'_> {
    let Interests {
        keep,
        scripts,
        elf_heads,
        elf_scan,
        elf_markers,
    } = i;
    WireInterests {
        keep: keep
            .iter()
            .map(|k| (Cow::Borrowed(k.pattern.as_str()), k.max_bytes))
            .collect(),
        scripts: scripts.iter().map(|p| Cow::Borrowed(p.as_str())).collect(),
        elf_heads: *elf_heads,
        elf_scan: *elf_scan,
        elf_markers: elf_markers
            .iter()
            .map(|m| (Cow::Borrowed(m.key), Cow::Owned(m.fingerprint())))
            .collect(),
    }
}

/// The interests an entry was read with; of its markers, those of `known` with the same
/// fingerprint (a marker declared differently now is as if it had not been searched for).
fn from_wire_interests(w: WireInterests, known: &MarkerSet) -> Interests {
    let markers: Vec<&'static ElfMarker> = known
        .iter()
        .copied()
        .filter(|m| {
            w.elf_markers
                .iter()
                .any(|(key, fingerprint)| key == m.key && *fingerprint == m.fingerprint())
        })
        .collect();
    Interests {
        keep: w
            .keep
            .into_iter()
            .map(|(pattern, max_bytes)| KeepRule {
                pattern: PathPattern::new(&pattern),
                max_bytes,
            })
            .collect(),
        scripts: w.scripts.iter().map(|p| PathPattern::new(p)).collect(),
        elf_heads: w.elf_heads,
        elf_scan: w.elf_scan,
        elf_markers: crate::elf::marker::union(&markers, &[]),
    }
}

/// `MAGIC | FORMAT (u32 LE) | version length (u8) | version | payload length (u64 LE) | payload
/// | sha256 of everything before it`, the payload being the zstd-compressed postcard encoding
/// of [`Stored`]. `None` when the layer's encoding is larger than `bound`, the most a read
/// would accept.
pub(super) fn encode(diff: &LayerDiff, made_with: &Interests, bound: u64) -> io::Result<Option<Vec<u8>>> {
    let (packed, count, contents, elves) = diff.entries.parts();
    let stored = Stored {
        diff_id: Cow::Owned(diff.diff_id.to_string()),
        blob_digest: Cow::Owned(diff.blob_digest.to_string()),
        blob_size: diff.blob_size,
        uncompressed_size: diff.uncompressed_size,
        compression: compression_code(diff.compression),
        made_with: wire_interests(made_with),
        packed: packed.iter().map(|c| Bytes(Cow::Borrowed(c))).collect::<Vec<_>>(),
        count: count as u64,
        contents: Contents(contents),
        elves: Elves(elves),
    };
    let raw = postcard::to_stdvec(&stored).map_err(io::Error::other)?;
    if raw.len() as u64 > bound {
        return Ok(None);
    }
    let payload = zstd::bulk::compress(&raw, ZSTD_LEVEL)?;
    drop(raw);
    let mut out = Vec::with_capacity(payload.len() + 96);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.push(VERSION.len() as u8);
    out.extend_from_slice(VERSION.as_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&payload);
    let sum = Sha256::digest(&out);
    out.extend_from_slice(&sum);
    Ok(Some(out))
}

/// Why an entry was not used.
#[derive(Debug)]
pub(super) enum Rejected {
    /// Larger than this run's limits allow: a miss, the entry is kept.
    TooLarge,
    /// What is wrong with it: the entry is removed.
    Damaged(String),
}

/// Reads an entry back, with the finds of the `known` markers it recorded.
pub(super) fn decode(
    bytes: &[u8],
    key: &Digest,
    bound: u64,
    known: &MarkerSet,
) -> Result<(LayerDiff, Interests), Rejected> {
    match decode_within(bytes, key, bound, known) {
        Ok(Some(d)) => Ok(d),
        Ok(None) => Err(Rejected::TooLarge),
        Err(reason) => Err(Rejected::Damaged(reason)),
    }
}

/// Reads an entry back: `None` when it is sound but unpacks to more than `bound`; the error
/// says what is wrong with it.
pub(super) fn decode_within(
    bytes: &[u8],
    key: &Digest,
    bound: u64,
    known: &MarkerSet,
) -> Result<Option<(LayerDiff, Interests)>, String> {
    let cut = || "it is cut short".to_string();
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err("it is not a memlint layer cache entry".to_string());
    }
    let mut at = MAGIC.len();
    let mut take = |n: usize| -> Result<&[u8], String> {
        let part = bytes
            .get(at..at.checked_add(n).ok_or_else(cut)?)
            .ok_or_else(cut)?;
        at += n;
        Ok(part)
    };
    let format = u32::from_le_bytes(take(4)?.try_into().map_err(|_| cut())?);
    let version_len = take(1)?[0] as usize;
    let version = String::from_utf8_lossy(take(version_len)?).into_owned();
    let payload_len = u64::from_le_bytes(take(8)?.try_into().map_err(|_| cut())?);
    let header_len = at;
    let expected = u64::try_from(header_len)
        .ok()
        .and_then(|h| h.checked_add(payload_len))
        .and_then(|n| n.checked_add(32));
    if expected != Some(bytes.len() as u64) {
        return Err(format!(
            "it is {} bytes where its header says {}",
            bytes.len(),
            expected.map_or_else(|| "more than can be".to_string(), |n| n.to_string())
        ));
    }
    let (body, sum) = bytes.split_at(bytes.len() - 32);
    if Sha256::digest(body).as_slice() != sum {
        return Err("its checksum does not match its contents".to_string());
    }
    if format != FORMAT || version != VERSION {
        return Err(format!(
            "it was written by memlint {version} in format {format}; this is memlint {VERSION}, format {FORMAT}"
        ));
    }
    let mut raw = Vec::new();
    zstd::stream::read::Decoder::new(&body[header_len..])
        .and_then(|d| d.take(bound.saturating_add(1)).read_to_end(&mut raw))
        .map_err(|e| format!("it does not decompress: {e}"))?;
    if raw.len() as u64 > bound {
        // Sound (its checksum matched) but larger than this run's limits allow.
        return Ok(None);
    }
    type Stored2<'a> = Stored<'a, Vec<Bytes<'a>>, Vec<Option<(Bytes<'a>, bool)>>, Vec<Option<WireElf<'a>>>>;
    let (stored, rest): (Stored2<'_>, &[u8]) =
        postcard::take_from_bytes(&raw).map_err(|e| format!("it does not decode: {e}"))?;
    if !rest.is_empty() {
        return Err(format!("{} bytes follow its contents", rest.len()));
    }
    let digest = |s: &str| Digest::parse(s).ok_or_else(|| format!("`{s}` is not a digest"));
    let diff_id = digest(&stored.diff_id)?;
    if diff_id != *key {
        return Err(format!("it holds layer {diff_id}"));
    }
    let compression = match stored.compression {
        0 => Compression::None,
        1 => Compression::Gzip,
        2 => Compression::Zstd,
        3 => Compression::Xz,
        4 => Compression::Bzip2,
        n => return Err(format!("unknown compression {n}")),
    };
    let contents = stored
        .contents
        .into_iter()
        .map(|c| {
            c.map(|(bytes, truncated)| Content {
                bytes: bytes.0.into_owned(),
                truncated,
            })
        })
        .collect();
    let made_with = from_wire_interests(stored.made_with, known);
    let elves = stored
        .elves
        .into_iter()
        .map(|e| {
            e.map(|e| from_wire_elf(e, &made_with.elf_markers).map(Box::new))
                .transpose()
        })
        .collect::<Result<_, _>>()?;
    let count = usize::try_from(stored.count).map_err(|_| "too many entries".to_string())?;
    let chunks = stored.packed.into_iter().map(|c| c.0.into_owned()).collect();
    let entries = Entries::from_parts(chunks, count, contents, elves)?;
    let diff = LayerDiff {
        blob_digest: digest(&stored.blob_digest)?,
        blob_size: stored.blob_size,
        diff_id,
        uncompressed_size: stored.uncompressed_size,
        compression,
        entries,
    };
    Ok(Some((diff, made_with)))
}

#[cfg(test)]
mod tests {
    use super::super::read_bound;
    use super::super::sample::{interests, read, sample, view};
    use super::*;
    use crate::tree::Limits;

    #[test]
    fn entries_round_trip() {
        let limits = Limits::default();
        let interests = interests();
        let diff = read(&sample(), &interests, &limits);
        assert!(diff.entries.to_vec().iter().any(|e| e.elf.is_some()));
        let bytes = encode(&diff, &interests, read_bound(&limits)).unwrap().unwrap();
        let known = &interests.elf_markers;
        let (back, made_with) = decode(&bytes, &diff.diff_id, read_bound(&limits), known).unwrap();
        assert_eq!(view(&back), view(&diff));
        assert_eq!(back.diff_id, diff.diff_id);
        assert_eq!(back.blob_digest, diff.blob_digest);
        assert_eq!(back.uncompressed_size, diff.uncompressed_size);
        assert_eq!(format!("{made_with:?}"), format!("{interests:?}"));

        // Every kind of damage is told apart from a good entry.
        let mut flipped = bytes.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 1;
        let bound = read_bound(&limits);
        assert!(decode_within(&flipped, &diff.diff_id, bound, known)
            .unwrap_err()
            .contains("checksum"));
        let cut = decode_within(&bytes[..bytes.len() - 7], &diff.diff_id, bound, known).unwrap_err();
        assert!(cut.contains("header says"), "{cut}");
        assert!(decode_within(&bytes[..10], &diff.diff_id, bound, known).is_err());
        assert!(decode_within(b"", &diff.diff_id, bound, known).is_err());
        let other = Digest::of(b"other");
        assert!(decode_within(&bytes, &other, bound, known)
            .unwrap_err()
            .contains("holds layer"));
        // Another memlint's entry with a valid checksum.
        let mut old = bytes.clone();
        let v = MAGIC.len() + 5;
        old[v] = b'9';
        let n = old.len() - 32;
        let sum = Sha256::digest(&old[..n]);
        old[n..].copy_from_slice(&sum);
        assert!(decode_within(&old, &diff.diff_id, bound, known)
            .unwrap_err()
            .contains("written by memlint 9"));
        // An entry that unpacks past the bound is refused before it is decoded
        // (a miss that keeps the entry, not damage).
        assert!(matches!(
            decode(&bytes, &diff.diff_id, 100, known),
            Err(Rejected::TooLarge)
        ));
    }
}
