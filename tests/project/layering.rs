//! The one-way flow of memlint's modules, checked on the source: every `crate::…`, `super::…`
//! and `self::…` path of every file under `src/` (tests and comments left out) is an edge from
//! its file to the module it names. Two checks: no edge between top-level modules that the
//! table below does not allow, and no circle among files at all.
//!
//! Data flows sources → tree → image → facts → rules → report → commands. A module may use the
//! base modules and the stages whose output it reads (sources build a tree and an image with
//! tree's and image's types; facts read the image; rules read facts; …), never a later stage:
//! the table lists, for each module, exactly what it may use, so a new edge is a visible edit.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Each top-level module of `src/` and the top-level modules it may use. A new module must be
/// placed here: an unknown one fails the test. Every edge listed exists today (commands may use
/// anything).
const LAYERS: &[(&str, &[&str])] = &[
    // Base: values, names and diagnostics. They use only each other, and everything may use them.
    ("digest", &[]),
    ("user_file", &[]),
    ("error", &["user_file"]),
    ("elf", &[]),
    ("finding", &[]),
    ("shell", &[]),
    ("version", &[]),
    ("warnings", &[]),
    ("untrusted", &[]),
    ("units", &[]),
    ("duration", &[]),
    ("arch", &["elf"]),
    ("platform", &["arch", "error"]),
    ("reference", &["digest", "error"]),
    ("dockerfile", &["shell"]),
    // Kubernetes manifests: the containers they run, with lines.
    ("k8s", &[]),
    // Reading: layers into one tree, what a layer contributes cached, the image as read.
    ("tree", &["digest", "elf", "error"]),
    ("image", &["digest", "platform", "tree"]),
    ("cache", &["digest", "elf", "tree", "warnings"]),
    (
        "sources",
        &[
            "arch",
            "cache",
            "digest",
            "duration",
            "error",
            "image",
            "platform",
            "reference",
            "tree",
            "units",
            "untrusted",
            "user_file",
            "warnings",
        ],
    ),
    // Judging: facts from the image, rules from the facts.
    (
        "facts",
        &[
            "arch", "elf", "finding", "image", "k8s", "platform", "shell", "tree", "units", "version",
        ],
    ),
    ("rules", &["arch", "facts", "finding", "k8s", "units", "version"]),
    // Policy and placement: settings, findings placed on Dockerfile and manifest lines, and the
    // judge (severity overrides, ignores, the cap) between the rules and the report.
    (
        "settings",
        &["error", "finding", "rules", "tree", "user_file", "version"],
    ),
    ("locate", &["dockerfile", "finding", "image", "k8s"]),
    // The baseline: fingerprints, and the accepted findings' file.
    (
        "baseline",
        &["digest", "error", "finding", "untrusted", "user_file"],
    ),
    ("judge", &["baseline", "finding", "locate", "rules", "settings"]),
    // Reporting: output formats.
    (
        "report",
        &[
            "baseline",
            "digest",
            "elf",
            "facts",
            "finding",
            "image",
            "judge",
            "k8s",
            "locate",
            "platform",
            "rules",
            "settings",
            "tree",
            "units",
            "untrusted",
        ],
    ),
    // The fuzz targets' bodies (`fuzz/` calls them): the reader, the ELF scanner, the
    // parsers and the facts, as the targets drive them.
    (
        "fuzzing",
        &["arch", "elf", "facts", "image", "platform", "reference", "tree"],
    ),
    // The edge: flags, environment variables, printing.
    ("cli", &["duration", "finding"]),
    (
        "commands",
        &[
            "baseline",
            "arch",
            "cache",
            "cli",
            "digest",
            "dockerfile",
            "elf",
            "error",
            "facts",
            "finding",
            "image",
            "k8s",
            "locate",
            "platform",
            "reference",
            "report",
            "rules",
            "settings",
            "sources",
            "tree",
            "untrusted",
            "user_file",
            "version",
            "warnings",
        ],
    ),
];

/// A module path from the crate root: `["sources", "oci"]`; `[]` is the crate root.
type ModPath = Vec<String>;

struct SourceFile {
    module: ModPath,
    path: PathBuf,
    /// Production code: comments, string and char literals and `#[cfg(test)]` items removed.
    code: String,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn source_files() -> Vec<SourceFile> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in fs::read_dir(dir).expect("src/ is readable") {
            let p = e.expect("src/ entry").path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let root = src_dir();
    let mut paths = Vec::new();
    walk(&root, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let rel = path.strip_prefix(&root).expect("under src/").with_extension("");
            let mut module: ModPath = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
            if module.last().is_some_and(|l| l == "mod") {
                module.pop();
            }
            if module == ["lib"] || module == ["main"] {
                module.clear();
            }
            let text = fs::read_to_string(&path).expect("source is UTF-8");
            SourceFile {
                module,
                code: production_code(&text),
                path,
            }
        })
        .collect()
}

/// The code with comments and literals blanked, and everything from the first `#[cfg(test)]`
/// on dropped (memlint keeps its unit tests at the end of each file).
fn production_code(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        if rest.starts_with("#[cfg(test)]") {
            break;
        }
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
            continue;
        }
        if let Some(comment) = rest.strip_prefix("/*") {
            i += comment.find("*/").map_or(rest.len(), |n| n + 4);
            continue;
        }
        let prev_ident = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        let raw = rest.strip_prefix("br").or_else(|| rest.strip_prefix('r'));
        if let Some(after_r) = raw.filter(|_| !prev_ident) {
            let hashes = after_r.len() - after_r.trim_start_matches('#').len();
            if after_r[hashes..].starts_with('"') {
                let close = format!("\"{}", "#".repeat(hashes));
                let start = rest.len() - after_r.len() + hashes + 1;
                i += rest[start..]
                    .find(&close)
                    .map_or(rest.len(), |n| start + n + close.len());
                out.push_str("\"\"");
                continue;
            }
        }
        if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            i = j + 1;
            out.push_str("\"\"");
            continue;
        }
        if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{1b}'), not a lifetime ('a).
            let lit = if rest[1..].starts_with('\\') {
                rest[2..].find('\'').map(|n| n + 3)
            } else {
                rest[1..].chars().next().and_then(|c| {
                    let n = 1 + c.len_utf8();
                    rest[n..].starts_with('\'').then_some(n + 1)
                })
            };
            if let Some(n) = lit {
                i += n;
                out.push_str("' '");
                continue;
            }
        }
        let c = rest.chars().next().expect("not at the end");
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// Every module path named in the code, relative paths (`super::`, `self::`) made absolute.
/// Use groups are expanded: `crate::a::{b, c::d}` names `a::b` and `a::c::d`.
fn named_paths(file: &SourceFile) -> Vec<ModPath> {
    let code = &file.code;
    // The module `super` refers to: the parent of this file's module.
    let parent: ModPath = if file.module.is_empty() {
        Vec::new()
    } else {
        file.module[..file.module.len() - 1].to_vec()
    };
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for kw in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(n) = code[from..].find(kw) {
            let at = from + n;
            from = at + kw.len();
            if at > 0
                && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_' || bytes[at - 1] == b':')
            {
                continue;
            }
            let mut base: ModPath = match kw {
                "crate::" => Vec::new(),
                "super::" => parent.clone(),
                _ => file.module.clone(),
            };
            let mut rest = &code[from..];
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            expand(&base, rest, &mut out);
        }
    }
    out
}

/// Reads `a::b::{c, d::e}` at the start of `text` and adds each full path to `out`.
fn expand(base: &ModPath, text: &str, out: &mut Vec<ModPath>) {
    let mut path = base.clone();
    let mut rest = text;
    loop {
        let ident_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if ident_len == 0 {
            break;
        }
        path.push(rest[..ident_len].to_string());
        rest = &rest[ident_len..];
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    if let Some(group) = rest.strip_prefix('{') {
        // Split the group at top-level commas.
        let mut depth = 0;
        let mut start = 0;
        let mut end = group.len();
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    end = i;
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&path, group[start..i].trim(), out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&path, group[start..end].trim(), out);
    }
    out.push(path);
}

/// The file a module path lands in: the longest prefix that is a file's module.
fn owner<'a>(path: &ModPath, modules: &'a BTreeSet<ModPath>) -> Option<&'a ModPath> {
    (1..=path.len())
        .rev()
        .find_map(|n| modules.get(&path[..n].to_vec()))
}

/// Edges between files: file module → file module it names.
fn file_graph(files: &[SourceFile]) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let modules: BTreeSet<ModPath> = files.iter().map(|f| f.module.clone()).collect();
    let mut graph = BTreeMap::new();
    for f in files {
        let targets: BTreeSet<ModPath> = named_paths(f)
            .iter()
            .filter_map(|p| owner(p, &modules))
            .filter(|t| **t != f.module)
            .cloned()
            .collect();
        graph.insert(f.module.clone(), targets);
    }
    graph
}

fn show(m: &ModPath) -> String {
    if m.is_empty() {
        "(crate root)".to_string()
    } else {
        m.join("::")
    }
}

#[test]
fn no_edge_the_layering_forbids() {
    let files = source_files();
    let graph = file_graph(&files);
    let allowed: BTreeMap<&str, &[&str]> = LAYERS.iter().copied().collect();
    let mut problems = Vec::new();
    for f in &files {
        let Some(top) = f.module.first() else {
            continue; // lib.rs and main.rs declare and call everything
        };
        let Some(may_use) = allowed.get(top.as_str()) else {
            problems.push(format!(
                "src/{top}: a top-level module the LAYERS table does not place; add it there"
            ));
            continue;
        };
        for t in &graph[&f.module] {
            let Some(ttop) = t.first() else { continue };
            if ttop != top && !may_use.contains(&ttop.as_str()) {
                problems.push(format!(
                    "{} uses {} ({}), which the layering forbids: {top} may use only {:?}",
                    f.path.strip_prefix(src_dir()).unwrap_or(&f.path).display(),
                    show(t),
                    ttop,
                    may_use
                ));
            }
        }
    }
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_import_circle_among_files() {
    let graph = file_graph(&source_files());
    // Tarjan's strongly connected components; any component of two or more files is a circle.
    struct State<'a> {
        graph: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        circles: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a ModPath) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                comp.push(show(w));
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.circles.push(comp);
            }
        }
    }
    let mut s = State {
        graph: &graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        circles: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    assert!(
        s.circles.is_empty(),
        "files that use each other in a circle:\n{}",
        s.circles
            .iter()
            .map(|c| c.join(" ↔ "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The checker itself: it sees edges through groups, `super::` and inline paths, and not in
/// comments, strings or unit tests.
#[test]
fn the_checker_reads_paths_as_rustc_does() {
    let code = production_code(
        "use crate::a::{b, c::{d, e}};\n// crate::x\nlet s = \"crate::y\"; let c = '\"'; fn f<'a>() { super::z::f(); crate::w::G }\n#[cfg(test)]\nmod tests { use crate::t; }",
    );
    let file = SourceFile {
        module: vec!["m".into(), "n".into()],
        path: PathBuf::from("src/m/n.rs"),
        code,
    };
    let mut named: Vec<String> = named_paths(&file).iter().map(|p| p.join("::")).collect();
    named.sort();
    assert_eq!(
        named,
        ["a", "a::b", "a::c", "a::c::d", "a::c::e", "m::z::f", "w::G"]
    );
}
