//! One architecture type, and every name memlint meets an architecture under: the OCI
//! `architecture` (and the variant where it matters), the ELF `e_machine` and class, Debian's
//! multiarch triplet, musl's loader name, glibc's `$PLATFORM`, Node.js's `process.arch` (and the
//! names sharp ≤ 0.32 gave its addons), and the ld.so.cache flags a glibc loader accepts.
//!
//! Every name comes from one row of [`ROWS`], so the schemes cannot drift apart. A `None` in a
//! row means memlint does not model that scheme for the architecture (it never did): the
//! architecture is still known by its other names.

use crate::elf::ElfClass;
use object::elf;

/// A processor architecture as images are built for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Arch {
    Amd64,
    Arm64,
    Arm,
    I386,
    Ppc64le,
    S390x,
    Riscv64,
    Mips64le,
    Loong64,
}

/// One architecture's names.
struct Row {
    arch: Arch,
    /// GOARCH, as OCI indexes and configs spell it.
    oci: &'static str,
    /// Kernel and toolchain spellings (`uname -m`, Debian architecture names) that `--platform`
    /// and image configs sometimes carry instead of the OCI name.
    aliases: &'static [&'static str],
    /// OCI variants memlint tells apart; sharp ≤ 0.32 appended them to `process.arch` in its
    /// addon names (`arm64v8`, `armv7`).
    variants: &'static [&'static str],
    /// The variant every image of the architecture has, so that naming it or not names the
    /// same image.
    implied_variant: Option<&'static str>,
    /// `e_machine` and the class the architecture's programs are built as.
    machine: u16,
    class: ElfClass,
    /// A file of the other class is still this architecture: true where the machine number
    /// alone names it (EM_386, EM_ARM, EM_AARCH64), false where the other class is another
    /// architecture (EM_X86_64 in a 32-bit file is x32, EM_RISCV riscv32, EM_S390 s390).
    either_class: bool,
    /// Debian's multiarch triplet (`/usr/lib/<triplet>`).
    triplet: Option<&'static str>,
    /// The `<arch>` of musl's `ld-musl-<arch>.so.1` and `/etc/ld-musl-<arch>.path`.
    musl: Option<&'static str>,
    /// `$PLATFORM` as glibc's loader expands it (AT_PLATFORM).
    glibc_platform: Option<&'static str>,
    /// Node.js's `process.arch` (npm's `cpu`).
    node: Option<&'static str>,
    /// ld.so.cache entry flags a glibc loader of this architecture accepts
    /// (sysdeps/*/dl-cache.h `_dl_cache_check_flags`); empty: any libc6 entry.
    ld_cache_flags: &'static [i32],
}

const ROWS: [Row; 9] = [
    Row {
        arch: Arch::Amd64,
        oci: "amd64",
        aliases: &["x86_64", "x86-64"],
        variants: &[],
        implied_variant: None,
        machine: elf::EM_X86_64.0,
        class: ElfClass::Elf64,
        either_class: false,
        triplet: Some("x86_64-linux-gnu"),
        musl: Some("x86_64"),
        glibc_platform: Some("x86_64"),
        node: Some("x64"),
        ld_cache_flags: &[0x0303],
    },
    Row {
        arch: Arch::Arm64,
        oci: "arm64",
        aliases: &["aarch64"],
        variants: &["v8"],
        implied_variant: Some("v8"),
        machine: elf::EM_AARCH64.0,
        class: ElfClass::Elf64,
        either_class: true,
        triplet: Some("aarch64-linux-gnu"),
        musl: Some("aarch64"),
        glibc_platform: Some("aarch64"),
        node: Some("arm64"),
        ld_cache_flags: &[0x0a03],
    },
    Row {
        arch: Arch::Arm,
        oci: "arm",
        aliases: &["armhf", "armel"],
        variants: &["v6", "v7"],
        implied_variant: None,
        machine: elf::EM_ARM.0,
        class: ElfClass::Elf32,
        either_class: true,
        triplet: Some("arm-linux-gnueabihf"),
        musl: Some("armhf"),
        glibc_platform: Some("v7l"),
        node: Some("arm"),
        ld_cache_flags: &[0x0903, 0x0003],
    },
    Row {
        arch: Arch::I386,
        oci: "386",
        aliases: &["i686", "i586", "i486", "x86"],
        variants: &[],
        implied_variant: None,
        machine: elf::EM_386.0,
        class: ElfClass::Elf32,
        either_class: true,
        triplet: Some("i386-linux-gnu"),
        musl: Some("i386"),
        glibc_platform: Some("i686"),
        node: Some("ia32"),
        ld_cache_flags: &[0x0001, 0x0003],
    },
    Row {
        arch: Arch::Ppc64le,
        oci: "ppc64le",
        aliases: &["powerpc64le", "ppc64el"],
        variants: &[],
        implied_variant: None,
        machine: elf::EM_PPC64.0,
        class: ElfClass::Elf64,
        either_class: false,
        triplet: Some("powerpc64le-linux-gnu"),
        musl: Some("powerpc64le"),
        glibc_platform: Some("power8"),
        node: Some("ppc64"),
        ld_cache_flags: &[0x0503],
    },
    Row {
        arch: Arch::S390x,
        oci: "s390x",
        aliases: &[],
        variants: &[],
        implied_variant: None,
        machine: elf::EM_S390.0,
        class: ElfClass::Elf64,
        either_class: false,
        triplet: Some("s390x-linux-gnu"),
        musl: Some("s390x"),
        glibc_platform: Some("z13"),
        node: Some("s390x"),
        ld_cache_flags: &[0x0403],
    },
    Row {
        arch: Arch::Riscv64,
        oci: "riscv64",
        aliases: &[],
        variants: &[],
        implied_variant: None,
        machine: elf::EM_RISCV.0,
        class: ElfClass::Elf64,
        either_class: false,
        triplet: Some("riscv64-linux-gnu"),
        musl: Some("riscv64"),
        glibc_platform: None,
        node: Some("riscv64"),
        ld_cache_flags: &[0x1003],
    },
    Row {
        arch: Arch::Mips64le,
        oci: "mips64le",
        aliases: &[],
        variants: &[],
        implied_variant: None,
        machine: elf::EM_MIPS.0,
        class: ElfClass::Elf64,
        either_class: false,
        triplet: None,
        musl: None,
        glibc_platform: None,
        node: None,
        ld_cache_flags: &[],
    },
    Row {
        arch: Arch::Loong64,
        oci: "loong64",
        aliases: &[],
        variants: &[],
        implied_variant: None,
        machine: elf::EM_LOONGARCH.0,
        class: ElfClass::Elf64,
        either_class: false,
        triplet: None,
        musl: None,
        glibc_platform: None,
        node: Some("loong64"),
        ld_cache_flags: &[0x1203],
    },
];

/// Every Debian multiarch triplet memlint recognises in a path as some architecture's library
/// folder, its own or another's: each [`Arch::triplet`], and the ABIs memlint does not model
/// (armel's soft-float `arm-linux-gnueabi`, mips64el's `mips64el-linux-gnuabi64`).
pub(crate) const TRIPLETS: &[&str] = &[
    "x86_64-linux-gnu",
    "aarch64-linux-gnu",
    "arm-linux-gnueabihf",
    "arm-linux-gnueabi",
    "powerpc64le-linux-gnu",
    "s390x-linux-gnu",
    "i386-linux-gnu",
    "riscv64-linux-gnu",
    "mips64el-linux-gnuabi64",
];

impl Arch {
    #[cfg(test)]
    pub(crate) const ALL: [Arch; 9] = [
        Arch::Amd64,
        Arch::Arm64,
        Arch::Arm,
        Arch::I386,
        Arch::Ppc64le,
        Arch::S390x,
        Arch::Riscv64,
        Arch::Mips64le,
        Arch::Loong64,
    ];

    fn row(self) -> &'static Row {
        // ROWS lists every architecture once, in the enum's order (a unit test checks it).
        &ROWS[self as usize]
    }

    fn find(pred: impl Fn(&Row) -> bool) -> Option<Arch> {
        ROWS.iter().find(|r| pred(r)).map(|r| r.arch)
    }

    /// The OCI (GOARCH) name: `amd64`, `arm64`, `386`…
    pub(crate) fn oci(self) -> &'static str {
        self.row().oci
    }

    /// The architecture an OCI name names; exact, as [`Arch::oci`] spells it.
    pub(crate) fn from_oci(name: &str) -> Option<Arch> {
        Arch::find(|r| r.oci == name)
    }

    /// The architecture a kernel or toolchain name (`x86_64`, `aarch64`, `armhf`, `i686`…)
    /// stands for, where it is not the OCI name.
    pub(crate) fn from_alias(name: &str) -> Option<Arch> {
        Arch::find(|r| r.aliases.contains(&name))
    }

    /// The variant every image of this architecture has (arm64's `v8`), so that writing it or
    /// not names the same image.
    pub(crate) fn implied_variant(self) -> Option<&'static str> {
        self.row().implied_variant
    }

    /// The architecture of an ELF file's `e_machine` and class.
    pub(crate) fn from_elf(machine: u16, class: ElfClass) -> Option<Arch> {
        Arch::find(|r| r.machine == machine && (r.either_class || r.class == class))
    }

    /// The `e_machine` and class of the architecture's programs.
    pub(crate) fn elf(self) -> (u16, ElfClass) {
        (self.row().machine, self.row().class)
    }

    /// Debian's multiarch triplet: `x86_64-linux-gnu`, `arm-linux-gnueabihf`…
    pub(crate) fn triplet(self) -> Option<&'static str> {
        self.row().triplet
    }

    /// The `<arch>` of musl's loader `ld-musl-<arch>.so.1`: `x86_64`, `armhf`…
    pub(crate) fn musl(self) -> Option<&'static str> {
        self.row().musl
    }

    /// The file musl's loader reads its library path from: `/etc/ld-musl-<arch>.path`.
    pub(crate) fn musl_path_file(self) -> Option<String> {
        self.musl().map(|m| format!("/etc/ld-musl-{m}.path"))
    }

    /// `$PLATFORM` (AT_PLATFORM) as glibc's loader expands it: `x86_64`, `v7l`, `power8`…
    pub(crate) fn glibc_platform(self) -> Option<&'static str> {
        self.row().glibc_platform
    }

    /// Node.js's `process.arch`, which npm's `--cpu` and sharp's package names use: `x64`,
    /// `arm64`, `ia32`…
    pub(crate) fn node(self) -> Option<&'static str> {
        self.row().node
    }

    /// The architecture (and variant, if the name carries one) of a `process.arch` name, or of
    /// the names sharp ≤ 0.32 gave its addons: `process.arch` and the OCI variant run together
    /// (`arm64v8`, `armv6`, `armv7`).
    pub(crate) fn from_node(name: &str) -> Option<(Arch, Option<&'static str>)> {
        ROWS.iter().find_map(|r| {
            let rest = name.strip_prefix(r.node?)?;
            if rest.is_empty() {
                return Some((r.arch, None));
            }
            r.variants
                .iter()
                .find(|v| **v == rest)
                .map(|v| (r.arch, Some(*v)))
        })
    }

    /// The ld.so.cache entry flags a glibc loader of this architecture takes; empty where
    /// memlint does not know them (then any libc6 entry is taken).
    pub(crate) fn ld_cache_flags(self) -> &'static [i32] {
        self.row().ld_cache_flags
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_follow_the_enum() {
        for (i, a) in Arch::ALL.into_iter().enumerate() {
            assert_eq!(ROWS[i].arch, a);
            assert_eq!(a as usize, i);
        }
    }

    #[test]
    fn oci_names_round_trip() {
        for a in Arch::ALL {
            assert_eq!(Arch::from_oci(a.oci()), Some(a));
            for alias in a.row().aliases {
                assert_eq!(Arch::from_alias(alias), Some(a), "{alias}");
                assert_eq!(Arch::from_oci(alias), None, "{alias}");
            }
        }
        assert_eq!(Arch::from_oci("x86_64"), None);
        assert_eq!(Arch::from_alias("amd64"), None);
        assert_eq!(
            Arch::from_alias("i386"),
            None,
            "Debian's name is not an alias memlint takes"
        );
        assert_eq!(Arch::Arm64.implied_variant(), Some("v8"));
        assert_eq!(Arch::Arm.implied_variant(), None);
    }

    #[test]
    fn elf_machines_round_trip() {
        for a in Arch::ALL {
            let (machine, class) = a.elf();
            assert_eq!(Arch::from_elf(machine, class), Some(a));
        }
        let other = |c| match c {
            ElfClass::Elf32 => ElfClass::Elf64,
            ElfClass::Elf64 => ElfClass::Elf32,
        };
        // The other class is the same architecture only where the machine number alone says it.
        for a in [Arch::Arm64, Arch::Arm, Arch::I386] {
            let (machine, class) = a.elf();
            assert_eq!(Arch::from_elf(machine, other(class)), Some(a));
        }
        for a in [
            Arch::Amd64,
            Arch::Ppc64le,
            Arch::S390x,
            Arch::Riscv64,
            Arch::Mips64le,
            Arch::Loong64,
        ] {
            let (machine, class) = a.elf();
            assert_eq!(Arch::from_elf(machine, other(class)), None, "{a:?}");
        }
        assert_eq!(Arch::from_elf(62, ElfClass::Elf64), Some(Arch::Amd64));
        assert_eq!(Arch::from_elf(183, ElfClass::Elf64), Some(Arch::Arm64));
        assert_eq!(Arch::from_elf(62, ElfClass::Elf32), None, "x32");
        assert_eq!(Arch::from_elf(0, ElfClass::Elf64), None);
        assert_eq!(Arch::from_elf(u16::MAX, ElfClass::Elf32), None);
    }

    #[test]
    fn triplets_are_distinct_and_recognised() {
        let own: Vec<&str> = Arch::ALL.iter().filter_map(|a| a.triplet()).collect();
        for t in &own {
            assert_eq!(own.iter().filter(|o| *o == t).count(), 1, "{t}");
            assert!(TRIPLETS.contains(t), "{t}");
        }
        assert_eq!(Arch::Amd64.triplet(), Some("x86_64-linux-gnu"));
        assert_eq!(Arch::Arm64.triplet(), Some("aarch64-linux-gnu"));
        assert_eq!(Arch::Arm.triplet(), Some("arm-linux-gnueabihf"));
        // The two ABIs memlint recognises but does not model.
        assert_eq!(TRIPLETS.len(), own.len() + 2);
    }

    #[test]
    fn musl_loader_names() {
        let named: Vec<&str> = Arch::ALL.iter().filter_map(|a| a.musl()).collect();
        for m in &named {
            assert_eq!(named.iter().filter(|n| *n == m).count(), 1, "{m}");
        }
        assert_eq!(
            Arch::Amd64.musl_path_file().as_deref(),
            Some("/etc/ld-musl-x86_64.path")
        );
        assert_eq!(Arch::Arm.musl(), Some("armhf"));
        assert_eq!(Arch::Arm64.musl(), Some("aarch64"));
        assert_eq!(Arch::Loong64.musl_path_file(), None);
    }

    #[test]
    fn glibc_platforms() {
        let named: Vec<&str> = Arch::ALL.iter().filter_map(|a| a.glibc_platform()).collect();
        for p in &named {
            assert_eq!(named.iter().filter(|n| *n == p).count(), 1, "{p}");
        }
        assert_eq!(Arch::Arm.glibc_platform(), Some("v7l"));
        assert_eq!(Arch::I386.glibc_platform(), Some("i686"));
        assert_eq!(Arch::Riscv64.glibc_platform(), None);
    }

    #[test]
    fn node_names_round_trip() {
        for a in Arch::ALL {
            let Some(node) = a.node() else { continue };
            assert_eq!(Arch::from_node(node), Some((a, None)));
            for v in a.row().variants {
                assert_eq!(Arch::from_node(&format!("{node}{v}")), Some((a, Some(*v))));
            }
        }
        assert_eq!(Arch::from_node("x64"), Some((Arch::Amd64, None)));
        assert_eq!(Arch::from_node("arm64v8"), Some((Arch::Arm64, Some("v8"))));
        assert_eq!(Arch::from_node("armv7"), Some((Arch::Arm, Some("v7"))));
        assert_eq!(Arch::from_node("armv6"), Some((Arch::Arm, Some("v6"))));
        assert_eq!(Arch::from_node("ppc64"), Some((Arch::Ppc64le, None)));
        for unknown in ["", "amd64", "arm64v7", "armv", "x64v8", "mips64el", "wasm32"] {
            assert_eq!(Arch::from_node(unknown), None, "{unknown}");
        }
    }

    #[test]
    fn ld_cache_flags_belong_to_one_architecture() {
        // Each flag word with an ABI tag (the high byte) is one architecture's; 0x0003 (libc6,
        // no tag) is both old arm's and i386's.
        for a in Arch::ALL {
            for flags in a.ld_cache_flags().iter().filter(|f| **f & !0xff != 0) {
                let takers: Vec<Arch> = Arch::ALL
                    .into_iter()
                    .filter(|b| b.ld_cache_flags().contains(flags))
                    .collect();
                assert_eq!(takers, [a], "{flags:#06x}");
            }
        }
        assert_eq!(Arch::Amd64.ld_cache_flags(), [0x0303]);
        assert_eq!(Arch::I386.ld_cache_flags(), [0x0001, 0x0003]);
        assert!(Arch::Mips64le.ld_cache_flags().is_empty());
    }
}
