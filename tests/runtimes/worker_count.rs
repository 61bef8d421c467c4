//! worker-count-host-cpus on images built from real packages (scripts/recipes/python.sh):
//! Celery 5.4 and gunicorn 23 from PyPI with config files as their users write them. The
//! gunicorn claims the rule rests on are checked against gunicorn itself: its wheel (the one
//! the image holds) runs here with `--print-config` and the config file the image holds.

use crate::common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn lint(recipe: &str, extra: &[&str]) -> (Value, Option<i32>) {
    lint_recipe(recipe, extra)
}

fn hits(v: &Value) -> Vec<&Value> {
    findings_of(v, "worker-count-host-cpus")
}

/// The wheels the python recipes unpacked, from the recipe cache (scripts/build-image.sh).
fn wheel(prefix: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cache = std::env::var_os("MEMLINT_IMAGE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".cache"));
    std::fs::read_dir(cache.join("pypi"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} wheel in the recipe cache"))
}

/// The `workers` gunicorn settles on with `config` as its `gunicorn.conf.py` in the working
/// folder and `env`, from its own `--print-config`.
fn gunicorn_workers(config: &Path, env: &[(&str, &str)]) -> u64 {
    require_tool("python3");
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    for w in [wheel("gunicorn-23.0.0-"), wheel("packaging-24.2-")] {
        let ok = Command::new("python3")
            .args(["-m", "zipfile", "-e"])
            .arg(&w)
            .arg(&site)
            .status()
            .unwrap()
            .success();
        assert!(ok, "unzip {}", w.display());
    }
    std::fs::copy(config, dir.path().join("gunicorn.conf.py")).unwrap();
    std::fs::write(
        dir.path().join("hello.py"),
        "def app(environ, start_response):\n    return []\n",
    )
    .unwrap();
    let mut cmd = Command::new("python3");
    cmd.args(["-m", "gunicorn", "--print-config", "hello:app"])
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("PYTHONPATH", &site);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == "workers").then(|| v.trim().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no workers line: {text}"))
}

/// The CPUs Python counts (`os.cpu_count()`, what gunicorn configs call): not Rust's
/// available_parallelism, which honours a CPU quota and affinity.
fn cpus() -> u64 {
    let out = Command::new("python3")
        .args(["-c", "import os; print(os.cpu_count())"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

#[test]
fn celery_worker_without_a_count_and_its_fixed_twin() {
    let (v, code) = lint("python-celery-worker", &[]);
    assert_eq!(code, Some(1), "{v:#}");
    let h = hits(&v);
    assert_eq!(h.len(), 1, "{v:#}");
    assert_eq!(h[0]["severity"], "warning");
    assert!(h[0]["message"]
        .as_str()
        .unwrap()
        .starts_with("celery starts one worker process per CPU of the node"));
    assert!(h[0]["fix"]
        .as_str()
        .unwrap()
        .starts_with("ENV CELERY_WORKER_CONCURRENCY=2\n"));
    let f = inspect_json(&[&build_image("python-celery-worker")]);
    let server = &f["facts"]["python"]["servers"][0];
    assert_eq!(server["name"], "celery");
    assert_eq!(
        server["workers_from_cpus"]["overridden_by"],
        serde_json::json!(["CELERY_WORKER_CONCURRENCY"])
    );
    let (v, code) = lint("python-celery-worker-concurrency", &[]);
    assert!(hits(&v).is_empty(), "{v:#}");
    assert_eq!(code, Some(0));
}

/// The config assigns workers from cpu_count() and the image sets WEB_CONCURRENCY=2, which
/// gunicorn then ignores: memlint says so, and gunicorn agrees. The fix (GUNICORN_CMD_ARGS)
/// is what gunicorn honours.
#[test]
fn gunicorn_config_from_cpu_count_ignores_web_concurrency() {
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/recipes/python/gunicorn-cpu.conf.py");
    let (v, _) = lint("python-gunicorn-cpu-conf", &["--fail-on", "never"]);
    let h = hits(&v);
    assert_eq!(h.len(), 1, "{v:#}");
    let message = h[0]["message"].as_str().unwrap();
    assert!(message.contains("/app/gunicorn.conf.py line 5"), "{message}");
    let evidence = h[0]["evidence"].to_string();
    assert!(
        evidence.contains(
            "WEB_CONCURRENCY=2 is set, but /app/gunicorn.conf.py assigns workers without reading it"
        ),
        "{evidence}"
    );
    let fix = h[0]["fix"].as_str().unwrap();
    assert!(
        fix.starts_with("ENV GUNICORN_CMD_ARGS=\"--workers=2\"\n"),
        "{fix}"
    );
    // gunicorn itself: WEB_CONCURRENCY does not change the count, GUNICORN_CMD_ARGS does.
    assert_eq!(
        gunicorn_workers(&config, &[("WEB_CONCURRENCY", "2")]),
        2 * cpus() + 1
    );
    assert_eq!(
        gunicorn_workers(
            &config,
            &[("WEB_CONCURRENCY", "2"), ("GUNICORN_CMD_ARGS", "--workers=2")]
        ),
        2
    );
    let (v, code) = lint("python-gunicorn-cpu-conf-fixed", &["--fail-on", "warning"]);
    assert!(hits(&v).is_empty(), "{v:#}");
    assert_eq!(code, Some(0), "{v:#}");
}

/// The uvicorn-gunicorn images' config reads WEB_CONCURRENCY: with it unset the count follows
/// the CPUs (at least 2), with it set gunicorn takes it; the fix sets it.
#[test]
fn gunicorn_config_reading_web_concurrency() {
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/recipes/python/gunicorn_conf.py");
    let (v, _) = lint("python-gunicorn-conf-env", &["--fail-on", "never"]);
    let h = hits(&v);
    assert_eq!(h.len(), 1, "{v:#}");
    assert!(h[0]["message"]
        .as_str()
        .unwrap()
        .contains("/gunicorn_conf.py line 28"));
    assert!(h[0]["fix"]
        .as_str()
        .unwrap()
        .starts_with("ENV WEB_CONCURRENCY=2\n"));
    assert_eq!(gunicorn_workers(&config, &[]), cpus().max(2));
    assert_eq!(gunicorn_workers(&config, &[("WEB_CONCURRENCY", "3")]), 3);
}
