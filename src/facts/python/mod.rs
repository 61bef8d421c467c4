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

mod celery;
mod gunicorn;
mod interpreter;
mod packages;
mod servers;

use celery::*;
use gunicorn::*;
use interpreter::*;
pub(crate) use packages::*;
use servers::*;

/// The variable Celery's worker reads `--concurrency` from (click's `auto_envvar_prefix`).
pub(crate) const CELERY_CONCURRENCY_VAR: &str = "CELERY_WORKER_CONCURRENCY";

/// Bytes kept of each METADATA or PKG-INFO file: its first headers.
pub(crate) const METADATA_CAP: u64 = 1024;

/// One installed distribution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct PythonPackage {
    /// As its metadata spells it (`Pillow`); compare through [`normalize`].
    pub(crate) name: String,
    pub(crate) version: Option<String>,
    /// Its `.dist-info` or `.egg-info`.
    pub(crate) path: String,
}

/// How a server runs the application's (native) code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Concurrency {
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
    pub(crate) fn as_str(self) -> &'static str {
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
pub(crate) struct PythonServer {
    /// `gunicorn`, `uvicorn`, `celery` or `dask`.
    pub(crate) name: &'static str,
    pub(crate) concurrency: Concurrency,
    /// The command and settings that say so.
    pub(crate) evidence: String,
    /// How its worker count follows the node's CPU count, when it does (read by
    /// `worker-count-host-cpus`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) workers_from_cpus: Option<CpuSizedWorkers>,
}

/// A worker count the server takes from the CPUs it sees: in a container, the node's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct CpuSizedWorkers {
    /// How, in words.
    pub(crate) how: String,
    /// The file that computes the count (a gunicorn config), and the line that assigns it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<u32>,
    /// Environment variables that give the count instead when the image sets them (a config
    /// that reads `WEB_CONCURRENCY`; Celery's `CELERY_WORKER_CONCURRENCY`).
    pub(crate) overridden_by: Vec<String>,
    /// Files that may set the count in a way memlint does not evaluate (Celery or Django
    /// settings naming `worker_concurrency`), with the line.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) maybe_set_in: Vec<String>,
    /// The server's command as written (`` `gunicorn -c gunicorn.conf.py app:app` ``).
    #[serde(skip)]
    pub(crate) command: String,
    /// What the count is for the process the container runs: taken from the CPUs, or given by
    /// a variable the image or manifest sets, or undecided.
    #[serde(skip)]
    pub(crate) effective: WorkerCount,
}

/// A worker count that would follow the CPU count, as the container's environment settles it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum WorkerCount {
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
pub(crate) struct PythonFacts {
    /// `3.11.2`, or `3.11` when only the interpreter's name says it.
    pub(crate) version: Option<String>,
    /// Where the version comes from.
    pub(crate) version_source: Option<String>,
    /// The `python3.X` interpreters in PATH folders (links followed).
    pub(crate) interpreters: Vec<String>,
    pub(crate) packages: Vec<PythonPackage>,
    pub(crate) servers: Vec<PythonServer>,
    /// `PYTHONMALLOC` as set.
    pub(crate) pythonmalloc: Option<String>,
}

impl PythonFacts {
    /// The installed distribution called `name` (compared as PEP 503 normalises names).
    pub(crate) fn package(&self, name: &str) -> Option<&PythonPackage> {
        let want = normalize(name);
        self.packages.iter().find(|p| normalize(&p.name) == want)
    }
}

/// What [`derive`] reads: the head of each distribution's metadata, gunicorn configs and
/// Celery settings.
pub(crate) fn interests() -> Interests {
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
pub(crate) fn interests_for(config: &ImageConfiguration) -> Interests {
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
pub(crate) const GUNICORN_VARIABLES: &[&str] = &["GUNICORN_CMD_ARGS", "WEB_CONCURRENCY"];

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
pub(crate) fn derive(tree: &FileTree, env: &Env, os: &OsFacts, entry: &Entrypoint) -> Option<PythonFacts> {
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
