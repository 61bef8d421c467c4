//! Kubernetes manifests (`lint --k8s PATH`): the containers a set of manifests runs, each with
//! its workload, image, command, env, resources and mounts, and the line of each in its file.
//!
//! A typed subset of the Kubernetes API of our own rather than `k8s-openapi`: memlint reads a
//! dozen fields of six kinds, needs the line of each (k8s-openapi's types keep none), and
//! k8s-openapi costs about a minute and 1 GB more per build here. The YAML is read by
//! serde-saphyr into a tree with lines ([`yaml`]), which the walk below holds to Kubernetes'
//! types for the workload kinds only: a CRD of another shape never fails the run.

pub(crate) mod annotations;
pub(crate) mod quantity;
pub(crate) mod yaml;

use quantity::Quantity;
use serde::Serialize;
use serde_saphyr::Spanned;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use yaml::{line_of, Node};

/// The most a manifest file (or standard input) may hold: a whole cluster's rendering.
pub(crate) const MAX_MANIFEST_BYTES: u64 = 32 << 20;

/// Where a container is declared: the contract of the JSON `k8s` object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Workload {
    /// The file as given on the command line (`-` for standard input), `/`-separated.
    pub(crate) file: String,
    /// The line of the container's `image:`.
    pub(crate) line: u32,
    pub(crate) kind: String,
    pub(crate) namespace: Option<String>,
    pub(crate) name: String,
    pub(crate) container: String,
    /// The container's image as the manifest spells it.
    pub(crate) image: String,
    /// An init container.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) init: bool,
}

/// A value with the line it is written on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct Lined<T> {
    pub(crate) value: T,
    pub(crate) line: u32,
}

/// Where an `env` entry's value comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "from", rename_all = "snake_case")]
pub(crate) enum EnvValue {
    /// `value:` (after `$(VAR)` expansion, as the kubelet does it).
    Value { value: String },
    /// `valueFrom.resourceFieldRef` of a resource of this container, resolved.
    Resource { resource: String, value: Option<String> },
    /// A secret, a config map, a field of the pod, or a resource that is not set: not known
    /// from the manifest.
    Unknown { why: String },
}

/// One `env` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct EnvEntry {
    pub(crate) name: String,
    pub(crate) line: u32,
    #[serde(flatten)]
    pub(crate) value: EnvValue,
}

/// A volume mounted into the container, with what the pod says the volume is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct Mount {
    pub(crate) path: String,
    pub(crate) volume: String,
    /// `emptyDir` with `medium: Memory` (a tmpfs counted against the memory limit).
    pub(crate) memory_backed: bool,
    /// `emptyDir` on disk.
    pub(crate) disk_empty_dir: bool,
    /// The `emptyDir`'s `sizeLimit`.
    pub(crate) size_limit: Option<Quantity>,
    /// `readOnly: true`: the container cannot write to it.
    pub(crate) read_only: bool,
    /// `subPath` (or `subPathExpr`, as written): only that folder of the volume is mounted.
    pub(crate) sub_path: Option<String>,
    /// The line of the pod's `volumes` entry; `null` when the pod declares no such volume (a
    /// StatefulSet's `volumeClaimTemplates` entry, a typo).
    pub(crate) volume_line: Option<u32>,
    /// The line of the container's `volumeMounts` entry.
    pub(crate) mount_line: u32,
}

/// A `hugepages-<size>` resource of the container (`hugepages-2Mi: 1Gi`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct HugePages {
    /// The page size as the resource names it (`2Mi`, `1Gi`).
    pub(crate) page_size: String,
    /// `limits` or `requests`.
    pub(crate) of: &'static str,
    pub(crate) quantity: Quantity,
    pub(crate) line: u32,
}

/// A container as the manifest declares it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct Container {
    #[serde(skip)]
    pub(crate) workload: Workload,
    /// The image reference as the manifest spells it.
    pub(crate) image: String,
    /// `command` (replaces the image's Entrypoint, and its Cmd when `args` is absent).
    pub(crate) command: Option<Lined<Vec<String>>>,
    /// `args` (replaces the image's Cmd).
    pub(crate) args: Option<Lined<Vec<String>>>,
    pub(crate) env: Vec<EnvEntry>,
    /// `envFrom` sources: every variable they hold is unknown.
    pub(crate) env_from: Vec<String>,
    pub(crate) limits_memory: Option<Lined<Quantity>>,
    pub(crate) requests_memory: Option<Lined<Quantity>>,
    pub(crate) limits_ephemeral_storage: Option<Lined<Quantity>>,
    /// `resources.limits` and `resources.requests` of `hugepages-*`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) hugepages: Vec<HugePages>,
    pub(crate) mounts: Vec<Mount>,
    /// The pod's `hostIPC: true`: the container shares the node's IPC namespace and its
    /// `/dev/shm`.
    pub(crate) host_ipc: bool,
    pub(crate) working_dir: Option<String>,
    /// Words of `command`/`args` whose `$(VAR)` the manifest cannot resolve (left as written),
    /// each with why: a rule that would read them stays undecided.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) unresolved_args: Vec<String>,
    /// The `memlint/ignore` entries of its workload and pod template, shared by the workload's
    /// containers; each says which of them it is about ([`annotations::WorkloadIgnore::applies_to`]).
    #[serde(skip)]
    pub(crate) ignores: Arc<[annotations::WorkloadIgnore]>,
}

/// A document memlint does not lint, for `-v`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Skipped {
    pub(crate) file: String,
    pub(crate) line: u32,
    pub(crate) kind: String,
    pub(crate) name: String,
}

/// What a set of manifests runs.
#[derive(Debug, Default)]
pub(crate) struct Manifests {
    pub(crate) containers: Vec<Container>,
    pub(crate) skipped: Vec<Skipped>,
    /// Memory quantities that are valid but strange (`500m`), in words with file and line.
    pub(crate) warnings: Vec<String>,
    /// What `$(VAR)` references may still add to the values of every manifest read, all
    /// together ([`MAX_RUN_EXPANSION`]); `None` before the first container.
    expansion_left: Option<usize>,
}

/// A manifest that cannot be read: what, the file and its text, the line, what to do.
#[derive(Debug)]
pub(crate) struct ManifestError {
    pub(crate) file: String,
    pub(crate) text: String,
    pub(crate) line: Option<u32>,
    pub(crate) column: Option<u32>,
    pub(crate) message: String,
    pub(crate) help: String,
}

/// One input: its name as the user gave it and its text.
pub(crate) struct Input {
    pub(crate) file: String,
    pub(crate) text: String,
}

/// The files a `--k8s` argument names: the file, or every `*.yaml`/`*.yml` under the folder
/// (sorted, so that runs agree), or `-` for standard input (returned as `None`).
pub(crate) fn expand(path: &Path) -> std::io::Result<Vec<Option<PathBuf>>> {
    if path == Path::new("-") {
        return Ok(vec![None]);
    }
    if !path.is_dir() {
        return Ok(vec![Some(path.to_path_buf())]);
    }
    let mut out = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            seen += 1;
            // A folder of a whole cluster is thousands of files; a loop of links is not.
            if seen > 1_000_000 {
                return Err(std::io::Error::other(
                    "more than a million entries under the folder",
                ));
            }
            let p = e.path();
            let ft = e.file_type()?;
            if ft.is_dir() {
                // Hidden folders (.git) hold no manifests to lint.
                if !e.file_name().to_string_lossy().starts_with('.') {
                    stack.push(p);
                }
            } else if matches!(p.extension().and_then(|x| x.to_str()), Some("yaml" | "yml")) {
                out.push(Some(p));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Reads the containers of every workload in `inputs`.
pub(crate) fn read(inputs: &[Input]) -> Result<Manifests, Box<ManifestError>> {
    let mut out = Manifests::default();
    for input in inputs {
        read_one(input, &mut out)?;
    }
    Ok(out)
}

fn read_one(input: &Input, out: &mut Manifests) -> Result<(), Box<ManifestError>> {
    let fail = |line: Option<u32>, message: String, help: String| {
        Box::new(ManifestError {
            file: input.file.clone(),
            text: input.text.clone(),
            line,
            column: None,
            message,
            help,
        })
    };
    let docs = match yaml::documents(&input.text) {
        Ok(d) => d,
        Err(e) => {
            let helm = helm_line(&input.text);
            let mut err = fail(
                e.line,
                format!("{} is not valid YAML: {}", input.file, e.message),
                "fix the YAML at this line; `kubectl apply --dry-run=client -f FILE` shows the same"
                    .to_string(),
            );
            err.column = e.column;
            if let Some(l) = helm {
                err.line = Some(l);
                err.column = None;
                err.message = format!("{} holds an unrendered Helm template (`{{{{ … }}}}`)", input.file);
                err.help =
                    "render it first with `helm template RELEASE CHART | memlint lint --k8s -`".to_string();
            }
            return Err(err);
        }
    };
    let mut walk = Walk {
        file: &input.file,
        text: &input.text,
        out,
        fail: &fail,
    };
    for doc in &docs {
        walk.document(doc, 0).map_err(|mut e| {
            // An unquoted `{{ … }}` is valid YAML (a flow map in a flow map) of the wrong type.
            let source_line = e
                .line
                .and_then(|l| input.text.lines().nth(l.saturating_sub(1) as usize));
            if source_line.is_some_and(|l| l.contains("{{") && l.contains("}}")) {
                e.message = format!("{} holds an unrendered Helm template (`{{{{ … }}}}`)", input.file);
                e.help =
                    "render it first with `helm template RELEASE CHART | memlint lint --k8s -`".to_string();
            }
            e
        })?;
    }
    Ok(())
}

/// The API versions Kubernetes serves (or served) a kind memlint reads under, the current
/// one first; `None` for a kind memlint does not read.
fn workload_api_versions(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "Pod" | "List" => &["v1"],
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" => {
            &["apps/v1", "apps/v1beta2", "apps/v1beta1", "extensions/v1beta1"]
        }
        "Job" => &["batch/v1"],
        "CronJob" => &["batch/v1", "batch/v1beta1", "batch/v2alpha1"],
        _ => return None,
    })
}

/// The first line with a template expression, when the text holds one.
fn helm_line(text: &str) -> Option<u32> {
    text.lines()
        .position(|l| l.contains("{{") && l.contains("}}"))
        .map(|i| u32::try_from(i + 1).unwrap_or(u32::MAX))
}

type Fail<'a> = &'a dyn Fn(Option<u32>, String, String) -> Box<ManifestError>;

struct Walk<'a> {
    file: &'a str,
    /// The file's text, for the line of each entry of a `memlint/ignore` block.
    text: &'a str,
    out: &'a mut Manifests,
    fail: Fail<'a>,
}

const KUBECTL_HELP: &str =
    "Kubernetes refuses this too (`kubectl apply --dry-run=server -f FILE` shows it); fix the manifest";

impl Walk<'_> {
    fn wrong_type(&self, at: &Spanned<Node>, what: &str, expected: &str) -> Box<ManifestError> {
        (self.fail)(
            Some(line_of(at)),
            format!(
                "{what} in {} must be {expected}, not {}",
                self.file,
                at.value.describe()
            ),
            KUBECTL_HELP.to_string(),
        )
    }

    fn map<'n>(&self, node: &'n Spanned<Node>, what: &str) -> Result<&'n Node, Box<ManifestError>> {
        match &node.value {
            Node::Map(_) => Ok(&node.value),
            _ => Err(self.wrong_type(node, what, "a map")),
        }
    }

    fn seq<'n>(
        &self,
        node: &'n Spanned<Node>,
        what: &str,
    ) -> Result<&'n [Spanned<Node>], Box<ManifestError>> {
        match &node.value {
            Node::Seq(items) => Ok(items),
            Node::Null => Ok(&[]),
            _ => Err(self.wrong_type(node, what, "a list")),
        }
    }

    fn string(&self, node: &Spanned<Node>, what: &str) -> Result<String, Box<ManifestError>> {
        match &node.value {
            Node::Str(s) => {
                if s.contains("{{") && s.contains("}}") {
                    return Err((self.fail)(
                        Some(line_of(node)),
                        format!("{what} in {} is an unrendered Helm template (`{s}`)", self.file),
                        "render it first with `helm template RELEASE CHART | memlint lint --k8s -`"
                            .to_string(),
                    ));
                }
                Ok(s.clone())
            }
            _ => Err(self.wrong_type(node, what, "a string")),
        }
    }

    fn opt_string(&self, parent: &Node, key: &str, what: &str) -> Result<Option<String>, Box<ManifestError>> {
        match parent.get(key) {
            None => Ok(None),
            Some(n) if n.value == Node::Null => Ok(None),
            Some(n) => self.string(n, what).map(Some),
        }
    }

    fn document(&mut self, doc: &Spanned<Node>, depth: u32) -> Result<(), Box<ManifestError>> {
        let Node::Map(_) = &doc.value else {
            // Not a Kubernetes object (a playbook's list, a scalar): not memlint's to judge.
            if doc.value != Node::Null {
                self.out.skipped.push(Skipped {
                    file: self.file.to_string(),
                    line: line_of(doc),
                    kind: "(not a Kubernetes object)".to_string(),
                    name: String::new(),
                });
            }
            return Ok(());
        };
        let node = &doc.value;
        let kind = match node.get("kind") {
            Some(k) => self.string(k, "`kind`")?,
            None => String::new(),
        };
        let line = node.key_line("kind").unwrap_or_else(|| line_of(doc));
        let meta = match node.get("metadata") {
            Some(m) if m.value != Node::Null => Some(self.map(m, "`metadata`")?),
            _ => None,
        };
        let name = match meta {
            Some(m) => self
                .opt_string(m, "name", "`metadata.name`")?
                .or(self.opt_string(m, "generateName", "`metadata.generateName`")?)
                .unwrap_or_default(),
            None => String::new(),
        };
        let namespace = match meta {
            Some(m) => self.opt_string(m, "namespace", "`metadata.namespace`")?,
            None => None,
        };
        // A custom resource may reuse a workload's kind (Volcano's `Job`, Argo Rollouts'
        // shapes): only Kubernetes' own API groups are read, the rest skipped with a warning.
        let api_version = match node.get("apiVersion") {
            Some(v) if v.value != Node::Null => Some(self.string(v, "`apiVersion`")?),
            _ => None,
        };
        if self.skip_custom_resource(&kind, &name, line, api_version.as_deref()) {
            return Ok(());
        }
        let pod_spec_path: &[&str] = match kind.as_str() {
            "List" if depth < 4 => {
                if let Some(items) = node.get("items") {
                    for item in self.seq(items, "`items` of a List")? {
                        self.document(item, depth + 1)?;
                    }
                }
                return Ok(());
            }
            "Pod" => &["spec"],
            "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
                &["spec", "template", "spec"]
            }
            "CronJob" => &["spec", "jobTemplate", "spec", "template", "spec"],
            _ => {
                self.out.skipped.push(Skipped {
                    file: self.file.to_string(),
                    line,
                    kind: if kind.is_empty() {
                        "(no kind)".to_string()
                    } else {
                        kind
                    },
                    name,
                });
                return Ok(());
            }
        };
        let Some((at, path, template)) = self.pod_spec(doc, pod_spec_path, &kind, &name, line)? else {
            return Ok(());
        };
        let pod = self.map(at, &path)?;
        let base = Workload {
            file: self.file.to_string(),
            line,
            kind: kind.clone(),
            namespace,
            name,
            container: String::new(),
            image: String::new(),
            init: false,
        };
        let volumes = self.volumes(pod)?;
        let host_ipc = match pod.get("hostIPC") {
            None => false,
            Some(n) => match &n.value {
                Node::Bool(b) => *b,
                Node::Null => false,
                _ => return Err(self.wrong_type(n, "`hostIPC`", "true or false")),
            },
        };
        let first = self.out.containers.len();
        for (key, init) in [("initContainers", true), ("containers", false)] {
            let Some(list) = pod.get(key) else { continue };
            for c in self.seq(list, &format!("`{key}`"))? {
                if let Some(container) = self.container(c, &base, init, &volumes)? {
                    self.out.containers.push(container);
                }
            }
        }
        for c in &mut self.out.containers[first..] {
            c.host_ipc = host_ipc;
        }
        self.ignores_of_workload(&base, first, meta, template)
    }

    /// Whether the object is a custom resource that reuses a workload's kind (of another API
    /// group): skipped, with a warning.
    fn skip_custom_resource(&mut self, kind: &str, name: &str, line: u32, api_version: Option<&str>) -> bool {
        if let (Some(groups), Some(api)) = (workload_api_versions(kind), api_version) {
            if !groups.contains(&api) {
                self.out.warnings.push(format!(
                    "{}:{line}: the {kind} `{name}` is of apiVersion `{api}`, not Kubernetes' {}: a custom resource memlint does not read, skipped",
                    self.file,
                    groups[0]
                ));
                self.out.skipped.push(Skipped {
                    file: self.file.to_string(),
                    line,
                    kind: format!("{kind} ({api})"),
                    name: name.to_string(),
                });
                return true;
            }
        }
        false
    }

    /// The pod spec at `pod_spec_path` in the document, its path for messages, and the pod
    /// template (`spec.template`) it is in; `None` (with a warning) when a part is missing.
    fn pod_spec<'d>(
        &mut self,
        doc: &'d Spanned<Node>,
        pod_spec_path: &[&str],
        kind: &str,
        name: &str,
        line: u32,
    ) -> Result<Option<PodSpec<'d>>, Box<ManifestError>> {
        let mut at: &Spanned<Node> = doc;
        let mut path = String::new();
        // The pod template (`spec.template`), whose own metadata may carry annotations.
        let mut template: Option<&Node> = None;
        for key in pod_spec_path {
            let parent = self.map(at, if path.is_empty() { "the document" } else { &path })?;
            if *key == "spec" && !path.is_empty() {
                template = Some(parent);
            }
            path = if path.is_empty() {
                format!("`{key}`")
            } else {
                format!("{}.{key}`", path.trim_end_matches('`'))
            };
            match parent.get(key) {
                Some(n) => at = n,
                // A kustomize patch names a workload without the whole of it: nothing to run.
                None => {
                    self.out.warnings.push(format!(
                        "{}:{line}: the {kind} `{name}` has no {path} (a kustomize patch?): skipped",
                        self.file
                    ));
                    return Ok(None);
                }
            }
        }
        Ok(Some((at, path, template)))
    }

    /// The workload's `memlint/ignore` entries (its metadata's and its pod template's), given to
    /// its containers (those from `first` on); an entry naming a container it does not have is
    /// an error.
    fn ignores_of_workload(
        &mut self,
        base: &Workload,
        first: usize,
        meta: Option<&Node>,
        template: Option<&Node>,
    ) -> Result<(), Box<ManifestError>> {
        let mut ignores = match meta {
            Some(m) => self.ignores(m, "`metadata`")?,
            None => Vec::new(),
        };
        let template_meta = match template.and_then(|t| t.get("metadata")) {
            Some(m) if m.value != Node::Null => Some(self.map(m, "the pod template's `metadata`")?),
            _ => None,
        };
        if let Some(m) = template_meta {
            ignores.extend(self.ignores(m, "the pod template's `metadata`")?);
        }
        let mine = &mut self.out.containers[first..];
        // `RULE@container` for a container the workload does not have would hide nothing.
        if let Some(stray) = ignores.iter().find(|i| {
            i.container
                .as_deref()
                .is_some_and(|c| !mine.iter().any(|m| m.workload.container == c))
        }) {
            let mut names: Vec<&str> = mine.iter().map(|m| m.workload.container.as_str()).collect();
            names.dedup();
            return Err((self.fail)(
                Some(stray.line),
                format!(
                    "the `{}` ignore of {} in {} names the container `{}`, which the {} `{}` does not have",
                    annotations::IGNORE,
                    stray.rule,
                    self.file,
                    stray.container.as_deref().unwrap_or_default(),
                    base.kind,
                    base.name
                ),
                if names.is_empty() {
                    "the workload runs no container memlint lints; remove the entry".to_string()
                } else {
                    format!("its containers are: {}", names.join(", "))
                },
            ));
        }
        if !ignores.is_empty() {
            let shared: Arc<[annotations::WorkloadIgnore]> = ignores.into();
            for c in mine {
                c.ignores = shared.clone();
            }
        }
        Ok(())
    }

    /// The `memlint/ignore` entries of a `metadata` map, each with its line and the
    /// `memlint/ignore-until` beside it; a malformed one is an error at its line.
    fn ignores(
        &self,
        meta: &Node,
        what: &str,
    ) -> Result<Vec<annotations::WorkloadIgnore>, Box<ManifestError>> {
        let Some(node) = meta.get("annotations") else {
            return Ok(Vec::new());
        };
        if node.value == Node::Null {
            return Ok(Vec::new());
        }
        let map = self.map(node, &format!("`annotations` of {what}"))?;
        let ignore = map.get(annotations::IGNORE);
        let until = map.get(annotations::IGNORE_UNTIL);
        let too_long = |n: &Spanned<Node>, key: &str| {
            (self.fail)(
                Some(line_of(n)),
                format!(
                    "the `{key}` annotation in {} holds more than {} KiB",
                    self.file,
                    annotations::MAX_ANNOTATION_BYTES >> 10
                ),
                "Kubernetes refuses more than 256 KiB of annotations on an object; fix the manifest"
                    .to_string(),
            )
        };
        let expires = match until {
            None => None,
            Some(n) => {
                let text = self.string(n, &format!("`{}`", annotations::IGNORE_UNTIL))?;
                if text.len() > annotations::MAX_ANNOTATION_BYTES {
                    return Err(too_long(n, annotations::IGNORE_UNTIL));
                }
                if ignore.is_none() {
                    return Err((self.fail)(
                        Some(line_of(n)),
                        format!(
                            "`{}` in {} has no `{}` beside it",
                            annotations::IGNORE_UNTIL,
                            self.file,
                            annotations::IGNORE
                        ),
                        format!(
                            "it dates the ignores of the `{}` annotation of the same metadata; add them, or remove it",
                            annotations::IGNORE
                        ),
                    ));
                }
                Some(annotations::parse_until(&text).map_err(|why| {
                    (self.fail)(
                        Some(line_of(n)),
                        format!(
                            "`{}: {text}` in {} is not a date: {why}",
                            annotations::IGNORE_UNTIL,
                            self.file
                        ),
                        format!(
                            "write it as YYYY-MM-DD, e.g. {}: \"2027-01-31\"",
                            annotations::IGNORE_UNTIL
                        ),
                    )
                })?)
            }
        };
        let Some(node) = ignore else {
            return Ok(Vec::new());
        };
        let value = self.string(node, &format!("`{}`", annotations::IGNORE))?;
        if value.len() > annotations::MAX_ANNOTATION_BYTES {
            return Err(too_long(node, annotations::IGNORE));
        }
        let lines = self.entry_lines(node, &value);
        let at = |index: usize| lines.get(index).copied().unwrap_or_else(|| line_of(node));
        let entries = annotations::parse_ignore(&value).map_err(|m| {
            (self.fail)(
                Some(at(m.index)),
                format!(
                    "the `{}` annotation in {}: {}",
                    annotations::IGNORE,
                    self.file,
                    m.message
                ),
                m.help,
            )
        })?;
        Ok(entries
            .into_iter()
            .map(|e| annotations::WorkloadIgnore {
                line: at(e.index),
                rule: e.rule,
                container: e.container,
                reason: e.reason,
                expires,
            })
            .collect())
    }

    /// The manifest line of each line of an annotation's value: a block scalar (`|`) puts each
    /// on a line of its own, found in order below the key; a quoted or plain value (`"a: x\nb:
    /// y"`) is on the key's line, as is any line not found.
    fn entry_lines(&self, node: &Spanned<Node>, value: &str) -> Vec<u32> {
        let start = line_of(node);
        let source: Vec<&str> = self
            .text
            .lines()
            .skip(start.saturating_sub(1) as usize)
            .take(value.lines().count().saturating_add(2))
            .collect();
        let mut next = 0usize;
        value
            .lines()
            .map(|l| {
                let wanted = l.trim();
                if wanted.is_empty() {
                    return start;
                }
                match source[next.min(source.len())..]
                    .iter()
                    .position(|s| s.trim() == wanted)
                {
                    Some(i) => {
                        let found = next + i;
                        next = found + 1;
                        start.saturating_add(u32::try_from(found).unwrap_or(u32::MAX))
                    }
                    None => start,
                }
            })
            .collect()
    }

    fn volumes(&self, pod: &Node) -> Result<Vec<(String, Mount)>, Box<ManifestError>> {
        let mut out = Vec::new();
        let Some(list) = pod.get("volumes") else {
            return Ok(out);
        };
        for v in self.seq(list, "`volumes`")? {
            let m = self.map(v, "a volume")?;
            let name = self
                .opt_string(m, "name", "a volume's `name`")?
                .unwrap_or_default();
            let mut mount = Mount {
                path: String::new(),
                volume: name.clone(),
                memory_backed: false,
                disk_empty_dir: false,
                size_limit: None,
                read_only: false,
                sub_path: None,
                volume_line: Some(line_of(v)),
                mount_line: 0,
            };
            if let Some(ed) = m.get("emptyDir") {
                let ed_map = match &ed.value {
                    Node::Null => None,
                    _ => Some(self.map(ed, "`emptyDir`")?),
                };
                let medium = match ed_map {
                    Some(e) => self.opt_string(e, "medium", "`emptyDir.medium`")?,
                    None => None,
                };
                mount.memory_backed = medium.as_deref() == Some("Memory");
                mount.disk_empty_dir = !mount.memory_backed;
                if let Some(sl) = ed_map.and_then(|e| e.get("sizeLimit")) {
                    mount.size_limit = Some(self.quantity(sl, "`emptyDir.sizeLimit`")?.value);
                }
            }
            out.push((name, mount));
        }
        Ok(out)
    }

    fn quantity(&self, node: &Spanned<Node>, what: &str) -> Result<Lined<Quantity>, Box<ManifestError>> {
        // The API server trims blanks around a quantity (`Quantity.UnmarshalJSON`).
        let text = match &node.value {
            Node::Str(_) => self.string(node, what)?.trim().to_string(),
            n @ (Node::Int(_) | Node::Float(_)) => n.scalar_text().unwrap_or_default(),
            _ => return Err(self.wrong_type(node, what, "a quantity such as 512Mi")),
        };
        let q = quantity::parse(&text).map_err(|why| {
            (self.fail)(
                Some(line_of(node)),
                format!(
                    "{what} `{text}` in {} is not a Kubernetes quantity: {why}",
                    self.file
                ),
                "write it as Kubernetes does: 512Mi, 2Gi, 1G, 500M (binary Ki/Mi/Gi, decimal k/M/G)"
                    .to_string(),
            )
        })?;
        Ok(Lined {
            value: q,
            line: line_of(node),
        })
    }

    fn strings(&self, node: &Spanned<Node>, what: &str) -> Result<Lined<Vec<String>>, Box<ManifestError>> {
        let mut out = Vec::new();
        for item in self.seq(node, what)? {
            out.push(self.string(item, &format!("an item of {what}"))?);
        }
        Ok(Lined {
            value: out,
            line: line_of(node),
        })
    }

    fn container(
        &mut self,
        node: &Spanned<Node>,
        base: &Workload,
        init: bool,
        volumes: &[(String, Mount)],
    ) -> Result<Option<Container>, Box<ManifestError>> {
        let c = self.map(node, "a container")?;
        let name = self
            .opt_string(c, "name", "a container's `name`")?
            .unwrap_or_default();
        let Some(image_node) = c.get("image") else {
            // A kustomize patch of a container (its env, its resources) names no image.
            self.out.warnings.push(format!(
                "{}:{}: the container `{name}` of the {} `{}` has no image (a kustomize patch?): skipped",
                self.file,
                line_of(node),
                base.kind,
                base.name
            ));
            return Ok(None);
        };
        let image = self.string(image_node, "`image`")?;
        let workload = Workload {
            container: name.clone(),
            image: image.clone(),
            init,
            line: line_of(image_node),
            ..base.clone()
        };
        let command = match c.get("command") {
            Some(n) if n.value != Node::Null => Some(self.strings(n, "`command`")?),
            _ => None,
        };
        let args = match c.get("args") {
            Some(n) if n.value != Node::Null => Some(self.strings(n, "`args`")?),
            _ => None,
        };
        let working_dir = self.opt_string(c, "workingDir", "`workingDir`")?;
        let resources = self.resources(c)?;
        let env_from = self.env_from(c)?;
        let mut budget = Expansion {
            container_left: MAX_CONTAINER_ARGS,
            run_left: self.out.expansion_left.unwrap_or(MAX_RUN_EXPANSION),
        };
        let (env, by_name) = self.env(c, &resources, &env_from, &mut budget)?;
        // `$(VAR)` in command and args is expanded by the kubelet from the container's env.
        // An empty list is no list: the runtime keeps the image's Entrypoint or Cmd
        // (containerd's `setOCIProcessArgs`). A word with an unknown reference stays as written.
        let mut unresolved = Vec::new();
        let refs = Refs {
            env: &env,
            by_name: &by_name,
            env_from: &env_from,
        };
        let mut expand = |l: Option<Lined<Vec<String>>>| {
            l.filter(|l| !l.value.is_empty()).map(|l| Lined {
                value: l
                    .value
                    .iter()
                    .map(|s| {
                        // The word and its NUL, as execve counts it.
                        expand_refs(s, &refs, &mut budget, 1).unwrap_or_else(|why| {
                            unresolved.push(format!("`{s}`: {why}"));
                            s.clone()
                        })
                    })
                    .collect(),
                line: l.line,
            })
        };
        let command = expand(command);
        let args = expand(args);
        self.out.expansion_left = Some(budget.run_left);
        let mounts = self.volume_mounts(c, volumes)?;
        Ok(Some(Container {
            workload,
            image,
            command,
            args,
            env,
            env_from,
            limits_memory: resources.limits_memory,
            requests_memory: resources.requests_memory,
            limits_ephemeral_storage: resources.limits_ephemeral_storage,
            hugepages: resources.hugepages,
            mounts,
            host_ipc: false,
            working_dir,
            unresolved_args: unresolved,
            ignores: Arc::from([]),
        }))
    }

    /// A container's memory and ephemeral-storage requests and limits, and its huge pages.
    fn resources(&mut self, c: &Node) -> Result<ContainerResources, Box<ManifestError>> {
        let (mut limits_memory, mut requests_memory, mut limits_ephemeral_storage) = (None, None, None);
        let mut hugepages = Vec::new();
        if let Some(res) = c.get("resources").filter(|r| r.value != Node::Null) {
            let res = self.map(res, "`resources`")?;
            for (key, slot) in [("limits", 0), ("requests", 1)] {
                let Some(table) = res.get(key).filter(|t| t.value != Node::Null) else {
                    continue;
                };
                let table = self.map(table, &format!("`resources.{key}`"))?;
                if let Some(m) = table.get("memory") {
                    let q = self.quantity(m, &format!("`resources.{key}.memory`"))?;
                    if q.value.text.ends_with('m') {
                        let number = q.value.text.trim_end_matches('m');
                        self.out.warnings.push(format!(
                        "{}:{}: `resources.{key}.memory: {}` is {number} thousandths of a byte (Kubernetes reads `m` as milli), {} byte(s) once rounded up: did you mean `{number}Mi`?",
                        self.file, q.line, q.value.text, q.value.value,
                    ));
                    } else if q.value.fractional {
                        self.out.warnings.push(format!(
                        "{}:{}: `resources.{key}.memory: {}` is not a whole number of bytes: Kubernetes rounds it up to {}",
                        self.file, q.line, q.value.text, q.value.value,
                    ));
                    }
                    if slot == 0 {
                        limits_memory = Some(q);
                    } else {
                        requests_memory = Some(q);
                    }
                }
                if let Node::Map(entries) = table {
                    for (name, q) in entries {
                        let Some(page_size) = name.value.strip_prefix("hugepages-") else {
                            continue;
                        };
                        let q = self.quantity(q, &format!("`resources.{key}.{}`", name.value))?;
                        hugepages.push(HugePages {
                            page_size: page_size.to_string(),
                            of: if slot == 0 { "limits" } else { "requests" },
                            quantity: q.value,
                            line: q.line,
                        });
                    }
                }
                if slot == 0 {
                    if let Some(e) = table.get("ephemeral-storage") {
                        limits_ephemeral_storage =
                            Some(self.quantity(e, "`resources.limits.ephemeral-storage`")?);
                    }
                }
            }
        }
        Ok(ContainerResources {
            limits_memory,
            requests_memory,
            limits_ephemeral_storage,
            hugepages,
        })
    }

    /// What each `envFrom` entry brings in, named for messages.
    fn env_from(&self, c: &Node) -> Result<Vec<String>, Box<ManifestError>> {
        let mut env_from = Vec::new();
        if let Some(list) = c.get("envFrom") {
            for e in self.seq(list, "`envFrom`")? {
                let m = self.map(e, "an `envFrom` entry")?;
                let source = ["configMapRef", "secretRef"]
                    .iter()
                    .find_map(|k| {
                        m.get(k).map(|r| {
                            let n = r
                                .value
                                .get("name")
                                .and_then(|n| n.value.scalar_text())
                                .unwrap_or_default();
                            format!("{k} `{n}`")
                        })
                    })
                    .unwrap_or_else(|| "an envFrom source".to_string());
                env_from.push(source);
            }
        }
        Ok(env_from)
    }

    /// A container's `env`, each `$(NAME)` in a value expanded from the entries before it, and
    /// the index of the last entry of each name.
    fn env(
        &self,
        c: &Node,
        resources: &ContainerResources,
        env_from: &[String],
        budget: &mut Expansion,
    ) -> Result<(Vec<EnvEntry>, EnvIndex), Box<ManifestError>> {
        let mut env: Vec<EnvEntry> = Vec::new();
        // The last entry of each name, for `$(NAME)`: a reverse scan per reference cost the
        // entries times the references (minutes for a manifest of a few MB).
        let mut by_name: HashMap<String, usize> = HashMap::new();
        if let Some(list) = c.get("env") {
            for e in self.seq(list, "`env`")? {
                let m = self.map(e, "an `env` entry")?;
                let var = m.get("name").ok_or_else(|| {
                    (self.fail)(
                        Some(line_of(e)),
                        format!("an `env` entry in {} has no `name`", self.file),
                        KUBECTL_HELP.to_string(),
                    )
                })?;
                let var = self.string(var, "an `env` name")?;
                let literal = match m.get("value").filter(|v| v.value != Node::Null) {
                    Some(v) => Some(self.string(v, &format!("the value of `{var}`"))?),
                    None => None,
                };
                // `value: ""` beside `valueFrom` is valid, and the kubelet takes `valueFrom`.
                let from = m.get("valueFrom").filter(|f| f.value != Node::Null);
                let value = if let Some(raw) = literal.filter(|l| !l.is_empty() || from.is_none()) {
                    let refs = Refs {
                        env: &env,
                        by_name: &by_name,
                        env_from,
                    };
                    // `NAME=VALUE` and its NUL, as execve counts it.
                    match expand_refs(&raw, &refs, budget, var.len() + 2) {
                        Ok(value) => EnvValue::Value { value },
                        Err(why) => EnvValue::Unknown { why },
                    }
                } else if let Some(from) = from {
                    let from = self.map(from, "`valueFrom`")?;
                    self.value_from(
                        from,
                        resources.limits_memory.as_ref(),
                        resources.requests_memory.as_ref(),
                        resources.limits_ephemeral_storage.as_ref(),
                    )?
                } else {
                    EnvValue::Value { value: String::new() }
                };
                by_name.insert(var.clone(), env.len());
                env.push(EnvEntry {
                    name: var,
                    line: line_of(e),
                    value,
                });
            }
        }
        Ok((env, by_name))
    }

    /// A container's `volumeMounts`, each with what the pod's volume of that name is.
    fn volume_mounts(&self, c: &Node, volumes: &[(String, Mount)]) -> Result<Vec<Mount>, Box<ManifestError>> {
        let mut mounts = Vec::new();
        if let Some(list) = c.get("volumeMounts") {
            for m in self.seq(list, "`volumeMounts`")? {
                let mm = self.map(m, "a volume mount")?;
                let path = self
                    .opt_string(mm, "mountPath", "`mountPath`")?
                    .unwrap_or_default();
                let volume = self
                    .opt_string(mm, "name", "a volume mount's `name`")?
                    .unwrap_or_default();
                // A name the pod's `volumes` do not declare (a StatefulSet's
                // `volumeClaimTemplates`, which become PersistentVolumeClaims) is no memory.
                let mut mount = volumes
                    .iter()
                    .find(|(n, _)| *n == volume)
                    .map(|(_, v)| v.clone())
                    .unwrap_or(Mount {
                        path: String::new(),
                        volume: volume.clone(),
                        memory_backed: false,
                        disk_empty_dir: false,
                        size_limit: None,
                        read_only: false,
                        sub_path: None,
                        volume_line: None,
                        mount_line: 0,
                    });
                mount.path = path;
                mount.mount_line = line_of(m);
                mount.read_only = match mm.get("readOnly") {
                    None => false,
                    Some(n) => match &n.value {
                        Node::Bool(b) => *b,
                        Node::Null => false,
                        _ => return Err(self.wrong_type(n, "`readOnly`", "true or false")),
                    },
                };
                mount.sub_path = match self.opt_string(mm, "subPath", "`subPath`")? {
                    Some(p) if !p.is_empty() => Some(p),
                    _ => self
                        .opt_string(mm, "subPathExpr", "`subPathExpr`")?
                        .filter(|p| !p.is_empty()),
                };
                mounts.push(mount);
            }
        }
        Ok(mounts)
    }

    fn value_from(
        &self,
        from: &Node,
        limits_memory: Option<&Lined<Quantity>>,
        requests_memory: Option<&Lined<Quantity>>,
        limits_ephemeral: Option<&Lined<Quantity>>,
    ) -> Result<EnvValue, Box<ManifestError>> {
        if let Some(r) = from.get("resourceFieldRef") {
            let r_map = self.map(r, "`resourceFieldRef`")?;
            let resource = self
                .opt_string(r_map, "resource", "`resourceFieldRef.resource`")?
                .unwrap_or_default();
            let divisor = match r_map.get("divisor") {
                Some(d) => self.quantity(d, "`resourceFieldRef.divisor`")?.value.value.max(1),
                None => 1,
            };
            let set = match resource.as_str() {
                "limits.memory" => limits_memory,
                "requests.memory" => requests_memory.or(limits_memory),
                "limits.ephemeral-storage" => limits_ephemeral,
                _ => None,
            };
            // The kubelet divides and rounds up (resource.ExtractContainerResourceValue).
            let value = set.map(|q| q.value.value.div_ceil(divisor).to_string());
            return Ok(match value {
                Some(v) => EnvValue::Resource {
                    resource,
                    value: Some(v),
                },
                None => EnvValue::Unknown {
                    why: format!(
                        "`resourceFieldRef: {resource}` of a resource the container does not set (the kubelet gives the node's allocatable)"
                    ),
                },
            });
        }
        let why = if let Some(s) = from.get("secretKeyRef") {
            format!(
                "from the secret `{}`",
                s.value
                    .get("name")
                    .and_then(|n| n.value.scalar_text())
                    .unwrap_or_default()
            )
        } else if let Some(s) = from.get("configMapKeyRef") {
            format!(
                "from the config map `{}`",
                s.value
                    .get("name")
                    .and_then(|n| n.value.scalar_text())
                    .unwrap_or_default()
            )
        } else if let Some(s) = from.get("fieldRef") {
            format!(
                "from the pod field `{}`",
                s.value
                    .get("fieldPath")
                    .and_then(|n| n.value.scalar_text())
                    .unwrap_or_default()
            )
        } else {
            "from a source memlint does not read".to_string()
        };
        Ok(EnvValue::Unknown { why })
    }
}

/// execve(2) refuses an argument or environment string longer than MAX_ARG_STRLEN, 32 pages
/// (128 KiB) on Linux: a value `$(VAR)` references grow past it (each may double it) cannot
/// reach the program, and is undecided.
pub(crate) const MAX_ARG_STRLEN: usize = 128 << 10;
/// execve(2) refuses argv and envp together past ARG_MAX, a quarter of the stack limit: about
/// 2 MiB under the usual 8 MiB. A container's env values and command words, once expanded,
/// past it are undecided: no pod starts with more.
pub(crate) const MAX_CONTAINER_ARGS: usize = 2 << 20;
/// What `$(VAR)` references may add to the values of all the manifests of a run, together:
/// 2 MiB a container for eight containers. Real references add a few bytes; a 295 KB manifest
/// of containers that each double a value 20 times would otherwise take gigabytes.
pub(crate) const MAX_RUN_EXPANSION: usize = 16 << 20;

/// What `$(VAR)` expansion may still produce: for this container, and for the run.
/// The index in a container's env of the last entry of each name.
type EnvIndex = HashMap<String, usize>;

/// A workload's pod spec, its path for messages, and the pod template it is in.
type PodSpec<'d> = (&'d Spanned<Node>, String, Option<&'d Node>);

/// What a container asks of the node's memory and disk, as its `resources` say.
struct ContainerResources {
    limits_memory: Option<Lined<Quantity>>,
    requests_memory: Option<Lined<Quantity>>,
    limits_ephemeral_storage: Option<Lined<Quantity>>,
    hugepages: Vec<HugePages>,
}

struct Expansion {
    container_left: usize,
    run_left: usize,
}

/// The env entries before a value, by name (the last of each), and the container's `envFrom`
/// sources.
struct Refs<'a> {
    env: &'a [EnvEntry],
    by_name: &'a std::collections::HashMap<String, usize>,
    env_from: &'a [String],
}

/// `$(VAR)` expanded from the entries before it, as the kubelet does (`$$` is a `$`; a
/// reference to a variable not defined stays as written). `Err` says why the value is not
/// known: it refers to a variable whose value the manifest does not hold (a secret, a config
/// map, an `envFrom` source that may define it), or it passes one of the bounds execve sets
/// ([`MAX_ARG_STRLEN`] for the value, [`MAX_CONTAINER_ARGS`] with the container's other values)
/// or what expansion may add in a run ([`MAX_RUN_EXPANSION`]). `overhead` is what execve counts
/// besides the value (`NAME=` and a NUL, or a NUL).
fn expand_refs(s: &str, refs: &Refs, budget: &mut Expansion, overhead: usize) -> Result<String, String> {
    let value = expand_within(s, refs, budget, overhead)?;
    budget.container_left -= value.len() + overhead;
    budget.run_left = budget
        .run_left
        .saturating_sub(value.len().saturating_sub(s.len()));
    Ok(value)
}

fn expand_within(s: &str, refs: &Refs, budget: &Expansion, overhead: usize) -> Result<String, String> {
    let past_container = || {
        format!(
            "with the container's other env values and arguments it passes {} MiB, more than execve passes to a program (ARG_MAX)",
            MAX_CONTAINER_ARGS >> 20
        )
    };
    let container_max = budget
        .container_left
        .checked_sub(overhead)
        .ok_or_else(past_container)?;
    // What references may add here: the run's budget left.
    let run_max = s.len().saturating_add(budget.run_left);
    let check = |len: usize| -> Result<(), String> {
        if len > MAX_ARG_STRLEN {
            Err(format!(
                "it passes {} KiB once its `$(VAR)` references are expanded, longer than any value execve passes to a program (MAX_ARG_STRLEN)",
                MAX_ARG_STRLEN >> 10
            ))
        } else if len > container_max {
            Err(past_container())
        } else if len > run_max {
            Err(format!(
                "its `$(VAR)` references expand it after the manifests' references have added {} MiB, more than memlint follows",
                MAX_RUN_EXPANSION >> 20
            ))
        } else {
            Ok(())
        }
    };
    check(s.len())?;
    let (env, env_from) = (refs.env, refs.env_from);
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) => {
                    let name = &inner[..end];
                    match refs.by_name.get(name).and_then(|&i| env.get(i)).map(|e| &e.value) {
                        Some(EnvValue::Value { value }) | Some(EnvValue::Resource { value: Some(value), .. }) => {
                            out.push_str(value)
                        }
                        Some(EnvValue::Unknown { why }) => return Err(format!("it refers to $({name}), {why}")),
                        Some(EnvValue::Resource { value: None, resource }) => {
                            return Err(format!("it refers to $({name}), `resourceFieldRef: {resource}` of a resource the container does not set"))
                        }
                        None if !env_from.is_empty() => {
                            return Err(format!("it refers to $({name}), which {} may define", env_from.join(", ")))
                        }
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &inner[end + 1..];
                }
                None => {
                    out.push('$');
                    rest = after;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
        check(out.len())?;
    }
    out.push_str(rest);
    check(out.len())?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> Result<Manifests, Box<ManifestError>> {
        read(&[Input {
            file: "m.yaml".to_string(),
            text: text.to_string(),
        }])
    }

    const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: shop
spec:
  template:
    spec:
      volumes:
        - name: cache
          emptyDir:
            medium: Memory
            sizeLimit: 256Mi
      initContainers:
        - name: migrate
          image: app:1
      containers:
        - name: app
          image: registry.local/app:1
          command: ["java"]
          args: ["-Xmx$(HEAP)", "-jar", "app.jar", "$$(HOME)"]
          env:
            - name: HEAP
              value: 2g
            - name: LIMIT
              valueFrom:
                resourceFieldRef:
                  resource: limits.memory
                  divisor: 1Mi
            - name: PASSWORD
              valueFrom:
                secretKeyRef: {name: db, key: password}
          resources:
            limits:
              memory: 2Gi
              ephemeral-storage: 1Gi
          volumeMounts:
            - name: cache
              mountPath: /app/.next/cache
---
apiVersion: v1
kind: Service
metadata: {name: api}
spec:
  template: "not a pod"
"#;

    #[test]
    fn a_deployment() {
        let m = read_text(DEPLOYMENT).unwrap();
        assert_eq!(m.containers.len(), 2);
        let init = &m.containers[0];
        assert!(init.workload.init);
        let app = &m.containers[1];
        assert_eq!(app.workload.kind, "Deployment");
        assert_eq!(app.workload.namespace.as_deref(), Some("shop"));
        assert_eq!(
            (app.workload.name.as_str(), app.workload.container.as_str()),
            ("api", "app")
        );
        assert_eq!(app.workload.line, 19);
        assert_eq!(
            app.args.as_ref().unwrap().value,
            ["-Xmx2g", "-jar", "app.jar", "$(HOME)"]
        );
        assert_eq!(app.limits_memory.as_ref().unwrap().value.value, 2 << 30);
        assert_eq!(app.limits_memory.as_ref().unwrap().line, 35);
        assert_eq!(
            app.env[1].value,
            EnvValue::Resource {
                resource: "limits.memory".into(),
                value: Some("2048".into())
            }
        );
        assert!(matches!(app.env[2].value, EnvValue::Unknown { .. }));
        assert!(app.mounts[0].memory_backed);
        assert_eq!(app.mounts[0].size_limit.as_ref().unwrap().value, 256 << 20);
        assert_eq!(m.skipped.len(), 1);
        assert_eq!(m.skipped[0].kind, "Service");
    }

    #[test]
    fn mounts_with_their_lines_host_ipc_hugepages_and_claim_templates() {
        let m = read_text(
            "kind: StatefulSet
metadata: {name: db}
spec:
  template:
    spec:
      hostIPC: true
      containers:
      - name: pg
        image: postgres:15
        resources:
          limits: {memory: 2Gi, hugepages-2Mi: 512Mi}
          requests: {hugepages-2Mi: 512Mi}
        volumeMounts:
        - name: data
          mountPath: /var/lib/postgresql/data
        - name: dshm
          mountPath: /dev/shm
          readOnly: true
          subPath: shm
      volumes:
      - name: dshm
        emptyDir: {medium: Memory, sizeLimit: 1Gi}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {resources: {requests: {storage: 1Gi}}}
",
        )
        .unwrap();
        let c = &m.containers[0];
        assert!(c.host_ipc);
        let pages: Vec<_> = c
            .hugepages
            .iter()
            .map(|h| (h.page_size.as_str(), h.of, h.quantity.value, h.line))
            .collect();
        assert_eq!(
            pages,
            [
                ("2Mi", "limits", 512 << 20, 11),
                ("2Mi", "requests", 512 << 20, 12)
            ]
        );
        let data = &c.mounts[0];
        assert!(!data.memory_backed && !data.disk_empty_dir, "{data:?}");
        assert_eq!(
            (data.volume_line, data.mount_line, data.read_only),
            (None, 14, false)
        );
        let shm = &c.mounts[1];
        assert!(shm.memory_backed && shm.read_only);
        assert_eq!(shm.sub_path.as_deref(), Some("shm"));
        assert_eq!((shm.volume_line, shm.mount_line), (Some(21), 16));
        let e = read_text("kind: Pod\nspec:\n  hostIPC: yes please\n  containers: [{name: c, image: x}]\n")
            .unwrap_err();
        assert_eq!(e.line, Some(3));
    }

    #[test]
    fn kinds_and_lists() {
        let text = "kind: List\nitems:\n- kind: CronJob\n  metadata: {name: nightly}\n  spec:\n    jobTemplate:\n      spec:\n        template:\n          spec:\n            containers: [{name: job, image: busybox}]\n- kind: Pod\n  metadata: {name: p}\n  spec:\n    containers: [{name: c, image: alpine}]\n";
        let m = read_text(text).unwrap();
        let names: Vec<_> = m
            .containers
            .iter()
            .map(|c| (c.workload.kind.as_str(), c.image.as_str()))
            .collect();
        assert_eq!(names, [("CronJob", "busybox"), ("Pod", "alpine")]);
    }

    #[test]
    fn wrong_types_and_templates_name_the_line() {
        let e = read_text("kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: x\n    env:\n    - name: A\n      value: 1\n").unwrap_err();
        assert_eq!(e.line, Some(9));
        assert!(e.message.contains("must be a string"), "{}", e.message);
        let e = read_text("kind: Pod\nspec:\n  containers:\n  - name: c\n    image: x\n    resources: {limits: {memory: 2GB}}\n").unwrap_err();
        assert_eq!(e.line, Some(6));
        let e = read_text(
            "kind: Pod\nspec:\n  containers:\n{{- range .Values.c }}\n  - image: {{ .image }}\n{{- end }}\n",
        )
        .unwrap_err();
        assert!(e.help.contains("helm template"), "{}", e.help);
        let e =
            read_text("kind: Pod\nspec:\n  containers:\n  - image: \"{{ .Values.image }}\"\n").unwrap_err();
        assert!(e.help.contains("helm template"), "{}", e.help);
        assert_eq!(e.line, Some(4));
    }

    #[test]
    fn references_the_manifest_cannot_resolve_are_unknown() {
        let pod = |extra: &str| {
            read_text(&format!(
                "kind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n  - name: c\n    image: x\n{extra}"
            ))
            .unwrap()
            .containers
            .remove(0)
        };
        // From a config map, or a name an envFrom source may define: unknown, not `$(L)`.
        let c = pod("    envFrom: [{configMapRef: {name: conf}}]\n    env:\n    - {name: GOMEMLIMIT, value: \"$(L)\"}\n");
        assert!(
            matches!(&c.env[0].value, EnvValue::Unknown { why } if why.contains("configMapRef `conf`")),
            "{:?}",
            c.env[0]
        );
        let c = pod("    env:\n    - name: L\n      valueFrom: {configMapKeyRef: {name: conf, key: l}}\n    - {name: GOMEMLIMIT, value: \"$(L)\"}\n");
        assert!(matches!(c.env[1].value, EnvValue::Unknown { .. }));
        // A command word with one is kept as written, and said to be unresolved.
        let c = pod("    command: [java, \"-Xmx$(HEAP)\"]\n    env:\n    - name: HEAP\n      valueFrom: {secretKeyRef: {name: s, key: k}}\n");
        assert_eq!(c.command.as_ref().unwrap().value, ["java", "-Xmx$(HEAP)"]);
        assert!(
            c.unresolved_args[0].contains("-Xmx$(HEAP)") && c.unresolved_args[0].contains("secret `s`"),
            "{:?}",
            c.unresolved_args
        );
        // Undefined with no envFrom: the kubelet leaves it as written.
        let c = pod("    env:\n    - {name: A, value: \"$(NOPE)\"}\n");
        assert_eq!(
            c.env[0].value,
            EnvValue::Value {
                value: "$(NOPE)".into()
            }
        );
        // `value: \"\"` beside valueFrom: the kubelet takes valueFrom.
        let c = pod("    resources: {limits: {memory: 1Gi}}\n    env:\n    - name: M\n      value: \"\"\n      valueFrom: {resourceFieldRef: {resource: limits.memory}}\n");
        assert_eq!(
            c.env[0].value,
            EnvValue::Resource {
                resource: "limits.memory".into(),
                value: Some("1073741824".into())
            }
        );
        // Each reference may double a value: bounded.
        let mut env = String::from("    env:\n    - {name: A0, value: xxxxxxxx}\n");
        for i in 1..40 {
            env.push_str(&format!(
                "    - {{name: A{i}, value: \"$(A{})$(A{})\"}}\n",
                i - 1,
                i - 1
            ));
        }
        let c = pod(&env);
        assert!(matches!(&c.env[39].value, EnvValue::Unknown { why } if why.contains("MAX_ARG_STRLEN")));
        // The longest value execve passes is kept: 2^14 × 8 bytes.
        assert!(matches!(&c.env[14].value, EnvValue::Value { value } if value.len() == 128 << 10));
        assert!(matches!(&c.env[15].value, EnvValue::Unknown { .. }));
    }

    /// A container's values past ARG_MAX together, and a run's expansion past its budget, are
    /// unknown with the bound; a later entry of a name is the one `$(NAME)` reads.
    #[test]
    fn expansion_budgets_per_container_and_per_run() {
        let doubled = |copies: usize| {
            let mut env = String::from("    env:\n    - {name: A0, value: xxxxxxxx}\n");
            for i in 1..14 {
                env.push_str(&format!(
                    "    - {{name: A{i}, value: \"$(A{})$(A{})\"}}\n",
                    i - 1,
                    i - 1
                ));
            }
            for i in 0..copies {
                env.push_str(&format!("    - {{name: B{i}, value: \"$(A13)\"}}\n"));
            }
            env
        };
        let pod = |name: &str, env: &str| {
            format!("---\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n  - name: c\n    image: x\n    args: [\"$(A13)\"]\n{env}")
        };
        let m = read_text(&pod("p", &doubled(40))).unwrap();
        let c = &m.containers[0];
        let unknown = |name: &str| match &c.env.iter().find(|e| e.name == name).unwrap().value {
            EnvValue::Unknown { why } => why.clone(),
            v => panic!("{name} is known: {:?}", std::mem::discriminant(v)),
        };
        assert!(matches!(&c.env[14].value, EnvValue::Value { .. }));
        let why = unknown("B39");
        assert!(why.contains("2 MiB") && why.contains("ARG_MAX"), "{why}");
        // The args come after the env, past the container's budget too.
        assert_eq!(c.args.as_ref().unwrap().value, ["$(A13)"]);
        assert!(
            c.unresolved_args[0].contains("ARG_MAX"),
            "{:?}",
            c.unresolved_args
        );
        // Across containers: the run's expansion budget.
        let text: String = (0..30).map(|i| pod(&format!("p{i}"), &doubled(10))).collect();
        let m = read_text(&text).unwrap();
        let last = m.containers.last().unwrap();
        assert!(
            matches!(&last.env[13].value, EnvValue::Unknown { why } if why.contains("16 MiB")),
            "{:?}",
            std::mem::discriminant(&last.env[13].value)
        );
        assert!(matches!(&m.containers[0].env[13].value, EnvValue::Value { .. }));
        // The last entry of a name is the one a reference reads.
        let m = read_text(&pod("q", "    env:\n    - {name: XV, value: a}\n    - {name: XV, value: b}\n    - {name: YV, value: \"$(XV)\"}\n")).unwrap();
        assert_eq!(
            m.containers[0].env[2].value,
            EnvValue::Value { value: "b".into() }
        );
    }

    #[test]
    fn a_custom_resource_with_a_workload_kind_is_skipped_with_a_warning() {
        // Volcano's Job: `spec.tasks[].template`, no `spec.template`; a `spec.template` of
        // another shape (a string here) would fail the run if it were read as batch/v1.
        let m = read_text("apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: train}\nspec:\n  template: not-a-pod\n  tasks:\n  - replicas: 2\n    template:\n      spec:\n        containers: [{name: w, image: trainer}]\n---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: real}\nspec:\n  template:\n    spec:\n      containers: [{name: w, image: app}]\n").unwrap();
        assert_eq!(m.containers.len(), 1);
        assert_eq!(m.containers[0].workload.name, "real");
        assert_eq!(m.skipped.len(), 1);
        assert_eq!(m.skipped[0].kind, "Job (batch.volcano.sh/v1alpha1)");
        assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
        assert!(m.warnings[0].contains("custom resource"), "{}", m.warnings[0]);
        // The same shape under Kubernetes' own group is Kubernetes' to refuse.
        assert!(read_text(
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template: not-a-pod\n"
        )
        .is_err());
    }

    #[test]
    fn patches_and_other_yaml_are_skipped_not_fatal() {
        let m = read_text("- hosts: all\n  tasks: []\n---\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: 3\n---\nkind: Deployment\nmetadata: {name: e}\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        env: [{name: A, value: b}]\n").unwrap();
        assert!(m.containers.is_empty());
        assert_eq!(m.skipped.len(), 1);
        assert_eq!(m.warnings.len(), 2, "{:?}", m.warnings);
        let deep = format!(
            "kind: CustomThing\nspec:\n{}x: 1\n",
            (1..100)
                .map(|i| format!("{}a{i}:\n", "  ".repeat(i)))
                .collect::<String>()
                + &"  ".repeat(100)
        );
        assert!(read_text(&deep).is_ok());
        let deeper = format!(
            "kind: CustomThing\nspec: {}{}\n",
            "[".repeat(400),
            "]".repeat(400)
        );
        assert!(read_text(&deeper).is_err());
    }

    #[test]
    fn milli_memory_is_reported() {
        let m = read_text(
            "kind: Pod\nspec:\n  containers:\n  - image: x\n    resources: {limits: {memory: 500m}}\n",
        )
        .unwrap();
        assert_eq!(m.warnings.len(), 1);
        assert!(m.warnings[0].contains("500Mi"), "{}", m.warnings[0]);
    }
}
