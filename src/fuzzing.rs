//! What the fuzz targets in `fuzz/` run, one function per target, each taking the fuzzer's bytes.
//!
//! The targets live in their own crate (cargo-fuzz), so whatever they call must be `pub`; keeping
//! their bodies here lets the reader, the ELF scanner, the parsers and the facts stay
//! `pub(crate)` (the crate's boundary, see `lib.rs`), and `cargo clippy --all-targets` checks
//! this code on every build although CI never builds the fuzz crate. `tests/` runs each function
//! once on a seed, so a change that breaks a target fails there too.

use crate::arch::Arch;
use crate::elf::{ElfHead, ElfScanner, HEAD_LEN};
use crate::facts::go::buildinfo::{self, MAGIC, MAX_DEPS};
use crate::facts::ldcache::{accepts, LdCache};
use crate::image::Image;
use crate::platform::Platform;
use crate::reference::Reference;
use crate::tree::layer::{read_layer_in, Budget, GzipCrc};
use crate::tree::{Content, EntryKind, FileTree, LayerEntry, Limits};

/// A file's bytes through the ELF head parser and the streaming scanner, fed in chunks of a size
/// the input chooses, as the layer reader feeds it.
pub fn elf(data: &[u8]) {
    let head = &data[..data.len().min(HEAD_LEN)];
    let Some(parsed) = ElfHead::parse(head) else {
        return;
    };
    // Every marker the facts declare, as a lint's read looks for them.
    let markers = crate::facts::interests().elf_markers;
    let mut scanner = ElfScanner::new(head, &parsed, &markers);
    // Chunks of 64 bytes to 16 KiB: markers and the dynamic section cut at every kind of place.
    let step = 64 + data.last().copied().unwrap_or(0) as usize * 64;
    for chunk in data.chunks(step) {
        scanner.feed(chunk);
    }
    let _ = scanner.finish();
}

/// Bytes through the Go build info decoder, as a blob starting at the magic (what the layer
/// reader holds of one). Panics if the decoder keeps more modules than its bound.
pub fn go_buildinfo(data: &[u8]) {
    let _ = buildinfo::parse(data);
    let mut blob = MAGIC.to_vec();
    blob.extend_from_slice(data);
    if let Some(info) = buildinfo::parse(&blob) {
        assert!(info.deps.len() <= MAX_DEPS, "more Go modules than MAX_DEPS kept");
    }
}

/// The files the facts read as JSON or text.
const JSON_FACT_FILES: &[&str] = &[
    "app/node_modules/sharp/package.json",
    "app/node_modules/@img/sharp-linux-x64/package.json",
    "app/node_modules/@img/sharp-libvips-linux-x64/package.json",
    "app/node_modules/next/package.json",
    "app/.next/required-server-files.json",
    "app/App.deps.json",
    "app/App.runtimeconfig.json",
    "app/appsettings.json",
    "app/appsettings.Production.json",
];
const TEXT_FACT_FILES: &[&str] = &[
    "etc/os-release",
    "var/lib/dpkg/status",
    "usr/local/include/node/node_version.h",
];

const JSON_FACTS_CONFIG: &str = r#"{
  "architecture": "amd64", "os": "linux",
  "config": {
    "Env": ["PATH=/usr/local/bin:/usr/bin:/bin", "NODE_OPTIONS=--max-old-space-size=512"],
    "Entrypoint": ["node"], "Cmd": ["server.js"], "WorkingDir": "/app"
  },
  "rootfs": {"type": "layers", "diff_ids": []}
}"#;

fn fuzz_entry(path: &str, kind: EntryKind, content: Option<Content>) -> LayerEntry {
    LayerEntry {
        path: path.split('/').map(str::to_string).collect(),
        kind,
        mode: 0o755,
        uid: 0,
        gid: 0,
        size: content.as_ref().map_or(0, |c| c.bytes.len() as u64),
        content,
        elf: None,
    }
}

/// Hostile contents for every file the facts read as JSON or text: package.json (sharp, Next.js,
/// Node.js addons), .deps.json, .runtimeconfig.json, appsettings.json,
/// required-server-files.json, os-release and the dpkg status database; then every fact is
/// derived and serialised, as `inspect` and `lint` do. The first byte says whether the contents
/// are marked truncated (longer than their cap).
pub fn json_facts(data: &[u8]) {
    let Some((&flags, body)) = data.split_first() else {
        return;
    };
    let content = Content {
        bytes: body.to_vec(),
        truncated: flags & 1 == 1,
    };
    let mut entries: Vec<LayerEntry> = JSON_FACT_FILES
        .iter()
        .chain(TEXT_FACT_FILES)
        .map(|p| fuzz_entry(p, EntryKind::File, Some(content.clone())))
        .collect();
    for path in [
        "app/server.js",
        "usr/local/bin/node",
        "app/node_modules/@img/sharp-linux-x64/lib/sharp-linux-x64.node",
    ] {
        entries.push(fuzz_entry(path, EntryKind::File, None));
    }
    let Ok(config) = serde_json::from_str(JSON_FACTS_CONFIG) else {
        return;
    };
    // Kept for what the facts declare, as a real read records it.
    let kept_for = crate::facts::interests().union(crate::facts::interests_for(&config));
    let Ok(tree) = FileTree::from_entries(entries) else {
        return;
    };
    let tree = tree.keeping(kept_for);
    let platform = Platform::new("linux", "amd64", None);
    let image = Image::unlayered("fuzz", "fuzz", platform, Some(config), tree);
    let facts = crate::facts::derive(&image);
    let _ = serde_json::to_string(&facts);
}

/// /etc/ld.so.cache bytes through the parser, then lookups as the loader model does.
pub fn ldcache(data: &[u8]) {
    if let Ok(cache) = LdCache::parse(data) {
        let ok = accepts(Some(Arch::Amd64));
        let _ = cache.lookup("libc.so.6", &ok).count();
        let names: Vec<String> = cache.entries.iter().take(16).map(|e| e.soname.clone()).collect();
        for n in &names {
            let _ = cache.lookup(n, &ok).count();
        }
    }
}

/// Image reference text through the reference parser.
pub fn reference(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        // The parser checks which prefixes exist on disk: keep that to a sane length.
        if text.len() <= 1024 {
            if let Ok(r) = Reference::parse(text) {
                let _ = format!("{r:?}");
            }
        }
    }
}

/// A layer blob (plain, gzip or zstd tar) through the streaming reader, then merged twice onto
/// a tree (so that its whiteouts meet what it wrote), then walked and looked up.
pub fn tar_merge(data: &[u8]) {
    // Small limits keep each run fast; the limits themselves are part of what is tested.
    let limits = Limits {
        max_entries_per_layer: 4096,
        max_layer_bytes: 64 << 20,
        max_kept_bytes_per_layer: 8 << 20,
        max_kept_bytes_total: 8 << 20,
        max_metadata_bytes: 64 << 20,
        ..Limits::default()
    };
    let interests = crate::facts::interests();
    // Both gzip paths: with the CRC-32, and without it as a digest-checked blob is read.
    let crc = if data.len().is_multiple_of(2) {
        GzipCrc::Check
    } else {
        GzipCrc::SkipDigestChecked
    };
    let Ok(diff) = read_layer_in(data, &interests, &limits, &Budget::new(), crc) else {
        return;
    };
    let mut tree = FileTree::with_limits(&limits).keeping(interests);
    let again = diff.clone();
    if tree.apply(diff, 0).is_ok() {
        let _ = tree.apply(again, 1);
    }
    let _ = tree.counts();
    let ids: Vec<_> = tree.walk().take(2000).collect();
    for id in ids {
        let path = tree.path_of(id);
        let _ = tree.lookup(&path);
        let _ = tree.lookup_nofollow(&path);
        let _ = tree.removed_by(&path);
        // Only where an interest asked: any other path is a caller's bug, caught in debug.
        if tree.keeps(&path) {
            let _ = tree.contents(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    //! Each target once on a seed that reaches past its first check, so a change that breaks a
    //! target's path fails here (CI does not build the fuzz crate).

    #[test]
    fn every_target_runs_on_a_seed() {
        super::elf(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0\x3e\0");
        super::go_buildinfo(b"\x08\x02go1.22.1");
        super::json_facts(b"\0{\"name\":\"sharp\",\"version\":\"0.33.5\"}");
        super::ldcache(b"glibc-ld.so.cache1.1");
        super::reference(b"oci-dir:/nonexistent/fuzz:tag");
        super::tar_merge(&[0u8; 1024]);
    }
}
