//! Next.js: version and the image optimizer settings of a standalone build.
//!
//! Where things are (next 15.5.14 / 16.1.7 `output: 'standalone'` builds):
//! * the version in `node_modules/next/package.json`, traced into the standalone folder;
//! * the resolved config under the `config` key of `.next/required-server-files.json` (other
//!   keys: `version`, `appDir`, `relativeAppDir`, `files`, `ignore`), beside `server.js`. The
//!   config is the resolved one: `images` holds every default, and keys whose default is
//!   `undefined` (such as `maximumDiskCacheSize`) are absent unless set.
//!
//! Defaults that changed (`dist/shared/lib/image-config.js`): `minimumCacheTTL` 60 in 15.x,
//! 14400 from 16.0.0; `maximumDiskCacheSize` exists from 15.5.14 in 15.x and from 16.1.7 in 16.x
//! (not in 16.0.x, nor 16.1.0–16.1.6).

use crate::tree::{FileTree, Interests, NodeId, ROOT};
use crate::version::Version;
use serde::Serialize;
use serde_json::Value;

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct NextFacts {
    pub(crate) version: Option<String>,
    /// Path of `node_modules/next/package.json` (canonical; empty when no Next.js package was
    /// found but a build manifest was).
    pub(crate) package: String,
    /// Path of `.next/required-server-files.json`.
    pub(crate) standalone: Option<String>,
    /// The resolved config was read from the manifest.
    pub(crate) config_found: bool,
    pub(crate) image: NextImageConfig,
    /// Next's own image optimizer serves images: Next is installed, images are not
    /// `unoptimized`, the loader is the default one and the app is not a static export.
    pub(crate) optimizer_in_use: bool,
    pub(crate) notes: Vec<String>,
}

impl NextFacts {
    /// The version, parsed.
    pub(crate) fn parsed_version(&self) -> Option<Version> {
        self.version.as_deref().and_then(Version::parse)
    }
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct NextImageConfig {
    /// Seconds: the configured value, else this version's default.
    pub(crate) minimum_cache_ttl: Option<u64>,
    /// The value is this version's default (unset, or set to the same number).
    pub(crate) minimum_cache_ttl_default: bool,
    /// As configured (`0` turns the disk cache off).
    pub(crate) maximum_disk_cache_size: Option<Value>,
    /// Whether this version has `maximumDiskCacheSize` (15.5.14+ in 15.x, 16.1.7+ in 16.x).
    pub(crate) disk_cache_size_supported: Option<bool>,
    pub(crate) unoptimized: bool,
    pub(crate) loader: Option<String>,
    pub(crate) custom_loader_file: bool,
    pub(crate) formats: Vec<String>,
}

/// The bound the image optimizer's disk cache has, as this version reads its settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DiskCacheBound {
    /// No `maximumDiskCacheSize`, or a version that does not have the setting.
    Unbounded,
    /// `maximumDiskCacheSize: 0`: no disk cache.
    Off,
    /// Bytes.
    Bytes(u64),
    /// A value that is not a number of bytes, as written.
    Unreadable(String),
}

impl NextImageConfig {
    /// The disk cache's bound: `maximumDiskCacheSize` where this version has it.
    pub(crate) fn disk_cache_bound(&self) -> DiskCacheBound {
        match (&self.maximum_disk_cache_size, self.disk_cache_size_supported) {
            (_, Some(false)) | (None, _) => DiskCacheBound::Unbounded,
            (Some(v), _) => match v.as_u64() {
                Some(0) => DiskCacheBound::Off,
                Some(n) => DiskCacheBound::Bytes(n),
                None => DiskCacheBound::Unreadable(v.to_string()),
            },
        }
    }
}

/// The first releases with `images.maximumDiskCacheSize`: 15.5.14 in 15.x, 16.1.7 in 16.x.
const DISK_CACHE_SIZE_FROM: [(u64, u64, u64); 2] = [(15, 5, 14), (16, 1, 7)];

/// Whether a release (no prerelease tag) has `images.maximumDiskCacheSize`.
fn release_has_disk_cache_size(v: &Version) -> bool {
    let [(a, b, c), (d, e, f)] = DISK_CACHE_SIZE_FROM;
    (v.at_least(a, b, c) && !v.at_least(d, 0, 0)) || v.at_least(d, e, f)
}

/// The first release of `version`'s line (or the next line) with `maximumDiskCacheSize`.
pub(crate) fn disk_cache_size_release(version: Option<&Version>) -> String {
    let [(a, b, c), (d, e, f)] = DISK_CACHE_SIZE_FROM;
    match version {
        Some(v) if v.major >= d => format!("{d}.{e}.{f}"),
        _ => format!("{a}.{b}.{c}"),
    }
}

/// Where `maximumDiskCacheSize` exists, in words: `15.5.14+ (15.x) and 16.1.7+ (16.x)`, or
/// `15.5.14+ or 16.1.7+` when `short`.
pub(crate) fn disk_cache_size_releases(short: bool) -> String {
    let [(a, b, c), (d, e, f)] = DISK_CACHE_SIZE_FROM;
    if short {
        format!("{a}.{b}.{c}+ or {d}.{e}.{f}+")
    } else {
        format!("{a}.{b}.{c}+ ({a}.x) and {d}.{e}.{f}+ ({d}.x)")
    }
}

/// Whether a version has `images.maximumDiskCacheSize`; `None` when that cannot be told.
///
/// A prerelease is judged by the releases around it, conservatively: it has the setting when
/// the release just before it already had it (`15.5.15-canary.1` after 15.5.14, `16.3.0-canary`
/// after 16.2.0, 17.x canaries after 16.2), it lacks it when its own release lacks it
/// (`16.1.5-canary`), and otherwise it is unknown (`15.5.14-canary.3`, `16.2.0-canary.2`: canaries
/// of the line the fix went into may predate it).
pub(crate) fn disk_cache_size_supported(v: &Version) -> Option<bool> {
    if !v.is_prerelease() {
        return Some(release_has_disk_cache_size(v));
    }
    if !release_has_disk_cache_size(&v.core()) {
        return Some(false);
    }
    let previous_has_it = match (v.minor, v.patch) {
        (_, p) if p > 0 => release_has_disk_cache_size(&Version::new(v.major, v.minor, p - 1)),
        (m, 0) if m > 0 => release_has_disk_cache_size(&Version::new(v.major, m - 1, 0)),
        // X.0.0 prereleases follow the last 16.x (16.2.0 has the setting).
        _ => v.major >= 17,
    };
    previous_has_it.then_some(true)
}

/// `images.minimumCacheTTL` when unset: 60 s before 16.0.0, 14400 s (4 h) from 16.0.0
/// (vercel/next.js#84105). `None` for 16.0.0 prereleases, which may have either.
pub(crate) fn default_minimum_cache_ttl(v: &Version) -> Option<u64> {
    if v.major < 16 {
        Some(60)
    } else if v.major == 16 && v.minor == 0 && v.patch == 0 && v.is_prerelease() {
        None
    } else {
        Some(14400)
    }
}

/// A Next.js package found in the tree.
struct Install {
    /// Canonical path of its package.json.
    path: String,
    version: Option<String>,
}

/// A build manifest found in the tree.
struct Manifest {
    path: String,
    /// The folder holding `.next`.
    root: String,
    root_id: NodeId,
    json: Option<Value>,
    has_server_js: bool,
}

/// What [`derive`] reads: `node_modules/next/package.json` and `.next/required-server-files.json`.
pub(crate) fn interests() -> Interests {
    Interests::default()
        .keep("**/node_modules/*/package.json", super::SMALL_FILE)
        .keep("**/.next/required-server-files.json", super::LARGE_FILE)
}

pub(crate) fn derive(tree: &FileTree) -> Option<NextFacts> {
    let (installs, manifests) = installs_and_manifests(tree);
    if installs.is_empty() && manifests.is_empty() {
        return None;
    }
    let mut notes = Vec::new();
    let manifest = running_manifest(tree, &manifests, &mut notes);
    let install = resolved_install(tree, manifest, &installs, &mut notes);
    let version_str = install.and_then(|i| i.version.clone());
    let version = version_str.as_deref().and_then(Version::parse);
    let config = manifest
        .and_then(|m| m.json.as_ref())
        .and_then(|j| j.get("config"))
        .filter(|c| c.is_object());
    let images = config.and_then(|c| c.get("images")).filter(|i| i.is_object());
    let image = image_config(images, version.as_ref());
    let static_export = config.and_then(|c| c.get("output")).and_then(Value::as_str) == Some("export");
    let optimizer_in_use = install.is_some()
        && !image.unoptimized
        && image.loader.as_deref() == Some("default")
        && !image.custom_loader_file
        && !static_export;
    config_notes(
        &image,
        config,
        manifest.is_some(),
        static_export,
        version_str.as_deref(),
        &mut notes,
    );
    Some(NextFacts {
        version: version_str,
        package: install.map(|i| i.path.clone()).unwrap_or_default(),
        standalone: manifest.map(|m| m.path.clone()),
        config_found: config.is_some(),
        image,
        optimizer_in_use,
        notes,
    })
}

/// Every `node_modules/next/package.json` and `.next/required-server-files.json` of the image.
fn installs_and_manifests(tree: &FileTree) -> (Vec<Install>, Vec<Manifest>) {
    let mut installs = Vec::new();
    let mut manifests = Vec::new();
    for id in tree.walk() {
        let n = tree.node(id);
        let parent = tree.parent(id);
        match n.name() {
            "package.json"
                if tree.node(parent).name() == "next"
                    && tree.node(tree.parent(parent)).name() == "node_modules" =>
            {
                let json = tree
                    .content(id)
                    .and_then(|c| serde_json::from_slice::<Value>(&c.bytes).ok());
                let version = json
                    .as_ref()
                    .and_then(|j| j.get("version"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                installs.push(Install {
                    path: tree.path_of(id),
                    version,
                });
            }
            "required-server-files.json" if tree.node(parent).name() == ".next" && n.is_file() => {
                let root_id = tree.parent(parent);
                let json = tree
                    .content(id)
                    .and_then(|c| serde_json::from_slice::<Value>(&c.bytes).ok());
                let has_server_js = tree.child(root_id, "server.js").is_some();
                manifests.push(Manifest {
                    path: tree.path_of(id),
                    root: tree.path_of(root_id),
                    root_id,
                    json,
                    has_server_js,
                });
            }
            _ => {}
        }
    }
    (installs, manifests)
}

/// The build manifest of the app that runs: beside a standalone server.js, then one whose root
/// resolves a Next package, then the first; the others are noted.
fn running_manifest<'m>(
    tree: &FileTree,
    manifests: &'m [Manifest],
    notes: &mut Vec<String>,
) -> Option<&'m Manifest> {
    let manifest_index = manifests
        .iter()
        .position(|m| m.has_server_js && m.json.is_some())
        .or_else(|| {
            manifests
                .iter()
                .position(|m| m.json.is_some() && resolve_next(tree, m.root_id).is_some())
        })
        .or_else(|| manifests.iter().position(|m| m.json.is_some()))
        .or(if manifests.is_empty() { None } else { Some(0) });
    let manifest = manifest_index.and_then(|i| manifests.get(i));
    for (i, m) in manifests.iter().enumerate() {
        if Some(i) == manifest_index {
            if m.json.is_none() {
                notes.push(format!("{} is not readable JSON (or was cut short)", m.path));
            }
        } else {
            notes.push(format!("another build manifest: {}", m.path));
        }
    }

    manifest
}

/// The Next.js install the app resolves from its root, else the first; the others are noted.
fn resolved_install<'i>(
    tree: &FileTree,
    manifest: Option<&Manifest>,
    installs: &'i [Install],
    notes: &mut Vec<String>,
) -> Option<&'i Install> {
    let resolved = manifest.and_then(|m| resolve_next(tree, m.root_id));
    let install_index = resolved
        .as_ref()
        .and_then(|p| installs.iter().position(|i| &i.path == p))
        .or(if installs.is_empty() { None } else { Some(0) });
    let install = install_index.and_then(|i| installs.get(i));
    for (i, other) in installs.iter().enumerate() {
        if Some(i) != install_index {
            notes.push(format!(
                "another Next.js install: {} ({})",
                other.path,
                other.version.as_deref().unwrap_or("version unknown")
            ));
        }
    }
    if let (Some(m), None) = (manifest, &resolved) {
        if install.is_some() {
            notes.push(format!(
                "no Next.js package resolves from {}; using {}",
                m.root,
                install.map_or("", |i| i.path.as_str())
            ));
        }
    }
    if install.is_none() {
        notes.push("no node_modules/next/package.json found: the version is unknown".to_string());
    } else if install.is_some_and(|i| i.version.is_none()) {
        notes.push("node_modules/next/package.json names no version (unreadable or cut short)".to_string());
    }

    install
}

/// The image optimizer's settings: the build manifest's `images`, else this version's defaults.
fn image_config(images: Option<&Value>, version: Option<&Version>) -> NextImageConfig {
    let mut image = NextImageConfig {
        disk_cache_size_supported: version.and_then(disk_cache_size_supported),
        ..Default::default()
    };
    let default_ttl = version.and_then(default_minimum_cache_ttl);
    let configured_ttl = images.and_then(|i| i.get("minimumCacheTTL")).and_then(json_u64);
    image.minimum_cache_ttl = configured_ttl.or(default_ttl);
    image.minimum_cache_ttl_default = match (configured_ttl, default_ttl) {
        (None, _) => true,
        (Some(c), Some(d)) => c == d,
        (Some(_), None) => false,
    };
    image.maximum_disk_cache_size = images
        .and_then(|i| i.get("maximumDiskCacheSize"))
        .filter(|v| !v.is_null())
        .cloned();
    image.unoptimized = images
        .and_then(|i| i.get("unoptimized"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let loader_file = images
        .and_then(|i| i.get("loaderFile"))
        .and_then(Value::as_str)
        .unwrap_or("");
    image.custom_loader_file = !loader_file.is_empty();
    image.loader = images
        .and_then(|i| i.get("loader"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| {
            Some(
                if image.custom_loader_file {
                    "custom"
                } else {
                    "default"
                }
                .to_string(),
            )
        });
    image.formats = match images.and_then(|i| i.get("formats")).and_then(Value::as_array) {
        Some(list) => list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        None => vec!["image/webp".to_string()],
    };

    image
}

/// What the notes say of the config: settings this version ignores, a static export, defaults
/// taken for want of a config, a custom cache handler or dist folder.
fn config_notes(
    image: &NextImageConfig,
    config: Option<&Value>,
    manifest_found: bool,
    static_export: bool,
    version: Option<&str>,
    notes: &mut Vec<String>,
) {
    if image.maximum_disk_cache_size.is_some() && image.disk_cache_size_supported == Some(false) {
        notes.push(format!(
            "images.maximumDiskCacheSize is set but Next.js {} ignores it (15.5.14+ and 16.1.7+ have it)",
            version.unwrap_or("?")
        ));
    }
    if static_export {
        notes.push("output: 'export': no server, so no image optimizer".to_string());
    }
    if config.is_none() && !manifest_found {
        notes.push("no .next/required-server-files.json: image settings are this version's defaults (next.config.* is not read)".to_string());
    } else if config.is_none() {
        notes.push(
            "the build manifest holds no config: image settings are this version's defaults".to_string(),
        );
    }
    if let Some(c) = config {
        if c.get("cacheHandler")
            .and_then(Value::as_str)
            .is_some_and(|h| !h.is_empty())
        {
            notes.push("a custom cacheHandler is configured (recent 16.x then keeps optimized images out of the disk cache)".to_string());
        }
        if let Some(dist) = c.get("distDir").and_then(Value::as_str).filter(|d| *d != ".next") {
            notes.push(format!(
                "distDir is {dist}: the optimizer caches in {dist}/cache/images"
            ));
        }
    }
}

fn json_u64(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1e19)
            .map(|f| f as u64)
    })
}

/// The canonical path of the `next/package.json` that `require('next')` finds from `dir`:
/// `node_modules/next` in `dir` and each folder above it (folders named node_modules
/// excepted), as Node's `Module._nodeModulePaths` lists them.
fn resolve_next(tree: &FileTree, dir: NodeId) -> Option<String> {
    let mut cur = dir;
    loop {
        if tree.node(cur).name() != "node_modules" {
            let base = tree.path_of(cur);
            let candidate = format!("{}/node_modules/next/package.json", base.trim_end_matches('/'));
            if let Ok(Some(id)) = tree.lookup(&candidate) {
                if tree.node(id).is_file() {
                    return Some(tree.path_of(id));
                }
            }
        }
        if cur == ROOT {
            return None;
        }
        cur = tree.parent(cur);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tree::{EntryKind, LayerEntry};

    const RSF_15: &str = include_str!("../../testdata/node/next-15.5.14-required-server-files.json");
    const RSF_16: &str = include_str!("../../testdata/node/next-16.1.7-required-server-files.json");

    fn entry(path: &str, kind: EntryKind, body: Option<&str>) -> LayerEntry {
        let e = LayerEntry::new(path, kind);
        match body {
            Some(b) => e.with_text(b),
            None => e,
        }
    }

    fn file(path: &str, body: &str) -> LayerEntry {
        entry(path, EntryKind::File, Some(body))
    }

    fn tree(entries: Vec<LayerEntry>) -> FileTree {
        // Kept for what this module declares, and nothing else.
        FileTree::from_entries(entries).unwrap().keeping(interests())
    }

    fn next_pkg(version: &str) -> String {
        format!(
            r#"{{"name":"next","version":"{version}","description":"The React Framework","main":"./dist/server/next.js","license":"MIT","bin":{{"next":"./dist/bin/next"}},"optionalDependencies":{{"sharp":"^0.34.3"}}}}"#
        )
    }

    /// The with-docker layout: the standalone folder copied to /app.
    fn standalone(version: &str, manifest: &str) -> FileTree {
        tree(vec![
            entry("app/server.js", EntryKind::File, None),
            file("app/package.json", r#"{"name":"web","private":true}"#),
            file("app/.next/required-server-files.json", manifest),
            file("app/node_modules/next/package.json", &next_pkg(version)),
            entry("app/.next/static/chunks/main.js", EntryKind::File, None),
        ])
    }

    #[test]
    fn disk_cache_size_by_version() {
        let s = |x: &str| disk_cache_size_supported(&Version::parse(x).unwrap());
        assert_eq!(s("15.5.13"), Some(false));
        assert_eq!(s("15.5.14"), Some(true));
        assert_eq!(s("15.5.29"), Some(true));
        assert_eq!(s("15.4.7"), Some(false));
        assert_eq!(s("16.0.0"), Some(false));
        assert_eq!(s("16.0.11"), Some(false));
        assert_eq!(s("16.1.6"), Some(false));
        assert_eq!(s("16.1.7"), Some(true));
        assert_eq!(s("16.2.0"), Some(true));
        assert_eq!(s("16.4.6"), Some(true));
        assert_eq!(s("14.2.30"), Some(false));
        // Prereleases, conservatively.
        assert_eq!(s("15.5.14-canary.3"), None);
        assert_eq!(s("16.1.7-rc.0"), None);
        assert_eq!(s("16.2.0-canary.2"), None);
        assert_eq!(s("15.5.13-canary.1"), Some(false));
        assert_eq!(s("16.1.5-canary.9"), Some(false));
        assert_eq!(s("15.5.15-canary.1"), Some(true));
        assert_eq!(s("16.3.0-canary.4"), Some(true));
        assert_eq!(s("17.0.0-canary.1"), Some(true));
        assert_eq!(
            default_minimum_cache_ttl(&Version::parse("15.5.14").unwrap()),
            Some(60)
        );
        assert_eq!(
            default_minimum_cache_ttl(&Version::parse("16.0.0").unwrap()),
            Some(14400)
        );
        assert_eq!(
            default_minimum_cache_ttl(&Version::parse("16.0.0-canary.5").unwrap()),
            None
        );
    }

    #[test]
    fn next_15_standalone_build() {
        let f = derive(&standalone("15.5.14", RSF_15)).unwrap();
        assert_eq!(f.version.as_deref(), Some("15.5.14"));
        assert_eq!(f.package, "/app/node_modules/next/package.json");
        assert_eq!(
            f.standalone.as_deref(),
            Some("/app/.next/required-server-files.json")
        );
        assert!(f.config_found);
        assert_eq!(f.image.minimum_cache_ttl, Some(60));
        assert!(f.image.minimum_cache_ttl_default);
        assert_eq!(f.image.maximum_disk_cache_size, None);
        assert_eq!(f.image.disk_cache_size_supported, Some(true));
        assert_eq!(f.image.formats, ["image/avif", "image/webp"]);
        assert_eq!(f.image.loader.as_deref(), Some("default"));
        assert!(!f.image.custom_loader_file && !f.image.unoptimized);
        assert!(f.optimizer_in_use);
        assert!(f.notes.is_empty(), "{:?}", f.notes);

        // The same build on 15.5.13: no disk bound at all.
        let f = derive(&standalone("15.5.13", RSF_15)).unwrap();
        assert_eq!(f.image.disk_cache_size_supported, Some(false));
    }

    #[test]
    fn next_16_standalone_build() {
        let f = derive(&standalone("16.1.7", RSF_16)).unwrap();
        assert_eq!(f.image.minimum_cache_ttl, Some(14400));
        assert!(f.image.minimum_cache_ttl_default);
        assert_eq!(f.image.maximum_disk_cache_size, Some(serde_json::json!(0)));
        assert_eq!(f.image.disk_cache_size_supported, Some(true));
        assert_eq!(f.image.formats, ["image/webp"]);
        assert!(f.optimizer_in_use);

        // 16.1.6 with the same config: the key is there but ignored.
        let f = derive(&standalone("16.1.6", RSF_16)).unwrap();
        assert_eq!(f.image.disk_cache_size_supported, Some(false));
        assert!(f.notes.iter().any(|n| n.contains("ignores it")), "{:?}", f.notes);
    }

    #[test]
    fn custom_loader_unoptimized_and_ttl() {
        let mut j: Value = serde_json::from_str(RSF_16).unwrap();
        j["config"]["images"]["loader"] = "custom".into();
        j["config"]["images"]["loaderFile"] = "./image-loader.js".into();
        j["config"]["images"]["minimumCacheTTL"] = 60.into();
        let f = derive(&standalone("16.2.0", &j.to_string())).unwrap();
        assert!(f.image.custom_loader_file);
        assert_eq!(f.image.loader.as_deref(), Some("custom"));
        assert!(!f.optimizer_in_use);
        assert_eq!(f.image.minimum_cache_ttl, Some(60));
        assert!(!f.image.minimum_cache_ttl_default);

        let mut j: Value = serde_json::from_str(RSF_15).unwrap();
        j["config"]["images"]["unoptimized"] = true.into();
        let f = derive(&standalone("15.5.14", &j.to_string())).unwrap();
        assert!(f.image.unoptimized && !f.optimizer_in_use);

        let mut j: Value = serde_json::from_str(RSF_15).unwrap();
        j["config"]["output"] = "export".into();
        let f = derive(&standalone("15.5.14", &j.to_string())).unwrap();
        assert!(!f.optimizer_in_use);
    }

    #[test]
    fn no_manifest_uses_version_defaults() {
        let t = tree(vec![file(
            "srv/node_modules/next/package.json",
            &next_pkg("16.0.3"),
        )]);
        let f = derive(&t).unwrap();
        assert!(!f.config_found);
        assert_eq!(f.standalone, None);
        assert_eq!(f.image.minimum_cache_ttl, Some(14400));
        assert!(f.image.minimum_cache_ttl_default);
        assert_eq!(f.image.disk_cache_size_supported, Some(false));
        assert_eq!(f.image.formats, ["image/webp"]);
        assert!(f.optimizer_in_use);
        assert!(f.notes.iter().any(|n| n.contains("required-server-files")));

        assert!(derive(&tree(vec![file("app/node_modules/react/package.json", "{}")])).is_none());
    }

    #[test]
    fn picks_the_install_beside_the_standalone_server() {
        let t = tree(vec![
            // A leftover full build folder and a tool's own next, both elsewhere.
            file("opt/tools/node_modules/next/package.json", &next_pkg("14.2.3")),
            file("build/.next/required-server-files.json", RSF_15),
            entry("srv/app/server.js", EntryKind::File, None),
            file("srv/app/.next/required-server-files.json", RSF_16),
            // pnpm: node_modules/next is a link into the store.
            file(
                "srv/node_modules/.pnpm/next@16.1.7_react@19.2.0/node_modules/next/package.json",
                &next_pkg("16.1.7"),
            ),
            entry(
                "srv/node_modules/next",
                EntryKind::Symlink(".pnpm/next@16.1.7_react@19.2.0/node_modules/next".into()),
                None,
            ),
        ]);
        let f = derive(&t).unwrap();
        assert_eq!(
            f.standalone.as_deref(),
            Some("/srv/app/.next/required-server-files.json")
        );
        assert_eq!(
            f.package,
            "/srv/node_modules/.pnpm/next@16.1.7_react@19.2.0/node_modules/next/package.json"
        );
        assert_eq!(f.version.as_deref(), Some("16.1.7"));
        assert_eq!(f.image.maximum_disk_cache_size, Some(serde_json::json!(0)));
        assert!(
            f.notes
                .iter()
                .any(|n| n.contains("/opt/tools/node_modules/next/package.json (14.2.3)")),
            "{:?}",
            f.notes
        );
        assert!(f
            .notes
            .iter()
            .any(|n| n.contains("/build/.next/required-server-files.json")));
    }

    #[test]
    fn hostile_json_never_panics() {
        for body in [
            "",
            "{",
            "[]",
            "null",
            r#"{"config":[]}"#,
            r#"{"config":{"images":"x"}}"#,
            r#"{"config":{"images":{"minimumCacheTTL":-5,"formats":[1,null],"loader":7}}}"#,
            "\u{0}\u{ff}",
        ] {
            let t = tree(vec![
                file("a/.next/required-server-files.json", body),
                file("a/node_modules/next/package.json", r#"{"version":12}"#),
            ]);
            let f = derive(&t).unwrap();
            assert_eq!(f.version, None);
            assert_eq!(f.image.minimum_cache_ttl, None);
            assert!(f.image.minimum_cache_ttl_default);
        }
        let t = tree(vec![file(
            "a/.next/required-server-files.json",
            r#"{"config":{"images":{"minimumCacheTTL":1e300}}}"#,
        )]);
        let f = derive(&t).unwrap();
        assert!(f.config_found);
        assert_eq!(f.package, "");
        assert!(!f.optimizer_in_use);
    }
}
