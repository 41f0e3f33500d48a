//! `semops healthcheck --url URL`: GETs a probe endpoint until it answers 200 or the timeout
//! passes. The image has no shell or curl; this is how `helm test` and container health checks
//! ask a replica whether it is ready.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

#[derive(clap::Args)]
pub struct HealthcheckArgs {
    /// The endpoint, e.g. http://semops.semops-system.svc:8080/readyz.
    #[arg(long)]
    url: String,
    /// Keep asking until this passes (Go duration); one attempt with 0s.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    timeout: Duration,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::policy::duration::parse(s).map_err(|e| e.to_string())
}

pub fn main(args: HealthcheckArgs) -> ExitCode {
    let Ok(uri) = args.url.parse::<hyper::Uri>() else {
        eprintln!("error: --url {:?} is not a URL", args.url);
        return ExitCode::from(2);
    };
    if uri.scheme_str() != Some("http") {
        eprintln!("error: --url must be http:// (probe ports are plain HTTP)");
        return ExitCode::from(2);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let started = Instant::now();
    runtime.block_on(async {
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        loop {
            let attempt = tokio::time::timeout(Duration::from_secs(5), client.get(uri.clone()));
            let last = match attempt.await {
                Ok(Ok(resp)) => {
                    let status = resp.status();
                    let body = resp.into_body().collect().await.map(|b| b.to_bytes());
                    let text = body
                        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
                        .unwrap_or_default();
                    if status.is_success() {
                        println!("{}: {} {text}", args.url, status.as_u16());
                        return ExitCode::SUCCESS;
                    }
                    format!("{} {text}", status.as_u16())
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => "no answer within 5s".into(),
            };
            if started.elapsed() >= args.timeout {
                eprintln!("error: {}: {last}", args.url);
                return ExitCode::FAILURE;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}
