//! The facts, written for people (`inspect`, `lint -v`).

use crate::facts::allocator::Allocator;
use crate::facts::entrypoint::ProgramKind;
use crate::facts::os::PackageManager;
use crate::facts::preload::PreloadSource;
use crate::facts::Facts;
use crate::untrusted::line;
use std::fmt::Write as _;
use std::io::{self, Write};

/// Writes the facts, one line each; a line is made safe as a whole by [`line`], since nearly
/// every part of it comes from the image.
pub(crate) fn write(w: &mut dyn Write, f: &Facts) -> io::Result<()> {
    writeln!(w)?;
    put(w, "Facts".to_string())?;
    for part in [platform_os_libc, entrypoint, preloads, allocator_loader] {
        part(w, f)?;
    }
    runtimes(w, f)?;
    memory(w, f)
}

/// The platform, the OS and its packages, the C library.
fn platform_os_libc(w: &mut dyn Write, f: &Facts) -> io::Result<()> {
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
        Some(m) => {
            let tool = match m {
                PackageManager::Dpkg => "dpkg",
                PackageManager::Apk => "apk",
            };
            format!(
                "; {} ({tool})",
                count(f.os.package_count as u64, "package", "packages")
            )
        }
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
    Ok(())
}

/// What the entrypoint runs, step by step.
fn entrypoint(w: &mut dyn Write, f: &Facts) -> io::Result<()> {
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
        let kind = match e.kind {
            ProgramKind::Elf => "ELF executable",
            ProgramKind::Script => "script",
            ProgramKind::Missing => "not in the image",
            ProgramKind::Other => "neither ELF nor a script",
            ProgramKind::None => "nothing to run",
        };
        put(w, format!("              runs {prog} ({kind}{interp})"))?;
        if let Some(n) = &e.note {
            put(w, format!("              note: {n}"))?;
        }
        for v in &e.exports {
            let at = v.describe_origin();
            let line = match &v.value {
                crate::facts::env::Value::Set(x) => format!("sets {}={x} ({at})", v.name),
                crate::facts::env::Value::Unset => format!("unsets {} ({at})", v.name),
                crate::facts::env::Value::Undecided { why, .. } => {
                    format!("sets {} to what memlint cannot work out ({at}): {why}", v.name)
                }
            };
            put(w, format!("              {line}"))?;
        }
    }
    Ok(())
}

/// `LD_PRELOAD` and `/etc/ld.so.preload` entries, and what each resolves to.
fn preloads(w: &mut dyn Write, f: &Facts) -> io::Result<()> {
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
            PreloadSource::Env => "LD_PRELOAD".to_string(),
            PreloadSource::LdSoPreload => "/etc/ld.so.preload".to_string(),
            PreloadSource::Script => format!(
                "LD_PRELOAD from {} line {}",
                pr.script.as_deref().unwrap_or("a script"),
                pr.line.unwrap_or(0)
            ),
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
    Ok(())
}

/// The allocator in effect, and the dynamic loader's search path.
fn allocator_loader(w: &mut dyn Write, f: &Facts) -> io::Result<()> {
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
        (Some(fmt), _) => format!(
            "ld.so.cache {fmt}, {}",
            count(ld.ld_so_cache_entries as u64, "entry", "entries")
        ),
        (None, Some(err)) => err.clone(),
        (None, None) => "no ld.so.cache".to_string(),
    };
    put(
        w,
        format!("  Loader      {cache}; then {}", ld.system_dirs.join(":")),
    )?;
    if let Some(e) = &ld.ld_so_conf_error {
        put(w, format!("              {e}"))?;
    }
    if !ld.ld_library_path.is_empty() {
        put(
            w,
            format!("              LD_LIBRARY_PATH={}", ld.ld_library_path.join(":")),
        )?;
    }
    Ok(())
}

/// The memory budget as one table: for a person deciding a limit, what the limit is and what
/// each setting commits of it.
fn memory(w: &mut dyn Write, f: &Facts) -> io::Result<()> {
    let rows = super::budget::MemoryDoc::of(&f.memory)
        .map(|b| super::budget::rows(&b))
        .map_err(io::Error::other)?;
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
    let (what, setting) = (width(0).max(4), width(1).clamp(7, 90));
    put(
        w,
        format!("  Memory      {:<what$}  {:<setting$}  SIZE", "WHAT", "SETTING"),
    )?;
    for r in &rows {
        put(
            w,
            format!("              {:<what$}  {:<setting$}  {}", r[0], r[1], r[2]),
        )?;
    }
    Ok(())
}

fn put(w: &mut dyn Write, text: String) -> io::Result<()> {
    writeln!(w, "{}", line(&text))
}

/// Node.js, sharp, Next.js and .NET, in words, one line each through [`put`].
fn runtimes(w: &mut dyn Write, f: &Facts) -> io::Result<()> {
    let mut s = String::new();
    runtimes_text(&mut s, f);
    for l in s.lines() {
        put(w, l.to_string())?;
    }
    Ok(())
}

/// Node.js, sharp, Next.js and .NET, in words; a runtime the image does not have gets no
/// line, except .NET, whose absence the .NET rules read.
fn runtimes_text(s: &mut String, f: &Facts) {
    for part in [
        node_text,
        sharp_text,
        next_text,
        java_text,
        ruby_text,
        python_text,
        go_text,
        dotnet_text,
    ] {
        part(s, f);
    }
}

/// Node.js: its version, heap and semi-space settings.
fn node_text(s: &mut String, f: &Facts) {
    if let Some(n) = &f.node {
        let mut line = format!("node {}", n.version.as_deref().unwrap_or("(version unknown)"));
        if let Some(b) = &n.binary {
            let _ = write!(line, " at {b}");
        }
        if let Some(src) = &n.version_source {
            let _ = write!(line, " (version from {src})");
        }
        if n.entrypoint_is_node {
            line.push_str("; the entrypoint runs it");
        }
        let _ = writeln!(s, "  Node.js     {line}");
        if let Some(o) = &n.node_options {
            let _ = writeln!(s, "              NODE_OPTIONS={o}");
        }
        for (name, flag) in [
            ("--max-old-space-size", &n.max_old_space_size),
            ("--max-semi-space-size", &n.max_semi_space_size),
        ] {
            if let Some(flag) = flag {
                let problem = flag
                    .problem
                    .as_deref()
                    .map(|p| format!(": {p}"))
                    .unwrap_or_default();
                let _ = writeln!(
                    s,
                    "              {name}={} ({}){problem}",
                    flag.value, flag.source
                );
            }
        }
    }
}

/// sharp installs and the libvips each loads.
fn sharp_text(s: &mut String, f: &Facts) {
    for (i, install) in f.sharp.installs.iter().enumerate() {
        let label = if i == 0 {
            "  sharp       "
        } else {
            "              "
        };
        let usable = if install.usable {
            "an addon for this image loads"
        } else {
            "no addon for this image loads"
        };
        let _ = writeln!(
            s,
            "{label}sharp {} at {} ({} layout): {usable}",
            install.version.as_deref().unwrap_or("(version unknown)"),
            install.path,
            install.layout
        );
        for addon in &install.addons {
            let fit = if addon.matches_image {
                "matches".to_string()
            } else {
                addon
                    .mismatch_reason
                    .clone()
                    .unwrap_or_else(|| "does not match".to_string())
            };
            let _ = writeln!(s, "                addon {}: {fit}", addon.platform);
        }
    }
}

/// Next.js: its version, output mode and image optimiser.
fn next_text(s: &mut String, f: &Facts) {
    if let Some(next) = &f.next {
        let image = &next.image;
        let mut line = format!("next {}", next.version.as_deref().unwrap_or("(version unknown)"));
        if let Some(st) = &next.standalone {
            let _ = write!(line, ", standalone ({st})");
        }
        line.push_str(if next.optimizer_in_use {
            "; its image optimizer serves images"
        } else {
            "; its image optimizer is not in use"
        });
        let _ = writeln!(s, "  Next.js     {line}");
        if let Some(ttl) = image.minimum_cache_ttl {
            let default = if image.minimum_cache_ttl_default {
                " (the default)"
            } else {
                ""
            };
            let _ = writeln!(s, "              images.minimumCacheTTL {ttl} s{default}");
        }
        if let Some(size) = &image.maximum_disk_cache_size {
            let _ = writeln!(s, "              images.maximumDiskCacheSize {size}");
        }
        for note in &next.notes {
            let _ = writeln!(s, "              note: {note}");
        }
    }
}

/// The JVM: launcher, version and options.
fn java_text(s: &mut String, f: &Facts) {
    if let Some(j) = &f.java {
        let mut line = format!("java {}", j.version.as_deref().unwrap_or("(version unknown)"));
        if let Some(v) = &j.vendor {
            let _ = write!(line, " ({v})");
        }
        if let Some(h) = &j.home {
            let _ = write!(line, " at {h}");
        }
        if let Some(src) = &j.version_source {
            let _ = write!(line, " (version from {src})");
        }
        let _ = writeln!(s, "  Java        {line}");
        let _ = writeln!(s, "              {}", j.found_by);
        if let Some(libc) = &j.libc {
            let _ = writeln!(s, "              libc {libc}");
        }
        for o in &j.options {
            let ignored = o
                .ignored
                .as_deref()
                .map(|i| format!(": ignored, {i}"))
                .unwrap_or_default();
            let _ = writeln!(s, "              {} ({}){ignored}", o.option, o.origin());
        }
        if let Some(b) = &j.buildpack_calculator {
            let _ = writeln!(s, "              {b}");
        }
        for n in &j.notes {
            let _ = writeln!(s, "              note: {n}");
        }
    }
}

/// Ruby: its version and allocator settings.
fn ruby_text(s: &mut String, f: &Facts) {
    if let Some(r) = &f.ruby {
        let mut line = format!(
            "ruby {} at {}",
            r.version.as_deref().unwrap_or("(version unknown)"),
            r.binary
        );
        if let Some(src) = &r.version_source {
            let _ = write!(line, " (version from {src})");
        }
        if r.jemalloc_linked {
            line.push_str("; built with jemalloc");
        }
        let _ = writeln!(s, "  Ruby        {line}");
        if !r.servers.is_empty() {
            let names: Vec<String> = r
                .servers
                .iter()
                .map(|v| {
                    format!(
                        "{}{} ({})",
                        v.name,
                        v.version.as_deref().map(|x| format!(" {x}")).unwrap_or_default(),
                        v.source
                    )
                })
                .collect();
            let _ = writeln!(s, "              servers: {}", names.join(", "));
        }
    }
}

/// Python: its version and allocator settings.
fn python_text(s: &mut String, f: &Facts) {
    if let Some(py) = &f.python {
        let version = py.version.as_deref().unwrap_or("(version unknown)");
        let source = py
            .version_source
            .as_deref()
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "  Python      CPython {version}{source}, {}",
            count(py.packages.len() as u64, "distribution", "distributions")
        );
        for server in &py.servers {
            let _ = writeln!(
                s,
                "              {} ({}): {}",
                server.name,
                server.concurrency.as_str(),
                server.evidence
            );
        }
        if let Some(m) = &py.pythonmalloc {
            let _ = writeln!(s, "              PYTHONMALLOC={m}");
        }
    }
}

/// Go programs: their versions and memory settings.
fn go_text(s: &mut String, f: &Facts) {
    let mut label = "  Go          ";
    for b in &f.go.binaries {
        let cgo = match b.cgo {
            Some(true) => "cgo",
            Some(false) => "no cgo",
            None => "cgo unknown",
        };
        let ran = if b.on_entrypoint {
            ", run by the entrypoint"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "{label}{} {} ({cgo}, {}){ran}",
            b.path,
            b.go_version.as_deref().unwrap_or("(version unknown)"),
            count(b.deps.len() as u64, "module", "modules")
        );
        label = "              ";
    }
}

/// .NET: runtimes, apps, GC settings and Npgsql.
fn dotnet_text(s: &mut String, f: &Facts) {
    let d = &f.dotnet;
    if !d.present() {
        let _ = writeln!(s, "  .NET        none found");
        return;
    }
    let mut label = "  .NET        ";
    for r in &d.runtimes {
        let kind = if r.self_contained {
            "self-contained"
        } else {
            "shared"
        };
        let version = if r.version.is_empty() {
            "(version unknown)"
        } else {
            &r.version
        };
        let _ = writeln!(s, "{label}{} {version} ({kind}, {})", r.name, r.path);
        label = "              ";
    }
    for a in &d.apps {
        let target = a
            .target_framework
            .as_deref()
            .map(|t| format!(", {t}"))
            .unwrap_or_default();
        let _ = writeln!(s, "{label}app {} in {}{target}", a.name, a.dir);
        label = "              ";
        if let Some(gc) =
            d.gc.apps
                .iter()
                .find(|g| Some(&g.runtimeconfig) == a.runtimeconfig.as_ref())
        {
            let on = |v: u64| if v == 0 { "off" } else { "on" };
            let mut line = format!(
                "GC: Server GC {} ({}), DATAS {} ({})",
                on(gc.server.value),
                gc.server.source,
                on(gc.dynamic_adaptation.value),
                gc.dynamic_adaptation.source
            );
            for (name, setting) in [
                ("heap count", &gc.heap_count),
                ("affinitize mask", &gc.heap_affinitize_mask),
                ("hard limit (bytes)", &gc.heap_hard_limit),
                ("hard limit %", &gc.heap_hard_limit_percent),
                ("SOH hard limit (bytes)", &gc.heap_hard_limit_soh),
            ] {
                if let Some(v) = setting {
                    let _ = write!(line, ", {name} {} ({})", v.value, v.source);
                }
            }
            let _ = writeln!(s, "                {line}");
        }
    }
    for v in &d.gc.env {
        let read = match v.read_as {
            Some(n) => format!("read as 0x{n:X} = {n}"),
            None => "not a hexadecimal number: the default applies".to_string(),
        };
        let decimal = v
            .decimal_reading
            .map(|n| format!(" (as decimal it would be {n})"))
            .unwrap_or_default();
        let _ = writeln!(s, "{label}{} {read}{decimal} ({})", v.entry(), v.source);
        label = "              ";
    }
    for p in &d.npgsql {
        let _ = writeln!(s, "{label}{} {} ({})", p.name, p.version, p.deps_json);
    }
    if !d.npgsql.is_empty() {
        let gssapi = match &d.gssapi.resolved {
            Some(path) => format!("{} resolves to {path}", d.gssapi.searched_as),
            None => format!("{} does not resolve", d.gssapi.searched_as),
        };
        let _ = writeln!(s, "              GSS: {}; {gssapi}", d.gss.reason);
    }
}

/// `1 layer`, `2 layers`.
pub(crate) fn count(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

/// An argv as a shell would show it.
pub(crate) fn shell_words(argv: &[String]) -> String {
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
