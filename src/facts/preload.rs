//! Preloaded libraries: `LD_PRELOAD` from the config's Env and /etc/ld.so.preload, each
//! resolved as the loader would, with a status and the reason in words.
//!
//! `LD_PRELOAD` is read from the environment the program gets ([`Env`]): the config's, or an
//! entrypoint script's export (source `script`, with the script and line). A script value memlint
//! cannot work out is kept with status `undecided` and the line as evidence.
//!
//! glibc splits LD_PRELOAD on spaces and colons only, /etc/ld.so.preload on spaces, tabs,
//! newlines and colons with `#` comments (elf/rtld.c). A preload that cannot be opened is
//! skipped with a warning at every exec; one that opens but whose own dependencies do not
//! resolve stops every dynamic program (exit 127). musl splits on whitespace and colons and
//! skips a missing preload silently, but takes a library of another machine or one built for
//! glibc and then fails to start anything (../shared/domain-sources.md §5.2, §5.4).

use super::entrypoint::Entrypoint;
use super::env::{Value, Var};
use super::libc::LibcFamily;
use super::loader::{Loader, Resolution, Via};
use super::Env;
use crate::arch::{Arch, TRIPLETS};
use crate::elf::marker::{ElfMarker, Find};
use crate::elf::{ElfInfo, ElfType};
use crate::tree::Interests;
use serde::Serialize;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) enum PreloadSource {
    #[serde(rename = "env")]
    Env,
    #[serde(rename = "ld.so.preload")]
    LdSoPreload,
    /// `LD_PRELOAD` exported by an entrypoint script (`Preload::script`, `Preload::line`).
    #[serde(rename = "script")]
    Script,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PreloadStatus {
    Ok,
    Missing,
    Incompatible,
    /// Set by a script in a way memlint cannot work out (a value only known at run time, a
    /// condition it cannot decide): possibly in effect.
    Undecided,
}

/// One preload entry.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct Preload {
    /// The entry as written.
    pub(crate) entry: String,
    pub(crate) source: PreloadSource,
    /// The script that exports it (source `script`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) script: Option<String>,
    /// The line of that script (from 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<u32>,
    pub(crate) status: PreloadStatus,
    /// The file the loader opens (canonical path), or null.
    pub(crate) resolved: Option<String>,
    pub(crate) reason: String,
    /// The paths `reason` names (scoped ignores and layer provenance match on these; the
    /// evidence keeps the absolute ones).
    #[serde(skip)]
    pub(crate) reason_paths: Vec<String>,
    /// How it was found (path, LD_LIBRARY_PATH, ld.so.cache, system folder…).
    pub(crate) via: Option<Via>,
    /// The allocator this library is, when it is one.
    pub(crate) allocator: Option<Allocator>,
    /// Its own DT_NEEDED libraries that do not resolve in the image.
    pub(crate) unresolved_needed: Vec<String>,
    /// The loader refuses it in a way that stops every dynamic program from starting (a
    /// library of another machine under musl, of the other libc, or with missing
    /// dependencies), rather than skipping it with a warning.
    #[serde(skip)]
    pub(crate) fatal: bool,
    /// Files in this image that the entry was probably meant to name.
    pub(crate) candidates: Vec<String>,
    /// The layer (from 1) whose whiteout removed the file, when one did.
    pub(crate) removed_in_layer: Option<u32>,
    /// That layer's history line.
    pub(crate) removed_by: Option<String>,
}

/// A malloc implementation: a replacement allocator, or the C library's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Allocator {
    Jemalloc,
    Tcmalloc,
    Mimalloc,
    Glibc,
    Musl,
    Unknown,
}

impl Allocator {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Allocator::Jemalloc => "jemalloc",
            Allocator::Tcmalloc => "tcmalloc",
            Allocator::Mimalloc => "mimalloc",
            Allocator::Glibc => "glibc",
            Allocator::Musl => "musl",
            Allocator::Unknown => "unknown",
        }
    }

    /// Whether it replaces the C library's malloc.
    pub(crate) fn is_replacement(self) -> bool {
        matches!(
            self,
            Allocator::Jemalloc | Allocator::Tcmalloc | Allocator::Mimalloc
        )
    }

    /// A replacement allocator by its name (as an ELF scan of its messages gives it).
    pub(crate) fn replacement_named(name: &str) -> Option<Allocator> {
        [Allocator::Jemalloc, Allocator::Tcmalloc, Allocator::Mimalloc]
            .into_iter()
            .find(|a| a.as_str() == name)
    }
}

impl fmt::Display for Allocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The allocator a library is, from its name or its own messages (the name an ELF scan found).
pub(crate) fn allocator_of(name: &str, embedded: Option<&str>) -> Option<Allocator> {
    let base = name.rsplit('/').next().unwrap_or(name);
    if base.starts_with("libjemalloc") {
        Some(Allocator::Jemalloc)
    } else if base.starts_with("libtcmalloc") {
        Some(Allocator::Tcmalloc)
    } else if base.starts_with("libmimalloc") {
        Some(Allocator::Mimalloc)
    } else {
        embedded.and_then(Allocator::replacement_named)
    }
}

/// Splits LD_PRELOAD as the loader does.
pub(crate) fn split_env(value: &str, family: LibcFamily) -> Vec<String> {
    let seps: &[char] = match family {
        LibcFamily::Musl => &[' ', '\t', '\n', ':'],
        _ => &[' ', ':'],
    };
    value
        .split(seps)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Splits /etc/ld.so.preload: `#` starts a comment, separators are space, tab, newline, colon.
pub(crate) fn split_file(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(|l| l.split([' ', '\t', ':']))
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

const LD_SO_PRELOAD: &str = "/etc/ld.so.preload";

/// Strings only an allocator prints, so finding one means the allocator is in the file (linked
/// in statically, or the allocator library itself).
pub(crate) static EMBEDDED_ALLOCATOR: ElfMarker = ElfMarker {
    key: "embedded_allocator",
    find: Find::Label(&[
        (b"<jemalloc>: ", "jemalloc"),
        (b"tcmalloc: large alloc", "tcmalloc"),
        (b"mimalloc: warning: ", "mimalloc"),
    ]),
    null_when_absent: true,
};

/// The allocator whose own messages `elf` carries.
pub(crate) fn embedded_allocator(elf: &ElfInfo) -> Option<&'static str> {
    let found = elf.scan.markers.text(&EMBEDDED_ALLOCATOR)?;
    EMBEDDED_ALLOCATOR.label(found)
}

/// What [`derive`] reads: /etc/ld.so.preload, and the ELF facts of what it preloads (its type,
/// machine and the allocator linked into it).
pub(crate) fn interests() -> Interests {
    Interests::default()
        .keep(LD_SO_PRELOAD, super::SMALL_FILE)
        .scan_elf_for(&[&EMBEDDED_ALLOCATOR])
}

pub(crate) fn derive(loader: &Loader, env: &Env, entry: &Entrypoint) -> Vec<Preload> {
    let tree = loader.tree();
    let mut out = Vec::new();
    let family = loader.family();
    let mut candidates = Candidates::default();
    if let Some(var) = env.var("LD_PRELOAD") {
        out.extend(from_env(loader, var, entry, &mut candidates));
    }
    // musl has no /etc/ld.so.preload.
    if family != LibcFamily::Musl {
        if let Some(c) = tree.contents(LD_SO_PRELOAD) {
            for e in split_file(&String::from_utf8_lossy(&c.bytes)) {
                out.push(check(
                    loader,
                    &e,
                    PreloadSource::LdSoPreload,
                    entry,
                    &mut candidates,
                ));
            }
        }
    }
    out
}

/// The entries of the `LD_PRELOAD` the program gets.
fn from_env(loader: &Loader, var: &Var, entry: &Entrypoint, candidates: &mut Candidates) -> Vec<Preload> {
    let family = loader.family();
    let (source, script, line) = match var.script() {
        Some((s, l)) => (PreloadSource::Script, Some(s.to_string()), Some(l)),
        None => (PreloadSource::Env, None, None),
    };
    let placed = |mut p: Preload| {
        p.script.clone_from(&script);
        p.line = line;
        p
    };
    match &var.value {
        Value::Set(v) => split_env(v, family)
            .iter()
            .map(|e| placed(check(loader, e, source, entry, candidates)))
            .collect(),
        Value::Undecided { why, if_set } => {
            let at = var.describe_origin();
            match if_set {
                // The value is known, whether it is set is not: say what it would load.
                Some(v) => split_env(v, family)
                    .iter()
                    .map(|e| {
                        let mut p = placed(check(loader, e, source, entry, candidates));
                        p.reason = format!("{why} ({at}); if set, {}", p.reason);
                        p.status = PreloadStatus::Undecided;
                        p.fatal = false;
                        p
                    })
                    .collect(),
                None => vec![placed(Preload {
                    entry: var.text.to_string(),
                    source,
                    script: None,
                    line: None,
                    status: PreloadStatus::Undecided,
                    resolved: None,
                    reason: format!("{why} ({at})"),
                    reason_paths: script.iter().cloned().collect(),
                    via: None,
                    allocator: None,
                    unresolved_needed: Vec::new(),
                    fatal: false,
                    candidates: Vec::new(),
                    removed_in_layer: None,
                    removed_by: None,
                })],
            }
        }
        Value::Unset => Vec::new(),
    }
}

fn check(
    loader: &Loader,
    entry: &str,
    source: PreloadSource,
    ep: &Entrypoint,
    candidates: &mut Candidates,
) -> Preload {
    let tree = loader.tree();
    let family = loader.family();
    let requester = ep.program.as_deref().filter(|p| loader.elf_at(p).is_some());
    let r: Resolution = loader.resolve(entry, requester);
    let base = entry.rsplit('/').next().unwrap_or(entry).to_string();
    let mut p = Preload {
        entry: entry.to_string(),
        source,
        script: None,
        line: None,
        status: PreloadStatus::Missing,
        resolved: None,
        reason: String::new(),
        fatal: false,
        reason_paths: Vec::new(),
        via: r.via,
        allocator: allocator_of(&base, None),
        unresolved_needed: Vec::new(),
        candidates: Vec::new(),
        removed_in_layer: None,
        removed_by: None,
    };
    let expanded = loader.expand(entry, None);
    let Some(path) = r.path.clone() else {
        say_why_not_found(loader, &r, &expanded, &mut p);
        p.candidates = candidates.of(loader, &base, None);
        return p;
    };
    p.resolved = Some(path.clone());
    // Every reason from here on names the file the loader opens.
    p.reason_paths = vec![path.clone()];
    let elf = tree.lookup(&path).ok().flatten().and_then(|id| tree.elf(id));
    p.allocator = allocator_of(&path, elf.and_then(embedded_allocator)).or(p.allocator);
    let Some(elf) = elf else {
        p.status = PreloadStatus::Incompatible;
        p.reason = format!("{path} is not an ELF shared object");
        return p;
    };
    if elf.head.elf_type != ElfType::Shared {
        p.status = PreloadStatus::Incompatible;
        p.reason = format!(
            "{path} is an ELF {:?} file, not a shared object",
            elf.head.elf_type
        )
        .to_lowercase();
        return p;
    }
    if let Some((m, c)) = loader.machine() {
        if elf.head.machine != m || elf.head.class != c {
            let arch = Arch::from_elf(elf.head.machine, elf.head.class).map_or("another machine", Arch::oci);
            p.status = PreloadStatus::Incompatible;
            p.fatal = true;
            p.reason =
                format!("{path} is built for {arch}; musl loads it anyway and every process fails to start");
            p.candidates = candidates.of(loader, &base, Some(&path));
            return p;
        }
    }
    let needed = elf
        .scan
        .dynamic
        .as_ref()
        .map(|d| d.needed.clone())
        .unwrap_or_default();
    let other_libc = match family {
        LibcFamily::Musl => needed
            .iter()
            .find(|n| n.as_str() == "libc.so.6" && !loader.resolve(n, Some(&path)).found()),
        LibcFamily::Glibc => needed
            .iter()
            .find(|n| n.starts_with("libc.musl-") || n.as_str() == "libc.so"),
        _ => None,
    };
    if let Some(n) = other_libc {
        p.status = PreloadStatus::Incompatible;
        let built_for = if family == LibcFamily::Musl {
            "glibc"
        } else {
            "musl"
        };
        p.fatal = true;
        p.reason = format!("{path} is built for {built_for} (it needs {n}); every dynamic program in the container fails to start");
        p.candidates = candidates.of(loader, &base, Some(&path));
        return p;
    }
    let unresolved = loader.unresolved_needed(&path);
    if !unresolved.is_empty() {
        p.unresolved_needed = unresolved.iter().map(|r| r.name.clone()).collect();
        p.status = PreloadStatus::Incompatible;
        p.fatal = true;
        p.reason = format!(
            "{path} needs {} which the image does not have; every dynamic program in the container fails to start (exit 127)",
            p.unresolved_needed.join(", ")
        );
        return p;
    }
    if elf.scan.dynamic.as_ref().is_some_and(|d| !d.complete) {
        p.status = PreloadStatus::Ok;
        p.reason =
            format!("found at {path}; its dependencies could not all be read, so they were not checked");
        return p;
    }
    p.status = PreloadStatus::Ok;
    let via = r.via.map(Via::describe).unwrap_or("the search");
    p.reason = if r.found_as.as_deref() == Some(path.as_str()) {
        format!("loads {path} (found through {via})")
    } else {
        let found_as = r.found_as.unwrap_or_default();
        p.reason_paths.push(found_as.clone());
        format!("loads {path} through {found_as} (found through {via})")
    };
    p
}

/// Why a preload the loader did not find is missing or skipped: a file of the wrong kind the
/// loader passed over, a dangling link, a layer that removed it, another architecture's folder,
/// no such file; and what the libc does then.
fn say_why_not_found(loader: &Loader, r: &Resolution, expanded: &str, p: &mut Preload) {
    if let Some(s) = r
        .skipped
        .iter()
        .find(|s| s.reason.starts_with("wrong ELF class") || s.reason.starts_with("built for"))
    {
        p.status = PreloadStatus::Incompatible;
        p.reason = match loader.family() {
            LibcFamily::Glibc => format!(
                "{} is {}; glibc skips it (`cannot open shared object file`) and the process runs without it",
                s.path, s.reason
            ),
            _ => format!("{} is {}", s.path, s.reason),
        };
        p.reason_paths = vec![s.path.clone()];
        p.resolved = loader
            .tree()
            .lookup(&s.path)
            .ok()
            .flatten()
            .map(|id| loader.tree().path_of(id));
    } else if let Some(s) = r.skipped.iter().find(|s| s.reason.starts_with("dangling")) {
        p.reason = format!("{} is a {}", s.path, s.reason);
        p.reason_paths = vec![s.path.clone()];
    } else if let Some(layer) = removed_layer(loader, expanded) {
        p.removed_in_layer = Some(layer + 1);
        p.reason = format!("{expanded} was removed by layer {}", layer + 1);
        p.reason_paths = vec![expanded.to_string()];
    } else if let Some(t) = foreign_triplet(expanded, loader.triplet()) {
        p.reason = format!(
            "{expanded} does not exist: {t} is another architecture's folder (this image's is {})",
            loader.triplet().unwrap_or("unknown")
        );
        p.reason_paths = vec![expanded.to_string()];
    } else if expanded.contains('/') {
        p.reason = format!("{expanded} does not exist in the image");
        p.reason_paths = vec![expanded.to_string()];
    } else {
        p.reason = format!("no {expanded} in LD_LIBRARY_PATH, the ld.so.cache or the system folders");
    }
    if p.status == PreloadStatus::Missing {
        p.reason.push_str(match loader.family() {
            LibcFamily::Musl => "; musl skips it silently",
            _ => "; glibc prints `cannot be preloaded … ignored` at every exec and runs without it",
        });
    }
}

/// The layer whose whiteout removed `path` (resolving the folders it lies in).
fn removed_layer(loader: &Loader, path: &str) -> Option<u32> {
    let tree = loader.tree();
    if !path.starts_with('/') {
        return None;
    }
    let (dir, name) = path.rsplit_once('/')?;
    let dir = if dir.is_empty() {
        "/".to_string()
    } else {
        loader.canonical(dir)
    };
    tree.removed_by(&format!("{}/{name}", dir.trim_end_matches('/')))
        .or_else(|| tree.removed_by(path))
}

/// A multiarch triplet in `path` that is not the image's own.
fn foreign_triplet(path: &str, own: Option<&str>) -> Option<&'static str> {
    TRIPLETS
        .iter()
        .copied()
        .find(|t| path.split('/').any(|c| c == *t) && Some(*t) != own)
}

/// Libraries of the process's machine with the same name, or the same library stem
/// (`libjemalloc.so*`), that an entry was probably meant to name. A config can list thousands
/// of entries: the libraries are found in one walk of the tree, and each stem's once, so the
/// facts cost the entries plus the paths, not their product.
#[derive(Default)]
struct Candidates {
    /// Every library of the process's machine as (file name, canonical path), by file name.
    by_name: Option<Vec<(String, String)>>,
    /// The first libraries of each stem asked for, by path.
    of_stem: std::collections::HashMap<String, Vec<String>>,
}

impl Candidates {
    /// At most 5 candidates for an entry whose file name is `base`, other than `not`.
    fn of(&mut self, loader: &Loader, base: &str, not: Option<&str>) -> Vec<String> {
        let stem = base.split(".so").next().unwrap_or(base);
        if stem.is_empty() {
            return Vec::new();
        }
        if !self.of_stem.contains_key(stem) {
            let by_name = self.by_name.get_or_insert_with(|| {
                let mut all: Vec<(String, String)> = loader
                    .find_libraries(&[""])
                    .into_iter()
                    .map(|p| (p.rsplit('/').next().unwrap_or(&p).to_string(), p))
                    .collect();
                all.sort();
                all
            });
            let prefix = format!("{stem}.so");
            let from = by_name.partition_point(|(n, _)| n.as_str() < prefix.as_str());
            let mut found: Vec<String> = by_name[from..]
                .iter()
                .take_while(|(n, _)| n.starts_with(&prefix))
                .map(|(_, p)| p.clone())
                .collect();
            found.sort();
            // One more than is shown, for when `not` is among them.
            found.truncate(6);
            self.of_stem.insert(stem.to_string(), found);
        }
        self.of_stem[stem]
            .iter()
            .filter(|f| Some(f.as_str()) != not)
            .take(5)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitting() {
        assert_eq!(
            split_env("/a.so:/b.so  c.so", LibcFamily::Glibc),
            ["/a.so", "/b.so", "c.so"]
        );
        assert_eq!(split_env("/a.so\t/b.so", LibcFamily::Glibc), ["/a.so\t/b.so"]);
        assert_eq!(split_env("/a.so\t/b.so", LibcFamily::Musl), ["/a.so", "/b.so"]);
        assert_eq!(
            split_file("# jemalloc\n/usr/lib/libj.so.2 # why\n\t/x.so:/y.so\n"),
            ["/usr/lib/libj.so.2", "/x.so", "/y.so"]
        );
        assert_eq!(
            allocator_of("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", None),
            Some(Allocator::Jemalloc)
        );
        assert_eq!(
            allocator_of("libtcmalloc_minimal.so.4", None),
            Some(Allocator::Tcmalloc)
        );
        assert_eq!(
            allocator_of("libfoo.so", Some("mimalloc")),
            Some(Allocator::Mimalloc)
        );
        assert_eq!(allocator_of("libfoo.so", Some("snmalloc")), None);
        for a in [
            Allocator::Jemalloc,
            Allocator::Tcmalloc,
            Allocator::Mimalloc,
            Allocator::Glibc,
            Allocator::Musl,
            Allocator::Unknown,
        ] {
            assert_eq!(serde_json::to_value(a).unwrap(), a.as_str());
            assert_eq!(a.to_string(), a.as_str());
            assert_eq!(
                a.is_replacement(),
                Allocator::replacement_named(a.as_str()) == Some(a)
            );
        }
        assert_eq!(
            foreign_triplet(
                "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
                Some("x86_64-linux-gnu")
            ),
            Some("aarch64-linux-gnu")
        );
        assert_eq!(
            foreign_triplet(
                "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
                Some("x86_64-linux-gnu")
            ),
            None
        );
    }
}
