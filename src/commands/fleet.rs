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
use crate::report::document::{self, Format, Part};
use crate::report::lint::{LintReport, ReportContext};
use crate::report::model::{ReadFailure, View, WorkloadDoc};
use crate::report::spool::Spool;
use crate::report::text::TextOptions;
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
    /// Shared by every container of the image.
    failure: Arc<Failure>,
}

/// Why an image could not be read (or a container's report not rendered).
struct Failure {
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
    (baseline_options, baseline): (&super::baseline::Options, Option<&crate::baseline::Baseline>),
) -> Result<ExitCode> {
    let (inputs, files) = read_inputs(args)?;
    let manifests = k8s::read(&inputs).map_err(|e| manifest_error(*e))?;
    unknown_ignored_rules(&manifests, &inputs).map_err(|e| manifest_error(*e))?;
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
    let (containers, wanted) = wanted_images(args, manifests.containers)?;
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
        in_source: &[],
        baseline,
        workload: None,
    };
    let rules_run = super::baseline::rules_run(settings.rules_version.as_ref());
    let mut kinds: Vec<(LintFormat, bool)> = vec![(args.format, color && args.format == LintFormat::Text)];
    kinds.extend(args.outputs.iter().map(|(f, _)| (*f, false)));
    kinds.dedup();
    let doc = super::DocumentOptions {
        fail_on,
        text: TextOptions {
            color: false,
            quiet: args.quiet,
            verbose: args.verbose,
            show_ignored: args.show_ignored,
        },
        automation_id: sarif_automation_id(args.category.as_deref()),
        several: wanted.iter().map(|w| w.containers.len()).sum::<usize>() > 1,
    };
    let formats: Vec<Renderer> = kinds
        .iter()
        .map(|&(f, c)| ((f, c), super::document_format(f, c, &doc)))
        .collect();
    let plan = Plan {
        containers: &containers,
        files: &files,
        ctx: &ctx,
        formats: &formats,
        verbose: args.verbose,
        image_lines: !args.quiet,
        rules_run: &rules_run,
        keep_seen: baseline.is_some() || baseline_options.write.is_some(),
    };
    let spool = Mutex::new(Spool::new().map_err(|e| Error::Output {
        path: "a temporary file (TMPDIR) for the rendered reports".to_string(),
        source: e,
    })?);
    let (mut rendered, unread) = lint_images(&wanted, &plan, &options, parallel, &spool);
    for u in &unread {
        rendered.push(plan.render_unread(u, &spool).map_err(|e| Error::Output {
            path: "a temporary file (TMPDIR) for the rendered reports".to_string(),
            source: e,
        })?);
    }
    let spooled = spool
        .into_inner()
        .map_err(|_| std::io::Error::other("a worker stopped while it wrote its reports"))
        .and_then(Spool::finish)
        .map_err(|e| Error::Output {
            path: "a temporary file (TMPDIR) for the rendered reports".to_string(),
            source: e,
        })?;
    rendered.sort_by(|a, b| order(&containers[a.container], &containers[b.container]));
    let render = |format: LintFormat, color: bool, w: &mut dyn Write| -> std::io::Result<()> {
        let i = formats
            .iter()
            .position(|(k, _)| *k == (format, color))
            .or_else(|| formats.iter().position(|((f, _), _)| *f == format))
            .ok_or_else(|| std::io::Error::other("a format that was not rendered"))?;
        let parts: Vec<&Part> = rendered.iter().filter_map(|r| r.parts.get(i)).collect();
        formats[i].1.write(w, &parts, &spooled)
    };
    super::emit_formats(args.output.as_deref(), args.format, &args.outputs, color, render)?;
    let worst = rendered.iter().filter_map(|r| r.worst).max();
    let mut tally = super::baseline::Tally::default();
    for r in rendered {
        if let Some((subject, seen, ignored, baselined)) = r.baseline {
            tally.add(&subject, &seen, &ignored, baselined);
        }
    }
    super::baseline::finish(baseline_options, baseline, tally, &rules_run, args.quiet)?;
    if !unread.is_empty() {
        let mut failed: Vec<&str> = unread.iter().map(|u| u.failure.source.as_str()).collect();
        failed.sort_unstable();
        failed.dedup();
        super::eprint_line(&line(&format!(
            "memlint: {} container(s) not linted: their image could not be read ({})",
            unread.len(),
            failed.join(", ")
        )));
        return Ok(ExitCode::from(2));
    }
    Ok(super::exit_for(fail_on, worst))
}

/// The containers to lint (those running the images asked for, if any) and the distinct
/// images they run, each with where it is read from (its `--image` stand-in, else the
/// registry), in this shard.
fn wanted_images(args: &LintArgs, all: Vec<Container>) -> Result<(Vec<Container>, Vec<Wanted>)> {
    // Each container with the reference a registry reads for its image: the manifests, the
    // --image stand-ins and the image arguments are matched by it.
    let keyed: Vec<(String, Container)> = all.into_iter().map(|c| (normalise(&c.image), c)).collect();
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
    Ok((containers, wanted))
}

/// A format asked for, whether its text is in colour, and its renderer.
type Renderer = ((LintFormat, bool), Box<dyn Format>);

/// What every image's worker needs to lint and render its containers.
struct Plan<'a> {
    containers: &'a [Container],
    files: &'a BTreeMap<String, ManifestFile>,
    ctx: &'a ReportContext<'a>,
    /// The formats asked for (`--format`, each `-o`), each with whether its text is in
    /// colour, and its renderer.
    formats: &'a [Renderer],
    verbose: bool,
    image_lines: bool,
    /// The rules the run runs: only their baseline entries can be fixed.
    rules_run: &'a std::collections::HashSet<&'static str>,
    /// Each container's findings are kept for the baseline (`--baseline`, `--write-baseline`).
    keep_seen: bool,
}

/// One container's report, rendered in every format asked for while its image was in memory
/// and written to the spool at once: the image goes once its containers are done, so a fleet
/// holds `--parallel` images at most, and what it keeps of each container is where its report
/// lies in the spool.
struct Rendered {
    container: usize,
    /// Its part of each format's document, as `Plan::formats` lists them.
    parts: Vec<Part>,
    worst: Option<crate::finding::Severity>,
    /// For the baseline: the container's subject, its findings no ignore hides (before the
    /// cap), the fingerprints of those an ignore hides, and how many the baseline holds.
    baseline: Option<BaselineTally>,
}

type BaselineTally = (
    crate::baseline::Subject,
    Vec<crate::baseline::Entry>,
    Vec<String>,
    usize,
);

/// The `automationDetails.id` of a fleet's SARIF run (and of its merge).
pub(crate) fn sarif_automation_id(category: Option<&str>) -> String {
    crate::report::sarif::automation_id(category, "memlint/k8s")
}

impl Plan<'_> {
    fn render(
        &self,
        ci: usize,
        image: &Image,
        shared: &facts::PerImage,
        spool: &Mutex<Spool>,
    ) -> std::io::Result<Rendered> {
        let c = &self.containers[ci];
        let f = facts::derive_for(image, Some(c), shared);
        let artifact = self
            .files
            .get(&c.workload.file)
            .map(|m| m.artifact.as_str())
            .unwrap_or(self.ctx.artifact);
        let in_source = workload_ignores(c, artifact);
        let ctx = ReportContext {
            in_source: &in_source,
            workload: Some(&c.workload),
            ..*self.ctx
        };
        let mut r = LintReport::new(
            image,
            &f,
            rules::run(&f, self.ctx.settings.rules_version.as_ref()),
            &ctx,
        )
        .in_container(c, artifact, self.ctx.dockerfile.is_some());
        // A container is one subject: its fixed entries are known once it is linted.
        r.fixed = super::baseline::fixed_of(
            self.ctx.baseline,
            &r.subject,
            &r.seen,
            &r.ignored_fingerprints,
            self.rules_run,
        );
        let mut view = r.view();
        if self.formats.iter().any(|((f, _), _)| *f == LintFormat::Json) {
            view.json = Some(r.json());
        }
        let parts = self.spool_parts(&view, spool)?;
        Ok(Rendered {
            container: ci,
            parts,
            worst: r.worst(),
            baseline: self.keep_seen.then(|| {
                (
                    r.subject.clone(),
                    std::mem::take(&mut r.seen),
                    std::mem::take(&mut r.ignored_fingerprints),
                    r.baselined_count(),
                )
            }),
        })
    }

    /// The report of a container whose image could not be read.
    fn render_unread(&self, u: &Unread, spool: &Mutex<Spool>) -> std::io::Result<Rendered> {
        let c = &self.containers[u.container];
        let view = View::unread(
            WorkloadDoc::from(&c.workload),
            u.failure.source.clone(),
            ReadFailure {
                code: u.failure.code.clone(),
                message: u.failure.message.clone(),
            },
        );
        Ok(Rendered {
            container: u.container,
            parts: self.spool_parts(&view, spool)?,
            worst: None,
            baseline: None,
        })
    }

    /// The view rendered in every format asked for, and spooled.
    fn spool_parts(&self, view: &View, spool: &Mutex<Spool>) -> std::io::Result<Vec<Part>> {
        let pieces = self
            .formats
            .iter()
            .map(|(_, f)| f.render(view))
            .collect::<std::io::Result<Vec<_>>>()?;
        let mut spool = spool
            .lock()
            .map_err(|_| std::io::Error::other("another worker stopped while it wrote its reports"))?;
        document::spool(&mut spool, pieces)
    }
}

/// Reports in manifest order: file, then line, then what tells two containers on one line apart
/// (`containers: [{…}, {…}]`). `merge` sorts by the same key from the JSON.
fn order(a: &Container, b: &Container) -> std::cmp::Ordering {
    fn key(c: &Container) -> (&str, u32, &str, &str, &str, &str) {
        let w = &c.workload;
        (
            w.file.as_str(),
            w.line,
            w.kind.as_str(),
            w.namespace.as_deref().unwrap_or_default(),
            w.name.as_str(),
            w.container.as_str(),
        )
    }
    key(a).cmp(&key(b))
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
                    // A file found in a folder, not named: its links stay inside the folder.
                    let text = if given.is_dir() {
                        crate::user_file::read_inside_to_string(&path, given, k8s::MAX_MANIFEST_BYTES)
                    } else {
                        crate::user_file::read_to_string(&path, k8s::MAX_MANIFEST_BYTES)
                    }
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

/// The `memlint/ignore` entries of the container's workload that are about it, as the judge
/// weighs them: every finding of the rule on this container, placed at the manifest line
/// (`artifact` is the manifest's repository-relative path).
fn workload_ignores(c: &Container, artifact: &str) -> Vec<settings::ScopedIgnore> {
    c.ignores
        .iter()
        .filter(|i| i.applies_to(&c.workload.container))
        .map(|i| settings::ScopedIgnore {
            rule: i.rule.clone(),
            image: None,
            path: None,
            reason: i.reason.clone(),
            expires: i.expires,
            origin: format!("{artifact}:{}", i.line),
        })
        .collect()
}

/// A `memlint/ignore` entry that names a rule memlint does not have: a mistake at its line (an
/// ignore that silently covers nothing is worse than an error). Checked here, not by the
/// `k8s` reader, which knows no rules.
fn unknown_ignored_rules(
    manifests: &k8s::Manifests,
    inputs: &[Input],
) -> Result<(), Box<k8s::ManifestError>> {
    for c in &manifests.containers {
        for ig in c.ignores.iter() {
            if rules::find(&ig.rule).is_some() {
                continue;
            }
            let help = match rules::nearest(&ig.rule) {
                Some(n) => format!("did you mean `{n}`? `memlint rules` lists every rule"),
                None => "`memlint rules` lists every rule".to_string(),
            };
            let file = &c.workload.file;
            return Err(Box::new(k8s::ManifestError {
                file: file.clone(),
                text: inputs
                    .iter()
                    .find(|i| &i.file == file)
                    .map(|i| i.text.clone())
                    .unwrap_or_default(),
                line: Some(ig.line),
                column: None,
                message: format!(
                    "the `{}` annotation in {file}: there is no rule `{}`",
                    k8s::annotations::IGNORE,
                    ig.rule
                ),
                help,
            }));
        }
    }
    Ok(())
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
        start + col..start + len
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
    let (src, span) = crate::error::SourceWindow::around(name, &e.text, span);
    Error::Manifest(Box::new(ManifestError {
        message,
        help: e.help,
        src,
        span,
    }))
}

/// The registry host an image source reads from, when it is a registry reference.
fn registry_of(source: &str) -> Option<String> {
    match Reference::parse(source) {
        Ok(Reference::Registry(name)) => sources::registry::parse_reference(&name)
            .ok()
            .map(|r| sources::registry::registry_host(r.registry())),
        _ => None,
    }
}

/// Whether a read failed because its source did not answer in time (a timeout, or a registry
/// that cannot be reached): what `max_registry_timeouts` counts.
fn no_answer(e: &Error) -> bool {
    match e {
        Error::Timeout { .. } => true,
        Error::Registry { reason, .. } => reason.starts_with(sources::registry::NO_ANSWER),
        _ => false,
    }
}

/// The run-wide bounds of a fleet: its deadline (`fleet_timeout_secs`) and, per registry, the
/// reads in a row that got no answer (`max_registry_timeouts`).
struct FleetBounds {
    deadline: Option<(std::time::Instant, std::time::Duration)>,
    max_timeouts: u64,
    /// Per registry host: reads in a row that got no answer.
    streaks: Mutex<std::collections::HashMap<String, u64>>,
    /// The bounds whose refusal was printed in full (`fleet`, or a registry host).
    told: Mutex<std::collections::HashSet<String>>,
}

impl FleetBounds {
    fn new(limits: &crate::tree::limits::Limits) -> FleetBounds {
        let bound = std::time::Duration::from_secs(limits.fleet_timeout_secs);
        FleetBounds {
            deadline: (!bound.is_zero()).then(|| (std::time::Instant::now() + bound, bound)),
            max_timeouts: limits.max_registry_timeouts,
            streaks: Mutex::new(std::collections::HashMap::new()),
            told: Mutex::new(std::collections::HashSet::new()),
        }
    }

    /// Whether the refusal for `bound` is the first one: printed in full once, then one line
    /// per image.
    fn first_refusal(&self, bound: &str) -> bool {
        self.told
            .lock()
            .is_ok_and(|mut told| told.insert(bound.to_string()))
    }

    /// Why an image is not to be read at all, when it is not, and the bound that says so
    /// (`fleet`, or the registry's host): the fleet is past its deadline, or its registry did
    /// not answer `max_registry_timeouts` reads in a row.
    fn refusal(&self, source: &str, registry: Option<&str>) -> Option<(Error, String)> {
        if let Some((at, bound)) = self.deadline {
            if std::time::Instant::now() >= at {
                let e = sources::timeout_error(
                    sources::deadline::TimeoutHit::Run(bound),
                    "the image",
                    line(source).into_owned(),
                );
                return Some((e, "fleet".to_string()));
            }
        }
        let registry = registry?;
        let streak = self
            .streaks
            .lock()
            .map(|s| s.get(registry).copied().unwrap_or(0))
            .unwrap_or(0);
        (self.max_timeouts > 0 && streak >= self.max_timeouts).then(|| {
            let e = Error::Timeout {
            what: "the image".to_string(),
            location: format!("registry {registry}"),
            reason: format!(
                "{streak} reads in a row from this registry timed out or got no answer (max_registry_timeouts={})",
                self.max_timeouts
            ),
            help: format!(
                "check that the registry runs and answers; to keep trying, raise the bound with --limit max_registry_timeouts={} (or MEMLINT_LIMITS, or [limits] in .memlint.toml; 0 for none)",
                self.max_timeouts.saturating_mul(4)
            ),
            };
            (e, registry.to_string())
        })
    }

    /// Counts a read from `registry`: one that got no answer lengthens its streak, any other
    /// outcome ends it.
    fn record(&self, registry: Option<&str>, unanswered: bool) {
        let Some(registry) = registry else { return };
        if let Ok(mut streaks) = self.streaks.lock() {
            let streak = streaks.entry(registry.to_string()).or_insert(0);
            *streak = if unanswered { *streak + 1 } else { 0 };
        }
    }
}

/// Reads each wanted image once, `parallel` at a time, and renders the reports of the
/// containers that run it before letting it go. The fleet's bounds ([`FleetBounds`]) end the
/// reads early: the images not read are reported as unread, with the reason.
fn lint_images(
    wanted: &[Wanted],
    plan: &Plan,
    options: &sources::Options,
    parallel: usize,
    spool: &Mutex<Spool>,
) -> (Vec<Rendered>, Vec<Unread>) {
    let next = Mutex::new(0usize);
    let done: Mutex<(Vec<Rendered>, Vec<Unread>)> = Mutex::new((Vec::new(), Vec::new()));
    let total = wanted.len();
    let bounds = FleetBounds::new(&options.limits);
    let options = &sources::Options {
        run_deadline: bounds.deadline,
        ..options.clone()
    };
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
                let registry = registry_of(&w.source);
                let (read, skipped) = match bounds.refusal(&w.source, registry.as_deref()) {
                    Some((e, bound)) => (Err(e), Some(bound)),
                    None => {
                        let read =
                            Reference::parse(&w.source).and_then(|r| sources::open(&w.source, &r, &opts));
                        bounds.record(registry.as_deref(), read.as_ref().err().is_some_and(no_answer));
                        (read, None)
                    }
                };
                let mut rendered = Vec::new();
                let mut failed = Vec::new();
                let status = match read {
                    Ok(image) => {
                        // As `lint -v` of one image: how many layers were read, how many the
                        // cache served (shared base layers are read once per run).
                        if plan.verbose {
                            if let Some(summary) = image.cache_summary(opts.cache.as_deref().map(|c| c.dir()))
                            {
                                super::eprint_line(&line(&summary));
                            }
                        }
                        // One search budget for the image, and its entrypoint followed once
                        // per distinct command and env.
                        let shared = facts::PerImage::default();
                        for &ci in &w.containers {
                            match plan.render(ci, &image, &shared, spool) {
                                Ok(r) => rendered.push(r),
                                Err(e) => failed.push(Unread {
                                    container: ci,
                                    failure: Arc::new(Failure {
                                        source: w.source.clone(),
                                        code: "memlint::output".to_string(),
                                        message: format!("its report could not be written: {e}"),
                                    }),
                                }),
                            }
                        }
                        format!("read ({}, {} layer(s))", image.platform, image.layers.len())
                    }
                    Err(e) => {
                        let code = miette::Diagnostic::code(&e)
                            .map(|c| c.to_string())
                            .unwrap_or_else(|| "memlint::error".to_string());
                        // Images skipped for one of the fleet's bounds: its diagnostic once, then
                        // a line per image.
                        if skipped.as_deref().is_none_or(|bound| bounds.first_refusal(bound)) {
                            super::eprint_diagnostic(&e);
                        }
                        let failure = Arc::new(Failure {
                            source: w.source.clone(),
                            code,
                            message: e.to_string(),
                        });
                        for &ci in &w.containers {
                            failed.push(Unread {
                                container: ci,
                                failure: failure.clone(),
                            });
                        }
                        if skipped.is_some() {
                            format!("not read: {e}")
                        } else {
                            "could not be read".to_string()
                        }
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
