//! `memlint completions SHELL`: the shell's completion script, from the flags clap knows.

use crate::cli::{Cli, CompletionsArgs};
use crate::error::Result;
use clap::CommandFactory;
use std::process::ExitCode;

pub(crate) fn run(args: CompletionsArgs) -> Result<ExitCode> {
    let mut cmd = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "memlint", &mut script);
    super::emit_own(&script)?;
    Ok(ExitCode::SUCCESS)
}
