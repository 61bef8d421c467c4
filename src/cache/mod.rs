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
//!   config, and each entry carries a sha256 of itself, so damage reads as a miss. That sum
//!   proves nothing against whoever can write the folder (an entry forged under a base layer's
//!   diff_id can hide a finding), so the cache is trusted input: memlint keeps its entries in
//!   `layers`, which it creates with mode 0700 (entries 0600), and uses neither a folder from
//!   `layers` down nor an entry that the current user does not own or that others can write
//!   (one warning each), as ssh and git's `safe.directory` do. The cache folder itself may be
//!   a shared parent (a Kubernetes `emptyDir`, mode 1777 or 0777).
//! - Interests: an entry records what it was read for (keep rules, script patterns, ELF
//!   flags). A lookup uses it only when it holds everything the current read would keep, and
//!   trims it to exactly that, so a cached read gives the same tree as reading the blob.
//! - Files: written to a unique temporary name beside the final one, synced, then renamed, so
//!   readers only ever see complete entries and concurrent runs writing the same layer both
//!   succeed. Least recently used entries (a hit refreshes the mtime) are removed once the
//!   folder passes its bound (`MEMLINT_CACHE_MAX_BYTES`, read by `commands/`; default 2 GiB).
//! - Failures: a damaged entry is removed with one warning and the layer is read from the
//!   image; an entry larger than this run's limits allow is a plain miss and stays; a folder
//!   that cannot be written or read gives one warning and the run goes on without the cache.
//!   The cache never fails a lint.
//! - Links: only real folders are walked, written and read; a symbolic link in place of
//!   `layers` or the entries folder turns the cache off with one warning (as a folder of
//!   another user does), and eviction skips linked folders, so neither leads outside the cache.
//! - Warnings go to the [`Warnings`] sink the cache was opened with; `commands/` prints them.
//!
//! The folder policy (layout, atomic writes, eviction) is in [`folder`], the entry format in
//! [`wire`], and whether an entry can serve a read in [`fit`].

mod fit;
mod folder;
mod wire;

#[cfg(test)]
pub(crate) use wire::FORMAT;

use crate::digest::Digest;
use crate::tree::{Interests, LayerDiff, Limits};
use crate::warnings::Warnings;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};
use wire::Rejected;

/// The bound of the cache folder when none is given.
pub(crate) const DEFAULT_MAX_BYTES: u64 = 2 << 30;

/// A cache folder.
#[derive(Debug)]
pub(crate) struct LayerCache {
    dir: PathBuf,
    max_bytes: u64,
    warnings: Warnings,
    /// The user whose folders and entries are trusted.
    uid: u32,
    /// Set after an entry of another user, or one others can write, was refused: warned once.
    entry_refused: AtomicBool,
    /// Set after the folder could not be read: the rest of the run goes on without it.
    reads_off: AtomicBool,
    /// Set after an entry could not be written (read-only folder, full disk); reads go on,
    /// since a read-only cache shared by CI jobs is still worth reading.
    writes_off: AtomicBool,
    /// Something was written since the last eviction pass.
    wrote: AtomicBool,
    /// Layers a worker of this process is reading now: another image of the run that needs
    /// one waits for that read's entry rather than reading the same blob at the same time
    /// (the images of a fleet share their base layers).
    reading: Mutex<HashSet<Digest>>,
    /// Signalled when a layer leaves `reading`.
    read_ended: Condvar,
}

/// The right and duty to read a layer that no other worker of this process is reading; its
/// end (drop, after the entry was written or the read failed) wakes those waiting for it.
pub(crate) struct ReadClaim {
    /// The cache and layer it was registered for; `None` for a read that gave up waiting for
    /// another (whose claim still owns the layer).
    registered: Option<(Arc<LayerCache>, Digest)>,
}

impl Drop for ReadClaim {
    fn drop(&mut self) {
        if let Some((cache, key)) = self.registered.take() {
            let mut reading = cache.reading.lock().unwrap_or_else(|e| e.into_inner());
            reading.remove(&key);
            cache.read_ended.notify_all();
        }
    }
}

/// How long a worker waits for another's read of the same layer before reading it itself: a
/// read that takes longer is one of a blob far larger than a base layer, or a stuck one.
const READ_WAIT: Duration = Duration::from_secs(300);

impl LayerCache {
    /// The folder users expect, from the values of `XDG_CACHE_HOME` and `HOME`:
    /// `$XDG_CACHE_HOME/memlint` when that is an absolute path, else `~/.cache/memlint`.
    pub(crate) fn default_dir(xdg_cache_home: Option<&OsStr>, home: Option<&OsStr>) -> Option<PathBuf> {
        let base = xdg_cache_home
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| {
                home.filter(|v| !v.is_empty())
                    .map(|h| PathBuf::from(h).join(".cache"))
            })?;
        Some(base.join("memlint"))
    }

    /// A cache in `dir` whose entries are kept under `max_bytes` together; warnings go to
    /// `warnings`. Nothing is touched on disk until a layer is looked up or written.
    pub(crate) fn new(dir: &Path, max_bytes: u64, warnings: Warnings) -> LayerCache {
        LayerCache {
            dir: dir.to_path_buf(),
            max_bytes,
            warnings,
            uid: folder::current_uid(),
            entry_refused: AtomicBool::new(false),
            reads_off: AtomicBool::new(false),
            writes_off: AtomicBool::new(false),
            wrote: AtomicBool::new(false),
            reading: Mutex::new(HashSet::new()),
            read_ended: Condvar::new(),
        }
    }

    /// Claims the read of the layer `key`: `Some` when no other worker of this process reads
    /// it (the caller reads it, and stores its entry before dropping the claim); `None` once
    /// another worker's read of it ended, so the caller should look the entry up again. A wait
    /// longer than [`READ_WAIT`] gives up and claims the read alongside.
    pub(crate) fn claim_read(self: &Arc<Self>, key: &Digest) -> Option<ReadClaim> {
        let mut reading = self.reading.lock().unwrap_or_else(|e| e.into_inner());
        if reading.insert(key.clone()) {
            return Some(ReadClaim {
                registered: Some((self.clone(), key.clone())),
            });
        }
        let deadline = Instant::now() + READ_WAIT;
        while reading.contains(key) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Some(ReadClaim { registered: None });
            }
            reading = self
                .read_ended
                .wait_timeout(reading, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        None
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the entry for a layer lives; only sha256 diff_ids are keys, since only those are
    /// verified while reading.
    pub(crate) fn entry_path(&self, diff_id: &Digest) -> Option<PathBuf> {
        diff_id
            .is_sha256()
            .then(|| folder::entries_dir(&self.dir).join(diff_id.hex()))
    }

    /// Whether the folders from `layers` down to the entries folder are plain folders of the
    /// current user that no one else can write (or are not there yet). A symbolic link among
    /// them could lead writes, and the removals of damaged or evicted entries, outside the
    /// cache, and a folder others can write could hold forged entries; such a cache is not
    /// used, with one warning.
    fn folders_are_trusted(&self) -> bool {
        let Some((at, why)) = folder::first_untrusted_folder(&self.dir, self.uid) else {
            return true;
        };
        self.writes_off.store(true, Ordering::Relaxed);
        if !self.reads_off.swap(true, Ordering::Relaxed) {
            let what = match why {
                folder::Distrust::NotPlain => "remove it",
                folder::Distrust::Owner(_) => "remove it, or pass --cache-dir with a folder of your own",
                folder::Distrust::Writable(_) => "`chmod 700` it, or remove it",
            };
            self.warnings.warn(&format!(
                "the layer cache folder {} {}; going on without the cache ({what}: memlint trusts what the cache holds)",
                at.display(),
                why.describe(self.uid),
            ));
        }
        false
    }

    /// Whether an entry exists for the layer (cheap: the file is not read, so it may still turn
    /// out damaged or made for other interests).
    pub(crate) fn contains(&self, diff_id: &Digest) -> bool {
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
        if !self.folders_are_trusted() {
            return None;
        }
        let mut file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
            Err(e) => {
                if !self.reads_off.swap(true, Ordering::Relaxed) {
                    self.warnings.warn(&format!(
                        "cannot read the layer cache in {} ({e}); going on without it",
                        self.dir.display()
                    ));
                }
                return None;
            }
        };
        // Checked on the opened file, so that it cannot be swapped between check and read.
        let Ok(meta) = file.metadata() else {
            return None;
        };
        if let Some(why) = folder::distrust(&meta, false, self.uid) {
            // Not removed: it is not ours to remove. Storing the layer renames a new entry of
            // ours over it.
            if !self.entry_refused.swap(true, Ordering::Relaxed) {
                self.warnings.warn(&format!(
                    "the layer cache entry {} {}; it is not used and the layer is read from the image (memlint trusts only entries it wrote itself)",
                    path.display(),
                    why.describe(self.uid),
                ));
            }
            return None;
        }
        let bound = read_bound(limits);
        // An entry larger than this run's limits allow is a miss, not damage: a run with the
        // usual limits can still use it.
        if meta.len() > bound {
            return None;
        }
        let mut bytes = Vec::new();
        let decoded = match (&mut file).take(bound.saturating_add(1)).read_to_end(&mut bytes) {
            Err(e) => Err(Rejected::Damaged(format!("it cannot be read: {e}"))),
            // It grew while it was read (another run replaced it): a miss.
            Ok(_) if bytes.len() as u64 > bound => Err(Rejected::TooLarge),
            Ok(_) => wire::decode(&bytes, diff_id, bound, &wanted.elf_markers),
        };
        drop(bytes);
        let (mut diff, made_with) = match decoded {
            Ok(d) => d,
            Err(Rejected::TooLarge) => return None,
            Err(Rejected::Damaged(reason)) => {
                self.warnings.warn(&format!(
                    "the layer cache entry {} is damaged ({reason}); it is removed and the layer read from the image",
                    path.display()
                ));
                let _ = fs::remove_file(&path);
                return None;
            }
        };
        if !fit::fit(&mut diff.entries, &made_with, wanted, limits) {
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
        // Checked before creating anything (a linked folder leads outside the cache) and again
        // after: a folder another user made first, in a shared parent, is not written into.
        if !self.folders_are_trusted() {
            return;
        }
        if let Err(e) = folder::create_entries_dir(&self.dir) {
            return self.write_failed(&e);
        }
        if !self.folders_are_trusted() {
            return;
        }
        let bytes = match wire::encode(diff, made_with, read_bound(limits)) {
            Ok(Some(b)) => b,
            // Too large to be read back under these limits: not worth the disk.
            Ok(None) => return,
            Err(e) => return self.write_failed(&e),
        };
        match folder::write_atomically(&path, &bytes) {
            Ok(()) => self.wrote.store(true, Ordering::Relaxed),
            Err(e) => self.write_failed(&e),
        }
    }

    fn write_failed(&self, e: &io::Error) {
        if !self.writes_off.swap(true, Ordering::Relaxed) {
            self.warnings.warn(&format!(
                "cannot write the layer cache in {} ({e}); going on without it (--cache-dir moves it, --no-cache turns it off)",
                self.dir.display()
            ));
        }
    }

    /// After writing: removes temporary files that a dead run left, and when the entries pass
    /// the bound, the least recently used ones until they are under 90% of it.
    pub(crate) fn evict(&self) {
        if self.wrote.swap(false, Ordering::Relaxed) {
            folder::evict(&self.dir, self.max_bytes);
        }
    }
}

/// The largest entry (compressed or not) read back: a layer's metadata and kept contents can
/// take no more than this in memory when read from its blob either.
fn read_bound(limits: &Limits) -> u64 {
    limits
        .max_metadata_bytes
        .saturating_add(limits.max_kept_bytes_per_layer)
}

/// Layers to test the cache with, and a comparable view of what a read gives.
#[cfg(test)]
mod sample {
    use crate::tree::layer::read_layer;
    use crate::tree::{Interests, LayerDiff, Limits};

    /// What a read for the facts keeps of [`sample`]: os-release, the dpkg database, scripts
    /// in /usr/bin and ELF facts (the cache sees interests, not who declared them).
    pub(super) fn interests() -> Interests {
        Interests::default()
            .keep("/etc/os-release", 256 * 1024)
            .keep("/var/lib/dpkg/status", 16 * 1024 * 1024)
            .script("/usr/bin/*")
            .scan_elf()
    }

    /// A plain tar of `(path, contents)` files.
    pub(super) fn tar(files: &[(&str, &[u8])]) -> Vec<u8> {
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

    pub(super) fn elf() -> Vec<u8> {
        // A 64-bit little-endian x86-64 executable header, no program headers.
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[16] = 2;
        h[18] = 62;
        h
    }

    pub(super) fn sample() -> Vec<u8> {
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

    pub(super) fn read(tar: &[u8], interests: &Interests, limits: &Limits) -> LayerDiff {
        read_layer(tar, interests, limits).unwrap()
    }

    /// What a tree cares about, in a comparable form.
    pub(super) fn view(d: &LayerDiff) -> Vec<String> {
        d.entries
            .to_vec()
            .iter()
            .map(|e| format!("{:?} {:?} {:?} {:?} {}", e.path, e.kind, e.content, e.elf, e.size))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::folder::{read_dir, STALE_TEMP};
    use super::sample::{interests, read, sample, view};
    use super::wire::VERSION;
    use super::*;
    use std::time::Duration;

    fn quiet_cache(dir: &Path, max_bytes: u64) -> LayerCache {
        LayerCache::new(dir, max_bytes, Warnings::ignored())
    }

    #[test]
    fn an_entry_over_this_runs_bound_is_a_miss_that_stays() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits::default();
        let interests = interests();
        let cache = quiet_cache(dir.path(), 1 << 30);
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
        let cache = quiet_cache(dir.path(), 0);
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
            let cache = quiet_cache(dir.path(), 1 << 30);
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

    fn mode(p: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    fn chmod(p: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
    }

    /// Tests run as root, which owns whatever it creates: "another user" is uid 65534.
    fn chown_nobody(p: &Path) {
        std::os::unix::fs::lchown(p, Some(65534), Some(65534)).unwrap();
    }

    #[test]
    fn folders_and_entries_are_private_and_a_shared_parent_is_fine() {
        let limits = Limits::default();
        let interests = interests();
        let diff = read(&sample(), &interests, &limits);
        for parent_mode in [0o1777, 0o777] {
            let parent = tempfile::tempdir().unwrap();
            chmod(parent.path(), parent_mode);
            let root = parent.path().join("memlint");
            let (warnings, kept) = Warnings::collected();
            let cache = LayerCache::new(&root, 1 << 30, warnings);
            cache.store(&diff, &interests, &limits);
            let path = cache.entry_path(&diff.diff_id).unwrap();
            assert_eq!(mode(&path), 0o600);
            for d in [&root, &root.join("layers"), &path.parent().unwrap().to_path_buf()] {
                assert_eq!(mode(d), 0o700, "{}", d.display());
            }
            assert!(cache.load(&diff.diff_id, &interests, &limits).is_some());
            assert_eq!(kept.take(), Vec::<String>::new());
        }
    }

    #[test]
    fn a_folder_of_another_user_or_that_others_can_write_is_not_used() {
        let limits = Limits::default();
        let interests = interests();
        let diff = read(&sample(), &interests, &limits);
        let entries = |root: &Path| folder::entries_dir(root);
        type Spoil = fn(&Path);
        let cases: [(&str, Spoil, &str); 4] = [
            ("layers", chown_nobody, "owned by uid 65534"),
            ("layers", |p| chmod(p, 0o777), "mode 0777"),
            ("entries", chown_nobody, "owned by uid 65534"),
            ("entries", |p| chmod(p, 0o720), "mode 0720"),
        ];
        for (which, spoil, says) in cases {
            let dir = tempfile::tempdir().unwrap();
            let warm = quiet_cache(dir.path(), 1 << 30);
            warm.store(&diff, &interests, &limits);
            let path = warm.entry_path(&diff.diff_id).unwrap();
            let before = fs::read(&path).unwrap();
            let at = if which == "layers" {
                dir.path().join("layers")
            } else {
                entries(dir.path())
            };
            spoil(&at);
            let (warnings, kept) = Warnings::collected();
            let cache = LayerCache::new(dir.path(), 0, warnings);
            assert!(
                cache.load(&diff.diff_id, &interests, &limits).is_none(),
                "{which} {says}"
            );
            let mut other = diff.clone();
            other.diff_id = Digest::of(b"other");
            cache.store(&other, &interests, &limits);
            cache.store(&diff, &interests, &limits);
            cache.evict();
            assert!(cache.load(&diff.diff_id, &interests, &limits).is_none());
            let w = kept.take();
            assert_eq!(w.len(), 1, "{which} {says}: {w:?}");
            assert!(
                w[0].contains(says) && w[0].contains(&at.display().to_string()),
                "{}",
                w[0]
            );
            // Nothing written, nothing removed.
            assert_eq!(fs::read(&path).unwrap(), before);
            assert!(!cache.entry_path(&other.diff_id).unwrap().exists());
        }
    }

    #[test]
    fn an_entry_of_another_user_or_that_others_can_write_is_refused_then_replaced() {
        let limits = Limits::default();
        let interests = interests();
        let diff = read(&sample(), &interests, &limits);
        type Spoil = fn(&Path);
        let cases: [(Spoil, &str); 2] = [
            (chown_nobody, "owned by uid 65534"),
            (|p| chmod(p, 0o666), "mode 0666"),
        ];
        for (spoil, says) in cases {
            let dir = tempfile::tempdir().unwrap();
            let (warnings, kept) = Warnings::collected();
            let cache = LayerCache::new(dir.path(), 1 << 30, warnings);
            let mut twin = diff.clone();
            twin.diff_id = Digest::of(b"twin");
            cache.store(&diff, &interests, &limits);
            cache.store(&twin, &interests, &limits);
            let path = cache.entry_path(&diff.diff_id).unwrap();
            let twin_path = cache.entry_path(&twin.diff_id).unwrap();
            spoil(&path);
            spoil(&twin_path);
            // Refused, one warning for the run, not removed.
            assert!(cache.load(&diff.diff_id, &interests, &limits).is_none(), "{says}");
            assert!(cache.load(&twin.diff_id, &interests, &limits).is_none(), "{says}");
            let w = kept.take();
            assert_eq!(w.len(), 1, "{w:?}");
            assert!(
                w[0].contains(says) && w[0].contains(&path.display().to_string()),
                "{}",
                w[0]
            );
            assert!(path.exists());
            // Storing the layer again puts an entry of ours in its place.
            cache.store(&diff, &interests, &limits);
            assert_eq!(mode(&path), 0o600);
            assert!(cache.load(&diff.diff_id, &interests, &limits).is_some());
            assert_eq!(kept.take(), Vec::<String>::new());
        }
    }

    #[test]
    fn store_load_and_evict() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits::default();
        let interests = interests();
        let cache = quiet_cache(dir.path(), 1 << 30);
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
        let small = quiet_cache(dir.path(), 0);
        let mut paths = Vec::new();
        for i in 0..4u8 {
            let mut d = diff.clone();
            d.diff_id = Digest::of(&[i]);
            small.store(&d, &interests, &limits);
            paths.push(small.entry_path(&d.diff_id).unwrap());
        }
        let one = fs::metadata(&paths[0]).unwrap().len();
        let bounded = quiet_cache(dir.path(), one * 3);
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
