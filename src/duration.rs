//! Durations as users write them (`--timeout 90s`, `10m`, `1h30m`) and as memlint prints them.

use std::time::Duration;

/// The value of `--timeout`: `None` is no bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timeout(pub(crate) Option<Duration>);

impl Timeout {
    /// clap's parser for `--timeout`.
    pub(crate) fn parse(text: &str) -> Result<Timeout, String> {
        parse_duration(text).map(Timeout)
    }
}

/// Parses `--timeout`: jiff's friendly durations (`90s`, `10m`, `1h30m`, `1h 30m`, `2 minutes`)
/// or a bare number of seconds; `0` is no timeout (`None`). Negative or sub-second-only
/// durations are refused rather than rounded to "no timeout".
pub(crate) fn parse_duration(text: &str) -> Result<Option<Duration>, String> {
    let bad = || format!("`{text}` is not a duration (write e.g. 90s, 10m or 1h; 0 for none)");
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        let secs: u64 = t.parse().map_err(|_| bad())?;
        return Ok((secs > 0).then(|| Duration::from_secs(secs)));
    }
    let d: jiff::SignedDuration = t.parse().map_err(|_| bad())?;
    if d.is_negative() {
        return Err(bad());
    }
    let d = Duration::try_from(d).map_err(|_| bad())?;
    if d.is_zero() {
        return Ok(None);
    }
    if d.as_secs() == 0 {
        return Err(bad());
    }
    Ok(Some(d))
}

/// `1h30m`, `20s`: the way `--timeout` is written.
pub(crate) fn show(d: Duration) -> String {
    let s = d.as_secs();
    if s == 0 {
        return format!("{}ms", d.as_millis());
    }
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_users_write_them() {
        assert_eq!(parse_duration("90s"), Ok(Some(Duration::from_secs(90))));
        assert_eq!(parse_duration("10m"), Ok(Some(Duration::from_secs(600))));
        assert_eq!(parse_duration("1h"), Ok(Some(Duration::from_secs(3600))));
        assert_eq!(parse_duration("1h30m"), Ok(Some(Duration::from_secs(5400))));
        assert_eq!(parse_duration("45"), Ok(Some(Duration::from_secs(45))));
        assert_eq!(parse_duration("0"), Ok(None));
        assert_eq!(parse_duration("0s"), Ok(None));
        for bad in [
            "",
            "m",
            "ten",
            "-5s",
            "5x",
            "10x",
            "1h-",
            "500ms",
            "99999999999999999999h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn shown_as_written() {
        assert_eq!(show(Duration::from_secs(5400)), "1h30m");
        assert_eq!(show(Duration::from_secs(20)), "20s");
        assert_eq!(show(Duration::from_secs(600)), "10m");
    }
}
