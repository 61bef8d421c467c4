use super::{fixes, Outcome, Rule};
use crate::facts::libc::LibcFamily;
use crate::facts::python::{normalize, Concurrency};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};
use crate::facts::allocator::ARENA_CAP_VARIABLES;
use crate::facts::python::GUNICORN_VARIABLES;

pub(crate) const RULE: Rule = Rule {
    id: "python-glibc-allocator",
    severity: Severity::Note,
    title: "CPython runs native-heavy packages from many threads or workers on glibc malloc",
    doc: include_str!("../../rules/python-glibc-allocator.md"),
    tags: &["memory", "allocator", "glibc", "python"],
    check,
    // The arena cap is the fix; with none set, the final FROM.
    anchor: Anchor::Env(ARENA_CAP_VARIABLES),
};

/// Distributions whose native code allocates its buffers with malloc, from the threads that
/// call it (PEP 503 names). Polars and PyArrow are not here: they bring their own allocator
/// (jemalloc or mimalloc) for their buffers.
const NATIVE_HEAVY: &[&str] = &[
    "numpy",
    "scipy",
    "pillow",
    "pillow-simd",
    "opencv-python",
    "opencv-python-headless",
    "opencv-contrib-python",
    "opencv-contrib-python-headless",
    "torch",
    "tensorflow",
    "tensorflow-cpu",
    "onnxruntime",
    "pyvips",
];

/// Distributions that bring their own allocator for their buffers.
const OWN_ALLOCATOR: &[&str] = &["polars", "pyarrow"];

/// What the allocator facts say that settles it, read in one place: a replacement allocator in
/// effect for the entrypoint, or glibc's arena cap.
fn allocator_settles(f: &Facts) -> bool {
    f.allocator.is_replacement() || f.allocator.arena_cap.is_some()
}

fn check(f: &Facts) -> Outcome {
    let Some(py) = &f.python else {
        return Outcome::none();
    };
    let native: Vec<_> = py
        .packages
        .iter()
        .filter(|p| NATIVE_HEAVY.contains(&normalize(&p.name).as_str()))
        .collect();
    if native.is_empty() {
        let own: Vec<&str> = py
            .packages
            .iter()
            .filter(|p| OWN_ALLOCATOR.contains(&normalize(&p.name).as_str()))
            .map(|p| p.name.as_str())
            .collect();
        if !own.is_empty() {
            return Outcome::undecided(format!(
                "CPython with {}, which allocate their buffers with their own allocator, and no other native-heavy package",
                own.join(", ")
            ));
        }
        return Outcome::none();
    }
    match f.libc.family {
        LibcFamily::Glibc => {}
        LibcFamily::Unknown => {
            return Outcome::undecided("CPython with native-heavy packages, but the entrypoint's C library is unknown")
        }
        other => {
            return Outcome::undecided(format!(
                "CPython runs on {other}, which has no per-thread arenas"
            ))
        }
    }
    let busy: Vec<_> = py
        .servers
        .iter()
        .filter(|s| matches!(s.concurrency, Concurrency::Threads | Concurrency::Processes))
        .collect();
    if busy.is_empty() {
        // gunicorn reads its workers and threads from these too: a script that sets one in a
        // way memlint cannot work out may run several.
        if let Some(var) = py
            .servers
            .iter()
            .any(|s| s.name == "gunicorn")
            .then(|| GUNICORN_VARIABLES.iter().find_map(|k| f.env.undecided(k)))
            .flatten()
        {
            return Outcome::undecided(format!(
                "gunicorn may run several workers or threads: {}",
                f.env.entry(&var.name).unwrap_or_default()
            ));
        }
        return match py.servers.iter().find(|s| s.concurrency == Concurrency::Unknown) {
            Some(s) => Outcome::undecided(format!(
                "{} may run several workers or threads: {}",
                s.name, s.evidence
            )),
            None => Outcome::none(),
        };
    }
    if allocator_settles(f) {
        return Outcome::none();
    }
    // A preload or arena cap a script sets in a way memlint cannot work out may settle it.
    if let Some(why) = f.allocator.undecided_reason() {
        return Outcome::undecided(why);
    }
    let mut evidence: Vec<Evidence> = native
        .iter()
        .take(6)
        .map(|p| {
            Evidence::naming(
                format!(
                    "{} {} at {}",
                    p.name,
                    p.version.as_deref().unwrap_or("(version unknown)"),
                    p.path
                ),
                [&p.path],
            )
        })
        .collect();
    evidence.extend(busy.iter().map(|s| Evidence::plain(format!("{}: {}", s.name, s.evidence))));
    // A server setting an entrypoint script exports: the script and line that decided.
    evidence.extend(
        GUNICORN_VARIABLES
            .iter()
            .filter(|k| f.env.set_by_script(k))
            .filter_map(|k| f.env.evidence(k)),
    );
    evidence.push(Evidence::plain(format!(
        "CPython {} on glibc {} with no MALLOC_ARENA_MAX or GLIBC_TUNABLES arena cap",
        py.version.as_deref().unwrap_or("(version unknown)"),
        f.libc.version.as_deref().unwrap_or("")
    )));
    if let Some(m) = &py.pythonmalloc {
        evidence.push(Evidence::plain(pythonmalloc_note(m)));
    }
    evidence.extend(f.allocator.evidence.iter().cloned());
    let names: Vec<&str> = native.iter().take(3).map(|p| p.name.as_str()).collect();
    let server = busy[0];
    let how = match server.concurrency {
        Concurrency::Threads => "threads",
        _ => "worker processes",
    };
    let mut fix = format!(
        "ENV MALLOC_ARENA_MAX=2\n# or jemalloc:\n# {}",
        fixes::jemalloc_fix(f).replace('\n', "\n# ")
    );
    if busy.iter().any(|s| s.name == "dask") {
        fix.push_str("\n# dask's nanny already sets MALLOC_TRIM_THRESHOLD_=65536 for the workers it starts");
    }
    Outcome::one(
        RULE.finding(format!(
            "{} run from {} {how} on glibc malloc with no arena cap: native memory may climb and not come down",
            names.join(", "),
            server.name
        ))
        .evidence_all(evidence)
        .fix(fix),
    )
}

fn pythonmalloc_note(value: &str) -> String {
    match value {
        "malloc" | "malloc_debug" => format!(
            "PYTHONMALLOC={value}: Python's small objects also go to glibc malloc"
        ),
        other => format!(
            "PYTHONMALLOC={other}: it chooses the allocator of Python objects; the buffers of native packages still come from malloc"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::{ElfClass, ElfType};
    use crate::facts::loader::tests::elf;
    use crate::image::Image;
    use crate::platform::Platform;
    use crate::tree::{EntryKind, FileTree, LayerEntry};

    /// Facts of an image with CPython on glibc, the given distributions, `env` and command.
    fn facts_of(dists: &[(&str, &str)], env: &[&str], cmd: &[&str]) -> Facts {
        facts_on("/lib64/ld-linux-x86-64.so.2", dists, env, cmd)
    }

    /// [`facts_of`] with the interpreter (glibc's or musl's loader) the program names.
    fn facts_on(interp: &str, dists: &[(&str, &str)], env: &[&str], cmd: &[&str]) -> Facts {
        facts_with(interp, dists, env, cmd, Vec::new())
    }

    /// [`facts_on`] with more files in the image.
    fn facts_with(
        interp: &str,
        dists: &[(&str, &str)],
        env: &[&str],
        cmd: &[&str],
        extra: Vec<LayerEntry>,
    ) -> Facts {
        let mut python = elf(62, ElfClass::Elf64, Some(interp), &["libc.so.6"], &[], &[]);
        python.head.elf_type = ElfType::Executable;
        let mut libc = elf(62, ElfClass::Elf64, None, &[], &[], &[]);
        libc.scan.markers.set(&crate::facts::libc::GLIBC_RELEASE, crate::elf::marker::Found::Text("2.36".into()));
        let binary = |path: &str, info| LayerEntry {
            size: 4096,
            mode: 0o755,
            elf: Some(Box::new(info)),
            ..LayerEntry::new(path, EntryKind::File)
        };
        let mut entries = vec![
            binary("usr/bin/python3.11", python),
            binary(interp, elf(62, ElfClass::Elf64, None, &[], &[], &[])),
            binary("lib/x86_64-linux-gnu/libc.so.6", libc),
        ];
        entries.extend(extra);
        for (name, version) in dists {
            entries.push(
                LayerEntry::new(
                    &format!("usr/local/lib/python3.11/site-packages/{name}-{version}.dist-info/METADATA"),
                    EntryKind::File,
                )
                .with_text(&format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")),
            );
        }
        let config = serde_json::json!({
            "architecture": "amd64", "os": "linux",
            "config": {"Env": env, "Cmd": cmd},
            "rootfs": {"type": "layers", "diff_ids": []}
        });
        let config: oci_spec::image::ImageConfiguration = serde_json::from_value(config).unwrap();
        let interests = crate::facts::interests().union(crate::facts::interests_for(&config));
        let tree = FileTree::from_entries(entries).unwrap().keeping(interests);
        crate::facts::derive(&Image::unlayered("t", "t", Platform::linux_amd64(), Some(config), tree))
    }

    const UVICORN: &[&str] = &["python3.11", "-m", "uvicorn", "app:app"];
    const PATH: &str = "PATH=/usr/local/bin:/usr/bin";

    #[test]
    fn fires_for_native_packages_under_a_threaded_server_only() {
        let f = facts_of(&[("numpy", "1.26.4"), ("polars", "1.0.0")], &[PATH], UVICORN);
        assert_eq!(f.libc.family, LibcFamily::Glibc);
        let o = check(&f);
        assert_eq!(o.findings.len(), 1, "{o:?}");
        assert!(o.findings[0].message.starts_with("numpy run from uvicorn threads"));
        // Polars and PyArrow alone bring their own allocator.
        let f = facts_of(&[("polars", "1.0.0"), ("pyarrow", "17.0.0")], &[PATH], UVICORN);
        let o = check(&f);
        assert!(o.findings.is_empty());
        assert!(o.undecided.unwrap().contains("polars, pyarrow"));
        // An arena cap (here through GLIBC_TUNABLES) settles it.
        let f = facts_of(&[("numpy", "1.26.4")], &[PATH, "GLIBC_TUNABLES=glibc.malloc.arena_max=2"], UVICORN);
        assert!(check(&f).findings.is_empty());
        // One sync gunicorn worker runs native code from one thread.
        let f = facts_of(&[("Pillow", "10.4.0")], &[PATH], &["python3.11", "-m", "gunicorn", "app:app"]);
        assert!(check(&f).findings.is_empty());
        let f = facts_of(&[("Pillow", "10.4.0")], &[PATH, "WEB_CONCURRENCY=4"], &["python3.11", "-m", "gunicorn", "app:app"]);
        assert_eq!(check(&f).findings.len(), 1);
        // musl has no per-thread arenas: never a finding.
        let f = facts_on("/lib/ld-musl-x86_64.so.1", &[("numpy", "1.26.4")], &[PATH], UVICORN);
        assert_eq!(f.libc.family, LibcFamily::Musl);
        let o = check(&f);
        assert!(o.findings.is_empty());
        assert!(o.undecided.unwrap().contains("musl"));
        // PYTHONMALLOC does not change the buffers' allocator; it is named.
        let f = facts_of(&[("numpy", "1.26.4")], &[PATH, "PYTHONMALLOC=malloc"], UVICORN);
        let o = check(&f);
        assert!(o.findings[0]
            .evidence
            .iter()
            .any(|e| e.text().contains("PYTHONMALLOC=malloc")));
    }

    /// An entrypoint script `/entry.sh` with these lines, then `exec` of the server.
    fn script(lines: &str, exec: &str) -> LayerEntry {
        LayerEntry {
            mode: 0o755,
            ..LayerEntry::new("entry.sh", EntryKind::File)
                .with_text(&format!("#!/bin/sh\nset -e\n{lines}\nexec {exec}\n"))
        }
    }

    #[test]
    fn script_settings_decide_or_leave_it_undecided() {
        let dists = &[("numpy", "1.26.4")];
        let glibc = "/lib64/ld-linux-x86-64.so.2";
        let run = |lines: &str, exec: &str| {
            let f = facts_with(glibc, dists, &[PATH], &["/entry.sh"], vec![script(lines, exec)]);
            (check(&f), f)
        };
        // An arena cap the script exports settles it.
        let (o, _) = run("export MALLOC_ARENA_MAX=2", "python3.11 -m uvicorn app:app");
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        // One it computes may: undecided, and -v says which line.
        let (o, f) = run("export MALLOC_ARENA_MAX=$(nproc)", "python3.11 -m uvicorn app:app");
        assert!(!f.allocator.undecided.is_empty(), "{:?}", f.allocator);
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().contains("/entry.sh line 3"));
        // So may a preload it reads at run time (a `find` memlint evaluates against the image
        // instead: here it finds nothing, so nothing is preloaded).
        let (o, _) = run("export LD_PRELOAD=$(cat /etc/preload)", "python3.11 -m uvicorn app:app");
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().contains("possibly in effect"));
        // gunicorn's workers from a script: a known count fires and names the line …
        let (o, _) = run("export WEB_CONCURRENCY=4", "python3.11 -m gunicorn app:app");
        assert_eq!(o.findings.len(), 1, "{o:?}");
        assert!(o.findings[0]
            .evidence
            .iter()
            .any(|e| e.text().contains("WEB_CONCURRENCY=4 (exported by /entry.sh line 3)")));
        // … one it cannot work out leaves it undecided.
        let (o, _) = run("export WEB_CONCURRENCY=$(nproc)", "python3.11 -m gunicorn app:app");
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.unwrap().contains("WEB_CONCURRENCY"));
    }

    #[test]
    fn lists_are_normalised_names() {
        for n in NATIVE_HEAVY.iter().chain(OWN_ALLOCATOR) {
            assert_eq!(normalize(n), *n);
        }
    }
}
