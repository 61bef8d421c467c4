//! Releases and how users get memlint: the GitHub Action's install step against a local server
//! laid out like GitHub's release downloads, its lint step's argument and output handling, the
//! release workflow's pins, and the container image (docker/Dockerfile) whose final stage is
//! built with buildah from Debian's packages and run under podman.

use crate::common;

use common::podman::Podman;
use common::*;
use serde_json::Value;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A tiny HTTP/1.1 file server on 127.0.0.1: GET of a path under `root`, 404 otherwise. Every
/// request path is recorded. The thread ends with the test process.
struct Server {
    base: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start(root: &Path) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let root = root.to_path_buf();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                // Headers, up to the empty line.
                loop {
                    let mut h = String::new();
                    match reader.read_line(&mut h) {
                        Ok(0) | Err(_) => break,
                        Ok(_) if h == "\r\n" || h == "\n" => break,
                        Ok(_) => {}
                    }
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                seen.lock().unwrap().push(path.clone());
                let file = root.join(path.trim_start_matches('/'));
                let ok = !path.contains("..") && file.is_file();
                let body = if ok {
                    fs::read(&file).unwrap()
                } else {
                    b"Not Found".to_vec()
                };
                let status = if ok { "200 OK" } else { "404 Not Found" };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(&body);
            }
        });
        Server { base, requests }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// The memlint binary the tests built, without its debug info (the same code, a tenth the size).
fn stripped_memlint(dir: &Path) -> PathBuf {
    require_tool("strip");
    let out = dir.join("memlint");
    run(Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&out)
        .arg(env!("CARGO_BIN_EXE_memlint")));
    out
}

/// A release asset as the release workflow packs it: `memlint` (and README.md) at the top.
fn pack_asset(binary: &Path, out: &Path) {
    let stage = out.with_extension("stage");
    fs::create_dir_all(&stage).unwrap();
    fs::copy(binary, stage.join("memlint")).unwrap();
    fs::copy(format!("{ROOT}/README.md"), stage.join("README.md")).unwrap();
    run(Command::new("tar")
        .arg("-czf")
        .arg(out)
        .arg("-C")
        .arg(&stage)
        .args(["memlint", "README.md"]));
    fs::remove_dir_all(&stage).unwrap();
}

/// What one run of scripts/action-install.sh did.
struct Install {
    out: Output,
    /// The installed binary's `--version`, or "" when nothing runnable was installed.
    said: String,
    /// The arguments the stand-in `cargo` was called with, one call a line.
    cargo_calls: String,
}

struct Bench {
    dir: tempfile::TempDir,
    server: Server,
    bin: PathBuf,
    asset_sha: String,
}

impl Bench {
    /// A release folder laid out like GitHub's (`/OWNER/REPO/releases/download/TAG/ASSET`)
    /// holding the real memlint for x86_64 Linux, and a stand-in `cargo` on PATH that records
    /// its calls and installs a script saying "built from source".
    fn new() -> Bench {
        let dir = tempfile::tempdir().unwrap();
        let release = dir
            .path()
            .join(format!("srv/memlint/memlint/releases/download/v{VERSION}"));
        fs::create_dir_all(&release).unwrap();
        let asset = release.join(format!("memlint-{VERSION}-x86_64-unknown-linux-gnu.tar.gz"));
        pack_asset(&stripped_memlint(dir.path()), &asset);
        let asset_sha = sha256(&fs::read(&asset).unwrap());
        let server = Server::start(&dir.path().join("srv"));
        let bin = dir.path().join("fake-bin");
        fs::create_dir_all(&bin).unwrap();
        fs::write(
            bin.join("cargo"),
            format!(
                "#!/bin/sh\n# stands in for `cargo install --locked --force --path P --root R`\necho \"$* token=${{GH_TOKEN:-}}\" >> '{}'\nwhile [ $# -gt 0 ]; do [ \"$1\" = --root ] && r=$2; shift; done\nprintf '#!/bin/sh\\necho built from source\\n' > \"$r/bin/memlint\"; chmod +x \"$r/bin/memlint\"\n",
                dir.path().join("cargo-calls").display()
            ),
        )
        .unwrap();
        run(Command::new("chmod").arg("+x").arg(bin.join("cargo")));
        Bench {
            dir,
            server,
            bin,
            asset_sha,
        }
    }

    fn asset_name(target: &str) -> String {
        format!("memlint-{VERSION}-{target}.tar.gz")
    }

    /// Runs the install script with `table` as the action's release-checksums.txt and `vars`
    /// over a GitHub Linux x64 runner's environment.
    fn install(&self, table: &str, vars: &[(&str, &str)]) -> Install {
        let action = tempfile::tempdir().unwrap();
        fs::write(action.path().join("release-checksums.txt"), table).unwrap();
        let tool_root = action.path().join("tool");
        // A binary planted where the Action installs must not survive.
        fs::create_dir_all(tool_root.join("bin")).unwrap();
        fs::write(tool_root.join("bin/memlint"), "#!/bin/sh\necho planted\n").unwrap();
        let calls = self.dir.path().join("cargo-calls");
        let _ = fs::remove_file(&calls);
        let mut cmd = Command::new(format!("{ROOT}/scripts/action-install.sh"));
        cmd.env(
            "PATH",
            format!("{}:{}", self.bin.display(), std::env::var("PATH").unwrap()),
        )
        .env("TOOL_ROOT", &tool_root)
        .env("ACTION_PATH", action.path())
        .env("ACTION_REF", "main")
        .env("ACTION_REPO", "memlint/memlint")
        .env("RUNNER_OS_NAME", "Linux")
        .env("RUNNER_ARCH_NAME", "X64")
        .env("RUNNER_TEMP", action.path())
        .env("MEMLINT_RELEASE_BASE_URL", &self.server.base)
        .env("GH_TOKEN", "not-sent-to-other-hosts")
        .env_remove("RUNNER_TOOL_CACHE")
        .env_remove("MEMLINT_RELEASE_CACHE")
        .env_remove("INPUT_VERSION");
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let said = Command::new(tool_root.join("bin/memlint"))
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        Install {
            out,
            said,
            cargo_calls: fs::read_to_string(&calls).unwrap_or_default(),
        }
    }
}

fn line(sha: &str, tag: &str, target: &str) -> String {
    format!("{sha} {tag} {}\n", Bench::asset_name(target))
}

/// The install step downloads the release asset for the runner from the (local) release
/// server, checks its sha256 against the action's own table and runs it without compiling;
/// a wrong sha256 fails the step; no fitting asset falls back to `cargo install --locked`
/// (a stand-in `cargo` that records its call: this tests the script's decision, not cargo).
#[test]
fn action_install_verifies_release_binaries_against_the_pinned_table() {
    let bench = Bench::new();
    let tag = format!("v{VERSION}");
    let linux = "x86_64-unknown-linux-gnu";
    let right = line(&bench.asset_sha, &tag, linux);
    let path = format!(
        "/memlint/memlint/releases/download/{tag}/{}",
        Bench::asset_name(linux)
    );

    // The listed sha256: the real binary, downloaded once, no compiling.
    let r = bench.install(&format!("# releases\n{right}"), &[]);
    assert!(r.out.status.success(), "{}", error_text(&r.out));
    assert_eq!(r.said, format!("memlint {VERSION}"));
    assert!(r.cargo_calls.is_empty(), "cargo ran: {}", r.cargo_calls);
    assert_eq!(bench.server.requests(), vec![path]);
    assert!(String::from_utf8_lossy(&r.out.stderr).contains(&format!("release {tag}")));

    // Another sha256: the step fails, says why, and leaves nothing to run.
    let forged = "0".repeat(64);
    let r = bench.install(&line(&forged, &tag, linux), &[]);
    assert_eq!(r.out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&r.out.stderr).to_string();
    assert!(
        err.contains("::error title=memlint install::")
            && err.contains(&format!("has sha256 {}", bench.asset_sha))
            && err.contains(&format!("release-checksums.txt says {forged}"))
            && err.contains("refusing to run it"),
        "{err}"
    );
    assert_eq!(r.said, "");
    assert!(
        r.cargo_calls.is_empty(),
        "a mismatch must not fall back: {}",
        r.cargo_calls
    );

    // The table lists the asset but the release has none (404): built from the action's tree.
    let r = bench.install(
        &line(&bench.asset_sha, &tag, "aarch64-unknown-linux-gnu"),
        &[("RUNNER_ARCH_NAME", "ARM64")],
    );
    assert!(r.out.status.success(), "{}", error_text(&r.out));
    assert_eq!(r.said, "built from source");
    assert!(
        r.cargo_calls.starts_with("install --locked --force --path "),
        "{}",
        r.cargo_calls
    );
    // The build from source (crates' build scripts) never sees the GitHub token.
    assert!(r.cargo_calls.contains(" token=\n"), "{}", r.cargo_calls);
    assert!(bench
        .server
        .requests()
        .last()
        .unwrap()
        .ends_with("aarch64-unknown-linux-gnu.tar.gz"));
    // No asset built for the runner (Windows), or none listed for it: built, nothing fetched.
    let before = bench.server.requests().len();
    for vars in [
        &[("RUNNER_OS_NAME", "Windows")][..],
        &[("RUNNER_ARCH_NAME", "ARM64")][..],
    ] {
        let r = bench.install(&right, vars);
        assert!(r.out.status.success(), "{}", error_text(&r.out));
        assert_eq!(r.said, "built from source");
    }
    // No release listed yet, and a local action (`uses: ./`, no ref) builds its own code.
    for (table, vars) in [
        ("# nothing released yet\n", &[][..]),
        (right.as_str(), &[("ACTION_REF", "")][..]),
    ] {
        let r = bench.install(table, vars);
        assert!(r.out.status.success(), "{}", error_text(&r.out));
        assert_eq!(r.said, "built from source");
    }
    assert_eq!(bench.server.requests().len(), before);

    // `version` picks the release; one the table does not list fails rather than run anything.
    let r = bench.install(&right, &[("INPUT_VERSION", &tag), ("ACTION_REF", "")]);
    assert_eq!(r.said, format!("memlint {VERSION}"), "{}", error_text(&r.out));
    let r = bench.install(&right, &[("INPUT_VERSION", "v0.0.1")]);
    assert_eq!(r.out.status.code(), Some(1));
    assert!(
        error_text(&r.out).contains("lists no sha256 for memlint v0.0.1"),
        "{}",
        error_text(&r.out)
    );
    assert!(r.cargo_calls.is_empty() && r.said.is_empty());
    let r = bench.install(&right, &[("INPUT_VERSION", "1.0;rm -rf /")]);
    assert_eq!(r.out.status.code(), Some(1));
    assert!(error_text(&r.out).contains("is not a release version"));
    // An input cannot end the `::error` line and write a workflow command of its own.
    let r = bench.install(&right, &[("INPUT_VERSION", "1.0\n::add-mask::x\r%")]);
    assert_eq!(r.out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&r.out.stderr);
    assert!(
        err.contains("version '1.0%0A::add-mask::x%0D%25' is not"),
        "{err}"
    );
    assert!(!err.lines().any(|l| l.starts_with("::add-mask")), "{err}");
    // The newest listed release by version order (v0.10 after v0.9), whose asset is missing
    // here: a download was tried for it.
    let newer = format!("{} v99.10.0 memlint-99.10.0-{linux}.tar.gz\n", bench.asset_sha);
    let older = format!("{} v99.9.0 memlint-99.9.0-{linux}.tar.gz\n", bench.asset_sha);
    let r = bench.install(&format!("{older}{newer}"), &[]);
    assert_eq!(r.said, "built from source");
    assert!(bench.server.requests().last().unwrap().contains("/v99.10.0/"));

    // The release cache: a cached asset is checked against the table before every run.
    let cache = bench.dir.path().join("tool-cache");
    let cache_var = [("RUNNER_TOOL_CACHE", cache.to_str().unwrap())];
    let before = bench.server.requests().len();
    let r = bench.install(&right, &cache_var);
    assert_eq!(r.said, format!("memlint {VERSION}"), "{}", error_text(&r.out));
    assert_eq!(bench.server.requests().len(), before + 1);
    let cached = cache.join(format!("memlint/{tag}/{}", Bench::asset_name(linux)));
    assert_eq!(sha256(&fs::read(&cached).unwrap()), bench.asset_sha);
    let r = bench.install(&right, &cache_var);
    assert_eq!(r.said, format!("memlint {VERSION}"));
    assert_eq!(bench.server.requests().len(), before + 1, "taken from the cache");
    assert!(String::from_utf8_lossy(&r.out.stderr).contains("from cache"));
    // A cached file that changed is not run: downloaded again, and the cache repaired.
    let mut planted = fs::read(&cached).unwrap();
    planted.extend_from_slice(b"tampered");
    fs::write(&cached, planted).unwrap();
    let r = bench.install(&right, &cache_var);
    assert_eq!(r.said, format!("memlint {VERSION}"));
    assert!(String::from_utf8_lossy(&r.out.stderr).contains("::warning title=memlint install::the cached"));
    assert_eq!(bench.server.requests().len(), before + 2);
    assert_eq!(sha256(&fs::read(&cached).unwrap()), bench.asset_sha);
    // A build from source is never put in the cache.
    let r = bench.install(&right, &[cache_var[0], ("RUNNER_ARCH_NAME", "ARM64")]);
    assert_eq!(r.said, "built from source");
    let cached_files: Vec<_> = walk(&cache.join("memlint"));
    assert_eq!(cached_files, vec![cached.clone()]);
    // The table at another ref, with another sha256, does not accept the cached file either.
    let r = bench.install(&line(&forged, &tag, linux), &cache_var);
    assert_eq!(r.out.status.code(), Some(1));
    assert_eq!(r.said, "");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The lint step: the image after `--` (an input that looks like a flag stays an image), and
/// the `sarif` output written as one heredoc value even when the input holds newlines.
#[test]
fn action_lint_step_passes_the_image_after_dashes_and_writes_outputs_safely() {
    let dir = tempfile::tempdir().unwrap();
    let image = build_image("demo");
    let step = |image: &str, output: &str| -> (Output, String) {
        let gh_output = dir.path().join("github-output");
        fs::write(&gh_output, "").unwrap();
        let mut cmd = Command::new(format!("{ROOT}/scripts/action-lint.sh"));
        let _cache = isolate_cache(&mut cmd);
        let out = cmd
            .current_dir(dir.path())
            .env("MEMLINT", env!("CARGO_BIN_EXE_memlint"))
            .env("INPUT_IMAGE", image)
            .env("INPUT_FORMAT", "github")
            .env("INPUT_FAIL_ON", "never")
            .env("INPUT_OUTPUT", output)
            .env("GITHUB_OUTPUT", &gh_output)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        (out, fs::read_to_string(&gh_output).unwrap())
    };
    // An output file name with a newline and what would be a second output after it.
    let evil = "report.sarif\nsarif=evil.sarif\nother=1";
    let (out, written) = step(&image, evil);
    assert!(out.status.success(), "{}", error_text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("::error"));
    let lines: Vec<&str> = written.lines().collect();
    assert_eq!(lines.len(), 5, "{written}");
    let delimiter = lines[0].strip_prefix("sarif<<").unwrap();
    assert!(delimiter.len() > 32, "{delimiter}");
    assert_eq!(lines[1..4].join("\n"), evil);
    assert_eq!(lines[4], delimiter);
    let sarif: Value = serde_json::from_slice(&fs::read(dir.path().join(evil)).unwrap()).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    // Another run, another delimiter.
    let (_, again) = step(&image, "r.sarif");
    assert!(!again.contains(delimiter));
    // An image input that starts with `-` is not read as a flag.
    let (out, _) = step("--version", "");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        error_text(&out).contains("`--version` is not an image reference"),
        "{}",
        error_text(&out)
    );
}

/// Every action a workflow or the Action uses is pinned by a full commit sha; the release
/// workflow builds with the dist profile, names assets as the install step expects, and
/// writes SHA256SUMS, an SBOM and provenance (the schema and zizmor checks of every workflow
/// are in tests/project/ci.rs).
#[test]
fn workflows_pin_actions_and_the_release_workflow_ships_what_the_action_reads() {
    let mut files = vec![PathBuf::from(format!("{ROOT}/action.yml"))];
    for e in fs::read_dir(format!("{ROOT}/.github/workflows")).unwrap() {
        files.push(e.unwrap().path());
    }
    let mut pins = 0;
    for f in &files {
        for l in fs::read_to_string(f).unwrap().lines() {
            let Some(uses) = l.trim().trim_start_matches("- ").strip_prefix("uses: ") else {
                continue;
            };
            if uses.starts_with("./") {
                continue;
            }
            let (_, rest) = uses
                .split_once('@')
                .unwrap_or_else(|| panic!("{}: {uses}", f.display()));
            let sha = rest.split_whitespace().next().unwrap();
            assert!(
                sha.len() == 40 && sha.chars().all(|c| c.is_ascii_hexdigit()),
                "{}: {uses} is not pinned by commit",
                f.display()
            );
            assert!(rest.contains("# v"), "{}: {uses} names no version", f.display());
            pins += 1;
        }
    }
    assert!(pins >= 6, "{pins}");
    let release = fs::read_to_string(format!("{ROOT}/.github/workflows/release.yml")).unwrap();
    for needle in [
        "tags: [\"v[0-9]+.[0-9]+.[0-9]+*\"]",
        "--profile dist",
        "--features zlib-ng",
        "memlint-$VERSION-$TARGET",
        "x86_64-unknown-linux-gnu",
        "aarch64-unknown-linux-gnu",
        "aarch64-apple-darwin",
        "x86_64-apple-darwin",
        "SHA256SUMS",
        "cargo cyclonedx",
        "actions/attest-build-provenance@",
        "id-token: write",
        "attestations: write",
        "persist-credentials: false",
    ] {
        assert!(release.contains(needle), "release.yml lacks {needle}");
    }
    // The binaries' job installs nothing from crates.io before they are uploaded and attested
    // (the SBOM tool runs in a job of its own), and every job builds with the pinned toolchain.
    let (build_job, rest) = release.split_once("\n  sbom:\n").expect("an sbom job");
    let build_job = build_job.split_once("\n  build:\n").unwrap().1;
    assert!(!build_job.contains("cargo install"), "{build_job}");
    assert!(rest.contains("cargo install --locked cargo-cyclonedx"));
    assert!(rest.contains("needs: [build, sbom]"));
    assert!(!release.contains("toolchain install stable"));
    let pinned = release
        .lines()
        .find_map(|l| l.trim().strip_prefix("RUST_TOOLCHAIN: "))
        .expect("RUST_TOOLCHAIN pinned");
    assert!(pinned.split('.').count() == 3, "{pinned}");
    let dockerfile = fs::read_to_string(format!("{ROOT}/docker/Dockerfile")).unwrap();
    assert!(
        dockerfile.contains(&format!("FROM rust:{pinned}-")),
        "docker/Dockerfile builds with another toolchain than {pinned}"
    );
    // The container image's binary is built as the Linux release binaries are.
    let linux_build = release
        .lines()
        .find(|l| l.contains("cargo build") && l.contains("--features isal"))
        .expect("the Linux release build");
    let features = linux_build
        .split_whitespace()
        .skip_while(|w| *w != "--features")
        .nth(1)
        .unwrap();
    assert!(
        dockerfile.contains(&format!(
            "cargo build --locked --profile dist --features {features} "
        )),
        "docker/Dockerfile builds memlint without --features {features}"
    );
    // The targets the install script maps runners to are the ones released.
    let install = fs::read_to_string(format!("{ROOT}/scripts/action-install.sh")).unwrap();
    for target in release
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- target: "))
    {
        assert!(install.contains(&format!("target={target} ;;")), "{target}");
    }
    let cargo = fs::read_to_string(format!("{ROOT}/Cargo.toml")).unwrap();
    assert!(cargo.contains("[profile.dist]\ninherits = \"release\""));
    // GH_TOKEN only in the step that downloads.
    let action = fs::read_to_string(format!("{ROOT}/action.yml")).unwrap();
    assert_eq!(action.matches("GH_TOKEN").count(), 1);
    let install_step = action.split("- name: Lint the image").next().unwrap();
    assert!(install_step.contains("GH_TOKEN"));
}

/// A .deb from the image recipes' cache (.cache/debs), fetched with apt-get when missing.
fn deb(pkg: &str) -> PathBuf {
    let arch = String::from_utf8(run(Command::new("dpkg").arg("--print-architecture")).stdout)
        .unwrap()
        .trim()
        .to_string();
    let cache = std::env::var("MEMLINT_IMAGE_CACHE").unwrap_or_else(|_| format!("{ROOT}/.cache"));
    let dir = PathBuf::from(cache).join("debs").join(&arch);
    fs::create_dir_all(&dir).unwrap();
    let find = || {
        fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).find(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n.starts_with(&format!("{pkg}_")) && n.ends_with(".deb")
        })
    };
    if let Some(p) = find() {
        return p;
    }
    run(Command::new("apt-get")
        .args(["download", "-qq", "-o", "APT::Sandbox::User=root"])
        .arg(format!("{pkg}:{arch}"))
        .current_dir(&dir));
    find().unwrap()
}

/// The final stage of docker/Dockerfile, as written there.
fn final_stage(dockerfile: &str) -> String {
    let start = dockerfile
        .lines()
        .enumerate()
        .filter(|(_, l)| l.starts_with("FROM "))
        .last()
        .unwrap()
        .0;
    dockerfile.lines().skip(start).collect::<Vec<_>>().join("\n") + "\n"
}

/// docker/Dockerfile passes hadolint, memlint's own Dockerfile reader sees its stages, and its
/// final stage, built by buildah on a from-scratch twin of the distroless base (libc6 and
/// libgcc-s1 from Debian, CA certificates, the nonroot user), runs memlint under podman as a
/// non-root user with no shell and lints a mounted test image.
#[test]
fn container_image_final_stage_builds_with_buildah_and_lints_under_podman() {
    require_tool("hadolint");
    require_tool("buildah");
    require_tool("runc");
    require_tool("dpkg-deb");
    require_tool("ldd");
    let dockerfile_path = format!("{ROOT}/docker/Dockerfile");
    let dockerfile = fs::read_to_string(&dockerfile_path).unwrap();
    run(Command::new("hadolint").arg(&dockerfile_path));

    // memlint's reader: the stages it finds (named in its --target error).
    let demo = build_image("demo");
    let out = memlint(&[
        "lint",
        "--dockerfile",
        &dockerfile_path,
        "--target",
        "nope",
        &demo,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        error_text(&out).contains("the Dockerfile's stages are: build, gcr.io/distroless/cc-")
            && error_text(&out).contains("debian12:nonroot@sha256:"),
        "{}",
        error_text(&out)
    );
    let stage = final_stage(&dockerfile);
    assert!(
        stage.starts_with("FROM gcr.io/distroless/cc-debian12:nonroot@sha256:"),
        "{stage}"
    );
    // Every base is pinned by digest, not only by tag.
    for from in dockerfile.lines().filter(|l| l.starts_with("FROM ")) {
        let image = from.split_whitespace().nth(1).unwrap();
        let digest = image.split_once("@sha256:").map(|(_, d)| d).unwrap_or("");
        assert!(
            digest.len() == 64 && digest.chars().all(|c| c.is_ascii_hexdigit()),
            "{from} is not pinned by digest"
        );
    }
    let distroless = stage
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("FROM ")
        .to_string();
    assert!(
        !stage.contains("\nRUN "),
        "the final stage needs no shell: {stage}"
    );
    assert!(stage.contains("\nUSER 65532:65532\n"), "{stage}");

    let podman = Podman::new();
    // buildah checks the auth file the private Podman's environment names; nothing is pulled.
    fs::create_dir_all(podman.path("no-docker-config")).unwrap();
    fs::write(podman.path("no-docker-config/config.json"), "{}").unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The base: what distroless/cc-debian12 holds (glibc, libgcc, CA certificates, the nonroot
    // user, /tmp), from Debian's packages.
    let base = dir.path().join("base");
    for pkg in ["libc6", "libgcc-s1"] {
        run(Command::new("dpkg-deb").arg("-x").arg(deb(pkg)).arg(&base));
    }
    // Debian 12 ships /lib as a symlink to /usr/lib (merged /usr); the packages' paths need it.
    for d in ["lib", "lib64"] {
        let from = base.join(d);
        if from.is_dir() && !from.is_symlink() {
            run(Command::new("cp")
                .arg("-a")
                .arg(format!("{}/.", from.display()))
                .arg(base.join("usr").join(d)));
            fs::remove_dir_all(&from).unwrap();
        }
        if base.join("usr").join(d).exists() {
            std::os::unix::fs::symlink(format!("usr/{d}"), &from).unwrap();
        }
    }
    fs::create_dir_all(base.join("etc/ssl/certs")).unwrap();
    let bundle = Path::new("/etc/ssl/certs/ca-certificates.crt");
    if bundle.is_file() {
        fs::copy(bundle, base.join("etc/ssl/certs/ca-certificates.crt")).unwrap();
    }
    fs::write(
        base.join("etc/passwd"),
        "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
    )
    .unwrap();
    fs::write(
        base.join("etc/group"),
        "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n",
    )
    .unwrap();
    fs::create_dir_all(base.join("home/nonroot")).unwrap();
    fs::create_dir_all(base.join("tmp")).unwrap();
    run(Command::new("chmod").arg("1777").arg(base.join("tmp")));
    run(Command::new("chown")
        .arg("65532:65532")
        .arg(base.join("home/nonroot")));
    assert!(!base.join("bin/sh").exists() && !base.join("usr/bin/sh").exists());

    // Every library the binary needs (ldd) is in the base.
    let memlint_bin = stripped_memlint(dir.path());
    let ldd = String::from_utf8(run(Command::new("ldd").arg(&memlint_bin)).stdout).unwrap();
    for l in ldd.lines() {
        let name = l.split_whitespace().next().unwrap_or("");
        if name.is_empty() || name.starts_with("linux-vdso") {
            continue;
        }
        let file = Path::new(name).file_name().unwrap().to_string_lossy().to_string();
        let found = walk(&base.join("usr"))
            .iter()
            .any(|p| p.file_name().unwrap().to_string_lossy() == file);
        assert!(found, "{file} (ldd: {l}) is not in the base");
    }

    let buildah = |args: &[&str]| -> Output {
        let mut cmd = Command::new("buildah");
        cmd.args(args);
        podman.env(&mut cmd);
        run(&mut cmd)
    };
    let ctr = String::from_utf8(buildah(&["from", "scratch"]).stdout)
        .unwrap()
        .trim()
        .to_string();
    buildah(&["copy", &ctr, &format!("{}/", base.display()), "/"]);
    buildah(&[
        "commit",
        "--quiet",
        "--rm",
        &ctr,
        "localhost/memlint-test/distroless-cc:nonroot",
    ]);

    // The final stage as written, on that base and with the tests' binary for the build stage's.
    let context = dir.path().join("context");
    fs::create_dir_all(&context).unwrap();
    fs::copy(&memlint_bin, context.join("memlint")).unwrap();
    let (copy_line, dest) = stage
        .lines()
        .find_map(|l| {
            l.strip_prefix("COPY --from=build ")
                .map(|rest| (l.to_string(), rest.split_whitespace().nth(1).unwrap().to_string()))
        })
        .unwrap();
    let containerfile = stage
        .replace(
            &format!("FROM {distroless}"),
            "FROM localhost/memlint-test/distroless-cc:nonroot",
        )
        .replace(&copy_line, &format!("COPY memlint {dest}"));
    fs::write(context.join("Containerfile"), &containerfile).unwrap();
    buildah(&[
        "build",
        "--quiet",
        "--pull=never",
        "--layers=false",
        "-f",
        &context.join("Containerfile").display().to_string(),
        "-t",
        "localhost/memlint:test",
        &context.display().to_string(),
    ]);
    let inspect: Value = serde_json::from_slice(
        &podman
            .podman(&["image", "inspect", "localhost/memlint:test"])
            .stdout,
    )
    .unwrap();
    let config = &inspect[0]["Config"];
    assert_eq!(config["User"], "65532:65532");
    assert_eq!(config["Entrypoint"][0], "/usr/local/bin/memlint");

    // Lint a test image, mounted read-only at /src, as the README shows (an OCI archive).
    let src = dir.path().join("src");
    fs::create_dir_all(&src).unwrap();
    let layout = demo.trim_start_matches("oci-dir:").trim_end_matches(":latest");
    run(Command::new("skopeo").args([
        "copy",
        "--quiet",
        &format!("oci:{layout}:latest"),
        &format!("oci-archive:{}/app.tar", src.display()),
    ]));
    run(Command::new("chmod").arg("0755").arg(&src));
    let podman_run = |args: &[&str]| -> Output {
        let mut cmd = Command::new("podman");
        cmd.args([
            "run",
            "--rm",
            "--runtime",
            "runc",
            "--ulimit",
            "nofile=1024:1024",
            // Podman's default raises nproc past what this machine allows; lowering is allowed.
            "--ulimit",
            "nproc=1024:1024",
            "--network",
            "none",
            "-v",
            &format!("{}:/src:ro", src.display()),
        ])
        .args(args);
        podman.env(&mut cmd);
        cmd.output().unwrap()
    };
    let out = podman_run(&[
        "localhost/memlint:test",
        "lint",
        "--format",
        "json",
        "oci-archive:/src/app.tar",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["findings"][0]["rule"], "ld-preload-missing", "{report}");
    // Non-root, and no shell to run.
    let out = podman_run(&["--entrypoint", "/bin/sh", "localhost/memlint:test", "-c", "id"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        err.contains("/bin/sh") && err.contains("no such file or directory"),
        "{err}"
    );
    let out = podman_run(&["localhost/memlint:test", "--version"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("memlint {VERSION}")
    );

    // memlint on its own image, with the Dockerfile it was built from: nothing to report.
    let exported = dir.path().join("memlint-image");
    podman.podman(&[
        "save",
        "--quiet",
        "--format",
        "oci-dir",
        "-o",
        &exported.display().to_string(),
        "localhost/memlint:test",
    ]);
    let out = memlint(&[
        "lint",
        "--fail-on",
        "note",
        "--format",
        "json",
        "--dockerfile",
        &dockerfile_path,
        &format!("oci-dir:{}", exported.display()),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        error_text(&out)
    );
}
