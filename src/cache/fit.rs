//! Whether a cache entry can stand for a read of its layer: an entry records the interests it
//! was read with, and serves a read only when it holds everything that read would keep,
//! trimmed to exactly that.

use crate::elf::ElfScan;
use crate::tree::interest::SCRIPT_CAP;
use crate::tree::{Entries, EntryKind, Interests, Limits};

/// Whether entries read with `made_with` hold everything a read with `wanted` under `limits`
/// would keep; when they do, they are trimmed to exactly what that read would keep, so a cached
/// layer and a read layer give the same tree. Mirrors `probe_file` in the layer reader: a file
/// is kept to its keep cap, else a file starting with `#!` to the script cap; ELF facts come
/// with the flags.
pub(super) fn fit(entries: &mut Entries, made_with: &Interests, wanted: &Interests, limits: &Limits) -> bool {
    let per_file = |c: u64| c.min(limits.max_kept_bytes_per_file);
    let elf_missing = (wanted.elf_heads && !made_with.elf_heads) || (wanted.elf_scan && !made_with.elf_scan);
    entries.all_mut(|e, content, elf| {
        if e.kind != EntryKind::File || e.size == 0 {
            // The reader never looks inside these.
            return true;
        }
        if elf_missing {
            return false;
        }
        let parts: Vec<&str> = e.parts().collect();
        let cap = wanted.keep_cap(&parts).map(per_file);
        let script_cap = wanted.wants_script(&parts).then(|| per_file(SCRIPT_CAP));
        let need = match &*content {
            // Either nothing wanted it, or it was a script pattern and the file does not start
            // with `#!`: only then is the absence an answer.
            None => {
                if cap.is_some() || (script_cap.is_some() && !made_with.wants_script(&parts)) {
                    return false;
                }
                None
            }
            Some(c) => {
                let known_start = c.bytes.len() >= 2 || !c.truncated;
                match (cap, script_cap) {
                    (Some(cap), _) => Some(cap),
                    (None, Some(_)) if !known_start => return false,
                    (None, Some(s)) if c.bytes.starts_with(b"#!") => Some(s),
                    _ => None,
                }
            }
        };
        match (need, content.as_mut()) {
            (None, _) => *content = None,
            (Some(need), Some(c)) => {
                if c.truncated && (c.bytes.len() as u64) < need {
                    // Cut shorter than this read wants.
                    return false;
                }
                c.bytes.truncate(usize::try_from(need).unwrap_or(usize::MAX));
                c.truncated = (c.bytes.len() as u64) < e.size;
            }
            (Some(_), None) => return false,
        }
        if !wanted.elf_heads {
            *elf = None;
        } else if !wanted.elf_scan {
            if let Some(elf) = elf.as_mut() {
                elf.scan = ElfScan::default();
            }
        }
        true
    })
}

#[cfg(test)]
mod tests {
    use super::super::sample::{interests, read, sample, view};
    use super::*;
    use crate::tree::interest::PathPattern;
    use crate::tree::LayerDiff;

    #[test]
    fn a_fitting_entry_gives_exactly_what_a_read_gives() {
        let limits = Limits::default();
        let tar = sample();
        let base = interests();
        // What an image whose Cmd is /opt/app/run adds.
        let wide = base.clone().script("/opt/app/run");
        assert!(wide.wants_script(&["opt", "app", "run"]));
        assert!(!base.wants_script(&["opt", "app", "run"]));

        // Read for more than is wanted now: usable, trimmed to what a read would keep.
        let mut entries = read(&tar, &wide, &limits).entries;
        assert!(fit(&mut entries, &wide, &base, &limits));
        let direct = read(&tar, &base, &limits);
        let trimmed = LayerDiff {
            entries,
            ..direct.clone()
        };
        assert_eq!(view(&trimmed), view(&direct));

        // Read for less: /opt/app/run is a script the entry never looked at.
        let mut entries = read(&tar, &base, &limits).entries;
        assert!(!fit(&mut entries, &base, &wide, &limits));

        // A pattern that matches a file which is not a script: the absence is an answer.
        let data_only = Interests {
            scripts: vec![PathPattern::new("/opt/app/data")],
            ..base.clone()
        };
        let mut entries = read(&tar, &data_only, &limits).entries;
        assert!(fit(&mut entries, &data_only, &data_only, &limits));

        // Kept with a smaller cap than wanted now (a lower per-file limit): not enough.
        let small = Limits {
            max_kept_bytes_per_file: 100,
            ..Limits::default()
        };
        let mut entries = read(&tar, &base, &small).entries;
        assert!(!fit(&mut entries, &base, &base, &limits));
        // The other way round it fits, and matches a read under the small limit.
        let mut entries = read(&tar, &base, &limits).entries;
        assert!(fit(&mut entries, &base, &base, &small));
        let direct = read(&tar, &base, &small);
        assert_eq!(
            view(&LayerDiff {
                entries,
                ..direct.clone()
            }),
            view(&direct)
        );

        // A larger keep cap for a file that was kept whole before is still whole.
        let bigger = base.clone().keep("/etc/os-release", 1 << 20);
        let mut entries = read(&tar, &base, &limits).entries;
        assert!(fit(&mut entries, &base, &bigger, &limits));

        // ELF facts: an entry without them cannot serve a read that wants them.
        let no_elf = Interests {
            elf_heads: false,
            elf_scan: false,
            ..base.clone()
        };
        let mut entries = read(&tar, &no_elf, &limits).entries;
        assert!(!fit(&mut entries, &no_elf, &base, &limits));
        let mut entries = read(&tar, &base, &limits).entries;
        assert!(fit(&mut entries, &base, &no_elf, &limits));
        assert!(entries.to_vec().iter().all(|e| e.elf.is_none()));
    }
}
