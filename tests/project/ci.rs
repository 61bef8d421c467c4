//! memlint in CI: SARIF that validates against the official schema and passes Microsoft's SARIF
//! Multitool with GitHub's rules, findings on Dockerfile lines, several reports from one run,
//! GitHub annotations, config and ignores, the Action and workflow files, and the pre-push
//! hook with real git and pre-commit.

use crate::common;

use common::*;
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn dockerfile(name: &str) -> String {
    format!("{ROOT}/testdata/dockerfiles/{name}.Dockerfile")
}

/// How many rules `memlint rules --format json` lists.
fn memlint_rule_count() -> usize {
    let out = memlint(&["rules", "--format", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array().or_else(|| v["rules"].as_array()).unwrap().len()
}

fn sarif_of(dir: &Path, args: &[&str]) -> Value {
    let out = dir.join("out.sarif");
    let mut all = vec!["lint", "--fail-on", "never", "--format", "sarif"];
    all.extend_from_slice(args);
    let o = memlint_in(dir, &all);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    fs::write(&out, &o.stdout).unwrap();
    validate_sarif(&out);
    serde_json::from_slice(&o.stdout).unwrap()
}

fn result_lines(sarif: &Value) -> Vec<(String, u64, String)> {
    sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let loc = &r["locations"][0]["physicalLocation"];
            (
                r["ruleId"].as_str().unwrap().to_string(),
                loc["region"]["startLine"].as_u64().unwrap(),
                loc["artifactLocation"]["uri"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn sarif_is_valid_and_findings_land_on_their_lines() {
    let dir = tempfile::tempdir().unwrap();
    // (recipe, Dockerfile, expected rule → line)
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, u64)]);
    let cases: &[Case] = &[
        ("demo", "demo", &[("ld-preload-missing", 7)]),
        (
            "node-sharp-jemalloc-unused",
            "node-sharp-jemalloc-unused",
            &[("jemalloc-not-preloaded", 7), ("sharp-glibc-allocator", 6)],
        ),
        ("node-old-space", "node-old-space", &[("node-semi-space", 2)]),
        (
            "dotnet-npgsql",
            "dotnet-npgsql",
            &[("dotnet-glibc-allocator", 2), ("npgsql-gssapi-missing", 2)],
        ),
        (
            "java17-cgroup-flag",
            "java17-cgroup-flag",
            &[("jvm-flag-incompatible", 3), ("jvm-glibc-arenas", 1)],
        ),
        ("java17-gradle", "java17-gradle", &[("jvm-flag-incompatible", 6)]),
    ];
    for (recipe, df, expected) in cases {
        let image = build_image(recipe);
        let df_path = dockerfile(df);
        let sarif = sarif_of(dir.path(), &["--dockerfile", &df_path, &image]);
        let lines = result_lines(&sarif);
        for (rule, line) in *expected {
            assert!(
                lines
                    .iter()
                    .any(|(r, l, uri)| r == rule && l == line && uri.ends_with(&format!("{df}.Dockerfile"))),
                "{recipe}: {rule} should be on line {line}: {lines:?}"
            );
        }
        let run = &sarif["runs"][0];
        let driver = &run["tool"]["driver"];
        assert_eq!(driver["name"], "memlint");
        let listed: Value =
            serde_json::from_slice(&memlint_in(dir.path(), &["rules", "--format", "json"]).stdout).unwrap();
        let ids = |v: &Value| -> Vec<String> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|r| r["id"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            ids(&driver["rules"]),
            ids(&listed),
            "every rule of the registry, in order"
        );
        assert!(driver["rules"][0]["help"]["markdown"]
            .as_str()
            .unwrap()
            .starts_with("# "));
        assert!(run["automationDetails"]["id"]
            .as_str()
            .unwrap()
            .ends_with("/linux-amd64/"));
        for r in run["results"].as_array().unwrap() {
            assert!(
                r["partialFingerprints"]["memlintFinding/v2"]
                    .as_str()
                    .unwrap()
                    .len()
                    == 32
            );
            let uri = r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                .as_str()
                .unwrap();
            assert!(
                !uri.contains(':') && !uri.contains(' ') && !uri.starts_with('/'),
                "{uri}"
            );
        }
    }
}

#[test]
fn sarif_without_a_dockerfile_fingerprints_and_category() {
    let dir = tempfile::tempdir().unwrap();
    let image = build_image("dotnet-npgsql");
    let a = sarif_of(dir.path(), &["--category", "images/api", &image]);
    let b = sarif_of(dir.path(), &["--category", "images/api", &image]);
    let fp = |v: &Value| -> Vec<Value> {
        v["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["partialFingerprints"].clone())
            .collect()
    };
    assert_eq!(fp(&a), fp(&b), "fingerprints are stable across runs");
    assert_eq!(a["runs"][0]["automationDetails"]["id"], "images/api/");
    assert!(result_lines(&a)
        .iter()
        .all(|(_, line, uri)| *line == 1 && uri == "Dockerfile"));
    let c = sarif_of(dir.path(), &["--sarif-artifact", "deploy/api/Dockerfile", &image]);
    assert!(result_lines(&c)
        .iter()
        .all(|(_, _, uri)| uri == "deploy/api/Dockerfile"));
    // Several images: one run (code scanning refuses two runs of one category), the rules
    // once, each result naming its image.
    let demo = build_image("demo");
    let two = sarif_of(dir.path(), &["--category", "images/api", &image, &demo]);
    let runs = two["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["automationDetails"]["id"], "images/api/");
    assert_eq!(
        runs[0]["tool"]["driver"]["rules"].as_array().unwrap().len(),
        memlint_rule_count()
    );
    let results = runs[0]["results"].as_array().unwrap();
    let of = |i: &str| results.iter().filter(|r| r["properties"]["image"] == i).count();
    assert_eq!(of(&image), fp(&a).len());
    assert!(of(&demo) > 0);
    assert_eq!(of(&image) + of(&demo), results.len());
    let two = sarif_of(dir.path(), &[&image, &demo]);
    assert_eq!(two["runs"][0]["automationDetails"]["id"], "memlint/");
    // A URI GitHub would read as a scheme is refused.
    let out = memlint_in(dir.path(), &["lint", "--sarif-artifact", "app:1", &image]);
    assert_eq!(out.status.code(), Some(2));
    assert!(error_text(&out).contains("repository-relative"));
    // The text report says where findings point without a Dockerfile.
    let text = String::from_utf8(memlint_in(dir.path(), &["lint", &image]).stdout).unwrap();
    assert!(
        text.contains("no Dockerfile was given (--dockerfile): findings point at Dockerfile:1"),
        "{text}"
    );
}

#[test]
fn several_reports_from_one_run_and_github_annotations() {
    let dir = tempfile::tempdir().unwrap();
    let image = build_image("demo");
    let out = memlint_in(
        dir.path(),
        &[
            "lint",
            "--dockerfile",
            &dockerfile("demo"),
            "-o",
            "sarif=r.sarif",
            "-o",
            "json=r.json",
            &image,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("error[ld-preload-missing]"), "{text}");
    assert!(text.contains("demo.Dockerfile:7: ENV LD_PRELOAD="), "{text}");
    validate_sarif(&dir.path().join("r.sarif"));
    let json: Value = serde_json::from_slice(&fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(json["findings"][0]["location"]["line"], 7);
    let bad = memlint_in(dir.path(), &["lint", "-o", "yaml=x", &image]);
    assert_eq!(bad.status.code(), Some(2));

    let gh = memlint_in(
        dir.path(),
        &[
            "lint",
            "--format",
            "github",
            "--dockerfile",
            &dockerfile("demo"),
            &image,
        ],
    );
    let line = String::from_utf8(gh.stdout).unwrap();
    assert!(line.starts_with("::error file="), "{line}");
    assert!(
        line.contains("demo.Dockerfile,line=7,endLine=7,title=memlint ld-preload-missing"),
        "{line}"
    );
    assert_eq!(
        line.lines().count(),
        1,
        "one annotation, newlines escaped: {line}"
    );
}

#[test]
fn config_severities_and_ignores() {
    let dir = tempfile::tempdir().unwrap();
    let image = build_image("dotnet-npgsql");
    fs::write(
        dir.path().join(".memlint.toml"),
        r#"
[severity]
dotnet-glibc-allocator = "note"

[[ignores]]
rule = "npgsql-gssapi-missing"
image = "*dotnet-npgsql*"
reason = "PGGSSENCMODE is set by the deployment"
expires = 2999-12-31

[[ignores]]
rule = "ld-preload-missing"
path = "/nowhere"
reason = "matches nothing"
"#,
    )
    .unwrap();
    let (v, code) = {
        let o = memlint_in(dir.path(), &["lint", "--format", "json", &image]);
        (common::valid_report(&o.stdout), o.status.code())
    };
    assert_eq!(code, Some(0), "only a note is left");
    assert_eq!(v["findings"][0]["rule"], "dotnet-glibc-allocator");
    assert_eq!(v["findings"][0]["severity"], "note");
    assert_eq!(v["ignored"][0]["rule"], "npgsql-gssapi-missing");
    assert_eq!(
        v["ignored"][0]["suppression"]["justification"],
        "PGGSSENCMODE is set by the deployment"
    );
    assert_eq!(v["summary"]["ignored"], 1);
    let text = String::from_utf8(memlint_in(dir.path(), &["lint", "--show-ignored", &image]).stdout).unwrap();
    assert!(text.contains("ignored warning[npgsql-gssapi-missing]"), "{text}");
    assert!(text.contains("1 ignored"), "{text}");
    assert!(text.contains("the ignore of ld-preload-missing at"), "{text}");
    let sarif = sarif_of(dir.path(), &[&image]);
    let suppressed: Vec<&Value> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r.get("suppressions").is_some())
        .collect();
    assert_eq!(suppressed.len(), 1);
    assert_eq!(suppressed[0]["suppressions"][0]["kind"], "external");

    // An expired ignore stops hiding the finding and says so.
    let expired = fs::read_to_string(dir.path().join(".memlint.toml"))
        .unwrap()
        .replace("2999-12-31", "2020-01-01");
    fs::write(dir.path().join(".memlint.toml"), expired).unwrap();
    let o = memlint_in(dir.path(), &["lint", "--format", "json", &image]);
    assert_eq!(o.status.code(), Some(1));
    let v = common::valid_report(&o.stdout);
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "npgsql-gssapi-missing")
        .unwrap();
    assert!(f["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e.as_str().unwrap().contains("expired on 2020-01-01")));

    // --config from elsewhere, an inline ignore in the Dockerfile, and a broken config.
    let other = dir.path().join("other.toml");
    fs::write(&other, "ignore = [\"dotnet-glibc-allocator\"]\n").unwrap();
    let sarif = sarif_of(
        dir.path(),
        &[
            "--config",
            other.to_str().unwrap(),
            "--dockerfile",
            &dockerfile("dotnet-npgsql"),
            &image,
        ],
    );
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let kinds: Vec<(&str, &str)> = results
        .iter()
        .filter_map(|r| {
            r.get("suppressions")
                .map(|s| (r["ruleId"].as_str().unwrap(), s[0]["kind"].as_str().unwrap()))
        })
        .collect();
    assert!(
        kinds.contains(&("npgsql-gssapi-missing", "inSource")),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("dotnet-glibc-allocator", "external")),
        "{kinds:?}"
    );
    fs::write(
        &other,
        "[[ignores]]\nrule = \"npgsql-gssapi-mising\"\nimage = \"x\"\nreason = \"r\"\n",
    )
    .unwrap();
    let o = memlint_in(dir.path(), &["lint", "--config", other.to_str().unwrap(), &image]);
    assert_eq!(o.status.code(), Some(2));
    let err = error_text(&o);
    assert!(
        err.contains("did you mean `npgsql-gssapi-missing`") && err.contains("other.toml"),
        "{err}"
    );
}

#[test]
fn path_ignores_match_the_image_paths_a_finding_names_not_its_words() {
    let dir = tempfile::tempdir().unwrap();
    let image = build_image("dotnet-npgsql");
    // dotnet-glibc-allocator names /usr/share/dotnet/shared/Microsoft.NETCore.App/3.1.23;
    // npgsql-gssapi-missing says "connection string in /app/appsettings.json#…" in its evidence
    // words, but names /app/WebApi.deps.json as its image path.
    fs::write(
        dir.path().join(".memlint.toml"),
        r#"
[[ignores]]
rule = "dotnet-glibc-allocator"
path = "/usr/share/dot"
reason = "stops inside a path component"

[[ignores]]
rule = "dotnet-glibc-allocator"
path = "/usr/share/dotnet/"
reason = "the runtime's folder"

[[ignores]]
rule = "npgsql-gssapi-missing"
path = "/app/appsettings.json"
reason = "only in the evidence words"
"#,
    )
    .unwrap();
    let o = memlint_in(dir.path(), &["lint", "--format", "json", &image]);
    let v = common::valid_report(&o.stdout);
    let rules = |key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["rule"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(rules("ignored"), ["dotnet-glibc-allocator"]);
    assert_eq!(
        v["ignored"][0]["suppression"]["justification"],
        "the runtime's folder"
    );
    assert_eq!(rules("findings"), ["npgsql-gssapi-missing"]);
    assert!(v["findings"][0]["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e.as_str().unwrap().contains("/app/appsettings.json")));
    let text = String::from_utf8(memlint_in(dir.path(), &["lint", &image]).stdout).unwrap();
    for line in [2, 12] {
        assert!(
            text.contains(&format!(".memlint.toml:{line} matched no finding")),
            "{text}"
        );
    }
    assert!(!text.contains(".memlint.toml:7 matched no finding"), "{text}");
}

#[test]
fn action_and_workflows_pass_their_schemas_and_zizmor() {
    require_tool("check-jsonschema");
    require_tool("zizmor");
    let workflows: Vec<PathBuf> = fs::read_dir(format!("{ROOT}/.github/workflows"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml" || e == "yaml"))
        .collect();
    for name in ["ci.yml", "example.yml", "release.yml"] {
        assert!(
            workflows.iter().any(|w| w.ends_with(name)),
            "{name} is checked with the others"
        );
    }
    run(Command::new("check-jsonschema")
        .args(["--builtin-schema", "vendor.github-workflows"])
        .args(&workflows));
    run(Command::new("check-jsonschema").args([
        "--builtin-schema",
        "vendor.github-actions",
        &format!("{ROOT}/action.yml"),
    ]));
    let out = Command::new("zizmor")
        .args([
            "--offline",
            "--no-progress",
            &format!("{ROOT}/action.yml"),
            &format!("{ROOT}/.github/workflows"),
        ])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "zizmor: {report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!report.contains("error["), "{report}");
    let example = fs::read_to_string(format!("{ROOT}/.github/workflows/example.yml")).unwrap();
    assert!(
        example.contains("security-events: write")
            && example.contains("if: always()")
            && example.contains("upload-sarif")
    );
}

fn git(dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .unwrap()
}

/// A work tree with a bare remote; memlint's folder first on PATH for the hook.
fn repo_with_remote(dir: &Path, images: &[String]) -> PathBuf {
    let remote = dir.join("remote.git");
    let work = dir.join("work");
    assert!(git(dir, &["init", "-q", "--bare", remote.to_str().unwrap()])
        .status
        .success());
    assert!(git(dir, &["init", "-q", "-b", "main", work.to_str().unwrap()])
        .status
        .success());
    let list: Vec<String> = images.iter().map(|i| format!("{i:?}")).collect();
    fs::write(
        work.join(".memlint.toml"),
        format!("images = [{}]\n", list.join(", ")),
    )
    .unwrap();
    assert!(git(&work, &["add", "."]).status.success());
    assert!(git(&work, &["commit", "-q", "-m", "init"]).status.success());
    assert!(git(&work, &["remote", "add", "origin", remote.to_str().unwrap()])
        .status
        .success());
    work
}

fn path_with_memlint() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_memlint"))
        .parent()
        .unwrap()
        .display()
        .to_string();
    format!("{bin}:{}", std::env::var("PATH").unwrap_or_default())
}

#[test]
fn pre_push_hook_blocks_then_allows_a_push() {
    require_tool("git");
    let dir = tempfile::tempdir().unwrap();
    let work = repo_with_remote(dir.path(), &[build_image("demo")]);
    let print = memlint_in(&work, &["hook", "install", "--print"]);
    assert!(String::from_utf8_lossy(&print.stdout).starts_with("#!/bin/sh"));
    let install = memlint_in(&work, &["hook", "install"]);
    assert!(
        install.status.success(),
        "{}",
        String::from_utf8_lossy(&install.stderr)
    );
    assert!(work.join(".git/hooks/pre-push").is_file());

    let push = |work: &Path| {
        Command::new("git")
            .args(["push", "-q", "origin", "main"])
            .current_dir(work)
            .env("PATH", path_with_memlint())
            .env("MEMLINT_CACHE_DIR", dir.path().join("memlint-cache"))
            .output()
            .unwrap()
    };
    let refused = push(&work);
    assert!(
        !refused.status.success(),
        "the push went through despite an error finding"
    );
    assert!(String::from_utf8_lossy(&refused.stderr).contains("push refused"));
    let remote_head = git(
        &dir.path().join("remote.git"),
        &["rev-parse", "--verify", "-q", "refs/heads/main"],
    );
    assert!(!remote_head.status.success(), "nothing reached the remote");

    // The fix: lint the image whose preload works.
    fs::write(
        work.join(".memlint.toml"),
        format!("images = [{:?}]\n", build_image("glibc-jemalloc")),
    )
    .unwrap();
    assert!(git(&work, &["commit", "-q", "-am", "fix the preload"])
        .status
        .success());
    let allowed = push(&work);
    assert!(
        allowed.status.success(),
        "{}",
        String::from_utf8_lossy(&allowed.stderr)
    );
    assert!(git(
        &dir.path().join("remote.git"),
        &["rev-parse", "--verify", "-q", "refs/heads/main"]
    )
    .status
    .success());

    // A hook memlint did not write is kept unless --force.
    fs::write(work.join(".git/hooks/pre-push"), "#!/bin/sh\nexit 0\n").unwrap();
    assert_eq!(memlint_in(&work, &["hook", "install"]).status.code(), Some(2));
    assert!(memlint_in(&work, &["hook", "install", "--force"])
        .status
        .success());
}

#[test]
fn pre_commit_try_repo_at_the_pre_push_stage() {
    require_tool("git");
    require_tool("pre-commit");
    let dir = tempfile::tempdir().unwrap();
    let work = repo_with_remote(dir.path(), &[build_image("demo")]);
    // A hook repository holding this repo's manifest as committed (try-repo reads git state).
    let hooks = dir.path().join("hooks-repo");
    assert!(git(dir.path(), &["init", "-q", hooks.to_str().unwrap()])
        .status
        .success());
    fs::copy(
        format!("{ROOT}/.pre-commit-hooks.yaml"),
        hooks.join(".pre-commit-hooks.yaml"),
    )
    .unwrap();
    assert!(git(&hooks, &["add", "."]).status.success());
    assert!(git(&hooks, &["commit", "-q", "-m", "hooks"]).status.success());
    let try_repo = |work: &Path| {
        Command::new("pre-commit")
            .args([
                "try-repo",
                hooks.to_str().unwrap(),
                "memlint-system",
                "--hook-stage",
                "pre-push",
                "--all-files",
            ])
            .current_dir(work)
            .env("PATH", path_with_memlint())
            .env("PRE_COMMIT_HOME", dir.path().join("pre-commit-home"))
            .env("MEMLINT_CACHE_DIR", dir.path().join("memlint-cache"))
            .output()
            .unwrap()
    };
    let out = try_repo(&work);
    let shown = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success(),
        "pre-commit passed an image with an error finding: {shown}"
    );
    assert!(shown.contains("ld-preload-missing"), "{shown}");
    fs::write(
        work.join(".memlint.toml"),
        format!("images = [{:?}]\n", build_image("glibc-jemalloc")),
    )
    .unwrap();
    let out = try_repo(&work);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}
