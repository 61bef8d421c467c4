//! gunicorn: its flags, `GUNICORN_CMD_ARGS`, `WEB_CONCURRENCY` and its config file, read for the
//! worker and thread counts (and whether they count the CPUs).

use super::*;

/// gunicorn config files by the names their users give them: `gunicorn.conf.py` (read by
/// default from the working folder) and `gunicorn_conf.py` (the uvicorn-gunicorn images').
pub(super) const GUNICORN_CONFIGS: [&str; 2] = ["gunicorn.conf.py", "gunicorn_conf.py"];

/// Bytes kept of each gunicorn config.
pub(super) const CONFIG_CAP: u64 = 64 * 1024;

/// The file `-c`/`--config` names in `args` (a `file:` prefix taken off, relative to the
/// working folder); `None` for none or a `python:module`.
pub(super) fn gunicorn_config_path(args: &[String], working_dir: &str) -> Option<String> {
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

/// gunicorn's workers and threads: the command line first, then `GUNICORN_CMD_ARGS`, then
/// the config file (`-c`, or `gunicorn.conf.py` in the working folder, which gunicorn reads by
/// default), then `WEB_CONCURRENCY` (the default of `--workers`, which a config that assigns
/// `workers` replaces). A config that computes `workers` from the CPU count is noted in
/// [`PythonServer::workers_from_cpus`]; one that sets them some other way leaves it unknown.
pub(super) fn gunicorn(
    args: &[String],
    inputs: &EnvInputs,
    tree: &FileTree,
    working_dir: &str,
) -> PythonServer {
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
pub(super) struct GunicornConfig {
    /// Which of `workers`, `threads`, `worker_class` it assigns.
    pub(super) assigns: Vec<&'static str>,
    /// When it assigns `workers` from the CPU count.
    pub(super) cpu_sized: Option<ConfigLine>,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) struct ConfigLine {
    /// 1-based.
    pub(super) line: u32,
    /// The last line that assigns `workers`, trimmed.
    pub(super) text: String,
    /// Variables the config reads that may give the count instead.
    pub(super) overridden_by: Vec<String>,
}

/// Reads a gunicorn config: it computes its workers from the CPU count when the right-hand side
/// of its (last) `workers` assignment counts CPUs, or uses a name assigned from something that
/// does, however many assignments away (the usual `workers = multiprocessing.cpu_count() * 2 +
/// 1`, or the uvicorn-gunicorn images' `cores` → `default_web_concurrency` →
/// `web_concurrency` → `workers`). The variables that may give the count instead are those
/// whose name says worker count (`WEB_CONCURRENCY`, `MAX_WORKERS`, `GUNICORN_WORKERS`; not a
/// multiplier such as `WORKERS_PER_CORE`), and one the `workers` line reads whole
/// (`workers = int(os.getenv("X", …))`).
pub(super) fn read_gunicorn_config(text: &str) -> GunicornConfig {
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
pub(super) const MAX_ASSIGNMENTS: usize = 512;

pub(super) const MAX_CHAIN: usize = 16;

/// Whether Python code counts the CPUs it runs on.
pub(super) fn counts_cpus(code: &str) -> bool {
    ["cpu_count(", "sched_getaffinity("]
        .iter()
        .any(|c| code.contains(c))
        || has_word(code, "nproc")
}

/// Whether `word` appears in `code` as a whole identifier.
pub(super) fn has_word(code: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    code.match_indices(word).any(|(at, _)| {
        !code[..at].chars().next_back().is_some_and(ident)
            && !code[at + word.len()..].chars().next().is_some_and(ident)
    })
}

/// `name = rhs` at any indentation, for a plain identifier (not `a.b = …`, `a[0] = …`, `==`).
pub(super) fn simple_assignment(code: &str) -> Option<(&str, &str)> {
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

pub(super) fn count_variable(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    (n.contains("WORKERS") || n.contains("CONCURRENCY") || n.contains("PROCESSES")) && !is_multiplier(&n)
}

pub(super) fn is_multiplier(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    n.contains("PER_CORE") || n.contains("PER_CPU")
}

/// A line of Python without its comment (a `#` outside quotes).
pub(super) fn python_code(line: &str) -> &str {
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
pub(super) fn assigned<'a>(code: &'a str, name: &str) -> Option<&'a str> {
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
pub(super) fn env_reads(code: &str) -> Vec<String> {
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
