//! An unpacked root file system (`dir:PATH`): no layers and no config, just files. Symlinks are
//! read as links and never followed on the host.

use super::{Image, Options};
use crate::arch::Arch;
use crate::error::{Error, Result};
use crate::platform::Platform;
use crate::tree::interest::SCRIPT_CAP;
use crate::tree::layer::{probe_file, EntryKind, LayerDiff, LayerEntry};
use crate::tree::FileTree;
use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

pub(crate) fn open(reference_text: &str, root: &Path, options: &Options) -> Result<Image> {
    let meta = fs::metadata(root).map_err(|e| Error::io(root.display(), e))?;
    if !meta.is_dir() {
        return Err(Error::NotAnImage {
            location: root.display().to_string(),
            reason: "`dir:` needs a folder holding an unpacked root file system".to_string(),
            help: "for an archive use `docker-archive:PATH` or `oci-archive:PATH`".to_string(),
        });
    }
    let mut entries = Vec::new();
    let mut stack = vec![(root.to_path_buf(), Vec::<String>::new())];
    let mut kept_total = 0u64;
    let mut scratch = crate::tree::layer::Scratch::new();
    while let Some((dir, parts)) = stack.pop() {
        let listing = fs::read_dir(&dir).map_err(|e| Error::io(dir.display(), e))?;
        let mut children: Vec<_> = listing.filter_map(|e| e.ok()).collect();
        children.sort_by_key(|e| e.file_name());
        for child in children {
            if entries.len() as u64 >= options.limits.max_entries_per_layer {
                return Err(super::limit_error(
                    "max_entries_per_layer",
                    options.limits.max_entries_per_layer,
                    "the number of files",
                    root.display().to_string(),
                ));
            }
            let name = child.file_name().to_string_lossy().into_owned();
            let host = child.path();
            let Ok(m) = fs::symlink_metadata(&host) else {
                continue;
            };
            let mut path = parts.clone();
            path.push(name);
            let ft = m.file_type();
            let mut entry = LayerEntry {
                path: path.clone(),
                kind: EntryKind::Special,
                mode: m.mode() & 0o7777,
                uid: m.uid() as u64,
                gid: m.gid() as u64,
                size: if ft.is_file() { m.len() } else { 0 },
                content: None,
                elf: None,
            };
            if ft.is_dir() {
                entry.kind = EntryKind::Dir;
                stack.push((host, path));
            } else if ft.is_symlink() {
                let target = fs::read_link(&host)
                    .map(|t| t.to_string_lossy().into_owned())
                    .unwrap_or_default();
                entry.kind = EntryKind::Symlink(target);
            } else if ft.is_file() {
                entry.kind = EntryKind::File;
                let parts_ref: Vec<&str> = entry.path.iter().map(String::as_str).collect();
                let per_file = |c: u64| c.min(options.limits.max_kept_bytes_per_file);
                let cap = options.interests.keep_cap(&parts_ref).map(per_file);
                let script_cap = options
                    .interests
                    .wants_script(&parts_ref)
                    .then_some(per_file(SCRIPT_CAP));
                if m.len() > 0 {
                    // An unreadable file keeps its metadata; its contents stay unknown.
                    if let Ok(mut f) = fs::File::open(&host) {
                        if let Ok((content, elf)) =
                            probe_file(&mut f, m.len(), cap, script_cap, &options.interests, &mut scratch)
                        {
                            kept_total += content.as_ref().map_or(0, |c| c.bytes.len() as u64);
                            let cap = options
                                .limits
                                .max_kept_bytes_per_layer
                                .min(options.limits.max_kept_bytes_total);
                            if kept_total > cap {
                                let name = if cap == options.limits.max_kept_bytes_total {
                                    "max_kept_bytes_total"
                                } else {
                                    "max_kept_bytes_per_layer"
                                };
                                return Err(super::limit_error(
                                    name,
                                    cap,
                                    "kept file contents",
                                    root.display().to_string(),
                                ));
                            }
                            entry.content = content;
                            entry.elf = elf;
                        }
                    }
                }
            } else if ft.is_fifo() || ft.is_char_device() || ft.is_block_device() || ft.is_socket() {
                entry.kind = EntryKind::Special;
            }
            entries.push(entry);
        }
    }
    let mut tree = FileTree::with_limits(&options.limits).keeping(options.interests.clone());
    let diff = LayerDiff::unhashed(entries);
    tree.apply(diff, 0).map_err(|e| match e {
        crate::tree::merge::MergeError::PathTooLong { limit, .. } => super::limit_error(
            "max_path_len",
            limit as u64,
            "the path of a file",
            root.display().to_string(),
        ),
        e => Error::NotAnImage {
            location: root.display().to_string(),
            reason: e.to_string(),
            help: "the folder changed while it was read; try again".to_string(),
        },
    })?;
    for id in tree.walk().collect::<Vec<_>>() {
        tree.set_layer(id, None);
    }
    let platform = Platform::new(
        "linux",
        &majority_arch(&tree).unwrap_or_else(|| "unknown".to_string()),
        None,
    );
    Ok(Image::unlayered(
        reference_text,
        &root.display().to_string(),
        platform,
        None,
        tree,
    ))
}

/// A root file system has no config; its binaries tell the architecture.
fn majority_arch(tree: &FileTree) -> Option<String> {
    let mut votes: HashMap<&'static str, usize> = HashMap::new();
    for id in tree.walk() {
        if let Some(elf) = &tree.node(id).elf {
            if let Some(arch) = Arch::from_elf(elf.head.machine, elf.head.class).map(Arch::oci) {
                *votes.entry(arch).or_default() += 1;
            }
        }
    }
    votes
        .into_iter()
        .max_by_key(|&(a, n)| (n, a))
        .map(|(a, _)| a.to_string())
}
