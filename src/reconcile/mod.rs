//! Stale-registration checks (docs/design.md#stale-registration-checks): the pure decisions of a round — plan, classification,
//! the stale report — and the desired Catalog status. The I/O (probing, status writes, Events)
//! lives in `controller::check`.

pub mod plan;
pub mod round;
pub mod server;
pub mod status;

/// How a round may act.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    /// Record states, publish Events, remove per policy (leader only).
    Record,
    /// Report only: compute and return, change nothing anywhere.
    DryRun,
}
