//! The .NET garbage collector's settings as the runtime applies them: environment variables and
//! each app's `*.runtimeconfig.json` `configProperties`.
//!
//! How the runtime reads them (dotnet/runtime, checked in the source):
//! * Names: `DOTNET_<name>`, then `COMPlus_<name>` (`clrconfignocache.h`: "Priority order is
//!   DOTNET_ and then COMPlus_"). On Linux the lookup is the PAL's environment search, a byte
//!   comparison: names are case-sensitive (`DOTNET_GCHeapHardLimit`, not `DOTNET_GCHEAPHARDLIMIT`).
//! * Environment values are hexadecimal, with or without `0x` (`GCToEEInterface::GetIntConfigValue`
//!   parses them with `u16_strtoui64(value, &end, 16)`; a value with no hex digit at its start
//!   is "not set" and the default applies). dotnet/docs `core/runtime-config/garbage-collector.md`:
//!   "use decimal notation for settings in the runtimeconfig.json file and hexadecimal notation
//!   for environment variable settings".
//! * An environment variable that is set wins over runtimeconfig.json: the public key
//!   (`System.GC.HeapHardLimit`) is read only when the private one is not specified.
//! * runtimeconfig.json values are decimal (`Configuration::GetKnobULONGLONGValue`, radix 0:
//!   `0x` reads hex, a leading `0` octal); booleans are `true`/`false`.
//! * `GCHeapHardLimitPercent` counts only from 1 to 99 (`gc_heap::compute_hard_limit`:
//!   `(percent_of_mem > 0) && (percent_of_mem < 100)`); otherwise no limit is configured and in a
//!   container the default, 75 % of the memory limit, applies.
//! * `GCDynamicAdaptationMode` (DATAS) defaults to 0 on .NET 8 and to 1 from .NET 9
//!   (learn.microsoft.com/dotnet/standard/garbage-collection/datas).

use super::apps::{DotnetApp, ASPNETCORE_APP, NETCORE_APP};
use super::json::parse_json;
use crate::facts::Env;
use crate::tree::FileTree;
use serde::Serialize;
use serde_json::Value;

/// The GC settings memlint reads: (name after the prefix, runtimeconfig.json property).
pub(crate) const SETTINGS: &[(&str, Option<&str>)] = &[
    ("gcServer", Some("System.GC.Server")),
    ("GCDynamicAdaptationMode", Some("System.GC.DynamicAdaptationMode")),
    ("GCHeapCount", Some("System.GC.HeapCount")),
    ("GCHeapAffinitizeMask", Some("System.GC.HeapAffinitizeMask")),
    ("GCHeapHardLimit", Some("System.GC.HeapHardLimit")),
    ("GCHeapHardLimitPercent", Some("System.GC.HeapHardLimitPercent")),
    ("GCHeapHardLimitSOH", Some("System.GC.HeapHardLimitSOH")),
    ("GCHeapHardLimitLOH", Some("System.GC.HeapHardLimitLOH")),
    ("GCHeapHardLimitPOH", Some("System.GC.HeapHardLimitPOH")),
    ("GCgen0size", None),
];

/// The numeric settings whose environment value is hexadecimal and often written as decimal.
pub(crate) const NUMERIC: &[&str] = &[
    "GCHeapHardLimit",
    "GCHeapHardLimitPercent",
    "GCHeapHardLimitSOH",
    "GCHeapHardLimitLOH",
    "GCHeapHardLimitPOH",
    "GCHeapCount",
    "GCHeapAffinitizeMask",
    "GCgen0size",
];

/// The prefixes in the runtime's order of priority.
pub(crate) const PREFIXES: [&str; 2] = ["DOTNET_", "COMPlus_"];

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct GcFacts {
    /// Every GC variable of [`SETTINGS`] the environment sets and the runtime reads (the
    /// `DOTNET_` one when both prefixes are set).
    pub(crate) env: Vec<GcEnvVar>,
    /// The effective settings of each app that has a runtimeconfig.json.
    pub(crate) apps: Vec<AppGc>,
    /// The settings of [`SETTINGS`] a script sets in a way memlint cannot work out, each with
    /// why: (setting, why). A known `DOTNET_` value settles a setting whatever `COMPlus_` says.
    #[serde(skip)]
    pub(crate) undecided: Vec<(String, String)>,
}

impl GcFacts {
    /// Why setting `name` (`GCHeapCount`) is not known, when a script sets it in a way
    /// memlint cannot work out.
    pub(crate) fn undecided(&self, name: &str) -> Option<&str> {
        self.undecided
            .iter()
            .find(|(s, _)| s == name)
            .map(|(_, why)| why.as_str())
    }
}

/// The settings whose variables a script sets in a way memlint cannot work out.
fn undecided_settings(env: &Env) -> Vec<(String, String)> {
    SETTINGS
        .iter()
        .filter_map(|(setting, _)| {
            let [first, second] = PREFIXES.map(|p| format!("{p}{setting}"));
            if env.get(&first).is_some() {
                return None;
            }
            let why = env.first_undecided(&[&first, &second])?;
            Some((setting.to_string(), why))
        })
        .collect()
}

/// A GC environment variable and how the runtime reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct GcEnvVar {
    /// `GCHeapHardLimit`.
    pub(crate) setting: String,
    /// `DOTNET_GCHeapHardLimit`.
    pub(crate) variable: String,
    pub(crate) value: String,
    /// Where the value comes from: `image env`.
    pub(crate) source: String,
    /// The number the runtime reads (hexadecimal); `None` when it reads none and the default
    /// applies.
    pub(crate) read_as: Option<u64>,
    /// The value read as decimal, when it is written as a plausible decimal number that reads
    /// differently in hexadecimal (see [`decimal_reading`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) decimal_reading: Option<u64>,
}

impl GcEnvVar {
    /// `DOTNET_GCHeapHardLimit=100000000`.
    pub(crate) fn entry(&self) -> String {
        format!("{}={}", self.variable, self.value)
    }
}

/// One effective setting and what decided it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct Setting {
    pub(crate) value: u64,
    /// `env DOTNET_gcServer=1 (image env)`, `/app/Api.runtimeconfig.json System.GC.Server`, or
    /// `the .NET 8 default`.
    pub(crate) source: String,
    /// The image file that decided, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) path: Option<String>,
}

/// The GC an app runs with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct AppGc {
    pub(crate) app: String,
    pub(crate) runtimeconfig: String,
    /// The app runs on ASP.NET Core (`Microsoft.AspNetCore.App` among its frameworks).
    pub(crate) aspnetcore: bool,
    /// The .NET major version its runtimeconfig.json asks for (or includes).
    pub(crate) runtime_major: Option<u32>,
    /// 1: Server GC; 0: Workstation GC.
    pub(crate) server: Setting,
    /// 1: DATAS on; 0: off.
    pub(crate) dynamic_adaptation: Setting,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) heap_count: Option<Setting>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) heap_affinitize_mask: Option<Setting>,
    /// Bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) heap_hard_limit: Option<Setting>,
    /// Only 1–99 counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) heap_hard_limit_percent: Option<Setting>,
    /// Bytes, for the small object heap (with the LOH one, replaces `heap_hard_limit`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) heap_hard_limit_soh: Option<Setting>,
}

/// How the GC caps an app's heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeapCap<'a> {
    /// `GCHeapHardLimit`, in bytes.
    Fixed(&'a Setting),
    /// `GCHeapHardLimitPercent` of the limit (only 1–99 counts; the runtime ignores the rest).
    Percent(&'a Setting),
    /// Neither: under a memory limit the runtime caps the heap at 75 % of it (at least
    /// 20 MiB); without one it is not capped.
    Default,
}

/// The share of a container's limit the GC's heap takes by default (`GCHeapHardLimit` unset).
pub(crate) const DEFAULT_HARD_LIMIT_PERCENT: u64 = 75;
/// The least the default hard limit is (20 MiB).
const DEFAULT_HARD_LIMIT_FLOOR: u64 = 20 << 20;

impl HeapCap<'_> {
    /// The cap in bytes under a limit of `limit` bytes, when it can be told.
    pub(crate) fn bytes(&self, limit: Option<u64>) -> Option<u64> {
        match self {
            HeapCap::Fixed(s) => Some(s.value),
            HeapCap::Percent(p) => limit.map(|l| (u128::from(l) * u128::from(p.value) / 100) as u64),
            HeapCap::Default => {
                limit.map(|l| (l / 100 * DEFAULT_HARD_LIMIT_PERCENT).max(DEFAULT_HARD_LIMIT_FLOOR))
            }
        }
    }

    /// `GCHeapHardLimit 0x80000000 (env DOTNET_GCHeapHardLimit=… (image env))`.
    pub(crate) fn describe(&self) -> String {
        match self {
            HeapCap::Fixed(s) => format!("GCHeapHardLimit {:#x} ({})", s.value, s.source),
            HeapCap::Percent(p) => format!("GCHeapHardLimitPercent {:#x} = {} % ({})", p.value, p.value, p.source),
            HeapCap::Default => format!(
                "no GCHeapHardLimit: {DEFAULT_HARD_LIMIT_PERCENT} % of the container's limit (the runtime's default)"
            ),
        }
    }
}

impl AppGc {
    /// How the GC caps this app's heap.
    pub(crate) fn heap_cap(&self) -> HeapCap<'_> {
        if let Some(s) = &self.heap_hard_limit {
            return HeapCap::Fixed(s);
        }
        match self
            .heap_hard_limit_percent
            .as_ref()
            .filter(|p| (1..100).contains(&p.value))
        {
            Some(p) => HeapCap::Percent(p),
            None => HeapCap::Default,
        }
    }

    /// Whether a heap count, affinity mask or hard limit bounds the heaps the GC creates or
    /// their size.
    pub(crate) fn bounded(&self) -> Option<&Setting> {
        [
            &self.heap_count,
            &self.heap_affinitize_mask,
            &self.heap_hard_limit,
            &self.heap_hard_limit_soh,
        ]
        .into_iter()
        .flatten()
        .find(|s| s.value > 0)
        .or(self
            .heap_hard_limit_percent
            .as_ref()
            .filter(|s| (1..100).contains(&s.value)))
    }
}

/// The environment's GC variables. The one place GC settings are read from the environment:
/// `source` names where the environment comes from.
fn env_vars(env: &Env, source: &str) -> Vec<GcEnvVar> {
    let mut out = Vec::new();
    for (setting, _) in SETTINGS {
        let Some((variable, value)) = PREFIXES.iter().find_map(|p| {
            let variable = format!("{p}{setting}");
            env.get(&variable).map(|v| (variable, v.to_string()))
        }) else {
            continue;
        };
        let numeric = NUMERIC.contains(setting);
        out.push(GcEnvVar {
            setting: setting.to_string(),
            variable,
            read_as: read_hex(&value),
            decimal_reading: if numeric {
                decimal_reading(setting, &value)
            } else {
                None
            },
            value,
            source: source.to_string(),
        });
    }
    out
}

/// What `strtoull(value, &end, 16)` reads, as the runtime does: leading white space, an
/// optional sign, an optional `0x`, then hex digits up to the first other character. `None`
/// when no digit is read (the runtime then treats the variable as not set) or on overflow.
pub(crate) fn read_hex(value: &str) -> Option<u64> {
    let s = value.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_hexdigit).count();
    let s = match s.get(..2) {
        Some(p) if p.eq_ignore_ascii_case("0x") && digits(&s[2..]) > 0 => &s[2..],
        _ => s,
    };
    let n = digits(s);
    if n == 0 {
        return None;
    }
    let v = u64::from_str_radix(&s[..n], 16).ok()?;
    Some(if negative { v.wrapping_neg() } else { v })
}

/// The decimal number `value` plausibly means: written with the digits 0–9 only (no `0x`, no
/// letter), at least 10 so that its hexadecimal reading differs, and for a percentage from 1 to
/// 99. `None` otherwise: `C800000` or `0xC800000` is hexadecimal, and `8` reads the same
/// either way.
pub(crate) fn decimal_reading(setting: &str, value: &str) -> Option<u64> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: u64 = value.parse().ok()?;
    if v < 10 {
        return None;
    }
    if setting.ends_with("Percent") && v > 99 {
        return None;
    }
    Some(v)
}

/// A runtimeconfig.json property as the runtime reads it: a JSON number (decimal), or a string
/// read with radix 0 (`0x` hex, a leading `0` octal, else decimal); `true`/`false` for booleans.
fn property_value(v: &Value) -> Option<u64> {
    match v {
        Value::Bool(b) => Some(u64::from(*b)),
        Value::Number(n) => n.as_u64(),
        Value::String(s) => {
            let s = s.trim();
            if s.eq_ignore_ascii_case("true") {
                return Some(1);
            }
            if s.eq_ignore_ascii_case("false") {
                return Some(0);
            }
            if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                return u64::from_str_radix(hex, 16).ok();
            }
            if s.len() > 1 && s.starts_with('0') {
                return u64::from_str_radix(&s[1..], 8).ok();
            }
            s.parse().ok()
        }
        _ => None,
    }
}

/// The .NET major version of the app's `Microsoft.NETCore.App` framework, else of its `tfm`.
fn runtime_major(app: &DotnetApp) -> Option<u32> {
    let from_framework = app.frameworks.iter().find_map(|f| {
        let version = f.strip_prefix(NETCORE_APP)?.trim();
        version.split('.').next()?.parse().ok()
    });
    from_framework.or_else(|| {
        let tfm = app.target_framework.as_deref()?;
        let v = tfm
            .strip_prefix("netcoreapp")
            .or_else(|| tfm.strip_prefix("net"))?;
        v.split('.').next()?.parse().ok()
    })
}

pub(super) fn derive(tree: &FileTree, env: &Env, apps: &[DotnetApp]) -> GcFacts {
    let undecided = undecided_settings(env);
    let env = env_vars(env, "image env");
    let mut out = Vec::new();
    for app in apps {
        let Some(path) = &app.runtimeconfig else {
            continue;
        };
        let props = tree
            .lookup(path)
            .ok()
            .flatten()
            .and_then(|id| tree.content(id))
            .and_then(parse_json)
            .and_then(|v| v.pointer("/runtimeOptions/configProperties").cloned());
        let major = runtime_major(app);
        // The environment wins when the runtime reads a value from it; a variable it cannot
        // read leaves the default (runtimeconfig.json is not consulted then).
        let effective = |setting: &str| -> Option<Setting> {
            if let Some(var) = env.iter().find(|v| v.setting == setting) {
                return Some(match var.read_as {
                    Some(value) => Setting {
                        value,
                        source: format!("env {} ({})", var.entry(), var.source),
                        path: None,
                    },
                    None => Setting {
                        value: default_of(setting, major),
                        source: format!(
                            "the default: env {} is not a hexadecimal number ({})",
                            var.entry(),
                            var.source
                        ),
                        path: None,
                    },
                });
            }
            let property = SETTINGS.iter().find(|(s, _)| *s == setting)?.1?;
            let value = props.as_ref()?.get(property).and_then(property_value)?;
            Some(Setting {
                value,
                source: format!("{path} {property}"),
                path: Some(path.clone()),
            })
        };
        let or_default = |setting: &str| {
            effective(setting).unwrap_or_else(|| Setting {
                value: default_of(setting, major),
                source: match major {
                    Some(m) => format!("the .NET {m} default"),
                    None => "the default".to_string(),
                },
                path: None,
            })
        };
        out.push(AppGc {
            app: app.name.clone(),
            runtimeconfig: path.clone(),
            aspnetcore: app
                .frameworks
                .iter()
                .any(|f| f.split_whitespace().next() == Some(ASPNETCORE_APP)),
            runtime_major: major,
            server: or_default("gcServer"),
            dynamic_adaptation: or_default("GCDynamicAdaptationMode"),
            heap_count: effective("GCHeapCount"),
            heap_affinitize_mask: effective("GCHeapAffinitizeMask"),
            heap_hard_limit: effective("GCHeapHardLimit"),
            heap_hard_limit_percent: effective("GCHeapHardLimitPercent"),
            heap_hard_limit_soh: effective("GCHeapHardLimitSOH"),
        });
    }
    GcFacts {
        env,
        apps: out,
        undecided,
    }
}

/// The runtime's default: DATAS is on from .NET 9 (off on 8, and absent before); the rest 0.
fn default_of(setting: &str, major: Option<u32>) -> u64 {
    match setting {
        "GCDynamicAdaptationMode" => u64::from(major.is_some_and(|m| m >= 9)),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_values_are_read_as_the_runtime_reads_them() {
        assert_eq!(read_hex("100000000"), Some(0x1_0000_0000));
        assert_eq!(read_hex("0x5F5E100"), Some(100_000_000));
        assert_eq!(read_hex("0X5f5e100"), Some(100_000_000));
        assert_eq!(read_hex("C800000"), Some(0xC80_0000));
        assert_eq!(read_hex("64"), Some(100));
        assert_eq!(read_hex("  10"), Some(16));
        // strtoull stops at the first other character.
        assert_eq!(read_hex("100MB"), Some(0x100));
        assert_eq!(read_hex("0x"), Some(0));
        assert_eq!(read_hex("0xg"), Some(0));
        assert_eq!(read_hex(""), None);
        assert_eq!(read_hex("512Mi"), Some(0x512));
        assert_eq!(read_hex("true"), None);
        assert_eq!(read_hex("12345678901234567890"), None, "overflow");
    }

    #[test]
    fn plausible_decimals() {
        assert_eq!(decimal_reading("GCHeapHardLimit", "100000000"), Some(100_000_000));
        assert_eq!(decimal_reading("GCHeapHardLimitPercent", "64"), Some(64));
        assert_eq!(decimal_reading("GCHeapCount", "12"), Some(12));
        // Reads the same either way.
        assert_eq!(decimal_reading("GCHeapCount", "8"), None);
        assert_eq!(decimal_reading("GCHeapCount", "09"), None);
        // Hexadecimal already.
        assert_eq!(decimal_reading("GCHeapHardLimit", "0x5F5E100"), None);
        assert_eq!(decimal_reading("GCHeapHardLimit", "C800000"), None);
        // No percentage reads 100 or more.
        assert_eq!(decimal_reading("GCHeapHardLimitPercent", "150"), None);
        assert_eq!(decimal_reading("GCHeapHardLimit", " 100"), None);
        assert_eq!(decimal_reading("GCHeapHardLimit", ""), None);
    }

    #[test]
    fn property_values_are_decimal() {
        assert_eq!(property_value(&serde_json::json!(100000000)), Some(100_000_000));
        assert_eq!(property_value(&serde_json::json!(true)), Some(1));
        assert_eq!(property_value(&serde_json::json!("false")), Some(0));
        assert_eq!(property_value(&serde_json::json!("0x10")), Some(16));
        assert_eq!(property_value(&serde_json::json!("010")), Some(8));
        assert_eq!(property_value(&serde_json::json!("64")), Some(64));
        assert_eq!(property_value(&serde_json::json!(-1)), None);
        assert_eq!(property_value(&serde_json::json!([1])), None);
    }

    #[test]
    fn dotnet_prefix_wins_and_names_are_case_sensitive() {
        let env = Env::from_pairs([
            "COMPlus_GCHeapCount=c",
            "DOTNET_GCHeapCount=10",
            "DOTNET_GCHEAPHARDLIMIT=100000000",
            "COMPlus_GCgen0size=4000000",
        ]);
        let vars = env_vars(&env, "image env");
        let got: Vec<(&str, Option<u64>, Option<u64>)> = vars
            .iter()
            .map(|v| (v.variable.as_str(), v.read_as, v.decimal_reading))
            .collect();
        assert_eq!(
            got,
            [
                ("DOTNET_GCHeapCount", Some(16), Some(10)),
                ("COMPlus_GCgen0size", Some(0x400_0000), Some(4_000_000)),
            ]
        );
    }
}
