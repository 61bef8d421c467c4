//! PHP's worker processes and the memory each may take: the PHP-FPM pools or the Apache
//! prefork children (mod_php) that the entrypoint runs, each pool's `pm.max_children` (or
//! Apache's `MaxRequestWorkers`), `pm.max_requests`, and the `memory_limit` its requests get.
//!
//! - PHP-FPM: the program is `php-fpm` or `php-fpmX.Y`. Its config is `-y`/`--fpm-config`,
//!   else the one it was built with: `/etc/php/X.Y/fpm/php-fpm.conf` (Debian's `php-fpmX.Y`),
//!   `/usr/local/etc/php-fpm.conf` (the official image's `/usr/local/sbin/php-fpm`). Its
//!   `include=` globs are followed in place, in sorted order, as FPM does; a `[name]` section
//!   seen again continues that pool (the official image's `zz-docker.conf` relies on it).
//!   `${VAR}` in values is replaced from the environment the master starts with, as FPM's ini
//!   reader does (an unset variable gives the empty string).
//! - `memory_limit` of a pool: its `php_admin_value[memory_limit]` (or `php_value[…]`), else
//!   `-d memory_limit=` on the command line, else the last one of `php.ini` and the scan
//!   folder's `*.ini` in name order, else PHP's built-in 128M. `-1` is no limit.
//! - Apache: the program is `apache2`, `apache2ctl`, `apachectl` or `httpd` with a mod_php
//!   `php*.load` in `/etc/apache2/mods-enabled` and the prefork MPM enabled; its children are
//!   `MaxRequestWorkers` (`MaxClients` before 2.3.13) of `mpm_prefork.conf`, at most
//!   `ServerLimit`, both 256 by default.

use super::entrypoint::Entrypoint;
use super::env::Value;
use super::Env;
use crate::tree::{wildcard_match, FileTree, Interests, NodeKind};
use serde::Serialize;

/// PHP's `memory_limit` when nothing sets it (`main/main.c`: `PHP_INI_ENTRY_EX("memory_limit",
/// "128M", …)`).
pub(crate) const BUILT_IN_MEMORY_LIMIT: &str = "128M";
/// Apache prefork's `MaxRequestWorkers` and `ServerLimit` when unset (`DEFAULT_SERVER_LIMIT`).
pub(crate) const PREFORK_DEFAULT_WORKERS: u64 = 256;

/// Bytes kept of each config file: Debian's php.ini is 73 KiB.
const CONFIG_CAP: u64 = 256 * 1024;
/// Config files read for one server at most (includes and `*.ini` of a scan folder together).
const MAX_FILES: usize = 256;
/// `include=` nesting followed at most.
const MAX_DEPTH: usize = 8;
/// Pools (sections) read at most: real configs have a handful; a hostile file of a million
/// `[x]` lines must not become a million pools.
const MAX_SECTIONS: usize = 256;
/// The pool settings this module reads; the others are skipped as they are read, so that what
/// it keeps does not grow with a file's lines.
const POOL_KEYS: &[&str] = &[
    "pm.max_children",
    "pm.max_requests",
    "php_admin_value[memory_limit]",
    "php_value[memory_limit]",
];

/// Where the Debian packages and the official images keep PHP's and Apache's configs.
const CONFIG_FILES: &[&str] = &[
    "/etc/php/*/fpm/php-fpm.conf",
    "/etc/php/*/fpm/pool.d/*.conf",
    "/etc/php/*/fpm/php.ini",
    "/etc/php/*/fpm/conf.d/*.ini",
    "/etc/php/*/apache2/php.ini",
    "/etc/php/*/apache2/conf.d/*.ini",
    "/etc/php/*/mods-available/*.ini",
    "/usr/local/etc/php-fpm.conf",
    "/usr/local/etc/php-fpm.d/*.conf",
    "/usr/local/etc/php/php.ini",
    "/usr/local/etc/php/conf.d/*.ini",
    "/etc/apache2/mods-available/*.conf",
    "/etc/apache2/mods-enabled/*.conf",
];

/// What [`derive`] reads: the FPM configs and pools, php.ini and its scan folders, Apache's
/// module configs.
pub(crate) fn interests() -> Interests {
    CONFIG_FILES
        .iter()
        .fold(Interests::default(), |i, p| i.keep(p, CONFIG_CAP))
}

/// A value a config file gives, where, and the variable it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct Setting {
    /// As the server reads it (`${VAR}` replaced).
    pub(crate) value: String,
    pub(crate) path: String,
    pub(crate) line: u32,
    /// The `${VAR}` the value is, when it is one variable: the variable is then the fix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) variable: Option<String>,
}

impl Setting {
    /// `PATH line N`.
    pub(crate) fn at(&self) -> String {
        format!("{} line {}", self.path, self.line)
    }
}

/// The `memory_limit` one request of a pool gets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct MemoryLimit {
    /// As written (`256M`, `-1`).
    pub(crate) text: String,
    /// In bytes; `None` when unbounded (`-1`) or not a size.
    pub(crate) bytes: Option<u64>,
    pub(crate) unbounded: bool,
    /// Where it is set; `None` for PHP's built-in default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) setting: Option<Setting>,
    /// How it is set, in words (`php_admin_value[memory_limit] of the pool`, `php.ini`, …).
    pub(crate) how: String,
}

/// A worker count: PHP-FPM's `pm.max_children` or Apache's `MaxRequestWorkers`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub(crate) enum Workers {
    Set {
        count: u64,
        /// Where it is set; `None` for Apache's default.
        #[serde(skip_serializing_if = "Option::is_none")]
        setting: Option<Setting>,
    },
    Undecided {
        why: String,
    },
}

/// One pool of worker processes that run PHP.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct PhpPool {
    /// The FPM pool's name (`www`), or `prefork` for Apache.
    pub(crate) name: String,
    /// The directive that sets the count (`pm.max_children`, `MaxRequestWorkers`).
    pub(crate) directive: &'static str,
    pub(crate) workers: Workers,
    /// `pm.max_requests` (Apache: `MaxConnectionsPerChild`), when set and above 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_requests: Option<u64>,
    /// `None` when memlint cannot tell (see `memory_limit_undecided`).
    pub(crate) memory_limit: Option<MemoryLimit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) memory_limit_undecided: Option<String>,
}

/// The PHP server the entrypoint runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct PhpServer {
    /// `php-fpm` or `apache2` (prefork with mod_php).
    pub(crate) kind: &'static str,
    pub(crate) program: String,
    /// The main config file read (`php-fpm.conf`, `mpm_prefork.conf`).
    pub(crate) config: String,
    pub(crate) pools: Vec<PhpPool>,
    /// What memlint could not read (an include outside the known folders, a `-c` file).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) undecided: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct PhpFacts {
    pub(crate) servers: Vec<PhpServer>,
}

/// The PHP server of the entrypoint, or `None` when it runs neither PHP-FPM nor Apache with
/// mod_php.
pub(crate) fn derive(tree: &FileTree, env: &Env, entry: &Entrypoint) -> Option<PhpFacts> {
    let program = entry.program.as_deref()?;
    let name = program.rsplit('/').next().unwrap_or(program);
    let server = if is_fpm(name) {
        fpm(tree, env, program, name, &entry.args)
    } else if matches!(name, "apache2" | "apache2ctl" | "apachectl" | "httpd") {
        apache(tree, env, program)?
    } else {
        return None;
    };
    Some(PhpFacts {
        servers: vec![server],
    })
}

/// `php-fpm`, `php-fpm8.2`, `php-fpm82` (Alpine).
fn is_fpm(name: &str) -> bool {
    name.strip_prefix("php-fpm")
        .is_some_and(|v| v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
}

/// A value of `-NAME VALUE`, `-NAMEVALUE` or `--long=VALUE` / `--long VALUE` in `args`.
fn option_value(args: &[String], short: &str, long: &str) -> Option<String> {
    let mut found = None;
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        if a == short || a == long {
            found = it.next().cloned();
        } else if let Some(v) = a.strip_prefix(&format!("{long}=")) {
            found = Some(v.to_string());
        } else if let Some(v) = a
            .strip_prefix(short)
            .filter(|v| !v.is_empty() && !a.starts_with("--"))
        {
            found = Some(v.to_string());
        }
    }
    found
}

/// The `-d memory_limit=VALUE` of the command line, the last one.
fn define_memory_limit(args: &[String]) -> Option<String> {
    let mut found = None;
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let define = if a == "-d" || a == "--define" {
            it.next().map(String::as_str)
        } else {
            a.strip_prefix("-d")
                .filter(|v| !v.is_empty() && !a.starts_with("--"))
        };
        if let Some(v) = define.and_then(|d| d.trim().strip_prefix("memory_limit")) {
            if let Some(v) = v.trim_start().strip_prefix('=') {
                found = Some(clean_value(v));
            }
        }
    }
    found
}

/// Where a PHP build keeps its ini files: `php.ini` and the folder of `*.ini` it scans.
struct IniPlaces {
    php_ini: String,
    scan_dir: String,
}

fn fpm(tree: &FileTree, env: &Env, program: &str, name: &str, args: &[String]) -> PhpServer {
    let mut undecided = Vec::new();
    let version = name.trim_start_matches("php-fpm");
    let debian = program.starts_with("/usr/sbin/") && version.contains('.');
    let default_config = if debian {
        format!("/etc/php/{version}/fpm/php-fpm.conf")
    } else {
        "/usr/local/etc/php-fpm.conf".to_string()
    };
    let config = option_value(args, "-y", "--fpm-config").unwrap_or(default_config);
    let ini = if debian {
        IniPlaces {
            php_ini: format!("/etc/php/{version}/fpm/php.ini"),
            scan_dir: format!("/etc/php/{version}/fpm/conf.d"),
        }
    } else {
        let dir = env.non_empty("PHP_INI_DIR").unwrap_or("/usr/local/etc/php");
        IniPlaces {
            php_ini: format!("{}/php.ini", dir.trim_end_matches('/')),
            scan_dir: format!("{}/conf.d", dir.trim_end_matches('/')),
        }
    };
    let mut reader = Reader {
        tree,
        env,
        files: 0,
        undecided: &mut undecided,
    };
    let mut sections: Vec<Section> = Vec::new();
    reader.read_fpm(&config, &mut sections, 0);
    let ini_limit = reader.ini_memory_limit(&ini, args, "-c");
    let mut pools = Vec::new();
    for s in sections.iter().filter(|s| s.name != "global") {
        let workers = match s.get("pm.max_children") {
            Some(Ok(setting)) => match setting.value.trim().parse::<u64>() {
                Ok(count) if count > 0 => Workers::Set {
                    count,
                    setting: Some(setting.clone()),
                },
                _ => Workers::Undecided {
                    why: format!(
                        "pm.max_children is `{}` at {}: FPM refuses a value that is not a positive number",
                        setting.value,
                        setting.at()
                    ),
                },
            },
            Some(Err(why)) => Workers::Undecided { why },
            None => Workers::Undecided {
                why: format!(
                    "the pool `{}` sets no pm.max_children (FPM refuses to start without it)",
                    s.name
                ),
            },
        };
        let max_requests = match s.get("pm.max_requests") {
            Some(Ok(v)) => v.value.trim().parse::<u64>().ok().filter(|n| *n > 0),
            _ => None,
        };
        let pool_limit = s
            .get("php_admin_value[memory_limit]")
            .map(|r| (r, "php_admin_value[memory_limit] of the pool"))
            .or_else(|| {
                s.get("php_value[memory_limit]")
                    .map(|r| (r, "php_value[memory_limit] of the pool"))
            });
        let (memory_limit, memory_limit_undecided) = match pool_limit {
            Some((Ok(setting), how)) => (
                Some(memory_limit(setting.value.clone(), Some(setting.clone()), how)),
                None,
            ),
            Some((Err(why), _)) => (None, Some(why)),
            None => match &ini_limit {
                Ok(l) => (Some(l.clone()), None),
                Err(why) => (None, Some(why.clone())),
            },
        };
        pools.push(PhpPool {
            name: s.name.clone(),
            directive: "pm.max_children",
            workers,
            max_requests,
            memory_limit,
            memory_limit_undecided,
        });
    }
    if pools.is_empty() && undecided.is_empty() {
        undecided.push(format!("{config} defines no pool memlint could read"));
    }
    PhpServer {
        kind: "php-fpm",
        program: program.to_string(),
        config,
        pools,
        undecided,
    }
}

fn apache(tree: &FileTree, env: &Env, program: &str) -> Option<PhpServer> {
    let enabled = "/etc/apache2/mods-enabled";
    let dir = tree.lookup(enabled).ok().flatten()?;
    let names: Vec<String> = match &tree.node(dir).kind {
        NodeKind::Dir(c) => c.keys().map(|n| n.to_string()).collect(),
        _ => return None,
    };
    // mod_php: Debian's php8.2.load, the official image's php.load.
    let php_load = names
        .iter()
        .filter(|n| n.starts_with("php") && n.ends_with(".load"))
        .min()?
        .clone();
    // mod_php runs only under prefork; another MPM means it does not load.
    if !names.iter().any(|n| n == "mpm_prefork.load") {
        return None;
    }
    let mut undecided = Vec::new();
    let config = format!("{enabled}/mpm_prefork.conf");
    let mut reader = Reader {
        tree,
        env,
        files: 0,
        undecided: &mut undecided,
    };
    let directives = reader.apache_directives(&config);
    let find = |names: &[&str]| {
        directives
            .iter()
            .rev()
            .find(|(k, _)| names.iter().any(|n| k.eq_ignore_ascii_case(n)))
            .map(|(_, s)| s.clone())
    };
    let workers = match (find(&["MaxRequestWorkers", "MaxClients"]), find(&["ServerLimit"])) {
        (Some(w), limit) => match w.value.parse::<u64>() {
            Ok(count) => {
                let cap = limit
                    .as_ref()
                    .and_then(|l| l.value.parse::<u64>().ok())
                    .unwrap_or(PREFORK_DEFAULT_WORKERS);
                Workers::Set {
                    count: count.min(cap),
                    setting: Some(w),
                }
            }
            Err(_) => Workers::Undecided {
                why: format!("MaxRequestWorkers is `{}` at {}", w.value, w.at()),
            },
        },
        (None, _) => Workers::Set {
            count: PREFORK_DEFAULT_WORKERS,
            setting: None,
        },
    };
    let max_requests = find(&["MaxConnectionsPerChild", "MaxRequestsPerChild"])
        .and_then(|s| s.value.parse::<u64>().ok())
        .filter(|n| *n > 0);
    let version = php_load
        .trim_start_matches("php")
        .trim_end_matches(".load")
        .to_string();
    let ini = if version.contains('.') {
        IniPlaces {
            php_ini: format!("/etc/php/{version}/apache2/php.ini"),
            scan_dir: format!("/etc/php/{version}/apache2/conf.d"),
        }
    } else {
        let dir = env.non_empty("PHP_INI_DIR").unwrap_or("/usr/local/etc/php");
        IniPlaces {
            php_ini: format!("{}/php.ini", dir.trim_end_matches('/')),
            scan_dir: format!("{}/conf.d", dir.trim_end_matches('/')),
        }
    };
    let limit = reader.ini_memory_limit(&ini, &[], "");
    let (memory_limit, memory_limit_undecided) = match limit {
        Ok(l) => (Some(l), None),
        Err(why) => (None, Some(why)),
    };
    Some(PhpServer {
        kind: "apache2",
        program: program.to_string(),
        config,
        pools: vec![PhpPool {
            name: "prefork".into(),
            directive: "MaxRequestWorkers",
            workers,
            max_requests,
            memory_limit,
            memory_limit_undecided,
        }],
        undecided,
    })
}

fn memory_limit(text: String, setting: Option<Setting>, how: &str) -> MemoryLimit {
    let t = text.trim();
    let unbounded = t.starts_with('-') && t[1..].trim().parse::<u64>().is_ok();
    MemoryLimit {
        bytes: if unbounded { None } else { parse_quantity(t) },
        unbounded,
        text: t.to_string(),
        setting,
        how: how.to_string(),
    }
}

/// A size as PHP reads an ini quantity: digits and an optional `K`, `M` or `G` (either case).
pub(crate) fn parse_quantity(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, mult) = match t.as_bytes().last()? {
        b'k' | b'K' => (&t[..t.len() - 1], 1u64 << 10),
        b'm' | b'M' => (&t[..t.len() - 1], 1 << 20),
        b'g' | b'G' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let digits = digits.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

/// An ini value as PHP's reader takes it: a quoted string up to its quote, else up to a `;`
/// comment, trimmed.
fn clean_value(raw: &str) -> String {
    let v = raw.trim();
    for q in ['"', '\''] {
        if let Some(rest) = v.strip_prefix(q) {
            return rest.split(q).next().unwrap_or("").to_string();
        }
    }
    v.split(';').next().unwrap_or("").trim().to_string()
}

/// One `[section]` of FPM's config, its settings in order (a later one wins).
struct Section {
    name: String,
    /// Key, and the setting or why its value is undecided.
    pairs: Vec<(String, Result<Setting, String>)>,
}

impl Section {
    fn get(&self, key: &str) -> Option<Result<&Setting, String>> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_ref().map_err(Clone::clone))
    }
}

struct Reader<'a, 'u> {
    tree: &'a FileTree,
    env: &'a Env,
    files: usize,
    undecided: &'u mut Vec<String>,
}

impl Reader<'_, '_> {
    /// The text of a config file: `None` when absent; a file outside the declared folders
    /// cannot be read and is noted as undecided.
    fn text(&mut self, path: &str) -> Option<String> {
        let id = self.tree.lookup(path).ok().flatten()?;
        if !self.tree.node(id).is_file() {
            return None;
        }
        if self.files >= MAX_FILES {
            self.undecided.push(format!(
                "more than {MAX_FILES} config files: {path} and later ones are not read"
            ));
            return None;
        }
        self.files += 1;
        if !self.tree.keeps(path) {
            self.undecided.push(format!(
                "{path} is outside the folders memlint reads PHP's settings from"
            ));
            return None;
        }
        let c = self.tree.contents(path)?;
        if c.truncated {
            self.undecided.push(format!(
                "{path} is longer than the {} KiB memlint reads",
                CONFIG_CAP >> 10
            ));
        }
        Some(String::from_utf8_lossy(&c.bytes).into_owned())
    }

    /// `${VAR}` replaced from the environment as PHP's ini reader does; the variable when the
    /// whole value is one; `Err` when a script sets one in a way memlint cannot work out.
    fn expand(&self, value: &str) -> Result<(String, Option<String>), String> {
        let mut out = String::new();
        let mut rest = value;
        let mut names = Vec::new();
        while let Some(at) = rest.find("${") {
            out.push_str(&rest[..at]);
            let Some(end) = rest[at..].find('}') else {
                out.push_str(&rest[at..]);
                rest = "";
                break;
            };
            let name = &rest[at + 2..at + end];
            match self.env.var(name).map(|v| &v.value) {
                Some(Value::Set(v)) => out.push_str(v),
                Some(Value::Undecided { .. }) => {
                    return Err(self
                        .env
                        .entry(name)
                        .unwrap_or_else(|| format!("{name} is undecided")))
                }
                Some(Value::Unset) | None => {}
            }
            names.push(name.to_string());
            rest = &rest[at + end + 1..];
        }
        out.push_str(rest);
        let whole =
            (names.len() == 1 && value.trim() == format!("${{{}}}", names[0])).then(|| names[0].clone());
        Ok((out, whole))
    }

    /// Reads FPM's config at `path` into `sections`, following its includes in place.
    fn read_fpm(&mut self, path: &str, sections: &mut Vec<Section>, depth: usize) {
        let Some(text) = self.text(path) else {
            if depth == 0 {
                self.undecided
                    .push(format!("{path}, the FPM config, is not in the image"));
            }
            return;
        };
        // FPM reads a section's settings into the pool of that name: a pool seen again goes on.
        let mut current: Option<usize> = sections.iter().position(|s| s.name == "global");
        for (n, line) in text.lines().enumerate() {
            let line_no = n as u32 + 1;
            let l = line.trim();
            if l.is_empty() || l.starts_with(';') || l.starts_with('#') {
                continue;
            }
            if let Some(name) = l.strip_prefix('[').and_then(|r| r.split(']').next()) {
                let name = name.trim().to_string();
                current = match sections.iter().position(|s| s.name == name) {
                    Some(i) => Some(i),
                    None if sections.len() >= MAX_SECTIONS => {
                        self.undecided.push(format!(
                            "{path} line {line_no}: more than {MAX_SECTIONS} pools; the rest are not read"
                        ));
                        return;
                    }
                    None => {
                        sections.push(Section {
                            name,
                            pairs: Vec::new(),
                        });
                        Some(sections.len() - 1)
                    }
                };
                continue;
            }
            let Some((key, raw)) = l.split_once('=') else {
                continue;
            };
            let key = key.trim().to_string();
            let value = clean_value(raw);
            if key == "include" {
                if depth >= MAX_DEPTH {
                    self.undecided.push(format!(
                        "{path} line {line_no}: includes nested deeper than {MAX_DEPTH}"
                    ));
                    continue;
                }
                // FPM resolves a relative include against its prefix (`/usr/local` in the
                // official image, `/usr` in Debian's).
                let pattern = match self.expand(&value) {
                    Ok((v, _)) if v.starts_with('/') => v,
                    Ok((v, _)) if path.starts_with("/usr/local/") => format!("/usr/local/{v}"),
                    Ok((v, _)) => format!("/usr/{v}"),
                    Err(why) => {
                        self.undecided
                            .push(format!("{path} line {line_no}: include {why}"));
                        continue;
                    }
                };
                for file in self.glob(&pattern) {
                    self.read_fpm(&file, sections, depth + 1);
                }
                continue;
            }
            if !POOL_KEYS.contains(&key.as_str()) {
                continue;
            }
            let setting = self.expand(&value).map(|(value, variable)| Setting {
                value,
                path: path.to_string(),
                line: line_no,
                variable,
            });
            let at = match current {
                Some(i) => i,
                None => {
                    sections.push(Section {
                        name: "global".into(),
                        pairs: Vec::new(),
                    });
                    sections.len() - 1
                }
            };
            current = Some(at);
            // A later setting of a key replaces the earlier one, as FPM reads them.
            let pairs = &mut sections[at].pairs;
            pairs.retain(|(k, _)| *k != key);
            pairs.push((key, setting));
        }
    }

    /// The files a glob whose `*` and `?` are in its last component names, sorted as glob(3)
    /// sorts them.
    fn glob(&mut self, pattern: &str) -> Vec<String> {
        let (dir, name) = pattern.rsplit_once('/').unwrap_or(("", pattern));
        if dir.contains(['*', '?', '[']) {
            self.undecided.push(format!(
                "include {pattern}: a wildcard in a folder name is not followed"
            ));
            return Vec::new();
        }
        let dir = if dir.is_empty() { "/" } else { dir };
        let Some(id) = self.tree.lookup(dir).ok().flatten() else {
            return Vec::new();
        };
        let mut out: Vec<String> = match &self.tree.node(id).kind {
            NodeKind::Dir(c) => c
                .keys()
                .filter(|n| !n.starts_with('.') || name.starts_with('.'))
                .filter(|n| wildcard_match(name.as_bytes(), n.as_bytes(), b'*', b'?'))
                .map(|n| format!("{}/{n}", dir.trim_end_matches('/')))
                .collect(),
            _ => Vec::new(),
        };
        out.sort();
        out
    }

    /// The `memory_limit` the ini files give (the last of php.ini, then the scan folder's
    /// `*.ini` in name order), `-d memory_limit=` over them, else PHP's default.
    fn ini_memory_limit(
        &mut self,
        ini: &IniPlaces,
        args: &[String],
        ini_flag: &str,
    ) -> Result<MemoryLimit, String> {
        if let Some(v) = define_memory_limit(args) {
            return Ok(memory_limit(v, None, "-d memory_limit on the command line"));
        }
        if !ini_flag.is_empty() {
            if let Some(c) = option_value(args, ini_flag, "--php-ini") {
                return Err(format!(
                    "the command names its php.ini with {ini_flag} {c}, which memlint does not read"
                ));
            }
        }
        if let Some(why) = self.env.first_undecided(&["PHP_INI_SCAN_DIR"]) {
            return Err(why);
        }
        let scan_dirs: Vec<String> = match self.env.get("PHP_INI_SCAN_DIR") {
            // A leading `:` (or an empty entry) stands for the built-in folder.
            Some(dirs) => dirs
                .split(':')
                .map(|d| {
                    if d.is_empty() {
                        ini.scan_dir.clone()
                    } else {
                        d.to_string()
                    }
                })
                .collect(),
            None => vec![ini.scan_dir.clone()],
        };
        let mut files = vec![ini.php_ini.clone()];
        for d in &scan_dirs {
            files.extend(self.glob(&format!("{}/*.ini", d.trim_end_matches('/'))));
        }
        let mut found: Option<Result<MemoryLimit, String>> = None;
        for file in files {
            let Some(text) = self.text(&file) else { continue };
            let mut section_applies = true;
            for (n, line) in text.lines().enumerate() {
                let l = line.trim();
                if let Some(name) = l.strip_prefix('[').and_then(|r| r.split(']').next()) {
                    // `[PATH=…]` and `[HOST=…]` sections apply to some requests only.
                    let name = name.trim().to_ascii_uppercase();
                    section_applies = !(name.starts_with("PATH=") || name.starts_with("HOST="));
                    continue;
                }
                let Some((key, raw)) = l.split_once('=') else {
                    continue;
                };
                if key.trim() != "memory_limit" || l.starts_with(';') || !section_applies {
                    continue;
                }
                let line_no = n as u32 + 1;
                found = Some(self.expand(&clean_value(raw)).map(|(value, variable)| {
                    let setting = Setting {
                        value: value.clone(),
                        path: file.clone(),
                        line: line_no,
                        variable,
                    };
                    memory_limit(value, Some(setting), "php.ini")
                }));
            }
        }
        found.unwrap_or_else(|| {
            Ok(memory_limit(
                BUILT_IN_MEMORY_LIMIT.into(),
                None,
                "PHP's built-in default",
            ))
        })
    }

    /// Apache's directives in `path` (`Name value`), each with its line.
    fn apache_directives(&mut self, path: &str) -> Vec<(String, Setting)> {
        let Some(text) = self.text(path) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let l = line.trim();
            if l.is_empty() || l.starts_with('#') || l.starts_with('<') {
                continue;
            }
            let mut words = l.split_whitespace();
            let (Some(name), Some(value)) = (words.next(), words.next()) else {
                continue;
            };
            const READ: &[&str] = &[
                "MaxRequestWorkers",
                "MaxClients",
                "ServerLimit",
                "MaxConnectionsPerChild",
                "MaxRequestsPerChild",
            ];
            if !READ.iter().any(|d| d.eq_ignore_ascii_case(name)) {
                continue;
            }
            // Apache expands `${VAR}` from its environment (`envvars`, the process's).
            let Ok((value, variable)) = self.expand(value) else {
                continue;
            };
            out.push((
                name.to_string(),
                Setting {
                    value,
                    path: path.to_string(),
                    line: n as u32 + 1,
                    variable,
                },
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    const POOL: &str = "/etc/php/8.2/fpm/pool.d/www.conf";
    const FPM_CONF: &str =
        "[global]\npid = /run/php/php8.2-fpm.pid\ninclude=/etc/php/8.2/fpm/pool.d/*.conf\n";

    fn debian_fpm(pool: &str, env: &[&str]) -> TestImage {
        TestImage::new()
            .glibc()
            .program("/usr/sbin/php-fpm8.2")
            .file("/etc/php/8.2/fpm/php-fpm.conf", FPM_CONF)
            .file(POOL, pool)
            .file("/etc/php/8.2/fpm/php.ini", "[PHP]\nmemory_limit = 128M\n")
            .cmd(&["php-fpm8.2", "-F"])
            .env(env)
    }

    fn php(t: TestImage) -> PhpServer {
        t.facts().php.expect("php facts").servers.remove(0)
    }

    #[test]
    fn fpm_pool_children_and_limits() {
        let s = php(debian_fpm(
            "[www]\npm = dynamic\npm.max_children = 50 ; many\nphp_admin_value[memory_limit] = 256M\n",
            &[],
        ));
        assert_eq!(s.kind, "php-fpm");
        assert_eq!(s.config, "/etc/php/8.2/fpm/php-fpm.conf");
        let p = &s.pools[0];
        assert_eq!(p.name, "www");
        assert!(
            matches!(&p.workers, Workers::Set { count: 50, setting: Some(s) } if s.line == 3 && s.path == POOL)
        );
        let l = p.memory_limit.as_ref().unwrap();
        assert_eq!(
            (l.bytes, l.how.as_str()),
            (Some(256 << 20), "php_admin_value[memory_limit] of the pool")
        );
        // Without the pool's value, php.ini's.
        let s = php(debian_fpm("[www]\npm.max_children = 5\n", &[]));
        let l = s.pools[0].memory_limit.clone().unwrap();
        assert_eq!((l.bytes, l.setting.unwrap().line), (Some(128 << 20), 2));
    }

    #[test]
    fn variables_in_pool_files_come_from_the_environment() {
        let s = php(debian_fpm(
            "[www]\npm.max_children = ${PHP_CHILDREN}\n",
            &["PHP_CHILDREN=40"],
        ));
        match &s.pools[0].workers {
            Workers::Set {
                count,
                setting: Some(st),
            } => {
                assert_eq!(*count, 40);
                assert_eq!(st.variable.as_deref(), Some("PHP_CHILDREN"));
            }
            w => panic!("{w:?}"),
        }
        // Unset: the empty string, which FPM refuses.
        let s = php(debian_fpm("[www]\npm.max_children = ${PHP_CHILDREN}\n", &[]));
        assert!(matches!(s.pools[0].workers, Workers::Undecided { .. }));
    }

    #[test]
    fn built_in_default_unbounded_and_command_line() {
        let t = TestImage::new()
            .glibc()
            .program("/usr/local/sbin/php-fpm")
            .file(
                "/usr/local/etc/php-fpm.conf",
                "[global]\ninclude=etc/php-fpm.d/*.conf\n",
            )
            .file(
                "/usr/local/etc/php-fpm.d/www.conf",
                "[www]\npm.max_children = 5\n",
            )
            .file(
                "/usr/local/etc/php-fpm.d/zz-docker.conf",
                "[www]\npm.max_children = 9\n",
            )
            .cmd(&["php-fpm"]);
        let s = php(t.clone());
        assert_eq!(s.pools.len(), 1, "{s:?}");
        assert!(matches!(s.pools[0].workers, Workers::Set { count: 9, .. }));
        let l = s.pools[0].memory_limit.clone().unwrap();
        assert_eq!((l.text.as_str(), l.setting.is_none()), ("128M", true));
        let t = t.file("/usr/local/etc/php/conf.d/zz-memory.ini", "memory_limit = -1\n");
        let l = php(t.clone()).pools[0].memory_limit.clone().unwrap();
        assert!(l.unbounded && l.bytes.is_none());
        let l = php(t.cmd(&["php-fpm", "-d", "memory_limit=64M"])).pools[0]
            .memory_limit
            .clone()
            .unwrap();
        assert_eq!(l.bytes, Some(64 << 20));
    }

    #[test]
    fn apache_prefork_with_mod_php() {
        let t = TestImage::new()
            .glibc()
            .program("/usr/sbin/apache2")
            .file(
                "/etc/apache2/mods-enabled/php8.2.load",
                "LoadModule php_module /usr/lib/apache2/modules/libphp8.2.so\n",
            )
            .file(
                "/etc/apache2/mods-enabled/mpm_prefork.load",
                "LoadModule mpm_prefork_module x\n",
            )
            .file(
                "/etc/apache2/mods-enabled/mpm_prefork.conf",
                "<IfModule mpm_prefork_module>\n\tMaxRequestWorkers\t  150\n</IfModule>\n",
            )
            .file("/etc/php/8.2/apache2/php.ini", "memory_limit = 128M\n")
            .cmd(&["apache2", "-DFOREGROUND"]);
        let s = php(t);
        assert_eq!(s.kind, "apache2");
        assert!(
            matches!(&s.pools[0].workers, Workers::Set { count: 150, setting: Some(st) } if st.line == 2)
        );
        assert_eq!(s.pools[0].memory_limit.as_ref().unwrap().bytes, Some(128 << 20));
    }

    #[test]
    fn a_hostile_config_is_read_within_bounds() {
        let many: String = (0..10_000)
            .map(|i| format!("[p{i}]\npm.max_children = 1\nx = y\n"))
            .collect();
        let s = php(debian_fpm(&many, &[]));
        assert_eq!(s.pools.len(), MAX_SECTIONS - 1, "the [global] section counts too");
        assert!(
            s.undecided.iter().any(|u| u.contains("more than 256 pools")),
            "{:?}",
            s.undecided
        );
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("256M"), Some(256 << 20));
        assert_eq!(parse_quantity("1g"), Some(1 << 30));
        assert_eq!(parse_quantity("134217728"), Some(134217728));
        assert_eq!(parse_quantity("lots"), None);
        assert_eq!(clean_value(" \"512M\" ; c"), "512M");
        assert_eq!(clean_value(" 512M ; c"), "512M");
    }
}
