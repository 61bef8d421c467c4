//! The cache folder on disk: where entries live, how they are written so that readers only see
//! whole ones, which go when the folder passes its bound, and which folders and entries are
//! trusted. Only real folders are walked: a symbolic link at any level could lead writes and
//! removals outside the cache.

use super::wire::{FORMAT, VERSION};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// A temporary file this old was left by a run that died before renaming it.
pub(super) const STALE_TEMP: Duration = Duration::from_secs(3600);
const TEMP_PREFIX: &str = ".tmp-";

/// The folders from the cache folder down to this memlint's entries:
/// `layers/v<FORMAT>-<memlint version>/sha256`. An upgrade starts a new folder rather than
/// tripping over the old entries; the old ones age out by eviction.
pub(super) fn entries_parts() -> [String; 3] {
    [
        "layers".to_string(),
        format!("v{FORMAT}-{VERSION}"),
        "sha256".to_string(),
    ]
}

/// The folder this memlint's entries live in.
pub(super) fn entries_dir(root: &Path) -> PathBuf {
    entries_parts()
        .iter()
        .fold(root.to_path_buf(), |at, part| at.join(part))
}

/// Why a folder or an entry of the cache is not trusted: whoever can write it can make a layer
/// read as anything (a forged entry under a base layer's diff_id hides a finding), so, as ssh's
/// StrictModes and git's `safe.directory` do, only what the current user owns and no one else
/// can write is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Distrust {
    /// A symbolic link, a file where a folder belongs, a folder where an entry belongs.
    NotPlain,
    /// Owned by this user id, not the current one.
    Owner(u32),
    /// Its group or others may write it (the mode bits).
    Writable(u32),
}

impl Distrust {
    /// What is wrong, for a warning: "is owned by uid 65534, not by the current user (uid 0)".
    pub(super) fn describe(&self, me: u32) -> String {
        match self {
            Distrust::NotPlain => "is not a plain folder or file (a symbolic link?)".to_string(),
            Distrust::Owner(uid) => format!("is owned by uid {uid}, not by the current user (uid {me})"),
            Distrust::Writable(mode) => format!("can be written by other users (mode {:04o})", mode & 0o7777),
        }
    }
}

/// The user whose cache this is: the effective user, the one that owns what this run creates.
pub(super) fn current_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Whether `meta` (of a folder when `dir`, else of an entry) may be trusted by user `me`.
pub(super) fn distrust(meta: &fs::Metadata, dir: bool, me: u32) -> Option<Distrust> {
    use std::os::unix::fs::MetadataExt;
    let plain = if dir { meta.is_dir() } else { meta.is_file() };
    if !plain || meta.file_type().is_symlink() {
        Some(Distrust::NotPlain)
    } else if meta.uid() != me {
        Some(Distrust::Owner(meta.uid()))
    } else if meta.mode() & 0o022 != 0 {
        Some(Distrust::Writable(meta.mode()))
    } else {
        None
    }
}

/// The first folder from `layers` down to the entries folder that is there but may not be
/// trusted by user `me`, and why; `None` when each is a plain folder of `me` that no one else
/// can write, or is not there yet (not there, or not reachable: writing and reading fail on
/// their own then). The cache folder itself is not checked: it may be a shared parent (a
/// Kubernetes `emptyDir`, `/tmp`), since memlint keeps everything in `layers` below it.
pub(super) fn first_untrusted_folder(root: &Path, me: u32) -> Option<(PathBuf, Distrust)> {
    let mut at = root.to_path_buf();
    for part in entries_parts() {
        at = at.join(part);
        match fs::symlink_metadata(&at) {
            Err(_) => return None,
            Ok(m) => {
                if let Some(why) = distrust(&m, true, me) {
                    return Some((at, why));
                }
            }
        }
    }
    None
}

/// Creates the entries folder and the folders above it that are missing, each readable and
/// writable by the current user only.
pub(super) fn create_entries_dir(root: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(entries_dir(root))
}

/// The folders in `dir` that are folders themselves, not links to one; nothing when `dir` is
/// not a real folder.
pub(super) fn real_dirs(dir: &Path) -> Vec<PathBuf> {
    if !fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return Vec::new();
    }
    read_dir(dir)
        .into_iter()
        .filter(|p| fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .collect()
}

pub(super) fn read_dir(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .map(|it| it.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// Writes to a unique temporary name beside `path` (in a folder that is there), syncs, then
/// renames: readers only ever see complete entries, and concurrent runs writing the same layer
/// both succeed.
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other("an entry path has a folder"))?;
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
        // Only its owner may write an entry (or read it: it may hold a private image's files).
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

/// Removes temporary files that a dead run left, and when the entries of every version pass
/// `max_bytes`, the least recently used ones (a hit refreshes the mtime) until they are under
/// 90% of it. Folders of other versions go once emptied.
pub(super) fn evict(root: &Path, max_bytes: u64) {
    let now = SystemTime::now();
    let mut entries = Vec::new();
    let mut total = 0u64;
    let current = entries_dir(root);
    for version in real_dirs(&root.join("layers")) {
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
    if total <= max_bytes {
        return;
    }
    let target = max_bytes / 10 * 9;
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
