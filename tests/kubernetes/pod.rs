//! The pod's own memory (issue #31) on images built from real packages: Debian's PostgreSQL 15,
//! torch's core metadata from PyPI, Debian's chromium with chromium-driver and
//! python3-selenium, Puppeteer from npm, and manifests as people write them. Each finding is
//! placed on the manifest line the issue names, in text, JSON, SARIF and GitHub output.

use crate::common;

use common::*;
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const RULES: [&str; 5] = [
    "dev-shm-too-small",
    "emptydir-memory-unbounded",
    "heap-auto-without-limit",
    "es-memory-lock-k8s",
    "postgres-huge-pages",
];

fn manifest(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/k8s")
        .join(name)
}

/// `lint --k8s MANIFEST --image registry.local/app:1=RECIPE` in `format`, with its output.
fn lint_k8s(recipe: &str, manifest_path: &Path, format: &str) -> Output {
    let stand_in = format!("registry.local/app:1={}", build_image(recipe));
    memlint(&[
        "lint",
        "--fail-on",
        "never",
        "--format",
        format,
        "--k8s",
        manifest_path.to_str().unwrap(),
        "--image",
        &stand_in,
    ])
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

/// The one container report of a `--k8s` JSON run.
fn report(recipe: &str, manifest_name: &str) -> Value {
    let v = json_of(&lint_k8s(recipe, &manifest(manifest_name), "json"));
    let reports = v["reports"].as_array().expect("--k8s reports");
    assert_eq!(reports.len(), 1, "one container: {v:#}");
    reports[0].clone()
}

/// The 1-based line of the first line of `file` that holds `needle` after line `after`.
fn line_of(file: &Path, needle: &str, after: usize) -> u64 {
    let text = fs::read_to_string(file).unwrap();
    let i = text
        .lines()
        .enumerate()
        .skip(after)
        .find(|(_, l)| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle} not in {}", file.display()))
        .0;
    i as u64 + 1
}

/// Every output format puts the finding of `rule` on `line`.
fn placed_on(recipe: &str, manifest_name: &str, rule: &str, line: u64, what: &str) {
    let path = manifest(manifest_name);
    let r = report(recipe, manifest_name);
    let f = findings_of(&r, rule);
    assert_eq!(f.len(), 1, "{rule}: {:#}", r["findings"]);
    assert_eq!(f[0]["location"]["line"], line, "{rule} JSON: {:#}", f[0]);
    assert_eq!(f[0]["location"]["instruction"], what, "{rule} JSON: {:#}", f[0]);
    let text = String::from_utf8_lossy(&lint_k8s(recipe, &path, "text").stdout).into_owned();
    // Text names the manifest as the report does: relative to the repository.
    let at = format!("testdata/k8s/{manifest_name}:{line}: {what}");
    assert!(text.contains(&at), "{rule} text: no `{at}` in {text}");
    let sarif = json_of(&lint_k8s(recipe, &path, "sarif"));
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let result = results
        .iter()
        .find(|x| x["ruleId"] == rule)
        .unwrap_or_else(|| panic!("{rule} not in SARIF"));
    assert_eq!(
        result["locations"][0]["physicalLocation"]["region"]["startLine"], line,
        "{rule} SARIF"
    );
    let github = String::from_utf8_lossy(&lint_k8s(recipe, &path, "github").stdout).into_owned();
    let annotation = github
        .lines()
        .find(|l| l.contains(&format!("title={rule}")) || l.contains(rule))
        .unwrap_or_else(|| panic!("{rule} not in {github}"));
    assert!(
        annotation.contains(&format!(",line={line},")),
        "{rule} GitHub: {annotation}"
    );
}

#[test]
fn postgres_15_in_a_statefulset_without_dshm_reports_the_volume_to_add_on_its_container() {
    let path = manifest("postgres-statefulset.yaml");
    let image_line = line_of(&path, "image: registry.local/app:1", 0);
    placed_on(
        "postgres-15",
        "postgres-statefulset.yaml",
        "dev-shm-too-small",
        image_line,
        "image: registry.local/app:1",
    );
    let r = report("postgres-15", "postgres-statefulset.yaml");
    let f = findings_of(&r, "dev-shm-too-small")[0];
    assert_eq!(f["severity"], "warning");
    let fix = f["fix"].as_str().unwrap();
    for needle in [
        "- name: dshm",
        "mountPath: /dev/shm",
        "medium: Memory",
        "sizeLimit: 1Gi",
        "memory: 3Gi   # 2Gi + 1Gi for /dev/shm",
    ] {
        assert!(fix.contains(needle), "no `{needle}` in {fix}");
    }
    let evidence = f["evidence"].to_string();
    assert!(
        evidence.contains("PostgreSQL 15 at /usr/lib/postgresql/15/bin/postgres"),
        "{evidence}"
    );
    // The data's volumeClaimTemplate is mounted, and is no memory.
    let mounts = r["facts"]["container"]["mounts"].as_array().unwrap();
    assert_eq!(mounts[0]["volume"], "data");
    assert_eq!(mounts[0]["memory_backed"], false);
    assert_eq!(mounts[0]["volume_line"], Value::Null);
    assert_eq!(mounts[0]["mount_line"], line_of(&path, "- name: data", 0));
    assert_eq!(r["facts"]["memory"]["dev_shm"]["from"], "runtime_default");
    // huge_pages is left at try, and no hugepages-2Mi is requested.
    assert_eq!(findings_of(&r, "postgres-huge-pages").len(), 1);
    assert!(findings_of(&r, "emptydir-memory-unbounded").is_empty());
}

#[test]
fn the_dshm_twin_reports_neither_dev_shm_nor_the_emptydir() {
    let r = report("postgres-15", "postgres-statefulset-dshm.yaml");
    for rule in ["dev-shm-too-small", "emptydir-memory-unbounded"] {
        assert!(findings_of(&r, rule).is_empty(), "{rule}: {:#}", r["findings"]);
    }
    let shm = &r["facts"]["memory"]["dev_shm"];
    assert_eq!(shm["bytes"], 1u64 << 30, "{shm}");
    assert_eq!(shm["from"], "memory_volume");
}

#[test]
fn an_operator_rendering_that_mounts_shm_itself_is_silent_on_dev_shm_but_not_unbounded() {
    let path = manifest("postgres-operator-pod.yaml");
    let volume_line = line_of(&path, "- name: shm", line_of(&path, "volumes:", 0) as usize);
    placed_on(
        "postgres-15",
        "postgres-operator-pod.yaml",
        "emptydir-memory-unbounded",
        volume_line,
        "volume: shm",
    );
    let r = report("postgres-15", "postgres-operator-pod.yaml");
    assert!(
        findings_of(&r, "dev-shm-too-small").is_empty(),
        "{:#}",
        r["findings"]
    );
}

#[test]
fn a_deployment_whose_memory_emptydir_has_no_size_limit_reports_on_the_volume_line() {
    let path = manifest("cache-emptydir.yaml");
    let volume_line = line_of(&path, "- name: cache", line_of(&path, "volumes:", 0) as usize);
    placed_on(
        "glibc",
        "cache-emptydir.yaml",
        "emptydir-memory-unbounded",
        volume_line,
        "volume: cache",
    );
    let r = report("glibc", "cache-emptydir-sized.yaml");
    assert!(findings_of(&r, "emptydir-memory-unbounded").is_empty());
    let mount = &r["facts"]["container"]["mounts"][0];
    assert_eq!(mount["read_only"], false);
    assert_eq!(mount["sub_path"], Value::Null);
}

/// The server's own reading of `dynamic_shared_memory_type` and `huge_pages` (`postgres -C`, run
/// from Debian's package as a user other than root, which it requires) agrees with memlint's,
/// for the package's defaults and with `-c` arguments.
#[test]
fn postgres_reads_its_shared_memory_settings_as_memlint_does() {
    require_tool("dpkg-deb");
    require_tool("setpriv");
    let deb = debian_package("postgresql-15");
    let root = tempfile::tempdir().unwrap();
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(root.path()));
    let postgres = root.path().join("usr/lib/postgresql/15/bin/postgres");
    let data = root.path().join("data");
    fs::create_dir_all(&data).unwrap();
    // initdb copies the sample into a new data folder.
    fs::copy(
        root.path().join("usr/share/postgresql/15/postgresql.conf.sample"),
        data.join("postgresql.conf"),
    )
    .unwrap();
    run(Command::new("chown").args(["-R", "65534:65534"]).arg(root.path()));
    let ask = |name: &str, extra: &[&str]| -> String {
        let out = run(Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&postgres)
            .arg("-D")
            .arg(&data)
            .args(extra)
            .args(["-C", name]));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(ask("dynamic_shared_memory_type", &[]), "posix");
    assert_eq!(ask("huge_pages", &[]), "try");
    assert_eq!(
        ask(
            "dynamic_shared_memory_type",
            &["-c", "dynamic_shared_memory_type=mmap"]
        ),
        "mmap"
    );
    assert_eq!(ask("huge_pages", &["-c", "huge_pages=off"]), "off");
    // memlint: the defaults (no setting in the sample), and the same arguments.
    let facts = |recipe: &str| lint_recipe(recipe, &["--fail-on", "never"]).0["facts"]["postgres"].clone();
    let defaults = facts("postgres-15");
    assert_eq!(
        defaults["config"],
        "/usr/share/postgresql/15/postgresql.conf.sample"
    );
    assert_eq!(defaults["settings"], serde_json::json!([]), "{defaults:#}");
    let set = facts("postgres-15-mmap");
    let value = |name: &str| {
        set["settings"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|s| s["name"] == name)
            .map(|s| s["value"].as_str().unwrap().to_string())
    };
    assert_eq!(value("dynamic_shared_memory_type").as_deref(), Some("mmap"));
    assert_eq!(value("huge_pages").as_deref(), Some("off"));
}

/// The `.deb` of a Debian package of the image cache's `debs/amd64` (where
/// scripts/build-image.sh keeps them), downloaded there with `apt-get download` when missing.
fn debian_package(name: &str) -> PathBuf {
    let cache = std::env::var("MEMLINT_IMAGE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache"));
    let dir = cache.join("debs/amd64");
    fs::create_dir_all(&dir).unwrap();
    let find = || {
        fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{name}_")) && n.ends_with("_amd64.deb"))
        })
    };
    if let Some(deb) = find() {
        return deb;
    }
    require_tool("apt-get");
    run(Command::new("apt-get")
        .args(["download", "-qq", "-o", "APT::Sandbox::User=root"])
        .arg(format!("{name}:amd64"))
        .current_dir(&dir));
    find().unwrap_or_else(|| panic!("no {name} package in {}", dir.display()))
}

#[test]
fn torch_metadata_from_pypi_fires_as_a_note_alone_and_a_warning_in_a_pod() {
    let (v, _) = lint_recipe("python-torch", &["--fail-on", "never"]);
    let f = findings_of(&v, "dev-shm-too-small");
    assert_eq!(f.len(), 1, "{:#}", v["findings"]);
    assert_eq!(f[0]["severity"], "note");
    assert!(
        f[0]["evidence"]
            .to_string()
            .contains("torch 2.5.1 at /usr/local/lib/python3.11/site-packages/torch-2.5.1.dist-info"),
        "{:#}",
        f[0]
    );
    // NCCL_SHM_DISABLE=1 is set in the image, and does not silence it.
    assert!(v["image"]["config"]["env"]
        .to_string()
        .contains("NCCL_SHM_DISABLE=1"));
    let r = report("python-torch", "java-limit.yaml");
    let f = findings_of(&r, "dev-shm-too-small");
    assert_eq!(f[0]["severity"], "warning");
}

#[test]
fn chromium_under_selenium_fires_unless_debians_hook_can_measure_dev_shm() {
    let r = report("chromium-selenium", "java-limit.yaml");
    let f = findings_of(&r, "dev-shm-too-small");
    assert_eq!(f.len(), 1, "{:#}", r["findings"]);
    let launchers = &r["facts"]["chrome"]["launchers"];
    let names: Vec<&str> = launchers
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["selenium", "chromedriver"], "{launchers:#}");
    assert!(f[0]["fix"].as_str().unwrap().contains("sizeLimit: 2Gi"));
    // With findmnt, Debian's /usr/bin/chromium adds --disable-dev-shm-usage on a small /dev/shm.
    let r = report("chromium-selenium-findmnt", "java-limit.yaml");
    assert!(
        findings_of(&r, "dev-shm-too-small").is_empty(),
        "{:#}",
        r["findings"]
    );
}

#[test]
fn puppeteer_from_npm_passes_the_switch_by_default() {
    let (v, _) = lint_recipe("chromium-puppeteer", &["--fail-on", "never"]);
    assert!(
        findings_of(&v, "dev-shm-too-small").is_empty(),
        "{:#}",
        v["findings"]
    );
    let puppeteer = v["facts"]["chrome"]["launchers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "puppeteer")
        .cloned()
        .unwrap_or_else(|| panic!("{:#}", v["facts"]["chrome"]));
    assert_eq!(puppeteer["passes_switch"], true);
    // The switch is in the package npm serves, in the launcher memlint read.
    let why = puppeteer["why"].as_str().unwrap();
    let source = why.split(' ').next().unwrap();
    assert!(
        source.ends_with("/puppeteer-core/lib/cjs/puppeteer/node/ChromeLauncher.js"),
        "{why}"
    );
    let tgz = fs::read_dir(
        std::env::var("MEMLINT_IMAGE_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache"))
            .join("npm"),
    )
    .unwrap()
    .map(|e| e.unwrap().path())
    .find(|p| p.to_string_lossy().contains("puppeteer-core_24.31.0"))
    .expect("puppeteer-core in the npm cache");
    let out = run(Command::new("tar")
        .arg("-xzOf")
        .arg(&tgz)
        .arg("package/lib/cjs/puppeteer/node/ChromeLauncher.js"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("'--disable-dev-shm-usage'"));
}

#[test]
fn elasticsearch_with_memory_lock_in_a_pod() {
    let r = report("elasticsearch-memory-lock", "es-statefulset.yaml");
    let f = findings_of(&r, "es-memory-lock-k8s");
    assert_eq!(f.len(), 1, "{:#}", r["findings"]);
    assert!(
        f[0]["evidence"].to_string().contains(
            "bootstrap.memory_lock: true (/usr/share/elasticsearch/config/elasticsearch.yml line 3)"
        ),
        "{:#}",
        f[0]
    );
    // Its heap is set in jvm.options.d: no heap-auto-without-limit, whatever the limit.
    assert!(findings_of(&r, "heap-auto-without-limit").is_empty());
    let r = report("elasticsearch-memory-lock", "es-statefulset-unlocked.yaml");
    assert!(findings_of(&r, "es-memory-lock-k8s").is_empty());
    // An image alone is not a pod.
    let (v, _) = lint_recipe("elasticsearch-memory-lock", &["--fail-on", "never"]);
    assert!(findings_of(&v, "es-memory-lock-k8s").is_empty());
}

/// The manifests of the other rules' tests (testdata/k8s) with the images they are linted with:
/// only heap-auto-without-limit may fire of the five, and only on a container with no
/// limits.memory (none of them has one without a limit).
#[test]
fn the_five_stay_silent_on_the_existing_test_manifests() {
    for (recipe, manifest_name) in [
        ("java17-options", "heap-2gi.yaml"),
        ("java17-options", "heap-4gi.yaml"),
        ("go-nocgo", "go-limit.yaml"),
        ("go-nocgo", "go-limit-set.yaml"),
        ("next-15", "next-ephemeral.yaml"),
        ("next-15", "next-ephemeral-tmpfs.yaml"),
    ] {
        let r = report(recipe, manifest_name);
        for rule in RULES {
            assert!(
                findings_of(&r, rule).is_empty(),
                "{rule} on {recipe} + {manifest_name}: {:#}",
                r["findings"]
            );
        }
    }
}

/// The failure the rule prevents, run: Debian's PostgreSQL 15 (the packages postgresql-15,
/// postgresql-client-15 and libpq5, unpacked) fails a parallel hash join of 150 MB with `could
/// not resize shared memory segment … No space left on device` on a 64 MiB `/dev/shm`, and
/// passes with 1 GiB. Each run mounts its own tmpfs on `/dev/shm` in a private mount namespace
/// (`unshare -m`), which needs root: elsewhere the test says so and stops, and
/// `postgres_reads_its_shared_memory_settings_as_memlint_does` still proves the reading.
#[test]
fn postgres_15_fails_a_parallel_hash_join_on_64_mib_of_dev_shm_and_passes_with_1_gib() {
    let private_mounts = Command::new("unshare")
        .args(["-m", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !private_mounts {
        eprintln!("no private mount namespace here (unshare -m needs root): the 64 MiB run is skipped");
        return;
    }
    require_tool("setpriv");
    let root = tempfile::tempdir().unwrap();
    for package in ["postgresql-15", "postgresql-client-15", "libpq5"] {
        let deb = debian_package(package);
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(root.path()));
    }
    let r = root.path();
    for d in ["data", "sock"] {
        fs::create_dir_all(r.join(d)).unwrap();
    }
    run(Command::new("chown").args(["-R", "65534:65534"]).arg(r));
    let bin = r.join("usr/lib/postgresql/15/bin");
    let libs = r.join("usr/lib/x86_64-linux-gnu");
    let as_nobody = |program: &str| {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(bin.join(program))
            .env("LD_LIBRARY_PATH", &libs);
        c
    };
    run(as_nobody("initdb")
        .arg("-D")
        .arg(r.join("data"))
        .args(["-U", "postgres", "--no-sync"]));
    // The server starts, runs the join and stops inside the namespace, so its /dev/shm is the
    // tmpfs mounted there; the exit code is psql's.
    const SCRIPT: &str = r#"
mount -t tmpfs -o size="$1" tmpfs /dev/shm || exit 90
as() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
as "$BIN/pg_ctl" -D "$ROOT/data" -l "$ROOT/log" -o "-k $ROOT/sock -c listen_addresses=''" -w start >/dev/null || exit 91
as "$BIN/psql" -h "$ROOT/sock" -U postgres -X -q -v ON_ERROR_STOP=1 -c "
SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0; SET work_mem = '512MB'; SET enable_parallel_hash = on;
DROP TABLE IF EXISTS a;
CREATE UNLOGGED TABLE a AS SELECT g AS id, repeat('x', 40) AS v FROM generate_series(1, 3000000) g;
ANALYZE a;
EXPLAIN (ANALYZE, COSTS OFF) SELECT count(*) FROM a a1 JOIN a a2 USING (id);"
rc=$?
as "$BIN/pg_ctl" -D "$ROOT/data" -m fast -w stop >/dev/null
exit $rc
"#;
    let join_with = |shm: &str| {
        Command::new("unshare")
            .args(["-m", "sh", "-c", SCRIPT, "join", shm])
            .env("ROOT", r)
            .env("BIN", &bin)
            .env("LD_LIBRARY_PATH", &libs)
            .output()
            .expect("unshare runs")
    };
    let small = join_with("64m");
    let err = String::from_utf8_lossy(&small.stderr);
    assert_eq!(small.status.code(), Some(1), "{err}");
    assert!(
        err.contains("could not resize shared memory segment") && err.contains("No space left on device"),
        "{err}"
    );
    let big = join_with("1g");
    let out = String::from_utf8_lossy(&big.stdout);
    assert!(
        big.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&big.stderr)
    );
    assert!(out.contains("Parallel Hash Join"), "{out}");
}
