//! Apache Ossie interchange: the source reference grammar and YAML import/export.

pub mod document;
pub mod interchange;
pub mod source_ref;

pub use source_ref::{SourceRef, SourceRefError};
