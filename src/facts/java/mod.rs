//! Java: which JVM the image runs, its version, vendor, home and C library, and the options it
//! starts with, each with where it came from.
//!
//! How HotSpot and its launcher read options (openjdk/jdk `src/hotspot/share/runtime/arguments.cpp`
//! `Arguments::parse`, `src/java.base/share/native/libjli/args.c`):
//! * the JVM reads `JAVA_TOOL_OPTIONS` first, then the command line, then `_JAVA_OPTIONS`; the
//!   last occurrence of a flag wins;
//! * the `java` launcher of JDK 9 and later puts `JDK_JAVA_OPTIONS` before the command line's
//!   own arguments, and expands `@argfiles` (in both); JDK 8's launcher reads neither;
//! * `-XX:+IgnoreUnrecognizedVMOptions` is looked for in all of them before any is applied.
//!
//! What the start scripts of Gradle's `application` plugin do (a real one is Debian's
//! `gradle` 4.4.1 `/usr/share/gradle/bin/gradle`): `DEFAULT_JVM_OPTS='"-Xmx64m" "-Xms64m"'`,
//! then `eval set -- $DEFAULT_JVM_OPTS $JAVA_OPTS $<APP>_OPTS … -classpath … Main "$@"` and
//! `exec "$JAVACMD" "$@"`, where `JAVACMD` is `$JAVA_HOME/bin/java`, else `java` from PATH.

use super::command::config_argv;
use super::entrypoint::{Entrypoint, ProgramKind, DEFAULT_PATH};
use super::libc::{Libc, LibcFamily};
use super::os::OsFacts;
use super::Env;
use crate::shell;
use crate::tree::{FileTree, Interests, NodeKind};
use oci_spec::image::ImageConfiguration;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

mod buildpack;
pub(crate) mod classpath;
pub(crate) mod launcher;
mod locate;
pub(crate) mod memory;
mod options;
mod version;

use buildpack::*;
pub(crate) use locate::parse_release;
use locate::*;
use options::*;
pub(crate) use version::*;

/// The variables that may carry JVM options: [`LAUNCHER_VARIABLES`] and `JAVA_OPTS`, which the
/// usual start scripts put on the command line. A script that sets one in a way memlint cannot
/// work out leaves every option it might hold undecided.
pub(crate) const OPTION_VARIABLES: &[&str] = &[
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "_JAVA_OPTIONS",
    "JAVA_OPTS",
];

/// The variables HotSpot and its launcher read options from, in the order they apply them
/// (`JDK_JAVA_OPTIONS`: the launcher of JDK 9 and later): the first three of
/// [`OPTION_VARIABLES`].
pub(crate) const LAUNCHER_VARIABLES: &[&str] = OPTION_VARIABLES.split_at(3).0;

/// The environment variables the JVM, its launcher and start scripts read, from the image's
/// environment. This is the one place this module reads the environment.
struct JavaEnv<'a> {
    env: &'a Env,
}

impl<'a> JavaEnv<'a> {
    fn new(env: &'a Env) -> JavaEnv<'a> {
        JavaEnv { env }
    }

    /// A variable's value, when set and not empty.
    fn var(&self, key: &str) -> Option<&'a str> {
        self.env.non_empty(key)
    }
}

/// Which JVM implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Jvm {
    HotSpot,
    OpenJ9,
}

/// Where an option comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) enum OptionSource {
    #[serde(rename = "JAVA_TOOL_OPTIONS")]
    JavaToolOptions,
    #[serde(rename = "JDK_JAVA_OPTIONS")]
    JdkJavaOptions,
    #[serde(rename = "_JAVA_OPTIONS")]
    UnderscoreJavaOptions,
    /// The java command's arguments (Entrypoint/Cmd, or an `exec java …` line of a script).
    #[serde(rename = "command-line")]
    CommandLine,
    /// A start script's `DEFAULT_JVM_OPTS` (or `JAVA_OPTS`) assignment.
    #[serde(rename = "start-script")]
    StartScript,
    /// An environment variable a start script or command puts on the command line
    /// (`JAVA_OPTS`, `<APP>_OPTS`); [`JavaOption::variable`] names it.
    #[serde(rename = "env")]
    EnvVar,
    /// An `@argfile` on the command line or in `JDK_JAVA_OPTIONS`.
    #[serde(rename = "argfile")]
    Argfile,
    /// A vendor launcher's file (`jvm.options`, `cassandra-env.sh`) or the default its start
    /// script assigns (`KAFKA_HEAP_OPTS` in `kafka-server-start.sh`); see [`launcher`].
    #[serde(rename = "launcher")]
    Launcher,
}

impl OptionSource {
    /// The variable an option of this source is written in, when it is one memlint names
    /// (`JAVA_OPTS` for an [`OptionSource::EnvVar`] of that name), as a one-name list: where
    /// its fix goes.
    pub(crate) fn variable(self, variable: Option<&str>) -> Option<&'static [&'static str]> {
        match (self, variable) {
            (OptionSource::JavaToolOptions, _) => Some(&OPTION_VARIABLES[0..1]),
            (OptionSource::JdkJavaOptions, _) => Some(&OPTION_VARIABLES[1..2]),
            (OptionSource::UnderscoreJavaOptions, _) => Some(&OPTION_VARIABLES[2..3]),
            (OptionSource::EnvVar, Some(v)) if v == OPTION_VARIABLES[3] => Some(&OPTION_VARIABLES[3..4]),
            (OptionSource::EnvVar | OptionSource::Launcher, Some(v)) => launcher::LAUNCHER_VARIABLES
                .iter()
                .position(|l| *l == v)
                .map(|i| &launcher::LAUNCHER_VARIABLES[i..i + 1]),
            _ => None,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            OptionSource::JavaToolOptions => "JAVA_TOOL_OPTIONS",
            OptionSource::JdkJavaOptions => "JDK_JAVA_OPTIONS",
            OptionSource::UnderscoreJavaOptions => "_JAVA_OPTIONS",
            OptionSource::CommandLine => "the command line",
            OptionSource::StartScript => "the start script",
            OptionSource::EnvVar => "an environment variable",
            OptionSource::Argfile => "an @argfile",
            OptionSource::Launcher => "a vendor launcher",
        }
    }
}

/// One JVM option and where it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct JavaOption {
    pub(crate) option: String,
    pub(crate) source: OptionSource,
    /// The variable, for `env` (`JAVA_OPTS`, `GRADLE_OPTS`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) variable: Option<String>,
    /// The start script or argfile it is written in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) path: Option<String>,
    /// Why this JVM does not read it, when it does not (`JDK_JAVA_OPTIONS` on JDK 8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ignored: Option<String>,
}

impl JavaOption {
    /// Where it came from, in words: `JAVA_TOOL_OPTIONS`, `JAVA_OPTS (read by /app/bin/app)`,
    /// `DEFAULT_JVM_OPTS in /app/bin/app`, `@/app/jvm.args`.
    pub(crate) fn origin(&self) -> String {
        match (self.source, &self.variable, &self.path) {
            (OptionSource::EnvVar, Some(v), Some(p)) => format!("{v} (read by {p})"),
            (OptionSource::EnvVar, Some(v), None) => v.clone(),
            (OptionSource::StartScript, Some(v), Some(p)) => format!("{v} in {p}"),
            (OptionSource::Argfile, _, Some(p)) => format!("the argfile @{p}"),
            (OptionSource::Launcher, Some(v), Some(p)) => format!("{v} in {p}"),
            (OptionSource::Launcher, None, Some(p)) => p.clone(),
            (s, _, _) => s.as_str().to_string(),
        }
    }

    /// The option with where it came from: `-Xmx2g (from JAVA_TOOL_OPTIONS)`.
    pub(crate) fn described(&self) -> String {
        format!("{} (from {})", self.option, self.origin())
    }

    /// The size `-Xmx` or `-XX:MaxHeapSize=` sets, as written.
    pub(crate) fn max_heap_size(&self) -> Option<&str> {
        match self.option.strip_prefix("-Xmx") {
            Some(size) => Some(size),
            None if self.xx_name() == Some("MaxHeapSize") => self.xx_value(),
            None => None,
        }
    }

    /// The `-XX:` flag name, for `-XX:+Name`, `-XX:-Name` and `-XX:Name=value`.
    pub(crate) fn xx_name(&self) -> Option<&str> {
        let rest = self.option.strip_prefix("-XX:")?;
        let rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
        Some(rest.split_once('=').map_or(rest, |(n, _)| n))
    }

    /// `Some(true)` for `-XX:+Name`, `Some(false)` for `-XX:-Name`.
    pub(crate) fn xx_bool(&self) -> Option<bool> {
        let rest = self.option.strip_prefix("-XX:")?;
        match rest.as_bytes().first() {
            Some(b'+') => Some(true),
            Some(b'-') => Some(false),
            _ => None,
        }
    }

    /// The value of `-XX:Name=value`.
    pub(crate) fn xx_value(&self) -> Option<&str> {
        self.option.strip_prefix("-XX:")?.split_once('=').map(|(_, v)| v)
    }
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct JavaFacts {
    /// The `java` launcher that runs (canonical path), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) java: Option<String>,
    /// The JDK's folder (`JAVA_HOME`): where its `release` file and `bin/java` are.
    pub(crate) home: Option<String>,
    /// Whether the entrypoint runs this JVM (else it is only present in the image).
    pub(crate) entrypoint_runs_java: bool,
    /// How the JVM was found, in words.
    pub(crate) found_by: String,
    /// Normalised: `17.0.15`, `17.0.21.1`, `8.0.412`.
    pub(crate) version: Option<String>,
    /// As written where it was read (`1.8.0_412`, `jdk-17.0.12+7`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) version_as_written: Option<String>,
    /// The `release` file's path, `JAVA_VERSION`, or the package it came from.
    pub(crate) version_source: Option<String>,
    /// The release file's `IMPLEMENTOR` (`Debian`, `Eclipse Adoptium`…).
    pub(crate) vendor: Option<String>,
    pub(crate) jvm: Option<Jvm>,
    /// The release file's `LIBC` (`gnu`, `musl`), else that of the entrypoint.
    pub(crate) libc: Option<String>,
    /// The Gradle or Maven start script the entrypoint runs, when one does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) start_script: Option<String>,
    /// Every option, in the order the JVM applies them (the last of a flag wins).
    pub(crate) options: Vec<JavaOption>,
    /// Why the heap is sized at launch by a buildpack's memory calculator, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) buildpack_calculator: Option<String>,
    /// The vendor launcher (Elasticsearch, OpenSearch, Kafka, Cassandra) that starts this JVM,
    /// when one does: the heap options it adds are among [`JavaFacts::options`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) launcher: Option<launcher::Launcher>,
    /// Netty, gRPC-Netty and reactor-netty jars on its class path (they pool direct memory).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) direct_memory_jars: Vec<String>,
    /// What could not be read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) notes: Vec<String>,
    /// What the options commit of the container's memory (reported under `facts.memory`).
    #[serde(skip)]
    pub(crate) memory: memory::JvmMemory,
    /// Why the options are not all known, when a script sets one of [`OPTION_VARIABLES`] in a
    /// way memlint cannot work out: a rule that judges an option stays undecided.
    #[serde(skip)]
    pub(crate) options_undecided: Option<String>,
}

impl JavaFacts {
    pub(crate) fn parsed_version(&self) -> Option<JavaVersion> {
        self.version.as_deref().and_then(JavaVersion::parse)
    }

    /// The options this JVM reads, in order.
    pub(crate) fn effective(&self) -> impl Iterator<Item = &JavaOption> {
        self.options.iter().filter(|o| o.ignored.is_none())
    }

    /// The last `-XX:` option for flag `name` (the one that wins).
    pub(crate) fn last_xx(&self, name: &str) -> Option<&JavaOption> {
        self.effective().filter(|o| o.xx_name() == Some(name)).last()
    }

    /// Whether boolean flag `name` is set (`Some(true)`) or cleared by its last occurrence.
    pub(crate) fn xx_bool(&self, name: &str) -> Option<(bool, &JavaOption)> {
        let o = self.last_xx(name)?;
        o.xx_bool().map(|b| (b, o))
    }

    /// `-XX:+IgnoreUnrecognizedVMOptions` in effect (HotSpot looks for it in every source first).
    pub(crate) fn ignores_unrecognized(&self) -> Option<&JavaOption> {
        self.xx_bool("IgnoreUnrecognizedVMOptions")
            .filter(|(b, _)| *b)
            .map(|(_, o)| o)
    }

    /// Whether `-XX:+UnlockExperimentalVMOptions` is in effect before option `index` of
    /// [`JavaFacts::options`] (HotSpot wants the unlock first).
    pub(crate) fn unlocked_before(&self, index: usize) -> bool {
        self.options[..index.min(self.options.len())]
            .iter()
            .rfind(|o| o.ignored.is_none() && o.xx_name() == Some("UnlockExperimentalVMOptions"))
            .is_some_and(|o| o.xx_bool() == Some(true))
    }

    /// An explicit heap bound: `-Xmx`, `-XX:MaxHeapSize=` or `-XX:MaxRAM=`.
    pub(crate) fn heap_bound(&self) -> Option<&JavaOption> {
        self.effective()
            .filter(|o| {
                o.max_heap_size().is_some() || o.xx_name() == Some("MaxRAM") && o.xx_value().is_some()
            })
            .last()
    }

    /// Why HotSpot `v` refuses option `index` of [`JavaFacts::options`] and stops at start,
    /// when it does and `-XX:+IgnoreUnrecognizedVMOptions` does not cover it: JDK 8 accepts
    /// whatever fails to parse under that flag, JDK 9 and later only what they do not know.
    pub(crate) fn refusal(&self, v: JavaVersion, index: usize) -> Option<Refusal> {
        let o = self.options.get(index).filter(|o| o.ignored.is_none())?;
        let name = o.xx_name()?;
        let refusal = match flag_support(v, name)? {
            FlagSupport::Absent => Refusal::Unrecognized,
            FlagSupport::Experimental if !self.unlocked_before(index) => Refusal::Experimental,
            FlagSupport::Experimental => return None,
            FlagSupport::Product => {
                // JDK 8 reads the *RAMPercentage flags as doubles only: `75` is refused.
                let integer = o
                    .xx_value()
                    .is_some_and(|x| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit()));
                if v.feature == 8 && name.ends_with("RAMPercentage") && integer {
                    Refusal::ImproperlySpecified
                } else {
                    return None;
                }
            }
        };
        let silenced =
            self.ignores_unrecognized().is_some() && (v.feature == 8 || refusal == Refusal::Unrecognized);
        (!silenced).then_some(refusal)
    }

    /// A TrimNativeHeapInterval above 0 that this JDK accepts: a product flag, or an
    /// experimental one unlocked before it.
    pub(crate) fn trims_native_heap(&self) -> Option<&JavaOption> {
        let v = self.parsed_version()?;
        let (i, o) = self
            .options
            .iter()
            .enumerate()
            .rfind(|(_, o)| o.ignored.is_none() && o.xx_name() == Some("TrimNativeHeapInterval"))?;
        let value: u64 = o.xx_value()?.trim().parse().ok()?;
        let ok = match flag_support(v, "TrimNativeHeapInterval")? {
            FlagSupport::Product => true,
            FlagSupport::Experimental => self.unlocked_before(i),
            FlagSupport::Absent => false,
        };
        (ok && value > 0).then_some(o)
    }
}

/// What [`derive`] reads whatever the config says: the `release` files of JDKs where they are
/// usually installed, and start scripts where `installDist` puts them.
pub(crate) fn interests() -> Interests {
    let i = JDK_HOMES.iter().fold(Interests::default(), |i, h| {
        i.keep(&format!("{h}/release"), RELEASE_CAP)
    });
    START_SCRIPT_FOLDERS
        .iter()
        .fold(i, |i, d| i.script(d))
        // The JDK a vendor bundles (`/usr/share/opensearch/jdk`).
        .keep("/usr/share/*/jdk/release", RELEASE_CAP)
        .union(launcher::interests())
}

/// What the config adds: the `release` file under its `JAVA_HOME`, and the `@argfiles` its
/// Entrypoint and Cmd name (absolute, or relative to its working folder).
pub(crate) fn interests_for(config: &ImageConfiguration) -> Interests {
    let c = config.config().as_ref();
    let env = c.and_then(|c| c.env().clone()).unwrap_or_default();
    let mut out = launcher::interests_for(config);
    if let Some(home) = env.iter().rev().find_map(|e| e.strip_prefix("JAVA_HOME=")) {
        if home.starts_with('/') {
            out = out.keep(&format!("{}/release", home.trim_end_matches('/')), RELEASE_CAP);
        }
    }
    let working_dir = c
        .and_then(|c| c.working_dir().clone())
        .filter(|w| w.starts_with('/'))
        .unwrap_or_else(|| "/".into());
    for a in config_argv(config)
        .iter()
        .filter_map(|a| a.strip_prefix('@'))
        .filter(|a| !a.is_empty())
    {
        out = out.keep(&absolute(&working_dir, a), ARGFILE_CAP);
    }
    out
}

fn absolute(dir: &str, p: &str) -> String {
    if p.starts_with('/') {
        p.to_string()
    } else {
        format!("{}/{p}", dir.trim_end_matches('/'))
    }
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

fn parent(p: &str) -> Option<&str> {
    p.rsplit_once('/')
        .map(|(d, _)| if d.is_empty() { "/" } else { d })
}

/// The contents of a small file: through the declared read where an interest covers it, else
/// what the reader kept for a path the image chose (nothing, unless a script interest kept it).
fn text_of(tree: &FileTree, path: &str) -> Option<(String, bool)> {
    let content = if tree.keeps(path) {
        tree.contents(path)
    } else {
        tree.lookup(path)
            .ok()
            .flatten()
            .and_then(|id| tree.kept_content(id))
    }?;
    Some((
        String::from_utf8_lossy(&content.bytes).into_owned(),
        content.truncated,
    ))
}

fn is_dir(tree: &FileTree, path: &str) -> bool {
    tree.lookup(path)
        .ok()
        .flatten()
        .is_some_and(|id| tree.node(id).is_dir())
}

pub(crate) fn derive(
    tree: &FileTree,
    env: &Env,
    entry: &Entrypoint,
    os: &OsFacts,
    libc: &Libc,
    config: Option<&ImageConfiguration>,
    launcher: Option<launcher::Launcher>,
) -> Option<JavaFacts> {
    let jenv = JavaEnv::new(env);
    let mut located = match locate(tree, &jenv, entry) {
        Some(l) => l,
        None => bundled_jdk(tree, launcher.as_ref()?)?,
    };
    if let (Some(l), false) = (&launcher, located.runs) {
        located.runs = true;
        located.found_by = format!(
            "the entrypoint runs {}'s launcher {}, which runs java",
            l.vendor.name(),
            l.script
        );
    }
    let mut facts = JavaFacts {
        java: located.java.clone(),
        home: located.home.clone(),
        entrypoint_runs_java: located.runs,
        found_by: located.found_by.clone(),
        start_script: located.script.as_ref().map(|s| s.path.clone()),
        ..Default::default()
    };
    read_home(tree, &jenv, os, &mut facts);
    if facts.libc.is_none() {
        facts.libc = match libc.family {
            LibcFamily::Glibc => Some("gnu".into()),
            LibcFamily::Musl => Some("musl".into()),
            _ => None,
        };
    }
    let version = facts.parsed_version();
    let mut opts = Options::default();
    if let Some(v) = jenv.var("JAVA_TOOL_OPTIONS") {
        for w in shell::split_words(v, shell::SH) {
            opts.push(w, OptionSource::JavaToolOptions, None, None, None);
        }
    }
    if located.runs {
        // The launcher of JDK 9 and later reads JDK_JAVA_OPTIONS; JDK 8's does not.
        if let Some(v) = jenv.var("JDK_JAVA_OPTIONS") {
            let ignored = version.filter(|v| v.feature < 9).map(|v| {
                format!(
                    "the java launcher of JDK {} does not read JDK_JAVA_OPTIONS (JDK 9 and later do)",
                    v.feature
                )
            });
            let words = shell::split_words(v, shell::SH);
            if ignored.is_some() {
                for w in words {
                    opts.push(w, OptionSource::JdkJavaOptions, None, None, ignored.clone());
                }
            } else {
                command_line(
                    tree,
                    &jenv,
                    entry,
                    &words,
                    OptionSource::JdkJavaOptions,
                    version,
                    &mut opts,
                    true,
                );
            }
        }
        if let Some(script) = &located.script {
            script_options(script, &jenv, &mut opts);
        }
        command_line(
            tree,
            &jenv,
            entry,
            &located.args,
            OptionSource::CommandLine,
            version,
            &mut opts,
            false,
        );
    }
    // A vendor launcher's options are on java's command line.
    for o in launcher.iter().flat_map(|l| l.options.iter()) {
        opts.push(
            o.option.clone(),
            o.source,
            o.variable.as_deref(),
            o.path.as_deref(),
            None,
        );
    }
    if let Some(v) = jenv.var("_JAVA_OPTIONS") {
        for w in shell::split_words(v, shell::SH) {
            opts.push(w, OptionSource::UnderscoreJavaOptions, None, None, None);
        }
    }
    facts.direct_memory_jars = classpath::direct_memory_jars(
        tree,
        &located.args,
        jenv.var("CLASSPATH"),
        &entry.working_dir,
        launcher.as_ref().map(|l| l.home.as_str()),
    );
    facts.launcher = launcher;
    facts.options = opts.list;
    facts.notes.extend(opts.notes);
    facts.buildpack_calculator = buildpack(tree, config);
    facts.memory = memory::derive(&facts);
    facts.options_undecided = env.first_undecided(OPTION_VARIABLES);
    Some(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_files_and_argfiles() {
        let r = parse_release("IMPLEMENTOR=\"Debian\"\nJAVA_VERSION=\"17.0.21.1\"\nLIBC=\"gnu\"\nlower=x\n");
        assert_eq!(r["JAVA_VERSION"], "17.0.21.1");
        assert_eq!(r["IMPLEMENTOR"], "Debian");
        assert!(!r.contains_key("lower"));
        assert_eq!(
            argfile_words("# comment\n-Xmx1g \"-Dname=a b\" # trailing\n-Da#b=1\n"),
            ["-Xmx1g", "-Dname=a b", "-Da#b=1"]
        );
        assert_eq!(whole_variable("$JAVA_OPTS"), Some("JAVA_OPTS"));
        assert_eq!(whole_variable("${JAVA_OPTS}"), Some("JAVA_OPTS"));
        assert_eq!(whole_variable("$JAVA_OPTS-x"), None);
    }

    fn libc() -> Libc {
        Libc {
            family: LibcFamily::Glibc,
            version: None,
            entrypoint: None,
            present: Vec::new(),
            loader: None,
            evidence: Vec::new(),
        }
    }

    /// Without a release file: the distribution's package of the JDK in that folder (the
    /// folder's feature number picks it among several), else `JAVA_VERSION`.
    #[test]
    fn version_from_the_package_or_java_version() {
        use crate::facts::os::Package;
        use crate::tree::{EntryKind, LayerEntry};
        let home = "usr/lib/jvm/java-11-openjdk-amd64";
        let tree = FileTree::from_entries(vec![
            LayerEntry::new(&format!("{home}/bin/java"), EntryKind::File).with_mode(0o755),
            LayerEntry::new(&format!("{home}/lib/server/libjvm.so"), EntryKind::File),
        ])
        .unwrap()
        .keeping(interests());
        let mut os = OsFacts::default();
        for (name, version) in [
            ("openjdk-17-jre-headless", "17.0.15+6-1~deb12u1"),
            ("openjdk-11-jre-headless", "11.0.14+9-1~deb11u1"),
        ] {
            os.packages.insert(
                name.into(),
                Package {
                    version: version.into(),
                    architecture: None,
                },
            );
        }
        let entry = Entrypoint::default();
        let j = derive(&tree, &Env::default(), &entry, &os, &libc(), None, None).unwrap();
        assert_eq!(j.home.as_deref(), Some("/usr/lib/jvm/java-11-openjdk-amd64"));
        assert_eq!(j.version.as_deref(), Some("11.0.14"));
        assert_eq!(
            j.version_source.as_deref(),
            Some("the package openjdk-11-jre-headless")
        );
        assert_eq!(j.jvm, Some(Jvm::HotSpot));
        assert!(!j.entrypoint_runs_java);
        // Temurin's image variable, when nothing else says.
        let env = Env::from_pairs(["JAVA_VERSION=jdk-17.0.12+7"]);
        let j = derive(&tree, &env, &entry, &OsFacts::default(), &libc(), None, None).unwrap();
        assert_eq!(j.version.as_deref(), Some("17.0.12"));
        assert_eq!(j.version_as_written.as_deref(), Some("jdk-17.0.12+7"));
        assert_eq!(j.version_source.as_deref(), Some("JAVA_VERSION"));
        assert_eq!(j.libc.as_deref(), Some("gnu"));
    }

    #[test]
    fn option_names_and_values() {
        let o = |s: &str| JavaOption {
            option: s.into(),
            source: OptionSource::CommandLine,
            variable: None,
            path: None,
            ignored: None,
        };
        assert_eq!(
            o("-XX:+UseCGroupMemoryLimitForHeap").xx_name(),
            Some("UseCGroupMemoryLimitForHeap")
        );
        assert_eq!(o("-XX:-UseContainerSupport").xx_bool(), Some(false));
        assert_eq!(o("-XX:MaxRAMPercentage=75").xx_value(), Some("75"));
        assert_eq!(o("-Xmx1g").xx_name(), None);
        let facts = JavaFacts {
            version: Some("17.0.9".into()),
            options: vec![
                o("-XX:TrimNativeHeapInterval=1000"),
                o("-XX:+UnlockExperimentalVMOptions"),
                o("-XX:+IgnoreUnrecognizedVMOptions"),
                o("-XX:-IgnoreUnrecognizedVMOptions"),
            ],
            ..Default::default()
        };
        // The unlock comes after the flag: 17.0.9 refuses it.
        assert!(facts.trims_native_heap().is_none());
        assert!(facts.ignores_unrecognized().is_none(), "the last occurrence wins");
        let mut unlocked = facts.clone();
        unlocked.options.rotate_left(1);
        assert!(unlocked.trims_native_heap().is_some());
    }
}
