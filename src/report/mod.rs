//! Reports: one file per format.

pub mod facts;
pub mod github;
pub mod gitlab;
pub mod inspect;
pub mod json;
pub mod junit;
pub mod lint;
pub mod sarif;
pub mod text;
