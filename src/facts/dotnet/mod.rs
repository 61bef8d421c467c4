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
//!
//! One job per file: [`apps`] finds runtimes, apps and their packages (runtimeconfig.json,
//! deps.json); [`gss`] decides Npgsql's GSS encryption from appsettings and the Env, with
//! [`connection_string`] parsing connection strings as .NET does; [`gc`] works out the GC
//! settings (environment variables and runtimeconfig.json); [`json`] reads the JSON with
//! comments and trailing commas .NET accepts.

mod apps;
mod connection_string;
pub(crate) mod gc;
mod gss;
mod json;

pub(crate) use apps::{DotnetApp, DotnetRuntime, NugetPackage};
pub(crate) use gc::GcFacts;
pub(crate) use gss::GssSettings;

use super::loader::Loader;
use super::Env;
use crate::tree::Interests;
use serde::Serialize;

/// The library .NET's GSS shim loads (dotnet/runtime#59526); official .NET 8+ images lack it.
pub(crate) const GSSAPI_LIBRARY: &str = "libgssapi_krb5.so.2";

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct DotnetFacts {
    /// Shared runtimes and the runtimes self-contained apps carry.
    pub(crate) runtimes: Vec<DotnetRuntime>,
    pub(crate) apps: Vec<DotnetApp>,
    /// The `"type": "package"` entries of every app's deps.json `libraries`, sorted, deduplicated
    /// per deps.json (.NET's own install folders left out).
    pub(crate) packages: Vec<NugetPackage>,
    /// The Npgsql packages among `packages`.
    pub(crate) npgsql: Vec<NugetPackage>,
    pub(crate) gss: GssSettings,
    pub(crate) gssapi: GssapiLibrary,
    /// GC settings: the environment's GC variables and each app's effective GC.
    pub(crate) gc: GcFacts,
}

impl DotnetFacts {
    /// The Npgsql packages whose `GssEncryptionMode` defaults to `Prefer`: 10.0.0 and later
    /// (10.0.0-rc.1 had `Disable`; older releases have no GSS encryption).
    pub(crate) fn npgsql_preferring_gss(&self) -> Vec<&NugetPackage> {
        self.npgsql
            .iter()
            .filter(|p| {
                crate::version::Version::parse(&p.version)
                    .is_some_and(|v| v >= crate::version::Version::new(10, 0, 0))
            })
            .collect()
    }

    /// Whether the image holds any .NET runtime or app.
    pub(crate) fn present(&self) -> bool {
        !self.runtimes.is_empty() || !self.apps.is_empty()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct GssapiLibrary {
    /// The file the image's loader would open, when there is one.
    pub(crate) resolved: Option<String>,
    pub(crate) searched_as: String,
}

/// What [`derive`] reads: every app's `*.runtimeconfig.json` and `*.deps.json`, and the
/// `appsettings*.json` files that may hold connection strings (libcoreclr.so and the GSS
/// library only by their paths, through the loader).
pub(crate) fn interests() -> Interests {
    Interests::default()
        .keep("**/*.deps.json", crate::facts::LARGE_FILE)
        .keep("**/*.runtimeconfig.json", crate::facts::SMALL_FILE)
        .keep("**/appsettings*.json", crate::facts::SMALL_FILE)
}

pub(crate) fn derive(loader: &Loader, env: &Env) -> DotnetFacts {
    let tree = loader.tree();
    let found = apps::read(tree);
    let npgsql = found
        .packages
        .iter()
        .filter(|p| p.name.eq_ignore_ascii_case("Npgsql"))
        .cloned()
        .collect();
    let gss = gss::settings(tree, env, &found.appsettings);
    let gc = gc::derive(tree, env, &found.apps);
    let gssapi = GssapiLibrary {
        resolved: loader.resolve(GSSAPI_LIBRARY, None).path,
        searched_as: GSSAPI_LIBRARY.to_string(),
    };
    DotnetFacts {
        runtimes: found.runtimes,
        apps: found.apps,
        packages: found.packages,
        npgsql,
        gss,
        gssapi,
        gc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::apps::{ASPNETCORE_APP, NETCORE_APP};
    use crate::facts::libc::{Libc, LibcFamily};
    use crate::facts::platform::PlatformFacts;
    use crate::platform::Platform;
    use crate::tree::{Content, EntryKind, FileTree, LayerEntry};

    const WEBAPI_DEPS: &[u8] = include_bytes!("../../../testdata/dotnet/WebApi.deps.json");
    const WEBAPI_RUNTIMECONFIG: &[u8] = include_bytes!("../../../testdata/dotnet/WebApi.runtimeconfig.json");
    const APPSETTINGS: &[u8] = include_bytes!("../../../testdata/dotnet/appsettings.json");

    #[derive(Clone, Copy)]
    enum F<'a> {
        File(&'a str, &'a [u8]),
        Truncated(&'a str, &'a [u8]),
        Link(&'a str, &'a str),
    }

    fn tree(files: &[F]) -> FileTree {
        let entry = |path: &str, kind: EntryKind, content: Option<Content>| LayerEntry {
            size: content.as_ref().map_or(0, |c| c.bytes.len() as u64),
            content,
            ..LayerEntry::new(path, kind)
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
        // Kept for what this module and the loader it asks declare, and nothing else.
        FileTree::from_entries(entries)
            .unwrap()
            .keeping(interests().union(crate::facts::loader::interests()))
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

    /// Each app's effective GC: the environment (DOTNET_ before COMPlus_, hexadecimal) wins over
    /// runtimeconfig.json (decimal), which wins over the default of the app's .NET version.
    #[test]
    fn effective_gc_settings_and_their_sources() {
        let web8 = br#"{"runtimeOptions": {"tfm": "net8.0", "frameworks": [
            {"name": "Microsoft.NETCore.App", "version": "8.0.0"},
            {"name": "Microsoft.AspNetCore.App", "version": "8.0.0"}],
            "configProperties": {"System.GC.Server": true, "System.GC.HeapCount": 4,
              "System.GC.HeapHardLimitPercent": "0x40", // a string, read with radix 0
            }}}"#;
        let worker9 = br#"{"runtimeOptions": {"tfm": "net9.0",
            "framework": {"name": "Microsoft.NETCore.App", "version": "9.0.1"},
            "configProperties": {"System.GC.DynamicAdaptationMode": 0, "System.GC.HeapHardLimit": 209715200}}}"#;
        let files = [
            F::File("app/Web.runtimeconfig.json", web8),
            F::File("worker/Worker.runtimeconfig.json", worker9),
        ];
        let f = facts(&files, &[]);
        let web = &f.gc.apps[0];
        assert_eq!(
            (web.app.as_str(), web.aspnetcore, web.runtime_major),
            ("Web", true, Some(8))
        );
        assert_eq!(web.server.value, 1);
        assert_eq!(web.server.source, "/app/Web.runtimeconfig.json System.GC.Server");
        assert_eq!(web.server.path.as_deref(), Some("/app/Web.runtimeconfig.json"));
        assert_eq!(
            (
                web.dynamic_adaptation.value,
                web.dynamic_adaptation.source.as_str()
            ),
            (0, "the .NET 8 default")
        );
        assert_eq!(web.heap_count.as_ref().map(|s| s.value), Some(4));
        assert_eq!(web.heap_hard_limit_percent.as_ref().map(|s| s.value), Some(64));
        assert_eq!(web.bounded().map(|s| s.value), Some(4));
        let worker = &f.gc.apps[1];
        assert!(!worker.aspnetcore);
        assert_eq!(
            (worker.server.value, worker.server.source.as_str()),
            (0, "the .NET 9 default")
        );
        assert_eq!(
            worker.dynamic_adaptation.value, 0,
            "turned off in runtimeconfig.json"
        );
        assert_eq!(worker.heap_hard_limit.as_ref().map(|s| s.value), Some(200 << 20));
        assert!(f.gc.env.is_empty());

        let f = facts(
            &files,
            &[
                "COMPlus_GCHeapCount=2",
                "DOTNET_GCHeapCount=0",
                "DOTNET_gcServer=true",
                "DOTNET_GCHeapHardLimitPercent=64",
                "COMPlus_GCDynamicAdaptationMode=1",
            ],
        );
        let web = &f.gc.apps[0];
        // DOTNET_ wins over COMPlus_, and the environment over runtimeconfig.json.
        assert_eq!(web.heap_count.as_ref().map(|s| s.value), Some(0));
        assert_eq!(
            web.heap_count.as_ref().map(|s| s.source.as_str()),
            Some("env DOTNET_GCHeapCount=0 (image env)")
        );
        // `true` is no hexadecimal number: the runtime takes its default, Workstation GC, and
        // does not fall back to runtimeconfig.json.
        assert_eq!(web.server.value, 0);
        assert!(
            web.server
                .source
                .starts_with("the default: env DOTNET_gcServer=true"),
            "{}",
            web.server.source
        );
        // 64 is 0x64, 100 %: no limit.
        assert_eq!(web.heap_hard_limit_percent.as_ref().map(|s| s.value), Some(100));
        assert_eq!(web.bounded(), None);
        assert_eq!(web.dynamic_adaptation.value, 1);
        let percent =
            f.gc.env
                .iter()
                .find(|v| v.setting == "GCHeapHardLimitPercent")
                .unwrap();
        assert_eq!((percent.read_as, percent.decimal_reading), (Some(100), Some(64)));
    }
}
