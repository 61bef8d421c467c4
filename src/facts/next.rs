//! Next.js: version and the image optimizer settings of a standalone build.

use crate::tree::FileTree;
use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize)]
pub struct NextFacts {}

pub fn derive(_tree: &FileTree) -> Option<NextFacts> {
    None
}
