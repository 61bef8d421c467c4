//! Puts each finding on a line: the Dockerfile instruction its rule names as the finding's
//! [`Anchor`] (an `ENV` key, the instruction that installs something, `CMD`/`ENTRYPOINT`), or
//! the target stage's `FROM` when there is none; and says in the evidence which layer brought
//! the image paths the finding names (from the image history).

use crate::dockerfile::{env_keys, Dockerfile, Instruction};
use crate::finding::{Anchor, Evidence, Finding, Location};
use crate::image::Image;

/// The Dockerfile a report maps onto.
pub struct DockerfileContext<'a> {
    pub dockerfile: &'a Dockerfile,
    /// Repository-relative path (SARIF artifact URI).
    pub path: &'a str,
    /// The stages that make up the target image, base first.
    pub chain: Vec<usize>,
    pub target: usize,
}

impl<'a> DockerfileContext<'a> {
    pub fn new(
        dockerfile: &'a Dockerfile,
        path: &'a str,
        target: Option<&str>,
    ) -> Option<DockerfileContext<'a>> {
        let t = dockerfile.target_stage(target)?;
        Some(DockerfileContext {
            chain: dockerfile.chain(t),
            dockerfile,
            path,
            target: t,
        })
    }

    fn last(&self, pred: impl Fn(&Instruction) -> bool) -> Option<&'a Instruction> {
        let chain = &self.chain;
        self.dockerfile
            .instructions
            .iter()
            .rev()
            .filter(|i| i.stage.is_some_and(|s| chain.contains(&s)))
            .find(|i| pred(i))
    }

    fn env_setting(&self, key: &str) -> Option<&'a Instruction> {
        self.last(|i| i.keyword == "ENV" && env_keys(&i.args).iter().any(|(k, _)| k == key))
    }

    fn from(&self) -> Option<&'a Instruction> {
        self.dockerfile.from_of(self.target)
    }

    /// The instruction a finding belongs to: its anchor, else the target stage's `FROM`.
    pub fn anchor(&self, anchor: Anchor) -> Option<&'a Instruction> {
        let found = match anchor {
            Anchor::Env(keys) => keys.iter().find_map(|k| self.env_setting(k)),
            Anchor::Installs(words) => self.last(|i| {
                matches!(i.keyword.as_str(), "RUN" | "COPY" | "ADD")
                    && words.iter().any(|w| i.args.contains(w))
            }),
            Anchor::Command => self.last(|i| i.keyword == "CMD" || i.keyword == "ENTRYPOINT"),
            Anchor::From => None,
        };
        found.or_else(|| self.from())
    }
}

/// Sets each finding's location: its Dockerfile line, or the nominal `artifact:1`.
pub fn locate(findings: &mut [Finding], ctx: Option<&DockerfileContext>, artifact: &str) {
    for f in findings.iter_mut() {
        f.location = Some(match ctx.and_then(|c| c.anchor(f.anchor).map(|i| (c, i))) {
            Some((c, i)) => Location {
                path: c.path.to_string(),
                line: i.line,
                end_line: i.end_line,
                instruction: Some(format!("{} {}", i.keyword, i.args.lines().next().unwrap_or(""))),
            },
            None => Location {
                path: artifact.to_string(),
                line: 1,
                end_line: 1,
                instruction: None,
            },
        });
    }
}

/// Adds "layer N (`created_by`) brought PATH" for the first three image paths a finding names
/// that a layer brought.
pub fn provenance(findings: &mut [Finding], image: &Image) {
    for f in findings.iter_mut() {
        let mut added: Vec<Evidence> = Vec::new();
        for path in f.paths() {
            if added.len() >= 3 || added.iter().any(|e| e.paths().iter().any(|p| p == path)) {
                continue;
            }
            let Ok(Some(id)) = image.tree.lookup_nofollow(path) else {
                continue;
            };
            let Some(layer) = image.tree.node(id).layer else {
                continue;
            };
            let Some(l) = image.layers.get(layer as usize) else {
                continue;
            };
            let how = l
                .history
                .as_deref()
                .map(|h| format!(" (`{}`)", short(h)))
                .unwrap_or_default();
            added.push(Evidence::naming(
                format!("layer {}{how} brought {path}", layer + 1),
                [path],
            ));
        }
        f.evidence.extend(added);
    }
}

fn short(history: &str) -> String {
    let h = history.trim();
    let h = h.strip_prefix("/bin/sh -c ").unwrap_or(h);
    let h = h.strip_prefix("#(nop) ").unwrap_or(h).trim();
    let h = h.trim_end_matches("# buildkit").trim();
    if h.chars().count() > 80 {
        format!("{}…", h.chars().take(80).collect::<String>())
    } else {
        h.to_string()
    }
}
