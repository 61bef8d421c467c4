//! The report for people: findings grouped by severity, each with its evidence and fix, and a
//! one-line summary. Colour only on a terminal, never with NO_COLOR or --no-color.

use super::lint::LintReport;
use crate::finding::Severity;
use std::fmt::Write as _;

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

pub fn render(r: &LintReport, o: TextOptions) -> String {
    let p = Paint { on: o.color };
    let mut s = String::new();
    let img = r.image;
    if !o.quiet {
        let libc = match &r.facts.libc.version {
            Some(v) => format!("{} {v}", r.facts.libc.family),
            None => r.facts.libc.family.to_string(),
        };
        let _ = writeln!(
            s,
            "{} {} ({}, {libc})",
            p.bold("memlint"),
            img.reference,
            img.platform
        );
        if o.verbose {
            s.push_str(&super::facts::text(r.facts));
        }
        s.push('\n');
    }
    for sev in [Severity::Error, Severity::Warning, Severity::Note] {
        for f in r.findings.iter().filter(|f| f.severity == sev) {
            let _ = writeln!(s, "{}[{}]: {}", p.severity(sev), p.bold(f.rule), f.message);
            if let Some(l) = f.location.as_ref().filter(|l| l.instruction.is_some()) {
                let _ = writeln!(
                    s,
                    "  {} {}:{}: {}",
                    p.dim("at"),
                    l.path,
                    l.line,
                    l.instruction.as_deref().unwrap_or("")
                );
            }
            if !f.evidence.is_empty() {
                let _ = writeln!(s, "  {}", p.dim("evidence:"));
                for e in &f.evidence {
                    let _ = writeln!(s, "    - {e}");
                }
            }
            if !f.fix.is_empty() {
                let _ = writeln!(s, "  {}", p.dim("fix:"));
                for line in f.fix.lines() {
                    let _ = writeln!(s, "    {line}");
                }
            }
            s.push('\n');
        }
    }
    if o.verbose {
        let silent: Vec<_> = r
            .results
            .iter()
            .filter_map(|res| res.outcome.undecided.as_ref().map(|u| (res.rule.id, u)))
            .collect();
        if !silent.is_empty() {
            let _ = writeln!(s, "{}", p.dim("rules that could not decide:"));
            for (id, why) in silent {
                let _ = writeln!(s, "  {id}: {why}");
            }
            s.push('\n');
        }
    }
    if o.verbose || o.show_ignored {
        for f in &r.ignored {
            let why = f
                .suppression
                .as_ref()
                .map(|s| format!(" ({}: {})", s.origin, s.justification))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "{} {}[{}]: {}{why}",
                p.dim("ignored"),
                f.severity,
                f.rule,
                f.message
            );
        }
        if !r.ignored.is_empty() {
            s.push('\n');
        }
    }
    if !o.quiet {
        for n in &r.notes {
            let _ = writeln!(s, "{} {n}", p.dim("note:"));
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
        let mut line = format!(
            "{}, {}, {}",
            plural(r.count(Severity::Error), "error"),
            plural(r.count(Severity::Warning), "warning"),
            plural(r.count(Severity::Note), "note")
        );
        if !r.ignored.is_empty() {
            let _ = write!(line, ", {} ignored", r.ignored_count());
        }
        let _ = writeln!(s, "{}", p.bold(&line));
    }
    s
}
