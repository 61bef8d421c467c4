//! Applying a layer on top of the tree below it. Whiteouts only ever hide what lower layers
//! wrote (OCI image-spec, layer.md), so a layer's whiteouts go first and its own entries after.
//! Parent folders are reached through symlinks the way containerd's applier does (inside the
//! root), so `/lib -> usr/lib` plus an entry `lib/x` writes `/usr/lib/x`.

use super::layer::{EntryKind, LayerDiff, LayerEntry};
use super::resolve::{split, MAX_LINKS};
use super::{FileTree, Node, NodeId, NodeKind, ROOT};

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("hard link `/{path}` points at `/{target}`, which does not exist in this or a lower layer")]
    HardlinkMissing { path: String, target: String },
    #[error("hard link `/{path}` points at folder `/{target}`")]
    HardlinkToDir { path: String, target: String },
    #[error("too many levels of symbolic links in the folders of `/{path}`")]
    Loop { path: String },
}

impl FileTree {
    /// Applies one layer; `index` is recorded on every node it writes.
    pub fn apply(&mut self, layer: LayerDiff, index: u32) -> Result<(), MergeError> {
        let (whiteouts, entries): (Vec<_>, Vec<_>) = layer
            .entries
            .into_iter()
            .partition(|e| matches!(e.kind, EntryKind::Whiteout | EntryKind::OpaqueWhiteout));
        for w in whiteouts {
            let Some((name, parents)) = w.path.split_last() else {
                if w.kind == EntryKind::OpaqueWhiteout {
                    self.clear_dir(ROOT);
                }
                continue;
            };
            let Some(dir) = self.existing_dir(parents)? else {
                continue;
            };
            let Some(target) = self.child(dir, name) else {
                continue;
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
        }
        for e in entries {
            self.add(e, index)?;
        }
        Ok(())
    }

    fn add(&mut self, e: LayerEntry, index: u32) -> Result<(), MergeError> {
        let Some((name, parents)) = e.path.split_last() else {
            // The root folder itself (`./`): only its metadata can change.
            if e.kind == EntryKind::Dir {
                let root = self.node_mut(ROOT);
                root.mode = e.mode;
                root.uid = e.uid;
                root.gid = e.gid;
            }
            return Ok(());
        };
        let dir = self.make_dirs(parents, index)?;
        let mut node = Node::dir(name, dir);
        node.mode = e.mode;
        node.uid = e.uid;
        node.gid = e.gid;
        node.size = e.size;
        node.layer = Some(index);
        node.content = e.content.map(Box::new);
        node.elf = e.elf.map(Box::new);
        node.kind = match e.kind {
            EntryKind::Dir => NodeKind::Dir(Default::default()),
            EntryKind::File => NodeKind::File,
            EntryKind::Symlink(target) => NodeKind::Symlink(target),
            EntryKind::Special => NodeKind::Special,
            EntryKind::Hardlink(target) => {
                let path = e.path.join("/");
                let found = self
                    .lookup_nofollow(&target)
                    .map_err(|_| MergeError::Loop { path: path.clone() })?;
                let Some(src) = found else {
                    return Err(MergeError::HardlinkMissing { path, target });
                };
                let src = self.node(src);
                if src.is_dir() {
                    return Err(MergeError::HardlinkToDir { path, target });
                }
                node.kind = src.kind.clone();
                node.size = src.size;
                node.content = src.content.clone();
                node.elf = src.elf.clone();
                node.mode = src.mode;
                node.hardlink_to = Some(format!("/{target}"));
                node.kind
            }
            EntryKind::Whiteout | EntryKind::OpaqueWhiteout => return Ok(()),
        };
        self.insert(dir, name, node);
        Ok(())
    }

    /// The folder at `parents`, following symlinks, when it exists.
    fn existing_dir(&self, parents: &[String]) -> Result<Option<NodeId>, MergeError> {
        let path = parents.join("/");
        match self.lookup(&path) {
            Ok(Some(id)) if self.node(id).is_dir() => Ok(Some(id)),
            Ok(_) => Ok(None),
            Err(_) => Err(MergeError::Loop { path }),
        }
    }

    /// Walks to the folder `parents`, following symlinks inside the root and creating missing
    /// folders, as `mkdir -p` would when a tar entry's parents are not in the archive.
    fn make_dirs(&mut self, parents: &[String], index: u32) -> Result<NodeId, MergeError> {
        let mut cur = ROOT;
        let mut pending: std::collections::VecDeque<String> = parents.iter().cloned().collect();
        let mut links = 0;
        while let Some(comp) = pending.pop_front() {
            if comp == ".." {
                cur = self.parent(cur);
                continue;
            }
            if comp == "." {
                continue;
            }
            match self.child(cur, &comp) {
                Some(child) => match &self.node(child).kind {
                    NodeKind::Dir(_) => cur = child,
                    NodeKind::Symlink(target) => {
                        links += 1;
                        if links > MAX_LINKS {
                            return Err(MergeError::Loop {
                                path: parents.join("/"),
                            });
                        }
                        if target.starts_with('/') {
                            cur = ROOT;
                        }
                        let parts: Vec<String> = split(target).map(str::to_string).collect();
                        for p in parts.into_iter().rev() {
                            pending.push_front(p);
                        }
                    }
                    _ => {
                        // A file where a folder is needed: the entry replaces it, as a
                        // later layer that turns a file into a folder does.
                        let mut d = Node::dir(&comp, cur);
                        d.layer = Some(index);
                        cur = self.insert(cur, &comp, d);
                    }
                },
                None => {
                    let d = Node::dir(&comp, cur);
                    cur = self.insert(cur, &comp, d);
                }
            }
        }
        Ok(cur)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;
    use crate::tree::layer::Compression;

    fn entry(path: &str, kind: EntryKind) -> LayerEntry {
        LayerEntry {
            path: path
                .split('/')
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect(),
            kind,
            mode: 0o644,
            uid: 0,
            gid: 0,
            size: 0,
            content: None,
            elf: None,
        }
    }

    fn layer(entries: Vec<LayerEntry>) -> LayerDiff {
        LayerDiff {
            entries,
            blob_digest: Digest::of(b""),
            blob_size: 0,
            diff_id: Digest::of(b""),
            uncompressed_size: 0,
            compression: Compression::None,
        }
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
            t.node(t.lookup("/usr/lib/libc2").unwrap().unwrap())
                .hardlink_to
                .as_deref(),
            Some("/lib/libc.so.6")
        );
        let err = t.apply(layer(vec![entry("x", EntryKind::Hardlink("nope".into()))]), 2);
        assert!(matches!(err, Err(MergeError::HardlinkMissing { .. })));
    }
}
