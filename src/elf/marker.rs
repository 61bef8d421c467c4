//! Markers: what a runtime or library leaves in its binaries (a message only it prints, a
//! release string, a blob in the writable data), declared by the facts
//! module that reads the find, beside the files it reads (`Interests::scan_elf_for`). The
//! scanner knows only the kinds of search ([`Find`]); it names no runtime.
//!
//! A marker's [`fingerprint`](ElfMarker::fingerprint) covers everything that decides what the
//! scanner keeps, so that the layer cache, which records the fingerprints an entry was read
//! with, never serves a find made with another definition.

use serde::ser::{Serialize, SerializeMap, Serializer};
use sha2::{Digest as _, Sha256};
use std::sync::Arc;

/// A search a facts module asks the ELF scanner to make in every ELF file it reads to the end.
pub(crate) struct ElfMarker {
    /// The name of the find: in the scan, in the layer cache and in `inspect --files` JSON.
    pub(crate) key: &'static str,
    pub(crate) find: Find,
    /// `inspect --files` shows a marker not found as `null` (true) or leaves its key out.
    pub(crate) null_when_absent: bool,
}

/// What the scanner looks for. Every kind is searched in the same pass over the file, in
/// windows that overlap by [`super::MARKER_TAIL`] bytes, so a marker cut by a chunk boundary
/// is found; a text marker and what is read after it fit in that overlap.
pub(crate) enum Find {
    /// Which of these byte strings the file holds: the label of the first (in this order)
    /// found in the earliest window that holds one.
    Label(&'static [(&'static [u8], &'static str)]),
    /// The dotted version right after `after`, with at least `parts` numbers. With an
    /// `anchor`, `after` is looked for only within `within` bytes from the anchor's start.
    Version {
        anchor: Option<(&'static [u8], usize)>,
        after: &'static [u8],
        parts: usize,
    },
    /// A blob starting with `magic` at a file offset that is a multiple of `align`, inside the
    /// writable, non-executable PT_LOAD segments (where linkers put data sections), held up to
    /// `cap` bytes or until `whole` says it is complete. The facts module decodes it.
    Blob(Blob),
}

/// See [`Find::Blob`].
pub(crate) struct Blob {
    pub(crate) magic: &'static [u8],
    pub(crate) align: u64,
    /// Segments shorter than this cannot hold the blob's header and are not searched.
    pub(crate) min_len: usize,
    pub(crate) cap: usize,
    /// Whether the bytes held (from the magic on) are the whole blob: holding stops there.
    pub(crate) whole: fn(&[u8]) -> bool,
    /// The blob as `inspect --files` shows it.
    pub(crate) show: fn(&[u8]) -> serde_json::Value,
}

impl ElfMarker {
    /// A digest of everything that decides what the scanner keeps for this marker (the
    /// decoding of a blob happens when the facts read it, so it is not part of it).
    pub(crate) fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        let mut part = |tag: &str, bytes: &[u8]| {
            h.update(tag.as_bytes());
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        part("key", self.key.as_bytes());
        match &self.find {
            Find::Label(labels) => {
                for (needle, label) in *labels {
                    part("needle", needle);
                    part("label", label.as_bytes());
                }
            }
            Find::Version { anchor, after, parts } => {
                if let Some((anchor, within)) = anchor {
                    part("anchor", anchor);
                    part("within", &within.to_le_bytes());
                }
                part("after", after);
                part("parts", &parts.to_le_bytes());
            }
            Find::Blob(b) => {
                part("magic", b.magic);
                part("align", &b.align.to_le_bytes());
                part("min_len", &b.min_len.to_le_bytes());
                part("cap", &b.cap.to_le_bytes());
            }
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The declared label equal to `text`, for a [`Find::Label`] marker.
    pub(crate) fn label(&self, text: &str) -> Option<&'static str> {
        match self.find {
            Find::Label(labels) => labels.iter().map(|(_, l)| *l).find(|l| *l == text),
            _ => None,
        }
    }

    /// Whether `found` is something this marker can have found (a find read back from the
    /// layer cache is checked against the current declaration).
    pub(crate) fn accepts(&self, found: &Found) -> bool {
        match (&self.find, found) {
            (Find::Label(_), Found::Text(t)) => self.label(t).is_some(),
            (Find::Version { .. }, Found::Text(_)) => true,
            (Find::Blob(b), Found::Bytes(bytes)) => bytes.starts_with(b.magic) && bytes.len() <= b.cap,
            _ => false,
        }
    }
}

impl PartialEq for ElfMarker {
    fn eq(&self, other: &ElfMarker) -> bool {
        self.key == other.key
    }
}

impl Eq for ElfMarker {}

impl std::fmt::Debug for ElfMarker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key)
    }
}

/// The markers one read looks for, by key, each once.
pub(crate) type MarkerSet = Arc<[&'static ElfMarker]>;

/// The markers of `a` and `b`, each once, ordered by key.
pub(crate) fn union(a: &[&'static ElfMarker], b: &[&'static ElfMarker]) -> MarkerSet {
    let mut all: Vec<&'static ElfMarker> = a.iter().chain(b).copied().collect();
    all.sort_by_key(|m| m.key);
    all.dedup_by_key(|m| m.key);
    all.into()
}

/// What a marker found in one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// A label or a version.
    Text(String),
    /// A blob, from its magic on.
    Bytes(Vec<u8>),
}

impl Found {
    pub(crate) fn heap_bytes(&self) -> u64 {
        match self {
            Found::Text(t) => t.len() as u64,
            Found::Bytes(b) => b.len() as u64,
        }
    }
}

/// The finds of one file, with the markers it was searched for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Finds {
    pub(crate) searched: Option<MarkerSet>,
    /// What was found, in the order of `searched`.
    pub(crate) found: Vec<(&'static ElfMarker, Found)>,
}

impl Finds {
    pub(crate) fn get(&self, marker: &ElfMarker) -> Option<&Found> {
        self.found.iter().find(|(m, _)| *m == marker).map(|(_, f)| f)
    }

    /// The label or version `marker` found.
    pub(crate) fn text(&self, marker: &ElfMarker) -> Option<&str> {
        match self.get(marker)? {
            Found::Text(t) => Some(t),
            Found::Bytes(_) => None,
        }
    }

    /// Records `found` for `marker` (the layer reader's scan, a cache entry read back, or a
    /// test's file).
    pub(crate) fn set(&mut self, marker: &'static ElfMarker, found: Found) {
        self.found.retain(|(m, _)| *m != marker);
        self.found.push((marker, found));
        self.found.sort_by_key(|(m, _)| m.key);
        let searched = self.searched.as_deref().unwrap_or_default();
        if !searched.contains(&marker) {
            self.searched = Some(union(searched, &[marker]));
        }
    }

    /// Keeps only the finds of `markers`, as a read searching only for them would give.
    pub(crate) fn retain(&mut self, markers: &MarkerSet) {
        self.found.retain(|(m, _)| markers.contains(m));
        self.searched = (!markers.is_empty()).then(|| markers.clone());
    }

    pub(crate) fn heap_bytes(&self) -> u64 {
        self.found.iter().map(|(_, f)| 16 + f.heap_bytes()).sum()
    }

    /// Each searched marker under its key, as `inspect --files` shows them.
    pub(super) fn serialize_into<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
        for marker in self.searched.as_deref().unwrap_or_default() {
            match (self.get(marker), &marker.find) {
                (Some(Found::Text(t)), _) => map.serialize_entry(marker.key, t)?,
                (Some(Found::Bytes(b)), Find::Blob(blob)) => {
                    map.serialize_entry(marker.key, &(blob.show)(b))?
                }
                (Some(Found::Bytes(_)), _) | (None, _) if marker.null_when_absent => {
                    map.serialize_entry(marker.key, &())?
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl Serialize for Finds {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        self.serialize_into(&mut map)?;
        map.end()
    }
}

/// Follows one file's bytes for the text markers of a set, window by window.
pub(super) struct TextScanner {
    markers: Vec<&'static ElfMarker>,
    found: Vec<Option<String>>,
}

impl TextScanner {
    pub(super) fn new(markers: &[&'static ElfMarker]) -> TextScanner {
        let markers: Vec<&'static ElfMarker> = markers
            .iter()
            .copied()
            .filter(|m| !matches!(m.find, Find::Blob(_)))
            .collect();
        TextScanner {
            found: vec![None; markers.len()],
            markers,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.markers.is_empty()
    }

    pub(super) fn scan_window(&mut self, w: &[u8]) {
        for (marker, found) in self.markers.iter().zip(&mut self.found) {
            if found.is_some() {
                continue;
            }
            *found = match &marker.find {
                Find::Label(labels) => labels
                    .iter()
                    .find(|(needle, _)| memchr::memmem::find(w, needle).is_some())
                    .map(|(_, label)| label.to_string()),
                Find::Version {
                    anchor: None,
                    after,
                    parts,
                } => version_after(w, after, *parts),
                Find::Version {
                    anchor: Some((anchor, within)),
                    after,
                    parts,
                } => memchr::memmem::find(w, anchor)
                    .and_then(|at| version_after(&w[at..(at + within).min(w.len())], after, *parts)),
                Find::Blob(_) => None,
            };
        }
    }

    pub(super) fn finish(self) -> impl Iterator<Item = (&'static ElfMarker, Found)> {
        self.markers
            .into_iter()
            .zip(self.found)
            .filter_map(|(m, f)| Some((m, Found::Text(f?))))
    }
}

/// The dotted version right after `marker` in `w`, with at least `parts` numbers; `None` when it
/// is cut by the window's end (a later window sees it whole).
fn version_after(w: &[u8], marker: &[u8], parts: usize) -> Option<String> {
    let at = memchr::memmem::find(w, marker)?;
    let rest = &w[at + marker.len()..];
    let v: String = rest
        .iter()
        .take_while(|b| b.is_ascii_digit() || **b == b'.')
        .map(|&b| b as char)
        .collect();
    let v = v.trim_end_matches('.').to_string();
    (v.split('.').filter(|p| !p.is_empty()).count() >= parts && v.len() < rest.len()).then_some(v)
}

/// Follows one ELF file's bytes for a [`Find::Blob`] in its writable data.
pub(crate) struct BlobScanner {
    marker: &'static ElfMarker,
    blob: &'static Blob,
    /// File ranges (start, end) of the writable, non-executable PT_LOAD segments.
    ranges: Vec<(u64, u64)>,
    state: State,
}

enum State {
    /// Searching; the last bytes of the range seen so far (a magic cut by a chunk's end) and
    /// their offset.
    Looking { carry: Vec<u8>, at: u64 },
    /// Found at an aligned offset: the bytes from the magic on.
    Holding(Vec<u8>),
}

impl BlobScanner {
    /// A scanner over the given data ranges (file offset, size), or `None` when `marker` is
    /// not a blob or no range can hold one.
    pub(crate) fn new(
        marker: &'static ElfMarker,
        ranges: impl IntoIterator<Item = (u64, u64)>,
    ) -> Option<BlobScanner> {
        let Find::Blob(blob) = &marker.find else {
            return None;
        };
        let ranges: Vec<(u64, u64)> = ranges
            .into_iter()
            .filter(|&(_, size)| size as usize >= blob.min_len)
            .map(|(off, size)| (off, off.saturating_add(size)))
            .take(16)
            .collect();
        (!ranges.is_empty()).then_some(BlobScanner {
            marker,
            blob,
            ranges,
            state: State::Looking {
                carry: Vec::new(),
                at: 0,
            },
        })
    }

    /// The bytes of the file at `start..start + chunk.len()`, fed in order.
    pub(crate) fn feed(&mut self, start: u64, chunk: &[u8]) {
        let (magic, cap) = (self.blob.magic, self.blob.cap);
        let end = start.saturating_add(chunk.len() as u64);
        if let State::Holding(held) = &mut self.state {
            if held.len() < cap && !(self.blob.whole)(held) {
                let room = (cap - held.len()).min(chunk.len());
                held.extend_from_slice(&chunk[..room]);
            }
            return;
        }
        for i in 0..self.ranges.len() {
            let (lo_r, hi_r) = self.ranges[i];
            let (lo, hi) = (lo_r.max(start), hi_r.min(end));
            if lo >= hi {
                continue;
            }
            let State::Looking { carry, at } = &mut self.state else {
                return;
            };
            // The carry joins only bytes that follow it in the file.
            let mut window = if *at + carry.len() as u64 == lo && !carry.is_empty() {
                std::mem::take(carry)
            } else {
                carry.clear();
                Vec::new()
            };
            let window_at = lo - window.len() as u64;
            let from = (lo - start) as usize;
            window.extend_from_slice(&chunk[from..]);
            // A magic must start inside the range.
            let in_range = (hi - window_at) as usize;
            let found = memchr::memmem::find_iter(&window, magic)
                .take_while(|&p| p < in_range)
                .find(|&p| (window_at + p as u64).is_multiple_of(self.blob.align));
            if let Some(p) = found {
                window.drain(..p);
                window.truncate(cap);
                self.state = State::Holding(window);
                return;
            }
            // Keep what could be the start of a magic cut by the chunk's end.
            let keep_from = in_range.saturating_sub(magic.len().saturating_sub(1));
            if hi == end {
                *at = window_at + keep_from as u64;
                window.truncate(in_range);
                window.drain(..keep_from);
                *carry = window;
            }
        }
    }

    pub(crate) fn finish(self) -> Option<(&'static ElfMarker, Found)> {
        match self.state {
            State::Holding(held) => Some((self.marker, Found::Bytes(held))),
            State::Looking { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static LABELS: ElfMarker = ElfMarker {
        key: "test_label",
        find: Find::Label(&[(b"first marker", "first"), (b"second marker", "second")]),
        null_when_absent: true,
    };
    static VERSION: ElfMarker = ElfMarker {
        key: "test_version",
        find: Find::Version {
            anchor: Some((b"Some Library", 40)),
            after: b"version ",
            parts: 2,
        },
        null_when_absent: false,
    };
    static BLOB: ElfMarker = ElfMarker {
        key: "test_blob",
        find: Find::Blob(Blob {
            magic: b"\xffMAGIC:",
            align: 16,
            min_len: 16,
            cap: 64,
            whole: |held| held.len() >= 32,
            show: |held| serde_json::Value::from(held.len()),
        }),
        null_when_absent: true,
    };

    #[test]
    fn text_markers_in_a_window() {
        let mut s = TextScanner::new(&[&LABELS, &VERSION, &BLOB]);
        assert_eq!(s.markers.len(), 2, "blobs are not text");
        s.scan_window(b"..second marker.. first marker ..");
        s.scan_window(b"version 9.9 Some Library, stable version 2.36. ");
        let found: Vec<_> = s.finish().collect();
        assert_eq!(
            found,
            [
                (&LABELS, Found::Text("first".into())),
                (&VERSION, Found::Text("2.36".into()))
            ]
        );
        // A version cut by the window's end waits for a window that holds it whole.
        assert_eq!(version_after(b"version 2.3", b"version ", 2), None);
    }

    #[test]
    fn a_blob_at_an_aligned_offset_of_a_writable_range() {
        let mut file = vec![0u8; 96];
        file[48..55].copy_from_slice(b"\xffMAGIC:");
        file[60] = 7;
        for step in [1, 5, 16, 96] {
            let mut s = BlobScanner::new(&BLOB, [(32, 64)]).unwrap();
            for (i, c) in file.chunks(step).enumerate() {
                s.feed((i * step) as u64, c);
            }
            let (_, Found::Bytes(held)) = s.finish().unwrap() else {
                panic!("step {step}")
            };
            assert!(held.starts_with(b"\xffMAGIC:") && held.len() >= 32 && held.len() <= 64);
        }
        let mut outside = BlobScanner::new(&BLOB, [(0, 40)]).unwrap();
        outside.feed(0, &file);
        assert!(outside.finish().is_none());
        let mut unaligned = vec![0u8; 4];
        unaligned.extend_from_slice(&file);
        let mut s = BlobScanner::new(&BLOB, [(0, 100)]).unwrap();
        s.feed(0, &unaligned);
        assert!(s.finish().is_none());
        assert!(BlobScanner::new(&LABELS, [(0, 100)]).is_none());
    }

    #[test]
    fn finds_show_every_searched_key() {
        let mut finds = Finds::default();
        finds.retain(&union(&[&VERSION, &BLOB], &[&LABELS]));
        finds.set(&BLOB, Found::Bytes(b"\xffMAGIC:12345".to_vec()));
        let json = serde_json::to_value(&finds).unwrap();
        assert_eq!(json, serde_json::json!({"test_blob": 12, "test_label": null}));
    }

    #[test]
    fn fingerprints_follow_what_is_searched() {
        static OTHER_NEEDLE: ElfMarker = ElfMarker {
            key: "test_label",
            find: Find::Label(&[(b"first marker!", "first"), (b"second marker", "second")]),
            null_when_absent: true,
        };
        assert_ne!(LABELS.fingerprint(), OTHER_NEEDLE.fingerprint());
        assert_eq!(LABELS.fingerprint(), LABELS.fingerprint());
        assert_ne!(VERSION.fingerprint(), BLOB.fingerprint());
    }
}
