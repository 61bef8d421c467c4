//! The JSON .NET writes and reads: `appsettings*.json`, `*.runtimeconfig.json`, `*.deps.json`.

use crate::tree::Content;
use serde_json::Value;

/// Parses kept JSON. A truncated file is not parsed (its end is missing). A UTF-8 byte order
/// mark is skipped, and comments and trailing commas are tolerated, as the configuration
/// provider reads appsettings files (`JsonCommentHandling.Skip`, `AllowTrailingCommas`); the
/// rest of JSON5 (single quotes, unquoted names, hexadecimal numbers…) is refused, as .NET
/// refuses it. Plain JSON (every deps.json .NET writes) takes serde_json's faster path.
pub(super) fn parse_json(content: &Content) -> Option<Value> {
    if content.truncated {
        return None;
    }
    let bytes = content
        .bytes
        .strip_prefix(b"\xEF\xBB\xBF")
        .unwrap_or(&content.bytes);
    serde_json::from_slice(bytes).ok().or_else(|| {
        let text = std::str::from_utf8(bytes).ok()?;
        jsonc_parser::parse_to_serde_value::<Option<Value>>(text, &DOTNET_JSON)
            .ok()
            .flatten()
    })
}

/// What `System.Text.Json` accepts with `JsonCommentHandling.Skip` and `AllowTrailingCommas`.
const DOTNET_JSON: jsonc_parser::ParseOptions = jsonc_parser::ParseOptions {
    allow_comments: true,
    allow_trailing_commas: true,
    allow_loose_object_property_names: false,
    allow_missing_commas: false,
    allow_single_quoted_strings: false,
    allow_hexadecimal_numbers: false,
    allow_unary_plus_numbers: false,
    allow_bare_decimal_point_numbers: false,
    allow_non_finite_numbers: false,
    allow_extended_string_escapes: false,
};

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

    /// Only comments and trailing commas: .NET refuses the rest of JSON5, and so does this.
    #[test]
    fn json5_beyond_comments_and_trailing_commas_is_refused() {
        for bad in [
            &b"{a: 1}"[..],
            b"{'a': 1}",
            b"{\"a\": 0x10}",
            b"{\"a\": +1}",
            b"{\"a\": .5}",
            b"{\"a\": NaN}",
            b"{\"a\": 1 \"b\": 2}",
            b"[1,,2]",
            b"[,]",
            b"{,}",
            b"{\"a\": \"\\x41\"}",
            b"{} {}",
            b"// only a comment",
            b"{\"a\": \"\xFF\"} // not UTF-8",
        ] {
            assert!(
                parse_json(&content(bad)).is_none(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        // Hostile nesting is refused by both parsers' depth limits, never by a stack overflow.
        let deep = format!("{}1{} // c", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_json(&content(deep.as_bytes())).is_none());
        // Comments anywhere white space may be, and a trailing comma after the last item.
        assert_eq!(
            parse_json(&content(b"// head\n[ /* one */ 1, /* two */ 2, ] /* tail */")),
            Some(serde_json::json!([1, 2]))
        );
    }
}
