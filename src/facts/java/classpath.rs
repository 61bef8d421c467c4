//! Libraries on the JVM's class path that allocate direct memory of their own: Netty (and gRPC's
//! and reactor-netty's transports, built on it) pools direct buffers up to the JVM's
//! direct-memory cap, which defaults to the heap cap. Found by jar name, in the folders the
//! class path names (`-cp`/`-classpath`/`--class-path`, `CLASSPATH`, the folder of `-jar`
//! and its `lib`/`libs`), a vendor launcher's `lib`, `libs` and `modules/*`, and Debian's
//! `/usr/share/java`. A fat jar's nested jars are not opened.

use crate::facts::command::absolute;
use crate::tree::{FileTree, NodeKind};

/// At most this many folders are listed.
const MAX_FOLDERS: usize = 64;
/// At most this many names are looked at, all folders together.
const MAX_NAMES: usize = 100_000;
/// At most this many jars are reported.
const MAX_JARS: usize = 16;

/// Folders every JVM's class path may take jars from in the usual layouts.
const USUAL: &[&str] = &[
    "/usr/share/java",
    "/app",
    "/app/lib",
    "/app/libs",
    "/deployments/lib",
];

/// Whether a jar's name is Netty's, gRPC's Netty transport or reactor-netty's.
pub(crate) fn is_direct_memory_library(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.ends_with(".jar")
        && (n.starts_with("netty-")
            || n.starts_with("netty_")
            || n.starts_with("grpc-netty")
            || n.starts_with("reactor-netty"))
}

fn parent(p: &str) -> &str {
    match p.rsplit_once('/') {
        Some(("", _)) => "/",
        Some((d, _)) => d,
        None => "/",
    }
}

/// The folders and jars the java command's words (after `java`) and `CLASSPATH` name.
fn named(args: &[String], class_path_var: Option<&str>, working_dir: &str) -> (Vec<String>, Vec<String>) {
    let mut folders = Vec::new();
    let mut jars = Vec::new();
    let mut entries: Vec<String> = class_path_var
        .map(|v| v.split(':').map(str::to_string).collect())
        .unwrap_or_default();
    let mut i = 0;
    while i < args.len() {
        let w = args[i].as_str();
        if matches!(w, "-cp" | "-classpath" | "--class-path") {
            if let Some(v) = args.get(i + 1) {
                entries = v.split(':').map(str::to_string).collect();
            }
            i += 2;
            continue;
        }
        if w == "-jar" {
            if let Some(jar) = args.get(i + 1) {
                let jar = absolute(working_dir, jar);
                let dir = parent(&jar).to_string();
                folders.push(format!("{}/lib", dir.trim_end_matches('/')));
                folders.push(format!("{}/libs", dir.trim_end_matches('/')));
                folders.push(dir);
                jars.push(jar);
            }
            break;
        }
        if !w.starts_with('-') {
            break;
        }
        i += 1;
    }
    for e in entries.into_iter().filter(|e| !e.is_empty()) {
        let e = absolute(working_dir, &e);
        match e.strip_suffix("/*") {
            Some(dir) => folders.push(dir.to_string()),
            None if e.ends_with(".jar") => jars.push(e),
            None => folders.push(e),
        }
    }
    (folders, jars)
}

/// The Netty, gRPC-Netty and reactor-netty jars on the class path, by path.
pub(crate) fn direct_memory_jars(
    tree: &FileTree,
    args: &[String],
    class_path_var: Option<&str>,
    working_dir: &str,
    launcher_home: Option<&str>,
) -> Vec<String> {
    let (mut folders, jars) = named(args, class_path_var, working_dir);
    folders.extend(USUAL.iter().map(|s| s.to_string()));
    if let Some(home) = launcher_home {
        folders.push(format!("{home}/lib"));
        folders.push(format!("{home}/libs"));
        // Elasticsearch's and OpenSearch's modules (transport-netty4) each have a folder.
        folders.extend(subfolders(tree, &format!("{home}/modules")));
    }
    let mut found: Vec<String> = jars
        .into_iter()
        .filter(|j| is_direct_memory_library(j.rsplit('/').next().unwrap_or(j)))
        .filter(|j| tree.lookup(j).ok().flatten().is_some())
        .collect();
    let mut budget = MAX_NAMES;
    let mut seen: Vec<String> = Vec::new();
    for folder in folders.into_iter().take(MAX_FOLDERS) {
        if seen.contains(&folder) {
            continue;
        }
        seen.push(folder.clone());
        let Ok(Some(id)) = tree.lookup(&folder) else {
            continue;
        };
        let NodeKind::Dir(children) = &tree.node(id).kind else {
            continue;
        };
        for name in children.keys() {
            if budget == 0 || found.len() >= MAX_JARS {
                return found;
            }
            budget -= 1;
            if is_direct_memory_library(name) {
                let path = format!("{}/{name}", folder.trim_end_matches('/'));
                if !found.contains(&path) {
                    found.push(path);
                }
            }
        }
    }
    found
}

fn subfolders(tree: &FileTree, dir: &str) -> Vec<String> {
    let Ok(Some(id)) = tree.lookup(dir) else {
        return Vec::new();
    };
    let NodeKind::Dir(children) = &tree.node(id).kind else {
        return Vec::new();
    };
    children
        .keys()
        .take(MAX_FOLDERS)
        .map(|name| format!("{dir}/{name}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netty_grpc_and_reactor_jars_by_name() {
        for yes in [
            "netty-buffer.jar",
            "netty-all-4.1.48.Final.jar",
            "grpc-netty-shaded-1.62.2.jar",
            "reactor-netty-core-1.1.17.jar",
        ] {
            assert!(is_direct_memory_library(yes), "{yes}");
        }
        for no in ["nettyish.txt", "commons-io.jar", "grpc-api-1.62.2.jar"] {
            assert!(!is_direct_memory_library(no), "{no}");
        }
    }

    #[test]
    fn class_path_words() {
        let args: Vec<String> = [
            "-Xmx512m",
            "-cp",
            "/usr/share/java/*:lib/app.jar:/srv/classes",
            "Main",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (folders, jars) = named(&args, None, "/app");
        assert_eq!(folders, ["/usr/share/java", "/srv/classes"]);
        assert_eq!(jars, ["/app/lib/app.jar"]);
        let args: Vec<String> = ["-jar", "svc.jar"].iter().map(|s| s.to_string()).collect();
        let (folders, jars) = named(&args, None, "/srv");
        assert_eq!(folders, ["/srv/lib", "/srv/libs", "/srv"]);
        assert_eq!(jars, ["/srv/svc.jar"]);
    }
}
