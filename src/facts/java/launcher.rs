//! Vendor start scripts that set the JVM's heap where the generic reader does not look, read as
//! the projects ship them:
//!
//! * Elasticsearch and OpenSearch (`bin/elasticsearch`, `bin/opensearch`): their launcher
//!   (`JvmOptionsParser`) puts on java's command line the lines of `config/jvm.options` (a
//!   line `8:-Xmx1g` or `9-:…` only for those JDK versions), then of
//!   `config/jvm.options.d/*.options` in name order, then `ES_JAVA_OPTS` / `OPENSEARCH_JAVA_OPTS`;
//!   the conf folder is `ES_PATH_CONF` / `OPENSEARCH_PATH_CONF` when set. Its ergonomics
//!   (`JvmErgonomics.choose`) add `-XX:MaxDirectMemorySize=` half the heap unless one is set.
//!   OpenSearch ships `-Xms1g`/`-Xmx1g`; Elasticsearch before 7.11 shipped the same, and from
//!   7.11 sizes the heap from the memory it sees when no option sets it.
//! * Kafka (`bin/kafka-server-start.sh`): `if [ "x$KAFKA_HEAP_OPTS" = "x" ]; then export
//!   KAFKA_HEAP_OPTS="-Xmx1G -Xms1G"; fi`, then `kafka-run-class.sh` puts `$KAFKA_HEAP_OPTS`
//!   on the command line. The default is read from the script as the image holds it.
//! * Cassandra (`bin/cassandra` sources `cassandra-env.sh` from `$CASSANDRA_CONF`): `-Xmx` and
//!   `-Xms` from its `jvm.options` when set there; else `MAX_HEAP_SIZE` (with `HEAP_NEWSIZE`:
//!   set one without the other and the script stops: "please set or unset MAX_HEAP_SIZE and
//!   HEAP_NEWSIZE in pairs"); else `calculate_heap_sizes` from `free -m`, the node's memory:
//!   max(min(½ RAM, 1024 MB), min(¼ RAM, 8192 MB)). It exports `MALLOC_ARENA_MAX=4` unless
//!   the environment sets it.

use super::{JavaOption, OptionSource};
use crate::facts::entrypoint::Entrypoint;
use crate::facts::env::{Origin, Value, Var};
use crate::facts::Env;
use crate::shell;
use crate::tree::{FileTree, Interests, NodeKind};
use oci_spec::image::ImageConfiguration;
use serde::Serialize;
use std::sync::Arc;

/// A `jvm.options` or `cassandra-env.sh` is a few KiB.
const CONF_CAP: u64 = 256 * 1024;
/// At most this many `jvm.options.d` files are read.
const MAX_OPTION_FILES: usize = 64;

/// The projects whose launchers memlint reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Vendor {
    Elasticsearch,
    OpenSearch,
    Kafka,
    Cassandra,
}

impl Vendor {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Vendor::Elasticsearch => "Elasticsearch",
            Vendor::OpenSearch => "OpenSearch",
            Vendor::Kafka => "Kafka",
            Vendor::Cassandra => "Cassandra",
        }
    }

    /// The variable that sets the heap for this launcher: where the fix goes.
    pub(crate) fn heap_variable(self) -> &'static str {
        LAUNCHER_VARIABLES[self as usize]
    }

    /// The most of the container's memory the project's guidance gives the heap, in percent:
    /// Elasticsearch and OpenSearch "no more than 50 % of your total memory"; Cassandra's own
    /// formula never takes more than half; Kafka names no share (its docs keep the heap small
    /// for the page cache): the JVM's usual 75 %.
    pub(crate) fn guidance_percent(self) -> u64 {
        match self {
            Vendor::Kafka => 75,
            _ => 50,
        }
    }
}

/// The variables the launchers read the heap from, by [`Vendor`] order: a fix sets one.
pub(crate) const LAUNCHER_VARIABLES: &[&str] = &[
    "ES_JAVA_OPTS",
    "OPENSEARCH_JAVA_OPTS",
    "KAFKA_HEAP_OPTS",
    "MAX_HEAP_SIZE",
];

/// How a launcher sizes the heap.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "by", rename_all = "snake_case")]
pub(crate) enum LauncherHeap {
    /// Options it puts on the command line ([`Launcher::options`]).
    Options,
    /// Elasticsearch 7.11 and later with no heap option: from the memory the JVM sees.
    Automatic,
    /// Cassandra without `MAX_HEAP_SIZE`: from the node's memory (`free -m`), not the limit.
    FromNode,
    /// The launcher stops before starting the JVM.
    Refuses { why: String },
}

/// A vendor launcher the container runs.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub(crate) struct Launcher {
    pub(crate) vendor: Vendor,
    /// The launcher script.
    pub(crate) script: String,
    /// The project's folder.
    pub(crate) home: String,
    pub(crate) heap: LauncherHeap,
    /// The options it puts on java's command line, in order, each naming its file or variable.
    pub(crate) options: Vec<JavaOption>,
    /// What it exports to the JVM (Cassandra's `MALLOC_ARENA_MAX=4`).
    #[serde(skip)]
    pub(crate) exports: Vec<Var>,
    /// Whether its ergonomics bound direct memory (Elasticsearch, OpenSearch).
    pub(crate) bounds_direct_memory: bool,
}

impl Launcher {
    /// Whether `o` is one of the options this launcher adds.
    pub(crate) fn sets(&self, o: &JavaOption) -> bool {
        self.options.contains(o)
    }
}

/// Each project: where it is installed, its launcher under that folder.
struct Layout {
    vendor: Vendor,
    homes: &'static [&'static str],
    launcher: &'static str,
}

const LAYOUTS: &[Layout] = &[
    Layout {
        vendor: Vendor::Elasticsearch,
        homes: &["/usr/share/elasticsearch"],
        launcher: "bin/elasticsearch",
    },
    Layout {
        vendor: Vendor::OpenSearch,
        homes: &["/usr/share/opensearch"],
        launcher: "bin/opensearch",
    },
    Layout {
        vendor: Vendor::Kafka,
        homes: &["/opt/kafka", "/opt/bitnami/kafka", "/kafka", "/usr/share/kafka"],
        launcher: "bin/kafka-server-start.sh",
    },
    Layout {
        vendor: Vendor::Cassandra,
        homes: &["/opt/cassandra", "/usr/share/cassandra"],
        launcher: "bin/cassandra",
    },
];

/// The config files the launchers read, kept whatever the config says (the launcher scripts
/// themselves are kept as start scripts, under `/opt/*/bin` and `/usr/share/*/bin`).
pub(crate) fn interests() -> Interests {
    [
        "/usr/share/elasticsearch/config/jvm.options",
        "/usr/share/elasticsearch/config/jvm.options.d/*.options",
        "/etc/elasticsearch/jvm.options",
        "/etc/elasticsearch/jvm.options.d/*.options",
        "/usr/share/opensearch/config/jvm.options",
        "/usr/share/opensearch/config/jvm.options.d/*.options",
        "/etc/opensearch/jvm.options",
        "/etc/opensearch/jvm.options.d/*.options",
        "/etc/cassandra/cassandra-env.sh",
        "/etc/cassandra/jvm*.options",
        "/opt/cassandra/conf/cassandra-env.sh",
        "/opt/cassandra/conf/jvm*.options",
        "/usr/share/cassandra/conf/cassandra-env.sh",
        "/usr/share/cassandra/conf/jvm*.options",
        "/opt/*/bin/kafka-server-start.sh",
        "/kafka/bin/kafka-server-start.sh",
    ]
    .iter()
    .fold(Interests::default(), |i, p| i.keep(p, CONF_CAP))
}

/// What the config adds: the conf folder its `ES_PATH_CONF`, `OPENSEARCH_PATH_CONF` or
/// `CASSANDRA_CONF` names.
pub(crate) fn interests_for(config: &ImageConfiguration) -> Interests {
    let env = config
        .config()
        .as_ref()
        .and_then(|c| c.env().clone())
        .unwrap_or_default();
    let mut out = Interests::default();
    for (var, files) in [
        ("ES_PATH_CONF", &["jvm.options", "jvm.options.d/*.options"][..]),
        (
            "OPENSEARCH_PATH_CONF",
            &["jvm.options", "jvm.options.d/*.options"][..],
        ),
        ("CASSANDRA_CONF", &["cassandra-env.sh", "jvm*.options"][..]),
    ] {
        let prefix = format!("{var}=");
        if let Some(dir) = env.iter().rev().find_map(|e| e.strip_prefix(&prefix)) {
            if dir.starts_with('/') {
                for f in files {
                    out = out.keep(&format!("{}/{f}", dir.trim_end_matches('/')), CONF_CAP);
                }
            }
        }
    }
    out
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// The text of a file a declared interest (or a script interest) kept.
fn text_of(tree: &FileTree, path: &str) -> Option<String> {
    let content = if tree.keeps(path) {
        tree.contents(path)
    } else {
        tree.lookup(path)
            .ok()
            .flatten()
            .and_then(|id| tree.kept_content(id))
    }?;
    Some(String::from_utf8_lossy(&content.bytes).into_owned())
}

/// Whether the entrypoint starts the launcher: its name or folder on the way (the command, a
/// step, the program), or a vendor image's entrypoint script in front of it.
fn runs(entry: &Entrypoint, home: &str, launcher: &str) -> bool {
    let name = basename(launcher);
    let words = entry
        .argv
        .iter()
        .chain(entry.args.iter())
        .chain(
            entry
                .steps
                .iter()
                .flat_map(|s| s.argv.iter().chain(s.path.iter())),
        )
        .chain(entry.program.iter());
    let mut entry_script = false;
    for w in words {
        if basename(w) == name || w.starts_with(&format!("{home}/")) || w == "eswrapper" {
            return true;
        }
        let b = basename(w);
        entry_script |= b.contains("entrypoint") && b.ends_with(".sh");
    }
    entry_script
}

/// The launcher the container runs, when it runs one of [`LAYOUTS`].
pub(crate) fn derive(tree: &FileTree, env: &Env, entry: &Entrypoint) -> Option<Launcher> {
    for layout in LAYOUTS {
        for home in layout.homes {
            let script = format!("{home}/{}", layout.launcher);
            if !tree.is_file_at(&script) || !runs(entry, home, &script) {
                continue;
            }
            let mut l = Launcher {
                vendor: layout.vendor,
                script: script.clone(),
                home: home.to_string(),
                heap: LauncherHeap::Options,
                options: Vec::new(),
                exports: Vec::new(),
                bounds_direct_memory: false,
            };
            match layout.vendor {
                Vendor::Elasticsearch | Vendor::OpenSearch => search_engine(tree, env, &mut l),
                Vendor::Kafka => kafka(tree, env, &mut l),
                Vendor::Cassandra => cassandra(tree, env, &mut l),
            }
            return Some(l);
        }
    }
    None
}

fn option(option: &str, source: OptionSource, variable: Option<&str>, path: &str) -> JavaOption {
    JavaOption {
        option: option.to_string(),
        source,
        variable: variable.map(str::to_string),
        path: Some(path.to_string()),
        ignored: None,
    }
}

/// Whether a `jvm.options` line's version prefix (`8:`, `9-:`, `8-13:`) takes in JDK
/// `feature` (unknown: only lines without a prefix count).
fn line_applies(prefix: &str, feature: Option<u32>) -> bool {
    let Some(v) = feature else { return false };
    let n = |s: &str| s.parse::<u32>().ok();
    match prefix.split_once('-') {
        None => n(prefix) == Some(v),
        Some((lo, "")) => n(lo).is_some_and(|lo| v >= lo),
        Some((lo, hi)) => n(lo).is_some_and(|lo| v >= lo) && n(hi).is_some_and(|hi| v <= hi),
    }
}

/// The options of a `jvm.options` file, in order.
fn options_file(text: &str, path: &str, feature: Option<u32>, out: &mut Vec<JavaOption>) {
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let option = match line.split_once(':') {
            Some((prefix, rest))
                if !prefix.is_empty() && prefix.bytes().all(|b| b.is_ascii_digit() || b == b'-') =>
            {
                if !line_applies(prefix, feature) {
                    continue;
                }
                rest
            }
            _ => line,
        };
        if option.starts_with('-') {
            out.push(self::option(option, OptionSource::Launcher, None, path));
        }
    }
}

/// The JDK feature release the launcher runs, from its bundled JDK's `release` file when the
/// image keeps it (`<home>/jdk/release`).
fn bundled_feature(tree: &FileTree, home: &str) -> Option<u32> {
    let text = text_of(tree, &format!("{home}/jdk/release"))?;
    let v = super::parse_release(&text).get("JAVA_VERSION").cloned()?;
    super::JavaVersion::parse(&v).map(|v| v.feature)
}

fn search_engine(tree: &FileTree, env: &Env, l: &mut Launcher) {
    let (conf_var, opts_var) = match l.vendor {
        Vendor::Elasticsearch => ("ES_PATH_CONF", "ES_JAVA_OPTS"),
        _ => ("OPENSEARCH_PATH_CONF", "OPENSEARCH_JAVA_OPTS"),
    };
    let conf = env
        .non_empty(conf_var)
        .filter(|c| c.starts_with('/'))
        .map(|c| c.trim_end_matches('/').to_string())
        .unwrap_or_else(|| format!("{}/config", l.home));
    let feature = bundled_feature(tree, &l.home);
    let main = format!("{conf}/jvm.options");
    if let Some(text) = text_of(tree, &main) {
        options_file(&text, &main, feature, &mut l.options);
    }
    let dir = format!("{conf}/jvm.options.d");
    if let Ok(Some(id)) = tree.lookup(&dir) {
        if let NodeKind::Dir(children) = &tree.node(id).kind {
            let mut names: Vec<&str> = children
                .keys()
                .copied()
                .filter(|n| n.ends_with(".options"))
                .collect();
            names.sort_unstable();
            for name in names.into_iter().take(MAX_OPTION_FILES) {
                let path = format!("{dir}/{name}");
                if let Some(text) = text_of(tree, &path) {
                    options_file(&text, &path, feature, &mut l.options);
                }
            }
        }
    }
    if let Some(v) = env.non_empty(opts_var) {
        for w in shell::split_words(v, shell::SH) {
            l.options
                .push(option(&w, OptionSource::EnvVar, Some(opts_var), &l.script));
        }
    }
    let heap = l
        .options
        .iter()
        .rev()
        .find_map(|o| o.max_heap_size())
        .map(str::to_string);
    l.bounds_direct_memory = true;
    match heap {
        Some(size) => {
            let direct_set = l
                .options
                .iter()
                .any(|o| o.xx_name() == Some("MaxDirectMemorySize"));
            if let (false, Some(bytes)) = (direct_set, super::memory::jvm_size(&size)) {
                let half = format!("-XX:MaxDirectMemorySize={}", bytes / 2);
                l.options
                    .push(option(&half, OptionSource::Launcher, None, &l.script));
            }
        }
        None => l.heap = LauncherHeap::Automatic,
    }
}

/// `KAFKA_HEAP_OPTS` from the environment, else the default the start script assigns.
fn kafka(tree: &FileTree, env: &Env, l: &mut Launcher) {
    const VAR: &str = "KAFKA_HEAP_OPTS";
    // The entrypoint follower may have run the script's own `export KAFKA_HEAP_OPTS=…`: that is
    // the launcher's default, not a setting of the image.
    let own_default = env
        .var(VAR)
        .is_some_and(|v| matches!(&v.origin, Origin::Script { script, .. } if **script == *l.script));
    if let Some(v) = env.non_empty(VAR).filter(|_| !own_default) {
        for w in shell::split_words(v, shell::SH) {
            l.options
                .push(option(&w, OptionSource::EnvVar, Some(VAR), &l.script));
        }
        return;
    }
    let default = text_of(tree, &l.script).and_then(|text| {
        text.lines().find_map(|line| {
            let t = line.trim().strip_prefix("export ").unwrap_or(line.trim());
            let value = t.strip_prefix(VAR)?.strip_prefix('=')?;
            shell::split_words(value, shell::SH).into_iter().next()
        })
    });
    if let Some(value) = default {
        for w in shell::split_words(&value, shell::SH) {
            l.options
                .push(option(&w, OptionSource::Launcher, Some(VAR), &l.script));
        }
    }
}

/// A shell assignment `NAME="VALUE"` that is not commented out, with its line (from 1).
fn assignment(text: &str, name: &str) -> Option<(String, u32)> {
    text.lines().enumerate().find_map(|(n, line)| {
        let t = line.trim();
        let t = t.strip_prefix("export ").unwrap_or(t);
        let value = t.strip_prefix(name)?.strip_prefix('=')?;
        let value = shell::split_words(value, shell::SH)
            .into_iter()
            .next()
            .unwrap_or_default();
        Some((value, n as u32 + 1))
    })
}

fn cassandra(tree: &FileTree, env: &Env, l: &mut Launcher) {
    let conf = env
        .non_empty("CASSANDRA_CONF")
        .filter(|c| c.starts_with('/'))
        .map(|c| c.trim_end_matches('/').to_string())
        .into_iter()
        .chain(["/etc/cassandra".to_string(), format!("{}/conf", l.home)])
        .find(|c| tree.is_file_at(&format!("{c}/cassandra-env.sh")));
    let Some(conf) = conf else {
        l.heap = LauncherHeap::Refuses {
            why: format!("{} sources cassandra-env.sh, which is not in the image", l.script),
        };
        return;
    };
    let env_sh = format!("{conf}/cassandra-env.sh");
    let text = text_of(tree, &env_sh).unwrap_or_default();
    // -Xmx and -Xms in jvm.options (3.x) or jvm-server.options (4.x) win over MAX_HEAP_SIZE.
    for name in ["jvm.options", "jvm-server.options"] {
        let path = format!("{conf}/{name}");
        if let Some(t) = text_of(tree, &path) {
            options_file(&t, &path, None, &mut l.options);
        }
    }
    let from_file = |name: &str| assignment(&text, name);
    let value = |name: &str| -> Option<(String, Option<u32>)> {
        match env.non_empty(name) {
            Some(v) => Some((v.to_string(), None)),
            None => from_file(name).map(|(v, line)| (v, Some(line))),
        }
    };
    if !l.options.iter().any(|o| o.max_heap_size().is_some()) {
        match (value("MAX_HEAP_SIZE"), value("HEAP_NEWSIZE")) {
            (None, None) => l.heap = LauncherHeap::FromNode,
            (Some((max, line)), Some(_)) => {
                let source = if line.is_some() {
                    OptionSource::Launcher
                } else {
                    OptionSource::EnvVar
                };
                for flag in ["-Xms", "-Xmx"] {
                    l.options.push(option(
                        &format!("{flag}{max}"),
                        source,
                        Some("MAX_HEAP_SIZE"),
                        &env_sh,
                    ));
                }
            }
            (max, _) => {
                let (set, unset) = if max.is_some() {
                    ("MAX_HEAP_SIZE", "HEAP_NEWSIZE")
                } else {
                    ("HEAP_NEWSIZE", "MAX_HEAP_SIZE")
                };
                l.heap = LauncherHeap::Refuses {
                    why: format!(
                        "{set} is set without {unset}: {env_sh} stops with \"please set or unset MAX_HEAP_SIZE and HEAP_NEWSIZE in pairs\""
                    ),
                };
            }
        }
    }
    // `if [ "x$MALLOC_ARENA_MAX" = "x" ] ; then export MALLOC_ARENA_MAX=4; fi`
    if env.get("MALLOC_ARENA_MAX").is_none() {
        if let Some((value, line)) = text
            .lines()
            .enumerate()
            .find(|(_, l)| l.trim().starts_with("export MALLOC_ARENA_MAX="))
            .and_then(|(n, l)| {
                let v = l.trim().strip_prefix("export MALLOC_ARENA_MAX=")?;
                Some((v.trim().trim_matches('"').to_string(), n as u32 + 1))
            })
        {
            l.exports.push(Var {
                name: "MALLOC_ARENA_MAX".into(),
                value: Value::Set(value.clone()),
                origin: Origin::Script {
                    script: Arc::from(env_sh.as_str()),
                    line,
                },
                text: Arc::from(format!("export MALLOC_ARENA_MAX={value}").as_str()),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_prefixes_of_jvm_options() {
        let mut out = Vec::new();
        options_file(
            "## comment\n-Xms1g\n-Xmx1g\n8-10:-XX:+UseConcMarkSweepGC\n11-:-XX:+UseG1GC\n17:-Xss1m\nnot an option\n",
            "/c/jvm.options",
            Some(17),
            &mut out,
        );
        let words: Vec<&str> = out.iter().map(|o| o.option.as_str()).collect();
        assert_eq!(words, ["-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-Xss1m"]);
        out.clear();
        options_file("8:-Xmx2g\n-Xmx1g\n", "/c/jvm.options", None, &mut out);
        assert_eq!(
            out.len(),
            1,
            "an unknown JDK takes only the lines without a prefix"
        );
    }
}
