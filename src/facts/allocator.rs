//! The malloc the entrypoint process ends up with: a preloaded allocator, one its program
//! links (DT_NEEDED, searched breadth-first as symbol lookup goes), one linked in statically,
//! or the C library's. Plus glibc's arena cap and the allocator libraries that sit unused.

use super::entrypoint::Entrypoint;
use super::libc::{Libc, LibcFamily};
use super::loader::Loader;
pub(crate) use super::preload::Allocator;
use super::preload::{
    allocator_of, embedded_allocator, Preload, PreloadSource, PreloadStatus, EMBEDDED_ALLOCATOR,
};
use super::Env;
use crate::elf::marker::{ElfMarker, Find, Found};
use crate::elf::ElfInfo;
use crate::finding::Evidence;
use crate::tree::Interests;
use serde::Serialize;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum AllocatorVia {
    /// LD_PRELOAD or /etc/ld.so.preload.
    Preload,
    /// A DT_NEEDED library of the entrypoint program (or of its dependencies).
    Needed,
    /// Linked into the entrypoint program.
    Static,
    /// The C library's own malloc.
    Libc,
}

/// The environment variable that caps glibc's arenas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) enum ArenaCapSource {
    #[serde(rename = "MALLOC_ARENA_MAX")]
    MallocArenaMax,
    /// `glibc.malloc.arena_max` in it.
    #[serde(rename = "GLIBC_TUNABLES")]
    GlibcTunables,
}

impl ArenaCapSource {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ArenaCapSource::MallocArenaMax => "MALLOC_ARENA_MAX",
            ArenaCapSource::GlibcTunables => "GLIBC_TUNABLES",
        }
    }
}

impl fmt::Display for ArenaCapSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// glibc's arena cap, from the environment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct ArenaCap {
    /// The value as set.
    pub(crate) value: String,
    pub(crate) source: ArenaCapSource,
}

/// An allocator library in the image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct AllocatorLibrary {
    pub(crate) name: Allocator,
    pub(crate) path: String,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct AllocatorFacts {
    /// The malloc in effect: a replacement, or the C library's (`unknown` when that is).
    pub(crate) name: Allocator,
    pub(crate) via: AllocatorVia,
    pub(crate) path: Option<String>,
    pub(crate) arena_cap: Option<ArenaCap>,
    /// Allocator libraries present in the image but not in effect for the entrypoint.
    pub(crate) installed_not_in_effect: Vec<AllocatorLibrary>,
    pub(crate) evidence: Vec<Evidence>,
    /// What may change the allocator or cap the arenas but cannot be worked out statically
    /// (an undecided preload, an arena cap a script sets to an unknown value): rules treat it
    /// as possibly in effect and stay undecided rather than fire.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) undecided: Vec<String>,
    /// Executables and shared objects that carry a prefixed jemalloc, which reads its own
    /// variable (`_RJEM_MALLOC_CONF`) and never `MALLOC_CONF`: the entrypoint program and the
    /// libraries it loads, and the native extensions of Python packages and Node modules.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) prefixed_jemalloc: Vec<PrefixedJemalloc>,
}

/// A file with a jemalloc built with a name prefix ([`PREFIXED_JEMALLOC`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct PrefixedJemalloc {
    pub(crate) path: String,
    /// The variable its jemalloc reads its options from (`_RJEM_MALLOC_CONF`).
    pub(crate) variable: &'static str,
}

/// Files listed in [`AllocatorFacts::prefixed_jemalloc`] at most.
const MAX_PREFIXED: usize = 16;
/// Folders whose shared objects a runtime loads by itself: Python's extension modules, Node's
/// addons.
const EXTENSION_FOLDERS: &[&str] = &["/site-packages/", "/dist-packages/", "/node_modules/"];

/// The files of the image that carry a prefixed jemalloc and may run in the entrypoint's
/// process: the program, what it loads (DT_NEEDED, breadth first), and native extensions.
fn prefixed_jemalloc(loader: &Loader, program: Option<&str>) -> Vec<PrefixedJemalloc> {
    let tree = loader.tree();
    let mut found: Vec<(String, &'static str)> = Vec::new();
    for id in tree.walk() {
        let Some(variable) = tree.elf(id).and_then(jemalloc_conf_variable) else {
            continue;
        };
        found.push((tree.path_of(id), variable));
    }
    if found.is_empty() {
        return Vec::new();
    }
    let mut loaded = std::collections::BTreeSet::new();
    if let Some(prog) = program {
        let mut queue = std::collections::VecDeque::from([prog.to_string()]);
        while let Some(obj) = queue.pop_front() {
            if loaded.len() > 256 || !loaded.insert(obj.clone()) {
                continue;
            }
            let Some(dynamic) = loader.elf_at(&obj).and_then(|e| e.scan.dynamic.as_ref()) else {
                continue;
            };
            for name in &dynamic.needed {
                if let Some(path) = loader.resolve(name, Some(&obj)).path {
                    queue.push_back(path);
                }
            }
        }
    }
    found
        .into_iter()
        .filter(|(path, _)| loaded.contains(path) || EXTENSION_FOLDERS.iter().any(|f| path.contains(f)))
        .take(MAX_PREFIXED)
        .map(|(path, variable)| PrefixedJemalloc { path, variable })
        .collect()
}

impl AllocatorFacts {
    /// Whether a replacement allocator (not the libc's) is in effect.
    pub(crate) fn is_replacement(&self) -> bool {
        self.name.is_replacement()
    }

    /// Why the allocator in effect or the arena cap cannot be told for sure, when a rule about
    /// glibc's arenas should stay undecided (no replacement in effect, no known cap, and an
    /// undecided preload or cap): the reasons joined, for `-v`.
    pub(crate) fn undecided_reason(&self) -> Option<String> {
        (!self.is_replacement() && !self.undecided.is_empty()).then(|| self.undecided.join("; "))
    }
}

/// The variables that cap glibc's malloc arenas (`MALLOC_ARENA_MAX`, `glibc.malloc.arena_max`
/// in `GLIBC_TUNABLES`): where an arena-cap fix goes.
pub(crate) const ARENA_CAP_VARIABLES: &[&str] = &["MALLOC_ARENA_MAX", "GLIBC_TUNABLES"];
/// [`ARENA_CAP_VARIABLES`] after `LD_PRELOAD`: where a fix that preloads an allocator or caps
/// the arenas goes.
pub(crate) const PRELOAD_OR_ARENA_CAP_VARIABLES: &[&str] =
    &["LD_PRELOAD", "MALLOC_ARENA_MAX", "GLIBC_TUNABLES"];
/// jemalloc's settings (`MALLOC_CONF`, `JE_MALLOC_CONF`), then glibc's malloc settings.
pub(crate) const ALLOCATOR_SETTING_VARIABLES: &[&str] = &[
    "MALLOC_CONF",
    "JE_MALLOC_CONF",
    "MALLOC_ARENA_MAX",
    "GLIBC_TUNABLES",
];

/// The option names jemalloc 5.3 takes in `MALLOC_CONF`: those Debian's libjemalloc2 5.3.0-1
/// accepts (every other name makes it print `<jemalloc>: Invalid conf pair`, checked by running
/// it with each name in the library's strings), and those jemalloc(3) documents as `opt.*` for
/// builds with other configure options (`cache_oblivious`, `utrace`, `xmalloc`).
pub(crate) const JEMALLOC_OPTIONS: &[&str] = &[
    "abort",
    "abort_conf",
    "background_thread",
    "bin_shards",
    "cache_oblivious",
    "confirm_conf",
    "dirty_decay_ms",
    "dss",
    "experimental_infallible_new",
    "hpa",
    "hpa_dirty_mult",
    "hpa_hugification_threshold",
    "hpa_hugification_threshold_ratio",
    "hpa_hugify_delay_ms",
    "hpa_min_purge_interval_ms",
    "hpa_sec_batch_fill_extra",
    "hpa_sec_bytes_after_flush",
    "hpa_sec_max_alloc",
    "hpa_sec_max_bytes",
    "hpa_sec_nshards",
    "hpa_slab_max_alloc",
    "junk",
    "lg_extent_max_active_fit",
    "lg_prof_interval",
    "lg_prof_sample",
    "lg_tcache_flush_large_div",
    "lg_tcache_flush_small_div",
    "lg_tcache_max",
    "lg_tcache_nslots_mul",
    "max_background_threads",
    "metadata_thp",
    "mutex_max_spin",
    "muzzy_decay_ms",
    "narenas",
    "narenas_ratio",
    "oversize_threshold",
    "percpu_arena",
    "prof",
    "prof_accum",
    "prof_active",
    "prof_final",
    "prof_gdump",
    "prof_leak",
    "prof_leak_error",
    "prof_log",
    "prof_prefix",
    "prof_recent_alloc_max",
    "prof_stats",
    "prof_sys_thread_name",
    "prof_thread_active_init",
    "prof_time_resolution",
    "prof_unbias",
    "retain",
    "san_guard_large",
    "san_guard_small",
    "slab_sizes",
    "stats_interval",
    "stats_interval_opts",
    "stats_print",
    "stats_print_opts",
    "tcache",
    "tcache_gc_delay_bytes",
    "tcache_gc_incr_bytes",
    "tcache_max",
    "tcache_nslots_large",
    "tcache_nslots_small_max",
    "tcache_nslots_small_min",
    "thp",
    "trust_madvise",
    "utrace",
    "xmalloc",
    "zero",
    "zero_realloc",
];

/// The option names of a `MALLOC_CONF` value (`name:value,name:value`) jemalloc does not know.
pub(crate) fn unknown_jemalloc_options(value: &str) -> Vec<&str> {
    value
        .split(',')
        .filter_map(|pair| pair.split(':').next())
        .map(str::trim)
        .filter(|k| !k.is_empty() && !JEMALLOC_OPTIONS.contains(k))
        .collect()
}

/// The pairs of a `MALLOC_CONF` value whose option jemalloc knows, as written.
pub(crate) fn known_jemalloc_pairs(value: &str) -> Vec<&str> {
    value
        .split(',')
        .filter(|pair| {
            pair.split(':')
                .next()
                .is_some_and(|k| JEMALLOC_OPTIONS.contains(&k.trim()))
        })
        .collect()
}

/// glibc's malloc settings the environment gives: `MALLOC_ARENA_MAX`, and the `glibc.malloc.*`
/// pairs of `GLIBC_TUNABLES` (joined by `:`), each with its variable.
pub(crate) fn glibc_malloc_settings(env: &Env) -> Vec<(&'static str, String)> {
    let tunables = env.non_empty(ARENA_CAP_VARIABLES[1]).and_then(|t| {
        let malloc: Vec<&str> = t
            .split(':')
            .filter(|kv| kv.trim_start().starts_with("glibc.malloc."))
            .collect();
        (!malloc.is_empty()).then(|| malloc.join(":"))
    });
    [
        (
            ARENA_CAP_VARIABLES[0],
            env.non_empty(ARENA_CAP_VARIABLES[0]).map(str::to_string),
        ),
        (ARENA_CAP_VARIABLES[1], tunables),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| (k, v)))
    .collect()
}

/// `MALLOC_ARENA_MAX`, or `glibc.malloc.arena_max` in `GLIBC_TUNABLES` (colon-separated
/// `name=value` pairs; glibc manual, Tunables).
pub(crate) fn arena_cap(env: &Env) -> Option<ArenaCap> {
    if let Some(v) = env.non_empty("MALLOC_ARENA_MAX") {
        return Some(ArenaCap {
            value: v.to_string(),
            source: ArenaCapSource::MallocArenaMax,
        });
    }
    let tunables = env.non_empty("GLIBC_TUNABLES")?;
    tunables.split(':').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k.trim() == "glibc.malloc.arena_max" && !v.trim().is_empty()).then(|| ArenaCap {
            value: v.trim().to_string(),
            source: ArenaCapSource::GlibcTunables,
        })
    })
}

/// The option variables of prefixed jemalloc builds, as C strings in their read-only data:
/// jemalloc names it `JEMALLOC_CPREFIX "MALLOC_CONF"` (`src/jemalloc.c`), and tikv-jemallocator
/// (Rust's jemalloc crate, and so polars and other Rust extensions) builds with the `_rjem_`
/// prefix. The terminating NUL keeps out text that merely mentions the name.
pub(crate) static PREFIXED_JEMALLOC: ElfMarker = ElfMarker {
    key: "jemalloc_conf_variable",
    find: Find::Label(&[(b"_RJEM_MALLOC_CONF\0", "_RJEM_MALLOC_CONF")]),
    null_when_absent: false,
};

/// The variable a prefixed jemalloc linked into `elf` reads its options from instead of
/// `MALLOC_CONF`.
fn jemalloc_conf_variable(elf: &ElfInfo) -> Option<&'static str> {
    label(elf, &PREFIXED_JEMALLOC)
}

fn label(elf: &ElfInfo, marker: &'static ElfMarker) -> Option<&'static str> {
    match elf.scan.markers.get(marker)? {
        Found::Text(t) => marker.label(t),
        Found::Bytes(_) => None,
    }
}

/// What [`derive`] reads: the dynamic sections and the allocator markers of the entrypoint
/// and the libraries it loads.
pub(crate) fn interests() -> Interests {
    Interests::default().scan_elf_for(&[&EMBEDDED_ALLOCATOR, &PREFIXED_JEMALLOC])
}

pub(crate) fn derive(
    loader: &Loader,
    env: &Env,
    libc: &Libc,
    preloads: &[Preload],
    entry: &Entrypoint,
) -> AllocatorFacts {
    let mut evidence = Vec::new();
    let mut in_effect: Option<(Allocator, AllocatorVia, Option<String>)> = None;

    // Preloaded objects come first in the symbol search order, in the order listed.
    for p in preloads.iter().filter(|p| p.status == PreloadStatus::Ok) {
        if let Some(a) = p.allocator {
            let library = p.resolved.as_deref().unwrap_or(&p.entry);
            let script_source;
            let (source, source_path) = match p.source {
                PreloadSource::Env => ("LD_PRELOAD", None),
                PreloadSource::LdSoPreload => ("/etc/ld.so.preload", Some("/etc/ld.so.preload")),
                PreloadSource::Script => {
                    script_source = format!(
                        "LD_PRELOAD exported by {} line {}",
                        p.script.as_deref().unwrap_or("a script"),
                        p.line.unwrap_or(0)
                    );
                    (script_source.as_str(), p.script.as_deref())
                }
            };
            evidence.push(Evidence::naming(
                format!("{source} preloads {library} ({a})"),
                source_path.into_iter().chain([library]),
            ));
            in_effect = Some((a, AllocatorVia::Preload, p.resolved.clone()));
            break;
        }
    }
    let program = entry.program.as_deref().filter(|p| loader.elf_at(p).is_some());
    if in_effect.is_none() {
        if let Some(prog) = program {
            // The program's own dependencies, breadth first, as the loader orders symbol
            // lookup; an allocator among them interposes malloc before the libc's.
            let mut queue = std::collections::VecDeque::from([prog.to_string()]);
            let mut seen = std::collections::BTreeSet::new();
            while let Some(obj) = queue.pop_front() {
                if !seen.insert(obj.clone()) || seen.len() > 256 {
                    continue;
                }
                let Some(dynamic) = loader.elf_at(&obj).and_then(|e| e.scan.dynamic.as_ref()) else {
                    continue;
                };
                for name in &dynamic.needed {
                    let r = loader.resolve(name, Some(&obj));
                    if let Some(path) = r.path {
                        let embedded = loader.elf_at(&path).and_then(embedded_allocator);
                        if let Some(a) = allocator_of(name, embedded) {
                            if in_effect.is_none() {
                                evidence.push(Evidence::naming(
                                    format!("{obj} needs {name} ({a}), found at {path}"),
                                    [obj.as_str(), path.as_str()],
                                ));
                                in_effect = Some((a, AllocatorVia::Needed, Some(path.clone())));
                            }
                        }
                        queue.push_back(path);
                    }
                }
                if in_effect.is_some() {
                    break;
                }
            }
        }
    }
    if in_effect.is_none() {
        if let Some(prog) = program {
            let embedded = loader.elf_at(prog).and_then(embedded_allocator);
            if let Some(a) = embedded.and_then(Allocator::replacement_named) {
                evidence.push(Evidence::naming(
                    format!("{prog} carries {a}'s own messages: {a} is linked in"),
                    [prog],
                ));
                in_effect = Some((a, AllocatorVia::Static, Some(prog.to_string())));
            }
        }
    }
    let (name, via, path) = in_effect.unwrap_or_else(|| {
        let name = match libc.family {
            LibcFamily::Glibc => Allocator::Glibc,
            LibcFamily::Musl => Allocator::Musl,
            _ => Allocator::Unknown,
        };
        evidence.push(Evidence::plain(match libc.family {
            LibcFamily::Glibc | LibcFamily::Musl => {
                format!("no other allocator is preloaded or linked: the entrypoint uses {name}'s malloc")
            }
            _ => "the C library of the entrypoint is not known".to_string(),
        }));
        (name, AllocatorVia::Libc, None)
    });
    let cap = arena_cap(env);
    if let Some(c) = &cap {
        evidence.push(Evidence::plain(format!(
            "{} caps glibc's arenas ({}={})",
            c.source, c.source, c.value
        )));
    }
    let mut undecided: Vec<String> = preloads
        .iter()
        .filter(|p| p.status == PreloadStatus::Undecided)
        .map(|p| format!("preload `{}` is possibly in effect: {}", p.entry, p.reason))
        .collect();
    if cap.is_none() {
        for key in ARENA_CAP_VARIABLES {
            if let Some(e) = env.undecided(key).and(env.entry(key)) {
                undecided.push(format!("possibly an arena cap: {e}"));
            }
        }
    }
    let installed_not_in_effect = loader
        .find_libraries(&["libjemalloc", "libtcmalloc", "libmimalloc"])
        .into_iter()
        .filter(|p| Some(p) != path.as_ref())
        .filter_map(|p| allocator_of(&p, None).map(|name| AllocatorLibrary { name, path: p }))
        .collect();
    AllocatorFacts {
        name,
        via,
        path,
        arena_cap: cap,
        installed_not_in_effect,
        evidence,
        undecided,
        prefixed_jemalloc: prefixed_jemalloc(loader, program),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arena_caps() {
        assert_eq!(
            arena_cap(&Env::from_pairs(["MALLOC_ARENA_MAX=2"])).unwrap().value,
            "2"
        );
        assert!(arena_cap(&Env::from_pairs(["MALLOC_ARENA_MAX="])).is_none());
        let t = arena_cap(&Env::from_pairs([
            "GLIBC_TUNABLES=glibc.malloc.trim_threshold=1:glibc.malloc.arena_max=4",
        ]))
        .unwrap();
        assert_eq!((t.value.as_str(), t.source), ("4", ArenaCapSource::GlibcTunables));
        assert_eq!(
            serde_json::to_value(&t).unwrap(),
            serde_json::json!({"value": "4", "source": "GLIBC_TUNABLES"})
        );
        assert!(arena_cap(&Env::from_pairs(["GLIBC_TUNABLES=glibc.malloc.arena_test=4"])).is_none());
    }
}
