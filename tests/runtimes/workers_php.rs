//! Issue #30 on images built from real packages (scripts/recipes/php.sh, workers.sh):
//! `php-workers-exceed-limit` on Debian's php8.2-fpm and apache2 with mod_php,
//! `worker-count-host-cpus` on pm2 (npm), uWSGI, nginx (Debian) and puma (Rails 7.1's
//! config), and `malloc-conf-ineffective` on the polars-runtime-32 wheel from PyPI. Each with
//! its fixed twin, alone and as the container of a manifest; FPM's `${VAR}` expansion checked
//! against `php-fpm8.2 -tt` itself.

use crate::common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn manifest(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/k8s")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The report of the container of `testdata/k8s/MANIFEST` that runs the image of `recipe`.
fn lint_k8s(recipe: &str, manifest_name: &str) -> Value {
    let stand_in = format!("registry.local/app:1={}", build_image(recipe));
    let path = manifest(manifest_name);
    let out = memlint(&[
        "lint",
        "--format",
        "json",
        "--fail-on",
        "never",
        "--k8s",
        &path,
        "--image",
        &stand_in,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    v["reports"][0].clone()
}

fn lint_alone(recipe: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--fail-on", "never"];
    args.extend_from_slice(extra);
    lint_recipe(recipe, &args).0
}

const PHP: &str = "php-workers-exceed-limit";
const WORKERS: &str = "worker-count-host-cpus";
const MALLOC: &str = "malloc-conf-ineffective";

#[test]
fn php_fpm_children_past_the_limit_and_the_fixed_twin() {
    let v = lint_k8s("php-fpm-children", "php-2gi.yaml");
    let hits = findings_of(&v, PHP);
    assert_eq!(hits.len(), 1, "{v:#}");
    let f = hits[0];
    assert_eq!(f["severity"], "warning");
    let message = f["message"].as_str().unwrap();
    assert!(
        message.starts_with("PHP-FPM pool `www` may run 50 workers × memory_limit 256M = 12800 MiB, past the 2Gi limit less 64 MiB (1984 MiB)"),
        "{message}"
    );
    assert!(message.contains("a worst case"), "{message}");
    let fix = f["fix"].as_str().unwrap();
    assert!(
        fix.contains("pm.max_children = 7\npm.max_requests = 500"),
        "{fix}"
    );
    let evidence = f["evidence"].to_string();
    assert!(
        evidence.contains("pm.max_children = 50 at /etc/php/8.2/fpm/pool.d/www.conf line"),
        "{evidence}"
    );
    assert!(
        evidence.contains("memory_limit = 256M at /etc/php/8.2/fpm/php.ini line"),
        "{evidence}"
    );
    // On the manifest's limits.memory line.
    assert_eq!(f["location"]["line"], 18, "{f:#}");
    // What memlint read, as inspect shows it.
    let i = inspect_json(&[&build_image("php-fpm-children")]);
    let pool = &i["facts"]["php"]["servers"][0]["pools"][0];
    assert_eq!(pool["workers"]["count"], 50, "{i:#}");
    assert_eq!(pool["memory_limit"]["bytes"], 256 << 20);
    // The fixed twin under the same limit, and the image alone: silent.
    let v = lint_k8s("php-fpm-children-fixed", "php-2gi.yaml");
    assert!(findings_of(&v, PHP).is_empty(), "{v:#}");
    let v = lint_alone("php-fpm-children", &[]);
    assert!(findings_of(&v, PHP).is_empty(), "{v:#}");
}

/// Debian's php8.2-fpm package, unpacked from the recipe cache.
fn php_fpm_package(dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cache = std::env::var_os("MEMLINT_IMAGE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".cache"));
    let deb = std::fs::read_dir(cache.join("debs/amd64"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("php8.2-fpm_")
        })
        .expect("php8.2-fpm in the recipe cache");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(dir));
    dir.join("usr/sbin/php-fpm8.2")
}

/// `pm.max_children = ${PHP_CHILDREN}`: memlint reads 40 from the image's ENV and says to set
/// the variable; a manifest's value wins; and php-fpm8.2 -tt itself expands it the same way.
#[test]
fn php_fpm_children_from_a_variable_as_fpm_expands_it() {
    let v = lint_k8s("php-fpm-env-children", "php-2gi.yaml");
    let f = findings_of(&v, PHP);
    assert_eq!(f.len(), 1, "{v:#}");
    assert!(
        f[0]["message"].as_str().unwrap().contains("may run 40 workers"),
        "{:#}",
        f[0]
    );
    assert!(
        f[0]["fix"].as_str().unwrap().contains("ENV PHP_CHILDREN=7"),
        "{:#}",
        f[0]
    );
    let v = lint_k8s("php-fpm-env-children", "php-2gi-children-40.yaml");
    let fix = findings_of(&v, PHP)[0]["fix"].as_str().unwrap().to_string();
    assert!(fix.contains("- name: PHP_CHILDREN\n  value: \"7\""), "{fix}");
    let v = lint_k8s("php-fpm-env-children", "php-2gi-children-7.yaml");
    assert!(findings_of(&v, PHP).is_empty(), "{v:#}");

    // The program itself: the image's pool line under `-tt` (which prints the settings it read).
    require_tool("dpkg-deb");
    let dir = tempfile::tempdir().unwrap();
    let fpm = php_fpm_package(&dir.path().join("pkg"));
    let conf = dir.path().join("conf");
    std::fs::create_dir_all(conf.join("pool.d")).unwrap();
    std::fs::write(
        conf.join("php-fpm.conf"),
        format!(
            "[global]\nerror_log = {}/fpm.log\ninclude={}/pool.d/*.conf\n",
            conf.display(),
            conf.display()
        ),
    )
    .unwrap();
    // The recipe's pool line, in a pool FPM accepts without the image's users and folders.
    std::fs::write(
        conf.join("pool.d/www.conf"),
        format!(
            "[www]\nuser = nobody\ngroup = nogroup\nlisten = {}/sock\npm = dynamic\npm.max_children = ${{PHP_CHILDREN}}\npm.start_servers = 1\npm.min_spare_servers = 1\npm.max_spare_servers = 1\n",
            conf.display()
        ),
    )
    .unwrap();
    let tt = |children: &str| {
        let out = Command::new(&fpm)
            .args(["-n", "-tt", "-y"])
            .arg(conf.join("php-fpm.conf"))
            .env("PHP_CHILDREN", children)
            .output()
            .expect("php-fpm8.2 runs");
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout)
    };
    let out = tt("40");
    assert!(out.contains("pm.max_children = 40"), "{out}");
    let out = tt("");
    assert!(out.contains("pm.max_children must be a positive value"), "{out}");
}

#[test]
fn apache_prefork_with_mod_php() {
    let v = lint_k8s("php-apache-prefork", "php-2gi.yaml");
    let f = findings_of(&v, PHP);
    assert_eq!(f.len(), 1, "{v:#}");
    let message = f[0]["message"].as_str().unwrap();
    assert!(
        message.starts_with("Apache prefork (mod_php) may run 150 workers × memory_limit 128M"),
        "{message}"
    );
    let fix = f[0]["fix"].as_str().unwrap();
    assert!(
        fix.contains("MaxRequestWorkers 15\nMaxConnectionsPerChild 500"),
        "{fix}"
    );
    let v = lint_k8s("php-apache-prefork-fixed", "php-2gi.yaml");
    assert!(findings_of(&v, PHP).is_empty(), "{v:#}");
}

#[test]
fn prefixed_jemalloc_in_the_polars_wheel() {
    let v = lint_alone("python-polars-malloc-conf", &[]);
    let f = findings_of(&v, MALLOC);
    assert_eq!(f.len(), 1, "{v:#}");
    assert_eq!(f[0]["severity"], "warning");
    let message = f[0]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "_polars_runtime_32.abi3.so carries a prefixed jemalloc that reads only _RJEM_MALLOC_CONF"
        ),
        "{message}"
    );
    assert!(f[0]["fix"]
        .as_str()
        .unwrap()
        .starts_with("ENV _RJEM_MALLOC_CONF=background_thread:true\nremove `ENV MALLOC_CONF`"));
    let i = inspect_json(&[&build_image("python-polars-malloc-conf")]);
    let p = &i["facts"]["allocator"]["prefixed_jemalloc"][0];
    assert_eq!(p["variable"], "_RJEM_MALLOC_CONF", "{i:#}");
    // The fixed twin, and the variable set by a manifest: silent.
    let v = lint_alone("python-polars-rjem-conf", &[]);
    assert!(findings_of(&v, MALLOC).is_empty(), "{v:#}");
    // The manifest gives the prefixed jemalloc its variable: no warning; the image's
    // MALLOC_CONF is then read by nothing, which is the rule's note.
    let v = lint_k8s("python-polars-malloc-conf", "polars-rjem.yaml");
    let f = findings_of(&v, MALLOC);
    assert_eq!(f.len(), 1, "{v:#}");
    assert_eq!(
        f[0]["message"],
        "MALLOC_CONF is set but no jemalloc is in effect: nothing reads it"
    );
    // As a container with no env of its own: the same warning.
    let v = lint_k8s("python-polars-malloc-conf", "php-2gi.yaml");
    assert_eq!(findings_of(&v, MALLOC).len(), 1, "{v:#}");
    // MALLOC_CONF added by a manifest while the image sets _RJEM_MALLOC_CONF: nothing to fix
    // for the prefixed jemalloc (the note about MALLOC_CONF itself, which nothing reads, stays).
    let v = lint_k8s("python-polars-rjem-conf", "polars-malloc-conf.yaml");
    let f = findings_of(&v, MALLOC);
    assert!(f.iter().all(|f| f["severity"] == "note"), "{v:#}");
}

/// The marker survives the layer cache: a second run reads the layer from the cache and
/// reports the same.
#[test]
fn prefixed_jemalloc_read_back_from_the_layer_cache() {
    let image = build_image("python-polars-malloc-conf");
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().to_str().unwrap();
    let run = || {
        let out = memlint(&[
            "lint",
            "--format",
            "json",
            "--fail-on",
            "never",
            "--cache-dir",
            dir,
            &image,
        ]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        findings_of(&v, MALLOC)
            .iter()
            .map(|f| f["message"].clone())
            .collect::<Vec<_>>()
    };
    let cold = run();
    assert_eq!(cold.len(), 1);
    assert_eq!(run(), cold);
}

#[test]
fn servers_that_count_the_nodes_cpus() {
    // (recipe, fixed twin, severity, text of the fix)
    for (broken, fixed, severity, fix) in [
        (
            "pm2-instances-max",
            "pm2-instances-fixed",
            "warning",
            "instances: 2,",
        ),
        ("pm2-i-max", "pm2-instances-fixed", "warning", "-i 2"),
        (
            "uwsgi-processes-cores",
            "uwsgi-processes-fixed",
            "warning",
            "processes = 2",
        ),
        ("nginx-auto", "nginx-two-workers", "note", "worker_processes 2;"),
        (
            "puma-processor-count",
            "puma-web-concurrency",
            "warning",
            "ENV WEB_CONCURRENCY=2",
        ),
    ] {
        let v = lint_alone(broken, &[]);
        let f = findings_of(&v, WORKERS);
        assert_eq!(f.len(), 1, "{broken}: {v:#}");
        assert_eq!(f[0]["severity"], severity, "{broken}");
        assert!(
            f[0]["fix"].as_str().unwrap().contains(fix),
            "{broken}: {:#}",
            f[0]
        );
        let v = lint_alone(fixed, &[]);
        assert!(findings_of(&v, WORKERS).is_empty(), "{fixed}: {v:#}");
        // As a container: the same, with or without a limit.
        let v = lint_k8s(broken, "php-2gi.yaml");
        assert_eq!(findings_of(&v, WORKERS).len(), 1, "{broken} under --k8s: {v:#}");
    }
    // puma: the manifest sets the variable the config reads.
    let v = lint_k8s("puma-processor-count", "web-concurrency-2.yaml");
    assert!(findings_of(&v, WORKERS).is_empty(), "{v:#}");
}

/// A hostile FPM config: 64 pool files of 256 KiB, each a run of `[pN]` sections and settings
/// memlint does not read, included from php-fpm.conf. memlint reads at most 256 pools and keeps
/// only the settings it reads: the run ends within 30 s and 256 MiB (RSS, and an address-space
/// cap set with `prlimit`), and says that it stopped.
#[test]
fn a_hostile_fpm_config_is_read_within_bounds() {
    use common::measure::run_jailed;
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let mut layer = LayerSpec::new(Comp::Gzip)
        .exe("usr/sbin/php-fpm8.2", b"not a script")
        .file(
            "etc/php/8.2/fpm/php-fpm.conf",
            b"[global]\ninclude=/etc/php/8.2/fpm/pool.d/*.conf\n",
        );
    for f in 0..64 {
        let mut text = String::new();
        let mut i = 0;
        while text.len() < 256 * 1024 - 64 {
            text.push_str(&format!("[p{f}x{i}]\npm.max_children = 1\nlisten = /run/p{i}\n"));
            i += 1;
        }
        layer = layer.file(&format!("etc/php/8.2/fpm/pool.d/p{f}.conf"), text.as_bytes());
    }
    let mut spec = ImageSpec::new("amd64").layer(layer);
    spec.cmd = Some(vec!["/usr/sbin/php-fpm8.2".into()]);
    let root = dir.path().join("img");
    write_oci_dir(&root, &spec, "latest");
    let image = format!("oci-dir:{}:latest", root.display());
    let wall = Duration::from_secs(30);
    let run = run_jailed(&["inspect", "--format", "json", &image], &[], None, wall);
    assert_eq!(run.code(), Some(0), "{}", run.err());
    assert!(run.peak_kib < 256 * 1024, "peak RSS {} KiB", run.peak_kib);
    assert!(run.elapsed < wall, "{:?}", run.elapsed);
    let v = run.json();
    let server = &v["facts"]["php"]["servers"][0];
    assert_eq!(server["pools"].as_array().unwrap().len(), 255, "{server:#}");
    assert!(
        server["undecided"].to_string().contains("more than 256 pools"),
        "{server:#}"
    );
    // The same under a hard cap on address space: an allocation past it aborts.
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new("prlimit")
        .arg(format!("--as={}", 2u64 << 30))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_memlint"))
        .args(["inspect", "--format", "json", &image])
        .env("MEMLINT_CACHE_DIR", cache.path())
        .output()
        .expect("prlimit (util-linux) runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
