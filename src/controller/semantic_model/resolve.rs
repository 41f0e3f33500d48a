//! Level 3 of docs/design.md#validation-in-three-levels, the I/O: each distinct source resolved once, by a probe and a column
//! read that began after this reconcile did. Acceptances waiting for one catalog share those
//! questions (`catalog::coalesce`): at bring-up one probe and one column query answer many
//! models instead of two queries each.

use std::collections::HashMap;
use std::sync::Arc;

use futures::FutureExt;
use kube::ResourceExt;

use crate::catalog::coalesce::{self, Coalescer, SendBatch};
use crate::catalog::registry::{AnyProvider, provider_from};
use crate::catalog::{
    CatalogProvider, ObjectType, Probe, ProbeTarget, ProbedColumns, ProviderError,
    probe_with_columns,
};
use crate::controller::{Context, Error};
use crate::crd::catalog::Provider;
use crate::crd::{Catalog, SemanticModel};
use crate::model::sources::{self, SourceLookup};
use crate::ossie::SourceRef;

/// The live answer for every source of a model.
pub enum Resolved {
    Lookups(HashMap<SourceRef, SourceLookup>),
    /// A catalog could not answer: acceptance waits (message names the catalog and the failure).
    Pending(String),
}

/// Acceptances' questions by provider (its address: the lane holds the provider, so the address
/// is not reused while the lane lives); each target answered on its own.
pub type SourceBatches =
    Coalescer<usize, ProbeTarget, Result<ProbedColumns, ProviderError>, ProviderError>;

pub fn source_batches() -> SourceBatches {
    coalesce::per_provider()
}

/// Asks `provider` about `targets`, each answered by a batch begun after this call; they wait
/// together, so one model's sources go out in one batch when nobody else is waiting.
async fn ask(
    batches: &SourceBatches,
    provider: &Arc<AnyProvider>,
    targets: Vec<ProbeTarget>,
) -> Result<Vec<ProbedColumns>, ProviderError> {
    let lane = coalesce::provider_lane(provider);
    let provider = provider.clone();
    // Built only when this ask opens the catalog's lane; later asks join its batches.
    let send =
        move || -> SendBatch<ProbeTarget, Result<ProbedColumns, ProviderError>, ProviderError> {
            Arc::new(move |targets: Vec<ProbeTarget>| {
                let provider = provider.clone();
                async move { probe_with_columns(provider.as_ref(), &targets).await }.boxed()
            })
        };
    batches
        .ask_many(lane, targets, send, ProviderError::batch_answered_short())
        .await
        .into_iter()
        .map(|answer| answer.and_then(|a| a))
        .collect()
}

/// Resolves each distinct source once: probed, and the columns of those that exist read, by
/// questions shared with other acceptances of the same catalog.
pub async fn resolve(
    ctx: &Context,
    model: &SemanticModel,
    catalogs: &[Arc<Catalog>],
) -> Result<Resolved, Error> {
    let mut by_catalog: HashMap<String, Vec<SourceRef>> = HashMap::new();
    for s in sources::distinct_sources(&model.spec.definition) {
        by_catalog.entry(s.catalog.clone()).or_default().push(s);
    }
    let mut lookups = HashMap::new();
    for (catalog_name, refs) in by_catalog {
        let Some(cat) = catalogs.iter().find(|c| c.name_any() == catalog_name) else {
            // Level 2 already checked existence; a Catalog deleted meanwhile waits for the next pass.
            return Ok(Resolved::Pending(format!(
                "Catalog {catalog_name:?} is not in the cache yet"
            )));
        };
        if cat.spec.provider == Provider::Managed {
            lookups.extend(
                refs.into_iter()
                    .map(|r| (r, SourceLookup::InManagedCatalog)),
            );
            continue;
        }
        let provider = match provider_from(&ctx.client, &ctx.providers, cat).await? {
            Ok((p, _)) => p,
            Err(no) => {
                return Ok(Resolved::Pending(format!(
                    "Catalog {catalog_name:?}: {}: {}",
                    no.reason, no.message
                )));
            }
        };
        let failed = |e: ProviderError| {
            Resolved::Pending(format!("Catalog {catalog_name:?}: {}: {e}", e.category()))
        };
        let targets: Vec<ProbeTarget> = refs
            .iter()
            .map(|r| ProbeTarget::relation(&r.schema, &r.name))
            .collect();
        let answers = match ask(&ctx.source_batches, &provider, targets).await {
            Ok(a) => a,
            Err(e) => return Ok(failed(e)),
        };
        for (r, (answer, columns_read)) in refs.into_iter().zip(answers) {
            let lookup = match answer {
                Probe::Absent => SourceLookup::Absent,
                Probe::Present {
                    object_type: ObjectType::Topic,
                    native_id,
                } => SourceLookup::Present {
                    object_type: ObjectType::Topic,
                    native_id,
                    columns: vec![],
                },
                Probe::Present {
                    object_type,
                    native_id,
                } => {
                    // Left out of the batch: no columns, dropped since the probe, or its columns
                    // not readable with the others. Asked once more, alone, to tell them apart.
                    let columns = match columns_read {
                        Some(c) => Ok(Some(c)),
                        None => provider.columns(&r.schema, &r.name).await,
                    };
                    match columns {
                        Ok(Some(columns)) => SourceLookup::Present {
                            object_type,
                            native_id,
                            columns,
                        },
                        Ok(None) => SourceLookup::Absent, // dropped between the two questions
                        Err(e) => return Ok(failed(e)),
                    }
                }
            };
            lookups.insert(r, lookup);
        }
    }
    Ok(Resolved::Lookups(lookups))
}
