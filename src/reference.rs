//! Image references in the syntax skopeo and syft users know: `oci-dir:PATH[:NAME]`,
//! `oci-archive:PATH[:NAME]`, `docker-archive:PATH[:NAME|:@INDEX]`, `docker-archive:-`,
//! `dir:PATH`, `registry:REF`, `docker:REF`, `podman:REF`, or a bare path or registry name.

use crate::error::{Error, Result};
use std::fmt;
use std::path::{Path, PathBuf};

/// Which image of a layout or archive that holds several.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Selector {
    /// A tag or `org.opencontainers.image.ref.name`, as skopeo's `oci:PATH:REF`.
    Name(String),
    /// The n-th image (from 0), as skopeo's `docker-archive:PATH:@N`.
    Index(usize),
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Name(n) => f.write_str(n),
            Selector::Index(i) => write!(f, "@{i}"),
        }
    }
}

/// Where an archive's bytes come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ArchiveInput {
    Stdin,
    File(PathBuf),
}

impl fmt::Display for ArchiveInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArchiveInput::Stdin => f.write_str("standard input"),
            ArchiveInput::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A parsed image reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reference {
    OciDir {
        path: PathBuf,
        selector: Option<Selector>,
    },
    OciArchive {
        path: PathBuf,
        selector: Option<Selector>,
    },
    DockerArchive {
        input: ArchiveInput,
        selector: Option<Selector>,
    },
    Rootfs {
        path: PathBuf,
    },
    /// An existing path given without a scheme; its content tells what it is.
    Path {
        path: PathBuf,
    },
    Registry(String),
    Docker(String),
    Podman(String),
}

impl Reference {
    pub(crate) fn parse(input: &str) -> Result<Reference> {
        let bad = |reason: &str| Error::BadReference {
            input: input.to_string(),
            reason: reason.to_string(),
        };
        if input.is_empty() {
            return Err(bad("it is empty"));
        }
        if input.contains('\0') {
            return Err(bad("it contains a NUL byte"));
        }
        if let Some((scheme, rest)) = input.split_once(':') {
            let need = |rest: &str| -> Result<()> {
                if rest.is_empty() {
                    Err(bad(&format!("`{scheme}:` needs a path or name after the colon")))
                } else {
                    Ok(())
                }
            };
            match scheme {
                "oci-dir" | "oci" => {
                    need(rest)?;
                    let (path, selector) = split_selector(rest);
                    return Ok(Reference::OciDir { path, selector });
                }
                "oci-archive" => {
                    need(rest)?;
                    let (path, selector) = split_selector(rest);
                    return Ok(Reference::OciArchive { path, selector });
                }
                "docker-archive" => {
                    need(rest)?;
                    if rest == "-" {
                        return Ok(Reference::DockerArchive {
                            input: ArchiveInput::Stdin,
                            selector: None,
                        });
                    }
                    let (path, selector) = split_selector(rest);
                    return Ok(Reference::DockerArchive {
                        input: ArchiveInput::File(path),
                        selector,
                    });
                }
                "dir" => {
                    need(rest)?;
                    return Ok(Reference::Rootfs {
                        path: PathBuf::from(rest),
                    });
                }
                "registry" => {
                    need(rest)?;
                    return Ok(Reference::Registry(rest.to_string()));
                }
                "docker" | "docker-daemon" => {
                    need(rest)?;
                    return Ok(Reference::Docker(rest.to_string()));
                }
                "podman" => {
                    need(rest)?;
                    return Ok(Reference::Podman(rest.to_string()));
                }
                _ => {}
            }
        }
        if Path::new(input).exists() {
            return Ok(Reference::Path {
                path: PathBuf::from(input),
            });
        }
        if looks_like_registry_reference(input) {
            return Ok(Reference::Registry(input.to_string()));
        }
        Err(bad(
            "it is neither an existing path nor a valid registry reference",
        ))
    }
}

/// `PATH:NAME` where PATH exists but the whole string does not; a path that exists as written
/// keeps its colons.
fn split_selector(rest: &str) -> (PathBuf, Option<Selector>) {
    if !Path::new(rest).exists() {
        // The selector may hold colons itself (`app:v1`): split at the first colon whose
        // left side is an existing path, else at the last colon.
        let colons: Vec<usize> = rest.match_indices(':').map(|(i, _)| i).collect();
        let at = colons
            .iter()
            .copied()
            .find(|&i| Path::new(&rest[..i]).exists())
            .or_else(|| colons.last().copied());
        if let Some(i) = at {
            let (path, sel) = (&rest[..i], &rest[i + 1..]);
            if !path.is_empty() && !sel.is_empty() {
                let selector = match sel.strip_prefix('@').map(str::parse::<usize>) {
                    Some(Ok(i)) => Selector::Index(i),
                    _ => Selector::Name(sel.to_string()),
                };
                return (PathBuf::from(path), Some(selector));
            }
        }
    }
    (PathBuf::from(rest), None)
}

/// The distribution reference grammar, loosely: `[host[:port]/]path[:tag][@digest]`, lowercase
/// path components, no spaces.
fn looks_like_registry_reference(s: &str) -> bool {
    if s.len() > 4096 || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    let (name_tag, digest) = match s.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (s, None),
    };
    if let Some(d) = digest {
        if crate::digest::Digest::parse(d).is_none() {
            return false;
        }
    }
    let (name, tag) = match name_tag.rsplit_once(':') {
        Some((n, t)) if !t.contains('/') => (n, Some(t)),
        _ => (name_tag, None),
    };
    if let Some(t) = tag {
        if t.is_empty()
            || t.len() > 128
            || !t
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        {
            return false;
        }
    }
    if name.is_empty() || name.starts_with('/') || name.ends_with('/') || name.starts_with('.') {
        return false;
    }
    name.split('/').enumerate().all(|(i, part)| {
        !part.is_empty()
            && if i == 0 && name.contains('/') && (part.contains(['.', ':']) || part == "localhost") {
                part.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".-_:".contains(&b))
            } else {
                part.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes() {
        assert_eq!(
            Reference::parse("oci-dir:/x/y").unwrap(),
            Reference::OciDir {
                path: "/x/y".into(),
                selector: None
            }
        );
        assert_eq!(
            Reference::parse("oci-dir:/nonexistent/img:v1").unwrap(),
            Reference::OciDir {
                path: "/nonexistent/img".into(),
                selector: Some(Selector::Name("v1".into()))
            }
        );
        assert_eq!(
            Reference::parse("docker-archive:/tmp/nope.tar:@2").unwrap(),
            Reference::DockerArchive {
                input: ArchiveInput::File("/tmp/nope.tar".into()),
                selector: Some(Selector::Index(2))
            }
        );
        assert_eq!(
            Reference::parse("docker-archive:-").unwrap(),
            Reference::DockerArchive {
                input: ArchiveInput::Stdin,
                selector: None
            }
        );
        assert_eq!(
            Reference::parse("dir:/").unwrap(),
            Reference::Rootfs { path: "/".into() }
        );
        assert_eq!(
            Reference::parse("registry:node:24-slim").unwrap(),
            Reference::Registry("node:24-slim".into())
        );
        assert_eq!(
            Reference::parse("docker:app:1").unwrap(),
            Reference::Docker("app:1".into())
        );
        assert_eq!(
            Reference::parse("podman:app").unwrap(),
            Reference::Podman("app".into())
        );
    }

    #[test]
    fn bare_arguments() {
        assert_eq!(
            Reference::parse("/").unwrap(),
            Reference::Path { path: "/".into() }
        );
        assert_eq!(
            Reference::parse("node:24-slim").unwrap(),
            Reference::Registry("node:24-slim".into())
        );
        assert_eq!(
            Reference::parse("127.0.0.1:5000/app:1").unwrap(),
            Reference::Registry("127.0.0.1:5000/app:1".into())
        );
        for bad in [
            "",
            "oci-dir:",
            "Has Space",
            "UPPER/case",
            "./missing-file.tar",
            "a\0b",
        ] {
            assert!(Reference::parse(bad).is_err(), "{bad:?}");
        }
    }
}
