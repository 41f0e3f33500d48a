//! The read-API client (docs/architecture.md): the questions ([`query`]), the one route table
//! that turns a question into a request on either path family ([`routes`]), and the transport
//! that sends it ([`transport`]: through the Kubernetes API server as the kubeconfig's user, or
//! to the direct port with a bearer token). The CLI, MCP and the console use it; it imports
//! none of them, and no controller.

pub mod query;
pub mod routes;
pub mod transport;

pub use query::{Query, SourceType};
pub use routes::{Family, Request};
pub use transport::{Connection, ReadApi};
