//! Node.js: the node binary, its version, and the memory flags it runs with.

use super::entrypoint::Entrypoint;
use super::Env;
use crate::tree::FileTree;
use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize)]
pub struct NodeFacts {}

pub fn derive(_tree: &FileTree, _env: &Env, _entry: &Entrypoint) -> Option<NodeFacts> {
    None
}
