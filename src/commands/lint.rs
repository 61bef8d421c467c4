//! `memlint lint IMAGE...`: facts, rules, report, and an exit code that follows --fail-on.

use crate::cli::{FailOn, LintArgs, LintFormat};
use crate::dockerfile::Dockerfile;
use crate::error::{Error, Result};
use crate::facts::{self, Facts};
use crate::image::Image;
use crate::locate::DockerfileContext;
use crate::platform::Platform;
use crate::reference::Reference;
use crate::report::lint::LintReport;
use crate::report::lint::ReportContext;
use crate::report::sarif::{self, SarifOptions};
use crate::report::text::TextOptions;
use crate::report::{github, gitlab, images, junit};
use crate::rules;
use crate::settings::{self, Settings};
use crate::sources;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub(crate) fn run(args: LintArgs) -> Result<ExitCode> {
    let mut settings = load_settings(args.config.as_deref())?;
    for id in &args.ignore {
        if rules::find(id).is_none() {
            return Err(Error::UnknownRule {
                id: id.clone(),
                help: match rules::nearest(id) {
                    Some(n) => format!("--ignore takes a rule id; did you mean `{n}`?"),
                    None => "--ignore takes a rule id; `memlint rules` lists them".to_string(),
                },
            });
        }
        settings.ignore.push((id.clone(), "--ignore".to_string()));
    }
    if let Some(text) = &args.rules_version {
        settings.rules_version = Some(rules::pinned_release(text).map_err(|why| Error::BadArgument {
            what: format!("--rules-version `{}`", crate::untrusted::line(text)),
            help: why,
        })?);
    }
    if !sarif::valid_artifact_uri(&args.sarif_artifact) {
        return Err(Error::BadArgument {
            what: format!("--sarif-artifact `{}`", args.sarif_artifact),
            help: "give a repository-relative path such as `Dockerfile` or `docker/app/Dockerfile`: no scheme, colon, space or `..`".to_string(),
        });
    }
    // A FIFO or folder at a report path is refused before any image is read.
    super::check_outputs(args.output.as_deref(), &args.outputs)?;
    let baseline_options = super::baseline::Options {
        baseline: args.baseline.as_deref(),
        write: args.write_baseline.as_deref(),
        prune: args.prune_baseline,
    };
    // A missing or malformed baseline stops the run before any image is read.
    let baseline = super::baseline::start(&baseline_options)?;
    let dockerfile = read_dockerfile(args.dockerfile.as_deref())?;
    let df_path = dockerfile.as_ref().map(|(p, _)| p.clone()).unwrap_or_default();
    let df_ctx = dockerfile_context(dockerfile.as_ref(), &df_path, args.target.as_deref())?;
    let fail_on = args.fail_on.or(settings.fail_on).unwrap_or(FailOn::Warning);
    let stdin_taken_by = if args.k8s.iter().any(|p| p.as_os_str() == "-") {
        Some("the manifests (--k8s -)")
    } else if args.images.iter().any(|i| i == "docker-archive:-") {
        Some("an image (docker-archive:-)")
    } else {
        None
    };
    let mut options = super::source_options(
        &args.source,
        &settings.limits,
        args.jobs,
        args.quiet,
        stdin_taken_by,
    )?;
    let stand_ins = (!args.k8s.is_empty()).then_some(args.image_map.as_slice());
    super::bind_credentials(&mut options, &args.source, &args.images, stand_ins)?;
    match args.platform.as_deref() {
        Some("all") => options.all_platforms = true,
        Some(p) => options.platform = Some(Platform::parse(p)?),
        None => {}
    }
    let color = args.output.is_none()
        && !args.no_color
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::io::stdout().is_terminal();
    if !args.k8s.is_empty() {
        return super::fleet::run(
            &args,
            &settings,
            df_ctx.as_ref(),
            fail_on,
            options,
            color,
            (&baseline_options, baseline.as_ref()),
        );
    }

    // Read every image first; one that cannot be read is reported and the others go on.
    let (loaded, unread) = read_images(&args, &options)?;
    let failed = !unread.is_empty();
    let ctx = ReportContext {
        settings: &settings,
        dockerfile: df_ctx.as_ref(),
        artifact: &args.sarif_artifact,
        today: settings::today(),
        in_source: &[],
        baseline: baseline.as_ref(),
        workload: None,
    };
    let mut reports: Vec<LintReport> = loaded
        .iter()
        .map(|(image, f)| LintReport::new(image, f, rules::run(f, settings.rules_version.as_ref()), &ctx))
        .collect();
    let rules_run = super::baseline::rules_run(settings.rules_version.as_ref());
    let tally = tally_fixed(&mut reports, baseline.as_ref(), &rules_run);
    let text_options = TextOptions {
        color,
        quiet: args.quiet,
        verbose: args.verbose,
        show_ignored: args.show_ignored,
    };
    let render = |format: LintFormat, color: bool, w: &mut dyn Write| -> std::io::Result<()> {
        match format {
            LintFormat::Json => images::json(w, &reports, fail_on, options.all_platforms),
            LintFormat::Sarif => sarif::write(
                w,
                &reports,
                &SarifOptions {
                    category: args.category.as_deref(),
                },
            ),
            LintFormat::Github => github::write(w, &reports),
            LintFormat::Gitlab => crate::untrusted::write_json(w, &gitlab::render(&reports)),
            LintFormat::Junit => junit::write(w, &reports, &unread, fail_on),
            LintFormat::Html => crate::report::html::write(
                w,
                &reports,
                &unread,
                &crate::report::html::HtmlOptions {
                    title: "memlint lint",
                    fail_on,
                },
            ),
            LintFormat::Text => images::text(
                w,
                &reports,
                TextOptions {
                    color,
                    ..text_options
                },
                options.all_platforms,
            ),
        }
    };
    super::emit_formats(args.output.as_deref(), args.format, &args.outputs, color, render)?;
    let worst = reports.iter().filter_map(LintReport::worst).max();
    super::baseline::finish(
        &baseline_options,
        baseline.as_ref(),
        tally,
        &rules_run,
        args.quiet,
    )?;

    if failed {
        return Ok(ExitCode::from(2));
    }
    Ok(super::exit_for(fail_on, worst))
}

/// Settings from --config, else .memlint.toml found upward, else defaults.
pub(crate) fn load_settings(path: Option<&Path>) -> Result<Settings> {
    match super::config_path(path) {
        Some((p, inside)) => Settings::load(&p, inside.as_deref()).map_err(Error::Config),
        None => Ok(Settings::default()),
    }
}

/// What the run found, for the baseline; each report's baseline entries that no longer occur.
fn tally_fixed(
    reports: &mut [LintReport],
    baseline: Option<&crate::baseline::Baseline>,
    rules_run: &std::collections::HashSet<&'static str>,
) -> super::baseline::Tally {
    let mut tally = super::baseline::Tally::default();
    for r in reports.iter() {
        tally.add(&r.subject, &r.seen, &r.ignored_fingerprints, r.baselined_count());
    }
    // Fixed over the whole run: a finding of one platform's report is not fixed because the
    // other platform's report lacks it (each platform is its own subject anyway).
    if let Some(b) = baseline {
        let fixed = b.fixed(&tally.linted, rules_run, &tally.occurring);
        for r in reports.iter_mut() {
            r.fixed = fixed
                .iter()
                .filter(|e| e.subject == r.subject)
                .map(|e| (*e).clone())
                .collect();
        }
    }
    tally
}

/// An image read, with its facts.
type Loaded = (Image, Facts);

/// Every image of the run, read with its facts, and those that could not be read (each
/// reported on standard error as it fails); a single image that cannot be read is the run's
/// error.
fn read_images(args: &LintArgs, options: &sources::Options) -> Result<(Vec<Loaded>, Vec<junit::Unread>)> {
    let mut loaded: Vec<(Image, Facts)> = Vec::new();
    // Images that could not be read (their reference and what failed), for the JUnit report.
    let mut unread: Vec<junit::Unread> = Vec::new();
    for reference_text in &args.images {
        let read =
            Reference::parse(reference_text).and_then(|r| sources::open_all(reference_text, &r, options));
        match read {
            Ok(images) => {
                for image in images {
                    if args.verbose {
                        if let Some(line) = image.cache_summary(options.cache.as_deref().map(|c| c.dir())) {
                            super::eprint_line(&crate::untrusted::line(&line));
                        }
                    }
                    let f = facts::derive(&image);
                    loaded.push((image, f));
                }
            }
            Err(e) => {
                if args.images.len() == 1 {
                    return Err(e);
                }
                super::eprint_diagnostic(&e);
                unread.push(junit::Unread {
                    reference: reference_text.clone(),
                    code: miette::Diagnostic::code(&e)
                        .map(|c| c.to_string())
                        .unwrap_or_else(|| "memlint::error".to_string()),
                    message: e.to_string(),
                });
            }
        }
    }
    Ok((loaded, unread))
}

/// The Dockerfile's target stage (`--target`, else the last), where findings are placed.
fn dockerfile_context<'d>(
    dockerfile: Option<&'d (String, Dockerfile)>,
    df_path: &'d str,
    target: Option<&str>,
) -> Result<Option<DockerfileContext<'d>>> {
    let Some((_, d)) = dockerfile else {
        return Ok(None);
    };
    let ctx = DockerfileContext::new(d, df_path, target);
    if ctx.is_none() {
        return Err(Error::BadArgument {
            what: match target {
                Some(t) => format!("--target `{t}`"),
                None => "the Dockerfile".to_string(),
            },
            help: format!(
                "the Dockerfile's stages are: {}",
                d.stages
                    .iter()
                    .map(|s| s.name.clone().unwrap_or_else(|| s.base.clone()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    Ok(ctx)
}

/// The Dockerfile given, or ./Dockerfile when it exists; its path as a repository-relative URI.
fn read_dockerfile(given: Option<&Path>) -> Result<Option<(String, Dockerfile)>> {
    let (path, text) = match given {
        Some(p) => (
            p.to_path_buf(),
            crate::user_file::read_to_string(p, crate::user_file::MAX_BYTES),
        ),
        // Found, not named: its links stay inside the repository (a pull request's Dockerfile
        // linked to a file of the machine would be printed in findings).
        None if Path::new("Dockerfile").is_file() => {
            let path = PathBuf::from("Dockerfile");
            let repository =
                crate::user_file::repository_of(&std::env::current_dir().map_err(|e| Error::io(".", e))?);
            let text =
                crate::user_file::read_inside_to_string(&path, &repository, crate::user_file::MAX_BYTES);
            (path, text)
        }
        None => return Ok(None),
    };
    let text = text.map_err(|e| Error::user_file(path.display(), e))?;
    Ok(Some((super::repo_relative(&path), Dockerfile::parse(&text))))
}
