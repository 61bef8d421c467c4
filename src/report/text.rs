//! The report for people: findings grouped by severity, each with its evidence and fix, and a
//! one-line summary. Colour only on a terminal, never with NO_COLOR or --no-color.

use super::lint::LintReport;
use super::model::View;
use crate::finding::Severity;
use crate::untrusted::{line, lines};
use std::io::{self, Write};

/// How the text report looks.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TextOptions {
    pub(crate) color: bool,
    /// `-q`: findings only.
    pub(crate) quiet: bool,
    /// `-v`: the facts behind each decision, and why silent rules stayed silent.
    pub(crate) verbose: bool,
    /// `--show-ignored`: list the findings that ignores hide.
    pub(crate) show_ignored: bool,
}

struct Paint {
    on: bool,
}

impl Paint {
    fn wrap(&self, code: &str, s: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn severity(&self, sev: Severity) -> String {
        let code = match sev {
            Severity::Error => "1;31",
            Severity::Warning => "1;33",
            Severity::Note => "1;36",
        };
        self.wrap(code, sev.as_str())
    }
    fn bold(&self, s: &str) -> String {
        self.wrap("1", s)
    }
    fn dim(&self, s: &str) -> String {
        self.wrap("2", s)
    }
}

/// Writes the text report of one image. Every string from the image, the Dockerfile or the
/// config goes through [`line`] (or [`lines`] for a fix), so that it stays on its line and
/// drives neither a terminal nor a CI runner.
pub(crate) fn write(w: &mut dyn Write, r: &LintReport, o: TextOptions) -> io::Result<()> {
    write_view(w, &r.view(), o)
}

/// A container's section of a fleet's text report (`lint --k8s`, `merge`): its heading, then
/// its report or why its image could not be read, then a blank line.
pub(crate) fn write_container(w: &mut dyn Write, v: &View, o: TextOptions) -> io::Result<()> {
    if let Some(k) = &v.k8s {
        writeln!(w, "== {}", line(&k.describe()))?;
    }
    match &v.error {
        Some(e) => writeln!(
            w,
            "error: the image {} could not be read: {}",
            line(&v.reference),
            line(&e.message)
        )?,
        None => write_view(w, v, o)?,
    }
    writeln!(w)
}

/// Writes the text report of one image's (or container's) view.
pub(crate) fn write_view(w: &mut dyn Write, r: &View, o: TextOptions) -> io::Result<()> {
    let p = Paint { on: o.color };
    if !o.quiet {
        writeln!(
            w,
            "{} {} ({}, {})",
            p.bold("memlint"),
            line(&r.reference),
            line(&r.platform),
            line(&r.libc)
        )?;
        if o.verbose {
            if let Some(facts) = r.facts {
                super::facts::write(w, facts)?;
            }
        }
        writeln!(w)?;
    }
    write_findings(w, r, &p)?;
    if o.verbose {
        write_undecided(w, r, &p)?;
    }
    if o.verbose || o.show_ignored {
        write_hidden(w, r, &p)?;
    }
    if !o.quiet {
        for n in &r.notes {
            writeln!(w, "{} {}", p.dim("note:"), line(n))?;
        }
        writeln!(w, "{}", p.bold(&summary_line(r)))?;
    }
    Ok(())
}

/// The findings, most severe first, each with its place, evidence and fix.
fn write_findings(w: &mut dyn Write, r: &View, p: &Paint) -> io::Result<()> {
    for sev in [Severity::Error, Severity::Warning, Severity::Note] {
        for f in r.findings.iter().filter(|f| f.severity == sev) {
            writeln!(w, "{}[{}]: {}", p.severity(sev), p.bold(f.rule), line(&f.message))?;
            if let Some(l) = f.location.as_ref().filter(|l| l.instruction.is_some()) {
                writeln!(
                    w,
                    "  {} {}:{}: {}",
                    p.dim("at"),
                    line(&l.path),
                    l.line,
                    line(l.instruction.as_deref().unwrap_or(""))
                )?;
            }
            if !f.evidence.is_empty() {
                writeln!(w, "  {}", p.dim("evidence:"))?;
                for e in &f.evidence {
                    writeln!(w, "    - {}", line(e.text()))?;
                }
            }
            if !f.fix.is_empty() {
                writeln!(w, "  {}", p.dim("fix:"))?;
                for l in lines(&f.fix).lines() {
                    writeln!(w, "    {l}")?;
                }
            }
            writeln!(w)?;
        }
    }
    Ok(())
}

/// `-v`: why silent rules stayed silent.
fn write_undecided(w: &mut dyn Write, r: &View, p: &Paint) -> io::Result<()> {
    let silent: Vec<_> = r
        .rules
        .iter()
        .filter_map(|(id, why)| why.as_ref().map(|u| (id, u)))
        .collect();
    if !silent.is_empty() {
        writeln!(w, "{}", p.dim("rules that could not decide:"))?;
        for (id, why) in silent {
            writeln!(w, "  {id}: {}", line(why))?;
        }
        writeln!(w)?;
    }
    Ok(())
}

/// `--show-ignored`, `-v`: the findings ignores hide and the baseline holds.
fn write_hidden(w: &mut dyn Write, r: &View, p: &Paint) -> io::Result<()> {
    {
        for f in &r.ignored {
            let why = f
                .suppression
                .as_ref()
                .map(|s| format!(" ({}: {})", line(&s.origin), line(&s.justification)))
                .unwrap_or_default();
            writeln!(
                w,
                "{} {}[{}]: {}{why}",
                p.dim("ignored"),
                f.severity,
                f.rule,
                line(&f.message)
            )?;
        }
        if !r.ignored.is_empty() {
            writeln!(w)?;
        }
        for f in &r.baselined {
            writeln!(
                w,
                "{} {}[{}]: {}",
                p.dim("baselined"),
                f.severity,
                f.rule,
                line(&f.message)
            )?;
        }
        if !r.baselined.is_empty() {
            writeln!(w)?;
        }
    }
    Ok(())
}

/// `1 error, 2 warnings, 0 notes, 1 ignored`.
fn summary_line(r: &View) -> String {
    let plural = |n: usize, w: &str| {
        if n == 1 {
            format!("{n} {w}")
        } else {
            format!("{n} {w}s")
        }
    };
    let s = &r.summary;
    let mut summary = format!(
        "{}, {}, {}",
        plural(s.errors, "error"),
        plural(s.warnings, "warning"),
        plural(s.notes, "note")
    );
    if !r.ignored.is_empty() {
        summary.push_str(&format!(", {} ignored", s.ignored));
    }
    if !r.baselined.is_empty() {
        summary.push_str(&format!(", {} baselined", s.baselined));
    }
    if s.fixed > 0 {
        summary.push_str(&format!(", {} fixed since the baseline", s.fixed));
    }
    summary
}
