//! An image as memlint holds it once read: what it is, where it came from, its config, its
//! layers and its merged file tree. Sources produce it; facts, locate and reports read it.

use crate::digest::Digest;
use crate::platform::Platform;
use crate::tree::{Compression, FileTree};
use oci_spec::image::ImageConfiguration;

/// A layer as the manifest describes it, completed with what reading it showed.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Layer {
    /// The blob digest from the manifest (for classic `docker save` archives, the digest of
    /// the stored tar).
    pub digest: Digest,
    pub media_type: String,
    /// Bytes as stored.
    pub size: u64,
    pub uncompressed_size: u64,
    pub diff_id: Digest,
    pub compression: Compression,
    /// Tar entries in the layer.
    pub entries: u64,
    /// The `created_by` of the history entry that made this layer.
    pub history: Option<String>,
    /// The layer came from the layer cache: its blob was not opened.
    pub from_cache: bool,
}

/// An image read into memory: what it is, its config, its layers and its merged tree.
#[derive(Debug)]
pub struct Image {
    /// The reference as the user wrote it.
    pub reference: String,
    /// `oci-dir`, `oci-archive`, `docker-archive` or `dir`.
    pub source: &'static str,
    /// The folder or file read.
    pub location: String,
    /// The tag or reference name the image was chosen by, when it has one.
    pub name: Option<String>,
    pub manifest_digest: Option<Digest>,
    pub manifest_media_type: Option<String>,
    pub config_digest: Option<Digest>,
    pub platform: Platform,
    /// Every platform the chosen image name offers (several for an index).
    pub platforms: Vec<Platform>,
    /// `None` for an unpacked root file system, which has no config.
    pub config: Option<ImageConfiguration>,
    pub layers: Vec<Layer>,
    pub tree: FileTree,
}

impl Image {
    /// One line for `lint -v`: how many layers were read and how many came from the layer
    /// cache (in the folder `cache_dir`, `None` when the cache is off). `None` for a root file
    /// system, which has no layers to cache.
    pub fn cache_summary(&self, cache_dir: Option<&std::path::Path>) -> Option<String> {
        if self.source == "dir" {
            return None;
        }
        let total = self.layers.len();
        let cached = self.layers.iter().filter(|l| l.from_cache).count();
        let what = format!("memlint: {} ({})", self.reference, self.platform);
        let s = if total == 1 { "" } else { "s" };
        Some(match cache_dir {
            Some(dir) => format!(
                "{what}: {total} layer{s}: {} read, {cached} from the layer cache ({})",
                total - cached,
                dir.display()
            ),
            None => format!("{what}: {total} layer{s} read (layer cache off)"),
        })
    }
}
