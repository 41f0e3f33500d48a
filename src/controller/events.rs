//! The one Event publisher (events.k8s.io/v1), for both reporters: `semops` (the controllers)
//! and `semops-reconciler` (check rounds, docs/design.md#a-check-round). Each Event is created on its own: kube's
//! Recorder folds Events with one reason into a series that keeps only the first note, which
//! would hide every registration after the first. Events are best effort: failures are logged.
//!
//! An Event can also be queued ([`Delivery::Queued`]) and posted by a background task, as
//! client-go's broadcaster does: the acceptance path then ends at its status write instead of
//! waiting one more API round trip. The queue is bounded (a full queue makes the publisher
//! wait, nothing is dropped) and [`Events::flush`] lets shutdown post what is queued.

use std::sync::OnceLock;

use futures::StreamExt;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client, Resource, ResourceExt};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::{mpsc, watch};

use crate::crd::conditions::Reason;
use crate::telemetry::Metrics;

/// Who reports an Event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reporter {
    /// The reconcilers: acceptance, validation, connection changes.
    Controller,
    /// Check rounds: stale, renamed, replaced, removed registrations.
    Reconciler,
}

impl Reporter {
    pub const fn name(self) -> &'static str {
        match self {
            Reporter::Controller => "semops",
            Reporter::Reconciler => "semops-reconciler",
        }
    }
}

/// Normal or Warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Normal,
    Warning,
}

impl Severity {
    /// Normal for a condition that holds, Warning otherwise.
    pub fn of(holds: bool) -> Self {
        if holds {
            Severity::Normal
        } else {
            Severity::Warning
        }
    }
    fn as_str(self) -> &'static str {
        match self {
            Severity::Normal => "Normal",
            Severity::Warning => "Warning",
        }
    }
}

/// Publishes Events as this replica (`reportingInstance`).
pub struct Events {
    client: Client,
    instance: String,
    /// The queue of [`Delivery::Queued`], its poster started on first use (inside the runtime).
    queue: OnceLock<mpsc::Sender<Queued>>,
    /// Events queued and not yet posted (or given up on).
    queued: watch::Sender<usize>,
}

/// When an Event goes to the API server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Before `publish` returns (a caller whose answer promises the Event is there).
    Now,
    /// Through the bounded background queue; `publish` returns once it is queued.
    Queued,
}

/// Events waiting for the poster: at most this many, then publishers wait.
const QUEUE_CAPACITY: usize = 1024;
/// Event POSTs the poster has in flight at once.
const POSTS_AT_ONCE: usize = 8;

struct Queued {
    event: Event,
    namespace: String,
    reason: String,
    published: Counter<u64, std::sync::atomic::AtomicU64>,
}

impl Events {
    pub fn new(client: Client, instance: impl Into<String>) -> Self {
        Self {
            client,
            instance: instance.into(),
            queue: OnceLock::new(),
            queued: watch::Sender::new(0),
        }
    }

    /// Publishes one Event about `obj`, at once or through the background queue; counts it in
    /// `metrics` when the API server took it.
    #[allow(clippy::too_many_arguments)]
    pub async fn publish<K: Resource<DynamicType = ()>>(
        &self,
        metrics: &Metrics,
        reporter: Reporter,
        obj: &K,
        severity: Severity,
        reason: &Reason,
        action: &str,
        note: String,
        delivery: Delivery,
    ) {
        let now = k8s_openapi::jiff::Timestamp::now();
        let event = Event {
            action: Some(action.into()),
            reason: Some(reason.to_string()),
            note: Some(note),
            event_time: Some(MicroTime(now)),
            regarding: Some(obj.object_ref(&())),
            metadata: ObjectMeta {
                namespace: obj.namespace(),
                // Like kube's Recorder (generateName must itself be a valid name, so no "x."
                // form); random bits keep Events of one instant distinct.
                name: Some(format!(
                    "{}.{:x}{:04x}",
                    obj.name_any(),
                    now.as_nanosecond(),
                    rand::random::<u16>()
                )),
                ..Default::default()
            },
            reporting_controller: Some(reporter.name().into()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(severity.as_str().into()),
            ..Default::default()
        };
        let queued = Queued {
            namespace: obj.namespace().unwrap_or_default(),
            event,
            reason: reason.to_string(),
            published: metrics.events_published.clone(),
        };
        if delivery == Delivery::Now {
            return post(&self.client, queued).await;
        }
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
            tokio::spawn(poster(self.client.clone(), rx, self.queued.clone()));
            tx
        });
        self.queued.send_modify(|n| *n += 1);
        if let Err(mpsc::error::SendError(q)) = queue.send(queued).await {
            // The poster is gone (runtime shutting down): post it here.
            post(&self.client, q).await;
            self.queued.send_modify(|n| *n -= 1);
        }
    }

    /// Waits until every queued Event was posted (or failed and was logged).
    pub async fn flush(&self) {
        let _ = self.queued.subscribe().wait_for(|n| *n == 0).await;
    }
}

/// Posts queued Events, a few at a time, until every sender is gone.
async fn poster(client: Client, mut rx: mpsc::Receiver<Queued>, queued: watch::Sender<usize>) {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
        .for_each_concurrent(POSTS_AT_ONCE, |q| {
            let (client, queued) = (client.clone(), queued.clone());
            async move {
                post(&client, q).await;
                queued.send_modify(|n| *n -= 1);
            }
        })
        .await;
}

async fn post(client: &Client, q: Queued) {
    let api: Api<Event> = Api::namespaced(client.clone(), &q.namespace);
    match api.create(&PostParams::default(), &q.event).await {
        Ok(_) => {
            q.published.inc();
        }
        Err(e) => tracing::warn!(error = %e, reason = %q.reason, "could not publish event"),
    }
}
