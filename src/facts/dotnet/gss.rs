//! Npgsql's GSS encryption settings: the connection strings of appsettings files and of the
//! config Env, which of them are in force, and whether every one leaves GSS encryption off.

use super::connection_string::parse_connection_string;
use super::json::parse_json;
use crate::facts::Env;
use crate::tree::{FileTree, NodeId};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeSet;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct GssSettings {
    /// `PGGSSENCMODE` from the config Env, as written.
    pub(crate) pggssencmode: Option<String>,
    /// Npgsql-style connection strings found in appsettings files and in the config Env.
    pub(crate) connection_strings: Vec<ConnectionString>,
    /// GSS encryption is off for every connection Npgsql would open that the image shows.
    pub(crate) disabled: bool,
    /// Why `disabled` is what it is, in one sentence.
    pub(crate) reason: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct ConnectionString {
    /// `<file>#<configuration key>` (e.g. `/app/appsettings.json#ConnectionStrings:Default`), or
    /// `env <NAME>`.
    pub(crate) source: String,
    /// The `GSS Encryption Mode` value (quotes removed), `None` when the key is absent.
    pub(crate) gss_encryption_mode: Option<String>,
}

/// Npgsql's `GssEncryptionMode` values (`NpgsqlConnectionStringBuilder.cs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GssMode {
    Disable,
    Prefer,
    Require,
}

impl GssMode {
    /// As `Enum.Parse`/`Enum.TryParse` with `ignoreCase: true` read a name (surrounding white
    /// space ignored). Numeric spellings are not recognised here.
    fn parse(s: &str) -> Option<GssMode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "disable" => Some(GssMode::Disable),
            "prefer" => Some(GssMode::Prefer),
            "require" => Some(GssMode::Require),
            _ => None,
        }
    }
}

/// A connection string found, with what decides whether it is in force.
struct Found {
    public: ConnectionString,
    /// The configuration key an appsettings value sits at (lower case), which an environment
    /// variable for the same key replaces.
    file_key: Option<String>,
}

/// The GSS encryption settings of the connection strings in `appsettings` files and the Env.
pub(super) fn settings(tree: &FileTree, env: &Env, appsettings: &[NodeId]) -> GssSettings {
    let mut found = Vec::new();
    for &id in appsettings {
        let path = tree.path_of(id);
        let Some(json) = tree.content(id).and_then(parse_json) else {
            continue;
        };
        let mut keys = Vec::new();
        collect_json_strings(&json, &mut keys, &mut |key, value| {
            let in_connection_strings = key
                .first()
                .is_some_and(|k| k.eq_ignore_ascii_case("ConnectionStrings"));
            if let Some(pairs) = postgres_connection_string(value, !in_connection_strings) {
                let key = key.join(":");
                found.push(Found {
                    public: ConnectionString {
                        source: format!("{path}#{key}"),
                        gss_encryption_mode: gss_value(&pairs),
                    },
                    file_key: Some(key.to_lowercase()),
                });
            }
        });
    }
    for (name, value) in env.iter() {
        let in_connection_strings = env_config_key(name).starts_with("connectionstrings:");
        if let Some(pairs) = postgres_connection_string(value, !in_connection_strings) {
            found.push(Found {
                public: ConnectionString {
                    source: format!("env {name}"),
                    gss_encryption_mode: gss_value(&pairs),
                },
                file_key: None,
            });
        }
    }

    // The configuration's environment-variable provider is added after the JSON files, so a
    // variable for the same key replaces the file's value (Microsoft.Extensions.Configuration).
    let env_keys: BTreeSet<String> = env.iter().map(|(k, _)| env_config_key(k)).collect();
    let overridden = found
        .iter()
        .filter(|f| f.file_key.as_ref().is_some_and(|k| env_keys.contains(k)))
        .count();
    let in_force: Vec<&ConnectionString> = found
        .iter()
        .filter(|f| !f.file_key.as_ref().is_some_and(|k| env_keys.contains(k)))
        .map(|f| &f.public)
        .collect();
    let pggssencmode = env.get("PGGSSENCMODE").map(str::to_string);
    let (disabled, mut reason) = decide(pggssencmode.as_deref(), &in_force);
    if overridden > 0 {
        reason.push_str(&format!(
            " ({overridden} appsettings value{} replaced by a config Env variable of the same key not counted)",
            if overridden == 1 { "" } else { "s" }
        ));
    }
    GssSettings {
        pggssencmode,
        connection_strings: found.into_iter().map(|f| f.public).collect(),
        disabled,
        reason,
    }
}

/// Whether GSS encryption is off for every connection string in force, and why.
fn decide(pggssencmode: Option<&str>, in_force: &[&ConnectionString]) -> (bool, String) {
    let env_mode = pggssencmode.and_then(GssMode::parse);
    let env_text = match (pggssencmode, env_mode) {
        (None, _) => "PGGSSENCMODE is unset".to_string(),
        (Some(v), None) => {
            format!("PGGSSENCMODE={v} is not a GssEncryptionMode name (Disable, Prefer, Require)")
        }
        (Some(v), Some(_)) => format!("PGGSSENCMODE={v}"),
    };
    if in_force.is_empty() {
        return match env_mode {
            Some(GssMode::Disable) => (
                true,
                format!("{env_text} in the config Env turns GSS encryption off and no connection string in the image sets GssEncryptionMode"),
            ),
            Some(mode) => (false, format!("{env_text} selects {mode:?} and no connection string in the image sets GssEncryptionMode")),
            None => (
                false,
                format!("{env_text} and no connection string in the image sets GssEncryptionMode, so Npgsql 10 uses its default, Prefer"),
            ),
        };
    }
    for c in in_force {
        match explicit(c) {
            Some(v) if GssMode::parse(v) == Some(GssMode::Disable) => {}
            Some(v) => {
                let why = match GssMode::parse(v) {
                    Some(_) if pggssencmode.is_some() => "which takes precedence over PGGSSENCMODE",
                    Some(_) => "which keeps GSS encryption on",
                    None => "which is not Disable, Prefer or Require",
                };
                return (false, format!("{} sets GSS Encryption Mode={v}, {why}", c.source));
            }
            None if env_mode == Some(GssMode::Disable) => {}
            None => {
                let tail = match env_mode {
                    Some(mode) => format!("{env_text} selects {mode:?}"),
                    None => format!("{env_text}, so Npgsql 10 uses its default, Prefer"),
                };
                return (
                    false,
                    format!("{} does not set GssEncryptionMode and {tail}", c.source),
                );
            }
        }
    }
    let n = in_force.len();
    let (all, s) = match n {
        1 => ("the only connection string found".to_string(), "s"),
        _ => (format!("all {n} connection strings found"), ""),
    };
    if in_force.iter().all(|c| explicit(c).is_some()) {
        (true, format!("{all} set{s} GssEncryptionMode=Disable"))
    } else {
        (true, format!("{all} set{s} GssEncryptionMode=Disable or leave{s} it to {env_text}, which turns GSS encryption off"))
    }
}

/// The mode a connection string itself sets; Npgsql removes a key written with an empty value,
/// which leaves the mode to the next tier.
fn explicit(c: &ConnectionString) -> Option<&str> {
    c.gss_encryption_mode.as_deref().filter(|v| !v.trim().is_empty())
}

/// The configuration key an environment variable sets: `__` is the section separator, and the
/// Azure App Service prefixes (`POSTGRESQLCONNSTR_x`, `CUSTOMCONNSTR_x`, …) become
/// `ConnectionStrings:x` (Microsoft.Extensions.Configuration.EnvironmentVariables,
/// `EnvironmentVariablesConfigurationProvider.Load`). Lower case: keys compare ignoring case.
fn env_config_key(name: &str) -> String {
    const PREFIXES: &[&str] = &[
        "MYSQLCONNSTR_",
        "SQLAZURECONNSTR_",
        "SQLCONNSTR_",
        "POSTGRESQLCONNSTR_",
        "APIHUBCONNSTR_",
        "DOCDBCONNSTR_",
        "EVENTHUBCONNSTR_",
        "NOTIFICATIONHUBCONNSTR_",
        "REDISCACHECONNSTR_",
        "SERVICEBUSCONNSTR_",
        "CUSTOMCONNSTR_",
    ];
    let normalize = |k: &str| k.replace("__", ":").to_lowercase();
    for p in PREFIXES {
        if let (Some(head), Some(rest)) = (name.get(..p.len()), name.get(p.len()..)) {
            if head.eq_ignore_ascii_case(p) {
                return format!("connectionstrings:{}", normalize(rest));
            }
        }
    }
    normalize(name)
}

/// Calls `f` with the configuration key path and value of every string in a JSON document
/// (array items are keyed by index, as the JSON configuration provider does).
fn collect_json_strings(v: &Value, key: &mut Vec<String>, f: &mut impl FnMut(&[String], &str)) {
    match v {
        Value::String(s) => f(key, s),
        Value::Object(map) => {
            for (k, child) in map {
                key.push(k.clone());
                collect_json_strings(child, key, f);
                key.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                key.push(i.to_string());
                collect_json_strings(child, key, f);
                key.pop();
            }
        }
        _ => {}
    }
}

/// The pairs of `s` when it reads as a PostgreSQL connection string for Npgsql: it parses and
/// names a `Host` (or its synonym `Server`). `strict` (values outside a `ConnectionStrings`
/// section) also asks for a `;`, so that a lone `Host=x` setting is not taken for one.
fn postgres_connection_string(s: &str, strict: bool) -> Option<Vec<(String, Option<String>)>> {
    if strict && !s.contains(';') {
        return None;
    }
    let pairs = parse_connection_string(s)?;
    pairs
        .iter()
        .any(|(k, _)| k == "host" || k == "server")
        .then_some(pairs)
}

/// The `GSS Encryption Mode` value of a parsed connection string; the last one wins, as the
/// builder sets keys in order. A key without a value reads as an empty string.
fn gss_value(pairs: &[(String, Option<String>)]) -> Option<String> {
    pairs
        .iter()
        .rev()
        .find(|(k, _)| is_gss_key(k))
        .map(|(_, v)| v.clone().unwrap_or_default())
}

/// Npgsql registers the display name and the property name, upper-cased, and looks keywords up
/// upper-cased: `GSS Encryption Mode` and `GssEncryptionMode` in any case, nothing else
/// (`NpgsqlConnectionStringBuilderSourceGenerator`). `key` is already lower case.
fn is_gss_key(key: &str) -> bool {
    key == "gss encryption mode" || key == "gssencryptionmode"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gss_key_spellings() {
        let mode = |s: &str| postgres_connection_string(s, true).and_then(|p| gss_value(&p));
        assert_eq!(
            mode("Host=db;GSS Encryption Mode=Disable").as_deref(),
            Some("Disable")
        );
        assert_eq!(
            mode("Host=db;gssencryptionmode=disable").as_deref(),
            Some("disable")
        );
        assert_eq!(
            mode("Server=db;GSSEncryptionMode='Prefer'").as_deref(),
            Some("Prefer")
        );
        // The last spelling given wins.
        assert_eq!(
            mode("Host=db;GssEncryptionMode=Disable;Gss Encryption Mode=Require").as_deref(),
            Some("Require")
        );
        // Not keys Npgsql knows for this setting.
        assert_eq!(mode("Host=db;gssencmode=disable"), None);
        assert_eq!(mode("Host=db;Gss  Encryption Mode=Disable"), None);
        // Not PostgreSQL connection strings at all.
        assert!(postgres_connection_string("Data Source=app.db;Cache=Shared", true).is_none());
        assert!(postgres_connection_string("Host=db", true).is_none());
        assert!(postgres_connection_string("Host=db", false).is_some());
        assert!(postgres_connection_string("localhost:6379,abortConnect=false", false).is_none());
    }

    #[test]
    fn connection_string_wins_over_pggssencmode() {
        let cs = |source: &str, mode: Option<&str>| ConnectionString {
            source: source.into(),
            gss_encryption_mode: mode.map(str::to_string),
        };
        let (a, b, c) = (
            cs("env A", None),
            cs("env B", Some("Disable")),
            cs("env C", Some("prefer")),
        );
        // The variable covers strings that say nothing, in any case.
        assert!(decide(Some("disable"), &[&a]).0);
        assert!(decide(Some("DISABLE"), &[&a, &b]).0);
        assert!(decide(Some(" Disable "), &[]).0);
        // A string that says otherwise wins over the variable.
        let (off, why) = decide(Some("disable"), &[&a, &c]);
        assert!(!off);
        assert!(why.contains("env C") && why.contains("precedence"), "{why}");
        // Every string setting Disable needs no variable.
        let (off, why) = decide(None, &[&b]);
        assert!(off, "{why}");
        // A string that says nothing falls back to Prefer without the variable.
        let (off, why) = decide(None, &[&a, &b]);
        assert!(!off && why.contains("env A") && why.contains("Prefer"), "{why}");
        // A value Npgsql does not accept, or an empty one, turns nothing off.
        assert!(!decide(Some("off"), &[]).0);
        assert!(!decide(Some("disable"), &[&cs("env D", Some("Disabled"))]).0);
        assert!(decide(Some("disable"), &[&cs("env E", Some(""))]).0);
        assert!(!decide(None, &[&cs("env E", Some(""))]).0);
        assert!(!decide(None, &[]).0);
    }

    #[test]
    fn env_keys_map_to_configuration_keys() {
        assert_eq!(
            env_config_key("ConnectionStrings__Default"),
            "connectionstrings:default"
        );
        assert_eq!(
            env_config_key("postgresqlconnstr_Main__X"),
            "connectionstrings:main:x"
        );
        assert_eq!(env_config_key("CUSTOMCONNSTR_db"), "connectionstrings:db");
        assert_eq!(env_config_key("SQLCONNSTR_db"), "connectionstrings:db");
        assert_eq!(env_config_key("Jobs__Targets__1"), "jobs:targets:1");
        assert_eq!(env_config_key("É"), "é");
    }
}
