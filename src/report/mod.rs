//! Reports: one file per format.

pub mod facts;
pub mod github;
pub mod inspect;
pub mod lint;
pub mod sarif;
pub mod text;
