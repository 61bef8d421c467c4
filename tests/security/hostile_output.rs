//! Reports of hostile size and at hostile paths (issue #28, defects 5, 7 and 11): a fleet of a
//! thousand containers gives one SARIF run under 5 MB that the SARIF Multitool's GitHub rules
//! accept; a fleet of thousands of containers in JSON is written a report at a time in bounded
//! memory; a link at a report path is replaced, never written through, and a FIFO or folder
//! there is refused without blocking; `merge` reads a report at a time within named bounds.
//! Every input is built in the test; each run is measured (peak RSS, a wall bound).

use crate::common;

use common::measure::*;
use common::*;
use serde_json::Value;
use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const MAX_RSS_KIB: u64 = 256 * 1024;
/// Generous for a debug build on a shared machine; the point is that nothing grows without end.
const WALL: Duration = Duration::from_secs(120);

/// The image every container of the fleets runs: Node with a heap flag, so that each container
/// under a memory limit has a finding.
fn node_image() -> String {
    build_image("node-old-space")
}

/// Runs memlint in `dir` with a fresh cache, watched: exit code `code`, peak RSS under 256 MiB,
/// within `wall`.
fn bounded_in(dir: &Path, args: &[&str], code: i32, wall: Duration) -> Run {
    let cache = tempfile::tempdir().unwrap();
    let run = run_watched(
        args,
        |cmd| {
            cmd.current_dir(dir)
                .env("MEMLINT_CACHE_DIR", cache.path())
                .env_remove("MEMLINT_LIMITS");
        },
        wall,
    );
    assert_eq!(run.code(), Some(code), "memlint {args:?}: {}", run.err());
    assert!(
        run.peak_kib < MAX_RSS_KIB,
        "memlint {args:?} peaked at {} MiB",
        run.peak_kib / 1024
    );
    eprintln!(
        "memlint {args:?}: peak {} MiB, {:?}",
        run.peak_kib / 1024,
        run.elapsed
    );
    run
}

/// `n` Deployments of one container each, all running `registry.local/app:1` under a 1Gi limit.
fn deployments(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: app-{i}}}\nspec:\n  template:\n    spec:\n      containers:\n      - name: main\n        image: registry.local/app:1\n        resources: {{limits: {{memory: 1Gi}}}}\n"
            )
        })
        .collect()
}

#[test]
fn a_thousand_container_fleet_is_one_sarif_run_under_5_mb_that_github_accepts() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("fleet.yaml"), deployments(1000)).unwrap();
    let stand_in = format!("registry.local/app:1={}", node_image());
    let args = [
        "lint",
        "--k8s",
        "fleet.yaml",
        "--image",
        &stand_in,
        "--format",
        "sarif",
        "--fail-on",
        "never",
        "-q",
        "--output",
        "fleet.sarif",
    ];
    bounded_in(dir.path(), &args, 0, WALL);
    let path = dir.path().join("fleet.sarif");
    let size = fs::metadata(&path).unwrap().len();
    assert!(size < 5_000_000, "the SARIF of 1,000 containers is {size} bytes");
    let sarif: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    let runs = sarif["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "one run: code scanning refuses more than 20");
    let run = &runs[0];
    assert_eq!(run["automationDetails"]["id"], "memlint/k8s/");
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    let mut ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), rules.len(), "each rule once");
    let results = run["results"].as_array().unwrap();
    let mut containers: Vec<&str> = results
        .iter()
        .map(|r| r["properties"]["k8s"]["name"].as_str().unwrap())
        .collect();
    containers.sort_unstable();
    containers.dedup();
    assert_eq!(
        containers.len(),
        1000,
        "every container's results, each naming it"
    );
    let mut prints: Vec<&str> = results
        .iter()
        .map(|r| r["partialFingerprints"]["memlintFinding/v2"].as_str().unwrap())
        .collect();
    prints.sort_unstable();
    prints.dedup();
    assert_eq!(
        prints.len(),
        results.len(),
        "no two containers' results share a fingerprint"
    );
    validate_sarif(&path);

    // `merge` of a thousand reports: the same one run.
    let args = [
        "lint",
        "--k8s",
        "fleet.yaml",
        "--image",
        &stand_in,
        "--format",
        "json",
        "--fail-on",
        "never",
        "-q",
        "--output",
        "fleet.json",
    ];
    bounded_in(dir.path(), &args, 0, WALL);
    let merged = bounded_in(
        dir.path(),
        &["merge", "fleet.json", "--format", "sarif", "--fail-on", "never"],
        0,
        WALL,
    );
    assert_eq!(
        merged.out.stdout,
        fs::read(&path).unwrap(),
        "merge writes the fleet's SARIF"
    );
}

#[test]
fn thousands_of_containers_in_json_are_written_a_report_at_a_time() {
    // One Pod of 4,000 containers in 200 KB: each container's JSON report is about 14 KB, so
    // keeping them all (as values, then as text) took several hundred MiB.
    let dir = tempfile::tempdir().unwrap();
    let containers: String = (0..4000)
        .map(|i| {
            format!(
                "  - {{name: c{i}, image: registry.local/app:1, resources: {{limits: {{memory: 1Gi}}}}}}\n"
            )
        })
        .collect();
    fs::write(
        dir.path().join("pod.yaml"),
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: big}}\nspec:\n  containers:\n{containers}"),
    )
    .unwrap();
    let stand_in = format!("registry.local/app:1={}", node_image());
    let args = [
        "lint",
        "--k8s",
        "pod.yaml",
        "--image",
        &stand_in,
        "--format",
        "json",
        "--fail-on",
        "never",
        "-q",
        "--output",
        "pod.json",
        "-o",
        "text=pod.txt",
    ];
    bounded_in(dir.path(), &args, 0, Duration::from_secs(300));
    let json = fs::read(dir.path().join("pod.json")).unwrap();
    assert!(json.len() > 40 << 20, "{} bytes of JSON", json.len());
    let v: Value = serde_json::from_slice(&json).unwrap();
    let reports = v["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 4000);
    assert_eq!(v["fail_on"], "never");
    // Manifest order, as one document would have it.
    let lines: Vec<u64> = reports
        .iter()
        .map(|r| r["k8s"]["line"].as_u64().unwrap())
        .collect();
    assert!(lines.windows(2).all(|w| w[0] < w[1]));
    let text = fs::read_to_string(dir.path().join("pod.txt")).unwrap();
    assert_eq!(text.matches("== Pod big, container ").count(), 4000);
}

/// A folder with a secret file and a link to it.
fn with_link(dir: &Path, link: &str) -> std::path::PathBuf {
    let secret = dir.join("secret.json");
    fs::write(&secret, "{\"auths\": {}}\n").unwrap();
    std::os::unix::fs::symlink(&secret, dir.join(link)).unwrap();
    secret
}

fn mkfifo(path: &Path) {
    require_tool("mkfifo");
    run(Command::new("mkfifo").arg(path));
}

#[test]
fn report_paths_replace_links_and_refuse_fifos_and_folders() {
    let dir = tempfile::tempdir().unwrap();
    let image = build_image("demo");
    let secret = with_link(dir.path(), "out.sarif");
    std::os::unix::fs::symlink(&secret, dir.path().join("out.json")).unwrap();
    let quick = Duration::from_secs(30);
    // --output and -o: the links are replaced by the reports; the secret is untouched.
    bounded_in(
        dir.path(),
        &[
            "lint",
            "--fail-on",
            "never",
            "--format",
            "sarif",
            "--output",
            "out.sarif",
            "-o",
            "json=out.json",
            &image,
        ],
        0,
        quick,
    );
    assert_eq!(fs::read_to_string(&secret).unwrap(), "{\"auths\": {}}\n");
    for name in ["out.sarif", "out.json"] {
        let p = dir.path().join(name);
        assert!(
            fs::symlink_metadata(&p).unwrap().file_type().is_file(),
            "{name} is a file now"
        );
        let v: Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
        assert!(v.is_object(), "{name}");
    }
    // A FIFO (with no reader: opening it to write would block) and a folder: refused before
    // any image is read, exit 2, the path and what it is named.
    mkfifo(&dir.path().join("pipe.sarif"));
    fs::create_dir(dir.path().join("folder.json")).unwrap();
    for (args, needle) in [
        (vec!["--output", "pipe.sarif"], "a FIFO"),
        (vec!["-o", "sarif=pipe.sarif"], "a FIFO"),
        (vec!["--output", "folder.json"], "a folder"),
    ] {
        let mut all = vec!["lint", "--fail-on", "never", "--format", "sarif"];
        all.extend(args.iter().copied());
        all.push(&image);
        let run = bounded_in(dir.path(), &all, 2, quick);
        let err = run.err();
        assert!(err.contains(needle) && err.contains("regular file"), "{err}");
        assert!(run.out.stdout.is_empty());
    }
    // No temporary file is left beside the reports.
    let left: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("memlint-tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // A path to this process's own standard output or error (`/dev/stdout` is a link to
    // `/proc/self/fd/1`; a link of the test's own stands in for it, so that a failure replaces
    // nothing of the machine's) and `/dev/null` are streams, written to, never replaced.
    std::os::unix::fs::symlink("/proc/self/fd/1", dir.path().join("stdout")).unwrap();
    std::os::unix::fs::symlink("/proc/self/fd/2", dir.path().join("stderr")).unwrap();
    let run = bounded_in(
        dir.path(),
        &[
            "lint",
            "--fail-on",
            "never",
            "-q",
            "--format",
            "json",
            "--output",
            "/dev/null",
            "-o",
            "sarif=stdout",
            "-o",
            "json=stderr",
            &image,
        ],
        0,
        quick,
    );
    let sarif: Value = serde_json::from_slice(&run.out.stdout).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    assert!(String::from_utf8_lossy(&run.out.stderr).contains("\"facts\""));
    for name in ["stdout", "stderr"] {
        assert!(
            fs::symlink_metadata(dir.path().join(name))
                .unwrap()
                .file_type()
                .is_symlink(),
            "{name}"
        );
    }
    assert!(fs::metadata("/dev/null").unwrap().file_type().is_char_device());

    // merge --output through a link, and to a FIFO.
    let mdir = tempfile::tempdir().unwrap();
    let msecret = with_link(mdir.path(), "merged.json");
    let shard = mdir.path().join("shard.json");
    fs::write(
        &shard,
        b"{\"schema_version\": \"1.1.0\", \"reports\": [], \"fail_on\": \"never\"}\n",
    )
    .unwrap();
    bounded_in(
        mdir.path(),
        &["merge", "shard.json", "--output", "merged.json"],
        0,
        quick,
    );
    assert_eq!(fs::read_to_string(&msecret).unwrap(), "{\"auths\": {}}\n");
    let merged: Value = serde_json::from_slice(&fs::read(mdir.path().join("merged.json")).unwrap()).unwrap();
    assert_eq!(merged["reports"], Value::Array(vec![]));
    mkfifo(&mdir.path().join("pipe.json"));
    let run = bounded_in(
        mdir.path(),
        &["merge", "shard.json", "--output", "pipe.json"],
        2,
        quick,
    );
    assert!(run.err().contains("a FIFO"), "{}", run.err());

    // man --dir: a page's path that is a link is replaced, its target untouched.
    let man = tempfile::tempdir().unwrap();
    let page_secret = with_link(man.path(), "memlint-lint.1");
    bounded_in(man.path(), &["man", "--dir", "."], 0, quick);
    assert_eq!(fs::read_to_string(&page_secret).unwrap(), "{\"auths\": {}}\n");
    let page = fs::read_to_string(man.path().join("memlint-lint.1")).unwrap();
    assert!(page.contains(".TH"), "{page}");
    assert!(man.path().join("memlint.1").is_file());
    fs::remove_file(man.path().join("memlint-merge.1")).unwrap();
    mkfifo(&man.path().join("memlint-merge.1"));
    let run = bounded_in(man.path(), &["man", "--dir", "."], 2, quick);
    assert!(run.err().contains("a FIFO"), "{}", run.err());
}

/// A `lint --k8s` JSON report of `n` containers, each `pad` bytes of padding in its message.
fn shard(n: usize, pad: usize) -> Vec<u8> {
    let mut out = b"{\"schema_version\": \"1.1.0\", \"fail_on\": \"never\", \"reports\": [".to_vec();
    let filler = "x".repeat(pad);
    for i in 0..n {
        if i > 0 {
            out.push(b',');
        }
        // Lines in reverse: the merge sorts them.
        out.extend_from_slice(
            format!(
                "{{\"k8s\": {{\"file\": \"f.yaml\", \"line\": {}, \"kind\": \"Pod\", \"namespace\": null, \"name\": \"p\", \"container\": \"c{i}\", \"image\": \"app:1\"}}, \"reference\": \"registry:app:1\", \"image\": {{\"platform\": {{\"os\": \"linux\", \"architecture\": \"amd64\"}}}}, \"findings\": [{{\"rule\": \"node-semi-space\", \"severity\": \"note\", \"message\": \"m{filler}\", \"evidence\": [], \"fix\": \"\"}}], \"ignored\": []}}",
                n - i
            )
            .as_bytes(),
        );
    }
    out.extend_from_slice(b"]}\n");
    out
}

#[test]
fn merge_reads_a_report_at_a_time_within_named_bounds() {
    let dir = tempfile::tempdir().unwrap();
    // 40 MB of reports (30,000 of 1.3 KB): read whole and cloned, this took about 370 MiB.
    fs::write(dir.path().join("big.json"), shard(30_000, 1000)).unwrap();
    let run = bounded_in(
        dir.path(),
        &[
            "merge",
            "big.json",
            "--fail-on",
            "never",
            "--output",
            "merged.json",
        ],
        0,
        WALL,
    );
    assert!(run.out.stdout.is_empty());
    let merged: Value = serde_json::from_slice(&fs::read(dir.path().join("merged.json")).unwrap()).unwrap();
    let lines: Vec<u64> = merged["reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["k8s"]["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines.len(), 30_000);
    assert!(lines.windows(2).all(|w| w[0] < w[1]), "manifest order");
    // One report past 8 MiB: refused, the bound named, before it is all in memory.
    fs::write(dir.path().join("one.json"), shard(1, 9 << 20)).unwrap();
    let run = bounded_in(dir.path(), &["merge", "one.json"], 2, WALL);
    let err = run.err();
    assert!(
        err.contains("8 MiB") && err.contains("one container's report"),
        "{err}"
    );
    // A file past 1 GiB (sparse: nothing is written): refused by its size, the bound named.
    let huge = fs::File::create(dir.path().join("huge.json")).unwrap();
    huge.set_len((1 << 30) + 1).unwrap();
    let run = bounded_in(dir.path(), &["merge", "big.json", "huge.json"], 2, WALL);
    let err = run.err();
    assert!(err.contains("1024 MiB") && err.contains("huge.json"), "{err}");
    // Not a report: what is wrong, exit 2.
    fs::write(dir.path().join("list.json"), b"[1, 2]").unwrap();
    let run = bounded_in(dir.path(), &["merge", "list.json"], 2, WALL);
    assert!(run.err().contains("reports"), "{}", run.err());
}
