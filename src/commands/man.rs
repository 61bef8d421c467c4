//! `memlint man [COMMAND] [--dir DIR]`: the man pages, rendered by clap_mangen from the same
//! flags and help text as `--help`, so they cannot drift from the binary that prints them.

use crate::cli::{Cli, ManArgs};
use crate::error::{Error, Result};
use clap::CommandFactory;
use std::path::Path;
use std::process::ExitCode;

/// Writes the page of `cmd` and of each of its visible subcommands into `dir`, as
/// `clap_mangen::generate_to` names them (`memlint-lint.1`), each through a temporary file
/// renamed over its path: a link in the folder is replaced, never written through.
fn write_pages(cmd: &clap::Command, dir: &Path) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir)?;
    }
    let man = clap_mangen::Man::new(cmd.clone());
    let path = dir.join(man.get_filename());
    let mut roff = Vec::new();
    man.render(&mut roff).map_err(|source| Error::Output {
        path: path.display().to_string(),
        source,
    })?;
    super::output::check_destination(&format!("--dir {}: {}", dir.display(), path.display()), &path)?;
    super::output::write_own_file(&path, |w| w.write_all(&roff))
}

pub(crate) fn run(args: ManArgs) -> Result<ExitCode> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    if let Some(dir) = &args.dir {
        write_pages(&cmd, dir)?;
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
