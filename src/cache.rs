//! The per-layer analysis cache: what a layer contributes to the file tree (paths, kinds,
//! modes, owners, sizes, links, ELF facts) and the file contents kept from it, stored by the
//! layer's diff_id so that a second read of an image, or of another image on the same base,
//! reads only the layers it has not seen.
//!
//! - Where: `DIR/layers/v<FORMAT>-<memlint version>/sha256/<diff_id hex>`. An upgrade starts a
//!   new folder rather than tripping over the old entries; the old ones age out by eviction.
//! - Key: the diff_id (sha256 of the uncompressed tar), which the config gives before any
//!   blob is opened, for every source; the same layer stored gzip or zstd, in a registry, an
//!   OCI layout or a `docker save` archive, is one entry. The rootfs source (`dir:`) has no
//!   digests and so no cache.
//! - Trust: like Docker's layer store, a cached layer is trusted by its diff_id. An entry is
//!   only written after the blob it came from was read and its diff_id verified against the
//!   config, and each entry carries a sha256 of itself, so damage reads as a miss.
//! - Interests: an entry records what it was read for (keep rules, script patterns, ELF
//!   flags). A lookup uses it only when it holds everything the current read would keep, and
//!   trims it to exactly that, so a cached read gives the same tree as reading the blob.
//! - Files: written to a unique temporary name beside the final one, synced, then renamed, so
//!   readers only ever see complete entries and concurrent runs writing the same layer both
//!   succeed. Least recently used entries (a hit refreshes the mtime) are removed once the
//!   folder passes its bound (`MEMLINT_CACHE_MAX_BYTES`, default 2 GiB).
//! - Failures: a damaged entry is removed with one warning and the layer is read from the
//!   image; an entry larger than this run's limits allow is a plain miss and stays; a folder
//!   that cannot be written or read gives one warning and the run goes on without the cache.
//!   The cache never fails a lint.
//! - Links: only real folders are walked, written and read; a symbolic link in place of
//!   `layers` or the entries folder turns the cache off with one warning, and eviction skips
//!   linked folders, so neither leads outside the cache.

use crate::digest::Digest;
use crate::elf::{ElfClass, ElfDynamic, ElfHead, ElfInfo, ElfScan, ElfType};
use crate::tree::interest::{KeepRule, PathPattern, SCRIPT_CAP};
use crate::tree::{Compression, Content, EntryKind, Interests, LayerDiff, LayerEntry, Limits};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::borrow::Cow;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// The layout of an entry. Bump it whenever the wire types below or what the layer reader
/// records change (a new field, a new ELF fact): the memlint version alone does not change
/// between development builds.
pub const FORMAT: u32 = 1;
const MAGIC: &[u8; 8] = b"MLLAYER\0";
const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The environment variable that bounds the cache folder, e.g. `MEMLINT_CACHE_MAX_BYTES=512M`.
pub const MAX_BYTES_ENV: &str = "MEMLINT_CACHE_MAX_BYTES";
pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;
/// A temporary file this old was left by a run that died before renaming it.
const STALE_TEMP: Duration = Duration::from_secs(3600);
const TEMP_PREFIX: &str = ".tmp-";
const ZSTD_LEVEL: i32 = 3;

/// A cache folder.
#[derive(Debug)]
pub struct LayerCache {
    dir: PathBuf,
    max_bytes: u64,
    /// Set after the folder could not be read: the rest of the run goes on without it.
    reads_off: AtomicBool,
    /// Set after an entry could not be written (read-only folder, full disk); reads go on,
    /// since a read-only cache shared by CI jobs is still worth reading.
    writes_off: AtomicBool,
    /// Something was written since the last eviction pass.
    wrote: AtomicBool,
}

impl LayerCache {
    /// The folder users expect: `$XDG_CACHE_HOME/memlint`, else `~/.cache/memlint`.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| PathBuf::from(h).join(".cache"))
            })?;
        Some(base.join("memlint"))
    }

    /// A cache in `dir`, bounded by `MEMLINT_CACHE_MAX_BYTES` when it is set. Nothing is
    /// touched on disk until a layer is looked up or written.
    pub fn open(dir: &Path) -> LayerCache {
        let max_bytes = match std::env::var(MAX_BYTES_ENV) {
            Ok(v) if !v.trim().is_empty() => crate::tree::layer::parse_size(&v).unwrap_or_else(|| {
                warn(&format!(
                    "{MAX_BYTES_ENV}={v} is not a size (e.g. 512M, 4G); the layer cache keeps its default bound of 2 GiB"
                ));
                DEFAULT_MAX_BYTES
            }),
            _ => DEFAULT_MAX_BYTES,
        };
        LayerCache::with_max_bytes(dir, max_bytes)
    }

    pub fn with_max_bytes(dir: &Path, max_bytes: u64) -> LayerCache {
        LayerCache {
            dir: dir.to_path_buf(),
            max_bytes,
            reads_off: AtomicBool::new(false),
            writes_off: AtomicBool::new(false),
            wrote: AtomicBool::new(false),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The folder this memlint's entries live in.
    fn entries_dir(&self) -> PathBuf {
        self.dir
            .join("layers")
            .join(format!("v{FORMAT}-{VERSION}"))
            .join("sha256")
    }

    /// Where the entry for a layer lives; only sha256 diff_ids are keys, since only those are
    /// verified while reading.
    pub fn entry_path(&self, diff_id: &Digest) -> Option<PathBuf> {
        diff_id
            .is_sha256()
            .then(|| self.entries_dir().join(diff_id.hex()))
    }

    /// Whether the folders from `layers` down to the entries folder are real folders (or not
    /// there yet). A symbolic link among them could lead writes, and the removals of damaged or
    /// evicted entries, outside the cache; such a cache is not used, with one warning.
    fn folders_are_real(&self) -> bool {
        let mut at = self.dir.join("layers");
        let version = format!("v{FORMAT}-{VERSION}");
        for next in [None, Some(version.as_str()), Some("sha256")] {
            if let Some(n) = next {
                at = at.join(n);
            }
            match fs::symlink_metadata(&at) {
                Ok(m) if m.is_dir() => {}
                // Not there yet, or not reachable (a file where a folder should be): writing
                // and reading fail on their own, with their own warning.
                Err(_) => return true,
                Ok(_) => {
                    self.writes_off.store(true, Ordering::Relaxed);
                    if !self.reads_off.swap(true, Ordering::Relaxed) {
                        warn(&format!(
                            "the layer cache folder {} is not a plain folder (a symbolic link?); going on without the cache",
                            at.display()
                        ));
                    }
                    return false;
                }
            }
        }
        true
    }

    /// Whether an entry exists for the layer (cheap: the file is not read, so it may still turn
    /// out damaged or made for other interests).
    pub fn contains(&self, diff_id: &Digest) -> bool {
        !self.reads_off.load(Ordering::Relaxed)
            && self
                .entry_path(diff_id)
                .is_some_and(|p| fs::metadata(p).is_ok_and(|m| m.is_file()))
    }

    /// The layer as a read with `wanted` under `limits` would give it, when an entry holds all
    /// of that. A damaged entry is removed with a warning; an entry read for other interests
    /// is left for the caller to overwrite.
    pub(crate) fn load(&self, diff_id: &Digest, wanted: &Interests, limits: &Limits) -> Option<LayerDiff> {
        if self.reads_off.load(Ordering::Relaxed) {
            return None;
        }
        let path = self.entry_path(diff_id)?;
        if !self.folders_are_real() {
            return None;
        }
        let mut file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
            Err(e) => {
                if !self.reads_off.swap(true, Ordering::Relaxed) {
                    warn(&format!(
                        "cannot read the layer cache in {} ({e}); going on without it",
                        self.dir.display()
                    ));
                }
                return None;
            }
        };
        let bound = read_bound(limits);
        // An entry larger than this run's limits allow is a miss, not damage: a run with the
        // usual limits can still use it.
        if file.metadata().map_or(true, |m| !m.is_file() || m.len() > bound) {
            return None;
        }
        let mut bytes = Vec::new();
        let decoded = match (&mut file).take(bound.saturating_add(1)).read_to_end(&mut bytes) {
            Err(e) => Err(Rejected::Damaged(format!("it cannot be read: {e}"))),
            // It grew while it was read (another run replaced it): a miss.
            Ok(_) if bytes.len() as u64 > bound => Err(Rejected::TooLarge),
            Ok(_) => decode(&bytes, diff_id, bound),
        };
        drop(bytes);
        let (mut diff, made_with) = match decoded {
            Ok(d) => d,
            Err(Rejected::TooLarge) => return None,
            Err(Rejected::Damaged(reason)) => {
                warn(&format!(
                    "the layer cache entry {} is damaged ({reason}); it is removed and the layer read from the image",
                    path.display()
                ));
                let _ = fs::remove_file(&path);
                return None;
            }
        };
        if !fit(&mut diff.entries, &made_with, wanted, limits) {
            return None;
        }
        // The mtime is the recency eviction goes by; a folder we cannot touch is still usable.
        let _ = file.set_modified(SystemTime::now());
        Some(diff)
    }

    /// Writes the entry for a layer whose diff_id was verified, read with `made_with`. Any
    /// failure turns writing off for the rest of the run, with one warning.
    pub(crate) fn store(&self, diff: &LayerDiff, made_with: &Interests, limits: &Limits) {
        if self.writes_off.load(Ordering::Relaxed) {
            return;
        }
        let Some(path) = self.entry_path(&diff.diff_id) else {
            return;
        };
        if !self.folders_are_real() {
            return;
        }
        let bytes = match encode(diff, made_with, read_bound(limits)) {
            Ok(Some(b)) => b,
            // Too large to be read back under these limits: not worth the disk.
            Ok(None) => return,
            Err(e) => return self.write_failed(&e),
        };
        match write_atomically(&path, &bytes) {
            Ok(()) => self.wrote.store(true, Ordering::Relaxed),
            Err(e) => self.write_failed(&e),
        }
    }

    fn write_failed(&self, e: &io::Error) {
        if !self.writes_off.swap(true, Ordering::Relaxed) {
            warn(&format!(
                "cannot write the layer cache in {} ({e}); going on without it (--cache-dir moves it, --no-cache turns it off)",
                self.dir.display()
            ));
        }
    }

    /// After writing: removes temporary files that a dead run left, and when the entries pass
    /// the bound, the least recently used ones until they are under 90% of it.
    pub(crate) fn evict(&self) {
        if !self.wrote.swap(false, Ordering::Relaxed) {
            return;
        }
        let now = SystemTime::now();
        let mut entries = Vec::new();
        let mut total = 0u64;
        let layers = self.dir.join("layers");
        let current = self.entries_dir();
        // Only real folders are walked: a symbolic link at any level could lead outside the
        // cache, and eviction removes files.
        for version in real_dirs(&layers) {
            for algorithm in real_dirs(&version) {
                for path in read_dir(&algorithm) {
                    let Ok(meta) = fs::symlink_metadata(&path) else {
                        continue;
                    };
                    if !meta.is_file() {
                        continue;
                    }
                    let modified = meta.modified().unwrap_or(now);
                    let is_temp = path
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(TEMP_PREFIX));
                    if is_temp {
                        if now.duration_since(modified).is_ok_and(|age| age > STALE_TEMP) {
                            let _ = fs::remove_file(&path);
                        }
                        continue;
                    }
                    total += meta.len();
                    entries.push((modified, meta.len(), path));
                }
                if algorithm != current {
                    // Folders of other versions go once eviction has emptied them.
                    let _ = fs::remove_dir(&algorithm);
                }
            }
            let _ = fs::remove_dir(&version);
        }
        if total <= self.max_bytes {
            return;
        }
        let target = self.max_bytes / 10 * 9;
        entries.sort();
        for (_, len, path) in entries {
            if total <= target {
                break;
            }
            match fs::remove_file(&path) {
                Ok(()) => total -= len,
                // Another run evicted it first.
                Err(e) if e.kind() == io::ErrorKind::NotFound => total -= len,
                Err(_) => {}
            }
        }
    }
}

fn warn(message: &str) {
    eprintln!("memlint: warning: {message}");
}

/// The largest entry (compressed or not) read back: a layer's metadata and kept contents can
/// take no more than this in memory when read from its blob either.
fn read_bound(limits: &Limits) -> u64 {
    limits
        .max_metadata_bytes
        .saturating_add(limits.max_kept_bytes_per_layer)
}

/// The folders in `dir` that are folders themselves, not links to one; nothing when `dir` is
/// not a real folder.
fn real_dirs(dir: &Path) -> Vec<PathBuf> {
    if !fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return Vec::new();
    }
    read_dir(dir)
        .into_iter()
        .filter(|p| fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .collect()
}

fn read_dir(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .map(|it| it.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default()
}

fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other("an entry path has a folder"))?;
    fs::create_dir_all(dir)?;
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let temp = dir.join(format!(
        "{TEMP_PREFIX}{}-{}-{}-{nanos}",
        &name[..name.len().min(16)],
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
    ));
    let written = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&temp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

// The wire format. These types are the format: they are written out field by field, so a
// change here (or in what the conversions carry) needs a new FORMAT.

#[derive(Serialize, Deserialize)]
struct Stored<'a, E> {
    diff_id: Cow<'a, str>,
    blob_digest: Cow<'a, str>,
    blob_size: u64,
    uncompressed_size: u64,
    compression: u8,
    made_with: WireInterests<'a>,
    entries: E,
}

#[derive(Serialize, Deserialize)]
struct WireInterests<'a> {
    keep: Vec<(Cow<'a, str>, u64)>,
    scripts: Vec<Cow<'a, str>>,
    elf_heads: bool,
    elf_scan: bool,
}

#[derive(Serialize, Deserialize)]
struct WireEntry<'a> {
    path: Cow<'a, [String]>,
    kind: WireKind<'a>,
    mode: u32,
    uid: u64,
    gid: u64,
    size: u64,
    content: Option<(Bytes<'a>, bool)>,
    elf: Option<WireElf<'a>>,
}

#[derive(Serialize, Deserialize)]
enum WireKind<'a> {
    Dir,
    File,
    Symlink(Cow<'a, str>),
    Hardlink(Cow<'a, str>),
    Special,
    Whiteout,
    OpaqueWhiteout,
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
    embedded_allocator: Option<Cow<'a, str>>,
    node_release: Option<Cow<'a, str>>,
    glibc_release: Option<Cow<'a, str>>,
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

/// Lets the entries be written straight from the layer, without a copy.
struct Entries<'a>(&'a [LayerEntry]);

impl Serialize for Entries<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(wire_entry))
    }
}

fn compression_code(c: Compression) -> u8 {
    match c {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Zstd => 2,
    }
}

fn wire_entry(e: &LayerEntry) -> WireEntry<'_> {
    // Destructured in full so that a new field is a compile error here, not a silent loss.
    let LayerEntry {
        path,
        kind,
        mode,
        uid,
        gid,
        size,
        content,
        elf,
    } = e;
    WireEntry {
        path: Cow::Borrowed(path),
        kind: match kind {
            EntryKind::Dir => WireKind::Dir,
            EntryKind::File => WireKind::File,
            EntryKind::Symlink(t) => WireKind::Symlink(Cow::Borrowed(t)),
            EntryKind::Hardlink(t) => WireKind::Hardlink(Cow::Borrowed(t)),
            EntryKind::Special => WireKind::Special,
            EntryKind::Whiteout => WireKind::Whiteout,
            EntryKind::OpaqueWhiteout => WireKind::OpaqueWhiteout,
        },
        mode: *mode,
        uid: *uid,
        gid: *gid,
        size: *size,
        content: content.as_ref().map(|c| {
            let Content { bytes, truncated } = c;
            (Bytes(Cow::Borrowed(bytes)), *truncated)
        }),
        elf: elf.as_deref().map(wire_elf),
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
        embedded_allocator,
        node_release,
        glibc_release,
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
        embedded_allocator: embedded_allocator.map(Cow::Borrowed),
        node_release: node_release.as_deref().map(Cow::Borrowed),
        glibc_release: glibc_release.as_deref().map(Cow::Borrowed),
    }
}

fn from_wire_entry(w: WireEntry) -> Result<LayerEntry, String> {
    Ok(LayerEntry {
        path: w.path.into_owned(),
        kind: match w.kind {
            WireKind::Dir => EntryKind::Dir,
            WireKind::File => EntryKind::File,
            WireKind::Symlink(t) => EntryKind::Symlink(t.into_owned()),
            WireKind::Hardlink(t) => EntryKind::Hardlink(t.into_owned()),
            WireKind::Special => EntryKind::Special,
            WireKind::Whiteout => EntryKind::Whiteout,
            WireKind::OpaqueWhiteout => EntryKind::OpaqueWhiteout,
        },
        mode: w.mode,
        uid: w.uid,
        gid: w.gid,
        size: w.size,
        content: w.content.map(|(bytes, truncated)| Content {
            bytes: bytes.0.into_owned(),
            truncated,
        }),
        elf: w.elf.map(from_wire_elf).transpose()?.map(Box::new),
    })
}

fn from_wire_elf(w: WireElf) -> Result<ElfInfo, String> {
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
            embedded_allocator: match w.embedded_allocator {
                None => None,
                Some(name) => Some(
                    crate::elf::known_allocator(&name)
                        .ok_or_else(|| format!("unknown allocator `{name}`"))?,
                ),
            },
            node_release: owned(w.node_release),
            glibc_release: owned(w.glibc_release),
        },
    })
}

fn wire_interests(i: &Interests) -> WireInterests<'_> {
    let Interests {
        keep,
        scripts,
        elf_heads,
        elf_scan,
    } = i;
    WireInterests {
        keep: keep
            .iter()
            .map(|k| (Cow::Borrowed(k.pattern.as_str()), k.max_bytes))
            .collect(),
        scripts: scripts.iter().map(|p| Cow::Borrowed(p.as_str())).collect(),
        elf_heads: *elf_heads,
        elf_scan: *elf_scan,
    }
}

fn from_wire_interests(w: WireInterests) -> Interests {
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
    }
}

/// `MAGIC | FORMAT (u32 LE) | version length (u8) | version | payload length (u64 LE) | payload
/// | sha256 of everything before it`, the payload being the zstd-compressed postcard encoding
/// of [`Stored`]. `None` when the layer's encoding is larger than `bound`, the most a read
/// would accept.
fn encode(diff: &LayerDiff, made_with: &Interests, bound: u64) -> io::Result<Option<Vec<u8>>> {
    let stored = Stored {
        diff_id: Cow::Owned(diff.diff_id.to_string()),
        blob_digest: Cow::Owned(diff.blob_digest.to_string()),
        blob_size: diff.blob_size,
        uncompressed_size: diff.uncompressed_size,
        compression: compression_code(diff.compression),
        made_with: wire_interests(made_with),
        entries: Entries(&diff.entries),
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
enum Rejected {
    /// Larger than this run's limits allow: a miss, the entry is kept.
    TooLarge,
    /// What is wrong with it: the entry is removed.
    Damaged(String),
}

/// Reads an entry back.
fn decode(bytes: &[u8], key: &Digest, bound: u64) -> Result<(LayerDiff, Interests), Rejected> {
    match decode_within(bytes, key, bound) {
        Ok(Some(d)) => Ok(d),
        Ok(None) => Err(Rejected::TooLarge),
        Err(reason) => Err(Rejected::Damaged(reason)),
    }
}

/// Reads an entry back: `None` when it is sound but unpacks to more than `bound`; the error
/// says what is wrong with it.
fn decode_within(bytes: &[u8], key: &Digest, bound: u64) -> Result<Option<(LayerDiff, Interests)>, String> {
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
    let (stored, rest): (Stored<Vec<WireEntry>>, &[u8]) =
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
        n => return Err(format!("unknown compression {n}")),
    };
    let diff = LayerDiff {
        blob_digest: digest(&stored.blob_digest)?,
        blob_size: stored.blob_size,
        diff_id,
        uncompressed_size: stored.uncompressed_size,
        compression,
        entries: stored
            .entries
            .into_iter()
            .map(from_wire_entry)
            .collect::<Result<_, _>>()?,
    };
    Ok(Some((diff, from_wire_interests(stored.made_with))))
}

/// Whether entries read with `made_with` hold everything a read with `wanted` under `limits`
/// would keep; when they do, they are trimmed to exactly what that read would keep, so a cached
/// layer and a read layer give the same tree. Mirrors `probe_file` in the layer reader: a file
/// is kept to its keep cap, else a file starting with `#!` to the script cap; ELF facts come
/// with the flags.
fn fit(entries: &mut [LayerEntry], made_with: &Interests, wanted: &Interests, limits: &Limits) -> bool {
    let per_file = |c: u64| c.min(limits.max_kept_bytes_per_file);
    let elf_missing = (wanted.elf_heads && !made_with.elf_heads) || (wanted.elf_scan && !made_with.elf_scan);
    for e in entries.iter_mut() {
        if e.kind != EntryKind::File || e.size == 0 {
            // The reader never looks inside these.
            continue;
        }
        if elf_missing {
            return false;
        }
        let parts: Vec<&str> = e.path.iter().map(String::as_str).collect();
        let cap = wanted.keep_cap(&parts).map(per_file);
        let script_cap = wanted.wants_script(&parts).then(|| per_file(SCRIPT_CAP));
        let need = match &e.content {
            // Either nothing wanted it, or it was a script pattern and the file does not start
            // with `#!`: only then is the absence an answer.
            None => {
                if cap.is_some() || (script_cap.is_some() && !made_with.wants_script(&parts)) {
                    return false;
                }
                None
            }
            Some(c) => {
                let known_start = c.bytes.len() >= 2 || !c.truncated;
                match (cap, script_cap) {
                    (Some(cap), _) => Some(cap),
                    (None, Some(_)) if !known_start => return false,
                    (None, Some(s)) if c.bytes.starts_with(b"#!") => Some(s),
                    _ => None,
                }
            }
        };
        match (need, e.content.as_mut()) {
            (None, _) => e.content = None,
            (Some(need), Some(c)) => {
                if c.truncated && (c.bytes.len() as u64) < need {
                    // Cut shorter than this read wants.
                    return false;
                }
                c.bytes.truncate(usize::try_from(need).unwrap_or(usize::MAX));
                c.truncated = (c.bytes.len() as u64) < e.size;
            }
            (Some(_), None) => return false,
        }
        if !wanted.elf_heads {
            e.elf = None;
        } else if !wanted.elf_scan {
            if let Some(elf) = e.elf.as_mut() {
                elf.scan = ElfScan::default();
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::layer::read_layer;

    /// A plain tar of `(path, contents)` files.
    fn tar(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, data) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o755);
            h.set_entry_type(tar::EntryType::Regular);
            b.append_data(&mut h, path, *data).unwrap();
        }
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, "usr/bin/sh", "dash").unwrap();
        b.into_inner().unwrap()
    }

    fn elf() -> Vec<u8> {
        // A 64-bit little-endian x86-64 executable header, no program headers.
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[16] = 2;
        h[18] = 62;
        h
    }

    fn sample() -> Vec<u8> {
        let elf = elf();
        tar(&[
            ("etc/os-release", b"ID=debian\nVERSION_ID=12\n"),
            ("usr/bin/start", b"#!/bin/sh\nexec /opt/app/run \"$@\"\n"),
            ("opt/app/run", b"#!/bin/sh\necho run\n"),
            ("opt/app/data", b"not a script"),
            ("usr/bin/tool", &elf),
            ("var/lib/dpkg/status", &[b'x'; 5000]),
        ])
    }

    /// What a read for the facts keeps of [`sample`]: os-release, the dpkg database, scripts
    /// in /usr/bin and ELF facts (the cache sees interests, not who declared them).
    fn interests() -> Interests {
        Interests::default()
            .keep("/etc/os-release", 256 * 1024)
            .keep("/var/lib/dpkg/status", 16 * 1024 * 1024)
            .script("/usr/bin/*")
            .scan_elf()
    }

    fn read(tar: &[u8], interests: &Interests, limits: &Limits) -> LayerDiff {
        read_layer(tar, interests, limits).unwrap()
    }

    /// What a tree cares about, in a comparable form.
    fn view(d: &LayerDiff) -> Vec<String> {
        d.entries
            .iter()
            .map(|e| format!("{:?} {:?} {:?} {:?} {}", e.path, e.kind, e.content, e.elf, e.size))
            .collect()
    }

    #[test]
    fn entries_round_trip() {
        let limits = Limits::default();
        let interests = interests();
        let diff = read(&sample(), &interests, &limits);
        assert!(diff.entries.iter().any(|e| e.elf.is_some()));
        let bytes = encode(&diff, &interests, read_bound(&limits)).unwrap().unwrap();
        let (back, made_with) = decode(&bytes, &diff.diff_id, read_bound(&limits)).unwrap();
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
        assert!(decode_within(&flipped, &diff.diff_id, bound)
            .unwrap_err()
            .contains("checksum"));
        let cut = decode_within(&bytes[..bytes.len() - 7], &diff.diff_id, bound).unwrap_err();
        assert!(cut.contains("header says"), "{cut}");
        assert!(decode_within(&bytes[..10], &diff.diff_id, bound).is_err());
        assert!(decode_within(b"", &diff.diff_id, bound).is_err());
        let other = Digest::of(b"other");
        assert!(decode_within(&bytes, &other, bound)
            .unwrap_err()
            .contains("holds layer"));
        // Another memlint's entry with a valid checksum.
        let mut old = bytes.clone();
        let v = MAGIC.len() + 5;
        old[v] = b'9';
        let n = old.len() - 32;
        let sum = Sha256::digest(&old[..n]);
        old[n..].copy_from_slice(&sum);
        assert!(decode_within(&old, &diff.diff_id, bound)
            .unwrap_err()
            .contains("written by memlint 9"));
        // An entry that unpacks past the bound is refused before it is decoded
        // (a miss that keeps the entry, not damage).
        assert!(matches!(
            decode(&bytes, &diff.diff_id, 100),
            Err(Rejected::TooLarge)
        ));
    }

    #[test]
    fn an_entry_over_this_runs_bound_is_a_miss_that_stays() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits::default();
        let interests = interests();
        let cache = LayerCache::with_max_bytes(dir.path(), 1 << 30);
        let diff = read(&sample(), &interests, &limits);
        cache.store(&diff, &interests, &limits);
        let path = cache.entry_path(&diff.diff_id).unwrap();
        let before = fs::read(&path).unwrap();
        for tight in [
            // Below the file's size: refused before it is read.
            Limits {
                max_metadata_bytes: 0,
                max_kept_bytes_per_layer: 16,
                ..Limits::default()
            },
            // Above the file's size, below what it unpacks to.
            Limits {
                max_metadata_bytes: 0,
                max_kept_bytes_per_layer: before.len() as u64,
                ..Limits::default()
            },
        ] {
            assert!(cache.load(&diff.diff_id, &interests, &tight).is_none());
            assert_eq!(fs::read(&path).unwrap(), before);
        }
        assert!(cache.load(&diff.diff_id, &interests, &limits).is_some());
    }

    #[cfg(unix)]
    #[test]
    fn symbolic_links_in_the_cache_lead_nowhere_outside_it() {
        use std::os::unix::fs::symlink;
        let limits = Limits::default();
        let interests = interests();
        let diff = read(&sample(), &interests, &limits);
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        fs::create_dir_all(victim.join("sha256")).unwrap();
        fs::write(victim.join("file"), b"keep").unwrap();
        fs::write(victim.join("sha256").join("file"), b"keep").unwrap();

        // Eviction does not follow a linked version or algorithm folder.
        let dir = tempfile::tempdir().unwrap();
        let layers = dir.path().join("layers");
        fs::create_dir_all(layers.join("v0-old")).unwrap();
        symlink(&victim, layers.join("v0-old").join("sha256")).unwrap();
        symlink(&victim, layers.join("v0-other")).unwrap();
        let cache = LayerCache::with_max_bytes(dir.path(), 0);
        cache.store(&diff, &interests, &limits);
        cache.evict();
        assert_eq!(fs::read(victim.join("file")).unwrap(), b"keep");
        assert_eq!(fs::read(victim.join("sha256").join("file")).unwrap(), b"keep");
        assert!(fs::symlink_metadata(layers.join("v0-other")).is_ok());

        // A linked entries folder (or `layers` folder) is neither written nor read.
        for linked in [
            PathBuf::from("layers")
                .join(format!("v{FORMAT}-{VERSION}"))
                .join("sha256"),
            PathBuf::from("layers"),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let at = dir.path().join(&linked);
            fs::create_dir_all(at.parent().unwrap()).unwrap();
            symlink(&victim, &at).unwrap();
            let cache = LayerCache::with_max_bytes(dir.path(), 1 << 30);
            cache.store(&diff, &interests, &limits);
            let mut names: Vec<_> = read_dir(&victim);
            names.sort();
            assert_eq!(
                names,
                vec![victim.join("file"), victim.join("sha256")],
                "{linked:?}"
            );
            assert!(cache.load(&diff.diff_id, &interests, &limits).is_none());
        }
    }

    #[test]
    fn a_fitting_entry_gives_exactly_what_a_read_gives() {
        let limits = Limits::default();
        let tar = sample();
        let base = interests();
        // What an image whose Cmd is /opt/app/run adds.
        let wide = base.clone().script("/opt/app/run");
        assert!(wide.wants_script(&["opt", "app", "run"]));
        assert!(!base.wants_script(&["opt", "app", "run"]));

        // Read for more than is wanted now: usable, trimmed to what a read would keep.
        let mut entries = read(&tar, &wide, &limits).entries;
        assert!(fit(&mut entries, &wide, &base, &limits));
        let direct = read(&tar, &base, &limits);
        let trimmed = LayerDiff {
            entries,
            ..direct.clone()
        };
        assert_eq!(view(&trimmed), view(&direct));

        // Read for less: /opt/app/run is a script the entry never looked at.
        let mut entries = read(&tar, &base, &limits).entries;
        assert!(!fit(&mut entries, &base, &wide, &limits));

        // A pattern that matches a file which is not a script: the absence is an answer.
        let data_only = Interests {
            scripts: vec![PathPattern::new("/opt/app/data")],
            ..base.clone()
        };
        let mut entries = read(&tar, &data_only, &limits).entries;
        assert!(fit(&mut entries, &data_only, &data_only, &limits));

        // Kept with a smaller cap than wanted now (a lower per-file limit): not enough.
        let small = Limits {
            max_kept_bytes_per_file: 100,
            ..Limits::default()
        };
        let mut entries = read(&tar, &base, &small).entries;
        assert!(!fit(&mut entries, &base, &base, &limits));
        // The other way round it fits, and matches a read under the small limit.
        let mut entries = read(&tar, &base, &limits).entries;
        assert!(fit(&mut entries, &base, &base, &small));
        let direct = read(&tar, &base, &small);
        assert_eq!(
            view(&LayerDiff {
                entries,
                ..direct.clone()
            }),
            view(&direct)
        );

        // A larger keep cap for a file that was kept whole before is still whole.
        let bigger = base.clone().keep("/etc/os-release", 1 << 20);
        let mut entries = read(&tar, &base, &limits).entries;
        assert!(fit(&mut entries, &base, &bigger, &limits));

        // ELF facts: an entry without them cannot serve a read that wants them.
        let no_elf = Interests {
            elf_heads: false,
            elf_scan: false,
            ..base.clone()
        };
        let mut entries = read(&tar, &no_elf, &limits).entries;
        assert!(!fit(&mut entries, &no_elf, &base, &limits));
        let mut entries = read(&tar, &base, &limits).entries;
        assert!(fit(&mut entries, &base, &no_elf, &limits));
        assert!(entries.iter().all(|e| e.elf.is_none()));
    }

    #[test]
    fn store_load_and_evict() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits::default();
        let interests = interests();
        let cache = LayerCache::with_max_bytes(dir.path(), 1 << 30);
        let diff = read(&sample(), &interests, &limits);
        assert!(!cache.contains(&diff.diff_id));
        assert!(cache.load(&diff.diff_id, &interests, &limits).is_none());
        cache.store(&diff, &interests, &limits);
        assert!(cache.contains(&diff.diff_id));
        let back = cache.load(&diff.diff_id, &interests, &limits).unwrap();
        assert_eq!(view(&back), view(&diff));
        // Only the entry is left: the temporary file was renamed.
        let path = cache.entry_path(&diff.diff_id).unwrap();
        assert_eq!(read_dir(path.parent().unwrap()), vec![path.clone()]);

        // A damaged entry is removed.
        let mut bytes = fs::read(&path).unwrap();
        bytes.truncate(bytes.len() - 1);
        fs::write(&path, &bytes).unwrap();
        assert!(cache.load(&diff.diff_id, &interests, &limits).is_none());
        assert!(!path.exists());

        // Eviction drops the least recently used entries down to 90% of the bound.
        let small = LayerCache::with_max_bytes(dir.path(), 0);
        let mut paths = Vec::new();
        for i in 0..4u8 {
            let mut d = diff.clone();
            d.diff_id = Digest::of(&[i]);
            small.store(&d, &interests, &limits);
            paths.push(small.entry_path(&d.diff_id).unwrap());
        }
        let one = fs::metadata(&paths[0]).unwrap().len();
        let bounded = LayerCache::with_max_bytes(dir.path(), one * 3);
        let old = SystemTime::now() - Duration::from_secs(100);
        for (i, p) in paths.iter().enumerate() {
            File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(old + Duration::from_secs(i as u64))
                .unwrap();
        }
        let stale = path.parent().unwrap().join(".tmp-dead");
        fs::write(&stale, b"x").unwrap();
        File::options()
            .write(true)
            .open(&stale)
            .unwrap()
            .set_modified(SystemTime::now() - 2 * STALE_TEMP)
            .unwrap();
        bounded.wrote.store(true, Ordering::Relaxed);
        bounded.evict();
        let left: Vec<bool> = paths.iter().map(|p| p.exists()).collect();
        assert_eq!(left, [false, false, true, true]);
        assert!(!stale.exists());
    }
}
