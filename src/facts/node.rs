//! Node.js: the node binary, its version, and the memory flags it runs with.
//!
//! How node reads its flags (nodejs/node `src/node_options.cc` `ParseNodeOptionsEnvVar`,
//! `src/node_options-inl.h` `OptionsParser::Parse`):
//! * `NODE_OPTIONS` is split at spaces only (a tab stays inside a word); double quotes group
//!   words and a backslash escapes the next character inside them.
//! * Option names are normalised by turning `_` into `-`, so `--max_old_space_size` is the same
//!   flag. V8 options take their value only in the `--flag=value` form: node hands V8 the word
//!   alone, so `--max-old-space-size 4096` gives V8 no value and node exits with code 9
//!   ("illegal value for flag"), and on the command line `4096` is taken as the script.
//!   Measured on Node 20.20.2.
//! * Parsing stops at the first word that does not start with `-` (the script) or at `--`.
//! * `NODE_OPTIONS` comes before the command line and the last occurrence of a flag wins, so
//!   the command line overrides it.
//! * `--max-semi-space-size` is accepted in `NODE_OPTIONS` from 18.13.0 and 19.2.0
//!   (nodejs/node#44436); older versions exit with code 9.

use super::entrypoint::{Entrypoint, DEFAULT_PATH};
use super::os::OsFacts;
use super::Env;
use crate::elf::marker::{ElfMarker, Find};
use crate::tree::{FileTree, Interests, NodeId, NodeKind};
use crate::version::Version;
use serde::Serialize;

/// The first Node release that reads cgroup v2's `memory.max` (libuv 1.45.0): from it on,
/// V8 sizes its heap and young generation from the container's limit.
pub(crate) fn reads_cgroup_v2(v: &Version) -> bool {
    *v >= Version::new(20, 3, 0)
}

/// Whether Node `v` takes `--max-semi-space-size` in `NODE_OPTIONS` (18.13.0 and 19.2.0 on,
/// nodejs/node#44436); older ones take it on the command line only.
pub(crate) fn semi_space_flag_in_node_options(v: &Version) -> bool {
    *v >= Version::new(19, 2, 0) || (v.major == 18 && *v >= Version::new(18, 13, 0))
}

/// The semi-space Node sizes from a visible memory limit of `limit` bytes, and the one it uses
/// without a limit, in MiB (measured, ../shared/domain-sources.md 3.2: Node 18–22; Node 24
/// and later take the second table). Gaps between the measured rows take the next row up.
pub(crate) fn semi_space_mib(limit: u64, version: Option<&Version>) -> (u64, u64) {
    let newer = semi_spaces_of_node_24(version);
    let mib = limit >> 20;
    let (older, newest) = match mib {
        0..=512 => (1, 1),
        513..=1024 => (4, 16),
        1025..=2048 => (8, 32),
        _ => (16, 64),
    };
    (
        if newer { newest } else { older },
        default_semi_space_mib(version),
    )
}

/// Whether Node `version` sizes its semi-spaces as Node 24 does (the second measured table).
fn semi_spaces_of_node_24(version: Option<&Version>) -> bool {
    version.is_some_and(|v| v.major >= 24)
}

/// The semi-space Node uses without a memory limit, in MiB: 16, and 64 from Node 24.
pub(crate) fn default_semi_space_mib(version: Option<&Version>) -> u64 {
    if semi_spaces_of_node_24(version) {
        64
    } else {
        16
    }
}

/// V8's young generation: two semi-spaces and the space objects are promoted through, each
/// the semi-space's size.
pub(crate) const YOUNG_GENERATION_SEMI_SPACES: u64 = 3;

/// File names of the node executable.
const NODE_NAMES: &[&str] = &["node", "nodejs"];

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct NodeFacts {
    /// The node executable (canonical path): the entrypoint program when it is node, else the
    /// first `node` in PATH.
    pub(crate) binary: Option<String>,
    /// `20.11.1`.
    pub(crate) version: Option<String>,
    /// Where the version comes from: `NODE_VERSION`, the path of a `node_version.h`, the
    /// path of the node binary, or `dpkg package nodejs VERSION`.
    pub(crate) version_source: Option<String>,
    pub(crate) entrypoint_is_node: bool,
    /// `NODE_OPTIONS` as written in the image config.
    pub(crate) node_options: Option<String>,
    pub(crate) max_old_space_size: Option<NodeFlag>,
    pub(crate) max_semi_space_size: Option<NodeFlag>,
    /// Whether the entrypoint runs node: it is the program, its interpreter, or a step on the
    /// way (as far as memlint can follow it).
    #[serde(skip)]
    pub(crate) runs: bool,
    /// Why the flags are not all known, when a script sets `NODE_OPTIONS` in a way memlint
    /// cannot work out: a rule that judges a flag stays undecided.
    #[serde(skip)]
    pub(crate) options_undecided: Option<String>,
}

/// A V8 heap flag node runs with (the occurrence that wins).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct NodeFlag {
    /// MiB, as written.
    pub(crate) value: String,
    pub(crate) source: FlagSource,
    /// Why node will not start with it, or why it has no effect (any occurrence).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) problem: Option<String>,
}

impl NodeFlag {
    /// The flag's size in bytes (its value is MiB), when node takes it.
    pub(crate) fn bytes(&self) -> Option<u64> {
        if self.problem.is_some() {
            return None;
        }
        let mib: u64 = self.value.trim().parse().ok()?;
        Some(mib.saturating_mul(1 << 20))
    }
}

impl NodeFacts {
    /// The version, parsed.
    pub(crate) fn parsed_version(&self) -> Option<Version> {
        self.version.as_deref().and_then(Version::parse)
    }
}

/// What [`derive`] reads: node's `include/node/node_version.h` headers, and the Node.js
/// release string the scan finds in a node binary.
pub(crate) fn interests() -> Interests {
    Interests::default()
        .keep("**/include/node/node_version.h", super::SMALL_FILE)
        .scan_elf_for(&[&NODE_RELEASE])
}

/// The release of an official node binary, from the headers download URL built into it
/// (`https://nodejs.org/download/release/v20.11.1/node-v20.11.1-headers.tar.gz`).
pub(crate) static NODE_RELEASE: ElfMarker = ElfMarker {
    key: "node_release",
    find: Find::Version {
        anchor: None,
        after: b"/download/release/v",
        parts: 3,
    },
    null_when_absent: true,
};

pub(crate) fn derive(tree: &FileTree, env: &Env, entry: &Entrypoint, os: &OsFacts) -> Option<NodeFacts> {
    let entry_node = entry.program.as_deref().filter(|p| is_node_program(tree, p));
    let binary = match entry_node {
        Some(p) => Some(p.to_string()),
        None => find_in_path(tree, env.get("PATH").unwrap_or(DEFAULT_PATH)).or_else(|| find_anywhere(tree)),
    }?;
    let mut facts = NodeFacts {
        binary: Some(binary.clone()),
        entrypoint_is_node: entry_node.is_some(),
        node_options: env.non_empty("NODE_OPTIONS").map(str::to_string),
        ..Default::default()
    };
    if let Some((v, source)) = version(tree, env, &binary, os) {
        facts.version = Some(v);
        facts.version_source = Some(source);
    }
    let parsed = facts.parsed_version();

    let mut flags = Flags::default();
    if let Some(opts) = &facts.node_options {
        // Unterminated quotes make node refuse to start ("invalid value for NODE_OPTIONS"):
        // then no flag from it takes effect.
        if let Some(words) = tokenize_node_options(opts) {
            flags.scan(&words, FlagSource::NodeOptions, parsed.as_ref());
        }
    }
    let is_node_word = |w: &str| NODE_NAMES.contains(&basename(w));
    for step in &entry.steps {
        if step.argv.first().is_some_and(|w| is_node_word(w)) {
            flags.scan(&step.argv[1..], FlagSource::CommandLine, parsed.as_ref());
        }
    }
    if facts.entrypoint_is_node && !entry.args.is_empty() {
        flags.scan(&entry.args[1..], FlagSource::CommandLine, parsed.as_ref());
    }
    facts.max_old_space_size = flags.old;
    facts.max_semi_space_size = flags.semi;
    facts.options_undecided = env.first_undecided(&["NODE_OPTIONS"]);
    facts.runs = facts.entrypoint_is_node
        || entry.interpreter.as_deref().is_some_and(is_node_word)
        || entry
            .steps
            .iter()
            .any(|s| s.argv.first().is_some_and(|w| is_node_word(w)));
    Some(facts)
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Whether the file at `path` is node: named so, or an ELF program carrying a Node.js release
/// (a single-executable application keeps node's strings too).
fn is_node_program(tree: &FileTree, path: &str) -> bool {
    if NODE_NAMES.contains(&basename(path)) {
        return true;
    }
    let Ok(Some(id)) = tree.lookup(path) else {
        return false;
    };
    tree.elf(id)
        .is_some_and(|e| e.scan.markers.get(&NODE_RELEASE).is_some())
}

/// The first `node` (or `nodejs`) execvp would find in PATH, canonical.
fn find_in_path(tree: &FileTree, path_var: &str) -> Option<String> {
    for dir in path_var.split(':').filter(|d| !d.is_empty()) {
        for name in NODE_NAMES {
            let Ok(Some(id)) = tree.lookup(&format!("{}/{name}", dir.trim_end_matches('/'))) else {
                continue;
            };
            if matches!(tree.node(id).kind, NodeKind::File) {
                return Some(tree.path_of(id));
            }
        }
    }
    None
}

/// A node binary outside PATH: an ELF file named node that carries a Node.js release, or sits
/// in a `bin` folder.
fn find_anywhere(tree: &FileTree) -> Option<String> {
    tree.walk().find_map(|id| {
        let elf = tree.elf(id)?;
        if !NODE_NAMES.contains(&tree.node(id).name()) {
            return None;
        }
        let in_bin = tree.node(tree.parent(id)).name() == "bin";
        (elf.scan.markers.get(&NODE_RELEASE).is_some() || in_bin).then(|| tree.path_of(id))
    })
}

/// The version and where it was read: `NODE_VERSION`, the `node_version.h` of the binary's
/// prefix, the release string in the binary, the dpkg database for Debian's `nodejs` (whose
/// `/usr/bin/node` is a small program linked to `libnode.so`, which holds the release string,
/// and which ships no header), then any other `node_version.h` (such as node-gyp's header
/// cache, which belongs to whichever node built the addons).
fn version(tree: &FileTree, env: &Env, binary: &str, os: &OsFacts) -> Option<(String, String)> {
    if let Some(v) = env.non_empty("NODE_VERSION") {
        let v = v.trim();
        return Some((
            v.strip_prefix('v').unwrap_or(v).to_string(),
            "NODE_VERSION".to_string(),
        ));
    }
    let headers = version_headers(tree);
    let prefix = binary
        .rsplit_once('/')
        .map(|(dir, _)| dir)
        .and_then(|dir| dir.rsplit_once('/'))
        .map(|(p, _)| p);
    let beside = prefix.map(|p| format!("{p}/include/node/node_version.h"));
    if let Some((path, v)) = headers.iter().find(|(path, _)| Some(path) == beside.as_ref()) {
        return Some((v.clone(), path.clone()));
    }
    let release = tree
        .lookup(binary)
        .ok()
        .flatten()
        .and_then(|id| tree.elf(id))
        .and_then(|e| e.scan.markers.text(&NODE_RELEASE).map(str::to_string));
    if let Some(v) = release {
        return Some((v, binary.to_string()));
    }
    if let Some(found) = dpkg_version(os, binary) {
        return Some(found);
    }
    headers.into_iter().next().map(|(path, v)| (v, path))
}

/// Debian's `nodejs` package installs `/usr/bin/node` (and `/usr/bin/nodejs` on older
/// releases): its upstream version, from the package version (`18.20.4+dfsg-1~deb12u3` →
/// `18.20.4`), and the package as the source.
fn dpkg_version(os: &OsFacts, binary: &str) -> Option<(String, String)> {
    if !matches!(binary, "/usr/bin/node" | "/usr/bin/nodejs") {
        return None;
    }
    let package = os.package("nodejs")?;
    let full = package.version.as_str();
    let without_epoch = full.split_once(':').map_or(full, |(_, v)| v);
    let upstream = without_epoch
        .split(['+', '-', '~'])
        .next()
        .filter(|v| Version::parse(v).is_some())?;
    Some((upstream.to_string(), format!("dpkg package nodejs {full}")))
}

/// Every `include/node/node_version.h` with kept contents that names a version: (path, version).
fn version_headers(tree: &FileTree) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for id in tree.walk() {
        let n = tree.node(id);
        if n.name() != "node_version.h" || !is_under(tree, id, &["node", "include"]) {
            continue;
        }
        let Some(content) = tree.content(id) else {
            continue;
        };
        if let Some(v) = parse_node_version_h(&String::from_utf8_lossy(&content.bytes)) {
            out.push((tree.path_of(id), v));
        }
    }
    out
}

/// Whether the folders above `id` are named `names` (parent first).
fn is_under(tree: &FileTree, id: NodeId, names: &[&str]) -> bool {
    let mut cur = id;
    for want in names {
        let p = tree.parent(cur);
        if p == cur || tree.node(p).name() != *want {
            return false;
        }
        cur = p;
    }
    true
}

/// `NODE_MAJOR_VERSION` / `NODE_MINOR_VERSION` / `NODE_PATCH_VERSION` from node_version.h, with
/// `-pre` when `NODE_VERSION_IS_RELEASE` is 0 (as `NODE_VERSION_STRING` does).
pub(crate) fn parse_node_version_h(text: &str) -> Option<String> {
    let define = |name: &str| -> Option<u64> {
        text.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            let hash = words.next()?;
            let (directive, macro_name) = if hash == "#" {
                (words.next()?, words.next()?)
            } else {
                (hash.strip_prefix('#')?, words.next()?)
            };
            if directive != "define" || macro_name != name {
                return None;
            }
            words.next()?.parse().ok()
        })
    };
    let (major, minor, patch) = (
        define("NODE_MAJOR_VERSION")?,
        define("NODE_MINOR_VERSION")?,
        define("NODE_PATCH_VERSION")?,
    );
    let pre = if define("NODE_VERSION_IS_RELEASE") == Some(0) {
        "-pre"
    } else {
        ""
    };
    Some(format!("{major}.{minor}.{patch}{pre}"))
}

/// Splits `NODE_OPTIONS` as node does: at spaces outside double quotes; inside quotes a
/// backslash escapes the next character. `None` when node would reject it (an unterminated
/// string or a trailing escape).
pub(crate) fn tokenize_node_options(s: &str) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    let (mut in_string, mut new_word) = (false, true);
    let mut chars = s.chars();
    while let Some(mut c) = chars.next() {
        if c == '\\' && in_string {
            c = chars.next()?;
        } else if c == ' ' && !in_string {
            new_word = true;
            continue;
        } else if c == '"' {
            in_string = !in_string;
            continue;
        }
        match out.last_mut() {
            Some(last) if !new_word => last.push(c),
            _ => {
                out.push(c.to_string());
                new_word = false;
            }
        }
    }
    (!in_string).then_some(out)
}

/// Where node reads a flag from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) enum FlagSource {
    /// The `NODE_OPTIONS` environment variable.
    #[serde(rename = "NODE_OPTIONS")]
    NodeOptions,
    /// node's arguments: the entrypoint, or a step of it that runs node.
    #[serde(rename = "command line")]
    CommandLine,
}

impl FlagSource {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FlagSource::NodeOptions => "NODE_OPTIONS",
            FlagSource::CommandLine => "command line",
        }
    }
}

impl std::fmt::Display for FlagSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Node options that take their value as the next word (so it is not the script).
const VALUE_OPTIONS: &[&str] = &[
    "-e",
    "--eval",
    "-p",
    "--print",
    "-r",
    "--require",
    "--import",
    "--loader",
    "--experimental-loader",
    "-C",
    "--conditions",
    "--input-type",
    "--title",
    "--inspect-port",
    "--debug-port",
    "--dns-result-order",
    "--unhandled-rejections",
    "--redirect-warnings",
    "--openssl-config",
    "--tls-cipher-list",
    "--icu-data-dir",
    "--diagnostic-dir",
    "--report-dir",
    "--report-directory",
    "--report-filename",
    "--report-signal",
    "--heapsnapshot-signal",
    "--heapsnapshot-near-heap-limit",
    "--secure-heap",
    "--secure-heap-min",
    "--experimental-policy",
    "--policy-integrity",
    "--use-largepages",
    "--watch-path",
    "--disable-warning",
    "--cpu-prof-dir",
    "--cpu-prof-name",
    "--cpu-prof-interval",
    "--heap-prof-dir",
    "--heap-prof-name",
    "--heap-prof-interval",
    "--env-file",
    "--env-file-if-exists",
    "--experimental-config-file",
    "--localstorage-file",
    "--stack-trace-limit",
    "--run",
];

#[derive(Default)]
struct Flags {
    old: Option<NodeFlag>,
    semi: Option<NodeFlag>,
}

impl Flags {
    /// Reads the options before the script (node's option parser stops there).
    fn scan(&mut self, words: &[String], source: FlagSource, version: Option<&Version>) {
        let mut i = 0;
        while i < words.len() {
            let word = &words[i];
            i += 1;
            if word == "--" || word.len() <= 1 || !word.starts_with('-') {
                break;
            }
            let (raw_name, value) = match word.split_once('=') {
                Some((n, v)) if word.starts_with("--") => (n, Some(v)),
                _ => (word.as_str(), None),
            };
            let name = normalize(raw_name);
            let slot = match name.as_str() {
                "--max-old-space-size" => &mut self.old,
                "--max-semi-space-size" => &mut self.semi,
                _ => {
                    if value.is_none() && VALUE_OPTIONS.contains(&name.as_str()) {
                        i += 1;
                    }
                    continue;
                }
            };
            let mut problem = None;
            let value = match value {
                Some(v) => {
                    if v.is_empty() {
                        problem = Some(format!(
                            "`{word}` has an empty value: V8 ignores it and keeps its default"
                        ));
                    } else if !is_size(v) {
                        problem = Some(format!("V8 accepts only a whole number of MiB: `{word}` makes node exit with code 9 (illegal value for flag)"));
                    }
                    v.to_string()
                }
                None => {
                    let next = words.get(i).cloned().unwrap_or_default();
                    problem = Some(format!(
                        "`{raw_name} {next}`: node passes V8 options on without the next word, so V8 gets no value and node exits with code 9 (illegal value for flag); write `{raw_name}={next}`"
                    ));
                    // The value word ends the options: node takes it for the script.
                    i = words.len();
                    next
                }
            };
            if problem.is_none() && source == FlagSource::NodeOptions && name == "--max-semi-space-size" {
                problem = semi_space_in_node_options(version);
            }
            let earlier = slot.take().and_then(|f| f.problem);
            *slot = Some(NodeFlag {
                value,
                source,
                problem: earlier.or(problem),
            });
        }
    }
}

/// `--max_old_space_size` → `--max-old-space-size` (node normalises `_` after the dashes).
fn normalize(name: &str) -> String {
    match name.strip_prefix("--") {
        Some(rest) => format!("--{}", rest.replace('_', "-")),
        None => name.to_string(),
    }
}

/// What V8's size_t flag parser accepts (strtoull with the whole string consumed; a leading
/// `+` is taken, units and fractions are not).
fn is_size(v: &str) -> bool {
    let digits = v.strip_prefix('+').unwrap_or(v);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Node versions before 18.13.0 and 19.0–19.1 refuse `--max-semi-space-size` in NODE_OPTIONS.
fn semi_space_in_node_options(version: Option<&Version>) -> Option<String> {
    let v = version?;
    let allowed = match v.major {
        0..=17 => false,
        18 => v.minor >= 13,
        19 => v.minor >= 2,
        _ => true,
    };
    (!allowed).then(|| {
        format!(
            "node {v} does not allow --max-semi-space-size in NODE_OPTIONS and exits with code 9 (allowed from 18.13.0 and 19.2.0); pass it on the command line"
        )
    })
}

#[cfg(test)]
mod tests {
    fn derive_without_packages(t: &FileTree, env: &Env, e: &Entrypoint) -> Option<NodeFacts> {
        derive(t, env, e, &OsFacts::default())
    }

    use super::*;

    use crate::elf::{ElfClass, ElfHead, ElfInfo, ElfScan, ElfType};

    use crate::tree::{Content, EntryKind, LayerEntry};

    const NODE_VERSION_H: &str = include_str!("../../testdata/node/node_version.h");

    fn entry(path: &str, kind: EntryKind) -> LayerEntry {
        LayerEntry::new(path, kind).with_mode(0o755)
    }

    fn text(path: &str, body: &str) -> LayerEntry {
        let mut e = entry(path, EntryKind::File);
        e.size = body.len() as u64;
        e.content = Some(Content {
            bytes: body.as_bytes().to_vec(),
            truncated: false,
        });
        e
    }

    fn node_elf(path: &str, release: Option<&str>) -> LayerEntry {
        let mut e = entry(path, EntryKind::File);
        e.size = 100_000_000;
        e.elf = Some(Box::new(ElfInfo {
            head: ElfHead {
                class: ElfClass::Elf64,
                little_endian: true,
                elf_type: ElfType::Executable,
                machine: 62,
                interpreter: Some("/lib64/ld-linux-x86-64.so.2".into()),
                dynamic: true,
            },
            scan: ElfScan::default(),
        }));
        if let (Some(elf), Some(release)) = (e.elf.as_mut(), release) {
            elf.scan
                .markers
                .set(&NODE_RELEASE, crate::elf::marker::Found::Text(release.into()));
        }
        e
    }

    fn tree(entries: Vec<LayerEntry>) -> FileTree {
        // Kept for what this module declares, and nothing else.
        FileTree::from_entries(entries).unwrap().keeping(interests())
    }

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    fn node_entry(args: &[&str]) -> Entrypoint {
        Entrypoint {
            program: Some("/usr/local/bin/node".into()),
            args: argv(args),
            ..Default::default()
        }
    }

    /// The official image layout: /usr/local/bin/node, its header, and the config's env.
    fn official() -> FileTree {
        tree(vec![
            node_elf("usr/local/bin/node", Some("22.23.5")),
            entry("usr/local/bin/nodejs", EntryKind::Symlink("node".into())),
            text("usr/local/include/node/node_version.h", NODE_VERSION_H),
            entry("app/server.js", EntryKind::File),
        ])
    }

    #[test]
    fn node_version_header_of_a_real_install() {
        assert_eq!(parse_node_version_h(NODE_VERSION_H).as_deref(), Some("20.20.2"));
        let pre = NODE_VERSION_H.replace(
            "#define NODE_VERSION_IS_RELEASE 1",
            "#define NODE_VERSION_IS_RELEASE 0",
        );
        assert_eq!(parse_node_version_h(&pre).as_deref(), Some("20.20.2-pre"));
        assert_eq!(parse_node_version_h("#define NODE_MAJOR_VERSION 20\n"), None);
        assert_eq!(parse_node_version_h("\u{0}\u{ff}garbage #define"), None);
    }

    #[test]
    fn node_options_tokenizer_matches_node() {
        let t = |s: &str| tokenize_node_options(s);
        assert_eq!(
            t("--max-old-space-size=4096 --no-warnings").unwrap(),
            ["--max-old-space-size=4096", "--no-warnings"]
        );
        assert_eq!(
            t(r#"--require "file with spaces.js""#).unwrap(),
            ["--require", "file with spaces.js"]
        );
        assert_eq!(t(r#"--im"port" "a\"b""#).unwrap(), ["--import", "a\"b"]);
        assert_eq!(t("--a=1\t--b=2").unwrap(), ["--a=1\t--b=2"]);
        assert_eq!(
            t(r#"--require "" ./hook.cjs"#).unwrap(),
            ["--require", "./hook.cjs"]
        );
        assert_eq!(t("  ").unwrap(), Vec::<String>::new());
        assert!(t(r#"--require "unterminated"#).is_none());
        assert!(t(r#"--require "foo\"#).is_none());
    }

    #[test]
    fn official_image_with_node_options() {
        let t = official();
        let env = Env::from_pairs([
            "NODE_VERSION=22.23.2",
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "NODE_OPTIONS=--max_old_space_size=1536 --max-semi-space-size=32",
        ]);
        let f = derive_without_packages(&t, &env, &node_entry(&["node", "server.js"])).unwrap();
        assert_eq!(f.binary.as_deref(), Some("/usr/local/bin/node"));
        assert!(f.entrypoint_is_node);
        assert_eq!(
            (f.version.as_deref(), f.version_source.as_deref()),
            (Some("22.23.2"), Some("NODE_VERSION"))
        );
        assert_eq!(
            f.node_options.as_deref(),
            Some("--max_old_space_size=1536 --max-semi-space-size=32")
        );
        let old = f.max_old_space_size.unwrap();
        assert_eq!(
            (old.value.as_str(), old.source.as_str(), old.problem),
            ("1536", "NODE_OPTIONS", None)
        );
        let semi = f.max_semi_space_size.unwrap();
        assert_eq!((semi.value.as_str(), semi.problem), ("32", None));
    }

    #[test]
    fn version_from_header_beside_the_binary_then_the_binary() {
        let t = tree(vec![
            node_elf("usr/local/bin/node", Some("22.23.5")),
            text(
                "root/.cache/node-gyp/18.20.8/include/node/node_version.h",
                &NODE_VERSION_H.replace(
                    "20\n#define NODE_MINOR_VERSION 20",
                    "18\n#define NODE_MINOR_VERSION 20",
                ),
            ),
            text("usr/local/include/node/node_version.h", NODE_VERSION_H),
        ]);
        let f = derive_without_packages(&t, &Env::default(), &Entrypoint::default()).unwrap();
        assert_eq!(f.binary.as_deref(), Some("/usr/local/bin/node"));
        assert!(!f.entrypoint_is_node);
        assert_eq!(f.version.as_deref(), Some("20.20.2"));
        assert_eq!(
            f.version_source.as_deref(),
            Some("/usr/local/include/node/node_version.h")
        );

        // Without the prefix's header, the binary's own release beats a header elsewhere.
        let t = tree(vec![
            node_elf("usr/local/bin/node", Some("22.23.5")),
            text(
                "root/.cache/node-gyp/20.20.2/include/node/node_version.h",
                NODE_VERSION_H,
            ),
        ]);
        let f = derive_without_packages(&t, &Env::default(), &Entrypoint::default()).unwrap();
        assert_eq!(f.version.as_deref(), Some("22.23.5"));
        assert_eq!(f.version_source.as_deref(), Some("/usr/local/bin/node"));

        // A distro node without release strings: the only header there is.
        let t = tree(vec![
            node_elf("usr/bin/node", None),
            text("opt/include/node/node_version.h", NODE_VERSION_H),
        ]);
        let f =
            derive_without_packages(&t, &Env::from_pairs(["NODE_VERSION="]), &Entrypoint::default()).unwrap();
        assert_eq!(f.binary.as_deref(), Some("/usr/bin/node"));
        assert_eq!(
            f.version_source.as_deref(),
            Some("/opt/include/node/node_version.h")
        );
    }

    #[test]
    fn binary_from_path_and_no_node() {
        let t = tree(vec![
            node_elf("opt/node/bin/node", Some("20.11.1")),
            entry("usr/bin/node", EntryKind::Symlink("/opt/node/bin/node".into())),
            entry("usr/local/bin/node", EntryKind::Dir),
        ]);
        let env = Env::from_pairs(["PATH=/usr/local/bin:/usr/bin"]);
        let tini = Entrypoint {
            program: Some("/usr/bin/tini".into()),
            args: argv(&["tini"]),
            ..Default::default()
        };
        let f = derive_without_packages(&t, &env, &tini).unwrap();
        assert_eq!(f.binary.as_deref(), Some("/opt/node/bin/node"));
        assert!(!f.entrypoint_is_node);
        assert_eq!(f.version.as_deref(), Some("20.11.1"));

        // Outside PATH, found by its release string.
        let f = derive_without_packages(&t, &Env::from_pairs(["PATH=/nowhere"]), &tini).unwrap();
        assert_eq!(f.binary.as_deref(), Some("/opt/node/bin/node"));

        let none = tree(vec![
            entry("usr/bin/python3", EntryKind::File),
            text("app/node_modules/x/package.json", "{}"),
        ]);
        assert!(derive_without_packages(
            &none,
            &Env::from_pairs(["NODE_OPTIONS=--max-old-space-size=512"]),
            &tini
        )
        .is_none());
    }

    #[test]
    fn command_line_overrides_node_options_and_bad_spellings_are_flagged() {
        let t = official();
        let env = Env::from_pairs(["NODE_OPTIONS=--max-old-space-size=300 --max-semi-space-size 64"]);
        let mut e = node_entry(&[
            "node",
            "--require",
            "./otel.js",
            "--max-old-space-size=500",
            "server.js",
            "--max-semi-space-size=8",
        ]);
        e.steps.push(crate::facts::entrypoint::Step {
            argv: argv(&["/usr/local/bin/node", "--max_semi_space_size=16", "boot.js"]),
            path: Some("/usr/local/bin/node".into()),
            how: "test".into(),
            kind: Default::default(),
        });
        let f = derive_without_packages(&t, &env, &e).unwrap();
        assert_eq!(
            f.max_old_space_size,
            Some(NodeFlag {
                value: "500".into(),
                source: FlagSource::CommandLine,
                problem: None
            })
        );
        // The step's flag is the last one before the script; the one after server.js is an
        // argument of the script. The NODE_OPTIONS space form still stops node.
        let semi = f.max_semi_space_size.unwrap();
        assert_eq!(
            (semi.value.as_str(), semi.source.as_str()),
            ("16", "command line")
        );
        assert!(
            semi.problem
                .as_deref()
                .is_some_and(|p| p.contains("exits with code 9") && p.contains("--max-semi-space-size=64")),
            "{semi:?}"
        );
    }

    #[test]
    fn space_form_on_the_command_line_ends_the_options() {
        let t = official();
        let f = derive_without_packages(
            &t,
            &Env::default(),
            &node_entry(&[
                "node",
                "--max-old-space-size",
                "4096",
                "--max-semi-space-size=32",
                "server.js",
            ]),
        )
        .unwrap();
        let old = f.max_old_space_size.unwrap();
        assert_eq!(old.value, "4096");
        assert!(old.problem.is_some());
        // `4096` is the script for node, so what follows is not an option.
        assert_eq!(f.max_semi_space_size, None);
    }

    #[test]
    fn invalid_values_and_old_versions() {
        let t = official();
        let env = Env::from_pairs([
            "NODE_VERSION=18.12.1",
            "NODE_OPTIONS=--max-old-space-size=4g --max-semi-space-size=16",
        ]);
        let f = derive_without_packages(&t, &env, &node_entry(&["node", "server.js"])).unwrap();
        assert!(f
            .max_old_space_size
            .unwrap()
            .problem
            .unwrap()
            .contains("whole number"));
        assert!(f
            .max_semi_space_size
            .unwrap()
            .problem
            .unwrap()
            .contains("18.13.0"));

        let env = Env::from_pairs([
            "NODE_VERSION=v19.2.0",
            "NODE_OPTIONS=--max-old-space-size=+2048 --max-semi-space-size=16",
        ]);
        let f = derive_without_packages(&t, &env, &node_entry(&["node", "server.js"])).unwrap();
        assert_eq!(f.version.as_deref(), Some("19.2.0"));
        assert_eq!(f.max_old_space_size.unwrap().problem, None);
        assert_eq!(f.max_semi_space_size.unwrap().problem, None);

        // Unterminated quotes: node refuses NODE_OPTIONS altogether; nothing is read from it.
        let env = Env::from_pairs([r#"NODE_OPTIONS=--max-old-space-size=512 --require "x"#]);
        let f = derive_without_packages(&t, &env, &node_entry(&["node", "server.js"])).unwrap();
        assert_eq!(f.max_old_space_size, None);
    }

    #[test]
    fn entrypoint_named_otherwise_but_node_inside() {
        let t = tree(vec![
            node_elf("app/server", Some("24.1.0")),
            node_elf("usr/local/bin/node", Some("22.23.5")),
        ]);
        let e = Entrypoint {
            program: Some("/app/server".into()),
            args: argv(&["/app/server", "--max-old-space-size=256"]),
            ..Default::default()
        };
        let f = derive_without_packages(&t, &Env::default(), &e).unwrap();
        assert!(f.entrypoint_is_node);
        assert_eq!(f.binary.as_deref(), Some("/app/server"));
        assert_eq!(f.version.as_deref(), Some("24.1.0"));
        assert_eq!(f.max_old_space_size.unwrap().value, "256");
    }

    #[test]
    fn flag_sources_serialise_as_before() {
        for (source, name) in [
            (FlagSource::NodeOptions, "NODE_OPTIONS"),
            (FlagSource::CommandLine, "command line"),
        ] {
            assert_eq!(serde_json::to_value(source).unwrap(), name);
            assert_eq!(source.to_string(), name);
        }
    }

    /// Debian's nodejs: /usr/bin/node carries no release string (libnode.so.108 does) and no
    /// header is installed; the version comes from the dpkg database.
    #[test]
    fn debian_nodejs_version_from_dpkg() {
        let t = tree(vec![
            node_elf("usr/bin/node", None),
            entry("usr/bin/nodejs", EntryKind::Symlink("node".into())),
            entry("usr/lib/x86_64-linux-gnu/libnode.so.108", EntryKind::File),
        ]);
        let mut os = OsFacts::default();
        os.packages.insert(
            "nodejs".into(),
            crate::facts::os::Package {
                version: "18.20.4+dfsg-1~deb12u3".into(),
                architecture: Some("amd64".into()),
            },
        );
        let f = derive(&t, &Env::default(), &Entrypoint::default(), &os).unwrap();
        assert_eq!(f.binary.as_deref(), Some("/usr/bin/node"));
        assert_eq!(f.version.as_deref(), Some("18.20.4"));
        assert_eq!(
            f.version_source.as_deref(),
            Some("dpkg package nodejs 18.20.4+dfsg-1~deb12u3")
        );
        // An epoch and a Debian revision without +dfsg.
        os.packages.get_mut("nodejs").unwrap().version = "1:20.3.0-1".into();
        let f = derive(&t, &Env::default(), &Entrypoint::default(), &os).unwrap();
        assert_eq!(f.version.as_deref(), Some("20.3.0"));
        // Without the package, nothing names the version.
        let f = derive(&t, &Env::default(), &Entrypoint::default(), &OsFacts::default()).unwrap();
        assert_eq!(f.version, None);
    }
}
