//! The image config's environment (`Env`), as the container's processes see it.

use oci_spec::image::ImageConfiguration;
use serde::Serialize;

/// `KEY=VALUE` pairs in config order; a later entry for the same key wins, as in a process.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Env {
    vars: Vec<(String, String)>,
}

impl Env {
    pub fn from_config(config: Option<&ImageConfiguration>) -> Env {
        let list = config
            .and_then(|c| c.config().as_ref())
            .and_then(|c| c.env().clone())
            .unwrap_or_default();
        Env::from_pairs(list.iter().map(String::as_str))
    }

    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = &'a str>) -> Env {
        let mut vars: Vec<(String, String)> = Vec::new();
        for p in pairs {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            vars.retain(|(key, _)| key != k);
            vars.push((k.to_string(), v.to_string()));
        }
        Env { vars }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The value, or `None` when the variable is unset or empty.
    pub fn non_empty(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|v| !v.is_empty())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// `KEY=VALUE`, as evidence.
    pub fn entry(&self, key: &str) -> Option<String> {
        self.get(key).map(|v| format!("{key}={v}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_entries_win() {
        let e = Env::from_pairs(["A=1", "B=", "A=2=3", "C"]);
        assert_eq!(e.get("A"), Some("2=3"));
        assert_eq!(e.get("B"), Some(""));
        assert_eq!(e.non_empty("B"), None);
        assert_eq!(e.get("C"), Some(""));
        assert_eq!(e.entry("A").as_deref(), Some("A=2=3"));
    }
}
