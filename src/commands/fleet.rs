//! `memlint lint --k8s PATH`: the images a set of Kubernetes manifests runs, each read once
//! (`--parallel` at a time, through the layer cache), linted once per container that runs it
//! with that container's command, env and limits; `--shard I/N` takes a stable share of the
//! distinct images.

use crate::cli::{FailOn, LintArgs, LintFormat, Shard};
use crate::error::{Error, ManifestError, Result};
use crate::facts;
use crate::image::Image;
use crate::k8s::{self, Container, Input};
use crate::locate::DockerfileContext;
use crate::reference::Reference;
use crate::report::lint::{LintReport, ReportContext};
use crate::report::sarif::{self, SarifOptions};
use crate::report::text::{self, TextOptions};
use crate::report::{github, gitlab, junit};
use crate::rules;
use crate::settings::{self, Settings};
use crate::sources::{self, ConfigInterests, ProgressMode};
use crate::untrusted::line;
use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

/// The most all `--k8s` inputs together may hold: they are parsed in memory.
const MAX_MANIFESTS_BYTES: u64 = 256 << 20;

/// Images read at once unless `--parallel` says otherwise.
const DEFAULT_PARALLEL: usize = 2;

/// A manifest file as read, with the path SARIF gives it.
struct ManifestFile {
    /// Repository-relative, `/`-separated (for SARIF and annotations).
    artifact: String,
}

/// One distinct image of the manifests: how the manifests spell it, where it is read from,
/// and the containers that run it.
struct Wanted {
    /// The manifests' reference, normalised (`docker.io/library/nginx:latest`).
    key: String,
    /// The reference memlint reads (`registry:nginx`, or an `--image` SOURCE).
    source: String,
    containers: Vec<usize>,
}

/// A container whose image could not be read.
struct Unread {
    container: usize,
    source: String,
    code: String,
    message: String,
}

pub(crate) fn run(
    args: &LintArgs,
    settings: &Settings,
    df_ctx: Option<&DockerfileContext>,
    fail_on: FailOn,
    mut options: sources::Options,
    color: bool,
) -> Result<ExitCode> {
    let (inputs, files) = read_inputs(args)?;
    let manifests = k8s::read(&inputs).map_err(|e| manifest_error(*e))?;
    drop(inputs);
    for w in &manifests.warnings {
        super::eprint_line(&format!("memlint: warning: {}", line(w)));
    }
    if args.verbose {
        for s in &manifests.skipped {
            super::eprint_line(&line(&format!(
                "memlint: {}:{}: {} `{}` skipped: not a workload memlint lints",
                s.file, s.line, s.kind, s.name
            )));
        }
    }
    // Each container with the reference a registry reads for its image: the manifests, the
    // --image stand-ins and the image arguments are matched by it.
    let keyed: Vec<(String, Container)> = manifests
        .containers
        .into_iter()
        .map(|c| (normalise(&c.image), c))
        .collect();
    let stand_ins: Vec<(String, &str)> = args
        .image_map
        .iter()
        .map(|(r, s)| (normalise(r), s.as_str()))
        .collect();
    // An --image that no container runs is a typo or a stale manifest: linting the registry's
    // image in its place would pass a check that never saw the new build.
    for ((reference, source), (key, _)) in args.image_map.iter().zip(&stand_ins) {
        if !keyed.iter().any(|(k, _)| k == key) {
            let mut run: Vec<&str> = keyed.iter().map(|(_, c)| c.image.as_str()).collect();
            run.sort_unstable();
            run.dedup();
            return Err(Error::BadArgument {
                what: format!("--image {reference}={source}"),
                help: format!(
                    "no container of the manifests runs `{reference}`; they run: {}",
                    if run.is_empty() {
                        "nothing".to_string()
                    } else {
                        run.join(", ")
                    }
                ),
            });
        }
    }
    let wanted_refs: Vec<String> = args.images.iter().map(|i| normalise(i)).collect();
    let (keys, containers): (Vec<String>, Vec<Container>) = keyed
        .into_iter()
        .filter(|(k, _)| wanted_refs.is_empty() || wanted_refs.contains(k))
        .unzip();
    let mut by_key: BTreeMap<String, Wanted> = BTreeMap::new();
    for (i, (key, c)) in keys.into_iter().zip(&containers).enumerate() {
        let source = stand_ins
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, s)| s.to_string())
            .unwrap_or_else(|| format!("registry:{}", c.image));
        by_key
            .entry(key.clone())
            .or_insert(Wanted {
                key,
                source,
                containers: Vec::new(),
            })
            .containers
            .push(i);
    }
    let mut wanted: Vec<Wanted> = by_key.into_values().collect();
    if let Some(shard) = args.shard {
        wanted.retain(|w| in_shard(&w.key, shard));
    }
    if containers.is_empty() {
        super::eprint_line("memlint: the manifests run no containers (kinds memlint lints: Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob, List)");
    }
    let parallel = args
        .parallel
        .unwrap_or(DEFAULT_PARALLEL)
        .max(1)
        .min(wanted.len().max(1));
    // Layer progress bars of several images at once would tangle: one line per image instead.
    if parallel > 1 || options.progress == ProgressMode::Lines {
        options.progress = ProgressMode::Off;
    }
    let ctx = ReportContext {
        settings,
        dockerfile: df_ctx,
        artifact: &args.sarif_artifact,
        today: settings::today(),
    };
    let mut formats: Vec<(LintFormat, bool)> = vec![(args.format, color && args.format == LintFormat::Text)];
    formats.extend(args.outputs.iter().map(|(f, _)| (*f, false)));
    let plan = Plan {
        containers: &containers,
        files: &files,
        ctx: &ctx,
        formats: &formats,
        several: wanted.iter().map(|w| w.containers.len()).sum::<usize>() > 1,
        text_options: TextOptions {
            color: false,
            quiet: args.quiet,
            verbose: args.verbose,
            show_ignored: args.show_ignored,
        },
        category: args.category.as_deref(),
        fail_on,
        image_lines: !args.quiet,
    };
    let (mut rendered, mut unread) = lint_images(&wanted, &plan, &options, parallel);
    rendered.sort_by(|a, b| order(Some(&containers[a.container]), Some(&containers[b.container])));
    unread.sort_by(|a, b| order(Some(&containers[a.container]), Some(&containers[b.container])));

    let render = |format: LintFormat, color: bool, w: &mut dyn Write| -> std::io::Result<()> {
        match format {
            LintFormat::Json => json(w, &rendered, &unread, &containers, fail_on),
            LintFormat::Text => text_all(w, &rendered, &unread, &containers, color, args.quiet),
            LintFormat::Sarif => crate::untrusted::write_json(
                w,
                &sarif::document(rendered.iter().filter_map(|r| r.sarif.clone()).collect()),
            ),
            LintFormat::Github => {
                for r in &rendered {
                    if let Some(g) = &r.github {
                        w.write_all(g)?;
                    }
                }
                Ok(())
            }
            LintFormat::Gitlab => crate::untrusted::write_json(
                w,
                &serde_json::Value::Array(
                    rendered
                        .iter()
                        .flat_map(|r| r.gitlab.iter().flatten().cloned())
                        .collect(),
                ),
            ),
            LintFormat::Junit => {
                let suites: Vec<&junit::Suite> = rendered.iter().filter_map(|r| r.junit.as_ref()).collect();
                let unread_junit: Vec<junit::Unread> = unread
                    .iter()
                    .map(|u| junit::Unread {
                        reference: format!("{} ({})", u.source, describe(&containers[u.container])),
                        code: u.code.clone(),
                        message: u.message.clone(),
                    })
                    .collect();
                junit::write_suites(w, &suites, &unread_junit)
            }
        }
    };
    super::emit_formats(args.output.as_deref(), args.format, &args.outputs, color, render)?;
    if !unread.is_empty() {
        let mut failed: Vec<&str> = unread.iter().map(|u| u.source.as_str()).collect();
        failed.sort_unstable();
        failed.dedup();
        super::eprint_line(&line(&format!(
            "memlint: {} container(s) not linted: their image could not be read ({})",
            unread.len(),
            failed.join(", ")
        )));
        return Ok(ExitCode::from(2));
    }
    Ok(super::exit_for(
        fail_on,
        rendered.iter().filter_map(|r| r.worst).max(),
    ))
}

/// What every image's worker needs to lint and render its containers.
struct Plan<'a> {
    containers: &'a [Container],
    files: &'a BTreeMap<String, ManifestFile>,
    ctx: &'a ReportContext<'a>,
    /// The formats asked for (`--format`, each `-o`), and whether that text is in colour.
    formats: &'a [(LintFormat, bool)],
    /// More than one report in the run (SARIF categories, GitLab fingerprints).
    several: bool,
    text_options: TextOptions,
    category: Option<&'a str>,
    fail_on: FailOn,
    image_lines: bool,
}

/// One container's report, rendered in every format asked for while its image was in memory:
/// the image goes once its containers are done, so a fleet holds `--parallel` images at most.
struct Rendered {
    container: usize,
    json: serde_json::Value,
    /// Text, plain and in colour.
    text: [Option<Vec<u8>>; 2],
    sarif: Option<serde_json::Value>,
    github: Option<Vec<u8>>,
    gitlab: Option<Vec<serde_json::Value>>,
    junit: Option<junit::Suite>,
    worst: Option<crate::finding::Severity>,
    counts: [usize; 3],
}

impl Plan<'_> {
    fn render(&self, ci: usize, image: &Image, shared: &facts::PerImage) -> std::io::Result<Rendered> {
        use crate::finding::Severity;
        let c = &self.containers[ci];
        let f = facts::derive_for(image, Some(c), shared);
        let artifact = self
            .files
            .get(&c.workload.file)
            .map(|m| m.artifact.as_str())
            .unwrap_or(self.ctx.artifact);
        let r = LintReport::new(image, &f, rules::run(&f), self.ctx).in_container(
            c,
            artifact,
            self.ctx.dockerfile.is_some(),
        );
        let wants = |format: LintFormat| self.formats.iter().any(|(f, _)| *f == format);
        let mut text_parts: [Option<Vec<u8>>; 2] = [None, None];
        for (format, color) in self.formats {
            if *format == LintFormat::Text && text_parts[usize::from(*color)].is_none() {
                let mut out = Vec::new();
                writeln!(out, "== {}", line(&describe(c)))?;
                text::write(
                    &mut out,
                    &r,
                    TextOptions {
                        color: *color,
                        ..self.text_options
                    },
                )?;
                text_parts[usize::from(*color)] = Some(out);
            }
        }
        let github = if wants(LintFormat::Github) {
            let mut out = Vec::new();
            github::write(&mut out, std::slice::from_ref(&r))?;
            Some(out)
        } else {
            None
        };
        let junit = if wants(LintFormat::Junit) {
            Some(junit::suite_of(&r, self.fail_on)?)
        } else {
            None
        };
        Ok(Rendered {
            container: ci,
            json: r.json(),
            text: text_parts,
            sarif: wants(LintFormat::Sarif).then(|| {
                sarif::run(
                    &r,
                    &SarifOptions {
                        category: self.category,
                    },
                    self.several,
                )
            }),
            github,
            gitlab: wants(LintFormat::Gitlab).then(|| gitlab::issues_of(&r, self.several)),
            junit,
            worst: r.worst(),
            counts: [
                r.count(Severity::Error),
                r.count(Severity::Warning),
                r.count(Severity::Note),
            ],
        })
    }
}

/// Reports in manifest order: file, then line, then what tells two containers on one line apart
/// (`containers: [{…}, {…}]`). `merge` sorts by the same key from the JSON.
fn order(a: Option<&Container>, b: Option<&Container>) -> std::cmp::Ordering {
    let key = |c: Option<&Container>| {
        c.map(|c| {
            let w = &c.workload;
            (
                w.file.clone(),
                w.line,
                w.kind.clone(),
                w.namespace.clone().unwrap_or_default(),
                w.name.clone(),
                w.container.clone(),
            )
        })
    };
    key(a).cmp(&key(b))
}

/// `Deployment shop/api, container app (deploy.yaml:19)`.
fn describe(c: &Container) -> String {
    let w = &c.workload;
    let ns = w
        .namespace
        .as_deref()
        .map(|n| format!("{n}/"))
        .unwrap_or_default();
    format!(
        "{} {ns}{}, {}container {} ({}:{})",
        w.kind,
        w.name,
        if w.init { "init " } else { "" },
        w.container,
        w.file,
        w.line
    )
}

/// The manifests' reference as a registry reads it: `nginx` is `docker.io/library/nginx:latest`.
pub(crate) fn normalise(reference: &str) -> String {
    let bare = reference.strip_prefix("registry:").unwrap_or(reference);
    sources::registry::parse_reference(bare)
        .map(|r| r.whole())
        .unwrap_or_else(|_| bare.to_string())
}

/// Whether an image falls in `shard`: by a hash of its normalised reference, the same on every
/// run and every machine.
pub(crate) fn in_shard(key: &str, shard: Shard) -> bool {
    let digest = crate::digest::Digest::of(key.as_bytes());
    let hex = digest.hex();
    let n = u64::from_str_radix(&hex[..16], 16).unwrap_or(0);
    n % u64::from(shard.count) == u64::from(shard.index - 1)
}

/// The manifest texts of every `--k8s` argument, and each file's SARIF path.
fn read_inputs(args: &LintArgs) -> Result<(Vec<Input>, BTreeMap<String, ManifestFile>)> {
    let mut inputs: Vec<Input> = Vec::new();
    let mut files = BTreeMap::new();
    let mut stdin_read = false;
    let mut total: u64 = 0;
    for given in &args.k8s {
        let paths = k8s::expand(given).map_err(|e| Error::io(given.display(), e))?;
        if paths.is_empty() {
            return Err(Error::BadArgument {
                what: format!("--k8s {}", given.display()),
                help: "the folder holds no *.yaml or *.yml file".to_string(),
            });
        }
        for p in paths {
            let (file, text, artifact) = match p {
                None => {
                    if stdin_read {
                        return Err(Error::BadArgument {
                            what: "--k8s - given twice".to_string(),
                            help: "standard input is read once: give `--k8s -` once".to_string(),
                        });
                    }
                    stdin_read = true;
                    let bytes =
                        crate::user_file::read_stream(std::io::stdin().lock(), k8s::MAX_MANIFEST_BYTES)
                            .map_err(|e| Error::user_file("standard input", e))?;
                    let text = String::from_utf8(bytes).map_err(|_| Error::BadArgument {
                        what: "--k8s - (standard input is not UTF-8 text)".to_string(),
                        help: "pipe in the rendered YAML, e.g. `helm template RELEASE CHART | memlint lint --k8s -`".to_string(),
                    })?;
                    // SARIF needs a file: --sarif-artifact names the rendering.
                    ("-".to_string(), text, args.sarif_artifact.clone())
                }
                Some(path) => {
                    let text = crate::user_file::read_to_string(&path, k8s::MAX_MANIFEST_BYTES)
                        .map_err(|e| Error::user_file(path.display(), e))?;
                    let shown = path.to_string_lossy().replace('\\', "/");
                    // Outside the repository: the file's name, which SARIF can hold.
                    let name = path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_else(|| args.sarif_artifact.clone());
                    let artifact = super::repo_relative_or(&path, &name);
                    (shown, text, artifact)
                }
            };
            total += text.len() as u64;
            if total > MAX_MANIFESTS_BYTES {
                return Err(Error::BadArgument {
                    what: format!("--k8s (more than {} MiB of manifests)", MAX_MANIFESTS_BYTES >> 20),
                    help: "lint the folders in several runs".to_string(),
                });
            }
            files.insert(file.clone(), ManifestFile { artifact });
            inputs.push(Input { file, text });
        }
    }
    Ok((inputs, files))
}

fn manifest_error(e: k8s::ManifestError) -> Error {
    let span = e.line.map(|l| {
        let start: usize = e
            .text
            .split_inclusive('\n')
            .take(l.saturating_sub(1) as usize)
            .map(str::len)
            .sum();
        let rest = &e.text[start.min(e.text.len())..];
        let len = rest.find('\n').unwrap_or(rest.len());
        // The parser counts columns in characters; the span is in bytes.
        let chars = e.column.map(|c| c.saturating_sub(1) as usize).unwrap_or(0);
        let col = rest[..len].char_indices().nth(chars).map_or(len, |(b, _)| b);
        miette::SourceSpan::from((start + col, len - col))
    });
    let name = if e.file == "-" {
        "standard input".to_string()
    } else {
        e.file.clone()
    };
    let message = match e.line {
        Some(l) => format!("{} (line {l})", e.message),
        None => e.message,
    };
    Error::Manifest(Box::new(ManifestError {
        message,
        help: e.help,
        src: miette::NamedSource::new(name, e.text),
        span,
    }))
}

/// Reads each wanted image once, `parallel` at a time, and renders the reports of the
/// containers that run it before letting it go.
fn lint_images(
    wanted: &[Wanted],
    plan: &Plan,
    options: &sources::Options,
    parallel: usize,
) -> (Vec<Rendered>, Vec<Unread>) {
    let next = Mutex::new(0usize);
    let done: Mutex<(Vec<Rendered>, Vec<Unread>)> = Mutex::new((Vec::new(), Vec::new()));
    let total = wanted.len();
    std::thread::scope(|scope| {
        for _ in 0..parallel {
            scope.spawn(|| loop {
                let i = {
                    let Ok(mut n) = next.lock() else { return };
                    let i = *n;
                    *n += 1;
                    i
                };
                let Some(w) = wanted.get(i) else { return };
                let mine: Vec<Container> = w.containers.iter().map(|&c| plan.containers[c].clone()).collect();
                let mut opts = options.clone();
                // What the image's own config needs, and what each container's command and env
                // make its entrypoint read.
                opts.config_interests = Some(ConfigInterests(Arc::new(move |config| {
                    let mut all = facts::interests_for(config);
                    for c in &mine {
                        all = all.union(facts::interests_for(&facts::container::config_with_env(
                            Some(config),
                            c,
                        )));
                    }
                    all
                })));
                let read = Reference::parse(&w.source).and_then(|r| sources::open(&w.source, &r, &opts));
                let mut rendered = Vec::new();
                let mut failed = Vec::new();
                let status = match read {
                    Ok(image) => {
                        // One search budget for the image, and its entrypoint followed once
                        // per distinct command and env.
                        let shared = facts::PerImage::default();
                        for &ci in &w.containers {
                            match plan.render(ci, &image, &shared) {
                                Ok(r) => rendered.push(r),
                                Err(e) => failed.push(Unread {
                                    container: ci,
                                    source: w.source.clone(),
                                    code: "memlint::output".to_string(),
                                    message: format!("its report could not be written: {e}"),
                                }),
                            }
                        }
                        format!("read ({}, {} layer(s))", image.platform, image.layers.len())
                    }
                    Err(e) => {
                        let code = miette::Diagnostic::code(&e)
                            .map(|c| c.to_string())
                            .unwrap_or_else(|| "memlint::error".to_string());
                        super::eprint_diagnostic(&e);
                        for &ci in &w.containers {
                            failed.push(Unread {
                                container: ci,
                                source: w.source.clone(),
                                code: code.clone(),
                                message: e.to_string(),
                            });
                        }
                        "could not be read".to_string()
                    }
                };
                if plan.image_lines {
                    super::eprint_line(&line(&format!(
                        "memlint: image {}/{total} {} {status}: {} container(s)",
                        i + 1,
                        w.source,
                        w.containers.len()
                    )));
                }
                if let Ok(mut d) = done.lock() {
                    d.0.extend(rendered);
                    d.1.extend(failed);
                }
            });
        }
    });
    done.into_inner().unwrap_or_default()
}

/// `{"reports": [...], "fail_on": ...}`: each report with its `k8s` workload; a container whose
/// image could not be read has its `error` instead of findings.
fn json(
    w: &mut dyn Write,
    rendered: &[Rendered],
    unread: &[Unread],
    containers: &[Container],
    fail_on: FailOn,
) -> std::io::Result<()> {
    let mut each: Vec<(&Container, serde_json::Value)> = rendered
        .iter()
        .map(|r| (&containers[r.container], r.json.clone()))
        .collect();
    for u in unread {
        let c = &containers[u.container];
        each.push((
            c,
            serde_json::json!({
                "k8s": c.workload,
                "reference": u.source,
                "error": {"code": u.code, "message": u.message},
            }),
        ));
    }
    each.sort_by(|a, b| order(Some(a.0), Some(b.0)));
    let value = serde_json::json!({
        "reports": each.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
        "fail_on": fail_on.as_str(),
    });
    crate::untrusted::write_json(w, &value)
}

/// Findings grouped by workload and container, in manifest order, then a summary table.
fn text_all(
    w: &mut dyn Write,
    rendered: &[Rendered],
    unread: &[Unread],
    containers: &[Container],
    color: bool,
    quiet: bool,
) -> std::io::Result<()> {
    enum Part<'a> {
        Linted(&'a Rendered),
        Unread(&'a Unread),
    }
    let mut parts: Vec<(&Container, Part)> = rendered
        .iter()
        .map(|r| (&containers[r.container], Part::Linted(r)))
        .chain(unread.iter().map(|u| (&containers[u.container], Part::Unread(u))))
        .collect();
    parts.sort_by(|a, b| order(Some(a.0), Some(b.0)));
    let mut rows: Vec<[String; 6]> = Vec::new();
    for (c, part) in &parts {
        let row = |[e, wn, n]: [String; 3]| {
            [
                format!("{} {}", c.workload.kind, c.workload.name),
                c.workload.container.clone(),
                c.image.clone(),
                e,
                wn,
                n,
            ]
        };
        match part {
            Part::Linted(r) => {
                if let Some(t) = r.text[usize::from(color)].as_ref().or(r.text[0].as_ref()) {
                    w.write_all(t)?;
                }
                rows.push(row(r.counts.map(|n| n.to_string())));
            }
            Part::Unread(u) => {
                writeln!(w, "== {}", line(&describe(c)))?;
                writeln!(
                    w,
                    "error: the image {} could not be read: {}",
                    line(&u.source),
                    line(&u.message)
                )?;
                rows.push(row(["unread".to_string(), "-".to_string(), "-".to_string()]));
            }
        }
        writeln!(w)?;
    }
    if quiet {
        return Ok(());
    }
    write_table(w, &rows)
}

/// The summary table: workload, container, image, findings by severity.
pub(crate) fn write_table(w: &mut dyn Write, rows: &[[String; 6]]) -> std::io::Result<()> {
    let head = ["WORKLOAD", "CONTAINER", "IMAGE", "ERRORS", "WARNINGS", "NOTES"];
    let rows: Vec<[String; 6]> = rows
        .iter()
        .map(|r| r.clone().map(|c| line(&c).into_owned()))
        .collect();
    let mut width = head.map(|h| h.chars().count());
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let print = |w: &mut dyn Write, cells: [&str; 6]| -> std::io::Result<()> {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = width[i].saturating_sub(c.chars().count());
            if i >= 3 {
                out.push_str(&" ".repeat(pad));
                out.push_str(c);
            } else {
                out.push_str(c);
                out.push_str(&" ".repeat(pad));
            }
            if i < 5 {
                out.push_str("  ");
            }
        }
        writeln!(w, "{}", out.trim_end())
    };
    print(w, head)?;
    for r in &rows {
        print(w, [&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_every_image_once() {
        let keys: Vec<String> = (0..200).map(|i| format!("registry.local/app-{i}:1")).collect();
        for n in 1..=5u32 {
            for k in &keys {
                let hits = (1..=n)
                    .filter(|i| in_shard(k, Shard { index: *i, count: n }))
                    .count();
                assert_eq!(hits, 1, "{k} in {n} shards");
            }
        }
        assert_eq!(normalise("nginx"), "docker.io/library/nginx:latest");
        assert_eq!(
            normalise("registry:docker.io/library/nginx"),
            "docker.io/library/nginx:latest"
        );
    }
}
