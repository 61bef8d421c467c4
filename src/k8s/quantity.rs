//! Kubernetes resource quantities (`512Mi`, `1G`, `1.5Gi`, `1e9`, `500m`), parsed as the API
//! server's `resource.ParseQuantity` does (k8s.io/apimachinery/pkg/api/resource/quantity.go):
//!
//! ```text
//! <quantity>        ::= <signedNumber><suffix>
//! <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
//! <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
//! <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
//! <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
//! <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>
//! ```
//!
//! No blanks, case matters (`1K` and `1gi` are refused, `1k` is 1000). A byte count is the
//! value rounded up (`Quantity.Value()`), so `500m` of memory is 1 byte: valid, and almost
//! always a typo for `500Mi`.

/// A quantity as written and as a number.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub(crate) struct Quantity {
    pub(crate) text: String,
    /// The value rounded up to a whole number (bytes, for memory).
    pub(crate) value: u64,
    /// The value is not a whole number (`500m`, `0.5`): Kubernetes rounds it up.
    pub(crate) fractional: bool,
}

/// Parses a quantity; the error says what is wrong in words.
pub(crate) fn parse(text: &str) -> Result<Quantity, String> {
    let bytes = text.as_bytes();
    let mut i = 0;
    let negative = match bytes.first() {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut mantissa: u128 = 0;
    let mut digits = 0usize;
    let mut frac_len: u32 = 0;
    let mut seen_dot = false;
    while i < bytes.len() {
        match bytes[i] {
            b'0'..=b'9' => {
                mantissa = mantissa
                    .checked_mul(10)
                    .and_then(|m| m.checked_add(u128::from(bytes[i] - b'0')))
                    .ok_or_else(|| "too many digits".to_string())?;
                digits += 1;
                if seen_dot {
                    frac_len += 1;
                }
            }
            b'.' if !seen_dot => seen_dot = true,
            _ => break,
        }
        i += 1;
    }
    // apimachinery: "if we stripped all numerator positions, always return 0" (`Mi` is 0).
    if text[i..].is_empty() && digits == 0 {
        return Err("it does not start with a number".to_string());
    }
    let suffix = &text[i..];
    // value = mantissa * num / den
    let (mut num, mut den): (u128, u128) = (1, 10u128.pow(frac_len.min(38)));
    let binary = |shift: u32| -> (u128, u128) { (1u128 << shift, 1) };
    // Past 10^-30 a value is a sliver of a byte, which rounds up to one (or stays 0).
    let pow10 = |e: i32| -> Result<(u128, u128), String> {
        let e = e.max(-30);
        if e > 30 {
            return Err("the exponent is out of range".to_string());
        }
        let p = 10u128.pow(e.unsigned_abs());
        Ok(if e >= 0 { (p, 1) } else { (1, p) })
    };
    let (n, d) = match suffix {
        "" => (1, 1),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        "n" => pow10(-9)?,
        "u" => pow10(-6)?,
        "m" => pow10(-3)?,
        "k" => pow10(3)?,
        "M" => pow10(6)?,
        "G" => pow10(9)?,
        "T" => pow10(12)?,
        "P" => pow10(15)?,
        "E" => pow10(18)?,
        s if s.starts_with(['e', 'E']) => {
            let exp = &s[1..];
            let digits_only = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits_only.is_empty() || !digits_only.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("`{s}` is not a suffix (Ki, Mi, Gi, Ti, Pi, Ei, m, k, M, G, T, P, E or an exponent such as e9)"));
            }
            pow10(
                exp.parse::<i32>()
                    .map_err(|_| "the exponent is out of range".to_string())?,
            )?
        }
        s => {
            let hint = match s.to_ascii_lowercase().as_str() {
                "ki" | "mi" | "gi" | "ti" | "pi" | "ei" => {
                    format!(" (Kubernetes writes it `{}{}`)", s[..1].to_ascii_uppercase(), "i")
                }
                "kb" | "mb" | "gb" | "kib" | "mib" | "gib" => {
                    " (Kubernetes writes Ki, Mi, Gi or k, M, G)".to_string()
                }
                "g" => " (Kubernetes writes G or Gi)".to_string(),
                "k" => " (Kubernetes writes k for 1000, Ki for 1024)".to_string(),
                _ => String::new(),
            };
            return Err(format!("`{s}` is not a suffix Kubernetes knows{hint}"));
        }
    };
    num = num
        .checked_mul(n)
        .ok_or_else(|| "the value is too large".to_string())?;
    den = den
        .checked_mul(d)
        .ok_or_else(|| "the value is too small to hold".to_string())?;
    let total = mantissa
        .checked_mul(num)
        .ok_or_else(|| "the value is too large".to_string())?;
    let whole = total / den;
    let fractional = total % den != 0;
    let rounded = whole + u128::from(fractional);
    if negative && total != 0 {
        return Err("a resource cannot be negative".to_string());
    }
    let value = u64::try_from(rounded)
        .ok()
        .filter(|v| *v <= i64::MAX as u64)
        .ok_or_else(|| "the value is too large".to_string())?;
    Ok(Quantity {
        text: text.to_string(),
        value,
        fractional,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> u64 {
        parse(s).unwrap_or_else(|e| panic!("{s}: {e}")).value
    }

    /// Values as `resource.MustParse(s).Value()` gives them.
    #[test]
    fn as_the_api_server_reads_them() {
        assert_eq!(v("512Mi"), 512 << 20);
        assert_eq!(v("1G"), 1_000_000_000);
        assert_eq!(v("1.5Gi"), 3 << 29);
        assert_eq!(v("1e9"), 1_000_000_000);
        assert_eq!(v("1E3"), 1000);
        assert_eq!(v("500M"), 500_000_000);
        assert_eq!(v("2Gi"), 2 << 30);
        assert_eq!(v("128974848"), 128_974_848);
        assert_eq!(v("129e6"), 129_000_000);
        assert_eq!(v("123Mi"), 123 << 20);
        assert_eq!(v("1k"), 1000);
        assert_eq!(v(".5Ki"), 512);
        assert_eq!(v("5."), 5);
        assert_eq!(v("+1Gi"), 1 << 30);
        assert_eq!(v("0"), 0);
        // m is thousandths: 500m of memory rounds up to one byte.
        let q = parse("500m").unwrap();
        assert_eq!((q.value, q.fractional), (1, true));
        assert_eq!(v("1500m"), 2);
        assert_eq!(v("1e-3"), 1);
        assert_eq!(v("1e-40"), 1);
        // No number is zero (apimachinery's parseQuantityString).
        assert_eq!(v("Mi"), 0);
    }

    #[test]
    fn refused_as_the_api_server_refuses_them() {
        for bad in [
            "", "+", "1K", "1gi", "1GB", "1 Gi", "1Gi ", "1.2.3", "1e", "1e1.5", "-1Gi", "1MiB", "abc",
            "1ee3",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(parse("1gi").unwrap_err().contains("Gi"));
    }
}
