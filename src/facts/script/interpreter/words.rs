//! A script's text as the shell splits it: statements, `&&`/`||` lists, words as written,
//! assignments and here-documents.

/// The end word of a here-document the statement opens (`<<EOF`, `<<-'EOF'`), and whether
/// leading tabs are stripped.
pub(super) fn heredoc_marker(stmt: &str) -> Option<(String, bool)> {
    let at = stmt.find("<<")?;
    let rest = &stmt[at + 2..];
    if rest.starts_with('<') {
        return None; // a here-string
    }
    let (rest, strip) = match rest.strip_prefix('-') {
        Some(r) => (r, true),
        None => (rest, false),
    };
    let word: String = rest
        .trim_start()
        .chars()
        .take_while(|c| !c.is_whitespace() && !matches!(c, ';' | '|' | '&' | '<' | '>'))
        .filter(|c| !matches!(c, '\'' | '"' | '\\'))
        .collect();
    (!word.is_empty()).then_some((word, strip))
}

/// Splits a logical line into statements at unquoted `;` (not `;;`) and a comment; `&&`, `||`
/// and pipes stay inside a statement.
pub(super) fn statements(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = line.chars().collect();
    let (mut sq, mut dq) = (false, false);
    let mut depth = 0usize;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if !sq => {
                cur.push(c);
                if let Some(&n) = chars.get(i + 1) {
                    cur.push(n);
                    i += 1;
                }
            }
            '\'' if !dq && depth == 0 => {
                sq = !sq;
                cur.push(c);
            }
            '"' if !sq => {
                dq = !dq;
                cur.push(c);
            }
            '(' if !sq => {
                depth += 1;
                cur.push(c);
            }
            ')' if !sq && depth > 0 => {
                depth -= 1;
                cur.push(c);
            }
            '#' if !sq && !dq && depth == 0 && cur.chars().last().is_none_or(char::is_whitespace) => break,
            ';' if !sq && !dq && depth == 0 => {
                if chars.get(i + 1) == Some(&';') {
                    i += 1;
                }
                out.push(std::mem::take(&mut cur));
            }
            _ => cur.push(c),
        }
        i += 1;
    }
    out.push(cur);
    out.into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Splits a statement at top-level `&&` and `||`: the parts and the operator before each.
pub(super) fn and_or(stmt: &str) -> Vec<(Option<&'static str>, String)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut op = None;
    let chars: Vec<char> = stmt.chars().collect();
    let (mut sq, mut dq) = (false, false);
    let mut depth = 0usize;
    let mut bracket = 0usize;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            '\\' if !sq => {
                cur.push(c);
                if let Some(n) = next {
                    cur.push(n);
                    i += 1;
                }
            }
            '\'' if !dq => {
                sq = !sq;
                cur.push(c);
            }
            '"' if !sq => {
                dq = !dq;
                cur.push(c);
            }
            '(' if !sq => {
                depth += 1;
                cur.push(c);
            }
            ')' if !sq && depth > 0 => {
                depth -= 1;
                cur.push(c);
            }
            '[' if !sq && !dq && next == Some('[') => {
                bracket += 1;
                cur.push_str("[[");
                i += 1;
            }
            ']' if !sq && !dq && next == Some(']') && bracket > 0 => {
                bracket -= 1;
                cur.push_str("]]");
                i += 1;
            }
            '&' | '|' if !sq && !dq && depth == 0 && bracket == 0 && next == Some(c) => {
                out.push((op, std::mem::take(&mut cur)));
                op = Some(if c == '&' { "&&" } else { "||" });
                i += 1;
            }
            _ => cur.push(c),
        }
        i += 1;
    }
    out.push((op, cur));
    out.into_iter().map(|(o, s)| (o, s.trim().to_string())).collect()
}

/// Splits a command into its words as written (quotes kept, `$(…)` kept whole).
pub(in crate::facts::script) fn raw_words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let chars: Vec<char> = s.chars().collect();
    let (mut sq, mut dq) = (false, false);
    let mut depth = 0usize;
    let mut brace = 0usize;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if !sq => {
                cur.push(c);
                if let Some(&n) = chars.get(i + 1) {
                    cur.push(n);
                    i += 1;
                }
                in_word = true;
            }
            '\'' if !dq && depth == 0 => {
                sq = !sq;
                cur.push(c);
                in_word = true;
            }
            '"' if !sq && depth == 0 => {
                dq = !dq;
                cur.push(c);
                in_word = true;
            }
            '(' if !sq => {
                depth += 1;
                cur.push(c);
                in_word = true;
            }
            ')' if !sq && depth > 0 => {
                depth -= 1;
                cur.push(c);
            }
            '{' if !sq && cur.ends_with('$') => {
                brace += 1;
                cur.push(c);
            }
            '}' if !sq && brace > 0 => {
                brace -= 1;
                cur.push(c);
            }
            c if c.is_whitespace() && !sq && !dq && depth == 0 && brace == 0 => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                cur.push(c);
                in_word = true;
            }
        }
        i += 1;
    }
    if in_word {
        out.push(cur);
    }
    out
}

/// `NAME=VALUE` as written: the name and the raw value.
pub(in crate::facts::script) fn assignment(word: &str) -> Option<(&str, &str)> {
    let (name, value) = word.split_once('=')?;
    let mut chars = name.chars();
    let first = chars.next()?;
    ((first.is_ascii_alphabetic() || first == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then_some((name, value))
}

/// The index of the bracket that closes the one at `s[0]`, skipping quoted text.
pub(super) fn matching(s: &[char], open: char, close: char) -> Option<usize> {
    let mut depth = 0usize;
    let (mut sq, mut dq) = (false, false);
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        match c {
            '\\' if !sq => i += 1,
            '\'' if !dq => sq = !sq,
            '"' if !sq => dq = !dq,
            c if c == open && !sq => depth += 1,
            c if c == close && !sq => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}
