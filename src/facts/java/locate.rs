//! Finding the JVM: its home (from the entrypoint, `JAVA_HOME`, `PATH`, the start script, the
//! usual folders), its version and vendor (the `release` file, else the package), and its kind.

use super::*;

/// A `release` file is about 2 KiB (its `MODULES` line is the longest); anything longer is
/// read no further than this.
pub(super) const RELEASE_CAP: u64 = 64 * 1024;

/// Where JDKs are installed by the distributions and the official images, whose `release`
/// files are kept whatever the config says.
pub(super) const JDK_HOMES: &[&str] = &[
    "/usr/lib/jvm/*",
    "/usr/lib/jvm/*/jre",
    "/opt/java/*",
    "/opt/*",
    "/usr/local/*",
    "/usr/java/*",
    "/layers/*/jre",
    "/layers/*/jdk",
];

/// Folders where Gradle and Maven start scripts are installed, kept (as scripts) whatever the
/// config says: `installDist` lays out `<app>/bin/<app>`.
pub(super) const START_SCRIPT_FOLDERS: &[&str] = &[
    "/app/bin/*",
    "/opt/*/bin/*",
    "/usr/share/*/bin/*",
    "/usr/local/*/bin/*",
];

/// `KEY="VALUE"` lines of a JDK `release` file.
pub(crate) fn parse_release(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| !k.is_empty() && k.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))
        .map(|(k, v)| (k.to_string(), v.trim().trim_matches('"').to_string()))
        .collect()
}

/// A start script the entrypoint runs: its path and text.
pub(super) struct StartScript {
    pub(super) path: String,
    pub(super) text: String,
}

impl StartScript {
    pub(super) fn is_java_start_script(text: &str) -> bool {
        text.contains("DEFAULT_JVM_OPTS=")
            || text.contains("\"$JAVACMD\"")
            || text
                .lines()
                .any(|l| l.trim_start().starts_with("exec ") && l.contains("java"))
    }

    /// Gradle's and Maven's scripts run `$JAVACMD`, not a `java` written in them.
    pub(super) fn runs_javacmd(&self) -> bool {
        self.text.contains("JAVACMD")
    }
}

/// The JVM found and how: the launcher, whether the entrypoint runs it, the command line's
/// words after `java`.
pub(super) struct Located {
    pub(super) java: Option<String>,
    pub(super) home: Option<String>,
    pub(super) runs: bool,
    pub(super) found_by: String,
    pub(super) args: Vec<String>,
    pub(super) script: Option<StartScript>,
}

/// The JVM: the one the entrypoint runs (directly, through `sh -c`, a wrapper, or a start
/// script that ends in `exec "$JAVACMD" "$@"`), else a JDK present in the image.
pub(super) fn locate(tree: &FileTree, jenv: &JavaEnv, entry: &Entrypoint) -> Option<Located> {
    let path_var = jenv.var("PATH").unwrap_or(DEFAULT_PATH);
    let java_home = jenv.var("JAVA_HOME");
    let expand_home = |w: &str| -> String {
        match java_home {
            Some(h) => w.replace("${JAVA_HOME}", h).replace("$JAVA_HOME", h),
            None => w.to_string(),
        }
    };
    let script = start_script(tree, entry);
    // The entrypoint's program is java, or the command it could not find is `$JAVA_HOME/bin/java`
    // or a start script's `$JAVACMD`.
    let first = entry.args.first().map(|a| expand_home(a));
    let program_is_java = entry.program.as_deref().is_some_and(|p| basename(p) == "java");
    let first_is_java = first.as_deref().is_some_and(|f| basename(f) == "java");
    let javacmd = first
        .as_deref()
        .is_some_and(|f| f == "$JAVACMD" || f == "${JAVACMD}");
    // A start script whose `$JAVACMD` the entrypoint could not follow (or whose `#!` program
    // is not in the image) runs java all the same.
    let javacmd = javacmd || (!program_is_java && script.as_ref().is_some_and(StartScript::runs_javacmd));
    if program_is_java || (entry.kind == ProgramKind::Missing && first_is_java) || javacmd {
        let java = if program_is_java {
            entry.program.clone()
        } else if javacmd {
            // Gradle's scripts: `$JAVA_HOME/bin/java`, else `java` from PATH.
            match java_home {
                Some(h) => canonical(tree, &format!("{}/bin/java", h.trim_end_matches('/'))),
                None => in_path(tree, path_var, "java"),
            }
        } else {
            first.as_deref().and_then(|f| {
                if f.starts_with('/') {
                    canonical(tree, f)
                } else {
                    in_path(tree, path_var, f)
                }
            })
        };
        let home = java.as_deref().and_then(home_of_java);
        // After `$JAVACMD` come the script's own words: its options were read from the
        // script; the rest are the application's arguments.
        let args = if javacmd {
            Vec::new()
        } else {
            entry.args.iter().skip(1).cloned().collect()
        };
        let found_by = match (&script, javacmd) {
            (Some(s), _) => format!("the entrypoint runs the start script {}, which runs java", s.path),
            (None, _) => "the entrypoint runs java".to_string(),
        };
        return Some(Located {
            home: home.or_else(|| java_home.map(str::to_string)),
            java,
            runs: true,
            found_by,
            args,
            script,
        });
    }
    // A JDK present in the image: JAVA_HOME, then the usual folders.
    let mut homes: Vec<String> = java_home
        .map(|h| h.trim_end_matches('/').to_string())
        .into_iter()
        .collect();
    homes.extend(jvm_folders(tree));
    homes.push("/opt/java/openjdk".into());
    homes.extend(buildpack_homes(tree));
    for h in homes {
        if tree.is_file_at(&format!("{h}/release")) || tree.is_file_at(&format!("{h}/bin/java")) {
            return Some(Located {
                java: canonical(tree, &format!("{h}/bin/java")),
                found_by: format!("a JDK is installed at {h} (the entrypoint does not run java)"),
                home: Some(h),
                runs: false,
                args: Vec::new(),
                script,
            });
        }
    }
    None
}

/// The JDK a vendor launcher bundles (`<home>/jdk`), when no other was found.
pub(super) fn bundled_jdk(tree: &FileTree, l: &launcher::Launcher) -> Option<Located> {
    let home = format!("{}/jdk", l.home);
    let java = canonical(tree, &format!("{home}/bin/java"))?;
    Some(Located {
        java: Some(java),
        home: Some(home),
        runs: true,
        found_by: format!(
            "the entrypoint runs {}'s launcher {}, which runs its bundled JDK",
            l.vendor.name(),
            l.script
        ),
        args: Vec::new(),
        script: None,
    })
}

/// The JDK folders under /usr/lib/jvm, in name order (the alternatives' links skipped).
pub(super) fn jvm_folders(tree: &FileTree) -> Vec<String> {
    let Ok(Some(id)) = tree.lookup_nofollow("/usr/lib/jvm") else {
        return Vec::new();
    };
    let NodeKind::Dir(children) = &tree.node(id).kind else {
        return Vec::new();
    };
    children
        .keys()
        .filter(|name| !name.starts_with('.'))
        .map(|name| format!("/usr/lib/jvm/{name}"))
        .filter(|p| {
            tree.lookup_nofollow(p)
                .ok()
                .flatten()
                .is_some_and(|id| tree.node(id).is_dir())
        })
        .collect()
}

pub(super) fn canonical(tree: &FileTree, path: &str) -> Option<String> {
    let id = tree.lookup(path).ok()??;
    matches!(tree.node(id).kind, NodeKind::File).then(|| tree.path_of(id))
}

pub(super) fn in_path(tree: &FileTree, path_var: &str, cmd: &str) -> Option<String> {
    path_var
        .split(':')
        .filter(|d| d.starts_with('/'))
        .find_map(|d| canonical(tree, &format!("{}/{cmd}", d.trim_end_matches('/'))))
}

/// `/usr/lib/jvm/x/bin/java` → `/usr/lib/jvm/x`; JDK 8's `…/jre/bin/java` → its JDK folder
/// when that is where the release file is (decided by the caller).
pub(super) fn home_of_java(java: &str) -> Option<String> {
    let bin = parent(java)?;
    (basename(bin) == "bin").then(|| parent(bin).map(str::to_string))?
}

/// The start script the entrypoint runs: a step's script, the program when it is a script, or
/// the script a shell is given (`sh /app/bin/app`, `#!/usr/bin/env sh`).
pub(super) fn start_script(tree: &FileTree, entry: &Entrypoint) -> Option<StartScript> {
    let mut candidates: Vec<String> = entry.steps.iter().filter_map(|s| s.path.clone()).collect();
    if entry.kind == ProgramKind::Script {
        candidates.extend(entry.program.clone());
    }
    let shell = entry
        .program
        .as_deref()
        .is_some_and(|p| matches!(basename(p), "sh" | "bash" | "dash" | "ash" | "busybox"));
    if shell {
        if let Some(s) = entry.args.get(1).filter(|a| !a.starts_with('-')) {
            candidates.push(absolute(&entry.working_dir, s));
        }
    }
    candidates.into_iter().rev().find_map(|path| {
        let id = tree.lookup(&path).ok().flatten()?;
        let content = tree.kept_content(id)?;
        let text = String::from_utf8_lossy(&content.bytes).into_owned();
        StartScript::is_java_start_script(&text).then(|| StartScript {
            path: tree.path_of(id),
            text,
        })
    })
}

/// Version, vendor, libc and JVM kind from the home's `release` file and layout, else
/// `JAVA_VERSION`, else the distribution's package.
pub(super) fn read_home(tree: &FileTree, jenv: &JavaEnv, os: &OsFacts, facts: &mut JavaFacts) {
    let mut release_home = None;
    if let Some(home) = facts.home.clone() {
        // JDK 8 keeps its release file beside `jre/`, whose bin/java runs.
        let mut candidates = vec![home.clone()];
        if basename(&home) == "jre" {
            candidates.extend(parent(&home).map(str::to_string));
        }
        for h in candidates {
            let path = format!("{h}/release");
            if let Some((text, truncated)) = text_of(tree, &path) {
                let r = parse_release(&text);
                if truncated {
                    facts.notes.push(format!(
                        "{path} is longer than {RELEASE_CAP} bytes: read no further"
                    ));
                }
                if let Some(v) = r.get("JAVA_VERSION") {
                    set_version(facts, v, &path);
                }
                facts.vendor = r
                    .get("IMPLEMENTOR")
                    .filter(|v| !v.is_empty() && *v != "N/A")
                    .cloned();
                facts.libc = r.get("LIBC").filter(|v| !v.is_empty()).cloned();
                let variant = r.get("JVM_VARIANT").map(|v| v.to_ascii_lowercase());
                if variant.as_deref().is_some_and(|v| v.contains("openj9")) {
                    facts.jvm = Some(Jvm::OpenJ9);
                } else if variant.as_deref().is_some_and(|v| v.contains("hotspot")) {
                    facts.jvm = Some(Jvm::HotSpot);
                }
                release_home = Some(h);
                break;
            }
        }
        if facts.jvm.is_none() {
            let homes: Vec<&str> = [Some(home.as_str()), release_home.as_deref()]
                .into_iter()
                .flatten()
                .collect();
            facts.jvm = jvm_kind(tree, &homes);
        }
        if let Some(h) = release_home {
            facts.home = Some(h);
        }
    }
    if facts.version.is_none() {
        if let Some(v) = jenv.var("JAVA_VERSION") {
            set_version(facts, v, "JAVA_VERSION");
        }
    }
    if facts.version.is_none() {
        // Debian's openjdk-N-jre-headless and Alpine's openjdkN-jre-headless: the folder's N
        // picks the package when there are several.
        let wanted = facts
            .home
            .as_deref()
            .map(basename)
            .and_then(|b| b.split(|c: char| !c.is_ascii_digit()).find(|p| !p.is_empty()))
            .map(str::to_string);
        let found = os.packages.iter().find(|(name, _)| {
            let n = name.split(':').next().unwrap_or(name);
            let feature = n
                .strip_prefix("openjdk-")
                .or_else(|| n.strip_prefix("openjdk"))
                .and_then(|r| r.split(['-', ':']).next());
            feature.is_some_and(|f| {
                !f.is_empty()
                    && f.bytes().all(|b| b.is_ascii_digit())
                    && wanted.as_deref().is_none_or(|w| w == f)
            })
        });
        if let Some((name, p)) = found {
            set_version(facts, &p.version, &format!("the package {name}"));
            if facts.jvm.is_none() {
                facts.jvm = Some(Jvm::HotSpot);
            }
        }
    }
}

pub(super) fn set_version(facts: &mut JavaFacts, written: &str, source: &str) {
    if let Some(v) = JavaVersion::parse(written) {
        facts.version = Some(v.to_string());
        if written != v.to_string() {
            facts.version_as_written = Some(written.to_string());
        }
        facts.version_source = Some(source.to_string());
    }
}

/// HotSpot keeps `libjvm.so` under `lib/server` (JDK 9+) or `[jre/]lib/<arch>/server` (8);
/// OpenJ9 has `lib/default/libj9vm29.so` or `lib/j9vm`.
pub(super) fn jvm_kind(tree: &FileTree, homes: &[&str]) -> Option<Jvm> {
    for h in homes {
        for j9 in [
            "lib/default/libj9vm29.so",
            "lib/compressedrefs/libj9vm29.so",
            "lib/j9vm/libjvm.so",
            "jre/lib/amd64/default/libj9vm29.so",
        ] {
            if tree.is_file_at(&format!("{h}/{j9}")) {
                return Some(Jvm::OpenJ9);
            }
        }
        if tree.is_file_at(&format!("{h}/lib/server/libjvm.so"))
            || tree.is_file_at(&format!("{h}/lib/client/libjvm.so"))
        {
            return Some(Jvm::HotSpot);
        }
        for lib in [format!("{h}/lib"), format!("{h}/jre/lib")] {
            if !is_dir(tree, &lib) {
                continue;
            }
            let Ok(Some(id)) = tree.lookup(&lib) else { continue };
            if let NodeKind::Dir(children) = &tree.node(id).kind {
                if children
                    .keys()
                    .any(|arch| tree.is_file_at(&format!("{lib}/{arch}/server/libjvm.so")))
                {
                    return Some(Jvm::HotSpot);
                }
            }
        }
    }
    None
}
