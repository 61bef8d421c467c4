//! `[`, `test` and `[[` conditions, decided against the image where they can be.

use super::words::*;
use super::*;
use crate::tree::NodeKind;

/// Three-valued truth: a test memlint can or cannot decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tri {
    True,
    False,
    Unknown,
}

impl Tri {
    pub(super) fn from(b: bool) -> Tri {
        if b {
            Tri::True
        } else {
            Tri::False
        }
    }
    pub(super) fn not(self) -> Tri {
        match self {
            Tri::True => Tri::False,
            Tri::False => Tri::True,
            Tri::Unknown => Tri::Unknown,
        }
    }
    pub(super) fn and(self, o: Tri) -> Tri {
        match (self, o) {
            (Tri::False, _) | (_, Tri::False) => Tri::False,
            (Tri::True, Tri::True) => Tri::True,
            _ => Tri::Unknown,
        }
    }
    pub(super) fn or(self, o: Tri) -> Tri {
        self.not().and(o.not()).not()
    }
}

impl State<'_> {
    /// Decides a test: `[ … ]`, `[[ … ]]`, `test …`, `true`, `false`, `! cmd`.
    pub(super) fn test(&self, part: &str) -> Tri {
        let mut raw = raw_words(part);
        // `! cmd` negates; any number of times.
        let negations = raw.iter().take_while(|w| w.as_str() == "!").count();
        raw.drain(..negations);
        let t = self.test_words(&raw);
        if negations % 2 == 1 {
            t.not()
        } else {
            t
        }
    }

    pub(super) fn test_words(&self, raw: &[String]) -> Tri {
        let Some(first) = raw.first() else {
            return Tri::Unknown;
        };
        match first.as_str() {
            "true" | ":" => return Tri::True,
            "false" => return Tri::False,
            _ => {}
        }
        let (args, globbing) = match first.as_str() {
            "[" if raw.last().map(String::as_str) == Some("]") => (&raw[1..raw.len() - 1], true),
            "test" => (&raw[1..], true),
            "[[" if raw.last().map(String::as_str) == Some("]]") => (&raw[1..raw.len() - 1], false),
            _ => return Tri::Unknown,
        };
        let words = if globbing {
            match self.fields(args) {
                Ok(w) => w,
                Err(_) => return Tri::Unknown,
            }
        } else {
            let mut v = Vec::new();
            for a in args {
                match self.expand(a) {
                    Ok(e) => v.push(e.text),
                    Err(_) => return Tri::Unknown,
                }
            }
            v
        };
        let w: Vec<&str> = words.iter().map(String::as_str).collect();
        match w.as_slice() {
            [] => Tri::False,
            [s] => Tri::from(!s.is_empty()),
            // `[ -f a b ]`: a glob that matched several files is a syntax error (`binary
            // operator expected`), and the test fails.
            [op, _, third, ..] if globbing && is_unary(op) && !matches!(*third, "=" | "==" | "!=") => {
                Tri::False
            }
            ["!", rest @ ..] if !rest.is_empty() && rest.len() <= 2 => {
                self.unary_or_binary(rest, globbing).not()
            }
            rest if rest.len() <= 3 => self.unary_or_binary(rest, globbing),
            _ => Tri::Unknown,
        }
    }

    pub(super) fn unary_or_binary(&self, w: &[&str], globbing: bool) -> Tri {
        let tree = self.cx.tree;
        match w {
            [s] => Tri::from(!s.is_empty()),
            ["-z", s] => Tri::from(s.is_empty()),
            ["-n", s] => Tri::from(!s.is_empty()),
            [op @ ("-f" | "-e" | "-r" | "-d" | "-s" | "-x" | "-L" | "-h"), path] => {
                let abs = self.absolute(path);
                if matches!(*op, "-L" | "-h") {
                    let id = tree.lookup_nofollow(&abs).ok().flatten();
                    return Tri::from(
                        id.is_some_and(|id| matches!(tree.node(id).kind, NodeKind::Symlink(_))),
                    );
                }
                let Some(id) = tree.lookup(&abs).ok().flatten() else {
                    return Tri::False;
                };
                let node = tree.node(id);
                match *op {
                    "-f" => Tri::from(matches!(node.kind, NodeKind::File)),
                    "-d" => Tri::from(node.is_dir()),
                    "-s" => Tri::from(node.size > 0),
                    "-x" => Tri::from(node.mode & 0o111 != 0),
                    // Exists; whether the container's user may read it is not known.
                    "-r" => Tri::Unknown,
                    _ => Tri::True,
                }
            }
            [a, "=" | "==", b] if globbing || !b.contains(['*', '?', '[']) => Tri::from(a == b),
            [a, "!=", b] if globbing || !b.contains(['*', '?', '[']) => Tri::from(a != b),
            [op, _] if globbing && op.starts_with('-') && op.len() == 2 => Tri::Unknown,
            _ => Tri::Unknown,
        }
    }

    /// An `if` test: a chain of tests with `&&` and `||`.
    pub(super) fn condition(&self, test: &str) -> Tri {
        let mut result = Tri::True;
        for (i, (op, part)) in and_or(test).into_iter().enumerate() {
            let t = self.test(&part);
            result = match (i, op) {
                (0, _) => t,
                (_, Some("||")) => result.or(t),
                _ => result.and(t),
            };
        }
        result
    }
}

pub(super) fn is_unary(op: &str) -> bool {
    matches!(
        op,
        "-f" | "-e" | "-r" | "-d" | "-s" | "-x" | "-L" | "-h" | "-z" | "-n"
    )
}
