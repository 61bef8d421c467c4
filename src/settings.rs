//! `.memlint.toml`: ignores (global, or scoped to an image or an evidence path, with a reason
//! and an optional expiry), per-rule severity, the images the pre-push hook lints, and
//! `fail-on`. Validated once into [`Settings`]; mistakes point at the key in the file.

use crate::error::ConfigError;
use crate::finding::Severity;
use crate::rules;
use miette::{NamedSource, SourceSpan};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::Spanned;

pub const FILE_NAME: &str = ".memlint.toml";

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
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Date {
    pub year: i32,
    pub month: u32,
    pub day: u32,
}

impl Date {
    pub fn parse(s: &str) -> Option<Date> {
        let mut it = s.trim().splitn(3, '-');
        let year = it.next()?.parse().ok()?;
        let month = it.next()?.parse().ok().filter(|m| (1..=12).contains(m))?;
        let day = it
            .next()?
            .get(..2)?
            .parse()
            .ok()
            .filter(|d| (1..=31).contains(d))?;
        Some(Date { year, month, day })
    }

    /// Today (UTC), from the system clock.
    pub fn today() -> Date {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Date::from_days((secs / 86_400) as i64)
    }

    /// Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
    fn from_days(z: i64) -> Date {
        let z = z + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
        Date { year, month, day }
    }
}

impl std::fmt::Display for Date {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// An ignore that applies only where it says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopedIgnore {
    pub rule: String,
    /// A glob (`*`, `?`) on the image reference or name.
    pub image: Option<String>,
    /// A path that must appear in the finding's evidence.
    pub path: Option<String>,
    pub reason: String,
    pub expires: Option<Date>,
    /// Where it is written, for messages: `.memlint.toml:12`.
    pub origin: String,
}

impl ScopedIgnore {
    /// Whether it covers a finding of `rule` on `image` with this evidence (expiry aside).
    pub fn covers(&self, rule: &str, image_names: &[&str], evidence: &[String]) -> bool {
        self.rule == rule
            && self
                .image
                .as_deref()
                .is_none_or(|g| image_names.iter().any(|n| glob(g, n)))
            && self
                .path
                .as_deref()
                .is_none_or(|p| evidence.iter().any(|e| e.contains(p)))
    }
}

/// Validated settings: the config file merged with the command line.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    pub path: Option<PathBuf>,
    /// Rules not reported at all, with where each came from ("--ignore", ".memlint.toml").
    pub ignore: Vec<(String, String)>,
    pub severity: BTreeMap<String, Severity>,
    pub scoped: Vec<ScopedIgnore>,
    pub images: Vec<String>,
    pub fail_on: Option<String>,
}

impl Settings {
    /// `.memlint.toml` in `start` or the nearest folder above it.
    pub fn find(start: &Path) -> Option<PathBuf> {
        start.ancestors().map(|d| d.join(FILE_NAME)).find(|p| p.is_file())
    }

    pub fn load(path: &Path) -> Result<Settings, Box<ConfigError>> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Box::new(ConfigError {
                message: format!("cannot read {}: {e}", path.display()),
                help: "check the path given to --config".to_string(),
                src: NamedSource::new(path.display().to_string(), String::new()),
                span: None,
            })
        })?;
        Settings::parse(&text, &path.display().to_string()).map(|mut s| {
            s.path = Some(path.to_path_buf());
            s
        })
    }

    pub fn parse(text: &str, name: &str) -> Result<Settings, Box<ConfigError>> {
        let err = |message: String, help: String, span: Option<std::ops::Range<usize>>| {
            Box::new(ConfigError {
                message: format!("{name}: {message}"),
                help,
                src: NamedSource::new(name, text.to_string()),
                span: span.map(|r| SourceSpan::from(r.start..r.end)),
            })
        };
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            err(
                e.message().to_string(),
                "keys are ignore, severity, ignores, images and fail-on; see the README".to_string(),
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
                    Some(Date::parse(&text_value).ok_or_else(|| {
                        err(
                            format!("`expires = {text_value}` is not a date"),
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
            if !matches!(f.get_ref().as_str(), "error" | "warning" | "note" | "never") {
                return Err(err(
                    format!("fail-on `{}` is not error, warning, note or never", f.get_ref()),
                    "the default is warning".to_string(),
                    Some(f.span()),
                ));
            }
            s.fail_on = Some(f.get_ref().clone());
        }
        Ok(s)
    }
}

/// `*` and `?` globs over whole strings.
pub fn glob(pattern: &str, s: &str) -> bool {
    let (p, s): (Vec<char>, Vec<char>) = (pattern.chars().collect(), s.chars().collect());
    let (mut pi, mut si, mut star, mut mark) = (0, 0, None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            s.scoped[0].expires,
            Some(Date {
                year: 2027,
                month: 1,
                day: 31
            })
        );
        assert_eq!(s.scoped[0].origin, ".memlint.toml:9");
        assert!(s.scoped[0].covers("ld-preload-missing", &["oci-dir:img-arm64"], &[]));
        assert!(!s.scoped[0].covers("ld-preload-missing", &["oci-dir:img-amd64"], &[]));
        assert!(s.scoped[1].covers(
            "sharp-glibc-allocator",
            &["x"],
            &["sharp 0.34.5 at /opt/tools/node_modules/sharp".into()]
        ));
        assert_eq!(s.images.len(), 2);
        assert_eq!(s.fail_on.as_deref(), Some("error"));
    }

    #[test]
    fn mistakes_point_at_the_key() {
        for (text, needle) in [
            ("ignore = [\"ld-preload-mising\"]", "did you mean `ld-preload-missing`"),
            ("[[ignores]]\nrule = \"node-semi-space\"\nimage = \"x\"\n", "needs `reason"),
            ("[[ignores]]\nrule = \"node-semi-space\"\nreason = \"r\"\n", "scoped to nothing"),
            ("[[ignores]]\nrule = \"node-semi-space\"\nimage = \"x\"\nreason = \"r\"\nexpires = \"soon\"\n", "YYYY-MM-DD"),
            ("[severity]\nnode-semi-space = \"fatal\"\n", "not error, warning or note"),
            ("unknown-key = 1\n", "keys are"),
            ("ignore = [", "keys are"),
        ] {
            let e = Settings::parse(text, ".memlint.toml").unwrap_err();
            assert!(format!("{} {}", e.message, e.help).contains(needle), "{text}: {} / {}", e.message, e.help);
        }
    }

    #[test]
    fn dates_and_globs() {
        assert_eq!(
            Date::from_days(0),
            Date {
                year: 1970,
                month: 1,
                day: 1
            }
        );
        assert_eq!(
            Date::from_days(20_787),
            Date {
                year: 2026,
                month: 11,
                day: 30
            }
        );
        assert!(Date::parse("2026-02-30").is_some());
        assert!(Date::parse("2026-13-01").is_none());
        assert!(
            Date::today()
                > Date {
                    year: 2025,
                    month: 1,
                    day: 1
                }
        );
        assert!(glob("app:*", "app:1.2"));
        assert!(glob("*/app:?", "registry.example/app:1"));
        assert!(!glob("app", "app:1"));
    }
}
