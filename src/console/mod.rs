//! `semops ui`: a local, read-only web console (docs/ui.md). It listens on 127.0.0.1 only, asks
//! every question through the read API as the kubeconfig's user (the same RBAC as `semops
//! models`; nothing new runs or is exposed in the cluster), and answers only a browser that
//! holds its random token and names it by its own host (no other local user, no web page, no
//! DNS rebinding). Pages are rendered on the server (`html`, pure); the lineage picture is the
//! lineage room's SVG.

pub mod html;
pub mod server;

pub use server::{Console, serve};
