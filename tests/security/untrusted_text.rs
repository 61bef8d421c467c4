//! Text from an image or a registry never reaches a terminal or a CI log raw (issue 13, item
//! 4): hostile images (and a registry on 127.0.0.1) whose env, `LD_PRELOAD`, history, file
//! names, link targets, ref names, platform strings, media types and member names hold ESC,
//! BEL, CSI, `\r`, `\n::warning::x`, `##[error]x` and `##[stop-commands]tok` are run through
//! every format and error path, and every line of standard output and standard error is read
//! by a port of the GitHub runner's own parser: no line is a command (but memlint's own
//! `--format github` annotations, whose data must be the escaped text), no raw control byte
//! but `\n` is written, and JSON and SARIF values decode to the original strings.

use crate::common;

use common::{append, memlint, sha256, with_name, Comp, ImageSpec, LayerSpec, OciWriter};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Output;

/// A port of actions/runner's command parser (`src/Runner.Common/ActionCommand.cs`,
/// `TryParseV2` for `::cmd::` and the legacy `TryParse` for `##[cmd]`), as the runner applies
/// it to each line of a step's standard output and standard error.
mod runner {
    use std::collections::{HashMap, HashSet};

    #[derive(Debug, PartialEq, Eq)]
    pub struct ActionCommand {
        pub command: String,
        pub properties: HashMap<String, String>,
        pub data: String,
    }

    /// `None` stands for "every name is registered": stricter than the runner, whose set
    /// changes with `::stop-commands::TOKEN` (after which TOKEN itself is a command).
    fn registered(set: Option<&HashSet<String>>, name: &str) -> bool {
        set.is_none_or(|s| s.contains(name))
    }

    fn unescape(s: &str, mappings: &[(&str, &str)]) -> String {
        let mut out = s.to_string();
        for (token, replacement) in mappings {
            out = out.replace(replacement, token);
        }
        out
    }

    // The runner's tables, in its order.
    const ESCAPE: &[(&str, &str)] = &[
        (";", "%3B"),
        ("\r", "%0D"),
        ("\n", "%0A"),
        ("]", "%5D"),
        ("%", "%25"),
    ];
    const ESCAPE_DATA: &[(&str, &str)] = &[("\r", "%0D"), ("\n", "%0A"), ("%", "%25")];
    const ESCAPE_PROPERTY: &[(&str, &str)] = &[
        ("\r", "%0D"),
        ("\n", "%0A"),
        (":", "%3A"),
        (",", "%2C"),
        ("%", "%25"),
    ];

    /// `::name k=v,k=v::data` after leading white space (C# `TrimStart`).
    pub fn try_parse_v2(message: &str, set: Option<&HashSet<String>>) -> Option<ActionCommand> {
        let message = message.trim_start();
        let rest = message.strip_prefix("::")?;
        let end = rest.find("::")?;
        let info = &rest[..end];
        let (name, props) = match info.find(' ') {
            Some(i) => (&info[..i], Some(&info[i + 1..])),
            None => (info, None),
        };
        if !registered(set, name) {
            return None;
        }
        let mut properties = HashMap::new();
        if let Some(p) = props.filter(|_| info.find(' ').is_some_and(|i| i > 0)) {
            for prop in p.trim().split(',').filter(|s| !s.is_empty()) {
                let pair: Vec<&str> = prop.splitn(2, '=').filter(|s| !s.is_empty()).collect();
                if pair.len() == 2 {
                    properties.insert(pair[0].to_string(), unescape(pair[1], ESCAPE_PROPERTY));
                }
            }
        }
        Some(ActionCommand {
            command: name.to_string(),
            properties,
            data: unescape(&rest[end + 2..], ESCAPE_DATA),
        })
    }

    /// `##[name k=v;k=v]data` anywhere in the line.
    pub fn try_parse(message: &str, set: Option<&HashSet<String>>) -> Option<ActionCommand> {
        let prefix = message.find("##[")?;
        let rb = prefix + message[prefix..].find(']')?;
        let info = &message[prefix + 3..rb];
        let (name, props) = match info.find(' ') {
            Some(i) => (&info[..i], Some(&info[i + 1..])),
            None => (info, None),
        };
        if !registered(set, name) {
            return None;
        }
        let mut properties = HashMap::new();
        if let Some(p) = props.filter(|_| info.find(' ').is_some_and(|i| i > 0)) {
            for prop in p.split(';').filter(|s| !s.is_empty()) {
                let pair: Vec<&str> = prop.splitn(2, '=').filter(|s| !s.is_empty()).collect();
                if pair.len() == 2 {
                    properties.insert(pair[0].to_string(), unescape(pair[1], ESCAPE));
                }
            }
        }
        Some(ActionCommand {
            command: name.to_string(),
            properties,
            data: unescape(&message[rb + 1..], ESCAPE),
        })
    }

    /// Lines as .NET's `StreamReader.ReadLine` splits them: at `\n`, `\r` and `\r\n`.
    pub fn lines(text: &str) -> Vec<&str> {
        text.split("\r\n").flat_map(|l| l.split(['\r', '\n'])).collect()
    }
}

#[test]
fn the_runner_port_reads_known_commands() {
    use runner::{try_parse, try_parse_v2};
    let c = try_parse_v2(
        "::warning file=a.txt,line=3,title=x%3Ay::hello%0Aworld 50%25",
        None,
    )
    .unwrap();
    assert_eq!(c.command, "warning");
    assert_eq!(c.properties["file"], "a.txt");
    assert_eq!(c.properties["line"], "3");
    assert_eq!(c.properties["title"], "x:y");
    assert_eq!(c.data, "hello\nworld 50%");
    let c = try_parse_v2(" \t ::error::boom", None).unwrap();
    assert_eq!((c.command.as_str(), c.data.as_str()), ("error", "boom"));
    assert_eq!(try_parse_v2("::add-mask::", None).unwrap().data, "");
    assert!(try_parse_v2("text ::warning::x", None).is_none());
    assert!(try_parse_v2("::warning no end", None).is_none());
    assert!(try_parse_v2(":\\x3a:warning::x", None).is_none());
    let only_error: HashSet<String> = ["error".to_string()].into();
    assert!(try_parse_v2("::warning::x", Some(&only_error)).is_none());
    assert!(try_parse_v2("::error::x", Some(&only_error)).is_some());
    let c = try_parse("progress: ##[stop-commands]tok", None).unwrap();
    assert_eq!((c.command.as_str(), c.data.as_str()), ("stop-commands", "tok"));
    let c = try_parse("##[error file=a%3Bb;line=2]bad%5D", None).unwrap();
    assert_eq!(c.command, "error");
    assert_eq!(c.properties["file"], "a;b");
    assert_eq!(c.data, "bad]");
    assert!(try_parse("##[error no bracket", None).is_none());
    assert!(try_parse("#\\x23#[error]x", None).is_none());
    assert!(try_parse("\\u0023#[error]x", None).is_none());
    assert_eq!(runner::lines("a\r\nb\rc\nd"), ["a", "b", "c", "d"]);
}

/// Every hostile piece in one string: a title change (OSC … BEL), a screen clear (CSI, also
/// as the 8-bit C1 CSI), a carriage return and line breaks that start commands, both command
/// syntaxes, DEL.
const HOSTILE: &str =
    "a\x1b]0;pwned\x07 \x1b[2J\u{9b}31m\n::warning::x ##[error]x ##[stop-commands]tok\r::error::y\u{7f}z";
/// The same for an `LD_PRELOAD` entry, which glibc splits at spaces and colons.
const PRELOAD: &str = "/opt/lib\x1b]0;pwned\x07\u{9b}2J\n##[stop-commands]tok\r##[error]x\n.so";
/// A file name: no `/` and no NUL, as tar allows.
const NAME: &str = "f\x1b]0;pwned\x07\n::warning::n ##[error]n\r\u{9b}2J";

/// Asserts that no line of `bytes` (`stream` of `what`) is a workflow command, but memlint's
/// own annotations when `own_annotations`, and that no control byte but `\n` is raw. Returns
/// memlint's annotations.
fn assert_clean(what: &str, stream: &str, bytes: &[u8], own_annotations: bool) -> Vec<runner::ActionCommand> {
    let text = String::from_utf8_lossy(bytes);
    let raw: Vec<char> = text.chars().filter(|c| c.is_control() && *c != '\n').collect();
    assert!(
        raw.is_empty(),
        "{what}: raw control characters {raw:?} on {stream}:\n{text}"
    );
    let mut own = Vec::new();
    for line in runner::lines(&text) {
        assert!(
            runner::try_parse(line, None).is_none(),
            "{what}: `##[` command on {stream}: {line}"
        );
        if let Some(c) = runner::try_parse_v2(line, None) {
            let ours = own_annotations
                && stream == "stdout"
                && ["error", "warning", "notice"].contains(&c.command.as_str())
                && line.starts_with(&format!("::{} file=", c.command));
            assert!(ours, "{what}: `::` command on {stream}: {line}");
            // The annotation's words: the escaped text, with no control character but the
            // line breaks memlint puts between message, evidence and fix.
            for (k, v) in c.properties.iter().chain([(&"data".to_string(), &c.data)]) {
                assert!(
                    !v.chars().any(|c| c.is_control() && c != '\n'),
                    "{what}: {k} of an annotation holds a control character: {v:?}"
                );
                assert!(
                    !v.contains("##["),
                    "{what}: {k} of an annotation holds `##[`: {v:?}"
                );
                for l in runner::lines(v) {
                    assert!(
                        !l.trim_start().starts_with("::"),
                        "{what}: {k} line starts a command: {l:?}"
                    );
                }
            }
            own.push(c);
        }
    }
    own
}

fn check(what: &str, out: &Output, own_annotations: bool) -> Vec<runner::ActionCommand> {
    assert_clean(what, "stderr", &out.stderr, false);
    assert_clean(what, "stdout", &out.stdout, own_annotations)
}

/// Runs memlint, asserts its exit code and that both streams are clean ([`check`]); returns the
/// output and memlint's own annotations.
fn run_clean(
    what: &str,
    args: &[&str],
    code: i32,
    own_annotations: bool,
) -> (Output, Vec<runner::ActionCommand>) {
    let out = memlint(args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let own = check(what, &out, own_annotations);
    (out, own)
}

/// An OCI layout whose image holds the hostile strings everywhere a config and a layer can.
fn hostile_layout(root: &Path) -> String {
    let layer = LayerSpec::new(Comp::Gzip)
        .by(HOSTILE)
        .file("etc/os-release", b"ID=debian\nVERSION_ID=\"12\"\n")
        .file(&format!("opt/{NAME}"), b"x")
        .symlink("opt/link", HOSTILE);
    let mut img = ImageSpec::new("amd64")
        .layer(layer)
        .env(&format!("LD_PRELOAD={PRELOAD}"))
        .env(&format!("FOO={HOSTILE}"));
    img.entrypoint = Some(vec![HOSTILE.to_string()]);
    img.working_dir = Some(format!("/w{NAME}"));
    let w = OciWriter::new(root);
    let desc = w.image(&img);
    w.write_index_json(vec![with_name(desc, "tag##[error]t")]);
    format!("oci-dir:{}", root.display())
}

#[test]
fn every_format_of_a_hostile_image_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let r = hostile_layout(&dir.path().join("img"));
    let sarif_path = dir.path().join("out.sarif");
    let json_path = dir.path().join("out.json");
    let sarif_flag = format!("sarif={}", sarif_path.display());
    let json_flag = format!("json={}", json_path.display());
    let gitlab_path = dir.path().join("out.gitlab.json");
    let junit_path = dir.path().join("out.junit.xml");
    let gitlab_flag = format!("gitlab={}", gitlab_path.display());
    let junit_flag = format!("junit={}", junit_path.display());
    let runs: Vec<(&str, Vec<&str>)> = vec![
        ("lint text", vec!["lint", "--fail-on", "never", &r]),
        (
            "lint -v",
            vec!["lint", "-v", "--show-ignored", "--fail-on", "never", &r],
        ),
        (
            "lint json",
            vec!["lint", "--format", "json", "--fail-on", "never", &r],
        ),
        (
            "lint sarif",
            vec!["lint", "--format", "sarif", "--fail-on", "never", &r],
        ),
        (
            "lint gitlab",
            vec!["lint", "--format", "gitlab", "--fail-on", "never", &r],
        ),
        (
            "lint junit",
            vec!["lint", "--format", "junit", "--fail-on", "never", &r],
        ),
        (
            "lint html",
            vec!["lint", "--format", "html", "--fail-on", "never", &r],
        ),
        (
            "lint --progress",
            vec!["lint", "--progress", "--fail-on", "never", &r],
        ),
        ("inspect", vec!["inspect", &r]),
        ("inspect --files", vec!["inspect", "--files", &r]),
        ("inspect json", vec!["inspect", "--format", "json", "--files", &r]),
        (
            "lint with files",
            vec![
                "lint",
                "--fail-on",
                "never",
                "-o",
                &sarif_flag,
                "-o",
                &json_flag,
                "-o",
                &gitlab_flag,
                "-o",
                &junit_flag,
                &r,
            ],
        ),
    ];
    for (what, args) in &runs {
        let (out, _) = run_clean(what, args, 0, false);
        let stdout = String::from_utf8_lossy(&out.stdout);
        if what.starts_with("inspect") && !what.contains("json") {
            // A person still reads what the image holds, escaped.
            assert!(stdout.contains("FOO=a\\x1b]0;pwned\\x07"), "{what}:\n{stdout}");
            assert!(stdout.contains("\\x23#[stop-commands]tok"), "{what}:\n{stdout}");
        }
        if *what == "inspect --files" {
            assert!(
                stdout.contains("f\\x1b]0;pwned\\x07\\n::warning::n \\x23#[error]n\\r\\u{9b}2J"),
                "{stdout}"
            );
        }
    }

    // JSON values decode to the original strings.
    let v: Value =
        serde_json::from_slice(&memlint(&["inspect", "--format", "json", "--files", &r]).stdout).unwrap();
    let env = v["image"]["config"]["env"].as_array().unwrap();
    assert!(env.contains(&json!(format!("FOO={HOSTILE}"))), "{env:?}");
    assert!(env.contains(&json!(format!("LD_PRELOAD={PRELOAD}"))), "{env:?}");
    assert_eq!(v["image"]["config"]["entrypoint"][0], HOSTILE);
    assert_eq!(v["image"]["name"], "tag##[error]t");
    assert_eq!(v["image"]["layers"][0]["history"], HOSTILE);
    let paths: Vec<&str> = v["files"]["paths"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["path"].as_str())
        .collect();
    assert!(paths.contains(&format!("/opt/{NAME}").as_str()), "{paths:?}");
    let entries: Vec<&str> = v["facts"]["preloads"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["entry"].as_str())
        .collect();
    assert!(entries.contains(&PRELOAD), "{entries:?}");

    let out = memlint(&["lint", "--format", "json", "--fail-on", "never", &r]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings = v["findings"].as_array().unwrap();
    assert!(!findings.is_empty(), "the hostile preload is a finding: {v}");
    let evidence: Vec<&str> = findings
        .iter()
        .flat_map(|f| f["evidence"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    assert!(
        evidence.iter().any(|e| e.contains(PRELOAD)),
        "evidence quotes the entry as it is: {evidence:?}"
    );

    // The report files hold the same safe, decodable JSON, and safe XML.
    assert_clean("junit file", "file", &fs::read(&junit_path).unwrap(), false);
    for path in [&sarif_path, &json_path, &gitlab_path] {
        let bytes = fs::read(path).unwrap();
        assert_clean(&path.display().to_string(), "file", &bytes, false);
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert!(serde_json::to_string(&v).unwrap().contains("pwned"));
    }

    let out = memlint(&["lint", "--format", "sarif", "--fail-on", "never", &r]);
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = sarif["runs"][0]["results"][0]["message"]["text"]
        .as_str()
        .unwrap();
    assert!(
        text.contains("\x1b]0;pwned\x07"),
        "SARIF keeps the original text: {text:?}"
    );
    assert_eq!(sarif["runs"][0]["properties"]["image"], r);
}

#[test]
fn github_annotations_are_memlints_own_with_escaped_data() {
    let dir = tempfile::tempdir().unwrap();
    let r = hostile_layout(&dir.path().join("img"));
    let args = ["lint", "--format", "github", "--fail-on", "never", &r];
    let (_, own) = run_clean("lint github", &args, 0, true);
    assert!(!own.is_empty(), "the preload finding is an annotation");
    let data: String = own.iter().map(|c| c.data.as_str()).collect();
    assert!(data.contains("\\x1b]0;pwned\\x07"), "{data}");
    assert!(data.contains("\\x23#[stop-commands]tok"), "{data}");
}

#[test]
fn error_paths_quote_hostile_text_safely() {
    let dir = tempfile::tempdir().unwrap();
    // A layer whose media type is hostile.
    let root = dir.path().join("mt");
    let w = OciWriter::new(&root);
    let mut img_desc = w.image(&ImageSpec::new("amd64").layer(LayerSpec::new(Comp::Gzip).file("a", b"a")));
    let manifest_path = root
        .join("blobs/sha256")
        .join(img_desc["digest"].as_str().unwrap().trim_start_matches("sha256:"));
    let mut manifest: Value = serde_json::from_slice(&fs::read(&manifest_path).unwrap()).unwrap();
    manifest["layers"][0]["mediaType"] = json!(format!("application/x{HOSTILE}"));
    img_desc = w.blob(
        &serde_json::to_vec(&manifest).unwrap(),
        "application/vnd.oci.image.manifest.v1+json",
    );
    img_desc["platform"] = json!({"os": "linux", "architecture": "amd64"});
    w.write_index_json(vec![img_desc]);
    let mt = format!("oci-dir:{}", root.display());

    // An index whose only platform is hostile; asked for another.
    let root = dir.path().join("plat");
    let w = OciWriter::new(&root);
    let mut d = w.image(&ImageSpec::new("amd64").layer(LayerSpec::new(Comp::Gzip).file("a", b"a")));
    d["platform"] = json!({"os": format!("linux{HOSTILE}"), "architecture": format!("arm{HOSTILE}")});
    w.write_index_json(vec![d]);
    let plat = format!("oci-dir:{}", root.display());

    let name_ref = format!(
        "oci-dir:{}:{}",
        dir.path().join("plat").display(),
        "nope##[error]x"
    );
    let bad_platform = format!("linux/amd64/v1{HOSTILE}");
    let bad_reference = format!("nosuch:{HOSTILE}");
    let runs: Vec<(&str, Vec<&str>)> = vec![
        ("bad media type", vec!["lint", &mt]),
        ("bad media type inspect", vec!["inspect", &mt]),
        (
            "hostile platform",
            vec!["lint", "--platform", "linux/s390x", &plat],
        ),
        ("hostile platform, default", vec!["inspect", &plat]),
        (
            "bad platform flag",
            vec!["lint", "--platform", &bad_platform, &plat],
        ),
        ("unknown ref name", vec!["inspect", &name_ref]),
        ("bad reference", vec!["lint", &bad_reference]),
        (
            "two images, one bad",
            vec!["lint", "--format", "github", &mt, &plat],
        ),
    ];
    for (what, args) in &runs {
        let (out, _) = run_clean(what, args, 2, true);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.trim().is_empty(), "{what} says why");
    }
    let out = memlint(&["lint", &mt]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\\x1b]0;pwned\\x07"),
        "the media type is shown escaped: {err}"
    );
}

/// A registry on 127.0.0.1 that answers every request with 500 and a hostile body.
fn hostile_registry() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                let mut head = Vec::new();
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let body = format!(
                    "{{\"errors\":[{{\"code\":\"UNKNOWN\",\"message\":{}}}]}}{HOSTILE}",
                    json!(HOSTILE)
                );
                let _ = write!(
                    s,
                    "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\nX-Evil: ##[error]h\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    format!("registry:{addr}/app:1")
}

#[test]
fn a_registry_error_body_is_quoted_safely() {
    let r = hostile_registry();
    // Each run waits out memlint's retries of a 5xx (about 18 s).
    for format in ["text", "github"] {
        let (out, _) = run_clean(
            &format!("registry 500, {format}"),
            &["lint", "--format", format, &r],
            2,
            true,
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("500"), "{err}");
        assert!(err.contains("pwned\\x07"), "the body is quoted, escaped: {err}");
    }
}

#[test]
fn progress_labels_of_hostile_member_names_are_clean() {
    let dir = tempfile::tempdir().unwrap();
    // A classic `docker save` archive whose layer member is named like a runner command, and
    // large enough (5 MiB) for a progress line.
    let layer = LayerSpec::new(Comp::Plain)
        .file("etc/os-release", b"ID=debian\n")
        .file("big", &vec![0u8; 5 << 20])
        .tar();
    let mut b = tar::Builder::new(Vec::new());
    let member = "##[stop-commands]tok\x1b]0;t\x07/layer.tar";
    append(&mut b, member, &layer);
    let img = ImageSpec::new("amd64");
    let config = img.config_json(&[format!("sha256:{}", sha256(&layer))]);
    append(&mut b, "config.json", &config);
    let manifest =
        json!([{"Config": "config.json", "RepoTags": [format!("app:1{HOSTILE}")], "Layers": [member]}]);
    append(&mut b, "manifest.json", &serde_json::to_vec(&manifest).unwrap());
    let path = dir.path().join("save.tar");
    fs::write(&path, b.into_inner().unwrap()).unwrap();
    let r = format!("docker-archive:{}", path.display());
    for args in [
        vec!["lint", "--progress", "--no-cache", "--fail-on", "never", &r],
        vec![
            "lint",
            "--progress",
            "--no-cache",
            "-v",
            "--format",
            "github",
            "--fail-on",
            "never",
            &r,
        ],
        vec!["inspect", "--progress", "--no-cache", &r],
    ] {
        let (out, _) = run_clean(&format!("{args:?}"), &args, 0, true);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("MiB in"), "a progress line is shown: {err}");
        assert!(err.contains("\\x23#[stop-commands]"), "{err}");
    }
}

#[test]
fn sarif_uris_are_percent_encoded() {
    let dir = tempfile::tempdir().unwrap();
    let r = hostile_layout(&dir.path().join("img"));
    let out = memlint(&[
        "lint",
        "--format",
        "sarif",
        "--fail-on",
        "never",
        "--sarif-artifact",
        "%2e%2e/Dockerfile",
        &r,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    let uri = &sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"];
    assert_eq!(uri, "%252e%252e/Dockerfile");
}
