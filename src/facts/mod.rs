//! Facts about an image, derived from its merged file tree and config without running
//! anything: platform, libc, the loader's view, preloads, the allocator in effect, the
//! entrypoint, runtimes and packages. Pure: no I/O, no tar, no network. Rules read only these.

pub(crate) mod allocator;
pub(crate) mod chrome;
mod command;
pub(crate) mod container;
pub(crate) mod dotnet;
pub(crate) mod elasticsearch;
pub(crate) mod entrypoint;
pub(crate) mod env;
pub mod go;
pub(crate) mod java;
pub(crate) mod ldcache;
pub(crate) mod libc;
pub(crate) mod loader;
pub(crate) mod memory;
pub(crate) mod next;
pub(crate) mod node;
pub(crate) mod os;
pub(crate) mod php;
pub(crate) mod platform;
pub(crate) mod postgres;
pub(crate) mod preload;
pub(crate) mod python;
pub(crate) mod redis;
pub(crate) mod ruby;
pub(crate) mod script;
pub(crate) mod sharp;
#[cfg(test)]
pub(crate) mod testing;
pub(crate) mod workers;

pub(crate) use env::Env;

use crate::image::Image;
use crate::tree::Interests;
use oci_spec::image::ImageConfiguration;
use serde::Serialize;
use std::cell::RefCell;
use std::collections::HashMap;

/// The cap for a small text or JSON file a fact reads (os-release, ld.so.conf, package.json).
pub(crate) const SMALL_FILE: u64 = 256 * 1024;
/// The cap for a database or manifest that grows with the image (the dpkg and apk databases,
/// ld.so.cache, deps.json, Next.js's required-server-files.json).
pub(crate) const LARGE_FILE: u64 = 16 * 1024 * 1024;

/// A facts module's declaration of what it reads.
type Declaration = fn() -> Interests;

/// Each facts module and what it reads, whatever the config says: each declares its own beside
/// the code that reads them. A new fact that reads files adds its line here.
const DECLARED: &[(&str, Declaration)] = &[
    ("entrypoint", entrypoint::interests),
    ("os", os::interests),
    ("platform", platform::interests),
    ("libc", libc::interests),
    ("loader", loader::interests),
    ("preload", preload::interests),
    ("allocator", allocator::interests),
    ("node", node::interests),
    ("sharp", sharp::interests),
    ("next", next::interests),
    ("dotnet", dotnet::interests),
    ("java", java::interests),
    ("ruby", ruby::interests),
    ("python", python::interests),
    ("go", go::interests),
    ("postgres", postgres::interests),
    ("chrome", chrome::interests),
    ("elasticsearch", elasticsearch::interests),
    ("php", php::interests),
    ("workers", workers::interests),
    ("redis", redis::interests),
];

/// Every file content and ELF fact the facts read, whatever the config says. The layer reader
/// keeps these and skips the rest.
pub(crate) fn interests() -> Interests {
    interests_except(&[])
}

/// What the modules other than `left_out` declare.
fn interests_except(left_out: &[&str]) -> Interests {
    DECLARED
        .iter()
        .filter(|(module, _)| !left_out.contains(module))
        .map(|(_, declared)| declared())
        .fold(Interests::default(), Interests::union)
}

/// What the image's config adds to [`interests`] once it is known: the scripts its entrypoint
/// may run.
pub(crate) fn interests_for(config: &ImageConfiguration) -> Interests {
    entrypoint::interests_for(config)
        .union(java::interests_for(config))
        .union(ruby::interests_for(config))
        .union(python::interests_for(config))
        .union(postgres::interests_for(config))
        .union(workers::interests_for(config))
        .union(redis::interests_for(config))
}

/// Everything memlint knows about an image. JSON keys are a contract with users' scripts.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct Facts {
    /// The environment the program gets: the config's `Env` (reported under
    /// `image.config.env`) overlaid with what entrypoint scripts export (reported under
    /// `facts.entrypoint.exports`). See [`env`] for how a rule reads a variable and its source.
    #[serde(skip)]
    pub(crate) env: Env,
    pub(crate) platform: platform::PlatformFacts,
    pub(crate) os: os::OsFacts,
    pub(crate) libc: libc::Libc,
    pub(crate) loader: loader::LoaderFacts,
    pub(crate) preloads: Vec<preload::Preload>,
    pub(crate) allocator: allocator::AllocatorFacts,
    pub(crate) entrypoint: entrypoint::Entrypoint,
    pub(crate) node: Option<node::NodeFacts>,
    pub(crate) sharp: sharp::SharpFacts,
    pub(crate) next: Option<next::NextFacts>,
    pub(crate) dotnet: dotnet::DotnetFacts,
    /// Absent when no JVM is found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) java: Option<java::JavaFacts>,
    pub(crate) ruby: Option<ruby::RubyFacts>,
    pub(crate) python: Option<python::PythonFacts>,
    pub(crate) go: go::GoFacts,
    /// A PostgreSQL server and its shared-memory settings. Absent when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) postgres: Option<postgres::PostgresFacts>,
    /// Chrome or Chromium and what starts it. Absent when there is no browser.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) chrome: Option<chrome::ChromeFacts>,
    /// Elasticsearch or OpenSearch: `bootstrap.memory_lock` and whether the heap is set.
    /// Absent when there is neither.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) search_engine: Option<elasticsearch::SearchEngine>,
    /// PHP-FPM or Apache with mod_php, when the entrypoint runs one: its pools of workers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) php: Option<php::PhpFacts>,
    /// Worker counts that pm2, uWSGI, nginx and puma take from the node's CPUs.
    #[serde(skip_serializing_if = "workers::WorkerFacts::is_empty")]
    pub(crate) workers: workers::WorkerFacts,
    /// Redis or Valkey, when the container runs one. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) redis: Option<redis::RedisFacts>,
    /// The container's memory budget: the limit and request (undecided without `--k8s`), the
    /// memory-backed volumes, `/dev/shm`, and what each runtime's settings commit.
    pub(crate) memory: memory::MemoryBudget,
    /// The Kubernetes container the image runs in (`lint --k8s`): its resources, env and
    /// mounts as the manifest declares them. Absent for an image linted alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) container: Option<crate::k8s::Container>,
}

/// Derives the facts of an image.
pub(crate) fn derive(image: &Image) -> Facts {
    derive_in(image, None)
}

/// What deriving the facts of the containers that run one image shares (`lint --k8s`): the
/// image's search budget ([`script::MAX_SEARCH_NODES`]) and the entrypoints already followed,
/// by what following one depends on, so that a thousand containers running one image with one
/// command and env read its scripts once.
#[derive(Default)]
pub(crate) struct PerImage {
    searches: script::ImageBudget,
    entrypoints: RefCell<EntrypointCache>,
}

/// What following the entrypoint depends on besides the image: the command, the working folder
/// and the container's env (each with its manifest line, which findings name).
#[derive(PartialEq, Eq, Hash)]
struct EntrypointKey {
    entrypoint: Option<Vec<String>>,
    cmd: Option<Vec<String>>,
    working_dir: Option<String>,
    env: Vec<env::Var>,
}

/// Entrypoints followed, with the bytes they hold, up to [`EntrypointCache::MAX_BYTES`]: past
/// it, a container's entrypoint is followed again rather than kept (containers that each set
/// another env would otherwise keep one each).
#[derive(Default)]
struct EntrypointCache {
    held: usize,
    by_key: HashMap<EntrypointKey, entrypoint::Entrypoint>,
}

impl EntrypointCache {
    const MAX_BYTES: usize = 16 << 20;

    /// What an entrypoint holds, roughly: its words and what its scripts export.
    fn size(e: &entrypoint::Entrypoint, key: &EntrypointKey) -> usize {
        let words = |v: &[String]| v.iter().map(|w| w.len() + 24).sum::<usize>();
        let exports: usize = e
            .exports
            .iter()
            .map(|v| {
                let value = match &v.value {
                    env::Value::Set(s) => s.len(),
                    env::Value::Unset => 0,
                    env::Value::Undecided { why, if_set } => {
                        why.len() + if_set.as_ref().map_or(0, String::len)
                    }
                };
                v.name.len() + value + 128
            })
            .sum();
        let key_env: usize = key.env.iter().map(|v| v.name.len() + v.text.len() + 128).sum();
        words(&e.argv)
            + words(&e.args)
            + e.steps.iter().map(|s| words(&s.argv)).sum::<usize>()
            + exports
            + key_env
    }
}

/// Derives the facts of an image as a Kubernetes container runs it: with the container's
/// command, args, working folder and env in place of the image's (see [`container`]).
pub(crate) fn derive_in(image: &Image, in_container: Option<&crate::k8s::Container>) -> Facts {
    derive_for(image, in_container, &PerImage::default())
}

/// [`derive_in`] for one of the containers that run `image`, sharing `shared` with the others.
pub(crate) fn derive_for(
    image: &Image,
    in_container: Option<&crate::k8s::Container>,
    shared: &PerImage,
) -> Facts {
    let applied = in_container.map(|c| container::config_for(image.config.as_ref(), c));
    let config = match &applied {
        Some(c) => Some(c),
        None => image.config.as_ref(),
    };
    let tree = &image.tree;
    let os = os::derive(tree);
    let platform = platform::derive(tree, &image.platform);
    let arch = crate::arch::Arch::from_oci(&platform.declared.architecture);
    let mut env = Env::from_config(config);
    let manifest_env = in_container.map(container::env_vars).unwrap_or_default();
    env.extend(&manifest_env);
    let key = in_container.map(|_| {
        let run = config.and_then(|c| c.config().as_ref());
        EntrypointKey {
            entrypoint: run.and_then(|r| r.entrypoint().clone()),
            cmd: run.and_then(|r| r.cmd().clone()),
            working_dir: run.and_then(|r| r.working_dir().clone()),
            env: manifest_env,
        }
    });
    let cached = key
        .as_ref()
        .and_then(|k| shared.entrypoints.borrow().by_key.get(k).cloned());
    let entrypoint = match cached {
        Some(e) => e,
        None => {
            let e = entrypoint::derive(tree, config, &env, arch, &shared.searches);
            if let Some(key) = key {
                let mut cache = shared.entrypoints.borrow_mut();
                let size = EntrypointCache::size(&e, &key);
                if cache.held + size <= EntrypointCache::MAX_BYTES {
                    cache.held += size;
                    cache.by_key.insert(key, e.clone());
                }
            }
            e
        }
    };
    // The one environment every fact and rule reads: the config's Env overlaid with what the
    // entrypoint scripts export (each variable knows which), extended in place rather than
    // copied (an image's Env may hold millions of entries).
    env.extend(&entrypoint.exports);
    // A vendor launcher's exports (Cassandra's MALLOC_ARENA_MAX=4) reach the JVM and its
    // allocator as an entrypoint script's do.
    let launcher = java::launcher::derive(tree, &env, &entrypoint);
    if let Some(l) = &launcher {
        env.extend(&l.exports);
    }
    let libc = libc::derive(tree, &os, &entrypoint, &platform);
    let loader = loader::Loader::new(
        tree,
        &env,
        &libc,
        &platform,
        entrypoint.program.as_deref(),
        &entrypoint.working_dir,
    );
    let mut preloads = preload::derive(&loader, &env, &entrypoint);
    for p in &mut preloads {
        if let Some(n) = p.removed_in_layer {
            p.removed_by = image.layers.get(n as usize - 1).and_then(|l| l.history.clone());
            if let Some(h) = &p.removed_by {
                p.reason =
                    p.reason
                        .replacen(&format!("layer {n}"), &format!("layer {n} (`{}`)", h.trim()), 1);
            }
        }
    }
    let allocator = allocator::derive(&loader, &env, &libc, &preloads, &entrypoint);
    let node = node::derive(tree, &env, &entrypoint, &os);
    let sharp = sharp::derive(&loader, &libc);
    let next = next::derive(tree);
    let dotnet = dotnet::derive(&loader, &env);
    let java = java::derive(tree, &env, &entrypoint, &os, &libc, config, launcher);
    let ruby = ruby::derive(&loader, &env, &os, &entrypoint);
    let python = python::derive(tree, &env, &os, &entrypoint);
    let go = go::derive(tree, &env, &entrypoint);
    let postgres = postgres::derive(tree, &env, &entrypoint);
    let chrome = chrome::derive(tree, &env, &entrypoint, python.as_ref());
    let search_engine = elasticsearch::derive(tree, &env);
    let php = php::derive(tree, &env, &entrypoint);
    let workers = workers::derive(tree, &env, &entrypoint);
    let redis = redis::derive(tree, &env, &entrypoint, config);
    let memory = memory::derive(&env, in_container, java.as_ref(), node.as_ref(), &go, &dotnet);
    let loader = loader.facts();
    Facts {
        loader,
        env,
        platform,
        os,
        libc,
        preloads,
        allocator,
        entrypoint,
        node,
        sharp,
        next,
        dotnet,
        java,
        ruby,
        python,
        go,
        postgres,
        chrome,
        search_engine,
        php,
        workers,
        redis,
        memory,
        container: in_container.cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::elf::{ElfClass, ElfInfo};
    use crate::facts::loader::tests::elf;
    use crate::platform::Platform;
    use crate::tree::{EntryKind, FileTree, LayerEntry};

    /// A file every facts module reads, at the place it reads it.
    fn text(path: &str, text: &str) -> LayerEntry {
        LayerEntry::new(path, EntryKind::File)
            .with_mode(0o755)
            .with_text(text)
    }

    fn binary(path: &str, info: ElfInfo) -> LayerEntry {
        LayerEntry {
            content: None,
            size: 4096,
            elf: Some(Box::new(info)),
            ..text(path, "")
        }
    }

    const CONFIG: &str = r#"{
      "architecture": "amd64", "os": "linux",
      "config": {
        "Env": ["PATH=/opt/app/bin:/usr/local/bin:/usr/bin:/bin"],
        "Entrypoint": ["start"], "Cmd": ["node", "server.js"], "WorkingDir": "/app"
      },
      "rootfs": {"type": "layers", "diff_ids": []}
    }"#;

    /// An image holding one file for every read of every facts module, its contents kept
    /// for `kept_for` as a layer read with those interests would record.
    fn image(kept_for: impl FnOnce(&ImageConfiguration) -> Interests) -> Image {
        let interp = "/lib64/ld-linux-x86-64.so.2";
        let mut node = elf(62, ElfClass::Elf64, Some(interp), &["libc.so.6"], &[], &[]);
        node.head.elf_type = crate::elf::ElfType::Executable;
        node.scan.markers.set(
            &node::NODE_RELEASE,
            crate::elf::marker::Found::Text("20.11.1".into()),
        );
        let mut libc = elf(62, ElfClass::Elf64, None, &[], &[], &[]);
        libc.scan.markers.set(
            &libc::GLIBC_RELEASE,
            crate::elf::marker::Found::Text("2.36".into()),
        );
        let entries = vec![
            text("etc/os-release", "ID=debian\nVERSION_ID=12\n"),
            text(
                "var/lib/dpkg/status",
                "Package: libc6\nStatus: install ok installed\nVersion: 2.36-9\n",
            ),
            text("var/lib/dpkg/status.d/tzdata", "Package: tzdata\nVersion: 2024a\n"),
            text("lib/apk/db/installed", "P:busybox\nV:1.36.1-r2\n"),
            text("etc/ld.so.cache", "not a cache"),
            text("etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n"),
            text("etc/ld.so.conf.d/local.conf", "/opt/lib\n"),
            text("etc/ld.so.preload", "/opt/lib/libpreload.so\n"),
            binary(interp, elf(62, ElfClass::Elf64, None, &[], &[], &[])),
            binary("lib/x86_64-linux-gnu/libc.so.6", libc),
            binary("opt/lib/libpreload.so", elf(62, ElfClass::Elf64, None, &[], &[], &[])),
            binary("usr/local/bin/node", node),
            binary(
                "usr/local/bin/ruby",
                elf(62, ElfClass::Elf64, Some(interp), &["libc.so.6"], &[], &[]),
            ),
            text("app/Gemfile.lock", "GEM\n  specs:\n    puma (6.4.3)\n"),
            text(
                "usr/local/include/node/node_version.h",
                "#define NODE_MAJOR_VERSION 20\n#define NODE_MINOR_VERSION 11\n#define NODE_PATCH_VERSION 1\n",
            ),
            // In a folder only the config's PATH names.
            text("opt/app/bin/start", "#!/bin/sh\nexec \"$@\"\n"),
            text("bin/sh", "#!"),
            text("app/server.js", ""),
            text("app/node_modules/sharp/package.json", r#"{"name":"sharp","version":"0.34.1"}"#),
            text(
                "app/node_modules/@img/sharp-linux-x64/package.json",
                r#"{"name":"@img/sharp-linux-x64","version":"0.34.1"}"#,
            ),
            text("app/node_modules/next/package.json", r#"{"name":"next","version":"15.5.14"}"#),
            text("app/.next/required-server-files.json", r#"{"config":{"images":{}}}"#),
            text(
                "srv/Api.runtimeconfig.json",
                r#"{"runtimeOptions":{"tfm":"net8.0","framework":{"name":"Microsoft.NETCore.App","version":"8.0.0"}}}"#,
            ),
            text(
                "srv/Api.deps.json",
                r#"{"libraries":{"Npgsql/8.0.5":{"type":"package"}}}"#,
            ),
            text(
                "usr/lib/jvm/java-17-openjdk-amd64/release",
                "IMPLEMENTOR=\"Debian\"\nJAVA_VERSION=\"17.0.15\"\nLIBC=\"gnu\"\n",
            ),
            text("opt/demo/bin/demo", "#!/bin/sh\nDEFAULT_JVM_OPTS='\"-Xmx64m\"'\nexec \"$JAVACMD\" \"$@\"\n"),
            text(
                "usr/local/lib/python3.11/site-packages/numpy-1.26.4.dist-info/METADATA",
                "Metadata-Version: 2.1\nName: numpy\nVersion: 1.26.4\n",
            ),
            text(
                "srv/appsettings.json",
                "{ // .NET accepts comments\n \"ConnectionStrings\": {\"Db\": \"Host=db;GSS Encryption Mode=Disable\"}, }",
            ),
        ];
        let config: ImageConfiguration = serde_json::from_str(CONFIG).unwrap();
        let tree = FileTree::from_entries(entries)
            .unwrap()
            .keeping(kept_for(&config));
        Image::unlayered("test", "test", Platform::linux_amd64(), Some(config), tree)
    }

    /// Every facts module reads only what it declares: with the contents kept for what the
    /// facts declare, a read of anything else would panic (debug builds), and each read
    /// below finds its file.
    /// The markers the facts declare: one definition per key (two modules that read one marker
    /// share its declaration), each found within the overlap of the scanner's windows (a marker
    /// and what is read after it, else a marker cut by a chunk boundary would be missed).
    #[test]
    fn declared_elf_markers_are_one_each_and_fit_the_scan_window() {
        use crate::elf::marker::Find;
        use crate::elf::MARKER_TAIL;
        let markers = interests().elf_markers;
        // The union keeps one marker per key: two modules declaring a key differently would
        // lose one of them.
        let mut by_key = std::collections::BTreeMap::new();
        for (module, declared) in DECLARED {
            for m in declared().elf_markers.iter() {
                let fingerprint = m.fingerprint();
                if let Some(other) = by_key.insert(m.key, fingerprint.clone()) {
                    assert_eq!(other, fingerprint, "{module} declares `{}` otherwise", m.key);
                }
            }
        }
        assert_eq!(by_key.len(), markers.len());
        assert!(by_key.contains_key("embedded_allocator") && by_key.contains_key("go"));
        for m in markers.iter() {
            let reach = match &m.find {
                Find::Label(labels) => labels.iter().map(|(n, _)| n.len()).max().unwrap_or(0),
                Find::Version {
                    anchor: Some((_, within)),
                    ..
                } => *within,
                // The marker and a version of up to 32 characters.
                Find::Version { after, .. } => after.len() + 32,
                Find::Blob(_) => 0,
            };
            assert!(reach <= MARKER_TAIL, "{}: {reach}", m.key);
        }
    }

    #[test]
    fn every_read_is_declared() {
        let image = image(|c| interests().union(interests_for(c)));
        // Files reached through paths the image chose (the config's PATH, an ld.so.conf
        // include, the status.d folder, an @img package) are read without the tree's check:
        // they must be declared all the same, or a real read would not have kept them.
        for id in image.tree.walk() {
            let path = image.tree.path_of(id);
            let read_by_no_fact = ["/app/server.js", "/bin/sh"].contains(&path.as_str());
            if image.tree.kept_content(id).is_some() && !read_by_no_fact {
                assert!(image.tree.keeps(&path), "{path} is read but not declared");
            }
        }
        let f = derive(&image);
        assert_eq!(
            f.os.release.as_ref().and_then(|r| r.id.as_deref()),
            Some("debian")
        );
        for p in ["libc6", "tzdata", "busybox"] {
            assert!(f.os.package(p).is_some(), "{p}");
        }
        assert_eq!(f.libc.version.as_deref(), Some("2.36"));
        assert!(f.loader.ld_so_cache_error.is_some());
        assert_eq!(f.loader.ld_so_conf_dirs, ["/opt/lib"]);
        assert_eq!(f.preloads.len(), 1);
        assert_eq!(f.entrypoint.program.as_deref(), Some("/usr/local/bin/node"));
        assert_eq!(f.entrypoint.steps[0].path.as_deref(), Some("/opt/app/bin/start"));
        let node = f.node.as_ref().unwrap();
        assert_eq!(
            node.version_source.as_deref(),
            Some("/usr/local/include/node/node_version.h")
        );
        let sharp = &f.sharp.installs[0];
        assert_eq!(sharp.version.as_deref(), Some("0.34.1"));
        assert_eq!(sharp.addons[0].version.as_deref(), Some("0.34.1"));
        let next = f.next.as_ref().unwrap();
        assert_eq!(next.version.as_deref(), Some("15.5.14"));
        assert!(next.config_found);
        assert_eq!(f.dotnet.apps[0].target_framework.as_deref(), Some("net8.0"));
        assert_eq!(f.dotnet.npgsql.len(), 1);
        assert!(f.dotnet.gss.disabled, "{}", f.dotnet.gss.reason);
        let java = f.java.as_ref().unwrap();
        assert_eq!(java.version.as_deref(), Some("17.0.15"));
        assert_eq!(java.vendor.as_deref(), Some("Debian"));
        let ruby = f.ruby.as_ref().unwrap();
        assert_eq!(ruby.binary, "/usr/local/bin/ruby");
        assert_eq!(ruby.servers[0].name, "puma");
        assert_eq!(ruby.servers[0].source, "/app/Gemfile.lock");
        let py = f.python.as_ref().unwrap();
        assert_eq!(py.package("numpy").unwrap().version.as_deref(), Some("1.26.4"));
    }

    /// Containers of one image with one command and env follow its entrypoint once; another
    /// env follows it again, and each container's facts are its own.
    #[test]
    fn an_entrypoint_is_followed_once_per_distinct_command_and_env() {
        use crate::facts::testing::TestImage;
        let image = TestImage::new()
            .glibc()
            .program("/usr/bin/app")
            .file(
                "/usr/local/bin/entry",
                "#!/bin/sh\nexport LD_PRELOAD=$(find /usr/lib -name libjemalloc.so.2 -print -quit)\nexec \"$@\"\n",
            )
            .entrypoint(&["/usr/local/bin/entry"])
            .cmd(&["/usr/bin/app"])
            .image();
        let pods: String = ["a", "b", "c"]
            .iter()
            .map(|n| {
                let env = if *n == "c" { "    env: [{name: MALLOC_ARENA_MAX, value: \"2\"}]\n" } else { "" };
                format!("---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {n}}}\nspec:\n  containers:\n  - name: c\n    image: x\n{env}")
            })
            .collect();
        let m = crate::k8s::read(&[crate::k8s::Input {
            file: "m.yaml".into(),
            text: pods,
        }])
        .unwrap();
        let shared = PerImage::default();
        let facts: Vec<Facts> = m
            .containers
            .iter()
            .map(|c| derive_for(&image, Some(c), &shared))
            .collect();
        assert_eq!(shared.entrypoints.borrow().by_key.len(), 2);
        for (f, c) in facts.iter().zip(&m.containers) {
            assert_eq!(f.env.get("LD_PRELOAD"), Some(""));
            assert_eq!(
                f.container.as_ref().map(|x| &x.workload.name),
                Some(&c.workload.name)
            );
        }
        assert_eq!(facts[2].env.get("MALLOC_ARENA_MAX"), Some("2"));
        assert_eq!(facts[0].env.get("MALLOC_ARENA_MAX"), None);
        // The same facts as each container alone.
        for (f, c) in facts.iter().zip(&m.containers) {
            let alone = derive_in(&image, Some(c));
            assert_eq!(f.entrypoint.exports, alone.entrypoint.exports);
            assert_eq!(f.entrypoint.program, alone.entrypoint.program);
        }
    }

    /// A module whose reads nobody declared fails loudly rather than reading "not installed".
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "contents of /etc/os-release read, but no interest asked for them")]
    fn a_read_left_undeclared_fails_loudly() {
        let without_os = |c: &ImageConfiguration| interests_except(&["os"]).union(interests_for(c));
        let _ = derive(&image(without_os));
    }
}
