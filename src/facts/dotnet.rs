//! .NET: runtimes, apps, NuGet packages (Npgsql), GSS encryption settings, Kerberos.
//!
//! Everything comes from the files the layer reader keeps (`*.deps.json`, `*.runtimeconfig.json`,
//! `appsettings*.json`), the paths of the others (`libcoreclr.so`) and the config Env.
//!
//! Layout facts (dotnet/dotnet-docker `src/runtime/10.0/noble/amd64/Dockerfile`; dotnet/sdk
//! `documentation/specs/runtime-configuration-file.md`):
//! * a shared runtime is `<dotnet root>/shared/Microsoft.NETCore.App/<version>/libcoreclr.so`, the
//!   folder name being the product version (the string inside libcoreclr is a file version);
//!   ASP.NET Core sits beside it in `shared/Microsoft.AspNetCore.App/<version>/`;
//! * an app is `<name>.runtimeconfig.json` (`framework`/`frameworks`: framework-dependent;
//!   `includedFrameworks`: self-contained, with `libcoreclr.so` in the same folder) next to
//!   `<name>.deps.json`, whose `libraries` map `"Id/Version"` to `{"type": "package" | "project" |
//!   "runtimepack" | "reference", …}`.
//!
//! GSS encryption (npgsql/npgsql, `NpgsqlConnector.GetGssEncMode` in 10.0.x): the connection
//! string's `GSS Encryption Mode` wins; without it `PGGSSENCMODE` counts when `Enum.TryParse`
//! (ignoring case) accepts it; otherwise the default applies, `Prefer` since 10.0.0.

use super::loader::Loader;
use super::Env;
use crate::tree::{Content, FileTree, NodeId, NodeKind, ROOT};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeSet;

/// The library .NET's GSS shim loads (dotnet/runtime#59526); official .NET 8+ images lack it.
pub const GSSAPI_LIBRARY: &str = "libgssapi_krb5.so.2";

/// Shared frameworks reported as runtimes.
const NETCORE_APP: &str = "Microsoft.NETCore.App";
const ASPNETCORE_APP: &str = "Microsoft.AspNetCore.App";

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

#[derive(Clone, Debug, Default, Serialize)]
pub struct DotnetFacts {
    /// Shared runtimes and the runtimes self-contained apps carry.
    pub runtimes: Vec<DotnetRuntime>,
    pub apps: Vec<DotnetApp>,
    /// The `"type": "package"` entries of every app's deps.json `libraries`, sorted, deduplicated
    /// per deps.json (.NET's own install folders left out).
    pub packages: Vec<NugetPackage>,
    /// The Npgsql packages among `packages`.
    pub npgsql: Vec<NugetPackage>,
    pub gss: GssSettings,
    pub gssapi: GssapiLibrary,
}

impl DotnetFacts {
    /// Whether the image holds any .NET runtime or app.
    pub fn present(&self) -> bool {
        !self.runtimes.is_empty() || !self.apps.is_empty()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DotnetRuntime {
    /// `Microsoft.NETCore.App` or `Microsoft.AspNetCore.App`.
    pub name: String,
    /// The product version; empty for a self-contained app whose files name none.
    pub version: String,
    /// The version folder of a shared runtime, or the self-contained app's folder.
    pub path: String,
    pub self_contained: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DotnetApp {
    pub name: String,
    pub dir: String,
    pub runtimeconfig: Option<String>,
    pub deps_json: Option<String>,
    /// `"Microsoft.NETCore.App 10.0.0"`: what runtimeconfig.json asks for or includes.
    pub frameworks: Vec<String>,
    pub self_contained: bool,
    /// `net10.0`: runtimeconfig's `tfm`, else derived from deps.json's `runtimeTarget`.
    pub target_framework: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct NugetPackage {
    pub name: String,
    pub version: String,
    /// The deps.json that lists it.
    pub deps_json: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GssSettings {
    /// `PGGSSENCMODE` from the config Env, as written.
    pub pggssencmode: Option<String>,
    /// Npgsql-style connection strings found in appsettings files and in the config Env.
    pub connection_strings: Vec<ConnectionString>,
    /// GSS encryption is off for every connection Npgsql would open that the image shows.
    pub disabled: bool,
    /// Why `disabled` is what it is, in one sentence.
    pub reason: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ConnectionString {
    /// `<file>#<configuration key>` (e.g. `/app/appsettings.json#ConnectionStrings:Default`), or
    /// `env <NAME>`.
    pub source: String,
    /// The `GSS Encryption Mode` value (quotes removed), `None` when the key is absent.
    pub gss_encryption_mode: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GssapiLibrary {
    /// The file the image's loader would open, when there is one.
    pub resolved: Option<String>,
    pub searched_as: String,
}

pub fn derive(loader: &Loader, env: &Env) -> DotnetFacts {
    let tree = loader.tree();
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
        .map(|&id| {
            (
                id,
                tree.node(id).content.as_deref().and_then(RuntimeConfig::parse),
            )
        })
        .collect();
    let deps: Vec<(NodeId, Option<DepsJson>)> = found
        .deps
        .iter()
        .filter(|&&id| !installed(id))
        .map(|&id| (id, tree.node(id).content.as_deref().and_then(DepsJson::parse)))
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
    let npgsql = packages
        .iter()
        .filter(|p| p.name.eq_ignore_ascii_case("Npgsql"))
        .cloned()
        .collect();

    let gss = gss_settings(tree, env, &found.appsettings);
    let gssapi = GssapiLibrary {
        resolved: loader.resolve(GSSAPI_LIBRARY, None).path,
        searched_as: GSSAPI_LIBRARY.to_string(),
    };
    DotnetFacts {
        runtimes,
        apps,
        packages,
        npgsql,
        gss,
        gssapi,
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

// ---------------------------------------------------------------------------------------------
// GSS encryption settings

/// Npgsql's `GssEncryptionMode` values (`NpgsqlConnectionStringBuilder.cs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GssMode {
    Disable,
    Prefer,
    Require,
}

impl GssMode {
    /// As `Enum.Parse`/`Enum.TryParse` with `ignoreCase: true` read a name (surrounding white
    /// space ignored). Numeric spellings are not recognised here.
    fn parse(s: &str) -> Option<GssMode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "disable" => Some(GssMode::Disable),
            "prefer" => Some(GssMode::Prefer),
            "require" => Some(GssMode::Require),
            _ => None,
        }
    }
}

/// A connection string found, with what decides whether it is in force.
struct Found {
    public: ConnectionString,
    /// The configuration key an appsettings value sits at (lower case), which an environment
    /// variable for the same key replaces.
    file_key: Option<String>,
}

fn gss_settings(tree: &FileTree, env: &Env, appsettings: &[NodeId]) -> GssSettings {
    let mut found = Vec::new();
    for &id in appsettings {
        let path = tree.path_of(id);
        let Some(json) = tree.node(id).content.as_deref().and_then(parse_json) else {
            continue;
        };
        let mut keys = Vec::new();
        collect_json_strings(&json, &mut keys, &mut |key, value| {
            let in_connection_strings = key
                .first()
                .is_some_and(|k| k.eq_ignore_ascii_case("ConnectionStrings"));
            if let Some(pairs) = postgres_connection_string(value, !in_connection_strings) {
                let key = key.join(":");
                found.push(Found {
                    public: ConnectionString {
                        source: format!("{path}#{key}"),
                        gss_encryption_mode: gss_value(&pairs),
                    },
                    file_key: Some(key.to_lowercase()),
                });
            }
        });
    }
    for (name, value) in env.iter() {
        let in_connection_strings = env_config_key(name).starts_with("connectionstrings:");
        if let Some(pairs) = postgres_connection_string(value, !in_connection_strings) {
            found.push(Found {
                public: ConnectionString {
                    source: format!("env {name}"),
                    gss_encryption_mode: gss_value(&pairs),
                },
                file_key: None,
            });
        }
    }

    // The configuration's environment-variable provider is added after the JSON files, so a
    // variable for the same key replaces the file's value (Microsoft.Extensions.Configuration).
    let env_keys: BTreeSet<String> = env.iter().map(|(k, _)| env_config_key(k)).collect();
    let overridden = found
        .iter()
        .filter(|f| f.file_key.as_ref().is_some_and(|k| env_keys.contains(k)))
        .count();
    let in_force: Vec<&ConnectionString> = found
        .iter()
        .filter(|f| !f.file_key.as_ref().is_some_and(|k| env_keys.contains(k)))
        .map(|f| &f.public)
        .collect();
    let pggssencmode = env.get("PGGSSENCMODE").map(str::to_string);
    let (disabled, mut reason) = decide(pggssencmode.as_deref(), &in_force);
    if overridden > 0 {
        reason.push_str(&format!(
            " ({overridden} appsettings value{} replaced by a config Env variable of the same key not counted)",
            if overridden == 1 { "" } else { "s" }
        ));
    }
    GssSettings {
        pggssencmode,
        connection_strings: found.into_iter().map(|f| f.public).collect(),
        disabled,
        reason,
    }
}

/// Whether GSS encryption is off for every connection string in force, and why.
fn decide(pggssencmode: Option<&str>, in_force: &[&ConnectionString]) -> (bool, String) {
    let env_mode = pggssencmode.and_then(GssMode::parse);
    let env_text = match (pggssencmode, env_mode) {
        (None, _) => "PGGSSENCMODE is unset".to_string(),
        (Some(v), None) => {
            format!("PGGSSENCMODE={v} is not a GssEncryptionMode name (Disable, Prefer, Require)")
        }
        (Some(v), Some(_)) => format!("PGGSSENCMODE={v}"),
    };
    if in_force.is_empty() {
        return match env_mode {
            Some(GssMode::Disable) => (
                true,
                format!("{env_text} in the config Env turns GSS encryption off and no connection string in the image sets GssEncryptionMode"),
            ),
            Some(mode) => (false, format!("{env_text} selects {mode:?} and no connection string in the image sets GssEncryptionMode")),
            None => (
                false,
                format!("{env_text} and no connection string in the image sets GssEncryptionMode, so Npgsql 10 uses its default, Prefer"),
            ),
        };
    }
    for c in in_force {
        match explicit(c) {
            Some(v) if GssMode::parse(v) == Some(GssMode::Disable) => {}
            Some(v) => {
                let why = match GssMode::parse(v) {
                    Some(_) if pggssencmode.is_some() => "which takes precedence over PGGSSENCMODE",
                    Some(_) => "which keeps GSS encryption on",
                    None => "which is not Disable, Prefer or Require",
                };
                return (false, format!("{} sets GSS Encryption Mode={v}, {why}", c.source));
            }
            None if env_mode == Some(GssMode::Disable) => {}
            None => {
                let tail = match env_mode {
                    Some(mode) => format!("{env_text} selects {mode:?}"),
                    None => format!("{env_text}, so Npgsql 10 uses its default, Prefer"),
                };
                return (
                    false,
                    format!("{} does not set GssEncryptionMode and {tail}", c.source),
                );
            }
        }
    }
    let n = in_force.len();
    let (all, s) = match n {
        1 => ("the only connection string found".to_string(), "s"),
        _ => (format!("all {n} connection strings found"), ""),
    };
    if in_force.iter().all(|c| explicit(c).is_some()) {
        (true, format!("{all} set{s} GssEncryptionMode=Disable"))
    } else {
        (true, format!("{all} set{s} GssEncryptionMode=Disable or leave{s} it to {env_text}, which turns GSS encryption off"))
    }
}

/// The mode a connection string itself sets; Npgsql removes a key written with an empty value,
/// which leaves the mode to the next tier.
fn explicit(c: &ConnectionString) -> Option<&str> {
    c.gss_encryption_mode.as_deref().filter(|v| !v.trim().is_empty())
}

/// The configuration key an environment variable sets: `__` is the section separator, and the
/// Azure App Service prefixes (`POSTGRESQLCONNSTR_x`, `CUSTOMCONNSTR_x`, …) become
/// `ConnectionStrings:x` (Microsoft.Extensions.Configuration.EnvironmentVariables,
/// `EnvironmentVariablesConfigurationProvider.Load`). Lower case: keys compare ignoring case.
fn env_config_key(name: &str) -> String {
    const PREFIXES: &[&str] = &[
        "MYSQLCONNSTR_",
        "SQLAZURECONNSTR_",
        "SQLCONNSTR_",
        "POSTGRESQLCONNSTR_",
        "APIHUBCONNSTR_",
        "DOCDBCONNSTR_",
        "EVENTHUBCONNSTR_",
        "NOTIFICATIONHUBCONNSTR_",
        "REDISCACHECONNSTR_",
        "SERVICEBUSCONNSTR_",
        "CUSTOMCONNSTR_",
    ];
    let normalize = |k: &str| k.replace("__", ":").to_lowercase();
    for p in PREFIXES {
        if let (Some(head), Some(rest)) = (name.get(..p.len()), name.get(p.len()..)) {
            if head.eq_ignore_ascii_case(p) {
                return format!("connectionstrings:{}", normalize(rest));
            }
        }
    }
    normalize(name)
}

/// Calls `f` with the configuration key path and value of every string in a JSON document
/// (array items are keyed by index, as the JSON configuration provider does).
fn collect_json_strings(v: &Value, key: &mut Vec<String>, f: &mut impl FnMut(&[String], &str)) {
    match v {
        Value::String(s) => f(key, s),
        Value::Object(map) => {
            for (k, child) in map {
                key.push(k.clone());
                collect_json_strings(child, key, f);
                key.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                key.push(i.to_string());
                collect_json_strings(child, key, f);
                key.pop();
            }
        }
        _ => {}
    }
}

/// The pairs of `s` when it reads as a PostgreSQL connection string for Npgsql: it parses and
/// names a `Host` (or its synonym `Server`). `strict` (values outside a `ConnectionStrings`
/// section) also asks for a `;`, so that a lone `Host=x` setting is not taken for one.
fn postgres_connection_string(s: &str, strict: bool) -> Option<Vec<(String, Option<String>)>> {
    if strict && !s.contains(';') {
        return None;
    }
    let pairs = parse_connection_string(s)?;
    pairs
        .iter()
        .any(|(k, _)| k == "host" || k == "server")
        .then_some(pairs)
}

/// The `GSS Encryption Mode` value of a parsed connection string; the last one wins, as the
/// builder sets keys in order. A key without a value reads as an empty string.
fn gss_value(pairs: &[(String, Option<String>)]) -> Option<String> {
    pairs
        .iter()
        .rev()
        .find(|(k, _)| is_gss_key(k))
        .map(|(_, v)| v.clone().unwrap_or_default())
}

/// Npgsql registers the display name and the property name, upper-cased, and looks keywords up
/// upper-cased: `GSS Encryption Mode` and `GssEncryptionMode` in any case, nothing else
/// (`NpgsqlConnectionStringBuilderSourceGenerator`). `key` is already lower case.
fn is_gss_key(key: &str) -> bool {
    key == "gss encryption mode" || key == "gssencryptionmode"
}

/// Splits a connection string into (lower-case key, value) pairs as
/// `System.Data.Common.DbConnectionOptions` does without ODBC rules (`GetKeyValuePair`), which
/// `DbConnectionStringBuilder.ConnectionString` and so Npgsql use: `;`-separated `key=value`,
/// `==` for a `=` inside a key, values in `"…"` or `'…'` with the quote doubled inside, white
/// space trimmed around unquoted values. A value-less `key=` gives `None`. `None` overall for a
/// string the builder rejects.
fn parse_connection_string(s: &str) -> Option<Vec<(String, Option<String>)>> {
    let chars: Vec<char> = s.chars().collect();
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < chars.len() {
        let (next, pair) = key_value_pair(&chars, pos)?;
        match pair {
            Some(p) => out.push(p),
            None => break,
        }
        pos = next;
    }
    Some(out)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    NothingYet,
    Key,
    KeyEqual,
    KeyEnd,
    UnquotedValue,
    DoubleQuoteValue,
    DoubleQuoteValueQuote,
    SingleQuoteValue,
    SingleQuoteValueQuote,
    QuotedValueEnd,
    NullTermination,
}

type Pair = (String, Option<String>);

/// One `key=value` from `pos`: the position after it and the pair (`None` when only white space
/// and separators were left). `None` overall for a syntax error.
fn key_value_pair(chars: &[char], mut pos: usize) -> Option<(usize, Option<Pair>)> {
    use State::*;
    let mut buffer = String::new();
    let mut key: Option<String> = None;
    let mut value: Option<String> = None;
    let mut state = NothingYet;
    let mut current = '\0';
    'chars: while pos < chars.len() {
        current = chars[pos];
        // One character can pass through two states (the C# `goto case`): loop until it is
        // consumed (`continue 'chars` after advancing), appended (`break`), or ends the pair.
        loop {
            match state {
                NothingYet => {
                    if current == ';' || current.is_whitespace() {
                        pos += 1;
                        continue 'chars;
                    }
                    if current == '\0' {
                        state = NullTermination;
                        pos += 1;
                        continue 'chars;
                    }
                    if current.is_control() {
                        return None;
                    }
                    if current == '=' {
                        state = KeyEqual;
                        pos += 1;
                        continue 'chars;
                    }
                    state = Key;
                    break;
                }
                Key => {
                    if current == '=' {
                        state = KeyEqual;
                        pos += 1;
                        continue 'chars;
                    }
                    if !current.is_whitespace() && current.is_control() {
                        return None;
                    }
                    break;
                }
                KeyEqual => {
                    if current == '=' {
                        // `==`: a literal `=` in the key.
                        state = Key;
                        break;
                    }
                    let name = key_name(&buffer);
                    if name.is_empty() {
                        return None;
                    }
                    key = Some(name);
                    buffer.clear();
                    state = KeyEnd;
                    continue;
                }
                KeyEnd => {
                    if current.is_whitespace() {
                        pos += 1;
                        continue 'chars;
                    }
                    if current == '\'' {
                        state = SingleQuoteValue;
                        pos += 1;
                        continue 'chars;
                    }
                    if current == '"' {
                        state = DoubleQuoteValue;
                        pos += 1;
                        continue 'chars;
                    }
                    if current == ';' || current == '\0' {
                        break 'chars;
                    }
                    if current.is_control() {
                        return None;
                    }
                    state = UnquotedValue;
                    break;
                }
                UnquotedValue => {
                    if !current.is_whitespace() && (current.is_control() || current == ';') {
                        break 'chars;
                    }
                    break;
                }
                DoubleQuoteValue | SingleQuoteValue => {
                    let quote = if state == DoubleQuoteValue { '"' } else { '\'' };
                    if current == quote {
                        state = if state == DoubleQuoteValue {
                            DoubleQuoteValueQuote
                        } else {
                            SingleQuoteValueQuote
                        };
                        pos += 1;
                        continue 'chars;
                    }
                    if current == '\0' {
                        return None;
                    }
                    break;
                }
                DoubleQuoteValueQuote | SingleQuoteValueQuote => {
                    let quote = if state == DoubleQuoteValueQuote { '"' } else { '\'' };
                    if current == quote {
                        // A doubled quote stands for one.
                        state = if state == DoubleQuoteValueQuote {
                            DoubleQuoteValue
                        } else {
                            SingleQuoteValue
                        };
                        break;
                    }
                    value = Some(buffer.clone());
                    state = QuotedValueEnd;
                    continue;
                }
                QuotedValueEnd => {
                    if current.is_whitespace() {
                        pos += 1;
                        continue 'chars;
                    }
                    if current == ';' {
                        break 'chars;
                    }
                    if current == '\0' {
                        state = NullTermination;
                        pos += 1;
                        continue 'chars;
                    }
                    return None;
                }
                NullTermination => {
                    if current == '\0' || current.is_whitespace() {
                        pos += 1;
                        continue 'chars;
                    }
                    return None;
                }
            }
        }
        buffer.push(current);
        pos += 1;
    }
    match state {
        Key | DoubleQuoteValue | SingleQuoteValue => return None,
        KeyEqual => {
            let name = key_name(&buffer);
            if name.is_empty() {
                return None;
            }
            key = Some(name);
        }
        UnquotedValue => {
            let v = buffer.trim();
            if v.ends_with(['\'', '"']) {
                return None;
            }
            value = Some(v.to_string());
        }
        DoubleQuoteValueQuote | SingleQuoteValueQuote | QuotedValueEnd => value = Some(buffer),
        NothingYet | KeyEnd | NullTermination => {}
    }
    if current == ';' && pos < chars.len() {
        pos += 1;
    }
    Some((pos, key.map(|k| (k, value))))
}

/// Trailing white space trimmed, lower-cased (`GetKeyName`).
fn key_name(buffer: &str) -> String {
    buffer.trim_end().to_lowercase()
}

// ---------------------------------------------------------------------------------------------
// JSON

/// Parses kept JSON. A truncated file is not parsed (its end is missing). A UTF-8 byte order
/// mark is skipped, and comments and trailing commas are tolerated, as the configuration
/// provider reads appsettings files (`JsonCommentHandling.Skip`, `AllowTrailingCommas`).
fn parse_json(content: &Content) -> Option<Value> {
    if content.truncated {
        return None;
    }
    let bytes = content
        .bytes
        .strip_prefix(b"\xEF\xBB\xBF")
        .unwrap_or(&content.bytes);
    serde_json::from_slice(bytes)
        .ok()
        .or_else(|| serde_json::from_slice(&strip_trailing_commas(&strip_comments(bytes))).ok())
}

/// `//` and `/* */` comments outside strings, replaced by a space.
fn strip_comments(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    let mut in_string = false;
    while i < input.len() {
        let b = input[i];
        if in_string {
            out.push(b);
            if b == b'\\' {
                if let Some(&next) = input.get(i + 1) {
                    out.push(next);
                    i += 1;
                }
            } else if b == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        match (b, input.get(i + 1)) {
            (b'/', Some(b'/')) => {
                while i < input.len() && input[i] != b'\n' {
                    i += 1;
                }
                out.push(b' ');
            }
            (b'/', Some(b'*')) => {
                i += 2;
                while i < input.len() && !(input[i] == b'*' && input.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                i = (i + 2).min(input.len());
                out.push(b' ');
            }
            _ => {
                in_string = b == b'"';
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// Commas outside strings that only white space separates from a closing `}` or `]`.
fn strip_trailing_commas(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in input.iter().enumerate() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b',' {
            let next = input[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
            if matches!(next, Some(b'}' | b']')) {
                continue;
            }
        }
        out.push(b);
    }
    out
}

fn join(dir: &str, name: &str) -> String {
    format!("{}/{name}", dir.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::facts::libc::{Libc, LibcFamily};
    use crate::facts::platform::PlatformFacts;
    use crate::platform::Platform;
    use crate::tree::{EntryKind, LayerEntry};

    const WEBAPI_DEPS: &[u8] = include_bytes!("../../testdata/dotnet/WebApi.deps.json");
    const WEBAPI_RUNTIMECONFIG: &[u8] = include_bytes!("../../testdata/dotnet/WebApi.runtimeconfig.json");
    const APPSETTINGS: &[u8] = include_bytes!("../../testdata/dotnet/appsettings.json");

    #[derive(Clone, Copy)]
    enum F<'a> {
        File(&'a str, &'a [u8]),
        Truncated(&'a str, &'a [u8]),
        Link(&'a str, &'a str),
    }

    fn tree(files: &[F]) -> FileTree {
        let entry = |path: &str, kind: EntryKind, content: Option<Content>| LayerEntry {
            path: path
                .split('/')
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect(),
            kind,
            mode: 0o644,
            uid: 0,
            gid: 0,
            size: content.as_ref().map_or(0, |c| c.bytes.len() as u64),
            content,
            elf: None,
        };
        let entries = files
            .iter()
            .map(|f| match *f {
                F::File(p, b) => entry(
                    p,
                    EntryKind::File,
                    Some(Content {
                        bytes: b.to_vec(),
                        truncated: false,
                    }),
                ),
                F::Truncated(p, b) => entry(
                    p,
                    EntryKind::File,
                    Some(Content {
                        bytes: b.to_vec(),
                        truncated: true,
                    }),
                ),
                F::Link(p, t) => entry(p, EntryKind::Symlink(t.to_string()), None),
            })
            .collect();
        FileTree::from_entries(entries).unwrap()
    }

    fn facts(files: &[F], env: &[&str]) -> DotnetFacts {
        let t = tree(files);
        let env = Env::from_pairs(env.iter().copied());
        let libc = Libc {
            family: LibcFamily::Glibc,
            version: None,
            entrypoint: None,
            present: vec![LibcFamily::Glibc],
            loader: None,
            evidence: Vec::new(),
        };
        let platform = PlatformFacts {
            declared: Platform::linux_amd64(),
            binaries: None,
            elf_architectures: Default::default(),
            mismatch: false,
        };
        let loader = Loader::new(&t, &env, &libc, &platform, None, "/");
        derive(&loader, &env)
    }

    fn pkg(name: &str, version: &str, deps: &str) -> NugetPackage {
        NugetPackage {
            name: name.into(),
            version: version.into(),
            deps_json: deps.into(),
        }
    }

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
    fn framework_dependent_app_on_a_shared_runtime() {
        let f = facts(
            &[
                F::File("usr/share/dotnet/dotnet", b"\x7fELF"),
                F::File("usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.11/libcoreclr.so", b""),
                F::File("usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.11/Microsoft.NETCore.App.deps.json", br#"{"libraries": {"Microsoft.NETCore.App.Runtime.linux-x64/10.0.11": {"type": "package"}}}"#),
                // A version folder without libcoreclr (left over by a partial delete) is no runtime.
                F::File("usr/share/dotnet/shared/Microsoft.NETCore.App/9.0.0/System.Private.CoreLib.dll", b""),
                F::File("usr/share/dotnet/shared/Microsoft.AspNetCore.App/10.0.11/Microsoft.AspNetCore.dll", b""),
                F::File("usr/share/dotnet/shared/Microsoft.AspNetCore.App/10.0.11/Microsoft.AspNetCore.App.runtimeconfig.json", br#"{"runtimeOptions": {"tfm": "net10.0", "framework": {"name": "Microsoft.NETCore.App", "version": "10.0.11"}}}"#),
                F::File("usr/share/dotnet/sdk/10.0.100/dotnet.deps.json", br#"{"libraries": {"NuGet.Frameworks/7.0.0": {"type": "package"}}}"#),
                F::Link("usr/bin/dotnet", "../share/dotnet/dotnet"),
                F::File("app/WebApi.runtimeconfig.json", WEBAPI_RUNTIMECONFIG),
                F::File("app/WebApi.deps.json", WEBAPI_DEPS),
                F::File("app/WebApi.dll", b"MZ"),
                F::File("app/tools/Migrator.deps.json", br#"{"runtimeTarget": {"name": ".NETCoreApp,Version=v8.0"}, "libraries": {"Npgsql/8.0.5": {"type": "package"}, "Migrator/1.0.0": {"type": "project"}}}"#),
            ],
            &[],
        );
        let shared = |name: &str| DotnetRuntime {
            name: name.into(),
            version: "10.0.11".into(),
            path: format!("/usr/share/dotnet/shared/{name}/10.0.11"),
            self_contained: false,
        };
        assert_eq!(f.runtimes, [shared(ASPNETCORE_APP), shared(NETCORE_APP)]);
        assert_eq!(
            f.apps,
            [
                DotnetApp {
                    name: "WebApi".into(),
                    dir: "/app".into(),
                    runtimeconfig: Some("/app/WebApi.runtimeconfig.json".into()),
                    deps_json: Some("/app/WebApi.deps.json".into()),
                    frameworks: vec![
                        "Microsoft.NETCore.App 10.0.0".into(),
                        "Microsoft.AspNetCore.App 10.0.0".into()
                    ],
                    self_contained: false,
                    target_framework: Some("net10.0".into()),
                },
                DotnetApp {
                    name: "Migrator".into(),
                    dir: "/app/tools".into(),
                    runtimeconfig: None,
                    deps_json: Some("/app/tools/Migrator.deps.json".into()),
                    frameworks: vec![],
                    self_contained: false,
                    target_framework: Some("net8.0".into()),
                },
            ]
        );
        // The runtime's and the SDK's own deps.json are no app's packages.
        assert_eq!(f.packages.len(), 6);
        assert!(f.packages.iter().all(|p| p.deps_json.starts_with("/app/")));
        assert_eq!(
            f.npgsql,
            [
                pkg("Npgsql", "10.0.3", "/app/WebApi.deps.json"),
                pkg("Npgsql", "8.0.5", "/app/tools/Migrator.deps.json")
            ]
        );
        assert!(f.present());
    }

    #[test]
    fn self_contained_app_carries_its_runtime() {
        let f = facts(
            &[
                F::File("srv/worker/libcoreclr.so", b""),
                F::File("srv/worker/Worker", b"\x7fELF"),
                F::File(
                    "srv/worker/Worker.runtimeconfig.json",
                    br#"{"runtimeOptions": {"tfm": "net10.0", "includedFrameworks": [
                        {"name": "Microsoft.NETCore.App", "version": "10.0.3"},
                        {"name": "Microsoft.AspNetCore.App", "version": "10.0.3"}]}}"#,
                ),
                F::File(
                    "srv/worker/Worker.deps.json",
                    br#"{"runtimeTarget": {"name": ".NETCoreApp,Version=v10.0/linux-x64"}, "libraries": {
                        "Worker/1.0.0": {"type": "project"},
                        "runtimepack.Microsoft.NETCore.App.Runtime.linux-x64/10.0.3": {"type": "runtimepack"},
                        "Npgsql/10.0.1": {"type": "package"}}}"#,
                ),
                // No runtimeconfig: the version comes from the deps.json runtime pack.
                F::File("opt/tool/libcoreclr.so", b""),
                F::File(
                    "opt/tool/tool.deps.json",
                    br#"{"libraries": {"runtimepack.Microsoft.NETCore.App.Runtime.linux-musl-x64/9.0.4": {"type": "runtimepack"}}}"#,
                ),
                // Neither: the runtime is there, its version unknown.
                F::File("opt/bare/libcoreclr.so", b""),
            ],
            &[],
        );
        let sc = |name: &str, version: &str, path: &str| DotnetRuntime {
            name: name.into(),
            version: version.into(),
            path: path.into(),
            self_contained: true,
        };
        assert_eq!(
            f.runtimes,
            [
                sc(NETCORE_APP, "", "/opt/bare"),
                sc(NETCORE_APP, "9.0.4", "/opt/tool"),
                sc(ASPNETCORE_APP, "10.0.3", "/srv/worker"),
                sc(NETCORE_APP, "10.0.3", "/srv/worker"),
            ]
        );
        let worker = f.apps.iter().find(|a| a.name == "Worker").unwrap();
        assert!(worker.self_contained);
        assert_eq!(
            worker.frameworks,
            ["Microsoft.NETCore.App 10.0.3", "Microsoft.AspNetCore.App 10.0.3"]
        );
        assert_eq!(worker.deps_json.as_deref(), Some("/srv/worker/Worker.deps.json"));
        let tool = f.apps.iter().find(|a| a.name == "tool").unwrap();
        assert!(tool.self_contained && tool.runtimeconfig.is_none());
        assert_eq!(
            f.npgsql,
            [pkg("Npgsql", "10.0.1", "/srv/worker/Worker.deps.json")]
        );
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

    #[test]
    fn connection_string_syntax() {
        let p = |s: &str| parse_connection_string(s);
        let pairs = |v: &[(&str, Option<&str>)]| -> Option<Vec<Pair>> {
            Some(
                v.iter()
                    .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
                    .collect(),
            )
        };
        assert_eq!(
            p("Host=db;Database=app;SslMode=Require;GssEncryptionMode=Disable"),
            pairs(&[
                ("host", Some("db")),
                ("database", Some("app")),
                ("sslmode", Some("Require")),
                ("gssencryptionmode", Some("Disable"))
            ])
        );
        // Spaces around keys and values, empty segments, a key with inner spaces, case folded keys only.
        assert_eq!(
            p(" ;; Host = db ; GSS Encryption Mode =  Prefer  ;"),
            pairs(&[("host", Some("db")), ("gss encryption mode", Some("Prefer"))])
        );
        // Quoted values keep `;` and spaces; a doubled quote is one quote.
        assert_eq!(
            p(r#"Password="a;b ""c"""; Search Path='x''y'; Host=h"#),
            pairs(&[
                ("password", Some(r#"a;b "c""#)),
                ("search path", Some("x'y")),
                ("host", Some("h"))
            ])
        );
        // `==` is a `=` inside a key; a bare `key=` has no value.
        assert_eq!(
            p("a==b=1;Gss Encryption Mode=;x="),
            pairs(&[("a=b", Some("1")), ("gss encryption mode", None), ("x", None)])
        );
        assert_eq!(
            p("Host=db;Timeout=15 "),
            pairs(&[("host", Some("db")), ("timeout", Some("15"))])
        );
        assert_eq!(p(""), pairs(&[]));
        // What the builder rejects.
        for bad in [
            "Host=db;Password=\"open",
            "Host=db;GssEncryptionMode",
            "Host=db;x=abc\"",
            "Host=\"db\" x",
            "=value",
            "Host=d\u{1}b",
        ] {
            assert_eq!(p(bad), None, "{bad:?} should not parse");
        }
    }

    #[test]
    fn gss_key_spellings() {
        let mode = |s: &str| postgres_connection_string(s, true).and_then(|p| gss_value(&p));
        assert_eq!(
            mode("Host=db;GSS Encryption Mode=Disable").as_deref(),
            Some("Disable")
        );
        assert_eq!(
            mode("Host=db;gssencryptionmode=disable").as_deref(),
            Some("disable")
        );
        assert_eq!(
            mode("Server=db;GSSEncryptionMode='Prefer'").as_deref(),
            Some("Prefer")
        );
        // The last spelling given wins.
        assert_eq!(
            mode("Host=db;GssEncryptionMode=Disable;Gss Encryption Mode=Require").as_deref(),
            Some("Require")
        );
        // Not keys Npgsql knows for this setting.
        assert_eq!(mode("Host=db;gssencmode=disable"), None);
        assert_eq!(mode("Host=db;Gss  Encryption Mode=Disable"), None);
        // Not PostgreSQL connection strings at all.
        assert!(postgres_connection_string("Data Source=app.db;Cache=Shared", true).is_none());
        assert!(postgres_connection_string("Host=db", true).is_none());
        assert!(postgres_connection_string("Host=db", false).is_some());
        assert!(postgres_connection_string("localhost:6379,abortConnect=false", false).is_none());
    }

    #[test]
    fn connection_string_wins_over_pggssencmode() {
        let cs = |source: &str, mode: Option<&str>| ConnectionString {
            source: source.into(),
            gss_encryption_mode: mode.map(str::to_string),
        };
        let (a, b, c) = (
            cs("env A", None),
            cs("env B", Some("Disable")),
            cs("env C", Some("prefer")),
        );
        // The variable covers strings that say nothing, in any case.
        assert!(decide(Some("disable"), &[&a]).0);
        assert!(decide(Some("DISABLE"), &[&a, &b]).0);
        assert!(decide(Some(" Disable "), &[]).0);
        // A string that says otherwise wins over the variable.
        let (off, why) = decide(Some("disable"), &[&a, &c]);
        assert!(!off);
        assert!(why.contains("env C") && why.contains("precedence"), "{why}");
        // Every string setting Disable needs no variable.
        let (off, why) = decide(None, &[&b]);
        assert!(off, "{why}");
        // A string that says nothing falls back to Prefer without the variable.
        let (off, why) = decide(None, &[&a, &b]);
        assert!(!off && why.contains("env A") && why.contains("Prefer"), "{why}");
        // A value Npgsql does not accept, or an empty one, turns nothing off.
        assert!(!decide(Some("off"), &[]).0);
        assert!(!decide(Some("disable"), &[&cs("env D", Some("Disabled"))]).0);
        assert!(decide(Some("disable"), &[&cs("env E", Some(""))]).0);
        assert!(!decide(None, &[&cs("env E", Some(""))]).0);
        assert!(!decide(None, &[]).0);
    }

    #[test]
    fn connection_strings_from_appsettings_and_env() {
        let env = [
            "ASPNETCORE_HTTP_PORTS=8080",
            // Replaces appsettings' ConnectionStrings:Reporting, so only this one counts for it.
            "ConnectionStrings__Reporting=Host=reports;GssEncryptionMode=Disable",
            "POSTGRESQLCONNSTR_Audit=Host=audit",
            "PGGSSENCMODE=Disable",
        ];
        let files = [
            F::File("app/appsettings.json", APPSETTINGS),
            F::File("app/appsettings.Development.json", b"\xEF\xBB\xBF{\n  // local database\n  \"ConnectionStrings\": { \"Default\": \"Host=localhost;Username=dev\", },\n}"),
            F::File("app/appsettings.Broken.json", b"{\"ConnectionStrings\": {\"Default\": \"Host=x;GssEncryptionMode=Prefer\""),
        ];
        let f = facts(&files, &env);
        let sources: Vec<(&str, Option<&str>)> = f
            .gss
            .connection_strings
            .iter()
            .map(|c| (c.source.as_str(), c.gss_encryption_mode.as_deref()))
            .collect();
        assert_eq!(
            sources,
            [
                (
                    "/app/appsettings.Development.json#ConnectionStrings:Default",
                    None
                ),
                ("/app/appsettings.json#ConnectionStrings:Default", Some("Disable")),
                (
                    "/app/appsettings.json#ConnectionStrings:Reporting",
                    Some("Prefer")
                ),
                ("/app/appsettings.json#Jobs:Targets:1", None),
                ("env ConnectionStrings__Reporting", Some("Disable")),
                ("env POSTGRESQLCONNSTR_Audit", None),
            ]
        );
        assert_eq!(f.gss.pggssencmode.as_deref(), Some("Disable"));
        assert!(f.gss.disabled, "{}", f.gss.reason);
        assert!(
            f.gss.reason.contains("1 appsettings value replaced"),
            "{}",
            f.gss.reason
        );

        // Without the override the file's Prefer is in force and wins over PGGSSENCMODE.
        let f = facts(&files, &["PGGSSENCMODE=Disable"]);
        assert!(!f.gss.disabled);
        assert!(
            f.gss
                .reason
                .starts_with("/app/appsettings.json#ConnectionStrings:Reporting sets"),
            "{}",
            f.gss.reason
        );
    }

    #[test]
    fn env_keys_map_to_configuration_keys() {
        assert_eq!(
            env_config_key("ConnectionStrings__Default"),
            "connectionstrings:default"
        );
        assert_eq!(
            env_config_key("postgresqlconnstr_Main__X"),
            "connectionstrings:main:x"
        );
        assert_eq!(env_config_key("CUSTOMCONNSTR_db"), "connectionstrings:db");
        assert_eq!(env_config_key("SQLCONNSTR_db"), "connectionstrings:db");
        assert_eq!(env_config_key("Jobs__Targets__1"), "jobs:targets:1");
        assert_eq!(env_config_key("É"), "é");
    }

    #[test]
    fn malformed_and_truncated_json_are_skipped() {
        let f = facts(
            &[
                F::File(
                    "app/Api.runtimeconfig.json",
                    b"{\"runtimeOptions\": {\"framework\": ",
                ),
                F::File("app/Api.deps.json", b"not json at all"),
                F::Truncated("app/Big.deps.json", &WEBAPI_DEPS[..WEBAPI_DEPS.len() / 2]),
                // Whole but marked truncated: its end is unknown, so it is not trusted either.
                F::Truncated("app/Cut.deps.json", WEBAPI_DEPS),
                F::File(
                    "app/appsettings.json",
                    b"{\"ConnectionStrings\": [1, {\"Default\": 5}, null]}",
                ),
                F::File("app/appsettings.Production.json", b"[\"Host=db;Port=5432\"]"),
                F::Truncated(
                    "app/appsettings.Staging.json",
                    b"{\"ConnectionStrings\": {\"Default\": \"Host=db;GssEncryptionMode=Disable\"}}",
                ),
            ],
            &["PGGSSENCMODE=prefer"],
        );
        assert!(f.packages.is_empty() && f.npgsql.is_empty());
        let api = f.apps.iter().find(|a| a.name == "Api").unwrap();
        assert_eq!(api.runtimeconfig.as_deref(), Some("/app/Api.runtimeconfig.json"));
        assert_eq!(api.deps_json.as_deref(), Some("/app/Api.deps.json"));
        assert!(api.frameworks.is_empty() && api.target_framework.is_none());
        assert_eq!(f.apps.len(), 3);
        // A top-level array is still JSON; its string is a connection string outside ConnectionStrings.
        assert_eq!(f.gss.connection_strings.len(), 1);
        assert_eq!(
            f.gss.connection_strings[0].source,
            "/app/appsettings.Production.json#0"
        );
        assert!(!f.gss.disabled);
    }

    #[test]
    fn jsonc_comments_and_trailing_commas() {
        let v = parse_json(&content(b"\xEF\xBB\xBF{ /* a */ \"a\": \"x // not a comment\", // b\n \"b\": [1, 2,], \"c\": \"\\\",/*\", }")).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"a": "x // not a comment", "b": [1, 2], "c": "\",/*"})
        );
        assert!(parse_json(&content(b"{\"a\": 1,, }")).is_none());
    }

    #[test]
    fn gssapi_resolution() {
        let base = [
            F::File(
                "usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.3/libcoreclr.so",
                b"",
            ),
            F::File("usr/lib/x86_64-linux-gnu/libc.so.6", b""),
        ];
        let f = facts(&base, &[]);
        assert_eq!(
            f.gssapi,
            GssapiLibrary {
                resolved: None,
                searched_as: GSSAPI_LIBRARY.into()
            }
        );
        let mut with = base.to_vec();
        with.push(F::File("usr/lib/x86_64-linux-gnu/libgssapi_krb5.so.2.2", b""));
        with.push(F::Link(
            "usr/lib/x86_64-linux-gnu/libgssapi_krb5.so.2",
            "libgssapi_krb5.so.2.2",
        ));
        let f = facts(&with, &[]);
        assert_eq!(
            f.gssapi.resolved.as_deref(),
            Some("/usr/lib/x86_64-linux-gnu/libgssapi_krb5.so.2.2")
        );
        assert!(f.gss.reason.contains("default, Prefer"), "{}", f.gss.reason);
    }
}
