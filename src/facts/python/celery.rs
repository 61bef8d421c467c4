//! Celery workers: the subcommand, `--concurrency` and the settings a worker reads it from.

use super::*;

/// Files where a Celery app or Django project may set `worker_concurrency`.
pub(super) const CELERY_SETTINGS: [&str; 4] = [
    "**/celeryconfig.py",
    "**/celery.py",
    "**/settings.py",
    "**/settings/*.py",
];

/// Bytes kept of each Celery or Django settings file: matches in installed packages are kept
/// too (a pattern cannot leave them out) and only thrown away when read.
pub(super) const SETTINGS_CAP: u64 = 16 * 1024;

/// A Celery worker runs a prefork pool of one process per CPU unless `--pool`/`-P`,
/// `--concurrency`/`-c`, `--autoscale` or `CELERY_WORKER_CONCURRENCY` say otherwise; other
/// celery commands (beat, flower) are not workers.
pub(super) fn celery(args: &[String], shown: &str, inputs: &EnvInputs, tree: &FileTree) -> PythonServer {
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
pub(super) fn celery_subcommand(args: &[String]) -> Option<&str> {
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
pub(super) fn celery_settings(tree: &FileTree) -> Vec<String> {
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
