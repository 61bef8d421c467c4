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
    // A marker the entry was not searched for, or searched for as declared differently then.
    let marker_missing = wanted
        .elf_markers
        .iter()
        .any(|m| !made_with.elf_markers.contains(m));
    let elf_missing = (wanted.elf_heads && !made_with.elf_heads)
        || (wanted.elf_scan && (!made_with.elf_scan || marker_missing));
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
        } else if let Some(elf) = elf.as_mut() {
            elf.scan.markers.retain(&wanted.elf_markers);
        }
        true
    })
}

#[cfg(test)]
mod tests {
    use super::super::sample::{interests, read, sample, view};
    use super::*;
    use crate::elf::marker::{ElfMarker, Find};
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

    /// Every ELF file starts with its magic: a marker every ELF of the sample has.
    static START: ElfMarker = ElfMarker {
        key: "start",
        find: Find::Label(&[(b"\x7fELF", "elf")]),
        null_when_absent: true,
    };
    /// The same marker declared otherwise (a longer needle): what it finds may differ.
    static START_CHANGED: ElfMarker = ElfMarker {
        key: "start",
        find: Find::Label(&[(b"\x7fELF\x02", "elf")]),
        null_when_absent: true,
    };

    /// A marker changed since an entry was written makes the entry miss, without a new FORMAT;
    /// a marker the entry searched for that is not wanted now is trimmed away.
    #[test]
    fn an_entry_serves_only_the_markers_it_was_searched_for_as_declared_now() {
        let limits = Limits::default();
        let tar = sample();
        let bound = crate::cache::read_bound(&limits);
        let with = |m: &'static ElfMarker| interests().scan_elf_for(&[m]);
        let written = read(&tar, &with(&START), &limits);
        assert!(written
            .entries
            .to_vec()
            .iter()
            .any(|e| e
                .elf
                .as_ref()
                .is_some_and(|e| e.scan.markers.text(&START) == Some("elf"))));
        let bytes = super::super::wire::encode(&written, &with(&START), bound)
            .unwrap()
            .unwrap();
        let back = |wanted: &Interests| {
            let (mut diff, made_with) =
                super::super::wire::decode(&bytes, &written.diff_id, bound, &wanted.elf_markers).unwrap();
            fit(&mut diff.entries, &made_with, wanted, &limits).then_some(diff)
        };
        let same = back(&with(&START)).expect("the same marker");
        assert_eq!(view(&same), view(&written));
        assert_ne!(START.fingerprint(), START_CHANGED.fingerprint());
        assert!(back(&with(&START_CHANGED)).is_none(), "a changed marker misses");
        let fewer = back(&interests()).expect("fewer markers");
        assert_eq!(view(&fewer), view(&read(&tar, &interests(), &limits)));
    }
}
