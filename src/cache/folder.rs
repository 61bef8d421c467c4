//! The cache folder on disk: where entries live, how they are written so that readers only see
//! whole ones, and which go when the folder passes its bound. Only real folders are walked:
//! a symbolic link at any level could lead writes and removals outside the cache.

use super::wire::{FORMAT, VERSION};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
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

/// The first folder from `layers` down to the entries folder that is there but is not a plain
/// folder (a symbolic link, a file); `None` when each is a real folder or not there yet (not
/// there, or not reachable: writing and reading fail on their own then).
pub(super) fn first_unreal_folder(root: &Path) -> Option<PathBuf> {
    let mut at = root.to_path_buf();
    for part in entries_parts() {
        at = at.join(part);
        match fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Err(_) => return None,
            Ok(_) => return Some(at),
        }
    }
    None
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

/// Writes to a unique temporary name beside `path`, syncs, then renames: readers only ever see
/// complete entries, and concurrent runs writing the same layer both succeed.
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
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
