use super::{Outcome, Rule};
use crate::facts::go::memlimit::{say_readings, GoMemLimit, Reading, Source, KEY};
use crate::facts::go::{reads_gomemlimit, GoBinary, MemLimit};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence, Severity};

pub(crate) const RULE: Rule = Rule {
    id: "gomemlimit-malformed",
    severity: Severity::Error,
    title: "GOMEMLIMIT is not in the syntax the Go runtime accepts: Go programs stop at start",
    doc: include_str!("../../rules/gomemlimit-malformed.md"),
    tags: &["memory", "configuration", "go"],
    check,
    anchor: Anchor::Env(&[KEY]),
};

fn check(f: &Facts) -> Outcome {
    let mut readers: Vec<&GoBinary> = f
        .go
        .binaries
        .iter()
        .filter(|b| reads_gomemlimit(b.go_version.as_deref()))
        .collect();
    // The programs the entrypoint runs first.
    readers.sort_by_key(|b| !b.on_entrypoint);
    if readers.is_empty() {
        return Outcome::none();
    }
    let (value, source, found) = match &f.go.memlimit {
        GoMemLimit::Unset => return Outcome::none(),
        GoMemLimit::Undecided { why } => {
            return Outcome::undecided(format!(
                "{why}; a Go program that reads it is in the image ({})",
                readers[0].path
            ))
        }
        GoMemLimit::Known {
            read: MemLimit::Malformed,
            value,
            source,
            meant,
            ..
        } => (value.clone(), source, meant),
        GoMemLimit::Known { .. } => return Outcome::none(),
    };
    let origin = source.describe();
    let programs: Vec<String> = readers
        .iter()
        .take(3)
        .map(|b| format!("{} ({})", b.path, b.go_version.as_deref().unwrap_or("go")))
        .collect();
    let more = match readers.len() {
        n if n > 3 => format!(" and {} more", n - 3),
        _ => String::new(),
    };
    let who = if readers[0].on_entrypoint {
        format!("the entrypoint's Go program {}", programs[0])
    } else {
        format!("the Go programs in the image ({}{more})", programs.join(", "))
    };
    let mut message = format!(
        "{KEY}={value} ({origin}) is not a size the Go runtime accepts: {who} stops at start with `fatal error: malformed GOMEMLIMIT`"
    );
    if let Some(said) = say_readings(&value, found) {
        message.push_str(&format!("; {said}"));
    }
    let mut finding = RULE.finding(message);
    finding = match (source, f.env.evidence(KEY)) {
        (Source::Command { argv }, _) => finding.evidence(Evidence::plain(format!(
            "{KEY}={value} passed by the image's command `{argv}`"
        ))),
        (_, Some(e)) => finding.evidence(e),
        (_, None) => finding,
    };
    for b in readers.iter().take(3) {
        finding = finding.evidence(Evidence::naming(
            format!(
                "{} is a Go program built by {}{}, which reads {KEY} at start",
                b.path,
                b.go_version.as_deref().unwrap_or("Go"),
                if b.on_entrypoint {
                    " that the entrypoint runs"
                } else {
                    ""
                }
            ),
            [b.path.clone()],
        ));
    }
    finding = finding.evidence(Evidence::plain(
        "the Go runtime accepts a whole number of bytes with an optional B, KiB, MiB, GiB or TiB suffix, or off (runtime parseByteCount)",
    ));
    if matches!(source, Source::Script { .. } | Source::Command { .. }) {
        finding = finding.anchor(Anchor::Command);
    }
    Outcome::one(finding.fix(fix(source, &value, found)))
}

/// The line to write, where the value came from.
fn fix(source: &Source, value: &str, found: &[Reading]) -> String {
    let line = |v: &str| match source {
        Source::Image => format!("ENV {KEY}={v}"),
        Source::Script { script, line } => {
            format!("# in {script} line {line}:\nexport {KEY}={v}")
        }
        Source::Command { argv } => format!("# in the image's command `{argv}`:\n{KEY}={v}"),
        Source::Manifest { line } => {
            format!("# in the manifest's env, line {line}:\n- name: {KEY}\n  value: \"{v}\"")
        }
    };
    match found {
        [] => format!(
            "{}\n# {value} has no reading memlint can convert: GOMEMLIMIT takes a whole number of bytes with an optional B, KiB, MiB, GiB or TiB suffix (about 90 % of the container's memory limit), or off",
            line("512MiB")
        ),
        [one] => line(&one.value),
        [first, rest @ ..] => {
            let mut out = format!("{}\n# if {value} meant {}", line(&first.value), first.meaning);
            for r in rest {
                out.push_str(&format!(
                    "; or, if it meant {}:\n{}",
                    r.meaning,
                    line(&r.value)
                ));
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::go::memlimit::readings;
    use crate::facts::testing::TestImage;

    fn server(env: &[&str], cmd: &[&str]) -> Outcome {
        let f = TestImage::new()
            .glibc()
            .go("/app/server", "go1.22.1", &[])
            .file("/usr/bin/env", "")
            .env(&["PATH=/usr/bin:/bin"])
            .env(env)
            .cmd(cmd)
            .facts();
        check(&f)
    }

    #[test]
    fn fires_on_a_value_the_runtime_refuses_with_what_it_meant() {
        let o = server(&["GOMEMLIMIT=512Mi"], &["/app/server"]);
        assert_eq!(o.findings.len(), 1, "{o:?}");
        let f = &o.findings[0];
        assert_eq!(f.severity, Severity::Error);
        assert!(f.message.starts_with("GOMEMLIMIT=512Mi (set by the image's ENV) is not a size the Go runtime accepts"), "{}", f.message);
        assert_eq!(f.fix, "ENV GOMEMLIMIT=512MiB");
        // `env GOMEMLIMIT=… prog` in the command: the fix goes there.
        let o = server(&[], &["env", "GOMEMLIMIT=1G", "/app/server"]);
        assert_eq!(o.findings.len(), 1, "{o:?}");
        assert!(o.findings[0].fix.starts_with("# in the image's command `env GOMEMLIMIT=1G /app/server`:\nGOMEMLIMIT=1GiB"), "{}", o.findings[0].fix);
        assert_eq!(o.findings[0].anchor, Anchor::Command);
    }

    #[test]
    fn silent_on_a_value_the_runtime_takes_or_one_the_command_clears() {
        for env in ["GOMEMLIMIT=512MiB", "GOMEMLIMIT=off", "GOMEMLIMIT=", "OTHER=1"] {
            let o = server(&[env], &["/app/server"]);
            assert!(o.findings.is_empty() && o.undecided.is_none(), "{env}: {o:?}");
        }
        let o = server(&["GOMEMLIMIT=512Mi"], &["env", "-u", "GOMEMLIMIT", "/app/server"]);
        assert!(o.findings.is_empty(), "{o:?}");
    }

    #[test]
    fn undecided_when_the_command_computes_it() {
        let o = server(&[], &["env", "GOMEMLIMIT=$LIMIT", "/app/server"]);
        assert!(o.findings.is_empty(), "{o:?}");
        assert!(o.undecided.is_some_and(|w| w.contains("cannot work out")));
    }

    #[test]
    fn fixes_name_the_source() {
        let image = fix(&Source::Image, "512Mi", &readings("512Mi"));
        assert_eq!(image, "ENV GOMEMLIMIT=512MiB");
        let script = Source::Script {
            script: "/start".into(),
            line: 2,
        };
        let s = fix(&script, "400m", &readings("400m"));
        assert_eq!(s, "# in /start line 2:\nexport GOMEMLIMIT=400MiB");
        let both = fix(&Source::Image, "1G", &readings("1G"));
        assert!(both.starts_with("ENV GOMEMLIMIT=1GiB\n# if 1G meant 1 GiB"), "{both}");
        assert!(both.ends_with("\nENV GOMEMLIMIT=1000000000"), "{both}");
        assert!(fix(&Source::Image, "-1", &[]).starts_with("ENV GOMEMLIMIT=512MiB\n# -1 has no reading"));
    }
}
