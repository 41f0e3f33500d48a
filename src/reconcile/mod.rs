//! Stale-registration checks (DESIGN 5): the pure decisions of a round. The I/O (probing, status,
//! Events) lives in `controller::check`.

pub mod plan;
pub mod round;
