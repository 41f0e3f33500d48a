//! MCP for AI agents (docs/mcp.md): `semops mcp` on stdio, and `/mcp` (streamable HTTP) on the
//! read API's port. The server answers every tool, resource and prompt by asking the read API
//! as the caller, so it never sees more than the caller may; it imports no controller.

pub mod http;
pub mod server;
pub mod shape;
