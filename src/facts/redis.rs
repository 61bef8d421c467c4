//! Redis and Valkey as the container runs them: which server, in which layout (the official
//! image, Bitnami's, Debian's package), the config file it is given and the options on its
//! command line, and from them the settings that bound its memory: `maxmemory`,
//! `maxmemory-policy`, and whether it persists (`save`, `appendonly`), whose fork can double
//! what it holds.
//!
//! How the server reads its command line (redis `src/server.c` `main`, 7.0; Valkey's is the
//! same): a first argument that does not start with `-` is the config file; `-` as the first
//! or last argument reads the config from standard input; every `--name` starts an option whose
//! words follow, and the options are appended to the config file's text, so the last setting
//! wins. Sizes (`memtoull` in `src/util.c`): `1k` is 1000 bytes, `1kb` 1024, `1m` 1000², `1mb`
//! 1024², likewise `g`/`gb`, in either case. Without a `save` line Redis 7 snapshots with
//! `save 3600 1 300 100 60 10000`; `save ""` turns it off; `appendonly` is `no` unless set.

use super::command::{absolute, config_argv};
use super::entrypoint::Entrypoint;
use super::Env;
use crate::shell;
use crate::tree::{FileTree, Interests};
use oci_spec::image::ImageConfiguration;
use serde::Serialize;

/// A config file is read no further than this (Debian's redis.conf is 104 KiB).
const CONF_CAP: u64 = 1024 * 1024;
/// At most this many `include` files are followed.
const MAX_INCLUDES: usize = 8;

/// Where the usual layouts keep their config files, kept whatever the config says: Debian's
/// package, the official images' documented mount point, Bitnami's.
const CONF_PATTERNS: &[&str] = &[
    "/etc/redis/*.conf",
    "/etc/valkey/*.conf",
    "/usr/local/etc/redis/*.conf",
    "/usr/local/etc/valkey/*.conf",
    "/opt/bitnami/redis/etc/*.conf",
    "/opt/bitnami/valkey/etc/*.conf",
];

/// The server names, as the command invokes them (Debian's `/usr/bin/redis-server` is a link
/// to `redis-check-rdb`: the server tells its mode from the name it is run by).
const SERVERS: &[&str] = &["redis-server", "valkey-server"];

/// Bitnami's layout: its run script starts `<base>/bin/redis-server <base>/etc/redis.conf
/// --daemonize no $REDIS_EXTRA_FLAGS "$@"` (bitnami/containers `bitnami/redis/*/debian-12/
/// rootfs/opt/bitnami/scripts/redis/run.sh`).
const BITNAMI: &[(&str, &str, &str)] = &[
    ("redis-server", "/opt/bitnami/redis", "REDIS_EXTRA_FLAGS"),
    ("valkey-server", "/opt/bitnami/valkey", "VALKEY_EXTRA_FLAGS"),
];

/// Redis 7's snapshot schedule when no `save` line sets one (`redis.conf`, "SNAPSHOTTING").
pub(crate) const DEFAULT_SAVE: &str = "3600 1 300 100 60 10000";

/// One setting and where it was read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct RedisSetting {
    /// The value as written (`160mb`, `""`, `yes`).
    pub(crate) value: String,
    /// `/etc/redis/redis.conf line 1119`, `the command line`, `REDIS_EXTRA_FLAGS`.
    pub(crate) source: String,
}

/// The server the container runs and the settings that bound its memory.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub(crate) struct RedisFacts {
    /// `redis-server` or `valkey-server`.
    pub(crate) server: String,
    /// `official`, `bitnami`, `debian` or `other`.
    pub(crate) layout: &'static str,
    /// How the server was found, in words.
    pub(crate) found_by: String,
    /// The config file the server is given, when one is.
    pub(crate) config_file: Option<String>,
    /// The server's arguments after its name, as it gets them.
    pub(crate) args: Vec<String>,
    /// `maxmemory`, when set (`0` is no limit).
    pub(crate) maxmemory: Option<RedisSetting>,
    /// `maxmemory`'s bytes, when it is set and readable.
    pub(crate) maxmemory_bytes: Option<u64>,
    pub(crate) maxmemory_policy: Option<RedisSetting>,
    /// The last `save` (`None`: Redis's default schedule, [`DEFAULT_SAVE`]).
    pub(crate) save: Option<RedisSetting>,
    pub(crate) appendonly: Option<RedisSetting>,
    /// Why the settings are not all known, when they are not: a rule stays undecided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) undecided: Option<String>,
    /// The words of the container's `Cmd` (the manifest's `args` when it sets them), for a fix
    /// that appends to them.
    #[serde(skip)]
    pub(crate) cmd: Vec<String>,
    /// Whether the server's name is in the `Cmd` (else in the Entrypoint or a script).
    #[serde(skip)]
    pub(crate) server_in_cmd: bool,
}

impl RedisFacts {
    /// Whether the server writes snapshots or an append-only file: `save` not `""` (its default
    /// schedule included), or `appendonly yes`.
    pub(crate) fn persists(&self) -> bool {
        let saves = self.save.as_ref().is_none_or(|s| !is_empty_word(&s.value));
        let aof = self
            .appendonly
            .as_ref()
            .is_some_and(|a| a.value.eq_ignore_ascii_case("yes"));
        saves || aof
    }

    /// The persistence in words, for evidence.
    pub(crate) fn persistence(&self) -> String {
        let save = match &self.save {
            Some(s) if is_empty_word(&s.value) => format!("save \"\" ({})", s.source),
            Some(s) => format!("save {} ({})", s.value, s.source),
            None => format!("no save line: Redis's default schedule save {DEFAULT_SAVE}"),
        };
        let aof = match &self.appendonly {
            Some(a) => format!("appendonly {} ({})", a.value, a.source),
            None => "appendonly no (the default)".to_string(),
        };
        format!("{save}; {aof}")
    }
}

fn is_empty_word(v: &str) -> bool {
    v.is_empty() || v == "\"\"" || v == "''"
}

/// What [`derive`] reads whatever the config says: the config files of the usual layouts.
pub(crate) fn interests() -> Interests {
    CONF_PATTERNS
        .iter()
        .fold(Interests::default(), |i, p| i.keep(p, CONF_CAP))
}

/// What the config adds: a `.conf` its command names (absolute, or relative to its working
/// folder), which the server reads as its config file.
pub(crate) fn interests_for(config: &ImageConfiguration) -> Interests {
    let c = config.config().as_ref();
    let working_dir = c
        .and_then(|c| c.working_dir().clone())
        .filter(|w| w.starts_with('/'))
        .unwrap_or_else(|| "/".into());
    config_argv(config)
        .iter()
        .filter(|a| a.ends_with(".conf") && !a.starts_with('-'))
        .fold(Interests::default(), |i, a| {
            i.keep(&absolute(&working_dir, a), CONF_CAP)
        })
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// The server, when the container runs Redis or Valkey.
pub(crate) fn derive(
    tree: &FileTree,
    env: &Env,
    entry: &Entrypoint,
    config: Option<&ImageConfiguration>,
) -> Option<RedisFacts> {
    let cmd: Vec<String> = config
        .and_then(|c| c.config().as_ref())
        .and_then(|c| c.cmd().clone())
        .unwrap_or_default();
    let found = locate(tree, env, entry)?;
    let server_in_cmd = cmd.iter().any(|w| SERVERS.contains(&basename(w)));
    let mut facts = RedisFacts {
        server: found.server.to_string(),
        layout: found.layout,
        found_by: found.found_by,
        config_file: None,
        args: found.args.clone(),
        maxmemory: None,
        maxmemory_bytes: None,
        maxmemory_policy: None,
        save: None,
        appendonly: None,
        undecided: found.undecided,
        cmd,
        server_in_cmd,
    };
    let (config_file, options) = split_command_line(&found.args);
    let mut settings = Settings::default();
    if let Some(file) = config_file {
        if file == "-" {
            facts
                .undecided
                .get_or_insert_with(|| "the server reads its config from standard input".into());
        } else {
            let path = absolute(&entry.working_dir, file);
            read_config(tree, &path, &mut settings, &mut facts.undecided, 0);
            facts.config_file = Some(path);
        }
    }
    if options.iter().any(|w| w == "-") {
        facts
            .undecided
            .get_or_insert_with(|| "the server reads more config from standard input".into());
    }
    for (name, words) in command_line_options(options) {
        settings.set(&name, words.join(" "), found.args_source.clone());
    }
    facts.maxmemory = settings.maxmemory;
    facts.maxmemory_bytes = facts.maxmemory.as_ref().and_then(|m| memory_size(&m.value));
    facts.maxmemory_policy = settings.policy;
    facts.save = settings.save;
    facts.appendonly = settings.appendonly;
    Some(facts)
}

/// The server found: its name, layout, arguments and where they come from.
struct Found {
    server: &'static str,
    layout: &'static str,
    found_by: String,
    args: Vec<String>,
    /// Where the arguments come from, for each setting's source.
    args_source: String,
    undecided: Option<String>,
}

fn server_name(word: &str) -> Option<&'static str> {
    SERVERS.iter().copied().find(|s| basename(word) == *s)
}

fn layout_of(tree: &FileTree, program: Option<&str>) -> &'static str {
    let exists = |p: &str| tree.lookup(p).ok().flatten().is_some();
    match program {
        Some(p) if p.starts_with("/opt/bitnami/") => "bitnami",
        Some(p) if p.starts_with("/usr/local/bin/") && exists("/usr/local/bin/docker-entrypoint.sh") => {
            "official"
        }
        _ if exists("/var/lib/dpkg/info/redis-server.list") || exists("/etc/redis/redis.conf") => "debian",
        _ => "other",
    }
}

fn locate(tree: &FileTree, env: &Env, entry: &Entrypoint) -> Option<Found> {
    let resolve = |name: &str| -> Option<String> {
        if name.starts_with('/') {
            return Some(name.to_string());
        }
        let path = env.get("PATH").unwrap_or(super::entrypoint::DEFAULT_PATH);
        path.split(':')
            .filter(|d| d.starts_with('/'))
            .map(|d| format!("{}/{name}", d.trim_end_matches('/')))
            .find(|p| tree.lookup(p).ok().flatten().is_some())
    };
    // The command the entrypoint was followed to.
    if let Some(server) = entry.args.first().and_then(|a| server_name(a)) {
        let program = resolve(&entry.args[0]);
        return Some(Found {
            server,
            layout: layout_of(tree, program.as_deref()),
            found_by: format!("the entrypoint runs {}", entry.args[0]),
            args: entry.args[1..].to_vec(),
            args_source: "the command line".into(),
            undecided: None,
        });
    }
    // The server named in Entrypoint/Cmd behind a script the entrypoint could not follow to
    // its end (the official image's docker-entrypoint.sh ends in `exec gosu redis "$0" "$@"`).
    if let Some(i) = entry.argv.iter().position(|a| server_name(a).is_some()) {
        let server = server_name(&entry.argv[i])?;
        let program = resolve(&entry.argv[i]);
        return Some(Found {
            server,
            layout: layout_of(tree, program.as_deref()),
            found_by: format!("the container's command runs {}", entry.argv[i]),
            args: entry.argv[i + 1..].to_vec(),
            args_source: "the command line".into(),
            undecided: None,
        });
    }
    // The official images' docker-entrypoint.sh puts `redis-server` before a first argument
    // that is an option or a `.conf` file.
    let first = entry.argv.first().map(|a| basename(a));
    if first == Some("docker-entrypoint.sh") {
        let rest = &entry.argv[1..];
        let options = rest
            .first()
            .is_some_and(|a| a.starts_with('-') || a.ends_with(".conf"));
        if options {
            if let Some(server) = SERVERS.iter().copied().find(|s| resolve(s).is_some()) {
                return Some(Found {
                    server,
                    layout: "official",
                    found_by: format!("docker-entrypoint.sh runs {server} with the command's arguments"),
                    args: rest.to_vec(),
                    args_source: "the command line".into(),
                    undecided: None,
                });
            }
        }
    }
    // Bitnami: its entrypoint and run scripts under /opt/bitnami/scripts/<server>/.
    for &(server, base, extra) in BITNAMI {
        let program = format!("{base}/bin/{server}");
        let scripts = format!("/opt/bitnami/scripts/{}/", basename(base));
        let runs_scripts = entry.argv.iter().any(|a| a.starts_with(&scripts))
            || entry
                .steps
                .iter()
                .filter_map(|s| s.path.as_deref())
                .any(|p| p.starts_with(&scripts));
        if !runs_scripts || tree.lookup(&program).ok().flatten().is_none() {
            continue;
        }
        let mut args = vec![format!("{base}/etc/{}.conf", basename(base))];
        args.extend(["--daemonize".to_string(), "no".to_string()]);
        let mut undecided = None;
        match env.var(extra) {
            Some(v) if env.undecided(extra).is_some() => {
                undecided = Some(format!(
                    "{extra} is set in a way memlint cannot work out ({})",
                    v.describe_origin()
                ));
            }
            _ => {}
        }
        if let Some(flags) = env.non_empty(extra) {
            args.extend(shell::split_words(flags, shell::SH));
        }
        // The words after the run script are passed on.
        if let Some(i) = entry
            .argv
            .iter()
            .position(|a| a.starts_with(&scripts) && a.ends_with("run.sh"))
        {
            args.extend(entry.argv[i + 1..].iter().cloned());
        }
        return Some(Found {
            server,
            layout: "bitnami",
            found_by: format!("Bitnami's scripts under {scripts} run {program}"),
            args,
            args_source: format!("Bitnami's run.sh (with {extra})"),
            undecided,
        });
    }
    None
}

/// The config file and the option words, as the server splits its arguments.
fn split_command_line(args: &[String]) -> (Option<&str>, &[String]) {
    match args.first() {
        Some(first) if first == "-" => (Some("-"), &args[1..]),
        Some(first) if !first.starts_with('-') => (Some(first.as_str()), &args[1..]),
        _ => (None, args),
    }
}

/// `--name word…` pairs of the command line, in order.
fn command_line_options(words: &[String]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for w in words {
        if let Some(name) = w.strip_prefix("--").filter(|n| !n.is_empty()) {
            out.push((name.to_ascii_lowercase(), Vec::new()));
        } else if w == "-" {
            continue;
        } else if let Some((_, values)) = out.last_mut() {
            // An empty argument (`--save ""` from an exec-form command) is the empty string.
            values.push(if w.is_empty() {
                "\"\"".to_string()
            } else {
                w.clone()
            });
        }
    }
    out
}

/// The settings read so far; the last one wins.
#[derive(Default)]
struct Settings {
    maxmemory: Option<RedisSetting>,
    policy: Option<RedisSetting>,
    save: Option<RedisSetting>,
    appendonly: Option<RedisSetting>,
}

impl Settings {
    fn set(&mut self, name: &str, value: String, source: String) {
        let slot = match name {
            "maxmemory" => &mut self.maxmemory,
            "maxmemory-policy" => &mut self.policy,
            "save" => &mut self.save,
            "appendonly" => &mut self.appendonly,
            _ => return,
        };
        *slot = Some(RedisSetting { value, source });
    }
}

/// Reads the settings of config file `path` (and the files it includes) into `settings`.
fn read_config(
    tree: &FileTree,
    path: &str,
    settings: &mut Settings,
    undecided: &mut Option<String>,
    depth: usize,
) {
    let content = if tree.keeps(path) {
        tree.contents(path)
    } else {
        tree.lookup(path)
            .ok()
            .flatten()
            .and_then(|id| tree.kept_content(id))
    };
    let Some(content) = content else {
        if tree.lookup(path).ok().flatten().is_some() {
            undecided.get_or_insert_with(|| format!("memlint did not keep the config file {path}"));
        } else {
            undecided.get_or_insert_with(|| {
                format!("the config file {path} is not in the image (mounted at run time?)")
            });
        }
        return;
    };
    if content.truncated {
        undecided
            .get_or_insert_with(|| format!("{path} is longer than memlint reads ({} KiB)", CONF_CAP >> 10));
    }
    let text = String::from_utf8_lossy(&content.bytes).into_owned();
    for (n, line) in text.lines().enumerate() {
        let words = split_args(line);
        let Some((name, values)) = words.split_first() else {
            continue;
        };
        if name.starts_with('#') {
            continue;
        }
        let name = name.to_ascii_lowercase();
        if name == "include" {
            match values.first() {
                Some(inc) if depth < MAX_INCLUDES && !inc.contains('*') => {
                    read_config(tree, &absolute("/", inc), settings, undecided, depth + 1)
                }
                Some(inc) => {
                    undecided.get_or_insert_with(|| {
                        format!(
                            "{path} line {} includes {inc}, which memlint does not follow",
                            n + 1
                        )
                    });
                }
                None => {}
            }
            continue;
        }
        let value = if values.len() == 1 && values[0].is_empty() {
            "\"\"".to_string()
        } else {
            values.join(" ")
        };
        settings.set(&name, value, format!("{path} line {}", n + 1));
    }
}

/// The words of a config line as Redis splits them (`sdssplitargs`): blanks between words,
/// double quotes with backslash escapes, single quotes. An empty quoted word is kept as "".
fn split_args(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.trim().chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut word = String::new();
        match c {
            '"' | '\'' => {
                chars.next();
                while let Some(d) = chars.next() {
                    if d == c {
                        break;
                    }
                    if d == '\\' && c == '"' {
                        if let Some(e) = chars.next() {
                            word.push(e);
                        }
                        continue;
                    }
                    word.push(d);
                }
            }
            _ => {
                while let Some(&d) = chars.peek() {
                    if d.is_whitespace() {
                        break;
                    }
                    word.push(d);
                    chars.next();
                }
            }
        }
        out.push(word);
    }
    out
}

/// A Redis size (`memtoull`): digits with an optional `k`, `kb`, `m`, `mb`, `g` or `gb` in
/// either case; `k` is 1000, `kb` 1024. `None` for what Redis refuses.
pub(crate) fn memory_size(text: &str) -> Option<u64> {
    let t = text.trim().trim_matches('"').to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    if digits.is_empty() {
        return None;
    }
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(mul)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    #[test]
    fn sizes_as_redis_reads_them() {
        assert_eq!(memory_size("160mb"), Some(160 << 20));
        assert_eq!(memory_size("1k"), Some(1000));
        assert_eq!(memory_size("1KB"), Some(1024));
        assert_eq!(memory_size("2gb"), Some(2 << 30));
        assert_eq!(memory_size("1048576"), Some(1 << 20));
        assert_eq!(memory_size("1.5gb"), None);
        assert_eq!(memory_size("lots"), None);
        assert_eq!(memory_size("99999999999999gb"), None);
    }

    #[test]
    fn config_lines_split_as_redis_does() {
        assert_eq!(split_args("save \"\""), vec!["save", ""]);
        assert_eq!(
            split_args("  maxmemory   100mb # x"),
            vec!["maxmemory", "100mb", "#", "x"]
        );
        assert_eq!(
            split_args("dir '/var/lib/redis x'"),
            vec!["dir", "/var/lib/redis x"]
        );
    }

    fn debian() -> TestImage {
        TestImage::new()
            .glibc()
            .program("/usr/bin/redis-check-rdb")
            .symlink("/usr/bin/redis-server", "redis-check-rdb")
            .file(
                "/etc/redis/redis.conf",
                "daemonize yes\n# maxmemory <bytes>\nappendonly no\n# save \"\"\n",
            )
    }

    #[test]
    fn the_config_file_then_the_command_line_last_wins() {
        let f = debian()
            .entrypoint(&["redis-server"])
            .cmd(&["/etc/redis/redis.conf", "--maxmemory", "100mb", "--save", ""])
            .facts();
        let r = f.redis.unwrap_or_else(|| panic!("no redis"));
        assert_eq!(r.server, "redis-server");
        assert_eq!(r.layout, "debian");
        assert_eq!(r.config_file.as_deref(), Some("/etc/redis/redis.conf"));
        assert_eq!(r.maxmemory_bytes, Some(100 << 20));
        assert_eq!(
            r.appendonly.as_ref().map(|a| a.source.as_str()),
            Some("/etc/redis/redis.conf line 3")
        );
        assert!(!r.persists(), "{r:?}");
        assert!(r.undecided.is_none(), "{r:?}");
        // No save line: Redis's default schedule persists.
        let f = debian().cmd(&["redis-server"]).facts();
        let r = f.redis.unwrap_or_else(|| panic!("no redis"));
        assert!(r.maxmemory.is_none() && r.persists() && r.config_file.is_none());
    }

    #[test]
    fn a_config_file_that_is_not_in_the_image_is_undecided() {
        let f = debian().cmd(&["redis-server", "/srv/redis.conf"]).facts();
        let r = f.redis.unwrap_or_else(|| panic!("no redis"));
        assert!(r.undecided.is_some_and(|w| w.contains("/srv/redis.conf")));
        // Nothing else is Redis.
        assert!(TestImage::new().glibc().cmd(&["sh"]).facts().redis.is_none());
    }
}
