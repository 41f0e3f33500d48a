//! Pure decisions about SemanticModels: model-local validation and name-conflict winners.

pub mod canonical;
pub mod columns;
pub mod conflict;
pub mod drift;
pub mod identity;
pub mod sources;
pub mod validate;

pub use validate::{Problem, Reason};
