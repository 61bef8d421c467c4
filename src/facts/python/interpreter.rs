//! Which CPython the image has and its version: `PYTHON_VERSION`, the `python3.X` package, the
//! interpreter's or `libpython`'s file name.

use super::*;

/// `3.11` for `python3.11`.
pub(super) fn interpreter_minor(name: &str) -> Option<String> {
    let v = name.strip_prefix("python")?;
    is_minor(v).then(|| v.to_string())
}

pub(super) fn is_minor(v: &str) -> bool {
    match v.split_once('.') {
        Some((major, minor)) => {
            major == "3" && !minor.is_empty() && minor.len() <= 3 && minor.bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    }
}

pub(super) fn version(
    inputs: &EnvInputs,
    os: &OsFacts,
    minors: &[(String, String)],
    libpython: Option<&(String, String)>,
) -> (Option<String>, Option<String>) {
    let known: Vec<&str> = minors
        .iter()
        .map(|(m, _)| m.as_str())
        .chain(libpython.map(|(m, _)| m.as_str()))
        .collect();
    let fits = |v: &str| known.iter().any(|m| v == *m || v.starts_with(&format!("{m}.")));
    // The official images' ENV, when an interpreter of that version is there.
    if let Some(v) = inputs.python_version.filter(|v| fits(v)) {
        return (Some(v.to_string()), Some("ENV PYTHON_VERSION".into()));
    }
    for m in &known {
        for pkg in [format!("python{m}"), format!("python{m}-minimal")] {
            if let Some(p) = os.package(&pkg) {
                let upstream = p.version.split(['-', '+', '~']).next().unwrap_or("");
                let upstream = upstream.rsplit(':').next().unwrap_or(upstream);
                if fits(upstream) {
                    return (
                        Some(upstream.to_string()),
                        Some(format!("dpkg package {pkg} {}", p.version)),
                    );
                }
            }
        }
    }
    if let Some((m, path)) = minors.first() {
        return (Some(m.clone()), Some(path.clone()));
    }
    if let Some((m, path)) = libpython {
        return (Some(m.clone()), Some(path.clone()));
    }
    (None, None)
}
