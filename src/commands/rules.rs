//! `memlint rules`: every rule, its default severity and title.

use crate::cli::{Format, RulesArgs};
use crate::error::Result;
use crate::rules::ALL;
use std::fmt::Write as _;
use std::process::ExitCode;

pub fn run(args: RulesArgs) -> Result<ExitCode> {
    let text = match args.format {
        Format::Json => {
            let list: Vec<serde_json::Value> = ALL
                .iter()
                .map(|r| serde_json::json!({"id": r.id, "severity": r.severity, "title": r.title, "tags": r.tags}))
                .collect();
            format!("{}\n", serde_json::to_string_pretty(&list).unwrap_or_default())
        }
        Format::Text => {
            let mut s = String::new();
            for r in ALL {
                let _ = writeln!(s, "{:<26} {:<8} {}", r.id, r.severity, r.title);
            }
            s
        }
    };
    super::emit(None, &text)?;
    Ok(ExitCode::SUCCESS)
}
