//! Every rule on images built from real packages (scripts/build-image.sh): it fires on its
//! broken image, with a fix that names what really exists there, and is silent on the fixed
//! twin. Plus exit codes, `rules`, `explain`, several images and `--platform all`.

use crate::common;

use common::*;
use serde_json::Value;
use std::fs;
use std::path::Path;

fn lint_json(args: &[&str]) -> (Value, Option<i32>) {
    let mut all = vec!["lint", "--format", "json"];
    all.extend_from_slice(args);
    let out = memlint(&all);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "memlint {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (common::valid_report(&out.stdout), out.status.code())
}

fn findings<'a>(v: &'a Value, rule: &str) -> Vec<&'a Value> {
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["rule"] == rule)
        .collect()
}

/// (rule, broken recipe, fixed recipe, severity on the broken one, text the fix must hold).
/// A recipe written `RECIPE+k8s/FILE.yaml` is linted as the container of the manifest
/// `testdata/k8s/FILE.yaml` that runs `registry.local/app:1`, read from RECIPE's image.
const TABLE: &[(&str, &str, &str, &str, &str)] = &[
    (
        "ld-preload-missing",
        "demo",
        "glibc-jemalloc",
        "error",
        "ENV LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    ),
    (
        "ld-preload-missing",
        "glibc-jemalloc-removed",
        "glibc-jemalloc",
        "error",
        "libjemalloc2",
    ),
    (
        "ld-preload-missing",
        "arm64-jemalloc-amd64-path",
        "arm64-jemalloc",
        "error",
        "ENV LD_PRELOAD=/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
    ),
    (
        "ld-preload-incompatible",
        "glibc-jemalloc-no-deps",
        "glibc-jemalloc-symlink",
        "error",
        "apt-get install -y --no-install-recommends libstdc++6",
    ),
    (
        "ld-preload-incompatible",
        "musl-glibc-jemalloc",
        "musl",
        "error",
        "apk add --no-cache jemalloc",
    ),
    (
        "sharp-glibc-allocator",
        "node-sharp",
        "node-sharp-jemalloc",
        "warning",
        "ENV LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    ),
    (
        "sharp-glibc-allocator",
        "node-sharp-arena-cap",
        "node-sharp-jemalloc",
        "note",
        "libjemalloc2",
    ),
    (
        "jemalloc-not-preloaded",
        "node-sharp-jemalloc-unused",
        "node-sharp-jemalloc",
        "warning",
        "ENV LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    ),
    (
        "sharp-platform-mismatch",
        "node-sharp-wrong-libc",
        "node-sharp-jemalloc",
        "error",
        "--cpu=x64 --libc=glibc",
    ),
    (
        "node-semi-space",
        "node-old-space",
        "node-old-and-semi-space",
        "note",
        "--max-old-space-size=768 --max-semi-space-size=16",
    ),
    (
        "dotnet-glibc-allocator",
        "dotnet-npgsql",
        "dotnet-npgsql-fixed",
        "warning",
        "ENV MALLOC_ARENA_MAX=2",
    ),
    (
        "npgsql-gssapi-missing",
        "dotnet-npgsql",
        "dotnet-npgsql-fixed",
        "warning",
        "libgssapi-krb5-2",
    ),
    (
        "npgsql-gssapi-missing",
        "dotnet-npgsql",
        "dotnet-npgsql-pggssencmode",
        "warning",
        "ENV PGGSSENCMODE=disable",
    ),
    (
        "dotnet-gc-env-decimal",
        "dotnet-gc-decimal",
        "dotnet-gc-hex",
        "warning",
        "ENV DOTNET_GCHeapHardLimit=0x5F5E100",
    ),
    (
        "dotnet-server-gc-container",
        "dotnet-server-gc",
        "dotnet-server-gc-datas",
        "note",
        "ENV DOTNET_GCDynamicAdaptationMode=1",
    ),
    (
        "node-cgroup-v2-unaware",
        "node-18",
        "node-20-3",
        "warning",
        "ENV NODE_OPTIONS=\"--max-old-space-size=384\"",
    ),
    (
        "node-cgroup-v2-unaware",
        "node-18",
        "node-18-heap-flag",
        "warning",
        "move to Node 20.3 or later",
    ),
    (
        "node-cgroup-v2-unaware",
        "node-debian",
        "node-20-3",
        "warning",
        "ENV NODE_OPTIONS=\"--max-old-space-size=384\"",
    ),
    (
        "node-cgroup-v2-unaware",
        "node-20-2-bad-flag",
        "node-20-3",
        "warning",
        "CMD [\"node\",\"--max-old-space-size=384\",\"server.js\"]",
    ),
    (
        "jvm-flag-incompatible",
        "java17-cgroup-flag",
        "java17-ram-percentage",
        "error",
        "remove `ENV JAVA_TOOL_OPTIONS`",
    ),
    (
        "jvm-flag-incompatible",
        "java17-gradle",
        "java17-gradle-fixed",
        "error",
        "applicationDefaultJvmArgs",
    ),
    (
        "jvm-flag-incompatible",
        "java8u412-integer-percentage",
        "java17-arena-cap",
        "error",
        "ENV JAVA_TOOL_OPTIONS=\"-XX:MaxRAMPercentage=75.0\"",
    ),
    (
        "jvm-not-container-aware",
        "java8u181",
        "java17-ram-percentage",
        "warning",
        "8u372",
    ),
    (
        "jvm-glibc-arenas",
        "java17-ram-percentage",
        "java17-arena-cap",
        "note",
        "ENV MALLOC_ARENA_MAX=2",
    ),
    (
        "next-image-cache-ttl",
        "next-15",
        "next-16",
        "note",
        "minimumCacheTTL: 14400",
    ),
    (
        "ruby-glibc-allocator",
        "ruby-rails",
        "ruby-rails-7-2",
        "warning",
        "libjemalloc2",
    ),
    (
        "ruby-glibc-allocator",
        "ruby-rails",
        "ruby-rails-8-0",
        "warning",
        "ENV LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    ),
    (
        "ruby-glibc-allocator",
        "ruby-rails",
        "ruby-rails-8-1",
        "warning",
        "ENV MALLOC_ARENA_MAX=2",
    ),
    (
        "ld-preload-missing",
        "ruby-script-arm64-path",
        "ruby-rails-7-2",
        "error",
        "/rails/bin/docker-entrypoint line 4",
    ),
    (
        "malloc-conf-ineffective",
        "ruby-rails-7-2-arena-cap",
        "ruby-rails-7-2",
        "note",
        "remove `ENV MALLOC_ARENA_MAX`",
    ),
    (
        "malloc-conf-ineffective",
        "ruby-rails-7-2-bad-conf",
        "ruby-rails-7-2-conf",
        "note",
        "ENV MALLOC_CONF=narenas:2",
    ),
    (
        "malloc-conf-ineffective",
        "ruby-rails-conf-no-jemalloc",
        "ruby-rails-7-2-conf",
        "note",
        "remove `ENV MALLOC_CONF`",
    ),
    (
        "malloc-conf-ineffective",
        "musl-arena-cap",
        "musl",
        "note",
        "remove `ENV MALLOC_ARENA_MAX`",
    ),
    (
        "malloc-conf-ineffective",
        "glibc-jemalloc-tunables",
        "glibc-jemalloc",
        "note",
        "ENV GLIBC_TUNABLES=glibc.pthread.rseq=0",
    ),
    (
        "malloc-conf-ineffective",
        "glibc-jemalloc-script-arena-cap",
        "glibc-jemalloc",
        "note",
        "# in /usr/local/bin/start line 2, drop the export of MALLOC_ARENA_MAX",
    ),
    (
        "next-image-disk-cache",
        "next-15",
        "next-16",
        "note",
        "maximumDiskCacheSize",
    ),
    (
        "python-glibc-allocator",
        "python-numpy-gunicorn",
        "python-numpy-gunicorn-capped",
        "note",
        "ENV MALLOC_ARENA_MAX=2",
    ),
    (
        "worker-count-host-cpus",
        "python-celery-worker",
        "python-celery-worker-concurrency",
        "warning",
        "ENV CELERY_WORKER_CONCURRENCY=2",
    ),
    (
        "worker-count-host-cpus",
        "python-gunicorn-cpu-conf",
        "python-gunicorn-cpu-conf-fixed",
        "warning",
        "ENV GUNICORN_CMD_ARGS=\"--workers=2\"",
    ),
    (
        "gomemlimit-malformed",
        "gomem-mi",
        "gomem-mib",
        "error",
        "ENV GOMEMLIMIT=512MiB",
    ),
    (
        "go-cgo-glibc-allocator",
        "go-cgo-sqlite",
        "go-cgo-sqlite-capped",
        "note",
        "ENV MALLOC_ARENA_MAX=2",
    ),
    (
        "heap-exceeds-limit",
        "java17-options+k8s/heap-2gi.yaml",
        "java17-options+k8s/heap-4gi.yaml",
        "error",
        "-XX:MaxRAMPercentage=75.0",
    ),
    (
        "go-memlimit-missing",
        "go-nocgo+k8s/go-limit.yaml",
        "go-nocgo+k8s/go-limit-set.yaml",
        "note",
        "value: \"460MiB\"",
    ),
    (
        "next-cache-exceeds-ephemeral",
        "next-15+k8s/next-ephemeral.yaml",
        "next-15+k8s/next-ephemeral-tmpfs.yaml",
        "warning",
        "maximumDiskCacheSize",
    ),
    (
        "dev-shm-too-small",
        "postgres-15+k8s/postgres-statefulset.yaml",
        "postgres-15+k8s/postgres-statefulset-dshm.yaml",
        "warning",
        "sizeLimit: 1Gi",
    ),
    (
        "dev-shm-too-small",
        "python-torch",
        "glibc",
        "note",
        "docker run --shm-size=1g",
    ),
    (
        "dev-shm-too-small",
        "chromium-selenium+k8s/java-limit.yaml",
        "chromium-selenium-findmnt+k8s/java-limit.yaml",
        "warning",
        "sizeLimit: 2Gi",
    ),
    (
        "emptydir-memory-unbounded",
        "glibc+k8s/cache-emptydir.yaml",
        "glibc+k8s/cache-emptydir-sized.yaml",
        "warning",
        "sizeLimit: 256Mi",
    ),
    (
        "heap-auto-without-limit",
        "java17-ram-percentage+k8s/java-no-limit.yaml",
        "java17-ram-percentage+k8s/java-limit.yaml",
        "note",
        "memory: 1Gi",
    ),
    (
        "es-memory-lock-k8s",
        "elasticsearch-memory-lock+k8s/es-statefulset.yaml",
        "elasticsearch-memory-lock+k8s/es-statefulset-unlocked.yaml",
        "warning",
        "value: \"false\"",
    ),
    (
        "postgres-huge-pages",
        "postgres-15+k8s/postgres-statefulset.yaml",
        "postgres-15-mmap+k8s/postgres-statefulset.yaml",
        "note",
        "huge_pages=off",
    ),
    (
        "php-workers-exceed-limit",
        "php-fpm-children+k8s/php-2gi.yaml",
        "php-fpm-children-fixed+k8s/php-2gi.yaml",
        "warning",
        "pm.max_children = 7",
    ),
    (
        "malloc-conf-ineffective",
        "python-polars-malloc-conf",
        "python-polars-rjem-conf",
        "warning",
        "ENV _RJEM_MALLOC_CONF=background_thread:true",
    ),
    (
        "worker-count-host-cpus",
        "nginx-auto",
        "nginx-two-workers",
        "note",
        "worker_processes 2;",
    ),
    (
        "worker-count-host-cpus",
        "uwsgi-processes-cores",
        "uwsgi-processes-fixed",
        "warning",
        "processes = 2",
    ),
    (
        "redis-maxmemory-unset",
        "redis-debian+k8s/redis-256mi.yaml",
        "redis-debian+k8s/redis-256mi-maxmemory.yaml",
        "warning",
        "\"--maxmemory\",\"160mb\"",
    ),
    (
        "redis-maxmemory-unset",
        "redis-debian",
        "redis-debian-maxmemory",
        "note",
        "\"--maxmemory\",\"160mb\"",
    ),
    (
        "launcher-heap-vs-limit",
        "opensearch-shaped+k8s/opensearch-1gi.yaml",
        "opensearch-shaped+k8s/opensearch-1gi-fixed.yaml",
        "error",
        "OPENSEARCH_JAVA_OPTS=\"-Xms512m -Xmx512m\"",
    ),
    (
        "jvm-direct-memory-unbounded",
        "jdk17-netty+k8s/netty-1gi.yaml",
        "jdk17-netty+k8s/netty-1gi-capped.yaml",
        "warning",
        "-XX:MaxDirectMemorySize=174m",
    ),
];

/// The JSON report of a TABLE recipe: the image's, or with `+k8s/FILE.yaml` the report of the
/// manifest's container that runs it.
fn lint_row(recipe: &str) -> Value {
    match recipe.split_once("+k8s/") {
        None => lint_json(&["--fail-on", "never", &build_image(recipe)]).0,
        Some((image, manifest)) => {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("testdata/k8s")
                .join(manifest);
            let stand_in = format!("registry.local/app:1={}", build_image(image));
            let (v, _) = lint_json(&[
                "--fail-on",
                "never",
                "--k8s",
                path.to_str().unwrap(),
                "--image",
                &stand_in,
            ]);
            let reports = v["reports"].as_array().expect("--k8s reports");
            assert_eq!(reports.len(), 1, "{recipe}: one container");
            reports[0].clone()
        }
    }
}

#[test]
fn each_rule_fires_on_its_broken_image_and_not_on_the_fixed_twin() {
    for &(rule, broken, fixed, severity, fix) in TABLE {
        let v = lint_row(broken);
        let hits = findings(&v, rule);
        assert!(
            !hits.is_empty(),
            "{rule} is silent on {broken}: {:#}",
            v["findings"]
        );
        for f in &hits {
            assert_eq!(f["severity"], severity, "{rule} on {broken}");
            assert!(!f["message"].as_str().unwrap().is_empty());
            assert!(
                !f["evidence"].as_array().unwrap().is_empty(),
                "{rule} on {broken} has no evidence"
            );
        }
        assert!(
            hits.iter().any(|f| f["fix"].as_str().unwrap().contains(fix)),
            "{rule} on {broken}: no fix with `{fix}`: {:#}",
            hits[0]["fix"]
        );
        let v = lint_row(fixed);
        assert!(
            findings(&v, rule).is_empty(),
            "{rule} fires on the fixed twin {fixed}: {:#}",
            v["findings"]
        );
    }
}

#[test]
fn fixes_name_paths_that_exist_in_the_image() {
    // The path a fix preloads is in the image it is given for.
    for (recipe, rule) in [
        ("demo", "ld-preload-missing"),
        ("arm64-jemalloc-amd64-path", "ld-preload-missing"),
        ("node-sharp-jemalloc-unused", "jemalloc-not-preloaded"),
    ] {
        let r = build_image(recipe);
        let (v, _) = lint_json(&[&r]);
        let fix = findings(&v, rule)[0]["fix"].as_str().unwrap().to_string();
        let path = fix
            .lines()
            .find_map(|l| l.strip_prefix("ENV LD_PRELOAD="))
            .unwrap_or_else(|| panic!("{recipe}: no ENV LD_PRELOAD in {fix}"))
            .split(':')
            .next()
            .unwrap()
            .to_string();
        let listing = tree_listing(&r);
        assert!(
            listing.iter().any(|l| l.starts_with(&format!("{path} file"))),
            "{recipe}: {path} is not in the image"
        );
    }
}

#[test]
fn clean_images_have_no_findings() {
    for recipe in ["glibc-jemalloc", "musl", "glibc"] {
        let (v, code) = lint_json(&[&build_image(recipe)]);
        assert_eq!(v["findings"], serde_json::json!([]), "{recipe}");
        assert_eq!(code, Some(0), "{recipe}");
    }
}

#[test]
fn exit_codes_follow_fail_on() {
    // node-sharp-arena-cap has one note; dotnet-npgsql two warnings; demo one error.
    let note = build_image("node-sharp-arena-cap");
    let warn = build_image("dotnet-npgsql");
    let err = build_image("demo");
    let code = |fail_on: &str, r: &str| memlint(&["lint", "-q", "--fail-on", fail_on, r]).status.code();
    assert_eq!(code("warning", &note), Some(0));
    assert_eq!(code("note", &note), Some(1));
    assert_eq!(code("warning", &warn), Some(1));
    assert_eq!(code("error", &warn), Some(0));
    assert_eq!(code("error", &err), Some(1));
    assert_eq!(code("never", &err), Some(0));
    assert_eq!(
        memlint(&["lint", &warn]).status.code(),
        Some(1),
        "warning is the default"
    );
    assert_eq!(
        memlint(&["lint", "oci-dir:/no/such/image"]).status.code(),
        Some(2)
    );
    // The ignored rule is counted, not reported.
    let (v, code) = lint_json(&["--ignore", "ld-preload-missing", &err]);
    assert_eq!(code, Some(0));
    assert_eq!(v["summary"]["ignored"], 1);
    let out = memlint(&["lint", "--ignore", "ld-preload-mising", &err]);
    assert_eq!(out.status.code(), Some(2));
    assert!(error_text(&out).contains("did you mean `ld-preload-missing`"));
}

/// The rules memlint lists, from the registry; a new rule shows up here without an edit.
fn registry_ids() -> Vec<String> {
    let json: Value = serde_json::from_slice(&memlint(&["rules", "--format", "json"]).stdout).unwrap();
    json.as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn every_rule_has_a_doc_and_a_fixture_row() {
    let ids = registry_ids();
    let mut docs: Vec<String> = fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("rules"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    docs.sort();
    assert_eq!(ids, docs, "rules/<id>.md, one for each rule of the registry");
    for id in &ids {
        assert!(
            TABLE.iter().any(|row| row.0 == id),
            "{id} has no row in TABLE (its broken image and fixed twin)"
        );
    }
    for row in TABLE {
        assert!(
            ids.iter().any(|id| id == row.0),
            "TABLE names an unknown rule {}",
            row.0
        );
    }
}

#[test]
fn rules_and_explain() {
    let out = memlint(&["rules"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let ids: Vec<&str> = text
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(ids, registry_ids());
    for id in &ids {
        let out = memlint(&["explain", id]);
        assert!(out.status.success(), "{id}");
        let doc = String::from_utf8_lossy(&out.stdout);
        assert!(doc.starts_with(&format!("# {id}\n")), "{id}");
        assert!(doc.contains("## How to fix"), "{id}");
    }
    let out = memlint(&["explain", "sharp-glibc"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(error_text(&out).contains("did you mean `sharp-glibc-allocator`"));
    let json: Value = serde_json::from_slice(&memlint(&["rules", "--format", "json"]).stdout).unwrap();
    for rule in json.as_array().unwrap() {
        assert!(
            ["error", "warning", "note"].contains(&rule["severity"].as_str().unwrap()),
            "{rule}"
        );
        assert!(!rule["title"].as_str().unwrap().is_empty(), "{rule}");
        assert!(rule["tags"].is_array(), "{rule}");
    }
}

#[test]
fn several_images_in_one_call() {
    let a = build_image("demo");
    let b = build_image("musl");
    let out = memlint(&["lint", "--format", "json", &a, &b]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let reports = v["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0]["findings"][0]["rule"], "ld-preload-missing");
    assert_eq!(reports[1]["findings"], serde_json::json!([]));
    let out = memlint(&["lint", &a, &b]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("memlint ").count(), 2, "{text}");
    // An unreadable image among others: the others are reported, the exit code is 2.
    let out = memlint(&["lint", "--format", "json", &b, "oci-dir:/no/such/image"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!out.stdout.is_empty());
}

#[test]
fn every_platform_in_one_run() {
    let dir = tempfile::tempdir().unwrap();
    // The amd64 image preloads the amd64 path; the arm64 one the same amd64 path.
    let layout = merge_layouts(
        dir.path(),
        &[
            &build_image("glibc-jemalloc"),
            &build_image("arm64-jemalloc-amd64-path"),
        ],
    );
    let r = format!("oci-dir:{}", layout.display());
    let out = memlint(&["lint", "--platform", "all", &r]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Where the platforms differ"), "{text}");
    assert!(
        text.contains("is missing on linux/arm64 but ok on linux/amd64"),
        "{text}"
    );
    let v: Value =
        serde_json::from_slice(&memlint(&["lint", "--format", "json", "--platform", "all", &r]).stdout)
            .unwrap();
    let platforms: Vec<&str> = v["reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["image"]["platform"]["architecture"].as_str().unwrap())
        .collect();
    assert_eq!(platforms, ["amd64", "arm64"]);
    assert!(v["differences"].as_array().unwrap().iter().any(|d| d
        .as_str()
        .unwrap()
        .contains("only on linux/arm64: [ld-preload-missing]")));
    // One platform by name still works.
    let (one, _) = lint_json(&["--platform", "linux/arm64", &r]);
    assert_eq!(one["findings"][0]["rule"], "ld-preload-missing");
}

/// Text and JSON output of findings, compared with tests/snapshots (UPDATE_SNAPSHOTS=1 to
/// rewrite them after a deliberate change).
#[test]
fn snapshots() {
    for recipe in ["demo", "node-sharp", "dotnet-npgsql", "musl-glibc-jemalloc"] {
        let r = build_image(recipe);
        let text = String::from_utf8(memlint(&["lint", "--no-color", &r]).stdout)
            .unwrap()
            .replace(&r, "IMAGE");
        let (v, _) = lint_json(&[&r]);
        let json = serde_json::to_string_pretty(&v["findings"]).unwrap() + "\n";
        for (ext, actual) in [("txt", text), ("json", json)] {
            let path =
                Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/snapshots/lint-{recipe}.{ext}"));
            if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
                fs::create_dir_all(path.parent().unwrap()).unwrap();
                fs::write(&path, &actual).unwrap();
                continue;
            }
            let expected = fs::read_to_string(&path)
                .unwrap_or_else(|_| panic!("{} is missing: run with UPDATE_SNAPSHOTS=1", path.display()));
            assert_eq!(actual, expected, "{} differs", path.display());
        }
    }
}

/// Issue 15's "Done when": a Rails image whose only preload is in bin/docker-entrypoint is not
/// reported; a script exporting another architecture's folder is, naming the script and line
/// (and the finding goes on the Dockerfile's command, which runs the script); an arena cap
/// beside a working jemalloc preload is reported as doing nothing.
#[test]
fn script_exports_count_as_the_issue_says() {
    let (v, _) = lint_json(&["--fail-on", "never", &build_image("ruby-rails-7-2")]);
    assert!(
        findings(&v, "ruby-glibc-allocator").is_empty(),
        "{:#}",
        v["findings"]
    );
    assert!(
        v["findings"].as_array().unwrap().is_empty(),
        "{:#}",
        v["findings"]
    );

    let dir = tempfile::tempdir().unwrap();
    let dockerfile = dir.path().join("Dockerfile");
    fs::write(
        &dockerfile,
        "FROM ruby:3.1-slim\nWORKDIR /rails\nRUN apt-get update && apt-get install -y libjemalloc2\nCOPY . .\nENTRYPOINT [\"/rails/bin/docker-entrypoint\"]\nCMD [\"./bin/rails\", \"server\"]\n",
    )
    .unwrap();
    let df = dockerfile.to_str().unwrap();
    let (v, code) = lint_json(&["--dockerfile", df, &build_image("ruby-script-arm64-path")]);
    assert_eq!(code, Some(1));
    let hits = findings(&v, "ld-preload-missing");
    assert_eq!(hits.len(), 1, "{:#}", v["findings"]);
    let f = hits[0];
    let evidence: Vec<&str> = f["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(
        evidence.iter().any(|e| e.starts_with("/rails/bin/docker-entrypoint line 4 exports `export LD_PRELOAD=/usr/lib/aarch64-linux-gnu/libjemalloc.so.2`")),
        "{evidence:#?}"
    );
    assert!(evidence
        .iter()
        .any(|e| e.contains("aarch64-linux-gnu is another architecture's folder")));
    // Anchor::Command: the last CMD or ENTRYPOINT, the instructions that run the script.
    assert_eq!(f["location"]["line"], 6, "{:#}", f["location"]);
    assert!(f["fix"]
        .as_str()
        .unwrap()
        .contains("export /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 instead"));

    let (v, _) = lint_json(&["--fail-on", "never", &build_image("ruby-rails-7-2-arena-cap")]);
    let hits = findings(&v, "malloc-conf-ineffective");
    assert_eq!(hits.len(), 1, "{:#}", v["findings"]);
    assert!(hits[0]["message"]
        .as_str()
        .unwrap()
        .starts_with("MALLOC_ARENA_MAX does nothing here: jemalloc replaces glibc's malloc"));
    assert!(findings(&v, "ruby-glibc-allocator").is_empty());
}

/// An undecided preload counts as possibly in effect: the arena rule does not fire and `-v`
/// says why.
#[test]
fn an_undecided_script_preload_keeps_the_arena_rule_silent() {
    let image = build_image("ruby-rails-undecided");
    let (v, _) = lint_json(&["--fail-on", "never", &image]);
    assert!(
        v["findings"].as_array().unwrap().is_empty(),
        "{:#}",
        v["findings"]
    );
    let out = memlint(&["lint", "-v", "--no-color", "--fail-on", "never", &image]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("ruby-glibc-allocator: preload `export LD_PRELOAD=\"$(cat /etc/jemalloc-path)\"` is possibly in effect"),
        "{text}"
    );
}
