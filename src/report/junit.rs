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
use super::model::View;
use crate::finding::{FailOn, Finding};
use crate::untrusted::{xml_attr, xml_text};
use std::io::{self, Write};

/// An image of the run that could not be read (the run ends with exit code 2).
pub(crate) struct Unread {
    /// The reference as written on the command line.
    pub(crate) reference: String,
    /// The diagnostic's code, e.g. `memlint::size_mismatch`.
    pub(crate) code: String,
    pub(crate) message: String,
}

impl Unread {
    /// A container whose image could not be read (`lint --k8s`, `merge`).
    pub(crate) fn of_view(v: &View) -> Unread {
        let (code, message) = v
            .error
            .as_ref()
            .map(|e| (e.code.clone(), e.message.clone()))
            .unwrap_or_default();
        let place = v
            .k8s
            .as_ref()
            .map(|k| format!(" ({})", k.describe()))
            .unwrap_or_default();
        Unread {
            reference: format!("{}{place}", v.reference),
            code,
            message,
        }
    }
}

/// Writes the JUnit document of every report, and of every image that could not be read: a
/// test suite of its own whose one test case, `read`, has an `<error>` saying what failed.
pub(crate) fn write(
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
pub(crate) struct Suite {
    xml: Vec<u8>,
    tests: usize,
    failures: usize,
}

/// The suite of one report.
pub(crate) fn suite_of(r: &LintReport, fail_on: FailOn) -> io::Result<Suite> {
    suite_of_view(&r.view(), fail_on, true)
}

/// The suite of one report's view; `reasons`: say why a rule could not decide (a live run's
/// report of one image: the JSON of a fleet's reports has no reasons to give `merge`).
pub(crate) fn suite_of_view(v: &View, fail_on: FailOn, reasons: bool) -> io::Result<Suite> {
    let mut input = input_of(v, fail_on);
    if !reasons {
        for r in &mut input.results {
            r.1 = None;
        }
    }
    let mut xml = Vec::new();
    write_suite(&mut xml, &input, fail_on)?;
    Ok(Suite {
        xml,
        tests: input.results.len(),
        failures: failing(&input, fail_on),
    })
}

impl Suite {
    /// The suite's XML, its tests and its failing rules.
    pub(crate) fn into_parts(self) -> (Vec<u8>, usize, usize) {
        (self.xml, self.tests, self.failures)
    }
}

/// The JUnit document of suites written ahead, and of every image that could not be read.
pub(crate) fn write_suites(w: &mut dyn Write, suites: &[&Suite], unread: &[Unread]) -> io::Result<()> {
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
pub(crate) fn write_head(w: &mut dyn Write, tests: usize, failures: usize, errors: usize) -> io::Result<()> {
    writeln!(w, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        w,
        r#"<testsuites name="memlint" tests="{tests}" failures="{failures}" errors="{errors}">"#
    )
}

/// The suite of an image that could not be read: one test case, `read`, in error.
pub(crate) fn write_unread(w: &mut dyn Write, u: &Unread) -> io::Result<()> {
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
pub(crate) fn write_tail(w: &mut dyn Write) -> io::Result<()> {
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

fn fails(f: &Finding, fail_on: FailOn) -> bool {
    fail_on.threshold().is_some_and(|t| f.severity >= t)
}

fn input_of<'a>(r: &'a View, fail_on: FailOn) -> SuiteInput<'a> {
    let mut image = format!("{} ({})", r.reference, r.platform);
    if let Some(k) = &r.k8s {
        image.push_str(&format!(" in {} {}/{}", k.kind, k.name, k.container));
    }
    let mut properties = vec![("image", r.reference.clone()), ("platform", r.platform.clone())];
    if let Some(d) = &r.manifest_digest {
        properties.push(("manifest_digest", d.clone()));
    }
    properties.push(("fail_on", fail_on.as_str().to_string()));
    SuiteInput {
        image,
        properties,
        results: r.rules.iter().map(|(id, why)| (*id, why.as_deref())).collect(),
        findings: &r.findings,
        ignored: &r.ignored,
    }
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
