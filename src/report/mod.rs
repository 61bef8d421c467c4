//! Reports: one file per format.

pub(crate) mod budget;
pub(crate) mod document;
pub(crate) mod facts;
pub(crate) mod github;
pub(crate) mod gitlab;
pub(crate) mod html;
pub(crate) mod images;
pub(crate) mod inspect;
pub(crate) mod junit;
pub(crate) mod lint;
pub(crate) mod model;
pub(crate) mod sarif;
pub(crate) mod spool;
pub(crate) mod text;

use std::io::{self, Write};

/// Writes `value` as the pretty JSON of [`crate::untrusted::write_json`] (no final newline) as
/// it reads `depth` levels down a document, every line after the first indented by two spaces
/// a level: documents of many reports are written one report at a time, yet read as if
/// serialised whole. JSON strings hold no raw line break, so every `\n` is the layout's.
pub(crate) fn write_json_at<T: serde::Serialize + ?Sized>(
    w: &mut dyn Write,
    value: &T,
    depth: usize,
) -> io::Result<()> {
    let mut indented = Indented {
        inner: w,
        pad: "  ".repeat(depth),
    };
    let mut ser =
        serde_json::Serializer::with_formatter(&mut indented, crate::untrusted::JsonFormatter::pretty());
    value.serialize(&mut ser).map_err(io::Error::other)
}

/// A writer that indents every line after the first by `pad`.
struct Indented<'a> {
    inner: &'a mut dyn Write,
    pad: String,
}

impl Write for Indented<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut start = 0;
        for (i, b) in buf.iter().enumerate() {
            if *b == b'\n' {
                self.inner.write_all(&buf[start..=i])?;
                self.inner.write_all(self.pad.as_bytes())?;
                start = i + 1;
            }
        }
        self.inner.write_all(&buf[start..])?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes the elements of a pretty JSON array one at a time, `depth` levels down a document
/// (the array's own `[` already written): `[]` when empty, as serde_json writes it.
pub(crate) struct JsonArray {
    depth: usize,
    first: bool,
}

impl JsonArray {
    pub(crate) fn new(depth: usize) -> Self {
        JsonArray { depth, first: true }
    }
    /// Starts the next element: the separator and its indent; then write the element as
    /// [`write_json_at`] does at `depth + 1`.
    pub(crate) fn next(&mut self, w: &mut dyn Write) -> io::Result<()> {
        if !std::mem::take(&mut self.first) {
            w.write_all(b",")?;
        }
        write!(w, "\n{}", "  ".repeat(self.depth + 1))
    }
    /// Closes the array: `]` on its own line unless it is empty.
    pub(crate) fn end(self, w: &mut dyn Write) -> io::Result<()> {
        if !self.first {
            write!(w, "\n{}", "  ".repeat(self.depth))?;
        }
        w.write_all(b"]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_written_one_element_at_a_time_read_as_serde_writes_them() {
        let doc = serde_json::json!({"a": [{"b": [1, "x\ny"], "c": {}}, {"d": []}], "e": []});
        let mut whole = Vec::new();
        crate::untrusted::write_json(&mut whole, &doc).unwrap();
        let mut parts: Vec<u8> = Vec::new();
        parts.extend_from_slice(b"{\n  \"a\": [");
        let mut a = JsonArray::new(1);
        for v in doc["a"].as_array().unwrap() {
            a.next(&mut parts).unwrap();
            write_json_at(&mut parts, v, 2).unwrap();
        }
        a.end(&mut parts).unwrap();
        parts.extend_from_slice(b",\n  \"e\": [");
        JsonArray::new(1).end(&mut parts).unwrap();
        parts.extend_from_slice(b"\n}\n");
        assert_eq!(
            String::from_utf8(parts).unwrap(),
            String::from_utf8(whole).unwrap()
        );
    }
}
