//! `.memlint.toml`: ignores (global, or scoped to an image or to an image path the finding
//! names, with a reason and an optional expiry), per-rule severity, the images the pre-push
//! hook lints, and `fail-on`. Validated once into [`Settings`]; mistakes point at the key in
//! the file.

use crate::error::ConfigError;
use crate::finding::{Evidence, FailOn, Severity};
use crate::rules;
use crate::tree::Limits;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::Spanned;

pub(crate) const FILE_NAME: &str = ".memlint.toml";

fn limits_help() -> String {
    format!(
        "the limits are {}; sizes are numbers with an optional K, M, G or T",
        Limits::NAMES.join(", ")
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawConfig {
    #[serde(default)]
    ignore: Vec<Spanned<String>>,
    #[serde(default)]
    severity: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    ignores: Vec<Spanned<RawIgnore>>,
    #[serde(default)]
    images: Vec<String>,
    fail_on: Option<Spanned<String>>,
    /// Run only the rules added in this memlint release or before (`rules-version = "0.1.0"`).
    rules_version: Option<Spanned<String>>,
    /// Reader limits: `max_path_len = 8192`, `max_layer_bytes = "128G"`.
    #[serde(default)]
    limits: BTreeMap<String, Spanned<toml::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIgnore {
    rule: Spanned<String>,
    image: Option<String>,
    path: Option<String>,
    reason: Option<String>,
    expires: Option<Spanned<toml::Value>>,
}

/// A calendar date (`expires`).
pub(crate) use jiff::civil::Date;

/// Today in UTC, from the system clock.
pub(crate) fn today() -> Date {
    jiff::Timestamp::now()
        .to_zoned_datetime(jiff::tz::TimeZone::UTC)
        .date()
}

/// An `expires` value: a TOML date (`2027-01-31`, or the date part of a TOML date-time) or a
/// string holding a date. Impossible dates such as 2026-02-30 are refused, with the reason.
fn parse_expiry(value: &toml::Value) -> Result<Date, String> {
    let out_of_range = |_| "it is out of range".to_string();
    match value {
        toml::Value::Datetime(d) => {
            let day = d.date.ok_or("it has no date part")?;
            Date::new(
                i16::try_from(day.year).map_err(out_of_range)?,
                i8::try_from(day.month).map_err(out_of_range)?,
                i8::try_from(day.day).map_err(out_of_range)?,
            )
            .map_err(|e| e.to_string())
        }
        toml::Value::String(s) => s.trim().parse::<Date>().map_err(|e| e.to_string()),
        other => Err(format!("it is a TOML {}", other.type_str())),
    }
}

/// An ignore that applies only where it says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ScopedIgnore {
    pub(crate) rule: String,
    /// A glob (`*`, `?`) on the image reference or name.
    pub(crate) image: Option<String>,
    /// An image path: the ignore covers findings whose evidence names it or a path under it.
    pub(crate) path: Option<String>,
    pub(crate) reason: String,
    pub(crate) expires: Option<Date>,
    /// Where it is written, for messages: `.memlint.toml:12`.
    pub(crate) origin: String,
}

impl ScopedIgnore {
    /// Whether it covers a finding of `rule` on `image` with this evidence (expiry aside). A
    /// `path` matches the image paths the evidence names, never its words.
    pub(crate) fn covers(&self, rule: &str, image_names: &[&str], evidence: &[Evidence]) -> bool {
        self.rule == rule
            && self
                .image
                .as_deref()
                .is_none_or(|g| image_names.iter().any(|n| glob(g, n)))
            && self.path.as_deref().is_none_or(|p| {
                evidence
                    .iter()
                    .flat_map(|e| e.paths())
                    .any(|named| is_within(named, p))
            })
    }
}

/// Whether image path `path` is `within` or under it, on a component boundary: `/usr/lib`
/// covers `/usr/lib` and `/usr/lib/libc.so.6`, not `/usr/lib64/libc.so.6`.
fn is_within(path: &str, within: &str) -> bool {
    let within = within.trim_end_matches('/');
    match path.strip_prefix(within) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

/// Validated settings: the config file merged with the command line.
#[derive(Clone, Debug, Default)]
pub(crate) struct Settings {
    pub(crate) path: Option<PathBuf>,
    /// Rules not reported at all, with where each came from ("--ignore", ".memlint.toml").
    pub(crate) ignore: Vec<(String, String)>,
    pub(crate) severity: BTreeMap<String, Severity>,
    pub(crate) scoped: Vec<ScopedIgnore>,
    pub(crate) images: Vec<String>,
    pub(crate) fail_on: Option<FailOn>,
    /// `rules-version`, or `--rules-version` which wins over it: only the rules added in that
    /// release or before run.
    pub(crate) rules_version: Option<crate::version::Version>,
    /// `[limits]`: each limit's name and value as text (`max_layer_bytes`, `128G`), already
    /// checked; applied under `MEMLINT_LIMITS` and `--limit`.
    pub(crate) limits: Vec<(String, String)>,
}

impl Settings {
    /// `.memlint.toml` in `start` or the nearest folder above it.
    pub(crate) fn find(start: &Path) -> Option<PathBuf> {
        // Whatever is there by that name (following links) is the config: one that is not a
        // regular file is refused when it is read, not skipped for another one further up.
        start.ancestors().map(|d| d.join(FILE_NAME)).find(|p| p.exists())
    }

    /// The config file at `path`; `inside`, for a file memlint found by itself, is the folder
    /// its links must stay inside.
    pub(crate) fn load(path: &Path, inside: Option<&Path>) -> Result<Settings, Box<ConfigError>> {
        let text = read_config(path, inside).map_err(|e| {
            Box::new(ConfigError {
                message: format!("cannot read {}: {}", path.display(), e.reason()),
                help: e.help().to_string(),
                src: crate::error::SourceWindow::around(path.display().to_string(), "", None).0,
                span: None,
            })
        })?;
        Settings::parse(&text, &path.display().to_string()).map(|mut s| {
            s.path = Some(path.to_path_buf());
            s
        })
    }

    pub(crate) fn parse(text: &str, name: &str) -> Result<Settings, Box<ConfigError>> {
        let err = |message: String, help: String, span: Option<std::ops::Range<usize>>| {
            config_error(name, text, message, help, span)
        };
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            err(
                e.message().to_string(),
                "keys are ignore, severity, ignores, images, fail-on, rules-version and limits; see the README".to_string(),
                e.span(),
            )
        })?;
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let known = |id: &Spanned<String>| -> Result<String, Box<ConfigError>> {
            if rules::find(id.get_ref()).is_some() {
                return Ok(id.get_ref().clone());
            }
            let help = match rules::nearest(id.get_ref()) {
                Some(n) => format!("did you mean `{n}`? `memlint rules` lists every rule"),
                None => "`memlint rules` lists every rule".to_string(),
            };
            Err(err(
                format!("there is no rule `{}`", id.get_ref()),
                help,
                Some(id.span()),
            ))
        };
        let mut s = Settings {
            images: raw.images,
            ..Settings::default()
        };
        for id in &raw.ignore {
            s.ignore
                .push((known(id)?, format!("{name}:{}", line_of(id.span().start))));
        }
        for (rule, sev) in &raw.severity {
            let key = Spanned::new(sev.span(), rule.clone());
            known(&key)?;
            let level = match sev.get_ref().as_str() {
                "error" => Severity::Error,
                "warning" => Severity::Warning,
                "note" => Severity::Note,
                other => {
                    return Err(err(
                        format!("severity `{other}` for {rule} is not error, warning or note"),
                        "to turn a rule off, list it under `ignore`".to_string(),
                        Some(sev.span()),
                    ))
                }
            };
            s.severity.insert(rule.clone(), level);
        }
        for entry in &raw.ignores {
            let span = entry.span();
            let i = entry.get_ref();
            let rule = known(&i.rule)?;
            let reason = i.reason.clone().filter(|r| !r.trim().is_empty()).ok_or_else(|| {
                err(
                    format!("the ignore of {rule} has no reason"),
                    "every scoped ignore needs `reason = \"…\"`, so that the next reader knows why"
                        .to_string(),
                    Some(span.clone()),
                )
            })?;
            let expires = match &i.expires {
                None => None,
                Some(v) => {
                    let text_value = match v.get_ref() {
                        toml::Value::String(s) => s.clone(),
                        toml::Value::Datetime(d) => d.to_string(),
                        other => format!("{other:?}"),
                    };
                    Some(parse_expiry(v.get_ref()).map_err(|why| {
                        err(
                            format!("`expires = {text_value}` is not a date: {why}"),
                            "write it as YYYY-MM-DD, e.g. expires = 2027-01-31".to_string(),
                            Some(v.span()),
                        )
                    })?)
                }
            };
            if i.image.is_none() && i.path.is_none() {
                return Err(err(
                    format!("the ignore of {rule} is scoped to nothing"),
                    "give `image = \"…\"` or `path = \"…\"`, or list the rule under the top-level `ignore`"
                        .to_string(),
                    Some(span),
                ));
            }
            // Findings name image paths from the root; a relative one could never match, and an
            // ignore that silently covers nothing is worse than an error.
            if let Some(p) = i.path.as_deref().filter(|p| !p.starts_with('/')) {
                return Err(err(
                    format!("the ignore of {rule} has `path = \"{p}\"`, which is not an image path"),
                    format!("image paths start at the image's root, e.g. path = \"/{p}\""),
                    Some(span),
                ));
            }
            s.scoped.push(ScopedIgnore {
                rule,
                image: i.image.clone(),
                path: i.path.clone(),
                reason,
                expires,
                origin: format!("{name}:{}", line_of(span.start)),
            });
        }
        if let Some(f) = &raw.fail_on {
            let Some(fail_on) = FailOn::parse(f.get_ref()) else {
                return Err(err(
                    format!("fail-on `{}` is not error, warning, note or never", f.get_ref()),
                    "the default is warning".to_string(),
                    Some(f.span()),
                ));
            };
            s.fail_on = Some(fail_on);
        }
        if let Some(v) = &raw.rules_version {
            s.rules_version = Some(rules::pinned_release(v.get_ref()).map_err(|why| {
                err(
                    format!("rules-version: {why}"),
                    "`memlint rules --since VERSION` lists the rules added or changed after a version"
                        .to_string(),
                    Some(v.span()),
                )
            })?);
        }
        s.limits = checked_limits(&raw.limits, text, name)?;
        Ok(s)
    }
}

/// Only the `[limits]` table of a config file, for a command that reads nothing else of it
/// (`inspect`): a mistake elsewhere in the file is for `lint` to report.
#[derive(Debug, Deserialize)]
struct RawLimitsOnly {
    #[serde(default)]
    limits: BTreeMap<String, Spanned<toml::Value>>,
}

/// The `[limits]` table of the config file at `path`, checked.
pub(crate) fn load_limits(
    path: &Path,
    inside: Option<&Path>,
) -> Result<Vec<(String, String)>, Box<ConfigError>> {
    let name = path.display().to_string();
    let text = read_config(path, inside).map_err(|e| {
        config_error(
            &name,
            "",
            format!("cannot read it: {}", e.reason()),
            e.help().to_string(),
            None,
        )
    })?;
    let raw: RawLimitsOnly = toml::from_str(&text).map_err(|e| {
        config_error(
            &name,
            &text,
            e.message().to_string(),
            "see the README for the config file".to_string(),
            e.span(),
        )
    })?;
    checked_limits(&raw.limits, &text, &name)
}

fn read_config(path: &Path, inside: Option<&Path>) -> Result<String, crate::user_file::ReadError> {
    match inside {
        Some(folder) => crate::user_file::read_inside_to_string(path, folder, crate::user_file::MAX_BYTES),
        None => crate::user_file::read_to_string(path, crate::user_file::MAX_BYTES),
    }
}

fn config_error(
    name: &str,
    text: &str,
    message: String,
    help: String,
    span: Option<std::ops::Range<usize>>,
) -> Box<ConfigError> {
    let (src, span) = crate::error::SourceWindow::around(name, text, span);
    Box::new(ConfigError {
        message: format!("{name}: {message}"),
        help,
        src,
        span,
    })
}

/// Each limit of a `[limits]` table as (name, value text), refused with the value pointed at
/// when the name is unknown or the value is not a size.
fn checked_limits(
    table: &BTreeMap<String, Spanned<toml::Value>>,
    text: &str,
    file: &str,
) -> Result<Vec<(String, String)>, Box<ConfigError>> {
    let mut out = Vec::new();
    for (name, value) in table {
        let value_text = match value.get_ref() {
            toml::Value::Integer(n) if *n >= 0 => n.to_string(),
            toml::Value::String(t) => t.clone(),
            other => {
                let what = match other {
                    toml::Value::Integer(_) => "a negative number",
                    toml::Value::Float(_) => "a fraction",
                    toml::Value::Boolean(_) => "true or false",
                    toml::Value::Datetime(_) => "a date",
                    _ => "a list or a table",
                };
                return Err(config_error(
                    file,
                    text,
                    format!("limit {name} is {what}, not a size"),
                    "write a number or a size in a string, e.g. max_path_len = 8192 or max_layer_bytes = \"128G\""
                        .to_string(),
                    Some(value.span()),
                ));
            }
        };
        Limits::default().set(name, &value_text).map_err(|why| {
            config_error(
                file,
                text,
                format!("[limits] {why}"),
                limits_help(),
                Some(value.span()),
            )
        })?;
        out.push((name.clone(), value_text));
    }
    Ok(out)
}

/// `*` and `?` globs over whole strings.
pub(crate) fn glob(pattern: &str, s: &str) -> bool {
    let (p, s): (Vec<char>, Vec<char>) = (pattern.chars().collect(), s.chars().collect());
    crate::tree::wildcard_match(&p, &s, '*', '?')
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::date;

    #[test]
    fn a_relative_ignore_path_is_refused() {
        let e = Settings::parse(
            "[[ignores]]\nrule = \"sharp-glibc-allocator\"\npath = \"node_modules/sharp\"\nreason = \"tool\"\n",
            "t.toml",
        )
        .unwrap_err();
        assert!(e.message.contains("not an image path"), "{}", e.message);
        assert!(e.help.contains("path = \"/node_modules/sharp\""), "{}", e.help);
    }

    #[test]
    fn limits_table_takes_numbers_and_sizes_and_refuses_the_rest() {
        let s = Settings::parse(
            "[limits]\nmax_path_len = 8192\nmax_layer_bytes = \"128G\"\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(
            s.limits,
            [
                ("max_layer_bytes".to_string(), "128G".to_string()),
                ("max_path_len".to_string(), "8192".to_string())
            ]
        );
        for (text, says) in [
            ("[limits]\nmax_path_lenn = 1", "there is no limit `max_path_lenn`"),
            ("[limits]\nmax_path_len = \"lots\"", "`lots` is not a size"),
            ("[limits]\nmax_path_len = -1", "is a negative number, not a size"),
            ("[limits]\nmax_path_len = true", "is true or false, not a size"),
        ] {
            let e = Settings::parse(text, "t.toml").unwrap_err();
            assert!(e.message.contains(says), "{text}: {}", e.message);
            // The error points at the value in the file.
            let span = e.span.expect("a span");
            assert!(
                text[span.offset()..].starts_with(text.rsplit(" = ").next().unwrap()),
                "{text}"
            );
        }
    }

    #[test]
    fn a_full_config() {
        let s = Settings::parse(
            r#"
ignore = ["node-semi-space"]
images = ["docker:app:dev", "oci-dir:./out/img"]
fail-on = "error"

[severity]
next-image-cache-ttl = "warning"

[[ignores]]
rule = "ld-preload-missing"
image = "*arm64*"
reason = "the arm64 build is not shipped yet"
expires = 2027-01-31

[[ignores]]
rule = "sharp-glibc-allocator"
path = "/opt/tools/node_modules/sharp"
reason = "build-time tool, not the service"
"#,
            ".memlint.toml",
        )
        .unwrap();
        assert_eq!(s.ignore[0].0, "node-semi-space");
        assert_eq!(s.ignore[0].1, ".memlint.toml:2");
        assert_eq!(s.severity["next-image-cache-ttl"], Severity::Warning);
        assert_eq!(s.scoped[0].expires, Some(date(2027, 1, 31)));
        assert_eq!(s.scoped[0].origin, ".memlint.toml:9");
        assert!(s.scoped[0].covers("ld-preload-missing", &["oci-dir:img-arm64"], &[]));
        assert!(!s.scoped[0].covers("ld-preload-missing", &["oci-dir:img-amd64"], &[]));
        let sharp = "/opt/tools/node_modules/sharp";
        assert!(s.scoped[1].covers(
            "sharp-glibc-allocator",
            &["x"],
            &[Evidence::naming(format!("sharp 0.34.5 at {sharp}"), [sharp])]
        ));
        assert_eq!(s.images.len(), 2);
        assert_eq!(s.fail_on, Some(FailOn::Error));
    }

    #[test]
    fn a_path_ignore_matches_the_paths_evidence_names_not_its_words() {
        let s = Settings::parse(
            "[[ignores]]\nrule = \"ld-preload-missing\"\npath = \"/usr/lib/aarch64-linux-gnu\"\nreason = \"r\"\n",
            ".memlint.toml",
        )
        .unwrap();
        let covers = |e: Evidence| s.scoped[0].covers("ld-preload-missing", &["x"], &[e]);
        let lib = "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2";
        // A path under the folder, and the folder itself.
        assert!(covers(Evidence::naming(format!("{lib} does not exist"), [lib])));
        assert!(covers(Evidence::naming("x", ["/usr/lib/aarch64-linux-gnu"])));
        // The same words naming no path, or naming another path, are not covered.
        assert!(!covers(Evidence::plain(format!("LD_PRELOAD={lib}"))));
        assert!(!covers(Evidence::naming(
            format!("{lib} does not exist: the image has /usr/lib/x86_64-linux-gnu/libjemalloc.so.2"),
            ["/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"]
        )));
        // A prefix that stops inside a path component is no match.
        assert!(!covers(Evidence::naming(
            "x",
            ["/usr/lib/aarch64-linux-gnux/libjemalloc.so.2"]
        )));
        assert!(is_within("/usr/lib/x", "/usr/lib/"));
        assert!(is_within("/anything", "/"));
        assert!(!is_within("/usr/lib64/libc.so.6", "/usr/lib"));
    }

    #[test]
    fn mistakes_point_at_the_key() {
        for (text, needle) in [
            ("ignore = [\"ld-preload-mising\"]", "did you mean `ld-preload-missing`"),
            ("[[ignores]]\nrule = \"node-semi-space\"\nimage = \"x\"\n", "needs `reason"),
            ("[[ignores]]\nrule = \"node-semi-space\"\nreason = \"r\"\n", "scoped to nothing"),
            ("[[ignores]]\nrule = \"node-semi-space\"\nimage = \"x\"\nreason = \"r\"\nexpires = \"soon\"\n", "YYYY-MM-DD"),
            ("[severity]\nnode-semi-space = \"fatal\"\n", "not error, warning or note"),
            ("fail-on = \"sometimes\"\n", "not error, warning, note or never"),
            ("rules-version = \"0.1\"\n", "is not a memlint version"),
            ("rules-version = \"v0.1.0\"\n", "is not a memlint version"),
            ("rules-version = \"999.0.0\"\n", "newer than this memlint"),
            ("unknown-key = 1\n", "keys are"),
            ("ignore = [", "keys are"),
        ] {
            let e = Settings::parse(text, ".memlint.toml").unwrap_err();
            assert!(format!("{} {}", e.message, e.help).contains(needle), "{text}: {} / {}", e.message, e.help);
        }
    }

    #[test]
    fn rules_version_pins_a_release_up_to_this_one() {
        let s = Settings::parse("rules-version = \"0.1.0\"\n", ".memlint.toml").unwrap();
        assert_eq!(s.rules_version, Some(crate::version::Version::new(0, 1, 0)));
        assert_eq!(Settings::parse("", ".memlint.toml").unwrap().rules_version, None);
        let text = "rules-version = \"1000.0.0\"\n";
        let e = Settings::parse(text, ".memlint.toml").unwrap_err();
        let span = e.span.expect("the error points at the value");
        assert_eq!(&text[span.offset()..span.offset() + span.len()], "\"1000.0.0\"");
    }

    #[test]
    fn impossible_expiry_dates_are_refused_at_the_key() {
        let config = |expires: &str| {
            format!("[[ignores]]\nrule = \"node-semi-space\"\nimage = \"x\"\nreason = \"r\"\nexpires = {expires}\n")
        };
        for expires in ["\"2026-02-30\"", "\"2026-13-01\"", "\"2026-1-5\"", "14"] {
            let text = config(expires);
            let e = Settings::parse(&text, ".memlint.toml").unwrap_err();
            assert!(e.message.contains("` is not a date: "), "{}", e.message);
            assert!(e.help.contains("YYYY-MM-DD"), "{}", e.help);
            let span = e.span.expect("the error points at the value");
            assert_eq!(&text[span.offset()..span.offset() + span.len()], expires);
        }
        // A bare TOML date is checked by the TOML parser itself, also at the value.
        let text = config("2026-02-30");
        let e = Settings::parse(&text, ".memlint.toml").unwrap_err();
        assert_eq!(e.span.map(|s| s.offset()), text.find("2026-02-30"));
    }

    #[test]
    fn dates_and_globs() {
        let expiry = |v: toml::Value| parse_expiry(&v);
        assert_eq!(expiry("2024-02-29".into()), Ok(date(2024, 2, 29)));
        assert_eq!(expiry(" 2027-01-31 ".into()), Ok(date(2027, 1, 31)));
        assert!(expiry("2026-02-30".into()).is_err());
        assert!(expiry("2025-02-29".into()).is_err());
        assert!(expiry("2026-13-01".into()).is_err());
        let datetime: toml::Value = "2027-01-31T10:00:00Z"
            .parse::<toml::value::Datetime>()
            .unwrap()
            .into();
        assert_eq!(expiry(datetime), Ok(date(2027, 1, 31)));
        let time_only: toml::Value = "10:00:00".parse::<toml::value::Datetime>().unwrap().into();
        assert!(expiry(time_only).is_err());
        assert!(today() > date(2025, 1, 1));
        assert_eq!(date(2026, 11, 30).to_string(), "2026-11-30");
        assert!(glob("app:*", "app:1.2"));
        assert!(glob("*/app:?", "registry.example/app:1"));
        assert!(!glob("app", "app:1"));
    }
}
