//! The Python server the entrypoint runs (gunicorn, uvicorn, celery, dask), found in its
//! argument vectors, and the flags read from them.

use super::*;

/// The servers the entrypoint runs, one entry per server.
pub(super) fn servers(inputs: &EnvInputs, tree: &FileTree, entry: &Entrypoint) -> Vec<PythonServer> {
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

pub(super) fn base(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// The server an argument vector runs, with the arguments that follow its name.
pub(super) fn server_in(
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

pub(super) fn server_named(
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

pub(super) fn shell_words(name: &str, args: &[String]) -> String {
    std::iter::once(name)
        .chain(args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The value of the first of `flags` in `args` (`--flag V` or `--flag=V`; a short flag also
/// `-wV`).
pub(super) fn flag_value(args: &[String], flags: &[&str]) -> Option<String> {
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

pub(super) fn number(v: Option<&str>) -> Option<u64> {
    v.and_then(|v| v.trim().parse().ok())
}
