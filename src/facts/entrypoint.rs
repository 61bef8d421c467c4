//! The program the container starts: Entrypoint + Cmd resolved against PATH and WorkingDir,
//! followed through `sh -c`, init wrappers (tini, dumb-init, env, gosu) and shell scripts that
//! plainly `exec` another program, down to the program that runs and its ELF interpreter.

use super::env::Var;
use super::script;
use super::Env;
use crate::arch::Arch;
use crate::shell;
use crate::tree::{FileTree, Interests, NodeId, NodeKind};
use oci_spec::image::ImageConfiguration;
use serde::Serialize;
use std::borrow::Cow;

/// Docker's default when an image sets no PATH.
pub(crate) const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const MAX_STEPS: usize = 8;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ProgramKind {
    /// No Entrypoint and no Cmd.
    #[default]
    None,
    /// An ELF executable.
    Elf,
    /// A script that could not be followed further.
    Script,
    /// The program is not in the image.
    Missing,
    /// A file that is neither ELF nor a script.
    Other,
}

/// One step from the config's command to the program that runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct Step {
    pub(crate) argv: Vec<String>,
    /// The program's path in the image, when found.
    pub(crate) path: Option<String>,
    /// How this step led to the next one, in words.
    pub(crate) how: String,
    /// How this step led to the next one, for the facts that follow the way.
    #[serde(skip)]
    pub(crate) kind: StepKind,
}

/// How a step of the entrypoint leads to the next one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum StepKind {
    /// `sh -c "…"`: the shell form of CMD/ENTRYPOINT.
    ShellC,
    /// A program that runs its argument (`env`, `tini`, `gosu`, `dumb-init`…), by base name.
    Wrapper(String),
    /// A shell script's `exec`.
    ShellScript,
    /// A `#!` line's interpreter runs the script.
    #[default]
    Interpreter,
}

/// The entrypoint process.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct Entrypoint {
    /// Entrypoint followed by Cmd, as the config gives them.
    pub(crate) argv: Vec<String>,
    pub(crate) working_dir: String,
    /// The program that finally runs (canonical path in the image).
    pub(crate) program: Option<String>,
    pub(crate) kind: ProgramKind,
    /// Its PT_INTERP, for an ELF program.
    pub(crate) interpreter: Option<String>,
    /// Its argument vector, after the steps below.
    pub(crate) args: Vec<String>,
    pub(crate) steps: Vec<Step>,
    /// Why following stopped early, when it did.
    pub(crate) note: Option<String>,
    /// What the scripts on the way export to the program, in order (a later setting of a
    /// name wins). `Facts::env` is the config's `Env` overlaid with these.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) exports: Vec<Var>,
}

impl Entrypoint {}

/// Folders where entrypoint scripts usually are, kept before the config is known (a streamed
/// archive may send its layers first): Docker's default PATH, the root, the usual app folders.
const SCRIPT_FOLDERS: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
    "/",
    "/app",
    "/usr/src/app",
    "/docker-entrypoint.d",
];

/// What [`derive`] reads whatever the config says: scripts in [`SCRIPT_FOLDERS`], and the
/// ELF head (interpreter) of the program.
pub(crate) fn interests() -> Interests {
    SCRIPT_FOLDERS
        .iter()
        .fold(Interests::default(), |i, d| i.script(&scripts_in(d)))
        .read_elf_heads()
}

/// What the config adds to [`interests`]: the scripts in its PATH folders and working folder,
/// and the absolute paths its Entrypoint and Cmd name, so that the entrypoint can be followed
/// to the program it runs.
pub(crate) fn interests_for(config: &ImageConfiguration) -> Interests {
    let c = config.config().as_ref();
    let env = c.and_then(|c| c.env().clone()).unwrap_or_default();
    let path_var = env
        .iter()
        .rev()
        .find_map(|e| e.strip_prefix("PATH="))
        .unwrap_or(DEFAULT_PATH);
    let working_dir = c
        .and_then(|c| c.working_dir().as_deref())
        .filter(|w| w.starts_with('/'));
    let dirs = path_var
        .split(':')
        .filter(|d| d.starts_with('/'))
        .chain(working_dir)
        .chain(["/", "/docker-entrypoint.d"]);
    let mut out = dirs.fold(Interests::default(), |i, d| i.script(&scripts_in(d)));
    let argv = c
        .map(|c| {
            c.entrypoint()
                .clone()
                .unwrap_or_default()
                .into_iter()
                .chain(c.cmd().clone().unwrap_or_default())
        })
        .into_iter()
        .flatten();
    for a in argv.filter(|a| a.contains('/')) {
        // A relative path (`./bin/rails`) is found from the working folder.
        match (a.starts_with('/'), working_dir) {
            (true, _) => out = out.script(&a),
            (false, Some(w)) => {
                out = out.script(&format!(
                    "{}/{}",
                    w.trim_end_matches('/'),
                    a.trim_start_matches("./")
                ))
            }
            (false, None) => {}
        }
    }
    out
}

/// The pattern of the files directly in folder `dir`.
fn scripts_in(dir: &str) -> String {
    format!("{}/*", dir.trim_end_matches('/'))
}

/// Follows the config's command to the program that runs. `env` is the config's `Env`, `arch`
/// the image's architecture (for `$(uname -m)` in scripts), `image` what searching the image
/// may still cost (shared by the containers that run it).
pub(crate) fn derive(
    tree: &FileTree,
    config: Option<&ImageConfiguration>,
    env: &Env,
    arch: Option<Arch>,
    image: &script::ImageBudget,
) -> Entrypoint {
    let c = config.and_then(|c| c.config().as_ref());
    let mut argv: Vec<String> = c.and_then(|c| c.entrypoint().clone()).unwrap_or_default();
    argv.extend(c.and_then(|c| c.cmd().clone()).unwrap_or_default());
    let working_dir = c
        .and_then(|c| c.working_dir().clone())
        .filter(|w| !w.is_empty())
        .unwrap_or_else(|| "/".to_string());
    let mut e = Entrypoint {
        argv: argv.clone(),
        working_dir: working_dir.clone(),
        ..Default::default()
    };
    if argv.is_empty() {
        e.note = Some("the image sets neither Entrypoint nor Cmd".to_string());
        return e;
    }
    let mut walk = Walk {
        tree,
        arch,
        working_dir,
        image,
        budget: script::Budget::new(env),
        path_var: env.get("PATH").unwrap_or(DEFAULT_PATH).to_string(),
        seen: Cow::Borrowed(env),
    };
    let mut current = argv;
    for _ in 0..MAX_STEPS {
        let finder = walk.finder();
        let Some(first) = current.first().cloned() else {
            e.note = Some("the command is empty after following the steps".to_string());
            return e;
        };
        let base = first.rsplit('/').next().unwrap_or(&first).to_string();
        // `sh -c "…"`: the shell form of CMD/ENTRYPOINT.
        if is_shell(&base) && current.get(1).map(String::as_str) == Some("-c") {
            let Some(script) = current.get(2) else { break };
            let rest: Vec<String> = current.iter().skip(4).cloned().collect();
            match last_command(script, &rest) {
                Some(next) => {
                    e.steps.push(Step {
                        argv: current.clone(),
                        path: finder.find(&first),
                        how: "sh -c".into(),
                        kind: StepKind::ShellC,
                    });
                    current = next;
                    continue;
                }
                None => {
                    e.note = Some(format!("cannot tell which program `{script}` runs"));
                    e.program = finder.find(&first);
                    e.kind = ProgramKind::Script;
                    e.args = current;
                    return e;
                }
            }
        }
        let Some(path) = finder.find(&first) else {
            e.kind = ProgramKind::Missing;
            e.note = Some(format!(
                "`{first}` is not in the image (searched PATH={})",
                walk.path_var
            ));
            e.args = current;
            return e;
        };
        if let Some(next) = unwrap_wrapper(&base, &current) {
            e.steps.push(Step {
                argv: current.clone(),
                path: Some(path),
                how: format!("{base} runs its argument"),
                kind: StepKind::Wrapper(base.clone()),
            });
            current = next;
            continue;
        }
        let id = tree.lookup(&path).ok().flatten();
        if let Some(elf) = id.and_then(|id| tree.elf(id)) {
            e.kind = ProgramKind::Elf;
            e.interpreter = elf.head.interpreter.clone();
            e.program = Some(path);
            e.args = current;
            return e;
        }
        match walk.script_step(&mut e, id, path, current) {
            Some(next) => current = next,
            None => return e,
        }
    }
    e.note = Some(format!("stopped after {MAX_STEPS} steps"));
    e.args = current;
    e
}

/// What following the entrypoint carries from step to step.
struct Walk<'a> {
    tree: &'a FileTree,
    arch: Option<Arch>,
    working_dir: String,
    image: &'a script::ImageBudget,
    /// What the scripts on the way may assign and expand, all of them together.
    budget: script::Budget,
    path_var: String,
    /// The environment the next program starts with: the config's, plus what scripts export.
    seen: Cow<'a, Env>,
}

impl Walk<'_> {
    fn finder(&self) -> Finder<'_> {
        Finder {
            tree: self.tree,
            path_var: &self.path_var,
            working_dir: &self.working_dir,
        }
    }

    /// The step from `path`, which is not ELF: a script's `#!` interpreter, or the program a
    /// shell script `exec`s (with what it exports on the way). `None` when the walk ends here,
    /// with `e` saying where.
    fn script_step(
        &mut self,
        e: &mut Entrypoint,
        id: Option<NodeId>,
        path: String,
        current: Vec<String>,
    ) -> Option<Vec<String>> {
        // The program may be anywhere the config's PATH or a script points: its contents are
        // known only where an interest asked for them.
        let content = id.and_then(|id| self.tree.kept_content(id));
        let node = id.map(|id| self.tree.node(id));
        let text = content.map(|c| String::from_utf8_lossy(&c.bytes).into_owned());
        let Some(text) = text.filter(|t| t.starts_with("#!")) else {
            e.program = Some(path);
            e.args = current;
            e.kind = if node.is_some_and(|n| n.size > 2 && content.is_none()) {
                e.note = Some("the program's contents were not kept, so its kind is unknown".into());
                ProgramKind::Other
            } else {
                ProgramKind::Other
            };
            return None;
        };
        let shebang: Vec<String> = text.lines().next().unwrap_or("")[2..]
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let Some(interp) = shebang.first().cloned() else {
            e.kind = ProgramKind::Script;
            e.program = Some(path);
            e.args = current;
            e.note = Some("the script's #! line names no interpreter".into());
            return None;
        };
        let interp_base = interp.rsplit('/').next().unwrap_or(&interp).to_string();
        let script_args: Vec<String> = current[1..].to_vec();
        if is_shell(&interp_base) {
            match exec_target(&text, &script_args, &self.finder()) {
                Some(next) => {
                    let cx = script::Context {
                        tree: self.tree,
                        arch: self.arch,
                        working_dir: &self.working_dir,
                        image: self.image,
                        budget: &self.budget,
                    };
                    let exported = script::exports(&text, &path, &self.seen, &cx);
                    self.seen.to_mut().extend(&exported);
                    e.exports.extend(exported);
                    if let Some(p) = self.seen.get("PATH").filter(|_| self.seen.set_by_script("PATH")) {
                        self.path_var = p.to_string();
                    }
                    e.steps.push(Step {
                        argv: current.clone(),
                        path: Some(path),
                        how: "exec in shell script".into(),
                        kind: StepKind::ShellScript,
                    });
                    return Some(next);
                }
                None => {
                    e.kind = ProgramKind::Script;
                    e.interpreter = Some(interp);
                    e.program = Some(path);
                    e.args = current;
                    e.note = Some("the script does not plainly `exec` a program".into());
                    return None;
                }
            }
        }
        // `#!/usr/bin/env node` or `#!/usr/bin/node`: the interpreter runs the script.
        let mut next = shebang;
        next.push(path.clone());
        next.extend(script_args);
        e.steps.push(Step {
            argv: current.clone(),
            path: Some(path),
            how: "#! interpreter".into(),
            kind: StepKind::Interpreter,
        });
        Some(next)
    }
}

fn is_shell(base: &str) -> bool {
    matches!(base, "sh" | "bash" | "dash" | "ash" | "zsh" | "ksh" | "busybox")
}

/// Init wrappers and helpers that run their argument: tini, dumb-init, env, gosu, su-exec.
fn unwrap_wrapper(base: &str, argv: &[String]) -> Option<Vec<String>> {
    let rest = &argv[1..];
    let skip_flags = |args: &[String]| -> Vec<String> {
        let mut i = 0;
        while i < args.len() && args[i].starts_with('-') {
            if args[i] == "--" {
                i += 1;
                break;
            }
            i += 1;
        }
        args[i..].to_vec()
    };
    let next = match base {
        "tini" | "tini-static" | "docker-init" | "dumb-init" | "catatonit" => skip_flags(rest),
        "env" => {
            let args = skip_flags(rest);
            args.into_iter().skip_while(|a| a.contains('=')).collect()
        }
        "gosu" | "su-exec" | "chpst" => rest.iter().skip(1).cloned().collect(),
        _ => return None,
    };
    (!next.is_empty()).then_some(next)
}

struct Finder<'a> {
    tree: &'a FileTree,
    path_var: &'a str,
    working_dir: &'a str,
}

impl Finder<'_> {
    /// The canonical path of a command as execvp finds it.
    fn find(&self, cmd: &str) -> Option<String> {
        if cmd.contains('/') {
            let full = if cmd.starts_with('/') {
                cmd.to_string()
            } else {
                format!("{}/{cmd}", self.working_dir)
            };
            return self.executable(&full);
        }
        self.path_var
            .split(':')
            .filter(|d| !d.is_empty())
            .find_map(|dir| self.executable(&format!("{dir}/{cmd}")))
    }

    fn executable(&self, path: &str) -> Option<String> {
        let id = self.tree.lookup(path).ok()??;
        let node = self.tree.node(id);
        matches!(node.kind, NodeKind::File).then(|| self.tree.path_of(id))
    }
}

/// The words of the command a shell script ends up running: its last `exec` line, with `$@`
/// replaced by the script's arguments. The official node image's `set -- node "$@"` (for an
/// argument that is not a command) is honoured.
fn exec_target(text: &str, args: &[String], finder: &Finder) -> Option<Vec<String>> {
    let mut prefix: Option<Vec<String>> = None;
    let mut target = None;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') {
            continue;
        }
        if let Some(rest) = t.strip_prefix("set -- ") {
            let words = shell::split_words(rest, shell::SH);
            if words.last().map(String::as_str) == Some(shell::ALL_ARGS) {
                prefix = Some(words[..words.len() - 1].to_vec());
            }
        }
        if let Some(rest) = script::exec_command(t) {
            target = Some(rest.to_string());
        }
    }
    let target = target?;
    let mut args = args.to_vec();
    if let Some(prefix) = prefix {
        let first_is_command = args
            .first()
            .is_some_and(|a| !a.starts_with('-') && finder.find(a).is_some());
        if !first_is_command {
            let mut v = prefix;
            v.extend(args);
            args = v;
        }
    }
    let words = command_words(&target, &args)?;
    (!words.is_empty()).then_some(words)
}

/// The last simple command of a `sh -c` string, with `exec` and leading assignments dropped.
fn last_command(script: &str, args: &[String]) -> Option<Vec<String>> {
    let mut last = None;
    for part in split_commands(script) {
        if let Some(w) = command_words(&part, args) {
            if !w.is_empty() {
                last = Some(w);
            }
        }
    }
    last
}

fn command_words(cmd: &str, args: &[String]) -> Option<Vec<String>> {
    let mut words: Vec<String> = Vec::new();
    for w in shell::split_words(cmd, shell::SH) {
        if w == shell::ALL_ARGS {
            words.extend(args.iter().cloned());
        } else {
            words.push(w);
        }
    }
    while words
        .first()
        .is_some_and(|w| w == "exec" || (w.contains('=') && !w.starts_with('-') && !w.starts_with('=')))
    {
        words.remove(0);
    }
    Some(words)
}

/// Splits a shell string at `;`, `&&`, `||`, `|`, `&` and newlines outside quotes.
fn split_commands(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut sq, mut dq, mut esc) = (false, false, false);
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if esc {
            cur.push(c);
            esc = false;
        } else if c == '\\' && !sq {
            cur.push(c);
            esc = true;
        } else if c == '\'' && !dq {
            sq = !sq;
            cur.push(c);
        } else if c == '"' && !sq {
            dq = !dq;
            cur.push(c);
        } else if !sq && !dq && matches!(c, ';' | '&' | '|' | '\n') {
            out.push(std::mem::take(&mut cur));
            while i + 1 < chars.len() && matches!(chars[i + 1], '&' | '|') {
                i += 1;
            }
        } else {
            cur.push(c);
        }
        i += 1;
    }
    out.push(cur);
    out.into_iter()
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_and_commands() {
        assert_eq!(
            split_commands("cd /app && exec node server.js; echo done"),
            ["cd /app", "exec node server.js", "echo done"]
        );
        assert_eq!(
            last_command("cd /app && NODE_ENV=production exec node server.js", &[]).unwrap(),
            ["node", "server.js"]
        );
        let args = vec!["node".to_string(), "x.js".to_string()];
        assert_eq!(command_words(r#"exec "$@""#, &args).unwrap(), args);
    }

    #[test]
    fn the_config_adds_its_path_working_folder_and_commands() {
        let config: ImageConfiguration = serde_json::from_str(
            r#"{"architecture": "amd64", "os": "linux",
                "config": {"Env": ["PATH=/usr/bin", "PATH=/opt/app/bin/:/usr/bin:relative"],
                           "Entrypoint": ["/srv/run.sh"], "Cmd": ["node", "/app/server.js"],
                           "WorkingDir": "/work"},
                "rootfs": {"type": "layers", "diff_ids": []}}"#,
        )
        .unwrap();
        let added = interests_for(&config);
        let scripts: Vec<&str> = added.scripts.iter().map(|p| p.as_str()).collect();
        // The last PATH wins, relative folders are skipped; then the working folder, the
        // root and docker-entrypoint.d, then the absolute paths of Entrypoint and Cmd.
        assert_eq!(
            scripts,
            [
                "/opt/app/bin/*",
                "/usr/bin/*",
                "/work/*",
                "/*",
                "/docker-entrypoint.d/*",
                "/srv/run.sh",
                "/app/server.js"
            ]
        );
        assert!(added.keep.is_empty() && !added.elf_heads);
        // Without PATH, Docker's default.
        let bare: ImageConfiguration = serde_json::from_str(
            r#"{"architecture": "amd64", "os": "linux", "config": {},
                "rootfs": {"type": "layers", "diff_ids": []}}"#,
        )
        .unwrap();
        assert!(interests_for(&bare).covers("/usr/local/sbin/x"));
        assert!(interests().covers("/usr/src/app/start.sh") && !interests().covers("/srv/x"));
    }

    #[test]
    fn wrappers() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            unwrap_wrapper("tini", &v(&["tini", "--", "node", "a.js"])).unwrap(),
            v(&["node", "a.js"])
        );
        assert_eq!(
            unwrap_wrapper("env", &v(&["env", "A=1", "node"])).unwrap(),
            v(&["node"])
        );
        assert_eq!(
            unwrap_wrapper("gosu", &v(&["gosu", "app", "dotnet", "x.dll"])).unwrap(),
            v(&["dotnet", "x.dll"])
        );
        assert!(unwrap_wrapper("node", &v(&["node"])).is_none());
    }
}
