//! What an ELF file says: class, byte order, type, machine and the program interpreter
//! (PT_INTERP) from its first bytes, and the dynamic section's names from the bytes kept while
//! the file streams by, so that it can run on every regular file of every layer.
//!
//! The `object` crate decodes the headers and dynamic entries, reading through [`Kept`]: the
//! bounded pieces of the file memlint holds (the head, a prefix, the dynamic segment), each at
//! its offset in the file. memlint decides how far to trust what a file claims: how many program
//! headers it reads, how many names and bytes it keeps.

use object::elf::{self as E, FileHeader32, FileHeader64};
use object::read::elf::{Dyn, FileHeader, ProgramHeader};
use object::{Endianness, ReadRef};
use serde::Serialize;
use std::ops::Range;

pub(crate) mod marker;

use marker::{BlobScanner, ElfMarker, Finds, Found, MarkerSet, TextScanner};

/// How much of a file the layer reader looks at to classify it.
pub(crate) const HEAD_LEN: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ElfClass {
    #[serde(rename = "elf32")]
    Elf32,
    #[serde(rename = "elf64")]
    Elf64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ElfType {
    Relocatable,
    Executable,
    /// ET_DYN: a shared object or a position-independent executable.
    Shared,
    Core,
    Other,
}

/// The facts the ELF header and program headers in a file's first bytes give.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct ElfHead {
    pub(crate) class: ElfClass,
    pub(crate) little_endian: bool,
    pub(crate) elf_type: ElfType,
    /// `e_machine`: 62 x86-64, 183 AArch64, 40 ARM, 3 i386, 21 PowerPC64, 22 s390, 243 RISC-V.
    pub(crate) machine: u16,
    /// The PT_INTERP path, when the segment lies within the bytes read.
    pub(crate) interpreter: Option<String>,
    /// Whether a PT_DYNAMIC segment exists (a dynamically linked program or a shared object).
    /// JSON `dynamic_segment`: [`ElfInfo`] flattens this beside [`ElfScan::dynamic`], and a JSON
    /// object must not have two `dynamic` keys.
    #[serde(rename = "dynamic_segment")]
    pub(crate) dynamic: bool,
}

impl ElfHead {
    /// Parses the head of a file; `None` when it is not ELF or the header is inconsistent.
    pub(crate) fn parse(head: &[u8]) -> Option<ElfHead> {
        let data = Kept::at(0, head);
        // The 32-bit header is the shorter one: its `e_ident` says which header this is.
        let ident = data.read_at::<FileHeader32<Endianness>>(0).ok()?.e_ident();
        if ident.magic != E::ELFMAG {
            return None;
        }
        let endian = match ident.data {
            E::ELFDATA2LSB => Endianness::Little,
            E::ELFDATA2MSB => Endianness::Big,
            _ => return None,
        };
        match ident.class {
            E::ELFCLASS32 => parse_head::<FileHeader32<Endianness>>(data, endian, ElfClass::Elf32),
            E::ELFCLASS64 => parse_head::<FileHeader64<Endianness>>(data, endian, ElfClass::Elf64),
            _ => None,
        }
    }
}

fn parse_head<H: FileHeader<Endian = Endianness>>(
    data: Kept,
    endian: Endianness,
    class: ElfClass,
) -> Option<ElfHead> {
    let header: &H = data.read_at(0).ok()?;
    let elf_type = match header.e_type(endian) {
        E::ET_REL => ElfType::Relocatable,
        E::ET_EXEC => ElfType::Executable,
        E::ET_DYN => ElfType::Shared,
        E::ET_CORE => ElfType::Core,
        _ => ElfType::Other,
    };
    let mut interpreter = None;
    let mut dynamic = false;
    for segment in segments(header, endian, data) {
        match segment.kind {
            E::PT_DYNAMIC => dynamic = true,
            E::PT_INTERP => interpreter = c_string(data, segment.offset, segment.filesz),
            _ => {}
        }
    }
    Some(ElfHead {
        class,
        little_endian: endian == Endianness::Little,
        elf_type,
        machine: header.e_machine(endian).0,
        interpreter,
        dynamic,
    })
}

/// What the dynamic section says, read while the file streamed by.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct ElfDynamic {
    /// DT_NEEDED, in order.
    pub(crate) needed: Vec<String>,
    pub(crate) soname: Option<String>,
    /// DT_RPATH entries (searched before LD_LIBRARY_PATH).
    pub(crate) rpath: Vec<String>,
    /// DT_RUNPATH entries (searched after LD_LIBRARY_PATH, only for the object's own needs).
    pub(crate) runpath: Vec<String>,
    /// False when the string table lay beyond the bytes kept while streaming, so the names
    /// above are missing; facts that depend on them say they are uncertain.
    pub(crate) complete: bool,
}

/// Everything the layer reader learns of one ELF file beyond its head.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ElfScan {
    pub(crate) dynamic: Option<ElfDynamic>,
    /// What the markers the facts declared ([`marker`]) found in the file.
    pub(crate) markers: Finds,
}

impl Serialize for ElfScan {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("dynamic", &self.dynamic)?;
        self.markers.serialize_into(&mut map)?;
        map.end()
    }
}

/// An ELF file as the layer reader saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct ElfInfo {
    #[serde(flatten)]
    pub(crate) head: ElfHead,
    #[serde(flatten)]
    pub(crate) scan: ElfScan,
}

/// Bytes from the start of a file kept to find the dynamic string table; it sits in the first
/// read-only segment, well inside this for all but the largest binaries.
pub(crate) const PREFIX_CAP: usize = 4 * 1024 * 1024;
const DYNAMIC_CAP: u64 = 1024 * 1024;
/// Names kept from one dynamic section (DT_NEEDED, SONAME, RPATH, RUNPATH entries), and their
/// bytes all together: real objects have a few dozen; a lying file could point thousands of
/// entries at one long string.
const DYNAMIC_NAMES_CAP: usize = 1024;
const DYNAMIC_BYTES_CAP: usize = 256 * 1024;

/// The overlap of the windows text markers are looked for in: a marker and what is read after
/// it fit in it (a test checks the declared markers).
pub(crate) const MARKER_TAIL: usize = 192;

#[derive(Clone, Copy, Debug)]
struct Load {
    vaddr: u64,
    offset: u64,
    filesz: u64,
}

/// Follows one ELF file through the stream: keeps a bounded prefix and the dynamic segment,
/// and looks for the declared markers, without holding the file.
pub(crate) struct ElfScanner {
    class: ElfClass,
    little_endian: bool,
    loads: Vec<Load>,
    dynamic: Option<(u64, u64)>,
    prefix: Vec<u8>,
    dyn_buf: Vec<u8>,
    pos: u64,
    tail: Vec<u8>,
    markers: MarkerSet,
    text: TextScanner,
    blobs: Vec<BlobScanner>,
}

impl ElfScanner {
    /// Starts a scan from the file's head (which must be fed too), for `markers`.
    pub(crate) fn new(head: &[u8], elf: &ElfHead, markers: &MarkerSet) -> ElfScanner {
        ElfScanner::reusing(head, elf, markers, Vec::new())
    }

    /// [`ElfScanner::new`] keeping the file's prefix in `buffer` (emptied first), which
    /// [`ElfScanner::finish_into`] hands back: a layer's walk reuses one, rather than growing a
    /// new one up to [`PREFIX_CAP`] for every ELF file, in fresh pages each time.
    pub(crate) fn reusing(
        head: &[u8],
        elf: &ElfHead,
        markers: &MarkerSet,
        mut buffer: Vec<u8>,
    ) -> ElfScanner {
        buffer.clear();
        let mut loads = Vec::new();
        let mut dynamic = None;
        let mut writable = Vec::new();
        for segment in program_headers(head, elf.class, elf.little_endian) {
            match segment.kind {
                E::PT_LOAD => {
                    // Where blobs are looked for: writable data, not code.
                    if segment.flags & (E::PF_X.0 | E::PF_W.0) == E::PF_W.0 {
                        writable.push((segment.offset, segment.filesz));
                    }
                    loads.push(Load {
                        vaddr: segment.vaddr,
                        offset: segment.offset,
                        filesz: segment.filesz,
                    })
                }
                E::PT_DYNAMIC => dynamic = Some((segment.offset, segment.filesz.min(DYNAMIC_CAP))),
                _ => {}
            }
        }
        ElfScanner {
            class: elf.class,
            little_endian: elf.little_endian,
            loads,
            dynamic,
            prefix: buffer,
            dyn_buf: Vec::new(),
            pos: 0,
            tail: Vec::new(),
            markers: markers.clone(),
            text: TextScanner::new(markers),
            blobs: markers
                .iter()
                .filter_map(|m| BlobScanner::new(m, writable.iter().copied()))
                .collect(),
        }
    }

    /// The next bytes of the file, in order from offset 0.
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        let start = self.pos;
        let end = start + chunk.len() as u64;
        if (start as usize) < PREFIX_CAP {
            let take = (PREFIX_CAP - start as usize).min(chunk.len());
            self.prefix.extend_from_slice(&chunk[..take]);
        }
        if let Some((off, size)) = self.dynamic {
            // Offsets come from the file: a lying header may put them anywhere.
            let (lo, hi) = (off.max(start), off.saturating_add(size).min(end));
            if lo < hi {
                self.dyn_buf
                    .extend_from_slice(&chunk[(lo - start) as usize..(hi - start) as usize]);
            }
        }
        if !self.text.is_empty() {
            self.scan_markers(chunk);
        }
        for blob in &mut self.blobs {
            blob.feed(start, chunk);
        }
        self.pos = end;
    }

    fn scan_markers(&mut self, chunk: &[u8]) {
        // The previous bytes' tail joined to this chunk's start catches a marker cut in two.
        let mut joined = std::mem::take(&mut self.tail);
        joined.extend_from_slice(&chunk[..chunk.len().min(MARKER_TAIL * 2)]);
        self.scan_window(&joined);
        if chunk.len() > MARKER_TAIL * 2 {
            self.scan_window(chunk);
        }
        let cut = if chunk.len() >= MARKER_TAIL {
            joined.clear();
            joined.extend_from_slice(&chunk[chunk.len() - MARKER_TAIL..]);
            0
        } else {
            joined.len().saturating_sub(MARKER_TAIL)
        };
        joined.drain(..cut);
        self.tail = joined;
    }

    fn scan_window(&mut self, w: &[u8]) {
        self.text.scan_window(w);
    }

    pub(crate) fn finish(self) -> ElfScan {
        self.finish_into().0
    }

    /// The scan, and the prefix's buffer for the next file.
    pub(crate) fn finish_into(self) -> (ElfScan, Vec<u8>) {
        let dynamic = self.dynamic.map(|_| self.parse_dynamic());
        let mut found: Vec<(&'static ElfMarker, Found)> = self
            .text
            .finish()
            .chain(self.blobs.into_iter().filter_map(BlobScanner::finish))
            .collect();
        found.sort_by_key(|(m, _)| m.key);
        let scan = ElfScan {
            dynamic,
            markers: Finds {
                searched: (!self.markers.is_empty()).then_some(self.markers),
                found,
            },
        };
        (scan, self.prefix)
    }

    fn parse_dynamic(&self) -> ElfDynamic {
        match self.class {
            ElfClass::Elf32 => self.read_dynamic::<E::Dyn32<Endianness>>(),
            ElfClass::Elf64 => self.read_dynamic::<E::Dyn64<Endianness>>(),
        }
    }

    fn read_dynamic<D: Dyn<Endian = Endianness>>(&self) -> ElfDynamic {
        let endian = endianness(self.little_endian);
        let mut out = ElfDynamic::default();
        let Some((at, _)) = self.dynamic else {
            return out;
        };
        // The entries wholly among the bytes kept of the segment, up to DT_NULL.
        let count = self.dyn_buf.len() / std::mem::size_of::<D>();
        let entries: &[D] = Kept::at(at, &self.dyn_buf)
            .read_slice_at(at, count)
            .unwrap_or_default();
        let mut names = Vec::new();
        let (mut strtab, mut strsz) = (None, None);
        for entry in entries {
            let (tag, val) = (entry.tag(endian), entry.val(endian));
            match tag {
                E::DT_NULL => break,
                E::DT_STRTAB => strtab = Some(val),
                E::DT_STRSZ => strsz = Some(val),
                E::DT_NEEDED | E::DT_SONAME | E::DT_RPATH | E::DT_RUNPATH => names.push((tag, val)),
                _ => {}
            }
        }
        let Some(base) = strtab.and_then(|a| self.vaddr_to_offset(a)) else {
            return out;
        };
        let strsz = strsz.unwrap_or(u64::MAX);
        // The string table is read from the prefix only: it sits in the first read-only segment.
        let prefix = Kept::at(0, &self.prefix);
        let mut complete = true;
        let mut kept_bytes = 0usize;
        for (i, (tag, val)) in names.into_iter().enumerate() {
            if i >= DYNAMIC_NAMES_CAP || kept_bytes > DYNAMIC_BYTES_CAP {
                complete = false;
                break;
            }
            if val >= strsz {
                continue;
            }
            let Some(s) = base
                .checked_add(val)
                .and_then(|off| c_string(prefix, off, NAME_MAX))
            else {
                complete = false;
                continue;
            };
            kept_bytes += s.len();
            let paths = || s.split(':').filter(|p| !p.is_empty()).map(str::to_string);
            match tag {
                E::DT_NEEDED => out.needed.push(s),
                E::DT_SONAME => out.soname = Some(s),
                E::DT_RPATH => out.rpath.extend(paths()),
                E::DT_RUNPATH => out.runpath.extend(paths()),
                _ => {}
            }
        }
        out.complete = complete;
        out
    }

    fn vaddr_to_offset(&self, addr: u64) -> Option<u64> {
        self.loads
            .iter()
            .find(|l| addr >= l.vaddr && addr - l.vaddr < l.filesz)
            .and_then(|l| (addr - l.vaddr).checked_add(l.offset))
    }
}

/// Program headers read from one file, at most this many: real programs have a dozen.
const MAX_SEGMENTS: u64 = 256;
/// Bytes read for one string (the interpreter, a dynamic name) in search of its end.
const NAME_MAX: u64 = 4096;

/// What memlint reads of a program header.
#[derive(Clone, Copy, Debug)]
struct Segment {
    kind: E::ProgramType,
    flags: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

/// The program headers within `data`, decoded as the header's class and byte order say.
///
/// Read one by one rather than through `FileHeader::program_headers`, which refuses the whole
/// table when any of it lies past the bytes kept or `e_phentsize` is not the exact entry size:
/// memlint reads every entry that lies whole within the bytes kept (up to [`MAX_SEGMENTS`]),
/// stepping by `e_phentsize` when it is at least an entry's size.
fn segments<'a, H: FileHeader<Endian = Endianness>>(
    header: &H,
    endian: Endianness,
    data: Kept<'a>,
) -> impl Iterator<Item = Segment> + 'a {
    let table: u64 = header.e_phoff(endian).into();
    let step = u64::from(header.e_phentsize(endian));
    let whole_entries = step >= std::mem::size_of::<H::ProgramHeader>() as u64;
    let count = if whole_entries {
        u64::from(header.e_phnum(endian)).min(MAX_SEGMENTS)
    } else {
        0
    };
    (0..count).map_while(move |i| {
        // A lying header may put the table anywhere: stop at the end of the bytes read.
        let at = i.checked_mul(step)?.checked_add(table)?;
        let entry = data.read_bytes_at(at, step).ok()?;
        let ph = entry.read_at::<H::ProgramHeader>(0).ok()?;
        Some(Segment {
            kind: ph.p_type(endian),
            flags: ph.p_flags(endian).0,
            offset: ph.p_offset(endian).into(),
            vaddr: ph.p_vaddr(endian).into(),
            filesz: ph.p_filesz(endian).into(),
        })
    })
}

/// The program headers within the head of a file [`ElfHead::parse`] accepted.
fn program_headers(head: &[u8], class: ElfClass, little_endian: bool) -> Vec<Segment> {
    fn read<H: FileHeader<Endian = Endianness>>(data: Kept, endian: Endianness) -> Vec<Segment> {
        data.read_at::<H>(0)
            .map_or_else(|_| Vec::new(), |header| segments(header, endian, data).collect())
    }
    let (data, endian) = (Kept::at(0, head), endianness(little_endian));
    match class {
        ElfClass::Elf32 => read::<FileHeader32<Endianness>>(data, endian),
        ElfClass::Elf64 => read::<FileHeader64<Endianness>>(data, endian),
    }
}

fn endianness(little: bool) -> Endianness {
    if little {
        Endianness::Little
    } else {
        Endianness::Big
    }
}

/// The NUL-terminated string at `offset`, looked for within `len` bytes (at most [`NAME_MAX`]);
/// `None` when no NUL lies among those bytes that are kept.
fn c_string(data: Kept, offset: u64, len: u64) -> Option<String> {
    let end = offset.checked_add(len.min(NAME_MAX))?;
    let bytes = data.read_bytes_at_until(offset..end, 0).ok()?;
    Some(String::from_utf8_lossy(bytes).into_owned())
}

/// A piece of a file memlint kept, at its offset in the file: what the `object` crate reads
/// headers and entries through. A read outside the piece fails, as a read past the end of a
/// short file does.
#[derive(Clone, Copy, Debug)]
struct Kept<'a> {
    start: u64,
    bytes: &'a [u8],
}

impl<'a> Kept<'a> {
    fn at(start: u64, bytes: &'a [u8]) -> Kept<'a> {
        Kept { start, bytes }
    }

    /// The kept bytes from `offset` on.
    fn from(self, offset: u64) -> Option<&'a [u8]> {
        let skip = usize::try_from(offset.checked_sub(self.start)?).ok()?;
        self.bytes.get(skip..)
    }
}

impl<'a> ReadRef<'a> for Kept<'a> {
    /// Where the kept bytes end (the file may go on).
    fn len(self) -> Result<u64, ()> {
        self.start.checked_add(self.bytes.len() as u64).ok_or(())
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'a [u8], ()> {
        if size == 0 {
            return Ok(&[]);
        }
        let size = usize::try_from(size).map_err(|_| ())?;
        self.from(offset).and_then(|b| b.get(..size)).ok_or(())
    }

    /// A range that runs past the kept bytes still answers when the delimiter lies among them:
    /// the bytes before it are the same whatever follows.
    fn read_bytes_at_until(self, range: Range<u64>, delimiter: u8) -> Result<&'a [u8], ()> {
        let len = range.end.checked_sub(range.start).ok_or(())?;
        let bytes = self.from(range.start).ok_or(())?;
        let bytes = &bytes[..usize::try_from(len).map_or(bytes.len(), |l| l.min(bytes.len()))];
        let end = memchr::memchr(delimiter, bytes).ok_or(())?;
        Ok(&bytes[..end])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_markers() -> MarkerSet {
        marker::union(&[], &[])
    }

    /// A minimal 64-bit little-endian executable with one PT_INTERP program header.
    fn tiny_elf(interp: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 64 + 56];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2;
        f[5] = 1;
        f[16..18].copy_from_slice(&2u16.to_le_bytes());
        f[18..20].copy_from_slice(&62u16.to_le_bytes());
        f[32..40].copy_from_slice(&64u64.to_le_bytes());
        f[54..56].copy_from_slice(&56u16.to_le_bytes());
        f[56..58].copy_from_slice(&1u16.to_le_bytes());
        let ph = 64;
        f[ph..ph + 4].copy_from_slice(&E::PT_INTERP.0.to_le_bytes());
        f[ph + 8..ph + 16].copy_from_slice(&(120u64).to_le_bytes());
        f[ph + 32..ph + 40].copy_from_slice(&(interp.len() as u64 + 1).to_le_bytes());
        f.extend_from_slice(interp);
        f.push(0);
        f
    }

    #[test]
    fn reads_interpreter_and_machine() {
        let head = ElfHead::parse(&tiny_elf(b"/lib64/ld-linux-x86-64.so.2")).unwrap();
        assert_eq!(head.class, ElfClass::Elf64);
        assert_eq!(head.machine, 62);
        assert_eq!(head.elf_type, ElfType::Executable);
        assert_eq!(head.interpreter.as_deref(), Some("/lib64/ld-linux-x86-64.so.2"));
    }

    /// Found by review (and what the `elf` fuzz target checks): offsets near u64::MAX made the
    /// scanner's arithmetic overflow (a panic in debug builds, wrong slices in release).
    #[test]
    fn scanner_survives_offsets_near_the_end_of_u64() {
        let mut f = tiny_elf(b"/lib/ld.so");
        f[32..40].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
        let head = ElfHead::parse(&f).unwrap();
        let mut s = ElfScanner::new(&f, &head, &no_markers());
        s.feed(&f);
        assert_eq!(s.finish(), ElfScan::default());

        let mut g = tiny_elf(b"/lib/ld.so");
        let ph = 64;
        g[ph..ph + 4].copy_from_slice(&E::PT_DYNAMIC.0.to_le_bytes());
        g[ph + 8..ph + 16].copy_from_slice(&(u64::MAX - 4).to_le_bytes());
        g[ph + 32..ph + 40].copy_from_slice(&u64::MAX.to_le_bytes());
        let head = ElfHead::parse(&g).unwrap();
        let mut s = ElfScanner::new(&g, &head, &no_markers());
        s.feed(&g);
        s.feed(&[0u8; 100]);
        let scan = s.finish();
        assert_eq!(scan.dynamic.map(|d| d.needed.len()), Some(0));
    }

    /// A dynamic section of 60,000 DT_NEEDED entries that all name one 4 KB string would
    /// otherwise keep 240 MB of names for one file.
    #[test]
    fn dynamic_names_are_capped() {
        let mut f = vec![0u8; 64 + 2 * 56];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2;
        f[5] = 1;
        f[16..18].copy_from_slice(&3u16.to_le_bytes());
        f[18..20].copy_from_slice(&62u16.to_le_bytes());
        f[32..40].copy_from_slice(&64u64.to_le_bytes());
        f[54..56].copy_from_slice(&56u16.to_le_bytes());
        f[56..58].copy_from_slice(&2u16.to_le_bytes());
        let dyn_at = 4096u64;
        let entries = 60_000u64;
        let str_at = dyn_at + (entries + 1) * 16;
        let total = str_at + 4001;
        // PT_LOAD of the whole file at vaddr 0, PT_DYNAMIC at dyn_at.
        f[64..68].copy_from_slice(&1u32.to_le_bytes());
        f[64 + 32..64 + 40].copy_from_slice(&total.to_le_bytes());
        f[120..124].copy_from_slice(&E::PT_DYNAMIC.0.to_le_bytes());
        f[120 + 8..120 + 16].copy_from_slice(&dyn_at.to_le_bytes());
        f[120 + 32..120 + 40].copy_from_slice(&((entries + 1) * 16).to_le_bytes());
        f.resize(dyn_at as usize, 0);
        for _ in 0..entries {
            f.extend_from_slice(&1u64.to_le_bytes());
            f.extend_from_slice(&0u64.to_le_bytes());
        }
        f.extend_from_slice(&5u64.to_le_bytes());
        f.extend_from_slice(&str_at.to_le_bytes());
        f.extend(std::iter::repeat_n(b'n', 4000));
        f.push(0);
        let head = ElfHead::parse(&f[..HEAD_LEN]).unwrap();
        let mut s = ElfScanner::new(&f[..HEAD_LEN], &head, &no_markers());
        for chunk in f.chunks(65536) {
            s.feed(chunk);
        }
        let d = s.finish().dynamic.unwrap();
        assert!(!d.complete);
        assert!(d.needed.len() <= DYNAMIC_NAMES_CAP);
        assert!(d.needed.iter().map(String::len).sum::<usize>() <= DYNAMIC_BYTES_CAP + 4000);
        assert_eq!(d.needed[0].len(), 4000);
    }

    #[test]
    fn survives_lying_headers() {
        let mut f = tiny_elf(b"/lib/ld-musl-x86_64.so.1");
        // program header offset far past the end, huge count
        f[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        f[56..58].copy_from_slice(&u16::MAX.to_le_bytes());
        let head = ElfHead::parse(&f).unwrap();
        assert_eq!(head.interpreter, None);
        assert!(ElfHead::parse(b"\x7fELF").is_none());
        assert!(ElfHead::parse(b"#!/bin/sh\n").is_none());
        let mut g = tiny_elf(b"/x");
        let ph = 64;
        g[ph + 8..ph + 16].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
        assert_eq!(ElfHead::parse(&g).unwrap().interpreter, None);
    }

    /// A dynamically linked program of either class and byte order: PT_INTERP, one PT_LOAD of
    /// the whole file at vaddr 0x10000, and a dynamic section naming a library, a soname and a
    /// runpath.
    fn small_program(class64: bool, little: bool, machine: u16) -> Vec<u8> {
        let put = |f: &mut Vec<u8>, at: usize, v: u64, size: usize| {
            let b = v.to_le_bytes();
            for i in 0..size {
                f[at + i] = if little { b[i] } else { b[size - 1 - i] };
            }
        };
        let (word, ehsize, phentsize, dynsize) = if class64 { (8, 64, 56, 16) } else { (4, 52, 32, 8) };
        let (interp_at, dyn_at, str_at, total) = (0x200, 0x300, 0x400, 0x480);
        let vaddr = 0x10000u64;
        let mut f = vec![0u8; total];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = if class64 { 2 } else { 1 };
        f[5] = if little { 1 } else { 2 };
        f[6] = 1;
        put(&mut f, 16, 3, 2);
        put(&mut f, 18, machine.into(), 2);
        // e_phoff, then e_phentsize and e_phnum after e_flags and e_ehsize.
        let phoff_at = 24 + word;
        put(&mut f, phoff_at, ehsize, word);
        let phentsize_at = 24 + 3 * word + 4 + 2;
        put(&mut f, phentsize_at, phentsize as u64, 2);
        put(&mut f, phentsize_at + 2, 3, 2);
        let phdr = |f: &mut Vec<u8>, i: usize, kind: u32, offset: u64, vaddr: u64, filesz: u64| {
            let b = ehsize as usize + i * phentsize;
            put(f, b, kind.into(), 4);
            if class64 {
                put(f, b + 8, offset, 8);
                put(f, b + 16, vaddr, 8);
                put(f, b + 32, filesz, 8);
            } else {
                put(f, b + 4, offset, 4);
                put(f, b + 8, vaddr, 4);
                put(f, b + 16, filesz, 4);
            }
        };
        let interp = b"/lib/ld-test.so.1\0";
        phdr(
            &mut f,
            0,
            E::PT_INTERP.0,
            interp_at as u64,
            vaddr + interp_at as u64,
            interp.len() as u64,
        );
        phdr(&mut f, 1, E::PT_LOAD.0, 0, vaddr, total as u64);
        phdr(
            &mut f,
            2,
            E::PT_DYNAMIC.0,
            dyn_at as u64,
            vaddr + dyn_at as u64,
            6 * dynsize as u64,
        );
        f[interp_at..interp_at + interp.len()].copy_from_slice(interp);
        let strings = b"\0libc.so.6\0libx.so\0$ORIGIN:/opt\0";
        f[str_at..str_at + strings.len()].copy_from_slice(strings);
        let entries = [
            (E::DT_NEEDED.0, 1),
            (E::DT_SONAME.0, 11),
            (E::DT_RUNPATH.0, 19),
            (E::DT_STRTAB.0, vaddr + str_at as u64),
            (E::DT_STRSZ.0, strings.len() as u64),
            (E::DT_NULL.0, 0),
        ];
        for (i, (tag, val)) in entries.into_iter().enumerate() {
            let at = dyn_at + i * dynsize;
            put(&mut f, at, tag as u64, dynsize / 2);
            put(&mut f, at + dynsize / 2, val, dynsize / 2);
        }
        f
    }

    #[test]
    fn every_class_and_byte_order() {
        for (class64, little, machine) in [
            (true, true, 62),
            (false, true, 40),
            (true, false, 22),
            (false, false, 8),
        ] {
            let f = small_program(class64, little, machine);
            let what = format!("64-bit {class64}, little-endian {little}");
            let head = ElfHead::parse(&f).expect(&what);
            assert_eq!(
                head,
                ElfHead {
                    class: if class64 { ElfClass::Elf64 } else { ElfClass::Elf32 },
                    little_endian: little,
                    elf_type: ElfType::Shared,
                    machine,
                    interpreter: Some("/lib/ld-test.so.1".into()),
                    dynamic: true,
                },
                "{what}"
            );
            let mut s = ElfScanner::new(&f, &head, &no_markers());
            for chunk in f.chunks(100) {
                s.feed(chunk);
            }
            assert_eq!(
                s.finish().dynamic,
                Some(ElfDynamic {
                    needed: vec!["libc.so.6".into()],
                    soname: Some("libx.so".into()),
                    rpath: vec![],
                    runpath: vec!["$ORIGIN".into(), "/opt".into()],
                    complete: true,
                }),
                "{what}"
            );
        }
    }

    /// The whole ELF header must be there: the hand-written reader took a 64-bit header cut
    /// after `e_phnum` (58 of its 64 bytes); the `object` crate reads it whole or not at all.
    #[test]
    fn a_header_cut_short_is_not_elf() {
        let f = small_program(true, true, 62);
        assert!(ElfHead::parse(&f[..64]).is_some());
        for cut in [0, 4, 51, 52, 58, 63] {
            assert!(ElfHead::parse(&f[..cut]).is_none(), "{cut}");
        }
        let g = small_program(false, true, 40);
        assert!(ElfHead::parse(&g[..52]).is_some());
        assert!(ElfHead::parse(&g[..51]).is_none());
    }

    #[test]
    fn kept_reads_only_what_is_kept() {
        let k = Kept::at(100, b"abc\0def");
        assert_eq!(k.len(), Ok(107));
        assert_eq!(k.read_bytes_at(100, 3), Ok(&b"abc"[..]));
        assert_eq!(k.read_bytes_at(104, 3), Ok(&b"def"[..]));
        assert_eq!(k.read_bytes_at(0, 0), Ok(&b""[..]));
        for (offset, size) in [(99, 1), (105, 3), (107, 1), (u64::MAX, 1), (100, u64::MAX)] {
            assert!(k.read_bytes_at(offset, size).is_err(), "{offset} {size}");
        }
        // A range past the end still answers when its NUL is kept.
        assert_eq!(k.read_bytes_at_until(100..u64::MAX, 0), Ok(&b"abc"[..]));
        assert!(
            k.read_bytes_at_until(104..200, 0).is_err(),
            "no NUL kept after `def`"
        );
        assert!(
            k.read_bytes_at_until(100..102, 0).is_err(),
            "no NUL within the range"
        );
        let reversed = Range { start: 102, end: 100 };
        assert!(k.read_bytes_at_until(reversed, 0).is_err());
        assert!(k.read_bytes_at_until(50..200, 0).is_err());
    }
}
