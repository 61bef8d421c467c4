//! Hostile contents for every file the facts read as JSON or text: package.json (sharp, Next.js,
//! Node.js addons), .deps.json, .runtimeconfig.json, appsettings.json,
//! required-server-files.json, os-release and the dpkg status database; then every fact is
//! derived and serialised, as `inspect` and `lint` do.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memlint::image::Image;
use memlint::platform::Platform;
use memlint::tree::{Content, EntryKind, FileTree, LayerEntry};

const JSON_FILES: &[&str] = &[
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
const TEXT_FILES: &[&str] = &[
    "etc/os-release",
    "var/lib/dpkg/status",
    "usr/local/include/node/node_version.h",
];

const CONFIG: &str = r#"{
  "architecture": "amd64", "os": "linux",
  "config": {
    "Env": ["PATH=/usr/local/bin:/usr/bin:/bin", "NODE_OPTIONS=--max-old-space-size=512"],
    "Entrypoint": ["node"], "Cmd": ["server.js"], "WorkingDir": "/app"
  },
  "rootfs": {"type": "layers", "diff_ids": []}
}"#;

fn entry(path: &str, kind: EntryKind, content: Option<Content>) -> LayerEntry {
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

fuzz_target!(|data: &[u8]| {
    // The first byte says whether the contents are marked truncated (longer than their cap).
    let Some((&flags, body)) = data.split_first() else {
        return;
    };
    let content = Content {
        bytes: body.to_vec(),
        truncated: flags & 1 == 1,
    };
    let mut entries: Vec<LayerEntry> = JSON_FILES
        .iter()
        .chain(TEXT_FILES)
        .map(|p| entry(p, EntryKind::File, Some(content.clone())))
        .collect();
    entries.push(entry("app/server.js", EntryKind::File, None));
    entries.push(entry("usr/local/bin/node", EntryKind::File, None));
    entries.push(entry(
        "app/node_modules/@img/sharp-linux-x64/lib/sharp-linux-x64.node",
        EntryKind::File,
        None,
    ));
    let Ok(config) = serde_json::from_str(CONFIG) else {
        return;
    };
    // Kept for what the facts declare, as a real read records it.
    let kept_for = memlint::facts::interests().union(memlint::facts::interests_for(&config));
    let Ok(tree) = FileTree::from_entries(entries) else {
        return;
    };
    let tree = tree.keeping(kept_for);
    let platform = Platform::new("linux", "amd64", None);
    let image = Image::unlayered("fuzz", "fuzz", platform, Some(config), tree);
    let facts = memlint::facts::derive(&image);
    let _ = serde_json::to_string(&facts);
});
