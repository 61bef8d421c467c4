//! `registry:REF`: images pulled from an OCI distribution registry with oci-client, layers
//! streamed straight into the layer reader.

use std::path::PathBuf;

/// How to reach registries: what `--insecure-registry`, `--registry-ca`, `--username` and the
/// password give.
#[derive(Clone, Debug, Default)]
pub struct RegistryOptions {
    /// Hosts (host or host:port) spoken to over plain HTTP, or HTTPS without verification.
    pub insecure: Vec<String>,
    /// PEM files of extra CAs to trust.
    pub ca_files: Vec<PathBuf>,
    /// Explicit credentials; they go only to the registry of the reference.
    pub username: Option<String>,
    pub password: Option<String>,
}
