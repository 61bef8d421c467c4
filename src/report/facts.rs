//! The facts, written for people (`inspect`, `lint -v`).

use crate::facts::allocator::Allocator;
use crate::facts::preload::PreloadSource;
use crate::facts::Facts;
use crate::untrusted::line;
use std::io::{self, Write};

/// Writes the facts, one line each; a line is made safe as a whole by [`line`], since nearly
/// every part of it comes from the image.
pub fn write(w: &mut dyn Write, f: &Facts) -> io::Result<()> {
    writeln!(w)?;
    put(w, "Facts".to_string())?;
    let p = &f.platform;
    let bin = match (&p.binaries, p.mismatch) {
        (Some(b), true) => format!(" — but most ELF files are built for {b}"),
        (Some(b), false) => format!(" (binaries: {b})"),
        (None, _) => " (no ELF files)".to_string(),
    };
    put(w, format!("  Platform    {}{bin}", p.declared))?;
    let os =
        f.os.release
            .as_ref()
            .map(|r| {
                r.pretty_name
                    .clone()
                    .or(r.id.clone())
                    .unwrap_or_else(|| "unknown".into())
            })
            .unwrap_or_else(|| "no os-release".into());
    let pm = match f.os.package_manager {
        Some(m) => format!("; {} packages ({m:?})", f.os.package_count).to_lowercase(),
        None => String::new(),
    };
    put(w, format!("  OS          {os}{pm}"))?;
    let l = &f.libc;
    let ver = l.version.as_deref().map(|v| format!(" {v}")).unwrap_or_default();
    let ep = match l.entrypoint {
        Some(e) => format!(", entrypoint on {e}"),
        None => String::new(),
    };
    let loader = l
        .loader
        .as_deref()
        .map(|x| format!(" via {x}"))
        .unwrap_or_default();
    put(w, format!("  libc        {}{ver}{ep}{loader}", l.family))?;
    if l.present.len() > 1 {
        let all: Vec<String> = l.present.iter().map(|p| p.to_string()).collect();
        put(w, format!("              present: {}", all.join(", ")))?;
    }
    let e = &f.entrypoint;
    if e.argv.is_empty() {
        put(w, "  Entrypoint  (none)".to_string())?;
    } else {
        put(w, format!("  Entrypoint  {}", shell_words(&e.argv)))?;
        for step in &e.steps {
            put(
                w,
                format!("              {} → {}", step.how, shell_words(&step.argv)),
            )?;
        }
        let prog = e.program.as_deref().unwrap_or("?");
        let interp = e
            .interpreter
            .as_deref()
            .map(|i| format!(", interpreter {i}"))
            .unwrap_or_default();
        put(w, format!("              runs {prog} ({:?}{interp})", e.kind))?;
        if let Some(n) = &e.note {
            put(w, format!("              note: {n}"))?;
        }
    }
    if f.preloads.is_empty() {
        put(w, "  Preloads    (none)".to_string())?;
    }
    for (i, pr) in f.preloads.iter().enumerate() {
        let label = if i == 0 {
            "  Preloads    "
        } else {
            "              "
        };
        let src = match pr.source {
            PreloadSource::Env => "LD_PRELOAD",
            PreloadSource::LdSoPreload => "/etc/ld.so.preload",
        };
        let status = serde_json::to_value(pr.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        put(
            w,
            format!("{label}{status:<12} {} ({src}): {}", pr.entry, pr.reason),
        )?;
        if !pr.candidates.is_empty() {
            put(
                w,
                format!(
                    "              {:<12} the image has {}",
                    "",
                    pr.candidates.join(", ")
                ),
            )?;
        }
    }
    let a = &f.allocator;
    let path = a.path.as_deref().map(|p| format!(" {p}")).unwrap_or_default();
    let via = serde_json::to_value(a.via)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    put(w, format!("  Allocator   {} ({via}){path}", a.name))?;
    match &a.arena_cap {
        Some(c) => {
            put(w, format!("              arena cap: {}={}", c.source, c.value))?;
        }
        None if a.name == Allocator::Glibc => {
            put(
                w,
                "              arena cap: none (8 arenas per host CPU)".to_string(),
            )?;
        }
        None => {}
    }
    for lib in &a.installed_not_in_effect {
        put(
            w,
            format!(
                "              installed, not in effect: {} {}",
                lib.name, lib.path
            ),
        )?;
    }
    let ld = &f.loader;
    let cache = match (&ld.ld_so_cache, &ld.ld_so_cache_error) {
        (Some(fmt), _) => format!("ld.so.cache {fmt}, {} entries", ld.ld_so_cache_entries),
        (None, Some(err)) => err.clone(),
        (None, None) => "no ld.so.cache".to_string(),
    };
    put(
        w,
        format!("  Loader      {cache}; then {}", ld.system_dirs.join(":")),
    )?;
    if !ld.ld_library_path.is_empty() {
        put(
            w,
            format!("              LD_LIBRARY_PATH={}", ld.ld_library_path.join(":")),
        )?;
    }
    runtimes(w, f)
}

fn put(w: &mut dyn Write, text: String) -> io::Result<()> {
    writeln!(w, "{}", line(&text))
}

/// Node.js, sharp, Next.js and .NET, as JSON lines: these facts have many optional parts.
fn runtimes(w: &mut dyn Write, f: &Facts) -> io::Result<()> {
    let mut section = |name: &str, v: serde_json::Value| {
        if v.is_null() || v.as_object().is_some_and(|o| o.values().all(is_empty)) {
            return Ok(());
        }
        put(w, format!("  {name:<11} {}", compact(&v)))
    };
    section("Node.js", serde_json::to_value(&f.node).unwrap_or_default())?;
    section("sharp", serde_json::to_value(&f.sharp).unwrap_or_default())?;
    section("Next.js", serde_json::to_value(&f.next).unwrap_or_default())?;
    section(".NET", serde_json::to_value(&f.dotnet).unwrap_or_default())
}

fn is_empty(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => true,
        serde_json::Value::Array(a) => a.is_empty(),
        serde_json::Value::Object(o) => o.values().all(is_empty),
        serde_json::Value::Bool(b) => !b,
        _ => false,
    }
}

fn compact(v: &serde_json::Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// An argv as a shell would show it.
pub fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
