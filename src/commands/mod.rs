//! One file per subcommand.

mod explain;
mod hook;
pub mod inspect;
pub(crate) mod lint;
mod rules;

use crate::cli::{Cli, Command};
use crate::error::{Error, Result};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Lint(args) => lint::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Rules(args) => rules::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Hook(cmd) => hook::run(cmd),
    }
}

/// Writes a report to a file, or to standard output; a closed pipe is not an error.
pub(crate) fn emit(output: Option<&Path>, text: &str) -> Result<()> {
    match output {
        Some(path) => std::fs::write(path, text).map_err(|source| Error::Output {
            path: path.display().to_string(),
            source,
        }),
        None => {
            let mut out = std::io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::Output {
                    path: "standard output".to_string(),
                    source: e,
                }),
                _ => Ok(()),
            }
        }
    }
}
