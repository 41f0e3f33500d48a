//! What a SemanticModel change does before it is applied (pure): which metric ids a new
//! definition keeps, mints, retires and hands over through `renamedFrom`, what changed in
//! expressions, datasets, fields and relationships, and a verdict per change. `semops diff`
//! renders it; the prediction is the controller's own identity rule
//! ([`crate::model::identity::reconcile_metric_ids`]), so it equals what acceptance then does
//! (docs/change-control.md).

pub mod diff;

pub use diff::{Base, Change, MetricIds, ModelDiff, Verdict, diff_model, removed_model};
