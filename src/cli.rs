//! Command-line flags and their help text; no logic.

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "memlint",
    version,
    about = "Lint built container images for memory pitfalls",
    long_about = "memlint reads a container image without running it (an OCI layout, an OCI or \
docker-save archive, or an unpacked root file system), streams its layers, and reports what \
makes memory climb and never come down: glibc malloc arenas under sharp/libvips or .NET, an \
LD_PRELOAD that silently fails, Npgsql without Kerberos, Node.js semi-space sizing.",
    after_help = "IMAGE references:\n  registry:REF               an image in a registry (node:24-slim, ghcr.io/o/app@sha256:...)\n  docker:REF                 an image in the local Docker Engine (DOCKER_HOST)\n  podman:REF                 an image in the local Podman store\n  oci-dir:PATH[:NAME]        an OCI image layout folder\n  oci-archive:PATH[:NAME]    a tar of an OCI image layout\n  docker-archive:PATH[:NAME|:@N]  `docker save` output (docker-archive:- reads stdin)\n  dir:PATH                   an unpacked root file system\n  PATH                       an existing path, recognised by its content\n  REF                        anything else is a registry reference"
)]
pub struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

// Parsed once per run: the size of the largest variant (`lint`'s flags) costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Lint images for memory pitfalls; exit 1 when a finding reaches --fail-on
    Lint(LintArgs),
    /// Show what an image is made of: manifest, platform, layers, config, file counts and facts
    Inspect(InspectArgs),
    /// List every rule with its default severity and title
    Rules(RulesArgs),
    /// Show the documentation of one rule
    Explain(ExplainArgs),
    /// The git pre-push hook: install it, or run it
    #[command(subcommand)]
    Hook(HookCommand),
    /// Print the shell completion script for bash, zsh, fish, powershell or elvish
    Completions(CompletionsArgs),
    /// Print memlint's man page (roff), or write every page into a folder
    Man(ManArgs),
    /// Join the JSON reports of `lint --k8s --shard` runs into one report
    Merge(MergeArgs),
    /// Print the JSON Schema (draft 2020-12) of memlint's JSON reports or facts
    Schema(SchemaArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct SchemaArgs {
    /// Which document: `report` (`lint --format json`, `merge`) or `facts` (`inspect --format
    /// json`'s `facts`, as each report carries them)
    #[arg(value_enum, value_name = "DOCUMENT")]
    pub(crate) document: SchemaDocument,
}

/// The documents `memlint schema` describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum SchemaDocument {
    Report,
    Facts,
}

#[derive(Debug, clap::Args)]
pub(crate) struct MergeArgs {
    /// JSON reports written by `memlint lint --k8s --format json` (`-` for standard input)
    #[arg(value_name = "REPORT.json", required = true)]
    pub(crate) reports: Vec<PathBuf>,

    /// Format of the merged report
    #[arg(long, value_enum, default_value_t = MergeFormat::Json)]
    pub(crate) format: MergeFormat,

    /// Exit 1 when a merged finding is at or above this severity
    #[arg(long, value_enum, value_name = "SEVERITY", default_value_t = FailOn::Warning)]
    pub(crate) fail_on: FailOn,

    /// Write the report to this file instead of standard output
    #[arg(long, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,

    /// Also write the merged report in another format to a file: FORMAT=FILE (repeatable), e.g.
    /// `-o html=fleet.html -o sarif=fleet.sarif`
    #[arg(short = 'o', value_name = "FORMAT=FILE", value_parser = parse_output)]
    pub(crate) outputs: Vec<(LintFormat, PathBuf)>,

    /// Count and fail on only the merged findings not in this baseline file (as `lint
    /// --baseline`); what a shard already baselined stays baselined
    #[arg(long, value_name = "FILE")]
    pub(crate) baseline: Option<PathBuf>,

    /// Rewrite the --baseline file without its entries that no longer occur
    #[arg(long, requires = "baseline")]
    pub(crate) prune_baseline: bool,

    /// Code scanning category of the SARIF run: the `--category` the shards were linted with
    /// (default: `memlint/k8s`, as `lint --k8s`)
    #[arg(long, value_name = "CATEGORY")]
    pub(crate) category: Option<String>,
}

/// Formats of `merge`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum MergeFormat {
    Json,
    Text,
    Sarif,
    Github,
    Gitlab,
    Junit,
    Html,
}

impl MergeFormat {
    /// The same format of `lint`: a merge renders as `lint --k8s` does.
    pub(crate) fn as_lint(self) -> LintFormat {
        match self {
            MergeFormat::Json => LintFormat::Json,
            MergeFormat::Text => LintFormat::Text,
            MergeFormat::Sarif => LintFormat::Sarif,
            MergeFormat::Github => LintFormat::Github,
            MergeFormat::Gitlab => LintFormat::Gitlab,
            MergeFormat::Junit => LintFormat::Junit,
            MergeFormat::Html => LintFormat::Html,
        }
    }
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Load them:\n  bash: echo 'source <(memlint completions bash)' >> ~/.bashrc\n  zsh:  memlint completions zsh > \"${fpath[1]}/_memlint\"\n  fish: memlint completions fish > ~/.config/fish/completions/memlint.fish\n  powershell: memlint completions powershell | Out-String | Invoke-Expression"
)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete in
    #[arg(value_name = "SHELL", value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ManArgs {
    /// The page of this subcommand (e.g. `lint` for memlint-lint(1)) instead of memlint(1)
    #[arg(value_name = "COMMAND", conflicts_with = "dir")]
    pub(crate) command: Option<String>,
    /// Write memlint.1 and a page for each subcommand (memlint-lint.1, ...) into this folder
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum HookCommand {
    /// Write a git pre-push hook that lints the images listed in .memlint.toml
    Install(HookInstallArgs),
    /// Lint the images listed in .memlint.toml (what the hook and pre-commit run)
    Run(HookRunArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct HookInstallArgs {
    /// Print the hook instead of writing it
    #[arg(long)]
    pub(crate) print: bool,
    /// Replace a pre-push hook that memlint did not write
    #[arg(long)]
    pub(crate) force: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct HookRunArgs {
    /// The config file (default: .memlint.toml found upward from the current folder)
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Arguments git passes to pre-push hooks (remote name and URL); not used
    #[arg(hide = true)]
    pub(crate) git_args: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct LintArgs {
    /// The images to lint, each in its own report section (see IMAGE references below); with
    /// --k8s, only the manifests' containers that run one of these
    #[arg(value_name = "IMAGE", required_unless_present = "k8s")]
    pub(crate) images: Vec<String>,

    /// Kubernetes manifests: a file, a folder (read recursively for *.yaml and *.yml) or `-`
    /// for standard input (`helm template RELEASE CHART | memlint lint --k8s -`); every image they
    /// reference is linted once per container that runs it, with the container's env,
    /// command and limits (repeatable)
    #[arg(long, value_name = "PATH")]
    pub(crate) k8s: Vec<PathBuf>,

    /// With --k8s: read the manifests' image REF from SOURCE (any IMAGE reference), e.g.
    /// `--image ghcr.io/o/app:1.2=oci-archive:app.tar` (repeatable)
    #[arg(long = "image", value_name = "REF=SOURCE", value_parser = parse_image_map, requires = "k8s")]
    pub(crate) image_map: Vec<(String, String)>,

    /// With --k8s: images read at once [default: 2]
    #[arg(long, value_name = "N", requires = "k8s")]
    pub(crate) parallel: Option<usize>,

    /// With --k8s: lint only shard I of N of the distinct images (I from 1 to N, or
    /// `INDEX+1/N` with a 0-based index such as an Indexed Job's `$(JOB_COMPLETION_INDEX)`);
    /// every image falls in exactly one shard, the same on every run
    #[arg(long, value_name = "I/N", value_parser = Shard::parse, requires = "k8s")]
    pub(crate) shard: Option<Shard>,

    /// Format of the report on standard output
    #[arg(long, value_enum, default_value_t = LintFormat::Text)]
    pub(crate) format: LintFormat,

    /// Also write a report in another format to a file: FORMAT=FILE (repeatable), e.g.
    /// `-o sarif=memlint.sarif -o json=memlint.json`
    #[arg(short = 'o', value_name = "FORMAT=FILE", value_parser = parse_output)]
    pub(crate) outputs: Vec<(LintFormat, PathBuf)>,

    /// Exit 1 when a finding is at or above this severity [default: warning, or fail-on in
    /// .memlint.toml]
    #[arg(long, value_enum, value_name = "SEVERITY")]
    pub(crate) fail_on: Option<FailOn>,

    /// The Dockerfile the image was built from, to put findings on its lines (default:
    /// ./Dockerfile when it exists)
    #[arg(long, value_name = "PATH")]
    pub(crate) dockerfile: Option<PathBuf>,

    /// The build stage the image was built from (`docker build --target`)
    #[arg(long, value_name = "STAGE")]
    pub(crate) target: Option<String>,

    /// Where SARIF, GitHub, GitLab and JUnit findings point when there is no Dockerfile (a
    /// repository-relative path)
    #[arg(long, value_name = "PATH", default_value = "Dockerfile")]
    pub(crate) sarif_artifact: String,

    /// Code scanning category of the SARIF run (default: derived from the image name and
    /// platform; `memlint` for several images, `memlint/k8s` with --k8s)
    #[arg(long, value_name = "CATEGORY")]
    pub(crate) category: Option<String>,

    /// The config file (default: .memlint.toml found upward from the current folder)
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// Also list the findings that ignores hide
    #[arg(long)]
    pub(crate) show_ignored: bool,

    /// Write the report to this file instead of standard output
    #[arg(long, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,

    /// Pick this platform from a multi-platform image (os/arch[/variant]), or `all` to lint
    /// every platform and show where they differ
    #[arg(long, value_name = "PLATFORM")]
    pub(crate) platform: Option<String>,

    /// Do not report this rule (repeatable)
    #[arg(long, value_name = "RULE")]
    pub(crate) ignore: Vec<String>,

    /// Run only the rules added in this memlint release or before, e.g. 0.1.0, so that an
    /// upgrade adds no rule until the pin moves (wins over rules-version in .memlint.toml;
    /// `memlint rules --since VERSION` lists what a move would bring)
    #[arg(long, value_name = "VERSION")]
    pub(crate) rules_version: Option<String>,

    /// Report, count and fail on only the findings not in this baseline file (written by
    /// --write-baseline); its entries that no longer occur are reported as fixed
    #[arg(long, value_name = "FILE")]
    pub(crate) baseline: Option<PathBuf>,

    /// Write this run's findings (those no ignore hides) to FILE as a baseline; with
    /// --baseline, each keeps the day it was first seen
    #[arg(long, value_name = "FILE")]
    pub(crate) write_baseline: Option<PathBuf>,

    /// Rewrite the --baseline file without its entries that no longer occur
    #[arg(long, requires = "baseline")]
    pub(crate) prune_baseline: bool,

    /// No colours, even on a terminal (NO_COLOR does the same)
    #[arg(long)]
    pub(crate) no_color: bool,

    /// Print only the findings
    #[arg(short, long, conflicts_with = "verbose")]
    pub(crate) quiet: bool,

    /// Also print the facts behind each decision and why silent rules stayed silent
    #[arg(short, long)]
    pub(crate) verbose: bool,

    /// Layers read at once (default: the number of CPUs)
    #[arg(long, value_name = "N")]
    pub(crate) jobs: Option<usize>,

    #[command(flatten)]
    pub(crate) source: SourceArgs,
}

/// How images are fetched and cached; shared by `lint` and `inspect`.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct SourceArgs {
    /// The layer analysis cache folder [default: $XDG_CACHE_HOME/memlint, else ~/.cache/memlint]
    #[arg(long, value_name = "DIR", env = "MEMLINT_CACHE_DIR")]
    pub(crate) cache_dir: Option<PathBuf>,

    /// Neither read nor write the layer analysis cache (wins over --cache-dir and
    /// MEMLINT_CACHE_DIR)
    #[arg(long)]
    pub(crate) no_cache: bool,

    /// Talk plain HTTP (or HTTPS without verification) to this registry host[:port]
    /// (repeatable); localhost and 127.0.0.1 need no flag
    #[arg(long, value_name = "HOST")]
    pub(crate) insecure_registry: Vec<String>,

    /// Also trust the CA certificates in this PEM file for registries (repeatable)
    #[arg(long, value_name = "FILE")]
    pub(crate) registry_ca: Vec<PathBuf>,

    /// User name for the registry of the image reference (with MEMLINT_PASSWORD or
    /// --password-stdin); sent to no other registry
    #[arg(long, value_name = "USER", env = "MEMLINT_USERNAME")]
    pub(crate) username: Option<String>,

    /// Read the registry password (or token) from standard input
    #[arg(long)]
    pub(crate) password_stdin: bool,

    /// Send the explicit credentials (--username with MEMLINT_PASSWORD or --password-stdin) to
    /// this registry host[:port] (repeatable). With --k8s, explicit credentials go only to a
    /// registry named here, by an IMAGE argument or by an --image SOURCE: never to one that only
    /// a manifest names
    #[arg(long, value_name = "HOST")]
    pub(crate) credentials_registry: Vec<String>,

    /// Show progress bars on standard error even when it is not a terminal
    #[arg(long)]
    pub(crate) progress: bool,

    /// End an image's read after this long (90s, 10m, 1h; 0 for no bound); each image of the
    /// run has its own [default: 10m]
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::Timeout::parse)]
    pub(crate) timeout: Option<crate::duration::Timeout>,

    /// Not a flag: `memlint hook run` reads images its repository's .memlint.toml names, which
    /// must not choose where explicit credentials go
    #[arg(skip)]
    pub(crate) no_explicit_credentials: bool,

    /// Change a reader limit: NAME=VALUE with the names and sizes of MEMLINT_LIMITS, e.g.
    /// max_layer_bytes=128G (repeatable); wins over MEMLINT_LIMITS, which wins over [limits] in
    /// .memlint.toml
    #[arg(long = "limit", value_name = "NAME=VALUE")]
    pub(crate) limits: Vec<String>,
}

/// Formats of `lint`: text for people, json (the inspect JSON plus findings), sarif (GitHub
/// code scanning), github (workflow command annotations), gitlab (Code Quality), junit (JUnit
/// XML for Jenkins, GitLab and Azure DevOps), html (one self-contained page for people).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum LintFormat {
    Text,
    Json,
    Sarif,
    Github,
    Gitlab,
    Junit,
    Html,
}

fn parse_output(s: &str) -> Result<(LintFormat, PathBuf), String> {
    let (format, file) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not FORMAT=FILE, e.g. sarif=memlint.sarif"))?;
    let format = LintFormat::from_str(format, true).map_err(|_| {
        format!("`{format}` is not a format: text, json, sarif, github, gitlab, junit or html")
    })?;
    if file.is_empty() {
        return Err("the file after `=` is empty".to_string());
    }
    Ok((format, PathBuf::from(file)))
}

pub(crate) use crate::finding::FailOn;

fn parse_image_map(s: &str) -> Result<(String, String), String> {
    // A reference holds no `=`; a SOURCE may (a path), so split at the first.
    let (reference, source) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not REF=SOURCE, e.g. ghcr.io/o/app:1.2=oci-archive:app.tar"))?;
    if reference.is_empty() || source.is_empty() {
        return Err(format!("`{s}` is not REF=SOURCE: both sides must be given"));
    }
    Ok((reference.to_string(), source.to_string()))
}

/// `--shard I/N`: shard I (from 1) of N.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shard {
    pub(crate) index: u32,
    pub(crate) count: u32,
}

impl Shard {
    pub(crate) fn parse(s: &str) -> Result<Shard, String> {
        let bad =
            || format!("`{s}` is not I/N with I from 1 to N (e.g. 2/4), or INDEX+1/N with a 0-based INDEX");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        // `$(JOB_COMPLETION_INDEX)+1/4`: Kubernetes expands the variable but cannot add.
        let index: u32 = match i.trim().split_once('+') {
            Some((base, one)) if one.trim() == "1" => base
                .trim()
                .parse::<u32>()
                .map_err(|_| bad())?
                .checked_add(1)
                .ok_or_else(bad)?,
            Some(_) => return Err(bad()),
            None => i.trim().parse().map_err(|_| bad())?,
        };
        if count == 0 || index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct RulesArgs {
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,

    /// Only the rules added, or changed in when they fire, after this memlint release (e.g.
    /// 0.1.0): what moving a --rules-version pin from it would bring
    #[arg(long, value_name = "VERSION")]
    pub(crate) since: Option<String>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ExplainArgs {
    /// The rule id, e.g. ld-preload-missing
    #[arg(value_name = "RULE")]
    pub(crate) rule: String,
}

#[derive(Debug, clap::Args)]
pub(crate) struct InspectArgs {
    /// The image to read (see IMAGE references below)
    #[arg(value_name = "IMAGE")]
    pub(crate) image: String,

    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,

    /// Pick this platform from a multi-platform image (os/arch[/variant])
    #[arg(long, value_name = "PLATFORM")]
    pub(crate) platform: Option<String>,

    /// Write the report to this file instead of standard output
    #[arg(long, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,

    /// List every path of the merged tree (type, mode, size, link target, layer)
    #[arg(long)]
    pub(crate) files: bool,

    /// Layers read at once (default: the number of CPUs)
    #[arg(long, value_name = "N")]
    pub(crate) jobs: Option<usize>,

    /// No progress bars
    #[arg(short, long)]
    pub(crate) quiet: bool,

    #[command(flatten)]
    pub(crate) source: SourceArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    Text,
    Json,
}
