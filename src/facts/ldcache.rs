//! glibc's /etc/ld.so.cache, as `ldconfig` writes it (glibc sysdeps/generic/dl-cache.h):
//! the old `ld.so-1.7.0` format, the new `glibc-ld.so.cache1.1` format, or both in a row.

use crate::arch::Arch;
use serde::Serialize;

const OLD_MAGIC: &[u8] = b"ld.so-1.7.0";
const NEW_MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
const NEW_HEADER: usize = 48;
const NEW_ENTRY: usize = 24;
const OLD_ENTRY: usize = 12;
/// Bytes of names the parsed entries may hold, per byte of cache: entries share strings (a
/// soname is the tail of its path), so a real cache decodes to about twice its size, but a
/// lying one could point every entry at one long string.
const DECODED_PER_BYTE: usize = 4;
const DECODED_SLACK: usize = 64 * 1024;

/// One library the cache knows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct CacheEntry {
    /// `FLAG_ELF_LIBC6` (3) in the low byte, the ABI in the next (0x0300 x86-64, 0x0a00 AArch64…).
    pub(crate) flags: i32,
    pub(crate) soname: String,
    pub(crate) path: String,
    pub(crate) hwcap: u64,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct LdCache {
    pub(crate) format: &'static str,
    pub(crate) entries: Vec<CacheEntry>,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CacheError {
    #[error("it does not start with a known ld.so.cache magic")]
    BadMagic,
    #[error("it is cut short: {0}")]
    Truncated(&'static str),
}

impl LdCache {
    pub(crate) fn parse(bytes: &[u8]) -> Result<LdCache, CacheError> {
        if bytes.starts_with(NEW_MAGIC) {
            return parse_new(bytes, 0);
        }
        if !bytes.starts_with(OLD_MAGIC) {
            return Err(CacheError::BadMagic);
        }
        let nlibs = u32_at(bytes, 12, true).ok_or(CacheError::Truncated("old header"))? as usize;
        let entries_start: usize = 16;
        let entries_end = nlibs
            .checked_mul(OLD_ENTRY)
            .and_then(|n| n.checked_add(entries_start))
            .filter(|&e| e <= bytes.len())
            .ok_or(CacheError::Truncated("old entries"))?;
        // In the compat layout the new cache follows, aligned to 8 bytes; it is the one glibc
        // reads when present.
        let new_at = (entries_end + 7) & !7;
        if bytes.get(new_at..).is_some_and(|b| b.starts_with(NEW_MAGIC)) {
            return parse_new(bytes, new_at);
        }
        let strings = entries_end;
        let mut entries = Vec::with_capacity(nlibs.min(65_536));
        let mut room = decoded_room(bytes);
        for i in 0..nlibs {
            let at = entries_start + i * OLD_ENTRY;
            let (Some(flags), Some(key), Some(value)) = (
                u32_at(bytes, at, true),
                u32_at(bytes, at + 4, true),
                u32_at(bytes, at + 8, true),
            ) else {
                break;
            };
            let (Some(soname), Some(path)) = (
                c_str(bytes, strings.saturating_add(key as usize)),
                c_str(bytes, strings.saturating_add(value as usize)),
            ) else {
                continue;
            };
            if !spend(&mut room, &soname, &path) {
                break;
            }
            entries.push(CacheEntry {
                flags: flags as i32,
                soname,
                path,
                hwcap: 0,
            });
        }
        Ok(LdCache {
            format: "ld.so-1.7.0",
            entries,
        })
    }

    /// The entries for `soname` that a loader for ABI `wanted` flags accepts, in cache order.
    pub(crate) fn lookup<'a>(
        &'a self,
        soname: &'a str,
        accepts: &'a dyn Fn(i32) -> bool,
    ) -> impl Iterator<Item = &'a CacheEntry> {
        self.entries
            .iter()
            .filter(move |e| e.soname == soname && accepts(e.flags))
    }
}

fn parse_new(bytes: &[u8], base: usize) -> Result<LdCache, CacheError> {
    let hdr = bytes
        .get(base..base + NEW_HEADER)
        .ok_or(CacheError::Truncated("new header"))?;
    // Byte 28: 2 little-endian, 3 big-endian, 0 written by an older ldconfig (host order,
    // which for every platform memlint meets is little-endian).
    let le = hdr[28] != 3;
    let nlibs = u32_at(hdr, 20, le).ok_or(CacheError::Truncated("new header"))? as usize;
    let start = base + NEW_HEADER;
    let end = nlibs
        .checked_mul(NEW_ENTRY)
        .and_then(|n| n.checked_add(start))
        .filter(|&e| e <= bytes.len())
        .ok_or(CacheError::Truncated("entries"))?;
    let mut entries = Vec::with_capacity(nlibs.min(65_536));
    let mut room = decoded_room(bytes);
    let mut at = start;
    while at < end {
        let flags = u32_at(bytes, at, le).unwrap_or(0) as i32;
        let key = u32_at(bytes, at + 4, le).unwrap_or(0) as usize;
        let value = u32_at(bytes, at + 8, le).unwrap_or(0) as usize;
        let hwcap = u64_at(bytes, at + 16, le).unwrap_or(0);
        at += NEW_ENTRY;
        // String offsets count from the start of the new header.
        let (Some(soname), Some(path)) = (
            c_str(bytes, base.saturating_add(key)),
            c_str(bytes, base.saturating_add(value)),
        ) else {
            continue;
        };
        if !spend(&mut room, &soname, &path) {
            break;
        }
        entries.push(CacheEntry {
            flags,
            soname,
            path,
            hwcap,
        });
    }
    Ok(LdCache {
        format: "glibc-ld.so.cache1.1",
        entries,
    })
}

/// How many bytes of names the entries of `bytes` may decode to.
fn decoded_room(bytes: &[u8]) -> usize {
    bytes
        .len()
        .saturating_mul(DECODED_PER_BYTE)
        .saturating_add(DECODED_SLACK)
}

/// Takes an entry's names from the room left; `false` (and the parse stops) when they do not fit.
fn spend(room: &mut usize, soname: &str, path: &str) -> bool {
    let need = soname.len() + path.len() + std::mem::size_of::<CacheEntry>();
    match room.checked_sub(need) {
        Some(left) => {
            *room = left;
            true
        }
        None => false,
    }
}

fn u32_at(b: &[u8], at: usize, le: bool) -> Option<u32> {
    let raw: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(if le {
        u32::from_le_bytes(raw)
    } else {
        u32::from_be_bytes(raw)
    })
}

fn u64_at(b: &[u8], at: usize, le: bool) -> Option<u64> {
    let raw: [u8; 8] = b.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(if le {
        u64::from_le_bytes(raw)
    } else {
        u64::from_be_bytes(raw)
    })
}

fn c_str(b: &[u8], at: usize) -> Option<String> {
    let rest = b.get(at..)?;
    let end = rest.iter().take(4096).position(|&c| c == 0)?;
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// The low byte of an entry's flags for a glibc (libc6) library.
const FLAG_ELF_LIBC6: i32 = 0x03;

/// The cache flags a glibc loader of `arch` accepts (sysdeps/*/dl-cache.h
/// `_dl_cache_check_flags`); any libc6 entry where the architecture or its flags are unknown.
pub(crate) fn accepts(arch: Option<Arch>) -> impl Fn(i32) -> bool {
    let known = arch.map_or(&[][..], Arch::ld_cache_flags);
    move |flags: i32| match known {
        [] => flags & 0xff == FLAG_ELF_LIBC6,
        known => known.contains(&flags),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_real_debian_cache() {
        let bytes = include_bytes!("../../testdata/ld.so.cache/debian12-amd64");
        let cache = LdCache::parse(bytes).unwrap();
        assert_eq!(cache.format, "glibc-ld.so.cache1.1");
        assert!(cache.entries.len() > 100);
        let ok = accepts(Some(Arch::Amd64));
        let libc: Vec<_> = cache.lookup("libc.so.6", &ok).collect();
        assert_eq!(libc.len(), 1);
        assert_eq!(libc[0].path, "/lib/x86_64-linux-gnu/libc.so.6");
        assert_eq!(libc[0].flags, 0x0303);
        assert_eq!(cache.lookup("libc.so.6", &accepts(Some(Arch::Arm64))).count(), 0);
        assert_eq!(cache.lookup("libc.so.6", &accepts(None)).count(), 1);
        assert_eq!(
            cache.lookup("libc.so.6", &accepts(Some(Arch::Mips64le))).count(),
            1
        );
    }

    /// Found by review: 20,000 entries naming one 4,000-byte string decoded to 160 MB of names
    /// from a 500 KB file.
    #[test]
    fn entries_sharing_one_long_string_are_bounded() {
        let n = 20_000u32;
        let mut c = NEW_MAGIC.to_vec();
        c.resize(NEW_HEADER, 0);
        c[20..24].copy_from_slice(&n.to_le_bytes());
        let strings = (NEW_HEADER + NEW_ENTRY * n as usize) as u32;
        for _ in 0..n {
            let mut e = [0u8; NEW_ENTRY];
            e[..4].copy_from_slice(&0x0303i32.to_le_bytes());
            e[4..8].copy_from_slice(&strings.to_le_bytes());
            e[8..12].copy_from_slice(&strings.to_le_bytes());
            c.extend_from_slice(&e);
        }
        c.extend(std::iter::repeat_n(b'l', 4000));
        c.push(0);
        let cache = LdCache::parse(&c).unwrap();
        let decoded: usize = cache.entries.iter().map(|e| e.soname.len() + e.path.len()).sum();
        assert!(decoded <= c.len() * DECODED_PER_BYTE + DECODED_SLACK, "{decoded}");
        assert!(!cache.entries.is_empty());
    }

    #[test]
    fn rejects_and_survives_corruption() {
        assert_eq!(LdCache::parse(b"hello").unwrap_err(), CacheError::BadMagic);
        let bytes = include_bytes!("../../testdata/ld.so.cache/debian12-amd64");
        for cut in [10, 47, 48, 100, 5000] {
            let _ = LdCache::parse(&bytes[..cut]);
        }
        let mut lying = bytes.to_vec();
        lying[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(LdCache::parse(&lying).is_err());
        let mut offsets = bytes.to_vec();
        offsets[52..56].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(LdCache::parse(&offsets).is_ok());
        let mut old = b"ld.so-1.7.0\0".to_vec();
        old.extend_from_slice(&1u32.to_le_bytes());
        old.extend_from_slice(&3i32.to_le_bytes());
        old.extend_from_slice(&0u32.to_le_bytes());
        old.extend_from_slice(&8u32.to_le_bytes());
        old.extend_from_slice(b"libx.so\0/lib/libx.so\0");
        let c = LdCache::parse(&old).unwrap();
        assert_eq!(c.entries[0].soname, "libx.so");
        assert_eq!(c.entries[0].path, "/lib/libx.so");
    }
}
