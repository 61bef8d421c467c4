//! The distribution (/etc/os-release) and the installed packages (dpkg, apk).

use super::{LARGE_FILE, SMALL_FILE};
use crate::tree::{FileTree, Interests};
use serde::Serialize;
use std::collections::BTreeMap;

/// What os-release says.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct OsRelease {
    pub(crate) id: Option<String>,
    pub(crate) id_like: Vec<String>,
    pub(crate) version_id: Option<String>,
    pub(crate) pretty_name: Option<String>,
    /// The file it was read from.
    pub(crate) path: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PackageManager {
    Dpkg,
    Apk,
}

/// One installed package.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct Package {
    pub(crate) version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) architecture: Option<String>,
}

/// The distribution family, for fixes that name a package manager, a package or a library
/// folder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Distro {
    /// Debian or a distribution derived from it (Ubuntu, distroless…): dpkg, apt.
    Debian,
    /// The RHEL family (RHEL, Fedora, CentOS, Rocky, Alma, Amazon, Oracle): rpm, dnf.
    Rhel,
    /// Alpine: apk.
    Alpine,
    #[default]
    Unknown,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct OsFacts {
    /// From the package database and os-release; not in the JSON, which reports both.
    #[serde(skip)]
    pub(crate) distro: Distro,
    pub(crate) release: Option<OsRelease>,
    pub(crate) package_manager: Option<PackageManager>,
    /// Installed packages by name (for dpkg, `name` or `name:arch` for foreign ones).
    #[serde(skip)]
    pub(crate) packages: BTreeMap<String, Package>,
    pub(crate) package_count: usize,
    /// Files the packages were read from.
    pub(crate) package_db: Vec<String>,
}

impl OsFacts {
    /// The family, checked in this order: Alpine (apk, or os-release's `ID`/`ID_LIKE`), Debian
    /// (dpkg, or os-release), the RHEL family (os-release).
    fn classify(&self) -> Distro {
        if self.package_manager == Some(PackageManager::Apk) || self.is_like(&["alpine"]) {
            Distro::Alpine
        } else if self.package_manager == Some(PackageManager::Dpkg) || self.is_like(&["debian", "ubuntu"]) {
            Distro::Debian
        } else if self.is_like(&["rhel", "fedora", "centos", "rocky", "almalinux", "amzn", "ol"]) {
            Distro::Rhel
        } else {
            Distro::Unknown
        }
    }

    fn is_like(&self, ids: &[&str]) -> bool {
        self.release.as_ref().is_some_and(|r| {
            r.id.as_deref().is_some_and(|id| ids.contains(&id))
                || r.id_like.iter().any(|l| ids.contains(&l.as_str()))
        })
    }

    pub(crate) fn package(&self, name: &str) -> Option<&Package> {
        self.packages.get(name)
    }
}

/// Where os-release may be, in the order systemd reads it.
const OS_RELEASE: [&str; 2] = ["/etc/os-release", "/usr/lib/os-release"];
const DPKG_STATUS: &str = "/var/lib/dpkg/status";
/// Distroless keeps one file per package here instead of a status file.
const DPKG_STATUS_D: &str = "/var/lib/dpkg/status.d";
const APK_INSTALLED: &str = "/lib/apk/db/installed";

/// The files [`derive`] reads.
pub(crate) fn interests() -> Interests {
    Interests::default()
        .keep(OS_RELEASE[0], SMALL_FILE)
        .keep(OS_RELEASE[1], SMALL_FILE)
        .keep(DPKG_STATUS, LARGE_FILE)
        .keep(&format!("{DPKG_STATUS_D}/*"), SMALL_FILE)
        .keep(APK_INSTALLED, LARGE_FILE)
}

pub(crate) fn derive(tree: &FileTree) -> OsFacts {
    let mut facts = OsFacts::default();
    for path in OS_RELEASE {
        if let Some(c) = tree.contents(path) {
            let mut r = parse_os_release(&String::from_utf8_lossy(&c.bytes));
            r.path = path.to_string();
            facts.release = Some(r);
            break;
        }
    }
    if let Some(c) = tree.contents(DPKG_STATUS) {
        facts.package_manager = Some(PackageManager::Dpkg);
        facts.package_db.push(DPKG_STATUS.into());
        parse_dpkg_status(&String::from_utf8_lossy(&c.bytes), &mut facts.packages);
    }
    if let Ok(Some(dir)) = tree.lookup(DPKG_STATUS_D) {
        if let crate::tree::NodeKind::Dir(children) = &tree.node(dir).kind {
            for &id in children.values() {
                // The folder may be a link to one nobody asked to keep.
                if let Some(c) = tree.kept_content(id) {
                    facts.package_manager = Some(PackageManager::Dpkg);
                    parse_dpkg_status(&String::from_utf8_lossy(&c.bytes), &mut facts.packages);
                }
            }
            facts.package_db.push(format!("{DPKG_STATUS_D}/"));
        }
    }
    if let Some(c) = tree.contents(APK_INSTALLED) {
        facts.package_manager = Some(PackageManager::Apk);
        facts.package_db.push(APK_INSTALLED.into());
        parse_apk_installed(&String::from_utf8_lossy(&c.bytes), &mut facts.packages);
    }
    facts.package_count = facts.packages.len();
    facts.distro = facts.classify();
    facts
}

/// `KEY=value` lines, values optionally quoted.
pub(crate) fn parse_os_release(text: &str) -> OsRelease {
    let mut r = OsRelease::default();
    for line in text.lines() {
        let Some((k, v)) = line.trim().split_once('=') else {
            continue;
        };
        let v = v.trim().trim_matches('"').trim_matches('\'').to_string();
        match k {
            "ID" => r.id = Some(v.to_ascii_lowercase()),
            "ID_LIKE" => r.id_like = v.split_whitespace().map(str::to_ascii_lowercase).collect(),
            "VERSION_ID" => r.version_id = Some(v),
            "PRETTY_NAME" => r.pretty_name = Some(v),
            _ => {}
        }
    }
    r
}

/// dpkg's status file: RFC 822 stanzas; only installed packages count.
pub(crate) fn parse_dpkg_status(text: &str, out: &mut BTreeMap<String, Package>) {
    for stanza in text.split("\n\n") {
        let (mut name, mut version, mut arch, mut installed) = (None, None, None, true);
        for line in stanza.lines() {
            if let Some(v) = line.strip_prefix("Package: ") {
                name = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("Version: ") {
                version = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("Architecture: ") {
                arch = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("Status: ") {
                installed = v.trim().ends_with(" installed");
            }
        }
        if let (Some(name), Some(version), true) = (name, version, installed) {
            out.insert(
                name,
                Package {
                    version,
                    architecture: arch,
                },
            );
        }
    }
}

/// apk's installed database: `P:name` / `V:version` / `A:arch` records separated by blank lines.
pub(crate) fn parse_apk_installed(text: &str, out: &mut BTreeMap<String, Package>) {
    for record in text.split("\n\n") {
        let (mut name, mut version, mut arch) = (None, None, None);
        for line in record.lines() {
            if let Some(v) = line.strip_prefix("P:") {
                name = Some(v.to_string());
            } else if let Some(v) = line.strip_prefix("V:") {
                version = Some(v.to_string());
            } else if let Some(v) = line.strip_prefix("A:") {
                arch = Some(v.to_string());
            }
        }
        if let (Some(name), Some(version)) = (name, version) {
            out.insert(
                name,
                Package {
                    version,
                    architecture: arch,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_os_release() {
        let r = parse_os_release(
            "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nID=debian\n",
        );
        assert_eq!(r.id.as_deref(), Some("debian"));
        assert_eq!(r.version_id.as_deref(), Some("12"));
        let u = parse_os_release("ID=ubuntu\nID_LIKE=debian\n");
        assert_eq!(u.id_like, ["debian"]);
    }

    #[test]
    fn distro_from_the_package_database_then_os_release() {
        let with = |id: &str, pm: Option<PackageManager>| {
            OsFacts {
                release: Some(parse_os_release(id)),
                package_manager: pm,
                ..OsFacts::default()
            }
            .classify()
        };
        assert_eq!(with("ID=ubuntu\nID_LIKE=debian\n", None), Distro::Debian);
        assert_eq!(
            with("ID=rocky\nID_LIKE=\"rhel centos fedora\"\n", None),
            Distro::Rhel
        );
        assert_eq!(with("ID=wolfi\n", Some(PackageManager::Apk)), Distro::Alpine);
        assert_eq!(
            with("ID=distroless\n", Some(PackageManager::Dpkg)),
            Distro::Debian
        );
        assert_eq!(with("ID=arch\n", None), Distro::Unknown);
        assert_eq!(OsFacts::default().distro, Distro::Unknown);
    }

    #[test]
    fn dpkg_and_apk() {
        let mut m = BTreeMap::new();
        parse_dpkg_status(
            "Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.36-9+deb12u14\n\nPackage: gone\nStatus: deinstall ok config-files\nVersion: 1\n",
            &mut m,
        );
        assert_eq!(m["libc6"].version, "2.36-9+deb12u14");
        assert!(!m.contains_key("gone"));
        let mut a = BTreeMap::new();
        parse_apk_installed(
            "C:Q1x\nP:musl\nV:1.2.5-r0\nA:x86_64\n\nP:jemalloc\nV:5.3.0-r5\n",
            &mut a,
        );
        assert_eq!(a["musl"].version, "1.2.5-r0");
        assert_eq!(a["jemalloc"].version, "5.3.0-r5");
    }
}
