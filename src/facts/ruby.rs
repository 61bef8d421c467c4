//! MRI Ruby: its `ruby` executable and `libruby`, whether it was built `--with-jemalloc`
//! (`ruby` or `libruby.so.*` then names `libjemalloc.so.2` in DT_NEEDED, as
//! fullstaq-ruby/server-edition#33 checks with `objdump -p`), its version, and the servers it
//! runs (puma, sidekiq, unicorn, rails) from the app's `Gemfile.lock` and the entrypoint.

use super::entrypoint::{Entrypoint, DEFAULT_PATH};
use super::loader::Loader;
use super::os::OsFacts;
use super::Env;
use crate::tree::{Interests, NodeKind};
use oci_spec::image::ImageConfiguration;
use serde::Serialize;

/// The servers the arena rule counts: long-lived multi-threaded processes.
pub(crate) const SERVERS: &[&str] = &["puma", "sidekiq", "unicorn", "rails"];

/// Folders Ruby apps live in: Rails' generated Dockerfile (`/rails`), the usual app folders.
const APP_FOLDERS: &[&str] = &[
    "/rails",
    "/app",
    "/usr/src/app",
    "/srv/app",
    "/opt/app",
    "/myapp",
    "/home/app/webapp",
];

#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct RubyServer {
    pub(crate) name: String,
    pub(crate) version: Option<String>,
    /// Where it was seen: a `Gemfile.lock` path, or `entrypoint`.
    pub(crate) source: String,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct RubyFacts {
    /// The MRI executable (canonical path).
    pub(crate) binary: String,
    pub(crate) version: Option<String>,
    /// Where the version comes from: `ENV RUBY_VERSION`, a package, or the library's name.
    pub(crate) version_source: Option<String>,
    /// `libruby.so.*`, when ruby is built with a shared library.
    pub(crate) library: Option<String>,
    /// The ELF interpreter of `ruby` (which C library it runs on).
    pub(crate) interpreter: Option<String>,
    /// `ruby` or `libruby` needs `libjemalloc.so.2`: built `--with-jemalloc`.
    pub(crate) jemalloc_linked: bool,
    pub(crate) servers: Vec<RubyServer>,
}

/// What [`derive`] reads: `Gemfile.lock` in the usual app folders, and ELF dynamic sections.
pub(crate) fn interests() -> Interests {
    APP_FOLDERS
        .iter()
        .fold(Interests::default(), |i, d| {
            i.keep(&format!("{d}/Gemfile.lock"), super::SMALL_FILE)
        })
        .scan_elf()
}

/// What the config adds: `Gemfile.lock` in its working folder.
pub(crate) fn interests_for(config: &ImageConfiguration) -> Interests {
    let dir = config
        .config()
        .as_ref()
        .and_then(|c| c.working_dir().as_deref())
        .filter(|w| w.starts_with('/'));
    match dir {
        Some(d) => Interests::default().keep(&lockfile(d), super::SMALL_FILE),
        None => Interests::default(),
    }
}

fn lockfile(dir: &str) -> String {
    format!("{}/Gemfile.lock", dir.trim_end_matches('/'))
}

pub(crate) fn derive(loader: &Loader, env: &Env, os: &OsFacts, entry: &Entrypoint) -> Option<RubyFacts> {
    let tree = loader.tree();
    let is_ruby = |p: &str| {
        let base = p.rsplit('/').next().unwrap_or(p);
        base == "ruby"
            || base
                .strip_prefix("ruby")
                .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
    };
    let in_path = || {
        env.get("PATH")
            .unwrap_or(DEFAULT_PATH)
            .split(':')
            .filter(|d| d.starts_with('/'))
            .chain(["/usr/local/bin", "/usr/bin"])
            .find_map(|d| {
                let id = tree.lookup(&format!("{}/ruby", d.trim_end_matches('/'))).ok()??;
                matches!(tree.node(id).kind, NodeKind::File).then(|| tree.path_of(id))
            })
    };
    let binary = entry
        .program
        .clone()
        .filter(|p| is_ruby(p))
        .or_else(in_path)
        .filter(|p| loader.elf_at(p).is_some())?;
    let elf = loader.elf_at(&binary)?;
    let needed = |e: &crate::elf::ElfInfo| {
        e.scan
            .dynamic
            .as_ref()
            .map(|d| d.needed.clone())
            .unwrap_or_default()
    };
    let own = needed(elf);
    let library = own
        .iter()
        .find(|n| n.starts_with("libruby"))
        .and_then(|n| loader.resolve(n, Some(&binary)).path);
    let lib_needed = library
        .as_deref()
        .and_then(|l| loader.elf_at(l))
        .map(needed)
        .unwrap_or_default();
    let jemalloc_linked = own
        .iter()
        .chain(&lib_needed)
        .any(|n| n.starts_with("libjemalloc"));
    let (version, version_source) = version(
        env,
        os,
        library
            .as_deref()
            .or(own.iter().find(|n| n.starts_with("libruby")).map(String::as_str)),
    );
    let mut servers = Vec::new();
    let mut dirs: Vec<&str> = vec![entry.working_dir.as_str()];
    dirs.extend(APP_FOLDERS.iter().copied());
    for d in dirs {
        let path = lockfile(d);
        if !tree.keeps(&path) {
            continue;
        }
        if let Some(c) = tree.contents(&path) {
            for (name, v) in gems(&String::from_utf8_lossy(&c.bytes)) {
                if !servers.iter().any(|s: &RubyServer| s.name == name) {
                    servers.push(RubyServer {
                        name,
                        version: Some(v),
                        source: path.clone(),
                    });
                }
            }
            break;
        }
    }
    for name in entry_servers(entry) {
        if !servers.iter().any(|s| s.name == name) {
            servers.push(RubyServer {
                name: name.to_string(),
                version: None,
                source: "entrypoint".into(),
            });
        }
    }
    Some(RubyFacts {
        interpreter: elf.head.interpreter.clone(),
        binary,
        version,
        version_source,
        library,
        jemalloc_linked,
        servers,
    })
}

/// The version: the official images' `ENV RUBY_VERSION`, the distribution's `rubyX.Y` package
/// (Debian's `3.1.7+really3.1.2-1` is Ruby 3.1.2), or the library's name.
fn version(env: &Env, os: &OsFacts, library: Option<&str>) -> (Option<String>, Option<String>) {
    if let Some(v) = env.non_empty("RUBY_VERSION") {
        return (Some(v.to_string()), Some("ENV RUBY_VERSION".into()));
    }
    let pkg = os
        .packages
        .iter()
        .filter(|(n, _)| {
            n.strip_prefix("ruby")
                .or_else(|| n.strip_prefix("libruby"))
                .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()) && v.contains('.'))
        })
        .max_by_key(|(n, _)| n.starts_with("ruby"));
    if let Some((name, p)) = pkg {
        let v = p.version.split_once(':').map_or(p.version.as_str(), |(_, v)| v);
        let v = v.rsplit_once('-').map_or(v, |(up, _)| up);
        let v = v.rsplit_once("+really").map_or(v, |(_, real)| real);
        return (Some(v.to_string()), Some(format!("package {name} {}", p.version)));
    }
    let Some(base) = library.map(|l| l.rsplit('/').next().unwrap_or(l)) else {
        return (None, None);
    };
    // libruby.so.3.3 (the official images), libruby-3.1.so.3.1 (Debian).
    let v = base
        .strip_prefix("libruby-")
        .and_then(|r| r.split(".so").next())
        .or_else(|| base.strip_prefix("libruby.so."))
        .filter(|v| v.starts_with(|c: char| c.is_ascii_digit()));
    match v {
        Some(v) => (Some(v.to_string()), Some(format!("library {base}"))),
        None => (None, None),
    }
}

/// The server gems a `Gemfile.lock` resolves (`    name (version)` under `specs:`).
pub(crate) fn gems(lock: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut in_specs = false;
    for line in lock.lines() {
        if !line.starts_with(' ') {
            in_specs = false;
            continue;
        }
        if line.trim() == "specs:" {
            in_specs = true;
            continue;
        }
        let Some(spec) = line
            .strip_prefix("    ")
            .filter(|s| in_specs && !s.starts_with(' '))
        else {
            continue;
        };
        let Some((name, rest)) = spec.split_once(" (") else {
            continue;
        };
        let version = rest.trim_end_matches(')');
        let version = version.split('-').next().unwrap_or(version);
        if SERVERS.contains(&name) && !out.iter().any(|(n, _)| n == name) {
            out.push((name.to_string(), version.to_string()));
        }
    }
    out
}

/// Servers the entrypoint names: `puma`, `sidekiq`, `unicorn`, `rails server`.
fn entry_servers(entry: &Entrypoint) -> Vec<&'static str> {
    let words: Vec<&str> = entry
        .args
        .iter()
        .chain(entry.steps.iter().flat_map(|s| s.argv.iter()))
        .map(|a| a.rsplit('/').next().unwrap_or(a))
        .collect();
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let server = match *w {
            "puma" | "pumactl" => Some("puma"),
            "sidekiq" | "sidekiqswarm" => Some("sidekiq"),
            "unicorn" | "unicorn_rails" => Some("unicorn"),
            "rails" if matches!(words.get(i + 1), Some(&("server" | "s"))) => Some("rails"),
            _ => None,
        };
        if let Some(s) = server.filter(|s| !out.contains(s)) {
            out.push(s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemfile_lock_servers() {
        let lock = "GEM\n  remote: https://rubygems.org/\n  specs:\n    actioncable (7.2.1)\n      nio4r (~> 2.0)\n      puma (>= 5)\n    nio4r (2.7.3)\n    nokogiri (1.16.7-x86_64-linux)\n    puma (6.4.3)\n      nio4r (~> 2.0)\n    rails (7.2.1)\n    sidekiq (7.3.2)\n\nPLATFORMS\n  x86_64-linux\n\nDEPENDENCIES\n  puma (>= 5.0)\n  unicorn\n";
        assert_eq!(
            gems(lock),
            [
                ("puma".to_string(), "6.4.3".to_string()),
                ("rails".into(), "7.2.1".into()),
                ("sidekiq".into(), "7.3.2".into())
            ]
        );
    }

    #[test]
    fn servers_from_the_command() {
        let e = Entrypoint {
            args: ["bundle", "exec", "sidekiq", "-C", "x"]
                .map(String::from)
                .to_vec(),
            ..Default::default()
        };
        assert_eq!(entry_servers(&e), ["sidekiq"]);
        let e = Entrypoint {
            args: ["/usr/local/bin/ruby", "./bin/rails", "server"]
                .map(String::from)
                .to_vec(),
            ..Default::default()
        };
        assert_eq!(entry_servers(&e), ["rails"]);
        let e = Entrypoint {
            args: ["./bin/rails", "db:migrate"].map(String::from).to_vec(),
            ..Default::default()
        };
        assert!(entry_servers(&e).is_empty());
    }

    #[test]
    fn versions() {
        let os = OsFacts::default();
        let env = Env::from_pairs(["RUBY_VERSION=3.3.5"]);
        assert_eq!(version(&env, &os, None).0.as_deref(), Some("3.3.5"));
        let none = Env::default();
        assert_eq!(
            version(&none, &os, Some("/usr/local/lib/libruby.so.3.3"))
                .0
                .as_deref(),
            Some("3.3")
        );
        assert_eq!(
            version(&none, &os, Some("/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1"))
                .0
                .as_deref(),
            Some("3.1")
        );
        let mut os = OsFacts::default();
        os.packages.insert(
            "ruby3.1".into(),
            super::super::os::Package {
                version: "3.1.7+really3.1.2-1".into(),
                architecture: None,
            },
        );
        assert_eq!(version(&none, &os, None).0.as_deref(), Some("3.1.2"));
    }
}
