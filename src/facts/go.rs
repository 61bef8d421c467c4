//! Go programs the container may run: the ELF executables on the entrypoint's path and in the
//! `PATH` folders that carry Go build info (`go version -m`): the Go version, the
//! `CGO_ENABLED` build setting and the modules they were built from. The build info is found
//! by the layer reader while each file streams by ([`crate::elf::go`]), since it often lies
//! past the prefix memlint keeps of an ELF file.

use super::entrypoint::{Entrypoint, DEFAULT_PATH};
use super::Env;
use crate::elf::go::GoModule;
use crate::tree::{FileTree, Interests, NodeId, NodeKind};
use serde::Serialize;

/// Go programs listed at most; an image with more lists the first ones found.
const MAX_BINARIES: usize = 256;

/// One Go program.
#[derive(Clone, Debug, Serialize)]
pub struct GoBinary {
    /// Its path in the image (links followed).
    pub path: String,
    /// `go1.22.1`; `null` for a program built by Go before 1.18 (whose build info memlint
    /// does not decode).
    pub go_version: Option<String>,
    /// The `CGO_ENABLED` build setting; `null` when the build info does not record it.
    pub cgo: Option<bool>,
    /// The main module's path.
    pub main_module: Option<String>,
    /// The module dependencies (`dep` lines), with their `=>` replacements.
    pub deps: Vec<GoModule>,
    /// False when the build info was longer than memlint keeps, so `deps` may be missing some.
    pub deps_complete: bool,
    /// Its DT_NEEDED libraries.
    pub needed: Vec<String>,
    /// The entrypoint runs it (it is the final program or a step on the way).
    pub on_entrypoint: bool,
}

impl GoBinary {
    /// The module paths the program was built from, its main module first.
    pub fn modules(&self) -> impl Iterator<Item = &str> {
        self.main_module
            .as_deref()
            .into_iter()
            .chain(self.deps.iter().map(|d| d.path.as_str()))
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct GoFacts {
    pub binaries: Vec<GoBinary>,
}

impl GoFacts {
    pub fn is_empty(&self) -> bool {
        self.binaries.is_empty()
    }
}

/// What [`derive`] reads: the build info and dynamic section the ELF scan records.
pub fn interests() -> Interests {
    Interests::default().scan_elf()
}

/// The environment this module reads, in one place.
struct EnvInputs<'a> {
    path: &'a str,
}

fn env_inputs(env: &Env) -> EnvInputs<'_> {
    EnvInputs {
        path: env.get("PATH").unwrap_or(DEFAULT_PATH),
    }
}

pub fn derive(tree: &FileTree, env: &Env, entry: &Entrypoint) -> GoFacts {
    let inputs = env_inputs(env);
    let mut out = GoFacts::default();
    let mut seen = std::collections::BTreeSet::new();
    let on_path = entry
        .steps
        .iter()
        .filter_map(|s| s.path.as_deref())
        .chain(entry.program.as_deref());
    let mut candidates: Vec<(NodeId, bool)> = on_path
        .filter_map(|p| tree.lookup(p).ok().flatten())
        .map(|id| (id, true))
        .collect();
    for dir in inputs.path.split(':').filter(|d| d.starts_with('/')) {
        let Some(dir_id) = tree.lookup(dir).ok().flatten() else {
            continue;
        };
        let NodeKind::Dir(children) = &tree.node(dir_id).kind else {
            continue;
        };
        for name in children.keys() {
            let path = format!("{}/{name}", dir.trim_end_matches('/'));
            if let Some(id) = tree.lookup(&path).ok().flatten() {
                candidates.push((id, false));
            }
        }
    }
    for (id, on_entrypoint) in candidates {
        if out.binaries.len() >= MAX_BINARIES {
            break;
        }
        if !seen.insert(id) || !tree.node(id).is_file() {
            continue;
        }
        let Some(elf) = tree.elf(id) else { continue };
        let Some(go) = elf.scan.go.as_deref() else {
            continue;
        };
        out.binaries.push(GoBinary {
            path: tree.path_of(id),
            go_version: go.go_version.clone(),
            cgo: go.cgo,
            main_module: go.main_module.as_ref().map(|m| m.path.clone()),
            deps: go.deps.clone(),
            deps_complete: go.complete,
            needed: elf
                .scan
                .dynamic
                .as_ref()
                .map(|d| d.needed.clone())
                .unwrap_or_default(),
            on_entrypoint,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::go::GoBuildInfo;
    use crate::elf::{ElfClass, ElfInfo};
    use crate::facts::loader::tests::elf;
    use crate::tree::{EntryKind, LayerEntry};

    fn go_binary(path: &str, cgo: bool) -> LayerEntry {
        let mut info: ElfInfo = elf(62, ElfClass::Elf64, None, &["libc.so.6"], &[], &[]);
        info.scan.go = Some(Box::new(GoBuildInfo {
            go_version: Some("go1.19.8".into()),
            cgo: Some(cgo),
            deps: vec![GoModule {
                path: "github.com/mattn/go-sqlite3".into(),
                version: "v1.14.22".into(),
                replace: None,
            }],
            complete: true,
            ..GoBuildInfo::default()
        }));
        LayerEntry {
            size: 4096,
            mode: 0o755,
            elf: Some(Box::new(info)),
            ..LayerEntry::new(path, EntryKind::File)
        }
    }

    #[test]
    fn lists_go_programs_on_the_entrypoint_and_in_path() {
        let tree = FileTree::from_entries(vec![
            go_binary("app/server", true),
            go_binary("usr/local/bin/tool", false),
            go_binary("opt/elsewhere/other", true),
            LayerEntry::new("usr/local/bin/plain", EntryKind::File).with_text("x"),
        ])
        .unwrap()
        .keeping(interests());
        let entry = Entrypoint {
            program: Some("/app/server".into()),
            ..Entrypoint::default()
        };
        let env = Env::from_pairs(["PATH=/usr/local/bin:/usr/bin"]);
        let f = derive(&tree, &env, &entry);
        let paths: Vec<(&str, bool)> = f
            .binaries
            .iter()
            .map(|b| (b.path.as_str(), b.on_entrypoint))
            .collect();
        assert_eq!(paths, [("/app/server", true), ("/usr/local/bin/tool", false)]);
        assert_eq!(f.binaries[0].cgo, Some(true));
        assert_eq!(f.binaries[0].needed, ["libc.so.6"]);
        assert_eq!(
            f.binaries[0].modules().collect::<Vec<_>>(),
            ["github.com/mattn/go-sqlite3"]
        );
    }
}
