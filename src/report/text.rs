//! The report for people: findings grouped by severity, each with its evidence and fix, and a
//! one-line summary. Colour only on a terminal, never with NO_COLOR or --no-color.

use super::lint::LintReport;
use crate::finding::Severity;
use crate::untrusted::{line, lines};
use std::io::{self, Write};

/// How the text report looks.
#[derive(Clone, Copy, Debug, Default)]
pub struct TextOptions {
    pub color: bool,
    /// `-q`: findings only.
    pub quiet: bool,
    /// `-v`: the facts behind each decision, and why silent rules stayed silent.
    pub verbose: bool,
    /// `--show-ignored`: list the findings that ignores hide.
    pub show_ignored: bool,
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
pub fn write(w: &mut dyn Write, r: &LintReport, o: TextOptions) -> io::Result<()> {
    let p = Paint { on: o.color };
    let img = r.image;
    if !o.quiet {
        let libc = match &r.facts.libc.version {
            Some(v) => format!("{} {v}", r.facts.libc.family),
            None => r.facts.libc.family.to_string(),
        };
        writeln!(
            w,
            "{} {} ({}, {})",
            p.bold("memlint"),
            line(&img.reference),
            line(&img.platform.to_string()),
            line(&libc)
        )?;
        if o.verbose {
            super::facts::write(w, r.facts)?;
        }
        writeln!(w)?;
    }
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
    if o.verbose {
        let silent: Vec<_> = r
            .results
            .iter()
            .filter_map(|res| res.outcome.undecided.as_ref().map(|u| (res.rule.id, u)))
            .collect();
        if !silent.is_empty() {
            writeln!(w, "{}", p.dim("rules that could not decide:"))?;
            for (id, why) in silent {
                writeln!(w, "  {id}: {}", line(&why.to_string()))?;
            }
            writeln!(w)?;
        }
    }
    if o.verbose || o.show_ignored {
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
    if !o.quiet {
        for n in &r.notes {
            writeln!(w, "{} {}", p.dim("note:"), line(n))?;
        }
    }
    if !o.quiet {
        let plural = |n: usize, w: &str| {
            if n == 1 {
                format!("{n} {w}")
            } else {
                format!("{n} {w}s")
            }
        };
        let mut summary = format!(
            "{}, {}, {}",
            plural(r.count(Severity::Error), "error"),
            plural(r.count(Severity::Warning), "warning"),
            plural(r.count(Severity::Note), "note")
        );
        if !r.ignored.is_empty() {
            summary.push_str(&format!(", {} ignored", r.ignored_count()));
        }
        if !r.baselined.is_empty() {
            summary.push_str(&format!(", {} baselined", r.baselined_count()));
        }
        if !r.fixed.is_empty() {
            summary.push_str(&format!(", {} fixed since the baseline", r.fixed.len()));
        }
        writeln!(w, "{}", p.bold(&summary))?;
    }
    Ok(())
}
