//! The one Event publisher (events.k8s.io/v1), for both reporters: `semops` (the controllers)
//! and `semops-reconciler` (check rounds, DESIGN 5.4). Each Event is created on its own: kube's
//! Recorder folds Events with one reason into a series that keeps only the first note, which
//! would hide every registration after the first. Events are best effort: failures are logged.

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client, Resource, ResourceExt};

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
}

impl Events {
    pub fn new(client: Client, instance: impl Into<String>) -> Self {
        Self {
            client,
            instance: instance.into(),
        }
    }

    /// Publishes one Event about `obj`; counts it in `metrics` when the API server took it.
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
        let api: Api<Event> =
            Api::namespaced(self.client.clone(), &obj.namespace().unwrap_or_default());
        match api.create(&PostParams::default(), &event).await {
            Ok(_) => {
                metrics.events_published.inc();
            }
            Err(e) => tracing::warn!(error = %e, %reason, "could not publish event"),
        }
    }
}
