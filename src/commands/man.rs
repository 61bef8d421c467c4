//! `memlint man [COMMAND] [--dir DIR]`: the man pages, rendered by clap_mangen from the same
//! flags and help text as `--help`, so they cannot drift from the binary that prints them.

use crate::cli::{Cli, ManArgs};
use crate::error::{Error, Result};
use clap::CommandFactory;
use std::process::ExitCode;

pub fn run(args: ManArgs) -> Result<ExitCode> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    if let Some(dir) = &args.dir {
        clap_mangen::generate_to(cmd, dir).map_err(|source| Error::Output {
            path: dir.display().to_string(),
            source,
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let page = match &args.command {
        None => cmd,
        Some(name) => {
            let names: Vec<String> = cmd
                .get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(|s| s.get_name().to_string())
                .collect();
            match cmd.find_subcommand(name).filter(|s| !s.is_hide_set()) {
                Some(sub) => sub.clone(),
                None => {
                    return Err(Error::BadArgument {
                        what: format!("`{name}`"),
                        help: format!("memlint's commands are: {}", names.join(", ")),
                    })
                }
            }
        }
    };
    let mut roff = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut roff)
        .map_err(|source| Error::Output {
            path: "standard output".to_string(),
            source,
        })?;
    super::emit_own(&roff)?;
    Ok(ExitCode::SUCCESS)
}
