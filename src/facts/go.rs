//! Go programs the container may run: the ELF executables on the entrypoint's path and in the
//! `PATH` folders that carry Go build info (`go version -m`): the Go version, the
//! `CGO_ENABLED` build setting and the modules they were built from. The build info is found
//! by the layer reader while each file streams by (the marker [`GO_BUILDINFO`], decoded by
//! [`buildinfo`]), since it often lies past the prefix memlint keeps of an ELF file.

use super::entrypoint::{Entrypoint, DEFAULT_PATH};
use super::Env;
use crate::elf::marker::{Blob, ElfMarker, Find, Found};
use crate::elf::ElfInfo;
use crate::tree::{FileTree, Interests, NodeId, NodeKind};
use serde::Serialize;

pub(crate) mod buildinfo;
pub(crate) mod memlimit;

pub(crate) use buildinfo::{GoBuildInfo, GoModule};

/// The build info blob Go's linker puts in the `.go.buildinfo` section of a program's writable
/// data, 16-byte aligned, starting with its magic ([`buildinfo`] has the format).
pub(crate) static GO_BUILDINFO: ElfMarker = ElfMarker {
    key: "go",
    find: Find::Blob(Blob {
        magic: buildinfo::MAGIC,
        align: buildinfo::ALIGN,
        min_len: buildinfo::HEADER,
        cap: buildinfo::CAPTURE_CAP,
        whole: buildinfo::blob_complete,
        show: |held| serde_json::to_value(buildinfo::parse(held)).unwrap_or_default(),
    }),
    null_when_absent: true,
};

/// The build info of a Go program, from the blob the scan held.
pub(crate) fn build_info(elf: &ElfInfo) -> Option<GoBuildInfo> {
    match elf.scan.markers.get(&GO_BUILDINFO)? {
        Found::Bytes(held) => buildinfo::parse(held),
        Found::Text(_) => None,
    }
}

/// Go programs listed at most; an image with more lists the first ones found.
const MAX_BINARIES: usize = 256;

/// One Go program.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct GoBinary {
    /// Its path in the image (links followed).
    pub(crate) path: String,
    /// `go1.22.1`; `null` for a program built by Go before 1.18 (whose build info memlint
    /// does not decode).
    pub(crate) go_version: Option<String>,
    /// The `CGO_ENABLED` build setting; `null` when the build info does not record it.
    pub(crate) cgo: Option<bool>,
    /// The main module's path.
    pub(crate) main_module: Option<String>,
    /// The module dependencies (`dep` lines), with their `=>` replacements.
    pub(crate) deps: Vec<GoModule>,
    /// False when the build info was longer than memlint keeps, so `deps` may be missing some.
    pub(crate) deps_complete: bool,
    /// Its DT_NEEDED libraries.
    pub(crate) needed: Vec<String>,
    /// The entrypoint runs it (it is the final program or a step on the way).
    pub(crate) on_entrypoint: bool,
}

impl GoBinary {
    /// The module paths the program was built from, its main module first.
    pub(crate) fn modules(&self) -> impl Iterator<Item = &str> {
        self.main_module
            .as_deref()
            .into_iter()
            .chain(self.deps.iter().map(|d| d.path.as_str()))
    }
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct GoFacts {
    pub(crate) binaries: Vec<GoBinary>,
    /// The `GOMEMLIMIT` the entrypoint's program starts with (reported under `facts.memory`).
    #[serde(skip)]
    pub(crate) memlimit: memlimit::GoMemLimit,
    /// The `GOGC` it starts with.
    #[serde(skip)]
    pub(crate) gogc: GoGc,
}

/// `GOGC` as the runtime reads it (`readGOGC` in `mgcpacer.go`): `off` or a negative number
/// turns the collector off, a number is the percentage, anything else is the default 100.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum GoGc {
    #[default]
    Default,
    Percent(i64),
    Off,
    /// Set in a way memlint cannot work out.
    Undecided(String),
}

/// The `GOGC` the environment gives the program.
pub(crate) fn read_gogc(env: &Env) -> GoGc {
    if let Some(why) = env.first_undecided(&["GOGC"]) {
        return GoGc::Undecided(why);
    }
    match env.get("GOGC") {
        None => GoGc::Default,
        Some("off") => GoGc::Off,
        Some(v) => match atoi64(v.as_bytes()) {
            Some(n) if n < 0 => GoGc::Off,
            Some(n) => GoGc::Percent(n),
            None => GoGc::Default,
        },
    }
}

/// What [`derive`] reads: the build info and dynamic section the ELF scan records.
pub(crate) fn interests() -> Interests {
    Interests::default().scan_elf_for(&[&GO_BUILDINFO])
}

/// The environment this module reads, in one place.
struct EnvInputs<'a> {
    path: &'a str,
}

fn env_inputs(env: &Env) -> EnvInputs<'_> {
    EnvInputs {
        path: env.get("PATH").unwrap_or(DEFAULT_PATH),
    }
}

pub(crate) fn derive(tree: &FileTree, env: &Env, entry: &Entrypoint) -> GoFacts {
    let inputs = env_inputs(env);
    let mut out = GoFacts::default();
    let mut seen = std::collections::BTreeSet::new();
    let on_path = entry
        .steps
        .iter()
        .filter_map(|s| s.path.as_deref())
        .chain(entry.program.as_deref());
    let mut candidates: Vec<(NodeId, bool)> = on_path
        .filter_map(|p| tree.lookup(p).ok().flatten())
        .map(|id| (id, true))
        .collect();
    for dir in inputs.path.split(':').filter(|d| d.starts_with('/')) {
        let Some(dir_id) = tree.lookup(dir).ok().flatten() else {
            continue;
        };
        let NodeKind::Dir(children) = &tree.node(dir_id).kind else {
            continue;
        };
        for name in children.keys() {
            let path = format!("{}/{name}", dir.trim_end_matches('/'));
            if let Some(id) = tree.lookup(&path).ok().flatten() {
                candidates.push((id, false));
            }
        }
    }
    for (id, on_entrypoint) in candidates {
        if out.binaries.len() >= MAX_BINARIES {
            break;
        }
        if !seen.insert(id) || !tree.node(id).is_file() {
            continue;
        }
        let Some(elf) = tree.elf(id) else { continue };
        let Some(go) = build_info(elf) else {
            continue;
        };
        out.binaries.push(GoBinary {
            path: tree.path_of(id),
            go_version: go.go_version.clone(),
            cgo: go.cgo,
            main_module: go.main_module.as_ref().map(|m| m.path.clone()),
            deps: go.deps.clone(),
            deps_complete: go.complete,
            needed: elf
                .scan
                .dynamic
                .as_ref()
                .map(|d| d.needed.clone())
                .unwrap_or_default(),
            on_entrypoint,
        });
    }
    out.memlimit = memlimit::derive(env, entry);
    out.gogc = read_gogc(env);
    out
}

/// What the Go runtime makes of a `GOMEMLIMIT` value at start (runtime `readGOMEMLIMIT` in
/// `mgcpacer.go`, `parseByteCount` and `atoi64` in `string.go`; ported from Go 1.19's source
/// and checked against the runtime itself in `tests/runtimes/gomem.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemLimit {
    /// Empty or `off`: no soft limit.
    Off,
    /// A limit in bytes.
    Bytes(i64),
    /// The runtime prints `GOMEMLIMIT=…` and dies with `fatal error: malformed GOMEMLIMIT`.
    Malformed,
}

/// [`MemLimit`] for a `GOMEMLIMIT` value, byte for byte as the runtime reads it.
pub fn read_gomemlimit(value: &str) -> MemLimit {
    if value.is_empty() || value == "off" {
        return MemLimit::Off;
    }
    match parse_byte_count(value.as_bytes()) {
        Some(n) => MemLimit::Bytes(n),
        None => MemLimit::Malformed,
    }
}

/// The runtime's `parseByteCount`: digits, optionally followed by `B`, `KiB`, `MiB`, `GiB` or
/// `TiB`; no sign but `-` (which `atoi64` takes, so `-0` is 0 and `-1` is refused), no blank, no
/// fraction, nothing past `i64::MAX` bytes.
fn parse_byte_count(s: &[u8]) -> Option<i64> {
    let (&last, _) = s.split_last()?;
    if last.is_ascii_digit() {
        return atoi64(s).filter(|n| *n >= 0);
    }
    if last != b'B' || s.len() < 2 {
        return None;
    }
    let c = s[s.len() - 2];
    if c.is_ascii_digit() {
        return atoi64(&s[..s.len() - 1]).filter(|n| *n >= 0);
    }
    if c != b'i' || s.len() < 4 {
        return None;
    }
    let power = match s[s.len() - 3] {
        b'K' => 1,
        b'M' => 2,
        b'G' => 3,
        b'T' => 4,
        _ => return None,
    };
    let m = 1024u64.pow(power);
    let n = atoi64(&s[..s.len() - 3]).filter(|n| *n >= 0)?;
    let n = (n as u64).checked_mul(m)?;
    i64::try_from(n).ok()
}

/// The runtime's `atoi64`: an optional `-`, then decimal digits (none at all after the `-`
/// reads as 0), within the range of an `int64`.
fn atoi64(s: &[u8]) -> Option<i64> {
    if s.is_empty() {
        return None;
    }
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    let mut un: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        un = un.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    if !neg {
        return i64::try_from(un).ok();
    }
    if un > i64::MAX as u64 + 1 {
        return None;
    }
    Some((un as i64).wrapping_neg())
}

/// Whether a program built by this Go version reads `GOMEMLIMIT` (Go 1.19 and later; earlier
/// ones ignore it). `go1.19.8`, `go1.21rc2`, `devel go1.23-…`; `None` (no build info memlint
/// decodes, so before Go 1.18) does not.
pub(crate) fn reads_gomemlimit(go_version: Option<&str>) -> bool {
    let Some(v) = go_version else { return false };
    let Some(at) = v.find("go1.") else {
        return v.contains("devel");
    };
    let minor: String = v[at + 4..].chars().take_while(char::is_ascii_digit).collect();
    minor.parse::<u32>().is_ok_and(|m| m >= 19)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::ElfClass;
    use crate::facts::loader::tests::elf;
    use crate::facts::testing::set_build_info;
    use crate::tree::{EntryKind, LayerEntry};

    fn go_binary(path: &str, cgo: bool) -> LayerEntry {
        let mut info: ElfInfo = elf(62, ElfClass::Elf64, None, &["libc.so.6"], &[], &[]);
        set_build_info(
            &mut info,
            &GoBuildInfo {
                go_version: Some("go1.19.8".into()),
                cgo: Some(cgo),
                deps: vec![GoModule {
                    path: "github.com/mattn/go-sqlite3".into(),
                    version: "v1.14.22".into(),
                    replace: None,
                }],
                complete: true,
                ..GoBuildInfo::default()
            },
        );
        LayerEntry {
            size: 4096,
            mode: 0o755,
            elf: Some(Box::new(info)),
            ..LayerEntry::new(path, EntryKind::File)
        }
    }

    #[test]
    fn gogc_as_the_runtime_reads_it() {
        let gogc = |v: &str| read_gogc(&Env::from_pairs([v]));
        assert_eq!(gogc("GOGC=50"), GoGc::Percent(50));
        assert_eq!(gogc("GOGC=off"), GoGc::Off);
        assert_eq!(gogc("GOGC=-1"), GoGc::Off);
        assert_eq!(gogc("GOGC=fifty"), GoGc::Default);
        assert_eq!(gogc("OTHER=1"), GoGc::Default);
    }

    #[test]
    fn lists_go_programs_on_the_entrypoint_and_in_path() {
        let tree = FileTree::from_entries(vec![
            go_binary("app/server", true),
            go_binary("usr/local/bin/tool", false),
            go_binary("opt/elsewhere/other", true),
            LayerEntry::new("usr/local/bin/plain", EntryKind::File).with_text("x"),
        ])
        .unwrap()
        .keeping(interests());
        let entry = Entrypoint {
            program: Some("/app/server".into()),
            ..Entrypoint::default()
        };
        let env = Env::from_pairs(["PATH=/usr/local/bin:/usr/bin"]);
        let f = derive(&tree, &env, &entry);
        let paths: Vec<(&str, bool)> = f
            .binaries
            .iter()
            .map(|b| (b.path.as_str(), b.on_entrypoint))
            .collect();
        assert_eq!(paths, [("/app/server", true), ("/usr/local/bin/tool", false)]);
        assert_eq!(f.binaries[0].cgo, Some(true));
        assert_eq!(f.binaries[0].needed, ["libc.so.6"]);
        assert_eq!(
            f.binaries[0].modules().collect::<Vec<_>>(),
            ["github.com/mattn/go-sqlite3"]
        );
    }

    #[test]
    fn gomemlimit_as_the_runtime_reads_it() {
        use MemLimit::*;
        const MIB: i64 = 1 << 20;
        for (value, want) in [
            ("512MiB", Bytes(512 * MIB)),
            ("1GiB", Bytes(1 << 30)),
            ("1KiB", Bytes(1024)),
            ("2TiB", Bytes(2 << 40)),
            ("123", Bytes(123)),
            ("123B", Bytes(123)),
            ("0", Bytes(0)),
            ("-0", Bytes(0)),
            ("-KiB", Bytes(0)),
            ("off", Off),
            ("", Off),
            ("9223372036854775807", Bytes(i64::MAX)),
            ("8388607TiB", Bytes(8_388_607 << 40)),
            ("8388608TiB", Malformed),
            ("9223372036854775808", Malformed),
            ("99999999999999999999", Malformed),
            ("512Mi", Malformed),
            ("400m", Malformed),
            ("1G", Malformed),
            ("1Gi", Malformed),
            ("512MB", Malformed),
            ("512mib", Malformed),
            (" 512MiB", Malformed),
            ("512MiB ", Malformed),
            ("512 MiB", Malformed),
            ("1.5GiB", Malformed),
            ("+1", Malformed),
            ("-1", Malformed),
            ("0x100", Malformed),
            ("1_000", Malformed),
            ("OFF", Malformed),
            ("B", Malformed),
            ("KiB", Malformed),
            ("iB", Malformed),
            ("1PiB", Malformed),
            ("\"512MiB\"", Malformed),
        ] {
            assert_eq!(read_gomemlimit(value), want, "{value:?}");
        }
        assert!(reads_gomemlimit(Some("go1.19.8")));
        assert!(reads_gomemlimit(Some("go1.22.1 X:boringcrypto")));
        assert!(reads_gomemlimit(Some("devel go1.23-abc")));
        assert!(!reads_gomemlimit(Some("go1.18.10")));
        assert!(!reads_gomemlimit(Some("go1.9")));
        assert!(!reads_gomemlimit(None));
    }
}
