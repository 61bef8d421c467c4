//! What `inspect` and `lint -v` say to people, and what an unreadable input gets said of it
//! (issue #14, items 2, 7 and 8): compressed standard input reads, no error quotes the binary
//! it read, `inspect --files` has its layer column, the text uses words rather than Rust
//! names and JSON dumps, counts agree with their number, and `--files` JSON has no
//! duplicate keys.

use crate::common;

use common::*;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;
use std::io::Write;
use std::process::{Command, Output, Stdio};

const PEER2: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/peer-fixtures/peer2");

/// memlint with `stdin` piped in (no cache).
fn with_stdin(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memlint"))
        .args(args)
        .arg("--no-cache")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memlint runs");
    let mut pipe = child.stdin.take().unwrap();
    // memlint may refuse the stream before reading all of it.
    let _ = pipe.write_all(stdin);
    drop(pipe);
    child.wait_with_output().unwrap()
}

fn text_of(args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.push("--no-cache");
    let out = memlint(&all);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "memlint {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// No control character but newline, and no replacement character: nothing read from the
/// input came through as bytes.
fn assert_no_binary(what: &str, text: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|&c| (c.is_control() && c != '\n') || c == char::REPLACEMENT_CHARACTER)
        .collect();
    assert!(bad.is_empty(), "{what} has raw bytes {bad:?}:\n{text}");
}

#[test]
fn compressed_standard_input_reads_as_the_path_does() {
    let path = format!("{PEER2}/dive__test-docker-image.tar");
    let plain = std::fs::read(&path).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&plain).unwrap();
    let gzip = gz.finish().unwrap();
    let zstd = zstd::encode_all(&plain[..], 3).unwrap();
    let by_path = inspect_json(&["--files", &path]);
    for (name, bytes) in [("plain", &plain), ("gzip", &gzip), ("zstd", &zstd)] {
        let out = with_stdin(
            &["inspect", "--format", "json", "--files", "docker-archive:-"],
            bytes,
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["image"]["layers"], by_path["image"]["layers"], "{name}");
        assert_eq!(v["files"], by_path["files"], "{name}");
        // lint takes it the same way (`docker save app | gzip | memlint lint docker-archive:-`).
        let out = with_stdin(&["lint", "docker-archive:-"], bytes);
        assert!(matches!(out.status.code(), Some(0 | 1)), "{name}: lint");
    }
}

#[test]
fn errors_name_bytes_in_hex_and_never_quote_them() {
    // Not a tar stream: the first bytes in hex.
    let noise: Vec<u8> = (0u32..4096)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 | 0x80)
        .collect();
    let out = with_stdin(&["inspect", "docker-archive:-"], &noise);
    assert_eq!(out.status.code(), Some(2));
    let text = error_text(&out);
    let hex: Vec<String> = noise[..4].iter().map(|b| format!("{b:02x}")).collect();
    assert!(
        text.contains(&format!("starts with bytes {}", hex.join(" "))),
        "{text}"
    );
    assert_no_binary("stdin noise", &String::from_utf8_lossy(&out.stderr));
    // The same from a path, and xz named.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("noise.tar");
    std::fs::write(&file, &noise).unwrap();
    let out = memlint(&[
        "inspect",
        "--no-cache",
        &format!("docker-archive:{}", file.display()),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        error_text(&out).contains("starts with bytes"),
        "{}",
        error_text(&out)
    );
    assert_no_binary("file noise", &String::from_utf8_lossy(&out.stderr));
    // xz is read (#29), and a damaged xz stream is named as such.
    let out = with_stdin(&["inspect", "docker-archive:-"], b"\xfd7zXZ\x00\x00\x04rest");
    assert!(
        error_text(&out).contains("starts like an xz stream but does not unpack"),
        "{}",
        error_text(&out)
    );

    // A tar header whose checksum field holds terminal escapes and whose name rings the bell:
    // the tar reader's message quotes both; memlint names the field instead.
    let mut good = tar::Builder::new(Vec::new());
    append(&mut good, "manifest.json", b"[]");
    let mut stream = good.into_inner().unwrap();
    stream.truncate(1024);
    let mut header = [0u8; 512];
    header[..stream.len().min(512)].copy_from_slice(&stream[..512]);
    header[..16].copy_from_slice(b"evil\x1b]0;pwn\x07\x1b[2\0");
    header[148..156].copy_from_slice(b"\x1b[31m\x1b[m");
    let mut evil = stream.clone();
    evil.extend_from_slice(&header);
    evil.extend_from_slice(&[0u8; 1024]);
    let out = with_stdin(&["inspect", "docker-archive:-"], &evil);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_no_binary("damaged header", &stderr);
    assert!(
        error_text(&out).contains("a tar header is damaged: its cksum field is not a number"),
        "{stderr}"
    );
    // A member name over a limit is quoted with its control characters escaped.
    let mut named = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(2);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    {
        let name = b"\x1b]0;pwn\x07\x1b[2J-a-long-member-name";
        h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name);
    }
    h.set_cksum();
    named.append(&h, &b"{}"[..]).unwrap();
    let out = with_stdin(
        &["inspect", "--limit", "max_path_len=16", "docker-archive:-"],
        &named.into_inner().unwrap(),
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_no_binary("long member name", &stderr);
    assert!(error_text(&out).contains("\\u{1b}]0;pwn"), "{stderr}");
    // As the first member of a file.
    let file = dir.path().join("evil.tar");
    let mut first = header.to_vec();
    first[257..262].copy_from_slice(b"ustar");
    first.extend_from_slice(&[0u8; 1024]);
    std::fs::write(&file, &first).unwrap();
    let out = memlint(&[
        "inspect",
        "--no-cache",
        &format!("docker-archive:{}", file.display()),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_no_binary("damaged header in a file", &String::from_utf8_lossy(&out.stderr));
}

#[test]
fn files_text_has_a_layer_column() {
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    let img = ImageSpec::new("amd64")
        .layer(LayerSpec::new(Comp::Gzip).dir("app").file("app/a", b"one"))
        .layer(
            LayerSpec::new(Comp::Zstd)
                .file("app/b", b"two")
                .file("app/a", b"again"),
        );
    write_oci_dir(&layout, &img, "v1");
    let reference = format!("oci-dir:{}:v1", layout.display());
    let v = inspect_json(&[&reference]);
    let short = |i: usize| v["image"]["layers"][i]["digest"].as_str().unwrap()[..19].to_string();
    let text = text_of(&["inspect", "--files", &reference]);
    let line = |path: &str| {
        text.lines()
            .find(|l| l.ends_with(&format!("  {path}")))
            .unwrap_or_else(|| panic!("no line for {path}:\n{text}"))
            .to_string()
    };
    assert!(
        text.lines().any(|l| l.contains("LAYER") && l.ends_with("PATH")),
        "{text}"
    );
    assert!(
        line("/app").contains(&format!(" 1 {}", short(0))),
        "{}",
        line("/app")
    );
    // The layer that last wrote the path.
    assert!(
        line("/app/a").contains(&format!(" 2 {}", short(1))),
        "{}",
        line("/app/a")
    );
    assert!(
        line("/app/b").contains(&format!(" 2 {}", short(1))),
        "{}",
        line("/app/b")
    );
}

/// Words no person should read in the text: Rust names and JSON dumps.
fn assert_words(what: &str, text: &str) {
    for internal in [
        "Gzip", "Zstd", "None ", "(Elf", "Some(", "Dpkg", "Apk", "{\"", "\"apps\"", "Script", "Missing",
    ] {
        assert!(!text.contains(internal), "{what} shows `{internal}`:\n{text}");
    }
}

#[test]
fn text_uses_words_for_people() {
    let kaniko = text_of(&["inspect", &format!("{PEER2}/dive__test-kaniko-image.tar")]);
    assert_words("kaniko", &kaniko);
    assert!(kaniko.contains("  gzip  746.7 KiB stored"), "{kaniko}");
    assert!(kaniko.contains("(ELF executable"), "{kaniko}");
    assert!(kaniko.contains("\n  .NET        none found\n"), "{kaniko}");
    assert!(kaniko.contains("Cmd         [\"sh\"]"), "{kaniko}");
    let plain = text_of(&["inspect", &format!("{PEER2}/dive__test-docker-image.tar")]);
    assert!(plain.contains("  tar  "), "{plain}");
    let zstd = text_of(&["inspect", &format!("{PEER2}/dive__test-oci-zstd-image.tar")]);
    assert!(zstd.contains("  zstd  "), "{zstd}");
    let verbose = text_of(&["lint", "-v", &format!("{PEER2}/dive__test-kaniko-image.tar")]);
    assert_words("lint -v", &verbose);
    assert!(verbose.contains("(ELF executable"), "{verbose}");
}

#[test]
fn one_is_singular() {
    let hello = format!("{PEER2}/snyk__docker-save_hello-world.tar");
    let text = text_of(&["inspect", &hello]);
    assert!(
        text.contains(", 1 entry\n") || text.contains(", 1 entry  "),
        "{text}"
    );
    assert!(text.contains("Files      1 path: "), "{text}");
    for wrong in ["1 entries", "1 paths", "1 layers", "1 folders", "1 symlinks"] {
        assert!(!text.contains(wrong), "`{wrong}` in:\n{text}");
    }
    let out = memlint(&["lint", "--no-cache", &hello]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("1 layers"), "{stderr}");
}

/// A JSON value read with every object checked for a key that appears twice.
struct NoDuplicates;

impl<'de> Deserialize<'de> for NoDuplicates {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NoDuplicates)
    }
}

impl<'de> Visitor<'de> for NoDuplicates {
    type Value = NoDuplicates;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!("duplicate key `{key}`")));
            }
            map.next_value::<NoDuplicates>()?;
        }
        Ok(NoDuplicates)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<NoDuplicates>()?.is_some() {}
        Ok(NoDuplicates)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(NoDuplicates)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(NoDuplicates)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(NoDuplicates)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(NoDuplicates)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(NoDuplicates)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(NoDuplicates)
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(NoDuplicates)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        NoDuplicates::deserialize(d)
    }
}

#[test]
fn files_json_has_no_duplicate_keys() {
    // Dynamically linked ELF files: their objects had `dynamic` twice.
    for fixture in ["snyk__containerd-archives_alpine.tar", "trivy__alpine-311.tar.gz"] {
        let out = memlint(&[
            "inspect",
            "--no-cache",
            "--format",
            "json",
            "--files",
            &format!("{PEER2}/{fixture}"),
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut de = serde_json::Deserializer::from_slice(&out.stdout);
        if let Err(e) = NoDuplicates::deserialize(&mut de) {
            panic!("{fixture}: {e}");
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let elf = v["files"]["paths"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|p| p["elf"].as_object().filter(|e| e["dynamic"].is_object()))
            .unwrap_or_else(|| panic!("{fixture}: a dynamically linked ELF file"));
        assert_eq!(elf["dynamic_segment"], true, "{elf:?}");
    }
}
