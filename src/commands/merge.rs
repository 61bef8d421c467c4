//! `memlint merge REPORT.json…`: the JSON reports of `lint --k8s --shard I/N` runs joined into
//! one, as the unsharded run would have written it (reports in manifest order), in JSON, text,
//! SARIF, GitHub annotations or JUnit, with an exit code by `--fail-on` over the merged findings.

use crate::cli::{MergeArgs, MergeFormat};
use crate::error::{Error, Result};
use crate::finding::Severity;
use crate::report::sarif::{self, SarifOptions};
use crate::untrusted::{line, Allow};
use serde_json::Value;
use std::io::Write;
use std::process::ExitCode;

/// The most one report file may hold.
const MAX_REPORT_BYTES: u64 = 512 << 20;

pub fn run(args: MergeArgs) -> Result<ExitCode> {
    let mut reports: Vec<Value> = Vec::new();
    let mut stdin_read = false;
    for path in &args.reports {
        let (name, bytes) = if path.as_os_str() == "-" {
            if stdin_read {
                return Err(Error::BadArgument {
                    what: "`-` given twice".to_string(),
                    help: "standard input holds one report".to_string(),
                });
            }
            stdin_read = true;
            let b = crate::user_file::read_stream(std::io::stdin().lock(), MAX_REPORT_BYTES)
                .map_err(|e| Error::user_file("standard input", e))?;
            ("standard input".to_string(), b)
        } else {
            let b = crate::user_file::read(path, MAX_REPORT_BYTES)
                .map_err(|e| Error::user_file(path.display(), e))?;
            (path.display().to_string(), b)
        };
        let doc: Value = serde_json::from_slice(&bytes).map_err(|e| Error::BadJson {
            what: "the report".to_string(),
            location: name.clone(),
            source: e,
        })?;
        let Some(list) = doc.get("reports").and_then(Value::as_array) else {
            return Err(Error::BadArgument {
                what: format!("{name} (no `reports` list)"),
                help: "merge takes the JSON of `memlint lint --k8s … --format json`".to_string(),
            });
        };
        reports.extend(list.iter().cloned());
    }
    // Manifest order, as `lint --k8s` writes it: file, then line.
    let key = |r: &Value| {
        (
            r["k8s"]["file"].as_str().unwrap_or("").to_string(),
            r["k8s"]["line"].as_u64().unwrap_or(0),
        )
    };
    reports.sort_by_key(key);
    let merged = serde_json::json!({
        "reports": reports,
        "fail_on": args.fail_on.as_str(),
    });
    let allow = Allow {
        commands: args.format == MergeFormat::Github,
        ..Allow::default()
    };
    super::emit_with(args.output.as_deref(), allow, |w| match args.format {
        MergeFormat::Json => crate::untrusted::write_json(w, &merged),
        MergeFormat::Sarif => crate::untrusted::write_json(
            w,
            &sarif::render_json_reports(&reports, &SarifOptions { category: None }),
        ),
        MergeFormat::Text => text(w, &reports),
        MergeFormat::Github => crate::report::github::write_json_reports(w, &reports),
        MergeFormat::Junit => crate::report::junit::write_json_reports(w, &reports, args.fail_on),
    })?;
    if reports.iter().any(|r| r.get("error").is_some()) {
        return Ok(ExitCode::from(2));
    }
    let worst = reports
        .iter()
        .flat_map(|r| r["findings"].as_array().into_iter().flatten())
        .filter_map(|f| <Severity as clap::ValueEnum>::from_str(f["severity"].as_str()?, false).ok())
        .max();
    Ok(super::exit_for(args.fail_on, worst))
}

/// Each report's findings under its workload, then the summary table.
fn text(w: &mut dyn Write, reports: &[Value]) -> std::io::Result<()> {
    let mut rows = Vec::new();
    for r in reports {
        let k = &r["k8s"];
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        let ns = k["namespace"]
            .as_str()
            .map(|n| format!("{n}/"))
            .unwrap_or_default();
        writeln!(
            w,
            "== {} {}{}, container {} ({}:{})",
            line(&s(&k["kind"])),
            line(&ns),
            line(&s(&k["name"])),
            line(&s(&k["container"])),
            line(&s(&k["file"])),
            k["line"].as_u64().unwrap_or(0)
        )?;
        if let Some(e) = r.get("error") {
            writeln!(
                w,
                "error: the image could not be read: {}",
                line(&s(&e["message"]))
            )?;
        }
        let count = |sev: &str| {
            r["findings"]
                .as_array()
                .map_or(0, |f| f.iter().filter(|f| f["severity"] == sev).count())
        };
        for f in r["findings"].as_array().into_iter().flatten() {
            writeln!(
                w,
                "{}[{}]: {}",
                line(&s(&f["severity"])),
                line(&s(&f["rule"])),
                line(&s(&f["message"]))
            )?;
        }
        writeln!(w)?;
        let unread = r.get("error").is_some();
        rows.push([
            format!("{} {}", s(&k["kind"]), s(&k["name"])),
            s(&k["container"]),
            s(&k["image"]),
            if unread {
                "unread".to_string()
            } else {
                count("error").to_string()
            },
            if unread {
                "-".to_string()
            } else {
                count("warning").to_string()
            },
            if unread {
                "-".to_string()
            } else {
                count("note").to_string()
            },
        ]);
    }
    super::fleet::write_table(w, &rows)
}
