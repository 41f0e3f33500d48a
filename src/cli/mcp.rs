//! `semops mcp`: the MCP server on stdio for desktop agents (Claude Desktop, Cursor, VS Code),
//! asking the read API as the kubeconfig's user (or `--server` with a token), like the other
//! query verbs. Stdout carries the protocol only; errors go to stderr.

use std::process::ExitCode;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use rmcp::ServiceExt;
use serde_json::Value;

use super::query::ApiArgs;
use crate::client::{Query, ReadApi};
use crate::mcp::server::{Reader, SemopsMcp};

impl Reader for ReadApi {
    /// The kubeconfig's user (or `--token`) asks: stdio carries no credentials of its own.
    fn ask<'a>(
        &'a self,
        _request: Option<&'a hyper::http::request::Parts>,
        ns: &'a str,
        query: Query,
    ) -> BoxFuture<'a, anyhow::Result<(u16, Value)>> {
        async move { ReadApi::ask(self, ns, &query).await }.boxed()
    }

    fn default_namespace(&self) -> Option<String> {
        Some(self.default_namespace.clone())
    }
}

/// Serves MCP on stdin/stdout until the client closes it.
pub fn main(api: &ApiArgs) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let served = runtime.block_on(async {
        let read_api = ReadApi::connect(&api.connection()).await?;
        let service = SemopsMcp::new(Arc::new(read_api))
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| anyhow::anyhow!("MCP session did not start: {e}"))?;
        service.waiting().await?;
        anyhow::Ok(())
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
