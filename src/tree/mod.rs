//! The merged file tree of an image: layers are streamed, their whiteouts applied in order, and
//! the result keeps metadata for every path and contents only for the files an interest asked
//! for.

pub mod build;
pub mod interest;
pub mod layer;
pub mod limits;
pub mod merge;
mod resolve;

pub use interest::Interests;
pub use layer::{Budget, Compression, EntryKind, LayerDiff, LayerEntry};
pub use limits::Limits;
pub use resolve::ResolveError;

use crate::elf::ElfInfo;
use serde::Serialize;
use std::collections::BTreeMap;

/// Index of a node in a [`FileTree`].
pub type NodeId = u32;

/// What a path is.
#[derive(Clone, Debug)]
pub enum NodeKind {
    Dir(BTreeMap<Box<str>, NodeId>),
    File,
    Symlink(String),
    /// Character or block device, FIFO.
    Special,
}

/// File contents kept because an interest asked for them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Content {
    pub bytes: Vec<u8>,
    /// The file was longer than the cap its interest set; `bytes` is its start.
    pub truncated: bool,
}

/// One path of the merged tree.
#[derive(Clone, Debug)]
pub struct Node {
    name: Box<str>,
    parent: NodeId,
    pub kind: NodeKind,
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    pub size: u64,
    /// Index of the layer that last wrote this path (`None` for implied folders and rootfs).
    pub layer: Option<u32>,
    /// For a hard link: the path it was linked to in its layer.
    pub hardlink_to: Option<String>,
    /// Read through [`FileTree::content`], which checks that an interest asked for it.
    content: Option<Box<Content>>,
    pub elf: Option<Box<ElfInfo>>,
}

impl Node {
    fn dir(name: &str, parent: NodeId) -> Node {
        Node {
            name: name.into(),
            parent,
            kind: NodeKind::Dir(BTreeMap::new()),
            mode: 0o755,
            uid: 0,
            gid: 0,
            size: 0,
            layer: None,
            hardlink_to: None,
            content: None,
            elf: None,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn is_dir(&self) -> bool {
        matches!(self.kind, NodeKind::Dir(_))
    }

    pub fn is_file(&self) -> bool {
        matches!(self.kind, NodeKind::File)
    }

    pub fn symlink_target(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Symlink(t) => Some(t),
            _ => None,
        }
    }

    /// The `ls -l` type letter.
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            NodeKind::Dir(_) => "dir",
            NodeKind::File => "file",
            NodeKind::Symlink(_) => "symlink",
            NodeKind::Special => "special",
        }
    }
}

/// Counts of what the merged tree holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TreeCounts {
    /// Paths in the merged tree, the root excluded.
    pub count: u64,
    pub regular: u64,
    pub directories: u64,
    pub symlinks: u64,
    pub hardlinks: u64,
    pub special: u64,
    pub elf: u64,
    pub kept_files: u64,
    pub kept_bytes: u64,
}

/// The merged file tree.
#[derive(Clone, Debug)]
pub struct FileTree {
    nodes: Vec<Node>,
    free: Vec<NodeId>,
    /// Paths a whiteout removed, with the layer that removed them (explicit whiteouts and
    /// opaque folders only; what a layer merely overwrote is not listed).
    removed: BTreeMap<String, u32>,
    /// Symbolic links one lookup may follow ([`Limits::max_link_depth`]).
    max_links: u32,
    /// Bytes of the path an entry may land at ([`Limits::max_path_len`]).
    max_path_len: usize,
    /// How much of /etc/ld.so.conf and its includes the loader's facts read
    /// ([`Limits::max_ld_conf_files`], [`Limits::max_ld_conf_names`]).
    max_ld_conf: (u64, u64),
    /// What the contents were kept for: a content accessor asked for a path outside them
    /// fails in debug builds, since the reader could never have kept it.
    kept_for: Interests,
}

pub const ROOT: NodeId = 0;

impl Default for FileTree {
    fn default() -> Self {
        FileTree::new()
    }
}

impl FileTree {
    pub fn new() -> FileTree {
        FileTree {
            nodes: vec![Node::dir("", ROOT)],
            free: Vec::new(),
            removed: BTreeMap::new(),
            max_links: resolve::MAX_LINKS,
            max_path_len: Limits::default().max_path_len,
            max_ld_conf: (
                Limits::default().max_ld_conf_files,
                Limits::default().max_ld_conf_names,
            ),
            kept_for: Interests::default(),
        }
    }

    /// An empty tree whose lookups follow at most `limits.max_link_depth` links.
    pub fn with_limits(limits: &Limits) -> FileTree {
        FileTree {
            max_links: limits.max_link_depth,
            max_path_len: limits.max_path_len,
            max_ld_conf: (limits.max_ld_conf_files, limits.max_ld_conf_names),
            ..FileTree::new()
        }
    }

    /// The tree, remembering that its contents were kept for `interests` (what the layers were
    /// read with). A tree that was never told keeps nothing, and every content read from it
    /// fails in debug builds.
    pub fn keeping(mut self, interests: Interests) -> FileTree {
        self.kept_for = interests;
        self
    }

    /// What the contents were kept for.
    pub fn kept_for(&self) -> &Interests {
        &self.kept_for
    }

    /// Whether the reader was asked to keep the contents of the file at `path` (an absolute
    /// path as written, before links are followed). A file found through a path the image
    /// chose (a script in its PATH, an `include` of ld.so.conf) may lie outside what anyone
    /// asked for: ask this first, and read its contents only when it says yes.
    pub fn keeps(&self, path: &str) -> bool {
        self.kept_for.covers(path)
    }

    /// Symbolic links one lookup may follow.
    pub fn max_links(&self) -> u32 {
        self.max_links
    }

    /// Bytes of the path an entry may land at.
    pub fn max_path_len(&self) -> usize {
        self.max_path_len
    }

    /// `max_ld_conf_files` and `max_ld_conf_names`: how much of /etc/ld.so.conf and its
    /// includes may be read from this tree.
    pub fn max_ld_conf(&self) -> (u64, u64) {
        self.max_ld_conf
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    pub(crate) fn node_mut(&mut self, id: NodeId) -> &mut Node {
        &mut self.nodes[id as usize]
    }

    pub fn parent(&self, id: NodeId) -> NodeId {
        self.nodes[id as usize].parent
    }

    /// The child `name` of folder `dir`, without following links.
    pub fn child(&self, dir: NodeId, name: &str) -> Option<NodeId> {
        match &self.node(dir).kind {
            NodeKind::Dir(children) => children.get(name).copied(),
            _ => None,
        }
    }

    /// The absolute path of a node, e.g. `/usr/lib/libc.so.6`.
    pub fn path_of(&self, mut id: NodeId) -> String {
        let mut parts = Vec::new();
        while id != ROOT {
            let n = self.node(id);
            parts.push(&*n.name);
            id = n.parent;
        }
        if parts.is_empty() {
            return "/".to_string();
        }
        let mut out = String::new();
        for p in parts.iter().rev() {
            out.push('/');
            out.push_str(p);
        }
        out
    }

    /// Puts `node` at `name` in folder `dir`, replacing what was there. A folder that replaces
    /// a folder keeps its children, as tar extraction does.
    pub(crate) fn insert(&mut self, dir: NodeId, name: &str, mut node: Node) -> NodeId {
        node.name = name.into();
        node.parent = dir;
        if let Some(existing) = self.child(dir, name) {
            let old = &mut self.nodes[existing as usize];
            if let (NodeKind::Dir(_), NodeKind::Dir(_)) = (&old.kind, &node.kind) {
                node.kind = std::mem::replace(&mut old.kind, NodeKind::Special);
                *old = node;
                return existing;
            }
            self.remove(dir, name);
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as NodeId
            }
        };
        if let NodeKind::Dir(children) = &mut self.nodes[dir as usize].kind {
            children.insert(name.into(), id);
        }
        id
    }

    /// Removes `name` and everything under it from folder `dir`.
    pub(crate) fn remove(&mut self, dir: NodeId, name: &str) {
        let removed = match &mut self.nodes[dir as usize].kind {
            NodeKind::Dir(children) => children.remove(name),
            _ => None,
        };
        if let Some(id) = removed {
            self.release(id);
        }
    }

    /// Empties a folder (an opaque whiteout).
    pub(crate) fn clear_dir(&mut self, dir: NodeId) {
        let children = match &mut self.nodes[dir as usize].kind {
            NodeKind::Dir(children) => std::mem::take(children),
            _ => return,
        };
        for id in children.into_values() {
            self.release(id);
        }
    }

    fn release(&mut self, id: NodeId) {
        let mut stack = vec![id];
        while let Some(id) = stack.pop() {
            let node = std::mem::replace(&mut self.nodes[id as usize], Node::dir("", ROOT));
            if let NodeKind::Dir(children) = node.kind {
                stack.extend(children.into_values());
            }
            self.nodes[id as usize].kind = NodeKind::Special;
            self.free.push(id);
        }
    }

    /// Every path under `/`, depth first in name order, the root excluded.
    pub fn walk(&self) -> Walk<'_> {
        let mut stack = Vec::new();
        if let NodeKind::Dir(children) = &self.node(ROOT).kind {
            stack.extend(children.values().rev().copied());
        }
        Walk { tree: self, stack }
    }

    pub fn counts(&self) -> TreeCounts {
        let mut c = TreeCounts::default();
        for id in self.walk() {
            let n = self.node(id);
            c.count += 1;
            match n.kind {
                NodeKind::Dir(_) => c.directories += 1,
                NodeKind::File => c.regular += 1,
                NodeKind::Symlink(_) => c.symlinks += 1,
                NodeKind::Special => c.special += 1,
            }
            if n.hardlink_to.is_some() {
                c.hardlinks += 1;
            }
            if n.elf.is_some() {
                c.elf += 1;
            }
            if let Some(content) = &n.content {
                c.kept_files += 1;
                c.kept_bytes += content.bytes.len() as u64;
            }
        }
        c
    }

    /// The node at `path`, following every symlink (the final one too).
    pub fn lookup(&self, path: &str) -> Result<Option<NodeId>, ResolveError> {
        resolve::resolve(self, ROOT, path, true)
    }

    /// The node at `path`, following symlinks in the folders on the way but not a final one.
    pub fn lookup_nofollow(&self, path: &str) -> Result<Option<NodeId>, ResolveError> {
        resolve::resolve(self, ROOT, path, false)
    }

    pub(crate) fn note_removed(&mut self, path: String, layer: u32) {
        self.removed.insert(path, layer);
    }

    /// The layer whose whiteout removed `path` or a folder above it (index from 0).
    pub fn removed_by(&self, path: &str) -> Option<u32> {
        let mut p = path.trim_end_matches('/').to_string();
        loop {
            if let Some(&l) = self.removed.get(&p) {
                return Some(l);
            }
            match p.rsplit_once('/') {
                Some((parent, _)) if !parent.is_empty() => p = parent.to_string(),
                _ => return None,
            }
        }
    }

    /// The kept contents of the file at `path` (symlinks followed). `path` must be one the
    /// tree was read to keep ([`FileTree::keeps`]): asking for another is a bug in the caller
    /// (its interests do not declare the file, so the reader never kept it and it would read
    /// as absent), and panics in debug builds.
    pub fn contents(&self, path: &str) -> Option<&Content> {
        debug_assert!(
            self.keeps(path),
            "contents of {path} read, but no interest asked for them: declare the path beside the code that reads it"
        );
        let id = self.lookup(path).ok()??;
        self.nodes[id as usize].content.as_deref()
    }

    /// The kept contents of node `id`, found by walking the tree. Its path must be one the tree
    /// was read to keep, as for [`FileTree::contents`].
    pub fn content(&self, id: NodeId) -> Option<&Content> {
        debug_assert!(
            self.keeps(&self.path_of(id)),
            "contents of {} read, but no interest asked for them: declare the path beside the code that reads it",
            self.path_of(id)
        );
        self.nodes[id as usize].content.as_deref()
    }

    /// What the reader kept of node `id`, without asking whether an interest covers its path:
    /// for a file reached through a path the image chose (a link, a PATH entry, an `include`),
    /// which may lie anywhere and then holds nothing (or what a hard link to a kept file
    /// carries). Every other read goes through [`FileTree::content`] or
    /// [`FileTree::contents`], which catch a path left undeclared.
    pub fn kept_content(&self, id: NodeId) -> Option<&Content> {
        self.nodes[id as usize].content.as_deref()
    }

    /// The ELF facts of node `id`. The tree must have been read for ELF heads; a reader of
    /// the dynamic section or markers declares [`Interests::scan_elf`] too.
    pub fn elf(&self, id: NodeId) -> Option<&ElfInfo> {
        debug_assert!(
            self.kept_for.elf_heads,
            "ELF facts of {} read, but no interest asked for ELF heads",
            self.path_of(id)
        );
        self.nodes[id as usize].elf.as_deref()
    }
}

/// Iterator returned by [`FileTree::walk`].
pub struct Walk<'a> {
    tree: &'a FileTree,
    stack: Vec<NodeId>,
}

impl Iterator for Walk<'_> {
    type Item = NodeId;
    fn next(&mut self) -> Option<NodeId> {
        let id = self.stack.pop()?;
        if let NodeKind::Dir(children) = &self.tree.node(id).kind {
            self.stack.extend(children.values().rev().copied());
        }
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> LayerEntry {
        LayerEntry::new(path, EntryKind::File).with_text(text)
    }

    fn tree() -> FileTree {
        FileTree::from_entries(vec![
            file("etc/os-release", "ID=debian\n"),
            file("etc/hostname", "box\n"),
        ])
        .unwrap()
        .keeping(Interests::default().keep("/etc/os-release", 1024))
    }

    #[test]
    fn declared_contents_read() {
        let t = tree();
        assert!(t.keeps("/etc/os-release") && !t.keeps("/etc/hostname"));
        assert_eq!(t.contents("/etc/os-release").unwrap().bytes, b"ID=debian\n");
        let id = t.lookup("/etc/os-release").unwrap().unwrap();
        assert!(t.content(id).is_some());
        // A declared path that is not in the image reads as absent: that is an answer.
        let t = t.keeping(Interests::default().keep("/etc/*", 1024));
        assert!(t.contents("/etc/passwd").is_none());
        // What the image chose is read without the check, and holds what the reader kept.
        let other = t.lookup("/etc/hostname").unwrap().unwrap();
        assert_eq!(t.kept_content(other).unwrap().bytes, b"box\n");
    }

    /// A read nobody declared fails loudly instead of reading as "not there".
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "contents of /etc/hostname read, but no interest asked for them")]
    fn undeclared_path_panics() {
        let _ = tree().contents("/etc/hostname");
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "contents of /etc/hostname read, but no interest asked for them")]
    fn undeclared_node_panics() {
        let t = tree();
        let id = t.lookup("/etc/hostname").unwrap().unwrap();
        let _ = t.content(id);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "no interest asked for ELF heads")]
    fn undeclared_elf_panics() {
        let t = tree();
        let id = t.lookup("/etc/os-release").unwrap().unwrap();
        let _ = t.elf(id);
    }

    /// A tree nobody told what it was read for keeps nothing, so every read from it fails.
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "contents of /etc/os-release read")]
    fn a_tree_without_interests_declares_nothing() {
        let t = FileTree::from_entries(vec![file("etc/os-release", "ID=debian\n")]).unwrap();
        let _ = t.contents("/etc/os-release");
    }
}
