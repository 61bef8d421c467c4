//! `memlint schema report|facts`: the JSON Schema (draft 2020-12) of memlint's JSON, generated
//! from the types that write and read it (`schema/report.json`, `schema/facts.json`).

use crate::cli::{SchemaArgs, SchemaDocument};
use crate::error::{Error, Result};
use crate::report::model;
use std::process::ExitCode;

pub(crate) fn run(args: SchemaArgs) -> Result<ExitCode> {
    let schema = match args.document {
        SchemaDocument::Report => model::report_schema(),
        SchemaDocument::Facts => model::facts_schema(),
    };
    let mut text = serde_json::to_string_pretty(&schema).map_err(|e| Error::Output {
        path: "standard output".to_string(),
        source: std::io::Error::other(e),
    })?;
    text.push('\n');
    super::emit(None, &text)?;
    Ok(ExitCode::SUCCESS)
}
