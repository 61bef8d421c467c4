//! An image as memlint holds it once read: what it is, where it came from, its config, its
//! layers and its merged file tree. Sources produce it; facts, locate and reports read it.

use crate::digest::Digest;
use crate::platform::Platform;
use crate::tree::{Compression, FileTree};
use oci_spec::image::ImageConfiguration;

/// A layer as the manifest describes it, completed with what reading it showed.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct Layer {
    /// The blob digest from the manifest (for classic `docker save` archives, the digest of
    /// the stored tar).
    pub(crate) digest: Digest,
    pub(crate) media_type: String,
    /// Bytes as stored.
    pub(crate) size: u64,
    pub(crate) uncompressed_size: u64,
    pub(crate) diff_id: Digest,
    pub(crate) compression: Compression,
    /// Tar entries in the layer.
    pub(crate) entries: u64,
    /// The `created_by` of the history entry that made this layer.
    pub(crate) history: Option<String>,
    /// The layer came from the layer cache: its blob was not opened.
    pub(crate) from_cache: bool,
}

/// The kind of source an image was read from; shown as the reference prefix that names it
/// (`inspect`'s `image.source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ImageSource {
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
    pub(crate) fn as_str(self) -> &'static str {
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
pub(crate) struct Image {
    /// The reference as the user wrote it.
    pub(crate) reference: String,
    /// What kind of source the image was read from.
    pub(crate) source: ImageSource,
    /// The folder or file read.
    pub(crate) location: String,
    /// The tag or reference name the image was chosen by, when it has one.
    pub(crate) name: Option<String>,
    pub(crate) manifest_digest: Option<Digest>,
    pub(crate) manifest_media_type: Option<String>,
    pub(crate) config_digest: Option<Digest>,
    pub(crate) platform: Platform,
    /// Every platform the chosen image name offers (several for an index).
    pub(crate) platforms: Vec<Platform>,
    /// `None` for an unpacked root file system, which has no config.
    pub(crate) config: Option<ImageConfiguration>,
    pub(crate) layers: Vec<Layer>,
    pub(crate) tree: FileTree,
}

impl Image {
    /// An image that is only a file tree: an unpacked root file system (`dir:`), or a tree
    /// built by hand. No layers, no digests, one platform.
    pub(crate) fn unlayered(
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
    pub(crate) fn cache_summary(&self, cache_dir: Option<&std::path::Path>) -> Option<String> {
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
