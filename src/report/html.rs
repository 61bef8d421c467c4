//! The report for a person who was not at the CI run: one self-contained HTML page (no script,
//! no request: a Content-Security-Policy of `default-src 'none'` with inline style and `data:`
//! images) with a summary of the run, then per container its memory budget drawn as a bar (the
//! limit, what the settings commit, what is unknown), its findings with evidence, fix and
//! where each sits.
//!
//! Written one container at a time: [`section`] renders one report and returns its
//! [`Tally`], the few counts the summary needs, so that a fleet renders each container while
//! its image is in memory, spools the section, and writes the page from the tallies and the
//! spooled sections at the end ([`start`], the sections, [`finish`]).
//!
//! Every string from an image, a manifest, a Dockerfile or the config goes through [`text`] (or
//! [`text_lines`]): hidden characters escaped as the terminal report escapes them
//! ([`crate::untrusted::line`]), then `& < > " '` as entities, so that no string can open an
//! element, close the `<style>` or leave an attribute.

use super::budget::{self, AmountDoc, FactsDoc, MemoryDoc, WorkerCountDoc};
use super::lint::LintReport;
use super::model::View;
use crate::finding::{FailOn, Finding, Severity};
use crate::units::human_bytes;
use crate::untrusted::{line, lines};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{self, Write};

/// The page's policy: nothing is fetched, no script runs; inline style and `data:` images only.
pub(crate) const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

/// What the page says of the run besides the reports.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HtmlOptions<'a> {
    /// What was run, in words (`memlint lint`, `memlint lint --k8s`).
    pub(crate) title: &'a str,
    pub(crate) fail_on: FailOn,
}

/// One image that could not be read: the containers that run it are not linted.
#[derive(Clone, Debug)]
pub(crate) struct Unread {
    /// The container (or the image reference, without `--k8s`).
    pub(crate) what: String,
    pub(crate) why: String,
}

pub(crate) use super::model::HtmlRow as Tally;

/// Severities from the worst, with the index of their count in [`Tally::counts`].
const SEVERITIES: [(Severity, usize); 3] =
    [(Severity::Error, 0), (Severity::Warning, 1), (Severity::Note, 2)];

/// An untrusted string as the text of an element or an attribute value: hidden characters
/// escaped as [`line`] shows them (so `\x1b` and `\x07` read as such), then HTML's five.
pub(crate) fn text(s: &str) -> Cow<'_, str> {
    escape_html(line(s))
}

/// Several lines of untrusted text (a fix): as [`text`], but `\n` stays a line break.
pub(crate) fn text_lines(s: &str) -> Cow<'_, str> {
    escape_html(lines(s))
}

fn escape_html(s: Cow<'_, str>) -> Cow<'_, str> {
    if !s.contains(['&', '<', '>', '"', '\'']) {
        return s;
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The whole page of `reports` (`lint` without `--k8s`: one section per image), and the images
/// that could not be read.
pub(crate) fn write(
    w: &mut dyn Write,
    reports: &[LintReport],
    unread: &[super::junit::Unread],
    o: &HtmlOptions,
) -> io::Result<()> {
    let unread: Vec<Unread> = unread
        .iter()
        .map(|u| Unread {
            what: u.reference.clone(),
            why: u.message.clone(),
        })
        .collect();
    let mut views = Vec::with_capacity(reports.len());
    for r in reports {
        let facts = FactsDoc::of_facts(r.facts).map_err(io::Error::other)?;
        views.push((r.view(), facts));
    }
    let tallies: Vec<Tally> = views
        .iter()
        .enumerate()
        .map(|(i, (v, f))| tally(v, f, anchor(i)))
        .collect();
    start(w, &tallies, &unread, o)?;
    for (i, (v, f)) in views.iter().enumerate() {
        section(w, v, f, &anchor(i))?;
    }
    finish(w)
}

/// The anchor of the `index`th section of a page.
pub(crate) fn anchor(index: usize) -> String {
    format!("r{}", index + 1)
}

/// The container (or image) a report is of, as a person names it.
fn heading(v: &View) -> String {
    match &v.k8s {
        Some(wl) => wl.describe(),
        None => format!("{} ({})", v.reference, v.platform),
    }
}

/// Writes the head of the page and its summary, from the tallies of every section in the
/// order they follow.
pub(crate) fn start(
    w: &mut dyn Write,
    tallies: &[Tally],
    unread: &[Unread],
    o: &HtmlOptions,
) -> io::Result<()> {
    write!(
        w,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"memlint {}\">\n\
         <title>memlint report</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n",
        env!("CARGO_PKG_VERSION")
    )?;
    writeln!(w, "<header>\n<h1>memlint report</h1>")?;
    writeln!(
        w,
        "<p class=\"run\">{} · memlint {} · fails on: {}</p>\n</header>",
        text(o.title),
        env!("CARGO_PKG_VERSION"),
        o.fail_on
    )?;
    let mut images: Vec<&str> = tallies.iter().map(|t| t.image.as_str()).collect();
    images.sort_unstable();
    images.dedup();
    let mut totals = [0usize; 3];
    let (mut ignored, mut baselined) = (0, 0);
    let mut by_rule: BTreeMap<&str, (Severity, usize, usize)> = BTreeMap::new();
    for t in tallies {
        for (total, n) in totals.iter_mut().zip(t.counts) {
            *total += n;
        }
        ignored += t.ignored;
        baselined += t.baselined;
        for (rule, sev, n) in &t.by_rule {
            let e = by_rule.entry(*rule).or_insert((*sev, 0, 0));
            e.0 = e.0.max(*sev);
            e.1 += n;
            e.2 += 1;
        }
    }
    writeln!(
        w,
        "<section id=\"summary\">\n<h2>Summary</h2>\n<ul class=\"totals\">"
    )?;
    let tile = |w: &mut dyn Write, class: &str, n: usize, what: &str| {
        writeln!(w, "<li class=\"{class}\"><b>{n}</b> {what}</li>")
    };
    tile(
        w,
        "images",
        images.len(),
        if images.len() == 1 { "image" } else { "images" },
    )?;
    let reports = tallies.len() + unread.len();
    let word = match (
        tallies.iter().any(|t| t.container) || tallies.is_empty(),
        reports == 1,
    ) {
        (true, true) => "container",
        (true, false) => "containers",
        (false, true) => "report",
        (false, false) => "reports",
    };
    tile(w, "containers", reports, word)?;
    for (sev, i) in SEVERITIES {
        let word = if totals[i] == 1 {
            sev.as_str().to_string()
        } else {
            format!("{}s", sev.as_str())
        };
        tile(w, &format!("sev-{sev}"), totals[i], &word)?;
    }
    if ignored > 0 {
        tile(w, "ignored", ignored, "ignored")?;
    }
    if baselined > 0 {
        tile(w, "baselined", baselined, "baselined")?;
    }
    if !unread.is_empty() {
        tile(w, "sev-error", unread.len(), "not linted")?;
    }
    writeln!(w, "</ul>")?;
    if !by_rule.is_empty() {
        writeln!(
            w,
            "<h3>Findings by rule</h3>\n<table class=\"rules\">\n<thead><tr><th>rule</th><th>severity</th><th>findings</th><th>reports</th></tr></thead>\n<tbody>"
        )?;
        let mut rows: Vec<_> = by_rule.into_iter().collect();
        rows.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(b.1 .1.cmp(&a.1 .1)).then(a.0.cmp(b.0)));
        for (rule, (sev, n, reports)) in rows {
            writeln!(
                w,
                "<tr><td><code>{}</code></td><td><span class=\"badge sev-{sev}\">{sev}</span></td><td>{n}</td><td>{reports}</td></tr>",
                text(rule)
            )?;
        }
        writeln!(w, "</tbody>\n</table>")?;
    }
    writeln!(
        w,
        "<h3>Reports</h3>\n<table class=\"reports\">\n<thead><tr><th>container or image</th><th>image</th><th>memory limit</th><th>committed</th><th>errors</th><th>warnings</th><th>notes</th></tr></thead>\n<tbody>"
    )?;
    for t in tallies {
        let committed = if t.committed == 0 {
            "—".to_string()
        } else {
            human_bytes(t.committed)
        };
        writeln!(
            w,
            "<tr><td><a href=\"#{}\">{}</a></td><td><code>{}</code></td><td>{}</td><td{}>{}</td><td class=\"n sev-error\">{}</td><td class=\"n sev-warning\">{}</td><td class=\"n sev-note\">{}</td></tr>",
            t.anchor,
            text(&t.heading),
            text(&t.image),
            text(&t.limit),
            if t.over { " class=\"over\"" } else { "" },
            committed,
            t.counts[0],
            t.counts[1],
            t.counts[2]
        )?;
    }
    for u in unread {
        writeln!(
            w,
            "<tr class=\"unread\"><td>{}</td><td colspan=\"6\">not linted: {}</td></tr>",
            text(&u.what),
            text(&u.why)
        )?;
    }
    writeln!(w, "</tbody>\n</table>\n</section>")
}

/// Writes the end of the page.
pub(crate) fn finish(w: &mut dyn Write) -> io::Result<()> {
    writeln!(
        w,
        "<footer><p>Each rule is explained by <code>memlint explain RULE</code> and in <code>rules/RULE.md</code> of memlint's repository.</p></footer>\n</body>\n</html>"
    )
}

/// Writes the section of one report, its facts read as [`FactsDoc`], under `anchor`, and
/// returns its tally.
pub(crate) fn section(w: &mut dyn Write, v: &View, f: &FactsDoc, anchor: &str) -> io::Result<Tally> {
    let heading = heading(v);
    let budget = Budget::of(f);
    let worst = v.worst().map_or("none", Severity::as_str);
    writeln!(
        w,
        "<section class=\"report worst-{worst}\" id=\"{anchor}\">\n<h2>{}</h2>",
        text(&heading)
    )?;
    writeln!(w, "<dl class=\"about\">")?;
    writeln!(w, "<dt>image</dt><dd><code>{}</code></dd>", text(&v.reference))?;
    if let Some(wl) = &v.k8s {
        if wl.image != v.reference {
            writeln!(
                w,
                "<dt>as the manifest names it</dt><dd><code>{}</code></dd>",
                text(&wl.image)
            )?;
        }
    }
    writeln!(
        w,
        "<dt>platform</dt><dd>{}</dd><dt>libc</dt><dd>{}</dd>\n</dl>",
        text(&v.platform),
        text(&f.libc.describe())
    )?;
    budget.write(w, anchor)?;
    write_findings(w, v, anchor)?;
    if !v.notes.is_empty() {
        writeln!(w, "<ul class=\"notes\">")?;
        for n in &v.notes {
            writeln!(w, "<li>note: {}</li>", text(n))?;
        }
        writeln!(w, "</ul>")?;
    }
    writeln!(w, "</section>")?;
    Ok(tally_of(v, anchor.to_string(), heading, &budget))
}

/// What the summary needs of the report whose section is `anchor`.
pub(crate) fn tally(v: &View, f: &FactsDoc, anchor: String) -> Tally {
    tally_of(v, anchor, heading(v), &Budget::of(f))
}

fn tally_of(v: &View, anchor: String, heading: String, budget: &Budget) -> Tally {
    let mut by_rule: Vec<(&'static str, Severity, usize)> = Vec::new();
    for f in &v.findings {
        match by_rule
            .iter_mut()
            .find(|(id, sev, _)| *id == f.rule && *sev == f.severity)
        {
            Some(e) => e.2 += f.count(),
            None => by_rule.push((f.rule, f.severity, f.count())),
        }
    }
    Tally {
        anchor,
        heading,
        image: v.reference.clone(),
        container: v.k8s.is_some(),
        counts: [Severity::Error, Severity::Warning, Severity::Note].map(|s| v.summary.of(s)),
        ignored: v.summary.ignored,
        baselined: v.summary.baselined,
        by_rule,
        limit: budget
            .budget
            .limit_bytes()
            .map_or_else(|| "none".to_string(), human_bytes),
        committed: budget.committed(),
        over: budget.over(),
    }
}

fn write_findings(w: &mut dyn Write, r: &View, anchor: &str) -> io::Result<()> {
    let total: usize = r.findings.iter().map(Finding::count).sum();
    writeln!(w, "<h3>Findings ({total})</h3>")?;
    if r.findings.is_empty() {
        writeln!(w, "<p class=\"clean\">No finding.</p>")?;
    }
    let mut n = 0;
    for (sev, _) in SEVERITIES {
        for f in r.findings.iter().filter(|f| f.severity == sev) {
            n += 1;
            finding(w, f, &format!("{anchor}-f{n}"), "")?;
        }
    }
    if !r.ignored.is_empty() || !r.baselined.is_empty() {
        writeln!(
            w,
            "<details class=\"hidden-findings\"><summary>{} ignored, {} baselined</summary>",
            r.summary.ignored, r.summary.baselined
        )?;
        for (i, f) in r.ignored.iter().chain(&r.baselined).enumerate() {
            let how = f
                .suppression
                .as_ref()
                .map(|s| format!("{}: {}", s.origin, s.justification))
                .unwrap_or_default();
            finding(w, f, &format!("{anchor}-s{}", i + 1), &how)?;
        }
        writeln!(w, "</details>")?;
    }
    Ok(())
}

/// One finding: severity, rule and message; where it sits; evidence; fix.
fn finding(w: &mut dyn Write, f: &Finding, id: &str, suppressed_by: &str) -> io::Result<()> {
    let sev = f.severity;
    writeln!(
        w,
        "<article class=\"finding sev-{sev}\" id=\"{id}\">\n<h4><span class=\"badge sev-{sev}\">{sev}</span> <code class=\"rule\">{}</code> {}</h4>",
        text(f.rule),
        text(&f.message)
    )?;
    if !suppressed_by.is_empty() {
        writeln!(w, "<p class=\"suppressed\">hidden by {}</p>", text(suppressed_by))?;
    }
    if f.omitted > 0 {
        writeln!(
            w,
            "<p class=\"omitted\">stands for {} findings of this rule past the per-rule cap</p>",
            f.omitted
        )?;
    }
    if let Some(l) = &f.location {
        let lines = if l.end_line > l.line {
            format!("{}-{}", l.line, l.end_line)
        } else {
            l.line.to_string()
        };
        write!(w, "<p class=\"where\">at <code>{}:{lines}</code>", text(&l.path))?;
        if let Some(i) = &l.instruction {
            write!(w, ": <code>{}</code>", text(i))?;
        }
        writeln!(w, "</p>")?;
    }
    if !f.evidence.is_empty() {
        writeln!(w, "<h5>evidence</h5>\n<ul class=\"evidence\">")?;
        for e in &f.evidence {
            writeln!(w, "<li>{}</li>", text(e.text()))?;
        }
        writeln!(w, "</ul>")?;
    }
    if !f.fix.is_empty() {
        writeln!(w, "<h5>fix</h5>\n<pre class=\"fix\">{}</pre>", text_lines(&f.fix))?;
    }
    writeln!(
        w,
        "<p class=\"docs\">about this rule: <code>memlint explain {}</code></p>\n</article>",
        text(f.rule)
    )
}

/// One part of the memory budget the bar draws.
struct Part {
    /// `heap`, `offheap`, `volume`, `shm`, `workers`: its colour.
    class: &'static str,
    label: String,
    bytes: u64,
    /// A ceiling the runtime's default allows, not memory a setting commits (the JVM's direct
    /// memory without `-XX:MaxDirectMemorySize`, which may grow as large as the heap cap): drawn
    /// apart, outside what is counted against the limit.
    ceiling: bool,
}

/// The container's memory budget as the page draws it: the limit, what is committed of it
/// in bytes, what a soft limit marks (GOMEMLIMIT), and what cannot be counted.
struct Budget<'a> {
    budget: &'a MemoryDoc,
    rows: Vec<[String; 3]>,
    parts: Vec<Part>,
    marks: Vec<(String, u64)>,
    unknown: Vec<String>,
}

impl<'a> Budget<'a> {
    fn of(f: &'a FactsDoc) -> Budget<'a> {
        let b = &f.memory;
        let mut parts = Vec::new();
        let mut marks = Vec::new();
        let mut unknown = Vec::new();
        let mut rows = budget::rows(b);
        for c in &b.runtimes {
            let name = format!("{} {}", c.runtime, c.what.replace('_', " "));
            if c.what == "gomemlimit" {
                if let Some(bytes) = c.bytes {
                    marks.push((format!("GOMEMLIMIT {}", human_bytes(bytes)), bytes));
                }
                continue;
            }
            match (c.bytes, c.percent_of_limit) {
                (Some(bytes), _) if c.what == "direct_memory" && c.status == "default" => parts.push(Part {
                    class: "ceiling",
                    label: format!("{name}: no cap, may grow as large as the heap cap"),
                    bytes,
                    ceiling: true,
                }),
                (Some(bytes), _) => parts.push(Part {
                    class: if c.what == "heap" { "heap" } else { "offheap" },
                    label: format!("{name} ({})", c.status),
                    bytes,
                    ceiling: false,
                }),
                (None, Some(p)) => {
                    unknown.push(format!("{name}: {p} % of a limit the container does not set"))
                }
                (None, None) => unknown.push(match &c.why {
                    Some(why) => format!("{name}: {why}"),
                    None => format!("{name}: {}", c.setting),
                }),
            }
        }
        for v in &b.volumes {
            match v.size_limit {
                Some(bytes) => parts.push(Part {
                    class: "volume",
                    label: format!("emptyDir {} at {} (medium: Memory)", v.volume, v.path),
                    bytes,
                    ceiling: false,
                }),
                None => unknown.push(format!(
                    "emptyDir {} at {}: no sizeLimit, the tmpfs may take what the node has",
                    v.volume, v.path
                )),
            }
        }
        // A memory volume mounted at /dev/shm is one of the volumes above.
        match (b.dev_shm.from.as_str(), b.dev_shm.bytes) {
            ("memory_volume", _) | ("volume", _) => {}
            (_, Some(bytes)) => parts.push(Part {
                class: "shm",
                label: format!("/dev/shm: {}", b.dev_shm.source),
                bytes,
                ceiling: false,
            }),
            (_, None) => unknown.push(format!("/dev/shm: {}", b.dev_shm.source)),
        }
        for server in f.php.iter().flat_map(|p| &p.servers) {
            for pool in &server.pools {
                let who = format!("{} pool {}", server.kind, pool.name);
                let per = pool.memory_limit.as_ref().and_then(|m| m.bytes);
                match (&pool.workers, per) {
                    (WorkerCountDoc::Set { count }, Some(per)) => {
                        let label = format!("{who}: {count} workers × {} memory_limit", human_bytes(per));
                        rows.push([
                            "workers".into(),
                            label.clone(),
                            human_bytes(count.saturating_mul(per)),
                        ]);
                        parts.push(Part {
                            class: "workers",
                            label,
                            bytes: count.saturating_mul(per),
                            ceiling: false,
                        });
                    }
                    (WorkerCountDoc::Undecided { why }, _) => {
                        unknown.push(format!("{who}: {}: {why}", pool.directive))
                    }
                    (WorkerCountDoc::Set { count }, None) => unknown.push(format!(
                        "{who}: {count} workers, each with {}",
                        pool.memory_limit_undecided
                            .as_deref()
                            .unwrap_or("no memory_limit")
                    )),
                }
            }
        }
        for h in &f.workers.host_cpu {
            unknown.push(format!(
                "{}: {} workers, one per CPU of the node ({})",
                h.server, h.setting, h.how
            ));
        }
        // Ceilings are drawn after what is committed, past its end.
        parts.sort_by_key(|p| p.ceiling);
        Budget {
            budget: b,
            rows,
            parts,
            marks,
            unknown,
        }
    }

    /// What the settings commit: the parts but the ceilings.
    fn committed(&self) -> u64 {
        self.parts
            .iter()
            .filter(|p| !p.ceiling)
            .fold(0u64, |a, p| a.saturating_add(p.bytes))
    }

    /// What is committed and the ceilings on top.
    fn drawn(&self) -> u64 {
        self.parts.iter().fold(0u64, |a, p| a.saturating_add(p.bytes))
    }

    fn over(&self) -> bool {
        self.budget.limit_bytes().is_some_and(|l| self.committed() > l)
    }

    /// The picture, its legend and the table of the budget.
    fn write(&self, w: &mut dyn Write, anchor: &str) -> io::Result<()> {
        const WIDTH: u64 = 800;
        let limit = self.budget.limit_bytes();
        let committed = self.committed();
        let scale = limit
            .unwrap_or(0)
            .max(self.drawn())
            .max(self.marks.iter().map(|m| m.1).max().unwrap_or(0))
            .max(1);
        let x = |bytes: u64| (u128::from(bytes) * u128::from(WIDTH) / u128::from(scale)) as u64;
        let said = match limit {
            Some(l) => format!(
                "limit {}, of which {} committed ({} %)",
                human_bytes(l),
                human_bytes(committed),
                u128::from(committed) * 100 / u128::from(l)
            ),
            None => format!("no memory limit; {} committed", human_bytes(committed)),
        };
        writeln!(
            w,
            "<h3 id=\"{anchor}-budget\">Memory budget</h3>\n<figure class=\"budget-figure\">"
        )?;
        match &self.budget.limit {
            AmountDoc::Set { text: t, line: l, .. } if limit.is_some() => writeln!(
                w,
                "<p class=\"limit\">memory limit <b>{}</b> (<code>resources.limits.memory: {}</code>, line {l})</p>",
                human_bytes(limit.unwrap_or(0)),
                text(t)
            )?,
            AmountDoc::Set { text: t, line: l, .. } => writeln!(
                w,
                "<p class=\"limit nolimit\"><b>No memory limit</b>: <code>resources.limits.memory: {}</code> (line {l}) sets none. Nothing caps the container but the node.</p>",
                text(t)
            )?,
            AmountDoc::Undecided { why } => writeln!(
                w,
                "<p class=\"limit nolimit\"><b>No memory limit</b>: {}. Nothing caps the container but the node.</p>",
                text(why)
            )?,
        }
        writeln!(
            w,
            "<svg class=\"budget\" role=\"img\" aria-label=\"{}\" viewBox=\"0 0 {} 58\" width=\"100%\" preserveAspectRatio=\"none\">\n<title>{}</title>",
            text(&said),
            WIDTH + 2,
            text(&said)
        )?;
        // The frame is the limit, or (with none) the whole scale in a dashed outline.
        let frame = limit.map_or(WIDTH, x);
        writeln!(
            w,
            "<rect class=\"frame{}\" x=\"1\" y=\"8\" width=\"{frame}\" height=\"34\"/>",
            if limit.is_some() { "" } else { " open" }
        )?;
        let mut at = 0u64;
        for p in &self.parts {
            let width = x(p.bytes).max(1);
            writeln!(
                w,
                "<rect class=\"part {}\" x=\"{}\" y=\"12\" width=\"{width}\" height=\"26\"><title>{}: {}</title></rect>",
                p.class,
                1 + x(at),
                text(&p.label),
                human_bytes(p.bytes)
            )?;
            at = at.saturating_add(p.bytes);
        }
        if let Some(l) = limit.filter(|l| committed > *l) {
            writeln!(
                w,
                "<rect class=\"overflow\" x=\"{}\" y=\"4\" width=\"{}\" height=\"42\"><title>{} over the limit</title></rect>",
                1 + x(l),
                x(committed).saturating_sub(x(l)).max(1),
                human_bytes(committed - l)
            )?;
        }
        if let Some(l) = limit {
            writeln!(
                w,
                "<line class=\"limit-mark\" x1=\"{0}\" x2=\"{0}\" y1=\"0\" y2=\"50\"/>",
                1 + x(l)
            )?;
        }
        for (label, bytes) in &self.marks {
            writeln!(
                w,
                "<line class=\"soft-mark\" x1=\"{0}\" x2=\"{0}\" y1=\"4\" y2=\"46\"><title>{1}</title></line>",
                1 + x(*bytes),
                text(label)
            )?;
        }
        writeln!(w, "</svg>\n<figcaption>{}</figcaption>", text(&said))?;
        self.write_legend(w, limit, committed)?;
        writeln!(w, "</figure>")?;
        self.write_table(w)
    }

    /// Under the picture: what each colour is, what is left, and what the bar cannot count.
    fn write_legend(&self, w: &mut dyn Write, limit: Option<u64>, committed: u64) -> io::Result<()> {
        writeln!(w, "<ul class=\"legend\">")?;
        for p in &self.parts {
            writeln!(
                w,
                "<li><span class=\"swatch {}\"></span>{} <b>{}</b></li>",
                p.class,
                text(&p.label),
                human_bytes(p.bytes)
            )?;
        }
        if let Some(l) = limit {
            writeln!(
                w,
                "<li><span class=\"swatch limit\"></span>limit <b>{}</b></li>",
                human_bytes(l)
            )?;
            if committed < l {
                writeln!(
                    w,
                    "<li><span class=\"swatch free\"></span>left for everything else (native memory, threads, page cache) <b>{}</b></li>",
                    human_bytes(l - committed)
                )?;
            }
        }
        for (label, _) in &self.marks {
            writeln!(
                w,
                "<li><span class=\"swatch soft\"></span>{} (a soft limit)</li>",
                text(label)
            )?;
        }
        writeln!(w, "</ul>")?;
        if !self.unknown.is_empty() {
            writeln!(
                w,
                "<p class=\"unknown-title\">Not counted in the bar (unknown):</p>\n<ul class=\"unknown\">"
            )?;
            for u in &self.unknown {
                writeln!(w, "<li>{}</li>", text(u))?;
            }
            writeln!(w, "</ul>")?;
        }
        Ok(())
    }

    /// The budget as `lint -v` prints it, folded.
    fn write_table(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(
            w,
            "<details class=\"budget-table\"><summary>The budget as a table</summary>\n<table>\n<thead><tr><th>what</th><th>setting</th><th>size</th></tr></thead>\n<tbody>"
        )?;
        for [what, setting, size] in &self.rows {
            writeln!(
                w,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                text(what),
                text(setting),
                text(size)
            )?;
        }
        writeln!(w, "</tbody>\n</table>\n</details>")
    }
}

/// The page's style: system fonts, no external resource, readable printed.
const STYLE: &str = r#"body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1100px; padding: 0 1.2em 3em; color: #1d2330; background: #fff; }
header { border-bottom: 3px solid #1d2330; margin-bottom: 1em; }
h1 { margin: .6em 0 .1em; }
.run { color: #555; margin-top: 0; }
h2 { margin-top: 1.6em; border-bottom: 1px solid #ccd; padding-bottom: .2em; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 90%; }
.totals { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: .6em; }
.totals li { border: 1px solid #ccd; border-radius: 6px; padding: .4em .9em; min-width: 6em; }
.totals b { display: block; font-size: 180%; }
table { border-collapse: collapse; width: 100%; margin: .5em 0 1em; }
th, td { text-align: left; border-bottom: 1px solid #e3e3ea; padding: .3em .5em; vertical-align: top; }
td.n { text-align: right; }
td.over { color: #b00020; font-weight: bold; }
tr.unread td { color: #b00020; }
.badge { display: inline-block; border-radius: 4px; padding: 0 .45em; color: #fff; font-size: 85%; font-weight: bold; }
.badge.sev-error { background: #b00020; }
.badge.sev-warning { background: #a15c00; }
.badge.sev-note { background: #2f6690; }
.totals .sev-error b, td.sev-error { color: #b00020; }
.totals .sev-warning b, td.sev-warning { color: #a15c00; }
.totals .sev-note b, td.sev-note { color: #2f6690; }
.report { border-left: 6px solid #9aa; padding-left: 1em; margin-top: 2.5em; }
.report.worst-error { border-left-color: #b00020; }
.report.worst-warning { border-left-color: #d08a1e; }
.report.worst-note { border-left-color: #2f6690; }
.about { display: grid; grid-template-columns: max-content auto; gap: .1em 1em; }
.about dt { color: #555; }
.about dd { margin: 0; overflow-wrap: anywhere; }
.budget-figure { margin: 0; }
.limit.nolimit { color: #b00020; }
svg.budget { display: block; height: 58px; max-width: 100%; }
svg.budget .frame { fill: #f3f4f7; stroke: #1d2330; stroke-width: 2; }
svg.budget .frame.open { stroke: #b00020; stroke-dasharray: 6 4; fill: #fff; }
svg.budget .part { stroke: #fff; stroke-width: 1; }
.heap { fill: #2f6690; background: #2f6690; }
.offheap { fill: #81c3d7; background: #81c3d7; }
.ceiling { fill: #dbeef4; background: #dbeef4; }
svg.budget .part.ceiling { stroke: #3a7ca5; stroke-width: 2; stroke-dasharray: 5 3; }
.swatch.ceiling { border-style: dashed; }
.volume { fill: #7d4e9e; background: #7d4e9e; }
.shm { fill: #c17fcf; background: #c17fcf; }
.workers { fill: #2d8a5b; background: #2d8a5b; }
svg.budget .overflow { fill: #b00020; fill-opacity: .25; stroke: #b00020; stroke-width: 2; }
svg.budget .limit-mark { stroke: #b00020; stroke-width: 3; }
svg.budget .soft-mark { stroke: #2d8a5b; stroke-width: 3; stroke-dasharray: 4 3; }
.legend { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: .2em 1.4em; }
.swatch { display: inline-block; width: .9em; height: .9em; margin-right: .35em; vertical-align: -.1em; border: 1px solid #1d2330; }
.swatch.limit { background: #f3f4f7; border: 2px solid #b00020; }
.swatch.free { background: #f3f4f7; }
.swatch.soft { background: #fff; border: 2px dashed #2d8a5b; }
.unknown-title { margin-bottom: 0; font-weight: bold; }
.unknown li { color: #6b4b00; }
figcaption { color: #555; font-size: 90%; }
.finding { border: 1px solid #e0e0e8; border-radius: 6px; padding: .2em 1em .6em; margin: .8em 0; }
.finding.sev-error { border-left: 5px solid #b00020; }
.finding.sev-warning { border-left: 5px solid #d08a1e; }
.finding.sev-note { border-left: 5px solid #2f6690; }
.finding h4 { margin: .5em 0 .3em; font-size: 105%; }
.finding h5 { margin: .6em 0 .1em; color: #555; text-transform: uppercase; font-size: 75%; letter-spacing: .06em; }
.evidence { margin: 0; padding-left: 1.4em; overflow-wrap: anywhere; }
.fix { background: #f5f7f2; border: 1px solid #dfe6d6; padding: .5em .8em; white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; }
.where, .docs, .suppressed, .omitted { margin: .2em 0; color: #444; overflow-wrap: anywhere; }
.docs { font-size: 85%; color: #666; }
.clean { color: #2d8a5b; }
footer { margin-top: 3em; color: #666; font-size: 85%; border-top: 1px solid #ccd; }
@media print { .report { break-inside: avoid-page; } details { display: block; } }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untrusted_text_stays_text() {
        assert_eq!(
            text("<script>alert('1')</script>&\"</style>\x1b[31m\x07"),
            "&lt;script&gt;alert(&#39;1&#39;)&lt;/script&gt;&amp;&quot;&lt;/style&gt;\\x1b[31m\\x07"
        );
        assert_eq!(text_lines("a <b>\nc"), "a &lt;b&gt;\nc");
        assert!(matches!(text("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn the_style_has_no_url_and_nothing_the_last_check_would_change() {
        for needle in ["url(", "http:", "https:", "//", "@import"] {
            assert!(!STYLE.contains(needle), "{needle}");
        }
        // SafeWriter breaks a `::` at the start of a line.
        assert!(STYLE.lines().all(|l| !l.trim_start().starts_with("::")));
    }
}
