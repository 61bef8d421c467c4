//! The per-layer analysis cache: what a layer contributes to the file tree, and the kept file
//! contents, stored by the layer's diff_id so that a second read of an image (or of another
//! image on the same base) reads only the layers it has not seen.

use std::path::{Path, PathBuf};

/// A cache folder.
#[derive(Debug)]
pub struct LayerCache {
    dir: PathBuf,
}

impl LayerCache {
    /// The folder users expect: `$XDG_CACHE_HOME/memlint`, else `~/.cache/memlint`.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| PathBuf::from(h).join(".cache"))
            })?;
        Some(base.join("memlint"))
    }

    pub fn open(dir: &Path) -> LayerCache {
        LayerCache {
            dir: dir.to_path_buf(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}
