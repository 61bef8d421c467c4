use super::{Outcome, Rule};
use crate::facts::python::{CpuSizedWorkers, PythonServer, WorkerCount};
use crate::facts::workers::HostCpuWorkers;
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Finding, Severity};

pub(crate) const RULE: Rule = Rule {
    id: "worker-count-host-cpus",
    severity: Severity::Warning,
    title: "A worker count taken from the node's CPU count: each worker a full copy of the app",
    doc: include_str!("../../rules/worker-count-host-cpus.md"),
    tags: &["memory", "configuration", "python", "node", "ruby"],
    check,
    // The command (or the script) that starts the server.
    anchor: Anchor::Command,
};

/// The count the fixes propose: a placeholder the doc explains (as many as the container's
/// CPU limit and memory hold).
const COUNT: u32 = 2;

fn check(f: &Facts) -> Outcome {
    let mut findings: Vec<Finding> = f.workers.host_cpu.iter().map(other_server).collect();
    let mut undecided: Vec<String> = f.workers.undecided.clone();
    let servers = f.python.as_ref().map(|py| py.servers.as_slice()).unwrap_or_default();
    for server in servers {
        let Some(cpu) = &server.workers_from_cpus else {
            continue;
        };
        match &cpu.effective {
            WorkerCount::SetBy { .. } => continue,
            WorkerCount::Undecided(why) => {
                undecided.push(format!("{}: {why}", server.name));
                continue;
            }
            WorkerCount::FromCpus => {}
        }
        if !cpu.maybe_set_in.is_empty() {
            undecided.push(format!(
                "{} may take its worker count from settings memlint does not evaluate: {}",
                server.name,
                cpu.maybe_set_in.join(", ")
            ));
            continue;
        }
        findings.push(finding(f, server, cpu));
    }
    match (findings.is_empty(), undecided.is_empty()) {
        (true, false) => Outcome::undecided(undecided.join("; ")),
        _ => Outcome::from(findings),
    }
}

/// pm2, uWSGI, nginx or puma: a warning, a note for nginx (its workers are small and
/// event-driven, one per CPU is its design, but past the CPU limit they only wait for CPU and
/// each holds its buffers and connections).
fn other_server(w: &HostCpuWorkers) -> Finding {
    let at = match (&w.path, w.line) {
        (Some(path), Some(line)) => format!(" ({path} line {line})"),
        _ => String::new(),
    };
    let (severity, message) = match w.server {
        "nginx" => (
            Severity::Note,
            format!("nginx starts one worker process per CPU of the node, not of the container{at}: on a 64-core node 64 workers for a container limited to one CPU"),
        ),
        server => (
            Severity::Warning,
            format!("{server} starts one worker process per CPU of the node, not of the container{at}: each a full copy of the app (20 processes on a 20-core node)"),
        ),
    };
    let evidence = match &w.path {
        Some(path) => Evidence::naming(format!("{}: {}", w.setting, w.how), [path.clone()]),
        None => Evidence::plain(format!("{}: {}", w.setting, w.how)),
    };
    let place = match (&w.path, w.line) {
        (Some(path), Some(line)) if !w.fix.starts_with("ENV ") => format!("# in {path} line {line}:\n"),
        _ if !w.fix.starts_with("ENV ") => format!("# in the command, instead of `{}`:\n", w.setting),
        _ => String::new(),
    };
    RULE.finding(message)
        .severity(severity)
        .evidence(evidence)
        .fix(format!(
            "{place}{}\n# as many workers as the container's CPU limit and memory hold",
            w.fix
        ))
}

fn finding(f: &Facts, server: &PythonServer, cpu: &CpuSizedWorkers) -> Finding {
    let mut evidence = Vec::new();
    let (message, fix) = match (&cpu.path, cpu.line) {
        (Some(path), Some(line)) => {
            let command = &cpu.command;
            evidence.push(Evidence::naming(
                format!("{path} line {line}: {}, for {command}", cpu.how),
                [path.clone()],
            ));
            let message = format!(
                "gunicorn takes its worker count from the CPU count in {path} line {line}: in a container that is the node's CPUs, not the container's limit (the usual 2 × CPUs + 1 is 129 workers on a 64-core node), each worker a full copy of the app"
            );
            // WEB_CONCURRENCY when the config reads it: the name gunicorn and PaaS tools know.
            let preferred = cpu
                .overridden_by
                .iter()
                .find(|v| *v == "WEB_CONCURRENCY")
                .or(cpu.overridden_by.first());
            let fix = match preferred {
                // The config reads a variable the image does not set: set it.
                Some(var) => {
                    evidence.push(Evidence::plain(format!(
                        "{path} reads {} for the count; the image does not set {}",
                        cpu.overridden_by.join(", "),
                        if cpu.overridden_by.len() == 1 { "it" } else { "any of them" }
                    )));
                    format!(
                        "ENV {var}={COUNT}\n# as many workers as the container's CPU limit and memory hold"
                    )
                }
                // It assigns the count unconditionally: only the command line or
                // GUNICORN_CMD_ARGS (read after the config file) override it.
                None => {
                    if let Some(e) = f.env.evidence("WEB_CONCURRENCY") {
                        evidence.push(Evidence::plain(format!(
                            "{} is set, but {path} assigns workers without reading it: gunicorn ignores it",
                            e.text()
                        )));
                    }
                    // Keep what the image already passes there, quoted for a Dockerfile line.
                    let args = match f.env.non_empty("GUNICORN_CMD_ARGS") {
                        Some(a) => format!("{} --workers={COUNT}", a.replace('\\', "\\\\").replace('"', "\\\"")),
                        None => format!("--workers={COUNT}"),
                    };
                    format!(
                        "ENV GUNICORN_CMD_ARGS=\"{args}\"\n# gunicorn reads GUNICORN_CMD_ARGS after {path}; or, in {path} line {line}:\n# workers = int(os.environ.get(\"WEB_CONCURRENCY\", {COUNT}))"
                    )
                }
            };
            (message, fix)
        }
        _ => {
            evidence.push(Evidence::plain(cpu.how.clone()));
            let fix = match cpu.overridden_by.first() {
                Some(var) => {
                    evidence.push(Evidence::plain(format!(
                        "{} is not set",
                        cpu.overridden_by.join(", ")
                    )));
                    format!(
                        "ENV {var}={COUNT}\n# or --concurrency={COUNT} on the worker's command; as many as the container's CPU limit and memory hold"
                    )
                }
                // Celery 4: only the command line (or the app's settings) sets it.
                None => format!(
                    "# add --concurrency={COUNT} to the worker's command (Celery 4 reads no CELERY_WORKER_* variables); as many as the container's CPU limit and memory hold"
                ),
            };
            (
                format!(
                    "{} starts one worker process per CPU of the node, not of the container (20 processes on a 20-core node), each a full copy of the app",
                    server.name
                ),
                fix,
            )
        }
    };
    RULE.finding(message).evidence_all(evidence).fix(fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use crate::platform::Platform;
    use crate::tree::{EntryKind, FileTree, LayerEntry};

    /// Facts of an image with CPython's interpreter, `files`, `env` and command `cmd`.
    fn facts(files: Vec<LayerEntry>, env: &[&str], cmd: &[&str]) -> Facts {
        let mut entries = vec![LayerEntry {
            mode: 0o755,
            ..LayerEntry::new("usr/bin/python3.11", EntryKind::File)
        }];
        entries.extend(files);
        let config = serde_json::json!({
            "architecture": "amd64", "os": "linux",
            "config": {"Env": env, "Cmd": cmd, "WorkingDir": "/app"},
            "rootfs": {"type": "layers", "diff_ids": []}
        });
        let config: oci_spec::image::ImageConfiguration = serde_json::from_value(config).unwrap();
        let interests = crate::facts::interests().union(crate::facts::interests_for(&config));
        let tree = FileTree::from_entries(entries).unwrap().keeping(interests);
        crate::facts::derive(&Image::unlayered("t", "t", Platform::linux_amd64(), Some(config), tree))
    }

    fn script(lines: &str) -> LayerEntry {
        LayerEntry {
            mode: 0o755,
            ..LayerEntry::new("entry.sh", EntryKind::File)
                .with_text(&format!("#!/bin/sh\n{lines}\nexec \"$@\"\n"))
        }
    }

    const CELERY: &[&str] = &["/entry.sh", "celery", "-A", "proj", "worker"];

    #[test]
    fn celery_count_from_env_scripts_and_settings() {
        let o = check(&facts(vec![script(":")], &[], CELERY));
        assert_eq!(o.findings.len(), 1, "{o:?}");
        // A script that exports the count settles it; one it reads at run time leaves it open.
        let o = check(&facts(vec![script("export CELERY_WORKER_CONCURRENCY=2")], &[], CELERY));
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        let o = check(&facts(
            vec![script("export CELERY_WORKER_CONCURRENCY=$(nproc)")],
            &[],
            CELERY,
        ));
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().contains("/entry.sh line 2"));
        // Django settings that name the concurrency: undecided, with the file and line.
        let settings = LayerEntry::new("app/proj/settings/base.py", EntryKind::File)
            .with_text("CELERY_WORKER_CONCURRENCY = env.int('CONCURRENCY', 4)\n");
        let o = check(&facts(vec![script(":"), settings], &[], CELERY));
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().contains("/app/proj/settings/base.py line 1"));
    }

    #[test]
    fn gunicorn_config_reading_a_variable() {
        let conf = LayerEntry::new("app/gunicorn.conf.py", EntryKind::File).with_text(
            "import os, multiprocessing\nworkers = int(os.getenv('WEB_CONCURRENCY', multiprocessing.cpu_count() * 2))\n",
        );
        let cmd = &["python3.11", "-m", "gunicorn", "app:app"];
        let o = check(&facts(vec![conf.clone()], &[], cmd));
        assert_eq!(o.findings.len(), 1, "{o:?}");
        assert_eq!(
            o.findings[0].fix,
            "ENV WEB_CONCURRENCY=2\n# as many workers as the container's CPU limit and memory hold"
        );
        let o = check(&facts(vec![conf], &["WEB_CONCURRENCY=3"], cmd));
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
    }

    #[test]
    fn findings_say_what_sizes_the_workers() {
        let o = check(&facts(vec![script(":")], &[], CELERY));
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            f.message,
            "celery starts one worker process per CPU of the node, not of the container (20 processes on a 20-core node), each a full copy of the app"
        );
        // The variable the worker reads is the fix, and setting it silences the rule.
        let var = f.fix.lines().next().and_then(|l| l.strip_prefix("ENV ")).unwrap_or_default();
        assert!(var.ends_with("=2"), "{}", f.fix);
        let o = check(&facts(vec![script(":")], &[var], CELERY));
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        // No Python at all: nothing to say.
        assert!(check(&crate::facts::testing::TestImage::new().facts()).findings.is_empty());
    }
}
