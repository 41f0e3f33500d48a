//! One round's questions to a catalog: the planned targets probed by name in batches (bounded
//! concurrency, a deadline per batch), then the recorded ids of absent names looked up by id.
//! The first infrastructure failure fails the whole observation: a round never acts on part of
//! an answer.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};

use std::collections::HashMap;

use super::{CatalogProvider, Column, Found, Probe, ProbeTarget, ProviderError, with_deadline};
use crate::policy::settings::ProbeLimits;

/// One target to probe by name, with the native ids recorded for it (looked up by id when the
/// name is absent, to tell a rename from a drop).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub target: ProbeTarget,
    pub ids: Vec<String>,
}

/// What the catalog answered in one round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observations {
    pub by_name: HashMap<ProbeTarget, Probe>,
    /// For each recorded id whose name was absent: where it lives now, if anywhere.
    pub by_id: HashMap<String, Option<Found>>,
    /// Column lists of the present targets that were asked for them (column drift).
    pub columns: HashMap<ProbeTarget, Vec<Column>>,
}

/// Probes every target, looks up the ids of absent ones, and reads the columns of the present
/// ones among `column_targets` (one question per batch). `on_probe` sees each request's latency
/// (for the probe-latency metric).
pub async fn observe<P: CatalogProvider>(
    provider: &P,
    targets: &[Target],
    column_targets: &[ProbeTarget],
    limits: ProbeLimits,
    on_probe: &(dyn Fn(Duration) + Send + Sync),
) -> Result<Observations, ProviderError> {
    let concurrency = limits.concurrency.max(1);
    let batches: Vec<Vec<ProbeTarget>> = targets
        .chunks(limits.batch_size.max(1))
        .map(|c| c.iter().map(|t| t.target.clone()).collect())
        .collect();
    let answered: Vec<(Vec<ProbeTarget>, Vec<Probe>)> = futures::stream::iter(batches)
        .map(|batch| async move {
            let started = Instant::now();
            let answers = with_deadline(limits.timeout, provider.probe(&batch)).await?;
            on_probe(started.elapsed());
            if answers.len() != batch.len() {
                return Err(ProviderError::Protocol(format!(
                    "{} answers to {} probes",
                    answers.len(),
                    batch.len()
                )));
            }
            Ok((batch, answers))
        })
        .buffer_unordered(concurrency)
        .try_collect()
        .await?;
    let mut out = Observations::default();
    for (batch, answers) in answered {
        out.by_name.extend(batch.into_iter().zip(answers));
    }
    // Owned ids: a stream over borrowed ones trips the compiler's Send analysis in spawned tasks.
    let mut ids: Vec<String> = targets
        .iter()
        .filter(|t| out.by_name.get(&t.target) == Some(&Probe::Absent))
        .flat_map(|t| t.ids.iter().cloned())
        .collect();
    ids.sort();
    ids.dedup();
    let found: Vec<_> = futures::stream::iter(ids)
        .map(|id: String| async move {
            let started = Instant::now();
            let found = with_deadline(limits.timeout, provider.find_by_id(&id)).await?;
            on_probe(started.elapsed());
            Ok::<_, ProviderError>((id, found))
        })
        .buffer_unordered(concurrency)
        .try_collect()
        .await?;
    out.by_id.extend(found);
    let present: Vec<ProbeTarget> = column_targets
        .iter()
        .filter(|t| matches!(out.by_name.get(t), Some(Probe::Present { .. })))
        .cloned()
        .collect();
    let lists: Vec<HashMap<ProbeTarget, Vec<Column>>> = futures::stream::iter(
        present
            .chunks(limits.batch_size.max(1))
            .map(<[ProbeTarget]>::to_vec),
    )
    .map(|batch| async move {
        let started = Instant::now();
        let lists = with_deadline(limits.timeout, provider.columns_of(&batch)).await?;
        on_probe(started.elapsed());
        Ok::<_, ProviderError>(lists)
    })
    .buffer_unordered(concurrency)
    .try_collect()
    .await?;
    out.columns = lists.into_iter().flatten().collect();
    Ok(out)
}
