//! A layer's entries, packed. A layer can hold hundreds of thousands of paths and is held whole
//! until it is merged (layers are read in parallel, merged in order), so an entry is a few bytes
//! of one buffer rather than a struct with a `String` per path component: its path shares its
//! start with the entry before it (tar archives list a folder's files one after the other) and
//! only the rest is stored, and the numbers are varints. Kept contents and ELF facts, which few
//! entries have, live beside the buffer.
//!
//! An entry in the buffer: a tag byte (the kind, and whether content and ELF facts follow in the
//! side tables), the bytes its path shares with the previous path, the rest of the path, mode,
//! uid, gid, size, and for links the target.

use super::entry::{EntryKind, LayerEntry};
use super::Content;
use crate::elf::ElfInfo;

const HAS_CONTENT: u8 = 0x10;
/// Bytes of packed entries in one chunk.
const CHUNK: usize = 256 * 1024;
const HAS_ELF: u8 = 0x20;

/// The packed entries of a layer, in archive order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Entries {
    /// The packed entries, in chunks of about [`CHUNK`] bytes (an entry never straddles two),
    /// so that the merge can free what it has applied as it goes.
    chunks: Vec<Vec<u8>>,
    count: usize,
    contents: Vec<Option<Content>>,
    elves: Vec<Option<Box<ElfInfo>>>,
    /// The path of the last entry pushed, `/`-joined.
    last: Vec<u8>,
}

/// One entry, as the cursor reads it: its path borrowed from the cursor.
#[derive(Debug)]
pub(crate) struct EntryRef<'a> {
    /// Components joined with `/`, no leading `/` (empty for the root folder).
    pub(crate) path: &'a str,
    pub(crate) kind: EntryKind,
    pub(crate) mode: u32,
    pub(crate) uid: u64,
    pub(crate) gid: u64,
    pub(crate) size: u64,
    /// Index into the kept contents ([`Entries::take_content`]).
    pub(crate) content: Option<usize>,
    /// Index into the ELF facts ([`Entries::take_elf`]).
    pub(crate) elf: Option<usize>,
}

impl EntryRef<'_> {
    /// The path's components.
    pub(crate) fn parts(&self) -> impl Iterator<Item = &str> {
        self.path.split('/').filter(|p| !p.is_empty())
    }
}

/// Roughly the heap an entry's ELF facts take.
fn elf_bytes(e: &ElfInfo) -> u64 {
    let string = std::mem::size_of::<String>() as u64;
    let h = e.head.interpreter.as_ref().map_or(0, |i| i.len() as u64);
    let d = e.scan.dynamic.as_ref().map_or(0, |d| {
        d.needed
            .iter()
            .chain(&d.rpath)
            .chain(&d.runpath)
            .chain(&d.soname)
            .map(|s| string + s.len() as u64)
            .sum()
    });
    // What the markers found (a blob: at most the bytes its scanner held of it).
    let found = e.scan.markers.heap_bytes();
    (std::mem::size_of::<ElfInfo>() + std::mem::size_of::<Box<ElfInfo>>()) as u64 + h + d + found
}

fn kind_code(k: &EntryKind) -> u8 {
    match k {
        EntryKind::Dir => 0,
        EntryKind::File => 1,
        EntryKind::Symlink(_) => 2,
        EntryKind::Hardlink(_) => 3,
        EntryKind::Special => 4,
        EntryKind::Whiteout => 5,
        EntryKind::OpaqueWhiteout => 6,
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn get_bytes<'a>(bytes: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
    let n = usize::try_from(get_varint(bytes, at)?).ok()?;
    let part = bytes.get(*at..at.checked_add(n)?)?;
    *at += n;
    Some(part)
}

impl Entries {
    pub(crate) fn new() -> Entries {
        Entries::default()
    }

    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Appends an entry; returns the bytes it took here (its packed form and, roughly, its
    /// side-table slots), for the metadata budget.
    pub(crate) fn push(&mut self, e: LayerEntry) -> u64 {
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
        let joined = path.join("/");
        let shared = joined
            .as_bytes()
            .iter()
            .zip(&self.last)
            .take_while(|(a, b)| a == b)
            .count();
        let mut tag = kind_code(&kind);
        if content.is_some() {
            tag |= HAS_CONTENT;
        }
        if elf.is_some() {
            tag |= HAS_ELF;
        }
        let link = match &kind {
            EntryKind::Symlink(t) | EntryKind::Hardlink(t) => t.len(),
            _ => 0,
        };
        let need = joined.len() - shared + link + 64;
        if self.chunks.last().is_none_or(|c| c.len() + need > c.capacity()) {
            if let Some(full) = self.chunks.last_mut() {
                full.shrink_to_fit();
            }
            self.chunks.push(Vec::with_capacity(CHUNK.max(need)));
        }
        let Some(out) = self.chunks.last_mut() else {
            return 0;
        };
        let before = out.len();
        out.push(tag);
        put_varint(out, shared as u64);
        put_varint(out, (joined.len() - shared) as u64);
        out.extend_from_slice(&joined.as_bytes()[shared..]);
        put_varint(out, u64::from(mode));
        put_varint(out, uid);
        put_varint(out, gid);
        put_varint(out, size);
        if let EntryKind::Symlink(t) | EntryKind::Hardlink(t) = &kind {
            put_varint(out, t.len() as u64);
            out.extend_from_slice(t.as_bytes());
        }
        let packed = (out.len() - before) as u64;
        let mut side = 0;
        if let Some(mut c) = content {
            c.bytes.shrink_to_fit();
            side += std::mem::size_of::<Option<Content>>() as u64;
            self.contents.push(Some(c));
        }
        if let Some(e) = elf {
            side += elf_bytes(&e);
            self.elves.push(Some(e));
        }
        self.last = joined.into_bytes();
        self.count += 1;
        packed + side
    }

    /// Reads the entries in order.
    pub(crate) fn cursor(&self) -> Cursor<'_> {
        Cursor::new(&self.chunks)
    }

    /// The entries, consumed: a cursor that frees the packed entries as it reads them, and
    /// their contents and ELF facts to take out.
    pub(crate) fn drain(self) -> (Cursor<'static>, Side) {
        let mut cursor = Cursor::new(&[]);
        cursor.chunks = Chunks::Owned(self.chunks);
        (
            cursor,
            Side {
                contents: self.contents,
                elves: self.elves,
            },
        )
    }

    #[cfg(test)]
    pub(crate) fn content(&self, i: usize) -> Option<&Content> {
        self.contents.get(i).and_then(Option::as_ref)
    }

    #[cfg(test)]
    pub(crate) fn elf(&self, i: usize) -> Option<&ElfInfo> {
        self.elves.get(i).and_then(Option::as_deref)
    }

    /// Every kept content.
    pub(crate) fn kept(&self) -> impl Iterator<Item = &Content> {
        self.contents.iter().flatten()
    }

    /// Bytes held, kept contents excluded (an estimate of the heap they take).
    pub(crate) fn metadata_bytes(&self) -> u64 {
        let elves: u64 = self.elves.iter().flatten().map(|e| elf_bytes(e)).sum();
        self.chunks.iter().map(|c| c.capacity() as u64).sum::<u64>()
            + (self.contents.len() * std::mem::size_of::<Option<Content>>()) as u64
            + elves
    }

    /// Each entry with its content and ELF slots open for change (the layer cache trims what
    /// an entry holds to what a read wants); stops at the first `false`.
    pub(crate) fn all_mut(
        &mut self,
        mut f: impl FnMut(&EntryRef<'_>, &mut Option<Content>, &mut Option<Box<ElfInfo>>) -> bool,
    ) -> bool {
        let mut cursor = Cursor::new(&self.chunks);
        while let Some(e) = cursor.next() {
            let mut none_c = None;
            let mut none_e = None;
            let c = match e.content {
                Some(i) => &mut self.contents[i],
                None => &mut none_c,
            };
            let el = match e.elf {
                Some(i) => &mut self.elves[i],
                None => &mut none_e,
            };
            if !f(&e, c, el) {
                return false;
            }
        }
        true
    }

    #[cfg(test)]
    /// Each entry as a [`LayerEntry`] (contents and ELF facts cloned): for tests and tools,
    /// not for whole layers of a real image.
    pub(crate) fn to_vec(&self) -> Vec<LayerEntry> {
        let mut out = Vec::with_capacity(self.count);
        let mut cursor = self.cursor();
        while let Some(e) = cursor.next() {
            out.push(LayerEntry {
                path: e.parts().map(str::to_string).collect(),
                kind: e.kind.clone(),
                mode: e.mode,
                uid: e.uid,
                gid: e.gid,
                size: e.size,
                content: e.content.and_then(|i| self.content(i).cloned()),
                elf: e.elf.and_then(|i| self.elves.get(i).cloned().flatten()),
            });
        }
        out
    }

    /// The packed buffer, the number of entries in it, and the side tables, for the layer
    /// cache.
    #[allow(clippy::type_complexity)]
    pub(crate) fn parts(&self) -> (&[Vec<u8>], usize, &[Option<Content>], &[Option<Box<ElfInfo>>]) {
        (&self.chunks, self.count, &self.contents, &self.elves)
    }

    /// Entries from what [`Entries::parts`] gave, checked whole: every entry decodes, its path
    /// is UTF-8, and the side tables hold exactly what the entries point at.
    pub(crate) fn from_parts(
        chunks: Vec<Vec<u8>>,
        count: usize,
        contents: Vec<Option<Content>>,
        elves: Vec<Option<Box<ElfInfo>>>,
    ) -> Result<Entries, String> {
        let mut cursor = Cursor::new(&chunks);
        let mut n = 0usize;
        loop {
            match cursor.read() {
                Ok(Some(_)) => n += 1,
                Ok(None) => break,
                Err(()) => return Err(format!("entry {} does not decode", n + 1)),
            }
        }
        if n != count || cursor.contents != contents.len() || cursor.elves != elves.len() {
            return Err("its entries and their contents do not agree".to_string());
        }
        let last = cursor.path;
        Ok(Entries {
            chunks,
            count,
            contents,
            elves,
            last,
        })
    }
}

impl From<Vec<LayerEntry>> for Entries {
    fn from(v: Vec<LayerEntry>) -> Entries {
        let mut out = Entries::new();
        for e in v {
            out.push(e);
        }
        out
    }
}

/// The contents and ELF facts of [`Entries`] being read by a [`Cursor`].
pub(crate) struct Side {
    contents: Vec<Option<Content>>,
    elves: Vec<Option<Box<ElfInfo>>>,
}

impl Side {
    /// The kept contents at `i` (from [`EntryRef::content`]), taken out.
    pub(crate) fn take_content(&mut self, i: usize) -> Option<Content> {
        self.contents.get_mut(i).and_then(Option::take)
    }

    /// The ELF facts at `i` (from [`EntryRef::elf`]), taken out.
    pub(crate) fn take_elf(&mut self, i: usize) -> Option<Box<ElfInfo>> {
        self.elves.get_mut(i).and_then(Option::take)
    }
}

/// What a cursor reads: borrowed, or owned and freed chunk by chunk as it is read.
enum Chunks<'a> {
    Shared(&'a [Vec<u8>]),
    Owned(Vec<Vec<u8>>),
}

/// Reads [`Entries`] in order.
pub(crate) struct Cursor<'a> {
    chunks: Chunks<'a>,
    /// The chunk read, and where in it.
    chunk: usize,
    at: usize,
    path: Vec<u8>,
    contents: usize,
    elves: usize,
}

impl<'a> Cursor<'a> {
    fn new(chunks: &'a [Vec<u8>]) -> Cursor<'a> {
        Cursor {
            chunks: Chunks::Shared(chunks),
            chunk: 0,
            at: 0,
            path: Vec::new(),
            contents: 0,
            elves: 0,
        }
    }

    /// The next entry; `None` at the end. (Entries are checked when they are built or loaded,
    /// so a damaged one also ends the read.)
    #[allow(clippy::should_implement_trait)]
    pub(crate) fn next(&mut self) -> Option<EntryRef<'_>> {
        match self.read() {
            Ok(Some(r)) => Some(r),
            _ => None,
        }
    }

    fn read(&mut self) -> Result<Option<EntryRef<'_>>, ()> {
        loop {
            let len = match &self.chunks {
                Chunks::Shared(c) => c.get(self.chunk).map(Vec::len),
                Chunks::Owned(c) => c.get(self.chunk).map(Vec::len),
            };
            match len {
                Some(len) if self.at >= len => {
                    if let Chunks::Owned(c) = &mut self.chunks {
                        c[self.chunk] = Vec::new();
                    }
                    self.chunk += 1;
                    self.at = 0;
                }
                Some(_) => break,
                None => return Ok(None),
            }
        }
        let b: &[u8] = match &self.chunks {
            Chunks::Shared(c) => &c[self.chunk],
            Chunks::Owned(c) => &c[self.chunk],
        };
        let at = &mut self.at;
        let tag = b[*at];
        *at += 1;
        let shared = usize::try_from(get_varint(b, at).ok_or(())?).map_err(|_| ())?;
        let rest = get_bytes(b, at).ok_or(())?;
        if shared > self.path.len() {
            return Err(());
        }
        self.path.truncate(shared);
        self.path.extend_from_slice(rest);
        let mode = u32::try_from(get_varint(b, at).ok_or(())?).map_err(|_| ())?;
        let uid = get_varint(b, at).ok_or(())?;
        let gid = get_varint(b, at).ok_or(())?;
        let size = get_varint(b, at).ok_or(())?;
        let kind = match tag & 0x0f {
            0 => EntryKind::Dir,
            1 => EntryKind::File,
            code @ (2 | 3) => {
                let t = get_bytes(b, at).ok_or(())?;
                let t = std::str::from_utf8(t).map_err(|_| ())?.to_string();
                if code == 2 {
                    EntryKind::Symlink(t)
                } else {
                    EntryKind::Hardlink(t)
                }
            }
            4 => EntryKind::Special,
            5 => EntryKind::Whiteout,
            6 => EntryKind::OpaqueWhiteout,
            _ => return Err(()),
        };
        if tag & !(0x0f | HAS_CONTENT | HAS_ELF) != 0 {
            return Err(());
        }
        let content = (tag & HAS_CONTENT != 0).then(|| {
            self.contents += 1;
            self.contents - 1
        });
        let elf = (tag & HAS_ELF != 0).then(|| {
            self.elves += 1;
            self.elves - 1
        });
        let path = std::str::from_utf8(&self.path).map_err(|_| ())?;
        Ok(Some(EntryRef {
            path,
            kind,
            mode,
            uid,
            gid,
            size,
            content,
            elf,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let v = vec![
            LayerEntry::new("usr/lib/x86_64-linux-gnu/libc.so.6", EntryKind::File).with_text("\x7fELF"),
            LayerEntry::new("usr/lib/x86_64-linux-gnu/libm.so.6", EntryKind::File),
            LayerEntry::new("usr/lib64", EntryKind::Symlink("lib".into())),
            LayerEntry::new("", EntryKind::Dir).with_mode(0o700),
            LayerEntry::new("é/ü", EntryKind::Hardlink("usr/lib64".into())),
            LayerEntry::new("é/ý", EntryKind::Whiteout),
        ];
        let e = Entries::from(v.clone());
        assert_eq!(e.len(), 6);
        assert_eq!(format!("{:?}", e.to_vec()), format!("{v:?}"));
        let (chunks, count, c, el) = e.parts();
        assert_eq!(chunks.len(), 1);
        let bytes = chunks[0].clone();
        let back = Entries::from_parts(chunks.to_vec(), count, c.to_vec(), el.to_vec()).unwrap();
        assert_eq!(format!("{:?}", back.to_vec()), format!("{v:?}"));
        // Shared prefixes are stored once.
        assert!(bytes.len() < 120, "{}", bytes.len());
        // Damage is found when loading, never a panic.
        for cut in 0..bytes.len() {
            let r = Entries::from_parts(vec![bytes[..cut].to_vec()], count, c.to_vec(), el.to_vec());
            assert!(r.is_err(), "cut at {cut}");
        }
        let mut bad = bytes.to_vec();
        bad[0] = 0xff;
        assert!(Entries::from_parts(vec![bad], count, c.to_vec(), el.to_vec()).is_err());
        // An entry cut across two chunks is damage too.
        let split = vec![bytes[..5].to_vec(), bytes[5..].to_vec()];
        assert!(Entries::from_parts(split, count, c.to_vec(), el.to_vec()).is_err());
    }
}
