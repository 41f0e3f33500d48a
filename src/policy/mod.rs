//! Pure ReconcilePolicy logic: Go durations, label selectors, effective-policy resolution.

pub mod duration;
pub mod resolve;
pub mod schedule;
pub mod selector;

pub use resolve::{OperatorDefaults, PolicyView, Resolution, effective_policy, overlaps};
