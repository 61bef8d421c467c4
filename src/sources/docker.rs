//! Classic `docker save` archives: `manifest.json` naming a config and `<id>/layer.tar` files.

use super::select::{Candidate, ManifestSource};
use super::store::{read_small, Store};
use super::{check_layer_count, config_platform, layer_history, parse_json, read_config, Chosen, LayerPlan};
use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::platform::Platform;
use serde::Deserialize;
use std::collections::HashMap;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Entry {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    #[serde(default)]
    layers: Vec<String>,
    #[serde(default)]
    layer_sources: Option<HashMap<String, LayerSource>>,
}

#[derive(Deserialize)]
struct LayerSource {
    #[serde(rename = "mediaType")]
    media_type: String,
    digest: String,
}

/// The images manifest.json lists.
pub fn candidates(store: &dyn Store, limits: &crate::tree::Limits) -> Result<Vec<Candidate>> {
    let location = store.location();
    let bytes = read_small(store, "manifest.json", "manifest.json")?;
    let entries: Option<Vec<Entry>> = parse_json(&bytes, "manifest.json", &location)?;
    let Some(entries) = entries.filter(|e| !e.is_empty()) else {
        return Err(Error::NotAnImage {
            location,
            reason: "its manifest.json lists no image".to_string(),
            help: "`docker save` writes one entry per image; save the image again".to_string(),
        });
    };
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

pub fn platform_of(store: &dyn Store, config: &str) -> Result<Platform> {
    let (config, _) = read_config(store, config, digest_from_member(config).as_ref())?;
    Ok(config_platform(&config))
}

/// Reads the chosen entry's config (`config_member`) and plans its layers (`members`, with
/// what `LayerSources` says of them by diff_id); `name` is the name it was chosen by.
pub fn load_manifest(
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
