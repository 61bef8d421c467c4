//! What the first bytes of an ELF file say: class, byte order, type, machine and the program
//! interpreter (PT_INTERP). Parsed by hand from a bounded prefix so that it can run on every
//! regular file of every layer while the layer streams by.

use serde::Serialize;

/// How much of a file the layer reader looks at to classify it.
pub const HEAD_LEN: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ElfClass {
    #[serde(rename = "elf32")]
    Elf32,
    #[serde(rename = "elf64")]
    Elf64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ElfType {
    Relocatable,
    Executable,
    /// ET_DYN: a shared object or a position-independent executable.
    Shared,
    Core,
    Other,
}

/// The facts the ELF header and program headers in a file's first bytes give.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ElfHead {
    pub class: ElfClass,
    pub little_endian: bool,
    pub elf_type: ElfType,
    /// `e_machine`: 62 x86-64, 183 AArch64, 40 ARM, 3 i386, 21 PowerPC64, 22 s390, 243 RISC-V.
    pub machine: u16,
    /// The PT_INTERP path, when the segment lies within the bytes read.
    pub interpreter: Option<String>,
    /// Whether a PT_DYNAMIC segment exists (a dynamically linked program or a shared object).
    pub dynamic: bool,
}

const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;

impl ElfHead {
    /// Parses the head of a file; `None` when it is not ELF or the header is inconsistent.
    pub fn parse(head: &[u8]) -> Option<ElfHead> {
        if head.len() < 52 || &head[..4] != b"\x7fELF" {
            return None;
        }
        let class = match head[4] {
            1 => ElfClass::Elf32,
            2 => ElfClass::Elf64,
            _ => return None,
        };
        let little_endian = match head[5] {
            1 => true,
            2 => false,
            _ => return None,
        };
        let rd = Reader {
            bytes: head,
            le: little_endian,
        };
        let elf_type = match rd.u16(16)? {
            1 => ElfType::Relocatable,
            2 => ElfType::Executable,
            3 => ElfType::Shared,
            4 => ElfType::Core,
            _ => ElfType::Other,
        };
        let machine = rd.u16(18)?;
        let (phoff, phentsize, phnum) = match class {
            ElfClass::Elf64 => (rd.u64(32)?, rd.u16(54)? as u64, rd.u16(56)? as u64),
            ElfClass::Elf32 => (rd.u32(28)? as u64, rd.u16(42)? as u64, rd.u16(44)? as u64),
        };
        let min_entsize = match class {
            ElfClass::Elf64 => 56,
            ElfClass::Elf32 => 32,
        };
        let mut interpreter = None;
        let mut dynamic = false;
        if phentsize >= min_entsize {
            for i in 0..phnum.min(256) {
                let Some(base) = i.checked_mul(phentsize).and_then(|o| o.checked_add(phoff)) else {
                    break;
                };
                let Ok(base) = usize::try_from(base) else { break };
                if base
                    .checked_add(phentsize as usize)
                    .is_none_or(|end| end > head.len())
                {
                    break;
                }
                let p_type = rd.u32(base)?;
                let (offset, filesz) = match class {
                    ElfClass::Elf64 => (rd.u64(base + 8)?, rd.u64(base + 32)?),
                    ElfClass::Elf32 => (rd.u32(base + 4)? as u64, rd.u32(base + 16)? as u64),
                };
                match p_type {
                    PT_DYNAMIC => dynamic = true,
                    PT_INTERP => interpreter = rd.c_string(offset, filesz),
                    _ => {}
                }
            }
        }
        Some(ElfHead {
            class,
            little_endian,
            elf_type,
            machine,
            interpreter,
            dynamic,
        })
    }
}

/// What the dynamic section says, read while the file streamed by.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ElfDynamic {
    /// DT_NEEDED, in order.
    pub needed: Vec<String>,
    pub soname: Option<String>,
    /// DT_RPATH entries (searched before LD_LIBRARY_PATH).
    pub rpath: Vec<String>,
    /// DT_RUNPATH entries (searched after LD_LIBRARY_PATH, only for the object's own needs).
    pub runpath: Vec<String>,
    /// False when the string table lay beyond the bytes kept while streaming, so the names
    /// above are missing; facts that depend on them say they are uncertain.
    pub complete: bool,
}

/// Everything the layer reader learns of one ELF file beyond its head.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ElfScan {
    pub dynamic: Option<ElfDynamic>,
    /// An allocator whose own messages are in the file: linked in statically (or the
    /// allocator library itself).
    pub embedded_allocator: Option<&'static str>,
    /// The Node.js version in an official node binary (from its headers download URL).
    pub node_release: Option<String>,
    /// The glibc version a `libc.so.6` or glibc `ld.so` announces ("stable release version").
    pub glibc_release: Option<String>,
}

/// An ELF file as the layer reader saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ElfInfo {
    #[serde(flatten)]
    pub head: ElfHead,
    #[serde(flatten)]
    pub scan: ElfScan,
}

/// Bytes from the start of a file kept to find the dynamic string table; it sits in the first
/// read-only segment, well inside this for all but the largest binaries.
pub const PREFIX_CAP: usize = 4 * 1024 * 1024;
const DYNAMIC_CAP: u64 = 1024 * 1024;
/// Names kept from one dynamic section (DT_NEEDED, SONAME, RPATH, RUNPATH entries), and their
/// bytes all together: real objects have a few dozen; a lying file could point thousands of
/// entries at one long string.
const DYNAMIC_NAMES_CAP: usize = 1024;
const DYNAMIC_BYTES_CAP: usize = 256 * 1024;

/// Strings only an allocator prints, so finding one means the allocator is in the file.
const ALLOCATOR_MARKERS: &[(&[u8], &str)] = &[
    (b"<jemalloc>: ", "jemalloc"),
    (b"tcmalloc: large alloc", "tcmalloc"),
    (b"mimalloc: warning: ", "mimalloc"),
];
/// The name [`ElfScan::embedded_allocator`] holds for an allocator called `name`, for a scan
/// read back from the layer cache.
pub fn known_allocator(name: &str) -> Option<&'static str> {
    ALLOCATOR_MARKERS.iter().map(|(_, n)| *n).find(|n| *n == name)
}
const NODE_RELEASE: &[u8] = b"/download/release/v";
const GLIBC_RELEASE: &[u8] = b"GNU C Library";
const GLIBC_VERSION: &[u8] = b"stable release version ";
const MARKER_TAIL: usize = 192;

#[derive(Clone, Copy, Debug)]
struct Load {
    vaddr: u64,
    offset: u64,
    filesz: u64,
}

/// Follows one ELF file through the stream: keeps a bounded prefix and the dynamic segment,
/// and looks for allocator and Node.js markers, without holding the file.
pub struct ElfScanner {
    class: ElfClass,
    little_endian: bool,
    loads: Vec<Load>,
    dynamic: Option<(u64, u64)>,
    prefix: Vec<u8>,
    dyn_buf: Vec<u8>,
    pos: u64,
    tail: Vec<u8>,
    allocator: Option<&'static str>,
    node_release: Option<String>,
    glibc_release: Option<String>,
}

impl ElfScanner {
    /// Starts a scan from the file's head (which must be fed too).
    pub fn new(head: &[u8], elf: &ElfHead) -> ElfScanner {
        let mut loads = Vec::new();
        let mut dynamic = None;
        for (p_type, offset, vaddr, filesz) in program_headers(head, elf.class, elf.little_endian) {
            match p_type {
                1 => loads.push(Load {
                    vaddr,
                    offset,
                    filesz,
                }),
                PT_DYNAMIC => dynamic = Some((offset, filesz.min(DYNAMIC_CAP))),
                _ => {}
            }
        }
        ElfScanner {
            class: elf.class,
            little_endian: elf.little_endian,
            loads,
            dynamic,
            prefix: Vec::new(),
            dyn_buf: Vec::new(),
            pos: 0,
            tail: Vec::new(),
            allocator: None,
            node_release: None,
            glibc_release: None,
        }
    }

    /// The next bytes of the file, in order from offset 0.
    pub fn feed(&mut self, chunk: &[u8]) {
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
        self.scan_markers(chunk);
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
        if self.allocator.is_none() {
            for (needle, name) in ALLOCATOR_MARKERS {
                if memchr::memmem::find(w, needle).is_some() {
                    self.allocator = Some(name);
                    break;
                }
            }
        }
        if self.node_release.is_none() {
            self.node_release = version_after(w, NODE_RELEASE, 3);
        }
        // "GNU C Library (Debian GLIBC 2.36-9+deb12u14) stable release version 2.36."
        if self.glibc_release.is_none() {
            if let Some(at) = memchr::memmem::find(w, GLIBC_RELEASE) {
                let end = (at + 160).min(w.len());
                self.glibc_release = version_after(&w[at..end], GLIBC_VERSION, 2);
            }
        }
    }

    pub fn finish(self) -> ElfScan {
        let dynamic = self.dynamic.map(|_| self.parse_dynamic());
        ElfScan {
            dynamic,
            embedded_allocator: self.allocator,
            node_release: self.node_release,
            glibc_release: self.glibc_release,
        }
    }

    fn parse_dynamic(&self) -> ElfDynamic {
        let rd = Reader {
            bytes: &self.dyn_buf,
            le: self.little_endian,
        };
        let entsize = match self.class {
            ElfClass::Elf64 => 16,
            ElfClass::Elf32 => 8,
        };
        let mut entries = Vec::new();
        let (mut strtab, mut strsz) = (None, None);
        let mut at = 0;
        while at + entsize <= self.dyn_buf.len() {
            let (tag, val) = match self.class {
                ElfClass::Elf64 => (rd.u64(at), rd.u64(at + 8)),
                ElfClass::Elf32 => (rd.u32(at).map(u64::from), rd.u32(at + 4).map(u64::from)),
            };
            let (Some(tag), Some(val)) = (tag, val) else { break };
            match tag {
                0 => break,
                5 => strtab = Some(val),
                10 => strsz = Some(val),
                1 | 14 | 15 | 29 => entries.push((tag, val)),
                _ => {}
            }
            at += entsize;
        }
        let mut out = ElfDynamic::default();
        let Some(base) = strtab.and_then(|a| self.vaddr_to_offset(a)) else {
            return out;
        };
        let strsz = strsz.unwrap_or(u64::MAX);
        let prefix = Reader {
            bytes: &self.prefix,
            le: self.little_endian,
        };
        let mut complete = true;
        let mut kept_bytes = 0usize;
        for (i, (tag, val)) in entries.into_iter().enumerate() {
            if i >= DYNAMIC_NAMES_CAP || kept_bytes > DYNAMIC_BYTES_CAP {
                complete = false;
                break;
            }
            if val >= strsz {
                continue;
            }
            let Some(s) = base.checked_add(val).and_then(|off| prefix.c_string(off, 4096)) else {
                complete = false;
                continue;
            };
            kept_bytes += s.len();
            match tag {
                1 => out.needed.push(s),
                14 => out.soname = Some(s),
                15 => out
                    .rpath
                    .extend(s.split(':').filter(|p| !p.is_empty()).map(str::to_string)),
                29 => out
                    .runpath
                    .extend(s.split(':').filter(|p| !p.is_empty()).map(str::to_string)),
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

/// (p_type, p_offset, p_vaddr, p_filesz) of the program headers within `head`.
fn program_headers(head: &[u8], class: ElfClass, le: bool) -> Vec<(u32, u64, u64, u64)> {
    let rd = Reader { bytes: head, le };
    let hdr = match class {
        ElfClass::Elf64 => (rd.u64(32), rd.u16(54).map(u64::from), rd.u16(56).map(u64::from)),
        ElfClass::Elf32 => (
            rd.u32(28).map(u64::from),
            rd.u16(42).map(u64::from),
            rd.u16(44).map(u64::from),
        ),
    };
    let (Some(phoff), Some(phentsize), Some(phnum)) = hdr else {
        return Vec::new();
    };
    let min = match class {
        ElfClass::Elf64 => 56,
        ElfClass::Elf32 => 32,
    };
    if phentsize < min {
        return Vec::new();
    }
    let mut out = Vec::new();
    for i in 0..phnum.min(256) {
        let Some(base) = i.checked_mul(phentsize).and_then(|o| o.checked_add(phoff)) else {
            break;
        };
        let Ok(base) = usize::try_from(base) else { break };
        // A lying header may put the table anywhere: stop at the end of the bytes read.
        if base
            .checked_add(phentsize as usize)
            .is_none_or(|end| end > head.len())
        {
            break;
        }
        let fields = match class {
            ElfClass::Elf64 => (
                rd.u32(base),
                rd.u64(base + 8),
                rd.u64(base + 16),
                rd.u64(base + 32),
            ),
            ElfClass::Elf32 => (
                rd.u32(base),
                rd.u32(base + 4).map(u64::from),
                rd.u32(base + 8).map(u64::from),
                rd.u32(base + 16).map(u64::from),
            ),
        };
        let (Some(t), Some(o), Some(v), Some(f)) = fields else {
            break;
        };
        out.push((t, o, v, f));
    }
    out
}

/// The OCI architecture name for an ELF machine and class.
pub fn machine_arch(machine: u16, class: ElfClass) -> Option<&'static str> {
    Some(match (machine, class) {
        (62, ElfClass::Elf64) => "amd64",
        (3, _) => "386",
        (183, _) => "arm64",
        (40, _) => "arm",
        (21, ElfClass::Elf64) => "ppc64le",
        (22, ElfClass::Elf64) => "s390x",
        (243, ElfClass::Elf64) => "riscv64",
        (8, ElfClass::Elf64) => "mips64le",
        (258, ElfClass::Elf64) => "loong64",
        _ => return None,
    })
}

struct Reader<'a> {
    bytes: &'a [u8],
    le: bool,
}

impl Reader<'_> {
    fn take<const N: usize>(&self, at: usize) -> Option<[u8; N]> {
        self.bytes.get(at..at.checked_add(N)?)?.try_into().ok()
    }
    fn u16(&self, at: usize) -> Option<u16> {
        let b = self.take::<2>(at)?;
        Some(if self.le {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        })
    }
    fn u32(&self, at: usize) -> Option<u32> {
        let b = self.take::<4>(at)?;
        Some(if self.le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }
    fn u64(&self, at: usize) -> Option<u64> {
        let b = self.take::<8>(at)?;
        Some(if self.le {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        })
    }
    fn c_string(&self, offset: u64, len: u64) -> Option<String> {
        let start = usize::try_from(offset).ok()?;
        let len = usize::try_from(len).ok()?.min(4096);
        let raw = self
            .bytes
            .get(start..start.checked_add(len)?.min(self.bytes.len()))?;
        let end = raw.iter().position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&raw[..end]).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        f[ph..ph + 4].copy_from_slice(&PT_INTERP.to_le_bytes());
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
        assert_eq!(machine_arch(head.machine, head.class), Some("amd64"));
    }

    /// Found by review (and what the `elf` fuzz target checks): offsets near u64::MAX made the
    /// scanner's arithmetic overflow (a panic in debug builds, wrong slices in release).
    #[test]
    fn scanner_survives_offsets_near_the_end_of_u64() {
        let mut f = tiny_elf(b"/lib/ld.so");
        f[32..40].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
        let head = ElfHead::parse(&f).unwrap();
        let mut s = ElfScanner::new(&f, &head);
        s.feed(&f);
        assert_eq!(s.finish(), ElfScan::default());

        let mut g = tiny_elf(b"/lib/ld.so");
        let ph = 64;
        g[ph..ph + 4].copy_from_slice(&PT_DYNAMIC.to_le_bytes());
        g[ph + 8..ph + 16].copy_from_slice(&(u64::MAX - 4).to_le_bytes());
        g[ph + 32..ph + 40].copy_from_slice(&u64::MAX.to_le_bytes());
        let head = ElfHead::parse(&g).unwrap();
        let mut s = ElfScanner::new(&g, &head);
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
        f[120..124].copy_from_slice(&PT_DYNAMIC.to_le_bytes());
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
        let mut s = ElfScanner::new(&f[..HEAD_LEN], &head);
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
}
