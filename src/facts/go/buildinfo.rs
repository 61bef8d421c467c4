//! Go build info (what `go version -m` prints): the blob the ELF scanner holds for
//! [`super::GO_BUILDINFO`] while an ELF file streams by, decoded when the facts read it.
//!
//! The format is Go's own (`src/debug/buildinfo/buildinfo.go`, `src/runtime/debug/mod.go`,
//! `cmd/go/internal/modload/build.go` of Go 1.19, read from Debian's golang-1.19-src): a blob
//! aligned to 16 bytes in the program's writable data (the `.go.buildinfo` section, which the
//! linker puts in the data segment) starts with the 14-byte magic `\xff Go buildinf:`, then a
//! pointer size byte and a flags byte, padded to a 32-byte header. When flag bit 2 is set
//! (Go ≥ 1.18) the header is followed by two varint-length-prefixed strings: the Go version
//! (`go1.19.8`) and the module info, framed by two 16-byte sentinels, whose lines are
//! `path\t…`, `mod\tPATH\tVERSION\tSUM`, `dep\tPATH\tVERSION\tSUM`, `=>\tPATH\tVERSION\tSUM`
//! (the replacement of the line above) and `build\tKEY=VALUE` (`CGO_ENABLED=1`). Before 1.18
//! the header held two pointers to Go strings elsewhere in the file instead; memlint then
//! knows the file is a Go program but not its version or modules.
//!
//! Only the bytes of writable, non-executable PT_LOAD segments are searched (as Go's reader
//! does, so that the magic quoted in the code of a program that reads build info is not
//! taken for it), a magic counts only at a 16-byte aligned file offset (the segment's file
//! offset and address agree modulo the page size), and at most [`CAPTURE_CAP`] bytes after
//! it are held while the file streams (the marker's declaration, [`super::GO_BUILDINFO`]).

use serde::Serialize;

pub(crate) const MAGIC: &[u8; 14] = b"\xff Go buildinf:";
pub(super) const ALIGN: u64 = 16;
pub(super) const HEADER: usize = 32;
/// Bytes held from the magic on while a file streams: the header and both strings of all but
/// the largest programs (the module info of a program with 500 modules is about 50 KiB).
pub(super) const CAPTURE_CAP: usize = 128 * 1024;
/// Modules kept of one program; the rest are counted out through [`GoBuildInfo::complete`].
pub(crate) const MAX_DEPS: usize = 1000;
/// Bytes kept of one path, version or setting.
const MAX_FIELD: usize = 512;
/// Bytes of the Go version string accepted.
const MAX_VERSION: u64 = 128;
/// The sentinels around the module info (`modload.infoStart`, `infoEnd`): 16 bytes each.
const SENTINEL: usize = 16;

/// One module of a Go program.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct GoModule {
    pub(crate) path: String,
    pub(crate) version: String,
    /// The `=>` replacement: its path (a module path or a local folder), and version when
    /// it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) replace: Option<String>,
}

/// What a Go program says about how it was built.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct GoBuildInfo {
    /// `go1.19.8`; `None` for the pointer format of Go before 1.18.
    pub(crate) go_version: Option<String>,
    /// The main package's import path (`path` line).
    pub(crate) main_path: Option<String>,
    /// The main module (`mod` line).
    pub(crate) main_module: Option<GoModule>,
    /// The `CGO_ENABLED` build setting (recorded since Go 1.18).
    pub(crate) cgo: Option<bool>,
    /// The `dep` lines, at most [`MAX_DEPS`].
    pub(crate) deps: Vec<GoModule>,
    /// False when the module info was longer than what memlint holds ([`CAPTURE_CAP`],
    /// [`MAX_DEPS`]), so `deps` (and perhaps `cgo`) may miss entries.
    pub(crate) complete: bool,
}

/// Decodes a build info blob that starts with [`MAGIC`]; `blob` may be cut short (what was held
/// of it). `None` when it is not one (too short, no version), as Go's reader says "not a Go
/// executable".
pub(crate) fn parse(blob: &[u8]) -> Option<GoBuildInfo> {
    if blob.len() < HEADER || !blob.starts_with(MAGIC) {
        return None;
    }
    let flags = blob[15];
    if flags & 2 == 0 {
        // Go < 1.18: two pointers to Go string headers elsewhere in the file.
        return Some(GoBuildInfo {
            complete: false,
            ..GoBuildInfo::default()
        });
    }
    let (version, rest) = varint_string(&blob[HEADER..]);
    let version =
        version.filter(|v| v.whole && !v.bytes.is_empty() && v.bytes.len() as u64 <= MAX_VERSION)?;
    let mut info = GoBuildInfo {
        go_version: Some(field(version.bytes)),
        complete: true,
        ..GoBuildInfo::default()
    };
    let (modinfo, _) = varint_string(rest);
    let Some(modinfo) = modinfo else {
        // The length of the module info was not held, or is absurd.
        info.complete = false;
        return Some(info);
    };
    let m = modinfo.bytes;
    let body = if modinfo.whole {
        if m.len() > 2 * SENTINEL && m[m.len() - SENTINEL - 1] == b'\n' {
            &m[SENTINEL..m.len() - SENTINEL]
        } else {
            // Go reads such module info as empty (a build outside module mode).
            &[][..]
        }
    } else {
        info.complete = false;
        // Cut short: the lines held, without the last (perhaps partial) one.
        let held = m.get(SENTINEL..).unwrap_or_default();
        match memchr::memrchr(b'\n', held) {
            Some(end) => &held[..=end],
            None => &[][..],
        }
    };
    read_lines(body, &mut info);
    Some(info)
}

/// The lines of the module info, as `runtime/debug.ParseBuildInfo` reads them; malformed
/// lines are skipped rather than refusing the rest.
fn read_lines(body: &[u8], info: &mut GoBuildInfo) {
    // Whether the last module line was a dep (its replacement goes there) or the main module.
    let mut last_dep: Option<bool> = None;
    for line in body.split(|&b| b == b'\n') {
        let cols: Vec<&[u8]> = line.split(|&b| b == b'\t').collect();
        match cols[0] {
            b"path" if cols.len() >= 2 => {
                info.main_path = Some(field(cols[1]));
                last_dep = None;
            }
            b"mod" if (3..=4).contains(&cols.len()) => {
                info.main_module = Some(module(&cols[1..]));
                last_dep = Some(false);
            }
            b"dep" if (3..=4).contains(&cols.len()) => {
                if info.deps.len() >= MAX_DEPS {
                    info.complete = false;
                    last_dep = None;
                    continue;
                }
                info.deps.push(module(&cols[1..]));
                last_dep = Some(true);
            }
            b"=>" if cols.len() == 4 => {
                let r = module(&cols[1..]);
                let to = if r.version.is_empty() {
                    r.path
                } else {
                    format!("{} {}", r.path, r.version)
                };
                let target = match last_dep.take() {
                    Some(true) => info.deps.last_mut(),
                    Some(false) => info.main_module.as_mut(),
                    None => None,
                };
                if let Some(m) = target {
                    m.replace = Some(to);
                }
            }
            b"build" if cols.len() >= 2 => {
                let kv = cols[1..].join(&b'\t');
                if let Some(v) = kv.strip_prefix(b"CGO_ENABLED=") {
                    info.cgo = match v {
                        b"1" => Some(true),
                        b"0" => Some(false),
                        _ => info.cgo,
                    };
                }
                last_dep = None;
            }
            _ => {}
        }
    }
}

fn module(cols: &[&[u8]]) -> GoModule {
    GoModule {
        path: field(cols[0]),
        version: cols.get(1).map(|v| field(v)).unwrap_or_default(),
        replace: None,
    }
}

/// A field as text, cut at [`MAX_FIELD`] bytes.
fn field(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(MAX_FIELD)]).into_owned()
}

struct Held<'a> {
    bytes: &'a [u8],
    /// The whole string is among the bytes held.
    whole: bool,
}

/// A varint-length-prefixed string (`encoding/binary.Uvarint`), and what follows it. `None`
/// when the length itself is not held or overflows.
fn varint_string(data: &[u8]) -> (Option<Held<'_>>, &[u8]) {
    let mut len: u64 = 0;
    for (i, &b) in data.iter().enumerate().take(10) {
        let part = u64::from(b & 0x7f);
        if i == 9 && b > 1 {
            return (None, &[]);
        }
        len |= part << (7 * i);
        if b & 0x80 == 0 {
            let start = i + 1;
            let rest = &data[start..];
            return match usize::try_from(len) {
                Ok(n) if n <= rest.len() => (
                    Some(Held {
                        bytes: &rest[..n],
                        whole: true,
                    }),
                    &rest[n..],
                ),
                _ => (
                    Some(Held {
                        bytes: rest,
                        whole: false,
                    }),
                    &[],
                ),
            };
        }
    }
    (None, &[])
}

/// Whether the held bytes already hold the header and both strings.
pub(super) fn blob_complete(held: &[u8]) -> bool {
    if held.len() < HEADER {
        return false;
    }
    if held[15] & 2 == 0 {
        return true;
    }
    match varint_string(&held[HEADER..]) {
        (Some(v), rest) if v.whole => matches!(varint_string(rest), (Some(m), _) if m.whole),
        (None, _) => held.len() >= HEADER + 10,
        _ => false,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::elf::marker::{BlobScanner, Found};

    fn scanner(ranges: [(u64, u64); 1]) -> BlobScanner {
        BlobScanner::new(&super::super::GO_BUILDINFO, ranges).unwrap()
    }

    /// What the scanner held, decoded as the facts decode it.
    fn held(s: BlobScanner) -> Option<GoBuildInfo> {
        match s.finish()? {
            (_, Found::Bytes(b)) => parse(&b),
            _ => None,
        }
    }

    fn varint(mut n: u64, out: &mut Vec<u8>) {
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }

    /// A blob as Go 1.18+ writes it.
    pub(crate) fn blob(version: &str, modinfo: &str) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.push(8);
        b.push(2);
        b.resize(HEADER, 0);
        varint(version.len() as u64, &mut b);
        b.extend_from_slice(version.as_bytes());
        let framed = [
            &hex("3077af0c9274080241e1c107e6d618e6")[..],
            modinfo.as_bytes(),
            &hex("f932433186182072008242104116d8f2")[..],
        ]
        .concat();
        varint(framed.len() as u64, &mut b);
        b.extend_from_slice(&framed);
        b
    }

    /// The blob a program with this build info carries (tests build files from it).
    pub(crate) fn encode(info: &GoBuildInfo) -> Vec<u8> {
        let Some(version) = &info.go_version else {
            // The pointer format of Go before 1.18.
            let mut old = MAGIC.to_vec();
            old.extend_from_slice(&[8, 0]);
            old.resize(HEADER, 0);
            return old;
        };
        let mut lines = String::new();
        let replace = |lines: &mut String, m: &GoModule| {
            if let Some(r) = &m.replace {
                lines.push_str(&format!("=>\t{r}\t\t\n"));
            }
        };
        if let Some(p) = &info.main_path {
            lines.push_str(&format!("path\t{p}\n"));
        }
        if let Some(m) = &info.main_module {
            lines.push_str(&format!("mod\t{}\t{}\t\n", m.path, m.version));
            replace(&mut lines, m);
        }
        for d in &info.deps {
            lines.push_str(&format!("dep\t{}\t{}\t\n", d.path, d.version));
            replace(&mut lines, d);
        }
        if let Some(cgo) = info.cgo {
            lines.push_str(&format!("build\tCGO_ENABLED={}\n", u8::from(cgo)));
        }
        let b = blob(version, &lines);
        assert_eq!(parse(&b).as_ref(), Some(info), "a build info a blob can carry");
        b
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    const MODINFO: &str = "path\texample.com/app\nmod\texample.com/app\t(devel)\t\ndep\tgithub.com/mattn/go-sqlite3\tv1.14.22\t\n=>\t./sqlite3\t\t\ndep\tgolang.org/x/sys\tv0.1.0\th1:abc=\nbuild\t-compiler=gc\nbuild\tCGO_ENABLED=1\nbuild\tGOARCH=amd64\n";

    #[test]
    fn parses_modules_settings_and_replacements() {
        let info = parse(&blob("go1.19.8", MODINFO)).unwrap();
        assert_eq!(info.go_version.as_deref(), Some("go1.19.8"));
        assert_eq!(info.main_path.as_deref(), Some("example.com/app"));
        assert_eq!(info.main_module.as_ref().unwrap().version, "(devel)");
        assert_eq!(info.cgo, Some(true));
        assert!(info.complete);
        assert_eq!(info.deps.len(), 2);
        assert_eq!(info.deps[0].path, "github.com/mattn/go-sqlite3");
        assert_eq!(info.deps[0].replace.as_deref(), Some("./sqlite3"));
        assert_eq!(info.deps[1].replace, None);
    }

    #[test]
    fn old_format_and_non_go() {
        let mut old = MAGIC.to_vec();
        old.extend_from_slice(&[8, 0]);
        old.resize(HEADER, 0);
        let info = parse(&old).unwrap();
        assert_eq!(info.go_version, None);
        assert!(!info.complete);
        assert!(parse(&old[..20]).is_none());
        assert!(parse(b"not a blob at all, not at all, no").is_none());
        // An empty version is not a Go program, as for Go's reader.
        assert!(parse(&blob("", MODINFO)).is_none());
    }

    #[test]
    fn cut_short_keeps_whole_lines() {
        let b = blob("go1.22.1", MODINFO);
        let cut = &b[..b.len() - 60];
        let info = parse(cut).unwrap();
        assert!(!info.complete);
        assert_eq!(info.main_path.as_deref(), Some("example.com/app"));
        assert!(info.deps.len() <= 2);
        assert!(info.deps.iter().all(|d| !d.path.is_empty()));
    }

    /// Streamed in pieces of every size, at an aligned offset inside a writable range, the
    /// blob is found; at an unaligned one, or outside the range, it is not.
    #[test]
    fn found_while_streaming_across_chunks() {
        let b = blob("go1.19.8", MODINFO);
        let mut file = vec![0u8; 4096];
        file.extend_from_slice(&b);
        file.resize(8192, 0);
        for step in [1, 3, 7, 13, 14, 15, 16, 100, 4096, 8192] {
            let mut s = scanner([(4000, 3000)]);
            for (i, c) in file.chunks(step).enumerate() {
                s.feed((i * step) as u64, c);
            }
            let info = held(s).unwrap_or_else(|| panic!("step {step}"));
            assert_eq!(info.deps.len(), 2, "step {step}");
        }
        let outside = {
            let mut s = scanner([(0, 4000)]);
            s.feed(0, &file);
            held(s)
        };
        assert!(outside.is_none());
        let mut unaligned = vec![0u8; 4100];
        unaligned.extend_from_slice(&b);
        let mut s = scanner([(0, 8000)]);
        s.feed(0, &unaligned);
        assert!(held(s).is_none());
    }

    /// Hostile blobs: every prefix, and bytes flipped at every place, never panic.
    #[test]
    fn mutations_never_panic() {
        let b = blob("go1.19.8", MODINFO);
        for n in 0..b.len() {
            let _ = parse(&b[..n]);
        }
        let mut seed = 0x9e3779b97f4a7c15u64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut m = b.clone();
            for k in 0..(seed % 4 + 1) {
                let at = ((seed >> (8 * k)) as usize) % m.len();
                m[at] = (seed >> (16 + k)) as u8;
            }
            if seed.is_multiple_of(5) {
                m.truncate((seed as usize >> 3) % m.len());
            }
            if let Some(info) = parse(&m) {
                assert!(info.deps.len() <= MAX_DEPS);
            }
            if let Some(mut s) = BlobScanner::new(&super::super::GO_BUILDINFO, [(0, m.len() as u64)]) {
                s.feed(0, &m);
                let _ = held(s);
            }
        }
        // A length that claims the whole address space.
        let mut huge = MAGIC.to_vec();
        huge.extend_from_slice(&[8, 2]);
        huge.resize(HEADER, 0);
        huge.extend_from_slice(&[0xff; 9]);
        huge.push(0x01);
        assert!(parse(&huge).is_none());
    }

    /// Builds a Go program from `testdata/recipes/go/SRC` (or the folder `dir`) with
    /// Debian's golang-go, as the image recipes do.
    fn go_build(dir: &std::path::Path, cgo: bool, out: &std::path::Path) -> Vec<u8> {
        let cache = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/go-build");
        let gopath = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("go")
            .args(["build", "-trimpath", "-buildvcs=false", "-o"])
            .arg(out)
            .arg(".")
            .current_dir(dir)
            .env("CGO_ENABLED", if cgo { "1" } else { "0" })
            .env("GOPROXY", "off")
            .env("GOFLAGS", "-mod=mod")
            .env("GOPATH", gopath.path())
            .env("GOCACHE", cache)
            .status()
            .expect("the Go toolchain (Debian's golang-go, and gcc for cgo) runs these tests");
        assert!(status.success(), "go build in {}", dir.display());
        std::fs::read(out).unwrap()
    }

    fn recipe(src: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/recipes/go")
            .join(src)
    }

    /// A real program streamed through the layer reader, in a tar, as a layer is read.
    fn through_layer(name: &str, bytes: &[u8]) -> crate::elf::ElfInfo {
        use crate::tree::layer::read_layer;
        use crate::tree::Limits;
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o755);
        h.set_cksum();
        b.append_data(&mut h, name, bytes).unwrap();
        let tar = b.into_inner().unwrap();
        let diff = read_layer(&tar[..], &super::super::interests(), &Limits::default()).unwrap();
        diff.entries.elf(0).cloned().unwrap()
    }

    /// Real programs built here: cgo with (a stand-in of) go-sqlite3, and one without cgo, read
    /// as the layer reader reads them, agree with `go version -m`.
    #[test]
    fn real_programs() {
        let dir = tempfile::tempdir().unwrap();
        let cgo = go_build(&recipe("cgo-sqlite/app"), true, &dir.path().join("cgoapp"));
        let info = through_layer("usr/local/bin/cgoapp", &cgo);
        let go = super::super::build_info(&info).expect("build info of the cgo program");
        let version = std::process::Command::new("go")
            .arg("env")
            .arg("GOVERSION")
            .output()
            .unwrap();
        let version = String::from_utf8(version.stdout).unwrap();
        assert_eq!(go.go_version.as_deref(), Some(version.trim()));
        assert_eq!(go.cgo, Some(true));
        assert_eq!(go.main_path.as_deref(), Some("example.com/memlint/cgoapp"));
        assert_eq!(go.deps.len(), 1);
        assert_eq!(go.deps[0].path, "github.com/mattn/go-sqlite3");
        assert_eq!(go.deps[0].version, "v1.14.22");
        assert_eq!(go.deps[0].replace.as_deref(), Some("../sqlite3 (devel)"));
        assert!(go.complete);
        assert_eq!(
            info.scan.dynamic.as_ref().unwrap().needed,
            ["libc.so.6"],
            "a cgo program links the C library"
        );
        let nocgo = go_build(&recipe("nocgo"), false, &dir.path().join("nocgo"));
        let go = super::super::build_info(&through_layer("app/server", &nocgo)).unwrap();
        assert_eq!(go.cgo, Some(false));
        assert!(go.deps.is_empty());
        // Every cut of the real file, and bytes changed around the blob, never panic.
        let at = memchr::memmem::find(&cgo, MAGIC).unwrap();
        for cut in (at..(at + 600).min(cgo.len()))
            .step_by(7)
            .chain([at + 14, at + 31, at + 32, at + 33])
        {
            let _ = parse(&cgo[at..cut]);
            let _ = through_layer("cut", &cgo[..cut]);
        }
        for k in 0..400 {
            let mut m = cgo[at..(at + 600).min(cgo.len())].to_vec();
            let i = (k * 37) % m.len();
            m[i] = m[i].wrapping_add(k as u8 | 1);
            let _ = parse(&m);
        }
    }

    /// Build info past the prefix memlint keeps of an ELF file (4 MiB) is found all the same:
    /// a program that embeds 6 MiB of data has its writable data, and the blob, after it.
    #[test]
    fn found_past_the_kept_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("go.mod"), "module example.com/memlint/big\n\ngo 1.19\n").unwrap();
        std::fs::write(
            src.join("main.go"),
            "package main\n\nimport _ \"embed\"\n\n//go:embed big.bin\nvar big string\n\nfunc main() { println(len(big)) }\n",
        )
        .unwrap();
        let big: Vec<u8> = (0..6u32 << 20)
            .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
            .collect();
        std::fs::write(src.join("big.bin"), big).unwrap();
        let bytes = go_build(&src, false, &dir.path().join("big"));
        let at = memchr::memmem::find(&bytes, MAGIC).unwrap();
        assert!(at > crate::elf::PREFIX_CAP, "the blob is at {at}");
        let go = super::super::build_info(&through_layer("big", &bytes)).expect("build info past the prefix");
        assert_eq!(go.main_path.as_deref(), Some("example.com/memlint/big"));
        assert_eq!(go.cgo, Some(false));
    }

    #[test]
    fn many_deps_are_bounded() {
        let mut m = String::from("path\tx\nmod\tx\t(devel)\t\n");
        for i in 0..(MAX_DEPS + 50) {
            m.push_str(&format!("dep\tm{i}\tv1.0.0\t\n"));
        }
        m.push_str("build\tCGO_ENABLED=0\n");
        let info = parse(&blob("go1.21.0", &m)).unwrap();
        assert_eq!(info.deps.len(), MAX_DEPS);
        assert!(!info.complete);
        assert_eq!(info.cgo, Some(false));
    }
}
