//! What an entrypoint shell script exports on its way to the final `exec`: `export NAME=VALUE`,
//! `export NAME` after an assignment, an assignment to a variable already in the environment,
//! `set -a`, `unset`, `NAME=VALUE exec …` and `exec env NAME=VALUE prog`, read statically.
//!
//! The script is not run. Lines are read in order up to the final `exec`; `if`/`elif`/`else`
//! branches are followed when their test can be decided against the image (`[ -z "${X+x}" ]`,
//! `[ -n "$X" ]`, `[ -f PATH ]` with globs expanded in the image's tree, string comparisons of
//! known values, `&&`/`||` chains of those). Values are expanded as the shell would: quotes,
//! `$NAME`, `${NAME}`, `${NAME+x}`, `${NAME:-word}`, and the command substitutions the Rails
//! templates use: `$(echo GLOB)`, `$(find DIR -name NAME -print -quit)` and `$(uname -m)` (the
//! image's architecture). Anything else (another command's output, a test of a run-time value,
//! an export inside a loop, a `case` or a function) makes the setting undecided, with the line
//! as evidence: never dropped, never guessed.

use super::env::{Env, Indexed, Origin, Value, Var};
use crate::arch::Arch;
use crate::tree::{FileTree, NodeKind};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// How many paths a glob or a `find` may produce before memlint stops looking.
const MAX_MATCHES: usize = 64;
/// How many tree nodes the `find`s and globs of one image's scripts may visit, all calls of all
/// scripts of all its containers together: a budget per call let 2,400 calls over 60,000 files
/// take minutes. Each distinct search is made once per image ([`ImageBudget`] keeps its result),
/// so the Rails templates' one `find /usr/lib` costs once however many containers run it.
pub const MAX_SEARCH_NODES: usize = 200_000;
/// execve(2) refuses an argument or environment string (`NAME=VALUE`) longer than
/// MAX_ARG_STRLEN, 32 pages (128 KiB) on Linux: no program gets a longer value, so a value a
/// script builds past it is undecided rather than followed (`A="$A$A"` forty times would be a
/// terabyte).
pub const MAX_ARG_STRLEN: usize = 128 << 10;
/// execve(2) refuses argv and envp together past ARG_MAX, a quarter of the stack limit: 2 MiB
/// under the usual 8 MiB `ulimit -s`. The values one container's scripts assign, with the
/// environment they start with, past it are undecided: no container starts with more.
pub const MAX_CONTAINER_ENV: usize = 2 << 20;
/// The settings (assignments, exports, unsets) one container's scripts may make, all together:
/// a real entrypoint makes tens; a script of 64 KiB of `A=;` makes 16,000, eight of them in a
/// chain 130,000, each a record in the report.
pub const MAX_SETTINGS: usize = 2048;
/// The text the expansions of one container's scripts may produce, all together (the words of
/// tests and commands as well as the values assigned): eight ARG_MAX. Past it, what is left to
/// expand is undecided; this bounds the time a script of 64 KiB of `$A$A…` can take.
pub const MAX_EXPANDED: usize = 16 << 20;
/// The most of a script's text a setting keeps as written, or quotes in a why: a line of 64 KiB
/// holding 16,000 assignments would otherwise be kept 16,000 times.
pub const MAX_QUOTED: usize = 240;
/// How deeply expansions may nest (`$(echo ${A:-$(…)})`) before a value is undecided: a
/// script from an image may nest them thousands deep.
const MAX_NESTING: u32 = 8;
/// How many compound commands may be open at once before the rest of the script is left
/// unread.
const MAX_FRAMES: usize = 256;

/// What the script is read against.
pub struct Context<'a> {
    pub tree: &'a FileTree,
    /// The image's architecture, for `uname -m`.
    pub arch: Option<Arch>,
    /// The working folder, for relative paths.
    pub working_dir: &'a str,
    /// What the image's searches may still cost, shared by its containers.
    pub image: &'a ImageBudget,
    /// What this container's scripts may still assign and expand.
    pub budget: &'a Budget,
}

/// What searching one image may cost, shared by every script of every container that runs it
/// (see [`MAX_SEARCH_NODES`]), and the searches made so far.
pub struct ImageBudget {
    search_left: Cell<usize>,
    /// `find` and glob results by what was searched.
    searches: RefCell<HashMap<String, Result<Vec<String>, Why>>>,
}

impl Default for ImageBudget {
    fn default() -> Self {
        ImageBudget {
            search_left: Cell::new(MAX_SEARCH_NODES),
            searches: RefCell::new(HashMap::new()),
        }
    }
}

impl ImageBudget {
    /// Takes one visited tree node from the budget; false once it is spent.
    fn visit(&self) -> bool {
        let left = self.search_left.get();
        self.search_left.set(left.saturating_sub(1));
        left > 0
    }

    /// The result of the search `key`, made once.
    fn search(
        &self,
        key: String,
        run: impl FnOnce() -> Result<Vec<String>, Why>,
    ) -> Result<Vec<String>, Why> {
        if let Some(found) = self.searches.borrow().get(&key) {
            return found.clone();
        }
        let found = run();
        self.searches.borrow_mut().insert(key, found.clone());
        found
    }
}

/// What one container's scripts may still assign ([`MAX_CONTAINER_ENV`]) and expand
/// ([`MAX_EXPANDED`]), all scripts of its entrypoint together.
pub struct Budget {
    assign_left: Cell<usize>,
    settings_left: Cell<usize>,
    expand_left: Cell<usize>,
    /// A setting was refused: none is kept from then on.
    spent: Cell<bool>,
}

impl Budget {
    /// The budget of a container whose scripts start with `env`: what it already holds counts
    /// against ARG_MAX.
    pub fn new(env: &Env) -> Budget {
        let held: usize = env.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
        Budget {
            assign_left: Cell::new(MAX_CONTAINER_ENV.saturating_sub(held)),
            settings_left: Cell::new(MAX_SETTINGS),
            expand_left: Cell::new(MAX_EXPANDED),
            spent: Cell::new(false),
        }
    }

    /// Takes `n` bytes from `cell`; false (and nothing taken) when fewer are left.
    fn take(cell: &Cell<usize>, n: usize) -> bool {
        let left = cell.get();
        if n > left {
            return false;
        }
        cell.set(left - n);
        true
    }
}

/// At most [`MAX_QUOTED`] bytes of `s`, cut at a character boundary with `…`.
pub fn excerpt(s: &str) -> Cow<'_, str> {
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
pub fn uname_machine(arch: Arch) -> Option<&'static str> {
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

/// Three-valued truth: a test memlint can or cannot decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tri {
    True,
    False,
    Unknown,
}

impl Tri {
    fn from(b: bool) -> Tri {
        if b {
            Tri::True
        } else {
            Tri::False
        }
    }
    fn not(self) -> Tri {
        match self {
            Tri::True => Tri::False,
            Tri::False => Tri::True,
            Tri::Unknown => Tri::Unknown,
        }
    }
    fn and(self, o: Tri) -> Tri {
        match (self, o) {
            (Tri::False, _) | (_, Tri::False) => Tri::False,
            (Tri::True, Tri::True) => Tri::True,
            _ => Tri::Unknown,
        }
    }
    fn or(self, o: Tri) -> Tri {
        self.not().and(o.not()).not()
    }
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

/// The command of an `exec` line (`exec prog …`, `NAME=VALUE exec prog …`), from `exec` on.
pub fn exec_command(line: &str) -> Option<&str> {
    let t = line.trim();
    if t.starts_with('#') {
        return None;
    }
    if !t.contains("exec ") {
        return None;
    }
    // One split of the line: each word as written is the prefix of what is left.
    let mut rest = t;
    for word in raw_words(t) {
        if let Some(cmd) = rest.strip_prefix("exec ") {
            return Some(cmd);
        }
        assignment(&word)?;
        rest = rest.get(word.len()..)?.trim_start();
    }
    None
}

/// The line index (from 0) of the script's final `exec`, as the entrypoint walk takes it.
pub fn final_exec_line(text: &str) -> Option<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| exec_command(l).is_some())
        .map(|(i, _)| i)
        .last()
}

/// What `text` (the script at `script`) exports before its final `exec`, in order, read
/// against `env` (what the process starts with) and the image.
pub fn exports(text: &str, script: &str, env: &Env, cx: &Context) -> Vec<Var> {
    let Some(last) = final_exec_line(text) else {
        return Vec::new();
    };
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

/// The end word of a here-document the statement opens (`<<EOF`, `<<-'EOF'`), and whether
/// leading tabs are stripped.
fn heredoc_marker(stmt: &str) -> Option<(String, bool)> {
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
fn statements(line: &str) -> Vec<String> {
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
fn and_or(stmt: &str) -> Vec<(Option<&'static str>, String)> {
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
fn raw_words(s: &str) -> Vec<String> {
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
fn assignment(word: &str) -> Option<(&str, &str)> {
    let (name, value) = word.split_once('=')?;
    let mut chars = name.chars();
    let first = chars.next()?;
    ((first.is_ascii_alphabetic() || first == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then_some((name, value))
}

/// An expansion's result: the text, and whether an unquoted glob character or expansion is in
/// it (for pathname expansion and field splitting).
#[derive(Default)]
struct Expanded {
    text: String,
    glob: bool,
    split: bool,
}

type Why = String;

impl State<'_> {
    /// What a variable holds at this point: the script's own, else the environment's.
    fn lookup(&self, name: &str) -> Result<Option<String>, Why> {
        if let Some(v) = self.vars.get(name) {
            return match &v.value {
                Value::Set(s) => Ok(Some(s.clone())),
                Value::Unset => Ok(None),
                Value::Undecided { why, .. } => Err(format!("${name} is undecided ({why})")),
            };
        }
        if let Some(v) = self.env.undecided(name) {
            return Err(format!(
                "${name} is set by `{}` ({})",
                excerpt(v.text.trim()),
                v.describe_origin()
            ));
        }
        if let Some(v) = self.env.get(name) {
            return Ok(Some(v.to_string()));
        }
        match name {
            "PWD" => Ok(Some(self.cx.working_dir.to_string())),
            // Set by the runtime or the shell when the container starts.
            "HOME" | "HOSTNAME" | "USER" | "UID" | "EUID" | "PPID" | "RANDOM" | "SECONDS" | "LINENO"
            | "SHLVL" | "OLDPWD" => Err(format!("${name} is only known when the container runs")),
            // Positional and special parameters: the container's arguments.
            n if n.chars().all(|c| c.is_ascii_digit())
                || matches!(n, "@" | "*" | "#" | "?" | "$" | "!" | "-") =>
            {
                Err(format!("${name} is only known when the container runs"))
            }
            // Not in the image's environment and not set by the script: unset, unless the
            // container is started with it (which memlint cannot see).
            _ => Ok(None),
        }
    }

    /// Expands one word as written.
    fn expand(&self, raw: &str) -> Result<Expanded, Why> {
        let depth = self.nesting.get();
        if depth >= MAX_NESTING {
            return Err(format!(
                "`{}` nests expansions deeper than memlint follows",
                excerpt(raw)
            ));
        }
        self.nesting.set(depth + 1);
        let out = self.expand_inner(raw);
        self.nesting.set(depth);
        let out = out?;
        if !Budget::take(&self.cx.budget.expand_left, out.text.len()) {
            return Err(format!(
                "`{}` is expanded after the container's scripts have expanded {} MiB of text, more than memlint follows",
                excerpt(raw),
                MAX_EXPANDED >> 20
            ));
        }
        Ok(out)
    }

    fn expand_inner(&self, raw: &str) -> Result<Expanded, Why> {
        let chars: Vec<char> = raw.chars().collect();
        let mut out = Expanded::default();
        let (mut sq, mut dq) = (false, false);
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            match c {
                '\'' if !dq => sq = !sq,
                '"' if !sq => dq = !dq,
                '\\' if !sq => {
                    if let Some(&n) = chars.get(i + 1) {
                        if !dq || matches!(n, '$' | '`' | '"' | '\\') {
                            out.text.push(n);
                        } else {
                            out.text.push('\\');
                            out.text.push(n);
                        }
                        i += 1;
                    }
                }
                '`' if !sq => {
                    return Err(format!(
                        "`{}` runs a command memlint does not model",
                        excerpt(raw)
                    ))
                }
                '$' if !sq => {
                    let (text, used) = self.dollar(&chars[i + 1..], raw)?;
                    if !dq {
                        out.split = true;
                        if text.contains(['*', '?', '[']) {
                            out.glob = true;
                        }
                    }
                    out.text.push_str(&text);
                    i += used;
                    if out.text.len() > MAX_ARG_STRLEN {
                        return Err(format!(
                            "`{}` expands past {} KiB, the longest value execve passes to a program (MAX_ARG_STRLEN)",
                            excerpt(raw),
                            MAX_ARG_STRLEN >> 10
                        ));
                    }
                }
                '*' | '?' | '[' if !sq && !dq => {
                    out.glob = true;
                    out.text.push(c);
                }
                c => out.text.push(c),
            }
            i += 1;
        }
        Ok(out)
    }

    /// Expands what follows a `$`: the text and how many characters it used.
    fn dollar(&self, rest: &[char], raw: &str) -> Result<(String, usize), Why> {
        match rest.first() {
            Some('(') if rest.get(1) == Some(&'(') => Err(format!(
                "`{}` is arithmetic memlint does not work out",
                excerpt(raw)
            )),
            Some('(') => {
                let end = matching(rest, '(', ')')
                    .ok_or_else(|| format!("`{}` has no closing parenthesis", excerpt(raw)))?;
                let inner: String = rest[1..end].iter().collect();
                Ok((self.substitute(&inner)?, end + 1))
            }
            Some('{') => {
                let end = matching(rest, '{', '}')
                    .ok_or_else(|| format!("`{}` has no closing brace", excerpt(raw)))?;
                let inner: String = rest[1..end].iter().collect();
                Ok((self.parameter(&inner)?, end + 1))
            }
            Some(&c) if c.is_ascii_alphabetic() || c == '_' => {
                let name: String = rest
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
                    .collect();
                let n = name.chars().count();
                Ok((self.lookup(&name)?.unwrap_or_default(), n))
            }
            Some(&c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                self.lookup(&c.to_string()).map(|v| (v.unwrap_or_default(), 1))
            }
            _ => Ok(("$".to_string(), 0)),
        }
    }

    /// `${NAME}`, `${NAME+word}`, `${NAME-word}`, `${NAME:-word}`, `${NAME:+word}`.
    fn parameter(&self, inner: &str) -> Result<String, Why> {
        let name: String = inner
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            return Err(format!(
                "`${{{}}}` is only known when the container runs",
                excerpt(inner)
            ));
        }
        let op = &inner[name.len()..];
        let value = self.lookup(&name)?;
        let word = |w: &str| self.expand(w).map(|e| e.text);
        match op {
            "" => Ok(value.unwrap_or_default()),
            _ if op.starts_with(":-") => match value.filter(|v| !v.is_empty()) {
                Some(v) => Ok(v),
                None => word(&op[2..]),
            },
            _ if op.starts_with(":+") => match value.filter(|v| !v.is_empty()) {
                Some(_) => word(&op[2..]),
                None => Ok(String::new()),
            },
            _ if op.starts_with('-') => match value {
                Some(v) => Ok(v),
                None => word(&op[1..]),
            },
            _ if op.starts_with('+') => match value {
                Some(_) => word(&op[1..]),
                None => Ok(String::new()),
            },
            _ => Err(format!(
                "`${{{inner}}}` is an expansion memlint does not work out"
            )),
        }
    }

    /// Expands a command's words into fields, with pathname expansion against the image.
    fn fields(&self, raw: &[String]) -> Result<Vec<String>, Why> {
        let mut out = Vec::new();
        for w in raw {
            let e = self.expand(w)?;
            let parts: Vec<String> = if e.split {
                e.text.split_whitespace().map(str::to_string).collect()
            } else {
                vec![e.text]
            };
            for p in parts {
                if e.glob && p.contains(['*', '?', '[']) {
                    let matches = self.glob(&p)?;
                    if matches.is_empty() {
                        out.push(p);
                    } else {
                        out.extend(matches);
                    }
                } else {
                    out.push(p);
                }
            }
        }
        Ok(out)
    }

    /// `$(…)`: the commands the Rails templates use, else undecided.
    fn substitute(&self, cmd: &str) -> Result<String, Why> {
        let raw = raw_words(cmd);
        if cmd.contains(['|', ';', '&', '>', '<']) && !cmd.contains("$(") {
            return Err(format!(
                "`$({})` runs commands memlint does not model",
                excerpt(cmd)
            ));
        }
        let words = self.fields(&raw)?;
        let out = match words.first().map(String::as_str) {
            Some("echo") if words.get(1).is_none_or(|w| !w.starts_with('-')) => words[1..].join(" "),
            Some("uname") if words.len() == 2 && words[1] == "-m" => self
                .cx
                .arch
                .and_then(uname_machine)
                .map(str::to_string)
                .ok_or_else(|| {
                    format!(
                        "`$({})` depends on the host this image's architecture runs on",
                        excerpt(cmd)
                    )
                })?,
            Some("find") => self.find(&words[1..], cmd)?,
            _ => {
                return Err(format!(
                    "`$({})` runs a command memlint does not model",
                    excerpt(cmd)
                ))
            }
        };
        Ok(out.trim_end_matches('\n').to_string())
    }

    /// `find DIR… -name PATTERN [-type f|l|d] [-print] [-quit]`.
    fn find(&self, args: &[String], cmd: &str) -> Result<String, Why> {
        let unmodelled = || {
            format!(
                "`$({})` uses a find expression memlint does not model",
                excerpt(cmd)
            )
        };
        let dirs: Vec<&String> = args.iter().take_while(|a| !a.starts_with('-')).collect();
        let mut name = None;
        let mut kind = None;
        let mut quit = false;
        let mut rest = args[dirs.len()..].iter();
        while let Some(a) = rest.next() {
            match a.as_str() {
                "-name" => name = Some(rest.next().ok_or_else(unmodelled)?.clone()),
                "-type" => kind = Some(rest.next().ok_or_else(unmodelled)?.clone()),
                "-print" => {}
                "-quit" => quit = true,
                _ => return Err(unmodelled()),
            }
        }
        let name = name.ok_or_else(unmodelled)?;
        if kind.as_deref().is_some_and(|k| !matches!(k, "f" | "l" | "d")) {
            return Err(unmodelled());
        }
        let dirs: Vec<String> = if dirs.is_empty() {
            vec![".".to_string()]
        } else {
            dirs.into_iter().map(|d| self.absolute(d)).collect()
        };
        // The same search gives the same files: made once per image.
        let key = format!(
            "find\0{}\0{name}\0{}",
            dirs.join("\0"),
            kind.as_deref().unwrap_or("")
        );
        let mut found = self.cx.image.search(key, || {
            let tree = self.cx.tree;
            let mut found = Vec::new();
            for start in &dirs {
                let Some(id) = tree.lookup(start).ok().flatten() else {
                    continue;
                };
                let mut stack = vec![(id, start.trim_end_matches('/').to_string())];
                let spent = || {
                    format!(
                        "`$({})` searches more of the image than memlint follows ({MAX_SEARCH_NODES} entries for all the image's searches)",
                        excerpt(cmd)
                    )
                };
                while let Some((id, path)) = stack.pop() {
                    if found.len() > MAX_MATCHES {
                        return Err(format!(
                            "`$({})` finds more than {MAX_MATCHES} files",
                            excerpt(cmd)
                        ));
                    }
                    if let NodeKind::Dir(children) = &tree.node(id).kind {
                        let children: Vec<_> = children.iter().collect();
                        for (n, &child) in children.into_iter().rev() {
                            // Every entry tried counts, files as well as folders.
                            if !self.cx.image.visit() {
                                return Err(spent());
                            }
                            let node = tree.node(child);
                            let kind_ok = match kind.as_deref() {
                                Some("f") => matches!(node.kind, NodeKind::File),
                                Some("l") => matches!(node.kind, NodeKind::Symlink(_)),
                                Some("d") => node.is_dir(),
                                _ => true,
                            };
                            let matched = kind_ok && glob_match(&name, n);
                            if matched || node.is_dir() {
                                let child_path = format!("{path}/{n}");
                                if matched {
                                    found.push(child_path.clone());
                                }
                                if node.is_dir() {
                                    stack.push((child, child_path));
                                }
                            }
                        }
                    }
                }
            }
            found.sort();
            Ok(found)
        })?;
        match found.len() {
            0 => Ok(String::new()),
            1 => Ok(found.remove(0)),
            _ if !quit => Ok(found.join("\n")),
            n => Err(format!(
                "`$({cmd})` prints the first of {n} files ({}), and which comes first depends on the order of the folder's entries",
                found.join(", ")
            )),
        }
    }

    fn absolute(&self, path: &str) -> String {
        if path.starts_with('/') {
            path.to_string()
        } else {
            let p = path.trim_start_matches("./");
            format!(
                "{}/{}",
                self.cx.working_dir.trim_end_matches('/'),
                if p == "." { "" } else { p }
            )
        }
    }

    /// The image paths a glob pattern matches, sorted; empty when none. Each folder entry
    /// tried counts against the image's search budget ([`MAX_SEARCH_NODES`]).
    fn glob(&self, pattern: &str) -> Result<Vec<String>, Why> {
        let abs = self.absolute(pattern);
        let key = format!("glob\0{abs}");
        self.cx.image.search(key, || {
            let tree = self.cx.tree;
            let mut found = vec![String::new()];
            for comp in abs.split('/').filter(|c| !c.is_empty()) {
                let mut next = Vec::new();
                for base in &found {
                    let dir = if base.is_empty() { "/" } else { base.as_str() };
                    if comp.contains(['*', '?', '[']) {
                        let Some(id) = tree.lookup(dir).ok().flatten() else {
                            continue;
                        };
                        if let NodeKind::Dir(children) = &tree.node(id).kind {
                            for n in children.keys() {
                                if !self.cx.image.visit() {
                                    return Err(format!(
                                        "`{}` searches more of the image than memlint follows ({MAX_SEARCH_NODES} entries for all the image's searches)",
                                        excerpt(pattern)
                                    ));
                                }
                                if !n.starts_with('.') && glob_match(comp, n) {
                                    next.push(format!("{base}/{n}"));
                                }
                            }
                        }
                    } else {
                        let p = format!("{base}/{comp}");
                        if tree.lookup(&p).ok().flatten().is_some() {
                            next.push(p);
                        }
                    }
                    if next.len() > MAX_MATCHES {
                        break;
                    }
                }
                found = next;
                if found.is_empty() {
                    break;
                }
            }
            found.sort();
            Ok(found)
        })
    }

    /// Decides a test: `[ … ]`, `[[ … ]]`, `test …`, `true`, `false`, `! cmd`.
    fn test(&self, part: &str) -> Tri {
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

    fn test_words(&self, raw: &[String]) -> Tri {
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

    fn unary_or_binary(&self, w: &[&str], globbing: bool) -> Tri {
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

    /// Whether the statement runs here, from the open compound commands: the conditions in
    /// words when that cannot be decided.
    fn reached(&self) -> Result<bool, Why> {
        let mut why = None;
        for f in &self.frames {
            match f {
                Frame::If {
                    state: Tri::False, ..
                } => return Ok(false),
                Frame::If {
                    state: Tri::Unknown,
                    test,
                    line,
                    ..
                } => {
                    why.get_or_insert_with(|| {
                        format!(
                            "set only when `{}` (line {line}) holds, which memlint cannot decide",
                            excerpt(test)
                        )
                    });
                }
                Frame::Opaque { what, line, .. } => {
                    why.get_or_insert_with(|| format!("set inside {what} (line {line})"));
                }
                _ => {}
            }
        }
        match why {
            Some(w) => Err(w),
            None => Ok(true),
        }
    }

    /// One statement; a keyword that leads another command (`then cmd`, `else cmd`,
    /// `do cmd`, `{ cmd`) hands the command back to be read in turn, so that a line of
    /// thousands of them is read in a loop, not by recursion.
    fn statement(&mut self, stmt: &str, line: u32, text: &Arc<str>) {
        let mut next = Some(stmt.to_string());
        while let Some(s) = next.take() {
            if self.frames.len() > MAX_FRAMES {
                return;
            }
            next = self.statement_once(&s, line, text);
        }
    }

    fn statement_once(&mut self, stmt: &str, line: u32, text: &Arc<str>) -> Option<String> {
        // The keywords are plain words: no need to split the whole statement to find them.
        let mut plain = stmt.split_whitespace();
        let first = plain.next()?;
        let second = plain.next();
        let rest_after = |kw: &str| stmt.trim_start()[kw.len()..].trim().to_string();
        match first {
            "if" => {
                let test = rest_after("if");
                let state = self.condition(&test);
                self.frames.push(Frame::If {
                    state,
                    taken: state,
                    test: excerpt(&test).into_owned(),
                    line,
                });
            }
            "elif" => {
                let test = rest_after("elif");
                let c = self.condition(&test);
                if let Some(Frame::If {
                    state,
                    taken,
                    test: t,
                    line: l,
                }) = self.frames.last_mut()
                {
                    *state = taken.not().and(c);
                    *taken = taken.or(c);
                    *t = excerpt(&test).into_owned();
                    *l = line;
                }
            }
            "else" => {
                if let Some(Frame::If {
                    state, taken, test, ..
                }) = self.frames.last_mut()
                {
                    *state = taken.not();
                    *taken = Tri::True;
                    *test = excerpt(&format!("not ({test})")).into_owned();
                }
                let rest = rest_after("else");
                if !rest.is_empty() {
                    return Some(rest);
                }
            }
            "then" | "do" => {
                let rest = rest_after(first);
                if !rest.is_empty() {
                    return Some(rest);
                }
            }
            "fi" | "done" | "esac" | "}" => {
                self.frames.pop();
            }
            "case" => self.frames.push(Frame::Opaque {
                what: "a `case`".into(),
                line,
                closer: "esac",
            }),
            "for" | "while" | "until" | "select" => {
                let what = format!("a `{first}` loop");
                self.frames.push(Frame::Opaque {
                    what,
                    line,
                    closer: "done",
                });
                if let Some(at) = stmt.find(" do ") {
                    return Some(stmt[at + 1..].to_string());
                }
            }
            "{" if self.function_header => {
                self.function_header = false;
            }
            "{" => {
                self.frames.push(Frame::Group);
                let rest = rest_after("{");
                if !rest.is_empty() {
                    return Some(rest);
                }
            }
            f if f == "function" || f.ends_with("()") || second.is_some_and(|w| w.starts_with("()")) => {
                let words = raw_words(stmt);
                let name = if f == "function" { second.unwrap_or("") } else { f };
                self.frames.push(Frame::Opaque {
                    what: format!("function {}", name.trim_end_matches("()")),
                    line,
                    closer: "}",
                });
                self.function_header = !words.iter().any(|w| w == "{");
            }
            _ if self.in_case_arm() => {
                // `pattern) commands`: the commands after the pattern.
                if let Some(at) = stmt.find(')') {
                    let rest = stmt[at + 1..].trim();
                    if !rest.is_empty() && !stmt[..at].contains(['"', '\'', '$']) {
                        self.simple_chain(rest, line, text);
                        return None;
                    }
                }
                self.simple_chain(stmt, line, text);
            }
            _ => self.simple_chain(stmt, line, text),
        }
        None
    }

    fn in_case_arm(&self) -> bool {
        matches!(self.frames.last(), Some(Frame::Opaque { closer: "esac", .. }))
    }

    /// An `if` test: a chain of tests with `&&` and `||`.
    fn condition(&self, test: &str) -> Tri {
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

    /// A statement of simple commands joined by `&&`/`||`: each runs when the chain so far
    /// says so.
    fn simple_chain(&mut self, stmt: &str, line: u32, text: &Arc<str>) {
        let parts = and_or(stmt);
        if parts.len() == 1 {
            self.simple(stmt, line, text, None);
            return;
        }
        let mut status = Tri::True;
        for (op, part) in parts {
            let reach = match op {
                None => Tri::True,
                Some("&&") => status,
                _ => status.not(),
            };
            if reach == Tri::False {
                continue;
            }
            let cond = (reach == Tri::Unknown).then(|| format!("set only when the commands before it on line {line} succeed or fail as `{}` needs, which memlint cannot decide", excerpt(stmt.trim())));
            let t = self.simple(&part, line, text, cond);
            status = if reach == Tri::True { t } else { Tri::Unknown };
        }
    }

    /// One simple command; its exit status when it is a test or an assignment.
    fn simple(&mut self, cmd: &str, line: u32, text: &Arc<str>, cond: Option<String>) -> Tri {
        let words = raw_words(cmd);
        if words.is_empty() || cmd.contains('|') && !cmd.contains("||") {
            return Tri::Unknown;
        }
        // Leading assignments.
        let n_assign = words.iter().take_while(|w| assignment(w).is_some()).count();
        let rest = &words[n_assign..];
        match rest.first().map(String::as_str) {
            None => {
                for w in &words[..n_assign] {
                    if let Some((name, value)) = assignment(w) {
                        let export =
                            self.allexport || self.exported.contains(name) || self.env.var(name).is_some();
                        self.assign(name, value, line, text, export, cond.clone());
                    }
                }
                Tri::True
            }
            Some("exec") => {
                // `NAME=VALUE exec prog`: the variables go to prog.
                for w in &words[..n_assign] {
                    if let Some((name, value)) = assignment(w) {
                        self.assign(name, value, line, text, true, cond.clone());
                    }
                }
                // Init wrappers that run their argument (`exec tini -- env …`,
                // `exec gosu app env …`) pass the environment on.
                let base = |w: &String| w.rsplit('/').next().unwrap_or(w).to_string();
                let mut after: &[String] = &rest[1..];
                loop {
                    match after.first().map(base).as_deref() {
                        Some("tini" | "tini-static" | "dumb-init" | "catatonit" | "docker-init") => {
                            let flags = after[1..].iter().take_while(|w| w.starts_with('-')).count();
                            after = &after[1 + flags..];
                        }
                        Some("gosu" | "su-exec") if after.len() > 2 => after = &after[2..],
                        _ => break,
                    }
                }
                if after.first().map(base).as_deref() == Some("env") {
                    let mut args = after[1..].iter();
                    while let Some(w) = args.next() {
                        if w.as_str() == "-u" {
                            if let Some(name) = args.next() {
                                self.set_var(name, Value::Unset, line, text, true, cond.clone());
                            }
                        } else if w.starts_with('-') && w.as_str() != "-" {
                            continue;
                        } else if let Some((name, value)) = assignment(w) {
                            self.assign(name, value, line, text, true, cond.clone());
                        } else {
                            break;
                        }
                    }
                }
                Tri::Unknown
            }
            Some("export") | Some("declare") | Some("typeset") => {
                let args = &rest[1..];
                if rest[0] != "export" && !args.iter().any(|a| a.starts_with('-') && a.contains('x')) {
                    // declare without -x: local shell variables.
                    for w in args.iter().filter(|a| !a.starts_with('-')) {
                        if let Some((name, value)) = assignment(w) {
                            self.assign(name, value, line, text, false, cond.clone());
                        }
                    }
                    return Tri::True;
                }
                if args.iter().any(|a| a == "-n" || a == "-p" || a == "-f") {
                    return Tri::Unknown;
                }
                for w in args.iter().filter(|a| !a.starts_with('-')) {
                    match assignment(w) {
                        Some((name, value)) => self.assign(name, value, line, text, true, cond.clone()),
                        None => self.export_existing(w, line, text, cond.clone()),
                    }
                }
                Tri::True
            }
            Some("unset") => {
                for name in rest[1..].iter().filter(|a| !a.starts_with('-')) {
                    self.set_var(name, Value::Unset, line, text, true, cond.clone());
                }
                Tri::True
            }
            Some("set") => {
                for a in &rest[1..] {
                    match a.as_str() {
                        "-a" => self.allexport = true,
                        "+a" => self.allexport = false,
                        "--" => break,
                        _ => {}
                    }
                }
                if rest[1..].windows(2).any(|w| w[0] == "-o" && w[1] == "allexport") {
                    self.allexport = true;
                }
                Tri::True
            }
            _ => self.test(cmd),
        }
    }

    /// `NAME=VALUE`: expands the value and records it; exported when `export` says so.
    fn assign(
        &mut self,
        name: &str,
        raw: &str,
        line: u32,
        text: &Arc<str>,
        export: bool,
        cond: Option<String>,
    ) {
        let value = match self.expand(raw) {
            Ok(e) if e.glob && !raw.starts_with(['"', '\'']) && e.text.contains(['*', '?', '[']) => {
                // An unquoted glob in an assignment stays as written in bash, while some
                // shells expand it in `export`.
                Value::Undecided {
                    why: format!(
                        "`{}` holds a glob that some shells expand in `export` and others keep",
                        excerpt(raw)
                    ),
                    if_set: None,
                }
            }
            Ok(e) => Value::Set(e.text),
            Err(why) => Value::Undecided { why, if_set: None },
        };
        self.set_var(name, value, line, text, export, cond);
    }

    fn set_var(
        &mut self,
        name: &str,
        value: Value,
        line: u32,
        text: &Arc<str>,
        export: bool,
        cond: Option<String>,
    ) {
        let reached = match (&cond, self.reached()) {
            (_, Ok(false)) => return,
            (Some(c), _) => Err(c.clone()),
            (None, r) => r,
        };
        let value = match (reached, value) {
            (Ok(_), v) => v,
            (Err(why), Value::Set(s)) => Value::Undecided { why, if_set: Some(s) },
            (Err(why), Value::Unset) => Value::Undecided { why, if_set: None },
            (Err(_), v) => v,
        };
        if !valid_name(name) {
            return;
        }
        let held = match &value {
            Value::Set(s) => s.len(),
            Value::Undecided { if_set: Some(s), .. } => s.len(),
            _ => 0,
        };
        // `NAME=VALUE`, its NUL and its pointer, as execve counts them.
        if !self.take_setting(name.len() + held + 2 + 8, line, text) {
            return;
        }
        let value = bounded_value(value);
        self.vars.insert(
            name.to_string(),
            ShellVar {
                value: value.clone(),
                line,
                text: text.clone(),
            },
        );
        if export || self.exported.contains(name) {
            self.exported.insert(name.to_string());
            self.exports.push(Var {
                name: name.to_string(),
                value,
                origin: Origin::Script {
                    script: self.script.clone(),
                    line,
                },
                text: text.clone(),
            });
        }
    }

    /// Takes one setting of `bytes` from the container's budget ([`MAX_SETTINGS`],
    /// [`MAX_CONTAINER_ENV`]). The first time it is spent, records that every variable is
    /// undecided from this line on (an [`Env`] setting of any name: see [`Var::is_any`]), and
    /// from then on no setting is kept.
    fn take_setting(&mut self, bytes: usize, line: u32, text: &Arc<str>) -> bool {
        let budget = self.cx.budget;
        if budget.spent.get() {
            return false;
        }
        if Budget::take(&budget.settings_left, 1) && Budget::take(&budget.assign_left, bytes) {
            return true;
        }
        budget.spent.set(true);
        self.exports.push(Var {
            name: super::env::ANY.to_string(),
            value: Value::Undecided {
                why: format!(
                    "the container's scripts make more than {MAX_SETTINGS} settings or {} MiB of `NAME=VALUE` by {} line {line} (execve passes at most {} MiB to a program, ARG_MAX), so memlint does not follow them further: any variable may be set from there",
                    MAX_CONTAINER_ENV >> 20,
                    self.script,
                    MAX_CONTAINER_ENV >> 20
                ),
                if_set: None,
            },
            origin: Origin::Script {
                script: self.script.clone(),
                line,
            },
            text: text.clone(),
        });
        false
    }

    /// `export NAME` for a variable the script set before.
    fn export_existing(&mut self, name: &str, line: u32, text: &Arc<str>, cond: Option<String>) {
        match self.vars.get(name).cloned() {
            Some(v) => {
                // The value's own line is where it is written.
                self.exported.insert(name.to_string());
                let value = match (cond.map(Err).unwrap_or_else(|| self.reached()), v.value) {
                    (Ok(false), _) => return,
                    (Err(why), Value::Set(s)) => Value::Undecided { why, if_set: Some(s) },
                    (_, value) => value,
                };
                if !self.take_setting(name.len() + 8, line, text) {
                    return;
                }
                let value = bounded_value(value);
                self.exports.push(Var {
                    name: name.to_string(),
                    value,
                    origin: Origin::Script {
                        script: self.script.clone(),
                        line: v.line,
                    },
                    text: v.text.clone(),
                });
            }
            None => {
                // Exporting a variable the script never set changes nothing the program sees
                // (an environment variable stays as it is; an unset one stays unset).
                let _ = (line, text);
                self.exported.insert(name.to_string());
            }
        }
    }
}

fn is_unary(op: &str) -> bool {
    matches!(
        op,
        "-f" | "-e" | "-r" | "-d" | "-s" | "-x" | "-L" | "-h" | "-z" | "-n"
    )
}

/// The index of the bracket that closes the one at `s[0]`, skipping quoted text.
fn matching(s: &[char], open: char, close: char) -> Option<usize> {
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

/// One piece of a shell pattern.
enum Token {
    Star,
    Any,
    Class { neg: bool, set: Vec<char> },
    Lit(char),
}

fn tokens(pattern: &str) -> Vec<Token> {
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

fn token_matches(t: &Token, c: char) -> bool {
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
pub fn glob_match(pattern: &str, name: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{EntryKind, LayerEntry};

    fn tree(files: &[&str]) -> FileTree {
        let mut entries: Vec<LayerEntry> = files
            .iter()
            .map(|f| LayerEntry::new(f.trim_start_matches('/'), EntryKind::File).with_text("x"))
            .collect();
        entries.push(LayerEntry::new(
            "usr/local/lib/libjemalloc.so",
            EntryKind::Symlink("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2".into()),
        ));
        FileTree::from_entries(entries).unwrap()
    }

    const JEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";

    fn run(script: &str, env: &[&str], files: &[&str], arch: Option<Arch>) -> Env {
        let t = tree(files);
        let env = Env::from_pairs(env.iter().copied());
        let image = ImageBudget::default();
        let budget = Budget::new(&env);
        let cx = Context {
            tree: &t,
            arch,
            working_dir: "/rails",
            image: &image,
            budget: &budget,
        };
        let exported = exports(script, "/rails/bin/docker-entrypoint", &env, &cx);
        env.overlay(&exported)
    }

    fn line_of(env: &Env, key: &str) -> Option<u32> {
        env.var(key).and_then(Var::script).map(|(_, l)| l)
    }

    /// Rails 7.2's `bin/docker-entrypoint` (railties `docker-entrypoint.tt`).
    const RAILS_7_2: &str = r#"#!/bin/bash -e

# Enable jemalloc for reduced memory usage and latency.
if [ -z "${LD_PRELOAD+x}" ] && [ -f /usr/lib/*/libjemalloc.so.2 ]; then
  export LD_PRELOAD="$(echo /usr/lib/*/libjemalloc.so.2)"
fi

# If running the rails server then create or migrate existing database
if [ "${1}" == "./bin/rails" ] && [ "${2}" == "server" ]; then
  ./bin/rails db:prepare
fi

exec "${@}"
"#;

    /// Rails 8.0's.
    const RAILS_8_0: &str = r#"#!/bin/bash -e

# Enable jemalloc for reduced memory usage and latency.
if [ -z "${LD_PRELOAD+x}" ]; then
    LD_PRELOAD=$(find /usr/lib -name libjemalloc.so.2 -print -quit)
    export LD_PRELOAD
fi

# If running the rails server then create or migrate existing database
if [ "${@: -2:1}" == "./bin/rails" ] && [ "${@: -1:1}" == "server" ]; then
  ./bin/rails db:prepare
fi

exec "${@}"
"#;

    #[test]
    fn rails_7_2_guard_form() {
        let e = run(RAILS_7_2, &[], &[JEMALLOC], None);
        assert_eq!(e.get("LD_PRELOAD"), Some(JEMALLOC));
        assert_eq!(line_of(&e, "LD_PRELOAD"), Some(5));
        // No jemalloc: `[ -f ]` on the unmatched pattern is false, nothing is exported.
        assert!(run(RAILS_7_2, &[], &[], None).var("LD_PRELOAD").is_none());
        // The image already sets LD_PRELOAD: the guard keeps it.
        let e = run(RAILS_7_2, &["LD_PRELOAD=/x.so"], &[JEMALLOC], None);
        assert_eq!(e.get("LD_PRELOAD"), Some("/x.so"));
        assert!(!e.from_script("LD_PRELOAD"));
        // Two architectures' jemalloc: `[ -f a b ]` is an error, so false.
        let both = [JEMALLOC, "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2"];
        assert!(run(RAILS_7_2, &[], &both, None).var("LD_PRELOAD").is_none());
    }

    #[test]
    fn rails_8_0_find_form() {
        let e = run(RAILS_8_0, &[], &[JEMALLOC], None);
        assert_eq!(e.get("LD_PRELOAD"), Some(JEMALLOC));
        assert_eq!(line_of(&e, "LD_PRELOAD"), Some(5), "the line that sets the value");
        // Nothing found: an empty LD_PRELOAD, which preloads nothing.
        assert_eq!(run(RAILS_8_0, &[], &[], None).get("LD_PRELOAD"), Some(""));
        // Two matches: which `-quit` stops at depends on the folder order.
        let both = [JEMALLOC, "/usr/lib/jemalloc/libjemalloc.so.2"];
        let e = run(RAILS_8_0, &[], &both, None);
        let v = e.undecided("LD_PRELOAD").expect("undecided");
        assert!(format!("{:?}", v.value).contains("first of 2 files"), "{v:?}");
        // `[[ -z ${LD_PRELOAD+x} ]]` reads the same.
        let e = run(
            &RAILS_8_0.replace(r#"[ -z "${LD_PRELOAD+x}" ]"#, "[[ -z ${LD_PRELOAD+x} ]]"),
            &[],
            &[JEMALLOC],
            None,
        );
        assert_eq!(e.get("LD_PRELOAD"), Some(JEMALLOC));
    }

    #[test]
    fn an_assignment_without_export_reaches_only_an_environment_variable() {
        // The template before 7.2's release: not exported, so not in the program's environment.
        let s = "#!/bin/bash -e\nif [ -f /usr/lib/*/libjemalloc.so.2 ]; then\n  LD_PRELOAD=\"$(echo /usr/lib/*/libjemalloc.so.2) $LD_PRELOAD\"\nfi\nexec \"${@}\"\n";
        assert!(run(s, &[], &[JEMALLOC], None).var("LD_PRELOAD").is_none());
        // When the image's ENV already has it, the assignment changes what is exported.
        let e = run(s, &["LD_PRELOAD=/a.so"], &[JEMALLOC], None);
        assert_eq!(e.get("LD_PRELOAD"), Some(&*format!("{JEMALLOC} /a.so")));
        // `set -a` exports every assignment after it.
        let e = run(
            "set -a\nMALLOC_ARENA_MAX=2\nset +a\nX=1\nexec app\n",
            &[],
            &[],
            None,
        );
        assert_eq!(e.get("MALLOC_ARENA_MAX"), Some("2"));
        assert!(e.var("X").is_none());
    }

    #[test]
    fn exec_prefixes_env_and_uname() {
        let e = run("#!/bin/sh\nMALLOC_ARENA_MAX=2 exec node app.js\n", &[], &[], None);
        assert_eq!(e.get("MALLOC_ARENA_MAX"), Some("2"));
        assert_eq!(line_of(&e, "MALLOC_ARENA_MAX"), Some(2));
        let e = run(
            "#!/bin/sh\nexec env -u X MALLOC_CONF=narenas:2 LD_PRELOAD=libjemalloc.so.2 ruby app.rb\n",
            &[],
            &[],
            None,
        );
        assert_eq!(e.get("MALLOC_CONF"), Some("narenas:2"));
        assert_eq!(e.get("LD_PRELOAD"), Some("libjemalloc.so.2"));
        let e = run(
            "exec tini -s -- gosu app env MALLOC_ARENA_MAX=2 ruby\n",
            &[],
            &[],
            None,
        );
        assert_eq!(e.get("MALLOC_ARENA_MAX"), Some("2"));
        let s = "#!/bin/sh\nexport LD_PRELOAD=/usr/lib/$(uname -m)-linux-gnu/libjemalloc.so.2\nexec app\n";
        assert_eq!(
            run(s, &[], &[], Some(Arch::Amd64)).get("LD_PRELOAD"),
            Some(JEMALLOC)
        );
        assert_eq!(
            run(s, &[], &[], Some(Arch::Arm64)).get("LD_PRELOAD"),
            Some("/usr/lib/aarch64-linux-gnu/libjemalloc.so.2")
        );
        // 32-bit ARM: `uname -m` depends on the host.
        assert!(run(s, &[], &[], Some(Arch::Arm))
            .undecided("LD_PRELOAD")
            .is_some());
        // `$LD_PRELOAD` of the image, prepended to.
        let s = "export LD_PRELOAD=\"/j.so:${LD_PRELOAD:-}\"\nexec app\n";
        assert_eq!(
            run(s, &["LD_PRELOAD=/a.so"], &[], None).get("LD_PRELOAD"),
            Some("/j.so:/a.so")
        );
        assert_eq!(run(s, &[], &[], None).get("LD_PRELOAD"), Some("/j.so:"));
    }

    #[test]
    fn what_cannot_be_worked_out_is_undecided_with_its_line() {
        // Another command's output.
        let e = run(
            "#!/bin/sh\nexport MALLOC_CONF=$(cat /etc/malloc.conf)\nexec app\n",
            &[],
            &[],
            None,
        );
        let v = e.undecided("MALLOC_CONF").unwrap();
        assert_eq!(v.script(), Some(("/rails/bin/docker-entrypoint", 2)));
        assert_eq!(&*v.text, "export MALLOC_CONF=$(cat /etc/malloc.conf)");
        // A test of a run-time value: the value is known, whether it is set is not.
        let s = "if [ \"$1\" = server ]; then\n  export MALLOC_ARENA_MAX=2\nfi\nexec \"$@\"\n";
        let v = run(s, &[], &[], None)
            .undecided("MALLOC_ARENA_MAX")
            .cloned()
            .unwrap();
        assert!(
            matches!(&v.value, Value::Undecided { if_set: Some(x), .. } if x == "2"),
            "{v:?}"
        );
        // The other branch of a decided test is not taken; an `else` is.
        let s = "if [ -f /nope ]; then\n export A=1\nelif [ -n \"$HOME_X\" ]; then export A=2\nelse\n export A=3\nfi\nexec app\n";
        assert_eq!(run(s, &[], &[], None).get("A"), Some("3"));
        // Inside a loop, a case or a function.
        let s =
            "for f in /a /b; do\n  export X=$f\ndone\ncase \"$1\" in\n  web) export Y=1 ;;\nesac\nexec app\n";
        let e = run(s, &[], &[], None);
        assert!(e.undecided("X").is_some() && e.undecided("Y").is_some());
        // `test && export`: decided or not by its test.
        let s = "[ -f /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] && export LD_PRELOAD=libjemalloc.so.2\n[ -n \"$HOSTNAME\" ] && export B=1\nexec app\n";
        let e = run(s, &[], &[JEMALLOC], None);
        assert_eq!(e.get("LD_PRELOAD"), Some("libjemalloc.so.2"));
        assert!(e.undecided("B").is_some());
        assert!(run(s, &[], &[], None).var("LD_PRELOAD").is_none());
        // Backquotes.
        assert!(run("export A=`id -u`\nexec app\n", &[], &[], None)
            .undecided("A")
            .is_some());
        // A function body, its brace on the next line: what follows it counts again.
        let e = run(
            "setup()\n{\n  export A=1\n}\nexport B=2\nexec app\n",
            &[],
            &[],
            None,
        );
        assert!(e.undecided("A").is_some());
        assert_eq!(e.get("B"), Some("2"));
    }

    /// A script from an image may nest expansions or negations thousands deep: bounded.
    #[test]
    fn hostile_nesting_is_bounded() {
        let deep = format!(
            "export A={}x{}\nexec app\n",
            "$(echo ".repeat(20_000),
            ")".repeat(20_000)
        );
        assert!(run(&deep, &[], &[], None).undecided("A").is_some());
        let braces = format!(
            "export A=${{B:-{}x{}\nexec app\n",
            "${C:-".repeat(20_000),
            "}".repeat(20_001)
        );
        assert!(run(&braces, &[], &[], None).undecided("A").is_some());
        let thens = format!("{}export A=1\nexec app\n", "then ".repeat(12_000));
        assert_eq!(run(&thens, &[], &[], None).get("A"), Some("1"));
        let ifs = format!("{}export A=1\nexec app\n", "if true; then ".repeat(5_000));
        assert!(run(&ifs, &[], &[], None).var("A").is_none());
        let nots = format!(
            "if {} [ -f /x ]; then export A=1; fi\nexec app\n",
            "! ".repeat(20_001)
        );
        assert_eq!(run(&nots, &[], &[], None).get("A"), Some("1"));
    }

    /// A value doubled forty times is undecided past MAX_ARG_STRLEN, not a terabyte; what
    /// refers to it says so, in a why that does not grow with the chain of references.
    #[test]
    fn values_past_max_arg_strlen_are_undecided() {
        let s = format!(
            "set -a\nA=x\n{}{}exec app\n",
            "A=\"$A$A\"\n".repeat(40),
            "B=\"$A\"\n".repeat(2000)
        );
        let e = run(&s, &[], &[], None);
        let v = e.undecided("A").expect("undecided");
        assert!(
            matches!(&v.value, Value::Undecided { why, .. } if why.contains("MAX_ARG_STRLEN") && why.contains("128 KiB")),
            "{:?}",
            v.value
        );
        let Value::Undecided { why, .. } = &e.undecided("B").unwrap().value else {
            unreachable!()
        };
        assert!(why.len() <= 4 * MAX_QUOTED + 4, "{}", why.len());
    }

    /// One line of thousands of assignments is kept once (an excerpt), not once per setting;
    /// past MAX_SETTINGS a setting of any name says every variable is undecided from there.
    #[test]
    fn a_line_of_thousands_of_assignments_is_kept_once() {
        let t = tree(&[]);
        let image = ImageBudget::default();
        let env = Env::from_pairs(["LD_PRELOAD=/a.so"]);
        let budget = Budget::new(&env);
        let cx = Context {
            tree: &t,
            arch: None,
            working_dir: "/",
            image: &image,
            budget: &budget,
        };
        let line = format!("set -a;{}", "A=;".repeat(1000));
        let out = exports(&format!("{line}\nexec app\n"), "/s", &env, &cx);
        assert_eq!(out.len(), 1000);
        assert!(out.windows(2).all(|w| Arc::ptr_eq(&w[0].text, &w[1].text)));
        assert!(out[0].text.len() <= MAX_QUOTED + 3 && out[0].text.ends_with('…'));
        // The budget is the container's: a second script of the chain spends what is left.
        let more = format!(
            "set -a;{}\nexport LD_PRELOAD=/b.so\nexec app\n",
            "B=;".repeat(MAX_SETTINGS)
        );
        let out2 = exports(&more, "/s2", &env, &cx);
        let any = out2.last().unwrap();
        assert!(any.is_any(), "{any:?}");
        let seen = env.overlay(&out).overlay(&out2);
        // Any variable is undecided from there, the image's as well as those the script set.
        for k in ["A", "B", "LD_PRELOAD", "PATH"] {
            assert!(seen.undecided(k).is_some(), "{k}");
            assert!(seen.indexed().undecided(k).is_some(), "{k}");
        }
    }

    /// Past ARG_MAX in all, a container's settings stop: each value of 64 KiB counts.
    #[test]
    fn settings_past_arg_max_are_undecided() {
        let s = format!(
            "A=x\n{}{}exec app\n",
            "A=\"$A$A\"\n".repeat(16),
            (0..40)
                .map(|i| format!("export B{i}=\"$A\"\n"))
                .collect::<String>()
        );
        let e = run(&s, &[], &[], None);
        let b0 = e.exports().find(|v| v.name == "B0").unwrap();
        assert!(matches!(&b0.value, Value::Set(v) if v.len() == 64 << 10));
        // From the setting that does not fit, every variable is undecided: B0 as well.
        assert!(e.undecided("B0").is_some());
        let v = e.undecided("B39").expect("undecided");
        assert!(v.is_any(), "{v:?}");
        assert!(format!("{:?}", v.value).contains("ARG_MAX"));
    }

    /// The expansions of one container stop at MAX_EXPANDED.
    #[test]
    fn expansion_stops_at_its_budget() {
        let t = tree(&[]);
        let image = ImageBudget::default();
        let env = Env::default();
        let budget = Budget::new(&env);
        // A and B take 110 bytes: what is left is less than the 10 of C.
        budget.expand_left.set(115);
        let cx = Context {
            tree: &t,
            arch: None,
            working_dir: "/",
            image: &image,
            budget: &budget,
        };
        let s = "A=0123456789\nB=\"$A$A$A$A$A$A$A$A$A$A\"\nexport C=\"$A\"\nexec app\n";
        let out = exports(s, "/s", &env, &cx);
        let c = out.iter().find(|v| v.name == "C").unwrap();
        assert!(format!("{:?}", c.value).contains("MiB of text"), "{c:?}");
    }

    /// One search budget for the image: the same `find` is made once, however many containers
    /// run it; distinct ones spend the budget, counting files as well as folders.
    #[test]
    fn finds_share_one_budget_per_image() {
        let files: Vec<String> = (0..3000).map(|i| format!("/data/f{i}")).collect();
        let files: Vec<&str> = files.iter().map(String::as_str).collect();
        let t = tree(&files);
        let image = ImageBudget::default();
        let read = |script: &str| {
            let env = Env::default();
            let budget = Budget::new(&env);
            let cx = Context {
                tree: &t,
                arch: None,
                working_dir: "/",
                image: &image,
                budget: &budget,
            };
            env.overlay(&exports(script, "/s", &env, &cx))
        };
        let same = "export F=$(find /data -name f7 -print -quit)\nexec app\n";
        assert_eq!(read(same).get("F"), Some("/data/f7"));
        let left = image.search_left.get();
        assert_eq!(left, MAX_SEARCH_NODES - 3000);
        for _ in 0..100 {
            assert_eq!(read(same).get("F"), Some("/data/f7"));
        }
        assert_eq!(
            image.search_left.get(),
            left,
            "a search made again is not paid again"
        );
        let distinct: String = (0..80)
            .map(|i| format!("export G{i}=$(find /data -name g{i} -print -quit)\n"))
            .collect();
        let e = read(&format!("{distinct}exec app\n"));
        assert_eq!(e.get("G0"), Some(""));
        let v = e.undecided("G79").expect("undecided");
        assert!(format!("{:?}", v.value).contains("200000 entries"), "{v:?}");
        // Globs draw on the same budget.
        assert!(image.search_left.get() == 0);
        let e = read("if [ -f /data/f* ]; then export H=1; fi\nexec app\n");
        assert!(e.undecided("H").is_some());
    }

    #[test]
    fn excerpts_cut_at_a_character_boundary() {
        assert_eq!(excerpt("short"), "short");
        let long = "é".repeat(MAX_QUOTED);
        let e = excerpt(&long);
        assert!(e.len() <= MAX_QUOTED + '…'.len_utf8() && e.ends_with('…'));
    }

    /// Any text reads without a panic: pieces of shell syntax put together at random.
    #[test]
    fn arbitrary_text_reads_without_a_panic() {
        let pieces = [
            "export ",
            "A=",
            "$(",
            ")",
            "${",
            "}",
            "\"",
            "'",
            "\\",
            " ",
            "\n",
            ";",
            "&&",
            "||",
            "|",
            "if ",
            "then ",
            "else ",
            "elif ",
            "fi",
            "[ ",
            " ]",
            "[[ ",
            " ]]",
            "-f ",
            "-z ",
            "= ",
            "!",
            "*",
            "?",
            "[a-",
            "echo ",
            "find ",
            "-name ",
            "uname -m",
            "exec ",
            "env ",
            "<<EOF",
            "EOF",
            "case ",
            "esac",
            "for ",
            "do ",
            "done",
            "f() ",
            "{ ",
            "é",
            "#",
            "`",
            "$@",
            "${@}",
            ":-",
            "+x",
            "set -a",
            "unset ",
            "/usr/lib/*/libjemalloc.so.2",
        ];
        let t = tree(&[JEMALLOC]);
        let image = ImageBudget::default();
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..3000 {
            let mut text = String::new();
            for _ in 0..40 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                text.push_str(pieces[(seed >> 33) as usize % pieces.len()]);
            }
            text.push_str("\nexec app\n");
            let budget = Budget::new(&Env::default());
            let cx = Context {
                tree: &t,
                arch: Some(Arch::Amd64),
                working_dir: "/",
                image: &image,
                budget: &budget,
            };
            let _ = exports(&text, "/s", &Env::default(), &cx);
        }
    }

    #[test]
    fn only_the_path_to_the_final_exec_counts() {
        let s = "#!/bin/sh\nexport A=1\ncat > /tmp/x <<'EOF'\nexport B=2\nEOF\n(export C=3)\necho x | export D=4\nexec app\nexport E=5\n";
        let e = run(s, &[], &[], None);
        assert_eq!(e.get("A"), Some("1"));
        for k in ["B", "C", "D", "E"] {
            assert!(e.var(k).is_none(), "{k}");
        }
        // A script without a final exec exports nothing to a program.
        assert!(exports(
            "export A=1\nnode app.js\n",
            "/s",
            &Env::default(),
            &Context {
                tree: &tree(&[]),
                arch: None,
                working_dir: "/",
                image: &ImageBudget::default(),
                budget: &Budget::new(&Env::default()),
            }
        )
        .is_empty());
        // `unset` removes.
        assert!(
            run("unset LD_PRELOAD\nexec app\n", &["LD_PRELOAD=/a.so"], &[], None)
                .var("LD_PRELOAD")
                .is_none()
        );
    }

    #[test]
    fn patterns() {
        assert!(glob_match("libjemalloc.so*", "libjemalloc.so.2"));
        assert!(glob_match("*-linux-gnu", "x86_64-linux-gnu"));
        assert!(glob_match("lib[a-z]?.so", "libc6.so"));
        assert!(!glob_match("lib[0-9]*", "libc6.so"));
        assert!(glob_match("lib[!0-9]*", "libz"));
        assert!(!glob_match("*a", "bbb"));
        // Many stars against a long name stay fast.
        assert!(!glob_match(&"*a".repeat(30), &"a".repeat(29)));
        assert_eq!(exec_command("A=1 B=\"x y\" exec node"), Some("node"));
        assert_eq!(exec_command("# exec node"), None);
        assert_eq!(exec_command("execute"), None);
        assert_eq!(exec_command("exec"), None);
        // A line of thousands of assignments is split once.
        let many = format!("{}exec node", "A=1 ".repeat(16_000));
        assert_eq!(exec_command(&many), Some("node"));
    }
}
