//! Elasticsearch and OpenSearch, for what the pod must give them: `bootstrap.memory_lock`
//! (which needs an unlimited memlock ulimit) and whether the heap is left to the launcher's
//! automatic sizing (Elasticsearch 7.11 and later size it from the memory they see).
//!
//! - Server: `bin/elasticsearch` under `/usr/share/elasticsearch` (the official images, the
//!   Debian and RPM packages) or `/opt/bitnami/elasticsearch`; `bin/opensearch` under
//!   `/usr/share/opensearch` or `/opt/bitnami/opensearch`. The version is that of
//!   `lib/elasticsearch-X.Y.Z.jar` (`lib/opensearch-X.Y.Z.jar`).
//! - `bootstrap.memory_lock`: the environment form the images read (`bootstrap.memory_lock=true`,
//!   and Elasticsearch 8's `ES_SETTING_BOOTSTRAP_MEMORY__LOCK`) wins over
//!   `config/elasticsearch.yml` (`opensearch.yml`; `/etc/elasticsearch/elasticsearch.yml` for
//!   the packages), read flat (`bootstrap.memory_lock: true`) or nested.
//! - Heap: `-Xmx` in `ES_JAVA_OPTS` (`OPENSEARCH_JAVA_OPTS`), `config/jvm.options` or a file of
//!   `config/jvm.options.d`. Only whether one is set: the heap's size against the limit is the
//!   JVM heap facts' business.

use super::Env;
use crate::k8s::yaml::{self, Node};
use crate::tree::{FileTree, Interests, NodeKind};
use serde::Serialize;

const HOMES: &[(&str, &str)] = &[
    ("/usr/share/elasticsearch", "elasticsearch"),
    ("/opt/bitnami/elasticsearch", "elasticsearch"),
    ("/usr/share/opensearch", "opensearch"),
    ("/opt/bitnami/opensearch", "opensearch"),
];
const CONFIG_CAP: u64 = 64 * 1024;
const OPTIONS_CAP: u64 = 16 * 1024;
/// `jvm.options.d` files read at most.
const MAX_OPTION_FILES: usize = 64;

/// `bootstrap.memory_lock` as the server gets it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct MemoryLock {
    pub(crate) enabled: bool,
    /// `config/elasticsearch.yml line 12`, `bootstrap.memory_lock=true (set by …)`.
    pub(crate) source: String,
    /// The file, when a file sets it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) path: Option<String>,
}

/// An Elasticsearch or OpenSearch server in the image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct SearchEngine {
    /// `elasticsearch` or `opensearch`.
    pub(crate) product: &'static str,
    pub(crate) home: String,
    pub(crate) version: Option<String>,
    /// `null` when nothing sets it (off).
    pub(crate) memory_lock: Option<MemoryLock>,
    /// Where an `-Xmx` is set, when one is.
    pub(crate) heap_set_by: Option<String>,
}

impl SearchEngine {
    /// Elasticsearch 7.11 or later with no `-Xmx`: the launcher sizes the heap from the memory
    /// it sees (half of it, up to 31 GiB).
    pub(crate) fn heap_sized_automatically(&self) -> bool {
        if self.product != "elasticsearch" || self.heap_set_by.is_some() {
            return false;
        }
        let Some(v) = &self.version else { return false };
        let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        (major, minor) >= (7, 11)
    }
}

/// What [`derive`] reads: each home's settings and JVM options, and the packages' settings.
pub(crate) fn interests() -> Interests {
    let mut i = Interests::default();
    for (home, product) in HOMES {
        i = i
            .keep(&format!("{home}/config/{product}.yml"), CONFIG_CAP)
            .keep(&format!("{home}/config/jvm.options"), OPTIONS_CAP)
            .keep(&format!("{home}/config/jvm.options.d/*"), OPTIONS_CAP);
    }
    i.keep("/etc/elasticsearch/elasticsearch.yml", CONFIG_CAP)
        .keep("/etc/elasticsearch/jvm.options", OPTIONS_CAP)
        .keep("/etc/elasticsearch/jvm.options.d/*", OPTIONS_CAP)
        .keep("/etc/opensearch/opensearch.yml", CONFIG_CAP)
}

/// The server, when the image holds one.
pub(crate) fn derive(tree: &FileTree, env: &Env) -> Option<SearchEngine> {
    let (home, product) = HOMES
        .iter()
        .find(|(home, product)| tree.is_file_at(&format!("{home}/bin/{product}")))?;
    let version = children(tree, &format!("{home}/lib")).into_iter().find_map(|n| {
        let v = n.strip_prefix(&format!("{product}-"))?.strip_suffix(".jar")?;
        v.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| v.to_string())
    });
    let config_dirs = [format!("{home}/config"), format!("/etc/{product}")];
    let memory_lock = lock_from_env(env).or_else(|| {
        config_dirs.iter().find_map(|d| {
            let path = format!("{d}/{product}.yml");
            let body = tree.kept_text(&path)?;
            lock_from_yaml(&body, &path)
        })
    });
    let opts_var = if *product == "opensearch" {
        "OPENSEARCH_JAVA_OPTS"
    } else {
        "ES_JAVA_OPTS"
    };
    let heap_set_by = env
        .get(opts_var)
        .filter(|o| o.split_whitespace().any(|w| w.starts_with("-Xmx")))
        .map(|_| env.entry(opts_var).unwrap_or_else(|| opts_var.to_string()))
        .or_else(|| {
            config_dirs.iter().find_map(|d| {
                let mut files = vec![format!("{d}/jvm.options")];
                let mut extra = children(tree, &format!("{d}/jvm.options.d"));
                extra.sort_unstable();
                files.extend(
                    extra
                        .into_iter()
                        .take(MAX_OPTION_FILES)
                        .map(|n| format!("{d}/jvm.options.d/{n}")),
                );
                files.into_iter().find_map(|f| {
                    let body = tree.kept_text(&f)?;
                    body.lines()
                        .position(|l| {
                            let l = l.trim();
                            // `17-:-Xmx1g`: a JDK version range before the option.
                            let option = l.split_once(":-").map_or(l, |(_, o)| o);
                            !l.starts_with('#') && (option.starts_with("-Xmx") || option.starts_with("Xmx"))
                        })
                        .map(|i| format!("{f} line {}", i + 1))
                })
            })
        });
    Some(SearchEngine {
        product,
        home: home.to_string(),
        version,
        memory_lock,
        heap_set_by,
    })
}

/// The environment form of the setting: the images pass a variable whose name holds a dot as a
/// setting, and Elasticsearch 8 reads `ES_SETTING_…` (`_` for `.`, `__` for `_`).
fn lock_from_env(env: &Env) -> Option<MemoryLock> {
    ["bootstrap.memory_lock", "ES_SETTING_BOOTSTRAP_MEMORY__LOCK"]
        .iter()
        .find_map(|name| {
            let value = env.get(name)?;
            Some(MemoryLock {
                enabled: value.trim().eq_ignore_ascii_case("true"),
                source: env.entry(name).unwrap_or_else(|| format!("{name}={value}")),
                path: None,
            })
        })
}

/// `bootstrap.memory_lock` of a settings file, flat or nested.
fn lock_from_yaml(body: &str, path: &str) -> Option<MemoryLock> {
    let docs = yaml::documents(body).ok()?;
    let root = &docs.first()?.value;
    let found = lookup(root, &["bootstrap", "memory_lock"])?;
    let enabled = match &found.value {
        Node::Bool(b) => *b,
        Node::Str(s) => s.trim().eq_ignore_ascii_case("true"),
        _ => false,
    };
    Some(MemoryLock {
        enabled,
        source: format!("{path} line {}", yaml::line_of(found)),
        path: Some(path.to_string()),
    })
}

/// The value at `keys`, where any run of keys may also be written as one dotted key.
fn lookup<'n>(node: &'n Node, keys: &[&str]) -> Option<&'n serde_saphyr::Spanned<Node>> {
    for take in (1..=keys.len()).rev() {
        let key = keys[..take].join(".");
        if let Some(v) = node.get(&key) {
            if take == keys.len() {
                return Some(v);
            }
            if let Some(found) = lookup(&v.value, &keys[take..]) {
                return Some(found);
            }
        }
    }
    None
}

fn children(tree: &FileTree, dir: &str) -> Vec<String> {
    match tree.lookup(dir).ok().flatten().map(|id| tree.node(id).kind) {
        Some(NodeKind::Dir(c)) => c.keys().map(|k| k.to_string()).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use crate::facts::testing::TestImage;

    fn es(version: &str) -> TestImage {
        TestImage::new()
            .glibc()
            .file("/usr/share/elasticsearch/bin/elasticsearch", "#!/bin/bash\n")
            .empty(&format!(
                "/usr/share/elasticsearch/lib/elasticsearch-{version}.jar"
            ))
    }

    #[test]
    fn memory_lock_from_the_settings_file_flat_or_nested_and_the_environment() {
        let flat = es("8.15.0")
            .file(
                "/usr/share/elasticsearch/config/elasticsearch.yml",
                "cluster.name: c\nbootstrap.memory_lock: true\n",
            )
            .facts();
        let s = flat.search_engine.unwrap_or_else(|| panic!("no ES"));
        assert_eq!(s.version.as_deref(), Some("8.15.0"));
        let lock = s.memory_lock.unwrap_or_else(|| panic!("no lock"));
        assert!(lock.enabled);
        assert_eq!(
            lock.source,
            "/usr/share/elasticsearch/config/elasticsearch.yml line 2"
        );
        let nested = es("8.15.0")
            .file(
                "/usr/share/elasticsearch/config/elasticsearch.yml",
                "bootstrap:\n  memory_lock: \"true\"\n",
            )
            .facts();
        assert!(nested
            .search_engine
            .and_then(|s| s.memory_lock)
            .is_some_and(|l| l.enabled));
        // The environment wins.
        let off = es("8.15.0")
            .file(
                "/usr/share/elasticsearch/config/elasticsearch.yml",
                "bootstrap.memory_lock: true\n",
            )
            .env(&["bootstrap.memory_lock=false"])
            .facts();
        assert!(off
            .search_engine
            .and_then(|s| s.memory_lock)
            .is_some_and(|l| !l.enabled));
        assert!(TestImage::new().glibc().facts().search_engine.is_none());
    }

    #[test]
    fn the_heap_is_automatic_from_7_11_without_xmx() {
        let auto = es("7.17.0")
            .facts()
            .search_engine
            .unwrap_or_else(|| panic!("no ES"));
        assert!(auto.heap_sized_automatically());
        assert!(!es("7.10.2")
            .facts()
            .search_engine
            .is_some_and(|s| s.heap_sized_automatically()));
        let set = es("8.15.0")
            .file(
                "/usr/share/elasticsearch/config/jvm.options.d/heap.options",
                "# heap\n-Xms2g\n-Xmx2g\n",
            )
            .facts()
            .search_engine
            .unwrap_or_else(|| panic!("no ES"));
        assert_eq!(
            set.heap_set_by.as_deref(),
            Some("/usr/share/elasticsearch/config/jvm.options.d/heap.options line 3")
        );
        let env = es("8.15.0")
            .env(&["ES_JAVA_OPTS=-Xms1g -Xmx1g"])
            .facts()
            .search_engine;
        assert!(env.is_some_and(|s| !s.heap_sized_automatically()));
    }
}
