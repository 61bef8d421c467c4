//! A POSIX shell interpreter that runs an entrypoint script without running anything: it
//! reads the statements up to a given line against an environment and the image's tree, and
//! says what the script exported, with the line of each export. What it cannot work out is
//! undecided, with the line as evidence (see [`super`]).
//!
//! Its API: [`run`] a script over an environment and a [`Context`] (the image, and the
//! budgets [`ImageBudget`] and [`Budget`] that bound what running costs).

mod budget;
mod condition;
mod expand;
mod glob;
mod statement;
mod words;

pub(crate) use budget::{
    Budget, ImageBudget, MAX_ARG_STRLEN, MAX_CONTAINER_ENV, MAX_EXPANDED, MAX_SEARCH_NODES, MAX_SETTINGS,
};
#[cfg(test)]
pub(crate) use glob::glob_match;
pub(super) use words::{assignment, raw_words};

use crate::arch::Arch;
use crate::facts::env::{Env, Indexed, Value, Var};
use crate::tree::FileTree;
use condition::Tri;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use words::{heredoc_marker, statements};

/// How many paths a glob or a `find` may produce before memlint stops looking.
const MAX_MATCHES: usize = 64;

/// The most of a script's text a setting keeps as written, or quotes in a why: a line of 64 KiB
/// holding 16,000 assignments would otherwise be kept 16,000 times.
pub(crate) const MAX_QUOTED: usize = 240;

/// How deeply expansions may nest (`$(echo ${A:-$(…)})`) before a value is undecided: a
/// script from an image may nest them thousands deep.
const MAX_NESTING: u32 = 8;

/// How many compound commands may be open at once before the rest of the script is left
/// unread.
const MAX_FRAMES: usize = 256;

/// What the script is read against.
pub(crate) struct Context<'a> {
    pub(crate) tree: &'a FileTree,
    /// The image's architecture, for `uname -m`.
    pub(crate) arch: Option<Arch>,
    /// The working folder, for relative paths.
    pub(crate) working_dir: &'a str,
    /// What the image's searches may still cost, shared by its containers.
    pub(crate) image: &'a ImageBudget,
    /// What this container's scripts may still assign and expand.
    pub(crate) budget: &'a Budget,
}

/// At most [`MAX_QUOTED`] bytes of `s`, cut at a character boundary with `…`.
pub(crate) fn excerpt(s: &str) -> Cow<'_, str> {
    if s.len() <= MAX_QUOTED {
        return Cow::Borrowed(s);
    }
    let mut end = MAX_QUOTED;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &s[..end]))
}

/// A value with its why [`bounded`].
fn bounded_value(value: Value) -> Value {
    match value {
        Value::Undecided { why, if_set } => Value::Undecided {
            why: bounded(why),
            if_set,
        },
        v => v,
    }
}

/// A shell variable's name: what `unset`, `export NAME` and `env -u` may change.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A why as kept with a setting: at most a few excerpts long, however deeply undecided values
/// refer to each other (`B=$A`, `C=$B`, … would otherwise nest every why in the next).
fn bounded(why: String) -> String {
    const MAX_WHY: usize = 4 * MAX_QUOTED;
    if why.len() <= MAX_WHY {
        return why;
    }
    let mut end = MAX_WHY;
    while !why.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &why[..end])
}

/// `uname -m` inside a container of this architecture, where one name holds for every host:
/// 32-bit ARM reports `armv7l`, `armv6l` or `armv8l` depending on the host, so it is not known.
pub(crate) fn uname_machine(arch: Arch) -> Option<&'static str> {
    Some(match arch {
        Arch::Amd64 => "x86_64",
        Arch::Arm64 => "aarch64",
        Arch::I386 => "i686",
        Arch::Ppc64le => "ppc64le",
        Arch::S390x => "s390x",
        Arch::Riscv64 => "riscv64",
        Arch::Mips64le => "mips64",
        Arch::Loong64 => "loongarch64",
        Arch::Arm => return None,
    })
}

/// An open compound command.
enum Frame {
    If {
        /// Whether the current branch runs.
        state: Tri,
        /// Whether an earlier branch ran.
        taken: Tri,
        /// The test, as written, and its line.
        test: String,
        line: u32,
    },
    /// A loop, a `case` or a function body: whether and how often it runs is not known.
    Opaque {
        what: String,
        line: u32,
        closer: &'static str,
    },
    /// `{ …; }`: runs in the script's own shell.
    Group,
}

/// A shell variable of the script.
#[derive(Clone)]
struct ShellVar {
    value: Value,
    line: u32,
    text: Arc<str>,
}

struct State<'a> {
    script: Arc<str>,
    /// The environment the script starts with, by name.
    env: Indexed<'a>,
    cx: &'a Context<'a>,
    vars: BTreeMap<String, ShellVar>,
    exported: BTreeSet<String>,
    allexport: bool,
    exports: Vec<Var>,
    frames: Vec<Frame>,
    /// Expansions under way (see [`MAX_NESTING`]).
    nesting: std::cell::Cell<u32>,
    /// A function's header was read without its `{`: the next `{` opens its body.
    function_header: bool,
}

type Why = String;

/// Runs `text` (the script at `script`) up to its line `last` (from 0) against `env` (what
/// the process starts with) and the image: what it exported, in order, each with its line.
pub(crate) fn run(text: &str, last: usize, script: &str, env: &Env, cx: &Context) -> Vec<Var> {
    let mut st = State {
        script: Arc::from(script),
        env: env.indexed(),
        cx,
        vars: BTreeMap::new(),
        exported: BTreeSet::new(),
        allexport: false,
        exports: Vec::new(),
        frames: Vec::new(),
        nesting: std::cell::Cell::new(0),
        function_header: false,
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    // Once the container's budget is spent nothing more is kept: the rest is not read.
    while i <= last && i < lines.len() && !cx.budget.spent.get() {
        // Join continued lines.
        let first = i;
        let mut logical = lines[i].to_string();
        while logical.ends_with('\\') && i + 1 < lines.len() {
            logical.pop();
            i += 1;
            logical.push_str(lines[i]);
        }
        i += 1;
        let line_no = first as u32 + 1;
        // The line as written, once for all the settings it makes.
        let text: Arc<str> = Arc::from(excerpt(lines[first].trim()));
        let mut heredoc: Option<(String, bool)> = None;
        for stmt in statements(&logical) {
            if heredoc.is_none() {
                heredoc = heredoc_marker(&stmt);
            }
            st.statement(&stmt, line_no, &text);
        }
        if let Some((word, strip_tabs)) = heredoc {
            while i < lines.len() {
                let l = if strip_tabs {
                    lines[i].trim_start_matches('\t')
                } else {
                    lines[i]
                };
                i += 1;
                if l == word {
                    break;
                }
            }
        }
    }
    st.exports
}
