//! What the preload rules share: where a preload is listed, and where its finding belongs.

use crate::facts::preload::{Preload, PreloadSource};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence};

/// The `ENV` that sets `LD_PRELOAD`.
pub(crate) const ENV_ANCHOR: Anchor = Anchor::Env(&["LD_PRELOAD"]);

/// Where a finding about preload `p` belongs: the `ENV LD_PRELOAD` line, or the instruction
/// that writes /etc/ld.so.preload.
pub(crate) fn anchor(p: &Preload) -> Anchor {
    match p.source {
        PreloadSource::Env => ENV_ANCHOR,
        PreloadSource::LdSoPreload => Anchor::Installs(&["ld.so.preload"]),
        // The script is what the ENTRYPOINT runs.
        PreloadSource::Script => Anchor::Command,
    }
}

/// The longest `LD_PRELOAD` value a finding quotes, or rewrites in its fix, whole. Each entry
/// has its own finding, so quoting a longer value in each would make a report quadratic in the
/// number of entries (5,000 entries fit in a 35 KB config): past this, findings quote their
/// own entry only.
pub(crate) const QUOTED_VALUE_MAX: usize = 256;

/// Where preload `p` is listed: the config's `LD_PRELOAD` entry (whole when it is short; it
/// names every entry, so it names no path of its own), or /etc/ld.so.preload and the entry.
pub(crate) fn listed(f: &Facts, p: &Preload) -> Evidence {
    match p.source {
        PreloadSource::Env => match f.env.get("LD_PRELOAD") {
            Some(v) if v.len() > QUOTED_VALUE_MAX => Evidence::plain(format!(
                "LD_PRELOAD lists {} (the whole value, {} bytes, is too long to quote)",
                p.entry,
                v.len()
            )),
            _ => Evidence::plain(f.env.entry("LD_PRELOAD").unwrap_or_default()),
        },
        PreloadSource::LdSoPreload => Evidence::naming(
            format!("/etc/ld.so.preload lists {}", p.entry),
            ["/etc/ld.so.preload", p.entry.as_str()],
        ),
        PreloadSource::Script => {
            let script = p.script.as_deref().unwrap_or("a script");
            let line = p.line.unwrap_or(0);
            let text = match f.env.var("LD_PRELOAD") {
                Some(v) if v.text.len() <= QUOTED_VALUE_MAX => format!("`{}`", v.text.trim()),
                _ => format!("LD_PRELOAD listing {}", p.entry),
            };
            Evidence::naming(format!("{script} line {line} exports {text}"), [script])
        }
    }
}
