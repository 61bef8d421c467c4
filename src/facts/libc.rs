//! Which C library the image (and its entrypoint) runs on: glibc, musl, a static program, or
//! unknown, with the version and the evidence for each conclusion.

use super::entrypoint::{Entrypoint, ProgramKind};
use super::os::OsFacts;
use super::platform::PlatformFacts;
use crate::elf::marker::{ElfMarker, Find};
use crate::tree::{FileTree, Interests};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LibcFamily {
    Glibc,
    Musl,
    /// A statically linked program: no loader, no shared libc.
    Static,
    Unknown,
}

impl std::fmt::Display for LibcFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LibcFamily::Glibc => "glibc",
            LibcFamily::Musl => "musl",
            LibcFamily::Static => "static",
            LibcFamily::Unknown => "unknown",
        })
    }
}

/// The family a program interpreter belongs to, from its name (glibc shlib-versions, musl's
/// `ld-musl-$ARCH.so.1`).
pub(crate) fn interpreter_family(interp: &str) -> LibcFamily {
    let base = interp.rsplit('/').next().unwrap_or(interp);
    if base.starts_with("ld-musl-") {
        LibcFamily::Musl
    } else if base.starts_with("ld-linux") || base.starts_with("ld64.so.") || base == "ld.so.1" {
        LibcFamily::Glibc
    } else {
        LibcFamily::Unknown
    }
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct Libc {
    /// The C library the entrypoint runs on, or the image's when the entrypoint tells nothing.
    pub(crate) family: LibcFamily,
    pub(crate) version: Option<String>,
    /// What the entrypoint program itself uses (when it is an ELF program).
    pub(crate) entrypoint: Option<LibcFamily>,
    /// Every C library the image holds.
    pub(crate) present: Vec<LibcFamily>,
    /// The program interpreter (dynamic loader) the decision rests on.
    pub(crate) loader: Option<String>,
    pub(crate) evidence: Vec<String>,
}

/// What [`derive`] reads: the interpreter every ELF file names, and the release string in
/// glibc's libc.so.6 (a marker the scan finds).
pub(crate) fn interests() -> Interests {
    Interests::default().scan_elf_for(&[&GLIBC_RELEASE])
}

/// The release glibc's `libc.so.6` (and its `ld.so`) announces: "GNU C Library (Debian GLIBC
/// 2.36-9+deb12u14) stable release version 2.36."
pub(crate) static GLIBC_RELEASE: ElfMarker = ElfMarker {
    key: "glibc_release",
    find: Find::Version {
        anchor: Some((b"GNU C Library", 160)),
        after: b"stable release version ",
        parts: 2,
    },
    null_when_absent: true,
};

pub(crate) fn derive(tree: &FileTree, os: &OsFacts, entry: &Entrypoint, platform: &PlatformFacts) -> Libc {
    let mut evidence = Vec::new();
    // Interpreters that the image's executables name.
    let mut interps: BTreeMap<String, u64> = BTreeMap::new();
    let mut glibc_release = None;
    let mut musl_files = Vec::new();
    let mut glibc_files = Vec::new();
    for id in tree.walk() {
        let name = tree.node(id).name();
        if let Some(elf) = tree.elf(id) {
            if let Some(i) = &elf.head.interpreter {
                *interps.entry(i.clone()).or_default() += 1;
            }
            if (name == "libc.so.6" || name.starts_with("libc-2.")) && glibc_release.is_none() {
                if let Some(v) = elf.scan.markers.text(&GLIBC_RELEASE) {
                    glibc_release = Some((v.to_string(), tree.path_of(id)));
                }
            }
            if name.starts_with("ld-musl-") || name.starts_with("libc.musl-") {
                musl_files.push(tree.path_of(id));
            }
            if name == "libc.so.6" && elf.scan.markers.get(&GLIBC_RELEASE).is_some() {
                glibc_files.push(tree.path_of(id));
            }
        }
    }
    let glibc_present = glibc_release.is_some() || !glibc_files.is_empty() || os.package("libc6").is_some();
    let musl_present = !musl_files.is_empty() || os.package("musl").is_some();
    let mut present = Vec::new();
    if glibc_present {
        present.push(LibcFamily::Glibc);
    }
    if musl_present {
        present.push(LibcFamily::Musl);
    }

    let mut loader = None;
    let entry_family = match entry.kind {
        ProgramKind::Elf => Some(match &entry.interpreter {
            Some(i) => {
                loader = Some(i.clone());
                let mut f = interpreter_family(i);
                // Alpine's libc6-compat names glibc loaders that are links to musl.
                if f == LibcFamily::Glibc {
                    if let Ok(Some(id)) = tree.lookup(i) {
                        let real = tree.path_of(id);
                        if interpreter_family(&real) == LibcFamily::Musl {
                            evidence.push(format!(
                                "the entrypoint's interpreter {i} is a link to musl's {real}"
                            ));
                            f = LibcFamily::Musl;
                        }
                    }
                }
                if let Some(p) = &entry.program {
                    evidence.push(format!("the entrypoint {p} names the interpreter {i} ({f})"));
                }
                f
            }
            None => {
                if let Some(p) = &entry.program {
                    evidence.push(format!("the entrypoint {p} is statically linked"));
                }
                LibcFamily::Static
            }
        }),
        _ => None,
    };
    for (i, n) in &interps {
        evidence.push(format!("{n} executable(s) name the interpreter {i}"));
    }
    if let Some((v, p)) = &glibc_release {
        evidence.push(format!("{p} is GNU C Library {v}"));
    }
    for f in &musl_files {
        evidence.push(format!("{f} is musl's loader"));
    }

    let image_family =
        {
            let mut by_family: BTreeMap<LibcFamily, u64> = BTreeMap::new();
            for (i, n) in &interps {
                *by_family.entry(interpreter_family(i)).or_default() += n;
            }
            by_family.remove(&LibcFamily::Unknown);
            by_family.into_iter().max_by_key(|(_, n)| *n).map(|(f, _)| f).or(
                if glibc_present && !musl_present {
                    Some(LibcFamily::Glibc)
                } else if musl_present && !glibc_present {
                    Some(LibcFamily::Musl)
                } else {
                    None
                },
            )
        };
    let family = match entry_family {
        Some(LibcFamily::Static) if image_family.is_none() => LibcFamily::Static,
        Some(LibcFamily::Static) => image_family.unwrap_or(LibcFamily::Static),
        Some(f) => f,
        None => image_family.unwrap_or(LibcFamily::Unknown),
    };
    if loader.is_none() {
        loader = interps
            .iter()
            .filter(|(i, _)| interpreter_family(i) == family)
            .max_by_key(|(_, n)| **n)
            .map(|(i, _)| i.clone());
    }

    let version = match family {
        LibcFamily::Glibc => glibc_release.map(|(v, _)| v).or_else(|| {
            os.package("libc6").map(|p| {
                evidence.push(format!("dpkg lists libc6 {}", p.version));
                upstream_version(&p.version)
            })
        }),
        LibcFamily::Musl => os.package("musl").map(|p| {
            evidence.push(format!("the package database lists musl {}", p.version));
            upstream_version(&p.version)
        }),
        _ => None,
    };
    if let Some(r) = os
        .release
        .as_ref()
        .and_then(|r| r.pretty_name.clone().or(r.id.clone()))
    {
        evidence.push(format!("os-release: {r}"));
    }
    if platform.mismatch {
        evidence.push(format!(
            "most ELF files are built for {} while the config declares {}",
            platform.binaries.as_deref().unwrap_or("?"),
            platform.declared.architecture
        ));
    }
    Libc {
        family,
        version,
        entrypoint: entry_family,
        present,
        loader,
        evidence,
    }
}

/// `2.36-9+deb12u14` → `2.36`; `1.2.5-r0` → `1.2.5`.
fn upstream_version(v: &str) -> String {
    let v = v.split_once(':').map_or(v, |(_, rest)| rest);
    v.split(['-', '+', '~']).next().unwrap_or(v).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpreters() {
        assert_eq!(
            interpreter_family("/lib64/ld-linux-x86-64.so.2"),
            LibcFamily::Glibc
        );
        assert_eq!(
            interpreter_family("/lib/ld-linux-aarch64.so.1"),
            LibcFamily::Glibc
        );
        assert_eq!(interpreter_family("/lib64/ld64.so.2"), LibcFamily::Glibc);
        assert_eq!(interpreter_family("/lib/ld-musl-x86_64.so.1"), LibcFamily::Musl);
        assert_eq!(interpreter_family("/system/bin/linker64"), LibcFamily::Unknown);
        assert_eq!(upstream_version("2.36-9+deb12u14"), "2.36");
        assert_eq!(upstream_version("1.2.5-r0"), "1.2.5");
    }
}
