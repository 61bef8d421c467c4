//! An engine image whose layers the layer cache holds, read without an export: the engine's
//! inspect answer gives the config and the diff_ids, its history the `created_by` lines, and
//! the cache every layer. Exporting a multi-gigabyte image to read nothing new from it is
//! what this saves.

use super::{Engine, HistoryItem, Inspect};
use crate::digest::Digest;
use crate::error::Result;
use crate::image::Image;
use crate::sources::{config_platform, read_layers, Chosen, LayerPlan, Options, Store};
use oci_spec::image::ImageConfiguration;
use serde_json::{json, Map, Value};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The media type of a layer in a classic `docker save`: what the engine would have exported.
const DOCKER_LAYER: &str = "application/vnd.docker.image.rootfs.diff.tar";

/// The image from the cache, or `None` when it must be exported: no cache, a layer missing
/// or cached for other interests, or a platform question only the export can answer.
pub(super) fn open(
    reference_text: &str,
    name: &str,
    engine: &Engine,
    inspect: &Inspect,
    options: &Options,
) -> Result<Option<Vec<Image>>> {
    let Some(cache) = options.cache.as_ref() else {
        return Ok(None);
    };
    // The containerd image store may hold several platforms under one name; only the export
    // shows them.
    if options.all_platforms {
        return Ok(None);
    }
    let Some(diff_ids) = diff_ids(inspect) else {
        return Ok(None);
    };
    // `contains` only looks for the files; `read_layers` reads them.
    if diff_ids.is_empty() || !diff_ids.iter().all(|d| cache.contains(d)) {
        return Ok(None);
    }
    let history = engine.history(name, options.limits.max_json_bytes);
    // Without a history that pairs with the layers (Podman answers 500 for a config whose
    // history has no `created`), the layers' history lines would be missing: the export has
    // them, and inspect must say the same warm as cold.
    if history
        .as_deref()
        .and_then(|h| history_json(h, diff_ids.len()))
        .is_none()
    {
        return Ok(None);
    }
    let Some(config) = image_config(inspect, &diff_ids, history.as_deref()) else {
        return Ok(None);
    };
    let platform = config_platform(&config);
    if let Some(wanted) = &options.platform {
        if !platform.satisfies(wanted) {
            // The export names the platforms there are, in the usual error.
            return Ok(None);
        }
    }
    let mut plans: Vec<LayerPlan> = diff_ids
        .iter()
        .enumerate()
        .map(|(i, diff_id)| LayerPlan {
            member: format!("layer-{i}"),
            media_type: DOCKER_LAYER.to_string(),
            digest: None,
            size: None,
            diff_id: Some(diff_id.clone()),
            history: None,
            urls: Vec::new(),
        })
        .collect();
    for (plan, line) in plans.iter_mut().zip(crate::sources::layer_history(&config)) {
        plan.history = line;
    }
    let (manifest_digest, config_digest) = digests(inspect);
    let chosen = Chosen {
        name: repo_tag(inspect, name),
        manifest_digest,
        manifest_media_type: None,
        config_digest,
        platforms: vec![platform.clone()],
        platform,
        config,
        layers: plans,
    };
    let store = Arc::new(NoBlobs {
        label: engine.label(),
        missed: AtomicBool::new(false),
    });
    match read_layers(
        reference_text,
        engine.kind.source(),
        store.clone(),
        chosen,
        options,
    ) {
        Ok(image) => Ok(Some(vec![image])),
        // An entry that turned out damaged, or made for other interests (`--files` after
        // `lint`), wanted its blob; the engine cannot hand out one layer alone, so export.
        Err(_) if store.missed.load(Ordering::SeqCst) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `RootFS.Layers`, when every one is a digest.
fn diff_ids(inspect: &Inspect) -> Option<Vec<Digest>> {
    inspect
        .root_fs
        .as_ref()?
        .layers
        .as_ref()?
        .iter()
        .map(|d| Digest::parse(d))
        .collect()
}

/// The classic store's `Id` is the config digest; the containerd store's is the digest of
/// the manifest or index its `Descriptor` describes.
fn digests(inspect: &Inspect) -> (Option<Digest>, Option<Digest>) {
    let id = Digest::parse(&inspect.id);
    match &inspect.descriptor {
        Some(d) if d.media_type.contains("manifest.list") || d.media_type.contains("image.index") => {
            (None, None)
        }
        Some(d) if d.media_type.contains("manifest") => (Digest::parse(&d.digest).or(id), None),
        _ => (None, id),
    }
}

/// The tag the export would name: the one the user's name resolves to, else the first.
fn repo_tag(inspect: &Inspect, name: &str) -> Option<String> {
    let tags = inspect.repo_tags.as_ref()?;
    tags.iter()
        .find(|t| *t == name || t.ends_with(&format!("/{name}")))
        .or_else(|| tags.first())
        .cloned()
}

/// The config fields of an OCI image config, as the inspect answer spells them.
const CONFIG_KEYS: &[&str] = &[
    "User",
    "ExposedPorts",
    "Env",
    "Entrypoint",
    "Cmd",
    "Volumes",
    "WorkingDir",
    "Labels",
    "StopSignal",
    "ArgsEscaped",
];

/// The image config the inspect answer describes; `None` when it lacks what a config needs.
fn image_config(
    inspect: &Inspect,
    diff_ids: &[Digest],
    history: Option<&[HistoryItem]>,
) -> Option<ImageConfiguration> {
    let os = inspect.os.as_deref().filter(|s| !s.is_empty())?;
    let architecture = inspect.architecture.as_deref().filter(|s| !s.is_empty())?;
    let mut config = Map::new();
    if let Some(Value::Object(c)) = &inspect.config {
        for key in CONFIG_KEYS {
            let value = match c.get(*key) {
                None | Some(Value::Null) => continue,
                // Engines print unset strings as "", which a config leaves out.
                Some(Value::String(s)) if s.is_empty() => continue,
                // Docker's API once took `"Cmd": "sh"` for `["sh"]`.
                Some(Value::String(s)) if matches!(*key, "Entrypoint" | "Cmd") => json!([s]),
                Some(v) => v.clone(),
            };
            config.insert(key.to_string(), value);
        }
    }
    let mut out = json!({
        "architecture": architecture,
        "os": os,
        "config": config,
        "rootfs": {
            "type": "layers",
            "diff_ids": diff_ids.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
        },
    });
    let mut put = |key: &str, value: Option<&str>| {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            out[key] = json!(v);
        }
    };
    put("created", inspect.created.as_ref().and_then(Value::as_str));
    put("author", inspect.author.as_deref());
    put("variant", inspect.variant.as_deref());
    put("os.version", inspect.os_version.as_deref());
    if let Some(h) = history.and_then(|h| history_json(h, diff_ids.len())) {
        out["history"] = h;
    }
    serde_json::from_value(out).ok()
}

/// The history oldest first, when its non-empty entries pair one to one with the layers.
/// The API has no `empty_layer`: a size of 0 stands for it, which is what the engines record
/// for entries that made no layer.
fn history_json(items: &[HistoryItem], layers: usize) -> Option<Value> {
    if items.iter().filter(|h| h.size != 0).count() != layers {
        return None;
    }
    let entries: Vec<Value> = items
        .iter()
        .rev()
        .map(|h| {
            let mut e = json!({});
            if !h.created_by.is_empty() {
                e["created_by"] = json!(h.created_by);
            }
            if !h.comment.is_empty() {
                e["comment"] = json!(h.comment);
            }
            if h.size == 0 {
                e["empty_layer"] = json!(true);
            }
            e
        })
        .collect();
    Some(Value::Array(entries))
}

/// A store with no blobs: `read_layers` serves every layer from the cache, and a layer it
/// cannot serve is noted so the image is exported instead.
struct NoBlobs {
    label: String,
    missed: AtomicBool,
}

impl Store for NoBlobs {
    fn location(&self) -> String {
        self.label.clone()
    }

    fn size(&self, _member: &str) -> Option<u64> {
        None
    }

    fn open(&self, member: &str) -> io::Result<Box<dyn io::Read + Send>> {
        self.missed.store(true, Ordering::SeqCst);
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{member} was to come from the layer cache; the engine was not asked to export it"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inspect(value: Value) -> Inspect {
        serde_json::from_value(value).unwrap()
    }

    const A: &str = "sha256:ee98fa69deb34e8ea56ab8df208620cb5502a6155fde587ce775f6569abce443";
    const B: &str = "sha256:b5f8f4fd4b3491ddac13573816f58f565c0cf30f5d4f55f3eade4d2b4bda9f23";

    fn podman_answer() -> Inspect {
        inspect(json!({
            "Id": "sha256:21ac9a7744eb69176ab85c8adea49d927c4f45b7c0b09491d184b03fece36b7b",
            "RepoTags": ["docker.io/library/app:1", "localhost/other:2"],
            "Created": "2026-11-30T06:41:09.352440408Z",
            "Config": {
                "Hostname": "", "User": "", "Env": ["LD_PRELOAD=/x.so"], "Cmd": ["/bin/sh"],
                "Entrypoint": null, "WorkingDir": "/app", "Labels": {"a": "b"},
                "ExposedPorts": {"8080/tcp": {}}
            },
            "Architecture": "arm64", "Variant": "v8", "Os": "linux",
            "RootFS": {"Type": "layers", "Layers": [A, B]}
        }))
    }

    fn history(lines: &[(&str, i64)]) -> Vec<HistoryItem> {
        lines
            .iter()
            .map(|(by, size)| HistoryItem {
                created_by: by.to_string(),
                size: *size,
                comment: String::new(),
            })
            .collect()
    }

    #[test]
    fn config_from_an_inspect_answer() {
        let i = podman_answer();
        let ids = diff_ids(&i).unwrap();
        // Newest first, as the API gives it; the top entry made no layer.
        let h = history(&[("CMD sh", 0), ("RUN b", 10), ("ADD a /", 20)]);
        let c = image_config(&i, &ids, Some(&h)).unwrap();
        assert_eq!(config_platform(&c).to_string(), "linux/arm64");
        let cfg = c.config().as_ref().unwrap();
        assert_eq!(cfg.env().as_deref(), Some(&["LD_PRELOAD=/x.so".to_string()][..]));
        assert_eq!(cfg.cmd().as_deref(), Some(&["/bin/sh".to_string()][..]));
        assert_eq!(cfg.entrypoint(), &None);
        assert_eq!(cfg.user(), &None);
        assert_eq!(cfg.working_dir().as_deref(), Some("/app"));
        assert_eq!(
            cfg.exposed_ports().as_deref(),
            Some(&["8080/tcp".to_string()][..])
        );
        assert_eq!(c.rootfs().diff_ids(), &vec![A.to_string(), B.to_string()]);
        assert_eq!(
            crate::sources::layer_history(&c),
            vec![Some("ADD a /".to_string()), Some("RUN b".to_string())]
        );
        assert_eq!(c.created().as_deref(), Some("2026-11-30T06:41:09.352440408Z"));
        assert_eq!(repo_tag(&i, "app:1").as_deref(), Some("docker.io/library/app:1"));
        assert_eq!(repo_tag(&i, "other:2").as_deref(), Some("localhost/other:2"));
        assert_eq!(
            repo_tag(&i, "21ac9a7744eb").as_deref(),
            Some("docker.io/library/app:1")
        );
        assert_eq!(digests(&i), (None, Digest::parse(&i.id)));
    }

    #[test]
    fn history_that_does_not_line_up_is_left_out() {
        let i = podman_answer();
        let ids = diff_ids(&i).unwrap();
        for h in [
            history(&[("RUN b", 10)]),
            history(&[("RUN c", 5), ("RUN b", 10), ("ADD a /", 20)]),
            history(&[]),
        ] {
            let c = image_config(&i, &ids, Some(&h)).unwrap();
            assert!(c.history().is_none());
        }
        assert!(image_config(&i, &ids, None).unwrap().history().is_none());
    }

    #[test]
    fn answers_that_cannot_stand_for_an_export() {
        let no_arch = inspect(json!({"Os": "linux", "RootFS": {"Layers": [A]}}));
        assert!(image_config(&no_arch, &diff_ids(&no_arch).unwrap(), None).is_none());
        let bad_layer = inspect(json!({"RootFS": {"Layers": [A, "not-a-digest"]}}));
        assert!(diff_ids(&bad_layer).is_none());
        assert!(diff_ids(&inspect(json!({}))).is_none());
        // Docker's `Cmd` as a string, and a numeric `Created` (left out).
        let old = inspect(json!({
            "Os": "linux", "Architecture": "amd64", "Created": 1700000000,
            "Config": {"Cmd": "sh"}, "RootFS": {"Layers": [A]}
        }));
        let c = image_config(&old, &diff_ids(&old).unwrap(), None).unwrap();
        assert_eq!(
            c.config().as_ref().unwrap().cmd().as_deref(),
            Some(&["sh".to_string()][..])
        );
        assert!(c.created().is_none());
    }

    #[test]
    fn containerd_store_ids() {
        let index = inspect(json!({
            "Id": "sha256:1111111111111111111111111111111111111111111111111111111111111111",
            "Descriptor": {"mediaType": "application/vnd.oci.image.index.v1+json",
                           "digest": "sha256:1111111111111111111111111111111111111111111111111111111111111111"}
        }));
        assert_eq!(digests(&index), (None, None));
        let manifest = inspect(json!({
            "Id": "sha256:2222222222222222222222222222222222222222222222222222222222222222",
            "Descriptor": {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "digest": "sha256:2222222222222222222222222222222222222222222222222222222222222222"}
        }));
        assert_eq!(digests(&manifest), (Digest::parse(&manifest.id), None));
    }
}
