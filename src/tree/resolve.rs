//! Path lookup the way the kernel does it inside a chroot: absolute link targets start at the
//! image root, `..` never climbs above the root, and a chain of more than 40 links (Linux's
//! MAXSYMLINKS; the tree's `max_link_depth` limit) is a loop.

use super::{FileTree, NodeId, NodeKind, ROOT};
use std::collections::VecDeque;

/// Linux gives up with ELOOP after this many links in one lookup; the default of
/// `max_link_depth`.
pub(crate) const MAX_LINKS: u32 = 40;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ResolveError {
    #[error(
        "too many levels of symbolic links (more than {limit}, the max_link_depth limit) while resolving {path}"
    )]
    Loop { path: String, limit: u32 },
}

pub(super) fn resolve(
    tree: &FileTree,
    start: NodeId,
    path: &str,
    follow_final: bool,
) -> Result<Option<NodeId>, ResolveError> {
    let mut pending: VecDeque<String> = split(path).map(str::to_string).collect();
    let mut cur = if path.starts_with('/') { ROOT } else { start };
    let mut links = 0;
    while let Some(comp) = pending.pop_front() {
        match comp.as_str() {
            "." => continue,
            ".." => {
                cur = tree.parent(cur);
                continue;
            }
            _ => {}
        }
        let Some(child) = tree.child(cur, &comp) else {
            return Ok(None);
        };
        match &tree.node(child).kind {
            NodeKind::Symlink(target) if follow_final || !pending.is_empty() => {
                links += 1;
                if links > tree.max_links() {
                    return Err(ResolveError::Loop {
                        path: path.to_string(),
                        limit: tree.max_links(),
                    });
                }
                if target.starts_with('/') {
                    cur = ROOT;
                }
                for part in split(target).collect::<Vec<_>>().into_iter().rev() {
                    pending.push_front(part.to_string());
                }
            }
            _ => cur = child,
        }
    }
    Ok(Some(cur))
}

/// The non-empty components of a path.
pub(crate) fn split(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|c| !c.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{NewKind, NewNode};

    fn link(tree: &mut FileTree, dir: NodeId, name: &str, target: &str) -> NodeId {
        let mut n = NewNode::dir();
        n.kind = NewKind::Symlink(target.to_string());
        tree.insert(dir, name, n)
    }

    fn file(tree: &mut FileTree, dir: NodeId, name: &str) -> NodeId {
        let mut n = NewNode::dir();
        n.kind = NewKind::File;
        tree.insert(dir, name, n)
    }

    #[test]
    fn chroot_semantics() {
        let mut t = FileTree::new();
        let usr = t.insert(ROOT, "usr", NewNode::dir());
        let lib = t.insert(usr, "lib", NewNode::dir());
        let libc = file(&mut t, lib, "libc.so.6");
        link(&mut t, ROOT, "lib", "usr/lib");
        let etc = t.insert(ROOT, "etc", NewNode::dir());
        link(&mut t, etc, "evil", "/../../../");
        link(&mut t, etc, "up", "../../../../usr/lib/libc.so.6");
        let l1 = link(&mut t, etc, "loop1", "loop2");
        link(&mut t, etc, "loop2", "/etc/loop1");

        assert_eq!(t.lookup("/lib/libc.so.6").unwrap(), Some(libc));
        assert_eq!(t.lookup("/etc/evil/usr/lib/libc.so.6").unwrap(), Some(libc));
        assert_eq!(t.lookup("/etc/up").unwrap(), Some(libc));
        assert_eq!(t.lookup("/../../lib/./libc.so.6").unwrap(), Some(libc));
        assert_eq!(t.lookup("/lib/missing").unwrap(), None);
        assert_eq!(t.lookup("/usr/lib/libc.so.6/x").unwrap(), None);
        assert_eq!(t.lookup_nofollow("/etc/loop1").unwrap(), Some(l1));
        assert!(matches!(t.lookup("/etc/loop1"), Err(ResolveError::Loop { .. })));
        assert_eq!(t.path_of(libc), "/usr/lib/libc.so.6");
    }
}
