//! The facts the formats read of a report beyond its findings (the C library, the memory
//! budget, PHP's worker pools, the worker counts taken from the node's CPUs), as typed
//! documents deserialised from the JSON's `facts`. A live run reads them from its facts'
//! JSON ([`FactsDoc::of_facts`]) and `merge` from the report file ([`FactsDoc::of_json`]), so
//! the HTML page's budget picture of a merged report is the unsharded run's, byte for byte.
//! Every other key of `facts` is skipped.

use crate::facts::Facts;
use crate::units::human_bytes;
use serde::Deserialize;
use serde_json::Value;

/// What the formats read of a report's `facts`.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct FactsDoc {
    pub(crate) libc: LibcDoc,
    pub(crate) memory: MemoryDoc,
    #[serde(default)]
    pub(crate) php: Option<PhpDoc>,
    #[serde(default)]
    pub(crate) workers: WorkersDoc,
}

/// `facts.libc`: the C library the entrypoint runs on.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct LibcDoc {
    pub(crate) family: String,
    #[serde(default)]
    pub(crate) version: Option<String>,
}

impl LibcDoc {
    /// `glibc 2.36`, or the family alone.
    pub(crate) fn describe(&self) -> String {
        match &self.version {
            Some(v) => format!("{} {v}", self.family),
            None => self.family.clone(),
        }
    }
}

/// `facts.memory`: the container's memory budget ([`crate::facts::memory::MemoryBudget`]).
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct MemoryDoc {
    pub(crate) limit: AmountDoc,
    pub(crate) request: AmountDoc,
    pub(crate) volumes: Vec<VolumeDoc>,
    pub(crate) dev_shm: DevShmDoc,
    pub(crate) runtimes: Vec<CommitmentDoc>,
}

/// An amount the manifest sets, or why it is not known.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub(crate) enum AmountDoc {
    Set { bytes: u64, text: String, line: u32 },
    Undecided { why: String },
}

impl AmountDoc {
    /// The bytes, when set (a limit of 0 is no limit).
    pub(crate) fn bytes(&self) -> Option<u64> {
        match self {
            AmountDoc::Set { bytes, .. } if *bytes > 0 => Some(*bytes),
            _ => None,
        }
    }
}

/// A memory-backed volume the container mounts.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct VolumeDoc {
    pub(crate) volume: String,
    pub(crate) path: String,
    pub(crate) size_limit: Option<u64>,
    #[serde(default)]
    pub(crate) size_limit_text: Option<String>,
}

/// `/dev/shm` as the container gets it.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct DevShmDoc {
    pub(crate) bytes: Option<u64>,
    pub(crate) source: String,
    /// `runtime_default`, `memory_volume`, `volume` or `host_ipc`.
    pub(crate) from: String,
}

/// What a runtime's setting commits of the container's memory.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct CommitmentDoc {
    pub(crate) runtime: String,
    pub(crate) what: String,
    pub(crate) status: String,
    pub(crate) bytes: Option<u64>,
    #[serde(default)]
    pub(crate) percent_of_limit: Option<f64>,
    pub(crate) setting: String,
    #[serde(default)]
    pub(crate) origin: Option<String>,
    #[serde(default)]
    pub(crate) why: Option<String>,
}

/// `facts.php`: the PHP servers the entrypoint runs.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct PhpDoc {
    pub(crate) servers: Vec<PhpServerDoc>,
}

#[derive(Clone, Debug, Deserialize)]
pub(crate) struct PhpServerDoc {
    /// `php-fpm` or `apache2`.
    pub(crate) kind: String,
    pub(crate) pools: Vec<PhpPoolDoc>,
}

#[derive(Clone, Debug, Deserialize)]
pub(crate) struct PhpPoolDoc {
    pub(crate) name: String,
    /// The directive that sets the count of workers.
    pub(crate) directive: String,
    pub(crate) workers: WorkerCountDoc,
    pub(crate) memory_limit: Option<PhpMemoryLimitDoc>,
    #[serde(default)]
    pub(crate) memory_limit_undecided: Option<String>,
}

/// A pool's count of workers, or why it is not known.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub(crate) enum WorkerCountDoc {
    Set { count: u64 },
    Undecided { why: String },
}

#[derive(Clone, Debug, Deserialize)]
pub(crate) struct PhpMemoryLimitDoc {
    pub(crate) bytes: Option<u64>,
}

/// `facts.workers` (absent when empty).
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct WorkersDoc {
    #[serde(default)]
    pub(crate) host_cpu: Vec<HostCpuDoc>,
}

/// A worker count a server takes from the node's CPUs.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct HostCpuDoc {
    pub(crate) server: String,
    pub(crate) how: String,
    pub(crate) setting: String,
}

impl FactsDoc {
    /// What the formats read of live facts: read from the JSON they write, so that a report
    /// read back from that JSON says the same.
    pub(crate) fn of_facts(f: &Facts) -> Result<FactsDoc, String> {
        /// The keys of [`Facts`] that [`FactsDoc`] reads, serialised as `Facts` serialises them.
        #[derive(serde::Serialize)]
        struct Read<'a> {
            libc: &'a crate::facts::libc::Libc,
            memory: &'a crate::facts::memory::MemoryBudget,
            php: &'a Option<crate::facts::php::PhpFacts>,
            workers: &'a crate::facts::workers::WorkerFacts,
        }
        let json = serde_json::to_value(Read {
            libc: &f.libc,
            memory: &f.memory,
            php: &f.php,
            workers: &f.workers,
        })
        .map_err(|e| e.to_string())?;
        FactsDoc::of_json(&json)
    }

    /// What the formats read of a report's `facts`; `Err` names the key that is not as
    /// memlint writes it.
    pub(crate) fn of_json(facts: &Value) -> Result<FactsDoc, String> {
        serde_path_to_error::deserialize(facts).map_err(|e| {
            format!(
                "key `facts.{}`: {}",
                crate::untrusted::line(&e.path().to_string()),
                crate::untrusted::line(&e.inner().to_string())
            )
        })
    }
}

impl MemoryDoc {
    /// The budget of live facts, as its JSON reads back.
    pub(crate) fn of(b: &crate::facts::memory::MemoryBudget) -> Result<MemoryDoc, String> {
        let json = serde_json::to_value(b).map_err(|e| e.to_string())?;
        MemoryDoc::deserialize(&json).map_err(|e| e.to_string())
    }

    /// The limit in bytes, when the manifest sets one.
    pub(crate) fn limit_bytes(&self) -> Option<u64> {
        self.limit.bytes()
    }
}

/// The budget as rows for people (`inspect`, `lint -v`, the HTML page): what, setting, size
/// (with its share of the limit).
pub(crate) fn rows(b: &MemoryDoc) -> Vec<[String; 3]> {
    let limit = b.limit_bytes();
    let size = |bytes: Option<u64>| match (bytes, limit) {
        (Some(n), Some(l)) if l > 0 => {
            format!("{} ({} %)", human_bytes(n), (u128::from(n) * 100 / u128::from(l)))
        }
        (Some(n), _) => human_bytes(n),
        (None, _) => "?".into(),
    };
    let mut rows = Vec::new();
    for (name, amount) in [("limit", &b.limit), ("request", &b.request)] {
        rows.push(match amount {
            AmountDoc::Set { bytes, text, line } => [
                name.to_string(),
                format!("resources.{name}s.memory {text} (line {line})"),
                human_bytes(*bytes),
            ],
            AmountDoc::Undecided { why } => [name.to_string(), why.clone(), "undecided".into()],
        });
    }
    for v in &b.volumes {
        rows.push([
            "memory volume".into(),
            format!(
                "emptyDir {} at {} ({})",
                v.volume,
                v.path,
                v.size_limit_text
                    .as_deref()
                    .map_or("no sizeLimit: sized from the node".to_string(), |s| format!(
                        "sizeLimit {s}"
                    ))
            ),
            size(v.size_limit),
        ]);
    }
    rows.push(["/dev/shm".into(), b.dev_shm.source.clone(), size(b.dev_shm.bytes)]);
    for c in &b.runtimes {
        let what = format!("{} {}", c.runtime, c.what.replace('_', " "));
        let setting = match (&c.why, &c.origin) {
            (Some(why), _) => format!("undecided: {why}"),
            (None, Some(origin)) if !c.setting.contains(origin.as_str()) => {
                format!("{}; {origin}", c.setting)
            }
            (None, _) => c.setting.clone(),
        };
        let shown = match (c.bytes, c.percent_of_limit) {
            (None, Some(p)) => format!("{p} % of the limit"),
            (None, None) if c.status == "default" => "sized from the limit".into(),
            (bytes, _) => size(bytes),
        };
        rows.push([what, setting, shown]);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_show_each_part_and_its_share_of_the_limit() {
        let b: MemoryDoc = serde_json::from_value(serde_json::json!({
            "limit": {"status": "set", "bytes": 2u64 << 30, "text": "2Gi", "line": 9},
            "request": {"status": "undecided", "why": "the container sets no resources.requests.memory"},
            "volumes": [{"volume": "cache", "path": "/cache", "size_limit": null}],
            "dev_shm": {"bytes": 64u64 << 20, "source": "the container runtime's default", "from": "runtime_default"},
            "runtimes": [
                {"runtime": "jvm", "what": "heap", "status": "set", "bytes": 1u64 << 30, "setting": "-Xmx1g", "origin": "set by the image's ENV"},
                {"runtime": "jvm", "what": "direct_memory", "status": "default", "bytes": null, "setting": "the heap cap"}
            ]
        }))
        .unwrap();
        let rows = rows(&b);
        assert_eq!(
            rows[0],
            ["limit", "resources.limits.memory 2Gi (line 9)", "2 GiB"]
        );
        assert_eq!(
            rows[2][1],
            "emptyDir cache at /cache (no sizeLimit: sized from the node)"
        );
        assert_eq!(rows[3][2], "64 MiB (3 %)");
        assert_eq!(
            rows[4],
            ["jvm heap", "-Xmx1g; set by the image's ENV", "1 GiB (50 %)"]
        );
        assert_eq!(rows[5][2], "sized from the limit");
    }

    #[test]
    fn a_facts_key_not_as_memlint_writes_it_is_named() {
        let err =
            FactsDoc::of_json(&serde_json::json!({"libc": {"family": "glibc"}, "memory": {"limit": 3}}))
                .unwrap_err();
        assert!(err.contains("facts.memory.limit"), "{err}");
    }
}
