//! Named members of an image container: files in an OCI layout folder, or members of a tar
//! archive (read in place, by offset, never extracted).

use crate::error::{Error, Result};
use crate::tree::LayerDiff;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// JSON documents (index, manifests, configs) larger than this are refused unless the store
/// was given another `max_json_bytes` limit.
pub(crate) const MAX_JSON: u64 = 16 * 1024 * 1024;

/// Where the members of an image live.
pub(crate) trait Store: Send + Sync {
    /// For messages: "OCI layout ./img", "archive app.tar".
    fn location(&self) -> String;
    /// The size of a member, or `None` when it is absent.
    fn size(&self, member: &str) -> Option<u64>;
    /// Opens a member for streaming.
    fn open(&self, member: &str) -> io::Result<Box<dyn Read + Send>>;
    /// A layer that was already read while the archive streamed by (standard input).
    fn take_read_layer(&self, _member: &str) -> Option<LayerDiff> {
        None
    }
    /// The largest JSON document read whole (the `max_json_bytes` limit).
    fn max_json(&self) -> u64 {
        MAX_JSON
    }
}

/// Reads a small member whole (JSON documents), refusing absurd sizes.
pub(crate) fn read_small(store: &dyn Store, member: &str, what: &str) -> Result<Vec<u8>> {
    let size = store.size(member).ok_or_else(|| Error::MissingBlob {
        what: what.to_string(),
        member: member.to_string(),
        location: store.location(),
    })?;
    let max = store.max_json();
    if size > max {
        return Err(super::limit_error(
            "max_json_bytes",
            max,
            format!("{what} {member} ({size} bytes)"),
            store.location(),
        ));
    }
    let mut out = Vec::with_capacity(usize::try_from(size).unwrap_or(0).min(1 << 20));
    store
        .open(member)
        .and_then(|r| r.take(max.saturating_add(1)).read_to_end(&mut out))
        .map_err(|e| Error::io(format!("{member} in {}", store.location()), e))?;
    if out.len() as u64 > max {
        // The member grew while it was read (a file on disk being rewritten).
        return Err(super::limit_error(
            "max_json_bytes",
            max,
            format!("{what} {member}"),
            store.location(),
        ));
    }
    Ok(out)
}

/// Only plain relative names reach the host file system: no `..`, no absolute paths.
fn safe_member(member: &str) -> bool {
    !member.is_empty()
        && !member.starts_with('/')
        && !member.contains('\0')
        && member.split('/').all(|c| !c.is_empty() && c != "..")
}

/// An OCI layout folder.
pub(crate) struct DirStore {
    root: PathBuf,
    max_json: u64,
}

impl DirStore {
    pub(crate) fn new(root: &Path) -> DirStore {
        DirStore {
            root: root.to_path_buf(),
            max_json: MAX_JSON,
        }
    }

    /// Sets the `max_json_bytes` limit.
    pub(crate) fn with_max_json(mut self, max: u64) -> DirStore {
        self.max_json = max;
        self
    }
}

impl Store for DirStore {
    fn location(&self) -> String {
        format!("OCI layout {}", self.root.display())
    }

    fn size(&self, member: &str) -> Option<u64> {
        if !safe_member(member) {
            return None;
        }
        std::fs::metadata(self.root.join(member))
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len())
    }

    fn open(&self, member: &str) -> io::Result<Box<dyn Read + Send>> {
        if !safe_member(member) {
            return Err(io::Error::new(io::ErrorKind::NotFound, "not a member name"));
        }
        Ok(Box::new(File::open(self.root.join(member))?))
    }

    fn max_json(&self) -> u64 {
        self.max_json
    }
}

#[derive(Clone, Copy, Debug)]
struct Span {
    offset: u64,
    size: u64,
}

/// A tar archive on disk, indexed once by its headers; members are read in place.
pub(crate) struct TarStore {
    path: PathBuf,
    members: HashMap<String, Span>,
    max_json: u64,
}

impl TarStore {
    /// Indexes the archive: one pass over the headers, seeking past member data. Member names
    /// and their count are bounded by `max_path_len` and `max_entries_per_layer`, extended
    /// headers by `max_extended_header_bytes`.
    pub(crate) fn open(path: &Path, limits: &crate::tree::Limits) -> Result<TarStore> {
        use crate::tree::layer::{stored_size, Guard};
        let file = File::open(path).map_err(|e| Error::io(path.display(), e))?;
        let location = format!("archive {}", path.display());
        let guard = Guard::new(limits.max_extended_header_bytes);
        let mut archive = tar::Archive::new(guard.reader(file));
        let not_tar = |e: io::Error| {
            super::limit_in_io(&e, &location).unwrap_or_else(|| Error::NotAnImage {
                location: path.display().to_string(),
                reason: format!(
                    "it is not a readable tar archive ({})",
                    crate::tree::layer::tar_reason(&e)
                ),
                help: "give a `docker save` or OCI archive (.tar), or an OCI layout folder".to_string(),
            })
        };
        let mut members = HashMap::new();
        let mut links: Vec<(String, String)> = Vec::new();
        let mut count = 0u64;
        let mut iter = archive.entries_with_seek().map_err(not_tar)?;
        loop {
            let next = iter.next();
            guard.disarm();
            let Some(entry) = next else { break };
            let mut entry = entry.map_err(not_tar)?;
            guard.arm_after(guard.end_of(stored_size(&mut entry)));
            count += 1;
            if count > limits.max_entries_per_layer {
                return Err(super::limit_error(
                    "max_entries_per_layer",
                    limits.max_entries_per_layer,
                    "the number of members",
                    location.clone(),
                ));
            }
            let raw = entry.path_bytes();
            let link = entry.link_name_bytes();
            if raw.len() > limits.max_path_len || link.as_ref().is_some_and(|l| l.len() > limits.max_path_len)
            {
                return Err(super::limit_error(
                    "max_path_len",
                    limits.max_path_len as u64,
                    format!(
                        "the name of member `{}…`",
                        crate::tree::layer::printable(&String::from_utf8_lossy(&raw[..raw.len().min(64)]))
                    ),
                    location.clone(),
                ));
            }
            let name = member_name(&raw);
            let etype = entry.header().entry_type();
            if etype.is_file() || etype.is_contiguous() {
                members.insert(
                    name,
                    Span {
                        offset: entry.raw_file_position(),
                        size: entry.size(),
                    },
                );
            } else if etype.is_hard_link() {
                if let Some(target) = link {
                    links.push((name, member_name(&target)));
                }
            } else if etype.is_symlink() {
                if let Some(target) = link {
                    // A symlink member is relative to its own folder (test_link.tar in
                    // go-containerregistry shares layers this way).
                    let dir = name.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
                    let joined = if target.starts_with(b"/") {
                        target.to_vec()
                    } else {
                        [dir.as_bytes(), b"/", &target].concat()
                    };
                    links.push((name, member_name(&joined)));
                }
            }
        }
        // Links may point at links; a few rounds settle any sane chain, a loop stays absent.
        for _ in 0..8 {
            let mut changed = false;
            for (name, target) in &links {
                if !members.contains_key(name) {
                    if let Some(span) = members.get(target).copied() {
                        members.insert(name.clone(), span);
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        Ok(TarStore {
            path: path.to_path_buf(),
            members,
            max_json: limits.max_json_bytes,
        })
    }

    pub(crate) fn has(&self, member: &str) -> bool {
        self.members.contains_key(member)
    }
}

/// A member name with `./`, leading slashes and `..` resolved, as a plain relative path.
pub(crate) fn member_name(raw: &[u8]) -> String {
    crate::tree::layer::normalize(raw).join("/")
}

impl Store for TarStore {
    fn location(&self) -> String {
        format!("archive {}", self.path.display())
    }

    fn size(&self, member: &str) -> Option<u64> {
        self.members.get(member).map(|s| s.size)
    }

    fn open(&self, member: &str) -> io::Result<Box<dyn Read + Send>> {
        let span = self
            .members
            .get(member)
            .copied()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no member {member}")))?;
        let mut f = File::open(&self.path)?;
        f.seek(SeekFrom::Start(span.offset))?;
        Ok(Box::new(ExactReader {
            inner: f.take(span.size),
            left: span.size,
        }))
    }

    fn max_json(&self) -> u64 {
        self.max_json
    }
}

/// Fails with UnexpectedEof when the archive ends before the member does (a truncated file).
struct ExactReader<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for ExactReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let n = self.inner.read(buf)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the archive ends {} bytes before this member does", self.left),
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// An archive read from a stream (standard input): small JSON members are kept, layers are
/// read as they pass and kept as their [`LayerDiff`].
pub(crate) struct StreamStore {
    pub(crate) label: String,
    pub(crate) max_json: u64,
    pub(crate) small: HashMap<String, Vec<u8>>,
    pub(crate) layers: Mutex<HashMap<String, LayerDiff>>,
    pub(crate) layer_sizes: HashMap<String, u64>,
}

impl Store for StreamStore {
    fn location(&self) -> String {
        self.label.clone()
    }

    fn size(&self, member: &str) -> Option<u64> {
        self.small
            .get(member)
            .map(|b| b.len() as u64)
            .or_else(|| self.layer_sizes.get(member).copied())
    }

    fn open(&self, member: &str) -> io::Result<Box<dyn Read + Send>> {
        match self.small.get(member) {
            Some(bytes) => Ok(Box::new(io::Cursor::new(bytes.clone()))),
            None => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{member} was read once from the stream and cannot be read again"),
            )),
        }
    }

    fn take_read_layer(&self, member: &str) -> Option<LayerDiff> {
        let layers = self.layers.lock().unwrap_or_else(|e| e.into_inner());
        // A layer listed twice (shared by two images) must be readable twice.
        layers.get(member).cloned()
    }

    fn max_json(&self) -> u64 {
        self.max_json
    }
}
