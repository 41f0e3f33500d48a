//! semops: a Kubernetes operator that governs semantic-layer metadata.
//!
//! Rooms (see docs/architecture.md): `crd` (types), `ossie` (grammar), `model` and `policy`
//! (pure decisions), `controller` (reconcilers), `leader`, `telemetry`, `server`, `run` (with
//! `backoff`, the watchers' retry delay, and `stale_cache`, which restarts a watch that stopped
//! delivering), `cli`.
#![forbid(unsafe_code)]

pub mod api;
pub mod backoff;
pub mod build_info;
pub mod catalog;
pub mod change;
pub mod cli;
pub mod client;
pub mod console;
pub mod controller;
pub mod crd;
pub mod failpoint;
pub mod fair;
pub mod index;
pub mod leader;
pub mod lineage;
pub mod mcp;
#[cfg(test)]
pub mod mock_api;
pub mod model;
pub mod ossie;
pub mod policy;
pub mod reconcile;
pub mod run;
pub mod server;
pub mod sql;
pub mod stale_cache;
pub mod stores;
pub mod telemetry;
