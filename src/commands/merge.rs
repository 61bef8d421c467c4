//! `memlint merge REPORT.json…`: the JSON reports of `lint --k8s --shard I/N` runs joined into
//! one, as the unsharded run would have written it (reports in manifest order), in JSON, text,
//! SARIF, GitHub annotations or JUnit, with an exit code by `--fail-on` over the merged findings.

use crate::cli::{FailOn, MergeArgs, MergeFormat};
use crate::error::{Error, Result};
use crate::finding::Severity;
use crate::report::junit::{self, JsonSuite};
use crate::report::sarif;
use crate::report::spool::{Chunk, Spool, Spooled};
use crate::report::{write_json_at, JsonArray};
use crate::untrusted::{line, Allow};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::ExitCode;

/// The most one report file (or standard input) may hold.
pub const MAX_FILE_BYTES: u64 = 1 << 30;
/// The most all report files of a merge may hold together.
pub const MAX_TOTAL_BYTES: u64 = 4 << 30;
/// The most one report of a file (one container's) may hold: it is the one thing read into
/// memory whole, and a JSON value takes up to about 16 times its text.
pub const MAX_REPORT_BYTES: u64 = 8 << 20;
/// The most reports a merge takes: each keeps its place (file, line) in memory.
pub const MAX_REPORTS: usize = 1_000_000;
/// The most bytes of distinct manifest file names (`k8s.file`) the reports may name.
pub const MAX_FILE_NAMES_BYTES: usize = 16 << 20;

/// Which bound a report file hit.
#[derive(Clone, Copy)]
enum Bound {
    File,
    Total,
    Report,
}

impl Bound {
    fn describe(self) -> String {
        let mib = |b: u64| b >> 20;
        match self {
            Bound::File => format!(
                "holds more than {} MiB, the most one report file may",
                mib(MAX_FILE_BYTES)
            ),
            Bound::Total => format!(
                "takes the reports past {} MiB, the most a merge reads in all",
                mib(MAX_TOTAL_BYTES)
            ),
            Bound::Report => format!(
                "has a report (or value) of more than {} MiB, the most one container's report may hold",
                mib(MAX_REPORT_BYTES)
            ),
        }
    }
}

/// Where the reader is in a file, and how far it may go: to the end of the file's bound, of
/// the merge's, and of the report (or other value) being read.
struct Budget {
    pos: Cell<u64>,
    file_end: u64,
    total_end: u64,
    value_end: Cell<u64>,
    hit: Cell<Option<Bound>>,
}

impl Budget {
    /// The next value may take up to [`MAX_REPORT_BYTES`] from here.
    fn start_value(&self) {
        self.value_end
            .set(self.pos.get().saturating_add(MAX_REPORT_BYTES));
    }
}

/// A reader that fails past its [`Budget`], saying which bound it hit.
struct Bounded<'b, R> {
    inner: R,
    budget: &'b Budget,
}

impl<R: Read> Read for Bounded<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let b = self.budget;
        let (end, bound) = [
            (b.file_end, Bound::File),
            (b.total_end, Bound::Total),
            (b.value_end.get(), Bound::Report),
        ]
        .into_iter()
        .min_by_key(|(end, _)| *end)
        .unwrap_or((b.file_end, Bound::File));
        let room = end.saturating_sub(b.pos.get());
        // At the bound, one byte more says whether the input goes on past it.
        let want = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX)).max(1);
        let n = self.inner.read(&mut buf[..want])?;
        if room == 0 && n > 0 {
            b.hit.set(Some(bound));
            return Err(std::io::Error::other(bound.describe()));
        }
        b.pos.set(b.pos.get() + n as u64);
        Ok(n)
    }
}

/// A report's place in the merged order and where it lies in the spool.
struct Placed {
    /// Its `k8s.file`, as an index into the names.
    file: u32,
    line: u64,
    /// The order it was read in: reports of one place keep it.
    seq: u32,
    chunk: Chunk,
    /// SARIF: each result's length in the chunk.
    results: Vec<u32>,
    /// JUnit: tests and failing rules of its suite; `None` for an image that was not read.
    junit: Option<(usize, usize)>,
    /// Text: the summary table's row, spooled after the section.
    row: Chunk,
    /// It has findings (a report whose image was read): a report of the SARIF run.
    linted: bool,
}

/// The reports read so far, spooled in the format asked for.
struct Merge {
    format: MergeFormat,
    fail_on: FailOn,
    spool: Spool,
    placed: Vec<Placed>,
    names: HashMap<String, u32>,
    names_bytes: usize,
    worst: Option<Severity>,
    unread: bool,
    /// SARIF: the run's properties, should the merge hold one report.
    first_properties: Option<Value>,
    /// `--baseline`: the accepted findings, and the rules whose entries can be fixed.
    baseline: Option<crate::baseline::Baseline>,
    rules_run: std::collections::HashSet<&'static str>,
    /// What the reports found, for the baseline's fixed entries.
    tally: super::baseline::Tally,
}

impl Merge {
    /// Takes one report: renders it, spools it, keeps its place.
    fn add(&mut self, r: Value) -> std::result::Result<(), String> {
        if self.placed.len() >= MAX_REPORTS {
            return Err(format!(
                "the reports number more than {MAX_REPORTS}, the most a merge takes"
            ));
        }
        let file = r["k8s"]["file"].as_str().unwrap_or("");
        let id = match self.names.get(file) {
            Some(id) => *id,
            None => {
                self.names_bytes += file.len();
                if self.names_bytes > MAX_FILE_NAMES_BYTES {
                    return Err(format!(
                        "the reports name more than {} MiB of distinct manifest files (`k8s.file`), the most a merge keeps",
                        MAX_FILE_NAMES_BYTES >> 20
                    ));
                }
                let id = u32::try_from(self.names.len()).map_err(|e| e.to_string())?;
                self.names.insert(file.to_string(), id);
                id
            }
        };
        self.unread |= r.get("error").is_some();
        let mut r = r;
        if let Some(b) = self.baseline.take() {
            self.judge_against(&mut r, &b);
            self.baseline = Some(b);
        }
        let r = r;
        let worst = r["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| <Severity as clap::ValueEnum>::from_str(f["severity"].as_str()?, false).ok())
            .max();
        self.worst = self.worst.max(worst);
        let mut bytes = Vec::new();
        let mut results = Vec::new();
        let mut junit = None;
        let mut row = Vec::new();
        let rendered: std::io::Result<()> = (|| {
            match self.format {
                MergeFormat::Json => write_json_at(&mut bytes, &r, 2)?,
                MergeFormat::Text => {
                    let cells = text_section(&mut bytes, &r)?;
                    row = serde_json::to_vec(&cells).map_err(std::io::Error::other)?;
                }
                MergeFormat::Sarif => {
                    if r.get("findings").is_some() {
                        let subject = sarif::Subject::of_json(&r);
                        if self.first_properties.is_none() {
                            self.first_properties = Some(sarif::run_properties_of_json(&r));
                        }
                        let parse = |key: &str| -> Vec<crate::finding::Finding> {
                            r[key]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .filter_map(crate::report::json::finding_of_json)
                                .collect()
                        };
                        let findings = [parse("findings"), parse("ignored"), parse("baselined")].concat();
                        for result in sarif::rendered_results(&subject, findings.iter())? {
                            results.push(u32::try_from(result.len()).map_err(std::io::Error::other)?);
                            bytes.extend_from_slice(&result);
                        }
                    }
                }
                MergeFormat::Github => {
                    crate::report::github::write_json_reports(&mut bytes, std::slice::from_ref(&r))?
                }
                MergeFormat::Junit => match junit::suite_of_json(&r, self.fail_on)? {
                    JsonSuite::Linted(s) => {
                        let (xml, tests, failures) = s.into_parts();
                        bytes = xml;
                        junit = Some((tests, failures));
                    }
                    JsonSuite::Unread(u) => junit::write_unread(&mut bytes, &u)?,
                },
            }
            Ok(())
        })();
        let spooled = rendered.and_then(|_| Ok((self.spool.put(&bytes)?, self.spool.put(&row)?)));
        let (chunk, row) = spooled.map_err(|e| format!("cannot spool the report: {e}"))?;
        let seq = u32::try_from(self.placed.len()).map_err(|e| e.to_string())?;
        self.placed.push(Placed {
            file: id,
            line: r["k8s"]["line"].as_u64().unwrap_or(0),
            seq,
            chunk,
            results,
            junit,
            row,
            linted: r.get("findings").is_some(),
        });
        Ok(())
    }
}

impl Merge {
    /// Sets apart the findings of a linted container's report that the baseline holds (into
    /// its `baselined`, with a suppression naming the baseline, as `lint --baseline` does),
    /// counts them in its `summary`, lists its entries that no longer occur under `fixed`, and
    /// tallies what the report found.
    fn judge_against(&mut self, r: &mut Value, b: &crate::baseline::Baseline) {
        if r.get("error").is_some() || !r["k8s"].is_object() {
            return;
        }
        let k = &r["k8s"];
        let text = |key: &str| k[key].as_str().unwrap_or("").to_string();
        let subject = crate::baseline::Subject::container(
            &text("kind"),
            k["namespace"].as_str(),
            &text("name"),
            &text("container"),
        );
        let findings = match r.get_mut("findings").map(Value::take) {
            Some(Value::Array(all)) => all,
            _ => Vec::new(),
        };
        let mut new = Vec::new();
        let mut held = Vec::new();
        for mut f in findings {
            let entry = f["fingerprint"].as_str().and_then(|p| b.get(p));
            match entry {
                Some(e) => {
                    f["suppression"] = serde_json::json!({
                        "kind": "external",
                        "justification": format!("accepted in the baseline {} (first seen {})", b.path, e.first_seen),
                        "origin": b.path,
                    });
                    held.push(f);
                }
                None => new.push(f),
            }
        }
        if let Some(summary) = r.get_mut("summary").and_then(Value::as_object_mut) {
            for f in &held {
                let key = format!("{}s", f["severity"].as_str().unwrap_or("note"));
                if let Some(n) = summary.get_mut(&key) {
                    *n = serde_json::json!(n.as_u64().unwrap_or(0).saturating_sub(1));
                }
            }
            let before = summary.get("baselined").and_then(Value::as_u64).unwrap_or(0);
            summary.insert(
                "baselined".to_string(),
                serde_json::json!(before + held.len() as u64),
            );
        }
        let mut baselined = match r.get_mut("baselined").map(Value::take) {
            Some(Value::Array(all)) => all,
            _ => Vec::new(),
        };
        baselined.extend(held);
        let prints = |list: &[Value]| -> Vec<String> {
            list.iter()
                .filter_map(|f| f["fingerprint"].as_str().map(str::to_string))
                .collect()
        };
        let occurring: Vec<String> = [prints(&new), prints(&baselined)].concat();
        let ignored = r["ignored"].as_array().map(|l| prints(l)).unwrap_or_default();
        let all: Vec<String> = occurring.into_iter().chain(ignored).collect();
        let linted = std::collections::HashSet::from([subject.clone()]);
        let seen: std::collections::HashSet<String> = all.iter().cloned().collect();
        let fixed: Vec<crate::baseline::Entry> = b
            .fixed(&linted, &self.rules_run, &seen)
            .into_iter()
            .cloned()
            .collect();
        self.tally.linted.insert(subject);
        self.tally.occurring.extend(all);
        self.tally.baselined += baselined.len();
        if let Some(o) = r.as_object_mut() {
            if let Some(summary) = o.get_mut("summary").and_then(Value::as_object_mut) {
                summary.insert("fixed".to_string(), serde_json::json!(fixed.len()));
            }
            o.insert("findings".to_string(), Value::Array(new));
            o.insert("baselined".to_string(), Value::Array(baselined));
            o.insert(
                "fixed".to_string(),
                serde_json::to_value(&fixed).unwrap_or_default(),
            );
        }
    }
}

/// A report file: an object whose `reports` list is read one report at a time.
struct FileSeed<'m> {
    merge: &'m RefCell<Merge>,
    budget: &'m Budget,
    /// Why the merge stopped, when a report was refused.
    refused: &'m RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for FileSeed<'_> {
    type Value = bool;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<bool, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FileSeed<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("the JSON of `memlint lint --k8s … --format json`: an object with a `reports` list")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<bool, A::Error> {
        let mut found = false;
        loop {
            self.budget.start_value();
            let Some(key) = map.next_key::<String>()? else {
                break;
            };
            if key == "reports" && !found {
                found = true;
                map.next_value_seed(ReportsSeed {
                    merge: self.merge,
                    budget: self.budget,
                    refused: self.refused,
                })?;
            } else {
                self.budget.start_value();
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// The `reports` list, each report handed to the merge as it is read.
struct ReportsSeed<'m> {
    merge: &'m RefCell<Merge>,
    budget: &'m Budget,
    refused: &'m RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for ReportsSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ReportsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of reports")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        loop {
            self.budget.start_value();
            let Some(report) = seq.next_element::<Value>()? else {
                break;
            };
            if !report.is_object() {
                return Err(de::Error::custom("a report that is not an object"));
            }
            if let Err(why) = self.merge.borrow_mut().add(report) {
                *self.refused.borrow_mut() = Some(why.clone());
                return Err(de::Error::custom(why));
            }
        }
        // Past the list: the rest of the file is bounded as a value of its own.
        self.budget.start_value();
        Ok(())
    }
}

pub fn run(args: MergeArgs) -> Result<ExitCode> {
    // A FIFO or folder at the report path is refused before any report is read.
    if let Some(p) = &args.output {
        super::output::check_destination(&format!("--output {}", p.display()), p)?;
    }
    let baseline_options = super::baseline::Options {
        baseline: args.baseline.as_deref(),
        write: None,
        prune: args.prune_baseline,
    };
    let baseline = super::baseline::start(&baseline_options)?;
    let spool = Spool::new().map_err(|e| Error::Output {
        path: "a temporary file (TMPDIR) for the merged reports".to_string(),
        source: e,
    })?;
    let merge = RefCell::new(Merge {
        baseline,
        // The shards' pin is not in their JSON: every rule's entries may be fixed.
        rules_run: super::baseline::rules_run(None),
        tally: Default::default(),
        format: args.format,
        fail_on: args.fail_on,
        spool,
        placed: Vec::new(),
        names: HashMap::new(),
        names_bytes: 0,
        worst: None,
        unread: false,
        first_properties: None,
    });
    let mut stdin_read = false;
    let mut total: u64 = 0;
    for path in &args.reports {
        let (name, input): (String, Box<dyn Read>) = if path.as_os_str() == "-" {
            if stdin_read {
                return Err(Error::BadArgument {
                    what: "`-` given twice".to_string(),
                    help: "standard input holds one report".to_string(),
                });
            }
            stdin_read = true;
            ("standard input".to_string(), Box::new(std::io::stdin().lock()))
        } else {
            let file = open_report(path)?;
            (path.display().to_string(), Box::new(file))
        };
        let budget = Budget {
            pos: Cell::new(0),
            file_end: MAX_FILE_BYTES,
            total_end: MAX_TOTAL_BYTES.saturating_sub(total),
            value_end: Cell::new(MAX_REPORT_BYTES),
            hit: Cell::new(None),
        };
        let refused = RefCell::new(None);
        // The buffer outside the bound: serde_json reads a byte at a time, the bound counts
        // in buffers (so a report's bound is exact to within one buffer).
        let reader = std::io::BufReader::with_capacity(
            64 << 10,
            Bounded {
                inner: input,
                budget: &budget,
            },
        );
        let mut de = serde_json::Deserializer::from_reader(reader);
        let read = FileSeed {
            merge: &merge,
            budget: &budget,
            refused: &refused,
        }
        .deserialize(&mut de)
        .and_then(|found| de.end().map(|_| found));
        total += budget.pos.get();
        let bounded = |help: String| {
            Error::BadArgument {
            what: format!("{name}: {help}"),
            help: "merge the JSON reports of `memlint lint --k8s --shard I/N … --format json` runs; split a larger fleet into more shards, or merge fewer at once".to_string(),
        }
        };
        if let Some(bound) = budget.hit.get() {
            return Err(bounded(bound.describe()));
        }
        if let Some(why) = refused.into_inner() {
            return Err(bounded(why));
        }
        match read {
            Ok(true) => {}
            Ok(false) => {
                return Err(Error::BadArgument {
                    what: format!("{name} (no `reports` list)"),
                    help: "merge takes the JSON of `memlint lint --k8s … --format json`".to_string(),
                })
            }
            Err(e) => {
                return Err(Error::BadJson {
                    what: "the report".to_string(),
                    location: name,
                    source: e,
                })
            }
        }
    }
    let Merge {
        spool,
        mut placed,
        names,
        worst,
        unread,
        first_properties,
        baseline,
        rules_run,
        tally,
        ..
    } = merge.into_inner();
    // Manifest order, as `lint --k8s` writes it: file, then line; reports of one place in the
    // order they were read.
    let mut by_name: Vec<(&str, u32)> = names.iter().map(|(n, id)| (n.as_str(), *id)).collect();
    by_name.sort_unstable();
    let mut rank = vec![0u32; by_name.len()];
    for (r, (_, id)) in by_name.iter().enumerate() {
        rank[*id as usize] = r as u32;
    }
    placed.sort_unstable_by_key(|p| (rank[p.file as usize], p.line, p.seq));
    let spooled = spool.finish().map_err(|e| Error::Output {
        path: "a temporary file (TMPDIR) for the merged reports".to_string(),
        source: e,
    })?;
    let allow = Allow {
        commands: args.format == MergeFormat::Github,
        ..Allow::default()
    };
    super::emit_with(args.output.as_deref(), allow, |w| match args.format {
        MergeFormat::Json => {
            w.write_all(b"{\n  \"fail_on\": ")?;
            write_json_at(w, args.fail_on.as_str(), 1)?;
            w.write_all(b",\n  \"reports\": [")?;
            let mut reports = JsonArray::new(1);
            for p in &placed {
                reports.next(w)?;
                spooled.copy(p.chunk, w)?;
            }
            reports.end(w)?;
            w.write_all(b"\n}\n")
        }
        MergeFormat::Sarif => {
            let mut s =
                sarif::SarifWriter::start(w, &sarif::automation_id(args.category.as_deref(), "memlint/k8s"))?;
            for p in placed.iter().filter(|p| p.linted) {
                s.note_report(|| first_properties.clone().unwrap_or_default());
                let bytes = spooled.read(p.chunk)?;
                let mut at = 0usize;
                for len in &p.results {
                    let end = (at + *len as usize).min(bytes.len());
                    s.rendered(&bytes[at..end])?;
                    at = end;
                }
            }
            s.finish()
        }
        MergeFormat::Text => {
            let mut table = super::fleet::Table::default();
            let row_of = |p: &Placed| -> std::io::Result<[String; 6]> {
                serde_json::from_slice(&spooled.read(p.row)?).map_err(std::io::Error::other)
            };
            for p in &placed {
                spooled.copy(p.chunk, w)?;
                table.measure(&row_of(p)?);
            }
            table.head(w)?;
            for p in &placed {
                table.row(w, &row_of(p)?)?;
            }
            Ok(())
        }
        MergeFormat::Github => {
            for p in &placed {
                spooled.copy(p.chunk, w)?;
            }
            Ok(())
        }
        MergeFormat::Junit => write_junit(w, &placed, &spooled),
    })?;
    super::baseline::finish(&baseline_options, baseline.as_ref(), tally, &rules_run, false)?;
    if unread {
        return Ok(ExitCode::from(2));
    }
    Ok(super::exit_for(args.fail_on, worst))
}

/// A report file, opened without blocking (a FIFO with no writer would block `open` itself)
/// and refused unless it is a regular file of at most [`MAX_FILE_BYTES`].
fn open_report(path: &std::path::Path) -> Result<std::fs::File> {
    use crate::user_file::ReadError;
    use std::os::unix::fs::OpenOptionsExt;
    let bad = |e| Error::user_file(path.display(), e);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| bad(ReadError::Io(e)))?;
    let meta = file.metadata().map_err(|e| bad(ReadError::Io(e)))?;
    if !meta.is_file() {
        return Err(bad(ReadError::NotRegular(if meta.is_dir() {
            "a folder"
        } else {
            "not a regular file"
        })));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(Error::BadArgument {
            what: format!("{}: {}", path.display(), Bound::File.describe()),
            help: "split the fleet into more shards (`--shard I/N`), or merge fewer reports at once"
                .to_string(),
        });
    }
    Ok(file)
}

/// The JUnit document: the suites in order, then the images that were not read.
fn write_junit(w: &mut dyn Write, placed: &[Placed], spooled: &Spooled) -> std::io::Result<()> {
    let read = || placed.iter().filter_map(|p| p.junit.map(|j| (p, j)));
    let errors = placed.iter().filter(|p| p.junit.is_none()).count();
    let tests: usize = read().map(|(_, (t, _))| t).sum::<usize>() + errors;
    let failures: usize = read().map(|(_, (_, f))| f).sum();
    junit::write_head(w, tests, failures, errors)?;
    for (p, _) in read() {
        spooled.copy(p.chunk, w)?;
    }
    for p in placed.iter().filter(|p| p.junit.is_none()) {
        spooled.copy(p.chunk, w)?;
    }
    junit::write_tail(w)
}

/// A report's findings under its workload; the summary table's row.
fn text_section(w: &mut dyn Write, r: &Value) -> std::io::Result<[String; 6]> {
    let k = &r["k8s"];
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let ns = k["namespace"]
        .as_str()
        .map(|n| format!("{n}/"))
        .unwrap_or_default();
    writeln!(
        w,
        "== {} {}{}, container {} ({}:{})",
        line(&s(&k["kind"])),
        line(&ns),
        line(&s(&k["name"])),
        line(&s(&k["container"])),
        line(&s(&k["file"])),
        k["line"].as_u64().unwrap_or(0)
    )?;
    if let Some(e) = r.get("error") {
        writeln!(
            w,
            "error: the image could not be read: {}",
            line(&s(&e["message"]))
        )?;
    }
    let count = |sev: &str| {
        r["findings"]
            .as_array()
            .map_or(0, |f| f.iter().filter(|f| f["severity"] == sev).count())
    };
    for f in r["findings"].as_array().into_iter().flatten() {
        writeln!(
            w,
            "{}[{}]: {}",
            line(&s(&f["severity"])),
            line(&s(&f["rule"])),
            line(&s(&f["message"]))
        )?;
    }
    writeln!(w)?;
    let unread = r.get("error").is_some();
    let cell = |n: usize, unread_text: &str| {
        if unread {
            unread_text.to_string()
        } else {
            n.to_string()
        }
    };
    Ok([
        format!("{} {}", s(&k["kind"]), s(&k["name"])),
        s(&k["container"]),
        s(&k["image"]),
        cell(count("error"), "unread"),
        cell(count("warning"), "-"),
        cell(count("note"), "-"),
    ])
}
