//! Shell word splitting: one splitter for the two places memlint reads shell-like words, the
//! Dockerfile (`ENV`, `ARG`, `FROM` arguments) and the commands an image runs (`sh -c` strings,
//! the `exec` and `set --` lines of entrypoint scripts). They differ only where the two
//! languages differ, and [`Syntax`] says how.

/// Marks where `$@` (or `$*`) stood in a command's words: the caller puts the script's
/// arguments there. A NUL cannot occur in a real argument, so the marker never collides.
pub(crate) const ALL_ARGS: &str = "\u{0}@";

/// What a backslash (the escape character) does inside double quotes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DoubleQuoted {
    /// It escapes any character (memlint's reading of `sh` words since the start).
    EscapesAny,
    /// It escapes only `"`, `$` and the escape character itself, and stays literal before
    /// anything else (BuildKit's `processDoubleQuote`).
    EscapesQuoteDollarEscape,
}

/// The rules of one language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Syntax {
    /// The character that escapes the next one outside single quotes.
    escape: char,
    double_quoted: DoubleQuoted,
    /// `$@` and `$*` stand for the positional parameters and become [`ALL_ARGS`].
    positional: bool,
}

/// A POSIX shell command line, as `sh -c` and shell scripts write it.
pub(crate) const SH: Syntax = Syntax {
    escape: '\\',
    double_quoted: DoubleQuoted::EscapesAny,
    positional: true,
};

/// The arguments of a Dockerfile instruction, with the escape character of the file's
/// `# escape=` directive (a backslash unless it names a backtick).
///
/// Docker documents that in `ENV` "like command line parsing, quotes and backslashes can be
/// used to include spaces within values" (`ENV MY_DOG=Rex\ The\ Dog`,
/// https://docs.docker.com/reference/dockerfile/#env). BuildKit's word lexer
/// (moby/buildkit `frontend/dockerfile/shell/lex.go`, `processStopOn` and
/// `processDoubleQuote`) makes that precise, and this follows it:
/// * outside quotes the escape character is dropped and the next character is taken as it is;
/// * inside double quotes it escapes only `"`, `$` and itself, and is literal before anything
///   else (`"12\34"` keeps its backslash);
/// * inside single quotes nothing is special.
///
/// `$@` is not special here: memlint does not expand variables in Dockerfile words (a `$NAME`
/// stays as written), and `$@` is kept as written like every other `$` reference. BuildKit
/// would substitute an unset special parameter with nothing; memlint only needs the keys an
/// `ENV` sets and shows values as the Dockerfile wrote them.
pub(crate) fn dockerfile(escape: char) -> Syntax {
    Syntax {
        escape,
        double_quoted: DoubleQuoted::EscapesQuoteDollarEscape,
        positional: false,
    }
}

/// Splits `s` into words at unquoted white space, removing quotes and escapes as `syntax`
/// says. An unterminated quote runs to the end of the text.
pub(crate) fn split_words(s: &str, syntax: Syntax) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars().peekable();
    let (mut sq, mut dq) = (false, false);
    while let Some(c) = chars.next() {
        match c {
            '\'' if !dq => {
                sq = !sq;
                in_word = true;
            }
            '"' if !sq => {
                dq = !dq;
                in_word = true;
            }
            c if c == syntax.escape && !sq => {
                let escapes_next = !dq
                    || syntax.double_quoted == DoubleQuoted::EscapesAny
                    || matches!(chars.peek(), Some(&n) if n == '"' || n == '$' || n == syntax.escape);
                if !escapes_next {
                    cur.push(c);
                    in_word = true;
                } else if let Some(n) = chars.next() {
                    cur.push(n);
                    in_word = true;
                }
            }
            '$' if syntax.positional && !sq && matches!(chars.peek(), Some('@') | Some('*')) => {
                chars.next();
                cur.push_str(ALL_ARGS);
                in_word = true;
            }
            // `${@}` and `${*}`, as Rails' `bin/docker-entrypoint` writes `exec "${@}"`.
            '$' if syntax.positional && !sq && chars.peek() == Some(&'{') && {
                let mut ahead = chars.clone();
                ahead.next();
                matches!((ahead.next(), ahead.next()), (Some('@' | '*'), Some('}')))
            } =>
            {
                chars.next();
                chars.next();
                chars.next();
                cur.push_str(ALL_ARGS);
                in_word = true;
            }
            c if c.is_whitespace() && !sq && !dq => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sh_words_quotes_and_escapes() {
        assert_eq!(
            split_words(r#"node --max-old-space-size=512 "a b" 'c d' e\ f"#, SH),
            ["node", "--max-old-space-size=512", "a b", "c d", "e f"]
        );
        // Inside double quotes a backslash escapes whatever follows; inside single quotes
        // it is literal. A trailing backslash escapes nothing and is dropped.
        assert_eq!(split_words(r#""a\b" 'c\d' e\"#, SH), ["ab", r"c\d", "e"]);
        assert_eq!(split_words("'' \"\"", SH), ["", ""]);
        assert!(split_words("  \t ", SH).is_empty());
    }

    #[test]
    fn sh_positional_parameters_become_the_marker() {
        assert_eq!(split_words(r#"exec "$@""#, SH), ["exec", ALL_ARGS]);
        assert_eq!(split_words("node $* x", SH), ["node", ALL_ARGS, "x"]);
        assert_eq!(
            split_words(r#"exec "${@}" ${*}"#, SH),
            ["exec", ALL_ARGS, ALL_ARGS]
        );
        // Single quotes keep `$@` as text.
        assert_eq!(split_words("'$@'", SH), ["$@"]);
    }

    /// Decision: outside quotes, the escape character escapes the next character in
    /// Dockerfile words (Docker's own `ENV MY_DOG=Rex\ The\ Dog` example).
    #[test]
    fn dockerfile_backslash_escapes_outside_quotes() {
        let d = dockerfile('\\');
        assert_eq!(
            split_words(r#"MY_NAME="John Doe" MY_DOG=Rex\ The\ Dog MY_CAT=fluffy"#, d),
            ["MY_NAME=John Doe", "MY_DOG=Rex The Dog", "MY_CAT=fluffy"]
        );
        assert_eq!(split_words(r#"A=\"q\" B=a\\b"#, d), [r#"A="q""#, r"B=a\b"]);
    }

    /// Decision: inside double quotes the escape character escapes only `"`, `$` and itself
    /// (BuildKit's `processDoubleQuote`); before anything else it stays.
    #[test]
    fn dockerfile_backslash_in_double_quotes_escapes_only_quote_dollar_and_itself() {
        let d = dockerfile('\\');
        assert_eq!(
            split_words(r#"A="12\"34" B="12\34" C="a\\b" D="\$HOME" E='x\y'"#, d),
            [r#"A=12"34"#, r"B=12\34", r"C=a\b", "D=$HOME", r"E=x\y"]
        );
    }

    /// With `# escape=`` ` a backslash is an ordinary character (Windows paths) and the
    /// backtick escapes.
    #[test]
    fn dockerfile_backtick_escape_leaves_backslashes_alone() {
        let d = dockerfile('`');
        assert_eq!(
            split_words(r#"PATH=C:\Windows\System32 A=x` y B="q`"q""#, d),
            [r"PATH=C:\Windows\System32", "A=x y", r#"B=q"q"#]
        );
    }

    /// Decision: `$@` is not special in Dockerfile words; it stays as written, like every
    /// other `$` reference, and the entrypoint's marker never appears in a Dockerfile value.
    #[test]
    fn dockerfile_keeps_dollar_at_as_written() {
        let d = dockerfile('\\');
        let words = split_words(r#"A="x $@ y" B=$@ C=$* D=$HOME"#, d);
        assert_eq!(words, ["A=x $@ y", "B=$@", "C=$*", "D=$HOME"]);
        assert!(words.iter().all(|w| !w.contains('\u{0}')));
    }
}
