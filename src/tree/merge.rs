//! Applying a layer on top of the tree below it. Whiteouts only ever hide what lower layers
//! wrote (OCI image-spec, layer.md), so a layer's whiteouts go first and its own entries after.
//! Parent folders are reached through symlinks the way containerd's applier does (inside the
//! root), so `/lib -> usr/lib` plus an entry `lib/x` writes `/usr/lib/x`.

use super::entries::{EntryRef, Side};
use super::layer::{EntryKind, LayerDiff, LayerEntry};
use super::resolve::split;
use super::{FileTree, NewKind, NewNode, NodeId, NodeKind, ROOT};

#[derive(Debug, thiserror::Error)]
pub(crate) enum MergeError {
    #[error("hard link `/{path}` points at `/{target}`, which does not exist in this or a lower layer")]
    HardlinkMissing { path: String, target: String },
    #[error("hard link `/{path}` points at folder `/{target}`")]
    HardlinkToDir { path: String, target: String },
    #[error("too many levels of symbolic links (more than {limit}, the max_link_depth limit) in the folders of `/{path}`")]
    Loop { path: String, limit: u32 },
    /// The path an entry lands at, once the links in its folders are followed, is longer than
    /// `max_path_len`: container runtimes fail with ENAMETOOLONG there too. Without this, links
    /// to links could stack folders 80,000 deep, and every listing of them would be quadratic.
    #[error("entry `/{path}` lands at a path longer than {limit} bytes (the max_path_len limit) once the links in its folders are followed")]
    PathTooLong { path: String, limit: usize },
}

impl FileTree {
    /// A tree holding just these entries, as one layer (a root folder on disk, tests).
    pub(crate) fn from_entries(entries: Vec<LayerEntry>) -> Result<FileTree, MergeError> {
        let mut t = FileTree::new();
        t.apply(LayerDiff::unhashed(entries), 0)?;
        Ok(t)
    }

    /// Applies one layer; `index` is recorded on every node it writes.
    pub(crate) fn apply(&mut self, layer: LayerDiff, index: u32) -> Result<(), MergeError> {
        let entries = layer.entries;
        let mut cursor = entries.cursor();
        while let Some(w) = cursor.next() {
            if matches!(w.kind, EntryKind::Whiteout | EntryKind::OpaqueWhiteout) {
                self.whiteout(&w, index)?;
            }
        }
        // Contents and ELF facts are taken from their side tables as their entries are added,
        // so each is moved, never copied.
        let (mut cursor, mut side) = entries.drain();
        while let Some(e) = cursor.next() {
            if !matches!(e.kind, EntryKind::Whiteout | EntryKind::OpaqueWhiteout) {
                self.add(&e, &mut side, index)?;
            }
        }
        Ok(())
    }

    fn whiteout(&mut self, w: &EntryRef<'_>, index: u32) -> Result<(), MergeError> {
        let Some((parents, name)) = split_last(w.path) else {
            if w.kind == EntryKind::OpaqueWhiteout {
                self.clear_dir(ROOT);
            }
            return Ok(());
        };
        let Some(dir) = self.existing_dir(parents)? else {
            return Ok(());
        };
        let Some(target) = self.child(dir, name) else {
            return Ok(());
        };
        let path = format!("{}/{name}", self.path_of(dir).trim_end_matches('/'));
        match w.kind {
            EntryKind::OpaqueWhiteout => {
                if self.node(target).is_dir() {
                    self.clear_dir(target);
                    self.note_removed(path, index);
                }
            }
            _ => {
                self.remove(dir, name);
                self.note_removed(path, index);
            }
        }
        Ok(())
    }

    fn add(&mut self, e: &EntryRef<'_>, side: &mut Side, index: u32) -> Result<(), MergeError> {
        let Some((parents, name)) = split_last(e.path) else {
            // The root folder itself (`./`): only its metadata can change.
            if e.kind == EntryKind::Dir {
                self.set_owner(ROOT, e.mode, e.uid, e.gid);
            }
            return Ok(());
        };
        let (dir, dir_len) = self.make_dirs(parents, index)?;
        if dir_len + 1 + name.len() > self.max_path_len() {
            return Err(MergeError::PathTooLong {
                path: e.path.to_string(),
                limit: self.max_path_len(),
            });
        }
        let mut node = NewNode {
            kind: NewKind::Dir,
            mode: e.mode,
            uid: e.uid,
            gid: e.gid,
            size: e.size,
            layer: Some(index),
            hardlink_to: None,
            content: e.content.and_then(|i| side.take_content(i)),
            elf: e.elf.and_then(|i| side.take_elf(i)),
        };
        node.kind = match &e.kind {
            EntryKind::Dir => NewKind::Dir,
            EntryKind::File => NewKind::File,
            EntryKind::Symlink(target) => NewKind::Symlink(target.clone()),
            EntryKind::Special => NewKind::Special,
            EntryKind::Hardlink(target) => {
                let path = e.path.to_string();
                let found = self.lookup_nofollow(target).map_err(|_| MergeError::Loop {
                    path: path.clone(),
                    limit: self.max_links(),
                })?;
                let Some(src) = found else {
                    return Err(MergeError::HardlinkMissing {
                        path,
                        target: target.clone(),
                    });
                };
                let n = self.node(src);
                let kind = match n.kind {
                    NodeKind::Dir(_) => {
                        return Err(MergeError::HardlinkToDir {
                            path,
                            target: target.clone(),
                        })
                    }
                    NodeKind::File => NewKind::File,
                    NodeKind::Symlink(t) => NewKind::Symlink(t.to_string()),
                    NodeKind::Special => NewKind::Special,
                };
                node.size = n.size;
                node.elf = n.elf.map(|e| Box::new(e.clone()));
                node.mode = n.mode;
                node.content = self.kept_content(src).cloned();
                // The file itself, where the link's folders lead once their symlinks are
                // followed (`/etc/passwd` for `breakouts/d1/passwd` through `d1 -> ../../etc`).
                node.hardlink_to = Some(self.path_of(src));
                kind
            }
            EntryKind::Whiteout | EntryKind::OpaqueWhiteout => return Ok(()),
        };
        self.insert(dir, name, node);
        Ok(())
    }

    /// The folder at `parents`, following symlinks, when it exists.
    fn existing_dir(&self, parents: &str) -> Result<Option<NodeId>, MergeError> {
        match self.lookup(parents) {
            Ok(Some(id)) if self.node(id).is_dir() => Ok(Some(id)),
            Ok(_) => Ok(None),
            Err(_) => Err(MergeError::Loop {
                path: parents.to_string(),
                limit: self.max_links(),
            }),
        }
    }

    /// Walks to the folder `parents`, following symlinks inside the root and creating missing
    /// folders, as `mkdir -p` would when a tar entry's parents are not in the archive. Returns
    /// the folder and the length of its path.
    fn make_dirs(&mut self, parents: &str, index: u32) -> Result<(NodeId, usize), MergeError> {
        let mut cur = ROOT;
        // The length of `cur`'s path, `/` separators included.
        let mut len = 0usize;
        // Components still to walk, last first; a link's target is pushed in their place.
        let mut pending: Vec<String> = Vec::new();
        let mut from_entry = split(parents);
        let mut links = 0;
        loop {
            let owned;
            let comp: &str = match pending.pop() {
                Some(c) => {
                    owned = c;
                    &owned
                }
                None => match from_entry.next() {
                    Some(c) => c,
                    None => break,
                },
            };
            if len > self.max_path_len() {
                return Err(MergeError::PathTooLong {
                    path: parents.to_string(),
                    limit: self.max_path_len(),
                });
            }
            if comp == ".." {
                if cur != ROOT {
                    len = len.saturating_sub(1 + self.name_of(cur).len());
                }
                cur = self.parent(cur);
                continue;
            }
            if comp == "." {
                continue;
            }
            match self.child(cur, comp) {
                Some(child) => match self.node(child).kind {
                    NodeKind::Dir(_) => {
                        cur = child;
                        len += 1 + comp.len();
                    }
                    NodeKind::Symlink(target) => {
                        links += 1;
                        if links > self.max_links() {
                            return Err(MergeError::Loop {
                                path: parents.to_string(),
                                limit: self.max_links(),
                            });
                        }
                        if target.starts_with('/') {
                            cur = ROOT;
                            len = 0;
                        }
                        let parts: Vec<String> = split(target).map(str::to_string).collect();
                        pending.extend(parts.into_iter().rev());
                    }
                    _ => {
                        // A file where a folder is needed: the entry replaces it, as a
                        // later layer that turns a file into a folder does.
                        let mut d = NewNode::dir();
                        d.layer = Some(index);
                        let n = comp.len();
                        cur = self.insert(cur, comp, d);
                        len += 1 + n;
                    }
                },
                None => {
                    // A folder no entry gave, implied by this layer's entry below it: the
                    // layer is said, as for every other path.
                    let mut d = NewNode::dir();
                    d.layer = Some(index);
                    let n = comp.len();
                    cur = self.insert(cur, comp, d);
                    len += 1 + n;
                }
            }
        }
        if len > self.max_path_len() {
            return Err(MergeError::PathTooLong {
                path: parents.to_string(),
                limit: self.max_path_len(),
            });
        }
        Ok((cur, len))
    }
}

/// A `/`-joined path split into its folders and its last component; `None` for the root.
fn split_last(path: &str) -> Option<(&str, &str)> {
    if path.is_empty() {
        return None;
    }
    Some(path.rsplit_once('/').unwrap_or(("", path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, kind: EntryKind) -> LayerEntry {
        LayerEntry::new(path, kind)
    }

    fn layer(entries: Vec<LayerEntry>) -> LayerDiff {
        LayerDiff::unhashed(entries)
    }

    fn paths(t: &FileTree) -> Vec<String> {
        t.walk().map(|id| t.path_of(id)).collect()
    }

    #[test]
    fn whiteouts_and_opaque_folders() {
        let mut t = FileTree::new();
        t.apply(
            layer(vec![
                entry("a/x", EntryKind::File),
                entry("a/y", EntryKind::File),
                entry("b/z", EntryKind::File),
                entry("c", EntryKind::File),
            ]),
            0,
        )
        .unwrap();
        t.apply(
            layer(vec![
                entry("a/new", EntryKind::File),
                entry("a", EntryKind::OpaqueWhiteout),
                entry("b", EntryKind::Whiteout),
                entry("c", EntryKind::Whiteout),
                entry("c", EntryKind::Dir),
            ]),
            1,
        )
        .unwrap();
        assert_eq!(paths(&t), vec!["/a", "/a/new", "/c"]);
        assert!(t.node(t.lookup("/c").unwrap().unwrap()).is_dir());
        assert_eq!(t.counts().count, 3);
    }

    /// Found by review: links to links stacked folders 40 × 2,000 deep from one 4 KB entry, and
    /// listing them took memory quadratic in that depth.
    #[test]
    fn links_cannot_stack_paths_past_max_path_len() {
        let deep = "d/".repeat(2000);
        let mut entries = vec![entry(&format!("{deep}x"), EntryKind::File)];
        entries.push(entry(
            "a0",
            EntryKind::Symlink(deep.trim_end_matches('/').to_string()),
        ));
        for i in 1..40 {
            entries.push(entry(
                &format!("a{i}"),
                EntryKind::Symlink(format!("a{}/{deep}", i - 1)),
            ));
        }
        entries.push(entry("a39/boom", EntryKind::File));
        let mut t = FileTree::new();
        let err = t.apply(layer(entries), 0).unwrap_err();
        assert!(
            matches!(err, MergeError::PathTooLong { limit: 4096, .. }),
            "{err}"
        );
        // Within the limit, a link that lengthens the path is fine.
        let mut t = FileTree::new();
        t.apply(
            layer(vec![
                entry("usr/lib/x86_64-linux-gnu", EntryKind::Dir),
                entry("lib", EntryKind::Symlink("usr/lib/x86_64-linux-gnu".into())),
                entry("lib/libc.so.6", EntryKind::File),
            ]),
            0,
        )
        .unwrap();
        assert!(t.lookup("/usr/lib/x86_64-linux-gnu/libc.so.6").unwrap().is_some());
    }

    #[test]
    fn writes_through_symlinked_parents_and_links_hard() {
        let mut t = FileTree::new();
        t.apply(
            layer(vec![
                entry("usr/lib", EntryKind::Dir),
                entry("lib", EntryKind::Symlink("usr/lib".into())),
                entry("etc/evil", EntryKind::Symlink("/".into())),
            ]),
            0,
        )
        .unwrap();
        t.apply(
            layer(vec![
                entry("lib/libc.so.6", EntryKind::File),
                entry("etc/evil/../../escaped", EntryKind::File),
                entry("usr/lib/libc2", EntryKind::Hardlink("lib/libc.so.6".into())),
            ]),
            1,
        )
        .unwrap();
        assert!(t.lookup("/usr/lib/libc.so.6").unwrap().is_some());
        assert_eq!(
            t.node(t.lookup("/usr/lib/libc2").unwrap().unwrap()).hardlink_to,
            // The file itself: `lib` is a symlink to `usr/lib`.
            Some("/usr/lib/libc.so.6")
        );
        let err = t.apply(layer(vec![entry("x", EntryKind::Hardlink("nope".into()))]), 2);
        assert!(matches!(err, Err(MergeError::HardlinkMissing { .. })));
    }
}
