//! The JVM's options and where each comes from: the start script's variables, the command
//! line, `@argfiles` and the option variables, in the order HotSpot reads them.

use super::*;

/// An `@argfile` is read no further than this; options past it are not seen (and a note says so).
pub(super) const ARGFILE_CAP: u64 = 64 * 1024;

/// At most this many options are kept, whatever the sources hold.
pub(super) const MAX_OPTIONS: usize = 1024;

/// At most this many `@argfiles` are expanded.
pub(super) const MAX_ARGFILES: usize = 16;

/// The options gathered, bounded.
#[derive(Default)]
pub(super) struct Options {
    pub(super) list: Vec<JavaOption>,
    pub(super) notes: Vec<String>,
    pub(super) argfiles: usize,
    pub(super) full: bool,
}

impl Options {
    pub(super) fn push(
        &mut self,
        option: String,
        source: OptionSource,
        variable: Option<&str>,
        path: Option<&str>,
        ignored: Option<String>,
    ) {
        if self.list.len() >= MAX_OPTIONS {
            if !self.full {
                self.full = true;
                self.notes
                    .push(format!("more than {MAX_OPTIONS} options: the rest were not read"));
            }
            return;
        }
        self.list.push(JavaOption {
            option,
            source,
            variable: variable.map(str::to_string),
            path: path.map(str::to_string),
            ignored,
        });
    }
}

/// The JVM options of a start script: its `DEFAULT_JVM_OPTS` (a string of quoted words,
/// split again by its `eval`), its `JAVA_OPTS=` assignments, and the variables it puts on the
/// command line (`$JAVA_OPTS`, `$<APP>_OPTS`) from the environment.
pub(super) fn script_options(script: &StartScript, jenv: &JavaEnv, opts: &mut Options) {
    let path = Some(script.path.as_str());
    let mut variables: Vec<String> = Vec::new();
    for line in script.text.lines() {
        let t = line.trim();
        if t.starts_with('#') {
            continue;
        }
        let t = t.strip_prefix("export ").unwrap_or(t);
        for (var, eval) in [
            ("DEFAULT_JVM_OPTS", true),
            ("JAVA_OPTS", false),
            ("EXTRA_JVM_ARGUMENTS", false),
        ] {
            let Some(value) = t.strip_prefix(var).and_then(|r| r.strip_prefix('=')) else {
                continue;
            };
            // Gradle 4's `DEFAULT_JVM_OPTS="--add-opens … $DEFAULT_JVM_OPTS"` (prepended when
            // the JVM takes `--add-opens`) counts too; `$…` words are the variable itself.
            let words = shell::split_words(value, shell::SH);
            let Some(value) = words.first() else { continue };
            let words = if eval {
                shell::split_words(value, shell::SH)
            } else {
                words.clone()
            };
            let words: Vec<String> = words.into_iter().filter(|w| !w.starts_with('$')).collect();
            options_of(&words, |w| {
                opts.push(w, OptionSource::StartScript, Some(var), path, None)
            });
        }
    }
    // `$JAVA_OPTS`, `$GRADLE_OPTS`, `${APP_OPTS}`: in the order of the line that builds the
    // command (`eval set -- …`, `exec …`), then of any other line.
    let lines: Vec<&str> = script
        .text
        .lines()
        .map(str::trim)
        .filter(|t| !t.starts_with('#'))
        .collect();
    let (command, other): (Vec<&str>, Vec<&str>) = lines
        .into_iter()
        .partition(|t| t.contains("set --") || t.starts_with("exec "));
    for t in command.into_iter().chain(other) {
        for (i, _) in t.match_indices('$') {
            let rest = &t[i + 1..];
            let rest = rest.strip_prefix('{').unwrap_or(rest);
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name.ends_with("_OPTS") && name != "DEFAULT_JVM_OPTS" && !variables.contains(&name) {
                variables.push(name);
            }
        }
    }
    for var in variables {
        if let Some(v) = jenv.var(&var) {
            for w in shell::split_words(v, shell::SH) {
                opts.push(w, OptionSource::EnvVar, Some(&var), path, None);
            }
        }
    }
}

/// Options that take the next word as their value.
pub(super) const WITH_VALUE: &[&str] = &[
    "-cp",
    "-classpath",
    "--class-path",
    "-p",
    "--module-path",
    "--upgrade-module-path",
    "--add-modules",
    "--limit-modules",
    "--add-exports",
    "--add-opens",
    "--add-reads",
    "--patch-module",
    "--enable-native-access",
    "--source",
];

/// The launcher's words up to the main class, `-jar FILE` or `-m MODULE`: `@argfiles` expanded
/// (JDK 9 and later, or an unknown version), `$VAR` words from the environment.
#[allow(clippy::too_many_arguments)]
pub(super) fn command_line(
    tree: &FileTree,
    jenv: &JavaEnv,
    entry: &Entrypoint,
    words: &[String],
    source: OptionSource,
    version: Option<JavaVersion>,
    opts: &mut Options,
    in_jdk_java_options: bool,
) {
    let argfiles = version.is_none_or(|v| v.feature >= 9);
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        if let Some(var) = whole_variable(w) {
            if let Some(v) = jenv.var(var) {
                for x in shell::split_words(v, shell::SH)
                    .into_iter()
                    .filter(|x| x.starts_with('-'))
                {
                    opts.push(x, OptionSource::EnvVar, Some(var), None, None);
                }
            }
            continue;
        }
        if let Some(file) = w
            .strip_prefix('@')
            .filter(|f| argfiles && !f.is_empty() && !f.starts_with('@'))
        {
            let path = absolute(&entry.working_dir, file);
            if opts.argfiles >= MAX_ARGFILES {
                opts.notes.push(format!(
                    "more than {MAX_ARGFILES} @argfiles: @{file} was not read"
                ));
                continue;
            }
            opts.argfiles += 1;
            match text_of(tree, &path) {
                Some((text, truncated)) => {
                    if truncated {
                        opts.notes.push(format!(
                            "the argfile {path} is longer than {ARGFILE_CAP} bytes: read no further"
                        ));
                    }
                    let inner = argfile_words(&text);
                    let stop = options_of(&inner, |o| {
                        opts.push(o, OptionSource::Argfile, None, Some(&path), None)
                    });
                    if stop && !in_jdk_java_options {
                        return;
                    }
                }
                None => opts
                    .notes
                    .push(format!("the argfile {path} was not found or not read")),
            }
            continue;
        }
        if WITH_VALUE.contains(&w.as_str()) {
            opts.push(w.clone(), source, None, None, None);
            i += 1;
            continue;
        }
        if w == "-jar" || w == "-m" || w == "--module" || !w.starts_with('-') {
            if in_jdk_java_options && w.starts_with('-') {
                // JDK_JAVA_OPTIONS may not name the main class (the launcher refuses it).
                continue;
            }
            return;
        }
        opts.push(w.clone(), source, None, None, None);
    }
}

/// The options among an argfile's words, through `f`; whether the words named the main class
/// (after which nothing more is an option).
pub(super) fn options_of(words: &[String], mut f: impl FnMut(String)) -> bool {
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        if WITH_VALUE.contains(&w.as_str()) {
            f(w.clone());
            i += 1;
        } else if w == "-jar" || w == "-m" || w == "--module" || !w.starts_with('-') {
            return true;
        } else {
            f(w.clone());
        }
    }
    false
}

/// `$NAME` or `${NAME}`, whole.
pub(super) fn whole_variable(w: &str) -> Option<&str> {
    let name = w
        .strip_prefix("${")
        .and_then(|r| r.strip_suffix('}'))
        .or_else(|| w.strip_prefix('$'))?;
    (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')).then_some(name)
}

/// The words of an argfile: white space separates, quotes group, `#` at the start of a word
/// starts a comment to the end of the line (the launcher's `args.c`).
pub(super) fn argfile_words(text: &str) -> Vec<String> {
    text.lines()
        .flat_map(|line| {
            let cut = comment_start(line);
            shell::split_words(&line[..cut], shell::SH)
        })
        .collect()
}

pub(super) fn comment_start(line: &str) -> usize {
    let (mut sq, mut dq, mut prev_space) = (false, false, true);
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !dq => sq = !sq,
            '"' if !sq => dq = !dq,
            '#' if !sq && !dq && prev_space => return i,
            _ => {}
        }
        prev_space = c.is_whitespace();
    }
    line.len()
}
