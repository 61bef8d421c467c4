use super::k8s::{container_name, dshm_fix, quantity_text};
use super::{Outcome, Rule};
use crate::facts::memory::DEV_SHM_DEFAULT;
use crate::facts::postgres::{DYNAMIC_SHARED_MEMORY_TYPE, MAX_PARALLEL_WORKERS_PER_GATHER};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};
use crate::units::human_bytes;

pub(crate) const RULE: Rule = Rule {
    id: "dev-shm-too-small",
    severity: Severity::Warning,
    title: "A program that needs /dev/shm gets the container runtime's 64 MiB",
    doc: include_str!("../../rules/dev-shm-too-small.md"),
    tags: &["kubernetes", "shared-memory", "postgresql", "pytorch", "chrome"],
    check,
    anchor: Anchor::Container,
};

/// The `/dev/shm` the fix gives: PostgreSQL's parallel hash joins and DataLoader batches pass
/// 64 MiB at once; Selenium's own images run Chrome with 2 GB.
const SIZE: u64 = 1 << 30;
const CHROME_SIZE: u64 = 2 << 30;

/// A program of the image that puts its shared memory in `/dev/shm`.
struct User {
    what: String,
    evidence: Vec<Evidence>,
    size: u64,
}

fn check(f: &Facts) -> Outcome {
    let shm = &f.memory.dev_shm;
    if !shm.is_runtime_default() {
        return Outcome::none();
    }
    let mut users = Vec::new();
    let mut undecided = Vec::new();
    if let Some(pg) = &f.postgres {
        let silenced = pg
            .setting(DYNAMIC_SHARED_MEMORY_TYPE)
            .filter(|s| matches!(s.value.as_str(), "mmap" | "sysv"))
            .or_else(|| {
                pg.setting(MAX_PARALLEL_WORKERS_PER_GATHER)
                    .filter(|s| s.value.trim() == "0")
            });
        match (silenced, &pg.undecided) {
            (Some(_), _) => {}
            (None, Some(why)) => undecided.push(format!("PostgreSQL: {why}")),
            (None, None) => {
                let dsm = pg.setting(DYNAMIC_SHARED_MEMORY_TYPE).map_or_else(
                    || "dynamic_shared_memory_type is posix (the default on Linux)".to_string(),
                    |s| format!("dynamic_shared_memory_type = {} ({})", s.value, s.source),
                );
                let mut evidence = vec![Evidence::naming(
                    format!(
                        "PostgreSQL{} at {}",
                        pg.major.as_deref().map(|m| format!(" {m}")).unwrap_or_default(),
                        pg.binary
                    ),
                    [pg.binary.clone()],
                )];
                evidence.push(match &pg.config {
                    Some(c) => Evidence::naming(format!("{dsm}; {c} sets no max_parallel_workers_per_gather = 0"), [c.clone()]),
                    None => Evidence::plain(format!("{dsm}; no configuration file in the image")),
                });
                users.push(User {
                    what: "PostgreSQL (its parallel queries' dynamic shared memory)".into(),
                    evidence,
                    size: SIZE,
                });
            }
        }
    }
    if let Some(py) = &f.python {
        for name in ["torch", "vllm"] {
            if let Some(p) = py.package(name) {
                users.push(User {
                    what: format!(
                        "{} (DataLoader workers pass batches through /dev/shm)",
                        if name == "torch" { "PyTorch" } else { "vLLM" }
                    ),
                    evidence: vec![Evidence::naming(
                        format!("{} {} at {}", p.name, p.version.as_deref().unwrap_or("(no version)"), p.path),
                        [p.path.clone()],
                    )],
                    size: SIZE,
                });
            }
        }
    }
    if let Some(chrome) = &f.chrome {
        let without: Vec<_> = chrome.launchers.iter().filter(|l| l.passes_switch == Some(false)).collect();
        if !without.is_empty() {
            let mut evidence = vec![Evidence::naming(
                format!("browser: {}", chrome.browsers.join(", ")),
                chrome.browsers.clone(),
            )];
            evidence.extend(without.iter().map(|l| Evidence::naming(l.why.clone(), [l.path.clone()])));
            users.push(User {
                what: "Chrome (its renderers' shared memory, without --disable-dev-shm-usage)".into(),
                evidence,
                size: CHROME_SIZE,
            });
        } else if chrome.launchers.is_empty() {
            undecided.push(format!(
                "{} is in the image, but nothing memlint knows starts it",
                chrome.browsers.join(", ")
            ));
        } else if let Some(l) = chrome.launchers.iter().find(|l| l.passes_switch.is_none()) {
            undecided.push(l.why.clone());
        }
    }
    if users.is_empty() {
        return match undecided.is_empty() {
            true => Outcome::none(),
            false => Outcome::undecided(undecided.join("; ")),
        };
    }
    let size = users.iter().map(|u| u.size).max().unwrap_or(SIZE);
    let what = users.iter().map(|u| u.what.as_str()).collect::<Vec<_>>().join(", ");
    let evidence: Vec<Evidence> = users.into_iter().flat_map(|u| u.evidence).collect();
    let default = human_bytes(DEV_SHM_DEFAULT);
    let finding = match &f.container {
        Some(c) => RULE
            .finding(format!(
                "{what} needs /dev/shm, and {} mounts nothing there: the container runtime gives {default}, and past it the program fails with \"No space left on device\" or a bus error",
                container_name(c)
            ))
            .evidence_all(evidence)
            .evidence(Evidence::plain(format!(
                "/dev/shm: {} ({default}); no volume is mounted at /dev/shm and the pod has no hostIPC",
                shm.source
            )))
            .fix(format!(
                "# mount a memory-backed emptyDir at /dev/shm, and raise the memory limit by its size\n{}",
                dshm_fix(Some(c), size)
            )),
        None => RULE
            .finding(format!(
                "{what} needs /dev/shm, which Docker, containerd and CRI-O make {default} unless the pod or `docker run` sizes it"
            ))
            .severity(Severity::Note)
            .evidence_all(evidence)
            .fix(format!(
                "docker run --shm-size={} …\n# Kubernetes: a memory-backed emptyDir at /dev/shm, and the memory limit raised by its size\n{}",
                quantity_text(size).replace("Gi", "g").replace("Mi", "m"),
                dshm_fix(None, size)
            )),
    };
    Outcome::one(finding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::TestImage;

    fn postgres() -> TestImage {
        TestImage::new()
            .glibc()
            .program("/usr/lib/postgresql/15/bin/postgres")
            .file(
                "/etc/postgresql/15/main/postgresql.conf",
                "data_directory = '/var/lib/postgresql/15/main'\n",
            )
            .cmd(&["/usr/lib/postgresql/15/bin/postgres", "-D", "/var/lib/postgresql/15/main"])
    }

    const LIMIT: &str = "    resources:\n      limits: {memory: 2Gi}\n";

    #[test]
    fn postgres_without_a_dev_shm_volume() {
        let o = check(&postgres().facts_in(LIMIT));
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.message.contains("Pod/p container `c`"), "{}", f.message);
        assert!(f.fix.contains("sizeLimit: 1Gi") && f.fix.contains("memory: 3Gi"), "{}", f.fix);
        // Alone: a note, with docker's switch.
        let o = check(&postgres().facts());
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Note);
        assert!(f.fix.starts_with("docker run --shm-size=1g"), "{}", f.fix);
    }

    #[test]
    fn silent_with_a_volume_host_ipc_or_the_settings_that_avoid_it() {
        let dshm = format!(
            "{LIMIT}    volumeMounts:\n    - {{name: dshm, mountPath: /dev/shm}}\n  volumes:\n  - name: dshm\n    emptyDir: {{medium: Memory, sizeLimit: 1Gi}}\n"
        );
        let o = check(&postgres().facts_in(&dshm));
        assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        let o = check(&postgres().facts_in(&format!("{LIMIT}  hostIPC: true\n")));
        assert!(o.findings.is_empty(), "{o:?}");
        for setting in ["dynamic_shared_memory_type=mmap", "dynamic_shared_memory_type=sysv", "max_parallel_workers_per_gather=0"] {
            let o = check(&postgres().facts_in(&format!("{LIMIT}    args: [\"-c\", \"{setting}\"]\n")));
            assert!(o.findings.is_empty() && o.undecided.is_none(), "{setting}: {o:?}");
        }
        // posix said out loud still fires.
        let o = check(&postgres().facts_in(&format!("{LIMIT}    args: [\"-c\", \"dynamic_shared_memory_type=posix\"]\n")));
        assert_eq!(o.findings.len(), 1);
    }

    #[test]
    fn torch_fires_whatever_nccl_says() {
        let torch = TestImage::new()
            .glibc()
            .file(
                "/usr/local/lib/python3.11/site-packages/torch-2.5.1.dist-info/METADATA",
                "Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1\n",
            )
            .env(&["NCCL_SHM_DISABLE=1"]);
        let o = check(&torch.facts_in(LIMIT));
        let f = o.sole_finding();
        assert!(f.message.starts_with("PyTorch"), "{}", f.message);
    }
}
