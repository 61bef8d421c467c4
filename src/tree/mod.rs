//! The merged file tree of an image: layers are streamed, their whiteouts applied in order, and
//! the result keeps metadata for every path and contents only for the files an interest asked
//! for.
//!
//! Memory follows the number of paths, so a path is kept small: a node is one fixed-size slot
//! (name, parent and sibling links, size, layer) in one vector; names are interned in one arena
//! (a `node_modules` tree repeats `package.json`, `index.js`, `lib` thousands of times); the
//! kind, mode and owner are interned together; a folder's children are found through one hash
//! table keyed by (folder, name) and listed, in name order, when asked. What few paths have
//! (a link target, kept contents, ELF facts) lives in a side table. [`FileTree::node`] gives a
//! [`Node`] view of a slot.

pub(crate) mod build;
pub(crate) mod entries;
pub(crate) mod entry;
pub(crate) mod gzip;
pub(crate) mod interest;
pub(crate) mod layer;
pub(crate) mod limits;
pub(crate) mod merge;
mod resolve;
mod table;
pub(crate) mod xz_bzip2;

pub(crate) use entries::Entries;
pub(crate) use interest::{wildcard_match, Interests};
pub(crate) use layer::{Budget, Compression, EntryKind, LayerDiff, LayerEntry};
pub(crate) use limits::Limits;
pub(crate) use resolve::ResolveError;

use crate::elf::ElfInfo;
use serde::Serialize;
use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap};
use table::{IdTable, Names};

/// Index of a node in a [`FileTree`].
pub(crate) type NodeId = u32;

/// Roughly what a path costs in the merged tree (its slot, its share of the tables), for the
/// metadata budget.
pub(crate) const NODE_BYTES: u64 = 64;

const NONE: u32 = u32::MAX;

/// What a path is.
#[derive(Clone, Debug)]
pub(crate) enum NodeKind<'a> {
    Dir(Children<'a>),
    File,
    Symlink(&'a str),
    /// Character or block device, FIFO.
    Special,
}

/// The children of a folder, in name order (listed when first asked for).
#[derive(Clone, Debug)]
pub(crate) struct Children<'a> {
    tree: &'a FileTree,
    dir: NodeId,
    sorted: OnceCell<Vec<(&'a str, NodeId)>>,
}

impl<'a> Children<'a> {
    fn list(&self) -> &Vec<(&'a str, NodeId)> {
        self.sorted.get_or_init(|| {
            let tree = self.tree;
            let mut v: Vec<(&'a str, NodeId)> = tree
                .child_ids(self.dir)
                .map(|id| (tree.name_of(id), id))
                .collect();
            v.sort_unstable_by(|a, b| a.0.cmp(b.0));
            v
        })
    }

    /// (name, id) pairs in name order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&&'a str, &NodeId)> {
        self.list().iter().map(|(k, v)| (k, v))
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &&'a str> {
        self.list().iter().map(|(k, _)| k)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &NodeId> {
        self.list().iter().map(|(_, v)| v)
    }

    pub(crate) fn len(&self) -> usize {
        self.tree.child_ids(self.dir).count()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.tree.slots[self.dir as usize].first == NONE
    }
}

impl<'c, 'a> IntoIterator for &'c Children<'a> {
    type Item = (&'c &'a str, &'c NodeId);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'c, (&'a str, NodeId)>,
        fn(&'c (&'a str, NodeId)) -> (&'c &'a str, &'c NodeId),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.list().iter().map(|(k, v)| (k, v))
    }
}

/// File contents kept because an interest asked for them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Content {
    pub(crate) bytes: Vec<u8>,
    /// The file was longer than the cap its interest set; `bytes` is its start.
    pub(crate) truncated: bool,
}

/// One path of the merged tree, as a view of its slot.
#[derive(Clone, Debug)]
pub(crate) struct Node<'a> {
    name: &'a str,
    pub(crate) kind: NodeKind<'a>,
    pub(crate) mode: u32,
    pub(crate) size: u64,
    /// Index of the layer that last wrote this path, or for a folder no entry gave, the layer
    /// whose entry implied it (`None` for the root and for rootfs).
    pub(crate) layer: Option<u32>,
    /// For a hard link: the file it was linked to, by its path once the symlinks in the
    /// link name's folders are followed.
    pub(crate) hardlink_to: Option<&'a str>,
    pub(crate) elf: Option<&'a ElfInfo>,
}

impl<'a> Node<'a> {
    pub(crate) fn name(&self) -> &'a str {
        self.name
    }

    pub(crate) fn is_dir(&self) -> bool {
        matches!(self.kind, NodeKind::Dir(_))
    }

    pub(crate) fn is_file(&self) -> bool {
        matches!(self.kind, NodeKind::File)
    }

    pub(crate) fn symlink_target(&self) -> Option<&'a str> {
        match self.kind {
            NodeKind::Symlink(t) => Some(t),
            _ => None,
        }
    }

    /// The `ls -l` type letter.
    pub(crate) fn type_name(&self) -> &'static str {
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
pub(crate) struct TreeCounts {
    /// Paths in the merged tree, the root excluded.
    pub(crate) count: u64,
    pub(crate) regular: u64,
    pub(crate) directories: u64,
    pub(crate) symlinks: u64,
    pub(crate) hardlinks: u64,
    pub(crate) special: u64,
    pub(crate) elf: u64,
    pub(crate) kept_files: u64,
    pub(crate) kept_bytes: u64,
}

/// What a slot is; interned with its mode and owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Tag {
    Dir,
    File,
    Symlink,
    Special,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Meta {
    tag: Tag,
    mode: u32,
    uid: u64,
    gid: u64,
}

/// One path: 40 bytes.
#[derive(Clone, Debug)]
struct Slot {
    /// Interned name.
    name: u32,
    parent: NodeId,
    /// First child (folders), next and previous sibling: the children of a folder, unordered.
    first: NodeId,
    next: NodeId,
    prev: NodeId,
    /// Index into `metas`; `NONE` for a free slot.
    meta: u32,
    layer: u32,
    /// Index into `extras`, or `NONE`.
    extra: u32,
    size: u64,
}

/// What few paths have.
#[derive(Clone, Debug, Default)]
struct Extra {
    link: Option<Box<str>>,
    hardlink_to: Option<Box<str>>,
    content: Option<Content>,
    elf: Option<Box<ElfInfo>>,
}

impl Extra {
    fn is_empty(&self) -> bool {
        self.link.is_none() && self.hardlink_to.is_none() && self.content.is_none() && self.elf.is_none()
    }
}

/// What [`FileTree::insert`] puts at a path.
#[derive(Clone, Debug)]
pub(crate) struct NewNode {
    pub(crate) kind: NewKind,
    pub(crate) mode: u32,
    pub(crate) uid: u64,
    pub(crate) gid: u64,
    pub(crate) size: u64,
    pub(crate) layer: Option<u32>,
    pub(crate) hardlink_to: Option<String>,
    pub(crate) content: Option<Content>,
    pub(crate) elf: Option<Box<ElfInfo>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum NewKind {
    Dir,
    File,
    Symlink(String),
    Special,
}

impl NewNode {
    /// An implied folder.
    pub(crate) fn dir() -> NewNode {
        NewNode {
            kind: NewKind::Dir,
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
}

/// The merged file tree.
#[derive(Clone, Debug)]
pub(crate) struct FileTree {
    slots: Vec<Slot>,
    free: Vec<NodeId>,
    names: Names,
    /// (folder, name) → child.
    children: IdTable,
    metas: Vec<Meta>,
    meta_ids: HashMap<Meta, u32>,
    extras: Vec<Extra>,
    free_extras: Vec<u32>,
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

pub(crate) const ROOT: NodeId = 0;

impl Default for FileTree {
    fn default() -> Self {
        FileTree::new()
    }
}

/// The hash of a (folder, name) key.
fn child_hash(parent: NodeId, name: u32) -> u64 {
    let mut z = (u64::from(parent) << 32 | u64::from(name)).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl FileTree {
    pub(crate) fn new() -> FileTree {
        let mut names = Names::default();
        let root_name = names.intern("");
        let mut t = FileTree {
            slots: Vec::new(),
            free: Vec::new(),
            names,
            children: IdTable::default(),
            metas: Vec::new(),
            meta_ids: HashMap::new(),
            extras: Vec::new(),
            free_extras: Vec::new(),
            removed: BTreeMap::new(),
            max_links: resolve::MAX_LINKS,
            max_path_len: Limits::default().max_path_len,
            max_ld_conf: (
                Limits::default().max_ld_conf_files,
                Limits::default().max_ld_conf_names,
            ),
            kept_for: Interests::default(),
        };
        let meta = t.meta(Meta {
            tag: Tag::Dir,
            mode: 0o755,
            uid: 0,
            gid: 0,
        });
        t.slots.push(Slot {
            name: root_name,
            parent: ROOT,
            first: NONE,
            next: NONE,
            prev: NONE,
            meta,
            layer: NONE,
            extra: NONE,
            size: 0,
        });
        t
    }

    /// An empty tree whose lookups follow at most `limits.max_link_depth` links.
    pub(crate) fn with_limits(limits: &Limits) -> FileTree {
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
    pub(crate) fn keeping(mut self, interests: Interests) -> FileTree {
        self.kept_for = interests;
        self
    }

    /// Whether the reader was asked to keep the contents of the file at `path` (an absolute
    /// path as written, before links are followed). A file found through a path the image
    /// chose (a script in its PATH, an `include` of ld.so.conf) may lie outside what anyone
    /// asked for: ask this first, and read its contents only when it says yes.
    pub(crate) fn keeps(&self, path: &str) -> bool {
        self.kept_for.covers(path)
    }

    /// Symbolic links one lookup may follow.
    pub(crate) fn max_links(&self) -> u32 {
        self.max_links
    }

    /// Bytes of the path an entry may land at.
    pub(crate) fn max_path_len(&self) -> usize {
        self.max_path_len
    }

    /// `max_ld_conf_files` and `max_ld_conf_names`: how much of /etc/ld.so.conf and its
    /// includes may be read from this tree.
    pub(crate) fn max_ld_conf(&self) -> (u64, u64) {
        self.max_ld_conf
    }

    fn meta(&mut self, m: Meta) -> u32 {
        if let Some(&id) = self.meta_ids.get(&m) {
            return id;
        }
        let id = self.metas.len() as u32;
        self.metas.push(m);
        self.meta_ids.insert(m, id);
        id
    }

    fn extra_of(&self, id: NodeId) -> Option<&Extra> {
        let e = self.slots[id as usize].extra;
        (e != NONE).then(|| &self.extras[e as usize])
    }

    fn tag(&self, id: NodeId) -> Tag {
        self.metas[self.slots[id as usize].meta as usize].tag
    }

    fn is_dir_id(&self, id: NodeId) -> bool {
        self.tag(id) == Tag::Dir
    }

    /// The name of node `id` (empty for the root).
    pub(crate) fn name_of(&self, id: NodeId) -> &str {
        self.names.get(self.slots[id as usize].name)
    }

    /// The children of folder `id`, in no particular order.
    fn child_ids(&self, id: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        let first = if self.is_dir_id(id) {
            self.slots[id as usize].first
        } else {
            NONE
        };
        std::iter::successors((first != NONE).then_some(first), move |&c| {
            let n = self.slots[c as usize].next;
            (n != NONE).then_some(n)
        })
    }

    /// A view of node `id`.
    pub(crate) fn node(&self, id: NodeId) -> Node<'_> {
        let s = &self.slots[id as usize];
        let m = &self.metas[s.meta as usize];
        let extra = self.extra_of(id);
        Node {
            name: self.names.get(s.name),
            kind: match m.tag {
                Tag::Dir => NodeKind::Dir(Children {
                    tree: self,
                    dir: id,
                    sorted: OnceCell::new(),
                }),
                Tag::File => NodeKind::File,
                Tag::Symlink => NodeKind::Symlink(extra.and_then(|e| e.link.as_deref()).unwrap_or("")),
                Tag::Special => NodeKind::Special,
            },
            mode: m.mode,
            size: s.size,
            layer: (s.layer != NONE).then_some(s.layer),
            hardlink_to: extra.and_then(|e| e.hardlink_to.as_deref()),
            elf: extra.and_then(|e| e.elf.as_deref()),
        }
    }

    /// Sets the layer that wrote node `id`.
    pub(crate) fn set_layer(&mut self, id: NodeId, layer: Option<u32>) {
        self.slots[id as usize].layer = layer.unwrap_or(NONE);
    }

    /// Sets the mode and owner of node `id`, its kind unchanged.
    pub(crate) fn set_owner(&mut self, id: NodeId, mode: u32, uid: u64, gid: u64) {
        let tag = self.tag(id);
        let meta = self.meta(Meta { tag, mode, uid, gid });
        self.slots[id as usize].meta = meta;
    }

    pub(crate) fn parent(&self, id: NodeId) -> NodeId {
        self.slots[id as usize].parent
    }

    /// The child `name` of folder `dir`, without following links.
    pub(crate) fn child(&self, dir: NodeId, name: &str) -> Option<NodeId> {
        if !self.is_dir_id(dir) {
            return None;
        }
        let sym = self.names.find(name)?;
        self.find_child(dir, sym)
    }

    fn find_child(&self, dir: NodeId, sym: u32) -> Option<NodeId> {
        let slots = &self.slots;
        self.children.find(child_hash(dir, sym), |id| {
            let s = &slots[id as usize];
            s.parent == dir && s.name == sym
        })
    }

    /// The absolute path of a node, e.g. `/usr/lib/libc.so.6`.
    pub(crate) fn path_of(&self, mut id: NodeId) -> String {
        let mut parts = Vec::new();
        while id != ROOT {
            parts.push(self.name_of(id));
            id = self.parent(id);
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

    /// Fills slot `id` with `node` (its name, parent and links unchanged).
    fn fill(&mut self, id: NodeId, node: NewNode) {
        let NewNode {
            kind,
            mode,
            uid,
            gid,
            size,
            layer,
            hardlink_to,
            content,
            elf,
        } = node;
        let (tag, link) = match kind {
            NewKind::Dir => (Tag::Dir, None),
            NewKind::File => (Tag::File, None),
            NewKind::Symlink(t) => (Tag::Symlink, Some(t.into_boxed_str())),
            NewKind::Special => (Tag::Special, None),
        };
        let meta = self.meta(Meta { tag, mode, uid, gid });
        let extra = Extra {
            link,
            hardlink_to: hardlink_to.map(String::into_boxed_str),
            content: content.map(|mut c| {
                c.bytes.shrink_to_fit();
                c
            }),
            elf,
        };
        self.free_extra(id);
        let extra = if extra.is_empty() {
            NONE
        } else if let Some(e) = self.free_extras.pop() {
            self.extras[e as usize] = extra;
            e
        } else {
            self.extras.push(extra);
            (self.extras.len() - 1) as u32
        };
        let s = &mut self.slots[id as usize];
        s.meta = meta;
        s.size = size;
        s.layer = layer.unwrap_or(NONE);
        s.extra = extra;
    }

    fn free_extra(&mut self, id: NodeId) {
        let e = std::mem::replace(&mut self.slots[id as usize].extra, NONE);
        if e != NONE {
            self.extras[e as usize] = Extra::default();
            self.free_extras.push(e);
        }
    }

    /// Puts `node` at `name` in folder `dir`, replacing what was there. A folder that replaces
    /// a folder keeps its children, as tar extraction does.
    pub(crate) fn insert(&mut self, dir: NodeId, name: &str, node: NewNode) -> NodeId {
        let sym = self.names.intern(name);
        if let Some(existing) = self.find_child(dir, sym) {
            if !(self.is_dir_id(existing) && node.kind == NewKind::Dir) {
                self.release_children(existing);
            }
            self.fill(existing, node);
            return existing;
        }
        let slot = Slot {
            name: sym,
            parent: dir,
            first: NONE,
            next: self.slots[dir as usize].first,
            prev: NONE,
            meta: 0,
            layer: NONE,
            extra: NONE,
            size: 0,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = slot;
                id
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as NodeId
            }
        };
        let next = self.slots[id as usize].next;
        if next != NONE {
            self.slots[next as usize].prev = id;
        }
        self.slots[dir as usize].first = id;
        let slots = &self.slots;
        self.children.insert(child_hash(dir, sym), id, |c| {
            let s = &slots[c as usize];
            child_hash(s.parent, s.name)
        });
        self.fill(id, node);
        id
    }

    /// Removes `name` and everything under it from folder `dir`.
    pub(crate) fn remove(&mut self, dir: NodeId, name: &str) {
        let Some(id) = self.child(dir, name) else {
            return;
        };
        let (prev, next) = {
            let s = &self.slots[id as usize];
            (s.prev, s.next)
        };
        if prev != NONE {
            self.slots[prev as usize].next = next;
        } else {
            self.slots[dir as usize].first = next;
        }
        if next != NONE {
            self.slots[next as usize].prev = prev;
        }
        self.release(id);
    }

    /// Empties a folder (an opaque whiteout).
    pub(crate) fn clear_dir(&mut self, dir: NodeId) {
        if self.is_dir_id(dir) {
            self.release_children(dir);
        }
    }

    fn release_children(&mut self, dir: NodeId) {
        let first = std::mem::replace(&mut self.slots[dir as usize].first, NONE);
        let mut c = first;
        while c != NONE {
            let next = self.slots[c as usize].next;
            self.release(c);
            c = next;
        }
    }

    /// Frees `id` and everything under it; the caller has unlinked it from its siblings.
    fn release(&mut self, id: NodeId) {
        let mut stack = vec![id];
        while let Some(id) = stack.pop() {
            let mut c = self.slots[id as usize].first;
            while c != NONE {
                stack.push(c);
                c = self.slots[c as usize].next;
            }
            let s = &self.slots[id as usize];
            self.children.remove(child_hash(s.parent, s.name), id);
            self.free_extra(id);
            let s = &mut self.slots[id as usize];
            s.meta = NONE;
            s.first = NONE;
            s.next = NONE;
            s.prev = NONE;
            self.free.push(id);
        }
    }

    /// Every path under `/`, depth first in name order, the root excluded.
    pub(crate) fn walk(&self) -> Walk<'_> {
        let mut w = Walk {
            tree: self,
            stack: Vec::new(),
        };
        w.push_children(ROOT);
        w
    }

    pub(crate) fn counts(&self) -> TreeCounts {
        let mut c = TreeCounts::default();
        for (id, s) in self.slots.iter().enumerate().skip(1) {
            if s.meta == NONE {
                continue;
            }
            c.count += 1;
            match self.metas[s.meta as usize].tag {
                Tag::Dir => c.directories += 1,
                Tag::File => c.regular += 1,
                Tag::Symlink => c.symlinks += 1,
                Tag::Special => c.special += 1,
            }
            if let Some(e) = self.extra_of(id as NodeId) {
                if e.hardlink_to.is_some() {
                    c.hardlinks += 1;
                }
                if e.elf.is_some() {
                    c.elf += 1;
                }
                if let Some(content) = &e.content {
                    c.kept_files += 1;
                    c.kept_bytes += content.bytes.len() as u64;
                }
            }
        }
        c
    }

    /// The node at `path`, following every symlink (the final one too).
    pub(crate) fn lookup(&self, path: &str) -> Result<Option<NodeId>, ResolveError> {
        resolve::resolve(self, ROOT, path, true)
    }

    /// The node at `path`, following symlinks in the folders on the way but not a final one.
    pub(crate) fn lookup_nofollow(&self, path: &str) -> Result<Option<NodeId>, ResolveError> {
        resolve::resolve(self, ROOT, path, false)
    }

    pub(crate) fn note_removed(&mut self, path: String, layer: u32) {
        self.removed.insert(path, layer);
    }

    /// The layer whose whiteout removed `path` or a folder above it (index from 0).
    pub(crate) fn removed_by(&self, path: &str) -> Option<u32> {
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
    pub(crate) fn contents(&self, path: &str) -> Option<&Content> {
        debug_assert!(
            self.keeps(path),
            "contents of {path} read, but no interest asked for them: declare the path beside the code that reads it"
        );
        let id = self.lookup(path).ok()??;
        self.kept_content(id)
    }

    /// Whether `path` (symlinks followed) is a regular file of the image.
    pub(crate) fn is_file_at(&self, path: &str) -> bool {
        self.lookup(path)
            .ok()
            .flatten()
            .is_some_and(|id| matches!(self.node(id).kind, NodeKind::File))
    }

    /// The text (lossy UTF-8) of what the reader kept of the file at `path` (symlinks
    /// followed), as [`FileTree::kept_content`]: for a path the image chose (a config file its
    /// command names, an `include`), which may hold nothing.
    pub(crate) fn kept_text(&self, path: &str) -> Option<String> {
        let id = self.lookup(path).ok()??;
        let content = self.kept_content(id)?;
        Some(String::from_utf8_lossy(&content.bytes).into_owned())
    }

    /// The kept contents of node `id`, found by walking the tree. Its path must be one the tree
    /// was read to keep, as for [`FileTree::contents`].
    pub(crate) fn content(&self, id: NodeId) -> Option<&Content> {
        debug_assert!(
            self.keeps(&self.path_of(id)),
            "contents of {} read, but no interest asked for them: declare the path beside the code that reads it",
            self.path_of(id)
        );
        self.kept_content(id)
    }

    /// What the reader kept of node `id`, without asking whether an interest covers its path:
    /// for a file reached through a path the image chose (a link, a PATH entry, an `include`),
    /// which may lie anywhere and then holds nothing (or what a hard link to a kept file
    /// carries). Every other read goes through [`FileTree::content`] or
    /// [`FileTree::contents`], which catch a path left undeclared.
    pub(crate) fn kept_content(&self, id: NodeId) -> Option<&Content> {
        self.extra_of(id).and_then(|e| e.content.as_ref())
    }

    /// The ELF facts of node `id`. The tree must have been read for ELF heads; a reader of
    /// the dynamic section or markers declares [`Interests::scan_elf`] too.
    pub(crate) fn elf(&self, id: NodeId) -> Option<&ElfInfo> {
        debug_assert!(
            self.kept_for.elf_heads,
            "ELF facts of {} read, but no interest asked for ELF heads",
            self.path_of(id)
        );
        self.extra_of(id).and_then(|e| e.elf.as_deref())
    }
}

/// Iterator returned by [`FileTree::walk`].
pub(crate) struct Walk<'a> {
    tree: &'a FileTree,
    stack: Vec<NodeId>,
}

impl Walk<'_> {
    fn push_children(&mut self, dir: NodeId) {
        let tree = self.tree;
        let at = self.stack.len();
        self.stack.extend(tree.child_ids(dir));
        // Popped from the end: the first name goes last.
        self.stack[at..].sort_unstable_by(|&a, &b| tree.name_of(b).cmp(tree.name_of(a)));
    }
}

impl Iterator for Walk<'_> {
    type Item = NodeId;
    fn next(&mut self) -> Option<NodeId> {
        let id = self.stack.pop()?;
        if self.tree.is_dir_id(id) {
            self.push_children(id);
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
