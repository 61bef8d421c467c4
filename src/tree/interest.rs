//! Which file contents the layer reader keeps. Everything else is skipped as it streams by,
//! so memory follows the number of paths, not the size of the image.
//!
//! This is only the mechanism: the stages that read contents say which ones they need (the
//! facts declare theirs beside the code that reads them, `facts::interests`), and the tree
//! remembers what it was read for, so that a read nobody asked for fails in tests instead of
//! reading as absent ([`super::FileTree::contents`]).

use crate::elf::marker::{self, ElfMarker, MarkerSet};

/// A path pattern over absolute image paths: `*` matches within one component, `**` matches
/// any number of components (none included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PathPattern {
    source: String,
    parts: Vec<String>,
}

impl PathPattern {
    pub(crate) fn new(pattern: &str) -> PathPattern {
        PathPattern {
            source: pattern.to_string(),
            parts: pattern
                .split('/')
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect(),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.source
    }

    /// Matches an image path given as components from the root.
    pub(crate) fn matches(&self, path: &[&str]) -> bool {
        match_parts(&self.parts, path)
    }
}

fn match_parts(pat: &[String], path: &[&str]) -> bool {
    match pat.split_first() {
        None => path.is_empty(),
        Some((first, rest)) if first == "**" => (0..=path.len()).any(|skip| match_parts(rest, &path[skip..])),
        Some((first, rest)) => match path.split_first() {
            Some((p, prest)) => glob_component(first.as_bytes(), p.as_bytes()) && match_parts(rest, prest),
            None => false,
        },
    }
}

/// `*` and `?` within one path component.
fn glob_component(pat: &[u8], s: &[u8]) -> bool {
    wildcard_match(pat, s, b'*', b'?')
}

/// Whether `s` matches `pat`, where `star` stands for any run of elements (none included) and
/// `any` for exactly one: the one wildcard matcher of interests (bytes of a path component) and
/// of `.memlint.toml` ignores (characters of an image name or path). Entrypoint scripts' shell
/// patterns, with classes and quoting, have their own (`facts::script`).
pub(crate) fn wildcard_match<T: Copy + PartialEq>(pat: &[T], s: &[T], star: T, any: T) -> bool {
    let (mut p, mut i) = (0, 0);
    let (mut last_star, mut mark) = (None, 0);
    while i < s.len() {
        if p < pat.len() && (pat[p] == any || pat[p] == s[i]) {
            p += 1;
            i += 1;
        } else if p < pat.len() && pat[p] == star {
            last_star = Some(p);
            mark = i;
            p += 1;
        } else if let Some(sp) = last_star {
            p = sp + 1;
            mark += 1;
            i = mark;
        } else {
            return false;
        }
    }
    while p < pat.len() && pat[p] == star {
        p += 1;
    }
    p == pat.len()
}

/// One request to keep the contents of matching files, up to `max_bytes` each.
#[derive(Clone, Debug)]
pub(crate) struct KeepRule {
    pub(crate) pattern: PathPattern,
    pub(crate) max_bytes: u64,
}

/// Scripts (files starting with `#!`) are kept up to this size where a rule asks for them.
pub(crate) const SCRIPT_CAP: u64 = 64 * 1024;

/// The file contents that later stages need.
#[derive(Clone, Debug)]
pub(crate) struct Interests {
    pub(crate) keep: Vec<KeepRule>,
    /// Keep files that start with `#!` (scripts) under these patterns, up to [`SCRIPT_CAP`].
    pub(crate) scripts: Vec<PathPattern>,
    /// Classify every regular file from its first bytes (ELF class, machine, interpreter).
    pub(crate) elf_heads: bool,
    /// Read ELF files to their end: dynamic section (DT_NEEDED, SONAME, RPATH, RUNPATH) and
    /// the markers in `elf_markers`.
    pub(crate) elf_scan: bool,
    /// What the ELF scan looks for, as the facts that read the finds declare it.
    pub(crate) elf_markers: MarkerSet,
}

impl Default for Interests {
    fn default() -> Interests {
        Interests {
            keep: Vec::new(),
            scripts: Vec::new(),
            elf_heads: false,
            elf_scan: false,
            elf_markers: marker::union(&[], &[]),
        }
    }
}

impl Interests {
    pub(crate) fn keep(mut self, pattern: &str, max_bytes: u64) -> Self {
        self.keep.push(KeepRule {
            pattern: PathPattern::new(pattern),
            max_bytes,
        });
        self
    }

    /// The cap for a path, when some rule wants it (the largest cap of the rules that match).
    pub(crate) fn keep_cap(&self, path: &[&str]) -> Option<u64> {
        self.keep
            .iter()
            .filter(|k| k.pattern.matches(path))
            .map(|k| k.max_bytes)
            .max()
    }

    /// Whether a script at this path should be kept.
    pub(crate) fn wants_script(&self, path: &[&str]) -> bool {
        self.scripts.iter().any(|p| p.matches(path))
    }

    /// Adds a pattern under which scripts (files starting with `#!`) are kept.
    pub(crate) fn script(mut self, pattern: &str) -> Self {
        self.scripts.push(PathPattern::new(pattern));
        self
    }

    /// Asks for ELF heads (class, machine, interpreter) of every regular file.
    pub(crate) fn read_elf_heads(mut self) -> Self {
        self.elf_heads = true;
        self
    }

    /// Asks for ELF files to be read to their end (dynamic section); implies heads.
    pub(crate) fn scan_elf(mut self) -> Self {
        self.elf_heads = true;
        self.elf_scan = true;
        self
    }

    /// Asks for ELF files to be read to their end, looking for `markers` too.
    pub(crate) fn scan_elf_for(self, markers: &[&'static ElfMarker]) -> Self {
        let mut scan = self.scan_elf();
        scan.elf_markers = marker::union(&scan.elf_markers, markers);
        scan
    }

    /// Everything `self` or `other` asks for; a rule or pattern asked for twice is kept once.
    pub(crate) fn union(mut self, other: Interests) -> Interests {
        for k in other.keep {
            let known = self
                .keep
                .iter()
                .any(|m| m.pattern == k.pattern && m.max_bytes == k.max_bytes);
            if !known {
                self.keep.push(k);
            }
        }
        for p in other.scripts {
            if !self.scripts.contains(&p) {
                self.scripts.push(p);
            }
        }
        self.elf_heads |= other.elf_heads;
        self.elf_scan |= other.elf_scan;
        if !other.elf_markers.is_empty() {
            self.elf_markers = marker::union(&self.elf_markers, &other.elf_markers);
        }
        self
    }

    /// Whether a read with these interests keeps the contents of the file at `path` (an
    /// absolute image path) when it is there: a keep rule matches it, or a script pattern
    /// does (then only a file starting with `#!` is kept).
    pub(crate) fn covers(&self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        self.keep_cap(&parts).is_some() || self.wants_script(&parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pat: &str, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        PathPattern::new(pat).matches(&parts)
    }

    #[test]
    fn globs() {
        assert!(m("/etc/os-release", "/etc/os-release"));
        assert!(!m("/etc/os-release", "/etc/os-release/x"));
        assert!(m("**/*.deps.json", "/app/App.deps.json"));
        assert!(m("**/*.deps.json", "/x.deps.json"));
        assert!(!m("**/*.deps.json", "/app/App.deps.json.bak"));
        assert!(m(
            "**/node_modules/*/package.json",
            "/app/node_modules/sharp/package.json"
        ));
        assert!(m(
            "**/node_modules/@*/*/package.json",
            "/a/node_modules/next/node_modules/@img/sharp-linux-x64/package.json"
        ));
        assert!(!m(
            "**/node_modules/*/package.json",
            "/app/node_modules/sharp/lib/package.json"
        ));
        assert!(m("/etc/ld-musl-*.path", "/etc/ld-musl-x86_64.path"));
        assert!(m("/etc/ld.so.conf.d/*", "/etc/ld.so.conf.d/libc.conf"));
        assert!(m("a?c", "abc"));
        assert!(!m("a*c", "abd"));
    }

    #[test]
    fn union_keeps_each_request_once_and_covers_both() {
        let a = Interests::default().keep("/a", 10).script("/bin/*");
        let b = Interests::default()
            .keep("/a", 10)
            .keep("/b/*.json", 20)
            .script("/bin/*")
            .script("/opt/*")
            .scan_elf();
        let u = a.clone().union(b);
        assert_eq!(u.keep.len(), 2);
        assert_eq!(u.scripts.len(), 2);
        assert!(u.elf_heads && u.elf_scan && !a.elf_heads);
        assert!(u.covers("/a") && u.covers("/b/x.json") && u.covers("/opt/run"));
        assert!(!u.covers("/b/x.txt") && !u.covers("/opt/app/run"));
        assert!(!Interests::default().covers("/a"));
    }

    #[test]
    fn largest_cap_wins() {
        let i = Interests::default().keep("**/*.json", 10).keep("/a/*.json", 20);
        assert_eq!(i.keep_cap(&["a", "b.json"]), Some(20));
        assert_eq!(i.keep_cap(&["b", "b.json"]), Some(10));
        assert_eq!(i.keep_cap(&["b", "b.txt"]), None);
    }
}
