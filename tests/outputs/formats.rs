//! Reports for other CI systems and shell niceties (issue 19, items 4 and 5): `--format gitlab`
//! checked with check-jsonschema against the Code Quality schema in testdata/ (written from
//! GitLab's documentation), `--format junit` checked with `xmllint --schema` against
//! `junit-10.xsd` (from pytest's source distribution), both from `--format` and `-o FORMAT=FILE`,
//! for several images and `--platform all`, and with hostile strings; `memlint completions` loaded
//! by bash, zsh and fish, and `memlint man` rendered by man and groff.

use crate::common;

use common::*;
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn validate_gitlab(path: &Path) -> Value {
    require_tool("check-jsonschema");
    run(Command::new("check-jsonschema")
        .args([
            "--schemafile",
            &format!("{ROOT}/testdata/gitlab-codequality.schema.json"),
        ])
        .arg(path));
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

fn validate_junit(path: &Path) {
    require_tool("xmllint");
    run(Command::new("xmllint")
        .args(["--noout", "--schema", &format!("{ROOT}/testdata/junit-10.xsd")])
        .arg(path));
}

/// An XPath expression's value in a JUnit file (xmllint prints it and a line break).
fn xpath(path: &Path, expr: &str) -> String {
    let out = run(Command::new("xmllint").args(["--xpath", expr]).arg(path));
    let text = String::from_utf8(out.stdout).unwrap();
    text.strip_suffix('\n').unwrap_or(&text).to_string()
}

/// A debian-like image whose `LD_PRELOAD` names one missing absolute library and two relative
/// names (findings that name no image path).
fn preload_image(arch: &str, preload: &str) -> common::ImageSpec {
    ImageSpec::new(arch)
        .layer(
            LayerSpec::new(Comp::Gzip)
                .by("RUN true")
                .file("etc/os-release", b"ID=debian\nVERSION_ID=\"12\"\n"),
        )
        .env(&format!("LD_PRELOAD={preload}"))
}

fn write_single(root: &Path, img: &ImageSpec) -> String {
    let w = OciWriter::new(root);
    let d = w.image(img);
    w.write_index_json(vec![with_name(d, "app")]);
    format!("oci-dir:{}:app", root.display())
}

/// Writes `out` to a file in `dir` and returns its path.
fn save(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn gitlab_report_passes_its_schema_with_dockerfile_lines_and_stable_fingerprints() {
    let dir = tempfile::tempdir().unwrap();
    let image = build_image("demo");
    let df = format!("{ROOT}/testdata/dockerfiles/demo.Dockerfile");
    let out = memlint_in(
        dir.path(),
        &["lint", "--format", "gitlab", "--dockerfile", &df, &image],
    );
    assert_eq!(out.status.code(), Some(1), "{}", error_text(&out));
    let v = validate_gitlab(&save(dir.path(), "a.json", &out.stdout));
    let issues = v.as_array().unwrap();
    assert_eq!(issues.len(), 1, "{v}");
    let i = &issues[0];
    assert_eq!(i["check_name"], "ld-preload-missing");
    assert_eq!(i["severity"], "critical");
    assert_eq!(i["location"]["path"], "testdata/dockerfiles/demo.Dockerfile");
    assert_eq!(i["location"]["lines"]["begin"], 7);
    assert!(i["description"].as_str().unwrap().contains("resolves to nothing"));
    assert!(i["content"]["body"]
        .as_str()
        .unwrap()
        .contains("Fix:\nENV LD_PRELOAD="));

    // Without a Dockerfile: --sarif-artifact (default Dockerfile), line 1; the fingerprint is the
    // baseline's, which no file or line changes, and it is the same on every run.
    let plain = |extra: &[&str]| -> Value {
        let mut args = vec!["lint", "--fail-on", "never", "--format", "gitlab"];
        args.extend_from_slice(extra);
        args.push(&image);
        let out = memlint_in(dir.path(), &args);
        assert!(out.status.success(), "{}", error_text(&out));
        validate_gitlab(&save(dir.path(), "b.json", &out.stdout))
    };
    let b = plain(&[]);
    assert_eq!(b[0]["location"]["path"], "Dockerfile");
    assert_eq!(b[0]["location"]["lines"]["begin"], 1);
    assert_eq!(b[0]["fingerprint"], plain(&[])[0]["fingerprint"]);
    assert_eq!(b[0]["fingerprint"], i["fingerprint"]);
    let c = plain(&["--sarif-artifact", "deploy/api/Dockerfile"]);
    assert_eq!(c[0]["location"]["path"], "deploy/api/Dockerfile");
    // A severity changed in the config is GitLab's severity too; an ignored finding is left out.
    fs::write(
        dir.path().join(".memlint.toml"),
        "[severity]\nld-preload-missing = \"note\"\n",
    )
    .unwrap();
    assert_eq!(plain(&[])[0]["severity"], "info");
    assert_eq!(plain(&["--ignore", "ld-preload-missing"]), serde_json::json!([]));
}

#[test]
fn gitlab_fingerprints_are_unique_and_ignore_the_words_of_a_finding() {
    let dir = tempfile::tempdir().unwrap();
    // Two relative entries name no image path: they differ only by their words.
    let a = write_single(
        &dir.path().join("a"),
        &preload_image("amd64", "/usr/lib/libnothere.so:libone.so:libtwo.so"),
    );
    let out = memlint_in(
        dir.path(),
        &["lint", "--fail-on", "never", "--format", "gitlab", &a],
    );
    let v = validate_gitlab(&save(dir.path(), "a.json", &out.stdout));
    let prints: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["fingerprint"].as_str().unwrap())
        .collect();
    assert_eq!(prints.len(), 3, "{v}");
    let mut unique = prints.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), 3, "one fingerprint per issue: {v}");
    // The same place rebuilt, with other words (the relative entries renamed) and another
    // digest (one more env entry): the same fingerprints, as neither words nor digest count.
    fs::remove_dir_all(dir.path().join("a")).unwrap();
    let again = write_single(
        &dir.path().join("a"),
        &preload_image("amd64", "/usr/lib/libnothere.so:libuno.so:libdos.so").env("X=1"),
    );
    assert_eq!(again, a);
    let out = memlint_in(
        dir.path(),
        &["lint", "--fail-on", "never", "--format", "gitlab", &a],
    );
    let w: Value = serde_json::from_slice(&out.stdout).unwrap();
    let descriptions = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|i| i["description"].to_string())
            .collect()
    };
    assert_ne!(descriptions(&v), descriptions(&w));
    let rebuilt: Vec<&str> = w
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["fingerprint"].as_str().unwrap())
        .collect();
    assert_eq!(prints, rebuilt);
    // Another image (another reference): other fingerprints.
    let b = write_single(
        &dir.path().join("b"),
        &preload_image("amd64", "/usr/lib/libnothere.so:libone.so:libtwo.so"),
    );
    let out = memlint_in(
        dir.path(),
        &["lint", "--fail-on", "never", "--format", "gitlab", &b],
    );
    let other: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(other
        .as_array()
        .unwrap()
        .iter()
        .all(|i| !prints.contains(&i["fingerprint"].as_str().unwrap())));
}

#[test]
fn junit_report_passes_junit_10_xsd_with_one_case_per_rule() {
    require_tool("xmllint");
    let dir = tempfile::tempdir().unwrap();
    let image = build_image("demo");
    let rules: Value = serde_json::from_slice(&memlint(&["rules", "--format", "json"]).stdout).unwrap();
    let n_rules = rules.as_array().unwrap().len();

    let junit = |fail_on: &str, code: i32| -> PathBuf {
        let out = memlint_in(
            dir.path(),
            &["lint", "--format", "junit", "--fail-on", fail_on, &image],
        );
        assert_eq!(out.status.code(), Some(code), "{}", error_text(&out));
        let p = save(dir.path(), &format!("{fail_on}.xml"), &out.stdout);
        validate_junit(&p);
        p
    };
    let p = junit("warning", 1);
    assert_eq!(xpath(&p, "count(//testcase)"), n_rules.to_string());
    assert_eq!(xpath(&p, "count(//testsuite)"), "1");
    assert_eq!(xpath(&p, "string(/testsuites/@failures)"), "1");
    assert_eq!(xpath(&p, "string(//testsuite/@tests)"), n_rules.to_string());
    assert_eq!(xpath(&p, "count(//failure)"), "1");
    assert_eq!(xpath(&p, "string(//failure/../@name)"), "ld-preload-missing");
    assert_eq!(xpath(&p, "string(//failure/@type)"), "error");
    let body = xpath(&p, "string(//failure)");
    assert!(
        body.contains("evidence:") && body.contains("fix:\n    ENV LD_PRELOAD="),
        "{body}"
    );
    assert_eq!(xpath(&p, "string(//property[@name='fail_on']/@value)"), "warning");
    // Passing rules are test cases without a failure.
    assert_eq!(xpath(&p, "count(//testcase[@name='node-semi-space']/*)"), "0");
    // Below --fail-on: no failure, the finding in system-out.
    let p = junit("never", 0);
    assert_eq!(xpath(&p, "count(//failure)"), "0");
    assert_eq!(xpath(&p, "string(/testsuites/@failures)"), "0");
    let out = xpath(&p, "string(//testcase[@name='ld-preload-missing']/system-out)");
    assert!(out.starts_with("Below --fail-on never:\nerror: preload"), "{out}");
    // An ignored finding is said in system-out, and does not fail the case.
    let out = memlint_in(
        dir.path(),
        &[
            "lint",
            "--format",
            "junit",
            "--ignore",
            "ld-preload-missing",
            &image,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", error_text(&out));
    let p = save(dir.path(), "ignored.xml", &out.stdout);
    validate_junit(&p);
    assert_eq!(xpath(&p, "count(//failure)"), "0");
    assert!(
        xpath(&p, "string(//testcase[@name='ld-preload-missing']/system-out)")
            .starts_with("Ignored (--ignore: ignored by --ignore):")
    );
}

#[test]
fn several_images_all_platforms_and_output_files_make_one_report_each() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("multi");
    let w = OciWriter::new(&root);
    let amd = w.image(&preload_image(
        "amd64",
        "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    ));
    let arm = w.image(&preload_image(
        "arm64",
        "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
    ));
    let index = w.index(vec![amd, arm]);
    w.write_index_json(vec![with_name(index, "multi")]);
    let multi = format!("oci-dir:{}:multi", root.display());
    let single = write_single(&dir.path().join("one"), &preload_image("amd64", "/nothere.so"));

    let gl = dir.path().join("r.gitlab.json");
    let ju = dir.path().join("r.junit.xml");
    let out = memlint_in(
        dir.path(),
        &[
            "lint",
            "--platform",
            "all",
            "-o",
            &format!("gitlab={}", gl.display()),
            "-o",
            &format!("junit={}", ju.display()),
            &multi,
            &single,
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", error_text(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("error[ld-preload-missing]"),
        "text on stdout: {text}"
    );

    let v = validate_gitlab(&gl);
    let issues = v.as_array().unwrap();
    assert_eq!(issues.len(), 3, "{v}");
    for (platform, reference) in [
        ("linux/amd64", &multi),
        ("linux/arm64", &multi),
        ("linux/amd64", &single),
    ] {
        assert!(
            issues.iter().any(|i| i["description"]
                .as_str()
                .unwrap()
                .ends_with(&format!("({reference}, {platform})"))),
            "{platform} of {reference}: {v}"
        );
    }
    let mut prints: Vec<&str> = issues
        .iter()
        .map(|i| i["fingerprint"].as_str().unwrap())
        .collect();
    prints.sort_unstable();
    prints.dedup();
    assert_eq!(prints.len(), 3);

    validate_junit(&ju);
    assert_eq!(xpath(&ju, "count(//testsuite)"), "3");
    assert_eq!(xpath(&ju, "string(/testsuites/@failures)"), "3");
    assert_eq!(
        xpath(
            &ju,
            "count(//testsuite[properties/property[@name='platform' and @value='linux/arm64']])"
        ),
        "1"
    );

    // Of several images, one that cannot be read is an error test case; the run ends with 2.
    let missing = format!("oci-dir:{}", dir.path().join("nosuch").display());
    let out = memlint_in(dir.path(), &["lint", "--format", "junit", &single, &missing]);
    assert_eq!(out.status.code(), Some(2), "{}", error_text(&out));
    let p = save(dir.path(), "unread.xml", &out.stdout);
    validate_junit(&p);
    assert_eq!(xpath(&p, "count(//testsuite)"), "2");
    assert_eq!(xpath(&p, "string(/testsuites/@errors)"), "1");
    assert_eq!(xpath(&p, "string(//error/../@name)"), "read");
    assert_eq!(xpath(&p, "string(//error/../@classname)"), missing);
    assert!(xpath(&p, "string(//error/@type)").starts_with("memlint::"));

    // A format -o does not know is refused, naming the new ones.
    let bad = memlint_in(dir.path(), &["lint", "-o", "xml=x", &single]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        error_text(&bad).contains("gitlab, junit or html"),
        "{}",
        error_text(&bad)
    );
}

#[test]
fn hostile_strings_stay_escaped_and_decode_in_both_formats() {
    let dir = tempfile::tempdir().unwrap();
    // `:` and white space separate LD_PRELOAD entries: the whole value is quoted in the
    // evidence, each entry in a message.
    let hostile = "/opt/a\x1b]0;pwned\x07\u{9b}2J]]>\n::warning::x\r##[error]y\u{0}\u{fffe}<z>&\"'.so";
    let image = write_single(&dir.path().join("img"), &preload_image("amd64", hostile));
    for format in ["gitlab", "junit"] {
        let out = memlint_in(
            dir.path(),
            &["lint", "--fail-on", "note", "--format", format, &image],
        );
        assert_eq!(out.status.code(), Some(1), "{format}: {}", error_text(&out));
        let text = String::from_utf8(out.stdout.clone()).unwrap();
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{format}: raw control characters: {text}"
        );
        assert!(!text.contains("##["), "{format}: {text}");
        for line in text.lines() {
            assert!(!line.trim_start().starts_with("::"), "{format}: {line}");
        }
        let path = save(dir.path(), &format!("h.{format}"), &out.stdout);
        if format == "gitlab" {
            let v = validate_gitlab(&path);
            // JSON decodes to what the image holds, NUL included.
            let all = serde_json::to_string(&v).unwrap();
            let bodies: Vec<&str> = v
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["content"]["body"].as_str().unwrap())
                .collect();
            assert!(
                bodies
                    .iter()
                    .any(|b| b.contains(&format!("LD_PRELOAD={hostile}"))),
                "{all}"
            );
        } else {
            validate_junit(&path);
            assert!(!text.contains("]]>"), "{text}");
            // What XML 1.0 can hold decodes to the original (C1, `]]>`, `\r`, `##[`, `::`); the C0
            // controls and U+FFFE, which it cannot hold at all, are shown escaped as the text
            // report shows them.
            let body = xpath(&path, "string(//failure)");
            let shown = hostile
                .replace('\u{0}', "\\x00")
                .replace('\x1b', "\\x1b")
                .replace('\x07', "\\x07")
                .replace('\u{fffe}', "\\u{fffe}");
            assert!(body.contains(&format!("LD_PRELOAD={shown}")), "{body:?}");
            let message = xpath(&path, "string(//failure/@message)");
            assert!(message.contains("\\x1b]0;pwned\\x07\u{9b}2J]]>"), "{message:?}");
        }
    }
}

#[test]
fn completions_load_in_bash_and_name_the_subcommands() {
    let dir = tempfile::tempdir().unwrap();
    let script = memlint(&["completions", "bash"]);
    assert!(script.status.success());
    let path = save(dir.path(), "memlint.bash", &script.stdout);
    run(Command::new("bash").arg("-n").arg(&path));
    let out = run(Command::new("bash").args([
        "-c",
        &format!("source '{}' && complete -p memlint", path.display()),
    ]));
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(
        line.starts_with("complete ") && line.trim_end().ends_with(" memlint"),
        "{line}"
    );
    // The function it names completes subcommands and the formats of --format.
    let words = |cword: &str, words: &str| -> String {
        let out = run(Command::new("bash").args([
            "-c",
            &format!(
                "source '{}'; COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE='{words}'; COMP_POINT=${{#COMP_LINE}}; \
                 f=$(complete -p memlint | sed -E 's/.*-F ([^ ]+) .*/\\1/'); $f memlint \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                path.display()
            ),
        ]));
        String::from_utf8(out.stdout).unwrap()
    };
    let subs = words("1", "memlint ''");
    for s in ["lint", "inspect", "completions", "man"] {
        assert!(subs.lines().any(|l| l == s), "{s} not offered: {subs}");
    }
    let formats = words("3", "memlint lint --format ''");
    for f in ["gitlab", "junit", "sarif"] {
        assert!(formats.lines().any(|l| l == f), "{f} not offered: {formats}");
    }
    // zsh: the script parses, and compinit finds it on $fpath and binds it to memlint.
    require_tool("zsh");
    let zdir = dir.path().join("zfunc");
    fs::create_dir(&zdir).unwrap();
    save(&zdir, "_memlint", &memlint(&["completions", "zsh"]).stdout);
    run(Command::new("zsh").arg("-n").arg(zdir.join("_memlint")));
    let out = run(Command::new("zsh").args([
        "-fc",
        &format!(
            "fpath=('{}' $fpath); autoload -Uz compinit; compinit -u -D; print -r -- ${{_comps[memlint]}}",
            zdir.display()
        ),
    ]));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "_memlint");
    // fish: the script parses, and fish's own completion engine offers the subcommands and
    // the formats of --format.
    require_tool("fish");
    let fish = save(
        dir.path(),
        "memlint.fish",
        &memlint(&["completions", "fish"]).stdout,
    );
    run(Command::new("fish").arg("--no-execute").arg(&fish));
    let complete = |line: &str| -> Vec<String> {
        let out = run(Command::new("fish").args([
            "--no-config",
            "-c",
            &format!("source '{}'; complete -C '{line}'", fish.display()),
        ]));
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| l.split('\t').next().unwrap_or("").to_string())
            .collect()
    };
    let subs = complete("memlint ");
    for s in ["lint", "inspect", "completions", "man"] {
        assert!(subs.iter().any(|l| l == s), "fish: {s} not offered: {subs:?}");
    }
    let formats = complete("memlint lint --format ");
    for f in ["gitlab", "junit"] {
        assert!(
            formats.iter().any(|l| l == f),
            "fish: {f} not offered: {formats:?}"
        );
    }
    for shell in ["zsh", "fish", "powershell", "elvish"] {
        let out = memlint(&["completions", shell]);
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8(out.stdout).unwrap();
        for s in ["lint", "inspect", "explain", "completions", "man"] {
            assert!(text.contains(s), "{shell}: no `{s}` in\n{text}");
        }
        // zsh and fish also complete the values of --format.
        if shell == "zsh" || shell == "fish" {
            assert!(
                text.contains("gitlab") && text.contains("junit"),
                "{shell}: {text}"
            );
        }
    }
    let bad = memlint(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn man_pages_are_valid_roff() {
    require_tool("man");
    require_tool("groff");
    let dir = tempfile::tempdir().unwrap();
    let render = |page: &Path| -> String {
        let out = run(Command::new("man")
            .arg("-l")
            .arg(page)
            .env("MANWIDTH", "80")
            .env("MANPAGER", "cat")
            .env("PAGER", "cat"));
        // groff's own warnings (-ww): a page with bad roff says so on standard error.
        let lint = run(Command::new("groff")
            .args(["-man", "-ww", "-z", "-Tutf8"])
            .arg(page));
        let warnings = String::from_utf8_lossy(&lint.stderr).to_string();
        assert!(warnings.is_empty(), "{}: {warnings}", page.display());
        String::from_utf8(out.stdout).unwrap()
    };
    let top = memlint(&["man"]);
    assert!(top.status.success());
    let text = render(&save(dir.path(), "memlint.1", &top.stdout));
    assert!(
        text.contains("NAME") && text.contains("memlint-lint(1)"),
        "{text}"
    );
    let lint = memlint(&["man", "lint"]);
    assert!(lint.status.success());
    let text = render(&save(dir.path(), "memlint-lint.1", &lint.stdout));
    for s in ["--format", "gitlab", "junit", "--fail-on"] {
        assert!(text.contains(s), "memlint-lint(1) lacks {s}: {text}");
    }
    let pages = dir.path().join("pages");
    fs::create_dir(&pages).unwrap();
    let out = memlint(&["man", "--dir", pages.to_str().unwrap()]);
    assert!(out.status.success(), "{}", error_text(&out));
    let mut names: Vec<String> = fs::read_dir(&pages)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    for n in [
        "memlint.1",
        "memlint-lint.1",
        "memlint-inspect.1",
        "memlint-hook-install.1",
        "memlint-completions.1",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} not in {names:?}");
    }
    for n in &names {
        render(&pages.join(n));
    }
    fails_with(&["man", "nosuch"], &["lint, inspect"]);
}

#[test]
fn readme_ci_jobs_pass_their_schemas_and_run() {
    require_tool("check-jsonschema");
    let readme = fs::read_to_string(format!("{ROOT}/README.md")).unwrap();
    let start = readme
        .find("```yaml\n# .gitlab-ci.yml\n")
        .expect("the README has a .gitlab-ci.yml example");
    let block = &readme[start + "```yaml\n".len()..];
    let block = &block[..block.find("```").unwrap()];
    for needle in [
        "-o gitlab=gl-code-quality-report.json",
        "-o junit=memlint-junit.xml",
        "codequality: gl-code-quality-report.json",
        "junit: memlint-junit.xml",
    ] {
        assert!(block.contains(needle), "{needle} not in\n{block}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = save(dir.path(), ".gitlab-ci.yml", block.as_bytes());
    run(Command::new("check-jsonschema")
        .args(["--builtin-schema", "vendor.gitlab-ci"])
        .arg(&path));
    // The memlint command of the job is one this memlint takes.
    let line = block
        .lines()
        .find(|l| l.contains("memlint lint "))
        .unwrap()
        .trim_start_matches([' ', '-'])
        .to_string();
    let args: Vec<&str> = line.split_whitespace().skip(1).collect();
    let image = build_image("demo");
    let args: Vec<&str> = args
        .iter()
        .map(|a| {
            if *a == "oci-archive:image.tar" {
                image.as_str()
            } else {
                a
            }
        })
        .map(|a| if a == "Dockerfile" { "df" } else { a })
        .collect();
    fs::write(
        dir.path().join("df"),
        fs::read(format!("{ROOT}/testdata/dockerfiles/demo.Dockerfile")).unwrap(),
    )
    .unwrap();
    let out = memlint_in(dir.path(), &args);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {}", error_text(&out));
    validate_gitlab(&dir.path().join("gl-code-quality-report.json"));
    validate_junit(&dir.path().join("memlint-junit.xml"));

    // The Azure Pipelines steps pass Azure's schema.
    let start = readme
        .find("```yaml\n# azure-pipelines.yml\n")
        .expect("the README has an azure-pipelines.yml example");
    let block = &readme[start + "```yaml\n".len()..];
    let block = &block[..block.find("```").unwrap()];
    assert!(block.contains("testResultsFormat: JUnit") && block.contains("-o junit=memlint-junit.xml"));
    let path = save(dir.path(), "azure-pipelines.yml", block.as_bytes());
    run(Command::new("check-jsonschema")
        .args(["--builtin-schema", "vendor.azure-pipelines"])
        .arg(&path));
}
