//! The caps that keep memory and time bounded whatever an image holds, by name, and the text
//! form that sets them (`name=value,name=value`, sizes such as `128G`): the form of the
//! `MEMLINT_LIMITS` environment variable, which `commands/` reads and applies.

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// A layer is only refused for its compression ratio once it has unpacked this much, so that
/// small layers of zeros (an empty file system image, a sparse database file) always pass.
pub(crate) const RATIO_GRACE: u64 = GIB;

/// Caps that keep memory and time bounded whatever the image holds. Each has a name (the field
/// name) that the error names when it is hit; `MEMLINT_LIMITS=name=value,...` or
/// [`Limits::set`] change them.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Limits {
    /// Tar entries in one layer.
    pub(crate) max_entries_per_layer: u64,
    /// Bytes of one entry's path, and of one link target.
    pub(crate) max_path_len: usize,
    /// Bytes of the extended headers (PAX, GNU long name and long link) of one tar entry. Go's
    /// archive/tar, which containerd and Docker use, refuses more than 1 MiB too.
    pub(crate) max_extended_header_bytes: u64,
    /// Unpacked (uncompressed tar) bytes of one layer.
    pub(crate) max_layer_bytes: u64,
    /// Unpacked bytes per stored byte of one layer, checked once the layer has unpacked more
    /// than [`RATIO_GRACE`] (1 GiB); 0 turns the check off. Stops compression bombs early: real
    /// layers compress 2:1 to 20:1, gzip cannot pass about 1,030:1 even on zeros, zstd can go
    /// far beyond; only a layer that is nearly all zeros passes 500:1.
    pub(crate) max_compression_ratio: u64,
    /// Kept contents of one file; a longer file is kept truncated (and marked so), as when it
    /// is longer than what its check asked for.
    pub(crate) max_kept_bytes_per_file: u64,
    /// Kept file contents of one layer, all files together.
    pub(crate) max_kept_bytes_per_layer: u64,
    /// Kept file contents (and JSON documents of a streamed archive) of one image.
    pub(crate) max_kept_bytes_total: u64,
    /// Estimated memory for the paths, links and ELF facts of every entry of one image (or of
    /// a whole streamed archive), before they are merged into the tree.
    pub(crate) max_metadata_bytes: u64,
    /// Symbolic links followed in one path lookup (Linux's MAXSYMLINKS is 40).
    pub(crate) max_link_depth: u32,
    /// Bytes of one JSON document: index, manifest, config, `manifest.json`.
    pub(crate) max_json_bytes: u64,
    /// Descriptors walked through an image's indexes (nested ones included), and images listed
    /// by `manifest.json`: bounds the work a layout whose indexes list each other many times
    /// can cause.
    pub(crate) max_index_entries: u64,
    /// Files of /etc/ld.so.conf and its `include`s read, itself included, each once.
    pub(crate) max_ld_conf_files: u64,
    /// The work /etc/ld.so.conf and its includes make: each folder they list, each distinct
    /// `include` pattern and each folder entry a pattern is tried on counts one. With
    /// [`Limits::max_ld_conf_files`] this bounds what 15,000 `include` lines over 2,000 files
    /// cost; past either, the rest is not read and the facts say so.
    pub(crate) max_ld_conf_names: u64,
    /// Seconds one transfer (a registry request, an engine answer, a pipe) may send nothing
    /// before the image's read ends; 0 waits for ever (`--timeout` still bounds the read).
    pub(crate) idle_timeout_secs: u64,
    /// Layers of one image manifest (and diff_ids of its config). Docker builds stop at 127,
    /// overlayfs mounts at most 500 lower layers (the kernel's `OVL_MAX_STACK`); images that
    /// cannot run anywhere have more.
    pub(crate) max_layers: u64,
    /// Seconds a whole `lint --k8s` run may spend reading its images; an image still being read
    /// then ends, and the ones not started are reported as not read. 0: no bound (each image
    /// still has its `--timeout`).
    pub(crate) fleet_timeout_secs: u64,
    /// Reads from one registry in a row that time out (or get no answer) before a fleet stops
    /// reading from that registry, the rest of its images reported as not read. 0: no bound.
    pub(crate) max_registry_timeouts: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_entries_per_layer: 2_000_000,
            max_path_len: 4096,
            max_extended_header_bytes: MIB,
            max_layer_bytes: 64 * GIB,
            max_compression_ratio: 500,
            max_kept_bytes_per_file: 16 * MIB,
            max_kept_bytes_per_layer: 256 * MIB,
            max_kept_bytes_total: 512 * MIB,
            max_metadata_bytes: 2 * GIB,
            max_link_depth: 40,
            max_json_bytes: 16 * MIB,
            max_index_entries: 4096,
            max_ld_conf_files: 64,
            max_ld_conf_names: 16_384,
            idle_timeout_secs: 60,
            max_layers: 1000,
            // Two hours: well inside the 6 hours of a CI job (GitHub Actions, GitLab's
            // default is 1 hour per job but is usually raised for such scans).
            fleet_timeout_secs: 2 * 60 * 60,
            max_registry_timeouts: 3,
        }
    }
}

impl Limits {
    /// The names [`Limits::set`] accepts, in the order of the fields.
    pub(crate) const NAMES: &'static [&'static str] = &[
        "max_entries_per_layer",
        "max_path_len",
        "max_extended_header_bytes",
        "max_layer_bytes",
        "max_compression_ratio",
        "max_kept_bytes_per_file",
        "max_kept_bytes_per_layer",
        "max_kept_bytes_total",
        "max_metadata_bytes",
        "max_link_depth",
        "max_json_bytes",
        "max_index_entries",
        "max_ld_conf_files",
        "max_ld_conf_names",
        "idle_timeout_secs",
        "max_layers",
        "fleet_timeout_secs",
        "max_registry_timeouts",
    ];

    /// Sets one limit by name from text: a number, optionally with a `K`, `M`, `G` or `T`
    /// suffix (powers of 1024, `KiB`/`KB` accepted too).
    pub(crate) fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let v = parse_size(value).ok_or_else(|| {
            format!("`{value}` is not a size for {name} (write a number such as 4096, 64M or 2G)")
        })?;
        let small = |v: u64| usize::try_from(v).map_err(|_| format!("{value} is too large for {name}"));
        match name {
            "max_entries_per_layer" => self.max_entries_per_layer = v,
            "max_path_len" => self.max_path_len = small(v)?,
            "max_extended_header_bytes" => self.max_extended_header_bytes = v,
            "max_layer_bytes" => self.max_layer_bytes = v,
            "max_compression_ratio" => self.max_compression_ratio = v,
            "max_kept_bytes_per_file" => self.max_kept_bytes_per_file = v,
            "max_kept_bytes_per_layer" => self.max_kept_bytes_per_layer = v,
            "max_kept_bytes_total" => self.max_kept_bytes_total = v,
            "max_metadata_bytes" => self.max_metadata_bytes = v,
            "max_link_depth" => {
                self.max_link_depth =
                    u32::try_from(v).map_err(|_| format!("{value} is too large for {name}"))?
            }
            "max_json_bytes" => self.max_json_bytes = v,
            "max_index_entries" => self.max_index_entries = v,
            "max_ld_conf_files" => self.max_ld_conf_files = v,
            "max_ld_conf_names" => self.max_ld_conf_names = v,
            "idle_timeout_secs" => self.idle_timeout_secs = v,
            "max_layers" => self.max_layers = v,
            "fleet_timeout_secs" => self.fleet_timeout_secs = v,
            "max_registry_timeouts" => self.max_registry_timeouts = v,
            _ => {
                return Err(format!(
                    "there is no limit `{name}`; the limits are {}",
                    Self::NAMES.join(", ")
                ))
            }
        }
        Ok(())
    }

    /// Applies `name=value` pairs separated by commas or white space (the form of the
    /// `MEMLINT_LIMITS` environment variable). Only the names the text sets change, so several
    /// sources layer by applying them from the weakest to the strongest: a config file's
    /// table, then `MEMLINT_LIMITS`, then each `--limit` (one name each, through [`Limits::set`]).
    pub(crate) fn apply(&mut self, spec: &str) -> Result<(), String> {
        for pair in spec
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|p| !p.is_empty())
        {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("`{pair}` is not of the form name=value"))?;
            self.set(name.trim(), value.trim())?;
        }
        Ok(())
    }

    #[cfg(test)]
    /// The default limits with `spec` applied (see [`Limits::apply`]).
    pub(crate) fn parse(spec: &str) -> Result<Limits, String> {
        let mut limits = Limits::default();
        limits.apply(spec)?;
        Ok(limits)
    }
}

/// A size: a number, optionally with a `K`, `M`, `G` or `T` suffix (powers of 1024; `KiB` and
/// `KB` are read the same).
pub(crate) fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let n: u64 = t[..digits].parse().ok()?;
    let unit = match t[digits..].trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => KIB,
        "m" | "mb" | "mib" => MIB,
        "g" | "gb" | "gib" => GIB,
        "t" | "tb" | "tib" => 1024 * GIB,
        _ => return None,
    };
    n.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_and_name_themselves() {
        let mut l = Limits::default();
        l.apply("max_layer_bytes=2G, max_path_len=8K max_link_depth=8")
            .unwrap();
        assert_eq!(l.max_layer_bytes, 2 << 30);
        assert_eq!(l.max_path_len, 8192);
        assert_eq!(l.max_link_depth, 8);
        l.set("max_json_bytes", "3MiB").unwrap();
        assert_eq!(l.max_json_bytes, 3 << 20);
        assert!(l.set("max_nothing", "1").unwrap_err().contains("max_layer_bytes"));
        assert!(l.set("max_layer_bytes", "-1").is_err());
        assert!(l.set("max_layer_bytes", "99999999999T").is_err());
        assert!(l.set("max_link_depth", "5000000000").is_err());
        assert!(l.apply("max_layer_bytes").is_err());
        // Layered: a later text overrides only the names it sets.
        let mut layered = Limits::parse("max_path_len=1K,max_link_depth=3").unwrap();
        layered.apply("max_link_depth=5").unwrap();
        assert_eq!((layered.max_path_len, layered.max_link_depth), (1024, 5));
        assert_eq!(layered.max_layer_bytes, Limits::default().max_layer_bytes);
        assert!(Limits::parse("max_path_len=8192,nonsense=1").is_err());
        for name in Limits::NAMES {
            Limits::default().set(name, "1").unwrap();
        }
        // The names are the serialised field names, so a config file can hold them too.
        let json = serde_json::to_value(Limits::default()).unwrap();
        let keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
        let mut names = Limits::NAMES.to_vec();
        names.sort_unstable();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(keys, names);
    }
}
