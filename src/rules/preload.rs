//! What the preload rules share: where a preload is listed, and where its finding belongs.

use crate::facts::preload::{Preload, PreloadSource};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence};

/// The `ENV` that sets `LD_PRELOAD`.
pub const ENV_ANCHOR: Anchor = Anchor::Env(&["LD_PRELOAD"]);

/// Where a finding about preload `p` belongs: the `ENV LD_PRELOAD` line, or the instruction
/// that writes /etc/ld.so.preload.
pub fn anchor(p: &Preload) -> Anchor {
    match p.source {
        PreloadSource::Env => ENV_ANCHOR,
        PreloadSource::LdSoPreload => Anchor::Installs(&["ld.so.preload"]),
    }
}

/// Where preload `p` is listed: the config's `LD_PRELOAD` entry (which names every entry, so it
/// names no path of its own), or /etc/ld.so.preload and the entry.
pub fn listed(f: &Facts, p: &Preload) -> Evidence {
    match p.source {
        PreloadSource::Env => Evidence::plain(f.env.entry("LD_PRELOAD").unwrap_or_default()),
        PreloadSource::LdSoPreload => Evidence::naming(
            format!("/etc/ld.so.preload lists {}", p.entry),
            ["/etc/ld.so.preload", p.entry.as_str()],
        ),
    }
}
