//! Level 3 of DESIGN 3.1, the I/O: each distinct source resolved once, one batched probe per
//! catalog, then the columns of the sources that exist.

use std::collections::HashMap;
use std::sync::Arc;

use kube::ResourceExt;

use crate::catalog::registry::provider_from;
use crate::catalog::{CatalogProvider, ObjectType, Probe, ProbeTarget, ProviderError};
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

/// Resolves each distinct source once, one batched probe per catalog, then reads the columns
/// of the sources that exist.
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
        let answers = match provider.probe(&targets).await {
            Ok(a) => a,
            Err(e) => return Ok(failed(e)),
        };
        // Every column list of this catalog's present relations in one question.
        let present: Vec<ProbeTarget> = targets
            .iter()
            .zip(&answers)
            .filter(|(_, a)| matches!(a, Probe::Present { object_type, .. } if *object_type != ObjectType::Topic))
            .map(|(t, _)| t.clone())
            .collect();
        let mut columns_of = if present.is_empty() {
            Default::default()
        } else {
            match provider.columns_of(&present).await {
                Ok(c) => c,
                Err(e) => return Ok(failed(e)),
            }
        };
        for ((r, target), answer) in refs.into_iter().zip(targets).zip(answers) {
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
                    // Left out of the batch: no columns, or dropped since the probe. Asked
                    // once more to tell the two apart.
                    let columns = match columns_of.remove(&target) {
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
