//! The distributions installed in `site-packages` and `dist-packages`, from their core
//! metadata's first headers.

use super::*;

/// Distributions listed at most.
pub(super) const MAX_PACKAGES: usize = 10_000;

/// PEP 503: lower case, runs of `-`, `_` and `.` become one `-`.
pub(crate) fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.extend(c.to_lowercase());
        }
    }
    out
}

pub(super) const PACKAGE_DIRS: [&str; 2] = ["site-packages", "dist-packages"];

pub(super) fn children(tree: &FileTree, dir: NodeId) -> Vec<(String, NodeId)> {
    match &tree.node(dir).kind {
        NodeKind::Dir(c) => c.iter().map(|(n, &id)| (n.to_string(), id)).collect(),
        _ => Vec::new(),
    }
}

pub(super) fn read_packages(tree: &FileTree, dir: NodeId, out: &mut Vec<PythonPackage>) {
    let base = tree.path_of(dir);
    for (name, id) in children(tree, dir) {
        if out.len() >= MAX_PACKAGES {
            return;
        }
        let (stem, metadata) = if let Some(stem) = name.strip_suffix(".dist-info") {
            (stem, "METADATA")
        } else if let Some(stem) = name.strip_suffix(".egg-info") {
            (stem, "PKG-INFO")
        } else {
            continue;
        };
        let node = tree.node(id);
        let path = format!("{base}/{name}");
        let file = if node.is_dir() {
            format!("{path}/{metadata}")
        } else if node.is_file() {
            path.clone()
        } else {
            continue;
        };
        let headers = tree
            .contents(&file)
            .map(|c| headers(&String::from_utf8_lossy(&c.bytes)))
            .unwrap_or_default();
        // `numpy-1.26.4.dist-info`, `foo-1.0-py3.11.egg-info`.
        let (from_name, from_version) = match stem.split_once('-') {
            Some((n, rest)) => (n, Some(rest.split('-').next().unwrap_or(rest))),
            None => (stem, None),
        };
        out.push(PythonPackage {
            name: headers.0.unwrap_or_else(|| from_name.to_string()),
            version: headers
                .1
                .or(from_version.filter(|v| !v.is_empty()).map(str::to_string)),
            path,
        });
    }
}

/// `Name:` and `Version:` from the header block of core metadata (RFC 822 style; it ends at
/// the first empty line).
pub(super) fn headers(text: &str) -> (Option<String>, Option<String>) {
    let (mut name, mut version) = (None, None);
    for line in text.lines() {
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            let v = v.trim();
            match k {
                "Name" if name.is_none() && !v.is_empty() => name = Some(v.to_string()),
                "Version" if version.is_none() && !v.is_empty() => version = Some(v.to_string()),
                _ => {}
            }
        }
    }
    (name, version)
}
