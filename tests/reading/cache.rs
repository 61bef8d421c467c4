//! The layer cache, through the real binary: a second read takes every layer from the cache
//! (and never opens a blob), images on a shared base read only their own layers whatever the
//! source form, damaged entries are found and rebuilt, concurrent runs, eviction, a cache
//! folder that cannot be written, and trust: a forged entry or a folder that another user
//! owns or others can write is not used, while a shared parent folder (an emptyDir) works.

use crate::common;

use common::*;
use serde_json::{json, Value};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs memlint with `cache` as its cache folder.
fn run(cache: &Path, args: &[&str]) -> Output {
    memlint_env(args, &[("MEMLINT_CACHE_DIR", cache.to_str().unwrap())])
}

/// `inspect --format json --files`, failing the test with stderr on a failure.
fn inspect(cache: &Path, reference: &str) -> (Value, String) {
    let out = run(cache, &["inspect", "--format", "json", "--files", reference]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "memlint inspect {reference} failed: {stderr}"
    );
    (serde_json::from_slice(&out.stdout).unwrap(), stderr)
}

/// Which layers came from the cache.
fn from_cache(v: &Value) -> Vec<bool> {
    v["image"]["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["from_cache"].as_bool().expect("from_cache"))
        .collect()
}

/// The report with the cache flags taken out, to compare a cached read with a plain one.
fn without_flags(mut v: Value) -> Value {
    for l in v["image"]["layers"].as_array_mut().unwrap() {
        l.as_object_mut().unwrap().remove("from_cache");
    }
    v
}

/// Entry files in a cache folder, temporary files included.
fn cache_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn cache_bytes(dir: &Path) -> u64 {
    cache_files(dir)
        .iter()
        .map(|p| fs::metadata(p).unwrap().len())
        .sum()
}

/// The entry of the layer with this diff_id.
fn entry_of(dir: &Path, diff_id: &str) -> PathBuf {
    let hex = diff_id.strip_prefix("sha256:").unwrap();
    cache_files(dir)
        .into_iter()
        .find(|p| p.file_name().unwrap() == hex)
        .unwrap_or_else(|| panic!("no cache entry for {diff_id}"))
}

fn warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("memlint: warning:"))
        .collect()
}

/// Three small layers: a base with a script and an ELF file, then whiteouts and links.
fn fixture(comp: Comp) -> ImageSpec {
    let mut elf = vec![0u8; 64];
    elf[..4].copy_from_slice(b"\x7fELF");
    elf[4] = 2;
    elf[5] = 1;
    elf[18] = 62;
    ImageSpec::new("amd64")
        .layer(
            LayerSpec::new(comp)
                .by("ADD rootfs.tar /")
                .dir("usr/bin")
                .symlink("bin", "usr/bin")
                .file("etc/os-release", b"ID=debian\nVERSION_ID=\"12\"\n")
                .exe("usr/bin/sh", &elf)
                .exe("usr/bin/start", b"#!/bin/sh\nexec /usr/bin/sh\n")
                .file("etc/a/x", b"x"),
        )
        .layer(
            LayerSpec::new(comp)
                .by("RUN apt-get install -y libjemalloc2")
                .whiteout("etc/a/x")
                .file("usr/lib/libjemalloc.so.2", b"jemalloc")
                .hardlink("usr/bin/sh2", "usr/bin/sh"),
        )
        .layer(
            LayerSpec::new(comp)
                .by("RUN echo ID=other > /etc/os-release")
                .file("etc/os-release", b"ID=other\n"),
        )
        .env("LD_PRELOAD=/usr/lib/libjemalloc.so.2")
}

#[test]
fn a_second_run_reads_no_layer_and_gives_the_same_result() {
    let image = build_image("demo");
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");

    let (first, stderr) = inspect(&cache, &image);
    assert!(warnings(&stderr).is_empty(), "{stderr}");
    let layers = from_cache(&first);
    assert!(layers.len() > 3 && layers.iter().all(|c| !c), "{layers:?}");
    assert_eq!(cache_files(&cache).len(), layers.len(), "one entry per layer");

    let (second, stderr) = inspect(&cache, &image);
    assert!(warnings(&stderr).is_empty(), "{stderr}");
    assert!(from_cache(&second).iter().all(|c| *c));
    // Same digests, sizes, compression, tree listing and facts as a read of the blobs.
    let (plain, _) = inspect_no_cache(&image);
    assert_eq!(without_flags(second.clone()), without_flags(plain.clone()));
    assert_eq!(without_flags(first), without_flags(plain));

    // Same findings.
    let lint = |extra: &[&str]| {
        let mut args = vec!["lint", "--format", "json"];
        args.extend_from_slice(extra);
        args.push(&image);
        let out = if extra.contains(&"--no-cache") {
            memlint(&args)
        } else {
            run(&cache, &args)
        };
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code(), v["findings"].clone())
    };
    let cached = lint(&[]);
    assert_eq!(cached, lint(&["--no-cache"]));
    assert!(!cached.1.as_array().unwrap().is_empty());

    // The text report says which layers came from the cache.
    let text = String::from_utf8(run(&cache, &["inspect", &image]).stdout).unwrap();
    assert_eq!(
        text.matches("(from the layer cache)").count(),
        layers.len(),
        "{text}"
    );

    // `lint -v` counts them too.
    let out = run(&cache, &["lint", "-v", "--fail-on", "never", &image]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let n = layers.len();
    assert!(
        stderr.contains(&format!("{n} layers: 0 read, {n} from the layer cache")),
        "{stderr}"
    );
    let out = memlint(&["lint", "-v", "--no-cache", "--fail-on", "never", &image]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{n} layers read (layer cache off)")),
        "{stderr}"
    );

    // The blobs are never opened: remove them from a copy of the image and it still reads.
    let copy = dir.path().join("copy");
    common::run(Command::new("cp").arg("-r").arg(image_dir(&image)).arg(&copy));
    for l in second["image"]["layers"].as_array().unwrap() {
        let hex = l["digest"].as_str().unwrap().strip_prefix("sha256:").unwrap();
        fs::remove_file(copy.join("blobs/sha256").join(hex)).unwrap();
    }
    let copy_ref = format!("oci-dir:{}:latest", copy.display());
    let (v, _) = inspect(&cache, &copy_ref);
    assert!(from_cache(&v).iter().all(|c| *c));
    assert_eq!(v["facts"], second["facts"]);
    // Without the cache the missing blob is an error, as before.
    let out = memlint(&["inspect", &copy_ref]);
    assert_eq!(out.status.code(), Some(2));
}

fn image_dir(reference: &str) -> PathBuf {
    PathBuf::from(
        reference
            .strip_prefix("oci-dir:")
            .unwrap()
            .rsplit_once(':')
            .unwrap()
            .0,
    )
}

fn inspect_no_cache(reference: &str) -> (Value, String) {
    let out = memlint(&["inspect", "--format", "json", "--files", "--no-cache", reference]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (
        serde_json::from_slice(&out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_image_on_a_seen_base_reads_only_its_own_layers() {
    let base = build_image("demo");
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let (v, _) = inspect(&cache, &base);
    let base_layers = from_cache(&v).len();

    // Another entrypoint and working folder: what the base layers keep does not change, so
    // their entries serve this image too.
    let extra = LayerSpec::new(Comp::Gzip)
        .by("COPY start.sh /opt/app/")
        .exe("opt/app/start.sh", b"#!/bin/sh\nexec /bin/sh\n");
    let app = derive_image(&base, &dir.path().join("app"), &extra, |c| {
        c["config"]["WorkingDir"] = json!("/srv");
        c["config"]["Cmd"] = json!(["/opt/app/start.sh"]);
    });
    let (v, stderr) = inspect(&cache, &app);
    assert!(warnings(&stderr).is_empty(), "{stderr}");
    let mut expected = vec![true; base_layers];
    expected.push(false);
    assert_eq!(from_cache(&v), expected);
    assert_eq!(without_flags(v), without_flags(inspect_no_cache(&app).0));

    // A PATH folder that base layers hold files in: those layers were read without looking
    // for scripts there, so they are read again; the others still come from the cache.
    let extra = LayerSpec::new(Comp::Gzip)
        .by("COPY start.sh /opt/app/")
        .exe("opt/app/start.sh", b"#!/bin/sh\nexec /bin/dash\n");
    let wide = derive_image(&base, &dir.path().join("wide"), &extra, |c| {
        c["config"]["Env"].as_array_mut().unwrap().push(json!(
            "PATH=/usr/lib/x86_64-linux-gnu:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        ));
    });
    let (v, _) = inspect(&cache, &wide);
    let layers = from_cache(&v);
    assert!(layers[..base_layers].iter().any(|c| *c), "{layers:?}");
    assert!(layers[..base_layers].iter().any(|c| !c), "{layers:?}");
    assert!(!layers[base_layers]);
    assert_eq!(without_flags(v), without_flags(inspect_no_cache(&wide).0));
    // The rewritten entries hold what both images want.
    let (v, _) = inspect(&cache, &wide);
    assert!(from_cache(&v).iter().all(|c| *c));
    let (v, _) = inspect(&cache, &base);
    assert!(from_cache(&v).iter().all(|c| *c));
}

#[test]
fn every_source_form_shares_the_entries() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let gzip = fixture(Comp::Gzip);
    let zstd = fixture(Comp::Zstd);
    write_oci_dir(&dir.path().join("gzip"), &gzip, "v1");
    write_oci_dir(&dir.path().join("zstd"), &zstd, "v1");
    let archive = dir.path().join("image.tar");
    write_docker_archive(&archive, &gzip, "app:v1");
    let oci_gzip = format!("oci-dir:{}:v1", dir.path().join("gzip").display());
    let oci_zstd = format!("oci-dir:{}:v1", dir.path().join("zstd").display());
    let docker = format!("docker-archive:{}", archive.display());

    // Standard input is read as it streams (no layer can be skipped), but its layers are
    // written for the others.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memlint"));
    let out = cmd
        .args(["inspect", "--format", "json", "--files", "docker-archive:-"])
        .env("MEMLINT_CACHE_DIR", &cache)
        .stdin(fs::File::open(&archive).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let streamed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(from_cache(&streamed), [false, false, false]);
    assert_eq!(cache_files(&cache).len(), 3);

    for reference in [&oci_gzip, &docker, &oci_zstd] {
        let (v, stderr) = inspect(&cache, reference);
        assert_eq!(from_cache(&v), [true, true, true], "{reference}: {stderr}");
        assert_eq!(v["files"], streamed["files"], "{reference}");
        assert_eq!(v["facts"], streamed["facts"], "{reference}");
        // Digests, sizes and compression are what this image stores, not what the entry was
        // first read from.
        assert_eq!(
            without_flags(v),
            without_flags(inspect_no_cache(reference).0),
            "{reference}"
        );
    }
    assert_eq!(cache_files(&cache).len(), 3);
}

#[test]
fn a_damaged_entry_is_found_warned_about_and_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    write_oci_dir(&dir.path().join("img"), &fixture(Comp::Gzip), "v1");
    let image = format!("oci-dir:{}:v1", dir.path().join("img").display());
    let (first, _) = inspect(&cache, &image);
    let diff_id = first["image"]["layers"][1]["diff_id"]
        .as_str()
        .unwrap()
        .to_string();
    let entry = entry_of(&cache, &diff_id);
    let good = fs::read(&entry).unwrap();
    let version_at = 8 + 4 + 1;

    let damages: Vec<(&str, Vec<u8>)> = vec![
        ("a flipped byte", {
            let mut b = good.clone();
            let mid = b.len() / 2;
            b[mid] ^= 0x40;
            b
        }),
        ("cut short", good[..good.len() - 10].to_vec()),
        ("empty", Vec::new()),
        ("another memlint", {
            // A consistent entry that another version wrote: its checksum is right.
            let mut b = good.clone();
            b[version_at] = b'9';
            let n = b.len() - 32;
            let sum = sha256(&b[..n]);
            let raw: Vec<u8> = (0..32)
                .map(|i| u8::from_str_radix(&sum[2 * i..2 * i + 2], 16).unwrap())
                .collect();
            b[n..].copy_from_slice(&raw);
            b
        }),
        ("not an entry", b"{\"layers\": []}".to_vec()),
    ];
    for (what, bytes) in damages {
        fs::write(&entry, &bytes).unwrap();
        let (v, stderr) = inspect(&cache, &image);
        let w = warnings(&stderr);
        assert_eq!(w.len(), 1, "{what}: {stderr}");
        assert!(
            w[0].contains("is damaged") && w[0].contains(&diff_id[7..]),
            "{what}: {}",
            w[0]
        );
        if what == "another memlint" {
            assert!(w[0].contains("written by memlint 9"), "{}", w[0]);
        }
        assert_eq!(from_cache(&v), [true, false, true], "{what}");
        assert_eq!(v["files"], first["files"], "{what}");
        assert_eq!(v["facts"], first["facts"], "{what}");
        // Rebuilt: the next run takes it from the cache again, silently.
        assert_eq!(fs::read(&entry).unwrap(), good, "{what}");
        let (v, stderr) = inspect(&cache, &image);
        assert!(warnings(&stderr).is_empty(), "{what}: {stderr}");
        assert_eq!(from_cache(&v), [true, true, true], "{what}");
    }
}

#[test]
fn no_cache_writes_nothing_and_cache_dir_picks_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    write_oci_dir(&dir.path().join("img"), &fixture(Comp::Gzip), "v1");
    let image = format!("oci-dir:{}:v1", dir.path().join("img").display());
    // The default folder, under XDG_CACHE_HOME.
    let xdg = dir.path().join("xdg");
    let default_run = |extra: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_memlint"));
        cmd.arg("inspect")
            .args(extra)
            .arg(&image)
            .env_remove("MEMLINT_CACHE_DIR")
            .env("XDG_CACHE_HOME", &xdg);
        assert!(cmd.output().unwrap().status.success());
    };
    default_run(&["--no-cache"]);
    assert!(!xdg.exists(), "--no-cache created {}", xdg.display());
    default_run(&[]);
    assert_eq!(cache_files(&xdg.join("memlint")).len(), 3);

    let env_cache = dir.path().join("env-cache");
    let flag_cache = dir.path().join("flag-cache");
    let out = run(
        &env_cache,
        &["inspect", "--cache-dir", flag_cache.to_str().unwrap(), &image],
    );
    assert!(out.status.success());
    assert!(!env_cache.exists());
    assert_eq!(cache_files(&flag_cache).len(), 3);
}

#[test]
fn concurrent_runs_on_an_empty_cache_both_succeed() {
    let image = build_image("demo");
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_memlint"))
            .args(["inspect", "--format", "json", &image])
            .env("MEMLINT_CACHE_DIR", &cache)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let runs: Vec<_> = (0..3).map(|_| spawn()).collect();
    for r in runs {
        let out = r.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(warnings(&stderr).is_empty(), "{stderr}");
    }
    let files = cache_files(&cache);
    assert!(
        files
            .iter()
            .all(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.')),
        "temporary files left: {files:?}"
    );
    let (v, stderr) = inspect(&cache, &image);
    assert!(warnings(&stderr).is_empty(), "{stderr}");
    assert!(from_cache(&v).iter().all(|c| *c));
    assert_eq!(files.len(), from_cache(&v).len());
}

#[test]
fn eviction_keeps_the_folder_under_its_bound() {
    let image = build_image("demo");
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full");
    inspect(&full, &image);
    let total = cache_bytes(&full);
    let entries = cache_files(&full).len();

    let bounded = dir.path().join("bounded");
    // Just under what every entry takes: at least the oldest goes, never the newest.
    let bound = total - 1;
    let bound_text = bound.to_string();
    let lint = |extra: &[(&str, &str)]| {
        let mut env = vec![
            ("MEMLINT_CACHE_DIR", bounded.to_str().unwrap()),
            ("MEMLINT_CACHE_MAX_BYTES", bound_text.as_str()),
        ];
        env.extend_from_slice(extra);
        let out = memlint_env(&["inspect", "--format", "json", &image], &env);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    lint(&[]);
    let kept = cache_files(&bounded).len();
    assert!(
        cache_bytes(&bounded) <= bound,
        "{} > {bound}",
        cache_bytes(&bounded)
    );
    assert!(kept > 0 && kept < entries, "{kept} of {entries}");
    // What is left is used; what was evicted is read and written again, and the bound holds.
    let v = lint(&[]);
    let layers = from_cache(&v);
    assert_eq!(layers.iter().filter(|c| **c).count(), kept, "{layers:?}");
    assert!(cache_bytes(&bounded) <= bound);
    // Zero keeps nothing.
    lint(&[("MEMLINT_CACHE_MAX_BYTES", "0")]);
    assert_eq!(cache_bytes(&bounded), 0);
}

#[test]
fn a_cache_that_cannot_be_written_changes_nothing_but_a_warning() {
    let image = build_image("demo");
    let dir = tempfile::tempdir().unwrap();
    // A file where the folder should be: fails for root too, unlike permissions.
    let blocked = dir.path().join("blocked");
    fs::write(&blocked, b"not a folder").unwrap();
    let lint = |cache_args: &[&str]| {
        let mut args = vec!["lint", "--format", "json"];
        args.extend_from_slice(cache_args);
        args.push(&image);
        memlint(&args)
    };
    let plain = lint(&["--no-cache"]);
    let out = lint(&["--cache-dir", blocked.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), plain.status.code(), "{stderr}");
    assert_eq!(out.stdout, plain.stdout);
    let w = warnings(&stderr);
    assert_eq!(w.len(), 1, "{stderr}");
    assert!(w[0].contains("cannot write the layer cache"), "{}", w[0]);
    assert_eq!(fs::read(&blocked).unwrap(), b"not a folder");
}

#[test]
fn a_cached_layer_is_held_to_max_layer_bytes() {
    let image = build_image("demo");
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    // Warm the cache with the default limits.
    inspect(&cache, &image);
    let limited = |extra: &[&str]| {
        let mut args = vec!["inspect", "--format", "json"];
        args.extend_from_slice(extra);
        args.push(&image);
        memlint_env(
            &args,
            &[
                ("MEMLINT_CACHE_DIR", cache.to_str().unwrap()),
                ("MEMLINT_LIMITS", "max_layer_bytes=1K"),
            ],
        )
    };
    for extra in [&["--no-cache"][..], &[][..]] {
        let out = limited(extra);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains("max_layer_bytes"), "{extra:?}: {stderr}");
    }
}

#[test]
fn eviction_never_follows_a_linked_folder_out_of_the_cache() {
    let image = build_image("demo");
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    fs::create_dir_all(victim.join("sha256")).unwrap();
    fs::write(victim.join("precious"), b"keep").unwrap();
    fs::write(victim.join("sha256").join("precious"), b"keep").unwrap();
    let cache = dir.path().join("cache");
    let layers = cache.join("layers");
    fs::create_dir_all(layers.join("v0-old")).unwrap();
    std::os::unix::fs::symlink(&victim, layers.join("v0-old").join("sha256")).unwrap();
    std::os::unix::fs::symlink(&victim, layers.join("v0-older")).unwrap();
    let out = memlint_env(
        &["inspect", "--format", "json", &image],
        &[
            ("MEMLINT_CACHE_DIR", cache.to_str().unwrap()),
            ("MEMLINT_CACHE_MAX_BYTES", "1K"),
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(fs::read(victim.join("precious")).unwrap(), b"keep");
    assert_eq!(fs::read(victim.join("sha256").join("precious")).unwrap(), b"keep");
}

#[test]
fn an_entry_over_a_lower_bound_is_a_miss_and_stays() {
    let image = build_image("demo");
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    inspect(&cache, &image);
    let before: Vec<PathBuf> = cache_files(&cache);
    let out = memlint_env(
        &["inspect", "--format", "json", &image],
        &[
            ("MEMLINT_CACHE_DIR", cache.to_str().unwrap()),
            // Every entry is larger than this run may read; the layers read from the image
            // fail on the same limits.
            (
                "MEMLINT_LIMITS",
                "max_metadata_bytes=1,max_kept_bytes_per_layer=1",
            ),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("layer cache entry"), "{stderr}");
    for p in &before {
        assert!(p.exists(), "{} was removed: {stderr}", p.display());
    }
    // The entries still serve a run with the usual limits.
    let (v, _) = inspect(&cache, &image);
    assert!(from_cache(&v).iter().all(|c| *c), "{v}");
}

/// An entry as whoever can write the cache folder could make it: the entry of layer `from`
/// relabelled as layer `as_layer`, with its framing and checksum made anew. The wire format
/// is no secret: magic, format, version, payload length, zstd(postcard), then a sha256 of it
/// all; the postcard payload opens with the diff_id as a length-prefixed string.
fn forge(entry: &[u8], from: &str, as_layer: &str) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let version_len = entry[12] as usize;
    let header = 13 + version_len + 8;
    let payload = &entry[header..entry.len() - 32];
    let mut raw = zstd::decode_all(payload).unwrap();
    assert_eq!((raw[0] as usize, &raw[1..72]), (from.len(), from.as_bytes()));
    raw[1..72].copy_from_slice(as_layer.as_bytes());
    let payload = zstd::encode_all(&raw[..], 3).unwrap();
    let mut out = entry[..header - 8].to_vec();
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&payload);
    let sum = Sha256::digest(&out);
    out.extend_from_slice(&sum);
    out
}

/// Something done to a cache folder or entry: what another user, or a careless mode, does.
type Spoil = fn(&Path);

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

/// Tests run as root, which owns whatever it creates: another user is uid 65534 (nobody).
fn chown_nobody(p: &Path) {
    std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
}

#[test]
fn a_forged_entry_under_a_real_layer_changes_nothing_unless_the_user_wrote_it() {
    // A real Debian image whose last layer purges the preloaded jemalloc: ld-preload-missing.
    let image = build_image("glibc-jemalloc-removed");
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let lint = || {
        let out = run(&cache, &["lint", "--format", "json", &image]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let ids: Vec<String> = report["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| f["rule"].as_str().unwrap_or_default().to_string())
            .collect();
        (out.status.code(), ids, stderr)
    };
    let plain = memlint(&["lint", "--format", "json", "--no-cache", &image]);
    assert_eq!(plain.status.code(), Some(1));
    let (code, found, _) = lint();
    assert_eq!(code, Some(1));
    assert!(found.iter().any(|id| id == "ld-preload-missing"), "{found:?}");
    // The purge layer's entry replaced by the install layer's, relabelled.
    let (v, _) = inspect(&cache, &image);
    let layers = v["image"]["layers"].as_array().unwrap();
    let layer = |what: &str| {
        layers
            .iter()
            .find(|l| l["history"].as_str().unwrap_or_default().contains(what))
            .unwrap()["diff_id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (install, purge) = (layer("install -y libjemalloc2"), layer("purge -y libjemalloc2"));
    let forged = forge(&fs::read(entry_of(&cache, &install)).unwrap(), &install, &purge);
    let target = entry_of(&cache, &purge);
    let plant = |spoil: Spoil| {
        let temp = target.with_file_name("planted");
        fs::write(&temp, &forged).unwrap();
        set_mode(&temp, 0o600);
        spoil(&temp);
        fs::rename(&temp, &target).unwrap();
    };

    // The user's own entry is trusted: the forgery works, which is why the cache is trusted
    // input and why nobody else may write it.
    plant(|_| {});
    let (code, found, stderr) = lint();
    assert_eq!((code, found.len()), (Some(0), 0), "{found:?} {stderr}");

    let cases: [(Spoil, &str); 2] = [
        (chown_nobody, "is owned by uid 65534"),
        (
            |p| set_mode(p, 0o666),
            "can be written by other users (mode 0666)",
        ),
    ];
    for (spoil, says) in cases {
        plant(spoil);
        let (code, found, stderr) = lint();
        assert_eq!(code, Some(1), "{says}: {stderr}");
        assert!(
            found.iter().any(|id| id == "ld-preload-missing"),
            "{says}: {found:?}"
        );
        let w = warnings(&stderr);
        assert_eq!(w.len(), 1, "{stderr}");
        assert!(w[0].contains(says) && w[0].contains(&purge[7..]), "{}", w[0]);
        // The layer was read from the image and its entry is the user's own again.
        assert_ne!(fs::read(&target).unwrap(), forged);
        assert_eq!(lint().0, Some(1));
    }
}

#[test]
fn a_cache_folder_others_can_write_or_of_another_user_is_warned_about_once_and_unused() {
    let image = build_image("demo");
    let plain = memlint(&["lint", "--format", "json", "--no-cache", &image]);
    let cases: [(&str, Spoil, &str); 3] = [
        (
            "layers",
            |p| set_mode(p, 0o777),
            "can be written by other users (mode 0777)",
        ),
        ("layers", chown_nobody, "is owned by uid 65534"),
        ("version", chown_nobody, "is owned by uid 65534"),
    ];
    for (which, spoil, says) in cases {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        inspect(&cache, &image);
        let at = if which == "layers" {
            cache.join("layers")
        } else {
            // The folder of this memlint's entries below `layers` (`v<format>-<version>`).
            fs::read_dir(cache.join("layers"))
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path()
        };
        let before: Vec<(PathBuf, Vec<u8>)> = cache_files(&cache)
            .into_iter()
            .map(|p| (p.clone(), fs::read(p).unwrap()))
            .collect();
        spoil(&at);
        let out = run(&cache, &["lint", "--format", "json", &image]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), plain.status.code(), "{which}: {stderr}");
        assert_eq!(out.stdout, plain.stdout, "{which}");
        let w = warnings(&stderr);
        assert_eq!(w.len(), 1, "{which}: {stderr}");
        assert!(
            w[0].contains(says) && w[0].contains(&at.display().to_string()),
            "{}",
            w[0]
        );
        // Unused: no layer from it, nothing written or removed.
        let (v, stderr) = inspect(&cache, &image);
        assert!(from_cache(&v).iter().all(|c| !c), "{which}: {v}");
        assert_eq!(warnings(&stderr).len(), 1, "{stderr}");
        let after: Vec<(PathBuf, Vec<u8>)> = cache_files(&cache)
            .into_iter()
            .map(|p| (p.clone(), fs::read(p).unwrap()))
            .collect();
        assert_eq!(after, before, "{which}");
    }
}

#[test]
fn a_shared_parent_folder_like_an_empty_dir_works() {
    use std::os::unix::fs::PermissionsExt;
    let image = build_image("demo");
    for parent_mode in [0o1777, 0o777] {
        let dir = tempfile::tempdir().unwrap();
        // The folder given to --cache-dir is shared, as a Kubernetes emptyDir (0777) or /tmp.
        let cache = dir.path().join("shared");
        fs::create_dir(&cache).unwrap();
        set_mode(&cache, parent_mode);
        let (first, stderr) = inspect(&cache, &image);
        assert!(warnings(&stderr).is_empty(), "{stderr}");
        let (second, stderr) = inspect(&cache, &image);
        assert!(warnings(&stderr).is_empty(), "{stderr}");
        assert!(
            from_cache(&second).iter().all(|c| *c),
            "{parent_mode:o}: {second}"
        );
        assert_eq!(without_flags(first), without_flags(second));
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&cache.join("layers")), 0o700);
        for entry in cache_files(&cache) {
            assert_eq!(mode(&entry), 0o600, "{}", entry.display());
        }
    }
}

/// Issue 35: the images of a fleet share their base layers, and `lint --k8s --parallel` reads
/// several at once. A base layer that two images need at the same moment is read once: the
/// second waits for the first's cache entry rather than reading the blob too (`-v` says how
/// many layers each image read and how many the cache served).
#[test]
fn a_fleet_reads_a_shared_base_layer_once() {
    let dir = tempfile::tempdir().unwrap();
    // A base big enough that its read is still going when the other image asks for it.
    let noise: Vec<u8> = (0..24u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let base = || {
        LayerSpec::new(Comp::Gzip)
            .file("etc/os-release", b"ID=debian\nVERSION_ID=\"12\"\n")
            .file("usr/share/base.bin", &noise)
    };
    let mut images = Vec::new();
    for app in ["a", "b"] {
        let spec = ImageSpec::new("amd64")
            .layer(base())
            .layer(LayerSpec::new(Comp::Gzip).file(&format!("app/{app}"), app.as_bytes()));
        let root = dir.path().join(app);
        write_oci_dir(&root, &spec, "latest");
        images.push(format!(
            "registry.local/{app}:1=oci-dir:{}:latest",
            root.display()
        ));
    }
    let manifests = dir.path().join("k8s");
    fs::create_dir(&manifests).unwrap();
    for app in ["a", "b"] {
        fs::write(
            manifests.join(format!("{app}.yaml")),
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {app}\nspec:\n  template:\n    spec:\n      containers:\n        - name: app\n          image: registry.local/{app}:1\n"
            ),
        )
        .unwrap();
    }
    let cache = dir.path().join("cache");
    let out = run(
        &cache,
        &[
            "lint",
            "-v",
            "--fail-on",
            "never",
            "--parallel",
            "2",
            "--k8s",
            manifests.to_str().unwrap(),
            "--image",
            &images[0],
            "--image",
            &images[1],
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // "…: 2 layers: R read, C from the layer cache (…)", once per image.
    let counts: Vec<(u32, u32)> = stderr
        .lines()
        .filter_map(|l| {
            let rest = l.split(" layers: ").nth(1)?;
            let (read, rest) = rest.split_once(" read, ")?;
            let (cached, _) = rest.split_once(" from the layer cache")?;
            Some((read.parse().ok()?, cached.parse().ok()?))
        })
        .collect();
    assert_eq!(counts.len(), 2, "{stderr}");
    let read: u32 = counts.iter().map(|c| c.0).sum();
    let cached: u32 = counts.iter().map(|c| c.1).sum();
    assert_eq!((read, cached), (3, 1), "the shared base is read once: {stderr}");
}
