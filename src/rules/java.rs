//! What the JVM rules share: where an option's fix goes in a Dockerfile, and the rewritten
//! line that drops or replaces it.

use crate::facts::java::{JavaFacts, JavaOption, OptionSource};
use crate::facts::Facts;
use crate::finding::{Anchor, Evidence};

/// The instruction that set an option: its `ENV`, else `CMD`/`ENTRYPOINT` (a start script and
/// an argfile are reached from there).
pub(crate) fn anchor_of(o: &JavaOption) -> Anchor {
    match o.source.variable(o.variable.as_deref()) {
        Some(variable) => Anchor::Env(variable),
        None => Anchor::Command,
    }
}

/// The option and where it is written, as evidence.
pub(crate) fn option_evidence(o: &JavaOption) -> Evidence {
    Evidence::naming(format!("{} from {}", o.option, o.origin()), o.path.iter())
}

/// The JVM's version, vendor and where they were read, as evidence.
pub(crate) fn jvm_evidence(j: &JavaFacts) -> Evidence {
    let mut text = format!("Java {}", j.version.as_deref().unwrap_or("(version unknown)"));
    if let Some(v) = &j.vendor {
        text.push_str(&format!(" ({v})"));
    }
    if let Some(h) = &j.home {
        text.push_str(&format!(" at {h}"));
    }
    if let Some(s) = &j.version_source {
        text.push_str(&format!(", version from {s}"));
    }
    let paths: Vec<String> = j
        .version_source
        .iter()
        .filter(|s| s.starts_with('/'))
        .cloned()
        .chain(j.java.clone())
        .collect();
    Evidence::naming(text, paths)
}

/// The Dockerfile line (or the words) that set `o`'s source again with `o` replaced by `with`
/// (or dropped when `None`).
pub(crate) fn rewrite(f: &Facts, j: &JavaFacts, o: &JavaOption, with: Option<&str>) -> String {
    let same_source = |x: &JavaOption| x.source == o.source && x.variable == o.variable && x.path == o.path;
    let words: Vec<String> = j
        .options
        .iter()
        .filter(|x| same_source(x))
        .filter_map(|x| {
            if x == o {
                with.map(str::to_string)
            } else {
                Some(x.option.clone())
            }
        })
        .collect();
    let what = match with {
        Some(w) => format!("replace {} with {w}", o.option),
        None => format!("remove {}", o.option),
    };
    let env_line = |var: &str| {
        if words.is_empty() {
            match f.env.var(var).map(|v| &v.origin) {
                Some(crate::facts::env::Origin::Manifest { .. }) => super::fixes::set_env(f, var, None),
                _ => format!("# remove `ENV {var}` (it holds nothing else)"),
            }
        } else {
            super::fixes::set_env_quoted(f, var, Some(&words.join(" ")))
        }
    };
    match o.source {
        OptionSource::JavaToolOptions => env_line("JAVA_TOOL_OPTIONS"),
        OptionSource::JdkJavaOptions => env_line("JDK_JAVA_OPTIONS"),
        OptionSource::UnderscoreJavaOptions => env_line("_JAVA_OPTIONS"),
        OptionSource::EnvVar => env_line(o.variable.as_deref().unwrap_or("JAVA_OPTS")),
        OptionSource::CommandLine => {
            let argv: Vec<String> = f
                .entrypoint
                .args
                .iter()
                .flat_map(|a| {
                    if *a == o.option {
                        with.map(|w| w.split(' ').map(str::to_string).collect())
                            .unwrap_or_default()
                    } else {
                        vec![a.clone()]
                    }
                })
                .collect();
            format!(
                "CMD {}",
                serde_json::to_string(&argv).unwrap_or_else(|_| "[…]".to_string())
            )
        }
        OptionSource::StartScript => format!(
            "# in {}: {what} (for a Gradle `application`, in `applicationDefaultJvmArgs`; Maven's appassembler: `extraJvmArguments`), then rebuild",
            o.origin()
        ),
        OptionSource::Argfile | OptionSource::Launcher => format!("# in {}: {what}", o.origin()),
    }
}

/// `ENV JAVA_TOOL_OPTIONS="…"` with `extra` added to what the image already sets there.
pub(crate) fn tool_options_with(j: &JavaFacts, extra: &str) -> String {
    let mut words: Vec<String> = j
        .options
        .iter()
        .filter(|o| o.source == OptionSource::JavaToolOptions)
        .map(|o| o.option.clone())
        .collect();
    words.push(extra.to_string());
    format!("ENV JAVA_TOOL_OPTIONS=\"{}\"", words.join(" "))
}
