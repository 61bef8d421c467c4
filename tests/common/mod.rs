//! Fixture writer for integration tests: builds real OCI layouts, OCI archives and `docker save`
//! archives (classic and containerd-store style) from layer descriptions, with gzip, zstd or
//! plain layers, whiteouts, links and multi-platform indexes.
#![allow(dead_code)]

pub mod podman;
pub mod registry;

use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod measure;

/// Compares `actual` with `tests/snapshots/<folder>/<name>`; with `UPDATE_SNAPSHOTS` set, writes
/// it instead (the diff is what review reads).
pub fn assert_snapshot(folder: &str, name: &str, actual: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(folder);
    let path = dir.join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        fs::create_dir_all(&dir).expect("snapshot folder");
        fs::write(&path, actual).expect("snapshot written");
        return;
    }
    let expected = fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{} is missing: run with UPDATE_SNAPSHOTS=1", path.display()));
    assert!(
        actual == expected,
        "{} differs (UPDATE_SNAPSHOTS=1 writes it):\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

pub fn sha256(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comp {
    Plain,
    Gzip,
    Zstd,
}

#[derive(Clone, Debug)]
pub enum Item {
    Dir(String, u32),
    File(String, Vec<u8>, u32),
    Symlink(String, String),
    Hardlink(String, String),
    /// `.wh.NAME` beside NAME.
    Whiteout(String),
    /// `.wh..wh..opq` inside the folder.
    Opaque(String),
}

/// One layer: its items in archive order and how it is compressed.
#[derive(Clone, Debug)]
pub struct LayerSpec {
    pub items: Vec<Item>,
    pub comp: Comp,
    pub created_by: String,
}

impl LayerSpec {
    pub fn new(comp: Comp) -> Self {
        LayerSpec {
            items: Vec::new(),
            comp,
            created_by: "RUN fixture".to_string(),
        }
    }
    pub fn by(mut self, created_by: &str) -> Self {
        self.created_by = created_by.to_string();
        self
    }
    pub fn dir(mut self, p: &str) -> Self {
        self.items.push(Item::Dir(p.into(), 0o755));
        self
    }
    pub fn file(mut self, p: &str, content: &[u8]) -> Self {
        self.items.push(Item::File(p.into(), content.to_vec(), 0o644));
        self
    }
    pub fn exe(mut self, p: &str, content: &[u8]) -> Self {
        self.items.push(Item::File(p.into(), content.to_vec(), 0o755));
        self
    }
    pub fn symlink(mut self, p: &str, target: &str) -> Self {
        self.items.push(Item::Symlink(p.into(), target.into()));
        self
    }
    pub fn hardlink(mut self, p: &str, target: &str) -> Self {
        self.items.push(Item::Hardlink(p.into(), target.into()));
        self
    }
    pub fn whiteout(mut self, p: &str) -> Self {
        self.items.push(Item::Whiteout(p.into()));
        self
    }
    pub fn opaque(mut self, dir: &str) -> Self {
        self.items.push(Item::Opaque(dir.into()));
        self
    }

    /// The uncompressed tar.
    pub fn tar(&self) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for item in &self.items {
            let mut h = tar::Header::new_gnu();
            h.set_uid(0);
            h.set_gid(0);
            h.set_mtime(0);
            match item {
                Item::Dir(p, mode) => {
                    h.set_entry_type(tar::EntryType::Directory);
                    h.set_mode(*mode);
                    h.set_size(0);
                    b.append_data(&mut h, format!("{}/", p.trim_end_matches('/')), &[][..])
                        .unwrap();
                }
                Item::File(p, c, mode) => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_mode(*mode);
                    h.set_size(c.len() as u64);
                    b.append_data(&mut h, p, &c[..]).unwrap();
                }
                Item::Symlink(p, t) => {
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_mode(0o777);
                    h.set_size(0);
                    b.append_link(&mut h, p, t).unwrap();
                }
                Item::Hardlink(p, t) => {
                    h.set_entry_type(tar::EntryType::Link);
                    h.set_mode(0o644);
                    h.set_size(0);
                    b.append_link(&mut h, p, t).unwrap();
                }
                Item::Whiteout(p) => {
                    let (dir, name) = match p.rsplit_once('/') {
                        Some((d, n)) => (format!("{d}/"), n.to_string()),
                        None => (String::new(), p.clone()),
                    };
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_mode(0o644);
                    h.set_size(0);
                    b.append_data(&mut h, format!("{dir}.wh.{name}"), &[][..])
                        .unwrap();
                }
                Item::Opaque(d) => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_mode(0o644);
                    h.set_size(0);
                    b.append_data(
                        &mut h,
                        format!("{}/.wh..wh..opq", d.trim_end_matches('/')),
                        &[][..],
                    )
                    .unwrap();
                }
            }
        }
        b.into_inner().unwrap()
    }

    /// The blob as stored, its media type and its diff_id.
    pub fn blob(&self) -> (Vec<u8>, &'static str, String) {
        let tar = self.tar();
        let diff_id = format!("sha256:{}", sha256(&tar));
        match self.comp {
            Comp::Plain => (tar, "application/vnd.oci.image.layer.v1.tar", diff_id),
            Comp::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(&tar).unwrap();
                (
                    e.finish().unwrap(),
                    "application/vnd.oci.image.layer.v1.tar+gzip",
                    diff_id,
                )
            }
            Comp::Zstd => (
                zstd::encode_all(&tar[..], 3).unwrap(),
                "application/vnd.oci.image.layer.v1.tar+zstd",
                diff_id,
            ),
        }
    }
}

/// An image: layers and config.
#[derive(Clone, Debug)]
pub struct ImageSpec {
    pub arch: String,
    pub variant: Option<String>,
    pub layers: Vec<LayerSpec>,
    pub env: Vec<String>,
    pub entrypoint: Option<Vec<String>>,
    pub cmd: Option<Vec<String>>,
    pub working_dir: Option<String>,
}

impl ImageSpec {
    pub fn new(arch: &str) -> Self {
        ImageSpec {
            arch: arch.to_string(),
            variant: None,
            layers: Vec::new(),
            env: vec!["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()],
            entrypoint: None,
            cmd: Some(vec!["/bin/sh".into()]),
            working_dir: None,
        }
    }
    pub fn layer(mut self, l: LayerSpec) -> Self {
        self.layers.push(l);
        self
    }
    pub fn env(mut self, e: &str) -> Self {
        self.env.push(e.to_string());
        self
    }

    pub fn config_json(&self, diff_ids: &[String]) -> Vec<u8> {
        let mut config = json!({
            "Env": self.env,
            "Cmd": self.cmd,
        });
        if let Some(e) = &self.entrypoint {
            config["Entrypoint"] = json!(e);
        }
        if let Some(w) = &self.working_dir {
            config["WorkingDir"] = json!(w);
        }
        let mut c = json!({
            "architecture": self.arch,
            "os": "linux",
            "created": "2026-01-01T00:00:00Z",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "history": self.layers.iter().map(|l| json!({"created_by": l.created_by})).collect::<Vec<_>>(),
        });
        if let Some(v) = &self.variant {
            c["variant"] = json!(v);
        }
        serde_json::to_vec(&c).unwrap()
    }

    fn platform(&self) -> Value {
        let mut p = json!({"os": "linux", "architecture": self.arch});
        if let Some(v) = &self.variant {
            p["variant"] = json!(v);
        }
        p
    }
}

/// Writes blobs into `blobs/sha256/` and returns descriptors.
pub struct OciWriter {
    pub root: PathBuf,
}

impl OciWriter {
    pub fn new(root: &Path) -> Self {
        fs::create_dir_all(root.join("blobs/sha256")).unwrap();
        fs::write(root.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
        OciWriter {
            root: root.to_path_buf(),
        }
    }

    pub fn blob(&self, bytes: &[u8], media_type: &str) -> Value {
        let hex = sha256(bytes);
        fs::write(self.root.join("blobs/sha256").join(&hex), bytes).unwrap();
        json!({"mediaType": media_type, "digest": format!("sha256:{hex}"), "size": bytes.len()})
    }

    /// Writes the image's layers, config and manifest; returns the manifest descriptor.
    pub fn image(&self, img: &ImageSpec) -> Value {
        let mut layer_descs = Vec::new();
        let mut diff_ids = Vec::new();
        for l in &img.layers {
            let (blob, mt, diff_id) = l.blob();
            layer_descs.push(self.blob(&blob, mt));
            diff_ids.push(diff_id);
        }
        let config = self.blob(
            &img.config_json(&diff_ids),
            "application/vnd.oci.image.config.v1+json",
        );
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": config,
            "layers": layer_descs,
        });
        let mut d = self.blob(
            &serde_json::to_vec(&manifest).unwrap(),
            "application/vnd.oci.image.manifest.v1+json",
        );
        d["platform"] = img.platform();
        d
    }

    pub fn index(&self, manifests: Vec<Value>) -> Value {
        let index = json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": manifests,
        });
        self.blob(
            &serde_json::to_vec(&index).unwrap(),
            "application/vnd.oci.image.index.v1+json",
        )
    }

    pub fn write_index_json(&self, manifests: Vec<Value>) {
        let index = json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": manifests,
        });
        fs::write(
            self.root.join("index.json"),
            serde_json::to_vec_pretty(&index).unwrap(),
        )
        .unwrap();
    }
}

pub fn with_name(mut d: Value, name: &str) -> Value {
    d["annotations"] = json!({"org.opencontainers.image.ref.name": name});
    d
}

/// An OCI layout with one image tagged `tag`.
pub fn write_oci_dir(root: &Path, img: &ImageSpec, tag: &str) {
    let w = OciWriter::new(root);
    let d = w.image(img);
    w.write_index_json(vec![with_name(d, tag)]);
}

/// Tars a folder (members relative to it, sorted).
pub fn tar_dir(dir: &Path, out: &Path) {
    let mut b = tar::Builder::new(fs::File::create(out).unwrap());
    b.follow_symlinks(false);
    b.append_dir_all(".", dir).unwrap();
    b.finish().unwrap();
}

/// A classic `docker save` archive: `<id>/layer.tar`, `<config-hex>.json`, manifest.json.
pub fn write_docker_archive(out: &Path, img: &ImageSpec, tag: &str) {
    let mut b = tar::Builder::new(Vec::new());
    let mut layer_paths = Vec::new();
    let mut diff_ids = Vec::new();
    for l in &img.layers {
        let tar = l.tar();
        let hex = sha256(&tar);
        diff_ids.push(format!("sha256:{hex}"));
        let path = format!("{hex}/layer.tar");
        append(&mut b, &path, &tar);
        layer_paths.push(path);
    }
    let config = img.config_json(&diff_ids);
    let config_name = format!("{}.json", sha256(&config));
    append(&mut b, &config_name, &config);
    let manifest = json!([{"Config": config_name, "RepoTags": [tag], "Layers": layer_paths}]);
    append(&mut b, "manifest.json", &serde_json::to_vec(&manifest).unwrap());
    fs::write(out, b.into_inner().unwrap()).unwrap();
}

pub fn append(b: &mut tar::Builder<Vec<u8>>, path: &str, data: &[u8]) {
    let mut h = tar::Header::new_ustar();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_mtime(0);
    h.set_entry_type(tar::EntryType::Regular);
    b.append_data(&mut h, path, data).unwrap();
}

/// Runs the memlint binary, with a fresh layer cache folder of its own (see [`isolate_cache`]).
pub fn memlint(args: &[&str]) -> Output {
    memlint_env(args, &[])
}

/// Runs the memlint binary with more environment variables; `MEMLINT_CACHE_DIR` among them
/// (or `--cache-dir` / `--no-cache` in `args`) replaces the fresh cache folder.
pub fn memlint_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memlint"));
    cmd.args(args).env("NO_COLOR", "1");
    // A test that names its cache (or none) gets exactly that, not one from the environment.
    let _cache = if args.iter().any(|a| *a == "--no-cache" || *a == "--cache-dir") {
        cmd.env_remove("MEMLINT_CACHE_DIR");
        None
    } else {
        Some(isolate_cache(&mut cmd))
    };
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("memlint runs")
}

/// Runs the memlint binary in `dir` (so that no ./Dockerfile or .memlint.toml of the
/// repository is read), with a fresh layer cache folder of its own.
#[allow(dead_code)]
pub fn memlint_in(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memlint"));
    let _cache = isolate_cache(&mut cmd);
    cmd.args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("memlint runs")
}

/// Points a memlint command at a new, empty layer cache folder, removed when the returned
/// guard drops: tests never touch ~/.cache, and never see each other's entries.
pub fn isolate_cache(cmd: &mut Command) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary folder");
    cmd.env("MEMLINT_CACHE_DIR", dir.path());
    dir
}

/// `memlint lint --format json EXTRA… IMAGE` on the image of a recipe of
/// scripts/build-image.sh: the report and the exit code.
#[allow(dead_code)]
pub fn lint_recipe(recipe: &str, extra: &[&str]) -> (Value, Option<i32>) {
    let image = build_image(recipe);
    let mut args = vec!["lint", "--format", "json"];
    args.extend_from_slice(extra);
    args.push(&image);
    let out = memlint(&args);
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("lint prints JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (report, out.status.code())
}

/// The findings of rule `id` in a JSON lint report.
#[allow(dead_code)]
pub fn findings_of<'a>(report: &'a Value, id: &str) -> Vec<&'a Value> {
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["rule"] == id)
        .collect()
}

/// Runs memlint and parses its JSON output, failing the test with stderr when it fails.
pub fn inspect_json(args: &[&str]) -> Value {
    let mut all = vec!["inspect", "--format", "json"];
    all.extend_from_slice(args);
    let out = memlint(&all);
    assert!(
        out.status.success(),
        "memlint {all:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("inspect prints JSON")
}

/// `path type target` lines of the merged tree, from `inspect --files`.
pub fn tree_listing(reference: &str) -> Vec<String> {
    let v = inspect_json(&["--files", reference]);
    v["files"]["paths"]
        .as_array()
        .expect("paths")
        .iter()
        .map(|p| {
            format!(
                "{} {} {}",
                p["path"].as_str().unwrap(),
                p["type"].as_str().unwrap(),
                p["target"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// Whether a program is installed; tests that need it fail with a clear message when not,
/// since `.ci/run` installs every one of them.
pub fn require_tool(name: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "`{name}` is needed by this test; .ci/run installs it (apt-get install {name})"
    );
}

/// Runs memlint, which must end with exit code 2, no panic, and an error naming every needle;
/// returns the error text.
pub fn fails_with(args: &[&str], needles: &[&str]) -> String {
    let out = memlint(args);
    let err = error_text(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: `{n}` not in {err}");
    }
    err
}

pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// stderr with miette's line wrapping and box drawing undone, for substring checks.
pub fn error_text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr)
        .replace(['│', '×'], " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Builds an image recipe of scripts/build-image.sh from real packages (cached between runs)
/// and returns its oci-dir reference.
pub fn build_image(name: &str) -> String {
    require_tool("umoci");
    let out = run(Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/build-image.sh")).arg(name));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// An OCI layout holding two single-platform layouts under one nested index named `multi`.
pub fn merge_layouts(dir: &Path, parts: &[&str]) -> PathBuf {
    let out = dir.join("multi");
    fs::create_dir_all(out.join("blobs/sha256")).unwrap();
    fs::write(out.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let read_json = |p: PathBuf| -> Value { serde_json::from_slice(&fs::read(p).unwrap()).unwrap() };
    let blob = |src: &Path, digest: &str| {
        src.join("blobs/sha256")
            .join(digest.trim_start_matches("sha256:"))
    };
    let mut manifests = Vec::new();
    for part in parts {
        let src = Path::new(part.trim_start_matches("oci-dir:").trim_end_matches(":latest"));
        for e in fs::read_dir(src.join("blobs/sha256")).unwrap() {
            let e = e.unwrap();
            fs::copy(e.path(), out.join("blobs/sha256").join(e.file_name())).unwrap();
        }
        let mut d = read_json(src.join("index.json"))["manifests"][0].clone();
        let m = read_json(blob(src, d["digest"].as_str().unwrap()));
        let c = read_json(blob(src, m["config"]["digest"].as_str().unwrap()));
        d["platform"] = serde_json::json!({"os": "linux", "architecture": c["architecture"]});
        d.as_object_mut().unwrap().remove("annotations");
        manifests.push(d);
    }
    let index = serde_json::json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": manifests});
    let bytes = serde_json::to_vec(&index).unwrap();
    let hex = sha256(&bytes);
    fs::write(out.join("blobs/sha256").join(&hex), &bytes).unwrap();
    let top = serde_json::json!({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.index.v1+json", "digest": format!("sha256:{hex}"), "size": bytes.len(),
        "annotations": {"org.opencontainers.image.ref.name": "multi"}}]});
    fs::write(out.join("index.json"), serde_json::to_vec(&top).unwrap()).unwrap();
    out
}

/// Copies an OCI layout and gives it one more layer on top, with `edit` applied to the config
/// (the layers below are the same blobs, so the same diff_ids).
pub fn derive_image(base: &str, out: &Path, extra: &LayerSpec, edit: impl Fn(&mut Value)) -> String {
    let base = Path::new(base.strip_prefix("oci-dir:").unwrap().rsplit_once(':').unwrap().0);
    run(Command::new("cp").arg("-r").arg(base).arg(out));
    let w = OciWriter::new(out);
    let blob = |d: &Value| {
        let hex = d["digest"].as_str().unwrap().strip_prefix("sha256:").unwrap();
        serde_json::from_slice::<Value>(&fs::read(out.join("blobs/sha256").join(hex)).unwrap()).unwrap()
    };
    let index: Value = serde_json::from_slice(&fs::read(out.join("index.json")).unwrap()).unwrap();
    let mut manifest = blob(&index["manifests"][0]);
    let mut config = blob(&manifest["config"]);
    let (bytes, media_type, diff_id) = extra.blob();
    let layer = w.blob(&bytes, media_type);
    manifest["layers"].as_array_mut().unwrap().push(layer);
    config["rootfs"]["diff_ids"]
        .as_array_mut()
        .unwrap()
        .push(json!(diff_id));
    config["history"]
        .as_array_mut()
        .unwrap()
        .push(json!({"created_by": extra.created_by}));
    edit(&mut config);
    manifest["config"] = w.blob(
        &serde_json::to_vec(&config).unwrap(),
        "application/vnd.oci.image.config.v1+json",
    );
    let d = w.blob(
        &serde_json::to_vec(&manifest).unwrap(),
        "application/vnd.oci.image.manifest.v1+json",
    );
    w.write_index_json(vec![with_name(d, "latest")]);
    format!("oci-dir:{}:latest", out.display())
}

/// Validates a SARIF file against the 2.1.0 schema and with the SARIF Multitool's GitHub rules.
pub fn validate_sarif(path: &Path) {
    require_tool("check-jsonschema");
    let schema = format!("{}/testdata/sarif-schema-2.1.0.json", env!("CARGO_MANIFEST_DIR"));
    run(Command::new("check-jsonschema")
        .args(["--schemafile", &schema])
        .arg(path));
    let tool = String::from_utf8(
        run(&mut Command::new(format!(
            "{}/scripts/sarif-multitool.sh",
            env!("CARGO_MANIFEST_DIR")
        )))
        .stdout,
    )
    .unwrap();
    let result = path.with_extension("validation.sarif");
    run(Command::new(tool.trim())
        .args([
            "validate",
            "--rule-kind",
            "Gh;Sarif",
            "--log",
            "ForceOverwrite",
            "--output",
        ])
        .arg(&result)
        .arg(path)
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1"));
    let v: Value = serde_json::from_slice(&std::fs::read(&result).unwrap()).unwrap();
    let problems: Vec<String> = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["results"].as_array().cloned().unwrap_or_default())
        .filter(|r| r["level"] == "error" || r["level"] == "warning")
        .map(|r| format!("{} {}", r["ruleId"], r["message"]["text"]))
        .collect();
    assert!(problems.is_empty(), "{}: {problems:#?}", path.display());
}

/// Checks a JSON report of memlint (`lint --format json`, `lint --k8s`, `merge`) against the
/// published schema, `schema/report.json` (what `memlint schema report` prints: a test checks
/// the two are equal), with a real JSON Schema validator (draft 2020-12).
pub fn assert_valid_report(doc: &Value) {
    static VALIDATOR: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    let validator = VALIDATOR.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/report.json");
        let schema: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        jsonschema::draft202012::new(&schema).unwrap()
    });
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .take(10)
        .map(|e| {
            // An `anyOf` error quotes the whole document: its start is enough.
            let text: String = e.to_string().chars().take(600).collect();
            format!("at `{}`: {text}", e.instance_path)
        })
        .collect();
    assert!(
        errors.is_empty(),
        "the report does not match schema/report.json:\n{}",
        errors.join("\n")
    );
}

/// [`assert_valid_report`] of a report's bytes; the report, parsed.
pub fn valid_report(bytes: &[u8]) -> Value {
    let doc: Value = serde_json::from_slice(bytes).unwrap();
    assert_valid_report(&doc);
    doc
}
