//! Fixes that fit the image at hand: the package and path for its distribution and
//! architecture, or the library the image already has.

use crate::facts::allocator::Allocator;
use crate::facts::os::Distro;
use crate::facts::preload::{Preload, PreloadSource};
use crate::facts::Facts;

use super::preload::QUOTED_VALUE_MAX;

/// Where the distribution's jemalloc package puts the library for this image's architecture.
pub(crate) fn jemalloc_path(f: &Facts) -> String {
    if f.libc.family == crate::facts::libc::LibcFamily::Musl {
        return "/usr/lib/libjemalloc.so.2".to_string();
    }
    match (f.os.distro, f.loader.multiarch_triplet) {
        (Distro::Debian, Some(t)) => format!("/usr/lib/{t}/libjemalloc.so.2"),
        (Distro::Rhel, _) => "/usr/lib64/libjemalloc.so.2".to_string(),
        _ => "/usr/lib/libjemalloc.so.2".to_string(),
    }
}

/// The RUN line that installs jemalloc on this distribution.
pub(crate) fn install_jemalloc(f: &Facts) -> String {
    match f.os.distro {
        Distro::Debian => "RUN apt-get update && apt-get install -y --no-install-recommends libjemalloc2 && rm -rf /var/lib/apt/lists/*".to_string(),
        Distro::Rhel => "RUN dnf install -y jemalloc && dnf clean all   # on RHEL, from EPEL".to_string(),
        Distro::Alpine => "RUN apk add --no-cache jemalloc".to_string(),
        Distro::Unknown => "# install your distribution's jemalloc package (Debian/Ubuntu libjemalloc2, Alpine and Fedora jemalloc)".to_string(),
    }
}

/// A jemalloc of this image's architecture that is already in the image.
pub(crate) fn jemalloc_in_image(f: &Facts) -> Option<String> {
    f.allocator
        .installed_not_in_effect
        .iter()
        .find(|l| l.name == Allocator::Jemalloc)
        .map(|l| l.path.clone())
}

/// `ENV KEY=VALUE` (or how to remove it, for `None`); where the Kubernetes manifest sets `KEY`
/// (`lint --k8s`), its `env` entry instead, which wins over any `ENV`.
pub(crate) fn set_env(f: &Facts, key: &str, value: Option<&str>) -> String {
    env_fix(f, key, value, false)
}

/// [`set_env`] with the `ENV` value always in quotes, as options lists are written
/// (`ENV NODE_OPTIONS="--max-old-space-size=768"`).
pub(crate) fn set_env_quoted(f: &Facts, key: &str, value: Option<&str>) -> String {
    env_fix(f, key, value, true)
}

fn env_fix(f: &Facts, key: &str, value: Option<&str>, quoted: bool) -> String {
    match f.env.var(key).map(|v| &v.origin) {
        Some(crate::facts::env::Origin::Manifest { line }) => match value {
            // A JSON string is a YAML double-quoted scalar.
            Some(v) => format!(
                "# in the manifest's env, line {line}:\n- name: {key}\n  value: {}",
                serde_json::to_string(v).unwrap_or_default()
            ),
            None => format!("# remove the env entry {key} at line {line} of the manifest"),
        },
        _ => match value {
            Some(v) if quoted || v.contains(char::is_whitespace) => format!("ENV {key}=\"{v}\""),
            Some(v) => format!("ENV {key}={v}"),
            None => format!("remove `ENV {key}`"),
        },
    }
}

/// `ENV LD_PRELOAD=…` with `lib` added to what the image already preloads (entries that do not
/// work are dropped).
pub(crate) fn preload_env_with(f: &Facts, lib: &str) -> String {
    let mut entries: Vec<String> = f
        .preloads
        .iter()
        .filter(|p| p.source == PreloadSource::Env && p.status == crate::facts::preload::PreloadStatus::Ok)
        .map(|p| p.entry.clone())
        .filter(|e| e != lib)
        .collect();
    entries.insert(0, lib.to_string());
    set_env(f, "LD_PRELOAD", Some(&entries.join(":")))
}

/// The Dockerfile lines that put jemalloc in effect in this image.
pub(crate) fn jemalloc_fix(f: &Facts) -> String {
    match jemalloc_in_image(f) {
        Some(path) => preload_env_with(f, &path),
        None => format!(
            "{}\n{}",
            install_jemalloc(f),
            preload_env_with(f, &jemalloc_path(f))
        ),
    }
}

/// The preload value with one entry replaced (or removed when `with` is `None`); for a value
/// too long to quote ([`QUOTED_VALUE_MAX`]), what to change in it, naming the entry only.
pub(crate) fn replace_preload(f: &Facts, p: &Preload, with: Option<&str>) -> String {
    match p.source {
        PreloadSource::Env => {
            let value = f.env.get("LD_PRELOAD").unwrap_or("");
            if value.len() > QUOTED_VALUE_MAX {
                return match with {
                    Some(w) => format!("# in ENV LD_PRELOAD, replace {} with {w}", p.entry),
                    None => format!("# in ENV LD_PRELOAD, remove {}", p.entry),
                };
            }
            let entries: Vec<String> = value
                .split([' ', ':'])
                .filter(|e| !e.is_empty())
                .filter_map(|e| {
                    if e == p.entry {
                        with.map(str::to_string)
                    } else {
                        Some(e.to_string())
                    }
                })
                .collect();
            if entries.is_empty() {
                set_env(f, "LD_PRELOAD", None)
            } else {
                set_env(f, "LD_PRELOAD", Some(&entries.join(":")))
            }
        }
        PreloadSource::Script => {
            let at = format!(
                "{} line {}",
                p.script.as_deref().unwrap_or("the entrypoint script"),
                p.line.unwrap_or(0)
            );
            match with {
                Some(w) => format!("# in {at}, export {w} instead of {}", p.entry),
                None => format!("# in {at}, drop {} from LD_PRELOAD", p.entry),
            }
        }
        PreloadSource::LdSoPreload => match with {
            Some(w) => format!("RUN sed -i 's|{}|{w}|' /etc/ld.so.preload", p.entry),
            None => format!("RUN sed -i '\\|{}|d' /etc/ld.so.preload", p.entry),
        },
    }
}

/// The Debian package that ships a library, for the common runtime libraries.
pub(crate) fn debian_package_for(soname: &str) -> Option<&'static str> {
    Some(match soname {
        "libstdc++.so.6" => "libstdc++6",
        "libgcc_s.so.1" => "libgcc-s1",
        "libc.so.6" | "libm.so.6" | "libpthread.so.0" | "libdl.so.2" | "librt.so.1" => "libc6",
        "libz.so.1" => "zlib1g",
        "libgssapi_krb5.so.2" => "libgssapi-krb5-2",
        "libssl.so.3" | "libcrypto.so.3" => "libssl3",
        "libicuuc.so.72" | "libicui18n.so.72" => "libicu72",
        _ => return None,
    })
}
