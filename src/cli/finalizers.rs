//! `semops release-finalizers`: removes semops's own finalizers (`semops.io/catalog-protection`)
//! from every Catalog. The chart runs it when semops is uninstalled, because with no operator
//! left nothing would ever release them and deleting a namespace would hang.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};

use crate::crd::{CATALOG_PROTECTION_FINALIZER, Catalog};

#[derive(clap::Args)]
pub struct ReleaseArgs {
    /// Only this namespace (all namespaces by default).
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// Keep passing until a pass finds nothing to remove for this long (an operator still
    /// shutting down may add one back); Go duration.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    settle: Duration,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::policy::duration::parse(s).map_err(|e| e.to_string())
}

pub fn main(args: ReleaseArgs) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(release(args)) {
        Ok(n) => {
            println!("released the semops finalizer of {n} Catalog(s)");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn release(args: ReleaseArgs) -> anyhow::Result<usize> {
    let client = kube::Client::try_default()
        .await
        .context("connecting to Kubernetes (KUBECONFIG or in-cluster config)")?;
    let api: Api<Catalog> = match &args.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut released = 0;
    let mut quiet_since = Instant::now();
    loop {
        let mut found = 0;
        for cat in api.list(&ListParams::default()).await?.items {
            let Some(next) = crate::crd::wanted_finalizers(cat.finalizers(), false) else {
                continue;
            };
            found += 1;
            let ns = cat.namespace().unwrap_or_default();
            let patch = serde_json::json!({"metadata": {"finalizers": next, "resourceVersion": cat.resource_version()}});
            let one: Api<Catalog> = Api::namespaced(client.clone(), &ns);
            match one
                .patch(
                    &cat.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => {
                    released += 1;
                    eprintln!(
                        "released {CATALOG_PROTECTION_FINALIZER} of Catalog {ns}/{}",
                        cat.name_any()
                    );
                }
                // Changed meanwhile, or gone: the next pass sees it as it is now.
                Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        if found > 0 {
            quiet_since = Instant::now();
        } else if quiet_since.elapsed() >= args.settle {
            return Ok(released);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
