//! The table harness of the peer fixtures (`peer2`, `peer3`): what memlint must do with each
//! fixture of a README's table, and the one check that runs them all and keeps the table and
//! the README in step.

use crate::common::*;
use serde_json::Value;

/// What memlint must do with one fixture.
pub(crate) struct Expect {
    pub(crate) fixture: &'static str,
    /// Prefix and suffix around the fixture's path (`oci-dir:`, `:v1`); "" for a bare path.
    pub(crate) prefix: &'static str,
    pub(crate) suffix: &'static str,
    pub(crate) args: &'static [&'static str],
    /// `Ok((layers, platform, paths that must be in the tree))`, or `Err(needles in the error)`.
    pub(crate) outcome: Result<(usize, &'static str, &'static [&'static str]), &'static [&'static str]>,
}

pub(crate) const fn ok(
    fixture: &'static str,
    prefix: &'static str,
    suffix: &'static str,
    args: &'static [&'static str],
    layers: usize,
    platform: &'static str,
    paths: &'static [&'static str],
) -> Expect {
    Expect {
        fixture,
        prefix,
        suffix,
        args,
        outcome: Ok((layers, platform, paths)),
    }
}

pub(crate) const fn refused(
    fixture: &'static str,
    prefix: &'static str,
    suffix: &'static str,
    needles: &'static [&'static str],
) -> Expect {
    refused_with_args(fixture, prefix, suffix, &[], needles)
}

pub(crate) const fn refused_with_args(
    fixture: &'static str,
    prefix: &'static str,
    suffix: &'static str,
    args: &'static [&'static str],
    needles: &'static [&'static str],
) -> Expect {
    Expect {
        fixture,
        prefix,
        suffix,
        args,
        outcome: Err(needles),
    }
}

/// The fixture names of the tables after `section` in `readme`.
pub(crate) fn readme_fixtures(readme: &str, section: &str) -> Vec<String> {
    let text = std::fs::read_to_string(readme).unwrap_or_else(|e| panic!("{readme}: {e}"));
    let tables = text
        .split(section)
        .nth(1)
        .unwrap_or_else(|| panic!("a `{section}` section in {readme}"));
    tables
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('`').nth(1))
        .map(|n| n.trim_end_matches('/').to_string())
        .collect()
}

/// `os/arch[/variant]`, or `unknown platform` when the config names neither.
pub(crate) fn platform_of(v: &Value) -> String {
    let p = &v["image"]["platform"];
    let (os, arch) = (p["os"].as_str().unwrap(), p["architecture"].as_str().unwrap());
    if os.is_empty() && arch.is_empty() {
        return "unknown platform".to_string();
    }
    let mut s = format!("{os}/{arch}");
    if let Some(variant) = p["variant"].as_str() {
        s.push('/');
        s.push_str(variant);
    }
    s
}

/// The paths `inspect --files --format json` lists.
pub(crate) fn listed_paths(v: &Value) -> Vec<String> {
    v["files"]["paths"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["path"].as_str().map(str::to_string))
        .collect()
}

/// Every row of the README's table has an expectation and the other way round (`count` rows,
/// the README being the source: `table` names the test file), and each fixture, found by
/// `locate`, reads or is refused as its expectation says; no refusal's message holds any of
/// `never_in_refusals`.
pub(crate) fn check_every_fixture(
    expect: &[Expect],
    rows: &[String],
    count: usize,
    table: &str,
    locate: fn(&str) -> String,
    never_in_refusals: &[&str],
) {
    assert_eq!(rows.len(), count, "the README lists {} fixtures", rows.len());
    for row in rows {
        assert!(
            expect.iter().any(|e| e.fixture == row),
            "README row `{row}` has no expectation in {table}"
        );
    }
    for e in expect {
        assert!(
            rows.iter().any(|r| r == e.fixture),
            "expectation `{}` has no README row",
            e.fixture
        );
        let reference = format!("{}{}{}", e.prefix, locate(e.fixture), e.suffix);
        let mut args = vec!["inspect", "--no-cache", "--files", "--format", "json"];
        args.extend_from_slice(e.args);
        args.push(&reference);
        let out = memlint(&args);
        let err = error_text(&out);
        assert!(!err.contains("panicked"), "{reference}: {err}");
        match e.outcome {
            Ok((layers, platform, paths)) => {
                assert_eq!(out.status.code(), Some(0), "{reference}: {err}");
                let v: Value = serde_json::from_slice(&out.stdout).expect("inspect prints JSON");
                assert_eq!(
                    v["image"]["layers"].as_array().unwrap().len(),
                    layers,
                    "{reference}"
                );
                assert_eq!(platform_of(&v), platform, "{reference}");
                let listed = listed_paths(&v);
                for p in paths {
                    assert!(
                        listed.iter().any(|l| l == p),
                        "{reference}: {p} not in {listed:?}"
                    );
                }
            }
            Err(needles) => {
                assert_eq!(out.status.code(), Some(2), "{reference}: {err}");
                for n in never_in_refusals {
                    assert!(!err.contains(n), "{reference}: {err}");
                }
                for n in needles {
                    assert!(err.contains(n), "{reference}: `{n}` not in {err}");
                }
            }
        }
    }
}
