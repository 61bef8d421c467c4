//! Classic `docker save` archives: `manifest.json` naming a config and `<id>/layer.tar` files.

use super::select::{Candidate, ManifestSource};
use super::store::{read_small, Store};
use super::{check_layer_count, config_platform, layer_history, parse_json, read_config, Chosen, LayerPlan};
use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::platform::Platform;
use serde::Deserialize;
use std::collections::HashMap;

/// One entry of manifest.json.
struct Entry {
    config: String,
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
    layer_sources: Option<HashMap<String, LayerSource>>,
}

#[derive(Deserialize)]
struct LayerSource {
    #[serde(rename = "mediaType")]
    media_type: String,
    digest: String,
}

/// The value of `key` in a JSON object, its name matched as Go's encoding/json matches it:
/// the exact name first, else any name equal to it ignoring case. `docker load` decodes
/// manifest.json into a struct without JSON tags, so jib 1.x's `config`/`repoTags`/`layers`
/// read as `Config`/`RepoTags`/`Layers`.
fn field<'v>(
    object: &'v serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> Option<&'v serde_json::Value> {
    object
        .get(key)
        .or_else(|| {
            object
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v)
        })
        .filter(|v| !v.is_null())
}

/// Decodes manifest.json's entries; well-formed JSON of the wrong shape names the key.
fn decode_entries(value: serde_json::Value, location: &str) -> Result<Vec<Entry>> {
    let wrong = |reason: String| Error::NotAnImage {
        location: location.to_string(),
        reason: format!("its manifest.json is not what `docker save` writes: {reason}"),
        help: "`docker save` writes manifest.json as a list of objects, each with `Config` (the config's \
               member name), `RepoTags` (a list of names or null) and `Layers` (the layer members, \
               base first); save the image again"
            .to_string(),
    };
    let items = match value {
        serde_json::Value::Null => return Ok(Vec::new()),
        serde_json::Value::Array(items) => items,
        other => return Err(wrong(format!("it is a JSON {}, not a list", json_kind(&other)))),
    };
    let mut entries = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let serde_json::Value::Object(object) = item else {
            return Err(wrong(format!(
                "entry {i} is a JSON {}, not an object",
                json_kind(&item)
            )));
        };
        let config = match field(&object, "Config") {
            Some(serde_json::Value::String(c)) => c.clone(),
            Some(other) => {
                return Err(wrong(format!(
                    "entry {i}'s `Config` is a JSON {}, not a string",
                    json_kind(other)
                )))
            }
            None => return Err(wrong(format!("entry {i} has no `Config` key"))),
        };
        let strings = |key: &str| -> Result<Option<Vec<String>>> {
            match field(&object, key) {
                None => Ok(None),
                Some(v) => serde_json::from_value(v.clone())
                    .map(Some)
                    .map_err(|_| wrong(format!("entry {i}'s `{key}` is not a list of strings"))),
            }
        };
        let repo_tags = strings("RepoTags")?;
        let layers = strings("Layers")?.unwrap_or_default();
        let layer_sources = match field(&object, "LayerSources") {
            None => None,
            Some(v) => Some(serde_json::from_value(v.clone()).map_err(|_| {
                wrong(format!(
                    "entry {i}'s `LayerSources` is not an object of descriptors (`mediaType`, `digest`) by diff_id"
                ))
            })?),
        };
        entries.push(Entry {
            config,
            repo_tags,
            layers,
            layer_sources,
        });
    }
    Ok(entries)
}

/// What kind of JSON value this is, for messages.
pub(crate) fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "list",
        serde_json::Value::Object(_) => "object",
    }
}

/// The images manifest.json lists.
pub(crate) fn candidates(store: &dyn Store, limits: &crate::tree::Limits) -> Result<Vec<Candidate>> {
    let location = store.location();
    let bytes = read_small(store, "manifest.json", "manifest.json")?;
    let value: serde_json::Value = parse_json(&bytes, "manifest.json", &location)?;
    let entries = decode_entries(value, &location)?;
    if entries.is_empty() {
        return Err(Error::NotAnImage {
            location,
            reason: "its manifest.json lists no image".to_string(),
            help: "`docker save` writes one entry per image; save the image again".to_string(),
        });
    }
    if entries.len() as u64 > limits.max_index_entries {
        return Err(super::limit_error(
            "max_index_entries",
            limits.max_index_entries,
            format!("images listed by manifest.json ({})", entries.len()),
            location,
        ));
    }
    Ok(entries
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            let names = e.repo_tags.unwrap_or_default();
            let config = super::store::member_name(e.config.as_bytes());
            let present = store.size(&config).is_some();
            let layer_sources = e
                .layer_sources
                .unwrap_or_default()
                .into_iter()
                .map(|(diff_id, s)| (diff_id, (s.media_type, Digest::parse(&s.digest))))
                .collect();
            Candidate {
                artifact: None,
                group: format!("#{i}"),
                names,
                platform: None,
                present,
                index: i,
                manifest: ManifestSource::Docker {
                    config,
                    layers: e
                        .layers
                        .iter()
                        .map(|l| super::store::member_name(l.as_bytes()))
                        .collect(),
                    layer_sources,
                },
            }
        })
        .collect())
}

/// A member named `blobs/sha256/<hex>` (Docker 25+) is its own digest; `<id>.json` of a classic
/// archive is named after the config's digest too.
fn digest_from_member(member: &str) -> Option<Digest> {
    if let Some(rest) = member.strip_prefix("blobs/") {
        let (alg, hex) = rest.split_once('/')?;
        return Digest::parse(&format!("{alg}:{hex}"));
    }
    let hex = member.strip_suffix(".json")?;
    Digest::parse(&format!("sha256:{hex}"))
}

pub(crate) fn platform_of(store: &dyn Store, config: &str) -> Result<Platform> {
    super::read_config_platform(store, config, digest_from_member(config).as_ref())
}

/// Reads the chosen entry's config (`config_member`) and plans its layers (`members`, with
/// what `LayerSources` says of them by diff_id); `name` is the name it was chosen by.
pub(crate) fn load_manifest(
    store: &dyn Store,
    config_member: &str,
    members: Vec<String>,
    layer_sources: &HashMap<String, (String, Option<Digest>)>,
    name: Option<String>,
    max_layers: u64,
) -> Result<Chosen> {
    let location = store.location();
    let (config, config_digest) =
        read_config(store, config_member, digest_from_member(config_member).as_ref())?;
    let diff_ids = check_layer_count(&config, members.len(), &location, max_layers)?;
    let mut history = layer_history(&config).into_iter();
    let layers = members
        .into_iter()
        .zip(diff_ids)
        .map(|(member, diff_id)| {
            let source = diff_id.as_ref().and_then(|d| layer_sources.get(&d.to_string()));
            let from_name = if member.starts_with("blobs/") {
                digest_from_member(&member)
            } else {
                None
            };
            LayerPlan {
                media_type: source
                    .map(|s| s.0.clone())
                    .unwrap_or_else(|| "application/vnd.docker.image.rootfs.diff.tar".to_string()),
                digest: from_name,
                size: None,
                diff_id,
                history: history.next().flatten(),
                urls: Vec::new(),
                member,
            }
        })
        .collect();
    let platform = config_platform(&config);
    Ok(Chosen {
        name,
        manifest_digest: None,
        manifest_media_type: None,
        config_digest: Some(config_digest),
        platforms: vec![platform.clone()],
        platform,
        config,
        layers,
    })
}
