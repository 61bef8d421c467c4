//! Puts each finding on a line: the Dockerfile instruction its rule names as the finding's
//! [`Anchor`] (an `ENV` key, the instruction that installs something, `CMD`/`ENTRYPOINT`), or
//! the target stage's `FROM` when there is none; with `--k8s`, the line of the Kubernetes
//! manifest the anchor names ([`in_manifest`]); and says in the evidence which layer brought
//! the image paths the finding names (from the image history).

use crate::dockerfile::{Dockerfile, Instruction};
use crate::finding::{Anchor, Evidence, Finding, Location};
use crate::image::Image;
use crate::k8s::Container;

/// The Dockerfile a report maps onto.
pub(crate) struct DockerfileContext<'a> {
    pub(crate) dockerfile: &'a Dockerfile,
    /// Repository-relative path (SARIF artifact URI).
    pub(crate) path: &'a str,
    /// The stages that make up the target image, base first.
    pub(crate) chain: Vec<usize>,
    pub(crate) target: usize,
}

impl<'a> DockerfileContext<'a> {
    pub(crate) fn new(
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
        self.dockerfile.stage_from(self.target)
    }

    /// The instruction a finding belongs to: its anchor, else the target stage's `FROM`.
    pub(crate) fn anchor(&self, anchor: Anchor) -> Option<&'a Instruction> {
        let found = match anchor {
            Anchor::Env(keys) => keys.iter().find_map(|k| self.env_setting(k)),
            Anchor::Installs(words) => self.last(|i| {
                matches!(i.keyword.as_str(), "RUN" | "COPY" | "ADD")
                    && words.iter().any(|w| i.args.contains(w))
            }),
            Anchor::Command => self.last(|i| i.keyword == "CMD" || i.keyword == "ENTRYPOINT"),
            Anchor::From | Anchor::MemoryLimit | Anchor::Container | Anchor::Volume(_) => None,
        };
        found.or_else(|| self.from())
    }
}

/// Sets each finding's location: its Dockerfile line, or the nominal `artifact:1`.
pub(crate) fn locate(findings: &mut [Finding], ctx: Option<&DockerfileContext>, artifact: &str) {
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

/// Puts findings on the lines of container `c`'s manifest at `manifest_path`
/// (repository-relative) that its context decides: a memory limit on `limits.memory` (else the
/// `image:` line), an env key on the last entry that sets it, the command on `args` (else
/// `command`), the container on its `image:` line. A finding the manifest does not decide keeps
/// its Dockerfile line when a Dockerfile was given, else goes on the container's `image:` line.
pub(crate) fn in_manifest(
    findings: &mut [Finding],
    c: &Container,
    manifest_path: &str,
    dockerfile_given: bool,
) {
    for f in findings.iter_mut() {
        let image_line = (c.workload.line, format!("image: {}", c.image));
        let join = match f.anchor {
            Anchor::MemoryLimit => c
                .limits_memory
                .as_ref()
                .map(|l| (l.line, format!("limits.memory: {}", l.value.text)))
                .or(Some(image_line.clone())),
            Anchor::Container => Some(image_line.clone()),
            Anchor::Volume(i) => c.mounts.get(i).map(|m| match m.volume_line {
                Some(line) => (line, format!("volume: {}", m.volume)),
                None => (m.mount_line, format!("volumeMount: {}", m.path)),
            }),
            Anchor::Env(keys) => keys
                .iter()
                .find_map(|k| c.env.iter().rev().find(|e| e.name == *k))
                .map(|e| (e.line, format!("env: {}", e.name))),
            Anchor::Command => c
                .args
                .as_ref()
                .map(|a| (a.line, "args".to_string()))
                .or(c.command.as_ref().map(|a| (a.line, "command".to_string()))),
            Anchor::Installs(_) | Anchor::From => None,
        };
        let spot = match join {
            Some(j) => Some(j),
            None if dockerfile_given && f.location.is_some() => None,
            None => Some(image_line),
        };
        if let Some((line, instruction)) = spot {
            f.location = Some(Location {
                path: manifest_path.to_string(),
                line,
                end_line: line,
                instruction: Some(instruction),
            });
        }
    }
}

/// Adds "layer N (`created_by`) brought PATH" for the first three image paths a finding names
/// that a layer brought.
pub(crate) fn provenance(findings: &mut [Finding], image: &Image) {
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

#[cfg(test)]
mod tests {
    use super::*;

    const DOCKERFILE: &str = "\
FROM debian:12 AS base
ENV GLIBC_TUNABLES=glibc.malloc.arena_max=2
RUN apt-get install -y libjemalloc2

FROM node:22 AS unrelated
ENV MALLOC_ARENA_MAX=4

FROM base
ENV MALLOC_ARENA_MAX=2 NODE_OPTIONS=--max-old-space-size=768
COPY app/ /app/
CMD [\"node\", \"/app/server.js\"]
";

    fn line(ctx: &DockerfileContext, anchor: Anchor) -> Option<u32> {
        ctx.anchor(anchor).map(|i| i.line)
    }

    #[test]
    fn anchors_name_instructions_of_the_target_stage_chain() {
        let d = Dockerfile::parse(DOCKERFILE);
        let ctx = DockerfileContext::new(&d, "Dockerfile", None).unwrap();
        // Keys in preference order: the first key any ENV sets wins, even when a later key is set
        // further down.
        assert_eq!(
            line(&ctx, Anchor::Env(&["MALLOC_ARENA_MAX", "GLIBC_TUNABLES"])),
            Some(9)
        );
        assert_eq!(
            line(&ctx, Anchor::Env(&["GLIBC_TUNABLES", "MALLOC_ARENA_MAX"])),
            Some(2)
        );
        assert_eq!(line(&ctx, Anchor::Env(&["NODE_OPTIONS"])), Some(9));
        // The base stage's RUN is in the chain; words must appear in a RUN, COPY or ADD.
        assert_eq!(line(&ctx, Anchor::Installs(&["jemalloc"])), Some(3));
        assert_eq!(line(&ctx, Anchor::Installs(&["/app/"])), Some(10));
        assert_eq!(line(&ctx, Anchor::Command), Some(11));
        // Nothing found, or nothing asked: the target stage's FROM.
        assert_eq!(line(&ctx, Anchor::Env(&["LD_PRELOAD"])), Some(8));
        assert_eq!(line(&ctx, Anchor::Installs(&["ld.so.preload"])), Some(8));
        assert_eq!(line(&ctx, Anchor::From), Some(8));
        // Another target: a stage outside its chain does not count.
        let unrelated = DockerfileContext::new(&d, "Dockerfile", Some("unrelated")).unwrap();
        assert_eq!(line(&unrelated, Anchor::Env(&["MALLOC_ARENA_MAX"])), Some(6));
        assert_eq!(line(&unrelated, Anchor::Installs(&["jemalloc"])), Some(5));
        assert_eq!(line(&unrelated, Anchor::Command), Some(5));
    }

    #[test]
    fn findings_land_on_their_anchor_or_on_the_artifact() {
        let d = Dockerfile::parse(DOCKERFILE);
        let ctx = DockerfileContext::new(&d, "deploy/Dockerfile", None).unwrap();
        let finding = |anchor| Finding::new("r", crate::finding::Severity::Note, "", anchor);
        let mut findings = [finding(Anchor::Command), finding(Anchor::Env(&["NODE_OPTIONS"]))];
        locate(&mut findings, Some(&ctx), "Dockerfile");
        let at = |f: &Finding| f.location.clone().map(|l| (l.path, l.line, l.instruction));
        assert_eq!(
            at(&findings[0]),
            Some((
                "deploy/Dockerfile".to_string(),
                11,
                Some("CMD [\"node\", \"/app/server.js\"]".to_string())
            ))
        );
        assert_eq!(at(&findings[1]).map(|(_, line, _)| line), Some(9));
        locate(&mut findings, None, "Dockerfile");
        assert_eq!(at(&findings[1]), Some(("Dockerfile".to_string(), 1, None)));
    }

    fn container(spec: &str) -> Container {
        let m = crate::k8s::read(&[crate::k8s::Input {
            file: "m.yaml".into(),
            text: format!(
                "kind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n  - name: c\n    image: app:1\n{spec}"
            ),
        }])
        .unwrap();
        m.containers[0].clone()
    }

    #[test]
    fn volume_findings_land_on_the_volume_or_the_mount() {
        let c = container(
            "    volumeMounts:
    - name: cache
      mountPath: /cache
    - name: claim
      mountPath: /data
  volumes:
  - name: cache
    emptyDir: {medium: Memory}
",
        );
        let mut findings = [
            Finding::new("r", crate::finding::Severity::Note, "", Anchor::Volume(0)),
            Finding::new("r", crate::finding::Severity::Note, "", Anchor::Volume(1)),
        ];
        in_manifest(&mut findings, &c, "m.yaml", false);
        let at: Vec<_> = findings
            .iter()
            .map(|f| {
                f.location
                    .clone()
                    .map(|l| (l.line, l.instruction.unwrap_or_default()))
            })
            .collect();
        assert_eq!(
            at,
            [
                Some((13, "volume: cache".to_string())),
                // No `volumes` entry (a claim template): the mount's line.
                Some((10, "volumeMount: /data".to_string())),
            ]
        );
    }

    #[test]
    fn findings_land_on_the_manifest_line_their_anchor_names() {
        let full = container(
            "    command: [node]
    args: [server.js]
    env:
    - name: MALLOC_ARENA_MAX
      value: \"2\"
    - name: MALLOC_ARENA_MAX
      value: \"4\"
    resources:
      limits:
        memory: 512Mi
",
        );
        let bare = container("");
        let only_command = container("    command: [node, server.js]\n");
        let finding = |anchor| Finding::new("r", crate::finding::Severity::Note, "", anchor);
        let anchors = [
            Anchor::MemoryLimit,
            Anchor::Container,
            Anchor::Env(&["GLIBC_TUNABLES", "MALLOC_ARENA_MAX"]),
            Anchor::Command,
            Anchor::Installs(&["jemalloc"]),
            Anchor::From,
        ];
        let d = Dockerfile::parse(DOCKERFILE);
        let ctx = DockerfileContext::new(&d, "Dockerfile", None).unwrap();
        // Placed as the report places them: on the Dockerfile (or the artifact) first, then on
        // the manifest.
        let placed = |c: &Container, dockerfile: bool| {
            let mut findings: Vec<Finding> = anchors.iter().map(|a| finding(*a)).collect();
            locate(&mut findings, dockerfile.then_some(&ctx), "Dockerfile");
            in_manifest(&mut findings, c, "deploy/app.yaml", dockerfile);
            findings
                .into_iter()
                .map(|f| {
                    f.location
                        .map(|l| (l.path, l.line, l.end_line, l.instruction.unwrap_or_default()))
                })
                .collect::<Vec<_>>()
        };
        let m = |line: u32, what: &str| Some(("deploy/app.yaml".to_string(), line, line, what.to_string()));
        let image = m(6, "image: app:1");
        // The manifest decides: limits.memory, the image line, the last entry of the first key
        // any entry sets, args before command. Installs and From keep their Dockerfile line.
        assert_eq!(
            placed(&full, true),
            [
                m(16, "limits.memory: 512Mi"),
                image.clone(),
                m(12, "env: MALLOC_ARENA_MAX"),
                m(8, "args"),
                Some((
                    "Dockerfile".to_string(),
                    3,
                    3,
                    "RUN apt-get install -y libjemalloc2".to_string()
                )),
                Some(("Dockerfile".to_string(), 8, 8, "FROM base".to_string())),
            ]
        );
        // Without a Dockerfile, what the manifest does not decide goes on the image line.
        assert_eq!(
            placed(&full, false),
            [
                m(16, "limits.memory: 512Mi"),
                image.clone(),
                m(12, "env: MALLOC_ARENA_MAX"),
                m(8, "args"),
                image.clone(),
                image.clone(),
            ]
        );
        // A container that sets nothing: a memory limit and the container still go on the
        // image line; env and command keep their Dockerfile line, or go on the image line.
        let dockerfile_lines = placed(&bare, true);
        assert_eq!(dockerfile_lines[..2], [image.clone(), image.clone()]);
        assert_eq!(
            dockerfile_lines[2..]
                .iter()
                .map(|l| l.clone().map(|(path, line, _, _)| (path, line)))
                .collect::<Vec<_>>(),
            [
                Some(("Dockerfile".to_string(), 2)),
                Some(("Dockerfile".to_string(), 11)),
                Some(("Dockerfile".to_string(), 3)),
                Some(("Dockerfile".to_string(), 8)),
            ]
        );
        assert_eq!(placed(&bare, false), vec![image.clone(); 6]);
        // `command` without `args`.
        assert_eq!(placed(&only_command, false)[3], m(7, "command"));
        // A Dockerfile was given but the finding has no line yet: the image line.
        let mut unplaced = [finding(Anchor::From)];
        in_manifest(&mut unplaced, &bare, "deploy/app.yaml", true);
        assert_eq!(unplaced[0].location.as_ref().map(|l| l.line), Some(6));
    }
}
