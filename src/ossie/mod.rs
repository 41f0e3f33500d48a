//! Apache Ossie interchange: the source reference grammar (and, later, import/export).

pub mod source_ref;

pub use source_ref::{SourceRef, SourceRefError};
