//! Archives that cannot be read in place (standard input, `docker save | gzip`): one pass over
//! the stream keeps the small JSON members and reads every layer as it passes, since the
//! manifest often comes last. Nothing is written to disk.

use super::store::{member_name, StreamStore};
use super::{limit_error, limit_in_io, Options};
use crate::error::{Error, Result};
use crate::tree::layer::{
    describe_start, read_layer_in, stored_size, tar_reason, Guard, GzipCrc, LayerError,
};
use crate::tree::{Budget, Compression, Limits};
use std::collections::HashMap;
use std::io::{self, Read};
use std::sync::Mutex;

/// Reads a tar archive from a stream (its start already decompressed, if it was compressed).
pub(crate) fn read(input: impl Read, label: &str, options: &Options) -> Result<StreamStore> {
    let limits = &options.limits;
    let guard = Guard::new(limits.max_extended_header_bytes);
    let mut input = input;
    let mut start = Vec::with_capacity(512);
    (&mut input)
        .take(512)
        .read_to_end(&mut start)
        .map_err(|e| Error::io(label, e))?;
    let not_tar = |reason: String| {
        Error::NotAnImage {
        location: label.to_string(),
        reason,
        help: "pipe `docker save IMAGE` (plain, gzip, zstd, xz or bzip2) into memlint, or give the archive's path"
            .to_string(),
    }
    };
    if start.is_empty() {
        return Err(not_tar("it is empty".to_string()));
    }
    if Compression::sniff(&start) != Some(Compression::None) {
        return Err(not_tar(format!(
            "it is not a tar archive: {}",
            describe_start(&start)
        )));
    }
    let mut archive = tar::Archive::new(guard.reader(io::Cursor::new(start).chain(input)));
    let mut small = HashMap::new();
    let mut layers = HashMap::new();
    let mut layer_sizes = HashMap::new();
    let mut links: Vec<(String, String)> = Vec::new();
    // Every layer of the archive is held until the manifest (often last) says which are
    // needed, so the image-wide limits hold for the whole stream.
    let budget = Budget::new();
    let location = label.to_string();
    let broken = |e: io::Error| {
        limit_in_io(&e, &location).unwrap_or_else(|| Error::NotAnImage {
            location: location.clone(),
            reason: format!("it is not a readable tar archive ({})", tar_reason(&e)),
            help: "the stream was cut short or is damaged; save the image again".to_string(),
        })
    };
    let mut count = 0u64;
    let mut iter = archive.entries().map_err(broken)?;
    loop {
        let next = iter.next();
        guard.disarm();
        let Some(entry) = next else { break };
        let mut entry = entry.map_err(broken)?;
        let data_end = guard.end_of(stored_size(&mut entry));
        count += 1;
        if count > limits.max_entries_per_layer {
            return Err(limit_error(
                "max_entries_per_layer",
                limits.max_entries_per_layer,
                "the number of members",
                label,
            ));
        }
        let raw = entry.path_bytes();
        let link = entry.link_name_bytes();
        check_member_name(&raw, link.as_deref(), limits, label)?;
        let name = member_name(&raw);
        let link = link.map(|l| l.into_owned());
        let etype = entry.header().entry_type();
        if etype.is_symlink() || etype.is_hard_link() {
            if let Some(target) = link {
                let target = link_target(&name, &target, etype.is_symlink());
                links.push((name, target));
            }
            guard.arm_after(data_end);
            continue;
        }
        if !etype.is_file() {
            guard.arm_after(data_end);
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
            if size > limits.max_json_bytes {
                return Err(limit_error(
                    "max_json_bytes",
                    limits.max_json_bytes,
                    format!("member {name} ({size} bytes)"),
                    label,
                ));
            }
            budget.take_kept(size, limits.max_kept_bytes_total).map_err(|_| {
                limit_error(
                    "max_kept_bytes_total",
                    limits.max_kept_bytes_total,
                    "the JSON documents and kept file contents of the archive",
                    label,
                )
            })?;
            let mut bytes = head;
            (&mut entry)
                .take(limits.max_json_bytes)
                .read_to_end(&mut bytes)
                .map_err(|e| Error::io(format!("{name} in {label}"), e))?;
            small.insert(name, bytes);
        } else if Compression::sniff(&head).is_some() {
            let diff = read_layer_in(
                io::Cursor::new(head).chain(&mut entry),
                &options.interests,
                limits,
                &budget,
                // Read before the manifest that would give its digest: nothing else checks it.
                GzipCrc::Check,
            )
            .map_err(|e| layer_error(e, &name, label))?;
            layer_sizes.insert(name.clone(), diff.blob_size);
            layers.insert(name, diff);
        }
        guard.arm_after(data_end);
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
        max_json: limits.max_json_bytes,
        small,
        layers: Mutex::new(layers),
        layer_sizes,
    })
}

/// Refuses a member whose name or link target is longer than `max_path_len`.
fn check_member_name(raw: &[u8], link: Option<&[u8]>, limits: &Limits, label: &str) -> Result<()> {
    if raw.len() > limits.max_path_len || link.is_some_and(|l| l.len() > limits.max_path_len) {
        return Err(limit_error(
            "max_path_len",
            limits.max_path_len as u64,
            format!(
                "the name of member `{}…`",
                crate::tree::layer::printable(&String::from_utf8_lossy(&raw[..raw.len().min(64)]))
            ),
            label,
        ));
    }
    Ok(())
}

/// The error of a layer member that does not read.
fn layer_error(e: LayerError, name: &str, label: &str) -> Error {
    match e {
        LayerError::Limit {
            name: limit,
            limit: value,
            what,
        } => limit_error(limit, value, format!("layer {name}: {what}"), label),
        LayerError::PathTooLong {
            name: limit,
            limit: value,
            start,
        } => limit_error(
            limit,
            value as u64,
            format!("layer {name}: the path of entry `{start}…`"),
            label,
        ),
        e => Error::Layer {
            layer: name.to_string(),
            location: label.to_string(),
            reason: e.to_string(),
            help: "the stream was cut short or is damaged; save the image again".to_string(),
        },
    }
}

/// The member a link member names: a symbolic link's target is relative to its folder.
fn link_target(name: &str, target: &[u8], symlink: bool) -> String {
    if symlink && !target.starts_with(b"/") {
        let dir = name.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
        member_name(&[dir.as_bytes(), b"/", target].concat())
    } else {
        member_name(target)
    }
}

/// An archive on a stream that may be gzip, zstd, xz or bzip2 compressed (`docker save app | gzip |
/// memlint lint docker-archive:-`): its first bytes say which, as for a path. Decompressed as
/// it is read; nothing is copied aside.
pub(crate) fn read_sniffed(input: impl Read, label: &str, options: &Options) -> Result<StreamStore> {
    let mut input = input;
    // Ten bytes: enough for bzip2's signature, the longest of the four.
    let mut magic = Vec::with_capacity(10);
    (&mut input)
        .take(10)
        .read_to_end(&mut magic)
        .map_err(|e| limit_in_io(&e, label).unwrap_or_else(|| Error::io(label, e)))?;
    let whole = io::BufReader::with_capacity(256 * 1024, io::Cursor::new(magic.clone()).chain(input));
    let compression = Compression::sniff(&magic);
    // An xz or bzip2 stream that does not unpack (the gzip and zstd paths say it their way).
    let unpacked = |result: Result<StreamStore>| match (result, compression) {
        (Err(Error::Io { source, .. }), Some(c))
            if c != Compression::None && super::deadline::TimeoutHit::in_io(&source).is_none() =>
        {
            Err(Error::NotAnImage {
                location: label.to_string(),
                reason: format!(
                    "it starts like {} stream but does not unpack: {}",
                    if c == Compression::Xz { "an xz" } else { "a bzip2" },
                    crate::tree::layer::printable(&source.to_string())
                ),
                help: "the file was cut short or is damaged; compress the `docker save` output again"
                    .to_string(),
            })
        }
        (other, _) => other,
    };
    match compression {
        Some(Compression::Gzip) => read(flate2::bufread::MultiGzDecoder::new(whole), label, options),
        Some(Compression::Zstd) => {
            let dec = zstd::stream::read::Decoder::with_buffer(whole).map_err(|e| Error::io(label, e))?;
            read(dec, label, options)
        }
        Some(Compression::Xz) => unpacked(read(crate::tree::xz_bzip2::xz(whole), label, options)),
        Some(Compression::Bzip2) => unpacked(read(crate::tree::xz_bzip2::bzip2(whole), label, options)),
        _ => read(whole, label, options),
    }
}
