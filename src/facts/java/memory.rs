//! What the JVM's options commit of the container's memory, worked out once for every rule and
//! for the memory budget (`facts.memory`): the heap cap (`-Xmx`/`-XX:MaxHeapSize`, else a share
//! of `-XX:MaxRAM` or of the limit: `-XX:MaxRAMPercentage`, else HotSpot's default share), the
//! direct-memory cap (`-XX:MaxDirectMemorySize`, else as large as the heap cap), and the
//! metaspace and code-cache caps when set. Each names the option and where it came from.
//!
//! HotSpot's ergonomics (openjdk/jdk `src/hotspot/share/gc/shared/gcArguments.cpp`,
//! `Arguments::set_heap_size` in `arguments.cpp`): with no `MaxHeapSize`, the heap is
//! `MaxRAMPercentage` (default 25) of the physical memory, which is the container's limit when
//! container support is on, or `MaxRAM` when that is set; when `MinRAMPercentage` (default 50)
//! of it is below the default `MaxHeapSize` (96 MiB scaled by 1.3 on 64-bit VMs), that smaller
//! share is used instead. Direct buffers default to the heap's cap (`Runtime.maxMemory()`,
//! `jdk.internal.misc.VM.maxDirectMemory`).

use super::{JavaFacts, JavaOption};

/// HotSpot's default `MaxRAMPercentage`.
pub(crate) const DEFAULT_MAX_RAM_PERCENTAGE: f64 = 25.0;
/// HotSpot's default `MinRAMPercentage`: the share of a small memory the heap takes.
pub(crate) const DEFAULT_MIN_RAM_PERCENTAGE: f64 = 50.0;
/// HotSpot's default `MaxHeapSize` on a 64-bit VM (`ScaleForWordSize(96 * M)`).
const DEFAULT_MAX_HEAP_SIZE: u64 = 96 * 1024 * 1024 * 13 / 10;

/// A size an option sets, in bytes, with the option.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SizedOption {
    pub(crate) bytes: u64,
    pub(crate) option: JavaOption,
}

/// How the JVM caps its heap.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum HeapCap {
    /// `-Xmx` or `-XX:MaxHeapSize` (the last one wins; it wins over any percentage).
    Fixed(SizedOption),
    /// A share of `-XX:MaxRAM`: bytes known whatever the limit.
    OfMaxRam {
        percent: f64,
        max_ram: SizedOption,
        /// The `-XX:MaxRAMPercentage` option, when one is set (else the default share).
        percentage: Option<JavaOption>,
    },
    /// `-XX:MaxRAMPercentage` of the memory the JVM sees (the container's limit).
    OfLimit { percent: f64, option: JavaOption },
    /// No option sizes the heap: HotSpot's default share of the memory it sees.
    Default,
    /// A heap option memlint cannot read as a size (the JVM refuses to start on it).
    Unreadable { option: JavaOption },
}

impl HeapCap {
    /// The cap in bytes under a memory limit of `limit` bytes (`None`: no limit known), when it
    /// can be told.
    pub(crate) fn bytes(&self, limit: Option<u64>) -> Option<u64> {
        match self {
            HeapCap::Fixed(s) => Some(s.bytes),
            HeapCap::OfMaxRam { percent, max_ram, .. } => Some(share(max_ram.bytes, *percent)),
            HeapCap::OfLimit { percent, .. } => limit.map(|l| share(l, *percent)),
            HeapCap::Default => limit.map(default_heap),
            HeapCap::Unreadable { .. } => None,
        }
    }

    /// Whether an option sets it (else HotSpot's default applies).
    pub(crate) fn is_set(&self) -> bool {
        !matches!(self, HeapCap::Default)
    }

    /// The option that decides it, when one does.
    pub(crate) fn option(&self) -> Option<&JavaOption> {
        match self {
            HeapCap::Fixed(s) => Some(&s.option),
            HeapCap::OfMaxRam {
                percentage, max_ram, ..
            } => percentage.as_ref().or(Some(&max_ram.option)),
            HeapCap::OfLimit { option, .. } | HeapCap::Unreadable { option } => Some(option),
            HeapCap::Default => None,
        }
    }

    /// The setting as written, with where it came from: `-Xmx2g (from JAVA_TOOL_OPTIONS)`;
    /// `-XX:MaxRAM=4g with MaxRAMPercentage 25 (the default)`.
    pub(crate) fn describe(&self) -> String {
        match self {
            HeapCap::Fixed(s) => s.option.described(),
            HeapCap::OfMaxRam {
                percent,
                max_ram,
                percentage,
            } => match percentage {
                Some(p) => format!("{} and {}", max_ram.option.described(), p.described()),
                None => format!(
                    "{} with MaxRAMPercentage {percent} (the default)",
                    max_ram.option.described()
                ),
            },
            HeapCap::OfLimit { option, .. } | HeapCap::Unreadable { option } => option.described(),
            HeapCap::Default => format!(
                "no -Xmx, -XX:MaxHeapSize, -XX:MaxRAM or -XX:MaxRAMPercentage: HotSpot's default share ({DEFAULT_MAX_RAM_PERCENTAGE} % of the limit, {DEFAULT_MIN_RAM_PERCENTAGE} % of a small one)"
            ),
        }
    }
}

/// What the JVM's options commit, each with its option.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct JvmMemory {
    pub(crate) heap: HeapCap,
    /// `-XX:MaxDirectMemorySize`; when absent, direct buffers may take as much as the heap cap.
    pub(crate) max_direct_memory: Option<SizedOption>,
    /// `-XX:MaxMetaspaceSize`, when set (metaspace is unbounded otherwise).
    pub(crate) max_metaspace: Option<SizedOption>,
    /// `-XX:ReservedCodeCacheSize`, when set (240 MiB with tiered compilation otherwise).
    pub(crate) reserved_code_cache: Option<SizedOption>,
}

impl Default for JvmMemory {
    fn default() -> Self {
        JvmMemory {
            heap: HeapCap::Default,
            max_direct_memory: None,
            max_metaspace: None,
            reserved_code_cache: None,
        }
    }
}

impl JvmMemory {
    /// The direct-memory cap in bytes under `limit`: its option, else the heap cap.
    pub(crate) fn direct_bytes(&self, limit: Option<u64>) -> Option<u64> {
        match &self.max_direct_memory {
            Some(s) => Some(s.bytes),
            None => self.heap.bytes(limit),
        }
    }
}

/// `percent` of `bytes`; `as` saturates, so a percentage past what u64 holds is the most it can be.
fn share(bytes: u64, percent: f64) -> u64 {
    (bytes as f64 * percent / 100.0) as u64
}

/// HotSpot's heap with no sizing option, in a memory of `memory` bytes.
pub(crate) fn default_heap(memory: u64) -> u64 {
    let small = share(memory, DEFAULT_MIN_RAM_PERCENTAGE);
    if small < DEFAULT_MAX_HEAP_SIZE {
        small
    } else {
        share(memory, DEFAULT_MAX_RAM_PERCENTAGE).max(DEFAULT_MAX_HEAP_SIZE)
    }
}

/// A HotSpot size (`-Xmx`, `-XX:MaxHeapSize`, `-XX:MaxDirectMemorySize`…): digits with an
/// optional k, m, g or t in either case (HotSpot's `atojulong`).
pub(crate) fn jvm_size(text: &str) -> Option<u64> {
    let (digits, shift) = match text.as_bytes().last()? {
        b'k' | b'K' => (&text[..text.len() - 1], 10),
        b'm' | b'M' => (&text[..text.len() - 1], 20),
        b'g' | b'G' => (&text[..text.len() - 1], 30),
        b't' | b'T' => (&text[..text.len() - 1], 40),
        _ => (text, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// A percentage option's value (`-XX:MaxRAMPercentage=75.0`), when it is a number above 0.
fn percentage(o: &JavaOption) -> Option<f64> {
    o.xx_value()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|p| p.is_finite() && *p > 0.0)
}

/// The size the last effective `-XX:<name>=` sets.
fn sized_xx(j: &JavaFacts, name: &str) -> Option<SizedOption> {
    let o = j.last_xx(name)?;
    Some(SizedOption {
        bytes: jvm_size(o.xx_value()?)?,
        option: o.clone(),
    })
}

/// Works out what the JVM's options commit.
pub(crate) fn derive(j: &JavaFacts) -> JvmMemory {
    let fixed = j
        .effective()
        .filter_map(|o| o.max_heap_size().map(|size| (o, size)))
        .last();
    let heap = if let Some((o, size)) = fixed {
        match jvm_size(size) {
            Some(bytes) => HeapCap::Fixed(SizedOption {
                bytes,
                option: o.clone(),
            }),
            None => HeapCap::Unreadable { option: o.clone() },
        }
    } else {
        let pct = j
            .last_xx("MaxRAMPercentage")
            .and_then(|o| percentage(o).map(|p| (p, o.clone())));
        match (sized_xx(j, "MaxRAM"), pct) {
            (Some(max_ram), pct) => HeapCap::OfMaxRam {
                percent: pct.as_ref().map_or(DEFAULT_MAX_RAM_PERCENTAGE, |(p, _)| *p),
                max_ram,
                percentage: pct.map(|(_, o)| o),
            },
            (None, Some((percent, option))) => HeapCap::OfLimit { percent, option },
            (None, None) => HeapCap::Default,
        }
    };
    JvmMemory {
        heap,
        max_direct_memory: sized_xx(j, "MaxDirectMemorySize"),
        max_metaspace: sized_xx(j, "MaxMetaspaceSize"),
        reserved_code_cache: sized_xx(j, "ReservedCodeCacheSize"),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::OptionSource;
    use super::*;

    /// A JVM that reads `options` from `JAVA_TOOL_OPTIONS`, its memory worked out.
    pub(crate) fn jvm(options: &[&str]) -> JavaFacts {
        let mut j = JavaFacts {
            options: options
                .iter()
                .map(|o| JavaOption {
                    option: o.to_string(),
                    source: OptionSource::JavaToolOptions,
                    variable: None,
                    path: None,
                    ignored: None,
                })
                .collect(),
            ..Default::default()
        };
        j.memory = derive(&j);
        j
    }

    #[test]
    fn jvm_sizes() {
        assert_eq!(jvm_size("2g"), Some(2 << 30));
        assert_eq!(jvm_size("1536M"), Some(1536 << 20));
        assert_eq!(jvm_size("1048576"), Some(1 << 20));
        assert_eq!(jvm_size("1.5g"), None);
        assert_eq!(jvm_size(""), None);
        assert_eq!(jvm_size("99999999999t"), None);
    }

    #[test]
    fn the_last_fixed_cap_wins_over_any_share() {
        let m = jvm(&["-XX:MaxRAMPercentage=90", "-Xmx1g", "-XX:MaxHeapSize=512m"]).memory;
        assert_eq!(m.heap.bytes(Some(4 << 30)), Some(512 << 20));
        assert_eq!(m.heap.describe(), "-XX:MaxHeapSize=512m (from JAVA_TOOL_OPTIONS)");
        assert_eq!(
            m.direct_bytes(None),
            Some(512 << 20),
            "direct memory defaults to the heap cap"
        );
        let m = jvm(&[
            "-Xmx1g",
            "-XX:MaxDirectMemorySize=256m",
            "-XX:MaxMetaspaceSize=128m",
        ])
        .memory;
        assert_eq!(m.direct_bytes(None), Some(256 << 20));
        assert_eq!(m.max_metaspace.map(|s| s.bytes), Some(128 << 20));
        assert!(matches!(
            jvm(&["-Xmx1.5g"]).memory.heap,
            HeapCap::Unreadable { .. }
        ));
    }

    #[test]
    fn shares_of_the_limit_or_of_max_ram() {
        let m = jvm(&["-XX:MaxRAMPercentage=75.0"]).memory;
        assert_eq!(m.heap.bytes(Some(2 << 30)), Some(3 << 29));
        assert_eq!(m.heap.bytes(None), None);
        let m = jvm(&["-XX:MaxRAM=4g"]).memory;
        assert_eq!(
            m.heap.bytes(None),
            Some(1 << 30),
            "25 % of MaxRAM, whatever the limit"
        );
        let m = jvm(&["-XX:MaxRAM=4g", "-XX:MaxRAMPercentage=50"]).memory;
        assert_eq!(m.heap.bytes(Some(1 << 30)), Some(2 << 30));
        assert!(m
            .heap
            .describe()
            .contains("-XX:MaxRAMPercentage=50 (from JAVA_TOOL_OPTIONS)"));
        let m = jvm(&["-XX:MaxRAMPercentage=0"]).memory;
        assert_eq!(m.heap, HeapCap::Default, "a share of 0 sizes nothing");
    }

    #[test]
    fn the_default_share_is_half_of_a_small_memory() {
        assert_eq!(default_heap(2 << 30), 512 << 20);
        assert_eq!(default_heap(128 << 20), 64 << 20);
        // Between the two: the default MaxHeapSize.
        assert_eq!(default_heap(300 << 20), DEFAULT_MAX_HEAP_SIZE);
    }
}
