//! Documents of many reports (`lint --k8s`, `memlint merge`): each report is rendered in every
//! format asked for while it is in memory ([`Format::render`]), spooled, and each document is
//! written from the spool in manifest order ([`Format::write`]). One implementation per
//! format; `lint --k8s` and `merge` hand them the same [`View`]s, so a merge of shards writes
//! what the unsharded run writes.

use super::model::{View, SCHEMA_VERSION};
use super::spool::{Chunk, Spool, Spooled};
use super::{github, gitlab, html, junit, sarif, text, write_json_at, JsonArray};
use crate::finding::{FailOn, Severity};
use serde_json::Value;
use std::io::{self, Write};

/// One report rendered in one format, before it is spooled.
pub(crate) struct Piece {
    pub(crate) bytes: Vec<u8>,
    /// The elements a document caps or separates one by one (SARIF results, Code Quality
    /// issues): each one's length in `bytes`.
    pub(crate) lens: Vec<u32>,
    pub(crate) tally: Tally,
}

/// What a document's head or end needs of each report.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tally {
    /// Text: the summary table's row.
    pub(crate) row: Option<[String; 6]>,
    /// JUnit: the tests and failing rules of a linted report's suite.
    pub(crate) tests: usize,
    pub(crate) failures: usize,
    /// Its image was read.
    pub(crate) linted: bool,
    /// SARIF: the run's properties, should this be the run's one report.
    pub(crate) run_properties: Option<Value>,
    /// HTML: the summary's row of a linted report, or the line of an image not read.
    pub(crate) html: Option<HtmlTally>,
}

/// What the HTML page's summary needs of one report.
#[derive(Clone, Debug)]
pub(crate) enum HtmlTally {
    Linted(html::Tally),
    Unread(html::Unread),
}

/// A report's piece in the spool.
pub(crate) struct Part {
    pub(crate) chunk: Chunk,
    pub(crate) lens: Vec<u32>,
    pub(crate) tally: Tally,
}

impl Part {
    /// The elements of the piece, read from the spool.
    fn elements(&self, spooled: &Spooled) -> io::Result<Vec<Vec<u8>>> {
        let bytes = spooled.read(self.chunk)?;
        let mut at = 0usize;
        Ok(self
            .lens
            .iter()
            .map(|len| {
                let start = at.min(bytes.len());
                at = (start + *len as usize).min(bytes.len());
                bytes[start..at].to_vec()
            })
            .collect())
    }
}

/// Puts each piece in the spool.
pub(crate) fn spool(spool: &mut Spool, pieces: Vec<Piece>) -> io::Result<Vec<Part>> {
    pieces
        .into_iter()
        .map(|p| {
            Ok(Part {
                chunk: spool.put(&p.bytes)?,
                lens: p.lens,
                tally: p.tally,
            })
        })
        .collect()
}

/// An output format of a document of reports.
pub(crate) trait Format: Send + Sync {
    /// One report's piece of the document.
    fn render(&self, v: &View) -> io::Result<Piece>;
    /// The document: every report's piece, in order.
    fn write(&self, w: &mut dyn Write, parts: &[&Part], spooled: &Spooled) -> io::Result<()>;
}

/// Elements rendered apart, as one piece.
fn joined(elements: Vec<Vec<u8>>, tally: Tally) -> io::Result<Piece> {
    let lens = elements
        .iter()
        .map(|e| u32::try_from(e.len()).map_err(io::Error::other))
        .collect::<io::Result<Vec<u32>>>()?;
    Ok(Piece {
        bytes: elements.concat(),
        lens,
        tally,
    })
}

fn whole(bytes: Vec<u8>, tally: Tally) -> Piece {
    Piece {
        bytes,
        lens: Vec::new(),
        tally,
    }
}

/// `{"schema_version": …, "fail_on": …, "reports": [...]}`: each report's JSON document.
pub(crate) struct Json {
    pub(crate) fail_on: FailOn,
}

impl Format for Json {
    fn render(&self, v: &View) -> io::Result<Piece> {
        let mut out = Vec::new();
        write_json_at(&mut out, v.json.as_ref().unwrap_or(&Value::Null), 2)?;
        Ok(whole(out, Tally::default()))
    }
    fn write(&self, w: &mut dyn Write, parts: &[&Part], spooled: &Spooled) -> io::Result<()> {
        w.write_all(b"{\n  \"schema_version\": ")?;
        write_json_at(w, SCHEMA_VERSION, 1)?;
        w.write_all(b",\n  \"fail_on\": ")?;
        write_json_at(w, self.fail_on.as_str(), 1)?;
        w.write_all(b",\n  \"reports\": [")?;
        let mut reports = JsonArray::new(1);
        for p in parts {
            reports.next(w)?;
            spooled.copy(p.chunk, w)?;
        }
        reports.end(w)?;
        w.write_all(b"\n}\n")
    }
}

/// Findings grouped by workload and container, then a table of every container's counts.
pub(crate) struct Text {
    pub(crate) options: text::TextOptions,
}

impl Format for Text {
    fn render(&self, v: &View) -> io::Result<Piece> {
        let mut out = Vec::new();
        text::write_container(&mut out, v, self.options)?;
        Ok(whole(
            out,
            Tally {
                row: Some(row(v)),
                ..Tally::default()
            },
        ))
    }
    fn write(&self, w: &mut dyn Write, parts: &[&Part], spooled: &Spooled) -> io::Result<()> {
        let mut table = Table::default();
        for p in parts {
            spooled.copy(p.chunk, w)?;
            if let Some(r) = &p.tally.row {
                table.measure(r);
            }
        }
        if self.options.quiet {
            return Ok(());
        }
        table.head(w)?;
        for r in parts.iter().filter_map(|p| p.tally.row.as_ref()) {
            table.print(w, r)?;
        }
        Ok(())
    }
}

/// A container's row of the summary table.
fn row(v: &View) -> [String; 6] {
    let k = v.k8s.clone().unwrap_or_else(|| super::model::WorkloadDoc {
        file: String::new(),
        line: 0,
        kind: String::new(),
        namespace: None,
        name: v.reference.clone(),
        container: String::new(),
        image: v.reference.clone(),
        init: false,
    });
    let [e, wn, n] = if v.linted() {
        [Severity::Error, Severity::Warning, Severity::Note].map(|s| v.summary.of(s).to_string())
    } else {
        ["unread".to_string(), "-".to_string(), "-".to_string()]
    };
    [format!("{} {}", k.kind, k.name), k.container, k.image, e, wn, n]
}

/// The summary table (workload, container, image, findings by severity): each row measured
/// first, then written.
#[derive(Default)]
struct Table {
    width: [usize; 6],
}

impl Table {
    const HEAD: [&'static str; 6] = ["WORKLOAD", "CONTAINER", "IMAGE", "ERRORS", "WARNINGS", "NOTES"];

    fn measure(&mut self, row: &[String; 6]) {
        for (i, c) in row.iter().enumerate() {
            self.width[i] = self.width[i].max(crate::untrusted::line(c).chars().count());
        }
    }

    fn head(&mut self, w: &mut dyn Write) -> io::Result<()> {
        let head = Self::HEAD.map(str::to_string);
        self.measure(&head);
        self.print(w, &head)
    }

    fn print(&self, w: &mut dyn Write, cells: &[String; 6]) -> io::Result<()> {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            let c = crate::untrusted::line(c);
            let pad = self.width[i].saturating_sub(c.chars().count());
            // Counts align right, names left.
            if i >= 3 {
                out.push_str(&" ".repeat(pad));
                out.push_str(&c);
            } else {
                out.push_str(&c);
                out.push_str(&" ".repeat(pad));
            }
            if i < 5 {
                out.push_str("  ");
            }
        }
        writeln!(w, "{}", out.trim_end())
    }
}

/// One SARIF run: every linted report's results, up to [`sarif::MAX_RESULTS`].
pub(crate) struct Sarif {
    /// The run's `automationDetails.id`.
    pub(crate) automation_id: String,
}

impl Format for Sarif {
    fn render(&self, v: &View) -> io::Result<Piece> {
        if !v.linted() {
            return Ok(whole(Vec::new(), Tally::default()));
        }
        let subject = sarif::Subject::of_view(v);
        let results =
            sarif::rendered_results(&subject, v.findings.iter().chain(&v.ignored).chain(&v.baselined))?;
        joined(
            results,
            Tally {
                linted: true,
                run_properties: Some(subject.run_properties()),
                ..Tally::default()
            },
        )
    }
    fn write(&self, w: &mut dyn Write, parts: &[&Part], spooled: &Spooled) -> io::Result<()> {
        let mut s = sarif::SarifWriter::start(w, &self.automation_id)?;
        for p in parts.iter().filter(|p| p.tally.linted) {
            s.note_report(|| p.tally.run_properties.clone().unwrap_or_default());
            for result in p.elements(spooled)? {
                s.rendered(&result)?;
            }
        }
        s.finish()
    }
}

/// GitHub workflow commands, one per finding.
pub(crate) struct Github;

impl Format for Github {
    fn render(&self, v: &View) -> io::Result<Piece> {
        let mut out = Vec::new();
        github::write_view(&mut out, v)?;
        Ok(whole(out, Tally::default()))
    }
    fn write(&self, w: &mut dyn Write, parts: &[&Part], spooled: &Spooled) -> io::Result<()> {
        for p in parts {
            spooled.copy(p.chunk, w)?;
        }
        Ok(())
    }
}

/// GitLab Code Quality: one array of every report's issues.
pub(crate) struct Gitlab {
    /// The run has more than one report: each issue names its image.
    pub(crate) several: bool,
}

impl Format for Gitlab {
    fn render(&self, v: &View) -> io::Result<Piece> {
        let issues = gitlab::issues_of_view(v, self.several)
            .iter()
            .map(|i| {
                let mut out = Vec::new();
                write_json_at(&mut out, i, 1).map(|_| out)
            })
            .collect::<io::Result<Vec<Vec<u8>>>>()?;
        joined(issues, Tally::default())
    }
    fn write(&self, w: &mut dyn Write, parts: &[&Part], spooled: &Spooled) -> io::Result<()> {
        w.write_all(b"[")?;
        let mut issues = JsonArray::new(0);
        for p in parts {
            for issue in p.elements(spooled)? {
                issues.next(w)?;
                w.write_all(&issue)?;
            }
        }
        issues.end(w)?;
        w.write_all(b"\n")
    }
}

/// JUnit XML: each linted report's suite in order, then those whose image was not read.
pub(crate) struct Junit {
    pub(crate) fail_on: FailOn,
}

impl Format for Junit {
    fn render(&self, v: &View) -> io::Result<Piece> {
        if !v.linted() {
            let mut out = Vec::new();
            junit::write_unread(&mut out, &junit::Unread::of_view(v))?;
            return Ok(whole(out, Tally::default()));
        }
        let (xml, tests, failures) = junit::suite_of_view(v, self.fail_on, false)?.into_parts();
        Ok(whole(
            xml,
            Tally {
                tests,
                failures,
                linted: true,
                ..Tally::default()
            },
        ))
    }
    fn write(&self, w: &mut dyn Write, parts: &[&Part], spooled: &Spooled) -> io::Result<()> {
        let errors = parts.iter().filter(|p| !p.tally.linted).count();
        let tests: usize = parts.iter().map(|p| p.tally.tests).sum::<usize>() + errors;
        let failures: usize = parts.iter().map(|p| p.tally.failures).sum();
        junit::write_head(w, tests, failures, errors)?;
        for p in parts.iter().filter(|p| p.tally.linted) {
            spooled.copy(p.chunk, w)?;
        }
        for p in parts.iter().filter(|p| !p.tally.linted) {
            spooled.copy(p.chunk, w)?;
        }
        junit::write_tail(w)
    }
}

/// One self-contained page: a summary from every report's tally, then each linted report's
/// section in order. A section is rendered before its place on the page is known (`merge`
/// renders each report as it reads it): its anchor is written as [`ANCHOR`], which the page
/// replaces by the section's anchor when it writes it.
pub(crate) struct Html {
    pub(crate) fail_on: FailOn,
}

/// Where a section's anchor goes until the page knows it: a byte no section holds otherwise,
/// since every string of a section is escaped (control characters shown as `\x00`).
const ANCHOR: &str = "\0";

impl Format for Html {
    fn render(&self, v: &View) -> io::Result<Piece> {
        if let Some(facts) = v.facts_doc() {
            let facts = facts.map_err(io::Error::other)?;
            let mut out = Vec::new();
            let tally = html::section(&mut out, v, &facts, ANCHOR)?;
            return Ok(whole(
                out,
                Tally {
                    linted: true,
                    html: Some(HtmlTally::Linted(tally)),
                    ..Tally::default()
                },
            ));
        }
        let Some(failure) = &v.error else {
            return Err(io::Error::other(
                "a linted report without facts: the HTML page draws its memory budget from them",
            ));
        };
        let what = match &v.k8s {
            Some(w) => format!("{} ({})", w.describe(), v.reference),
            None => v.reference.clone(),
        };
        Ok(whole(
            Vec::new(),
            Tally {
                html: Some(HtmlTally::Unread(html::Unread {
                    what,
                    why: failure.message.clone(),
                })),
                ..Tally::default()
            },
        ))
    }
    fn write(&self, w: &mut dyn Write, parts: &[&Part], spooled: &Spooled) -> io::Result<()> {
        let mut tallies = Vec::new();
        let mut unread = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            match &p.tally.html {
                Some(HtmlTally::Linted(t)) => tallies.push(html::Tally {
                    anchor: html::anchor(i),
                    ..t.clone()
                }),
                Some(HtmlTally::Unread(u)) => unread.push(u.clone()),
                None => {}
            }
        }
        let options = html::HtmlOptions {
            title: "memlint lint --k8s",
            fail_on: self.fail_on,
        };
        html::start(w, &tallies, &unread, &options)?;
        for (i, p) in parts.iter().enumerate() {
            if matches!(p.tally.html, Some(HtmlTally::Linted(_))) {
                let anchor = html::anchor(i);
                let section = spooled.read(p.chunk)?;
                for (k, piece) in section.split(|b| *b == ANCHOR.as_bytes()[0]).enumerate() {
                    if k > 0 {
                        w.write_all(anchor.as_bytes())?;
                    }
                    w.write_all(piece)?;
                }
            }
        }
        html::finish(w)
    }
}
