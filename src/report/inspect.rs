//! The `inspect` report: what an image is made of (reference, layers, config, file counts and
//! the facts), as JSON whose keys are a contract with users' scripts, and as text.

use crate::facts::Facts;
use crate::image::{Image, Layer};
use crate::platform::Platform;
use crate::report::facts::count;
use crate::tree::{Compression, FileTree, TreeCounts};
use crate::untrusted::line;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{self, Write};

/// The JSON document `inspect` prints. Key names are a contract with users' scripts.
#[derive(Serialize)]
pub(crate) struct InspectReport<'a> {
    pub(crate) reference: &'a str,
    pub(crate) image: ImageView<'a>,
    pub(crate) files: FilesView,
    pub(crate) facts: &'a Facts,
    #[serde(skip)]
    pub(crate) paths: Option<Vec<PathView>>,
}

#[derive(Serialize)]
pub(crate) struct FilesView {
    #[serde(flatten)]
    pub(crate) counts: TreeCounts,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) paths: Option<Vec<PathView>>,
}

/// One path of the merged tree, for `--files`.
#[derive(Serialize, Clone)]
pub(crate) struct PathView {
    pub(crate) path: String,
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) mode: String,
    pub(crate) size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) hardlink_to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) elf: Option<crate::elf::ElfInfo>,
    /// 1-based layer number that wrote the path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) layer: Option<u32>,
}

/// Every path of the merged tree, for `--files`.
pub(crate) fn list_paths(tree: &FileTree) -> Vec<PathView> {
    tree.walk()
        .map(|id| {
            let n = tree.node(id);
            PathView {
                path: tree.path_of(id),
                kind: n.type_name(),
                mode: format!("{:04o}", n.mode & 0o7777),
                size: n.size,
                target: n.symlink_target().map(str::to_string),
                hardlink_to: n.hardlink_to.map(str::to_string),
                elf: n.elf.cloned(),
                layer: n.layer.map(|l| l + 1),
            }
        })
        .collect()
}

#[derive(Serialize)]
pub(crate) struct ImageView<'a> {
    pub(crate) source: &'a str,
    pub(crate) location: &'a str,
    pub(crate) name: Option<&'a str>,
    pub(crate) manifest_digest: Option<String>,
    pub(crate) manifest_media_type: Option<&'a str>,
    pub(crate) config_digest: Option<String>,
    pub(crate) platform: &'a Platform,
    pub(crate) platforms: &'a [Platform],
    pub(crate) layers: &'a [Layer],
    pub(crate) config: ConfigView,
}

#[derive(Serialize, Default)]
pub(crate) struct ConfigView {
    pub(crate) env: Vec<String>,
    pub(crate) entrypoint: Option<Vec<String>>,
    pub(crate) cmd: Option<Vec<String>>,
    pub(crate) working_dir: Option<String>,
    pub(crate) user: Option<String>,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) created: Option<String>,
}

impl<'a> InspectReport<'a> {
    pub(crate) fn new(image: &'a Image, facts: &'a Facts) -> InspectReport<'a> {
        let config = image
            .config
            .as_ref()
            .map(|c| {
                let mut view = ConfigView {
                    created: c.created().clone(),
                    ..Default::default()
                };
                if let Some(cc) = c.config() {
                    view.env = cc.env().clone().unwrap_or_default();
                    view.entrypoint = cc.entrypoint().clone();
                    view.cmd = cc.cmd().clone();
                    view.working_dir = cc.working_dir().clone().filter(|w| !w.is_empty());
                    view.user = cc.user().clone().filter(|u| !u.is_empty());
                    view.labels = cc.labels().clone().unwrap_or_default().into_iter().collect();
                }
                view
            })
            .unwrap_or_default();
        InspectReport {
            reference: &image.reference,
            image: ImageView {
                source: image.source.as_str(),
                location: &image.location,
                name: image.name.as_deref(),
                manifest_digest: image.manifest_digest.as_ref().map(|d| d.to_string()),
                manifest_media_type: image.manifest_media_type.as_deref(),
                config_digest: image.config_digest.as_ref().map(|d| d.to_string()),
                platform: &image.platform,
                platforms: &image.platforms,
                layers: &image.layers,
                config,
            },
            files: FilesView {
                counts: image.tree.counts(),
                paths: None,
            },
            facts,
            paths: None,
        }
    }

    /// Writes the text report; a line is made safe as a whole by [`line`], since nearly every
    /// part of it comes from the image.
    pub(crate) fn write_text(&self, w: &mut dyn Write) -> io::Result<()> {
        let i = &self.image;
        put(w, format!("Image      {}", self.reference))?;
        put(w, format!("Source     {} ({})", i.source, i.location))?;
        if let Some(n) = i.name {
            put(w, format!("Name       {n}"))?;
        }
        if let Some(d) = &i.manifest_digest {
            put(w, format!("Manifest   {d}"))?;
        }
        if let Some(d) = &i.config_digest {
            put(w, format!("Config     {d}"))?;
        }
        put(w, format!("Platform   {}", i.platform))?;
        if i.platforms.len() > 1 {
            let all: Vec<String> = i.platforms.iter().map(|p| p.to_string()).collect();
            put(w, format!("Platforms  {}", all.join(", ")))?;
        }
        writeln!(w)?;
        put(w, format!("Layers ({})", i.layers.len()))?;
        for (n, l) in i.layers.iter().enumerate() {
            put(
                w,
                format!(
                    "  {:>2}. {}  {}  {} stored, {} unpacked, {}{}",
                    n + 1,
                    l.digest.short(),
                    compression_word(l.compression),
                    human(l.size),
                    human(l.uncompressed_size),
                    count(l.entries, "entry", "entries"),
                    if l.from_cache {
                        "  (from the layer cache)"
                    } else {
                        ""
                    }
                ),
            )?;
            if let Some(h) = &l.history {
                let h = h.trim();
                let short: String = h.chars().take(100).collect();
                let ell = if h.chars().count() > 100 { "…" } else { "" };
                put(w, format!("      {short}{ell}"))?;
            }
        }
        let c = &i.config;
        writeln!(w)?;
        put(w, "Config".to_string())?;
        // The exec form, as a Dockerfile writes it.
        let list = |v: &Option<Vec<String>>| match v {
            Some(v) => serde_json::to_string(v).unwrap_or_default(),
            None => "(none)".to_string(),
        };
        put(w, format!("  Entrypoint  {}", list(&c.entrypoint)))?;
        put(w, format!("  Cmd         {}", list(&c.cmd)))?;
        put(
            w,
            format!("  WorkingDir  {}", c.working_dir.as_deref().unwrap_or("/")),
        )?;
        put(
            w,
            format!("  User        {}", c.user.as_deref().unwrap_or("(root)")),
        )?;
        if c.env.is_empty() {
            put(w, "  Env         (none)".to_string())?;
        } else {
            put(w, "  Env".to_string())?;
            for e in &c.env {
                put(w, format!("    {e}"))?;
            }
        }
        if !c.labels.is_empty() {
            put(w, "  Labels".to_string())?;
            for (k, v) in &c.labels {
                put(w, format!("    {k}={v}"))?;
            }
        }
        let f = &self.files.counts;
        writeln!(w)?;
        put(
            w,
            format!(
                "Files      {}: {} regular ({} ELF, {}), {}, {}, {} special; {} kept ({})",
                count(f.count, "path", "paths"),
                f.regular,
                f.elf,
                count(f.hardlinks, "hard link", "hard links"),
                count(f.directories, "folder", "folders"),
                count(f.symlinks, "symlink", "symlinks"),
                f.special,
                f.kept_files,
                human(f.kept_bytes)
            ),
        )?;
        crate::report::facts::write(w, self.facts)?;
        if let Some(paths) = &self.paths {
            // The layer column: the 1-based number and short digest of the layer that last
            // wrote the path (`-` for a tree with no layers, `dir:`).
            let layer_of = |n: Option<u32>| match n {
                Some(n) => {
                    let short = n
                        .checked_sub(1)
                        .and_then(|k| i.layers.get(k as usize))
                        .map(|l| l.digest.short())
                        .unwrap_or_default();
                    format!("{n:>2} {short:<19}")
                }
                None => format!("{:>2} {:<19}", "-", ""),
            };
            writeln!(w)?;
            put(
                w,
                format!(
                    "{:<8} {:<4} {:>10}  {:<22}  PATH",
                    "TYPE", "MODE", "SIZE", "LAYER"
                ),
            )?;
            for p in paths {
                let mut text = format!(
                    "{:<8} {} {:>10}  {}  {}",
                    p.kind,
                    p.mode,
                    p.size,
                    layer_of(p.layer),
                    p.path
                );
                if let Some(t) = &p.target {
                    text.push_str(&format!(" -> {t}"));
                }
                if let Some(t) = &p.hardlink_to {
                    text.push_str(&format!(" (hard link to {t})"));
                }
                put(w, text)?;
            }
        }
        Ok(())
    }
}

/// How a layer blob is stored, in the words of the tools that make it.
fn compression_word(c: Compression) -> &'static str {
    match c {
        Compression::None => "tar",
        Compression::Gzip => "gzip",
        Compression::Zstd => "zstd",
        Compression::Xz => "xz",
        Compression::Bzip2 => "bzip2",
    }
}

fn put(w: &mut dyn Write, text: String) -> io::Result<()> {
    writeln!(w, "{}", line(&text))
}

fn human(bytes: u64) -> String {
    match crate::units::scaled_bytes(bytes) {
        Some((v, unit)) => format!("{v:.1} {unit}"),
        None => format!("{bytes} B"),
    }
}
