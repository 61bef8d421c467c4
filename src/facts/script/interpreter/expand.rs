//! Expansion as the shell does it: quotes, parameters, the command substitutions memlint can
//! work out (`echo`, `find`, `uname -m`), field splitting and pathname expansion in the image's
//! tree.

use super::glob::*;
use super::words::*;
use super::*;
use crate::tree::NodeKind;

/// An expansion's result: the text, and whether an unquoted glob character or expansion is in
/// it (for pathname expansion and field splitting).
#[derive(Default)]
pub(super) struct Expanded {
    pub(super) text: String,
    pub(super) glob: bool,
    pub(super) split: bool,
}

impl State<'_> {
    /// What a variable holds at this point: the script's own, else the environment's.
    pub(super) fn lookup(&self, name: &str) -> Result<Option<String>, Why> {
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
    pub(super) fn expand(&self, raw: &str) -> Result<Expanded, Why> {
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

    pub(super) fn expand_inner(&self, raw: &str) -> Result<Expanded, Why> {
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
    pub(super) fn dollar(&self, rest: &[char], raw: &str) -> Result<(String, usize), Why> {
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
    pub(super) fn parameter(&self, inner: &str) -> Result<String, Why> {
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
    pub(super) fn fields(&self, raw: &[String]) -> Result<Vec<String>, Why> {
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
    pub(super) fn substitute(&self, cmd: &str) -> Result<String, Why> {
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
    pub(super) fn find(&self, args: &[String], cmd: &str) -> Result<String, Why> {
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

    pub(super) fn absolute(&self, path: &str) -> String {
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
    pub(super) fn glob(&self, pattern: &str) -> Result<Vec<String>, Why> {
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
}
