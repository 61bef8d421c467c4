//! Image platforms (`os/arch[/variant]`) as OCI indexes and `--platform` spell them.

use crate::arch::Arch;
use crate::error::{Error, Result};
use serde::Serialize;
use std::fmt;

/// The platform an image manifest is built for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct Platform {
    pub(crate) os: String,
    pub(crate) architecture: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) variant: Option<String>,
}

impl Platform {
    pub(crate) fn new(os: &str, architecture: &str, variant: Option<&str>) -> Platform {
        let architecture = normalize_arch(architecture);
        let implied = Arch::from_oci(&architecture).and_then(Arch::implied_variant);
        let variant = variant
            .filter(|v| !v.is_empty())
            // arm64 images only ever come in v8; writing it or not means the same image.
            .filter(|v| Some(*v) != implied)
            .map(str::to_string);
        Platform {
            os: os.to_ascii_lowercase(),
            architecture,
            variant,
        }
    }

    /// Parses `os/arch[/variant]` as `--platform` takes it.
    pub(crate) fn parse(input: &str) -> Result<Platform> {
        let parts: Vec<&str> = input.split('/').collect();
        let bad = |reason: &str| Error::BadPlatform {
            input: input.to_string(),
            reason: reason.to_string(),
        };
        match parts.as_slice() {
            [os, arch] if !os.is_empty() && !arch.is_empty() => Ok(Platform::new(os, arch, None)),
            [os, arch, variant] if !os.is_empty() && !arch.is_empty() && !variant.is_empty() => {
                Ok(Platform::new(os, arch, Some(variant)))
            }
            _ => Err(bad("expected two or three parts separated by `/`")),
        }
    }

    pub(crate) fn linux_amd64() -> Platform {
        Platform::new("linux", "amd64", None)
    }

    /// Whether this platform satisfies `wanted`: a wanted variant must match, a missing one
    /// accepts any variant.
    pub(crate) fn satisfies(&self, wanted: &Platform) -> bool {
        self.os == wanted.os
            && self.architecture == wanted.architecture
            && (wanted.variant.is_none() || wanted.variant == self.variant)
    }

    /// A platform no config or index stated: an image config with neither `os` nor
    /// `architecture` (a file system image of unknown platform).
    pub(crate) fn is_unstated(&self) -> bool {
        self.os.is_empty() && self.architecture.is_empty()
    }

    /// Placeholder platforms (`unknown/unknown`) that buildx gives attestation manifests.
    pub(crate) fn is_unknown(&self) -> bool {
        self.os == "unknown" || self.architecture == "unknown"
    }
}

/// Maps the names that kernels and toolchains use onto the GOARCH names that OCI uses.
pub(crate) fn normalize_arch(arch: &str) -> String {
    let arch = arch.to_ascii_lowercase();
    Arch::from_alias(&arch).map_or(arch, |a| a.oci().to_string())
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_unstated() {
            return f.write_str("unknown platform");
        }
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_normalizes() {
        let p = Platform::parse("linux/aarch64/v8").unwrap();
        assert_eq!(p.to_string(), "linux/arm64");
        assert_eq!(
            Platform::parse("linux/arm/v7").unwrap().to_string(),
            "linux/arm/v7"
        );
        assert_eq!(Platform::parse("Linux/x86_64").unwrap(), Platform::linux_amd64());
        for bad in ["linux", "linux/", "/amd64", "a/b/c/d", ""] {
            assert!(Platform::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn variant_is_optional_when_not_asked_for() {
        let v7 = Platform::new("linux", "arm", Some("v7"));
        assert!(v7.satisfies(&Platform::parse("linux/arm").unwrap()));
        assert!(!v7.satisfies(&Platform::parse("linux/arm/v6").unwrap()));
        assert!(!v7.satisfies(&Platform::linux_amd64()));
    }
}
