//! Reports: one file per format.

pub mod facts;
pub mod lint;
pub mod text;
