//! sharp (the Node.js image library) and libvips: every installed copy and its native parts.
//!
//! Layouts (lovell/sharp tags and the published npm tarballs):
//! * 0.33 and later ("img-packages"): `require('@img/sharp-<platform>/sharp.node')`, resolved
//!   from sharp's own folder; the addon is `lib/sharp-<platform>.node` (0.33–0.34) or
//!   `lib/sharp-<platform>-<version>.node` (0.35), and it finds libvips in
//!   `@img/sharp-libvips-<platform>/lib` through five `$ORIGIN`-relative DT_RPATH entries.
//!   A from-source build is tried first: `src/build/Release/sharp-<platform>[-<version>].node`.
//! * 0.29–0.32 ("build-release"): `build/Release/sharp-<platform>.node` (`linux-arm64v8`,
//!   `linux-armv7`), libvips in `vendor/<libvips>/<platform>/lib`, found through DT_RPATH.
//! * 0.28 and older ("legacy"): `build/Release/sharp.node`, libvips in `vendor/<libvips>/lib`.
//!
//! sharp names the runtime `${process.platform}${libc}-${process.arch}` where libc is `musl`
//! for any Linux that is not glibc, so a glibc image needs `linux-*` and a musl one
//! `linuxmusl-*`; another platform's package is never tried.

use super::libc::{Libc, LibcFamily};
use super::loader::Loader;
use crate::arch::Arch;
use crate::elf::{ElfClass, ElfInfo};
use crate::tree::{Content, FileTree, Interests, NodeId, NodeKind, ROOT};
use crate::version::Version;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeSet;

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct SharpFacts {
    pub(crate) installs: Vec<SharpInstall>,
    /// Every `libvips*.so*` ELF file in the image (canonical paths).
    pub(crate) libvips: Vec<String>,
    /// The addon platform this image needs; `None` when its architecture or C library is
    /// unknown. Not in the JSON: each addon's `mismatch_reason` already says it.
    #[serde(skip)]
    pub(crate) wanted: Option<SharpTarget>,
}

/// The platform an image needs a sharp addon for, from the architecture the loader runs and
/// the image's C library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SharpTarget {
    pub(crate) arch: Arch,
    /// Glibc or Musl.
    pub(crate) libc: LibcFamily,
}

impl SharpTarget {
    /// The target of an image whose loader runs `arch` on `libc`; `None` when either is unknown.
    pub(crate) fn of(arch: Option<Arch>, libc: LibcFamily) -> Option<SharpTarget> {
        match (arch, libc) {
            (Some(arch), LibcFamily::Glibc | LibcFamily::Musl) => Some(SharpTarget { arch, libc }),
            _ => None,
        }
    }

    /// As sharp names it: `linux-x64`, `linuxmusl-arm64`.
    pub(crate) fn platform(self) -> String {
        format!(
            "{}-{}",
            if self.libc == LibcFamily::Musl {
                "linuxmusl"
            } else {
                "linux"
            },
            self.npm_cpu()
        )
    }

    /// npm's `cpu` (Node's `process.arch`); the OCI name where memlint knows no Node one.
    pub(crate) fn npm_cpu(self) -> &'static str {
        self.arch.node().unwrap_or(self.arch.oci())
    }

    /// npm's `libc`: `glibc` or `musl`.
    pub(crate) fn npm_libc(self) -> &'static str {
        if self.libc == LibcFamily::Musl {
            "musl"
        } else {
            "glibc"
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct SharpInstall {
    /// The sharp package folder (canonical).
    pub(crate) path: String,
    pub(crate) version: Option<String>,
    /// `img-packages` (0.33+), `build-release` (0.29–0.32), `legacy` (≤ 0.28), or `unknown`.
    pub(crate) layout: String,
    /// The native addons this copy of sharp can load, in the order it tries them.
    pub(crate) addons: Vec<SharpAddon>,
    /// Some addon matches the image's os, architecture and libc, and its libvips resolves.
    pub(crate) usable: bool,
}

impl SharpInstall {
    /// Whether this sharp keeps its concurrency at one thread per image even when
    /// `MALLOC_ARENA_MAX` is set: releases before 0.35.3, which lifts the limit then
    /// (lovell/sharp 540d2ead).
    pub(crate) fn limits_concurrency_under_arena_cap(&self) -> bool {
        self.version
            .as_deref()
            .and_then(crate::version::Version::parse)
            .is_some_and(|v| v < crate::version::Version::new(0, 35, 3))
    }
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct SharpAddon {
    /// `@img/sharp-linux-x64`; `None` for an addon inside the sharp package.
    pub(crate) package: Option<String>,
    /// The addon package's version (0.33+), when its package.json says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) version: Option<String>,
    /// As sharp names it: `linux-x64`, `linuxmusl-arm64`, `linux-arm64v8` (≤ 0.32)…
    pub(crate) platform: String,
    /// The OCI architecture of the platform.
    pub(crate) arch: Option<String>,
    /// `glibc` or `musl` for Linux platforms, `none` otherwise.
    pub(crate) libc: String,
    /// The `.node` file (canonical).
    pub(crate) path: Option<String>,
    /// The OCI architecture of the `.node` file's ELF header.
    pub(crate) elf_arch: Option<String>,
    /// The C library its DT_NEEDED names: `libc.so.6`, `libc.musl-x86_64.so.1`.
    pub(crate) needs_libc: Option<String>,
    /// Where its libvips DT_NEEDED resolves, as the image's loader would find it.
    pub(crate) libvips: Option<String>,
    /// The libvips soname that does not resolve.
    pub(crate) libvips_missing: Option<String>,
    pub(crate) matches_image: bool,
    pub(crate) mismatch_reason: Option<String>,
}

/// The platform the image gives sharp.
struct Runtime {
    arch: Option<Arch>,
    machine: Option<(u16, ElfClass)>,
    family: LibcFamily,
    libc_version: Option<Version>,
}

/// An addon sharp may load, before its files are checked.
#[derive(Default)]
struct Candidate {
    package: Option<String>,
    version: Option<String>,
    /// `None` for `sharp.node`, whose name does not say.
    platform: Option<String>,
    file: Option<String>,
    /// `config.glibc` of an `@img` package (`>=2.28`): the oldest glibc it loads on.
    min_glibc: Option<Version>,
}

/// What [`derive`] reads: the `package.json` of sharp and of its `@img/sharp-*` packages, and
/// which files are ELF (libvips).
pub(crate) fn interests() -> Interests {
    Interests::default()
        .keep("**/node_modules/*/package.json", super::SMALL_FILE)
        .keep("**/node_modules/@*/*/package.json", super::SMALL_FILE)
        .read_elf_heads()
}

pub(crate) fn derive(loader: &Loader, libc: &Libc) -> SharpFacts {
    let tree = loader.tree();
    let machine = loader.machine();
    let runtime = Runtime {
        arch: loader.arch(),
        machine,
        family: libc.family,
        libc_version: libc.version.as_deref().and_then(Version::parse),
    };
    let mut facts = SharpFacts {
        wanted: SharpTarget::of(runtime.arch, runtime.family),
        ..SharpFacts::default()
    };
    for id in tree.walk() {
        let n = tree.node(id);
        let name = n.name();
        if name.starts_with("libvips") && name.contains(".so") && tree.elf(id).is_some() {
            facts.libvips.push(tree.path_of(id));
        }
        if name == "package.json" && n.is_file() {
            let dir = tree.parent(id);
            if tree.node(dir).name() == "sharp" && tree.node(tree.parent(dir)).name() == "node_modules" {
                facts
                    .installs
                    .push(install(loader, dir, json_of(tree.content(id)).as_ref(), &runtime));
            }
        }
    }
    facts.libvips.sort();
    facts.libvips.dedup();
    facts
}

fn json_of(content: Option<&Content>) -> Option<Value> {
    let c = content?;
    serde_json::from_slice(&c.bytes).ok()
}

fn json_version(json: Option<&Value>) -> Option<String> {
    json?.get("version")?.as_str().map(str::to_string)
}

fn install(loader: &Loader, dir: NodeId, json: Option<&Value>, runtime: &Runtime) -> SharpInstall {
    let tree = loader.tree();
    let path = tree.path_of(dir);
    let version = json_version(json);
    let parsed = version.as_deref().and_then(Version::parse).map(|v| v.core());
    let layout = match &parsed {
        Some(v) if v.at_least(0, 33, 0) => "img-packages",
        Some(v) if v.at_least(0, 29, 0) => "build-release",
        Some(_) => "legacy",
        None => "unknown",
    };
    let mut addons = Vec::new();
    let known = layout != "unknown";
    if !known || layout == "img-packages" {
        for (file, platform) in release_addons(tree, &format!("{path}/src/build/Release")) {
            addons.push(addon(
                loader,
                Candidate {
                    platform,
                    file: Some(file),
                    ..Default::default()
                },
                runtime,
            ));
        }
        for (package, pkg_dir) in img_packages(tree, dir) {
            let platform = package.trim_start_matches("@img/sharp-").to_string();
            let pkg_path = tree.path_of(pkg_dir);
            let pkg_json = tree
                .child(pkg_dir, "package.json")
                // The package may be a link to a folder nobody asked to keep (it then reads
                // as unknown, as the reader kept nothing there).
                .and_then(|id| json_of(tree.kept_content(id)));
            let pkg_version = json_version(pkg_json.as_ref());
            let file = img_addon_file(tree, &pkg_path, &platform, pkg_version.as_deref());
            let min_glibc = pkg_json.as_ref().and_then(min_glibc);
            let c = Candidate {
                package: Some(package),
                version: pkg_version,
                platform: Some(platform),
                file,
                min_glibc,
            };
            addons.push(addon(loader, c, runtime));
        }
    }
    if !known || layout != "img-packages" {
        for (file, platform) in release_addons(tree, &format!("{path}/build/Release")) {
            addons.push(addon(
                loader,
                Candidate {
                    platform,
                    file: Some(file),
                    ..Default::default()
                },
                runtime,
            ));
        }
    }
    let layout = if known {
        layout
    } else if addons.iter().any(|a| a.package.is_some()) {
        "img-packages"
    } else if addons.iter().any(|a| {
        a.path
            .as_deref()
            .is_some_and(|p| p.ends_with("/build/Release/sharp.node"))
    }) {
        "legacy"
    } else if !addons.is_empty() {
        "build-release"
    } else {
        "unknown"
    };
    let usable = addons.iter().any(|a| a.matches_image);
    SharpInstall {
        path,
        version,
        layout: layout.to_string(),
        addons,
        usable,
    }
}

/// `@img/sharp-<platform>` packages as `require` finds them from sharp's folder: in the
/// `node_modules` of that folder and of each folder above it (folders named node_modules
/// excepted); the nearest copy of each package wins. (package name, canonical folder).
fn img_packages(tree: &FileTree, sharp_dir: NodeId) -> Vec<(String, NodeId)> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let mut cur = sharp_dir;
    loop {
        if tree.node(cur).name() != "node_modules" {
            let base = tree.path_of(cur);
            let img = format!("{}/node_modules/@img", base.trim_end_matches('/'));
            if let Ok(Some(img_id)) = tree.lookup(&img) {
                if let NodeKind::Dir(children) = &tree.node(img_id).kind {
                    for name in children.keys() {
                        let Some(platform) = name.strip_prefix("sharp-") else {
                            continue;
                        };
                        if platform.starts_with("libvips") || !seen.insert(name.to_string()) {
                            continue;
                        }
                        if let Ok(Some(pkg)) = tree.lookup(&format!("{img}/{name}")) {
                            if tree.node(pkg).is_dir() {
                                out.push((format!("@img/{name}"), pkg));
                            }
                        }
                    }
                }
            }
        }
        if cur == ROOT {
            return out;
        }
        cur = tree.parent(cur);
    }
}

/// The `.node` file of an `@img/sharp-<platform>` package: the name its version uses, else any
/// `.node` file in its `lib` folder.
fn img_addon_file(tree: &FileTree, pkg: &str, platform: &str, version: Option<&str>) -> Option<String> {
    let mut names = vec![format!("sharp-{platform}.node")];
    if let Some(v) = version {
        names.insert(0, format!("sharp-{platform}-{v}.node"));
    }
    for name in &names {
        if let Ok(Some(id)) = tree.lookup(&format!("{pkg}/lib/{name}")) {
            if tree.node(id).is_file() {
                return Some(tree.path_of(id));
            }
        }
    }
    let lib = tree.lookup(&format!("{pkg}/lib")).ok().flatten()?;
    let NodeKind::Dir(children) = &tree.node(lib).kind else {
        return None;
    };
    let found = children
        .iter()
        .find(|(name, &id)| name.ends_with(".node") && tree.node(id).is_file())
        .map(|(_, &id)| tree.path_of(id));
    found
}

/// `.node` files in a `build/Release` folder, with the platform their name gives
/// (`sharp-linux-x64.node`, `sharp-linux-x64-0.35.5.node`), or `None` for `sharp.node`.
/// WebAssembly builds are left out.
fn release_addons(tree: &FileTree, dir: &str) -> Vec<(String, Option<String>)> {
    let Ok(Some(id)) = tree.lookup(dir) else {
        return Vec::new();
    };
    let NodeKind::Dir(children) = &tree.node(id).kind else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for name in children.keys() {
        let Some(stem) = name.strip_suffix(".node") else {
            continue;
        };
        let Ok(Some(file)) = tree.lookup(&format!("{dir}/{name}")) else {
            continue;
        };
        if !tree.node(file).is_file() {
            continue;
        }
        let platform = match stem {
            "sharp" => None,
            _ => match stem.strip_prefix("sharp-") {
                Some(rest) => Some(strip_version(rest)),
                None => continue,
            },
        };
        if platform.as_deref().is_some_and(|p| p.starts_with("wasm32")) {
            continue;
        }
        out.push((tree.path_of(file), platform));
    }
    out
}

/// `linux-x64-0.35.5` → `linux-x64`.
fn strip_version(rest: &str) -> String {
    let parts: Vec<&str> = rest.split('-').collect();
    match parts
        .iter()
        .position(|p| p.starts_with(|c: char| c.is_ascii_digit()) && p.contains('.'))
    {
        Some(i) if i >= 2 => parts[..i].join("-"),
        _ => rest.to_string(),
    }
}

/// (os, libc, architecture) of a platform string as sharp writes it.
fn parse_platform(platform: &str) -> (String, &'static str, Option<Arch>) {
    let (os_libc, arch) = platform.split_once('-').unwrap_or((platform, ""));
    let (os, libc) = match os_libc {
        "linuxmusl" => ("linux", "musl"),
        "linux" => ("linux", "glibc"),
        other => (other, "none"),
    };
    (os.to_string(), libc, Arch::from_node(arch).map(|(a, _)| a))
}

/// `process.arch` for an architecture, `unknown` where memlint does not know it.
fn node_arch(arch: Option<Arch>) -> &'static str {
    arch.and_then(Arch::node).unwrap_or("unknown")
}

/// `config.glibc` of an `@img` package.json: `">=2.28"` → 2.28.
fn min_glibc(json: &Value) -> Option<Version> {
    let range = json.get("config")?.get("glibc")?.as_str()?;
    Version::parse(range.trim().strip_prefix(">=")?)
}

fn addon(loader: &Loader, candidate: Candidate, runtime: &Runtime) -> SharpAddon {
    let Candidate {
        package,
        version,
        platform,
        file,
        min_glibc,
    } = candidate;
    let elf: Option<&ElfInfo> = file.as_deref().and_then(|f| loader.elf_at(f));
    let needed: &[String] = elf
        .and_then(|e| e.scan.dynamic.as_ref())
        .map_or(&[], |d| d.needed.as_slice());
    let needs_libc = needed
        .iter()
        .find(|n| *n == "libc.so.6" || n.starts_with("libc.musl-"))
        .cloned();
    // `sharp.node` (≤ 0.28) does not say its platform: the ELF file does.
    let platform = platform.unwrap_or_else(|| match elf {
        Some(e) => {
            let musl = needs_libc.as_deref().is_some_and(|n| n.starts_with("libc.musl-"));
            format!(
                "{}-{}",
                if musl { "linuxmusl" } else { "linux" },
                node_arch(Arch::from_elf(e.head.machine, e.head.class))
            )
        }
        None => "unknown".to_string(),
    });
    let (os, libc, arch) = parse_platform(&platform);
    let elf_arch = elf
        .and_then(|e| Arch::from_elf(e.head.machine, e.head.class))
        .map(|a| a.oci().to_string());

    let mut a = SharpAddon {
        package,
        version,
        platform: platform.clone(),
        arch: arch.map(|a| a.oci().to_string()),
        libc: libc.to_string(),
        path: file.clone(),
        elf_arch,
        needs_libc,
        ..Default::default()
    };
    if let (Some(f), Some(name)) = (file.as_deref(), needed.iter().find(|n| n.starts_with("libvips"))) {
        let r = loader.resolve(name, Some(f));
        match r.path {
            Some(p) => a.libvips = Some(p),
            None => a.libvips_missing = Some(name.clone()),
        }
    }

    let image_arch = runtime.arch;
    let image_libc = match runtime.family {
        LibcFamily::Glibc => Some("glibc"),
        LibcFamily::Musl => Some("musl"),
        _ => None,
    };
    let expected = SharpTarget::of(image_arch, runtime.family).map(SharpTarget::platform);
    let looks_for = expected
        .map(|e| format!(" (sharp looks for {e})"))
        .unwrap_or_default();
    let reason = if os != "linux" {
        Some(format!("built for {os}, not Linux{looks_for}"))
    } else if let (Some(want), Some(have)) = (image_arch, arch) {
        (want != have).then(|| format!("built for {}, the image is {}{looks_for}", have.oci(), want.oci()))
    } else {
        None
    }
    .or_else(|| match image_libc {
        Some(l) if l != libc => Some(format!("built for {libc}, the image runs {l}{looks_for}")),
        _ => None,
    })
    .or_else(|| match (&file, elf) {
        (None, _) => Some("the package holds no .node file".to_string()),
        (Some(f), None) if loader.tree().lookup(f).ok().flatten().is_none() => {
            Some(format!("{f} is missing"))
        }
        (Some(f), None) => Some(format!("{f} is not an ELF file")),
        (Some(_), Some(e)) => match runtime.machine {
            Some((m, c)) if e.head.machine != m || e.head.class != c => Some(format!(
                "the .node file is built for {}, the image is {}",
                a.elf_arch.as_deref().unwrap_or("another machine"),
                image_arch.map_or("another machine", Arch::oci)
            )),
            _ => None,
        },
    })
    .or_else(|| {
        let wanted = image_libc?;
        let n = a.needs_libc.as_deref()?;
        let linked = if n.starts_with("libc.musl-") {
            "musl"
        } else {
            "glibc"
        };
        (linked != wanted).then(|| format!("the .node file needs {n} ({linked}), the image runs {wanted}"))
    })
    .or_else(|| {
        let (need, have) = (min_glibc.as_ref()?, runtime.libc_version.as_ref()?);
        (runtime.family == LibcFamily::Glibc && libc == "glibc" && have < need).then(|| {
            format!(
                "it needs glibc {}.{} or newer and the image has {}.{}: loading fails with \"version `GLIBC_{}.{}' not found\"",
                need.major, need.minor, have.major, have.minor, need.major, need.minor
            )
        })
    })
    .or_else(|| {
        a.libvips_missing
            .as_ref()
            .map(|n| format!("{n} does not resolve: sharp fails with ERR_DLOPEN_FAILED"))
    });
    a.matches_image = reason.is_none();
    a.mismatch_reason = reason;
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::elf::{ElfDynamic, ElfHead, ElfScan, ElfType};
    use crate::facts::platform::PlatformFacts;
    use crate::facts::Env;
    use crate::platform::Platform;

    use crate::tree::{Content, EntryKind, LayerEntry};

    const SHARP_0345: &str = include_str!("../../testdata/node/sharp/sharp-0.34.5.package.json");
    const SHARP_0355: &str = include_str!("../../testdata/node/sharp/sharp-0.35.5.package.json");
    const LINUX_X64_0345: &str =
        include_str!("../../testdata/node/sharp/img-sharp-linux-x64-0.34.5.package.json");
    const LINUX_X64_0355: &str =
        include_str!("../../testdata/node/sharp/img-sharp-linux-x64-0.35.5.package.json");
    const LINUXMUSL_X64_0355: &str =
        include_str!("../../testdata/node/sharp/img-sharp-linuxmusl-x64-0.35.5.package.json");
    const LINUX_ARM64_0355: &str =
        include_str!("../../testdata/node/sharp/img-sharp-linux-arm64-0.35.5.package.json");
    const LIBVIPS_X64_134: &str =
        include_str!("../../testdata/node/sharp/img-sharp-libvips-linux-x64-1.3.4.package.json");

    fn entry(path: &str, kind: EntryKind) -> LayerEntry {
        LayerEntry::new(path, kind)
    }

    fn json(path: &str, body: &str) -> LayerEntry {
        let mut e = entry(path, EntryKind::File);
        e.size = body.len() as u64;
        e.content = Some(Content {
            bytes: body.as_bytes().to_vec(),
            truncated: false,
        });
        e
    }

    fn link(path: &str, target: &str) -> LayerEntry {
        entry(path, EntryKind::Symlink(target.into()))
    }

    /// A shared object with the dynamic section `readelf -d` shows for the real file.
    fn so(path: &str, machine: u16, needed: &[&str], rpath: &str, runpath: &str) -> LayerEntry {
        let mut e = entry(path, EntryKind::File);
        e.size = 500_000;
        let split = |s: &str| {
            s.split(':')
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        e.elf = Some(Box::new(ElfInfo {
            head: ElfHead {
                class: ElfClass::Elf64,
                little_endian: true,
                elf_type: ElfType::Shared,
                machine,
                interpreter: None,
                dynamic: true,
            },
            scan: ElfScan {
                dynamic: Some(ElfDynamic {
                    needed: needed.iter().map(|s| s.to_string()).collect(),
                    soname: Some(path.rsplit('/').next().unwrap_or(path).to_string()),
                    rpath: split(rpath),
                    runpath: split(runpath),
                    complete: true,
                }),
                ..Default::default()
            },
        }));
        e
    }

    fn rpath(platform: &str, libvips: &str, hash: &str) -> String {
        format!(
            "$ORIGIN/../../sharp-libvips-{platform}/lib:$ORIGIN/../../../sharp-libvips-{platform}/{libvips}/lib:$ORIGIN/../../node_modules/@img/sharp-libvips-{platform}/lib:$ORIGIN/../../../node_modules/@img/sharp-libvips-{platform}/lib:$ORIGIN/../../../../../@img-sharp-libvips-{platform}-npm-{libvips}-{hash}/node_modules/@img/sharp-libvips-{platform}/lib"
        )
    }

    const GLIBC_X64_NEEDED: &[&str] = &[
        "libstdc++.so.6",
        "libm.so.6",
        "libgcc_s.so.1",
        "libpthread.so.0",
        "libc.so.6",
        "ld-linux-x86-64.so.2",
    ];

    /// `@img/sharp-linux-x64@0.34.5` and `@img/sharp-libvips-linux-x64@1.2.4` under `nm`.
    fn img_0345(nm: &str) -> Vec<LayerEntry> {
        let mut needed = vec!["libvips-cpp.so.8.17.3"];
        needed.extend(GLIBC_X64_NEEDED);
        vec![
            json(&format!("{nm}/@img/sharp-linux-x64/package.json"), LINUX_X64_0345),
            so(
                &format!("{nm}/@img/sharp-linux-x64/lib/sharp-linux-x64.node"),
                62,
                &needed,
                &rpath("linux-x64", "1.2.4", "105fd6d44d"),
                "",
            ),
            json(
                &format!("{nm}/@img/sharp-libvips-linux-x64/package.json"),
                &LIBVIPS_X64_134
                    .replace("1.3.4", "1.2.4")
                    .replace("8.18.7", "8.17.3"),
            ),
            so(
                &format!("{nm}/@img/sharp-libvips-linux-x64/lib/libvips-cpp.so.8.17.3"),
                62,
                &[
                    "libresolv.so.2",
                    "libdl.so.2",
                    "libstdc++.so.6",
                    "libpthread.so.0",
                    "libm.so.6",
                    "libgcc_s.so.1",
                    "libc.so.6",
                    "ld-linux-x86-64.so.2",
                ],
                "",
                "$ORIGIN/",
            ),
        ]
    }

    fn debian_base() -> Vec<LayerEntry> {
        vec![
            so(
                "usr/lib/x86_64-linux-gnu/libc.so.6",
                62,
                &["ld-linux-x86-64.so.2"],
                "",
                "",
            ),
            link("lib", "usr/lib"),
            link("lib64", "usr/lib64"),
            entry("usr/lib64", EntryKind::Dir),
        ]
    }

    fn tree(entries: Vec<LayerEntry>) -> FileTree {
        // Kept for what this module and the loader it asks declare, and nothing else.
        FileTree::from_entries(entries)
            .unwrap()
            .keeping(interests().union(crate::facts::loader::interests()))
    }

    fn libc(family: LibcFamily) -> Libc {
        Libc {
            family,
            version: None,
            entrypoint: None,
            present: vec![family],
            loader: None,
            evidence: Vec::new(),
        }
    }

    fn facts(t: &FileTree, family: LibcFamily, arch: &str) -> SharpFacts {
        facts_with(t, libc(family), arch)
    }

    fn facts_with(t: &FileTree, l: Libc, arch: &str) -> SharpFacts {
        let platform = PlatformFacts {
            declared: Platform::new("linux", arch, None),
            binaries: None,
            elf_architectures: Default::default(),
            mismatch: false,
        };
        let loader = Loader::new(t, &Env::default(), &l, &platform, None, "/");
        derive(&loader, &l)
    }

    #[test]
    fn glibc_too_old_for_the_prebuilt_addon() {
        // Ubuntu 18.04 has glibc 2.27: @img/sharp-linux-x64@0.34.5 asks for >=2.26, 0.35.5 for >=2.28.
        let mut e = debian_base();
        e.push(json("app/node_modules/sharp/package.json", SHARP_0345));
        e.extend(img_0345("app/node_modules"));
        let t = tree(e.clone());
        let bionic = Libc {
            version: Some("2.27".into()),
            ..libc(LibcFamily::Glibc)
        };
        assert!(facts_with(&t, bionic.clone(), "amd64").installs[0].usable);

        let e: Vec<LayerEntry> = e
            .into_iter()
            .map(|x| {
                if x.path.last().is_some_and(|n| n == "package.json")
                    && x.path.contains(&"sharp-linux-x64".to_string())
                {
                    json(
                        "app/node_modules/@img/sharp-linux-x64/package.json",
                        LINUX_X64_0355,
                    )
                } else {
                    x
                }
            })
            .collect();
        let f = facts_with(&tree(e), bionic, "amd64");
        let a = &f.installs[0].addons[0];
        assert!(!a.matches_image);
        assert_eq!(
            a.mismatch_reason.as_deref(),
            Some("it needs glibc 2.28 or newer and the image has 2.27: loading fails with \"version `GLIBC_2.28' not found\"")
        );
        assert_eq!(
            min_glibc(&serde_json::json!({"config": {"glibc": ">=2.26"}})),
            Version::parse("2.26")
        );
        assert_eq!(min_glibc(&serde_json::json!({"config": {"glibc": 2}})), None);
    }

    #[test]
    fn npm_flat_0_34_on_debian_amd64() {
        let mut e = debian_base();
        e.push(json("app/node_modules/sharp/package.json", SHARP_0345));
        e.extend(img_0345("app/node_modules"));
        let t = tree(e);
        let f = facts(&t, LibcFamily::Glibc, "amd64");
        assert_eq!(f.installs.len(), 1);
        let i = &f.installs[0];
        assert_eq!(
            (i.path.as_str(), i.version.as_deref(), i.layout.as_str()),
            ("/app/node_modules/sharp", Some("0.34.5"), "img-packages")
        );
        assert_eq!(i.addons.len(), 1);
        let a = &i.addons[0];
        assert_eq!(a.package.as_deref(), Some("@img/sharp-linux-x64"));
        assert_eq!(a.version.as_deref(), Some("0.34.5"));
        assert_eq!(
            (a.platform.as_str(), a.arch.as_deref(), a.libc.as_str()),
            ("linux-x64", Some("amd64"), "glibc")
        );
        assert_eq!(
            a.path.as_deref(),
            Some("/app/node_modules/@img/sharp-linux-x64/lib/sharp-linux-x64.node")
        );
        assert_eq!(a.elf_arch.as_deref(), Some("amd64"));
        assert_eq!(a.needs_libc.as_deref(), Some("libc.so.6"));
        assert_eq!(
            a.libvips.as_deref(),
            Some("/app/node_modules/@img/sharp-libvips-linux-x64/lib/libvips-cpp.so.8.17.3")
        );
        assert_eq!(
            (a.libvips_missing.as_ref(), a.mismatch_reason.as_ref()),
            (None, None)
        );
        assert!(a.matches_image && i.usable);
        assert_eq!(
            f.libvips,
            ["/app/node_modules/@img/sharp-libvips-linux-x64/lib/libvips-cpp.so.8.17.3"]
        );
    }

    #[test]
    fn missing_libvips_package_is_not_usable() {
        let mut e = debian_base();
        e.push(json("app/node_modules/sharp/package.json", SHARP_0345));
        e.extend(
            img_0345("app/node_modules")
                .into_iter()
                .filter(|x| !x.path.contains(&"sharp-libvips-linux-x64".to_string())),
        );
        let f = facts(&tree(e), LibcFamily::Glibc, "amd64");
        let a = &f.installs[0].addons[0];
        assert_eq!(a.libvips, None);
        assert_eq!(a.libvips_missing.as_deref(), Some("libvips-cpp.so.8.17.3"));
        assert!(!a.matches_image && !f.installs[0].usable);
        assert!(a
            .mismatch_reason
            .as_deref()
            .unwrap()
            .contains("ERR_DLOPEN_FAILED"));
        assert!(f.libvips.is_empty());
    }

    #[test]
    fn glibc_packages_on_alpine_and_x64_packages_on_arm64() {
        let mut e = vec![
            so("lib/ld-musl-x86_64.so.1", 62, &[], "", ""),
            link("lib/libc.musl-x86_64.so.1", "ld-musl-x86_64.so.1"),
        ];
        e.push(json("app/node_modules/sharp/package.json", SHARP_0345));
        e.extend(img_0345("app/node_modules"));
        let f = facts(&tree(e), LibcFamily::Musl, "amd64");
        let a = &f.installs[0].addons[0];
        assert!(!a.matches_image && !f.installs[0].usable);
        assert_eq!(
            a.mismatch_reason.as_deref(),
            Some("built for glibc, the image runs musl (sharp looks for linuxmusl-x64)")
        );

        let mut e = vec![so("usr/lib/aarch64-linux-gnu/libc.so.6", 183, &[], "", "")];
        e.push(json("app/node_modules/sharp/package.json", SHARP_0345));
        e.extend(img_0345("app/node_modules"));
        let f = facts(&tree(e), LibcFamily::Glibc, "arm64");
        let a = &f.installs[0].addons[0];
        assert!(!a.matches_image);
        assert_eq!(
            a.mismatch_reason.as_deref(),
            Some("built for amd64, the image is arm64 (sharp looks for linux-arm64)")
        );
        // The loader passes over the x64 libvips on arm64, as glibc's open_verify does.
        assert_eq!(a.libvips_missing.as_deref(), Some("libvips-cpp.so.8.17.3"));
    }

    #[test]
    fn pnpm_layout_0_35_with_both_libc_variants_on_alpine() {
        let store = "app/node_modules/.pnpm";
        let mut needed_musl = vec![
            "libvips-cpp.so.8.18.7",
            "libstdc++.so.6",
            "libgcc_s.so.1",
            "libc.musl-x86_64.so.1",
        ];
        let e = vec![
            so("lib/ld-musl-x86_64.so.1", 62, &[], "", ""),
            link("lib/libc.musl-x86_64.so.1", "ld-musl-x86_64.so.1"),
            json(&format!("{store}/sharp@0.35.5/node_modules/sharp/package.json"), SHARP_0355),
            link("app/node_modules/sharp", ".pnpm/sharp@0.35.5/node_modules/sharp"),
            link(&format!("{store}/sharp@0.35.5/node_modules/@img/sharp-linuxmusl-x64"), "../../../@img+sharp-linuxmusl-x64@0.35.5/node_modules/@img/sharp-linuxmusl-x64"),
            link(&format!("{store}/sharp@0.35.5/node_modules/@img/sharp-linux-x64"), "../../../@img+sharp-linux-x64@0.35.5/node_modules/@img/sharp-linux-x64"),
            json(&format!("{store}/@img+sharp-linuxmusl-x64@0.35.5/node_modules/@img/sharp-linuxmusl-x64/package.json"), LINUXMUSL_X64_0355),
            so(
                &format!("{store}/@img+sharp-linuxmusl-x64@0.35.5/node_modules/@img/sharp-linuxmusl-x64/lib/sharp-linuxmusl-x64-0.35.5.node"),
                62,
                &std::mem::take(&mut needed_musl),
                &rpath("linuxmusl-x64", "1.3.4", "6c6d9a8c19"),
                "",
            ),
            link(
                &format!("{store}/@img+sharp-linuxmusl-x64@0.35.5/node_modules/@img/sharp-libvips-linuxmusl-x64"),
                "../../../@img+sharp-libvips-linuxmusl-x64@1.3.4/node_modules/@img/sharp-libvips-linuxmusl-x64",
            ),
            so(
                &format!("{store}/@img+sharp-libvips-linuxmusl-x64@1.3.4/node_modules/@img/sharp-libvips-linuxmusl-x64/lib/libvips-cpp.so.8.18.7"),
                62,
                &["libstdc++.so.6", "libc.musl-x86_64.so.1"],
                "",
                "$ORIGIN/",
            ),
            json(&format!("{store}/@img+sharp-linux-x64@0.35.5/node_modules/@img/sharp-linux-x64/package.json"), LINUX_X64_0355),
            so(
                &format!("{store}/@img+sharp-linux-x64@0.35.5/node_modules/@img/sharp-linux-x64/lib/sharp-linux-x64-0.35.5.node"),
                62,
                &[&["libvips-cpp.so.8.18.7"], GLIBC_X64_NEEDED].concat(),
                &rpath("linux-x64", "1.3.4", "28ab0da74d"),
                "",
            ),
        ];
        let f = facts(&tree(e), LibcFamily::Musl, "amd64");
        assert_eq!(f.installs.len(), 1);
        let i = &f.installs[0];
        assert_eq!(
            (i.path.as_str(), i.version.as_deref()),
            (
                "/app/node_modules/.pnpm/sharp@0.35.5/node_modules/sharp",
                Some("0.35.5")
            )
        );
        let names: Vec<_> = i.addons.iter().map(|a| a.platform.as_str()).collect();
        assert_eq!(names, ["linux-x64", "linuxmusl-x64"]);
        let glibc = &i.addons[0];
        assert!(!glibc.matches_image);
        assert!(glibc
            .mismatch_reason
            .as_deref()
            .unwrap()
            .contains("built for glibc, the image runs musl"));
        let musl = &i.addons[1];
        assert_eq!(musl.libc, "musl");
        assert_eq!(
            musl.path.as_deref(),
            Some("/app/node_modules/.pnpm/@img+sharp-linuxmusl-x64@0.35.5/node_modules/@img/sharp-linuxmusl-x64/lib/sharp-linuxmusl-x64-0.35.5.node")
        );
        assert_eq!(musl.needs_libc.as_deref(), Some("libc.musl-x86_64.so.1"));
        assert_eq!(
            musl.libvips.as_deref(),
            Some("/app/node_modules/.pnpm/@img+sharp-libvips-linuxmusl-x64@1.3.4/node_modules/@img/sharp-libvips-linuxmusl-x64/lib/libvips-cpp.so.8.18.7")
        );
        assert!(musl.matches_image && i.usable, "{musl:?}");
    }

    #[test]
    fn nearest_img_package_wins_and_foreign_arch_addon_is_caught() {
        let mut e = debian_base();
        e.push(json(
            "app/node_modules/next/node_modules/sharp/package.json",
            SHARP_0355,
        ));
        // Nested beside that sharp: an arm64 addon in an amd64 image (node_modules copied
        // from an arm64 build machine).
        e.push(json(
            "app/node_modules/next/node_modules/@img/sharp-linux-arm64/package.json",
            LINUX_ARM64_0355,
        ));
        e.push(so(
            "app/node_modules/next/node_modules/@img/sharp-linux-arm64/lib/sharp-linux-arm64-0.35.5.node",
            183,
            &[
                "libvips-cpp.so.8.18.7",
                "libstdc++.so.6",
                "libm.so.6",
                "libgcc_s.so.1",
                "libpthread.so.0",
                "libc.so.6",
                "ld-linux-aarch64.so.1",
            ],
            &rpath("linux-arm64", "1.3.4", "8cd948fdd3"),
            "",
        ));
        // An x64 package renamed arm64 (a corrupted copy): the ELF header gives it away.
        e.push(json(
            "app/node_modules/next/node_modules/@img/sharp-linux-x64/package.json",
            LINUX_X64_0355,
        ));
        e.push(so(
            "app/node_modules/next/node_modules/@img/sharp-linux-x64/lib/sharp-linux-x64-0.35.5.node",
            183,
            &["libvips-cpp.so.8.18.7", "libc.so.6"],
            &rpath("linux-x64", "1.3.4", "28ab0da74d"),
            "",
        ));
        // The hoisted 0.34.5 copy is shadowed by the nested one for sharp-linux-x64.
        e.extend(img_0345("app/node_modules"));
        let f = facts(&tree(e), LibcFamily::Glibc, "amd64");
        let i = &f.installs[0];
        assert_eq!(i.path, "/app/node_modules/next/node_modules/sharp");
        assert_eq!(i.addons.len(), 2, "{:?}", i.addons);
        let arm = &i.addons[0];
        assert_eq!(
            (arm.platform.as_str(), arm.arch.as_deref()),
            ("linux-arm64", Some("arm64"))
        );
        assert!(arm
            .mismatch_reason
            .as_deref()
            .unwrap()
            .starts_with("built for arm64, the image is amd64"));
        let x64 = &i.addons[1];
        assert_eq!(x64.version.as_deref(), Some("0.35.5"));
        assert_eq!(x64.elf_arch.as_deref(), Some("arm64"));
        assert_eq!(
            x64.mismatch_reason.as_deref(),
            Some("the .node file is built for arm64, the image is amd64")
        );
        assert!(!i.usable);
        assert_eq!(
            f.libvips,
            ["/app/node_modules/@img/sharp-libvips-linux-x64/lib/libvips-cpp.so.8.17.3"]
        );
    }

    #[test]
    fn build_release_and_legacy_layouts() {
        let mut e = debian_base();
        e.push(json(
            "srv/node_modules/sharp/package.json",
            r#"{"name":"sharp","version":"0.32.6","config":{"libvips":"8.14.5"}}"#,
        ));
        e.push(so(
            "srv/node_modules/sharp/build/Release/sharp-linux-x64.node",
            62,
            &[&["libvips-cpp.so.42"], GLIBC_X64_NEEDED].concat(),
            "$ORIGIN/../../vendor/8.14.5/linux-x64/lib",
            "",
        ));
        e.push(so(
            "srv/node_modules/sharp/vendor/8.14.5/linux-x64/lib/libvips-cpp.so.42",
            62,
            &["libc.so.6"],
            "",
            "$ORIGIN/",
        ));
        e.push(json(
            "old/node_modules/sharp/package.json",
            r#"{"name":"sharp","version":"0.27.2"}"#,
        ));
        e.push(so(
            "old/node_modules/sharp/build/Release/sharp.node",
            62,
            &["libvips-cpp.so.42", "libc.so.6"],
            "$ORIGIN/../../vendor/8.10.5/lib",
            "",
        ));
        let f = facts(&tree(e), LibcFamily::Glibc, "amd64");
        let by_path = |p: &str| f.installs.iter().find(|i| i.path == p).unwrap();
        let new = by_path("/srv/node_modules/sharp");
        assert_eq!(new.layout, "build-release");
        assert_eq!(new.addons[0].package, None);
        assert_eq!(new.addons[0].platform, "linux-x64");
        assert_eq!(
            new.addons[0].libvips.as_deref(),
            Some("/srv/node_modules/sharp/vendor/8.14.5/linux-x64/lib/libvips-cpp.so.42")
        );
        assert!(new.usable);
        let old = by_path("/old/node_modules/sharp");
        assert_eq!(old.layout, "legacy");
        assert_eq!(old.addons[0].platform, "linux-x64");
        assert_eq!(
            old.addons[0].libvips_missing.as_deref(),
            Some("libvips-cpp.so.42")
        );
        assert!(!old.usable);
        assert_eq!(
            f.libvips,
            ["/srv/node_modules/sharp/vendor/8.14.5/linux-x64/lib/libvips-cpp.so.42"]
        );
    }

    #[test]
    fn from_source_build_against_system_libvips() {
        let mut e = debian_base();
        e.push(json("app/node_modules/sharp/package.json", SHARP_0355));
        e.push(so(
            "app/node_modules/sharp/src/build/Release/sharp-linux-x64-0.35.5.node",
            62,
            &[&["libvips-cpp.so.42"], GLIBC_X64_NEEDED].concat(),
            "",
            "",
        ));
        e.push(so(
            "usr/lib/x86_64-linux-gnu/libvips-cpp.so.42.17.1",
            62,
            &["libc.so.6"],
            "",
            "",
        ));
        e.push(link(
            "usr/lib/x86_64-linux-gnu/libvips-cpp.so.42",
            "libvips-cpp.so.42.17.1",
        ));
        e.push(so(
            "usr/lib/x86_64-linux-gnu/libvips.so.42.17.1",
            62,
            &["libc.so.6"],
            "",
            "",
        ));
        let f = facts(&tree(e), LibcFamily::Glibc, "amd64");
        let i = &f.installs[0];
        assert_eq!(i.addons.len(), 1);
        let a = &i.addons[0];
        assert_eq!((a.package.as_ref(), a.platform.as_str()), (None, "linux-x64"));
        assert_eq!(
            a.libvips.as_deref(),
            Some("/usr/lib/x86_64-linux-gnu/libvips-cpp.so.42.17.1")
        );
        assert!(i.usable);
        assert_eq!(
            f.libvips,
            [
                "/usr/lib/x86_64-linux-gnu/libvips-cpp.so.42.17.1",
                "/usr/lib/x86_64-linux-gnu/libvips.so.42.17.1"
            ]
        );
    }

    #[test]
    fn platform_strings() {
        assert_eq!(
            parse_platform("linux-x64"),
            ("linux".into(), "glibc", Some(Arch::Amd64))
        );
        assert_eq!(
            parse_platform("linuxmusl-arm64"),
            ("linux".into(), "musl", Some(Arch::Arm64))
        );
        assert_eq!(
            parse_platform("linux-arm64v8"),
            ("linux".into(), "glibc", Some(Arch::Arm64))
        );
        assert_eq!(
            parse_platform("linux-armv7"),
            ("linux".into(), "glibc", Some(Arch::Arm))
        );
        assert_eq!(
            parse_platform("linux-ppc64"),
            ("linux".into(), "glibc", Some(Arch::Ppc64le))
        );
        assert_eq!(
            parse_platform("darwin-arm64"),
            ("darwin".into(), "none", Some(Arch::Arm64))
        );
        assert_eq!(strip_version("linux-x64-0.35.5"), "linux-x64");
        assert_eq!(strip_version("linuxmusl-arm64-0.35.0-rc.1"), "linuxmusl-arm64");
        assert_eq!(strip_version("linux-x64"), "linux-x64");
    }

    #[test]
    fn darwin_node_modules_and_hostile_package_json() {
        let mut e = debian_base();
        e.push(json("app/node_modules/sharp/package.json", "{\"version\": [1, 2"));
        e.push(json(
            "app/node_modules/@img/sharp-darwin-arm64/package.json",
            "\u{0}\u{ff}",
        ));
        e.push(entry(
            "app/node_modules/@img/sharp-darwin-arm64/lib/sharp-darwin-arm64.node",
            EntryKind::File,
        ));
        e.push(json("x/node_modules/sharp/package.json", "null"));
        let f = facts(&tree(e), LibcFamily::Glibc, "amd64");
        assert_eq!(f.installs.len(), 2);
        let i = f
            .installs
            .iter()
            .find(|i| i.path == "/app/node_modules/sharp")
            .unwrap();
        assert_eq!((i.version.as_ref(), i.layout.as_str()), (None, "img-packages"));
        let a = &i.addons[0];
        assert_eq!(
            (a.platform.as_str(), a.libc.as_str(), a.version.as_ref()),
            ("darwin-arm64", "none", None)
        );
        assert_eq!(
            a.mismatch_reason.as_deref(),
            Some("built for darwin, not Linux (sharp looks for linux-x64)")
        );
        assert!(!i.usable);
        let x = f
            .installs
            .iter()
            .find(|i| i.path == "/x/node_modules/sharp")
            .unwrap();
        assert_eq!(
            (x.layout.as_str(), x.addons.len(), x.usable),
            ("unknown", 0, false)
        );
    }
}
