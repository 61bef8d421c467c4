//! `lint --k8s`: manifests as people write them (a Deployment, a StatefulSet, a CronJob, a
//! `List`, multi-document files, a `helm template`-style rendering piped to standard input),
//! their images pushed to Debian's docker-registry on 127.0.0.1 and read by reference, `--image`
//! stand-ins, bad manifests, shards and `merge`, and the example Job of `examples/k8s/`.

use crate::common;

use common::registry::*;
use common::*;
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// memlint with `stdin` piped in, in `dir`, with its own cache folder.
fn memlint_stdin(dir: &Path, args: &[&str], stdin: &str) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memlint"));
    cmd.args(args)
        .current_dir(dir)
        .env("MEMLINT_CACHE_DIR", dir.join(".memlint-cache"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("memlint runs");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// The JSON on standard output; a report of memlint (a list of reports, or one with findings)
/// is checked against the published schema.
fn json_of(out: &Output) -> Value {
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    if v.get("reports").is_some() || v.get("findings").is_some() {
        common::assert_valid_report(&v);
    }
    v
}

/// `memlint lint --k8s MANIFEST --image STAND_IN… --format json --fail-on never` in `dir`, which
/// must exit 0: its JSON.
fn lint_k8s(dir: &Path, manifest: &str, stand_ins: &[&str]) -> Value {
    let mut args = vec![
        "lint",
        "--k8s",
        manifest,
        "--format",
        "json",
        "--fail-on",
        "never",
    ];
    for s in stand_ins {
        args.extend(["--image", s]);
    }
    let out = memlint_in(dir, &args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_of(&out)
}

fn rules_of(report: &Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .map(|f| {
            f.iter()
                .map(|f| f["rule"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn oci_path(reference: &str) -> &str {
    reference
        .trim_start_matches("oci-dir:")
        .trim_end_matches(":latest")
}

/// A `helm template` rendering of a small chart: the `# Source:` comments, a Service and a
/// ConfigMap memlint skips, a Deployment, a StatefulSet and a CronJob.
fn rendered_chart(host: &str, node_heap: &str, node_limit: &str) -> String {
    format!(
        r#"---
# Source: shop/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: release-name-shop
  labels:
    helm.sh/chart: shop-0.1.0
spec:
  type: ClusterIP
  ports:
    - port: 80
      targetPort: http
---
# Source: shop/templates/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: release-name-shop
data:
  alert.tmpl: |
    {{{{ .Labels.alertname }}}} fired
---
# Source: shop/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: release-name-shop-web
  namespace: shop
spec:
  replicas: 2
  selector:
    matchLabels:
      app.kubernetes.io/name: shop
  template:
    metadata:
      labels:
        app.kubernetes.io/name: shop
    spec:
      containers:
        - name: web
          image: "{host}/node:1"
          imagePullPolicy: IfNotPresent
          env:
            - name: NODE_OPTIONS
              value: "--max-old-space-size={node_heap}"
          resources:
            limits:
              cpu: 500m
              memory: {node_limit}
---
# Source: shop/templates/statefulset.yaml
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: release-name-shop-api
  namespace: shop
spec:
  serviceName: api
  selector:
    matchLabels:
      app: api
  template:
    metadata:
      labels:
        app: api
    spec:
      containers:
        - name: api
          image: {host}/java:1
          env:
            - name: HEAP
              value: 2g
            - name: JAVA_TOOL_OPTIONS
              value: "-Xmx$(HEAP)"
          resources:
            limits:
              memory: 4Gi
---
# Source: shop/templates/cronjob.yaml
apiVersion: batch/v1
kind: CronJob
metadata:
  name: release-name-shop-report
  namespace: shop
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - name: report
              image: {host}/java:1
              args: ["-version"]
              resources:
                limits:
                  memory: 256Mi
"#
    )
}

#[test]
fn helm_template_piped_to_k8s_lints_every_image_with_its_container() {
    let node = build_image("node-old-space");
    let java = build_image("java17-options");
    let registry = Registry::start(Setup::default());
    registry.push(&format!("oci:{}", oci_path(&node)), "node:1", &[]);
    registry.push(&format!("oci:{}", oci_path(&java)), "java:1", &[]);
    let dir = tempfile::tempdir().unwrap();
    let host = registry.host();

    // --max-old-space-size=2048 under 2Gi: heap-exceeds-limit, on the limits.memory line in SARIF.
    let yaml = rendered_chart(&host, "2048", "2Gi");
    let out = memlint_stdin(
        dir.path(),
        &["lint", "--k8s", "-", "--format", "json", "--fail-on", "never"],
        &yaml,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&out);
    let reports = v["reports"].as_array().unwrap();
    let workloads: Vec<(String, String)> = reports
        .iter()
        .map(|r| {
            (
                r["k8s"]["kind"].as_str().unwrap().to_string(),
                r["k8s"]["container"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        workloads,
        [
            ("Deployment".into(), "web".into()),
            ("StatefulSet".into(), "api".into()),
            ("CronJob".into(), "report".into())
        ]
    );
    let web = &reports[0];
    assert_eq!(web["k8s"]["namespace"], "shop");
    assert_eq!(web["k8s"]["file"], "-");
    assert!(
        rules_of(web).contains(&"heap-exceeds-limit".to_string()),
        "{:#}",
        web["findings"]
    );
    // The StatefulSet's -Xmx$(HEAP) is expanded as the kubelet does: 2g under 4Gi is 50 %.
    assert!(!rules_of(&reports[1]).contains(&"heap-exceeds-limit".to_string()));
    let options: Vec<&str> = reports[1]["facts"]["java"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["option"].as_str().unwrap())
        .collect();
    assert!(options.contains(&"-Xmx2g"), "{options:?}");
    let heap = web["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "heap-exceeds-limit")
        .unwrap();
    let limit_line = yaml.lines().position(|l| l.trim() == "memory: 2Gi").unwrap() + 1;
    assert_eq!(heap["location"]["line"], limit_line);

    let out = memlint_stdin(
        dir.path(),
        &[
            "lint",
            "--k8s",
            "-",
            "--format",
            "sarif",
            "--sarif-artifact",
            "rendered/shop.yaml",
            "--fail-on",
            "never",
        ],
        &yaml,
    );
    let sarif = json_of(&out);
    let result = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ruleId"] == "heap-exceeds-limit")
        .expect("a SARIF result");
    let place = &result["locations"][0]["physicalLocation"];
    assert_eq!(place["artifactLocation"]["uri"], "rendered/shop.yaml");
    assert_eq!(place["region"]["startLine"], limit_line);
    // One run for the fleet (code scanning takes at most 20, and one per category); each
    // result names its image and container.
    let runs = sarif["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["automationDetails"]["id"], "memlint/k8s/");
    assert_eq!(result["properties"]["k8s"]["container"], "web");
    assert_eq!(result["properties"]["k8s"]["kind"], "Deployment");
    assert!(
        result["properties"]["image"].as_str().unwrap().contains("node:1"),
        "{:#}",
        result["properties"]
    );
    let containers: std::collections::BTreeSet<&str> = runs[0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["properties"]["k8s"]["container"].as_str().unwrap())
        .collect();
    assert!(containers.len() >= 2, "{containers:?}");

    // The same image under 4Gi: no heap-exceeds-limit (1536 would be the guidance's 75 %).
    let out = memlint_stdin(
        dir.path(),
        &["lint", "--k8s", "-", "--format", "json", "--fail-on", "never"],
        &rendered_chart(&host, "2048", "4Gi"),
    );
    let v = json_of(&out);
    assert!(!rules_of(&v["reports"][0]).contains(&"heap-exceeds-limit".to_string()));
    // 1800 of 2Gi is more than 75 %: a warning of the same rule.
    let out = memlint_stdin(
        dir.path(),
        &["lint", "--k8s", "-", "--format", "json", "--fail-on", "never"],
        &rendered_chart(&host, "1800", "2Gi"),
    );
    let v = json_of(&out);
    let heap: Vec<&Value> = v["reports"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "heap-exceeds-limit")
        .collect();
    assert_eq!(heap.len(), 1);
    assert_eq!(heap[0]["severity"], "warning");

    // Text: grouped by workload, with the summary table.
    let out = memlint_stdin(dir.path(), &["lint", "--k8s", "-", "--fail-on", "error"], &yaml);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("== Deployment shop/release-name-shop-web, container web (-:"),
        "{text}"
    );
    assert!(text.contains("WORKLOAD"), "{text}");
    // Each image is read once, with one line each.
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("memlint: image ").count(), 2, "{err}");

    // GitHub annotations on the same line; -v lists the kinds it skipped.
    let out = memlint_stdin(
        dir.path(),
        &[
            "lint",
            "--k8s",
            "-",
            "--format",
            "github",
            "--sarif-artifact",
            "rendered/shop.yaml",
            "-v",
            "--fail-on",
            "never",
        ],
        &yaml,
    );
    let annotations = String::from_utf8_lossy(&out.stdout);
    assert!(
        annotations.contains(&format!("::error file=rendered/shop.yaml,line={limit_line},")),
        "{annotations}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Service `release-name-shop` skipped"), "{err}");
    assert!(err.contains("ConfigMap `release-name-shop` skipped"), "{err}");
}

#[test]
fn lists_folders_stand_ins_and_an_image_that_cannot_be_read() {
    let node = build_image("node-old-space");
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("deploy");
    std::fs::create_dir_all(manifests.join("nested")).unwrap();
    std::fs::write(
        manifests.join("list.yaml"),
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: one}\n  spec:\n    containers:\n    - name: app\n      image: ghcr.io/example/app:1.2\n      resources: {limits: {memory: 1Gi}}\n",
    )
    .unwrap();
    std::fs::write(
        manifests.join("nested/missing.yml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: two}\nspec:\n  containers:\n  - name: gone\n    image: 127.0.0.1:1/nothing:here\n",
    )
    .unwrap();
    std::fs::write(manifests.join("README.md"), "not a manifest").unwrap();
    let stand_in = format!("ghcr.io/example/app:1.2={node}");
    let out = memlint_in(
        dir.path(),
        &[
            "lint",
            "--k8s",
            "deploy",
            "--image",
            &stand_in,
            "--format",
            "json",
            "--timeout",
            "20s",
        ],
    );
    // One image could not be read: exit 2, the other container still linted.
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&out);
    let reports = v["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0]["k8s"]["name"], "one");
    assert_eq!(reports[0]["k8s"]["file"], "deploy/list.yaml");
    assert!(reports[0]["findings"].is_array());
    assert_eq!(reports[1]["k8s"]["container"], "gone");
    assert!(reports[1]["error"]["message"].is_string(), "{:#}", reports[1]);
    assert!(reports[1].get("findings").is_none());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1 container(s) not linted"), "{err}");

    // A ConfigMap mounted as a folder: each key a link into `..data`, itself a link to a hidden
    // folder of the current version. Each manifest is read once.
    let cm = dir.path().join("cm");
    std::fs::create_dir_all(cm.join("..2026_12_02_10_00_00.1")).unwrap();
    std::fs::copy(
        manifests.join("list.yaml"),
        cm.join("..2026_12_02_10_00_00.1/list.yaml"),
    )
    .unwrap();
    std::os::unix::fs::symlink("..2026_12_02_10_00_00.1", cm.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/list.yaml", cm.join("list.yaml")).unwrap();
    let v = lint_k8s(dir.path(), "cm", &[&stand_in]);
    assert_eq!(v["reports"].as_array().unwrap().len(), 1, "{v:#}");
    assert_eq!(v["reports"][0]["k8s"]["file"], "cm/list.yaml");

    // A stand-in for an image no container runs is a mistake, not a silent registry read.
    let out = memlint_in(
        dir.path(),
        &[
            "lint",
            "--k8s",
            "deploy",
            "--image",
            &format!("ghcr.io/example/app:9={node}"),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = error_text(&out);
    assert!(
        err.contains("no container of the manifests runs") && err.contains("ghcr.io/example/app:1.2"),
        "{err}"
    );
}

#[test]
fn bad_manifests_exit_2_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("broken.yaml", "kind: Pod\nspec:\n  containers: [\n", "broken.yaml", "line 3"),
        (
            "wrong.yaml",
            "kind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        image: x\n        env:\n        - name: PORT\n          value: 8080\n",
            "must be a string",
            "line 11",
        ),
        (
            "chart.yaml",
            "kind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  template:\n    spec:\n      containers:\n      - image: {{ .Values.image }}\n",
            "helm template",
            "line 3",
        ),
        (
            "quantity.yaml",
            "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - image: x\n    resources: {limits: {memory: 2GB}}\n",
            "not a Kubernetes quantity",
            "line 6",
        ),
    ];
    for (file, text, needle, line) in cases {
        std::fs::write(dir.path().join(file), text).unwrap();
        let out = memlint_in(dir.path(), &["lint", "--k8s", file]);
        assert_eq!(out.status.code(), Some(2), "{file}");
        let err = error_text(&out);
        assert!(
            err.contains(needle) && err.contains(line) && err.contains(file),
            "{file}: {err}"
        );
    }
}

#[test]
fn shards_cover_every_image_once_and_merge_gives_the_unsharded_report() {
    let images = ["node-old-space", "java17-options", "next-15"].map(build_image);
    let dir = tempfile::tempdir().unwrap();
    let mut yaml = String::new();
    let mut stand_ins = Vec::new();
    for (i, image) in images.iter().enumerate() {
        for replica in 0..2 {
            yaml.push_str(&format!(
                "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: app-{i}-{replica}}}\nspec:\n  template:\n    spec:\n      containers:\n      - name: main\n        image: registry.local/app-{i}:1\n        resources: {{limits: {{memory: 1Gi}}}}\n"
            ));
        }
        stand_ins.push(format!("registry.local/app-{i}:1={image}"));
    }
    std::fs::write(dir.path().join("fleet.yaml"), &yaml).unwrap();
    let run = |extra: &[&str], out: &str| {
        let mut args = vec![
            "lint",
            "--k8s",
            "fleet.yaml",
            "--format",
            "json",
            "--fail-on",
            "never",
            "--no-cache",
            "--output",
            out,
        ];
        for s in &stand_ins {
            args.extend(["--image", s.as_str()]);
        }
        args.extend_from_slice(extra);
        let o = memlint_in(dir.path(), &args);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        common::valid_report(&std::fs::read(dir.path().join(out)).unwrap())
    };
    let whole = run(&["--parallel", "3"], "whole.json");
    assert_eq!(whole["reports"].as_array().unwrap().len(), 6);
    let mut seen: Vec<String> = Vec::new();
    for i in 1..=3 {
        let shard = format!("{i}/3");
        let v = run(&["--shard", &shard], &format!("shard-{i}.json"));
        let mut mine: Vec<String> = v["reports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["reference"].as_str().unwrap().to_string())
            .collect();
        mine.dedup();
        seen.extend(mine);
    }
    seen.sort();
    let mut expected: Vec<String> = images.to_vec();
    expected.sort();
    assert_eq!(seen, expected, "every image in exactly one shard");
    // An Indexed Job's 0-based index plus one names the same shard.
    let again = run(&["--shard", "0+1/3"], "again.json");
    let first =
        serde_json::from_slice::<Value>(&std::fs::read(dir.path().join("shard-1.json")).unwrap()).unwrap();
    assert_eq!(again, first);

    let out = memlint_in(
        dir.path(),
        &[
            "merge",
            "shard-1.json",
            "shard-2.json",
            "shard-3.json",
            "--fail-on",
            "never",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json_of(&out), whole);
    // The unsharded run and the merge of the shards, in one format.
    let both = |format: &str, fail_on: &str| -> (String, String) {
        let mut args = vec![
            "lint",
            "--k8s",
            "fleet.yaml",
            "--format",
            format,
            "--fail-on",
            fail_on,
        ];
        for s in &stand_ins {
            args.extend(["--image", s.as_str()]);
        }
        let unsharded = memlint_in(dir.path(), &args);
        let shards = ["shard-1.json", "shard-2.json", "shard-3.json"];
        let mut args = vec!["merge"];
        args.extend(shards);
        args.extend(["--format", format, "--fail-on", fail_on]);
        let merged = memlint_in(dir.path(), &args);
        let text = |o: &Output| String::from_utf8_lossy(&o.stdout).into_owned();
        (text(&unsharded), text(&merged))
    };
    // GitHub annotations and SARIF of the merge are those of the unsharded run.
    for format in ["github", "sarif"] {
        let (unsharded, merged) = both(format, "never");
        assert!(!unsharded.is_empty());
        assert_eq!(merged, unsharded, "{format}");
    }
    // JUnit of the merge: the unsharded run's suites, tests and failures (why a rule could not
    // decide is not in the JSON, so the texts differ there).
    let attrs = |xml: &str| -> Vec<String> {
        xml.lines()
            .filter(|l| l.trim_start().starts_with("<testsuite"))
            .map(|l| l.trim().to_string())
            .collect()
    };
    let (unsharded, merged) = both("junit", "note");
    assert_eq!(attrs(&merged), attrs(&unsharded));
    assert_eq!(attrs(&unsharded).len(), 7, "{unsharded}");
    // The merged findings decide the exit code.
    let out = memlint_in(
        dir.path(),
        &[
            "merge",
            "shard-3.json",
            "shard-1.json",
            "shard-2.json",
            "--fail-on",
            "note",
            "--format",
            "sarif",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let merged = json_of(&out);
    assert_eq!(merged["runs"].as_array().unwrap().len(), 1);
    let named: std::collections::BTreeSet<&str> = merged["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["properties"]["k8s"]["name"].as_str().unwrap())
        .collect();
    // Two replicas of one image: the same findings, each named and fingerprinted apart.
    assert!(
        named.contains("app-0-0") && named.contains("app-0-1"),
        "{named:?}"
    );
    assert_eq!(merged["runs"][0]["automationDetails"]["id"], "memlint/k8s/");
    // The category the shards were linted with, given to the merge.
    let out = memlint_in(
        dir.path(),
        &[
            "merge",
            "shard-1.json",
            "--format",
            "sarif",
            "--fail-on",
            "never",
            "--category",
            "fleet/prod",
        ],
    );
    assert_eq!(json_of(&out)["runs"][0]["automationDetails"]["id"], "fleet/prod/");
    let results = merged["runs"][0]["results"].as_array().unwrap();
    let fingerprints: std::collections::BTreeSet<&str> = results
        .iter()
        .map(|r| r["partialFingerprints"]["memlintFinding/v2"].as_str().unwrap())
        .collect();
    assert_eq!(fingerprints.len(), results.len());
}

/// The example Job of examples/k8s is a manifest memlint's own reader takes.
#[test]
fn the_example_fleet_job_is_read_by_the_k8s_reader() {
    let demo = build_image("demo");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/k8s/memlint-fleet-job.yaml");
    let stand_in = format!("ghcr.io/memlint/memlint:latest={demo}");
    let v = lint_k8s(Path::new("."), example.to_str().unwrap(), &[&stand_in]);
    let kinds: Vec<&str> = v["reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["k8s"]["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.len() >= 2 && kinds.iter().all(|k| *k == "Job"), "{kinds:?}");
    for r in v["reports"].as_array().unwrap() {
        assert!(
            r["facts"]["container"]["limits_memory"]["value"]["value"]
                .as_u64()
                .unwrap()
                > 0
        );
    }
}

/// The manifest's env and command count as the image's would: a jemalloc `LD_PRELOAD` set only
/// in the manifest quiets the allocator rules, a broken one there is reported on its env line,
/// and a `command` replaces the image's entrypoint as the kubelet does.
#[test]
fn the_manifest_env_and_command_are_what_the_program_gets() {
    let sharp = build_image("node-sharp-jemalloc-unused");
    let go = build_image("go-nocgo");
    let dir = tempfile::tempdir().unwrap();
    let pod = |name: &str, image: &str, extra: &str| {
        format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n  - name: main\n    image: {image}\n{extra}"
        )
    };
    let yaml = [
        pod("bare", "registry.local/sharp:1", ""),
        pod(
            "preloaded",
            "registry.local/sharp:1",
            "    env:\n    - name: LD_PRELOAD\n      value: /usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n",
        ),
        pod(
            "wrong-arch",
            "registry.local/sharp:1",
            "    env:\n    - name: LD_PRELOAD\n      value: /usr/lib/aarch64-linux-gnu/libjemalloc.so.2\n",
        ),
        pod(
            "go-command",
            "registry.local/go:1",
            "    command: [/usr/local/bin/cgoapp]\n    env:\n    - name: GOMEMLIMIT\n      value: 512Mi\n",
        ),
        pod(
            "go-secret",
            "registry.local/go:1",
            "    env:\n    - name: GOMEMLIMIT\n      valueFrom: {secretKeyRef: {name: go, key: limit}}\n    resources: {limits: {memory: 512Mi}}\n",
        ),
    ]
    .concat();
    std::fs::write(dir.path().join("pods.yaml"), &yaml).unwrap();
    let sharp_in = format!("registry.local/sharp:1={sharp}");
    let go_in = format!("registry.local/go:1={go}");
    let v = lint_k8s(dir.path(), "pods.yaml", &[&sharp_in, &go_in]);
    let by_name = |n: &str| {
        v["reports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["k8s"]["name"] == n)
            .unwrap_or_else(|| panic!("no report for {n}"))
            .clone()
    };
    let bare = rules_of(&by_name("bare"));
    assert!(bare.contains(&"jemalloc-not-preloaded".to_string()), "{bare:?}");
    let preloaded = rules_of(&by_name("preloaded"));
    for quiet in [
        "jemalloc-not-preloaded",
        "sharp-glibc-allocator",
        "ld-preload-missing",
    ] {
        assert!(
            !preloaded.contains(&quiet.to_string()),
            "{quiet} on the preloaded pod: {preloaded:?}"
        );
    }
    let wrong = by_name("wrong-arch");
    let missing = wrong["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "ld-preload-missing")
        .unwrap_or_else(|| panic!("{:#}", wrong["findings"]));
    let env_line = yaml
        .lines()
        .position(|l| l.contains("aarch64-linux-gnu"))
        .unwrap(); // the `- name:` line above it
    assert_eq!(missing["location"]["line"], env_line, "{missing:#}");
    assert_eq!(missing["location"]["path"], "pods.yaml");
    let go = by_name("go-command");
    let malformed = go["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "gomemlimit-malformed")
        .unwrap_or_else(|| panic!("{:#}", go["findings"]));
    // The program the command names, not the image's entrypoint (/app/server) runs.
    assert_eq!(go["facts"]["entrypoint"]["program"], "/usr/local/bin/cgoapp");
    let env_line = yaml.lines().position(|l| l.contains("value: 512Mi")).unwrap(); // its `- name:` line
    assert_eq!(malformed["location"]["line"], env_line);
    assert!(
        malformed["fix"].as_str().unwrap().contains("- name: GOMEMLIMIT"),
        "{malformed:#}"
    );
    // A GOMEMLIMIT from a secret is not missing, nor judged: the rules that read it say so.
    let secret = rules_of(&by_name("go-secret"));
    for quiet in [
        "go-memlimit-missing",
        "heap-exceeds-limit",
        "gomemlimit-malformed",
    ] {
        assert!(!secret.contains(&quiet.to_string()), "{quiet}: {secret:?}");
    }
    let out = memlint_in(
        dir.path(),
        &[
            "lint",
            "--k8s",
            "pods.yaml",
            "-v",
            "--fail-on",
            "never",
            "--image",
            &sharp_in,
            "--image",
            &go_in,
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("go-memlimit-missing: GOMEMLIMIT is set by"),
        "{text}"
    );
    assert!(text.contains("from the secret `go`"), "{text}");
}

/// `facts.memory`, the container's memory budget (issue #27): Debian's OpenJDK 17 image run by
/// a Deployment with a memory limit, a `medium: Memory` emptyDir and JVM options in its env. The
/// JSON names the limit with its line, the volume, and the heap and direct-memory caps with the
/// option and the manifest line that set them; `lint -v` shows them as one table; `inspect` of
/// the image alone has the caps and an undecided limit.
#[test]
fn the_memory_budget_joins_the_limit_volumes_and_the_jvm_caps() {
    let java = build_image("java17-ram-percentage");
    let dir = tempfile::tempdir().unwrap();
    let yaml = "apiVersion: apps/v1
kind: Deployment
metadata: {name: orders}
spec:
  template:
    spec:
      containers:
      - name: api
        image: registry.local/orders:1
        env:
        - name: JAVA_TOOL_OPTIONS
          value: -Xmx1536m -XX:MaxDirectMemorySize=256m
        resources:
          limits: {memory: 2Gi}
        volumeMounts:
        - {name: scratch, mountPath: /tmp}
      volumes:
      - name: scratch
        emptyDir: {medium: Memory, sizeLimit: 256Mi}
";
    std::fs::write(dir.path().join("orders.yaml"), yaml).unwrap();
    let stand_in = format!("registry.local/orders:1={java}");
    let v = lint_k8s(dir.path(), "orders.yaml", &[&stand_in]);
    let m = &v["reports"][0]["facts"]["memory"];
    assert_eq!(m["limit"]["status"], "set", "{m}");
    assert_eq!(m["limit"]["bytes"], 2u64 << 30);
    assert_eq!(m["limit"]["line"], 14);
    assert_eq!(m["request"]["status"], "undecided");
    assert_eq!(m["volumes"][0]["volume"], "scratch");
    assert_eq!(m["volumes"][0]["path"], "/tmp");
    assert_eq!(m["volumes"][0]["size_limit"], 256u64 << 20);
    assert_eq!(m["dev_shm"]["bytes"], 64u64 << 20);
    let commitment = |what: &str| {
        m["runtimes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["runtime"] == "jvm" && c["what"] == what)
            .unwrap_or_else(|| panic!("no jvm {what} in {m}"))
            .clone()
    };
    let heap = commitment("heap");
    assert_eq!(heap["status"], "set");
    assert_eq!(heap["bytes"], 1536u64 << 20);
    assert_eq!(heap["setting"], "-Xmx1536m (from JAVA_TOOL_OPTIONS)");
    assert_eq!(heap["origin"], "set by the manifest's env at line 11");
    let direct = commitment("direct_memory");
    assert_eq!(direct["bytes"], 256u64 << 20);
    assert_eq!(direct["origin"], "set by the manifest's env at line 11");
    // `facts.container` keeps its keys.
    assert_eq!(v["reports"][0]["facts"]["container"]["limits_memory"]["line"], 14);

    let out = memlint_in(
        dir.path(),
        &[
            "lint",
            "-v",
            "--k8s",
            "orders.yaml",
            "--image",
            &stand_in,
            "--fail-on",
            "never",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("Memory"))
        .take(6)
        .collect();
    assert!(table[0].contains("WHAT") && table[0].contains("SIZE"), "{text}");
    assert!(
        table[1].contains("resources.limits.memory 2Gi (line 14)") && table[1].ends_with("2 GiB"),
        "{table:?}"
    );
    assert!(
        table.iter().any(
            |l| l.contains("emptyDir scratch at /tmp (sizeLimit 256Mi)") && l.ends_with("256 MiB (12 %)")
        ),
        "{table:?}"
    );
    assert!(
        table
            .iter()
            .any(|l| l.contains("jvm heap") && l.ends_with("1536 MiB (75 %)")),
        "{table:?}"
    );

    let out = memlint_in(dir.path(), &["inspect", "--format", "json", &java]);
    let alone = json_of(&out);
    let m = &alone["facts"]["memory"];
    assert_eq!(m["limit"]["status"], "undecided", "{m}");
    assert!(m["limit"]["why"].as_str().unwrap().contains("--k8s"));
    let heap = &m["runtimes"][0];
    assert_eq!(
        (heap["what"].as_str(), heap["status"].as_str()),
        (Some("heap"), Some("set"))
    );
    assert_eq!(heap["percent_of_limit"], 75.0);
    assert_eq!(heap["bytes"], Value::Null);
    let out = memlint_in(dir.path(), &["inspect", &java]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("jvm heap") && l.ends_with("75 % of the limit")),
        "{text}"
    );
}

/// A fleet of one Node image run by several workloads, each with `--max-old-space-size=2048`
/// under a 2Gi limit (heap-exceeds-limit), some carrying `memlint/ignore` annotations.
fn annotated_fleet() -> String {
    let node = |name: &str| {
        format!(
            "      - name: {name}\n        image: ghcr.io/example/node:1\n        env: [{{name: NODE_OPTIONS, value: \"--max-old-space-size=2048\"}}]\n        resources: {{limits: {{memory: 2Gi}}}}\n"
        )
    };
    let deeper = |text: String| text.lines().map(|l| format!("    {l}\n")).collect::<String>();
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    memlint/ignore: "heap-exceeds-limit: the operator sizes the heap"
spec:
  template:
    spec:
      containers:
{web}---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: plain
spec:
  template:
    spec:
      containers:
{plain}---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        metadata:
          annotations:
            memlint/ignore: |
              go-memlimit-missing: not a Go program
              heap-exceeds-limit@job: a batch, sized by hand
            memlint/ignore-until: "2099-12-31"
        spec:
          containers:
{job}---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: pair
  annotations:
    memlint/ignore: "heap-exceeds-limit@a: only a is tuned"
spec:
  template:
    spec:
      containers:
{a}{b}---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: lapsed
  annotations:
    memlint/ignore: "heap-exceeds-limit: until the resize"
    memlint/ignore-until: "2020-01-31"
spec:
  template:
    spec:
      containers:
{lapsed}"#,
        web = node("web"),
        plain = node("plain"),
        job = deeper(node("job")),
        a = node("a"),
        b = node("b"),
        lapsed = node("lapsed"),
    )
}

#[test]
fn workload_annotations_ignore_a_rule_for_that_workload_alone() {
    let node = build_image("node-old-space");
    let dir = tempfile::tempdir().unwrap();
    let yaml = annotated_fleet();
    std::fs::write(dir.path().join("fleet.yaml"), &yaml).unwrap();
    let line_of = |needle: &str| yaml.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let stand_in = format!("ghcr.io/example/node:1={node}");
    let v = lint_k8s(dir.path(), "fleet.yaml", &[&stand_in]);
    let by_container = |name: &str| {
        v["reports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["k8s"]["container"] == name)
            .unwrap_or_else(|| panic!("{name}: {v:#}"))
            .clone()
    };
    let heap = "heap-exceeds-limit".to_string();
    let ignored = |r: &Value| -> Vec<(String, String, String, String)> {
        r["ignored"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let s = &f["suppression"];
                (
                    f["rule"].as_str().unwrap().to_string(),
                    s["kind"].as_str().unwrap().to_string(),
                    s["justification"].as_str().unwrap().to_string(),
                    s["origin"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    // The Deployment's annotation hides its finding, with its reason and line.
    let web = by_container("web");
    assert!(!rules_of(&web).contains(&heap), "{web:#}");
    assert_eq!(
        ignored(&web),
        [(
            heap.clone(),
            "inSource".to_string(),
            "the operator sizes the heap".to_string(),
            format!("fleet.yaml:{}", line_of("the operator sizes the heap"))
        )]
    );
    assert_eq!(web["summary"]["ignored"], 1);
    // Another workload with the same image keeps it.
    let plain = by_container("plain");
    assert!(rules_of(&plain).contains(&heap), "{plain:#}");
    assert_eq!(plain["ignored"].as_array().unwrap().len(), 0);
    // The CronJob's pod template: a block of two entries, each at its own line, not expired.
    let job = by_container("job");
    assert!(!rules_of(&job).contains(&heap), "{job:#}");
    assert_eq!(
        ignored(&job),
        [(
            heap.clone(),
            "inSource".to_string(),
            "a batch, sized by hand".to_string(),
            format!("fleet.yaml:{}", line_of("heap-exceeds-limit@job"))
        )]
    );
    // `@a` hides the finding on container a, not on b of the same workload.
    assert!(!rules_of(&by_container("a")).contains(&heap));
    assert_eq!(ignored(&by_container("a")).len(), 1);
    assert!(rules_of(&by_container("b")).contains(&heap));
    // Past its ignore-until the finding is back, saying the ignore expired.
    let lapsed = by_container("lapsed");
    let finding = lapsed["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "heap-exceeds-limit")
        .unwrap_or_else(|| panic!("{lapsed:#}"));
    let evidence = finding["evidence"].to_string();
    assert!(
        evidence.contains(&format!(
            "the ignore at fleet.yaml:{} expired on 2020-01-31 and no longer hides this (until the resize)",
            line_of("until the resize")
        )),
        "{evidence}"
    );

    // Text: the annotation that matched nothing is a note, as an unused config ignore is.
    let out = memlint_in(
        dir.path(),
        &[
            "lint",
            "--k8s",
            "fleet.yaml",
            "--image",
            &stand_in,
            "--fail-on",
            "never",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "note: the ignore of go-memlimit-missing at fleet.yaml:{} matched no finding",
            line_of("not a Go program")
        )),
        "{text}"
    );

    // SARIF: the suppression is in the source, at the annotation's line.
    let out = memlint_in(
        dir.path(),
        &[
            "lint",
            "--k8s",
            "fleet.yaml",
            "--image",
            &stand_in,
            "--format",
            "sarif",
            "--fail-on",
            "never",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    let suppressed: Vec<(&str, u64)> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["suppressions"].get(0))
        .map(|s| {
            let loc = &s["location"]["physicalLocation"];
            assert_eq!(loc["artifactLocation"]["uri"], "fleet.yaml", "{s:#}");
            (
                s["kind"].as_str().unwrap(),
                loc["region"]["startLine"].as_u64().unwrap(),
            )
        })
        .collect();
    let at = |needle: &str| line_of(needle) as u64;
    assert_eq!(
        suppressed,
        [
            ("inSource", at("the operator sizes the heap")),
            ("inSource", at("heap-exceeds-limit@job")),
            ("inSource", at("only a is tuned")),
        ]
    );
}

#[test]
fn malformed_workload_annotations_exit_2_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let deployment = |annotations: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  annotations:\n{annotations}spec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: x\n"
        )
    };
    let cases = [
        (
            "    memlint/ignore: \"heap-exceeds-limt: sized\"\n",
            "there is no rule `heap-exceeds-limt`",
            "did you mean `heap-exceeds-limit`",
            6,
        ),
        (
            "    memlint/ignore: |\n      go-memlimit-missing: not Go\n      heap-exceeds-limit\n",
            "the ignore of heap-exceeds-limit has no reason",
            "why it is fine here",
            8,
        ),
        (
            "    memlint/ignore: \"heap-exceeds-limit: sized\"\n    memlint/ignore-until: \"2026-02-30\"\n",
            "is not a date",
            "YYYY-MM-DD",
            7,
        ),
        (
            "    memlint/ignore: \"heap-exceeds-limit@sidecar: sized\"\n",
            "names the container `sidecar`",
            "its containers are: app",
            6,
        ),
        (
            "    memlint/ignore-until: \"2027-01-31\"\n",
            "has no `memlint/ignore` beside it",
            "remove it",
            6,
        ),
    ];
    for (annotations, says, help, line) in cases {
        std::fs::write(dir.path().join("d.yaml"), deployment(annotations)).unwrap();
        let out = memlint_in(dir.path(), &["lint", "--k8s", "d.yaml"]);
        assert_eq!(out.status.code(), Some(2), "{annotations}");
        let err = error_text(&out);
        assert!(
            err.contains(says)
                && err.contains(help)
                && err.contains(&format!("(line {line})"))
                && err.contains("d.yaml"),
            "{annotations}: {err}"
        );
    }
}
