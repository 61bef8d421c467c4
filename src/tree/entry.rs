//! One entry of a layer as the tar reader finds it (and as tests and fuzz targets write it by
//! hand), apart from the reader: the packed storage of entries and the reader both use it.

use crate::elf::ElfInfo;

/// What a tar entry is, after whiteouts are recognised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum EntryKind {
    Dir,
    File,
    Symlink(String),
    /// A hard link to another path (relative to the image root).
    Hardlink(String),
    Special,
    /// `.wh.NAME`: NAME is deleted from lower layers.
    Whiteout,
    /// `.wh..wh..opq`: the folder's lower-layer contents are hidden.
    OpaqueWhiteout,
}

/// One entry of a layer.
#[derive(Clone, Debug)]
pub(crate) struct LayerEntry {
    /// Components from the image root, `..` already clamped at the root. For a whiteout,
    /// the path of what it deletes (or of the opaque folder).
    pub(crate) path: Vec<String>,
    pub(crate) kind: EntryKind,
    pub(crate) mode: u32,
    pub(crate) uid: u64,
    pub(crate) gid: u64,
    pub(crate) size: u64,
    pub(crate) content: Option<super::Content>,
    /// Boxed: most entries are not ELF files, and a layer can hold hundreds of thousands.
    pub(crate) elf: Option<Box<ElfInfo>>,
}

impl LayerEntry {
    #[cfg(test)]
    /// An entry written by hand (trees built in tests and fuzz targets): `path` split at `/`,
    /// mode 0644, owned by root, no content.
    pub(crate) fn new(path: &str, kind: EntryKind) -> LayerEntry {
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

    #[cfg(test)]
    /// This entry as a file holding `text`, kept whole.
    pub(crate) fn with_text(mut self, text: &str) -> LayerEntry {
        self.size = text.len() as u64;
        self.content = Some(super::Content {
            bytes: text.as_bytes().to_vec(),
            truncated: false,
        });
        self
    }

    #[cfg(test)]
    /// This entry with another mode.
    pub(crate) fn with_mode(mut self, mode: u32) -> LayerEntry {
        self.mode = mode;
        self
    }
}
