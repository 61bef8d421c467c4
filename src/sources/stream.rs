//! Archives that cannot be read in place (standard input, `docker save | gzip`): one pass over
//! the stream keeps the small JSON members and reads every layer as it passes, since the
//! manifest often comes last. Nothing is written to disk.

use super::store::{member_name, StreamStore, MAX_JSON};
use super::Options;
use crate::error::{Error, Result};
use crate::tree::layer::read_layer;
use crate::tree::Compression;
use std::collections::HashMap;
use std::io::{self, Read};
use std::path::Path;
use std::sync::Mutex;

pub fn read(input: impl Read, label: &str, options: &Options) -> Result<StreamStore> {
    let mut archive = tar::Archive::new(input);
    let mut small = HashMap::new();
    let mut layers = HashMap::new();
    let mut layer_sizes = HashMap::new();
    let mut links: Vec<(String, String)> = Vec::new();
    let location = label.to_string();
    let broken = |e: io::Error| Error::NotAnImage {
        location: location.clone(),
        reason: format!("it is not a readable tar archive ({e})"),
        help: "pipe `docker save IMAGE` into memlint, or give the archive's path".to_string(),
    };
    for entry in archive.entries().map_err(broken)? {
        let mut entry = entry.map_err(broken)?;
        let name = member_name(&entry.path_bytes());
        let etype = entry.header().entry_type();
        if etype.is_symlink() || etype.is_hard_link() {
            if let Some(target) = entry.link_name_bytes() {
                let target = if etype.is_symlink() && !target.starts_with(b"/") {
                    let dir = name.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
                    member_name(&[dir.as_bytes(), b"/", &target].concat())
                } else {
                    member_name(&target)
                };
                links.push((name, target));
            }
            continue;
        }
        if !etype.is_file() {
            continue;
        }
        let size = entry.size();
        let mut head = Vec::with_capacity(512);
        (&mut entry)
            .take(512)
            .read_to_end(&mut head)
            .map_err(|e| Error::io(format!("{name} in {label}"), e))?;
        let is_json = head
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|&b| b == b'{' || b == b'[');
        if is_json || name == "oci-layout" || name == "repositories" {
            if size > MAX_JSON {
                return Err(Error::TooLarge {
                    what: name,
                    location: label.to_string(),
                    size,
                    limit: MAX_JSON,
                });
            }
            let mut bytes = head;
            entry
                .read_to_end(&mut bytes)
                .map_err(|e| Error::io(format!("{name} in {label}"), e))?;
            small.insert(name, bytes);
        } else if Compression::sniff(&head).is_some() {
            let diff = read_layer(
                io::Cursor::new(head).chain(&mut entry),
                &options.interests,
                &options.limits,
            )
            .map_err(|e| Error::Layer {
                layer: name.clone(),
                location: label.to_string(),
                reason: e.to_string(),
                help: "the stream was cut short or is damaged; save the image again".to_string(),
            })?;
            layer_sizes.insert(name.clone(), diff.blob_size);
            layers.insert(name, diff);
        }
    }
    for (name, target) in links {
        if let Some(bytes) = small.get(&target).cloned() {
            small.insert(name, bytes);
        } else if let Some(diff) = layers.get(&target).cloned() {
            layer_sizes.insert(name.clone(), diff.blob_size);
            layers.insert(name, diff);
        }
    }
    Ok(StreamStore {
        label: label.to_string(),
        small,
        layers: Mutex::new(layers),
        layer_sizes,
    })
}

/// A compressed archive file (`docker save | gzip > image.tar.gz`).
pub fn read_compressed(
    file: std::fs::File,
    path: &Path,
    magic: &[u8],
    options: &Options,
) -> Result<StreamStore> {
    use std::io::{Seek, SeekFrom};
    let mut file = file;
    file.seek(SeekFrom::Start(0))
        .map_err(|e| Error::io(path.display(), e))?;
    let label = format!("archive {}", path.display());
    let buffered = io::BufReader::with_capacity(256 * 1024, file);
    match Compression::sniff(magic) {
        Some(Compression::Zstd) => {
            let dec = zstd::stream::read::Decoder::with_buffer(buffered)
                .map_err(|e| Error::io(path.display(), e))?;
            read(dec, &label, options)
        }
        _ => read(flate2::bufread::MultiGzDecoder::new(buffered), &label, options),
    }
}
