//! The container's memory budget as one fact (`facts.memory`): the limit and request the
//! manifest gives it, the memory-backed volumes it mounts, `/dev/shm` as the runtime gives it,
//! and what each runtime's settings commit of the limit (heap cap, direct memory, young
//! generation, GOMEMLIMIT), each with where it came from. Present for every image: without
//! `--k8s` the limit is undecided and what the settings commit is still listed.
//!
//! The settings themselves are worked out by each runtime's facts module
//! ([`super::java::memory`], [`super::node`], [`super::go::memlimit`], [`super::dotnet::gc`]);
//! this module only puts them beside the limit. Rules that judge a setting against the limit
//! read it from here.

use super::dotnet::gc::HeapCap as DotnetHeapCap;
use super::go::memlimit::GoMemLimit;
use super::go::MemLimit;
use super::java::launcher::LauncherHeap;
use super::java::memory::{HeapCap as JvmHeapCap, SizedOption};
use super::java::{JavaFacts, JavaOption};
use super::node::{
    default_semi_space_mib, semi_space_mib, FlagSource, NodeFacts, YOUNG_GENERATION_SEMI_SPACES,
};
use super::Env;
use crate::k8s::quantity::Quantity;
use crate::k8s::{Container, Lined};
use serde::Serialize;

/// `/dev/shm` as containerd, CRI-O and Docker give a container that mounts nothing there.
pub(crate) const DEV_SHM_DEFAULT: u64 = 64 << 20;
/// Where the container runtimes mount the shared-memory tmpfs.
pub(crate) const DEV_SHM: &str = "/dev/shm";

/// An amount of memory the manifest sets, or why it is not known.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub(crate) enum Amount {
    Set {
        bytes: u64,
        /// As the manifest writes it (`2Gi`).
        text: String,
        /// Its line in the manifest.
        line: u32,
    },
    Undecided {
        why: String,
    },
}

impl Amount {
    fn of(q: Option<&Lined<Quantity>>, field: &str, in_container: bool) -> Amount {
        match q {
            Some(l) => Amount::Set {
                bytes: l.value.value,
                text: l.value.text.clone(),
                line: l.line,
            },
            None if in_container => Amount::Undecided {
                why: format!("the container sets no resources.{field}.memory"),
            },
            None => Amount::Undecided {
                why: "the image alone says nothing of the container's memory (lint it with --k8s)".into(),
            },
        }
    }

    /// The bytes, when set (a limit of 0 is no limit).
    pub(crate) fn bytes(&self) -> Option<u64> {
        match self {
            Amount::Set { bytes, .. } if *bytes > 0 => Some(*bytes),
            _ => None,
        }
    }
}

/// A memory-backed volume the container mounts (`emptyDir` with `medium: Memory`): a tmpfs whose
/// pages count against the memory limit of the container that writes them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct MemoryVolume {
    pub(crate) volume: String,
    pub(crate) path: String,
    /// Its `sizeLimit` in bytes; `null` when it has none (the tmpfs is then sized from the node).
    pub(crate) size_limit: Option<u64>,
    /// The `sizeLimit` as the manifest writes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) size_limit_text: Option<String>,
}

/// `/dev/shm` as the container gets it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct DevShm {
    /// Its size in bytes; `null` when a memory volume with no `sizeLimit` is mounted there.
    pub(crate) bytes: Option<u64>,
    /// `the container runtime's default`, `emptyDir VOLUME (medium: Memory)`, `volume
    /// VOLUME (not memory-backed)` or `the node's /dev/shm (hostIPC: true)`.
    pub(crate) source: String,
    /// The same, for programs: `runtime_default`, `memory_volume`, `volume` or `host_ipc`.
    pub(crate) from: &'static str,
    /// The manifest line of the volume mounted there, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mount_line: Option<u32>,
}

impl DevShm {
    /// Whether `/dev/shm` is the 64 MiB the container runtime gives when nothing is mounted.
    pub(crate) fn is_runtime_default(&self) -> bool {
        self.from == "runtime_default"
    }
}

/// How a setting sizes what it commits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Sizing {
    /// A size in bytes (`-Xmx`, `GCHeapHardLimit`, `GOMEMLIMIT`), or the runtime's own choice.
    #[default]
    Bytes,
    /// A share of the container's limit (`-XX:MaxRAMPercentage`, `GCHeapHardLimitPercent`).
    ShareOfLimit,
    /// A share of `-XX:MaxRAM`, which the JVM takes in place of the limit.
    ShareOfMaxRam,
}

/// What a runtime's setting commits of the container's memory.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub(crate) struct Commitment {
    /// `jvm`, `node`, `go`, `dotnet`.
    pub(crate) runtime: &'static str,
    /// `heap`, `direct_memory`, `metaspace`, `code_cache`, `young_generation`, `gomemlimit`.
    pub(crate) what: &'static str,
    /// `set` (an option or variable sets it), `default` (the runtime's own choice), or
    /// `undecided` (memlint cannot work it out).
    pub(crate) status: &'static str,
    /// Bytes, when known (a share of the limit needs the limit).
    pub(crate) bytes: Option<u64>,
    /// A share of the memory limit, when that is how it is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) percent_of_limit: Option<f64>,
    /// How the setting sizes it, for a rule that writes the fix in the same terms.
    #[serde(skip)]
    pub(crate) sizing: Sizing,
    /// The setting as written, with where it came from (`-Xmx2g (from JAVA_TOOL_OPTIONS)`), or
    /// the default in words.
    pub(crate) setting: String,
    /// Where the variable that carries it was set, when a variable does: `set by the image's
    /// ENV`, `set by the manifest's env at line 12`, `exported by /start line 3`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) origin: Option<String>,
    /// Why it is undecided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) why: Option<String>,
    /// The vendor launcher that decides it (`OpenSearch`, `Cassandra`), when one does: its
    /// rule (`launcher-heap-vs-limit`) judges it, not the runtime's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) launcher: Option<&'static str>,
}

impl Commitment {
    fn new(runtime: &'static str, what: &'static str, status: &'static str, setting: String) -> Commitment {
        Commitment {
            runtime,
            what,
            status,
            bytes: None,
            percent_of_limit: None,
            sizing: Sizing::Bytes,
            setting,
            origin: None,
            why: None,
            launcher: None,
        }
    }

    /// Where `variable` was set, as the origin.
    fn carried_by(mut self, env: &Env, variable: Option<&str>) -> Self {
        self.origin = variable.and_then(|v| env.var(v)).map(|v| v.describe_origin());
        self
    }

    fn bytes(mut self, bytes: Option<u64>) -> Self {
        self.bytes = bytes;
        self
    }

    fn percent(mut self, percent: f64) -> Self {
        self.percent_of_limit = Some(percent);
        self.sizing = Sizing::ShareOfLimit;
        self
    }

    fn undecided(runtime: &'static str, what: &'static str, why: String) -> Commitment {
        Commitment {
            why: Some(why),
            ..Commitment::new(runtime, what, "undecided", "undecided".into())
        }
    }
}

/// The container's memory budget.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub(crate) struct MemoryBudget {
    /// `resources.limits.memory`.
    pub(crate) limit: Amount,
    /// `resources.requests.memory`.
    pub(crate) request: Amount,
    /// Memory-backed volumes it mounts (`/dev/shm` included when one is mounted there).
    pub(crate) volumes: Vec<MemoryVolume>,
    pub(crate) dev_shm: DevShm,
    /// What each runtime's settings commit, in the order: JVM, Node, Go, .NET.
    pub(crate) runtimes: Vec<Commitment>,
}

impl MemoryBudget {
    /// The limit in bytes, when the manifest sets one.
    pub(crate) fn limit_bytes(&self) -> Option<u64> {
        self.limit.bytes()
    }

    /// The commitments of `runtime` to `what`.
    pub(crate) fn commitment<'a>(
        &'a self,
        runtime: &'a str,
        what: &'a str,
    ) -> impl Iterator<Item = &'a Commitment> + 'a {
        self.runtimes
            .iter()
            .filter(move |c| c.runtime == runtime && c.what == what)
    }
}

/// Puts the runtimes' settings beside the container's memory.
pub(crate) fn derive(
    env: &Env,
    container: Option<&Container>,
    java: Option<&JavaFacts>,
    node: Option<&NodeFacts>,
    go: &super::go::GoFacts,
    dotnet: &super::dotnet::DotnetFacts,
) -> MemoryBudget {
    let limit = Amount::of(
        container.and_then(|c| c.limits_memory.as_ref()),
        "limits",
        container.is_some(),
    );
    let request = Amount::of(
        container.and_then(|c| c.requests_memory.as_ref()),
        "requests",
        container.is_some(),
    );
    let volumes: Vec<MemoryVolume> = container
        .map(|c| {
            c.mounts
                .iter()
                .filter(|m| m.memory_backed)
                .map(|m| MemoryVolume {
                    volume: m.volume.clone(),
                    path: m.path.clone(),
                    size_limit: m.size_limit.as_ref().map(|q| q.value),
                    size_limit_text: m.size_limit.as_ref().map(|q| q.text.clone()),
                })
                .collect()
        })
        .unwrap_or_default();
    let at_dev_shm = container.and_then(|c| {
        c.mounts
            .iter()
            .rev()
            .find(|m| m.path.trim_end_matches('/') == DEV_SHM)
    });
    let dev_shm = match at_dev_shm {
        // hostIPC shares the node's IPC namespace, and the runtime mounts the node's /dev/shm.
        _ if container.is_some_and(|c| c.host_ipc) => DevShm {
            bytes: None,
            source: "the node's /dev/shm (hostIPC: true)".into(),
            from: "host_ipc",
            mount_line: None,
        },
        Some(m) if m.memory_backed => DevShm {
            bytes: m.size_limit.as_ref().map(|q| q.value),
            source: format!("emptyDir {} (medium: Memory)", m.volume),
            from: "memory_volume",
            mount_line: Some(m.mount_line),
        },
        Some(m) => DevShm {
            bytes: None,
            source: format!("volume {} (not memory-backed)", m.volume),
            from: "volume",
            mount_line: Some(m.mount_line),
        },
        None => DevShm {
            bytes: Some(DEV_SHM_DEFAULT),
            source: "the container runtime's default".into(),
            from: "runtime_default",
            mount_line: None,
        },
    };
    let l = limit.bytes();
    let mut runtimes = Vec::new();
    if let Some(j) = java {
        jvm(j, l, env, &mut runtimes);
    }
    if let Some(n) = node {
        node_commitments(n, l, env, &mut runtimes);
    }
    if go
        .binaries
        .iter()
        .any(|b| super::go::reads_gomemlimit(b.go_version.as_deref()))
    {
        runtimes.push(gomemlimit(&go.memlimit));
    }
    for app in &dotnet.gc.apps {
        let cap = app.heap_cap();
        let c = match cap {
            DotnetHeapCap::Default if l.is_none() => Commitment::new(
                "dotnet",
                "heap",
                "default",
                "no GCHeapHardLimit and no memory limit: the heap is not capped".into(),
            ),
            DotnetHeapCap::Default => Commitment::new("dotnet", "heap", "default", cap.describe()),
            DotnetHeapCap::Percent(p) => {
                Commitment::new("dotnet", "heap", "set", cap.describe()).percent(p.value as f64)
            }
            DotnetHeapCap::Fixed(_) => Commitment::new("dotnet", "heap", "set", cap.describe()),
        };
        runtimes.push(c.bytes(cap.bytes(l)));
    }
    MemoryBudget {
        limit,
        request,
        volumes,
        dev_shm,
        runtimes,
    }
}

/// The variable a JVM option was written in, when it was one.
fn option_variable(o: &JavaOption) -> Option<&'static str> {
    o.source
        .variable(o.variable.as_deref())
        .and_then(|v| v.first().copied())
}

fn jvm(j: &JavaFacts, limit: Option<u64>, env: &Env, out: &mut Vec<Commitment>) {
    if let Some(why) = &j.options_undecided {
        out.push(Commitment::undecided("jvm", "heap", why.clone()));
        return;
    }
    let m = &j.memory;
    // A buildpack's memory calculator sizes the heap at launch unless the image does.
    if let (Some(why), false) = (&j.buildpack_calculator, m.heap.is_set()) {
        out.push(Commitment::undecided(
            "jvm",
            "heap",
            format!("sized at launch: {why}"),
        ));
        return;
    }
    let launcher = j.launcher.as_ref();
    let launcher_name = launcher.map(|l| l.vendor.name());
    let heap_by_launcher = match (launcher, m.heap.option()) {
        (Some(l), Some(o)) => l.sets(o),
        (Some(_), None) => true,
        (None, _) => false,
    };
    let heap = match (&m.heap, launcher.map(|l| &l.heap)) {
        // The launcher sizes the heap itself unless an option outside it does.
        (JvmHeapCap::Default, Some(LauncherHeap::FromNode)) => Commitment {
            launcher: launcher_name,
            ..Commitment::undecided(
                "jvm",
                "heap",
                "cassandra-env.sh sizes it from the node's memory (free -m): max(min(1/2 RAM, 1024 MB), min(1/4 RAM, 8192 MB))".into(),
            )
        },
        (JvmHeapCap::Default, Some(LauncherHeap::Refuses { why })) => Commitment {
            launcher: launcher_name,
            ..Commitment::undecided("jvm", "heap", why.clone())
        },
        (JvmHeapCap::Default, Some(LauncherHeap::Automatic)) => Commitment {
            launcher: launcher_name,
            ..Commitment::new(
                "jvm",
                "heap",
                "default",
                "no heap option: Elasticsearch's launcher sizes the heap from the memory the JVM sees".into(),
            )
        },
        (JvmHeapCap::Unreadable { option }, _) => Commitment::undecided(
            "jvm",
            "heap",
            format!("{} is not a size HotSpot reads", option.described()),
        ),
        (cap, _) => {
            let status = if cap.is_set() { "set" } else { "default" };
            let c = Commitment::new("jvm", "heap", status, cap.describe()).bytes(cap.bytes(limit));
            match cap {
                JvmHeapCap::OfLimit { percent, .. } => c.percent(*percent),
                JvmHeapCap::OfMaxRam { .. } => Commitment {
                    sizing: Sizing::ShareOfMaxRam,
                    ..c
                },
                _ => c,
            }
        }
    };
    let heap = Commitment {
        launcher: if heap_by_launcher {
            launcher_name
        } else {
            heap.launcher
        },
        ..heap
    };
    out.push(heap.carried_by(env, m.heap.option().and_then(option_variable)));
    let direct = match &m.max_direct_memory {
        Some(s) => sized_option("direct_memory", s, env),
        None => {
            let c = Commitment::new(
                "jvm",
                "direct_memory",
                "default",
                "no -XX:MaxDirectMemorySize: direct buffers may take as much as the heap cap".into(),
            )
            .bytes(m.direct_bytes(limit));
            match &m.heap {
                JvmHeapCap::OfLimit { percent, .. } => c.percent(*percent),
                _ => c,
            }
        }
    };
    out.push(direct);
    for (what, s) in [
        ("metaspace", &m.max_metaspace),
        ("code_cache", &m.reserved_code_cache),
    ] {
        out.extend(s.as_ref().map(|s| sized_option(what, s, env)));
    }
}

/// What a JVM option that sets a size commits: the size, the option with where it came from,
/// and where the variable that carries it was set.
fn sized_option(what: &'static str, s: &SizedOption, env: &Env) -> Commitment {
    Commitment::new("jvm", what, "set", s.option.described())
        .bytes(Some(s.bytes))
        .carried_by(env, option_variable(&s.option))
}

/// `NODE_OPTIONS` for a flag written there.
fn flag_variable(source: FlagSource) -> Option<&'static str> {
    (source == FlagSource::NodeOptions).then_some("NODE_OPTIONS")
}

fn node_commitments(n: &NodeFacts, limit: Option<u64>, env: &Env, out: &mut Vec<Commitment>) {
    // A flag on the command line wins over NODE_OPTIONS, whatever a script puts there.
    let on_command_line = n
        .max_old_space_size
        .as_ref()
        .is_some_and(|f| f.source == FlagSource::CommandLine);
    if let (Some(why), false) = (&n.options_undecided, on_command_line) {
        out.push(Commitment::undecided("node", "heap", why.clone()));
        return;
    }
    match &n.max_old_space_size {
        Some(old) => match old.bytes() {
            Some(bytes) => out.push(
                Commitment::new(
                    "node",
                    "heap",
                    "set",
                    format!("--max-old-space-size={} (from {})", old.value, old.source),
                )
                .bytes(Some(bytes))
                .carried_by(env, flag_variable(old.source)),
            ),
            None => out.push(Commitment::undecided(
                "node",
                "heap",
                format!(
                    "--max-old-space-size={} (from {}) is not in effect{}",
                    old.value,
                    old.source,
                    old.problem
                        .as_deref()
                        .map(|p| format!(": {p}"))
                        .unwrap_or_default()
                ),
            )),
        },
        None => out.push(Commitment::new(
            "node",
            "heap",
            "default",
            "no --max-old-space-size: V8 sizes the old generation from the memory it sees".into(),
        )),
    }
    let version = n.parsed_version();
    let young = match n
        .max_semi_space_size
        .as_ref()
        .and_then(|s| s.bytes().map(|b| (s, b)))
    {
        Some((s, semi)) => Commitment::new(
            "node",
            "young_generation",
            "set",
            format!(
                "--max-semi-space-size={} (from {}) × {YOUNG_GENERATION_SEMI_SPACES}",
                s.value, s.source
            ),
        )
        .bytes(Some(semi.saturating_mul(YOUNG_GENERATION_SEMI_SPACES)))
        .carried_by(env, flag_variable(s.source)),
        None => {
            let sees_limit = version.as_ref().is_none_or(super::node::reads_cgroup_v2);
            let default = default_semi_space_mib(version.as_ref());
            let semi = match limit.filter(|_| sees_limit) {
                Some(l) => semi_space_mib(l, version.as_ref()).0,
                None => default,
            };
            let from = if semi == default {
                "V8's default"
            } else {
                "sized from the limit"
            };
            Commitment::new(
                "node",
                "young_generation",
                "default",
                format!("no --max-semi-space-size: {semi} MiB semi-spaces ({from}) × {YOUNG_GENERATION_SEMI_SPACES}"),
            )
            .bytes(Some((semi << 20) * YOUNG_GENERATION_SEMI_SPACES))
        }
    };
    out.push(young);
}

fn gomemlimit(m: &GoMemLimit) -> Commitment {
    match m {
        GoMemLimit::Unset => Commitment::new(
            "go",
            "gomemlimit",
            "default",
            "no GOMEMLIMIT: the GC paces by GOGC alone".into(),
        ),
        GoMemLimit::Undecided { why } => Commitment::undecided("go", "gomemlimit", why.clone()),
        GoMemLimit::Known {
            read: MemLimit::Bytes(_),
            entry,
            source,
            ..
        } => Commitment {
            origin: Some(source.describe()),
            ..Commitment::new("go", "gomemlimit", "set", entry.clone()).bytes(m.bytes())
        },
        GoMemLimit::Known {
            read: MemLimit::Off,
            entry,
            ..
        } => Commitment::new("go", "gomemlimit", "set", format!("{entry} (no soft limit)")),
        GoMemLimit::Known {
            read: MemLimit::Malformed,
            entry,
            ..
        } => Commitment::undecided(
            "go",
            "gomemlimit",
            format!("{entry} is malformed: the program stops at start"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::Input;

    fn container(yaml: &str) -> Container {
        let read = crate::k8s::read(&[Input {
            file: "m.yaml".into(),
            text: format!("kind: Pod\nmetadata: {{name: p}}\nspec:\n{yaml}"),
        }]);
        match read {
            Ok(m) => m.containers[0].clone(),
            Err(e) => panic!("{e:?}"),
        }
    }

    use crate::facts::java::memory::tests::jvm;

    /// The budget of a container (or of the image alone) with only a JVM.
    fn budget(c: Option<&Container>, j: &JavaFacts) -> MemoryBudget {
        derive(
            &Env::default(),
            c,
            Some(j),
            None,
            &Default::default(),
            &Default::default(),
        )
    }

    const POD: &str = "  containers:
  - name: app
    image: app
    resources:
      limits: {memory: 2Gi}
      requests: {memory: 1Gi}
    volumeMounts:
    - {name: cache, mountPath: /cache}
    - {name: dshm, mountPath: /dev/shm}
  volumes:
  - name: cache
    emptyDir: {medium: Memory}
  - name: dshm
    emptyDir: {medium: Memory, sizeLimit: 1Gi}
";

    #[test]
    fn the_limit_volumes_and_the_jvm_caps_with_their_origins() {
        let c = container(POD);
        let j = jvm(&["-Xmx1g", "-XX:MaxDirectMemorySize=256m"]);
        let b = budget(Some(&c), &j);
        assert_eq!(b.limit_bytes(), Some(2 << 30));
        assert!(
            matches!(&b.limit, Amount::Set { text, line: 8, .. } if text == "2Gi"),
            "{:?}",
            b.limit
        );
        assert_eq!(b.request.bytes(), Some(1 << 30));
        assert_eq!(b.volumes.len(), 2);
        assert_eq!(b.volumes[0].size_limit, None);
        assert_eq!(b.dev_shm.bytes, Some(1 << 30));
        assert_eq!(b.dev_shm.source, "emptyDir dshm (medium: Memory)");
        let heap = b.commitment("jvm", "heap").next().cloned();
        let heap = heap.unwrap_or_else(|| panic!("{b:?}"));
        assert_eq!((heap.status, heap.bytes), ("set", Some(1 << 30)));
        assert_eq!(heap.setting, "-Xmx1g (from JAVA_TOOL_OPTIONS)");
        let direct = b.commitment("jvm", "direct_memory").next().map(|c| c.bytes);
        assert_eq!(direct, Some(Some(256 << 20)));
    }

    #[test]
    fn an_image_alone_has_no_limit_but_its_caps() {
        let j = jvm(&["-XX:MaxRAMPercentage=75"]);
        let b = budget(None, &j);
        assert!(matches!(&b.limit, Amount::Undecided { why } if why.contains("--k8s")));
        assert_eq!(b.dev_shm.bytes, Some(DEV_SHM_DEFAULT));
        let heap = &b.runtimes[0];
        assert_eq!(
            (heap.status, heap.bytes, heap.percent_of_limit),
            ("set", None, Some(75.0))
        );
        let direct = &b.runtimes[1];
        assert_eq!((direct.status, direct.bytes), ("default", None));
        // Under a limit the share is bytes, and direct memory follows the heap.
        let c =
            container("  containers:\n  - name: a\n    image: a\n    resources: {limits: {memory: 1Gi}}\n");
        let b = budget(Some(&c), &j);
        assert_eq!(b.runtimes[0].bytes, Some(768 << 20));
        assert_eq!(b.runtimes[1].bytes, Some(768 << 20));
        assert!(matches!(&b.request, Amount::Undecided { why } if why.contains("requests")));
    }

    #[test]
    fn an_undecided_options_variable_leaves_the_heap_undecided() {
        let mut j = jvm(&["-Xmx1g"]);
        j.options_undecided = Some("JAVA_OPTS is set by `…`".into());
        let b = budget(None, &j);
        assert_eq!(b.runtimes.len(), 1);
        assert_eq!(b.runtimes[0].status, "undecided");
    }
}
