//! A static `ldd` for the image: resolves a library name as the image's own dynamic loader
//! would, without running it.
//!
//! glibc (elf/dl-load.c `_dl_map_object`, ld.so(8)): a name with a slash is opened as a path;
//! a bare name is searched in the requester's DT_RPATH (only when it has no DT_RUNPATH),
//! LD_LIBRARY_PATH, the requester's DT_RUNPATH, /etc/ld.so.cache, then the system folders. A
//! candidate of another ELF class or machine is skipped and the search goes on (open_verify
//! treats a foreign e_machine as "not found"). Folders listed in /etc/ld.so.conf are searched
//! only through the cache, so a library added without `ldconfig` is not found there.
//!
//! musl (ldso/dynlink.c `load_library`): LD_LIBRARY_PATH, then the RPATH/RUNPATH of the
//! requester chain, then /etc/ld-musl-$ARCH.path or /lib:/usr/local/lib:/usr/lib. musl does
//! not check the ELF machine: the first file found is taken.

use super::ldcache::{self, LdCache};
use super::libc::{Libc, LibcFamily};
use super::platform::PlatformFacts;
use super::Env;
use super::{LARGE_FILE, SMALL_FILE};
use crate::arch::Arch;
use crate::elf::{ElfClass, ElfInfo, ElfType};
use crate::tree::{FileTree, Interests, NodeKind};
use serde::Serialize;

/// Where a library was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Via {
    /// The name held a slash and was opened as a path.
    Path,
    Rpath,
    LdLibraryPath,
    Runpath,
    LdSoCache,
    SystemDir,
    MuslPath,
}

impl Via {
    /// In words, for reasons and evidence.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Via::Path => "its path",
            Via::Rpath => "the program's DT_RPATH",
            Via::LdLibraryPath => "LD_LIBRARY_PATH",
            Via::Runpath => "the program's DT_RUNPATH",
            Via::LdSoCache => "/etc/ld.so.cache",
            Via::SystemDir => "a system library folder",
            Via::MuslPath => "musl's library path",
        }
    }
}

/// A candidate the loader looked at and passed over.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct Skipped {
    pub(crate) path: String,
    pub(crate) reason: String,
}

/// The outcome of a search.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct Resolution {
    pub(crate) name: String,
    /// The file the loader opens (canonical path in the image).
    pub(crate) path: Option<String>,
    pub(crate) via: Option<Via>,
    /// The path as the search produced it, before symlinks were resolved.
    pub(crate) found_as: Option<String>,
    /// Files that exist but that the loader passes over (wrong class or machine, dangling).
    pub(crate) skipped: Vec<Skipped>,
}

impl Resolution {
    pub(crate) fn found(&self) -> bool {
        self.path.is_some()
    }
}

/// The loader's configuration, as reported.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct LoaderFacts {
    pub(crate) family: Option<LibcFamily>,
    /// The ELF class and machine of the processes (the entrypoint's, else the config's).
    pub(crate) machine: Option<u16>,
    #[schemars(with = "Option<String>")]
    pub(crate) class: Option<ElfClass>,
    pub(crate) multiarch_triplet: Option<&'static str>,
    pub(crate) ld_library_path: Vec<String>,
    pub(crate) ld_so_cache: Option<String>,
    pub(crate) ld_so_cache_entries: usize,
    pub(crate) ld_so_cache_error: Option<String>,
    /// Folders searched after the cache (glibc) or the musl path.
    pub(crate) system_dirs: Vec<String>,
    /// Folders listed in /etc/ld.so.conf (and its includes).
    pub(crate) ld_so_conf_dirs: Vec<String>,
    /// Why /etc/ld.so.conf was read only in part, when a limit stopped it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ld_so_conf_error: Option<String>,
}

/// The image's dynamic loader, simulated.
pub(crate) struct Loader<'a> {
    tree: &'a FileTree,
    family: LibcFamily,
    machine: Option<(u16, ElfClass)>,
    /// The architecture of `machine`, when memlint knows it.
    arch: Option<Arch>,
    triplet: Option<&'static str>,
    ld_library_path: Vec<String>,
    cache: Option<LdCache>,
    cache_error: Option<String>,
    system_dirs: Vec<String>,
    conf_dirs: Vec<String>,
    conf_error: Option<String>,
    working_dir: String,
    platform_tag: Option<&'static str>,
}

const LD_SO_CACHE: &str = "/etc/ld.so.cache";
const LD_SO_CONF: &str = "/etc/ld.so.conf";
/// The folder Debian's and Red Hat's ld.so.conf include; an `include` line may name another,
/// whose files are read when someone asked to keep them.
const LD_SO_CONF_D: &str = "/etc/ld.so.conf.d";
/// musl's search path file of every architecture ([`Arch::musl_path_file`] names one).
const MUSL_PATH_FILES: &str = "/etc/ld-musl-*.path";

/// What the loader reads: glibc's cache and configuration, musl's path file, and the ELF
/// facts (machine, DT_NEEDED, RPATH, RUNPATH) of every object it resolves.
pub(crate) fn interests() -> Interests {
    Interests::default()
        .keep(LD_SO_CACHE, LARGE_FILE)
        .keep(LD_SO_CONF, SMALL_FILE)
        .keep(&format!("{LD_SO_CONF_D}/*"), SMALL_FILE)
        .keep(MUSL_PATH_FILES, SMALL_FILE)
        .scan_elf()
}

impl<'a> Loader<'a> {
    pub(crate) fn new(
        tree: &'a FileTree,
        env: &Env,
        libc: &Libc,
        platform: &PlatformFacts,
        entry_program: Option<&str>,
        working_dir: &str,
    ) -> Loader<'a> {
        let entry_elf = entry_program
            .and_then(|p| tree.lookup(p).ok().flatten())
            .and_then(|id| tree.elf(id))
            .map(|e| (e.head.machine, e.head.class));
        let machine = entry_elf.or_else(|| Arch::from_oci(&platform.declared.architecture).map(Arch::elf));
        let arch = machine.and_then(|(m, c)| Arch::from_elf(m, c));
        let triplet = arch.and_then(Arch::triplet);
        let family = libc.family;
        let ld_library_path = env
            .get("LD_LIBRARY_PATH")
            .map(|v| {
                v.split([':', ';'])
                    .filter(|p| !p.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();

        let (mut cache, mut cache_error) = (None, None);
        if family == LibcFamily::Glibc {
            if let Some(c) = tree.contents(LD_SO_CACHE) {
                match LdCache::parse(&c.bytes) {
                    Ok(parsed) => cache = Some(parsed),
                    Err(e) => cache_error = Some(format!("{LD_SO_CACHE} is unreadable: {e}")),
                }
            }
        }
        let (conf_dirs, conf_error) = if family == LibcFamily::Glibc {
            read_ld_so_conf(tree)
        } else {
            (Vec::new(), None)
        };

        let mut system_dirs = Vec::new();
        match family {
            LibcFamily::Musl => {
                let from_file = arch
                    .and_then(Arch::musl_path_file)
                    .and_then(|path| tree.contents(&path))
                    .map(|c| {
                        String::from_utf8_lossy(&c.bytes)
                            .split(['\n', ':'])
                            .map(str::trim)
                            .filter(|p| !p.is_empty())
                            .map(str::to_string)
                            .collect::<Vec<_>>()
                    });
                system_dirs = from_file
                    .unwrap_or_else(|| vec!["/lib".into(), "/usr/local/lib".into(), "/usr/lib".into()]);
            }
            _ => {
                // Debian and Ubuntu build glibc with the multiarch folders first; other
                // distributions use /lib64 on 64-bit platforms (ld.so(8)).
                let multiarch = triplet.is_some_and(|t| {
                    tree.lookup(&format!("/usr/lib/{t}")).ok().flatten().is_some()
                        || tree.lookup(&format!("/lib/{t}")).ok().flatten().is_some()
                });
                if let (true, Some(t)) = (multiarch, triplet) {
                    system_dirs.extend([format!("/lib/{t}"), format!("/usr/lib/{t}")]);
                }
                if matches!(machine, Some((_, ElfClass::Elf64))) && !multiarch {
                    system_dirs.extend(["/lib64".to_string(), "/usr/lib64".to_string()]);
                }
                system_dirs.extend(["/lib".to_string(), "/usr/lib".to_string()]);
            }
        }
        Loader {
            tree,
            family,
            machine,
            arch,
            triplet,
            ld_library_path,
            cache,
            cache_error,
            system_dirs,
            conf_dirs,
            conf_error,
            working_dir: working_dir.to_string(),
            platform_tag: arch.and_then(Arch::glibc_platform),
        }
    }

    pub(crate) fn family(&self) -> LibcFamily {
        self.family
    }

    pub(crate) fn machine(&self) -> Option<(u16, ElfClass)> {
        self.machine
    }

    /// The architecture of the processes, when memlint knows their machine.
    pub(crate) fn arch(&self) -> Option<Arch> {
        self.arch
    }

    pub(crate) fn triplet(&self) -> Option<&'static str> {
        self.triplet
    }

    pub(crate) fn tree(&self) -> &'a FileTree {
        self.tree
    }

    pub(crate) fn facts(&self) -> LoaderFacts {
        LoaderFacts {
            family: Some(self.family),
            machine: self.machine.map(|m| m.0),
            class: self.machine.map(|m| m.1),
            multiarch_triplet: self.triplet,
            ld_library_path: self.ld_library_path.clone(),
            ld_so_cache: self.cache.as_ref().map(|c| c.format.to_string()),
            ld_so_cache_entries: self.cache.as_ref().map_or(0, |c| c.entries.len()),
            ld_so_cache_error: self.cache_error.clone(),
            system_dirs: self.system_dirs.clone(),
            ld_so_conf_dirs: self.conf_dirs.clone(),
            ld_so_conf_error: self.conf_error.clone(),
        }
    }

    /// The ELF info of the file at a path (symlinks followed).
    pub(crate) fn elf_at(&self, path: &str) -> Option<&'a ElfInfo> {
        let id = self.tree.lookup(path).ok()??;
        self.tree.elf(id)
    }

    /// Expands `$ORIGIN`, `$LIB` and `$PLATFORM` (ld.so(8) "Dynamic string tokens").
    pub(crate) fn expand(&self, s: &str, origin: Option<&str>) -> String {
        let lib = match (self.family, self.triplet) {
            (LibcFamily::Glibc, Some(t)) if self.system_dirs.iter().any(|d| d.contains(t)) => {
                format!("lib/{t}")
            }
            _ if matches!(self.machine, Some((_, ElfClass::Elf64)))
                && self.system_dirs.iter().any(|d| d == "/lib64") =>
            {
                "lib64".to_string()
            }
            _ => "lib".to_string(),
        };
        let mut out = s.to_string();
        for (token, value) in [
            ("ORIGIN", origin.unwrap_or(&self.working_dir).to_string()),
            ("LIB", lib),
            ("PLATFORM", self.platform_tag.unwrap_or("").to_string()),
        ] {
            out = out
                .replace(&format!("${{{token}}}"), &value)
                .replace(&format!("${token}"), &value);
        }
        out
    }

    /// Resolves a library name for `requester` (an ELF object's path in the image; `None` for
    /// the main program when it is unknown).
    pub(crate) fn resolve(&self, name: &str, requester: Option<&str>) -> Resolution {
        let mut r = Resolution {
            name: name.to_string(),
            path: None,
            via: None,
            found_as: None,
            skipped: Vec::new(),
        };
        let origin = requester.map(|p| self.canonical(p)).map(|p| parent_dir(&p));
        let name_expanded = self.expand(name, origin.as_deref());
        if name_expanded.contains('/') {
            let full = if name_expanded.starts_with('/') {
                name_expanded.clone()
            } else {
                format!("{}/{}", self.working_dir, name_expanded)
            };
            self.try_candidate(&full, Via::Path, &mut r, false);
            return r;
        }
        let dynamic = requester
            .and_then(|p| self.elf_at(p))
            .and_then(|e| e.scan.dynamic.as_ref());
        let (rpath, runpath) =
            dynamic.map_or((Vec::new(), Vec::new()), |d| (d.rpath.clone(), d.runpath.clone()));
        let expand_all = |dirs: &[String]| -> Vec<String> {
            dirs.iter().map(|d| self.expand(d, origin.as_deref())).collect()
        };
        if self.family == LibcFamily::Musl {
            let mut search: Vec<(Vec<String>, Via)> =
                vec![(self.ld_library_path.clone(), Via::LdLibraryPath)];
            search.push((expand_all(&rpath), Via::Rpath));
            search.push((expand_all(&runpath), Via::Runpath));
            search.push((self.system_dirs.clone(), Via::MuslPath));
            for (dirs, via) in search {
                for d in dirs {
                    if self.try_candidate(&join(&d, &name_expanded), via, &mut r, true) {
                        return r;
                    }
                }
            }
            return r;
        }
        if runpath.is_empty() {
            for d in expand_all(&rpath) {
                if self.try_candidate(&join(&d, &name_expanded), Via::Rpath, &mut r, false) {
                    return r;
                }
            }
        }
        for d in &self.ld_library_path {
            let d = self.expand(d, origin.as_deref());
            if self.try_candidate(&join(&d, &name_expanded), Via::LdLibraryPath, &mut r, false) {
                return r;
            }
        }
        for d in expand_all(&runpath) {
            if self.try_candidate(&join(&d, &name_expanded), Via::Runpath, &mut r, false) {
                return r;
            }
        }
        if let (Some(cache), Some(_)) = (&self.cache, self.machine) {
            let ok = ldcache::accepts(self.arch);
            let hits: Vec<String> = cache
                .lookup(&name_expanded, &ok)
                .map(|e| e.path.clone())
                .collect();
            for p in hits {
                if self.try_candidate(&p, Via::LdSoCache, &mut r, false) {
                    return r;
                }
            }
        }
        for d in &self.system_dirs {
            if self.try_candidate(&join(d, &name_expanded), Via::SystemDir, &mut r, false) {
                return r;
            }
        }
        r
    }

    /// Checks one candidate as the loader's open_verify would; records why it was passed over.
    fn try_candidate(&self, path: &str, via: Via, r: &mut Resolution, take_any_machine: bool) -> bool {
        let id = match self.tree.lookup(path) {
            Ok(Some(id)) => id,
            Ok(None) => {
                if let Ok(Some(link)) = self.tree.lookup_nofollow(path) {
                    if let Some(t) = self.tree.node(link).symlink_target() {
                        r.skipped.push(Skipped {
                            path: path.to_string(),
                            reason: format!("dangling symlink to {t}"),
                        });
                    }
                }
                return false;
            }
            Err(e) => {
                r.skipped.push(Skipped {
                    path: path.to_string(),
                    reason: e.to_string(),
                });
                return false;
            }
        };
        let node = self.tree.node(id);
        if !matches!(node.kind, NodeKind::File) {
            return false;
        }
        if let (Some(elf), Some((m, c)), false) = (self.tree.elf(id), self.machine, take_any_machine) {
            if elf.head.class != c {
                r.skipped.push(Skipped {
                    path: path.to_string(),
                    reason: format!("wrong ELF class: {:?}", elf.head.class),
                });
                return false;
            }
            if elf.head.machine != m {
                let arch =
                    Arch::from_elf(elf.head.machine, elf.head.class).map_or("another machine", Arch::oci);
                r.skipped.push(Skipped {
                    path: path.to_string(),
                    reason: format!("built for {arch}"),
                });
                return false;
            }
        }
        r.path = Some(self.tree.path_of(id));
        r.via = Some(via);
        r.found_as = Some(path.to_string());
        true
    }

    /// The canonical path of a file (symlinks resolved), or the path itself.
    pub(crate) fn canonical(&self, path: &str) -> String {
        match self.tree.lookup(path) {
            Ok(Some(id)) => self.tree.path_of(id),
            _ => path.to_string(),
        }
    }

    /// Libraries in the image whose file name starts with one of `prefixes`, of the process's
    /// class and machine, as canonical paths (sorted, deduplicated).
    pub(crate) fn find_libraries(&self, prefixes: &[&str]) -> Vec<String> {
        let mut out: Vec<String> = self
            .tree
            .walk()
            .filter(|&id| {
                let n = self.tree.node(id);
                let name = n.name();
                prefixes
                    .iter()
                    .any(|p| name.starts_with(p) && name.contains(".so"))
                    && self.tree.elf(id).is_some_and(|e| {
                        e.head.elf_type == ElfType::Shared
                            && self
                                .machine
                                .is_none_or(|(m, c)| e.head.machine == m && e.head.class == c)
                    })
            })
            .map(|id| self.tree.path_of(id))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Resolves every DT_NEEDED of the object at `path`, as the loader would when loading it
    /// (its own RPATH/RUNPATH, the environment, the cache, the system folders). Returns the
    /// names that do not resolve.
    pub(crate) fn unresolved_needed(&self, path: &str) -> Vec<Resolution> {
        let Some(dynamic) = self.elf_at(path).and_then(|e| e.scan.dynamic.as_ref()) else {
            return Vec::new();
        };
        dynamic
            .needed
            .iter()
            .map(|n| self.resolve(n, Some(path)))
            .filter(|r| !r.found() && !self.provided_by_libc(&r.name))
            .collect()
    }

    /// Names musl's loader answers itself (it is libc, libm, libpthread… in one file).
    fn provided_by_libc(&self, name: &str) -> bool {
        self.family == LibcFamily::Musl
            && (name.starts_with("libc.musl-")
                || name.starts_with("ld-musl-")
                || matches!(
                    name,
                    "libc.so"
                        | "libm.so"
                        | "libpthread.so"
                        | "libdl.so"
                        | "librt.so"
                        | "libutil.so"
                        | "libxnet.so"
                        | "libcrypt.so"
                ))
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

fn parent_dir(path: &str) -> String {
    match path.rsplit_once('/') {
        Some(("", _)) | None => "/".to_string(),
        Some((d, _)) => d.to_string(),
    }
}

/// The folders /etc/ld.so.conf lists, following `include` lines (globs in one folder), each
/// once and in order; and, when the limits stopped the reading, what was left out.
///
/// glibc's ldconfig reads every include it meets, however often. Here each file is read once
/// and each distinct pattern expanded once, both counted as they are met: at most
/// `max_ld_conf_files` files, and at most `max_ld_conf_names` folders listed, patterns and
/// folder entries tried together. So 15,000 `include /etc/d/*` lines over 2,000 files cost one
/// expansion, and no file can make the work grow past the limits, whatever it holds.
fn read_ld_so_conf(tree: &FileTree) -> (Vec<String>, Option<String>) {
    use std::collections::HashSet;
    enum Source {
        Conf,
        Included(crate::tree::NodeId),
    }
    let (max_files, max_names) = tree.max_ld_conf();
    let mut names_left = max_names;
    let mut spend = |n: u64| -> Result<(), String> {
        names_left = names_left.checked_sub(n).ok_or_else(|| {
            format!("it makes more than {max_names} names to look at (the max_ld_conf_names limit)")
        })?;
        Ok(())
    };
    let mut out = Vec::new();
    let mut listed: HashSet<String> = HashSet::new();
    let mut files: HashSet<crate::tree::NodeId> = HashSet::new();
    if let Ok(Some(id)) = tree.lookup(LD_SO_CONF) {
        files.insert(id);
    }
    let mut patterns: HashSet<String> = HashSet::new();
    // Past max_ld_conf_files no file is added, but those already met are read; past
    // max_ld_conf_names nothing more is looked at.
    let mut files_cut: Option<String> = None;
    let mut walk = || -> Result<(), String> {
        let mut queue = vec![Source::Conf];
        while let Some(file) = queue.pop() {
            // An `include` may name any folder: what the reader kept there, if anything.
            let c = match file {
                Source::Conf => tree.contents(LD_SO_CONF),
                Source::Included(id) => tree.kept_content(id),
            };
            let Some(c) = c else { continue };
            // Files included from here come next, in order, before the rest of the queue.
            let mut included = Vec::new();
            for line in String::from_utf8_lossy(&c.bytes).lines() {
                let line = line.split('#').next().unwrap_or("").trim();
                if line.is_empty() {
                    continue;
                }
                let Some(pattern) = line.strip_prefix("include").map(str::trim) else {
                    for d in line.split([':', ',', ' ', '\t']).filter(|d| !d.is_empty()) {
                        if !listed.contains(d) {
                            spend(1)?;
                            listed.insert(d.to_string());
                            out.push(d.to_string());
                        }
                    }
                    continue;
                };
                if patterns.contains(pattern) {
                    continue;
                }
                spend(1)?;
                patterns.insert(pattern.to_string());
                let pattern = if pattern.starts_with('/') {
                    pattern.to_string()
                } else {
                    format!("/etc/{pattern}")
                };
                let (dir, glob) = pattern.rsplit_once('/').unwrap_or(("/etc", &pattern));
                let Ok(Some(d)) = tree.lookup(dir) else { continue };
                let NodeKind::Dir(children) = &tree.node(d).kind else {
                    continue;
                };
                spend(children.len() as u64)?;
                let glob = crate::tree::interest::PathPattern::new(glob);
                let mut names: Vec<&str> = children
                    .keys()
                    .map(|k| &**k)
                    .filter(|n| glob.matches(&[n]))
                    .collect();
                names.sort();
                for n in names {
                    let Ok(Some(id)) = tree.lookup(&format!("{dir}/{n}")) else {
                        continue;
                    };
                    if files.contains(&id) {
                        continue;
                    }
                    if files.len() as u64 >= max_files {
                        files_cut = Some(format!(
                            "it includes more than {max_files} files (the max_ld_conf_files limit)"
                        ));
                        break;
                    }
                    files.insert(id);
                    included.push(Source::Included(id));
                }
            }
            queue.extend(included.into_iter().rev());
        }
        Ok(())
    };
    let cut = walk().err().or(files_cut);
    let note = cut.map(|why| format!("{LD_SO_CONF} was read only in part: {why}"));
    (out, note)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    use crate::elf::{ElfDynamic, ElfHead, ElfScan};
    use crate::facts::{entrypoint, libc, os, platform};
    use crate::platform::Platform;
    use crate::tree::layer::{EntryKind, LayerEntry};
    use crate::tree::Content;

    /// A shared object (or program) for tests: machine 62 unless given.
    pub(crate) fn elf(
        machine: u16,
        class: ElfClass,
        interp: Option<&str>,
        needed: &[&str],
        rpath: &[&str],
        runpath: &[&str],
    ) -> ElfInfo {
        ElfInfo {
            head: ElfHead {
                class,
                little_endian: true,
                elf_type: ElfType::Shared,
                machine,
                interpreter: interp.map(str::to_string),
                dynamic: true,
            },
            scan: ElfScan {
                dynamic: Some(ElfDynamic {
                    needed: needed.iter().map(|s| s.to_string()).collect(),
                    soname: None,
                    rpath: rpath.iter().map(|s| s.to_string()).collect(),
                    runpath: runpath.iter().map(|s| s.to_string()).collect(),
                    complete: true,
                }),
                ..Default::default()
            },
        }
    }

    // A test's list of a few files: the size of its ELF variant costs nothing.
    #[allow(clippy::large_enum_variant)]
    pub(crate) enum T {
        Elf(&'static str, ElfInfo),
        Text(&'static str, &'static str),
        Link(&'static str, &'static str),
    }

    pub(crate) fn tree(items: Vec<T>) -> FileTree {
        let entries = items
            .into_iter()
            .map(|i| {
                let (path, kind, content, elf) = match i {
                    T::Elf(p, e) => (p, EntryKind::File, None, Some(e)),
                    T::Text(p, t) => (
                        p,
                        EntryKind::File,
                        Some(Content {
                            bytes: t.as_bytes().to_vec(),
                            truncated: false,
                        }),
                        None,
                    ),
                    T::Link(p, t) => (p, EntryKind::Symlink(t.to_string()), None, None),
                };
                LayerEntry {
                    size: 100,
                    content,
                    elf: elf.map(Box::new),
                    ..LayerEntry::new(path, kind).with_mode(0o755)
                }
            })
            .collect();
        // Kept for what the loader and the facts its tests derive (os, platform, libc, and
        // preload and allocator, whose tests build their trees here) declare.
        let kept_for = [
            interests(),
            crate::facts::os::interests(),
            crate::facts::platform::interests(),
            crate::facts::libc::interests(),
            crate::facts::preload::interests(),
            crate::facts::allocator::interests(),
        ]
        .into_iter()
        .fold(Interests::default(), Interests::union);
        FileTree::from_entries(entries).unwrap().keeping(kept_for)
    }

    pub(crate) fn with_loader<R>(
        t: &FileTree,
        env: &[&str],
        program: &str,
        f: impl FnOnce(&Loader) -> R,
    ) -> R {
        let env = Env::from_pairs(env.iter().copied());
        let os = os::derive(t);
        let plat = platform::derive(t, &Platform::linux_amd64());
        let entry = entrypoint::Entrypoint {
            program: Some(program.to_string()),
            kind: entrypoint::ProgramKind::Elf,
            interpreter: t
                .lookup(program)
                .ok()
                .flatten()
                .and_then(|id| t.elf(id))
                .and_then(|e| e.head.interpreter.clone()),
            ..Default::default()
        };
        let libc = libc::derive(t, &os, &entry, &plat);
        let loader = Loader::new(t, &env, &libc, &plat, Some(program), "/app");
        f(&loader)
    }

    const LD: &str = "/lib64/ld-linux-x86-64.so.2";
    const E64: ElfClass = ElfClass::Elf64;

    fn glibc_base() -> Vec<T> {
        vec![
            T::Elf(
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
                elf(62, E64, None, &[], &[], &[]),
            ),
            T::Link("/lib", "usr/lib"),
            T::Link("/lib64", "usr/lib64"),
            T::Elf(
                "/usr/lib64/ld-linux-x86-64.so.2",
                elf(62, E64, None, &[], &[], &[]),
            ),
        ]
    }

    #[test]
    fn search_order_and_skips() {
        let mut items = glibc_base();
        items.extend([
            T::Elf(
                "/app/bin/server",
                elf(62, E64, Some(LD), &["libfoo.so.1"], &["$ORIGIN/../lib"], &[]),
            ),
            T::Elf("/app/lib/libfoo.so.1", elf(62, E64, None, &[], &[], &[])),
            T::Elf("/opt/foo/libfoo.so.1", elf(62, E64, None, &[], &[], &[])),
            // Another machine first in LD_LIBRARY_PATH: skipped, the search goes on.
            T::Elf("/arm/libbar.so", elf(183, E64, None, &[], &[], &[])),
            T::Elf(
                "/usr/lib/x86_64-linux-gnu/libbar.so",
                elf(62, E64, None, &[], &[], &[]),
            ),
            T::Elf("/i386/libbaz.so", elf(3, ElfClass::Elf32, None, &[], &[], &[])),
            T::Link(
                "/usr/lib/x86_64-linux-gnu/libdangling.so",
                "/nowhere/libdangling.so",
            ),
        ]);
        let t = tree(items);
        with_loader(
            &t,
            &["LD_LIBRARY_PATH=/opt/foo:/arm:/i386"],
            "/app/bin/server",
            |l| {
                // DT_RPATH (no RUNPATH) comes before LD_LIBRARY_PATH, with $ORIGIN expanded.
                let r = l.resolve("libfoo.so.1", Some("/app/bin/server"));
                assert_eq!(r.path.as_deref(), Some("/app/lib/libfoo.so.1"));
                assert_eq!(r.via, Some(Via::Rpath));
                // Without the requester's RPATH, LD_LIBRARY_PATH finds the other copy.
                let r = l.resolve("libfoo.so.1", None);
                assert_eq!(
                    (r.path.as_deref(), r.via),
                    (Some("/opt/foo/libfoo.so.1"), Some(Via::LdLibraryPath))
                );
                let r = l.resolve("libbar.so", None);
                assert_eq!(r.path.as_deref(), Some("/usr/lib/x86_64-linux-gnu/libbar.so"));
                assert_eq!(r.via, Some(Via::SystemDir));
                assert_eq!(r.skipped[0].reason, "built for arm64");
                let r = l.resolve("libbaz.so", None);
                assert!(!r.found());
                assert!(r.skipped[0].reason.contains("wrong ELF class"));
                let r = l.resolve("libdangling.so", None);
                assert!(!r.found());
                assert!(r.skipped.iter().any(|s| s.reason.contains("dangling")));
                // $LIB on Debian is lib/<triplet>.
                assert_eq!(
                    l.expand("/usr/$LIB/libjemalloc.so.2", None),
                    "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
                );
                assert_eq!(
                    l.resolve("libc.so.6", None).path.as_deref(),
                    Some("/usr/lib/x86_64-linux-gnu/libc.so.6")
                );
            },
        );
    }

    #[test]
    fn runpath_disables_rpath_and_comes_after_ld_library_path() {
        let mut items = glibc_base();
        items.extend([
            T::Elf(
                "/app/node",
                elf(62, E64, Some(LD), &[], &["/rpath"], &["/runpath"]),
            ),
            T::Elf("/rpath/liba.so", elf(62, E64, None, &[], &[], &[])),
            T::Elf("/runpath/liba.so", elf(62, E64, None, &[], &[], &[])),
            T::Elf("/env/liba.so", elf(62, E64, None, &[], &[], &[])),
        ]);
        let t = tree(items);
        with_loader(&t, &[], "/app/node", |l| {
            assert_eq!(
                l.resolve("liba.so", Some("/app/node")).path.as_deref(),
                Some("/runpath/liba.so")
            );
        });
        with_loader(&t, &["LD_LIBRARY_PATH=/env"], "/app/node", |l| {
            assert_eq!(
                l.resolve("liba.so", Some("/app/node")).path.as_deref(),
                Some("/env/liba.so")
            );
        });
    }

    #[test]
    fn ld_so_conf_folders_are_only_searched_through_the_cache() {
        let mut items = glibc_base();
        items.extend([
            T::Elf("/app/prog", elf(62, E64, Some(LD), &[], &[], &[])),
            T::Text("/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n"),
            T::Text("/etc/ld.so.conf.d/local.conf", "# local\n/usr/local/lib\n"),
            T::Elf("/usr/local/lib/libonlyhere.so", elf(62, E64, None, &[], &[], &[])),
        ]);
        let t = tree(items);
        with_loader(&t, &[], "/app/prog", |l| {
            assert_eq!(l.facts().ld_so_conf_dirs, ["/usr/local/lib"]);
            assert!(
                !l.resolve("libonlyhere.so", None).found(),
                "no cache: ldconfig was never run"
            );
        });
    }

    #[test]
    fn musl_search_path_and_machine() {
        let t = tree(vec![
            T::Elf("/lib/ld-musl-x86_64.so.1", elf(62, E64, None, &[], &[], &[])),
            T::Elf(
                "/bin/app",
                elf(62, E64, Some("/lib/ld-musl-x86_64.so.1"), &[], &[], &[]),
            ),
            T::Text("/etc/ld-musl-x86_64.path", "/opt/lib\n/usr/lib\n"),
            T::Elf("/opt/lib/libarm.so", elf(183, E64, None, &[], &[], &[])),
        ]);
        with_loader(&t, &[], "/bin/app", |l| {
            assert_eq!(l.family(), LibcFamily::Musl);
            assert_eq!(l.facts().system_dirs, ["/opt/lib", "/usr/lib"]);
            // musl does not look at the machine: it takes the file and fails later.
            let r = l.resolve("libarm.so", None);
            assert_eq!(r.path.as_deref(), Some("/opt/lib/libarm.so"));
            assert_eq!(r.via, Some(Via::MuslPath));
        });
    }

    /// A tree of ld.so.conf files from strings made at run time.
    fn conf_tree(files: Vec<(String, String)>) -> FileTree {
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        let mut items = glibc_base();
        items.extend(files.into_iter().map(|(p, t)| T::Text(leak(p), leak(t))));
        tree(items)
    }

    #[test]
    fn ld_so_conf_includes_are_read_once_and_capped() {
        // 15,000 include lines (some spelled differently) over 200 files that each list their
        // own folder and one they all share: each file is read once, 64 files in all.
        let mut conf = "include /etc/ld.so.conf.d/*.conf\n".repeat(15_000);
        conf.push_str("include ld.so.conf.d/*.conf\n/opt/top\n");
        let mut files = vec![("/etc/ld.so.conf".to_string(), conf)];
        for i in 0..200 {
            files.push((
                format!("/etc/ld.so.conf.d/f{i:03}.conf"),
                format!("/opt/lib{i:03}\n/opt/shared\ninclude /etc/ld.so.conf.d/*.conf\n"),
            ));
        }
        let (dirs, note) = read_ld_so_conf(&conf_tree(files));
        assert_eq!(dirs[0], "/opt/top");
        assert_eq!(dirs[1], "/opt/lib000");
        assert_eq!(dirs[2], "/opt/shared");
        assert_eq!(dirs.iter().filter(|d| *d == "/opt/shared").count(), 1, "{dirs:?}");
        // ld.so.conf and 63 includes, in order.
        assert_eq!(dirs.len(), 1 + 63 + 1, "{dirs:?}");
        assert_eq!(dirs.last().map(String::as_str), Some("/opt/lib062"));
        assert!(note.is_some_and(|n| n.contains("max_ld_conf_files")));
    }

    #[test]
    fn ld_so_conf_work_is_bounded_by_max_ld_conf_names() {
        // Distinct patterns each cost a name and the folder entries they are tried on; distinct
        // folders cost one each.
        let patterns: String = (0..20_000)
            .map(|i| format!("include /etc/ld.so.conf.d/{i}*\n"))
            .collect();
        let (dirs, note) = read_ld_so_conf(&conf_tree(vec![
            ("/etc/ld.so.conf".to_string(), patterns),
            ("/etc/ld.so.conf.d/x.conf".to_string(), "/opt/x\n".to_string()),
        ]));
        assert!(dirs.is_empty(), "{dirs:?}");
        assert!(note.is_some_and(|n| n.contains("max_ld_conf_names")));
        let folders: String = (0..20_000).map(|i| format!("/opt/{i}\n")).collect();
        let (dirs, note) = read_ld_so_conf(&conf_tree(vec![("/etc/ld.so.conf".to_string(), folders)]));
        assert_eq!(
            dirs.len() as u64,
            crate::tree::Limits::default().max_ld_conf_names
        );
        assert!(note.is_some_and(|n| n.contains("max_ld_conf_names")));
        // A usual configuration is read whole.
        let (dirs, note) = read_ld_so_conf(&conf_tree(vec![
            (
                "/etc/ld.so.conf".to_string(),
                "include /etc/ld.so.conf.d/*.conf\n".to_string(),
            ),
            (
                "/etc/ld.so.conf.d/a.conf".to_string(),
                "# a\n/usr/local/lib\n".to_string(),
            ),
            (
                "/etc/ld.so.conf.d/b.conf".to_string(),
                "/opt/b:/opt/c\n".to_string(),
            ),
        ]));
        assert_eq!(dirs, ["/usr/local/lib", "/opt/b", "/opt/c"]);
        assert_eq!(note, None);
    }
}
