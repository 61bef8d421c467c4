//! JUnit XML, as Jenkins, GitLab (`artifacts:reports:junit`) and Azure DevOps
//! (`PublishTestResults@2`, `testResultsFormat: JUnit`) read it: one `<testsuite>` per image
//! (and platform), one `<testcase>` per rule that ran, so a rule with nothing to say shows as
//! passed. A rule with a finding at or above `--fail-on` has one `<failure>` listing those
//! findings; its findings below `--fail-on`, the findings an ignore hides and why a rule could
//! not decide go in its `<system-out>`. An image that could not be read is a test suite with
//! one test case, `read`, in `<error>`. Valid against `junit-10.xsd` (the JUnit schema of
//! Maven Surefire that pytest tests its own output with).
//!
//! Written as a stream, element by element; every string goes through
//! [`crate::untrusted::xml_text`] or [`crate::untrusted::xml_attr`]. A small writer of its own
//! rather than an XML crate: the only escaping a general writer does (`&`, `<`, `>`, quotes)
//! is not enough here, since XML 1.0 cannot hold most C0 controls at all and the report must
//! not carry what a terminal or CI runner would act on.

use super::lint::LintReport;
use crate::finding::{FailOn, Finding};
use crate::untrusted::{xml_attr, xml_text};
use std::io::{self, Write};

/// An image of the run that could not be read (the run ends with exit code 2).
pub struct Unread {
    /// The reference as written on the command line.
    pub reference: String,
    /// The diagnostic's code, e.g. `memlint::size_mismatch`.
    pub code: String,
    pub message: String,
}

/// Writes the JUnit document of every report, and of every image that could not be read: a
/// test suite of its own whose one test case, `read`, has an `<error>` saying what failed.
pub fn write(
    w: &mut dyn Write,
    reports: &[LintReport],
    unread: &[Unread],
    fail_on: FailOn,
) -> io::Result<()> {
    let mut suites = Vec::new();
    for r in reports {
        suites.push(suite_of(r, fail_on)?);
    }
    write_suites(w, &suites.iter().collect::<Vec<_>>(), unread)
}

/// One report's test suite, written ahead (`lint --k8s` renders each container's report as
/// its image is read, then lets the image go).
pub struct Suite {
    xml: Vec<u8>,
    tests: usize,
    failures: usize,
}

/// The suite of one report.
pub fn suite_of(r: &LintReport, fail_on: FailOn) -> io::Result<Suite> {
    let mut xml = Vec::new();
    suite(&mut xml, r, fail_on)?;
    Ok(Suite {
        xml,
        tests: r.results.len(),
        failures: failing_rules(r, fail_on),
    })
}

impl Suite {
    /// The suite's XML, its tests and its failing rules.
    pub fn into_parts(self) -> (Vec<u8>, usize, usize) {
        (self.xml, self.tests, self.failures)
    }
}

/// The JUnit document of suites written ahead, and of every image that could not be read.
pub fn write_suites(w: &mut dyn Write, suites: &[&Suite], unread: &[Unread]) -> io::Result<()> {
    let tests: usize = suites.iter().map(|s| s.tests).sum::<usize>() + unread.len();
    let failures: usize = suites.iter().map(|s| s.failures).sum();
    write_head(w, tests, failures, unread.len())?;
    for s in suites {
        w.write_all(&s.xml)?;
    }
    for u in unread {
        write_unread(w, u)?;
    }
    write_tail(w)
}

/// The document's head, for a writer that streams the suites (`lint --k8s`): the totals of
/// every suite, the unread images' included (one test and one error each).
pub fn write_head(w: &mut dyn Write, tests: usize, failures: usize, errors: usize) -> io::Result<()> {
    writeln!(w, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        w,
        r#"<testsuites name="memlint" tests="{tests}" failures="{failures}" errors="{errors}">"#
    )
}

/// The suite of an image that could not be read: one test case, `read`, in error.
pub fn write_unread(w: &mut dyn Write, u: &Unread) -> io::Result<()> {
    writeln!(
        w,
        r#"  <testsuite name="{}" tests="1" failures="0" errors="1" skipped="0">"#,
        xml_attr(&format!("memlint {}", u.reference))
    )?;
    writeln!(
        w,
        r#"    <testcase name="read" classname="{}">"#,
        xml_attr(&u.reference)
    )?;
    writeln!(
        w,
        r#"      <error type="{}" message="{}"/>"#,
        xml_attr(&u.code),
        xml_attr(&u.message)
    )?;
    writeln!(w, "    </testcase>")?;
    writeln!(w, "  </testsuite>")
}

/// The document's end.
pub fn write_tail(w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "</testsuites>")
}

/// What a test suite shows: made from a report, or from a report's JSON (`memlint merge`).
struct SuiteInput<'a> {
    /// `REFERENCE (PLATFORM)`, and the workload with `--k8s`.
    image: String,
    properties: Vec<(&'static str, String)>,
    /// Every rule that ran, and why it could not decide when it could not.
    results: Vec<(&'static str, Option<&'a str>)>,
    findings: &'a [Finding],
    ignored: &'a [Finding],
}

/// How many rules have a finding at or above `fail_on`.
fn failing(s: &SuiteInput, fail_on: FailOn) -> usize {
    s.results
        .iter()
        .filter(|(id, _)| s.findings.iter().any(|f| f.rule == *id && fails(f, fail_on)))
        .count()
}

/// How many rules have a finding at or above `fail_on` on this image.
fn failing_rules(r: &LintReport, fail_on: FailOn) -> usize {
    failing(&input_of(r, fail_on), fail_on)
}

fn fails(f: &Finding, fail_on: FailOn) -> bool {
    fail_on.threshold().is_some_and(|t| f.severity >= t)
}

fn input_of<'a>(r: &'a LintReport, fail_on: FailOn) -> SuiteInput<'a> {
    let mut image = format!("{} ({})", r.image.reference, r.image.platform);
    if let Some(c) = r.k8s {
        let k = &c.workload;
        image.push_str(&format!(" in {} {}/{}", k.kind, k.name, k.container));
    }
    let mut properties = vec![
        ("image", r.image.reference.clone()),
        ("platform", r.image.platform.to_string()),
    ];
    if let Some(d) = &r.image.manifest_digest {
        properties.push(("manifest_digest", d.to_string()));
    }
    properties.push(("fail_on", fail_on.as_str().to_string()));
    SuiteInput {
        image,
        properties,
        results: r
            .results
            .iter()
            .map(|res| (res.rule.id, res.outcome.undecided.as_deref()))
            .collect(),
        findings: &r.findings,
        ignored: &r.ignored,
    }
}

/// The JUnit document of reports already in memlint's JSON (`memlint merge` of `lint --k8s`
/// shards): every rule a test case, as `lint` writes them (why a rule could not decide is not
/// in the JSON); a report that carries an `error` is a suite with one erroring case.
pub fn write_json_reports(
    w: &mut dyn Write,
    reports: &[serde_json::Value],
    fail_on: FailOn,
) -> io::Result<()> {
    let mut suites = Vec::new();
    let mut unread = Vec::new();
    for r in reports {
        match suite_of_json(r, fail_on)? {
            JsonSuite::Linted(s) => suites.push(s),
            JsonSuite::Unread(u) => unread.push(u),
        }
    }
    write_suites(w, &suites.iter().collect::<Vec<_>>(), &unread)
}

/// What one report of memlint's JSON is in JUnit.
pub enum JsonSuite {
    Linted(Suite),
    /// A report that carries an `error`: its image could not be read.
    Unread(Unread),
}

/// The suite of one report of memlint's JSON.
pub fn suite_of_json(r: &serde_json::Value, fail_on: FailOn) -> io::Result<JsonSuite> {
    let k = &r["k8s"];
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
    if let Some(e) = r.get("error") {
        return Ok(JsonSuite::Unread(Unread {
            reference: format!(
                "{} in {} {}/{}",
                text(&r["reference"]),
                text(&k["kind"]),
                text(&k["name"]),
                text(&k["container"])
            ),
            code: text(&e["code"]),
            message: text(&e["message"]),
        }));
    }
    let parse = |key: &str| -> Vec<Finding> {
        r[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(super::json::finding_of_json)
            .collect()
    };
    let (findings, ignored) = (parse("findings"), parse("ignored"));
    let platform = super::json::platform_of_json(&r["image"]["platform"]);
    let mut image = format!("{} ({platform})", text(&r["reference"]));
    if k.is_object() {
        image.push_str(&format!(
            " in {} {}/{}",
            text(&k["kind"]),
            text(&k["name"]),
            text(&k["container"])
        ));
    }
    let mut properties = vec![("image", text(&r["reference"])), ("platform", platform)];
    if let Some(d) = r["image"]["manifest_digest"].as_str() {
        properties.push(("manifest_digest", d.to_string()));
    }
    properties.push(("fail_on", fail_on.as_str().to_string()));
    let input = SuiteInput {
        image,
        properties,
        results: crate::rules::ALL.iter().map(|rule| (rule.id, None)).collect(),
        findings: &findings,
        ignored: &ignored,
    };
    let mut xml = Vec::new();
    write_suite(&mut xml, &input, fail_on)?;
    Ok(JsonSuite::Linted(Suite {
        xml,
        tests: input.results.len(),
        failures: failing(&input, fail_on),
    }))
}

fn suite(w: &mut dyn Write, r: &LintReport, fail_on: FailOn) -> io::Result<()> {
    write_suite(w, &input_of(r, fail_on), fail_on)
}

fn write_suite(w: &mut dyn Write, s: &SuiteInput, fail_on: FailOn) -> io::Result<()> {
    let image = &s.image;
    writeln!(
        w,
        r#"  <testsuite name="{}" tests="{}" failures="{}" errors="0" skipped="0">"#,
        xml_attr(&format!("memlint {image}")),
        s.results.len(),
        failing(s, fail_on)
    )?;
    writeln!(w, "    <properties>")?;
    for (name, value) in &s.properties {
        writeln!(
            w,
            r#"      <property name="{name}" value="{}"/>"#,
            xml_attr(value)
        )?;
    }
    writeln!(w, "    </properties>")?;
    for &(id, undecided) in &s.results {
        let found: Vec<&Finding> = s.findings.iter().filter(|f| f.rule == id).collect();
        let (failing, below): (Vec<&Finding>, Vec<&Finding>) =
            found.into_iter().partition(|f| fails(f, fail_on));
        let ignored: Vec<&Finding> = s.ignored.iter().filter(|f| f.rule == id).collect();
        let open = format!(
            r#"    <testcase name="{}" classname="{}""#,
            xml_attr(id),
            xml_attr(image)
        );
        if failing.is_empty() && below.is_empty() && ignored.is_empty() && undecided.is_none() {
            writeln!(w, "{open}/>")?;
            continue;
        }
        writeln!(w, "{open}>")?;
        if let Some(first) = failing.first() {
            let worst = failing.iter().map(|f| f.severity).max().unwrap_or(first.severity);
            let count: usize = failing.iter().map(|f| f.count()).sum();
            let message = if count == 1 {
                first.message.clone()
            } else {
                format!(
                    "{count} findings at or above {fail_on}; the first: {}",
                    first.message
                )
            };
            let mut body = String::new();
            for f in &failing {
                describe(&mut body, f);
            }
            writeln!(
                w,
                r#"      <failure type="{}" message="{}">{}</failure>"#,
                worst,
                xml_attr(&message),
                xml_text(&body)
            )?;
        }
        let mut out = String::new();
        if !below.is_empty() {
            out.push_str(&format!("Below --fail-on {fail_on}:\n"));
            for f in &below {
                describe(&mut out, f);
            }
        }
        for f in &ignored {
            let why = f
                .suppression
                .as_ref()
                .map(|s| format!(" ({}: {})", s.origin, s.justification))
                .unwrap_or_default();
            out.push_str(&format!("Ignored{why}:\n"));
            describe(&mut out, f);
        }
        if let Some(u) = undecided {
            out.push_str(&format!("Could not decide: {u}\n"));
        }
        if !out.is_empty() {
            writeln!(w, "      <system-out>{}</system-out>", xml_text(&out))?;
        }
        writeln!(w, "    </testcase>")?;
    }
    writeln!(w, "  </testsuite>")
}

/// A finding as the text report shows it: severity, message, place, evidence, fix.
fn describe(out: &mut String, f: &Finding) {
    out.push_str(&format!("{}: {}\n", f.severity, f.message));
    if let Some(l) = &f.location {
        out.push_str(&format!("  at {}:{}", l.path, l.line));
        if let Some(i) = &l.instruction {
            out.push_str(&format!(": {i}"));
        }
        out.push('\n');
    }
    if !f.evidence.is_empty() {
        out.push_str("  evidence:\n");
        for e in &f.evidence {
            out.push_str(&format!("    - {}\n", e.text()));
        }
    }
    if !f.fix.is_empty() {
        out.push_str("  fix:\n");
        for l in f.fix.lines() {
            out.push_str(&format!("    {l}\n"));
        }
    }
}
