//! The image's declared platform against the architecture of its own binaries.

use crate::arch::Arch;
use crate::platform::Platform;
use crate::tree::{FileTree, Interests};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct PlatformFacts {
    /// What the config says.
    pub(crate) declared: Platform,
    /// The architecture most ELF files are built for.
    pub(crate) binaries: Option<String>,
    /// ELF files per architecture.
    pub(crate) elf_architectures: BTreeMap<String, u64>,
    /// The binaries are built for another architecture than the config declares: the image
    /// was assembled wrongly and will not run where the config says it does.
    pub(crate) mismatch: bool,
}

/// What [`derive`] reads: the machine of every ELF file.
pub(crate) fn interests() -> Interests {
    Interests::default().read_elf_heads()
}

pub(crate) fn derive(tree: &FileTree, declared: &Platform) -> PlatformFacts {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for id in tree.walk() {
        if let Some(elf) = tree.elf(id) {
            let arch = Arch::from_elf(elf.head.machine, elf.head.class).map_or_else(
                || format!("machine-{}", elf.head.machine),
                |a| a.oci().to_string(),
            );
            *counts.entry(arch).or_default() += 1;
        }
    }
    let binaries = counts
        .iter()
        .max_by_key(|(a, n)| (**n, a.as_str() == declared.architecture))
        .map(|(a, _)| a.clone());
    let mismatch =
        binaries.as_ref().is_some_and(|b| *b != declared.architecture) && declared.architecture != "unknown";
    PlatformFacts {
        declared: declared.clone(),
        binaries,
        elf_architectures: counts,
        mismatch,
    }
}
