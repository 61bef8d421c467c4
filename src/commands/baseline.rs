//! `--baseline`, `--write-baseline` and `--prune-baseline` of `lint` and `merge`: the baseline
//! read before any image, the run's findings gathered as each report is made, and at the end
//! the fixed entries counted and the files written (through a temporary file renamed over the
//! path, as reports are).

use crate::baseline::{self, Baseline, Entry, Subject};
use crate::error::Result;
use crate::untrusted::{line, Allow};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// What the run was asked to do with a baseline.
pub(crate) struct Options<'a> {
    pub(crate) baseline: Option<&'a Path>,
    pub(crate) write: Option<&'a Path>,
    pub(crate) prune: bool,
}

/// Reads `--baseline FILE`, and refuses a `--write-baseline` path that is not a regular file,
/// before any image is read.
pub(crate) fn start(o: &Options) -> Result<Option<Baseline>> {
    if let Some(p) = o.write {
        super::output::check_destination(&format!("--write-baseline {}", p.display()), p)?;
    }
    o.baseline.map(Baseline::load).transpose()
}

/// What a run found, gathered report by report.
#[derive(Default)]
pub(crate) struct Tally {
    /// Every finding no ignore hides, as today's entries.
    pub(crate) seen: Vec<Entry>,
    /// The fingerprints of every finding, ignored ones included.
    pub(crate) occurring: HashSet<String>,
    /// The subjects linted.
    pub(crate) linted: HashSet<Subject>,
    pub(crate) baselined: usize,
}

impl Tally {
    /// Adds one report's findings.
    pub(crate) fn add(&mut self, subject: &Subject, seen: &[Entry], ignored: &[String], baselined: usize) {
        self.linted.insert(subject.clone());
        self.occurring.extend(
            seen.iter()
                .map(|e| e.fingerprint.clone())
                .chain(ignored.iter().cloned()),
        );
        self.seen.extend_from_slice(seen);
        self.baselined += baselined;
    }
}

/// The rules this run ran (a `--rules-version` pin leaves some out): only their entries can be
/// fixed.
pub(crate) fn rules_run(pin: Option<&crate::version::Version>) -> HashSet<&'static str> {
    crate::rules::pinned(crate::rules::ALL, pin)
        .into_iter()
        .map(|r| r.id)
        .collect()
}

/// The baseline's entries of `subject` that no longer occur in `seen` and `ignored` (one
/// report's findings), when the run has a baseline.
pub(crate) fn fixed_of(
    b: Option<&Baseline>,
    subject: &Subject,
    seen: &[Entry],
    ignored: &[String],
    rules: &HashSet<&str>,
) -> Vec<Entry> {
    let Some(b) = b else { return Vec::new() };
    let linted = HashSet::from([subject.clone()]);
    let occurring: HashSet<String> = seen
        .iter()
        .map(|e| e.fingerprint.clone())
        .chain(ignored.iter().cloned())
        .collect();
    b.fixed(&linted, rules, &occurring).into_iter().cloned().collect()
}

/// Ends the run's baseline work: counts the fixed entries, writes `--write-baseline` and
/// prunes the `--baseline` file as asked, and says so in one line on standard error (unless
/// `quiet`): the text report has the counts already, other formats have them in JSON.
pub(crate) fn finish(
    o: &Options,
    b: Option<&Baseline>,
    tally: Tally,
    rules: &HashSet<&str>,
    quiet: bool,
) -> Result<()> {
    let fixed: Vec<&Entry> = match b {
        Some(b) => b.fixed(&tally.linted, rules, &tally.occurring),
        None => Vec::new(),
    };
    let gone: HashSet<&str> = fixed.iter().map(|e| e.fingerprint.as_str()).collect();
    if let Some(path) = o.write {
        // Refreshed: this run's findings, each keeping the day the old baseline first saw it,
        // and the old entries of what this run did not lint (another shard, an image not
        // given or not read) as they were.
        let bytes = baseline::render(tally.seen.clone(), b, |old| !tally.linted.contains(&old.subject));
        write(path, &bytes)?;
    }
    // Written to the baseline's own path, the refreshed baseline has no fixed entry already.
    let rewritten = o.write.is_some() && o.write == o.baseline;
    if let (true, false, Some(b)) = (o.prune, rewritten, b) {
        let kept = baseline::render(Vec::new(), Some(b), |e| !gone.contains(e.fingerprint.as_str()));
        write(Path::new(&b.path), &kept)?;
    }
    if quiet {
        return Ok(());
    }
    if let Some(b) = b {
        let mut said = format!(
            "memlint: baseline {}: {} finding(s) baselined, {} fixed (no longer found)",
            b.path,
            tally.baselined,
            fixed.len()
        );
        if !fixed.is_empty() {
            said.push_str(if o.prune {
                "; --prune-baseline dropped them"
            } else {
                "; --prune-baseline drops them from the file"
            });
        }
        super::eprint_line(&line(&said));
        for e in fixed.iter().take(MAX_FIXED_LINES) {
            let paths = if e.paths.is_empty() {
                String::new()
            } else {
                format!(" {}", e.paths.join(", "))
            };
            super::eprint_line(&line(&format!(
                "memlint:   fixed {} on {}{paths} (first seen {})",
                e.rule,
                e.subject.describe(),
                e.first_seen
            )));
        }
        if fixed.len() > MAX_FIXED_LINES {
            super::eprint_line(&format!(
                "memlint:   and {} more fixed (the JSON report lists each under `fixed`)",
                fixed.len() - MAX_FIXED_LINES
            ));
        }
    }
    if let Some(path) = o.write {
        super::eprint_line(&line(&format!(
            "memlint: wrote the baseline {} ({} finding(s))",
            path.display(),
            tally.seen.len()
        )));
    }
    Ok(())
}

/// The fixed entries named one per line on standard error; the rest are counted.
const MAX_FIXED_LINES: usize = 20;

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    super::output::write_file(&PathBuf::from(path), Allow::default(), |w| w.write_all(bytes))
}
