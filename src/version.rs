//! Versions as npm, Node.js, Next.js, sharp, NuGet and glibc write them, compared by semver
//! precedence. One type for every runtime: facts parse them, rules compare them.

use std::cmp::Ordering;

/// A version as npm and Node.js write them: `MAJOR.MINOR.PATCH`, an optional `-prerelease`
/// and `+build`, ordered by semver precedence (build metadata ignored). Leading `v` and
/// missing minor/patch parts are tolerated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Version {
    pub(crate) major: u64,
    pub(crate) minor: u64,
    pub(crate) patch: u64,
    pub(crate) pre: Vec<PreId>,
}

/// One dot-separated identifier of a prerelease tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PreId {
    Num(u64),
    Alpha(String),
}

impl Version {
    pub(crate) fn new(major: u64, minor: u64, patch: u64) -> Version {
        Version {
            major,
            minor,
            patch,
            pre: Vec::new(),
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Version> {
        let s = s.trim();
        let s = s.strip_prefix('v').or_else(|| s.strip_prefix('=')).unwrap_or(s);
        let s = s.split_once('+').map_or(s, |(core, _)| core);
        let (core, pre) = match s.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (s, None),
        };
        let mut nums = core.split('.');
        let num = |p: Option<&str>| -> Option<u64> {
            match p {
                None => Some(0),
                Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => p.parse().ok(),
                Some(_) => None,
            }
        };
        let major = nums.next().filter(|p| !p.is_empty()).and_then(|p| num(Some(p)))?;
        let (minor, patch) = (num(nums.next())?, num(nums.next())?);
        if nums.next().is_some() {
            return None;
        }
        let pre = match pre {
            None => Vec::new(),
            Some(p) => {
                let ids: Vec<PreId> = p
                    .split('.')
                    .map(|id| match id.parse::<u64>() {
                        Ok(n) if id.bytes().all(|b| b.is_ascii_digit()) => PreId::Num(n),
                        _ => PreId::Alpha(id.to_string()),
                    })
                    .collect();
                if p.is_empty() || ids.iter().any(|i| matches!(i, PreId::Alpha(a) if a.is_empty())) {
                    return None;
                }
                ids
            }
        };
        Some(Version {
            major,
            minor,
            patch,
            pre,
        })
    }

    pub(crate) fn is_prerelease(&self) -> bool {
        !self.pre.is_empty()
    }

    /// The release this version leads up to (`15.5.14-canary.3` → `15.5.14`).
    pub(crate) fn core(&self) -> Version {
        Version::new(self.major, self.minor, self.patch)
    }

    /// Whether it is at least `major.minor.patch` (a prerelease of that version is not).
    pub(crate) fn at_least(&self, major: u64, minor: u64, patch: u64) -> bool {
        *self >= Version::new(major, minor, patch)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        for (i, id) in self.pre.iter().enumerate() {
            f.write_str(if i == 0 { "-" } else { "." })?;
            match id {
                PreId::Num(n) => write!(f, "{n}")?,
                PreId::Alpha(a) => f.write_str(a)?,
            }
        }
        Ok(())
    }
}

impl Ord for PreId {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PreId::Num(a), PreId::Num(b)) => a.cmp(b),
            (PreId::Num(_), PreId::Alpha(_)) => Ordering::Less,
            (PreId::Alpha(_), PreId::Num(_)) => Ordering::Greater,
            (PreId::Alpha(a), PreId::Alpha(b)) => a.cmp(b),
        }
    }
}

impl PartialOrd for PreId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => self.pre.cmp(&other.pre),
            })
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_like_semver() {
        let v = |s: &str| Version::parse(s).unwrap();
        assert!(v("15.5.14-canary.3") < v("15.5.14"));
        assert!(v("15.5.14") < v("15.5.15-canary.0"));
        assert!(v("1.0.0-alpha") < v("1.0.0-alpha.1"));
        assert!(v("1.0.0-alpha.1") < v("1.0.0-alpha.beta"));
        assert!(v("1.0.0-beta.2") < v("1.0.0-beta.11"));
        assert!(v("1.0.0-rc.1") < v("1.0.0"));
        assert_eq!(v("v20.11.1+build.5"), Version::new(20, 11, 1));
        assert_eq!(v("20"), Version::new(20, 0, 0));
        assert_eq!(v("16.2.0-canary.12").to_string(), "16.2.0-canary.12");
        for bad in [
            "",
            "x",
            "1.2.3.4",
            "1..2",
            "1.2.3-",
            "1.2.3-a..b",
            "-1.2.3",
            "1.2.x",
        ] {
            assert!(Version::parse(bad).is_none(), "{bad}");
        }
    }
}
