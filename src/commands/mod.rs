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

/// The reader options that `--jobs`, `--platform` and the source flags give.
pub(crate) fn source_options(
    source: &crate::cli::SourceArgs,
    jobs: Option<usize>,
    quiet: bool,
    stdin_needed: bool,
) -> Result<crate::sources::Options> {
    use crate::sources::{registry::RegistryOptions, Options};
    use std::io::IsTerminal;
    let mut options = Options {
        interests: crate::facts::interests(),
        config_interests: Some(crate::facts::interests_for),
        ..Options::default()
    };
    if let Some(j) = jobs {
        options.workers = j.max(1);
    }
    options.cache = if source.no_cache {
        None
    } else {
        source
            .cache_dir
            .clone()
            .or_else(crate::cache::LayerCache::default_dir)
            .map(|dir| std::sync::Arc::new(crate::cache::LayerCache::open(&dir)))
    };
    let password = if source.password_stdin {
        if stdin_needed {
            return Err(Error::BadArgument {
                what: "--password-stdin".to_string(),
                help: "standard input already carries an image (docker-archive:-); give the password in MEMLINT_PASSWORD instead".to_string(),
            });
        }
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut text)
            .map_err(|e| Error::io("standard input", e))?;
        Some(text.trim_end_matches(['\r', '\n']).to_string())
    } else {
        std::env::var("MEMLINT_PASSWORD").ok().filter(|p| !p.is_empty())
    };
    let username = source.username.clone().filter(|u| !u.is_empty());
    if password.is_some() != username.is_some() {
        return Err(Error::BadArgument {
            what: if username.is_some() {
                "--username (MEMLINT_USERNAME) without a password".to_string()
            } else {
                "a registry password without a user name".to_string()
            },
            help: "give both: --username (or MEMLINT_USERNAME) and MEMLINT_PASSWORD (or --password-stdin)"
                .to_string(),
        });
    }
    options.registry = RegistryOptions {
        insecure: source.insecure_registry.clone(),
        ca_files: source.registry_ca.clone(),
        username,
        password,
        ..Default::default()
    };
    options.progress = !quiet && (source.progress || std::io::stderr().is_terminal());
    Ok(options)
}

/// Explicit registry credentials belong to one registry: the one the references name. When
/// they name several, which one the user meant cannot be known, so nothing is sent.
pub(crate) fn bind_credentials(options: &crate::sources::Options, references: &[String]) -> Result<()> {
    if options.registry.username.is_none() {
        return Ok(());
    }
    let mut registries: Vec<String> = references
        .iter()
        .filter_map(|r| match crate::reference::Reference::parse(r) {
            Ok(crate::reference::Reference::Registry(name)) => {
                crate::sources::registry::parse_reference(&name)
                    .ok()
                    .map(|r| r.registry().to_string())
            }
            _ => None,
        })
        .collect();
    registries.sort();
    registries.dedup();
    match registries.as_slice() {
        [] => Ok(()),
        [one] => {
            let _ = options.registry.explicit_registry.set(one.clone());
            Ok(())
        }
        many => Err(Error::BadArgument {
            what: format!(
                "--username/MEMLINT_USERNAME with references to {} registries ({})",
                many.len(),
                many.join(", ")
            ),
            help: "explicit credentials go to one registry only: lint each registry in its own run, or log in with `docker login` (memlint reads ~/.docker/config.json); a path that does not exist is read as a Docker Hub reference".to_string(),
        }),
    }
}
