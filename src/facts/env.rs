//! The environment the container's program gets: the image config's `Env`, overlaid with what
//! the entrypoint scripts export on the way to the program (`export NAME=VALUE`,
//! `NAME=VALUE exec …`, `exec env NAME=VALUE prog`; see [`super::script`]). Each variable
//! knows where its value comes from, and a value memlint cannot work out statically is kept as
//! undecided with the script line, never dropped and never guessed.
//!
//! This is the one environment every facts module and rule reads (`Facts::env`):
//! * [`Env::get`] / [`Env::non_empty`]: the value when it is known (`None` when the variable is
//!   unset *or* undecided);
//! * [`Env::undecided`]: the variable is set by a script to a value (or under a condition) that
//!   cannot be worked out; a rule that fires on a variable's absence checks this first and stays
//!   undecided instead;
//! * [`Env::var`]: the whole setting ([`Var`]: value, [`Origin`], the script line as written);
//! * [`Env::entry`] / [`Env::evidence`]: `NAME=VALUE` for evidence, naming the script and line
//!   when a script set it;
//! * [`Env::image`]: the config's `Env` alone (what `ENV` lines wrote).

use crate::finding::Evidence;
use oci_spec::image::ImageConfiguration;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

/// Where a variable's value comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Origin {
    /// The image config's `Env` (a Dockerfile `ENV`).
    Image,
    /// An entrypoint script, at a line (from 1). The path is shared by every setting the
    /// script makes: a script of 64 KiB may make tens of thousands.
    Script { script: Arc<str>, line: u32 },
    /// The Kubernetes manifest's `env` of the container, at a line of its file (`lint --k8s`).
    Manifest { line: u32 },
}

/// What a variable holds for the program.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Value {
    Set(String),
    /// `unset NAME` in a script.
    Unset,
    /// Set in a way memlint cannot work out statically: a command substitution it does not
    /// model, a condition it cannot decide, a variable only known at run time.
    Undecided {
        /// Why, in words.
        why: String,
        /// The value it gets when the undecided condition holds, when that value is known.
        if_set: Option<String>,
    },
}

/// One variable's setting.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Var {
    pub(crate) name: String,
    pub(crate) value: Value,
    pub(crate) origin: Origin,
    /// The script line that sets it, as written (empty for the config's `Env`): shared by the
    /// settings of one line, and an excerpt when the line is long (see
    /// [`super::script::MAX_QUOTED`]), so that a line of thousands of assignments is kept once.
    pub(crate) text: Arc<str>,
}

/// The empty line text of the config's settings, shared rather than allocated per variable (an
/// image's `Env` may hold millions).
pub(crate) fn no_text() -> Arc<str> {
    static EMPTY: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from(""));
    EMPTY.clone()
}

/// The name of the setting a script's reader records when it stops following the script (its
/// budget spent): from there on, any variable may be set to anything.
pub(crate) const ANY: &str = "*";

impl Var {
    /// Whether this setting stands for every variable ([`ANY`]): undecided, from a script.
    pub(crate) fn is_any(&self) -> bool {
        self.name == ANY
            && matches!(self.origin, Origin::Script { .. })
            && matches!(self.value, Value::Undecided { .. })
    }

    /// The script and line that set it, when a script did.
    pub(crate) fn script(&self) -> Option<(&str, u32)> {
        match &self.origin {
            Origin::Script { script, line } => Some((&**script, *line)),
            Origin::Image | Origin::Manifest { .. } => None,
        }
    }

    /// `exported by SCRIPT line N`, or `set by the image's ENV`.
    pub(crate) fn describe_origin(&self) -> String {
        match &self.origin {
            Origin::Image => "set by the image's ENV".to_string(),
            Origin::Script { script, line } => format!("exported by {script} line {line}"),
            Origin::Manifest { line } => format!("set by the manifest's env at line {line}"),
        }
    }
}

/// The schema of [`Var`]'s JSON, as its `Serialize` writes it.
impl schemars::JsonSchema for Var {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Var".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "description": "A variable the entrypoint's environment has: `status` set, unset or undecided; `value` null unless set; `why` and `if_set` when undecided; `source` image, script or manifest, with a script's `script`, `line` and `text`, or a manifest's `line`.",
            "properties": {
                "name": { "type": "string" },
                "status": { "enum": ["set", "unset", "undecided"] },
                "value": { "type": ["string", "null"] },
                "why": { "type": "string" },
                "source": { "type": "string" },
                "script": { "type": "string" },
                "line": { "type": "integer", "minimum": 0 },
                "text": { "type": "string" }
            },
            "required": ["name", "status", "value"]
        })
    }
}

/// JSON (`facts.entrypoint.exports[]`): `name`, `status` (`set`, `unset`, `undecided`),
/// `value` (null unless set), `why` (undecided only), `source` (`image` or `script`), and for a
/// script its `script`, `line` and the line as written (`text`).
impl Serialize for Var {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut m = serializer.serialize_map(None)?;
        m.serialize_entry("name", &self.name)?;
        match &self.value {
            Value::Set(v) => {
                m.serialize_entry("status", "set")?;
                m.serialize_entry("value", v)?;
            }
            Value::Unset => {
                m.serialize_entry("status", "unset")?;
                m.serialize_entry("value", &None::<String>)?;
            }
            Value::Undecided { why, if_set } => {
                m.serialize_entry("status", "undecided")?;
                m.serialize_entry("value", &None::<String>)?;
                m.serialize_entry("why", why)?;
                m.serialize_entry("if_set", if_set)?;
            }
        }
        match &self.origin {
            Origin::Image => m.serialize_entry("source", "image")?,
            Origin::Script { script, line } => {
                m.serialize_entry("source", "script")?;
                m.serialize_entry("script", &**script)?;
                m.serialize_entry("line", line)?;
                m.serialize_entry("text", &*self.text)?;
            }
            Origin::Manifest { line } => {
                m.serialize_entry("source", "manifest")?;
                m.serialize_entry("line", line)?;
                m.serialize_entry("text", &*self.text)?;
            }
        }
        m.end()
    }
}

/// The environment: settings in order; a later one for the same name wins, as in a process.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct Env {
    vars: Vec<Var>,
}

impl Env {
    /// The config's `Env`.
    pub(crate) fn from_config(config: Option<&ImageConfiguration>) -> Env {
        let list = config
            .and_then(|c| c.config().as_ref())
            .and_then(|c| c.env().clone())
            .unwrap_or_default();
        Env::from_pairs(list.iter().map(String::as_str))
    }

    /// `NAME=VALUE` pairs, as the config's `Env` lists them.
    pub(crate) fn from_pairs<'a>(pairs: impl IntoIterator<Item = &'a str>) -> Env {
        let mut env = Env::default();
        for p in pairs {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            env.set(Var {
                name: k.to_string(),
                value: Value::Set(v.to_string()),
                origin: Origin::Image,
                text: no_text(),
            });
        }
        env
    }

    /// Puts a setting in place of any earlier one of the same name (the earlier one stays in
    /// the history, so that [`Env::image`] still has the config's).
    pub(crate) fn set(&mut self, var: Var) {
        self.vars.push(var);
    }

    /// The settings in effect: the last of each name, in the order they were last set.
    fn current(&self) -> impl Iterator<Item = &Var> {
        let mut last = std::collections::HashMap::new();
        for (i, v) in self.vars.iter().enumerate() {
            last.insert(v.name.as_str(), i);
        }
        self.vars
            .iter()
            .enumerate()
            .filter(move |(i, v)| last.get(v.name.as_str()) == Some(i))
            .map(|(_, v)| v)
    }

    #[cfg(test)]
    /// This environment with `exports` applied in order.
    pub(crate) fn overlay<'a>(&self, exports: impl IntoIterator<Item = &'a Var>) -> Env {
        let mut env = self.clone();
        env.extend(exports);
        env
    }

    /// Applies `exports` in order, in place: no copy of what is there (an image's `Env` may
    /// hold millions of entries).
    pub(crate) fn extend<'a>(&mut self, exports: impl IntoIterator<Item = &'a Var>) {
        self.vars.extend(exports.into_iter().cloned());
    }

    /// The settings in effect by name, for a reader that looks up many names: [`Env::var`]
    /// scans the whole history, and a script's every `$NAME` against an image's `Env` of
    /// millions of entries would cost their product.
    pub(crate) fn indexed(&self) -> Indexed<'_> {
        let mut last = HashMap::with_capacity(self.vars.len().min(1 << 16));
        let mut any = None;
        for (i, v) in self.vars.iter().enumerate() {
            if v.is_any() {
                any = Some((i, v));
            }
            last.insert(v.name.as_str(), (i, v));
        }
        Indexed { last, any }
    }

    /// The setting of `key` the program gets, unless it is unset.
    pub(crate) fn var(&self, key: &str) -> Option<&Var> {
        self.vars
            .iter()
            .rev()
            .find(|v| v.name == key || v.is_any())
            .filter(|v| v.value != Value::Unset)
    }

    /// The value, when it is set and known. `None` when unset or undecided (see
    /// [`Env::undecided`]).
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        match &self.var(key)?.value {
            Value::Set(v) => Some(v.as_str()),
            _ => None,
        }
    }

    /// The value, or `None` when the variable is unset, empty or undecided.
    pub(crate) fn non_empty(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|v| !v.is_empty())
    }

    /// The setting, when a script sets `key` in a way memlint cannot work out.
    pub(crate) fn undecided(&self, key: &str) -> Option<&Var> {
        self.var(key)
            .filter(|v| matches!(v.value, Value::Undecided { .. }))
    }

    /// The first of `keys` a script sets in a way memlint cannot work out, as [`Env::entry`]
    /// says it: a rule that reads those variables stays undecided rather than judge a value it
    /// does not know.
    pub(crate) fn first_undecided(&self, keys: &[&str]) -> Option<String> {
        keys.iter()
            .find(|k| self.undecided(k).is_some())
            .and_then(|k| self.entry(k))
    }

    /// Whether `key` was set by a script (decided or not) rather than the config.
    pub(crate) fn set_by_script(&self, key: &str) -> bool {
        self.var(key).is_some_and(|v| v.script().is_some())
    }

    /// The known values, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.current().filter_map(|v| match &v.value {
            Value::Set(s) => Some((v.name.as_str(), s.as_str())),
            _ => None,
        })
    }

    /// `KEY=VALUE`, as evidence; a script's setting adds `(exported by SCRIPT line N)`, and an
    /// undecided one shows the line as written.
    pub(crate) fn entry(&self, key: &str) -> Option<String> {
        let v = self.var(key)?;
        Some(match (&v.value, &v.origin) {
            (Value::Set(s), Origin::Image) => format!("{key}={s}"),
            (Value::Set(s), _) => format!("{key}={s} ({})", v.describe_origin()),
            _ => format!(
                "{key} is set by `{}` ({}), which memlint cannot work out",
                v.text.trim(),
                v.describe_origin()
            ),
        })
    }

    /// [`Env::entry`] as evidence naming the script that set it.
    pub(crate) fn evidence(&self, key: &str) -> Option<Evidence> {
        let text = self.entry(key)?;
        let script = self.var(key).and_then(Var::script).map(|(s, _)| s);
        Some(Evidence::naming(text, script))
    }

    #[cfg(test)]
    /// The config's `Env` alone (what `ENV` lines wrote), without what scripts export.
    pub(crate) fn image(&self) -> Env {
        Env {
            vars: self
                .vars
                .iter()
                .filter(|v| v.origin == Origin::Image)
                .cloned()
                .collect(),
        }
    }

    #[cfg(test)]
    /// What scripts set and the program still gets, in order.
    pub(crate) fn exports(&self) -> impl Iterator<Item = &Var> {
        self.current()
            .filter(|v| matches!(v.origin, Origin::Script { .. }))
    }
}

/// [`Env`] indexed by name ([`Env::indexed`]): the same answers as [`Env::var`], [`Env::get`]
/// and [`Env::undecided`], each in constant time.
pub(crate) struct Indexed<'a> {
    /// The last setting of each name, and where it is in the history.
    last: HashMap<&'a str, (usize, &'a Var)>,
    /// The last setting of any name ([`Var::is_any`]).
    any: Option<(usize, &'a Var)>,
}

impl<'a> Indexed<'a> {
    /// [`Env::var`].
    pub(crate) fn var(&self, key: &str) -> Option<&'a Var> {
        let hit = match (self.last.get(key).copied(), self.any) {
            (Some((i, v)), Some((j, any))) => Some(if j > i { any } else { v }),
            (hit, any) => hit.or(any).map(|(_, v)| v),
        };
        hit.filter(|v| v.value != Value::Unset)
    }

    /// [`Env::get`].
    pub(crate) fn get(&self, key: &str) -> Option<&'a str> {
        match &self.var(key)?.value {
            Value::Set(v) => Some(v.as_str()),
            _ => None,
        }
    }

    /// [`Env::undecided`].
    pub(crate) fn undecided(&self, key: &str) -> Option<&'a Var> {
        self.var(key)
            .filter(|v| matches!(v.value, Value::Undecided { .. }))
    }
}

/// Serialises a map of the known values (for tests and debugging).
#[cfg(test)]
pub(crate) fn as_map(env: &Env) -> std::collections::BTreeMap<String, String> {
    env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
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
        assert_eq!(as_map(&e).len(), 3);
    }

    /// The index answers as the scan does, over a history with unsets, repeats and a setting
    /// of any name.
    #[test]
    fn indexed_look_ups_answer_as_the_scan_does() {
        let script = |name: &str, value: Value| Var {
            name: name.into(),
            value,
            origin: Origin::Script {
                script: "/s".into(),
                line: 1,
            },
            text: no_text(),
        };
        let undecided = Value::Undecided {
            why: "w".into(),
            if_set: None,
        };
        let mut e = Env::from_pairs(["A=1", "B=2", "A=3", "C=4"]);
        e.extend(&[script("B", Value::Unset), script("D", undecided.clone())]);
        let names = ["A", "B", "C", "D", "E"];
        let same = |e: &Env| {
            let ix = e.indexed();
            for k in names {
                assert_eq!(ix.var(k), e.var(k), "{k}");
                assert_eq!(ix.get(k), e.get(k), "{k}");
                assert_eq!(ix.undecided(k), e.undecided(k), "{k}");
            }
        };
        same(&e);
        assert_eq!(e.get("A"), Some("3"));
        // A setting of any name: every variable undecided from there, until set again.
        e.extend(&[script(ANY, undecided), script("C", Value::Set("5".into()))]);
        same(&e);
        assert!(e.undecided("A").is_some() && e.undecided("E").is_some());
        assert_eq!(e.get("C"), Some("5"));
    }

    #[test]
    fn scripts_overlay_the_config_and_say_where() {
        let image = Env::from_pairs(["LD_PRELOAD=/a.so", "PATH=/bin", "X=1"]);
        let script = |name: &str, value: Value, line| Var {
            name: name.into(),
            value,
            origin: Origin::Script {
                script: "/entry.sh".into(),
                line,
            },
            text: format!("export {name}=…").into(),
        };
        let e = image.overlay(&[
            script("LD_PRELOAD", Value::Set("/b.so".into()), 3),
            script("X", Value::Unset, 4),
            script(
                "MALLOC_CONF",
                Value::Undecided {
                    why: "runs `cat /conf`".into(),
                    if_set: None,
                },
                5,
            ),
        ]);
        assert_eq!(e.get("LD_PRELOAD"), Some("/b.so"));
        assert_eq!(
            e.entry("LD_PRELOAD").as_deref(),
            Some("LD_PRELOAD=/b.so (exported by /entry.sh line 3)")
        );
        assert_eq!(e.evidence("LD_PRELOAD").unwrap().paths(), ["/entry.sh"]);
        assert_eq!(e.get("X"), None);
        assert!(e.var("X").is_none());
        assert_eq!(e.get("MALLOC_CONF"), None);
        assert!(e.undecided("MALLOC_CONF").is_some());
        assert!(e.set_by_script("MALLOC_CONF") && !e.set_by_script("PATH"));
        assert_eq!(e.image().get("LD_PRELOAD"), Some("/a.so"));
        assert_eq!(e.image().get("X"), Some("1"));
        assert_eq!(e.exports().count(), 3);
        let json = serde_json::to_value(e.var("LD_PRELOAD").unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "LD_PRELOAD", "status": "set", "value": "/b.so",
                "source": "script", "script": "/entry.sh", "line": 3, "text": "export LD_PRELOAD=…"})
        );
        let json = serde_json::to_value(e.var("MALLOC_CONF").unwrap()).unwrap();
        assert_eq!(json["status"], "undecided");
        assert_eq!(json["why"], "runs `cat /conf`");
    }
}
