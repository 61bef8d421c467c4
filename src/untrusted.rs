//! Text from an image or a registry on its way to a terminal or a CI log.
//!
//! Anything an image or a registry says (an `LD_PRELOAD` value, a platform string, a ref name,
//! a member name, a registry's error body) is untrusted. Printed raw, it can drive the reader's
//! terminal (`ESC ] 0 ; … BEL` retitles it, CSI moves the cursor) and the GitHub runner, which
//! runs `::cmd::` at the start of any line (after leading white space) and the legacy `##[cmd]`
//! anywhere in a line, on standard output and standard error alike (actions/runner
//! `ActionCommand.TryParseV2` and `TryParse`). So every stream memlint writes goes through this
//! module:
//!
//! - [`line`] makes one external string safe inside a text line: control characters (C0, DEL,
//!   C1) and the bidirectional overrides are shown escaped (`\x1b`, `\n`, `\u{9b}`), `::` at its
//!   start (after white space) becomes `\x3a:` and `##[` becomes `\x23#[`, so that a person
//!   still reads what the image holds and no runner reads a command;
//! - [`JsonFormatter`] writes JSON whose strings decode to exactly the original text, with the
//!   same characters as `\u` escapes (`\u0023#[`, `\u001b`, `\u009b`);
//! - [`SafeWriter`] is the last check on every stream: whatever reaches it, each line it lets
//!   through has no control character but `\n` (and, when asked, memlint's own colour
//!   sequences), no `##[`, and no `::` at its start unless the stream is `--format github`'s
//!   own commands.
//! - [`diagnostic`] renders a miette diagnostic with its message, help, labels and causes made
//!   safe the same way.
//!
//! A base module: it uses no other module of the crate, so every layer may call it.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io;

/// Whether `c` is shown escaped rather than written: C0 controls, DEL, C1 controls, and the
/// bidirectional embeddings, overrides and isolates that reorder what a terminal shows.
fn is_hidden(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The escape that shows a hidden character: `\n`, `\r`, `\t`, `\x1b`, `\u{9b}`.
fn push_escape(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// One external string made safe inside a line of text: hidden characters escaped (`\n`
/// included, so the string stays on its line), `::` at its start (after white space) and `##[`
/// anywhere broken. Borrowed when there is nothing to change, as for almost every string.
pub(crate) fn line(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// Several lines of external text (a fix, a history line): as [`line`], but `\n` stays a line
/// break and `::` is broken at the start of every line.
pub(crate) fn lines(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

fn escape(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    let risky = s.contains("##[")
        || s.chars().any(is_hidden)
        || starts_command(s)
        || (keep_newlines && s.split('\n').any(starts_command));
    if !risky {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut at_line_start = true;
    let mut chars = s.chars().peekable();
    let mut hashes = 0usize;
    while let Some(c) = chars.next() {
        if c == '#' {
            hashes += 1;
            at_line_start = false;
            continue;
        }
        flush_hashes(&mut out, hashes, c == '[');
        hashes = 0;
        if c == '\n' && keep_newlines {
            out.push('\n');
            at_line_start = true;
            continue;
        }
        if is_hidden(c) {
            push_escape(&mut out, c);
            at_line_start = false;
            continue;
        }
        if at_line_start && c.is_whitespace() {
            out.push(c);
            continue;
        }
        if at_line_start && c == ':' && chars.peek() == Some(&':') {
            out.push_str("\\x3a");
        } else {
            out.push(c);
        }
        at_line_start = false;
    }
    flush_hashes(&mut out, hashes, false);
    Cow::Owned(out)
}

/// Writes `n` pending `#`; before a `[`, the second-last one escaped so that no `##[` stays.
fn flush_hashes(out: &mut String, n: usize, before_bracket: bool) {
    if before_bracket && n >= 2 {
        out.extend(std::iter::repeat_n('#', n - 2));
        out.push_str("\\x23#");
    } else {
        out.extend(std::iter::repeat_n('#', n));
    }
}

/// Whether the runner would read `s` as the start of a `::` command.
fn starts_command(s: &str) -> bool {
    s.trim_start().starts_with("::")
}

/// What a [`SafeWriter`] lets through that it would otherwise escape.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Allow {
    /// memlint's own colour: `ESC [ digits ; … m` (SGR), on a terminal only.
    pub(crate) sgr: bool,
    /// `::` at the very start of a line (not after white space): `--format github`'s own
    /// workflow commands.
    pub(crate) commands: bool,
}

/// The last check on a stream: a writer that escapes whatever [`line`] would have escaped and
/// slipped through, line by line as bytes pass, in bounded memory (a few pending bytes: never a
/// whole line). Output that is already safe passes unchanged.
pub(crate) struct SafeWriter<W: io::Write> {
    inner: W,
    allow: Allow,
    /// Bytes of a UTF-8 sequence cut by the end of a write.
    partial: Vec<u8>,
    at_line_start: bool,
    /// White space was written at the start of this line.
    indented: bool,
    /// A `:` at the start of a line, held until the next character says if it opens `::`.
    colon: bool,
    hashes: usize,
    /// An escape sequence being read, when `allow.sgr`: kept only while it looks like SGR.
    sgr: Option<String>,
    out: String,
}

/// The longest SGR sequence kept before it is shown escaped.
const MAX_SGR: usize = 24;

impl<W: io::Write> SafeWriter<W> {
    pub(crate) fn new(inner: W, allow: Allow) -> SafeWriter<W> {
        SafeWriter {
            inner,
            allow,
            partial: Vec::new(),
            at_line_start: true,
            indented: false,
            colon: false,
            hashes: 0,
            sgr: None,
            out: String::new(),
        }
    }

    /// Writes what is pending (a held `:`, `#`, an unfinished escape sequence) as it is safe,
    /// and flushes. Dropping the writer does the same, without a way to see an error.
    pub(crate) fn finish(&mut self) -> io::Result<()> {
        for b in std::mem::take(&mut self.partial) {
            let _ = write!(self.out, "\\x{b:02x}");
        }
        self.flush_pending(None);
        self.drain()?;
        self.inner.flush()
    }

    fn drain(&mut self) -> io::Result<()> {
        if !self.out.is_empty() {
            self.inner.write_all(self.out.as_bytes())?;
            self.out.clear();
        }
        Ok(())
    }

    /// Writes held characters, given the character that follows them (`None`: the end).
    fn flush_pending(&mut self, next: Option<char>) {
        if let Some(seq) = self.sgr.take() {
            for c in seq.chars() {
                if c == '\x1b' {
                    self.out.push_str("\\x1b");
                } else {
                    self.plain(c);
                }
            }
        }
        if self.colon {
            self.colon = false;
            if next == Some(':') && (self.indented || !self.allow.commands) {
                self.out.push_str("\\x3a");
            } else {
                self.out.push(':');
            }
        }
        if next != Some('#') {
            let n = std::mem::take(&mut self.hashes);
            flush_hashes(&mut self.out, n, next == Some('['));
        }
    }

    /// One character with nothing held.
    fn plain(&mut self, c: char) {
        if c == '\n' {
            self.out.push('\n');
            self.at_line_start = true;
            self.indented = false;
        } else if is_hidden(c) {
            push_escape(&mut self.out, c);
            self.at_line_start = false;
        } else if self.at_line_start && c.is_whitespace() {
            self.out.push(c);
            self.indented = true;
        } else if self.at_line_start && c == ':' {
            self.colon = true;
            self.at_line_start = false;
        } else if c == '#' {
            self.hashes += 1;
            self.at_line_start = false;
        } else {
            self.out.push(c);
            self.at_line_start = false;
        }
    }

    fn push(&mut self, c: char) {
        if let Some(seq) = &mut self.sgr {
            let fits = match seq.len() {
                1 => c == '[',
                _ => c.is_ascii_digit() || c == ';' || c == 'm',
            };
            if fits && seq.len() < MAX_SGR {
                seq.push(c);
                if c == 'm' {
                    self.out.push_str(seq);
                    self.sgr = None;
                }
                return;
            }
            self.flush_pending(Some(c));
        } else if self.colon || self.hashes > 0 {
            self.flush_pending(Some(c));
            if c == '#' {
                self.hashes += 1;
                return;
            }
        }
        if c == '\x1b' && self.allow.sgr {
            self.sgr = Some(String::from('\x1b'));
            return;
        }
        self.plain(c);
    }
}

impl<W: io::Write> io::Write for SafeWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut bytes = std::mem::take(&mut self.partial);
        bytes.extend_from_slice(buf);
        let mut rest = &bytes[..];
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    s.chars().for_each(|c| self.push(c));
                    break;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    // Checked by from_utf8 just above.
                    std::str::from_utf8(good)
                        .unwrap_or_default()
                        .chars()
                        .for_each(|c| self.push(c));
                    match e.error_len() {
                        Some(n) => {
                            for b in &bad[..n] {
                                let _ = write!(self.out, "\\x{b:02x}");
                            }
                            rest = &bad[n..];
                        }
                        None => {
                            self.partial = bad.to_vec();
                            break;
                        }
                    }
                }
            }
        }
        self.drain()?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.drain()?;
        self.inner.flush()
    }
}

impl<W: io::Write> Drop for SafeWriter<W> {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// A serde_json formatter that writes, as `\u` escapes, every character a terminal or the
/// runner would act on: DEL, C1 controls, bidirectional overrides (serde_json already escapes
/// C0), and the second-last `#` of `##[`. The decoded value is the original string. Layout
/// (pretty or compact) is the inner formatter's.
pub(crate) struct JsonFormatter<F> {
    inner: F,
}

impl JsonFormatter<serde_json::ser::PrettyFormatter<'static>> {
    /// Two-space indented JSON, as `serde_json::to_string_pretty` writes it.
    pub(crate) fn pretty() -> Self {
        JsonFormatter {
            inner: serde_json::ser::PrettyFormatter::new(),
        }
    }
}

/// Writes `value` as pretty JSON and a final newline, through [`JsonFormatter`].
pub(crate) fn write_json<T: serde::Serialize + ?Sized>(w: &mut dyn io::Write, value: &T) -> io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(&mut *w, JsonFormatter::pretty());
    value.serialize(&mut ser).map_err(io::Error::other)?;
    w.write_all(b"\n")
}

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for JsonFormatter<F> {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        // serde_json hands over the runs between its own escapes, so a `##[` is never split.
        let mut start = 0;
        let mut hashes = 0usize;
        for (i, c) in fragment.char_indices() {
            let escape = is_hidden(c) || (c == '[' && hashes >= 2);
            if escape {
                if c == '[' {
                    // Escape the `#` before the last one: `##[` → `\u0023#[`.
                    let at = i - 2;
                    writer.write_all(&fragment.as_bytes()[start..at])?;
                    writer.write_all(b"\\u0023#[")?;
                } else {
                    writer.write_all(&fragment.as_bytes()[start..i])?;
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        write!(writer, "\\u{:04x}", u)?;
                    }
                }
                start = i + c.len_utf8();
            }
            hashes = if c == '#' { hashes + 1 } else { 0 };
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.begin_array(w)
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.end_array(w)
    }
    fn begin_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.inner.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.end_array_value(w)
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.begin_object(w)
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.end_object(w)
    }
    fn begin_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.inner.begin_object_key(w, first)
    }
    fn end_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.end_object_key(w)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.inner.end_object_value(w)
    }
}

/// An external string as XML 1.0 character data (the text of an element), for the JUnit
/// report. `&`, `<` and `>` become entities (so `]]>` is `]]&gt;`); `\t` and `\r`
/// character references; `\n` stays a line break. What a terminal or the runner would act on
/// but XML 1.0 can hold is written as a character reference, so the parsed value is the
/// original: DEL, C1 controls and the bidirectional overrides (`&#x9b;`), the `#` that would
/// open `##[` (`&#35;#[`) and a `:` that would open `::` at the start of a line (`&#58;:`).
/// The C0 controls XML 1.0 cannot hold at all (not even as a reference), and U+FFFE and
/// U+FFFF, are shown escaped as [`line`] shows them (`\x1b`, `\u{fffe}`): the one place where
/// the parsed value is not the original.
pub(crate) fn xml_text(s: &str) -> Cow<'_, str> {
    xml(s, false)
}

/// An external string as an XML attribute value (between double quotes), escaped as
/// [`xml_text`] escapes it, `"` as `&quot;`, and `\n` as a character reference too, so that a value stays on its
/// line and keeps its line breaks (an attribute's raw line breaks are read as spaces).
pub(crate) fn xml_attr(s: &str) -> Cow<'_, str> {
    xml(s, true)
}

/// Whether XML 1.0 can hold `c` (the `Char` production; a Rust string holds no surrogate).
fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || (c >= ' ' && c != '\u{fffe}' && c != '\u{ffff}')
}

fn xml(s: &str, attr: bool) -> Cow<'_, str> {
    let risky = s
        .chars()
        .any(|c| is_hidden(c) || !xml_char(c) || matches!(c, '&' | '<' | '>') || (attr && c == '"'))
        || s.contains("##[")
        || s.split('\n').any(starts_command);
    if !risky {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    let mut at_line_start = true;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attr => out.push_str("&quot;"),
            '\n' => {
                out.push_str(if attr { "&#10;" } else { "\n" });
                at_line_start = true;
                continue;
            }
            '\t' => out.push_str("&#9;"),
            '\r' => out.push_str("&#13;"),
            '#' if s[i..].starts_with("##[") => out.push_str("&#35;"),
            ':' if at_line_start && next == Some(':') => out.push_str("&#58;"),
            c if !xml_char(c) => push_escape(&mut out, c),
            c if is_hidden(c) => {
                let _ = write!(out, "&#x{:x};", c as u32);
            }
            c if at_line_start && c.is_whitespace() => {
                out.push(c);
                continue;
            }
            c => out.push(c),
        }
        at_line_start = false;
    }
    Cow::Owned(out)
}

/// A diagnostic rendered for standard error as miette's default handler renders it, with its
/// message, code, help, labels and causes made safe by [`line`] (a platform string or a
/// registry's body cannot start a line of its own), and the whole text passed through
/// [`SafeWriter`] (the source snippet included). `color`: whether colour may be used.
pub(crate) fn diagnostic(diag: &dyn miette::Diagnostic, color: bool) -> String {
    let safe = Safe::of(diag);
    let mut opts = miette::MietteHandlerOpts::new()
        .terminal_links(false)
        .color(color);
    // Off a terminal (a CI log, a pipe) a wrapped line would split a path or a platform list
    // where 80 columns fall: grep and log readers get each sentence whole.
    if !color {
        opts = opts.width(4096);
    }
    let handler = opts.build();
    struct Render<'a>(&'a miette::MietteHandler, &'a Safe<'a>);
    impl std::fmt::Debug for Render<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            miette::ReportHandler::debug(self.0, self.1, f)
        }
    }
    let text = format!("{:?}", Render(&handler, &safe));
    let mut out = Vec::with_capacity(text.len());
    {
        let mut w = SafeWriter::new(
            &mut out,
            Allow {
                sgr: color,
                commands: false,
            },
        );
        let _ = io::Write::write_all(&mut w, text.as_bytes());
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A diagnostic's words made safe; its source code is the original's (the snippet is checked
/// after rendering, since escaping it here would move its labels).
struct Safe<'a> {
    message: String,
    code: Option<String>,
    help: Option<String>,
    url: Option<String>,
    severity: Option<miette::Severity>,
    labels: Vec<miette::LabeledSpan>,
    source_code: Option<&'a dyn miette::SourceCode>,
    cause: Option<Box<Cause>>,
    related: Vec<Safe<'a>>,
}

impl<'a> Safe<'a> {
    fn of(d: &'a dyn miette::Diagnostic) -> Safe<'a> {
        let mut causes: Vec<String> = Vec::new();
        let mut next = d.source();
        while let Some(e) = next {
            causes.push(line(&e.to_string()).into_owned());
            next = e.source();
        }
        let cause = causes
            .into_iter()
            .rev()
            .fold(None, |inner, message| Some(Box::new(Cause { message, inner })));
        Safe {
            message: line(&d.to_string()).into_owned(),
            code: d.code().map(|c| line(&c.to_string()).into_owned()),
            help: d.help().map(|h| lines(&h.to_string()).into_owned()),
            url: d.url().map(|u| line(&u.to_string()).into_owned()),
            severity: d.severity(),
            labels: d
                .labels()
                .into_iter()
                .flatten()
                .map(|l| {
                    let label = l.label().map(|t| line(t).into_owned());
                    if l.primary() {
                        miette::LabeledSpan::new_primary_with_span(label, *l.inner())
                    } else {
                        miette::LabeledSpan::new_with_span(label, *l.inner())
                    }
                })
                .collect(),
            source_code: d.source_code(),
            cause,
            related: d.related().into_iter().flatten().map(Safe::of).collect(),
        }
    }
}

impl std::fmt::Debug for Safe<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::fmt::Display for Safe<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Safe<'_> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause.as_deref().map(|c| c as _)
    }
}

impl miette::Diagnostic for Safe<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn std::fmt::Display + 'b>> {
        self.code.as_ref().map(|c| Box::new(c) as _)
    }
    fn severity(&self) -> Option<miette::Severity> {
        self.severity
    }
    fn help<'b>(&'b self) -> Option<Box<dyn std::fmt::Display + 'b>> {
        self.help.as_ref().map(|c| Box::new(c) as _)
    }
    fn url<'b>(&'b self) -> Option<Box<dyn std::fmt::Display + 'b>> {
        self.url.as_ref().map(|c| Box::new(c) as _)
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.source_code
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        if self.labels.is_empty() {
            None
        } else {
            Some(Box::new(self.labels.iter().cloned()))
        }
    }
    fn related<'b>(&'b self) -> Option<Box<dyn Iterator<Item = &'b dyn miette::Diagnostic> + 'b>> {
        if self.related.is_empty() {
            None
        } else {
            Some(Box::new(
                self.related.iter().map(|d| d as &dyn miette::Diagnostic),
            ))
        }
    }
}

/// One cause of a diagnostic, its words made safe.
#[derive(Debug)]
struct Cause {
    message: String,
    inner: Option<Box<Cause>>,
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner.as_deref().map(|c| c as _)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn through_writer(parts: &[&[u8]], allow: Allow) -> String {
        let mut out = Vec::new();
        {
            let mut w = SafeWriter::new(&mut out, allow);
            for p in parts {
                w.write_all(p).unwrap();
            }
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn line_escapes_controls_and_breaks_commands() {
        assert_eq!(line("/usr/lib/libjemalloc.so.2"), "/usr/lib/libjemalloc.so.2");
        assert!(matches!(line("plain text: a::b"), Cow::Borrowed(_)));
        assert_eq!(line("\x1b]0;owned\x07"), "\\x1b]0;owned\\x07");
        assert_eq!(line("a\n::warning::x"), "a\\n::warning::x");
        assert_eq!(line("  ::warning::x"), "  \\x3a:warning::x");
        assert_eq!(line("x ##[error]y"), "x \\x23#[error]y");
        assert_eq!(line("###[stop-commands]t"), "#\\x23#[stop-commands]t");
        assert_eq!(line("##"), "##");
        assert_eq!(line("\u{9b}2J\r\u{7f}"), "\\u{9b}2J\\r\\x7f");
        assert_eq!(line("evil\u{202e}txt"), "evil\\u{202e}txt");
        assert_eq!(lines("fix:\n  ::error::x\nok"), "fix:\n  \\x3a:error::x\nok");
    }

    #[test]
    fn writer_checks_every_line_across_write_boundaries() {
        let allow = Allow::default();
        assert_eq!(
            through_writer(&[b"ok\n", b"  :", b":warning::x\n"], allow),
            "ok\n  \\x3a:warning::x\n"
        );
        assert_eq!(
            through_writer(&[b"a#", b"#", b"[error]"], allow),
            "a\\x23#[error]"
        );
        assert_eq!(through_writer(&[b"a:\n:b\n"], allow), "a:\n:b\n");
        assert_eq!(through_writer(&[b"\x1b[1mx\x1b[0m"], allow), "\\x1b[1mx\\x1b[0m");
        let sgr = Allow {
            sgr: true,
            commands: false,
        };
        assert_eq!(
            through_writer(&[b"\x1b[1;3", b"1mx\x1b[0m"], sgr),
            "\x1b[1;31mx\x1b[0m"
        );
        assert_eq!(through_writer(&[b"\x1b]0;t\x07"], sgr), "\\x1b]0;t\\x07");
        let cmd = Allow {
            sgr: false,
            commands: true,
        };
        assert_eq!(
            through_writer(&[b"::error file=D::m ##[x]\n"], cmd),
            "::error file=D::m \\x23#[x]\n"
        );
        // memlint's own commands start at column 0: an indented one is not its own.
        assert_eq!(
            through_writer(&[b"ok\n ::warning::x\n"], cmd),
            "ok\n \\x3a:warning::x\n"
        );
        // A character cut in two by the end of a write is whole again; a bad byte is shown.
        let e = "é".as_bytes();
        assert_eq!(through_writer(&[&e[..1], &e[1..], b"\xff"], allow), "é\\xff");
        assert_eq!(through_writer(&["\t\r\u{85}".as_bytes()], allow), "\\t\\r\\u{85}");
        assert_eq!(through_writer(&[b"##"], allow), "##");
    }

    #[test]
    fn json_escapes_decode_to_the_original() {
        let original = "a ##[error]x ###[y \x1b]0;t\x07 \u{9b}\u{7f}\u{202e} \n::warning::z #";
        let mut out = Vec::new();
        write_json(&mut out, &serde_json::json!({ "v": original, "##[k": 1 })).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("##["), "{text}");
        assert!(text.contains("\\u0023#[error]"), "{text}");
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["v"], original);
        assert_eq!(back["##[k"], 1);
    }

    #[test]
    fn xml_escapes_what_xml_cannot_hold_and_what_a_runner_would_read() {
        assert_eq!(xml_text("/usr/lib/libjemalloc.so.2"), "/usr/lib/libjemalloc.so.2");
        assert!(matches!(xml_text("plain: a::b"), Cow::Borrowed(_)));
        assert_eq!(xml_text("a<b>&\"c\"'d' ]]>"), "a&lt;b&gt;&amp;\"c\"'d' ]]&gt;");
        assert_eq!(xml_attr("\"c\"'d'"), "&quot;c&quot;'d'");
        // C0 controls XML 1.0 cannot hold are shown as `line` shows them.
        assert_eq!(xml_text("\x1b]0;t\x07\0"), "\\x1b]0;t\\x07\\x00");
        assert_eq!(xml_text("\u{fffe}\u{ffff}"), "\\u{fffe}\\u{ffff}");
        // What XML can hold but a terminal would act on: character references.
        assert_eq!(xml_text("\u{9b}2J\u{7f}\u{202e}"), "&#x9b;2J&#x7f;&#x202e;");
        assert_eq!(xml_text("x ##[error]y ###[z"), "x &#35;#[error]y #&#35;#[z");
        assert_eq!(
            xml_text("a\n  ::warning::x\n::e"),
            "a\n  &#58;:warning::x\n&#58;:e"
        );
        assert_eq!(xml_text("\t\r"), "&#9;&#13;");
        assert_eq!(xml_attr("a\n::warning::x\tb"), "a&#10;&#58;:warning::x&#9;b");
        assert_eq!(xml_attr("::x"), "&#58;:x");
        // Nothing raw a SafeWriter would change.
        let hostile = "f\x1b]0;pwned\x07\n::warning::n ##[error]n\r\u{9b}2J ]]> \u{85}";
        for escaped in [xml_text(hostile), xml_attr(hostile)] {
            assert!(!escaped.chars().any(|c| c.is_control() && c != '\n'), "{escaped}");
            assert!(!escaped.contains("##["), "{escaped}");
            assert!(!escaped.contains("]]>"), "{escaped}");
            assert!(
                escaped.lines().all(|l| !l.trim_start().starts_with("::")),
                "{escaped}"
            );
            let mut out = Vec::new();
            SafeWriter::new(&mut out, Allow::default())
                .write_all(escaped.as_bytes())
                .unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), escaped);
        }
    }

    #[test]
    fn diagnostics_keep_external_text_on_its_line() {
        #[derive(Debug, thiserror::Error, miette::Diagnostic)]
        #[error("bad platform `{0}`")]
        #[diagnostic(code(untrusted::test), help("pick one of: {0}"))]
        struct E(String, #[source] std::io::Error);
        let e = E(
            "linux\n::warning::x ##[error]y \x1b]0;t\x07".into(),
            std::io::Error::other("body\n::error::z"),
        );
        let text = diagnostic(&e, false);
        for l in text.lines() {
            assert!(!l.trim_start().starts_with("::"), "{text}");
        }
        assert!(!text.contains("##["), "{text}");
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text}");
        assert!(text.contains("linux\\n::warning::x"), "{text}");
        assert!(text.contains("body\\n::error::z"), "{text}");
    }
}
