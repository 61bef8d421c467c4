//! Which file contents the layer reader keeps. Everything else is skipped as it streams by,
//! so memory follows the number of paths, not the size of the image.

/// A path pattern over absolute image paths: `*` matches within one component, `**` matches
/// any number of components (none included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathPattern {
    source: String,
    parts: Vec<String>,
}

impl PathPattern {
    pub fn new(pattern: &str) -> PathPattern {
        PathPattern {
            source: pattern.to_string(),
            parts: pattern
                .split('/')
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect(),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Matches an image path given as components from the root.
    pub fn matches(&self, path: &[&str]) -> bool {
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
    let (mut p, mut i) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while i < s.len() {
        if p < pat.len() && (pat[p] == b'?' || pat[p] == s[i]) {
            p += 1;
            i += 1;
        } else if p < pat.len() && pat[p] == b'*' {
            star = Some(p);
            mark = i;
            p += 1;
        } else if let Some(sp) = star {
            p = sp + 1;
            mark += 1;
            i = mark;
        } else {
            return false;
        }
    }
    while p < pat.len() && pat[p] == b'*' {
        p += 1;
    }
    p == pat.len()
}

/// One request to keep the contents of matching files, up to `max_bytes` each.
#[derive(Clone, Debug)]
pub struct KeepRule {
    pub pattern: PathPattern,
    pub max_bytes: u64,
}

/// Scripts (files starting with `#!`) are kept up to this size where a rule asks for them.
pub const SCRIPT_CAP: u64 = 64 * 1024;

/// The file contents that later stages need.
#[derive(Clone, Debug, Default)]
pub struct Interests {
    pub keep: Vec<KeepRule>,
    /// Keep files that start with `#!` (scripts) under these patterns, up to [`SCRIPT_CAP`].
    pub scripts: Vec<PathPattern>,
    /// Classify every regular file from its first bytes (ELF class, machine, interpreter).
    pub elf_heads: bool,
    /// Read ELF files to their end: dynamic section (DT_NEEDED, SONAME, RPATH, RUNPATH) and
    /// the markers of a linked-in allocator or Node.js release.
    pub elf_scan: bool,
}

impl Interests {
    pub fn keep(mut self, pattern: &str, max_bytes: u64) -> Self {
        self.keep.push(KeepRule {
            pattern: PathPattern::new(pattern),
            max_bytes,
        });
        self
    }

    /// The cap for a path, when some rule wants it (the largest cap of the rules that match).
    pub fn keep_cap(&self, path: &[&str]) -> Option<u64> {
        self.keep
            .iter()
            .filter(|k| k.pattern.matches(path))
            .map(|k| k.max_bytes)
            .max()
    }

    /// Whether a script at this path should be kept.
    pub fn wants_script(&self, path: &[&str]) -> bool {
        self.scripts.iter().any(|p| p.matches(path))
    }

    /// Adds what the image's config points at: the entrypoint's program and the scripts in
    /// PATH folders and the working folder, so that the entrypoint can be followed to the
    /// program it runs.
    pub fn for_config(&self, config: Option<&oci_spec::image::ImageConfiguration>) -> Interests {
        let mut out = self.clone();
        let c = config.and_then(|c| c.config().as_ref());
        let env = c.and_then(|c| c.env().clone()).unwrap_or_default();
        let path_var = env
            .iter()
            .rev()
            .find_map(|e| e.strip_prefix("PATH="))
            .unwrap_or("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
            .to_string();
        let working_dir = c
            .and_then(|c| c.working_dir().clone())
            .filter(|w| w.starts_with('/'));
        let mut dirs: Vec<String> = path_var
            .split(':')
            .filter(|d| d.starts_with('/'))
            .map(str::to_string)
            .collect();
        dirs.extend(working_dir);
        dirs.push("/".to_string());
        dirs.push("/docker-entrypoint.d".to_string());
        for d in dirs {
            out.scripts
                .push(PathPattern::new(&format!("{}/*", d.trim_end_matches('/'))));
        }
        let argv = c
            .map(|c| {
                c.entrypoint()
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .chain(c.cmd().clone().unwrap_or_default())
            })
            .into_iter()
            .flatten();
        for a in argv.filter(|a| a.starts_with('/')) {
            out.scripts.push(PathPattern::new(&a));
        }
        out
    }

    /// What the facts about libc, the loader, runtimes and packages read.
    pub fn for_facts() -> Interests {
        const SMALL: u64 = 256 * 1024;
        const DB: u64 = 16 * 1024 * 1024;
        Interests {
            keep: Vec::new(),
            // Scripts in Docker's default PATH and the usual app folders; `for_config` adds
            // the image's own PATH and working folder when the config is known first.
            scripts: [
                "/usr/local/sbin/*",
                "/usr/local/bin/*",
                "/usr/sbin/*",
                "/usr/bin/*",
                "/sbin/*",
                "/bin/*",
                "/*",
                "/app/*",
                "/usr/src/app/*",
                "/docker-entrypoint.d/*",
            ]
            .iter()
            .map(|p| PathPattern::new(p))
            .collect(),
            elf_heads: true,
            elf_scan: true,
        }
        .keep("/etc/os-release", SMALL)
        .keep("/usr/lib/os-release", SMALL)
        .keep("/etc/ld.so.cache", DB)
        .keep("/etc/ld.so.conf", SMALL)
        .keep("/etc/ld.so.conf.d/*", SMALL)
        .keep("/etc/ld.so.preload", SMALL)
        .keep("/etc/ld-musl-*.path", SMALL)
        .keep("/var/lib/dpkg/status", DB)
        .keep("/var/lib/dpkg/status.d/*", SMALL)
        .keep("/lib/apk/db/installed", DB)
        .keep("/usr/bin/ldd", SMALL)
        .keep("**/*.deps.json", DB)
        .keep("**/*.runtimeconfig.json", SMALL)
        .keep("**/appsettings*.json", SMALL)
        .keep("**/node_modules/*/package.json", SMALL)
        .keep("**/node_modules/@*/*/package.json", SMALL)
        .keep("**/.next/required-server-files.json", DB)
        .keep("**/include/node/node_version.h", SMALL)
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
    fn largest_cap_wins() {
        let i = Interests::default().keep("**/*.json", 10).keep("/a/*.json", 20);
        assert_eq!(i.keep_cap(&["a", "b.json"]), Some(20));
        assert_eq!(i.keep_cap(&["b", "b.json"]), Some(10));
        assert_eq!(i.keep_cap(&["b", "b.txt"]), None);
    }
}
