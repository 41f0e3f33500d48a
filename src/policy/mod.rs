//! Pure ReconcilePolicy logic: Go durations, label selectors, effective-policy resolution, round
//! settings, spec checks and jittered schedules.

pub mod duration;
pub mod resolve;
pub mod schedule;
pub mod selector;
pub mod settings;
pub mod spec;
pub mod views;

pub use resolve::{OperatorDefaults, PolicyView, Resolution, effective_policy, overlaps};
