//! Sizes in bytes, written for people: the one place every report, rule and diagnostic formats
//! them, so that `2 GiB` reads the same in a finding, a table and an error.

/// The binary units, largest first, with their shift.
const BINARY: [(u32, &str); 5] = [(50, "PiB"), (40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")];

/// `2 GiB`, `768 MiB`: `n` in the largest binary unit it is a whole multiple of, when there is
/// one (1 KiB or more).
pub(crate) fn exact_bytes(n: u64) -> Option<String> {
    BINARY
        .iter()
        .find(|(shift, _)| n >= 1 << shift && n.is_multiple_of(1 << shift))
        .map(|(shift, unit)| format!("{} {unit}", n >> shift))
}

/// `2 GiB`, `768 MiB`, `953.7 MiB`, `1000 bytes`: exact where it can be, else to a tenth of a
/// MiB (a memory limit or heap cap a person compares with another).
pub(crate) fn human_bytes(n: u64) -> String {
    if let Some(exact) = exact_bytes(n) {
        return exact;
    }
    if n >= 1 << 20 {
        return format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64);
    }
    format!("{n} bytes")
}

/// `n` in the largest binary unit it reaches, as a number and the unit (`(1.5, "GiB")`); `None`
/// under 1 KiB. For sizes a person skims (kept contents, a value read two ways).
pub(crate) fn scaled_bytes(n: u64) -> Option<(f64, &'static str)> {
    let (shift, unit) = BINARY
        .iter()
        .rev()
        .take_while(|(shift, _)| n >= 1 << shift)
        .last()?;
    Some((n as f64 / (1u64 << shift) as f64, unit))
}

/// `4294967296 bytes (4 GiB)`, `100000000 bytes (100 MB, 95.4 MiB)`: every byte, for a value a
/// person may have meant another way.
pub(crate) fn bytes_spelled_out(n: u64) -> String {
    let Some((v, unit)) = scaled_bytes(n) else {
        return format!("{n} bytes");
    };
    let shown = format!("{v:.1}");
    let shown = shown.strip_suffix(".0").unwrap_or(&shown);
    // A round number of decimal megabytes or gigabytes is likely what was meant: say it too.
    let decimal = match n {
        _ if n.is_multiple_of(1_000_000_000) => format!("{} GB, ", n / 1_000_000_000),
        _ if n.is_multiple_of(1_000_000) => format!("{} MB, ", n / 1_000_000),
        _ => String::new(),
    };
    format!("{n} bytes ({decimal}{shown} {unit})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_for_people() {
        assert_eq!(human_bytes(2 << 30), "2 GiB");
        assert_eq!(human_bytes(768 << 20), "768 MiB");
        assert_eq!(human_bytes(1_000_000_000), "953.7 MiB");
        assert_eq!(human_bytes(1000), "1000 bytes");
        assert_eq!(exact_bytes(3 << 10).as_deref(), Some("3 KiB"));
        assert_eq!(exact_bytes(1000), None);
        assert_eq!(scaled_bytes(1536 << 20), Some((1.5, "GiB")));
        assert_eq!(scaled_bytes(1023), None);
        assert_eq!(scaled_bytes(1 << 50), Some((1.0, "PiB")));
        assert_eq!(bytes_spelled_out(0x1_0000_0000), "4294967296 bytes (4 GiB)");
        assert_eq!(
            bytes_spelled_out(100_000_000),
            "100000000 bytes (100 MB, 95.4 MiB)"
        );
        assert_eq!(bytes_spelled_out(104_857_600), "104857600 bytes (100 MiB)");
        assert_eq!(bytes_spelled_out(512), "512 bytes");
    }
}
