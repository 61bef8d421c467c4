//! Shell patterns (`*`, `?`, `[…]`) as `case`, `[[ == ]]` and pathname expansion match them.

/// One piece of a shell pattern.
pub(super) enum Token {
    Star,
    Any,
    Class { neg: bool, set: Vec<char> },
    Lit(char),
}

pub(super) fn tokens(pattern: &str) -> Vec<Token> {
    let p: Vec<char> = pattern.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '*' => out.push(Token::Star),
            '?' => out.push(Token::Any),
            '[' => match p[i + 1..].iter().position(|&c| c == ']') {
                Some(len) if len > 0 => {
                    let mut set: Vec<char> = p[i + 1..i + 1 + len].to_vec();
                    let neg = matches!(set.first(), Some('!' | '^'));
                    if neg {
                        set.remove(0);
                    }
                    out.push(Token::Class { neg, set });
                    i += len + 1;
                }
                _ => out.push(Token::Lit('[')),
            },
            c => out.push(Token::Lit(c)),
        }
        i += 1;
    }
    out
}

pub(super) fn token_matches(t: &Token, c: char) -> bool {
    match t {
        Token::Star | Token::Any => true,
        Token::Lit(l) => *l == c,
        Token::Class { neg, set } => {
            let mut hit = false;
            let mut i = 0;
            while i < set.len() {
                if i + 2 < set.len() && set[i + 1] == '-' {
                    hit |= set[i] <= c && c <= set[i + 2];
                    i += 3;
                } else {
                    hit |= set[i] == c;
                    i += 1;
                }
            }
            hit != *neg
        }
    }
}

/// A shell pattern (`*`, `?`, `[…]`) against one name, in time linear in their product at
/// worst (one star remembered for backtracking, as glob matchers do).
pub(crate) fn glob_match(pattern: &str, name: &str) -> bool {
    let p = tokens(pattern);
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some(Token::Star) => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(t) if token_matches(t, n[ni]) => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|t| matches!(t, Token::Star))
}
