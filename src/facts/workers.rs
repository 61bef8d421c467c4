//! Worker counts that servers outside Python take from the CPUs they see, which in a container
//! are the node's: pm2 (`-i max`, `0` or a negative count, `instances: "max"` in its ecosystem
//! file), uWSGI (`processes = %k`, `--processes %k`, `UWSGI_PROCESSES=%k`), nginx
//! (`worker_processes auto;`) and puma (`workers` from `Etc.nprocessors` or
//! `Concurrent.physical_processor_count`). Python's servers (gunicorn, celery) are
//! [`super::python`]'s.
//!
//! Each is found from the words the entrypoint runs (the config's command, each step on the
//! way and the final program's arguments) and the config file those words name, or the one
//! the server reads by default.

use super::command::{self, config_argv};
use super::entrypoint::Entrypoint;
use super::Env;
use crate::tree::{FileTree, Interests};
use oci_spec::image::ImageConfiguration;
use serde::Serialize;

/// Bytes kept of each config file.
const CONFIG_CAP: u64 = 64 * 1024;

/// The config files the servers read by default, and those their users name by habit.
const CONFIG_FILES: &[&str] = &[
    "/etc/nginx/nginx.conf",
    "**/ecosystem.config.js",
    "**/ecosystem.config.cjs",
    "**/ecosystem.json",
    "**/config/puma.rb",
    "**/config/puma/*.rb",
    "**/uwsgi.ini",
    "/etc/uwsgi/*/*.ini",
];

/// The script the official nginx image runs before nginx to fit `worker_processes` to the
/// container's CPU quota, when `NGINX_ENTRYPOINT_WORKER_PROCESSES_AUTOTUNE` is set.
pub(crate) const NGINX_AUTOTUNE_SCRIPT: &str = "/docker-entrypoint.d/30-tune-worker-processes.sh";
pub(crate) const NGINX_AUTOTUNE_VARIABLE: &str = "NGINX_ENTRYPOINT_WORKER_PROCESSES_AUTOTUNE";

/// What [`derive`] reads whatever the config says.
pub(crate) fn interests() -> Interests {
    CONFIG_FILES
        .iter()
        .fold(Interests::default(), |i, p| i.keep(p, CONFIG_CAP))
}

/// What the config adds: a config file its command names (`uwsgi --ini FILE`,
/// `pm2-runtime start FILE`, `puma -C FILE`, `nginx -c FILE`).
pub(crate) fn interests_for(config: &ImageConfiguration) -> Interests {
    let Some(c) = config.config().as_ref() else {
        return Interests::default();
    };
    let argv = config_argv(config);
    let working_dir = c.working_dir().as_deref().unwrap_or("/");
    named_configs(&argv, working_dir)
        .into_iter()
        // The path becomes a keep pattern: one that would read as a glob is not followed.
        .filter(|p| !p.contains(['*', '?', '[', ']', '{', '}', '\\']) && !p.split('/').any(|c| c == ".."))
        .fold(Interests::default(), |i, p| i.keep(&p, CONFIG_CAP))
}

/// The config files `argv` names for the servers this module knows, made absolute.
fn named_configs(argv: &[String], working_dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, w) in argv.iter().enumerate() {
        let rest = &argv[i + 1..];
        let file = match base(w) {
            "uwsgi" | "uwsgi-core" => {
                flag(rest, &["--ini"]).or_else(|| rest.iter().find(|a| a.ends_with(".ini")).cloned())
            }
            "pm2" | "pm2-runtime" | "pm2-docker" => rest.iter().find(|a| is_ecosystem(a)).cloned(),
            "puma" => flag(rest, &["-C", "--config"]),
            "nginx" => flag(rest, &["-c"]),
            _ => None,
        };
        if let Some(f) = file {
            out.push(absolute(&f, working_dir));
        }
    }
    out
}

fn is_ecosystem(a: &str) -> bool {
    [".config.js", ".config.cjs", ".json", ".yml", ".yaml"]
        .iter()
        .any(|s| a.ends_with(s))
}

/// `path` from the working folder (argument order of the call sites: path first).
fn absolute(path: &str, working_dir: &str) -> String {
    command::absolute(working_dir, path)
}

fn base(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// The value of `--flag VALUE`, `--flag=VALUE` or `-fVALUE` in `args`, the last one.
fn flag(args: &[String], names: &[&str]) -> Option<String> {
    let mut found = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        for n in names {
            if a == n {
                found = it.next().cloned();
                break;
            }
            if let Some(v) = a.strip_prefix(&format!("{n}=")) {
                found = Some(v.to_string());
                break;
            }
            if n.len() == 2 && !a.starts_with("--") {
                if let Some(v) = a.strip_prefix(n).filter(|v| !v.is_empty()) {
                    found = Some(v.to_string());
                    break;
                }
            }
        }
    }
    found
}

/// A worker count a server takes from the CPUs it sees.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct HostCpuWorkers {
    /// `pm2`, `uwsgi`, `nginx` or `puma`.
    pub(crate) server: &'static str,
    /// How, in words.
    pub(crate) how: String,
    /// The config file and line that set it, when a file does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<u32>,
    /// The setting as written (`-i max`, `processes = %k`, `worker_processes auto;`).
    pub(crate) setting: String,
    /// The setting that fixes it, in the same place (`-i 2`, `processes = 2`).
    pub(crate) fix: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct WorkerFacts {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) host_cpu: Vec<HostCpuWorkers>,
    /// Counts memlint could not settle (a variable a script sets, a config it cannot read).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) undecided: Vec<String>,
}

impl WorkerFacts {
    pub(crate) fn is_empty(&self) -> bool {
        self.host_cpu.is_empty() && self.undecided.is_empty()
    }
}

/// The count the fixes propose: a placeholder the rule's doc explains.
pub(crate) const COUNT: u32 = 2;

/// The argument vectors of the entrypoint: each step's and the program's.
fn argvs(entry: &Entrypoint) -> Vec<&[String]> {
    let mut out: Vec<&[String]> = entry.steps.iter().map(|s| s.argv.as_slice()).collect();
    out.push(&entry.argv);
    out.push(&entry.args);
    out
}

pub(crate) fn derive(tree: &FileTree, env: &Env, entry: &Entrypoint) -> WorkerFacts {
    let mut f = WorkerFacts::default();
    let working_dir = entry.working_dir.as_str();
    let mut seen: Vec<&'static str> = Vec::new();
    for argv in argvs(entry) {
        for (i, w) in argv.iter().enumerate() {
            let rest = &argv[i + 1..];
            let server = match base(w) {
                "pm2" | "pm2-runtime" | "pm2-docker" => "pm2",
                "uwsgi" | "uwsgi-core" => "uwsgi",
                "nginx" => "nginx",
                "puma" => "puma",
                "rails" if rest.first().is_some_and(|a| a == "server" || a == "s") => "puma",
                _ => continue,
            };
            if seen.contains(&server) {
                continue;
            }
            seen.push(server);
            let found = match server {
                "pm2" => pm2(tree, rest, working_dir, &mut f.undecided),
                "uwsgi" => uwsgi(tree, env, rest, working_dir, &mut f.undecided),
                "nginx" => nginx(tree, env, rest),
                _ => puma(tree, env, rest, working_dir, &mut f.undecided),
            };
            f.host_cpu.extend(found);
        }
    }
    f
}

/// The text of a config file memlint keeps; `None` when absent or not kept.
fn text(tree: &FileTree, path: &str) -> Option<String> {
    if !tree.keeps(path) {
        return None;
    }
    let c = tree.contents(path)?;
    Some(String::from_utf8_lossy(&c.bytes).into_owned())
}

fn pm2(
    tree: &FileTree,
    args: &[String],
    working_dir: &str,
    undecided: &mut Vec<String>,
) -> Option<HostCpuWorkers> {
    if let Some(n) = flag(args, &["-i", "--instances"]) {
        let from_cpus = n == "max" || n.parse::<i64>().is_ok_and(|v| v <= 0);
        return from_cpus.then(|| HostCpuWorkers {
            server: "pm2",
            how: format!(
                "pm2 -i {n} starts {} in cluster mode",
                if n == "max" || n == "0" {
                    "one process per CPU".to_string()
                } else {
                    format!("one process per CPU less {}", n.trim_start_matches('-'))
                }
            ),
            path: None,
            line: None,
            setting: format!("-i {n}"),
            fix: format!("-i {COUNT}"),
        });
    }
    let file = args.iter().find(|a| is_ecosystem(a))?;
    let path = absolute(file, working_dir);
    let Some(text) = text(tree, &path) else {
        if tree.lookup(&path).ok().flatten().is_some() {
            undecided.push(format!("pm2's ecosystem file {path} is not read"));
        }
        return None;
    };
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let Some(at) = code.find("instances") else {
            continue;
        };
        let value = code[at + "instances".len()..]
            .trim_start_matches(['"', '\'', ' ', '\t'])
            .strip_prefix(':')
            .map(|v| {
                v.trim()
                    .trim_end_matches(',')
                    .trim()
                    .trim_matches(['"', '\''])
                    .to_string()
            });
        let Some(value) = value else { continue };
        let from_cpus = value == "max" || value.parse::<i64>().is_ok_and(|v| v <= 0);
        if from_cpus {
            return Some(HostCpuWorkers {
                server: "pm2",
                how: format!("pm2 starts `instances: {value}` processes: one per CPU"),
                path: Some(path),
                line: Some(n as u32 + 1),
                setting: line.trim().to_string(),
                fix: format!("instances: {COUNT},"),
            });
        }
    }
    None
}

/// `%k`: uWSGI's magic variable for the CPU cores it detects.
fn is_cores(v: &str) -> bool {
    v.trim() == "%k"
}

fn uwsgi(
    tree: &FileTree,
    env: &Env,
    args: &[String],
    working_dir: &str,
    undecided: &mut Vec<String>,
) -> Option<HostCpuWorkers> {
    const OPTIONS: &[&str] = &["--processes", "--workers", "-p"];
    if let Some(v) = flag(args, OPTIONS) {
        return is_cores(&v).then(|| HostCpuWorkers {
            server: "uwsgi",
            how: "uWSGI's `%k` is the number of CPU cores it detects".into(),
            path: None,
            line: None,
            setting: format!("--processes {v}"),
            fix: format!("--processes {COUNT}"),
        });
    }
    for var in ["UWSGI_PROCESSES", "UWSGI_WORKERS"] {
        if let Some(v) = env.non_empty(var) {
            return is_cores(v).then(|| HostCpuWorkers {
                server: "uwsgi",
                how: "uWSGI's `%k` is the number of CPU cores it detects".into(),
                path: None,
                line: None,
                setting: format!("{var}={v}"),
                fix: format!("ENV {var}={COUNT}"),
            });
        }
        if let Some(why) = env.first_undecided(&[var]) {
            undecided.push(why);
            return None;
        }
    }
    let file = flag(args, &["--ini"]).or_else(|| args.iter().find(|a| a.ends_with(".ini")).cloned())?;
    let path = absolute(&file, working_dir);
    let text = text(tree, &path)?;
    let mut in_uwsgi = true;
    let mut found = None;
    for (n, line) in text.lines().enumerate() {
        let l = line.trim();
        if let Some(section) = l.strip_prefix('[') {
            in_uwsgi = section.trim_end_matches(']').trim() == "uwsgi";
            continue;
        }
        let Some((k, v)) = l.split_once('=') else { continue };
        if in_uwsgi && matches!(k.trim(), "processes" | "workers") {
            found = is_cores(v).then(|| HostCpuWorkers {
                server: "uwsgi",
                how: "uWSGI's `%k` is the number of CPU cores it detects".into(),
                path: Some(path.clone()),
                line: Some(n as u32 + 1),
                setting: l.to_string(),
                fix: format!("{} = {COUNT}", k.trim()),
            });
        }
    }
    found
}

fn nginx(tree: &FileTree, env: &Env, args: &[String]) -> Option<HostCpuWorkers> {
    let path = flag(args, &["-c"]).unwrap_or_else(|| "/etc/nginx/nginx.conf".into());
    // The official image's entrypoint fits the count to the CPU quota when asked to.
    let autotune = tree.lookup(NGINX_AUTOTUNE_SCRIPT).ok().flatten().is_some();
    if autotune && env.var(NGINX_AUTOTUNE_VARIABLE).is_some() {
        return None;
    }
    let text = text(tree, &path)?;
    // `-g "worker_processes N;"` on the command line sets it instead.
    if flag(args, &["-g"]).is_some_and(|g| g.contains("worker_processes")) {
        return None;
    }
    let mut depth = 0usize;
    for (n, line) in text.lines().enumerate() {
        let code = line.split('#').next().unwrap_or("");
        let words: Vec<&str> = code
            .split(|c: char| c.is_whitespace() || c == ';')
            .filter(|w| !w.is_empty())
            .collect();
        if depth == 0 && words.first() == Some(&"worker_processes") && words.get(1) == Some(&"auto") {
            let how = if autotune {
                format!("`worker_processes auto` starts one worker per CPU of the node; the image's {NGINX_AUTOTUNE_SCRIPT} would fit it to the CPU limit, but {NGINX_AUTOTUNE_VARIABLE} is not set")
            } else {
                "`worker_processes auto` starts one worker per CPU of the node".to_string()
            };
            return Some(HostCpuWorkers {
                server: "nginx",
                how,
                path: Some(path.clone()),
                line: Some(n as u32 + 1),
                setting: code.trim().to_string(),
                fix: if autotune {
                    format!("ENV {NGINX_AUTOTUNE_VARIABLE}=1")
                } else {
                    format!("worker_processes {COUNT};")
                },
            });
        }
        depth += code.matches('{').count();
        depth = depth.saturating_sub(code.matches('}').count());
    }
    None
}

/// The `ENV` names a Ruby line reads (`ENV["X"]`, `ENV.fetch("X")`, `ENV.fetch('X', …)`).
fn ruby_env_reads(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("ENV") {
        let after = &rest[at + 3..];
        let after = after
            .strip_prefix(".fetch(")
            .or_else(|| after.strip_prefix('['))
            .unwrap_or("");
        let after = after.trim_start();
        if let Some(q) = after.chars().next().filter(|c| *c == '"' || *c == '\'') {
            if let Some(end) = after[1..].find(q) {
                out.push(after[1..1 + end].to_string());
            }
        }
        rest = &rest[at + 3..];
    }
    out
}

fn puma(
    tree: &FileTree,
    env: &Env,
    args: &[String],
    working_dir: &str,
    undecided: &mut Vec<String>,
) -> Option<HostCpuWorkers> {
    // `-w N` on the command line wins over the config.
    if flag(args, &["-w", "--workers"]).is_some() {
        return None;
    }
    let path = match flag(args, &["-C", "--config"]) {
        Some(p) => absolute(&p, working_dir),
        None => absolute("config/puma.rb", working_dir),
    };
    let text = text(tree, &path)?;
    const COUNTERS: &[&str] = &["Etc.nprocessors", "physical_processor_count", "processor_count"];
    // Variables assigned from the CPU count (`worker_count = Integer(ENV.fetch(…) { … })`).
    let mut assigned: Vec<(String, u32, String)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split('#').next().unwrap_or("").trim();
        if !COUNTERS.iter().any(|c| code.contains(c)) {
            continue;
        }
        let assignment = code.split_once('=').filter(|(name, value)| {
            let name = name.trim();
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !value.starts_with(['=', '~'])
        });
        if let Some((name, _)) = assignment {
            assigned.push((name.trim().to_string(), n as u32 + 1, code.to_string()));
        }
    }
    for (n, line) in text.lines().enumerate() {
        let code = line.split('#').next().unwrap_or("").trim();
        let Some(arg) = code.strip_prefix("workers").filter(|a| a.starts_with([' ', '('])) else {
            continue;
        };
        let (line_no, source) = if COUNTERS.iter().any(|c| arg.contains(c)) {
            (n as u32 + 1, code.to_string())
        } else if let Some((_, l, src)) = assigned.iter().find(|(name, _, _)| {
            arg.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .any(|w| w == name)
        }) {
            (*l, src.clone())
        } else {
            continue;
        };
        let reads = ruby_env_reads(&source);
        if reads.iter().any(|v| env.non_empty(v).is_some()) {
            return None;
        }
        if let Some(why) = env.first_undecided(&reads.iter().map(String::as_str).collect::<Vec<_>>()) {
            undecided.push(why);
            return None;
        }
        let fix = match reads.first() {
            Some(var) => format!("ENV {var}={COUNT}"),
            None => format!("workers Integer(ENV.fetch(\"WEB_CONCURRENCY\") {{ {COUNT} }})"),
        };
        return Some(HostCpuWorkers {
            server: "puma",
            how: format!(
                "puma's workers come from the CPU count{}",
                if reads.is_empty() {
                    String::new()
                } else {
                    format!(" unless {} is set", reads.join(" or "))
                }
            ),
            path: Some(path),
            line: Some(line_no),
            setting: source,
            fix,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    fn workers(t: TestImage) -> WorkerFacts {
        t.facts().workers
    }

    #[test]
    fn pm2_instances_from_the_cpus() {
        let t = TestImage::new().glibc().node("20.11.1");
        let w = workers(t.clone().cmd(&["pm2-runtime", "app.js", "-i", "max"]));
        assert_eq!(w.host_cpu[0].setting, "-i max");
        assert_eq!(w.host_cpu[0].fix, "-i 2");
        assert!(
            workers(t.clone().cmd(&["pm2-runtime", "app.js", "-i", "-1"]))
                .host_cpu
                .len()
                == 1
        );
        assert!(workers(t.clone().cmd(&["pm2-runtime", "app.js", "-i", "4"]))
            .host_cpu
            .is_empty());
        let eco = "module.exports = {\n  apps: [{\n    name: 'api',\n    script: 'app.js',\n    instances: \"max\",\n    exec_mode: 'cluster'\n  }]\n}\n";
        let w = workers(
            t.clone()
                .file("/app/ecosystem.config.js", eco)
                .working_dir("/app")
                .cmd(&["pm2-runtime", "start", "ecosystem.config.js"]),
        );
        assert_eq!(
            (w.host_cpu[0].path.as_deref(), w.host_cpu[0].line),
            (Some("/app/ecosystem.config.js"), Some(5))
        );
        let fixed = eco.replace("\"max\"", "2");
        let w = workers(
            t.file("/app/ecosystem.config.js", &fixed)
                .working_dir("/app")
                .cmd(&["pm2-runtime", "start", "ecosystem.config.js"]),
        );
        assert!(w.host_cpu.is_empty(), "{w:?}");
    }

    #[test]
    fn uwsgi_nginx_and_puma() {
        let t = TestImage::new().glibc();
        let w = workers(t.clone().cmd(&["uwsgi", "--http", ":8000", "--processes", "%k"]));
        assert_eq!(w.host_cpu[0].server, "uwsgi");
        let w = workers(
            t.clone()
                .file("/app/uwsgi.ini", "[uwsgi]\nmodule = app\nprocesses = %k\n")
                .cmd(&["uwsgi", "--ini", "/app/uwsgi.ini"]),
        );
        assert_eq!(
            (w.host_cpu[0].line, w.host_cpu[0].fix.as_str()),
            (Some(3), "processes = 2")
        );
        let conf = "user www-data;\nworker_processes auto;\nevents {\n  worker_connections 768;\n}\n";
        let n = t
            .clone()
            .file("/etc/nginx/nginx.conf", conf)
            .cmd(&["nginx", "-g", "daemon off;"]);
        let w = workers(n.clone());
        assert_eq!((w.host_cpu[0].server, w.host_cpu[0].line), ("nginx", Some(2)));
        // The official image's autotune script, asked for: silent.
        let n = n.file(NGINX_AUTOTUNE_SCRIPT, "#!/bin/sh\n");
        assert_eq!(
            workers(n.clone()).host_cpu[0].fix,
            format!("ENV {NGINX_AUTOTUNE_VARIABLE}=1")
        );
        assert!(workers(n.env(&[&format!("{NGINX_AUTOTUNE_VARIABLE}=1")]))
            .host_cpu
            .is_empty());
        let puma_rb = "require \"concurrent-ruby\"\nworker_count = Integer(ENV.fetch(\"WEB_CONCURRENCY\") { Concurrent.physical_processor_count })\nworkers worker_count if worker_count > 1\n";
        let p = t
            .file("/rails/config/puma.rb", puma_rb)
            .working_dir("/rails")
            .cmd(&["./bin/rails", "server"]);
        let w = workers(p.clone());
        assert_eq!(
            (w.host_cpu[0].line, w.host_cpu[0].fix.as_str()),
            (Some(2), "ENV WEB_CONCURRENCY=2")
        );
        assert!(workers(p.env(&["WEB_CONCURRENCY=2"])).host_cpu.is_empty());
    }
}
