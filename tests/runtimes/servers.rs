//! Issue #30's server rules on images from real packages and vendor layouts:
//! `redis-maxmemory-unset` on Debian bookworm's redis-server 7.0.15, whose claims are checked
//! against the real server of that package run here as a plain process;
//! `launcher-heap-vs-limit` on OpenSearch-, Kafka- and Cassandra-shaped images whose launcher
//! lines are those the projects ship (OpenSearch 2.x `bin/opensearch`, `config/jvm.options`;
//! Kafka 3.x `bin/kafka-server-start.sh`; Cassandra 3.11 `conf/cassandra-env.sh`);
//! `jvm-direct-memory-unbounded` on Debian's OpenJDK 17 with Netty from `libnetty-java`, with
//! the JVM's direct-memory cap shown on Debian's JDK 17.

use crate::common;

use common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const REDIS: &str = "redis-maxmemory-unset";
const LAUNCHER: &str = "launcher-heap-vs-limit";
const DIRECT: &str = "jvm-direct-memory-unbounded";
const NEW_RULES: &[&str] = &[REDIS, LAUNCHER, DIRECT];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn manifest(name: &str) -> PathBuf {
    repo().join("testdata/k8s").join(name)
}

/// The one container report of `lint --k8s MANIFEST` with `registry.local/app:1` read from
/// `image`, in `format`: JSON parsed, or the text.
fn lint_k8s_as(manifest: &Path, image: &str, format: &str) -> String {
    let stand_in = format!("registry.local/app:1={image}");
    let out = memlint(&[
        "lint",
        "--format",
        format,
        "--fail-on",
        "never",
        "--k8s",
        manifest.to_str().unwrap(),
        "--image",
        &stand_in,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn lint_k8s(manifest: &Path, image: &str) -> Value {
    let v: Value = serde_json::from_str(&lint_k8s_as(manifest, image, "json")).unwrap();
    let reports = v["reports"].as_array().expect("--k8s reports");
    assert_eq!(reports.len(), 1, "{v:#}");
    reports[0].clone()
}

/// A one-container Deployment running `registry.local/app:1` under `limit`, with `extra`
/// container lines (indented by 10), written to `dir`.
fn deployment(dir: &Path, name: &str, limit: &str, extra: &str) -> PathBuf {
    let text = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n        - name: {name}\n          image: registry.local/app:1\n{extra}          resources:\n            limits:\n              memory: {limit}\n"
    );
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// The line of the first line of `file` that contains `needle` (from 1).
fn line_of(file: &Path, needle: &str) -> usize {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no `{needle}` in {}", file.display()))
        + 1
}

#[test]
fn debian_redis_under_256mi_without_maxmemory_is_reported_on_its_limit_line() {
    let image = build_image("redis-debian");
    let broken = manifest("redis-256mi.yaml");
    let r = lint_k8s(&broken, &image);
    let hits = findings_of(&r, REDIS);
    assert_eq!(hits.len(), 1, "{:#}", r["findings"]);
    assert_eq!(hits[0]["severity"], "warning");
    let fix = hits[0]["fix"].as_str().unwrap();
    assert!(
        fix.contains(r#"args: ["/etc/redis/redis.conf","--daemonize","no","--maxmemory","160mb","--maxmemory-policy","allkeys-lru"]"#),
        "{fix}"
    );
    assert_eq!(r["facts"]["redis"]["layout"], "debian");
    assert_eq!(r["facts"]["redis"]["config_file"], "/etc/redis/redis.conf");
    // GitHub annotations put it on the limits.memory line.
    let limit_line = line_of(&broken, "memory: 256Mi");
    let annotations = lint_k8s_as(&broken, &image, "github");
    assert!(
        annotations.lines().any(|l| l.starts_with("::warning ")
            && l.contains(&format!(",line={limit_line},"))
            && l.contains(REDIS)),
        "{annotations}"
    );
    // The manifest's args (which replace the image's Cmd) with maxmemory: silent.
    let r = lint_k8s(&manifest("redis-256mi-maxmemory.yaml"), &image);
    assert!(findings_of(&r, REDIS).is_empty(), "{:#}", r["findings"]);
    assert_eq!(r["facts"]["redis"]["maxmemory"]["value"], "160mb");
    assert!(
        r["facts"]["redis"]["config_file"].is_null(),
        "args replace the config file argument"
    );
}

#[test]
fn redis_maxmemory_at_or_near_the_limit_and_the_image_alone() {
    let image = build_image("redis-debian");
    let dir = tempfile::tempdir().unwrap();
    // maxmemory = the limit: an error.
    let at = deployment(
        dir.path(),
        "at",
        "256Mi",
        "          args: [\"--maxmemory\", \"256mb\"]\n",
    );
    let r = lint_k8s(&at, &image);
    assert_eq!(
        findings_of(&r, REDIS)[0]["severity"],
        "error",
        "{:#}",
        r["findings"]
    );
    // 200mb is 78 % of 256Mi: a warning while Redis snapshots by default, silent with save "".
    let near = deployment(
        dir.path(),
        "near",
        "256Mi",
        "          args: [\"--maxmemory\", \"200mb\"]\n",
    );
    let r = lint_k8s(&near, &image);
    let hits = findings_of(&r, REDIS);
    assert_eq!(hits.len(), 1, "{:#}", r["findings"]);
    assert!(
        hits[0]["message"].as_str().unwrap().contains("while it persists"),
        "{hits:?}"
    );
    let no_save = deployment(
        dir.path(),
        "nosave",
        "256Mi",
        "          args: [\"--maxmemory\", \"200mb\", \"--save\", \"\"]\n",
    );
    assert!(findings_of(&lint_k8s(&no_save, &image), REDIS).is_empty());

    // Without --k8s: a note on the image, none on its fixed twin.
    let (v, _) = lint_recipe("redis-debian", &["--fail-on", "never"]);
    let hits = findings_of(&v, REDIS);
    assert_eq!(hits.len(), 1, "{:#}", v["findings"]);
    assert_eq!(hits[0]["severity"], "note");
    let (v, _) = lint_recipe("redis-debian-maxmemory", &["--fail-on", "never"]);
    assert!(findings_of(&v, REDIS).is_empty(), "{:#}", v["findings"]);
}

/// Debian's Redis 7.0.15 unpacked from the packages the recipe installed, run as a plain
/// process (redis-server is redis-check-rdb under another name, as the package links it).
struct RedisServer {
    child: std::process::Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl RedisServer {
    fn start(args: &[&str]) -> RedisServer {
        require_tool("dpkg-deb");
        let cache = std::env::var_os("MEMLINT_IMAGE_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo().join(".cache"));
        let debs = cache.join("debs/amd64");
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        for pkg in ["redis-tools_", "libjemalloc2_", "liblzf1_", "libatomic1_"] {
            let deb = std::fs::read_dir(&debs)
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(pkg))
                .unwrap_or_else(|| panic!("no {pkg} package in {}", debs.display()));
            run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root));
        }
        let server = dir.path().join("redis-server");
        std::os::unix::fs::symlink(root.join("usr/bin/redis-check-rdb"), &server).unwrap();
        let socket = dir.path().join("redis.sock");
        let mut cmd = Command::new(&server);
        cmd.args(["--port", "0", "--unixsocket"])
            .arg(&socket)
            .args(["--daemonize", "no", "--logfile", "", "--dir"])
            .arg(dir.path())
            .args(args)
            .env("LD_LIBRARY_PATH", root.join("usr/lib/x86_64-linux-gnu"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !socket.exists() {
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
                panic!("redis-server ended with {status}: {err}");
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not open its socket in 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        RedisServer {
            child,
            socket,
            _dir: dir,
        }
    }

    /// Sends one command (RESP) and returns the first line of the reply with what follows it
    /// for a bulk reply.
    fn command(&self, words: &[&[u8]]) -> String {
        let mut s = UnixStream::connect(&self.socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut req = format!("*{}\r\n", words.len()).into_bytes();
        for w in words {
            req.extend_from_slice(format!("${}\r\n", w.len()).as_bytes());
            req.extend_from_slice(w);
            req.extend_from_slice(b"\r\n");
        }
        s.write_all(&req).unwrap();
        let mut r = BufReader::new(s);
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        if let Some(n) = line
            .strip_prefix('$')
            .and_then(|n| n.trim().parse::<usize>().ok())
        {
            let mut body = vec![0; n];
            r.read_exact(&mut body).unwrap();
            line.push_str(&String::from_utf8_lossy(&body));
        }
        line
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_real_redis_sizes_from_nothing_and_refuses_writes_at_maxmemory() {
    build_image("redis-debian");
    // No maxmemory: 0, no limit.
    let open = RedisServer::start(&["--save", ""]);
    let info = open.command(&[b"INFO", b"memory"]);
    assert!(info.contains("maxmemory:0\r\n"), "{info}");
    drop(open);
    // --maxmemory 2mb (noeviction, the default policy; an empty server uses about 900 KB): the
    // first writes fit, a write past it is refused.
    let capped = RedisServer::start(&["--save", "", "--maxmemory", "2mb"]);
    let value = vec![b'x'; 64 * 1024];
    let mut refused = None;
    for i in 0..64 {
        let key = format!("k{i}");
        let reply = capped.command(&[b"SET", key.as_bytes(), &value]);
        if reply.starts_with("-OOM") {
            refused = Some((i, reply));
            break;
        }
        assert!(reply.starts_with("+OK"), "{reply}");
    }
    let (i, reply) = refused.expect("64 writes of 64 KiB pass a 2 MiB maxmemory");
    assert!(
        reply.contains("command not allowed when used memory > 'maxmemory'"),
        "{reply}"
    );
    assert!(i >= 1, "the first write fits");
}

/// An image of `base` with `files` (path, text, mode) added and Entrypoint/Cmd set.
fn derived(
    dir: &Path,
    name: &str,
    base: &str,
    files: &[(&str, &str, u32)],
    entrypoint: Value,
    cmd: Value,
) -> String {
    let mut layer = LayerSpec::new(Comp::Gzip).by(&format!("COPY {name} /"));
    for (path, text, mode) in files {
        layer = if *mode == 0o755 {
            layer.exe(path, text.as_bytes())
        } else {
            layer.file(path, text.as_bytes())
        };
    }
    derive_image(base, &dir.join(name), &layer, |config| {
        config["config"]["Entrypoint"] = entrypoint.clone();
        config["config"]["Cmd"] = cmd.clone();
    })
}

#[test]
fn opensearch_shipped_heap_under_1gi_is_reported_with_its_variable_as_fix() {
    let image = build_image("opensearch-shaped");
    let r = lint_k8s(&manifest("opensearch-1gi.yaml"), &image);
    let hits = findings_of(&r, LAUNCHER);
    assert_eq!(hits.len(), 1, "{:#}", r["findings"]);
    assert_eq!(hits[0]["severity"], "error");
    let fix = hits[0]["fix"].as_str().unwrap();
    assert!(
        fix.contains(r#"OPENSEARCH_JAVA_OPTS="-Xms512m -Xmx512m""#),
        "{fix}"
    );
    // One finding per heap; the launcher's ergonomics cap direct memory at half the heap.
    assert!(
        findings_of(&r, "heap-exceeds-limit").is_empty(),
        "{:#}",
        r["findings"]
    );
    assert!(findings_of(&r, DIRECT).is_empty(), "{:#}", r["findings"]);
    let runtimes = r["facts"]["memory"]["runtimes"].as_array().unwrap();
    let heap = runtimes
        .iter()
        .find(|c| c["runtime"] == "jvm" && c["what"] == "heap")
        .unwrap();
    assert_eq!(heap["launcher"], "OpenSearch", "{heap:#}");
    assert_eq!(heap["bytes"], 1u64 << 30);
    let direct = runtimes.iter().find(|c| c["what"] == "direct_memory").unwrap();
    assert_eq!(direct["bytes"], 1u64 << 29, "{direct:#}");
    // The version-prefixed lines follow the bundled JDK (17): G1, not CMS.
    let options: Vec<&str> = r["facts"]["java"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["option"].as_str().unwrap())
        .collect();
    assert!(
        options.contains(&"-XX:+UseG1GC") && !options.contains(&"-XX:+UseConcMarkSweepGC"),
        "{options:?}"
    );
    // The fix's variable in the manifest: silent.
    let r = lint_k8s(&manifest("opensearch-1gi-fixed.yaml"), &image);
    for rule in [LAUNCHER, "heap-exceeds-limit"] {
        assert!(findings_of(&r, rule).is_empty(), "{rule}: {:#}", r["findings"]);
    }
    // The image alone: no limit, nothing to judge.
    let (v, _) = lint_recipe("opensearch-shaped", &["--fail-on", "never"]);
    assert!(findings_of(&v, LAUNCHER).is_empty(), "{:#}", v["findings"]);
}

/// Kafka 3.x's `bin/kafka-server-start.sh` (the lines that pick the heap and start the broker).
const KAFKA_SERVER_START: &str = r#"#!/bin/bash
if [ $# -lt 1 ];
then
	echo "USAGE: $0 [-daemon] server.properties [--override property=value]*"
	exit 1
fi
base_dir=$(dirname $0)

if [ "x$KAFKA_LOG4J_OPTS" = "x" ]; then
    export KAFKA_LOG4J_OPTS="-Dlog4j.configuration=file:$base_dir/../config/log4j.properties"
fi

if [ "x$KAFKA_HEAP_OPTS" = "x" ]; then
    export KAFKA_HEAP_OPTS="-Xmx1G -Xms1G"
fi

EXTRA_ARGS=${EXTRA_ARGS-'-name kafkaServer -loggc'}

COMMAND=$1
case $COMMAND in
  -daemon)
    EXTRA_ARGS="-daemon "$EXTRA_ARGS
    shift
    ;;
  *)
    ;;
esac

exec $base_dir/kafka-run-class.sh $EXTRA_ARGS kafka.Kafka "$@"
"#;

/// Cassandra 3.11's `conf/cassandra-env.sh`: the heap pair check and the arena cap.
const CASSANDRA_ENV: &str = r#"#MAX_HEAP_SIZE="4G"
#HEAP_NEWSIZE="800M"

# Set this to control the amount of arenas per-thread in glibc
#export MALLOC_ARENA_MAX=4

# only calculate the size if it's not set manually
if [ "x$MAX_HEAP_SIZE" = "x" ] && [ "x$HEAP_NEWSIZE" = "x" ]; then
    calculate_heap_sizes
else
    if [ "x$MAX_HEAP_SIZE" = "x" ] ||  [ "x$HEAP_NEWSIZE" = "x" ]; then
        echo "please set or unset MAX_HEAP_SIZE and HEAP_NEWSIZE in pairs (see cassandra-env.sh)"
        exit 1
    fi
fi

if [ "x$MALLOC_ARENA_MAX" = "x" ] ; then
    export MALLOC_ARENA_MAX=4
fi
"#;

#[test]
fn kafka_and_cassandra_launchers() {
    let base = build_image("jdk17-netty");
    let dir = tempfile::tempdir().unwrap();
    let kafka = derived(
        dir.path(),
        "kafka",
        &base,
        &[
            ("opt/kafka/bin/kafka-server-start.sh", KAFKA_SERVER_START, 0o755),
            ("opt/kafka/bin/kafka-run-class.sh", "#!/bin/bash\nexec \"$JAVA\" $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS -cp \"$CLASSPATH\" \"$@\"\n", 0o755),
            ("opt/kafka/libs/netty-handler-4.1.100.Final.jar", "PK", 0o644),
        ],
        Value::Null,
        serde_json::json!(["/opt/kafka/bin/kafka-server-start.sh", "/opt/kafka/config/server.properties"]),
    );
    // The default -Xmx1G under 1Gi: an error; under 1280Mi: past 75 %, a warning.
    let r = lint_k8s(&deployment(dir.path(), "kafka1", "1Gi", ""), &kafka);
    let hits = findings_of(&r, LAUNCHER);
    assert_eq!(hits.len(), 1, "{:#}", r["findings"]);
    assert_eq!(hits[0]["severity"], "error");
    assert!(
        hits[0]["message"]
            .as_str()
            .unwrap()
            .contains("KAFKA_HEAP_OPTS in /opt/kafka/bin/kafka-server-start.sh"),
        "{hits:?}"
    );
    assert!(
        hits[0]["fix"]
            .as_str()
            .unwrap()
            .contains(r#"KAFKA_HEAP_OPTS="-Xmx768m -Xms768m""#),
        "{hits:?}"
    );
    assert!(findings_of(&r, "heap-exceeds-limit").is_empty());
    let r = lint_k8s(&deployment(dir.path(), "kafka2", "1280Mi", ""), &kafka);
    assert_eq!(
        findings_of(&r, LAUNCHER)[0]["severity"],
        "warning",
        "{:#}",
        r["findings"]
    );
    let env = "          env:\n            - {name: KAFKA_HEAP_OPTS, value: \"-Xmx768m -Xms768m\"}\n";
    let r = lint_k8s(&deployment(dir.path(), "kafka3", "1Gi", env), &kafka);
    assert!(findings_of(&r, LAUNCHER).is_empty(), "{:#}", r["findings"]);

    let cassandra = derived(
        dir.path(),
        "cassandra",
        &base,
        &[
            ("opt/cassandra/bin/cassandra", "#!/bin/sh\n. \"$CASSANDRA_CONF/cassandra-env.sh\"\nexec $NUMACTL \"$JAVA\" $JVM_OPTS $cassandra_parms -cp \"$CLASSPATH\" $props \"$class\"\n", 0o755),
            ("etc/cassandra/cassandra-env.sh", CASSANDRA_ENV, 0o644),
            ("usr/local/bin/docker-entrypoint.sh", "#!/bin/bash\nset -e\nexec \"$@\"\n", 0o755),
        ],
        serde_json::json!(["docker-entrypoint.sh"]),
        serde_json::json!(["cassandra", "-f"]),
    );
    // Sized from the node (at least 1 GiB on any node of 2 GiB) under 512Mi: an error.
    let r = lint_k8s(&deployment(dir.path(), "cass1", "512Mi", ""), &cassandra);
    let hits = findings_of(&r, LAUNCHER);
    assert_eq!(hits.len(), 1, "{:#}", r["findings"]);
    assert_eq!(hits[0]["severity"], "error");
    assert!(
        hits[0]["message"].as_str().unwrap().contains("node's memory"),
        "{hits:?}"
    );
    assert!(
        hits[0]["fix"]
            .as_str()
            .unwrap()
            .starts_with("ENV MAX_HEAP_SIZE=256M HEAP_NEWSIZE=64M"),
        "{hits:?}"
    );
    // The script's MALLOC_ARENA_MAX=4 is an arena cap: no arena note, as there is on the base.
    assert!(
        findings_of(&r, "jvm-glibc-arenas").is_empty(),
        "{:#}",
        r["findings"]
    );
    let (v, _) = lint_json_image(&base);
    assert_eq!(
        findings_of(&v, "jvm-glibc-arenas").len(),
        1,
        "{:#}",
        v["findings"]
    );
    // The pair: silent; one alone: the script stops, with or without a limit.
    let pair = "          env:\n            - {name: MAX_HEAP_SIZE, value: 256M}\n            - {name: HEAP_NEWSIZE, value: 64M}\n";
    let r = lint_k8s(&deployment(dir.path(), "cass2", "512Mi", pair), &cassandra);
    assert!(findings_of(&r, LAUNCHER).is_empty(), "{:#}", r["findings"]);
    let alone = "          env:\n            - {name: MAX_HEAP_SIZE, value: 256M}\n";
    let r = lint_k8s(&deployment(dir.path(), "cass3", "512Mi", alone), &cassandra);
    assert!(
        findings_of(&r, LAUNCHER)[0]["message"]
            .as_str()
            .unwrap()
            .contains("in pairs"),
        "{:#}",
        r["findings"]
    );
}

fn lint_json_image(image: &str) -> (Value, Option<i32>) {
    let out = memlint(&["lint", "--format", "json", "--fail-on", "never", image]);
    (
        serde_json::from_slice(&out.stdout).expect("JSON"),
        out.status.code(),
    )
}

#[test]
fn netty_on_the_class_path_with_twice_the_heap_past_the_limit() {
    let image = build_image("jdk17-netty");
    let r = lint_k8s(&manifest("netty-1gi.yaml"), &image);
    let hits = findings_of(&r, DIRECT);
    assert_eq!(hits.len(), 1, "{:#}", r["findings"]);
    assert_eq!(hits[0]["severity"], "warning");
    assert!(
        hits[0]["fix"]
            .as_str()
            .unwrap()
            .contains("-XX:MaxDirectMemorySize=174m"),
        "{hits:?}"
    );
    let evidence = hits[0]["evidence"].to_string();
    assert!(evidence.contains("/usr/share/java/netty-"), "{evidence}");
    let r = lint_k8s(&manifest("netty-1gi-capped.yaml"), &image);
    assert!(findings_of(&r, DIRECT).is_empty(), "{:#}", r["findings"]);
    let (v, _) = lint_json_image(&image);
    assert!(
        findings_of(&v, DIRECT).is_empty(),
        "no limit to judge: {:#}",
        v["findings"]
    );
}

/// What the direct-memory rule rests on, shown with Debian's JDK 17: buffers are refused past
/// `-XX:MaxDirectMemorySize`, and without it the cap is the heap's.
#[test]
fn the_jvm_caps_direct_buffers_at_the_heap_unless_told_otherwise() {
    require_tool("java");
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("Direct.java");
    std::fs::write(
        &src,
        "public class Direct { public static void main(String[] a) { java.util.List<java.nio.ByteBuffer> l = new java.util.ArrayList<>(); for (int i = 0; i < Integer.parseInt(a[0]); i++) { l.add(java.nio.ByteBuffer.allocateDirect(16 << 20)); } System.out.println(\"allocated \" + l.size()); } }\n",
    )
    .unwrap();
    let java = |opts: &[&str], n: &str| {
        let out = Command::new("java")
            .args(opts)
            .arg(&src)
            .arg(n)
            .output()
            .expect("java runs");
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (ok, text) = java(&["-Xmx64m", "-XX:MaxDirectMemorySize=8m"], "1");
    assert!(
        !ok && text.contains("Cannot reserve 16777216 bytes of direct buffer memory"),
        "{text}"
    );
    // No cap: as much as the heap (64 MiB): three 16 MiB buffers fit, five do not.
    let (ok, text) = java(&["-Xmx64m"], "3");
    assert!(ok && text.contains("allocated 3"), "{text}");
    let (ok, text) = java(&["-Xmx64m"], "5");
    assert!(
        !ok && text.contains("direct buffer memory") && text.contains("limit: 67108864)"),
        "{text}"
    );
}

/// The three rules fire on no other test image, alone or as the k8s fixtures run them. The
/// images are linted as the recipe cache holds them (rebuilding every recipe is the fixture
/// table's job, not this test's).
#[test]
fn the_new_rules_fire_on_no_other_test_image() {
    let cache = std::env::var_os("MEMLINT_IMAGE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".cache"));
    let out = run(Command::new(repo().join("scripts/build-image.sh")).arg("--list"));
    let mine = [
        "redis-debian",
        "redis-debian-maxmemory",
        "jdk17-netty",
        "opensearch-shaped",
    ];
    let mut linted = 0;
    for recipe in String::from_utf8(out.stdout).unwrap().lines() {
        let dir = cache.join("images").join(recipe);
        if mine.contains(&recipe) || !dir.join("index.json").exists() {
            continue;
        }
        let (v, _) = lint_json_image(&format!("oci-dir:{}:latest", dir.display()));
        for rule in NEW_RULES {
            assert!(
                findings_of(&v, rule).is_empty(),
                "{rule} fires on {recipe}: {:#}",
                v["findings"]
            );
        }
        linted += 1;
    }
    assert!(linted >= 20, "only {linted} test images in {}", cache.display());
    for (recipe, file) in [
        ("java17-options", "heap-2gi.yaml"),
        ("java17-options", "heap-4gi.yaml"),
        ("go-nocgo", "go-limit.yaml"),
    ] {
        let r = lint_k8s(&manifest(file), &build_image(recipe));
        for rule in NEW_RULES {
            assert!(
                findings_of(&r, rule).is_empty(),
                "{rule} fires on {recipe} + {file}: {:#}",
                r["findings"]
            );
        }
    }
}
