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
