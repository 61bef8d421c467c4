//! Registry credentials the way the docker CLI finds them: explicit ones first (only for the
//! registry they were given for), then `credHelpers`, `credsStore` and `auths` of
//! `$DOCKER_CONFIG/config.json` (default `~/.docker/config.json`), else anonymous.

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::warnings::Warnings;

/// Where the credentials for a registry came from, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    Anonymous,
    /// `--username` / `MEMLINT_USERNAME` with `MEMLINT_PASSWORD` or `--password-stdin`.
    Explicit,
    /// An `auths` entry of the docker config file.
    ConfigFile(PathBuf),
    /// A `docker-credential-NAME` program.
    Helper(String),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Anonymous => f.write_str("no credentials"),
            Origin::Explicit => {
                f.write_str("the credentials from --username and MEMLINT_PASSWORD/--password-stdin")
            }
            Origin::ConfigFile(p) => write!(f, "the credentials in {}", p.display()),
            Origin::Helper(h) => write!(f, "the credentials from docker-credential-{h}"),
        }
    }
}

const MAX_CONFIG_BYTES: u64 = 4 << 20;
/// A credential helper answers at once, or waits for a person (a keyring to unlock), which a
/// CI run cannot give it.
const HELPER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
const MAX_HELPER_OUTPUT: u64 = 64 * 1024;

#[derive(Debug, Default, Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    #[serde(default, rename = "credsStore")]
    creds_store: Option<String>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default, rename = "identitytoken")]
    identity_token: Option<String>,
    #[serde(default, rename = "registrytoken")]
    registry_token: Option<String>,
}

/// What `docker-credential-NAME get` prints.
#[derive(Debug, Deserialize)]
struct HelperAnswer {
    #[serde(rename = "Username", default)]
    username: String,
    #[serde(rename = "Secret", default)]
    secret: String,
}

/// The host docker files a registry's credentials under: Docker Hub's is its old v1 URL.
pub(crate) fn config_key(registry: &str) -> String {
    if is_docker_hub(registry) {
        "https://index.docker.io/v1/".to_string()
    } else {
        registry.to_string()
    }
}

fn is_docker_hub(registry: &str) -> bool {
    matches!(
        registry,
        "docker.io" | "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com"
    )
}

/// `https://ghcr.io/v2/` and `ghcr.io` name the same registry in `auths` (docker's
/// `ConvertToHostname`).
fn hostname_of(key: &str) -> &str {
    let k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    k.split('/').next().unwrap_or(k)
}

/// Credentials for `registry` from the docker config in `config_dir` (`$DOCKER_CONFIG`, else
/// `~/.docker`; `None` when neither is known), or anonymous. Problems with the config or a
/// helper are warnings, not errors: the registry may not need credentials at all.
pub(crate) fn from_docker_config(
    registry: &str,
    config_dir: Option<&Path>,
    warnings: &Warnings,
) -> (RegistryAuth, Origin) {
    let Some(path) = config_dir.map(|d| d.join("config.json")) else {
        return (RegistryAuth::Anonymous, Origin::Anonymous);
    };
    // A docker config is a few KB: only a regular file of at most 4 MiB is read (a FIFO or
    // a device there must not hang or fill memory).
    let text = match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return (RegistryAuth::Anonymous, Origin::Anonymous)
        }
        Err(e) => Err(e.to_string()),
        Ok(m) if !m.is_file() => Err("it is not a regular file".to_string()),
        Ok(m) if m.len() > MAX_CONFIG_BYTES => Err("it is over 4 MiB".to_string()),
        Ok(_) => std::fs::File::open(&path)
            .and_then(|f| {
                let mut text = Vec::new();
                std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_CONFIG_BYTES), &mut text)
                    .map(|_| text)
            })
            .map_err(|e| e.to_string()),
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => {
            warnings.warn(&format!(
                "cannot read {} ({e}); pulling anonymously",
                path.display()
            ));
            return (RegistryAuth::Anonymous, Origin::Anonymous);
        }
    };
    let config: DockerConfig = match serde_json::from_slice(&text) {
        Ok(c) => c,
        Err(e) => {
            warnings.warn(&format!(
                "{} is not valid JSON ({e}); pulling anonymously",
                path.display()
            ));
            return (RegistryAuth::Anonymous, Origin::Anonymous);
        }
    };
    lookup(&config, &path, registry, warnings)
}

fn lookup(
    config: &DockerConfig,
    path: &std::path::Path,
    registry: &str,
    warnings: &Warnings,
) -> (RegistryAuth, Origin) {
    let key = config_key(registry);
    let helper = config
        .cred_helpers
        .iter()
        .find(|(k, _)| hostname_of(k) == hostname_of(&key) || k.as_str() == registry)
        .map(|(_, h)| h.clone())
        .or_else(|| config.creds_store.clone())
        .filter(|h| !h.is_empty());
    if let Some(helper) = helper {
        match run_helper(&helper, &key) {
            Ok(Some(auth)) => return (auth, Origin::Helper(helper)),
            Ok(None) => {}
            Err(e) => warnings.warn(&format!("docker-credential-{helper}: {e}")),
        }
    }
    let entry = config
        .auths
        .iter()
        .find(|(k, _)| hostname_of(k) == hostname_of(&key))
        .or_else(|| {
            is_docker_hub(registry)
                .then(|| config.auths.iter().find(|(k, _)| is_docker_hub(hostname_of(k))))
                .flatten()
        })
        .map(|(_, e)| e);
    let Some(entry) = entry else {
        return (RegistryAuth::Anonymous, Origin::Anonymous);
    };
    if let Some(token) = entry.registry_token.as_ref().filter(|t| !t.is_empty()) {
        return (
            RegistryAuth::Bearer(token.clone()),
            Origin::ConfigFile(path.to_path_buf()),
        );
    }
    if let (Some(u), Some(p)) = (&entry.username, &entry.password) {
        if !u.is_empty() {
            return (
                RegistryAuth::Basic(u.clone(), p.clone()),
                Origin::ConfigFile(path.to_path_buf()),
            );
        }
    }
    if let Some(encoded) = entry.auth.as_ref().filter(|a| !a.is_empty()) {
        match decode_auth(encoded) {
            Some((u, p)) => return (RegistryAuth::Basic(u, p), Origin::ConfigFile(path.to_path_buf())),
            None => warnings.warn(&format!(
                "the `auth` of {registry} in {} is not base64 of USER:PASSWORD; pulling anonymously",
                path.display()
            )),
        }
    }
    if entry.identity_token.as_ref().is_some_and(|t| !t.is_empty()) {
        warnings.warn(&format!(
            "{} holds an identity token for {registry}, which memlint cannot exchange; pulling anonymously (set MEMLINT_USERNAME and MEMLINT_PASSWORD instead)",
            path.display()
        ));
    }
    (RegistryAuth::Anonymous, Origin::Anonymous)
}

fn decode_auth(encoded: &str) -> Option<(String, String)> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (u, p) = text.split_once(':')?;
    (!u.is_empty()).then(|| (u.to_string(), p.to_string()))
}

/// Asks `docker-credential-NAME get` for the credentials of `server`; `Ok(None)` when it has
/// none.
fn run_helper(name: &str, server: &str) -> Result<Option<RegistryAuth>, String> {
    if name.contains('/') || name.contains('\0') {
        return Err("the helper name must not contain `/`".to_string());
    }
    let program = format!("docker-credential-{name}");
    // The search PATH is the process's own, as the docker CLI's; looked up here rather than by
    // `Command`, whose execvp would take an empty entry for the current folder.
    let search = std::env::var_os("PATH").unwrap_or_default();
    let found = find_program(&program, &search).ok_or_else(|| {
        format!("cannot run {program}: it is not an executable file in a folder of PATH (empty and relative PATH entries are skipped)")
    })?;
    let answer = ask_helper(&found.to_string_lossy(), server, HELPER_TIMEOUT)?;
    let Some(answer) = answer else {
        return Ok(None);
    };
    if answer.secret.is_empty() {
        return Ok(None);
    }
    if answer.username == "<token>" {
        // An identity (refresh) token needs an OAuth exchange that oci-client does not do.
        return Err("it gave an identity token, which memlint cannot exchange; set MEMLINT_USERNAME and MEMLINT_PASSWORD instead".to_string());
    }
    Ok(Some(RegistryAuth::Basic(answer.username, answer.secret)))
}

/// The executable `program` in the folders of `search` (a `PATH` value). An empty entry, or a
/// relative one such as `.`, is skipped: for execvp an empty entry means the current folder,
/// where a repository being linted could plant `docker-credential-NAME`; Go's `exec.LookPath`,
/// which the docker CLI uses, refuses what it finds through such entries (`exec.ErrDot`).
fn find_program(program: &str, search: &std::ffi::OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(search)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// Runs `PROGRAM get` with `server` on its standard input, within `timeout`.
fn ask_helper(
    program: &str,
    server: &str,
    timeout: std::time::Duration,
) -> Result<Option<HelperAnswer>, String> {
    let mut child = Command::new(program)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A helper that exits without reading its input is answered by its exit status.
        let _ = stdin.write_all(server.as_bytes());
    }
    let capture = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            if let Some(p) = pipe {
                let _ = std::io::Read::read_to_end(&mut std::io::Read::take(p, MAX_HELPER_OUTPUT), &mut out);
            }
            out
        })
    };
    let stdout_reader = capture(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let stderr_reader = capture(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{program} did not answer within {} s",
                    timeout.as_secs_f32()
                ));
            }
            Err(e) => return Err(format!("{program} failed: {e}")),
        }
    };
    let out = std::process::Output {
        status,
        stdout: stdout_reader.join().unwrap_or_default(),
        stderr: stderr_reader.join().unwrap_or_default(),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        // The protocol's "not found" answer is on stdout.
        if stdout.contains("credentials not found") {
            return Ok(None);
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said = if stdout.trim().is_empty() {
            stderr.trim()
        } else {
            stdout.trim()
        };
        return Err(format!("{} ({said})", out.status));
    }
    serde_json::from_str(stdout.trim())
        .map(Some)
        .map_err(|e| format!("its answer is not the JSON of the credential helper protocol ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> DockerConfig {
        serde_json::from_str(text).unwrap_or_default()
    }

    fn found(config: &DockerConfig, registry: &str) -> RegistryAuth {
        lookup(
            config,
            std::path::Path::new("config.json"),
            registry,
            &Warnings::ignored(),
        )
        .0
    }

    #[test]
    fn auths_match_by_host_whatever_the_key_spelling() {
        let c = parse(
            r#"{"auths":{"https://ghcr.io/v2/":{"auth":"dTpw"},"127.0.0.1:5000":{"username":"a","password":"b"}}}"#,
        );
        assert_eq!(found(&c, "ghcr.io"), RegistryAuth::Basic("u".into(), "p".into()));
        assert_eq!(
            found(&c, "127.0.0.1:5000"),
            RegistryAuth::Basic("a".into(), "b".into())
        );
        assert_eq!(found(&c, "127.0.0.1:5001"), RegistryAuth::Anonymous);
    }

    #[test]
    fn docker_hub_uses_the_v1_key() {
        let c = parse(r#"{"auths":{"https://index.docker.io/v1/":{"auth":"aHViOnNlY3JldA=="}}}"#);
        assert_eq!(
            found(&c, "docker.io"),
            RegistryAuth::Basic("hub".into(), "secret".into())
        );
        assert_eq!(
            found(&c, "index.docker.io"),
            RegistryAuth::Basic("hub".into(), "secret".into())
        );
    }

    #[test]
    fn bad_auth_is_anonymous_with_a_warning() {
        let c = parse(r#"{"auths":{"r.example":{"auth":"%%%"}}}"#);
        let (sink, kept) = Warnings::collected();
        let (auth, _) = lookup(&c, std::path::Path::new("c.json"), "r.example", &sink);
        let warnings = kept.take();
        assert_eq!(auth, RegistryAuth::Anonymous);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }

    #[test]
    fn a_helper_that_does_not_answer_is_given_up() {
        let dir = tempfile::tempdir().map_err(|e| e.to_string());
        let Ok(dir) = dir else { return };
        let script = dir.path().join("docker-credential-slow");
        let written = std::fs::write(&script, "#!/bin/sh\nsleep 5\n").and_then(|_| {
            std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        });
        assert!(written.is_ok());
        let started = std::time::Instant::now();
        let answer = ask_helper(
            &script.to_string_lossy(),
            "r.example",
            std::time::Duration::from_millis(300),
        );
        assert!(
            matches!(&answer, Err(e) if e.contains("did not answer")),
            "{:?}",
            answer.as_ref().err()
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(3));
    }

    #[test]
    fn helpers_are_not_found_through_empty_or_relative_path_entries() {
        let Ok(dir) = tempfile::tempdir() else { return };
        let script = dir.path().join("docker-credential-planted");
        let written = std::fs::write(&script, "#!/bin/sh\necho '{}'\n").and_then(|_| {
            std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        });
        assert!(written.is_ok());
        // A relative entry that leads to the folder (from the current one, whatever it is)
        // would find the planted helper for execvp, as an empty entry would from inside it;
        // here neither finds anything.
        let Ok(cwd) = std::env::current_dir() else { return };
        let relative = format!(
            "{}{}",
            "../".repeat(cwd.components().count()),
            dir.path().display().to_string().trim_start_matches('/')
        );
        assert!(std::path::Path::new(&relative)
            .join("docker-credential-planted")
            .is_file());
        for search in [
            format!("/nonexistent:{relative}"),
            format!("{relative}:"),
            ":/nonexistent".to_string(),
            "/nonexistent::/also-not".to_string(),
            String::new(),
        ] {
            assert_eq!(
                find_program("docker-credential-planted", search.as_ref()),
                None,
                "{search:?}"
            );
        }
        let listed = format!("/nonexistent::{}", dir.path().display());
        assert_eq!(
            find_program("docker-credential-planted", listed.as_ref()),
            Some(script.clone())
        );
        // A file that is not executable is not a program.
        let plain = dir.path().join("docker-credential-plain");
        assert!(std::fs::write(&plain, "x").is_ok());
        assert_eq!(
            find_program("docker-credential-plain", dir.path().as_os_str()),
            None
        );
    }

    #[test]
    fn a_missing_helper_is_a_warning_and_auths_still_count() {
        let c = parse(
            r#"{"credHelpers":{"r.example":"memlint-no-such-helper"},"auths":{"r.example":{"auth":"dTpw"}}}"#,
        );
        let (sink, kept) = Warnings::collected();
        let (auth, _) = lookup(&c, std::path::Path::new("c.json"), "r.example", &sink);
        let warnings = kept.take();
        assert_eq!(auth, RegistryAuth::Basic("u".into(), "p".into()));
        assert!(
            warnings[0].contains("docker-credential-memlint-no-such-helper"),
            "{warnings:?}"
        );
    }
}
