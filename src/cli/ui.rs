//! `semops ui`: the local web console (docs/ui.md). Prints the address with its token, opens a
//! browser unless `--no-open`, and serves until Ctrl-C.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use super::query::ApiArgs;
use crate::client::ReadApi;
use crate::console::{Console, serve, server::new_token};

#[derive(clap::Args)]
pub struct UiArgs {
    /// Port on 127.0.0.1 (default: a free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Print the address without opening a browser.
    #[arg(long)]
    pub no_open: bool,
    #[command(flatten)]
    pub api: ApiArgs,
}

pub fn main(args: UiArgs) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: UiArgs) -> anyhow::Result<()> {
    let api = ReadApi::connect(&args.api.connection()).await?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await?;
    let port = listener.local_addr()?.port();
    let token = new_token();
    let url = format!("http://127.0.0.1:{port}/?token={token}");
    println!(
        "semops console (namespace {}): {url}",
        api.default_namespace
    );
    std::io::stdout().flush()?;
    if !args.no_open {
        // Best effort: a machine without a desktop still has the address printed above.
        let _ = std::process::Command::new("xdg-open")
            .arg(&url)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
    }
    let console = Arc::new(Console { api, token, port });
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    serve(listener, console, stop).await?;
    Ok(())
}
