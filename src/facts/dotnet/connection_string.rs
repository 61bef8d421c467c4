//! Connection strings as .NET's `DbConnectionStringBuilder` (and so Npgsql) reads them.

/// Splits a connection string into (lower-case key, value) pairs as
/// `System.Data.Common.DbConnectionOptions` does without ODBC rules (`GetKeyValuePair`), which
/// `DbConnectionStringBuilder.ConnectionString` and so Npgsql use: `;`-separated `key=value`,
/// `==` for a `=` inside a key, values in `"…"` or `'…'` with the quote doubled inside, white
/// space trimmed around unquoted values. A value-less `key=` gives `None`. `None` overall for a
/// string the builder rejects.
pub(super) fn parse_connection_string(s: &str) -> Option<Vec<(String, Option<String>)>> {
    let chars: Vec<char> = s.chars().collect();
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < chars.len() {
        let (next, pair) = key_value_pair(&chars, pos)?;
        match pair {
            Some(p) => out.push(p),
            None => break,
        }
        pos = next;
    }
    Some(out)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    NothingYet,
    Key,
    KeyEqual,
    KeyEnd,
    UnquotedValue,
    DoubleQuoteValue,
    DoubleQuoteValueQuote,
    SingleQuoteValue,
    SingleQuoteValueQuote,
    QuotedValueEnd,
    NullTermination,
}

type Pair = (String, Option<String>);

/// One `key=value` from `pos`: the position after it and the pair (`None` when only white space
/// and separators were left). `None` overall for a syntax error.
fn key_value_pair(chars: &[char], mut pos: usize) -> Option<(usize, Option<Pair>)> {
    use State::*;
    let mut pairing = Pairing {
        state: NothingYet,
        buffer: String::new(),
        key: None,
        value: None,
    };
    let mut current = '\0';
    'chars: while pos < chars.len() {
        current = chars[pos];
        // One character can pass through two states (the C# `goto case`): loop until it is
        // consumed (`continue 'chars` after advancing), appended (`break`), or ends the pair.
        loop {
            match pairing.take(current) {
                Step::Skip => {
                    pos += 1;
                    continue 'chars;
                }
                Step::Keep => break,
                Step::Again => continue,
                Step::EndPair => break 'chars,
                Step::Reject => return None,
            }
        }
        pairing.buffer.push(current);
        pos += 1;
    }
    let Pairing {
        state,
        buffer,
        mut key,
        mut value,
    } = pairing;
    match state {
        Key | DoubleQuoteValue | SingleQuoteValue => return None,
        KeyEqual => {
            let name = key_name(&buffer);
            if name.is_empty() {
                return None;
            }
            key = Some(name);
        }
        UnquotedValue => {
            let v = buffer.trim();
            if v.ends_with(['\'', '"']) {
                return None;
            }
            value = Some(v.to_string());
        }
        DoubleQuoteValueQuote | SingleQuoteValueQuote | QuotedValueEnd => value = Some(buffer),
        NothingYet | KeyEnd | NullTermination => {}
    }
    if current == ';' && pos < chars.len() {
        pos += 1;
    }
    Some((pos, key.map(|k| (k, value))))
}

/// What one character does to the pair being read.
enum Step {
    /// Consumed: on to the next character.
    Skip,
    /// Part of the key or value: appended to the buffer.
    Keep,
    /// Read again in the new state (the C# `goto case`).
    Again,
    /// The end of this pair.
    EndPair,
    /// A syntax error: the builder rejects the string.
    Reject,
}

/// The pair being read: the state of `GetKeyValuePair`, the characters so far, and the key and
/// value once known.
struct Pairing {
    state: State,
    buffer: String,
    key: Option<String>,
    value: Option<String>,
}

impl Pairing {
    fn take(&mut self, current: char) -> Step {
        use State::*;
        match self.state {
            NothingYet => {
                if current == ';' || current.is_whitespace() {
                    return Step::Skip;
                }
                if current == '\0' {
                    self.state = NullTermination;
                    return Step::Skip;
                }
                if current.is_control() {
                    return Step::Reject;
                }
                if current == '=' {
                    self.state = KeyEqual;
                    return Step::Skip;
                }
                self.state = Key;
                Step::Keep
            }
            Key => {
                if current == '=' {
                    self.state = KeyEqual;
                    return Step::Skip;
                }
                if !current.is_whitespace() && current.is_control() {
                    return Step::Reject;
                }
                Step::Keep
            }
            KeyEqual => {
                if current == '=' {
                    // `==`: a literal `=` in the key.
                    self.state = Key;
                    return Step::Keep;
                }
                let name = key_name(&self.buffer);
                if name.is_empty() {
                    return Step::Reject;
                }
                self.key = Some(name);
                self.buffer.clear();
                self.state = KeyEnd;
                Step::Again
            }
            KeyEnd => {
                if current.is_whitespace() {
                    return Step::Skip;
                }
                if current == '\'' {
                    self.state = SingleQuoteValue;
                    return Step::Skip;
                }
                if current == '"' {
                    self.state = DoubleQuoteValue;
                    return Step::Skip;
                }
                if current == ';' || current == '\0' {
                    return Step::EndPair;
                }
                if current.is_control() {
                    return Step::Reject;
                }
                self.state = UnquotedValue;
                Step::Keep
            }
            UnquotedValue => {
                if !current.is_whitespace() && (current.is_control() || current == ';') {
                    return Step::EndPair;
                }
                Step::Keep
            }
            DoubleQuoteValue | SingleQuoteValue => {
                let quote = if self.state == DoubleQuoteValue { '"' } else { '\'' };
                if current == quote {
                    self.state = if self.state == DoubleQuoteValue {
                        DoubleQuoteValueQuote
                    } else {
                        SingleQuoteValueQuote
                    };
                    return Step::Skip;
                }
                if current == '\0' {
                    return Step::Reject;
                }
                Step::Keep
            }
            DoubleQuoteValueQuote | SingleQuoteValueQuote => {
                let quote = if self.state == DoubleQuoteValueQuote {
                    '"'
                } else {
                    '\''
                };
                if current == quote {
                    // A doubled quote stands for one.
                    self.state = if self.state == DoubleQuoteValueQuote {
                        DoubleQuoteValue
                    } else {
                        SingleQuoteValue
                    };
                    return Step::Keep;
                }
                self.value = Some(self.buffer.clone());
                self.state = QuotedValueEnd;
                Step::Again
            }
            QuotedValueEnd => {
                if current.is_whitespace() {
                    return Step::Skip;
                }
                if current == ';' {
                    return Step::EndPair;
                }
                if current == '\0' {
                    self.state = NullTermination;
                    return Step::Skip;
                }
                Step::Reject
            }
            NullTermination => {
                if current == '\0' || current.is_whitespace() {
                    return Step::Skip;
                }
                Step::Reject
            }
        }
    }
}

/// Trailing white space trimmed, lower-cased (`GetKeyName`).
fn key_name(buffer: &str) -> String {
    buffer.trim_end().to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_string_syntax() {
        let p = |s: &str| parse_connection_string(s);
        let pairs = |v: &[(&str, Option<&str>)]| -> Option<Vec<Pair>> {
            Some(
                v.iter()
                    .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
                    .collect(),
            )
        };
        assert_eq!(
            p("Host=db;Database=app;SslMode=Require;GssEncryptionMode=Disable"),
            pairs(&[
                ("host", Some("db")),
                ("database", Some("app")),
                ("sslmode", Some("Require")),
                ("gssencryptionmode", Some("Disable"))
            ])
        );
        // Spaces around keys and values, empty segments, a key with inner spaces, case folded keys only.
        assert_eq!(
            p(" ;; Host = db ; GSS Encryption Mode =  Prefer  ;"),
            pairs(&[("host", Some("db")), ("gss encryption mode", Some("Prefer"))])
        );
        // Quoted values keep `;` and spaces; a doubled quote is one quote.
        assert_eq!(
            p(r#"Password="a;b ""c"""; Search Path='x''y'; Host=h"#),
            pairs(&[
                ("password", Some(r#"a;b "c""#)),
                ("search path", Some("x'y")),
                ("host", Some("h"))
            ])
        );
        // `==` is a `=` inside a key; a bare `key=` has no value.
        assert_eq!(
            p("a==b=1;Gss Encryption Mode=;x="),
            pairs(&[("a=b", Some("1")), ("gss encryption mode", None), ("x", None)])
        );
        assert_eq!(
            p("Host=db;Timeout=15 "),
            pairs(&[("host", Some("db")), ("timeout", Some("15"))])
        );
        assert_eq!(p(""), pairs(&[]));
        // What the builder rejects.
        for bad in [
            "Host=db;Password=\"open",
            "Host=db;GssEncryptionMode",
            "Host=db;x=abc\"",
            "Host=\"db\" x",
            "=value",
            "Host=d\u{1}b",
        ] {
            assert_eq!(p(bad), None, "{bad:?} should not parse");
        }
    }
}
