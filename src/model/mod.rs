//! Pure decisions about SemanticModels: model-local validation and name-conflict winners.

pub mod conflict;
pub mod validate;

pub use validate::{Problem, Reason};
