//! A YAML document as a tree whose every node knows its line, read by serde-saphyr. The
//! manifest reader walks it by hand rather than through typed structs: only the workload kinds
//! are held to Kubernetes' types, and any other kind (a CRD with its own `spec.template`) must
//! not fail the run.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// A YAML node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Map(Vec<(Spanned<String>, Spanned<Node>)>),
    Seq(Vec<Spanned<Node>>),
    Str(String),
    Int(i128),
    Float(f64),
    Bool(bool),
    Null,
}

impl Node {
    /// The value of `key` in a map.
    pub(crate) fn get(&self, key: &str) -> Option<&Spanned<Node>> {
        match self {
            Node::Map(entries) => entries.iter().rev().find(|(k, _)| k.value == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The line of `key` itself in a map (where an editor puts the cursor for it).
    pub(crate) fn key_line(&self, key: &str) -> Option<u32> {
        match self {
            Node::Map(entries) => entries
                .iter()
                .rev()
                .find(|(k, _)| k.value == key)
                .map(|(k, _)| line_of(k)),
            _ => None,
        }
    }

    /// What the node is, for an error: "a map", "a list", "the number 3", ...
    pub(crate) fn describe(&self) -> String {
        match self {
            Node::Map(_) => "a map".to_string(),
            Node::Seq(_) => "a list".to_string(),
            Node::Str(s) => format!("the string `{s}`"),
            Node::Int(i) => format!("the number {i}"),
            Node::Float(f) => format!("the number {f}"),
            Node::Bool(b) => format!("`{b}`"),
            Node::Null => "null".to_string(),
        }
    }

    /// A scalar as text: strings as they are, numbers as Kubernetes would print them.
    pub(crate) fn scalar_text(&self) -> Option<String> {
        match self {
            Node::Str(s) => Some(s.clone()),
            Node::Int(i) => Some(i.to_string()),
            Node::Float(f) if f.fract() == 0.0 && f.abs() < 1e18 => Some(format!("{}", *f as i128)),
            Node::Float(f) => Some(f.to_string()),
            _ => None,
        }
    }
}

/// The line (from 1) a node starts on.
pub(crate) fn line_of<T>(s: &Spanned<T>) -> u32 {
    u32::try_from(s.referenced.line()).unwrap_or(u32::MAX)
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct NodeVisitor;
        impl<'de> Visitor<'de> for NodeVisitor {
            type Value = Node;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a YAML value")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
                Ok(Node::Str(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Node, E> {
                Ok(Node::Str(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
                Ok(Node::Int(v.into()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
                Ok(Node::Int(v.into()))
            }
            fn visit_i128<E: de::Error>(self, v: i128) -> Result<Node, E> {
                Ok(Node::Int(v))
            }
            fn visit_u128<E: de::Error>(self, v: u128) -> Result<Node, E> {
                Ok(i128::try_from(v).map(Node::Int).unwrap_or(Node::Float(v as f64)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
                Ok(Node::Float(v))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
                Ok(Node::Bool(v))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
                Node::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Node::Seq(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
                let mut entries = Vec::new();
                while let Some((k, v)) = map.next_entry::<Spanned<KeyText>, Spanned<Node>>()? {
                    entries.push((Spanned::new(k.value.0, k.referenced, k.defined), v));
                }
                Ok(Node::Map(entries))
            }
        }
        d.deserialize_any(NodeVisitor)
    }
}

/// A map key as text, whatever scalar it is (`8080:` is a number key).
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let node = Node::deserialize(d)?;
        Ok(KeyText(match node {
            Node::Bool(b) => b.to_string(),
            Node::Null => String::new(),
            other => other.scalar_text().unwrap_or_else(|| other.describe()),
        }))
    }
}

/// A YAML error's line and message (the message's first line, without the snippet).
#[derive(Debug)]
pub(crate) struct YamlError {
    pub(crate) line: Option<u32>,
    pub(crate) column: Option<u32>,
    pub(crate) message: String,
}

/// The documents of a multi-document YAML text; empty documents are left out.
pub(crate) fn documents(text: &str) -> Result<Vec<Spanned<Node>>, YamlError> {
    // Each level of nesting is a few frames of the deserializer: a thread with a stack that
    // holds `max_depth` levels in a debug build too, whatever thread calls.
    let parsed = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("memlint-yaml".to_string())
            .stack_size(64 << 20)
            .spawn_scoped(scope, || parse(text))
            .map(|handle| handle.join())
    });
    match parsed {
        Ok(Ok(result)) => result,
        _ => Err(YamlError {
            line: None,
            column: None,
            message: "the YAML reader could not run".to_string(),
        }),
    }
}

fn parse(text: &str) -> Result<Vec<Spanned<Node>>, YamlError> {
    let options = serde_saphyr::options! {
        // A rendered fleet is large (thousands of documents, CRDs with big schemas): more than
        // the default budget, still bounded (about 300 MiB at most), and aliases expanded count
        // against it (billion laughs).
        budget: serde_saphyr::budget! {
            max_nodes: 2_000_000,
            max_events: 8_000_000,
            max_documents: 50_000,
            // CRDs nest their schemas deeply.
            max_depth: 256,
        },
    };
    serde_saphyr::from_multiple_with_options::<Spanned<Node>>(text, options).map_err(|e| {
        let location = e.location();
        let message = e.to_string();
        let first = message.lines().next().unwrap_or("").to_string();
        // "error: line 3 column 6: unclosed bracket" -> "unclosed bracket"
        let short = first
            .trim_start_matches("error: ")
            .split_once(": ")
            .filter(|(head, _)| head.starts_with("line "))
            .map(|(_, rest)| rest.to_string())
            .unwrap_or(first);
        YamlError {
            line: location
                .as_ref()
                .map(|l| u32::try_from(l.line()).unwrap_or(u32::MAX)),
            column: location
                .as_ref()
                .map(|l| u32::try_from(l.column()).unwrap_or(u32::MAX)),
            message: short,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_scalars() {
        let docs = documents("# c\nkind: Pod\n---\n---\nkind: Job\nspec:\n  m: 1e9\n  q: 512Mi\n  8080: x\n")
            .unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].value.key_line("kind"), Some(5));
        let spec = docs[1].value.get("spec").unwrap();
        assert_eq!(line_of(spec.value.get("q").unwrap()), 8);
        let keys: Vec<&str> = match &spec.value {
            Node::Map(e) => e.iter().map(|(k, _)| k.value.as_str()).collect(),
            _ => vec![],
        };
        assert_eq!(keys, ["m", "q", "8080"]);
        assert_eq!(
            spec.value.get("m").unwrap().value.scalar_text().as_deref(),
            Some("1000000000")
        );
        assert!(spec.value.get("8080").is_some());
    }

    #[test]
    fn errors_have_lines() {
        let Err(e) = documents("kind: Pod\nspec:\n  a: [1, 2\n") else {
            panic!()
        };
        assert_eq!(e.line, Some(3));
        assert!(e.message.contains("unclosed"), "{}", e.message);
    }

    #[test]
    fn alias_bombs_stop() {
        let mut text = String::from("a: &a [1,1,1,1,1,1,1,1,1]\n");
        for (name, prev) in ["b", "c", "d", "e", "f", "g", "h", "i", "j"]
            .iter()
            .zip(["a", "b", "c", "d", "e", "f", "g", "h", "i"])
        {
            text.push_str(&format!(
                "{name}: &{name} [{}]\n",
                vec![format!("*{prev}"); 9].join(",")
            ));
        }
        assert!(documents(&text).is_err());
    }
}
