//! The JSON .NET writes and reads: `appsettings*.json`, `*.runtimeconfig.json`, `*.deps.json`.

use crate::tree::Content;
use serde_json::Value;

/// Parses kept JSON. A truncated file is not parsed (its end is missing). A UTF-8 byte order
/// mark is skipped, and comments and trailing commas are tolerated, as the configuration
/// provider reads appsettings files (`JsonCommentHandling.Skip`, `AllowTrailingCommas`).
pub(super) fn parse_json(content: &Content) -> Option<Value> {
    if content.truncated {
        return None;
    }
    let bytes = content
        .bytes
        .strip_prefix(b"\xEF\xBB\xBF")
        .unwrap_or(&content.bytes);
    serde_json::from_slice(bytes)
        .ok()
        .or_else(|| serde_json::from_slice(&strip_trailing_commas(&strip_comments(bytes))).ok())
}

/// `//` and `/* */` comments outside strings, replaced by a space.
fn strip_comments(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    let mut in_string = false;
    while i < input.len() {
        let b = input[i];
        if in_string {
            out.push(b);
            if b == b'\\' {
                if let Some(&next) = input.get(i + 1) {
                    out.push(next);
                    i += 1;
                }
            } else if b == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        match (b, input.get(i + 1)) {
            (b'/', Some(b'/')) => {
                while i < input.len() && input[i] != b'\n' {
                    i += 1;
                }
                out.push(b' ');
            }
            (b'/', Some(b'*')) => {
                i += 2;
                while i < input.len() && !(input[i] == b'*' && input.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                i = (i + 2).min(input.len());
                out.push(b' ');
            }
            _ => {
                in_string = b == b'"';
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// Commas outside strings that only white space separates from a closing `}` or `]`.
fn strip_trailing_commas(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in input.iter().enumerate() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b',' {
            let next = input[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
            if matches!(next, Some(b'}' | b']')) {
                continue;
            }
        }
        out.push(b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(bytes: &[u8]) -> Content {
        Content {
            bytes: bytes.to_vec(),
            truncated: false,
        }
    }

    #[test]
    fn jsonc_comments_and_trailing_commas() {
        let v = parse_json(&content(b"\xEF\xBB\xBF{ /* a */ \"a\": \"x // not a comment\", // b\n \"b\": [1, 2,], \"c\": \"\\\",/*\", }")).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"a": "x // not a comment", "b": [1, 2], "c": "\",/*"})
        );
        assert!(parse_json(&content(b"{\"a\": 1,, }")).is_none());
    }
}
