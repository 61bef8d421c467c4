//! `memlint merge REPORT.json…`: the JSON reports of `lint --k8s --shard I/N` runs joined into
//! one, as the unsharded run would have written it (reports in manifest order), in every format
//! of `lint --k8s`, with an exit code by `--fail-on` over the merged findings. Each report is
//! read into the typed model ([`ContainerDoc`], then [`View`]) and rendered by the renderers
//! `lint --k8s` uses.

use crate::cli::{LintFormat, MergeArgs};
use crate::error::{Error, Result};
use crate::finding::Severity;
use crate::report::document::{self, Format, Part};
use crate::report::model::{schema_major, ContainerDoc, View, SCHEMA_VERSION};
use crate::report::spool::Spool;
use crate::untrusted::{line, Allow};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io::Read;
use std::process::ExitCode;

/// The most one report file (or standard input) may hold.
pub(crate) const MAX_FILE_BYTES: u64 = 1 << 30;
/// The most all report files of a merge may hold together.
pub(crate) const MAX_TOTAL_BYTES: u64 = 4 << 30;
/// The most one report of a file (one container's) may hold: it is the one thing read into
/// memory whole, and a JSON value takes up to about 16 times its text.
pub(crate) const MAX_REPORT_BYTES: u64 = 8 << 20;
/// The most reports a merge takes: each keeps its place (file, line) in memory.
pub(crate) const MAX_REPORTS: usize = 1_000_000;
/// The most bytes of distinct manifest file names (`k8s.file`) the reports may name.
pub(crate) const MAX_FILE_NAMES_BYTES: usize = 16 << 20;

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
    /// Its part of each document `Merge::formats` writes.
    parts: Vec<Part>,
}

/// The reports read so far, rendered and spooled.
struct Merge {
    /// The renderers of the formats asked for, each report's part of each document.
    formats: Vec<Box<dyn Format>>,
    spool: Spool,
    placed: Vec<Placed>,
    names: HashMap<String, u32>,
    names_bytes: usize,
    worst: Option<Severity>,
    unread: bool,
    /// `--baseline`: the accepted findings, and the rules whose entries can be fixed (those
    /// that ran on some report).
    baseline: Option<crate::baseline::Baseline>,
    rules_run: std::collections::HashSet<&'static str>,
    /// What the reports found, for the baseline's fixed entries.
    tally: super::baseline::Tally,
}

impl Merge {
    /// Takes one report: reads it into the model, renders it, spools it, keeps its place.
    fn add(&mut self, r: Value) -> std::result::Result<(), String> {
        if self.placed.len() >= MAX_REPORTS {
            return Err(format!(
                "the reports number more than {MAX_REPORTS}, the most a merge takes"
            ));
        }
        let mut doc: ContainerDoc = serde_path_to_error::deserialize(r).map_err(|e| {
            format!(
                "report {} of the merge, key `{}`: {}",
                self.placed.len() + 1,
                line(&e.path().to_string()),
                line(&e.inner().to_string())
            )
        })?;
        let (file, place_line) = doc
            .k8s
            .as_ref()
            .map(|k| (k.file.clone(), u64::from(k.line)))
            .unwrap_or_default();
        let id = self.name_id(file)?;
        self.unread |= doc.error.is_some();
        if let Some(b) = &self.baseline {
            // The rules whose entries can be fixed: those of the report's pin.
            let rules_run: std::collections::HashSet<&'static str> = doc.rules_run()?.into_iter().collect();
            self.rules_run.extend(&rules_run);
            if let Some((subject, all)) = doc.judge_against(b, &rules_run) {
                self.tally.linted.insert(subject);
                self.tally.occurring.extend(all);
                self.tally.baselined += doc.baselined.as_ref().map_or(0, Vec::len);
            }
        }
        let view = View::of_doc(doc)
            .map_err(|why| format!("report {} of the merge: {why}", self.placed.len() + 1))?;
        self.worst = self.worst.max(view.worst());
        let rendered = self
            .formats
            .iter()
            .map(|f| f.render(&view))
            .collect::<std::io::Result<Vec<_>>>()
            .and_then(|pieces| document::spool(&mut self.spool, pieces));
        let parts = rendered.map_err(|e| format!("cannot spool the report: {e}"))?;
        let seq = u32::try_from(self.placed.len()).map_err(|e| e.to_string())?;
        self.placed.push(Placed {
            file: id,
            line: place_line,
            seq,
            parts,
        });
        Ok(())
    }

    /// The index of a manifest file's name (`k8s.file`), kept once.
    fn name_id(&mut self, file: String) -> std::result::Result<u32, String> {
        if let Some(id) = self.names.get(&file) {
            return Ok(*id);
        }
        self.names_bytes += file.len();
        if self.names_bytes > MAX_FILE_NAMES_BYTES {
            return Err(format!(
                "the reports name more than {} MiB of distinct manifest files (`k8s.file`), the most a merge keeps",
                MAX_FILE_NAMES_BYTES >> 20
            ));
        }
        let id = u32::try_from(self.names.len()).map_err(|e| e.to_string())?;
        self.names.insert(file, id);
        Ok(id)
    }
}

/// A document the merge writes.
struct Document {
    format: LintFormat,
    /// `None`: standard output.
    destination: Option<std::path::PathBuf>,
    /// Its renderers in `Merge::formats`.
    renderers: std::ops::Range<usize>,
}

/// Refuses a report file of another major version of the JSON contract.
fn check_version(version: &str) -> std::result::Result<(), String> {
    if version.split('.').next() == Some(schema_major()) {
        Ok(())
    } else {
        Err(format!(
            "key `schema_version` is \"{}\": memlint {} reads reports of schema {}.x ({SCHEMA_VERSION} and earlier minors); merge reports written by the same major version",
            line(version),
            env!("CARGO_PKG_VERSION"),
            schema_major()
        ))
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
        let mut version = false;
        loop {
            self.budget.start_value();
            let Some(key) = map.next_key::<String>()? else {
                break;
            };
            if key == "schema_version" && !version {
                version = true;
                let v: String = map.next_value()?;
                if let Err(why) = check_version(&v) {
                    *self.refused.borrow_mut() = Some(why.clone());
                    return Err(de::Error::custom(why));
                }
            } else if key == "reports" && !found {
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
        if found && !version {
            let why = format!(
                "no key `schema_version`: the report was written by a memlint before {} (schema {SCHEMA_VERSION}); lint the shards again with this memlint",
                env!("CARGO_PKG_VERSION")
            );
            *self.refused.borrow_mut() = Some(why.clone());
            return Err(de::Error::custom(why));
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

pub(crate) fn run(args: MergeArgs) -> Result<ExitCode> {
    // A FIFO or folder at a report path is refused before any report is read.
    super::check_outputs(args.output.as_deref(), &args.outputs)?;
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
    let options = |several: bool| super::DocumentOptions {
        fail_on: args.fail_on,
        text: Default::default(),
        automation_id: super::fleet::sarif_automation_id(args.category.as_deref()),
        several,
    };
    // Each document asked for (`--format` to `--output`, then each `-o`), with the renderers
    // each report is rendered by: for GitLab, one for a merge of one report and one for more
    // (an issue names its image when there are several).
    let mut wanted = vec![(args.format.as_lint(), args.output.clone())];
    wanted.extend(args.outputs.iter().map(|(f, p)| (*f, Some(p.clone()))));
    let mut formats = Vec::new();
    let mut documents = Vec::new();
    for (format, destination) in wanted {
        let first = formats.len();
        formats.push(super::document_format(format, false, &options(false)));
        if format == LintFormat::Gitlab {
            formats.push(super::document_format(format, false, &options(true)));
        }
        documents.push(Document {
            format,
            destination,
            renderers: first..formats.len(),
        });
    }
    let merge = RefCell::new(Merge {
        baseline,
        // The rules of the reports' pins, as they are read.
        rules_run: std::collections::HashSet::new(),
        tally: Default::default(),
        formats,
        spool,
        placed: Vec::new(),
        names: HashMap::new(),
        names_bytes: 0,
        worst: None,
        unread: false,
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
        read_file(&merge, name, input, &mut total)?;
    }
    let Merge {
        formats,
        spool,
        mut placed,
        names,
        worst,
        unread,
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
    for d in &documents {
        let allow = Allow {
            commands: d.format == LintFormat::Github,
            ..Allow::default()
        };
        // GitLab: the renderer for one report or for several, as the unsharded run chose.
        let which = d.renderers.start + usize::from(placed.len() > 1).min(d.renderers.len() - 1);
        let parts: Vec<&Part> = placed.iter().filter_map(|p| p.parts.get(which)).collect();
        super::emit_with(d.destination.as_deref(), allow, |w| {
            formats[which].write(w, &parts, &spooled)
        })?;
    }
    super::baseline::finish(&baseline_options, baseline.as_ref(), tally, &rules_run, false)?;
    if unread {
        return Ok(ExitCode::from(2));
    }
    Ok(super::exit_for(args.fail_on, worst))
}

/// Reads one report file into the merge, within the bounds of a file and of the merge
/// (`total`: what the files before it held).
fn read_file(merge: &RefCell<Merge>, name: String, input: Box<dyn Read>, total: &mut u64) -> Result<()> {
    let budget = Budget {
        pos: Cell::new(0),
        file_end: MAX_FILE_BYTES,
        total_end: MAX_TOTAL_BYTES.saturating_sub(*total),
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
        merge,
        budget: &budget,
        refused: &refused,
    }
    .deserialize(&mut de)
    .and_then(|found| de.end().map(|_| found));
    *total += budget.pos.get();
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
    Ok(())
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
