//! Dockerfiles, read far enough to put a finding on the line that caused it or should carry the
//! fix: instructions with their lines (continuations and heredocs joined), stages (`FROM … AS`,
//! `--target`), global `ARG`s substituted in `FROM`, and inline
//! `# memlint ignore=RULE[,RULE] reason="…"` comments.

use crate::shell;
use std::collections::BTreeMap;

/// One instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Instruction {
    /// Upper-case keyword: FROM, RUN, ENV, COPY, CMD…
    pub(crate) keyword: String,
    /// Everything after the keyword, continuation lines joined with a space (heredoc bodies
    /// included after a newline).
    pub(crate) args: String,
    /// 1-based first and last line.
    pub(crate) line: u32,
    pub(crate) end_line: u32,
    /// Index of the stage it belongs to; `None` for ARGs before the first FROM.
    pub(crate) stage: Option<usize>,
    /// Rules silenced by a `# memlint ignore=…` comment on the line above, with the reason.
    pub(crate) ignores: Vec<InlineIgnore>,
    /// The file's escape character (`# escape=`): a backslash unless it names a backtick.
    pub(crate) escape: char,
}

impl Instruction {
    /// The variables an `ENV` instruction sets (`ENV K=V K2="v 2"` or the old `ENV K V`),
    /// quotes and escapes removed as [`shell::dockerfile`] says.
    pub(crate) fn env_keys(&self) -> Vec<(String, String)> {
        let words = shell::split_words(&self.args, shell::dockerfile(self.escape));
        if words.first().is_some_and(|w| w.contains('=')) {
            words
                .into_iter()
                .filter_map(|w| w.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
                .collect()
        } else {
            let mut it = self.args.trim().splitn(2, char::is_whitespace);
            match (it.next(), it.next()) {
                (Some(k), Some(v)) => vec![(k.to_string(), v.trim().to_string())],
                _ => Vec::new(),
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InlineIgnore {
    pub(crate) rules: Vec<String>,
    pub(crate) reason: Option<String>,
    pub(crate) line: u32,
}

/// A build stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stage {
    pub(crate) name: Option<String>,
    /// The base image, with global ARGs substituted.
    pub(crate) base: String,
    /// The index of the FROM instruction.
    pub(crate) from: usize,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Dockerfile {
    pub(crate) instructions: Vec<Instruction>,
    pub(crate) stages: Vec<Stage>,
}

impl Dockerfile {
    pub(crate) fn parse(text: &str) -> Dockerfile {
        let lines: Vec<&str> = text.lines().collect();
        let escape = escape_char(&lines);
        let mut out = Dockerfile::default();
        let mut pending_ignores: Vec<InlineIgnore> = Vec::new();
        let mut global_args: BTreeMap<String, String> = BTreeMap::new();
        let mut i = 0;
        while i < lines.len() {
            let raw = lines[i];
            let trimmed = raw.trim();
            if trimmed.is_empty() {
                i += 1;
                continue;
            }
            if let Some(comment) = trimmed.strip_prefix('#') {
                if let Some(ig) = parse_inline_ignore(comment, i as u32 + 1) {
                    pending_ignores.push(ig);
                }
                i += 1;
                continue;
            }
            let start = i;
            let mut text = String::new();
            // Join continuation lines; comment lines inside a continuation are skipped.
            loop {
                let l = lines[i];
                let t = l.trim_end();
                if let Some(body) = t.strip_suffix(escape) {
                    text.push_str(body);
                    text.push(' ');
                    i += 1;
                    while i < lines.len() && lines[i].trim_start().starts_with('#') {
                        i += 1;
                    }
                    if i >= lines.len() {
                        break;
                    }
                } else {
                    text.push_str(t);
                    i += 1;
                    break;
                }
            }
            // Heredocs (`<<EOF`, `<<-"EOF"`): their bodies belong to this instruction.
            for marker in heredoc_markers(&text) {
                while i < lines.len() {
                    let l = lines[i];
                    i += 1;
                    text.push('\n');
                    text.push_str(l);
                    if l.trim_start_matches('\t') == marker || l.trim() == marker {
                        break;
                    }
                }
            }
            let text = text.trim();
            let (keyword, args) = match text.split_once(char::is_whitespace) {
                Some((k, a)) => (k.to_ascii_uppercase(), a.trim().to_string()),
                None => (text.to_ascii_uppercase(), String::new()),
            };
            let stage = if keyword == "FROM" {
                Some(out.stages.len())
            } else {
                out.stages.len().checked_sub(1)
            };
            if keyword == "ARG" && stage.is_none() {
                for (k, v) in parse_arg(&args, escape) {
                    global_args.insert(k, v);
                }
            }
            if keyword == "FROM" {
                let (base, name) = parse_from(&args, &global_args, escape);
                out.stages.push(Stage {
                    name,
                    base,
                    from: out.instructions.len(),
                });
            }
            out.instructions.push(Instruction {
                keyword,
                args,
                line: start as u32 + 1,
                end_line: i as u32,
                stage,
                ignores: std::mem::take(&mut pending_ignores),
                escape,
            });
        }
        out
    }

    /// The stage an image is built from: `--target`, else the last one.
    pub(crate) fn target_stage(&self, target: Option<&str>) -> Option<usize> {
        match target {
            Some(t) => self
                .stages
                .iter()
                .position(|s| s.name.as_deref().is_some_and(|n| n.eq_ignore_ascii_case(t))),
            None => self.stages.len().checked_sub(1),
        }
    }

    /// The stages whose instructions end up in the target image: the target and the stages it
    /// is built `FROM`, base first.
    pub(crate) fn chain(&self, target: usize) -> Vec<usize> {
        let mut chain = vec![target];
        let mut cur = target;
        while let Some(prev) = self.stages.iter().take(cur).position(|s| {
            s.name
                .as_deref()
                .is_some_and(|n| n.eq_ignore_ascii_case(&self.stages[cur].base))
        }) {
            if chain.contains(&prev) {
                break;
            }
            chain.push(prev);
            cur = prev;
        }
        chain.reverse();
        chain
    }

    /// The FROM instruction of a stage.
    pub(crate) fn stage_from(&self, stage: usize) -> Option<&Instruction> {
        self.stages.get(stage).and_then(|s| self.instructions.get(s.from))
    }
}

/// The `# escape=` parser directive (backslash unless it says a backtick).
fn escape_char(lines: &[&str]) -> char {
    for l in lines {
        let t = l.trim();
        let Some(d) = t.strip_prefix('#') else { break };
        let d = d.trim();
        if let Some(v) = d.strip_prefix("escape=").or_else(|| d.strip_prefix("escape =")) {
            if v.trim() == "`" {
                return '`';
            }
        } else if !d.contains('=') {
            break;
        }
    }
    '\\'
}

fn heredoc_markers(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("<<") {
        let after = &rest[at + 2..];
        let after = after.strip_prefix('-').unwrap_or(after);
        let word: String = after
            .chars()
            .skip_while(|c| *c == '"' || *c == '\'')
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !word.is_empty() {
            out.push(word);
        }
        rest = &rest[at + 2..];
    }
    out
}

/// `# memlint ignore=RULE[,RULE] reason="…"`
fn parse_inline_ignore(comment: &str, line: u32) -> Option<InlineIgnore> {
    let c = comment.trim();
    let rest = c.strip_prefix("memlint")?.trim_start();
    let rest = rest.strip_prefix("ignore=")?;
    let (rules, tail) = match rest.split_once(char::is_whitespace) {
        Some((r, t)) => (r, t.trim()),
        None => (rest, ""),
    };
    let reason = tail
        .strip_prefix("reason=")
        .map(|r| r.trim().trim_matches('"').to_string())
        .filter(|r| !r.is_empty());
    let rules: Vec<String> = rules
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_string)
        .collect();
    (!rules.is_empty()).then_some(InlineIgnore { rules, reason, line })
}

/// `ARG NAME[=default] …`
fn parse_arg(args: &str, escape: char) -> Vec<(String, String)> {
    shell::split_words(args, shell::dockerfile(escape))
        .into_iter()
        .map(|w| match w.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (w, String::new()),
        })
        .collect()
}

/// `FROM [--platform=…] image [AS name]`, with `$VAR`/`${VAR}`/`${VAR:-default}` from the
/// global ARGs.
fn parse_from(args: &str, globals: &BTreeMap<String, String>, escape: char) -> (String, Option<String>) {
    let words: Vec<String> = shell::split_words(args, shell::dockerfile(escape))
        .into_iter()
        .filter(|w| !w.starts_with("--"))
        .collect();
    let base = words.first().map(|b| substitute(b, globals)).unwrap_or_default();
    let name = match words.as_slice() {
        [_, as_kw, name, ..] if as_kw.eq_ignore_ascii_case("as") => Some(name.clone()),
        _ => None,
    };
    (base, name)
}

fn substitute(s: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '$' {
            if chars.get(i + 1) == Some(&'{') {
                if let Some(end) = chars[i + 2..].iter().position(|c| *c == '}') {
                    let inner: String = chars[i + 2..i + 2 + end].iter().collect();
                    let (name, default) = match inner.split_once(":-") {
                        Some((n, d)) => (n.to_string(), Some(d.to_string())),
                        None => (inner.clone(), None),
                    };
                    let value = vars
                        .get(&name)
                        .filter(|v| !v.is_empty())
                        .cloned()
                        .or(default)
                        .unwrap_or_default();
                    out.push_str(&value);
                    i += end + 3;
                    continue;
                }
            } else {
                let name: String = chars[i + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
                    .collect();
                if !name.is_empty() {
                    out.push_str(vars.get(&name).map(String::as_str).unwrap_or(""));
                    i += 1 + name.len();
                    continue;
                }
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"# syntax=docker/dockerfile:1
ARG NODE=24
ARG DISTRO
FROM node:${NODE}-${DISTRO:-bookworm}-slim AS deps
WORKDIR /app
RUN npm ci \
    # a comment inside the continuation
    --omit=dev

FROM deps AS runtime
RUN apt-get update && \
    apt-get install -y libjemalloc2
# memlint ignore=ld-preload-missing,sharp-glibc-allocator reason="arm64 only, fixed in #12"
ENV LD_PRELOAD=/usr/lib/aarch64-linux-gnu/libjemalloc.so.2 NODE_OPTIONS="--max-old-space-size=512"
COPY <<EOF /etc/app.conf
a = 1
EOF
CMD ["node", "server.js"]

FROM busybox AS other
RUN true
"#;

    #[test]
    fn stages_lines_and_args() {
        let d = Dockerfile::parse(FILE);
        assert_eq!(d.stages.len(), 3);
        assert_eq!(d.stages[0].base, "node:24-bookworm-slim");
        assert_eq!(d.stages[0].name.as_deref(), Some("deps"));
        assert_eq!(d.stages[1].base, "deps");
        let run = &d.instructions[4];
        assert_eq!((run.keyword.as_str(), run.line, run.end_line), ("RUN", 6, 8));
        assert!(run.args.contains("npm ci") && run.args.contains("--omit=dev"));
        let env = d.instructions.iter().find(|i| i.keyword == "ENV").unwrap();
        assert_eq!(env.line, 14);
        assert_eq!(
            env.ignores[0].rules,
            ["ld-preload-missing", "sharp-glibc-allocator"]
        );
        assert_eq!(env.ignores[0].reason.as_deref(), Some("arm64 only, fixed in #12"));
        let keys = env.env_keys();
        assert_eq!(
            keys[0],
            (
                "LD_PRELOAD".into(),
                "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2".into()
            )
        );
        assert_eq!(
            keys[1],
            ("NODE_OPTIONS".into(), "--max-old-space-size=512".into())
        );
        let copy = d.instructions.iter().find(|i| i.keyword == "COPY").unwrap();
        assert_eq!((copy.line, copy.end_line), (15, 17));
        let cmd = d.instructions.iter().find(|i| i.keyword == "CMD").unwrap();
        assert_eq!(cmd.line, 18);
        // The last stage by default; `--target runtime` and the stages it builds on.
        assert_eq!(d.target_stage(None), Some(2));
        let t = d.target_stage(Some("runtime")).unwrap();
        assert_eq!(d.chain(t), [0, 1]);
        assert_eq!(d.stage_from(t).unwrap().line, 10);
        assert_eq!(d.target_stage(Some("nope")), None);
    }

    #[test]
    fn escape_directive_and_old_env_form() {
        let d = Dockerfile::parse("# escape=`\nFROM mcr.microsoft.com/dotnet/aspnet:10.0\nRUN echo a `\n  b\nENV PGGSSENCMODE disable\n");
        assert_eq!(d.instructions[1].args, "echo a    b");
        assert_eq!(
            d.instructions[2].env_keys(),
            [("PGGSSENCMODE".to_string(), "disable".to_string())]
        );
    }

    /// `ENV` values are split as BuildKit splits them (see [`shell::dockerfile`]): escapes
    /// outside quotes, only `"`, `$` and the escape character inside double quotes, and with
    /// `# escape=`` ` backslashes are ordinary characters.
    #[test]
    fn env_values_follow_the_escape_character() {
        let d = Dockerfile::parse(
            "FROM debian\nENV MY_DOG=Rex\\ The\\ Dog OPTS=\"--a=\\\"b c\\\" \\d\" ARGS=\"$@\"\n",
        );
        assert_eq!(
            d.instructions[1].env_keys(),
            [
                ("MY_DOG".to_string(), "Rex The Dog".to_string()),
                ("OPTS".to_string(), r#"--a="b c" \d"#.to_string()),
                ("ARGS".to_string(), "$@".to_string()),
            ]
        );
        let d = Dockerfile::parse("# escape=`\nFROM windows\nENV DIR=C:\\app\\bin NAME=a` b\n");
        assert_eq!(
            d.instructions[1].env_keys(),
            [
                ("DIR".to_string(), r"C:\app\bin".to_string()),
                ("NAME".to_string(), "a b".to_string()),
            ]
        );
    }
}
