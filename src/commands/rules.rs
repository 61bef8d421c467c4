//! `memlint rules`: every rule, its default severity, title and the releases that added and
//! changed it; `--since VERSION`, only the rules added or changed after that release.

use crate::cli::{Format, RulesArgs};
use crate::error::{Error, Result};
use crate::rules::{self, Rule, ALL};
use std::fmt::Write as _;
use std::process::ExitCode;

pub(crate) fn run(args: RulesArgs) -> Result<ExitCode> {
    let listed: Vec<&Rule> = match &args.since {
        None => ALL.to_vec(),
        Some(text) => {
            let since = rules::pinned_release(text).map_err(|why| Error::BadArgument {
                what: format!("--since `{}`", crate::untrusted::line(text)),
                help: why,
            })?;
            rules::since(ALL, &since)
        }
    };
    let text = match args.format {
        Format::Json => {
            let list: Vec<serde_json::Value> = listed
                .iter()
                .map(|r| {
                    let history = r.history();
                    serde_json::json!({
                        "id": r.id,
                        "severity": r.severity,
                        "title": r.title,
                        "tags": r.tags,
                        "added": history.added.to_string(),
                        "changed": history.changed.iter().map(ToString::to_string).collect::<Vec<_>>(),
                    })
                })
                .collect();
            format!("{}\n", serde_json::to_string_pretty(&list).unwrap_or_default())
        }
        Format::Text => {
            let mut s = String::new();
            // Columns as wide as the longest id of the registry, so that a filtered list
            // (`--since`) lines up as the whole one does.
            let id_width = ALL.iter().map(|r| r.id.len()).max().unwrap_or(0);
            for r in &listed {
                let severity = r.severity.to_string();
                let _ = writeln!(
                    s,
                    "{:<id_width$} {severity:<7} {} ({})",
                    r.id,
                    r.title,
                    versions(r)
                );
            }
            if let (Some(text), true) = (&args.since, listed.is_empty()) {
                let _ = writeln!(s, "No rule was added or changed after {text}.");
            }
            s
        }
    };
    super::emit(None, &text)?;
    Ok(ExitCode::SUCCESS)
}

/// `added in 0.1.0`, then `, changed in 0.2.0, 0.3.0` for a rule whose firing changed.
fn versions(rule: &Rule) -> String {
    let history = rule.history();
    let mut s = format!("added in {}", history.added);
    if !history.changed.is_empty() {
        let changed: Vec<String> = history.changed.iter().map(ToString::to_string).collect();
        let _ = write!(s, ", changed in {}", changed.join(", "));
    }
    s
}
