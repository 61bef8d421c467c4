//! The `GOMEMLIMIT` and `GOGC` a Go program starts with, worked out once for every rule and for
//! the memory budget: the environment (image `ENV`, entrypoint-script exports with script and
//! line, the manifest's env entry), unless an `env` step of the image's own command sets or
//! clears it; the value as the runtime reads it, and for a value it refuses, what the user may
//! have meant (both readings where a value reads two ways).

use super::{read_gomemlimit, MemLimit};
use crate::facts::entrypoint::{Entrypoint, StepKind};
use crate::facts::env::{Origin, Value};
use crate::facts::Env;

/// The variable.
pub(crate) const KEY: &str = "GOMEMLIMIT";

/// Where the value the program gets comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The config's `Env`.
    Image,
    /// An entrypoint script's export (or its `exec env NAME=VALUE`).
    Script { script: String, line: u32 },
    /// `env GOMEMLIMIT=… prog` in the image's Entrypoint/Cmd.
    Command { argv: String },
    /// The Kubernetes manifest's `env` of the container (`lint --k8s`).
    Manifest { line: u32 },
}

impl Source {
    /// `set by the image's ENV`, `exported by /start line 3`…
    pub(crate) fn describe(&self) -> String {
        match self {
            Source::Image => "set by the image's ENV".to_string(),
            Source::Script { script, line } => format!("exported by {script} line {line}"),
            Source::Command { argv } => format!("passed by the image's command `{argv}`"),
            Source::Manifest { line } => format!("set by the manifest's env at line {line}"),
        }
    }
}

/// The `GOMEMLIMIT` the entrypoint's program starts with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum GoMemLimit {
    /// Not set (or cleared by an `env` step): no soft limit.
    #[default]
    Unset,
    /// Set: the value as written, where, and what the runtime makes of it.
    Known {
        value: String,
        source: Source,
        read: MemLimit,
        /// For a value the runtime refuses, what it may have meant, in the runtime's syntax:
        /// one reading, two where it reads two ways, none where nothing sensible reads it.
        meant: Vec<Reading>,
        /// `GOMEMLIMIT=512MiB`, with `(exported by SCRIPT line N)` when a script set it: for
        /// evidence.
        entry: String,
    },
    /// Set in a way memlint cannot work out.
    Undecided { why: String },
}

impl GoMemLimit {
    /// The soft limit in bytes, when one is set and the runtime takes it.
    pub(crate) fn bytes(&self) -> Option<u64> {
        match self {
            GoMemLimit::Known {
                read: MemLimit::Bytes(n),
                ..
            } => u64::try_from(*n).ok(),
            _ => None,
        }
    }
}

/// The `GOMEMLIMIT` the entrypoint's program starts with: the environment (image `ENV`,
/// overlaid with what scripts export), unless an `env` step of the image's own command (its
/// exec form, or the `sh -c` of its shell form) sets or clears it. An `env` inside a script is
/// one of the script's exports already, with its line.
pub(crate) fn derive(env: &Env, entry: &Entrypoint) -> GoMemLimit {
    let steps = &entry.steps;
    let first_script = steps
        .iter()
        .position(|s| s.kind == StepKind::ShellScript)
        .unwrap_or(steps.len());
    let by_command = steps[..first_script]
        .iter()
        .rev()
        .filter(|s| matches!(&s.kind, StepKind::Wrapper(w) if w == "env"))
        .find_map(|s| env_step(&s.argv).map(|e| (e, s.argv.join(" "))));
    // A script on the way runs after the command's `env` and exports over it.
    let set_by_script = env.var(KEY).is_some_and(|v| v.script().is_some());
    match by_command.filter(|_| !set_by_script) {
        Some((EnvStep::Clears, _)) => return GoMemLimit::Unset,
        // Words of a `sh -c` string memlint has not expanded.
        Some((EnvStep::Sets(v), argv)) if v.contains(['$', '`']) => {
            return GoMemLimit::Undecided {
                why: format!("{KEY} is set by the image's command `{argv}`, which memlint cannot work out"),
            }
        }
        Some((EnvStep::Sets(value), argv)) => {
            return GoMemLimit::Known {
                read: read_gomemlimit(&value),
                meant: meant(&value),
                entry: format!("{KEY}={value} (passed by the image's command `{argv}`)"),
                source: Source::Command { argv },
                value,
            }
        }
        None => {}
    }
    let Some(var) = env.var(KEY) else {
        return GoMemLimit::Unset;
    };
    match &var.value {
        Value::Set(v) => GoMemLimit::Known {
            value: v.clone(),
            read: read_gomemlimit(v),
            meant: meant(v),
            entry: env.entry(KEY).unwrap_or_else(|| format!("{KEY}={v}")),
            source: match &var.origin {
                Origin::Image => Source::Image,
                Origin::Manifest { line } => Source::Manifest { line: *line },
                Origin::Script { script, line } => Source::Script {
                    script: script.to_string(),
                    line: *line,
                },
            },
        },
        Value::Undecided { .. } => GoMemLimit::Undecided {
            why: env.entry(KEY).unwrap_or_else(|| format!("{KEY} is undecided")),
        },
        Value::Unset => GoMemLimit::Unset,
    }
}

/// What a value the runtime refuses may have meant; nothing for one it takes.
fn meant(value: &str) -> Vec<Reading> {
    match read_gomemlimit(value) {
        MemLimit::Malformed => readings(value),
        _ => Vec::new(),
    }
}

/// What an `env` step of the command does to `GOMEMLIMIT`.
enum EnvStep {
    /// `env GOMEMLIMIT=VALUE …`.
    Sets(String),
    /// `env -i …`, `env - …`, `env -u GOMEMLIMIT …`: the program gets none.
    Clears,
}

/// Reads `env [-i] [-u NAME] [NAME=VALUE]… prog` for `GOMEMLIMIT` (coreutils' options).
fn env_step(argv: &[String]) -> Option<EnvStep> {
    let mut out = None;
    let mut words = argv.iter().skip(1).peekable();
    while let Some(w) = words.next() {
        match w.as_str() {
            "-i" | "-" | "--ignore-environment" => out = Some(EnvStep::Clears),
            "-u" | "--unset" => {
                if words.next().is_some_and(|n| n == KEY) {
                    out = Some(EnvStep::Clears);
                }
            }
            o if o.starts_with("--unset=") => {
                if o == format!("--unset={KEY}") {
                    out = Some(EnvStep::Clears);
                }
            }
            o if o.starts_with('-') => {}
            a if a.contains('=') => {
                if let Some(v) = a.strip_prefix(KEY).and_then(|r| r.strip_prefix('=')) {
                    out = Some(EnvStep::Sets(v.to_string()));
                }
            }
            _ => break,
        }
    }
    out
}

/// A value the user may have meant, in the runtime's syntax, and how it reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reading {
    /// In the runtime's syntax (`512MiB`, `1000000000`).
    pub(crate) value: String,
    /// `400 MiB as Docker and the JVM read 400m`.
    pub(crate) meaning: String,
}

const BINARY: [&str; 5] = ["", "KiB", "MiB", "GiB", "TiB"];

/// The values `value` may have meant: one when that is unambiguous (`512Mi` is 512 MiB, a
/// Kubernetes quantity; ` 512MiB` has a blank too many), two when it depends on who reads it
/// (`1G` is 1 GiB to Docker and the JVM, 10⁹ bytes to Kubernetes), none when nothing sensible
/// reads it (`-1`, `lots`, past 8 EiB).
pub(crate) fn readings(value: &str) -> Vec<Reading> {
    let trimmed = value.trim().trim_matches(|c| c == '"' || c == '\'').trim();
    if trimmed != value && read_gomemlimit(trimmed) != MemLimit::Malformed {
        return vec![Reading {
            value: trimmed.to_string(),
            meaning: format!("{trimmed} without the blanks or quotes around it"),
        }];
    }
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = (&trimmed[..split], trimmed[split..].trim());
    let Some((mantissa, scale)) = decimal(number) else {
        return Vec::new();
    };
    let lower = unit.to_ascii_lowercase();
    let binary_power = |u: &str| -> Option<u32> {
        Some(match u {
            "" | "b" => 0,
            "k" | "kb" | "ki" | "kib" => 1,
            "m" | "mb" | "mi" | "mib" => 2,
            "g" | "gb" | "gi" | "gib" => 3,
            "t" | "tb" | "ti" | "tib" => 4,
            _ => return None,
        })
    };
    let Some(power) = binary_power(&lower) else {
        return Vec::new();
    };
    let binary = sized(
        mantissa,
        scale,
        1024u128.pow(power),
        number,
        Some(BINARY[power as usize]),
    );
    let unambiguous = power == 0 || lower.ends_with('i') || lower.ends_with("ib");
    if unambiguous {
        return binary
            .map(|v| Reading {
                meaning: format!("{v}, as {value} is meant"),
                value: v,
            })
            .into_iter()
            .collect();
    }
    // Docker's `--memory` takes `512m`, `512MB`, `512mib` alike; the JVM's `-Xmx` only one
    // letter.
    let jvm = if unit.len() == 1 {
        format!(" and the JVM (`-Xmx{trimmed}`)")
    } else {
        String::new()
    };
    let mut out: Vec<Reading> = binary
        .map(|v| Reading {
            meaning: format!(
                "{} {} as Docker (`--memory {trimmed}`){jvm} read {trimmed}",
                number, BINARY[power as usize]
            ),
            value: v,
        })
        .into_iter()
        .collect();
    // Powers of 1000: a Kubernetes quantity for `k`, `M`, `G`, `T` (where `m` is milli and
    // `g`, `MB` are not quantities at all), an SI size otherwise.
    if unit != "m" {
        if let Some(v) = sized(mantissa, scale, 1000u128.pow(power), number, None) {
            let reader = if matches!(unit, "k" | "M" | "G" | "T") {
                "a Kubernetes quantity"
            } else {
                "an SI size (powers of 1000)"
            };
            out.push(Reading {
                meaning: format!("{v} bytes as {reader} reads {trimmed}"),
                value: v,
            });
        }
    }
    out
}

/// `1.5` → (15, 10).
fn decimal(number: &str) -> Option<(u128, u128)> {
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() || frac.contains('.') || frac.len() > 9 || whole.len() > 20 {
        return None;
    }
    let digits = format!("{whole}{frac}");
    Some((digits.parse().ok()?, 10u128.pow(frac.len() as u32)))
}

/// `mantissa / scale × unit` in the runtime's syntax: with `suffix` when the number was whole
/// (`512MiB`), else in the largest binary unit that holds it whole (`1.5GiB` → `1536MiB`),
/// else in bytes; with no suffix (a decimal reading) always in bytes; `None` past the runtime's range or below one byte.
fn sized(mantissa: u128, scale: u128, unit: u128, number: &str, suffix: Option<&str>) -> Option<String> {
    let bytes = mantissa.checked_mul(unit)? / scale;
    if bytes == 0 && mantissa != 0 || bytes > i64::MAX as u128 {
        return None;
    }
    let out = if let Some(suffix) = suffix.filter(|s| scale == 1 && !s.is_empty()) {
        format!("{number}{suffix}")
    } else if suffix.is_none() {
        bytes.to_string()
    } else {
        (1..=4u32)
            .rev()
            .find(|p| bytes.is_multiple_of(1024u128.pow(*p)) && bytes > 0)
            .map(|p| format!("{}{}", bytes / 1024u128.pow(p), BINARY[p as usize]))
            .unwrap_or_else(|| bytes.to_string())
    };
    (read_gomemlimit(&out) != MemLimit::Malformed).then_some(out)
}

/// The readings in words, when the value reads more than one way.
pub(crate) fn say_readings(value: &str, found: &[Reading]) -> Option<String> {
    let unit_m = value.trim().ends_with('m') && !value.trim().ends_with("im");
    match found {
        [one] if unit_m => Some(format!(
            "{value} is {} (as a Kubernetes quantity it would be thousandths of a byte)",
            one.meaning
        )),
        [a, b] => Some(format!("{value} is {}, or {}", a.meaning, b.meaning)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(v: &str) -> Vec<String> {
        readings(v).into_iter().map(|r| r.value).collect()
    }

    #[test]
    fn what_a_malformed_value_meant() {
        assert_eq!(values("512Mi"), ["512MiB"]);
        assert_eq!(values("1Gi"), ["1GiB"]);
        assert_eq!(values("512mib"), ["512MiB"]);
        assert_eq!(values(" 512MiB"), ["512MiB"]);
        assert_eq!(values("\"512MiB\""), ["512MiB"]);
        assert_eq!(values("512 MiB"), ["512MiB"]);
        assert_eq!(values("1.5GiB"), ["1536MiB"]);
        assert_eq!(values("1.5Gi"), ["1536MiB"]);
        assert_eq!(values("400m"), ["400MiB"]);
        assert_eq!(values("1G"), ["1GiB", "1000000000"]);
        assert_eq!(values("512MB"), ["512MiB", "512000000"]);
        assert_eq!(values("2k"), ["2KiB", "2000"]);
        assert!(values("-1").is_empty());
        assert!(values("lots").is_empty());
        assert!(values("8388608Ti").is_empty());
        assert!(values("1PiB").is_empty());
        // Every proposed value is one the runtime accepts.
        for v in ["512Mi", "400m", "1G", "1.5GiB", "0.3GiB", "2k", " 1 Gi "] {
            for r in readings(v) {
                assert!(
                    matches!(read_gomemlimit(&r.value), MemLimit::Bytes(_)),
                    "{v} → {}",
                    r.value
                );
            }
        }
    }

    #[test]
    fn env_steps_set_or_clear() {
        let argv = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        assert!(
            matches!(env_step(&argv("env GOMEMLIMIT=1G /app/server")), Some(EnvStep::Sets(v)) if v == "1G")
        );
        assert!(matches!(
            env_step(&argv("env -i PATH=/bin /app/server")),
            Some(EnvStep::Clears)
        ));
        assert!(matches!(
            env_step(&argv("env -u GOMEMLIMIT /app/server")),
            Some(EnvStep::Clears)
        ));
        assert!(matches!(
            env_step(&argv("env --unset=GOMEMLIMIT /app/server")),
            Some(EnvStep::Clears)
        ));
        assert!(env_step(&argv("env -u OTHER A=1 /app/server")).is_none());
        // After the program's name, words are its own.
        assert!(env_step(&argv("env /app/server GOMEMLIMIT=1G")).is_none());
    }

    #[test]
    fn readings_said() {
        let said = say_readings("400m", &readings("400m")).unwrap_or_default();
        assert!(said.contains("400 MiB as Docker"), "{said}");
        assert!(said.contains("Kubernetes"), "{said}");
        assert!(say_readings("512Mi", &readings("512Mi")).is_none());
    }
}
