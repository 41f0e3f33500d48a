//! Asking a catalog (the `observe` step of rounds and source visits) and the drift feed: what a
//! catalog answered for its model-bound sources is kept for the models, which are requeued.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::catalog::observe::{Observations, Target, observe};
use crate::catalog::registry::{AnyProvider, provider_from, registry_key};
use crate::catalog::{CatalogProvider, ProbeTarget};
use crate::controller::{Context, Error};
use crate::crd::Catalog;
use crate::crd::conditions::{Desired, Reason};
use crate::policy::settings::ProbeLimits;
use crate::reconcile::plan;
use crate::reconcile::status::{connected, unreachable};

/// Why a catalog could not answer: the failure category and a message without secrets.
pub(super) type Failure = (Reason, String);

/// A provider for a catalog, ready to ask.
pub(super) struct Connected {
    pub provider: Arc<AnyProvider>,
    /// `host:port`, prefixed to failure messages.
    pub endpoint: String,
}

/// The catalog's provider (Secrets read, allow-list checked), or why there is none.
pub(super) async fn connect(
    ctx: &Context,
    cat: &Catalog,
) -> Result<Result<Connected, Failure>, Error> {
    Ok(
        match provider_from(&ctx.client, &ctx.providers, cat).await? {
            Ok((provider, endpoint)) => Ok(Connected { provider, endpoint }),
            Err(no) => Err((no.reason, no.message)),
        },
    )
}

/// Which server and database answers.
pub(super) async fn identify(c: &Connected) -> Result<String, Failure> {
    c.provider
        .server_identity()
        .await
        .map_err(|e| (e.category(), format!("{}: {e}", c.endpoint)))
}

/// Asks a connected catalog about `targets`.
pub(super) async fn observe_with(
    ctx: &Context,
    c: &Connected,
    targets: &[Target],
    column_targets: &[ProbeTarget],
    limits: ProbeLimits,
) -> Result<Observations, Failure> {
    let metrics = &ctx.metrics.checks;
    let on_probe = |d: Duration| {
        metrics.probes.inc();
        metrics.probe_latency.observe(d.as_secs_f64());
    };
    observe(
        c.provider.as_ref(),
        targets,
        column_targets,
        limits,
        &on_probe,
    )
    .await
    .map_err(|e| (e.category(), format!("{}: {e}", c.endpoint)))
}

/// The observation of one catalog: `Err((category, message))` on any infrastructure failure.
pub(super) async fn observe_catalog(
    ctx: &Context,
    cat: &Catalog,
    targets: &[Target],
    column_targets: &[ProbeTarget],
    limits: ProbeLimits,
) -> Result<Result<Observations, Failure>, Error> {
    Ok(match connect(ctx, cat).await? {
        Ok(c) => observe_with(ctx, &c, targets, column_targets, limits).await,
        Err(f) => Err(f),
    })
}

/// A source-only visit (periodic checks off): probes the model-bound sources and feeds drift.
/// Changes no Catalog state. Returns the connection verdict it saw, or `None` without probing
/// when the namespace's share of round slots is taken (the caller comes back later).
pub async fn visit_sources(ctx: &Context, cat: &Catalog) -> Result<Option<Desired>, Error> {
    let ns = cat.namespace().unwrap_or_default();
    let Some(_permit) = ctx.checks.rounds.try_acquire(&ns) else {
        ctx.metrics.checks.deferred.inc();
        return Ok(None);
    };
    let sources = super::bound_sources(ctx, &ns, &cat.name_any());
    let targets = plan::plan(cat.spec.provider, &[], &[], &[], &sources, &|_| None).targets;
    let columns = super::column_sources(ctx, &ns, &cat.name_any());
    let seen = observe_catalog(ctx, cat, &targets, &columns, ProbeLimits::default()).await?;
    tracing::debug!(
        sources = targets.len(),
        answered = seen.is_ok(),
        "source visit"
    );
    Ok(Some(feed_models(ctx, cat, seen.map(Arc::new))))
}

/// Stores what a catalog answered for its bound sources, requeues the models using it, and
/// returns the connection verdict the answer implies.
pub(super) fn feed_models(
    ctx: &Context,
    cat: &Catalog,
    seen: Result<Arc<Observations>, (Reason, String)>,
) -> Desired {
    let verdict = match &seen {
        Ok(_) => connected(cat),
        Err((reason, message)) => unreachable(reason.clone(), message.clone()),
    };
    ctx.checks.set_feed(
        &registry_key(cat),
        seen.map_err(|(reason, message)| format!("{reason}: {message}")),
    );
    if let Some(t) = &ctx.triggers {
        let name = cat.name_any();
        t.requeue_models(
            ctx.stores
                .models_in(&cat.namespace().unwrap_or_default())
                .iter()
                .filter(|m| {
                    m.status
                        .iter()
                        .flat_map(|s| &s.source_associations)
                        .any(|a| a.source.catalog == name)
                })
                .map(|m| ObjectRef::from_obj(m.as_ref())),
        );
    }
    verdict
}
