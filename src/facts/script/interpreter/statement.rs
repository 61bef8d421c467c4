//! Statements: compound commands opened and closed, simple commands, assignments and exports.

use super::condition::*;
use super::words::*;
use super::*;
use crate::facts::env::Origin;

impl State<'_> {
    /// Whether the statement runs here, from the open compound commands: the conditions in
    /// words when that cannot be decided.
    pub(super) fn reached(&self) -> Result<bool, Why> {
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
    pub(super) fn statement(&mut self, stmt: &str, line: u32, text: &Arc<str>) {
        let mut next = Some(stmt.to_string());
        while let Some(s) = next.take() {
            if self.frames.len() > MAX_FRAMES {
                return;
            }
            next = self.statement_once(&s, line, text);
        }
    }

    pub(super) fn statement_once(&mut self, stmt: &str, line: u32, text: &Arc<str>) -> Option<String> {
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

    pub(super) fn in_case_arm(&self) -> bool {
        matches!(self.frames.last(), Some(Frame::Opaque { closer: "esac", .. }))
    }

    /// A statement of simple commands joined by `&&`/`||`: each runs when the chain so far
    /// says so.
    pub(super) fn simple_chain(&mut self, stmt: &str, line: u32, text: &Arc<str>) {
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
    pub(super) fn simple(&mut self, cmd: &str, line: u32, text: &Arc<str>, cond: Option<String>) -> Tri {
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
    pub(super) fn assign(
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

    pub(super) fn set_var(
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
    pub(super) fn take_setting(&mut self, bytes: usize, line: u32, text: &Arc<str>) -> bool {
        let budget = self.cx.budget;
        if budget.spent.get() {
            return false;
        }
        if Budget::take(&budget.settings_left, 1) && Budget::take(&budget.assign_left, bytes) {
            return true;
        }
        budget.spent.set(true);
        self.exports.push(Var {
            name: crate::facts::env::ANY.to_string(),
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
    pub(super) fn export_existing(&mut self, name: &str, line: u32, text: &Arc<str>, cond: Option<String>) {
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
