//! `memlint lint IMAGE...`: facts, rules, report, and an exit code that follows --fail-on.

use crate::cli::{FailOn, Format, LintArgs};
use crate::error::{Error, Result};
use crate::facts::{self, Facts};
use crate::finding::Severity;
use crate::platform::Platform;
use crate::reference::Reference;
use crate::report::lint::LintReport;
use crate::report::text::{self, TextOptions};
use crate::rules;
use crate::sources::{self, Image, Options};
use std::io::IsTerminal;
use std::process::ExitCode;

pub fn run(args: LintArgs) -> Result<ExitCode> {
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
    }
    let mut options = Options::default();
    match args.platform.as_deref() {
        Some("all") => options.all_platforms = true,
        Some(p) => options.platform = Some(Platform::parse(p)?),
        None => {}
    }
    if let Some(j) = args.jobs {
        options.workers = j.max(1);
    }
    let color = args.output.is_none()
        && !args.no_color
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::io::stdout().is_terminal();
    let text_options = TextOptions {
        color,
        quiet: args.quiet,
        verbose: args.verbose,
    };

    // Read every image first; one that cannot be read is reported and the others go on.
    let mut loaded: Vec<(Image, Facts)> = Vec::new();
    let mut failed = false;
    for reference_text in &args.images {
        let read =
            Reference::parse(reference_text).and_then(|r| sources::open_all(reference_text, &r, &options));
        match read {
            Ok(images) => {
                for image in images {
                    let f = facts::derive(&image);
                    loaded.push((image, f));
                }
            }
            Err(e) => {
                if args.images.len() == 1 {
                    return Err(e);
                }
                eprintln!("{:?}", miette::Report::new(e));
                failed = true;
            }
        }
    }
    let reports: Vec<LintReport> = loaded
        .iter()
        .map(|(image, f)| LintReport::new(image, f, rules::run(f), &args.ignore))
        .collect();

    let out = match args.format {
        Format::Json => {
            let mut value = if reports.len() == 1 {
                reports[0].json()
            } else {
                serde_json::json!({
                    "reports": reports.iter().map(LintReport::json).collect::<Vec<_>>(),
                    "differences": differences(&reports),
                })
            };
            if let Some(obj) = value.as_object_mut() {
                obj.insert(
                    "fail_on".to_string(),
                    serde_json::json!(fail_on_name(args.fail_on)),
                );
            }
            format!("{}\n", serde_json::to_string_pretty(&value).unwrap_or_default())
        }
        Format::Text => {
            let mut s = String::new();
            for r in &reports {
                s.push_str(&text::render(r, text_options));
                if reports.len() > 1 {
                    s.push('\n');
                }
            }
            let diffs = differences(&reports);
            if !diffs.is_empty() && !args.quiet {
                s.push_str("Where the platforms differ:\n");
                for d in diffs {
                    s.push_str(&format!("  - {d}\n"));
                }
            }
            s
        }
    };
    super::emit(args.output.as_deref(), &out)?;

    if failed {
        return Ok(ExitCode::from(2));
    }
    let threshold = match args.fail_on {
        FailOn::Error => Some(Severity::Error),
        FailOn::Warning => Some(Severity::Warning),
        FailOn::Note => Some(Severity::Note),
        FailOn::Never => None,
    };
    let worst = reports.iter().filter_map(LintReport::worst).max();
    Ok(match (threshold, worst) {
        (Some(t), Some(w)) if w >= t => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    })
}

fn fail_on_name(f: FailOn) -> &'static str {
    match f {
        FailOn::Error => "error",
        FailOn::Warning => "warning",
        FailOn::Note => "note",
        FailOn::Never => "never",
    }
}

/// How the platforms of one image differ: libc, allocator, preloads, findings.
fn differences(reports: &[LintReport]) -> Vec<String> {
    let mut out = Vec::new();
    let Some(base) = reports.first() else { return out };
    let same_image = reports.iter().all(|r| r.image.reference == base.image.reference);
    if reports.len() < 2 || !same_image {
        return out;
    }
    let bp = &base.image.platform;
    for r in &reports[1..] {
        let p = &r.image.platform;
        if r.facts.libc.family != base.facts.libc.family {
            out.push(format!(
                "{p} runs on {} where {bp} runs on {}",
                r.facts.libc.family, base.facts.libc.family
            ));
        }
        if r.facts.allocator.name != base.facts.allocator.name {
            out.push(format!(
                "{p} uses {} malloc where {bp} uses {}",
                r.facts.allocator.name, base.facts.allocator.name
            ));
        }
        for pre in &r.facts.preloads {
            let other = base.facts.preloads.iter().find(|b| b.entry == pre.entry);
            if let Some(o) = other.filter(|o| o.status != pre.status) {
                out.push(
                    format!(
                        "preload `{}` is {:?} on {p} but {:?} on {bp}: {}",
                        pre.entry, pre.status, o.status, pre.reason
                    )
                    .to_lowercase()
                    .replacen(&pre.reason.to_lowercase(), &pre.reason, 1),
                );
            }
        }
        let keys = |r: &LintReport| -> Vec<(String, String)> {
            r.findings
                .iter()
                .map(|f| (f.rule.to_string(), f.message.clone()))
                .collect()
        };
        let (a, b) = (keys(base), keys(r));
        for (rule, msg) in b.iter().filter(|k| !a.contains(k)) {
            out.push(format!("only on {p}: [{rule}] {msg}"));
        }
        for (rule, msg) in a.iter().filter(|k| !b.contains(k)) {
            out.push(format!("only on {bp}: [{rule}] {msg}"));
        }
    }
    out
}
