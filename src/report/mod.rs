//! Reports: one file per format.

pub mod facts;
