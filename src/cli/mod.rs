//! Command-line verbs that are more than a call into the library.

pub mod crd;
pub mod query;
pub mod validate;
