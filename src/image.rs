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

/// The kind of source an image was read from; shown as the reference prefix that names it
/// (`inspect`'s `image.source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImageSource {
    OciDir,
    OciArchive,
    DockerArchive,
    /// An unpacked root file system: no layers, no config, no digests.
    Dir,
    Registry,
    Docker,
    Podman,
}

impl ImageSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ImageSource::OciDir => "oci-dir",
            ImageSource::OciArchive => "oci-archive",
            ImageSource::DockerArchive => "docker-archive",
            ImageSource::Dir => "dir",
            ImageSource::Registry => "registry",
            ImageSource::Docker => "docker",
            ImageSource::Podman => "podman",
        }
    }
}

impl std::fmt::Display for ImageSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An image read into memory: what it is, its config, its layers and its merged tree.
#[derive(Debug)]
pub struct Image {
    /// The reference as the user wrote it.
    pub reference: String,
    /// What kind of source the image was read from.
    pub source: ImageSource,
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
    /// An image that is only a file tree: an unpacked root file system (`dir:`), or a tree
    /// built by hand. No layers, no digests, one platform.
    pub fn unlayered(
        reference: &str,
        location: &str,
        platform: Platform,
        config: Option<ImageConfiguration>,
        tree: FileTree,
    ) -> Image {
        Image {
            reference: reference.to_string(),
            source: ImageSource::Dir,
            location: location.to_string(),
            name: None,
            manifest_digest: None,
            manifest_media_type: None,
            config_digest: None,
            platforms: vec![platform.clone()],
            platform,
            config,
            layers: Vec::new(),
            tree,
        }
    }

    /// One line for `lint -v`: how many layers were read and how many came from the layer
    /// cache (in the folder `cache_dir`, `None` when the cache is off). `None` for a root file
    /// system, which has no layers to cache.
    pub fn cache_summary(&self, cache_dir: Option<&std::path::Path>) -> Option<String> {
        if self.source == ImageSource::Dir {
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
