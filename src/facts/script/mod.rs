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
//!
//! The interpreter is [`interpreter`]; this module is what memlint reads of a script with it:
//! the final `exec`, and what is exported on the way there.

mod interpreter;

#[cfg(test)]
pub(crate) use interpreter::{excerpt, glob_match, MAX_QUOTED, MAX_SEARCH_NODES, MAX_SETTINGS};
pub(crate) use interpreter::{Budget, Context, ImageBudget};

use super::env::{Env, Var};
use interpreter::{assignment, raw_words};

/// The command of an `exec` line (`exec prog …`, `NAME=VALUE exec prog …`), from `exec` on.
pub(crate) fn exec_command(line: &str) -> Option<&str> {
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
pub(crate) fn final_exec_line(text: &str) -> Option<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| exec_command(l).is_some())
        .map(|(i, _)| i)
        .last()
}

/// What `text` (the script at `script`) exports before its final `exec`, in order, read
/// against `env` (what the process starts with) and the image.
pub(crate) fn exports(text: &str, script: &str, env: &Env, cx: &Context) -> Vec<Var> {
    let Some(last) = final_exec_line(text) else {
        return Vec::new();
    };
    interpreter::run(text, last, script, env, cx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::Arch;
    use crate::facts::env::Value;
    use crate::tree::FileTree;
    use crate::tree::{EntryKind, LayerEntry};
    use std::sync::Arc;

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
        assert!(!e.set_by_script("LD_PRELOAD"));
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
