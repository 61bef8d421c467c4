//! GitHub workflow commands (`::error file=…,line=…::…`): findings as annotations on the pull
//! request, without code scanning.

use super::lint::LintReport;
use super::model::View;
use crate::untrusted::{line, lines};
use std::io::{self, Write};

/// Writes one workflow command per finding. The commands are memlint's own; their data and
/// properties are the finding's words made safe by [`line`] (no control character, no `##[`),
/// then escaped as actions/toolkit does, so no line break or command comes from the image.
pub(crate) fn write(w: &mut dyn Write, reports: &[LintReport]) -> io::Result<()> {
    for r in reports {
        write_view(w, &r.view())?;
    }
    Ok(())
}

/// The annotations of one report's view.
pub(crate) fn write_view(w: &mut dyn Write, r: &View) -> io::Result<()> {
    for f in &r.findings {
        let place = f
            .location
            .as_ref()
            .map(|l| (l.path.as_str(), u64::from(l.line), u64::from(l.end_line)))
            .unwrap_or(("Dockerfile", 1, 1));
        let evidence: Vec<&str> = f.evidence.iter().map(|e| e.text()).collect();
        let title = format!("memlint {} ({}, {})", f.rule, r.reference, r.platform);
        annotation(
            w,
            f.severity.as_str(),
            place,
            &title,
            &f.message,
            &evidence,
            &f.fix,
        )?;
    }
    Ok(())
}

/// One workflow command: `severity` as memlint names it, the place (file, line, end line).
fn annotation(
    w: &mut dyn Write,
    severity: &str,
    (file, line_no, end): (&str, u64, u64),
    title: &str,
    message: &str,
    evidence: &[&str],
    fix: &str,
) -> io::Result<()> {
    let command = match severity {
        "error" => "error",
        "warning" => "warning",
        _ => "notice",
    };
    let mut body = line(message).into_owned();
    for e in evidence {
        body.push_str("\n- ");
        body.push_str(&line(e));
    }
    if !fix.is_empty() {
        body.push_str("\nFix:\n");
        body.push_str(&lines(fix));
    }
    writeln!(
        w,
        "::{command} file={},line={line_no},endLine={},title={}::{}",
        property(&line(file)),
        end.max(line_no),
        property(&line(title)),
        data(&body)
    )
}

/// Escapes a command's message (actions/toolkit `escapeData`).
fn data(s: &str) -> String {
    s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// Escapes a command property (actions/toolkit `escapeProperty`).
fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(data("50%\nnext"), "50%25%0Anext");
        assert_eq!(property("memlint a:b, c"), "memlint a%3Ab%2C c");
    }
}
