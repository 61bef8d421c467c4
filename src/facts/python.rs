//! CPython: its version, the distributions installed in its `site-packages` and
//! `dist-packages` folders, the server the entrypoint runs (gunicorn, uvicorn, celery, dask)
//! and how many threads or processes that server runs native code from, and `PYTHONMALLOC`.
//!
//! - Version: `ENV PYTHON_VERSION` (the official images, built from source), else the
//!   `python3.X` (or `python3.X-minimal`) dpkg package, else the interpreter's file name
//!   (`python3.X` in a PATH folder), else `libpython3.X.so`.
//! - Distributions: `NAME-VERSION.dist-info/METADATA` (the `Name:` and `Version:` headers of
//!   the core metadata, which come first; only [`METADATA_CAP`] bytes of each are kept, so an
//!   image with thousands of distributions keeps a few MiB at most), `*.egg-info/PKG-INFO` or
//!   an `*.egg-info` file; when the headers are not among the bytes kept, the folder's name.
//! - Server: from the entrypoint's argument vectors (`gunicorn …`, a console script run by its
//!   `#!` interpreter, `python -m uvicorn …`), its flags, `GUNICORN_CMD_ARGS` and
//!   `WEB_CONCURRENCY`.

use super::command::config_argv;
use super::entrypoint::{Entrypoint, DEFAULT_PATH};
use super::os::OsFacts;
use super::Env;
use crate::shell;
use crate::tree::{FileTree, Interests, NodeId, NodeKind};
use oci_spec::image::ImageConfiguration;
use serde::Serialize;

/// The variable Celery's worker reads `--concurrency` from (click's `auto_envvar_prefix`).
pub const CELERY_CONCURRENCY_VAR: &str = "CELERY_WORKER_CONCURRENCY";

/// Bytes kept of each METADATA or PKG-INFO file: its first headers.
pub const METADATA_CAP: u64 = 1024;
/// Distributions listed at most.
const MAX_PACKAGES: usize = 10_000;

/// One installed distribution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PythonPackage {
    /// As its metadata spells it (`Pillow`); compare through [`normalize`].
    pub name: String,
    pub version: Option<String>,
    /// Its `.dist-info` or `.egg-info`.
    pub path: String,
}

/// How a server runs the application's (native) code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Concurrency {
    /// Several threads of one process (gunicorn's gthread workers, uvicorn's thread pool,
    /// dask's worker threads, celery's thread pool).
    Threads,
    /// Several worker processes.
    Processes,
    /// One thread of one process.
    Single,
    /// Set where memlint does not look (a config file it does not evaluate).
    Unknown,
}

impl Concurrency {
    pub fn as_str(self) -> &'static str {
        match self {
            Concurrency::Threads => "threads",
            Concurrency::Processes => "processes",
            Concurrency::Single => "single",
            Concurrency::Unknown => "unknown",
        }
    }
}

/// A Python server the entrypoint runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PythonServer {
    /// `gunicorn`, `uvicorn`, `celery` or `dask`.
    pub name: &'static str,
    pub concurrency: Concurrency,
    /// The command and settings that say so.
    pub evidence: String,
    /// How its worker count follows the node's CPU count, when it does (read by
    /// `worker-count-host-cpus`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers_from_cpus: Option<CpuSizedWorkers>,
}

/// A worker count the server takes from the CPUs it sees: in a container, the node's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct CpuSizedWorkers {
    /// How, in words.
    pub how: String,
    /// The file that computes the count (a gunicorn config), and the line that assigns it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Environment variables that give the count instead when the image sets them (a config
    /// that reads `WEB_CONCURRENCY`; Celery's `CELERY_WORKER_CONCURRENCY`).
    pub overridden_by: Vec<String>,
    /// Files that may set the count in a way memlint does not evaluate (Celery or Django
    /// settings naming `worker_concurrency`), with the line.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub maybe_set_in: Vec<String>,
    /// The server's command as written (`` `gunicorn -c gunicorn.conf.py app:app` ``).
    #[serde(skip)]
    pub command: String,
    /// What the count is for the process the container runs: taken from the CPUs, or given by
    /// a variable the image or manifest sets, or undecided.
    #[serde(skip)]
    pub effective: WorkerCount,
}

/// A worker count that would follow the CPU count, as the container's environment settles it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum WorkerCount {
    /// Nothing overrides it: one worker per CPU the server sees.
    #[default]
    FromCpus,
    /// A variable the server (or its config) reads for the count is set.
    SetBy { variable: String, value: String },
    /// A script sets an overriding variable in a way memlint cannot work out.
    Undecided(String),
}

/// How the environment settles a CPU-sized worker count of `server`.
fn worker_count(server: &str, cpu: &CpuSizedWorkers, env: &Env) -> WorkerCount {
    if let Some((variable, value)) = cpu
        .overridden_by
        .iter()
        .find_map(|v| env.non_empty(v).map(|x| (v.clone(), x.to_string())))
    {
        return WorkerCount::SetBy { variable, value };
    }
    // GUNICORN_CMD_ARGS overrides a config's workers: one a script computes may.
    if server == "gunicorn" {
        if let Some(why) = env.first_undecided(&GUNICORN_VARIABLES[..1]) {
            return WorkerCount::Undecided(why);
        }
    }
    match cpu.overridden_by.iter().find(|v| env.undecided(v).is_some()) {
        Some(v) => WorkerCount::Undecided(env.entry(v).unwrap_or_else(|| format!("{v} is undecided"))),
        None => WorkerCount::FromCpus,
    }
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct PythonFacts {
    /// `3.11.2`, or `3.11` when only the interpreter's name says it.
    pub version: Option<String>,
    /// Where the version comes from.
    pub version_source: Option<String>,
    /// The `python3.X` interpreters in PATH folders (links followed).
    pub interpreters: Vec<String>,
    pub packages: Vec<PythonPackage>,
    pub servers: Vec<PythonServer>,
    /// `PYTHONMALLOC` as set.
    pub pythonmalloc: Option<String>,
}

impl PythonFacts {
    /// The installed distribution called `name` (compared as PEP 503 normalises names).
    pub fn package(&self, name: &str) -> Option<&PythonPackage> {
        let want = normalize(name);
        self.packages.iter().find(|p| normalize(&p.name) == want)
    }
}

/// PEP 503: lower case, runs of `-`, `_` and `.` become one `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.extend(c.to_lowercase());
        }
    }
    out
}

const PACKAGE_DIRS: [&str; 2] = ["site-packages", "dist-packages"];

/// gunicorn config files by the names their users give them: `gunicorn.conf.py` (read by
/// default from the working folder) and `gunicorn_conf.py` (the uvicorn-gunicorn images').
const GUNICORN_CONFIGS: [&str; 2] = ["gunicorn.conf.py", "gunicorn_conf.py"];
/// Files where a Celery app or Django project may set `worker_concurrency`.
const CELERY_SETTINGS: [&str; 4] = [
    "**/celeryconfig.py",
    "**/celery.py",
    "**/settings.py",
    "**/settings/*.py",
];
/// Bytes kept of each gunicorn config.
const CONFIG_CAP: u64 = 64 * 1024;
/// Bytes kept of each Celery or Django settings file: matches in installed packages are kept
/// too (a pattern cannot leave them out) and only thrown away when read.
const SETTINGS_CAP: u64 = 16 * 1024;

/// What [`derive`] reads: the head of each distribution's metadata, gunicorn configs and
/// Celery settings.
pub fn interests() -> Interests {
    let i = PACKAGE_DIRS.iter().fold(Interests::default(), |i, d| {
        i.keep(&format!("**/{d}/*.dist-info/METADATA"), METADATA_CAP)
            .keep(&format!("**/{d}/*.egg-info/PKG-INFO"), METADATA_CAP)
            .keep(&format!("**/{d}/*.egg-info"), METADATA_CAP)
    });
    let i = GUNICORN_CONFIGS
        .iter()
        .fold(i, |i, n| i.keep(&format!("**/{n}"), CONFIG_CAP));
    CELERY_SETTINGS.iter().fold(i, |i, p| i.keep(p, SETTINGS_CAP))
}

/// What the config adds: the file a `gunicorn -c FILE` in its command names.
pub fn interests_for(config: &ImageConfiguration) -> Interests {
    let Some(c) = config.config().as_ref() else {
        return Interests::default();
    };
    let argv = config_argv(config);
    let working_dir = c.working_dir().as_deref().unwrap_or("/");
    // Only gunicorn's own arguments: `sh -c …`, `python -c …` and `celery … -c 4` name no file.
    let Some(at) = argv.iter().position(|w| base(w) == "gunicorn") else {
        return Interests::default();
    };
    match gunicorn_config_path(&argv[at + 1..], working_dir) {
        // The path becomes a keep pattern: a value from the image that would read as a glob
        // (or climb out of a folder) is not followed.
        Some(path)
            if !path.contains(['*', '?', '[', ']', '{', '}', '\\'])
                && !path.split('/').any(|c| c == "..") =>
        {
            Interests::default().keep(&path, CONFIG_CAP)
        }
        _ => Interests::default(),
    }
}

/// The file `-c`/`--config` names in `args` (a `file:` prefix taken off, relative to the
/// working folder); `None` for none or a `python:module`.
fn gunicorn_config_path(args: &[String], working_dir: &str) -> Option<String> {
    let value = flag_value(args, &["-c", "--config"])?;
    if value.starts_with("python:") {
        return None;
    }
    let value = value.strip_prefix("file:").unwrap_or(&value);
    Some(if value.starts_with('/') {
        value.to_string()
    } else {
        format!(
            "{}/{}",
            working_dir.trim_end_matches('/'),
            value.trim_start_matches("./")
        )
    })
}

/// The environment this module reads, in one place.
struct EnvInputs<'a> {
    /// The whole environment, for the variables a gunicorn config reads.
    env: &'a Env,
    path: &'a str,
    python_version: Option<&'a str>,
    pythonmalloc: Option<&'a str>,
    gunicorn_cmd_args: Option<&'a str>,
    web_concurrency: Option<&'a str>,
    celery_worker_concurrency: Option<&'a str>,
    celery_worker_pool: Option<&'a str>,
    celery_worker_autoscale: Option<&'a str>,
}

/// The variables gunicorn reads its workers and threads from (`GUNICORN_CMD_ARGS` over a
/// config, `WEB_CONCURRENCY` as the default of `workers`).
pub const GUNICORN_VARIABLES: &[&str] = &["GUNICORN_CMD_ARGS", "WEB_CONCURRENCY"];

fn env_inputs(env: &Env) -> EnvInputs<'_> {
    EnvInputs {
        env,
        path: env.get("PATH").unwrap_or(DEFAULT_PATH),
        python_version: env.non_empty("PYTHON_VERSION"),
        pythonmalloc: env.non_empty("PYTHONMALLOC"),
        gunicorn_cmd_args: env.non_empty(GUNICORN_VARIABLES[0]),
        web_concurrency: env.non_empty(GUNICORN_VARIABLES[1]),
        // 0 is Celery's "one per CPU", as if unset.
        celery_worker_concurrency: env.non_empty(CELERY_CONCURRENCY_VAR).filter(|v| v.trim() != "0"),
        celery_worker_pool: env.non_empty("CELERY_WORKER_POOL"),
        celery_worker_autoscale: env.non_empty("CELERY_WORKER_AUTOSCALE"),
    }
}

/// CPython's facts, or `None` when the image holds no interpreter, `libpython` nor installed
/// distribution.
pub fn derive(tree: &FileTree, env: &Env, os: &OsFacts, entry: &Entrypoint) -> Option<PythonFacts> {
    let inputs = env_inputs(env);
    let mut f = PythonFacts {
        pythonmalloc: inputs.pythonmalloc.map(str::to_string),
        ..PythonFacts::default()
    };
    let mut minors: Vec<(String, String)> = Vec::new();
    for dir in inputs
        .path
        .split(':')
        .filter(|d| d.starts_with('/'))
        .chain(["/usr/local/bin", "/usr/bin"])
    {
        let Some(dir_id) = tree.lookup(dir).ok().flatten() else {
            continue;
        };
        for (name, _) in children(tree, dir_id) {
            let Some(minor) = interpreter_minor(&name) else {
                continue;
            };
            let path = format!("{}/{name}", dir.trim_end_matches('/'));
            let Some(id) = tree.lookup(&path).ok().flatten() else {
                continue;
            };
            let real = tree.path_of(id);
            if tree.node(id).is_file() && !f.interpreters.contains(&real) {
                f.interpreters.push(real.clone());
                minors.push((minor, real));
            }
        }
    }
    let mut libpython: Option<(String, String)> = None;
    let mut package_dirs: Vec<NodeId> = Vec::new();
    for id in tree.walk() {
        let node = tree.node(id);
        let name = node.name();
        if node.is_dir() && PACKAGE_DIRS.contains(&name) {
            package_dirs.push(id);
        } else if libpython.is_none() && name.starts_with("libpython3.") && name.contains(".so") {
            let minor = name["libpython".len()..].split(".so").next().unwrap_or("");
            let minor = minor.trim_end_matches(['d', 'm']);
            if is_minor(minor) {
                libpython = Some((minor.to_string(), tree.path_of(id)));
            }
        }
    }
    for dir in package_dirs {
        read_packages(tree, dir, &mut f.packages);
    }
    f.packages.sort_by(|a, b| a.path.cmp(&b.path));
    if minors.is_empty() && libpython.is_none() && f.packages.is_empty() {
        return None;
    }
    (f.version, f.version_source) = version(&inputs, os, &minors, libpython.as_ref());
    f.servers = servers(&inputs, tree, entry);
    // Celery 4 reads no `CELERY_WORKER_*` variables (its CLI took click's env prefix in 5.0).
    let celery_4 = f
        .package("celery")
        .and_then(|p| p.version.as_deref())
        .and_then(|v| v.split('.').next()?.parse::<u32>().ok())
        .is_some_and(|major| major < 5);
    if celery_4 {
        for s in f.servers.iter_mut().filter(|s| s.name == "celery") {
            if let Some(w) = &mut s.workers_from_cpus {
                w.overridden_by.clear();
            }
        }
    }
    for s in &mut f.servers {
        if let Some(w) = &mut s.workers_from_cpus {
            w.effective = worker_count(s.name, w, env);
        }
    }
    Some(f)
}

/// `3.11` for `python3.11`.
fn interpreter_minor(name: &str) -> Option<String> {
    let v = name.strip_prefix("python")?;
    is_minor(v).then(|| v.to_string())
}

fn is_minor(v: &str) -> bool {
    match v.split_once('.') {
        Some((major, minor)) => {
            major == "3" && !minor.is_empty() && minor.len() <= 3 && minor.bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    }
}

fn version(
    inputs: &EnvInputs,
    os: &OsFacts,
    minors: &[(String, String)],
    libpython: Option<&(String, String)>,
) -> (Option<String>, Option<String>) {
    let known: Vec<&str> = minors
        .iter()
        .map(|(m, _)| m.as_str())
        .chain(libpython.map(|(m, _)| m.as_str()))
        .collect();
    let fits = |v: &str| known.iter().any(|m| v == *m || v.starts_with(&format!("{m}.")));
    // The official images' ENV, when an interpreter of that version is there.
    if let Some(v) = inputs.python_version.filter(|v| fits(v)) {
        return (Some(v.to_string()), Some("ENV PYTHON_VERSION".into()));
    }
    for m in &known {
        for pkg in [format!("python{m}"), format!("python{m}-minimal")] {
            if let Some(p) = os.package(&pkg) {
                let upstream = p.version.split(['-', '+', '~']).next().unwrap_or("");
                let upstream = upstream.rsplit(':').next().unwrap_or(upstream);
                if fits(upstream) {
                    return (
                        Some(upstream.to_string()),
                        Some(format!("dpkg package {pkg} {}", p.version)),
                    );
                }
            }
        }
    }
    if let Some((m, path)) = minors.first() {
        return (Some(m.clone()), Some(path.clone()));
    }
    if let Some((m, path)) = libpython {
        return (Some(m.clone()), Some(path.clone()));
    }
    (None, None)
}

fn children(tree: &FileTree, dir: NodeId) -> Vec<(String, NodeId)> {
    match &tree.node(dir).kind {
        NodeKind::Dir(c) => c.iter().map(|(n, &id)| (n.to_string(), id)).collect(),
        _ => Vec::new(),
    }
}

fn read_packages(tree: &FileTree, dir: NodeId, out: &mut Vec<PythonPackage>) {
    let base = tree.path_of(dir);
    for (name, id) in children(tree, dir) {
        if out.len() >= MAX_PACKAGES {
            return;
        }
        let (stem, metadata) = if let Some(stem) = name.strip_suffix(".dist-info") {
            (stem, "METADATA")
        } else if let Some(stem) = name.strip_suffix(".egg-info") {
            (stem, "PKG-INFO")
        } else {
            continue;
        };
        let node = tree.node(id);
        let path = format!("{base}/{name}");
        let file = if node.is_dir() {
            format!("{path}/{metadata}")
        } else if node.is_file() {
            path.clone()
        } else {
            continue;
        };
        let headers = tree
            .contents(&file)
            .map(|c| headers(&String::from_utf8_lossy(&c.bytes)))
            .unwrap_or_default();
        // `numpy-1.26.4.dist-info`, `foo-1.0-py3.11.egg-info`.
        let (from_name, from_version) = match stem.split_once('-') {
            Some((n, rest)) => (n, Some(rest.split('-').next().unwrap_or(rest))),
            None => (stem, None),
        };
        out.push(PythonPackage {
            name: headers.0.unwrap_or_else(|| from_name.to_string()),
            version: headers
                .1
                .or(from_version.filter(|v| !v.is_empty()).map(str::to_string)),
            path,
        });
    }
}

/// `Name:` and `Version:` from the header block of core metadata (RFC 822 style; it ends at
/// the first empty line).
fn headers(text: &str) -> (Option<String>, Option<String>) {
    let (mut name, mut version) = (None, None);
    for line in text.lines() {
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            let v = v.trim();
            match k {
                "Name" if name.is_none() && !v.is_empty() => name = Some(v.to_string()),
                "Version" if version.is_none() && !v.is_empty() => version = Some(v.to_string()),
                _ => {}
            }
        }
    }
    (name, version)
}

/// The servers the entrypoint runs, one entry per server.
fn servers(inputs: &EnvInputs, tree: &FileTree, entry: &Entrypoint) -> Vec<PythonServer> {
    let mut out: Vec<PythonServer> = Vec::new();
    let argvs = entry
        .steps
        .iter()
        .map(|s| s.argv.as_slice())
        .chain([entry.args.as_slice(), entry.argv.as_slice()]);
    for argv in argvs {
        if let Some(s) = server_in(argv, inputs, tree, &entry.working_dir) {
            if !out.iter().any(|o| o.name == s.name) {
                out.push(s);
            }
        }
    }
    out
}

fn base(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// The server an argument vector runs, with the arguments that follow its name.
fn server_in(
    argv: &[String],
    inputs: &EnvInputs,
    tree: &FileTree,
    working_dir: &str,
) -> Option<PythonServer> {
    let mut words = argv;
    // `python [-X opt] -m gunicorn …` or `python /usr/local/bin/gunicorn …`.
    if words.first().is_some_and(|w| base(w).starts_with("python")) {
        let mut i = 1;
        while i < words.len() && words[i].starts_with('-') && words[i] != "-m" {
            match words[i].as_str() {
                // `-c CODE`: no module or script to name.
                "-c" => return None,
                // Options that take the next word.
                "-X" | "-W" => i += 2,
                _ => i += 1,
            }
        }
        match words.get(i).map(String::as_str) {
            Some("-m") => {
                let module = words.get(i + 1)?;
                let name = match module.as_str() {
                    "distributed.cli.dask_worker" => "dask-worker",
                    "distributed.cli.dask_scheduler" => "dask-scheduler",
                    m => m.split('.').next().unwrap_or(m),
                };
                return server_named(name, &words[i + 2..], inputs, tree, working_dir);
            }
            Some(_) => words = &words[i..],
            None => return None,
        }
    }
    let (first, rest) = words.split_first()?;
    server_named(base(first), rest, inputs, tree, working_dir)
}

fn server_named(
    name: &str,
    args: &[String],
    inputs: &EnvInputs,
    tree: &FileTree,
    working_dir: &str,
) -> Option<PythonServer> {
    let shown = |n: &str| format!("`{}`", shell_words(n, args));
    match name {
        "gunicorn" => Some(gunicorn(args, inputs, tree, working_dir)),
        "uvicorn" => Some(PythonServer {
            name: "uvicorn",
            concurrency: Concurrency::Threads,
            evidence: format!(
                "{}: uvicorn runs synchronous endpoints in a thread pool",
                shown("uvicorn")
            ),
            workers_from_cpus: None,
        }),
        "celery" => Some(celery(args, &shown("celery"), inputs, tree)),
        "dask" | "dask-worker" | "dask-scheduler" => {
            let worker = name == "dask-worker" || args.first().is_some_and(|a| a == "worker");
            let one_thread = flag_value(args, &["--nthreads"]).is_some_and(|v| v == "1");
            let concurrency = match (worker, one_thread) {
                (true, false) => Concurrency::Threads,
                _ => Concurrency::Single,
            };
            let why = if concurrency == Concurrency::Threads {
                ": a dask worker runs tasks in a thread pool (one thread per core unless --nthreads says otherwise)"
            } else {
                ""
            };
            Some(PythonServer {
                name: "dask",
                concurrency,
                evidence: format!("{}{why}", shown(name)),
                workers_from_cpus: None,
            })
        }
        _ => None,
    }
}

fn shell_words(name: &str, args: &[String]) -> String {
    std::iter::once(name)
        .chain(args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The value of the first of `flags` in `args` (`--flag V` or `--flag=V`; a short flag also
/// `-wV`).
fn flag_value(args: &[String], flags: &[&str]) -> Option<String> {
    let mut found = None;
    for (i, a) in args.iter().enumerate() {
        for f in flags {
            if a == f {
                found = args.get(i + 1).cloned();
            } else if let Some(v) = a.strip_prefix(&format!("{f}=")) {
                found = Some(v.to_string());
            } else if f.len() == 2
                && !f.starts_with("--")
                && a.starts_with(f)
                && a.len() > 2
                && !a.starts_with("--")
            {
                found = Some(a[2..].to_string());
            }
        }
    }
    found
}

fn number(v: Option<&str>) -> Option<u64> {
    v.and_then(|v| v.trim().parse().ok())
}

/// gunicorn's workers and threads: the command line first, then `GUNICORN_CMD_ARGS`, then
/// the config file (`-c`, or `gunicorn.conf.py` in the working folder, which gunicorn reads by
/// default), then `WEB_CONCURRENCY` (the default of `--workers`, which a config that assigns
/// `workers` replaces). A config that computes `workers` from the CPU count is noted in
/// [`PythonServer::workers_from_cpus`]; one that sets them some other way leaves it unknown.
fn gunicorn(args: &[String], inputs: &EnvInputs, tree: &FileTree, working_dir: &str) -> PythonServer {
    let env_args: Vec<String> = inputs
        .gunicorn_cmd_args
        .map(|a| shell::split_words(a, shell::SH))
        .unwrap_or_default();
    let all: Vec<String> = env_args.iter().chain(args).cloned().collect();
    let workers = flag_value(&all, &["-w", "--workers"]);
    let threads = flag_value(&all, &["--threads"]);
    let class = flag_value(&all, &["-k", "--worker-class"]);
    // (the file, as the command names it or the default; its path when memlint can read it)
    let config: Option<(String, Option<String>)> = match flag_value(&all, &["-c", "--config"]) {
        Some(named) => Some((named, gunicorn_config_path(&all, working_dir))),
        None => {
            let default = format!("{}/gunicorn.conf.py", working_dir.trim_end_matches('/'));
            tree.lookup(&default)
                .ok()
                .flatten()
                .map(|_| (default.clone(), Some(default)))
        }
    };
    let read = config
        .as_ref()
        .and_then(|(_, path)| path.as_deref())
        // A `-c` only a script names was not kept (interests come from the config).
        .filter(|path| tree.keeps(path))
        .and_then(|path| Some((path, tree.contents(path)?)))
        .map(|(path, c)| (path, read_gunicorn_config(&String::from_utf8_lossy(&c.bytes))));
    let mut said = vec![format!("`{}`", shell_words("gunicorn", args))];
    if let Some(a) = inputs.gunicorn_cmd_args {
        said.push(format!("GUNICORN_CMD_ARGS={a}"));
    }
    let cli_workers = number(workers.as_deref());
    let config_assigns = |setting: &str| read.as_ref().is_some_and(|(_, r)| r.assigns.contains(&setting));
    let workers_from_cpus = match (&read, &workers) {
        (Some((path, r)), None) => r.cpu_sized.as_ref().map(|c| CpuSizedWorkers {
            how: format!("`{}` computes the worker count from the CPU count", c.text),
            path: Some(path.to_string()),
            line: Some(c.line),
            overridden_by: c.overridden_by.clone(),
            maybe_set_in: Vec::new(),
            command: said[0].clone(),
            effective: WorkerCount::FromCpus,
        }),
        _ => None,
    };
    // WEB_CONCURRENCY is only the default of `workers`: a config that assigns it wins.
    let workers_n = cli_workers.or_else(|| {
        if config_assigns("workers") {
            return None;
        }
        if let Some(w) = inputs.web_concurrency {
            said.push(format!("WEB_CONCURRENCY={w}"));
        }
        number(inputs.web_concurrency)
    });
    let threads_n = number(threads.as_deref());
    let class = class.unwrap_or_default();
    let threaded_class = class == "gthread" || class.to_ascii_lowercase().contains("uvicorn");
    let concurrency = if threads_n.is_some_and(|t| t > 1) || threaded_class {
        said.push(match threads_n.filter(|t| *t > 1) {
            Some(t) => format!("{t} threads per worker (gthread)"),
            None => format!("worker class {class} runs requests in threads"),
        });
        Concurrency::Threads
    } else if let Some(w) = workers_n.filter(|w| *w > 1) {
        said.push(format!("{w} worker processes"));
        Concurrency::Processes
    } else if let Some(cpu) = &workers_from_cpus {
        let path = cpu.path.as_deref().unwrap_or_default();
        let set = cpu
            .overridden_by
            .iter()
            .find_map(|v| inputs.env.non_empty(v).map(|x| (v, x)));
        match set {
            Some((v, x)) => {
                said.push(format!("{v}={x}, which {path} reads for the worker count"));
                match number(Some(x)) {
                    Some(n) if n > 1 => Concurrency::Processes,
                    Some(_) => Concurrency::Single,
                    None => Concurrency::Unknown,
                }
            }
            None => {
                said.push(format!(
                    "{path} line {}: {}, one worker process each",
                    cpu.line.unwrap_or_default(),
                    cpu.how
                ));
                Concurrency::Processes
            }
        }
    } else if let Some((named, _)) = config.as_ref().filter(|_| {
        read.is_none()
            || ["workers", "threads", "worker_class"]
                .iter()
                .any(|s| config_assigns(s))
    }) {
        said.push(format!("settings in {named}, which memlint does not evaluate"));
        Concurrency::Unknown
    } else {
        said.push("one sync worker (gunicorn's default)".into());
        Concurrency::Single
    };
    PythonServer {
        name: "gunicorn",
        concurrency,
        evidence: said.join("; "),
        workers_from_cpus,
    }
}

/// What a gunicorn config file does with the worker count, read as text (memlint does not run
/// Python).
#[derive(Debug, Default, PartialEq, Eq)]
struct GunicornConfig {
    /// Which of `workers`, `threads`, `worker_class` it assigns.
    assigns: Vec<&'static str>,
    /// When it assigns `workers` from the CPU count.
    cpu_sized: Option<ConfigLine>,
}

#[derive(Debug, PartialEq, Eq)]
struct ConfigLine {
    /// 1-based.
    line: u32,
    /// The last line that assigns `workers`, trimmed.
    text: String,
    /// Variables the config reads that may give the count instead.
    overridden_by: Vec<String>,
}

/// Reads a gunicorn config: it computes its workers from the CPU count when the right-hand side
/// of its (last) `workers` assignment counts CPUs, or uses a name assigned from something that
/// does, however many assignments away (the usual `workers = multiprocessing.cpu_count() * 2 +
/// 1`, or the uvicorn-gunicorn images' `cores` → `default_web_concurrency` →
/// `web_concurrency` → `workers`). The variables that may give the count instead are those
/// whose name says worker count (`WEB_CONCURRENCY`, `MAX_WORKERS`, `GUNICORN_WORKERS`; not a
/// multiplier such as `WORKERS_PER_CORE`), and one the `workers` line reads whole
/// (`workers = int(os.getenv("X", …))`).
fn read_gunicorn_config(text: &str) -> GunicornConfig {
    let mut out = GunicornConfig::default();
    // (line, trimmed text, right-hand side) of each `workers` assignment; every assignment.
    let mut workers_lines: Vec<(u32, &str, &str)> = Vec::new();
    let mut assignments: Vec<(&str, &str)> = Vec::new();
    let mut reads: Vec<String> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let code = python_code(raw);
        for setting in ["workers", "threads", "worker_class"] {
            if let Some(rhs) = assigned(code, setting) {
                if !out.assigns.contains(&setting) {
                    out.assigns.push(setting);
                }
                if setting == "workers" {
                    workers_lines.push((i as u32 + 1, raw.trim(), rhs));
                    // `workers = int(os.getenv("X", …))`: X gives the count whole.
                    let whole = rhs.trim_start();
                    let whole = whole.strip_prefix("int(").unwrap_or(whole).trim_start();
                    if [
                        "os.getenv(",
                        "os.environ.get(",
                        "os.environ[",
                        "getenv(",
                        "environ.get(",
                    ]
                    .iter()
                    .any(|c| whole.starts_with(c))
                    {
                        reads.extend(env_reads(whole).into_iter().take(1));
                    }
                }
            }
        }
        if let Some((name, rhs)) = simple_assignment(code) {
            assignments.push((name, rhs));
        }
        reads.extend(env_reads(code).into_iter().filter(|v| count_variable(v)));
    }
    // Names whose value follows the CPU count, to a fixed point. Bounded against a hostile
    // config: the first assignments only, and chains of a few steps (real configs have tens of
    // assignments and chains of three or four).
    assignments.truncate(MAX_ASSIGNMENTS);
    let mut tainted: Vec<&str> = Vec::new();
    let follows = |rhs: &str, tainted: &[&str]| counts_cpus(rhs) || tainted.iter().any(|t| has_word(rhs, t));
    for _ in 0..MAX_CHAIN {
        let before = tainted.len();
        for (name, rhs) in &assignments {
            if !tainted.contains(name) && follows(rhs, &tainted) {
                tainted.push(name);
            }
        }
        if tainted.len() == before {
            break;
        }
    }
    if let Some((line, text, rhs)) = workers_lines.last() {
        if follows(rhs, &tainted) {
            let mut overridden_by: Vec<String> = Vec::new();
            for r in reads {
                if !overridden_by.contains(&r) && !is_multiplier(&r) {
                    overridden_by.push(r);
                }
            }
            out.cpu_sized = Some(ConfigLine {
                line: *line,
                text: text.to_string(),
                overridden_by,
            });
        }
    }
    out
}

/// Assignments of a gunicorn config followed, and steps of a chain of them.
const MAX_ASSIGNMENTS: usize = 512;
const MAX_CHAIN: usize = 16;

/// Whether Python code counts the CPUs it runs on.
fn counts_cpus(code: &str) -> bool {
    ["cpu_count(", "sched_getaffinity("]
        .iter()
        .any(|c| code.contains(c))
        || has_word(code, "nproc")
}

/// Whether `word` appears in `code` as a whole identifier.
fn has_word(code: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    code.match_indices(word).any(|(at, _)| {
        !code[..at].chars().next_back().is_some_and(ident)
            && !code[at + word.len()..].chars().next().is_some_and(ident)
    })
}

/// `name = rhs` at any indentation, for a plain identifier (not `a.b = …`, `a[0] = …`, `==`).
fn simple_assignment(code: &str) -> Option<(&str, &str)> {
    let trimmed = code.trim_start();
    let end = trimmed
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(trimmed.len());
    let name = &trimmed[..end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    Some((name, assigned(trimmed, name)?))
}

fn count_variable(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    (n.contains("WORKERS") || n.contains("CONCURRENCY") || n.contains("PROCESSES")) && !is_multiplier(&n)
}

fn is_multiplier(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    n.contains("PER_CORE") || n.contains("PER_CPU")
}

/// A line of Python without its comment (a `#` outside quotes).
fn python_code(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (Some(_), _) if escaped => escaped = false,
            (Some(_), '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"') => quote = Some(c),
            (None, '#') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// The right-hand side when `code` assigns `name` (`workers = …`, `workers: int = …`, not
/// `workers == …` nor `max_workers = …`).
fn assigned<'a>(code: &'a str, name: &str) -> Option<&'a str> {
    let rest = code.trim_start().strip_prefix(name)?;
    let rest = rest.trim_start();
    let rest = match rest.strip_prefix(':') {
        Some(annotated) => &annotated[annotated.find('=')?..],
        None => rest,
    };
    let rhs = rest.strip_prefix('=')?;
    (!rhs.starts_with('=')).then_some(rhs)
}

/// The environment variables a line of Python reads by a literal name: `os.getenv("X"`,
/// `os.environ.get("X"`, `os.environ["X"]`, `os.environ.setdefault("X"`.
fn env_reads(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for call in ["getenv(", "environ.get(", "environ[", "environ.setdefault("] {
        let mut rest = code;
        while let Some(at) = rest.find(call) {
            rest = &rest[at + call.len()..];
            let arg = rest.trim_start();
            let Some(q) = arg.chars().next().filter(|c| *c == '"' || *c == '\'') else {
                continue;
            };
            let name: String = arg[1..].chars().take_while(|c| *c != q).collect();
            if !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !out.contains(&name)
            {
                out.push(name);
            }
        }
    }
    out
}

/// A Celery worker runs a prefork pool of one process per CPU unless `--pool`/`-P`,
/// `--concurrency`/`-c`, `--autoscale` or `CELERY_WORKER_CONCURRENCY` say otherwise; other
/// celery commands (beat, flower) are not workers.
fn celery(args: &[String], shown: &str, inputs: &EnvInputs, tree: &FileTree) -> PythonServer {
    let worker = celery_subcommand(args) == Some("worker");
    // Celery 5 reads each worker option from `CELERY_WORKER_<OPTION>` too (click's
    // auto_envvar_prefix); the command line wins.
    let pool = flag_value(args, &["-P", "--pool"])
        .or_else(|| inputs.celery_worker_pool.map(str::to_string))
        .unwrap_or_else(|| "prefork".into());
    // `-c 0` is Celery's "one per CPU", as if it were not given.
    let flag = flag_value(args, &["-c", "--concurrency"]).filter(|v| v.trim() != "0");
    let autoscale =
        flag_value(args, &["--autoscale"]).or_else(|| inputs.celery_worker_autoscale.map(str::to_string));
    let concurrency_n = number(flag.as_deref()).or(if flag.is_none() {
        number(inputs.celery_worker_concurrency)
    } else {
        None
    });
    let prefork = !matches!(pool.as_str(), "threads" | "solo" | "gevent" | "eventlet");
    let workers_from_cpus = (worker && prefork && flag.is_none() && autoscale.is_none()).then(|| {
        CpuSizedWorkers {
            how: format!(
                "{shown} starts one worker process per CPU it sees: neither --concurrency nor --autoscale is given"
            ),
            path: None,
            line: None,
            overridden_by: vec![CELERY_CONCURRENCY_VAR.to_string()],
            maybe_set_in: celery_settings(tree),
            command: shown.to_string(),
            effective: WorkerCount::FromCpus,
        }
    });
    let (concurrency, why) = if !worker {
        (Concurrency::Single, "not a worker".to_string())
    } else if pool == "threads" {
        (Concurrency::Threads, "a thread pool".to_string())
    } else if pool == "solo" || concurrency_n == Some(1) {
        (Concurrency::Single, "one process".to_string())
    } else if matches!(pool.as_str(), "gevent" | "eventlet") {
        (Concurrency::Single, "green threads in one OS thread".to_string())
    } else if let (None, Some(v)) = (&flag, inputs.celery_worker_concurrency) {
        (
            Concurrency::Processes,
            format!("a prefork pool of {CELERY_CONCURRENCY_VAR}={v} processes"),
        )
    } else {
        (
            Concurrency::Processes,
            "a prefork pool (one process per CPU unless --concurrency says otherwise)".to_string(),
        )
    };
    PythonServer {
        name: "celery",
        concurrency,
        evidence: format!("{shown}: {why}"),
        workers_from_cpus,
    }
}

/// The celery command a line runs (`worker`, `beat`, …): the first word that is not a global
/// option or its value (`celery -A worker beat` runs beat for an app module named `worker`).
fn celery_subcommand(args: &[String]) -> Option<&str> {
    const WITH_VALUE: [&str; 8] = [
        "-A",
        "--app",
        "-b",
        "--broker",
        "--result-backend",
        "--loader",
        "--config",
        "--workdir",
    ];
    let mut words = args.iter();
    while let Some(w) = words.next() {
        if WITH_VALUE.contains(&w.as_str()) {
            words.next();
        } else if !w.starts_with('-') {
            return Some(w.as_str());
        }
    }
    None
}

/// `PATH line N` for each line of a Celery or Django settings file outside the installed
/// packages that names the worker concurrency (`worker_concurrency`,
/// `CELERY_WORKER_CONCURRENCY`, the old `CELERYD_CONCURRENCY`).
fn celery_settings(tree: &FileTree) -> Vec<String> {
    let mut out = Vec::new();
    for id in tree.walk() {
        let node = tree.node(id);
        let in_settings = || tree.node(tree.parent(id)).name() == "settings";
        if !(matches!(node.name(), "celeryconfig.py" | "celery.py" | "settings.py")
            || node.name().ends_with(".py") && in_settings())
        {
            continue;
        }
        let path = tree.path_of(id);
        if PACKAGE_DIRS.iter().any(|d| path.contains(&format!("/{d}/"))) {
            continue;
        }
        let Some(content) = tree.content(id) else {
            continue;
        };
        for (i, line) in String::from_utf8_lossy(&content.bytes).lines().enumerate() {
            let code = python_code(line).to_ascii_lowercase();
            if code.contains("worker_concurrency") || code.contains("celeryd_concurrency") {
                out.push(format!("{path} line {}", i + 1));
                break;
            }
        }
        if out.len() >= 8 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::entrypoint::Step;
    use crate::tree::{EntryKind, LayerEntry};

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    fn run(cmd: &str, env: &[&str], files: Vec<LayerEntry>) -> Vec<PythonServer> {
        let tree = FileTree::from_entries(files).unwrap().keeping(interests());
        let env = Env::from_pairs(env.iter().copied());
        let entry = Entrypoint {
            argv: argv(cmd),
            args: argv(cmd),
            working_dir: "/app".into(),
            ..Entrypoint::default()
        };
        servers(&env_inputs(&env), &tree, &entry)
    }

    #[test]
    fn servers_and_their_concurrency() {
        let c = |cmd: &str, env: &[&str]| run(cmd, env, vec![])[0].concurrency;
        assert_eq!(c("gunicorn -w 4 app:app", &[]), Concurrency::Processes);
        assert_eq!(c("gunicorn --workers=4 app:app", &[]), Concurrency::Processes);
        assert_eq!(c("gunicorn -w4 app:app", &[]), Concurrency::Processes);
        assert_eq!(c("gunicorn --threads 8 app:app", &[]), Concurrency::Threads);
        assert_eq!(
            c("gunicorn -k uvicorn.workers.UvicornWorker app:app", &[]),
            Concurrency::Threads
        );
        assert_eq!(c("gunicorn app:app", &[]), Concurrency::Single);
        assert_eq!(
            c("gunicorn app:app", &["WEB_CONCURRENCY=3"]),
            Concurrency::Processes
        );
        assert_eq!(
            c("gunicorn app:app", &["GUNICORN_CMD_ARGS=--threads 4"]),
            Concurrency::Threads
        );
        assert_eq!(c("python3 -m gunicorn -w 2 app:app", &[]), Concurrency::Processes);
        assert_eq!(
            c("python3 -X dev -u -m uvicorn main:app", &[]),
            Concurrency::Threads
        );
        assert!(run("python3 -c import-gunicorn", &[], vec![]).is_empty());
        assert_eq!(
            c("/usr/bin/python3.11 /usr/local/bin/gunicorn -w 2 app:app", &[]),
            Concurrency::Processes
        );
        assert_eq!(c("uvicorn main:app", &[]), Concurrency::Threads);
        assert_eq!(c("python -m uvicorn main:app", &[]), Concurrency::Threads);
        assert_eq!(c("celery -A proj worker", &[]), Concurrency::Processes);
        assert_eq!(c("celery -A proj worker -P threads", &[]), Concurrency::Threads);
        assert_eq!(
            c("celery -A proj worker --concurrency=1", &[]),
            Concurrency::Single
        );
        assert_eq!(c("celery -A proj beat", &[]), Concurrency::Single);
        assert_eq!(c("dask worker tcp://s:8786", &[]), Concurrency::Threads);
        assert_eq!(
            c("dask-worker --nthreads 1 tcp://s:8786", &[]),
            Concurrency::Single
        );
        assert_eq!(c("dask scheduler", &[]), Concurrency::Single);
        assert!(run("python app.py", &[], vec![]).is_empty());
        // A config file gunicorn reads by default: memlint cannot tell.
        let conf = LayerEntry::new("app/gunicorn.conf.py", EntryKind::File).with_text("workers = 4\n");
        let s = run("gunicorn app:app", &[], vec![conf]);
        assert_eq!(s[0].concurrency, Concurrency::Unknown);
        assert!(
            s[0].evidence.contains("/app/gunicorn.conf.py"),
            "{}",
            s[0].evidence
        );
    }

    #[test]
    fn gunicorn_configs_that_count_cpus() {
        let cpu = |text: &str| read_gunicorn_config(text).cpu_sized;
        let c = cpu("import multiprocessing\n\nworkers = multiprocessing.cpu_count() * 2 + 1\n").unwrap();
        assert_eq!(
            (c.line, c.text.as_str()),
            (3, "workers = multiprocessing.cpu_count() * 2 + 1")
        );
        assert!(c.overridden_by.is_empty());
        // The uvicorn-gunicorn images' shape: counts through variables, reads several.
        let tiangolo = r#"import multiprocessing
import os
workers_per_core_str = os.getenv("WORKERS_PER_CORE", "1")
max_workers_str = os.getenv("MAX_WORKERS")
web_concurrency_str = os.getenv("WEB_CONCURRENCY", None)
host = os.getenv("HOST", "0.0.0.0")
cores = multiprocessing.cpu_count()
workers_per_core = float(workers_per_core_str)
default_web_concurrency = workers_per_core * cores
if web_concurrency_str:
    web_concurrency = int(web_concurrency_str)
else:
    web_concurrency = max(int(default_web_concurrency), 2)
workers = web_concurrency
"#;
        let c = cpu(tiangolo).unwrap();
        assert_eq!(c.line, 14);
        assert_eq!(c.overridden_by, ["MAX_WORKERS", "WEB_CONCURRENCY"]);
        // Read on the workers line itself, whatever its name.
        let c =
            cpu("import os\nworkers = int(os.environ.get('GUNICORN_PROCS', os.cpu_count()))  # per box\n")
                .unwrap();
        assert_eq!(c.overridden_by, ["GUNICORN_PROCS"]);
        assert_eq!(
            cpu("workers: int = len(os.sched_getaffinity(0))\n").unwrap().line,
            1
        );
        // A plain number, CPUs counted for threads only, a comment, a comparison: no.
        assert_eq!(cpu("import os\nworkers = 4\nthreads = os.cpu_count()\n"), None);
        assert_eq!(
            cpu("workers = 4  # was multiprocessing.cpu_count() * 2 + 1\n"),
            None
        );
        assert_eq!(cpu("# workers = os.cpu_count()\nbind = '0.0.0.0:80'\n"), None);
        assert_eq!(cpu("max_workers = os.cpu_count()\nif workers == 2: pass\n"), None);
        // CPUs counted for something else; a default the config gives; a longer name.
        assert_eq!(
            cpu("import os, multiprocessing\nworkers = int(os.getenv('GUNICORN_WORKERS', '4'))\nthreads = multiprocessing.cpu_count()\n"),
            None
        );
        assert_eq!(cpu("nprocs = 4\nworkers = nprocs * 2\n"), None);
        // A multiplier read on the workers line does not settle it.
        let c =
            cpu("import os\nworkers = os.cpu_count() * int(os.getenv('WORKER_FACTOR', '2')) + 1\n").unwrap();
        assert!(c.overridden_by.is_empty(), "{:?}", c.overridden_by);
        // A hostile chain stays bounded (and past the bound is not followed).
        let mut chain = String::from("v0 = os.cpu_count()\n");
        for i in 1..5000 {
            chain.push_str(&format!("v{i} = v{}\n", i - 1));
        }
        chain.push_str("workers = v4999\n");
        assert_eq!(cpu(&chain), None);
        assert_eq!(python_code("x = '#not' # yes"), "x = '#not' ");
        assert_eq!(env_reads("a = os.environ['A'] or os.getenv( \"B\")"), ["B", "A"]);
    }

    #[test]
    fn the_config_file_a_command_names() {
        let kept = |cmd: &[&str]| {
            let config = serde_json::json!({
                "architecture": "amd64", "os": "linux",
                "config": {"Cmd": cmd, "WorkingDir": "/app"},
                "rootfs": {"type": "layers", "diff_ids": []}
            });
            let config: ImageConfiguration = serde_json::from_value(config).unwrap();
            let i = interests_for(&config);
            ["/app/conf/g.py", "/etc/gunicorn.py", "/x", "/app/a/b/c/x"]
                .into_iter()
                .filter(|p| i.covers(p))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            kept(&["gunicorn", "-c", "conf/g.py", "app:app"]),
            ["/app/conf/g.py"]
        );
        assert_eq!(
            kept(&["gunicorn", "--config=/etc/gunicorn.py", "app:app"]),
            ["/etc/gunicorn.py"]
        );
        // Not gunicorn's: a shell's or celery's -c.
        assert!(kept(&["sh", "-c", "/x"]).is_empty());
        assert!(kept(&["celery", "-A", "p", "worker", "-c", "/x"]).is_empty());
        // Text from the image that would read as a glob, or climb, is not followed.
        assert!(kept(&["gunicorn", "-c", "/**/x", "app:app"]).is_empty());
        assert!(kept(&["gunicorn", "-c", "../x", "app:app"]).is_empty());
    }

    #[test]
    fn worker_counts_taken_from_the_cpus() {
        let conf =
            |text: &str| vec![LayerEntry::new("app/gunicorn.conf.py", EntryKind::File).with_text(text)];
        let unconditional = "import multiprocessing\nworkers = multiprocessing.cpu_count() * 2 + 1\n";
        let s = run("gunicorn app:app", &[], conf(unconditional));
        assert_eq!(s[0].concurrency, Concurrency::Processes);
        let w = s[0].workers_from_cpus.as_ref().unwrap();
        assert_eq!(w.path.as_deref(), Some("/app/gunicorn.conf.py"));
        assert_eq!(w.line, Some(2));
        // WEB_CONCURRENCY does not override a config that assigns workers.
        let s = run("gunicorn app:app", &["WEB_CONCURRENCY=2"], conf(unconditional));
        assert_eq!(s[0].concurrency, Concurrency::Processes);
        assert!(s[0].workers_from_cpus.is_some());
        // The command line and GUNICORN_CMD_ARGS do.
        let s = run("gunicorn -w 1 app:app", &[], conf(unconditional));
        assert!(s[0].workers_from_cpus.is_none());
        let s = run(
            "gunicorn app:app",
            &["GUNICORN_CMD_ARGS=--workers=2"],
            conf(unconditional),
        );
        assert!(s[0].workers_from_cpus.is_none());
        // A config that reads WEB_CONCURRENCY: the image's value decides.
        let reads = "import os, multiprocessing\nworkers = int(os.environ.get('WEB_CONCURRENCY', multiprocessing.cpu_count()))\n";
        let s = run("gunicorn app:app", &["WEB_CONCURRENCY=1"], conf(reads));
        assert_eq!(s[0].concurrency, Concurrency::Single);
        assert_eq!(
            s[0].workers_from_cpus.as_ref().unwrap().overridden_by,
            ["WEB_CONCURRENCY"]
        );
        // -c names another file (relative to the working folder, `file:` taken off).
        let other =
            vec![LayerEntry::new("app/conf/gunicorn_conf.py", EntryKind::File).with_text(unconditional)];
        let s = run("gunicorn -c file:conf/gunicorn_conf.py app:app", &[], other);
        assert_eq!(
            s[0].workers_from_cpus.as_ref().unwrap().path.as_deref(),
            Some("/app/conf/gunicorn_conf.py")
        );
        // A python: config cannot be read.
        let s = run("gunicorn -c python:conf app:app", &[], vec![]);
        assert_eq!(s[0].concurrency, Concurrency::Unknown);

        // Celery: a prefork worker with no count.
        let s = run("celery -A proj worker --loglevel=INFO", &[], vec![]);
        let w = s[0].workers_from_cpus.as_ref().unwrap();
        assert_eq!(w.overridden_by, [CELERY_CONCURRENCY_VAR]);
        assert!(w.maybe_set_in.is_empty());
        for cmd in [
            "celery -A proj worker -c 4",
            "celery -A proj worker --concurrency=4",
            "celery -A proj worker --autoscale=10,3",
            "celery -A proj worker -P threads",
            "celery -A proj worker --pool=solo",
            "celery -A proj beat",
        ] {
            assert!(run(cmd, &[], vec![])[0].workers_from_cpus.is_none(), "{cmd}");
        }
        let s = run("celery -A proj worker", &["CELERY_WORKER_CONCURRENCY=1"], vec![]);
        assert_eq!(s[0].concurrency, Concurrency::Single);
        // 0 is "one per CPU"; the pool and autoscale from the environment count.
        assert!(run("celery -A proj worker -c 0", &[], vec![])[0]
            .workers_from_cpus
            .is_some());
        assert!(
            run("celery -A proj worker", &["CELERY_WORKER_CONCURRENCY=0"], vec![])[0]
                .workers_from_cpus
                .is_some()
        );
        assert!(
            run("celery -A proj worker", &["CELERY_WORKER_POOL=solo"], vec![])[0]
                .workers_from_cpus
                .is_none()
        );
        assert!(
            run("celery -A proj worker", &["CELERY_WORKER_AUTOSCALE=10,3"], vec![])[0]
                .workers_from_cpus
                .is_none()
        );
        // An app module named `worker` running beat is not a worker.
        assert!(run("celery -A worker beat", &[], vec![])[0]
            .workers_from_cpus
            .is_none());
        assert_eq!(
            celery_subcommand(&argv("--app=proj -b redis:// worker -l INFO")),
            Some("worker")
        );
        // Settings that may set it, outside the installed packages only.
        let files = vec![
            LayerEntry::new("app/proj/settings.py", EntryKind::File)
                .with_text("DEBUG = False\nCELERY_WORKER_CONCURRENCY = 4\n"),
            LayerEntry::new("usr/lib/python3/dist-packages/x/settings.py", EntryKind::File)
                .with_text("worker_concurrency = 1\n"),
        ];
        let s = run("celery -A proj worker", &[], files);
        assert_eq!(
            s[0].workers_from_cpus.as_ref().unwrap().maybe_set_in,
            ["/app/proj/settings.py line 2"]
        );
    }

    #[test]
    fn metadata_headers_and_names() {
        assert_eq!(normalize("Pillow"), "pillow");
        assert_eq!(normalize("opencv_python-Headless"), "opencv-python-headless");
        assert_eq!(normalize("zope.interface"), "zope-interface");
        assert_eq!(
            headers("Metadata-Version: 2.1\nName: numpy\nVersion: 1.26.4\nSummary: x\n\nName: body\n"),
            (Some("numpy".into()), Some("1.26.4".into()))
        );
        assert_eq!(interpreter_minor("python3.11").as_deref(), Some("3.11"));
        assert_eq!(interpreter_minor("python3"), None);
        assert_eq!(interpreter_minor("python3.11-config"), None);
    }

    #[test]
    fn packages_version_and_pythonmalloc() {
        let mut py = LayerEntry::new("usr/bin/python3.11", EntryKind::File).with_text("\x7fELF");
        py.mode = 0o755;
        let files = vec![
            py,
            LayerEntry::new(
                "usr/local/lib/python3.11/dist-packages/numpy-1.26.4.dist-info/METADATA",
                EntryKind::File,
            )
            .with_text("Metadata-Version: 2.1\nName: numpy\nVersion: 1.26.4\n"),
            // Headers not among the bytes kept: the folder's name says it.
            LayerEntry::new(
                "usr/local/lib/python3.11/dist-packages/Pillow-10.0.0.dist-info/METADATA",
                EntryKind::File,
            )
            .with_text(""),
            LayerEntry::new(
                "usr/lib/python3/dist-packages/six-1.16.0.egg-info",
                EntryKind::File,
            )
            .with_text("Metadata-Version: 1.1\nName: six\nVersion: 1.16.0\n"),
            LayerEntry::new("var/lib/dpkg/status", EntryKind::File).with_text(
                "Package: python3.11-minimal\nStatus: install ok installed\nVersion: 3.11.2-6+deb12u6\n",
            ),
        ];
        let tree = FileTree::from_entries(files)
            .unwrap()
            .keeping(interests().union(crate::facts::os::interests()));
        let os = crate::facts::os::derive(&tree);
        let env = Env::from_pairs(["PYTHONMALLOC=malloc"]);
        let entry = Entrypoint {
            steps: vec![Step {
                argv: argv("/usr/local/bin/gunicorn -w 4 app:app"),
                path: Some("/usr/local/bin/gunicorn".into()),
                how: "#! interpreter".into(),
                kind: Default::default(),
            }],
            ..Entrypoint::default()
        };
        let f = derive(&tree, &env, &os, &entry).unwrap();
        assert_eq!(f.version.as_deref(), Some("3.11.2"));
        assert!(f
            .version_source
            .as_deref()
            .unwrap()
            .contains("python3.11-minimal"));
        assert_eq!(f.interpreters, ["/usr/bin/python3.11"]);
        assert_eq!(f.package("numpy").unwrap().version.as_deref(), Some("1.26.4"));
        assert_eq!(f.package("pillow").unwrap().version.as_deref(), Some("10.0.0"));
        assert_eq!(f.package("six").unwrap().version.as_deref(), Some("1.16.0"));
        assert_eq!(f.pythonmalloc.as_deref(), Some("malloc"));
        assert_eq!(f.servers[0].name, "gunicorn");
        // The official images' ENV wins when it fits the interpreter; one that does not fit
        // is ignored.
        let env = Env::from_pairs(["PYTHON_VERSION=3.11.9"]);
        let f = derive(&tree, &env, &os, &entry).unwrap();
        assert_eq!(f.version.as_deref(), Some("3.11.9"));
        let env = Env::from_pairs(["PYTHON_VERSION=3.12.1"]);
        let f = derive(&tree, &env, &os, &entry).unwrap();
        assert_eq!(f.version.as_deref(), Some("3.11.2"));
        let empty = FileTree::from_entries(vec![]).unwrap().keeping(interests());
        assert!(derive(&empty, &env, &os, &entry).is_none());
    }
}
