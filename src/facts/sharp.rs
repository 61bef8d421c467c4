//! sharp (the Node.js image library) and libvips: every installed copy and its native parts.

use super::libc::Libc;
use super::loader::Loader;
use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize)]
pub struct SharpFacts {}

pub fn derive(_loader: &Loader, _libc: &Libc) -> SharpFacts {
    SharpFacts::default()
}
