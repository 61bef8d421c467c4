//! Puts each finding on a line: the Dockerfile instruction that caused it or should carry its
//! fix (the `ENV LD_PRELOAD` line for preload findings, the final stage's `FROM` for allocator
//! findings, `ENV NODE_OPTIONS` or `CMD` for Node flags…), and says in the evidence which layer
//! brought the files the finding names (from the image history).

use crate::dockerfile::{Dockerfile, Instruction};
use crate::facts::preload::PreloadSource;
use crate::facts::Facts;
use crate::finding::{Finding, Location};
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
        self.last(|i| i.keyword == "ENV" && i.env_keys().iter().any(|(k, _)| k == key))
    }

    fn from(&self) -> Option<&'a Instruction> {
        self.dockerfile.from_of(self.target)
    }

    /// The instruction a finding belongs to.
    pub fn anchor(&self, f: &Finding, facts: &Facts) -> Option<&'a Instruction> {
        let mentions = |words: &'static [&'static str]| {
            move |i: &Instruction| {
                (i.keyword == "RUN" || i.keyword == "COPY" || i.keyword == "ADD")
                    && words.iter().any(|w| i.args.contains(w))
            }
        };
        let found = match f.rule {
            "ld-preload-missing" | "ld-preload-incompatible" => {
                let from_file = facts.preloads.iter().any(|p| {
                    p.source == PreloadSource::LdSoPreload && f.message.contains(&format!("`{}`", p.entry))
                });
                if from_file {
                    self.last(mentions(&["ld.so.preload"]))
                } else {
                    self.env_setting("LD_PRELOAD")
                }
            }
            "jemalloc-not-preloaded" => {
                self.last(mentions(&["jemalloc", "tcmalloc", "mimalloc", "gperftools"]))
            }
            "sharp-glibc-allocator" | "dotnet-glibc-allocator" => self
                .env_setting("MALLOC_ARENA_MAX")
                .or_else(|| self.env_setting("GLIBC_TUNABLES")),
            "npgsql-gssapi-missing" => self.env_setting("PGGSSENCMODE"),
            "sharp-platform-mismatch" => self.last(mentions(&["npm ", "yarn ", "pnpm ", "node_modules"])),
            "node-semi-space" => {
                let from_options = facts
                    .node
                    .as_ref()
                    .and_then(|n| n.max_old_space_size.as_ref())
                    .is_some_and(|o| o.source == "NODE_OPTIONS");
                if from_options {
                    self.env_setting("NODE_OPTIONS")
                } else {
                    self.last(|i| i.keyword == "CMD" || i.keyword == "ENTRYPOINT")
                }
            }
            "next-image-cache-ttl" | "next-image-disk-cache" => self.last(mentions(&[".next", "next build"])),
            _ => None,
        };
        found.or_else(|| self.from())
    }
}

/// Sets each finding's location: its Dockerfile line, or the nominal `artifact:1`.
pub fn locate(findings: &mut [Finding], facts: &Facts, ctx: Option<&DockerfileContext>, artifact: &str) {
    for f in findings.iter_mut() {
        f.location = Some(match ctx.and_then(|c| c.anchor(f, facts).map(|i| (c, i))) {
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

/// Adds "layer N (`created_by`) brought PATH" for the image paths a finding's evidence names.
pub fn provenance(findings: &mut [Finding], image: &Image) {
    for f in findings.iter_mut() {
        let mut added = Vec::new();
        for e in &f.evidence {
            for path in e
                .split([' ', ',', '(', ')', '`', ';'])
                .filter(|w| w.starts_with('/') && w.len() > 1)
            {
                let path = path.trim_end_matches([':', '.']);
                if added.iter().any(|(p, _): &(String, String)| p == path) || added.len() >= 3 {
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
                added.push((
                    path.to_string(),
                    format!("layer {}{how} brought {path}", layer + 1),
                ));
            }
        }
        f.evidence.extend(added.into_iter().map(|(_, e)| e));
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
