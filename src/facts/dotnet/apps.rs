//! .NET runtimes and apps: shared runtimes under a dotnet root, the runtimes self-contained apps
//! carry, one app per `<name>.runtimeconfig.json` (and per unclaimed `<name>.deps.json`), and the
//! NuGet packages the deps.json files list.

use super::json::parse_json;
use crate::tree::{Content, FileTree, NodeId, NodeKind, ROOT};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeSet;

/// Shared frameworks reported as runtimes.
pub(super) const NETCORE_APP: &str = "Microsoft.NETCore.App";
pub(super) const ASPNETCORE_APP: &str = "Microsoft.AspNetCore.App";

/// Folders of a dotnet root that hold the runtime and SDK themselves, never an app: their
/// `*.deps.json` and `*.runtimeconfig.json` describe .NET's own tools.
const INSTALL_DIRS: &[&str] = &[
    "shared",
    "sdk",
    "packs",
    "sdk-manifests",
    "templates",
    "library-packs",
    "host",
];

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct DotnetRuntime {
    /// `Microsoft.NETCore.App` or `Microsoft.AspNetCore.App`.
    pub(crate) name: String,
    /// The product version; empty for a self-contained app whose files name none.
    pub(crate) version: String,
    /// The version folder of a shared runtime, or the self-contained app's folder.
    pub(crate) path: String,
    pub(crate) self_contained: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct DotnetApp {
    pub(crate) name: String,
    pub(crate) dir: String,
    pub(crate) runtimeconfig: Option<String>,
    pub(crate) deps_json: Option<String>,
    /// `"Microsoft.NETCore.App 10.0.0"`: what runtimeconfig.json asks for or includes.
    pub(crate) frameworks: Vec<String>,
    pub(crate) self_contained: bool,
    /// `net10.0`: runtimeconfig's `tfm`, else derived from deps.json's `runtimeTarget`.
    pub(crate) target_framework: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
pub(crate) struct NugetPackage {
    pub(crate) name: String,
    pub(crate) version: String,
    /// The deps.json that lists it.
    pub(crate) deps_json: String,
}

/// What the walk of the tree finds of .NET: runtimes, apps, the packages their deps.json files
/// list, and the appsettings files (read by [`super::gss`]).
pub(super) struct Found {
    pub(crate) runtimes: Vec<DotnetRuntime>,
    pub(crate) apps: Vec<DotnetApp>,
    /// The `"type": "package"` entries of every app's deps.json, sorted, deduplicated per
    /// deps.json (.NET's own install folders left out).
    pub(crate) packages: Vec<NugetPackage>,
    pub(crate) appsettings: Vec<NodeId>,
}

pub(super) fn read(tree: &FileTree) -> Found {
    let found = Scan::of(tree);
    let roots = found.dotnet_roots(tree);
    let installed = |id: NodeId| {
        let path = tree.path_of(id);
        roots.iter().any(|r| {
            INSTALL_DIRS
                .iter()
                .any(|d| path.starts_with(&format!("{}/", join(r, d))))
        })
    };
    let configs: Vec<(NodeId, Option<RuntimeConfig>)> = found
        .runtimeconfigs
        .iter()
        .filter(|&&id| !installed(id))
        .map(|&id| (id, tree.content(id).and_then(RuntimeConfig::parse)))
        .collect();
    let deps: Vec<(NodeId, Option<DepsJson>)> = found
        .deps
        .iter()
        .filter(|&&id| !installed(id))
        .map(|&id| (id, tree.content(id).and_then(DepsJson::parse)))
        .collect();

    let mut runtimes = shared_runtimes(tree, &roots, &found.coreclr_dirs);
    runtimes.extend(self_contained_runtimes(
        tree,
        &found.coreclr_dirs,
        &configs,
        &deps,
    ));
    runtimes.sort_by(|a, b| (&a.path, &a.name).cmp(&(&b.path, &b.name)));
    runtimes.dedup();

    let apps = apps(tree, &found.coreclr_dirs, &configs, &deps);

    let mut packages: Vec<NugetPackage> = deps
        .iter()
        .filter_map(|(id, d)| Some((tree.path_of(*id), d.as_ref()?)))
        .flat_map(|(path, d)| {
            d.packages.iter().map(move |(name, version)| NugetPackage {
                name: name.clone(),
                version: version.clone(),
                deps_json: path.clone(),
            })
        })
        .collect();
    packages.sort_by(|a, b| (&a.deps_json, &a.name, &a.version).cmp(&(&b.deps_json, &b.name, &b.version)));
    packages.dedup();
    Found {
        runtimes,
        apps,
        packages,
        appsettings: found.appsettings,
    }
}

/// The paths one walk of the tree collects.
#[derive(Default)]
struct Scan {
    /// Folders that hold a `libcoreclr.so`.
    coreclr_dirs: BTreeSet<NodeId>,
    runtimeconfigs: Vec<NodeId>,
    deps: Vec<NodeId>,
    appsettings: Vec<NodeId>,
}

impl Scan {
    fn of(tree: &FileTree) -> Scan {
        let mut s = Scan::default();
        for id in tree.walk() {
            let node = tree.node(id);
            let name = node.name();
            match node.kind {
                NodeKind::File | NodeKind::Symlink(_) if name == "libcoreclr.so" => {
                    s.coreclr_dirs.insert(tree.parent(id));
                }
                NodeKind::File if name.ends_with(".runtimeconfig.json") => s.runtimeconfigs.push(id),
                NodeKind::File if name.ends_with(".deps.json") => s.deps.push(id),
                NodeKind::File if name.starts_with("appsettings") && name.ends_with(".json") => {
                    s.appsettings.push(id)
                }
                _ => {}
            }
        }
        s
    }

    /// Folders laid out as `<root>/shared/Microsoft.NETCore.App/<version>/libcoreclr.so`.
    fn dotnet_roots(&self, tree: &FileTree) -> BTreeSet<String> {
        self.coreclr_dirs
            .iter()
            .filter_map(|&d| shared_root(tree, d))
            .map(|r| tree.path_of(r))
            .collect()
    }
}

/// The dotnet root above a `shared/Microsoft.NETCore.App/<version>` folder.
fn shared_root(tree: &FileTree, version_dir: NodeId) -> Option<NodeId> {
    let framework = tree.parent(version_dir);
    let shared = tree.parent(framework);
    let ok = version_dir != ROOT
        && framework != ROOT
        && shared != ROOT
        && tree.node(framework).name() == NETCORE_APP
        && tree.node(shared).name() == "shared";
    ok.then(|| tree.parent(shared))
}

fn shared_runtimes(
    tree: &FileTree,
    roots: &BTreeSet<String>,
    coreclr_dirs: &BTreeSet<NodeId>,
) -> Vec<DotnetRuntime> {
    let mut out = Vec::new();
    for root in roots {
        for framework in [NETCORE_APP, ASPNETCORE_APP] {
            let Ok(Some(dir)) = tree.lookup(&format!("{}/shared/{framework}", root.trim_end_matches('/')))
            else {
                continue;
            };
            let NodeKind::Dir(versions) = &tree.node(dir).kind else {
                continue;
            };
            for (version, &vid) in versions {
                // ASP.NET Core has no libcoreclr of its own: a version folder with files in it.
                let real = match &tree.node(vid).kind {
                    NodeKind::Dir(children) if framework == NETCORE_APP => {
                        coreclr_dirs.contains(&vid) && !children.is_empty()
                    }
                    NodeKind::Dir(children) => !children.is_empty(),
                    _ => false,
                };
                if real {
                    out.push(DotnetRuntime {
                        name: framework.to_string(),
                        version: version.to_string(),
                        path: tree.path_of(vid),
                        self_contained: false,
                    });
                }
            }
        }
    }
    out
}

/// Runtimes that self-contained apps carry: a `libcoreclr.so` outside any shared framework. The
/// version comes from the app's `includedFrameworks`, else from a `runtimepack.*` library of its
/// deps.json.
fn self_contained_runtimes(
    tree: &FileTree,
    coreclr_dirs: &BTreeSet<NodeId>,
    configs: &[(NodeId, Option<RuntimeConfig>)],
    deps: &[(NodeId, Option<DepsJson>)],
) -> Vec<DotnetRuntime> {
    let mut out = Vec::new();
    for &dir in coreclr_dirs.iter().filter(|&&d| shared_root(tree, d).is_none()) {
        let path = tree.path_of(dir);
        let runtime = |(name, version): &(String, String)| DotnetRuntime {
            name: name.clone(),
            version: version.clone(),
            path: path.clone(),
            self_contained: true,
        };
        let in_dir = |id: &NodeId| tree.parent(*id) == dir;
        let mut found: Vec<DotnetRuntime> = configs
            .iter()
            .filter(|(id, _)| in_dir(id))
            .filter_map(|(_, c)| c.as_ref())
            .flat_map(|c| c.included.iter().map(runtime))
            .collect();
        if found.is_empty() {
            found = deps
                .iter()
                .filter(|(id, _)| in_dir(id))
                .filter_map(|(_, d)| d.as_ref())
                .flat_map(|d| d.runtime_packs.iter().map(runtime))
                .collect();
        }
        if found.is_empty() {
            found.push(runtime(&(NETCORE_APP.to_string(), String::new())));
        }
        out.extend(found);
    }
    out
}

/// One app per runtimeconfig.json, then one per deps.json that no runtimeconfig.json claims.
fn apps(
    tree: &FileTree,
    coreclr_dirs: &BTreeSet<NodeId>,
    configs: &[(NodeId, Option<RuntimeConfig>)],
    deps: &[(NodeId, Option<DepsJson>)],
) -> Vec<DotnetApp> {
    let deps_of = |dir: NodeId, name: &str| {
        let id = tree.child(dir, &format!("{name}.deps.json"))?;
        deps.iter().find(|(d, _)| *d == id)
    };
    let mut claimed = BTreeSet::new();
    let mut out = Vec::new();
    for (id, config) in configs {
        let Some(name) = tree
            .node(*id)
            .name()
            .strip_suffix(".runtimeconfig.json")
            .filter(|n| !n.is_empty())
        else {
            continue;
        };
        let dir = tree.parent(*id);
        let dep = deps_of(dir, name);
        if let Some((d, _)) = dep {
            claimed.insert(*d);
        }
        let dep_target = dep
            .and_then(|(_, d)| d.as_ref())
            .and_then(|d| d.target_framework());
        let (frameworks, included, tfm) = match config {
            Some(c) => (c.frameworks.as_slice(), c.included.as_slice(), c.tfm.clone()),
            None => (&[][..], &[][..], None),
        };
        out.push(DotnetApp {
            name: name.to_string(),
            dir: tree.path_of(dir),
            runtimeconfig: Some(tree.path_of(*id)),
            deps_json: dep.map(|(d, _)| tree.path_of(*d)),
            frameworks: frameworks
                .iter()
                .chain(included)
                .map(|(n, v)| format!("{n} {v}").trim_end().to_string())
                .collect(),
            self_contained: !included.is_empty() || coreclr_dirs.contains(&dir),
            target_framework: tfm.or(dep_target),
        });
    }
    for (id, d) in deps.iter().filter(|(id, _)| !claimed.contains(id)) {
        let Some(name) = tree
            .node(*id)
            .name()
            .strip_suffix(".deps.json")
            .filter(|n| !n.is_empty())
        else {
            continue;
        };
        let dir = tree.parent(*id);
        out.push(DotnetApp {
            name: name.to_string(),
            dir: tree.path_of(dir),
            runtimeconfig: None,
            deps_json: Some(tree.path_of(*id)),
            frameworks: Vec::new(),
            self_contained: coreclr_dirs.contains(&dir)
                || d.as_ref().is_some_and(|d| !d.runtime_packs.is_empty()),
            target_framework: d.as_ref().and_then(DepsJson::target_framework),
        });
    }
    out.sort_by(|a, b| (&a.dir, &a.name).cmp(&(&b.dir, &b.name)));
    out
}

/// What `<app>.runtimeconfig.json` says about frameworks.
#[derive(Debug, Default, PartialEq, Eq)]
struct RuntimeConfig {
    /// `framework` and `frameworks`: shared frameworks the app needs, as (name, version).
    frameworks: Vec<(String, String)>,
    /// `includedFrameworks`: what a self-contained app carries.
    included: Vec<(String, String)>,
    tfm: Option<String>,
}

impl RuntimeConfig {
    fn parse(content: &Content) -> Option<RuntimeConfig> {
        let v = parse_json(content)?;
        let opts = v.get("runtimeOptions")?;
        let reference = |f: &Value| {
            let name = f.get("name")?.as_str()?.to_string();
            let version = f
                .get("version")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            Some((name, version))
        };
        let list = |key: &str| -> Vec<(String, String)> {
            opts.get(key)
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(reference).collect())
                .unwrap_or_default()
        };
        let mut frameworks: Vec<_> = opts.get("framework").and_then(reference).into_iter().collect();
        frameworks.extend(list("frameworks"));
        Some(RuntimeConfig {
            frameworks,
            included: list("includedFrameworks"),
            tfm: opts.get("tfm").and_then(Value::as_str).map(str::to_string),
        })
    }
}

/// What `<app>.deps.json` says: its target and the libraries it lists.
#[derive(Debug, Default, PartialEq, Eq)]
struct DepsJson {
    /// `runtimeTarget.name`, e.g. `.NETCoreApp,Version=v10.0` or `.NETCoreApp,Version=v10.0/linux-x64`.
    runtime_target: Option<String>,
    /// `"type": "package"` libraries as (id, version).
    packages: BTreeSet<(String, String)>,
    /// `"type": "runtimepack"` libraries as (framework, version): a self-contained app's runtime.
    runtime_packs: Vec<(String, String)>,
}

impl DepsJson {
    fn parse(content: &Content) -> Option<DepsJson> {
        let v = parse_json(content)?;
        let mut d = DepsJson {
            runtime_target: v
                .pointer("/runtimeTarget/name")
                .and_then(Value::as_str)
                .map(str::to_string),
            ..DepsJson::default()
        };
        for (key, library) in v
            .get("libraries")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let Some((id, version)) = key.split_once('/') else {
                continue;
            };
            match library.get("type").and_then(Value::as_str) {
                Some(t) if t.eq_ignore_ascii_case("package") => {
                    d.packages.insert((id.to_string(), version.to_string()));
                }
                // `runtimepack.Microsoft.NETCore.App.Runtime.linux-x64/10.0.0`
                Some(t) if t.eq_ignore_ascii_case("runtimepack") => {
                    let pack = id.strip_prefix("runtimepack.").unwrap_or(id);
                    let framework = pack.split_once(".Runtime.").map_or(pack, |(f, _)| f);
                    d.runtime_packs.push((framework.to_string(), version.to_string()));
                }
                _ => {}
            }
        }
        Some(d)
    }

    /// `.NETCoreApp,Version=v10.0[/rid]` → `net10.0` (`netcoreapp3.1` before 5.0).
    fn target_framework(&self) -> Option<String> {
        let target = self.runtime_target.as_deref()?;
        let version = target.split('/').next()?.strip_prefix(".NETCoreApp,Version=v")?;
        let major: u32 = version.split('.').next()?.parse().ok()?;
        Some(if major >= 5 {
            format!("net{version}")
        } else {
            format!("netcoreapp{version}")
        })
    }
}

fn join(dir: &str, name: &str) -> String {
    format!("{}/{name}", dir.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const WEBAPI_DEPS: &[u8] = include_bytes!("../../../testdata/dotnet/WebApi.deps.json");

    fn content(bytes: &[u8]) -> Content {
        Content {
            bytes: bytes.to_vec(),
            truncated: false,
        }
    }

    #[test]
    fn deps_json_lists_packages_not_projects() {
        let d = DepsJson::parse(&content(WEBAPI_DEPS)).unwrap();
        assert_eq!(d.runtime_target.as_deref(), Some(".NETCoreApp,Version=v10.0"));
        assert_eq!(d.target_framework().as_deref(), Some("net10.0"));
        let ids: Vec<String> = d.packages.iter().map(|(n, v)| format!("{n}/{v}")).collect();
        assert_eq!(
            ids,
            [
                "Microsoft.EntityFrameworkCore/10.0.0",
                "Microsoft.EntityFrameworkCore.Abstractions/10.0.0",
                "Microsoft.EntityFrameworkCore.Relational/10.0.0",
                "Npgsql/10.0.3",
                "Npgsql.EntityFrameworkCore.PostgreSQL/10.0.0",
            ]
        );
        assert!(d.runtime_packs.is_empty());

        let rid_specific =
            br#"{"runtimeTarget": {"name": ".NETCoreApp,Version=v3.1/linux-x64"}, "libraries": {
            "runtimepack.Microsoft.AspNetCore.App.Runtime.linux-x64/3.1.32": {"type": "runtimepack"},
            "runtimepack.Microsoft.NETCore.App.Runtime.linux-x64/3.1.32": {"type": "runtimepack"},
            "Legacy.Dll/1.0.0": {"type": "reference"}, "NoSlash": {"type": "package"}}}"#;
        let d = DepsJson::parse(&content(rid_specific)).unwrap();
        assert_eq!(d.target_framework().as_deref(), Some("netcoreapp3.1"));
        assert_eq!(
            d.runtime_packs,
            [
                (ASPNETCORE_APP.to_string(), "3.1.32".to_string()),
                (NETCORE_APP.to_string(), "3.1.32".to_string())
            ]
        );
        assert!(d.packages.is_empty());
    }

    #[test]
    fn runtimeconfig_single_framework() {
        let rc = RuntimeConfig::parse(&content(
            br#"{"runtimeOptions": {"framework": {"name": "Microsoft.AspNetCore.App", "version": "8.0.0"}, "configProperties": {}}}"#,
        ))
        .unwrap();
        assert_eq!(rc.frameworks, [(ASPNETCORE_APP.to_string(), "8.0.0".to_string())]);
        assert!(rc.included.is_empty() && rc.tfm.is_none());
        assert_eq!(RuntimeConfig::parse(&content(br#"{"other": 1}"#)), None);
    }
}
