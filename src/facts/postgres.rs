//! PostgreSQL: whether the image runs its server, and the few settings that decide how it uses
//! shared memory: `dynamic_shared_memory_type` (parallel queries' segments in `/dev/shm` when
//! `posix`, the default on Linux), `max_parallel_workers_per_gather` (0: no parallel query) and
//! `huge_pages` (`try` by default).
//!
//! - Server: the `postgres` binary of Debian's packages and the official Debian-based images
//!   (`/usr/lib/postgresql/MAJOR/bin/postgres`), of the official Alpine images
//!   (`/usr/local/bin/postgres`) and of Bitnami's (`/opt/bitnami/postgresql/bin/postgres`).
//! - Settings, the last one read winning as the server reads them: the configuration file
//!   first (the one `-c config_file=PATH` names; else Debian's
//!   `/etc/postgresql/MAJOR/main/postgresql.conf`, Bitnami's
//!   `/opt/bitnami/postgresql/conf/postgresql.conf`, a `postgresql.conf` already in `PGDATA`,
//!   or the `postgresql.conf.sample` that `initdb` copies into a new data folder), with the
//!   `conf.d` folder its `include_dir` names; then the command line's `-c NAME=VALUE` and
//!   `--NAME=VALUE` (and Bitnami's `POSTGRESQL_EXTRA_FLAGS`), which win over the file.
//!
//! `ALTER SYSTEM` (`postgresql.auto.conf`) and a configuration mounted at run time are not in the
//! image: [`PostgresFacts::undecided`] says when an `include` the image holds is not followed.

use super::command::config_argv;
use super::entrypoint::Entrypoint;
use super::Env;
use crate::tree::{FileTree, Interests, NodeKind};
use oci_spec::image::ImageConfiguration;
use serde::Serialize;

/// Bytes kept of a configuration file: the sample is about 30 KiB.
const CONFIG_CAP: u64 = 128 * 1024;
/// `conf.d` files read at most.
const MAX_CONF_D: usize = 64;

const DEBIAN_BIN: &str = "/usr/lib/postgresql";
const ALPINE_BIN: &str = "/usr/local/bin/postgres";
const BITNAMI_BIN: &str = "/opt/bitnami/postgresql/bin/postgres";
const BITNAMI_CONF: &str = "/opt/bitnami/postgresql/conf/postgresql.conf";
/// The official images' `PGDATA`.
const DEFAULT_PGDATA: &str = "/var/lib/postgresql/data";

/// The configuration files read whatever the config says.
const CONFIGS: &[&str] = &[
    "/etc/postgresql/*/main/postgresql.conf",
    "/etc/postgresql/*/main/conf.d/*.conf",
    BITNAMI_CONF,
    "/opt/bitnami/postgresql/conf/conf.d/*.conf",
    "/var/lib/postgresql/data/postgresql.conf",
    "/var/lib/postgresql/data/conf.d/*.conf",
    "/usr/share/postgresql/postgresql.conf.sample",
    "/usr/share/postgresql/*/postgresql.conf.sample",
    "/usr/local/share/postgresql/postgresql.conf.sample",
];

/// The settings memlint reads.
pub(crate) const DYNAMIC_SHARED_MEMORY_TYPE: &str = "dynamic_shared_memory_type";
pub(crate) const MAX_PARALLEL_WORKERS_PER_GATHER: &str = "max_parallel_workers_per_gather";
pub(crate) const HUGE_PAGES: &str = "huge_pages";
const READ: [&str; 3] = [
    DYNAMIC_SHARED_MEMORY_TYPE,
    MAX_PARALLEL_WORKERS_PER_GATHER,
    HUGE_PAGES,
];

/// One setting as the server would read it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct PgSetting {
    pub(crate) name: String,
    /// Unquoted, lower case.
    pub(crate) value: String,
    /// `/etc/postgresql/15/main/postgresql.conf line 130`, `the command line (-c …)`.
    pub(crate) source: String,
    /// The configuration file, when it is one (for evidence that names the image path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) path: Option<String>,
}

/// A PostgreSQL server in the image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct PostgresFacts {
    /// The `postgres` binary.
    pub(crate) binary: String,
    /// `debian`, `alpine` or `bitnami`.
    pub(crate) layout: &'static str,
    /// The major version, when its folder names it (`15`).
    pub(crate) major: Option<String>,
    /// The configuration file read, when the image has one.
    pub(crate) config: Option<String>,
    /// The settings memlint reads, in the order the server reads them (the last one wins).
    pub(crate) settings: Vec<PgSetting>,
    /// Why a setting may be set where memlint does not look, when it may.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) undecided: Option<String>,
}

impl PostgresFacts {
    /// The setting in effect, when the image sets it.
    pub(crate) fn setting(&self, name: &str) -> Option<&PgSetting> {
        self.settings.iter().rev().find(|s| s.name == name)
    }
}

/// What [`derive`] reads whatever the config says: the usual configuration files.
pub(crate) fn interests() -> Interests {
    CONFIGS
        .iter()
        .fold(Interests::default(), |i, p| i.keep(p, CONFIG_CAP))
}

/// What the config adds: the file a `-c config_file=PATH` names, and the `postgresql.conf` of
/// the `PGDATA` it sets.
pub(crate) fn interests_for(config: &ImageConfiguration) -> Interests {
    let Some(c) = config.config().as_ref() else {
        return Interests::default();
    };
    let argv = config_argv(config);
    let mut out = Interests::default();
    let plain = |p: &str| {
        p.starts_with('/')
            && !p.contains(['*', '?', '[', ']', '{', '}', '\\'])
            && !p.split('/').any(|c| c == "..")
    };
    for (name, value) in command_line(&argv) {
        if name == "config_file" && plain(&value) {
            out = out.keep(&value, CONFIG_CAP);
        }
    }
    let pgdata = c
        .env()
        .iter()
        .flatten()
        .rev()
        .find_map(|e| e.strip_prefix("PGDATA="));
    if let Some(d) = pgdata.filter(|d| plain(d)) {
        let d = d.trim_end_matches('/');
        out = out
            .keep(&format!("{d}/postgresql.conf"), CONFIG_CAP)
            .keep(&format!("{d}/conf.d/*.conf"), CONFIG_CAP);
    }
    out
}

/// The server, when the image holds one.
pub(crate) fn derive(tree: &FileTree, env: &Env, entry: &Entrypoint) -> Option<PostgresFacts> {
    let (binary, layout, major) = find_binary(tree)?;
    let mut facts = PostgresFacts {
        binary,
        layout,
        major: major.clone(),
        config: None,
        settings: Vec::new(),
        undecided: None,
    };
    let argv: Vec<String> = entry
        .argv
        .iter()
        .chain(entry.steps.iter().flat_map(|s| s.argv.iter()))
        .cloned()
        .collect();
    let mut from_command_line: Vec<(String, String)> = command_line(&argv);
    let extra_flags = env.get("POSTGRESQL_EXTRA_FLAGS");
    if layout == "bitnami" {
        if let Some(flags) = extra_flags {
            let words: Vec<String> = flags.split_whitespace().map(str::to_string).collect();
            from_command_line.extend(command_line(&words));
        }
    }
    let config = match from_command_line.iter().rev().find(|(n, _)| n == "config_file") {
        Some((_, path)) => Some(path.clone()),
        None => default_config(tree, layout, major.as_deref(), env),
    };
    if let Some(path) = &config {
        match tree.kept_text(path) {
            Some(body) => {
                facts.config = Some(path.clone());
                read_config(tree, path, &body, &mut facts);
            }
            None => {
                facts.undecided = Some(format!(
                    "the configuration file {path} is not in the image (mounted at run time?)"
                ))
            }
        }
    }
    for (name, value) in from_command_line {
        if READ.contains(&name.as_str()) {
            facts.settings.push(PgSetting {
                source: format!("the command line (-c {name}={value})"),
                name,
                value,
                path: None,
            });
        }
    }
    Some(facts)
}

/// The `postgres` binary, its layout and its major version.
fn find_binary(tree: &FileTree) -> Option<(String, &'static str, Option<String>)> {
    if let Some(NodeKind::Dir(majors)) = tree
        .lookup(DEBIAN_BIN)
        .ok()
        .flatten()
        .map(|id| tree.node(id).kind)
    {
        let mut names: Vec<&str> = majors.keys().copied().collect();
        // The newest major first: `15` after `9.6` by number.
        names.sort_by_key(|n| {
            let mut parts = n.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
            (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
        });
        for major in names.into_iter().rev() {
            let path = format!("{DEBIAN_BIN}/{major}/bin/postgres");
            if tree.is_file_at(&path) {
                return Some((path, "debian", Some(major.to_string())));
            }
        }
    }
    if tree.is_file_at(BITNAMI_BIN) {
        return Some((BITNAMI_BIN.to_string(), "bitnami", None));
    }
    if tree.is_file_at(ALPINE_BIN) {
        return Some((ALPINE_BIN.to_string(), "alpine", None));
    }
    None
}

/// The configuration file the server reads when no `config_file` is given.
fn default_config(tree: &FileTree, layout: &str, major: Option<&str>, env: &Env) -> Option<String> {
    let pgdata = env
        .non_empty("PGDATA")
        .unwrap_or(DEFAULT_PGDATA)
        .trim_end_matches('/');
    let in_data = format!("{pgdata}/postgresql.conf");
    let candidates: Vec<String> = match layout {
        "bitnami" => vec![BITNAMI_CONF.to_string()],
        "debian" => {
            let major = major.unwrap_or("");
            vec![
                format!("/etc/postgresql/{major}/main/postgresql.conf"),
                in_data,
                // The official images copy (and edit) the sample here; initdb copies it into
                // a new data folder.
                "/usr/share/postgresql/postgresql.conf.sample".to_string(),
                format!("/usr/share/postgresql/{major}/postgresql.conf.sample"),
            ]
        }
        _ => vec![
            in_data,
            "/usr/local/share/postgresql/postgresql.conf.sample".to_string(),
        ],
    };
    candidates.into_iter().find(|p| tree.is_file_at(p))
}

/// The settings of a configuration file, with the `*.conf` files of the folder its
/// `include_dir` names (read in name order, as the server does).
fn read_config(tree: &FileTree, path: &str, body: &str, facts: &mut PostgresFacts) {
    let folder = path
        .rsplit_once('/')
        .map_or("/", |(d, _)| if d.is_empty() { "/" } else { d });
    for (line_no, name, value) in entries(body) {
        match name.as_str() {
            "include_dir" => {
                let dir = if value.starts_with('/') {
                    value.clone()
                } else {
                    format!("{folder}/{value}")
                };
                read_conf_d(tree, &dir, facts);
            }
            "include" | "include_if_exists" => {
                let file = if value.starts_with('/') {
                    value.clone()
                } else {
                    format!("{folder}/{value}")
                };
                match tree.kept_text(&file) {
                    Some(b) => push_settings(&file, &b, facts),
                    None if name == "include" || tree.is_file_at(&file) => {
                        facts.undecided = Some(format!(
                            "{path} line {line_no} includes {file}, which memlint does not read"
                        ))
                    }
                    None => {}
                }
            }
            n if READ.contains(&n) => facts.settings.push(PgSetting {
                source: format!("{path} line {line_no}"),
                name,
                value,
                path: Some(path.to_string()),
            }),
            _ => {}
        }
    }
}

fn push_settings(path: &str, body: &str, facts: &mut PostgresFacts) {
    for (line_no, name, value) in entries(body) {
        if READ.contains(&name.as_str()) {
            facts.settings.push(PgSetting {
                source: format!("{path} line {line_no}"),
                name,
                value,
                path: Some(path.to_string()),
            });
        }
    }
}

fn read_conf_d(tree: &FileTree, dir: &str, facts: &mut PostgresFacts) {
    let Some(NodeKind::Dir(children)) = tree.lookup(dir).ok().flatten().map(|id| tree.node(id).kind) else {
        return;
    };
    let mut names: Vec<&str> = children
        .keys()
        .copied()
        .filter(|n| n.ends_with(".conf") && !n.starts_with('.'))
        .collect();
    names.sort_unstable();
    for name in names.into_iter().take(MAX_CONF_D) {
        let file = format!("{}/{name}", dir.trim_end_matches('/'));
        match tree.kept_text(&file) {
            Some(body) => push_settings(&file, &body, facts),
            None => {
                facts.undecided = Some(format!(
                    "{file} (in the include_dir {dir}) is not a file memlint reads"
                ))
            }
        }
    }
}

/// The `name = value` lines of a configuration file (the `=` is optional, `#` starts a
/// comment, a value may be single-quoted with `''` or `\'` inside), with their line numbers;
/// names in lower case as the server compares them.
pub(crate) fn entries(body: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    for (i, raw) in body.lines().enumerate() {
        let line = raw.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let end = line
            .find(|c: char| c.is_whitespace() || c == '=')
            .unwrap_or(line.len());
        let name = line[..end].to_ascii_lowercase();
        let rest = line[end..].trim_start();
        let rest = rest.strip_prefix('=').unwrap_or(rest).trim_start();
        let value = if let Some(q) = rest.strip_prefix('\'') {
            let mut v = String::new();
            let mut chars = q.chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        if let Some(n) = chars.next() {
                            v.push(n);
                        }
                    }
                    '\'' if chars.peek() == Some(&'\'') => {
                        chars.next();
                        v.push('\'');
                    }
                    '\'' => break,
                    c => v.push(c),
                }
            }
            v
        } else {
            rest.split(|c: char| c.is_whitespace() || c == '#')
                .next()
                .unwrap_or("")
                .to_string()
        };
        if !name.is_empty() {
            out.push((i + 1, name, value.to_ascii_lowercase()));
        }
    }
    out
}

/// The `-c NAME=VALUE`, `-cNAME=VALUE` and `--NAME=VALUE` options of a command line, names in
/// lower case with `-` read as `_`, as the server reads them.
fn command_line(argv: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut words = argv.iter();
    while let Some(w) = words.next() {
        let setting = if w == "-c" {
            words.next().map(String::as_str)
        } else if let Some(s) = w.strip_prefix("-c") {
            Some(s)
        } else if let Some(s) = w.strip_prefix("--") {
            s.contains('=').then_some(s)
        } else {
            None
        };
        if let Some((name, value)) = setting.and_then(|s| s.split_once('=')) {
            let value = value.trim().trim_matches('\'');
            out.push((
                name.trim().to_ascii_lowercase().replace('-', "_"),
                value.to_ascii_lowercase(),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    fn pg(image: TestImage) -> Option<PostgresFacts> {
        image.facts().postgres
    }

    fn debian() -> TestImage {
        TestImage::new()
            .glibc()
            .program("/usr/lib/postgresql/15/bin/postgres")
            .cmd(&["/usr/lib/postgresql/15/bin/postgres"])
    }

    #[test]
    fn configuration_lines_as_the_server_reads_them() {
        let e = entries(
            "# comment\nhuge_pages = off\t# off, on or try\nDynamic_Shared_Memory_Type 'MMAP'\nx = 'it''s # not a comment'\n  #max_parallel_workers_per_gather = 0\n",
        );
        assert_eq!(
            e,
            [
                (2, "huge_pages".into(), "off".into()),
                (3, "dynamic_shared_memory_type".into(), "mmap".into()),
                (4, "x".into(), "it's # not a comment".into()),
            ]
        );
        let argv: Vec<String> = [
            "postgres",
            "-c",
            "huge_pages=off",
            "-cmax_parallel_workers_per_gather=0",
            "--dynamic-shared-memory-type=sysv",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            command_line(&argv),
            [
                ("huge_pages".into(), "off".into()),
                ("max_parallel_workers_per_gather".into(), "0".into()),
                ("dynamic_shared_memory_type".into(), "sysv".into()),
            ]
        );
    }

    #[test]
    fn debian_layout_config_and_conf_d_then_the_command_line() {
        let p = pg(debian()
            .file(
                "/etc/postgresql/15/main/postgresql.conf",
                "include_dir = 'conf.d'\nhuge_pages = try\n",
            )
            .file(
                "/etc/postgresql/15/main/conf.d/10-shm.conf",
                "dynamic_shared_memory_type = mmap\n",
            ))
        .unwrap_or_else(|| panic!("no postgres"));
        assert_eq!((p.layout, p.major.as_deref()), ("debian", Some("15")));
        assert_eq!(
            p.config.as_deref(),
            Some("/etc/postgresql/15/main/postgresql.conf")
        );
        let dsm = p
            .setting(DYNAMIC_SHARED_MEMORY_TYPE)
            .map(|s| (s.value.as_str(), s.source.as_str()));
        assert_eq!(
            dsm,
            Some(("mmap", "/etc/postgresql/15/main/conf.d/10-shm.conf line 1"))
        );
        assert_eq!(p.setting(HUGE_PAGES).map(|s| s.value.as_str()), Some("try"));
        // The command line wins.
        let p = pg(debian()
            .file("/etc/postgresql/15/main/postgresql.conf", "huge_pages = try\n")
            .cmd(&["/usr/lib/postgresql/15/bin/postgres", "-c", "huge_pages=off"]))
        .unwrap_or_else(|| panic!("no postgres"));
        assert_eq!(p.setting(HUGE_PAGES).map(|s| s.value.as_str()), Some("off"));
    }

    #[test]
    fn the_sample_a_config_file_argument_and_bitnami() {
        let p = pg(debian().file(
            "/usr/share/postgresql/15/postgresql.conf.sample",
            "#huge_pages = try\n#dynamic_shared_memory_type = posix\n",
        ))
        .unwrap_or_else(|| panic!("no postgres"));
        assert_eq!(
            p.config.as_deref(),
            Some("/usr/share/postgresql/15/postgresql.conf.sample")
        );
        assert!(p.settings.is_empty(), "{p:?}");
        // A config file the image does not hold: undecided.
        let p = pg(debian().cmd(&["postgres", "-c", "config_file=/etc/pg/custom.conf"]))
            .unwrap_or_else(|| panic!("no postgres"));
        assert!(
            p.undecided
                .as_deref()
                .is_some_and(|u| u.contains("/etc/pg/custom.conf")),
            "{p:?}"
        );
        let p = pg(TestImage::new()
            .glibc()
            .program(BITNAMI_BIN)
            .file(BITNAMI_CONF, "huge_pages = off\n")
            .env(&["POSTGRESQL_EXTRA_FLAGS=-c max_parallel_workers_per_gather=0"]))
        .unwrap_or_else(|| panic!("no postgres"));
        assert_eq!(p.layout, "bitnami");
        assert_eq!(p.setting(HUGE_PAGES).map(|s| s.value.as_str()), Some("off"));
        assert_eq!(
            p.setting(MAX_PARALLEL_WORKERS_PER_GATHER)
                .map(|s| s.value.as_str()),
            Some("0")
        );
        assert!(pg(TestImage::new().glibc()).is_none());
    }
}
