//! `memlint hook install`: a git pre-push hook that lints the images listed in .memlint.toml
//! and blocks the push on findings at or above `fail-on`. `memlint hook run` is what it runs.

use crate::cli::{FailOn, HookCommand, HookInstallArgs, HookRunArgs, LintArgs, LintFormat};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Marks hooks memlint wrote, so that install replaces only its own.
const MARKER: &str = "# installed by memlint hook install";

pub(crate) fn run(cmd: HookCommand) -> Result<ExitCode> {
    match cmd {
        HookCommand::Install(a) => install(a),
        HookCommand::Run(a) => run_hook(a),
    }
}

fn script() -> String {
    // Prefer the memlint on PATH; fall back to the binary that installed the hook.
    let this = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "memlint".to_string());
    format!(
        r#"#!/bin/sh
{MARKER}
# Lints the images listed under `images` in .memlint.toml before a push, and refuses the push
# when a finding reaches `fail-on`. Skip once with: git push --no-verify
if command -v memlint >/dev/null 2>&1; then
  exec memlint hook run "$@"
fi
exec '{}' hook run "$@"
"#,
        this.replace('\'', r"'\''")
    )
}

fn hooks_dir() -> Result<PathBuf> {
    let git = |args: &[&str]| -> Option<String> {
        let out = std::process::Command::new("git").args(args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
            .filter(|s| !s.is_empty())
    };
    if let Some(p) = git(&["config", "core.hooksPath"]) {
        let p = PathBuf::from(p);
        if p.is_absolute() {
            return Ok(p);
        }
        let top = git(&["rev-parse", "--show-toplevel"])
            .map(PathBuf::from)
            .unwrap_or_default();
        return Ok(top.join(p));
    }
    git(&["rev-parse", "--git-path", "hooks"])
        .map(PathBuf::from)
        .ok_or_else(|| Error::BadArgument {
            what: "the current folder".to_string(),
            help: "run `memlint hook install` inside a git repository".to_string(),
        })
}

fn install(a: HookInstallArgs) -> Result<ExitCode> {
    let text = script();
    if a.print {
        super::emit(None, &text)?;
        return Ok(ExitCode::SUCCESS);
    }
    let dir = hooks_dir()?;
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(dir.display(), e))?;
    let path = dir.join("pre-push");
    if let Ok(existing) = std::fs::read_to_string(&path) {
        if !existing.contains(MARKER) && !a.force {
            return Err(Error::BadArgument {
                what: format!("{} (a pre-push hook memlint did not write)", path.display()),
                help: "pass --force to replace it, or call `memlint hook run` from it".to_string(),
            });
        }
    }
    write_executable(&path, &text)?;
    eprintln!("memlint: wrote {}", path.display());
    if crate::settings::Settings::find(Path::new(".")).is_none() {
        eprintln!("memlint: list the images to lint in .memlint.toml, e.g. images = [\"docker:app:dev\"]");
    }
    Ok(ExitCode::SUCCESS)
}

fn write_executable(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).map_err(|source| Error::Output {
        path: path.display().to_string(),
        source,
    })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).map_err(|source| Error::Output {
        path: path.display().to_string(),
        source,
    })
}

fn run_hook(a: HookRunArgs) -> Result<ExitCode> {
    let settings = super::lint::load_settings(a.config.as_deref())?;
    if settings.images.is_empty() {
        eprintln!(
            "memlint: no images listed in .memlint.toml (images = [\"docker:app:dev\"]); nothing to lint"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let args = LintArgs {
        images: settings.images.clone(),
        k8s: Vec::new(),
        image_map: Vec::new(),
        parallel: None,
        shard: None,
        format: LintFormat::Text,
        outputs: Vec::new(),
        fail_on: None::<FailOn>,
        dockerfile: None,
        target: None,
        sarif_artifact: "Dockerfile".to_string(),
        category: None,
        config: a.config.clone(),
        show_ignored: false,
        output: None,
        platform: None,
        ignore: Vec::new(),
        // rules-version in .memlint.toml pins the hook's rules as it pins lint's.
        rules_version: None,
        // The pre-push hook gates on every finding: a baseline is CI's to apply.
        baseline: None,
        write_baseline: None,
        prune_baseline: false,
        no_color: false,
        quiet: false,
        verbose: false,
        jobs: None,
        // The hook has no flags of its own: the environment is how users set these. The
        // images come from the repository's .memlint.toml, which must not choose where the
        // user's MEMLINT_USERNAME/MEMLINT_PASSWORD go: they are not sent; the user's own
        // docker config (`docker login`) still applies.
        source: crate::cli::SourceArgs {
            cache_dir: std::env::var_os("MEMLINT_CACHE_DIR")
                .filter(|v| !v.is_empty())
                .map(std::path::PathBuf::from),
            no_explicit_credentials: true,
            ..Default::default()
        },
    };
    if std::env::var_os("MEMLINT_USERNAME").is_some_and(|v| !v.is_empty())
        || std::env::var_os("MEMLINT_PASSWORD").is_some_and(|v| !v.is_empty())
    {
        eprintln!(
            "memlint: warning: MEMLINT_USERNAME/MEMLINT_PASSWORD are not sent to the registries .memlint.toml names (a repository must not choose where your credentials go); use `docker login REGISTRY` for them, or run `memlint lint` with the images on the command line"
        );
    }
    let code = super::lint::run(args)?;
    if code != ExitCode::SUCCESS {
        eprintln!("memlint: push refused; fix the findings above, or push with --no-verify");
    }
    Ok(code)
}
