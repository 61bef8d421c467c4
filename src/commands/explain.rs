//! `memlint explain RULE`: the rule's documentation, from rules/<id>.md.

use crate::cli::ExplainArgs;
use crate::error::{Error, Result};
use crate::rules;
use std::process::ExitCode;

pub(crate) fn run(args: ExplainArgs) -> Result<ExitCode> {
    match rules::find(&args.rule) {
        Some(r) => {
            super::emit(None, r.doc)?;
            Ok(ExitCode::SUCCESS)
        }
        None => Err(Error::UnknownRule {
            id: args.rule.clone(),
            help: match rules::nearest(&args.rule) {
                Some(n) => format!("did you mean `{n}`? `memlint rules` lists every rule"),
                None => "`memlint rules` lists every rule".to_string(),
            },
        }),
    }
}
