//! `memlint inspect IMAGE`: what the image is made of.

use crate::cli::{Format, InspectArgs};
use crate::error::{Error, Result};
use crate::platform::Platform;
use crate::reference::Reference;
use crate::report::inspect::{list_paths, InspectReport};
use crate::sources;
use std::process::ExitCode;

/// A JSON document with the contract's version first.
#[derive(serde::Serialize)]
struct Versioned<'a, T: serde::Serialize> {
    schema_version: &'static str,
    #[serde(flatten)]
    doc: &'a T,
}

impl<'a, T: serde::Serialize> Versioned<'a, T> {
    fn new(doc: &'a T) -> Self {
        Versioned {
            schema_version: crate::report::model::SCHEMA_VERSION,
            doc,
        }
    }
}

pub(crate) fn run(args: InspectArgs) -> Result<ExitCode> {
    let reference = Reference::parse(&args.image)?;
    let stdin_taken_by = (args.image == "docker-archive:-").then_some("an image (docker-archive:-)");
    // inspect has no --config: the nearest .memlint.toml gives its [limits], as for lint; the
    // rest of that file (ignores, severities) is lint's, and so are its mistakes.
    let config_limits = match super::config_path(None) {
        Some((path, inside)) => {
            crate::settings::load_limits(&path, inside.as_deref()).map_err(Error::Config)?
        }
        None => Vec::new(),
    };
    let mut options = super::source_options(
        &args.source,
        &config_limits,
        args.jobs,
        args.quiet,
        stdin_taken_by,
    )?;
    super::bind_credentials(
        &mut options,
        &args.source,
        std::slice::from_ref(&args.image),
        None,
    )?;
    if let Some(p) = &args.platform {
        options.platform = Some(Platform::parse(p)?);
    }
    let image = sources::open(&args.image, &reference, &options)?;
    let facts = crate::facts::derive(&image);
    let mut report = InspectReport::new(&image, &facts);
    if args.files {
        report.paths = Some(list_paths(&image.tree));
    }
    super::emit_with(args.output.as_deref(), Default::default(), |w| {
        match args.format {
            Format::Json => {
                report.files.paths = report.paths.take();
                crate::untrusted::write_json(w, &Versioned::new(&report))
            }
            Format::Text => report.write_text(w),
        }
    })?;
    Ok(ExitCode::SUCCESS)
}
