use super::{fixes, Outcome, Rule};
use crate::facts::go::GoBinary;
use crate::facts::libc::LibcFamily;
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};
use crate::facts::allocator::ARENA_CAP_VARIABLES;

pub(crate) const RULE: Rule = Rule {
    id: "go-cgo-glibc-allocator",
    severity: Severity::Note,
    title: "A Go program links allocation-heavy C code through cgo on glibc malloc",
    doc: include_str!("../../rules/go-cgo-glibc-allocator.md"),
    tags: &["memory", "allocator", "glibc", "go", "cgo"],
    check,
    // The arena cap is the fix; with none set, the final FROM.
    anchor: Anchor::Env(ARENA_CAP_VARIABLES),
};

/// Go modules that wrap C libraries which allocate heavily with malloc from the threads that
/// call them; a module matches itself and the paths below it (`/v2`).
const HEAVY_MODULES: &[(&str, &str)] = &[
    ("github.com/davidbyttow/govips", "libvips"),
    ("github.com/h2non/bimg", "libvips"),
    ("github.com/imgproxy/imgproxy", "libvips"),
    ("github.com/mattn/go-sqlite3", "SQLite"),
    ("github.com/confluentinc/confluent-kafka-go", "librdkafka"),
    ("github.com/linxGnu/grocksdb", "RocksDB"),
    ("github.com/tecbot/gorocksdb", "RocksDB"),
];

/// The same C libraries linked as shared objects (prefixes of DT_NEEDED names).
const HEAVY_LIBRARIES: &[(&str, &str)] = &[
    ("libvips.so", "libvips"),
    ("libsqlite3.so", "SQLite"),
    ("librdkafka.so", "librdkafka"),
    ("librocksdb.so", "RocksDB"),
];

/// What the allocator facts say that settles it, read in one place: a replacement allocator in
/// effect for the entrypoint, or glibc's arena cap.
fn allocator_settles(f: &Facts) -> bool {
    f.allocator.is_replacement() || f.allocator.arena_cap.is_some()
}

/// The allocation-heavy C code a program links, with what says so.
fn heavy_code(b: &GoBinary) -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> = Vec::new();
    for m in b.modules() {
        if let Some((_, lib)) = HEAVY_MODULES
            .iter()
            .find(|(p, _)| m == *p || m.strip_prefix(p).is_some_and(|r| r.starts_with('/')))
        {
            out.push((format!("module {m}"), lib));
        }
    }
    for n in &b.needed {
        if let Some((_, lib)) = HEAVY_LIBRARIES.iter().find(|(p, _)| n.starts_with(p)) {
            out.push((format!("DT_NEEDED {n}"), lib));
        }
    }
    out
}

fn check(f: &Facts) -> Outcome {
    let candidates: Vec<(&GoBinary, Vec<(String, &'static str)>)> = f
        .go
        .binaries
        .iter()
        .filter(|b| b.cgo == Some(true))
        .map(|b| (b, heavy_code(b)))
        .filter(|(_, h)| !h.is_empty())
        .collect();
    if candidates.is_empty() {
        return Outcome::none();
    }
    let (run, elsewhere): (Vec<_>, Vec<_>) = candidates.into_iter().partition(|(b, _)| b.on_entrypoint);
    if run.is_empty() {
        let (b, h) = &elsewhere[0];
        return Outcome::undecided(format!(
            "{} (cgo, {}) is in a PATH folder but not on the entrypoint's path: memlint cannot tell whether it runs",
            b.path, h[0].0
        ));
    }
    match f.libc.family {
        LibcFamily::Glibc => {}
        LibcFamily::Unknown => {
            return Outcome::undecided("a cgo program links allocation-heavy C code, but the entrypoint's C library is unknown")
        }
        other => {
            return Outcome::undecided(format!(
                "the cgo program runs on {other}, which has no per-thread arenas"
            ))
        }
    }
    if allocator_settles(f) {
        return Outcome::none();
    }
    // A preload or arena cap a script sets in a way memlint cannot work out may settle it.
    if let Some(why) = f.allocator.undecided_reason() {
        return Outcome::undecided(why);
    }
    let fix = format!(
        "ENV MALLOC_ARENA_MAX=2\n# or jemalloc:\n# {}",
        fixes::jemalloc_fix(f).replace('\n', "\n# ")
    );
    run.iter()
        .map(|(b, heavy)| {
            let libs: Vec<&str> = heavy.iter().fold(Vec::new(), |mut v, (_, l)| {
                if !v.contains(l) {
                    v.push(*l);
                }
                v
            });
            let mut evidence = vec![Evidence::naming(
                format!(
                    "{} built by {} with CGO_ENABLED=1",
                    b.path,
                    b.go_version.as_deref().unwrap_or("Go (version unknown)")
                ),
                [&b.path],
            )];
            evidence.extend(heavy.iter().map(|(why, lib)| Evidence::plain(format!("{why} ({lib})"))));
            evidence.push(Evidence::plain(format!(
                "glibc {} with no MALLOC_ARENA_MAX or GLIBC_TUNABLES arena cap",
                f.libc.version.as_deref().unwrap_or("")
            )));
            evidence.extend(f.allocator.evidence.iter().cloned());
            RULE.finding(format!(
                "{} calls {} through cgo on glibc malloc with no arena cap: C memory may climb and not come down",
                b.path,
                libs.join(", ")
            ))
            .evidence_all(evidence)
            .fix(fix.clone())
        })
        .collect::<Vec<_>>()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::go::GoModule;

    fn binary(deps: &[&str], needed: &[&str]) -> GoBinary {
        GoBinary {
            path: "/app/server".into(),
            go_version: Some("go1.22.1".into()),
            cgo: Some(true),
            main_module: Some("example.com/app".into()),
            deps: deps
                .iter()
                .map(|d| GoModule {
                    path: d.to_string(),
                    version: "v1.0.0".into(),
                    replace: None,
                })
                .collect(),
            deps_complete: true,
            needed: needed.iter().map(|s| s.to_string()).collect(),
            on_entrypoint: true,
        }
    }

    #[test]
    fn known_modules_and_libraries() {
        let libs = |b: &GoBinary| heavy_code(b).into_iter().map(|(_, l)| l).collect::<Vec<_>>();
        assert_eq!(libs(&binary(&["github.com/davidbyttow/govips/v2"], &[])), ["libvips"]);
        assert_eq!(libs(&binary(&["github.com/mattn/go-sqlite3"], &[])), ["SQLite"]);
        assert_eq!(
            libs(&binary(&["github.com/confluentinc/confluent-kafka-go/v2"], &[])),
            ["librdkafka"]
        );
        assert_eq!(libs(&binary(&[], &["libvips.so.42", "libc.so.6"])), ["libvips"]);
        // A module whose path only starts like a known one is another module.
        assert!(libs(&binary(&["github.com/mattn/go-sqlite3x"], &[])).is_empty());
        assert!(libs(&binary(&["modernc.org/sqlite"], &["libc.so.6"])).is_empty());
    }

    use crate::facts::go::GoBuildInfo;
    use crate::facts::testing::{executable, TestImage, GLIBC_LOADER, MUSL_LOADER};

    /// A program built by Go 1.22 with cgo (or not) from module example.com/thumbs,
    /// which uses govips (libvips), on the loader `interp`.
    fn thumbs(interp: &str, cgo: bool) -> crate::elf::ElfInfo {
        let mut e = executable(interp, &["libvips.so.42", "libc.so.6"]);
        let build = GoBuildInfo {
            go_version: Some("go1.22.1".into()),
            main_path: Some("example.com/thumbs".into()),
            main_module: Some(GoModule {
                path: "example.com/thumbs".into(),
                version: "(devel)".into(),
                replace: None,
            }),
            cgo: Some(cgo),
            deps: vec![GoModule {
                path: "github.com/davidbyttow/govips/v2".into(),
                version: "v2.15.0".into(),
                replace: None,
            }],
            complete: true,
        };
        crate::facts::testing::set_build_info(&mut e, &build);
        e
    }

    /// Debian 12 running /app/thumbs.
    fn debian(cgo: bool) -> TestImage {
        TestImage::new()
            .glibc()
            .elf("/app/thumbs", thumbs(GLIBC_LOADER, cgo))
            .cmd(&["/app/thumbs"])
    }

    #[test]
    fn fires_for_cgo_libvips_on_glibc_malloc() {
        let o = check(&debian(true).facts());
        let f = o.sole_finding();
        assert_eq!(f.severity, Severity::Note);
        assert_eq!(
            f.message,
            "/app/thumbs calls libvips through cgo on glibc malloc with no arena cap: C memory may climb and not come down"
        );
        assert!(f.has_evidence("/app/thumbs built by go1.22.1 with CGO_ENABLED=1"));
        assert!(f.has_evidence("module github.com/davidbyttow/govips/v2 (libvips)"));
        assert!(f.fix.starts_with("ENV MALLOC_ARENA_MAX=2\n"), "{}", f.fix);
    }

    #[test]
    fn silent_with_a_cap_jemalloc_or_no_cgo() {
        for fixed in [
            debian(true).env(&["MALLOC_ARENA_MAX=2"]),
            debian(true)
                .jemalloc()
                .env(&["LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"]),
            debian(false),
        ] {
            let o = check(&fixed.facts());
            assert!(o.findings.is_empty() && o.undecided.is_none(), "{o:?}");
        }
    }

    #[test]
    fn undecided_off_the_entrypoint_or_on_musl() {
        // In a PATH folder, while the entrypoint runs something else.
        let f = TestImage::new()
            .glibc()
            .elf("/usr/local/bin/thumbs", thumbs(GLIBC_LOADER, true))
            .program("/usr/local/bin/server")
            .cmd(&["server"])
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert_eq!(
            o.undecided.as_deref(),
            Some("/usr/local/bin/thumbs (cgo, module github.com/davidbyttow/govips/v2) is in a PATH folder but not on the entrypoint's path: memlint cannot tell whether it runs")
        );
        let f = TestImage::new()
            .musl()
            .elf("/app/thumbs", thumbs(MUSL_LOADER, true))
            .cmd(&["/app/thumbs"])
            .facts();
        let o = check(&f);
        assert!(o.findings.is_empty(), "{o:?}");
        assert_eq!(
            o.undecided.as_deref(),
            Some("the cgo program runs on musl, which has no per-thread arenas")
        );
    }
}
