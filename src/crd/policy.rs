//! `ReconcilePolicy`: how and how often stale registrations are checked (docs/design.md#reconcile-policies).
// `printcolumn(...)` repeats `type_ =` by design; clippy reads that as a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use crate::crd::conditions::Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// Settings for stale-registration checks of the Catalogs it selects.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "semops.io",
    version = "v1alpha1",
    kind = "ReconcilePolicy",
    plural = "reconcilepolicies",
    namespaced,
    status = "ReconcilePolicyStatus",
    shortname = "rpol",
    category = "semops",
    doc = "How and how often semops checks the registrations of the Catalogs it selects for objects dropped out of band.",
    printcolumn(name = "Mode", type_ = "string", json_path = ".spec.mode"),
    printcolumn(name = "Interval", type_ = "string", json_path = ".spec.interval"),
    printcolumn(name = "Enabled", type_ = "boolean", json_path = ".spec.enabled"),
    printcolumn(
        name = "Catalogs",
        type_ = "integer",
        json_path = ".status.catalogCount"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        priority = 1,
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ReconcilePolicySpec {
    /// Periodic checks on or off. On-demand checks always work.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// ReportOnly records stale registrations; AutoRemove also removes them (never on doubt).
    #[serde(default)]
    pub mode: PolicyMode,
    /// Time between periodic checks, as a Go duration (e.g. 30m, 1h). At least 1m.
    #[serde(default = "default_interval")]
    #[x_kube(validation = Rule::new("duration(self) >= duration('60s')").message("interval must be at least 1m"))]
    pub interval: String,
    /// Each visit waits interval * (1 ± jitter), uniformly at random. In [0, 1).
    #[serde(default = "default_jitter")]
    #[x_kube(validation = Rule::new("self >= 0.0 && self < 1.0").message("jitter must be in [0, 1)"))]
    pub jitter: f64,
    /// Catalogs this policy applies to; empty selects every Catalog in the namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_selector: Option<LabelSelector>,
    /// Registration kinds to check.
    #[serde(default = "default_kinds")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub kinds: Vec<RegistrationKind>,
    /// Probe settings.
    #[serde(default)]
    pub probe: ProbeSettings,
    /// Most registrations removed per interval (AutoRemove), however many rounds run in it.
    #[serde(default = "default_max_removals")]
    #[schemars(range(min = 0, max = 5000))]
    pub max_removals_per_round: i32,
    /// When AutoRemove may withdraw a missing object: after this many consecutive successful
    /// rounds found it missing, spanning at least the grace period.
    #[serde(default)]
    pub remove_after: RemoveAfter,
}

/// How long an object must be missing before AutoRemove withdraws it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RemoveAfter {
    /// Consecutive successful rounds that found it missing (at least 1).
    #[serde(default = "default_misses")]
    #[schemars(range(min = 1, max = 100))]
    pub misses: i32,
    /// Time from the first of those rounds, as a Go duration (0s allowed).
    #[serde(default = "default_grace")]
    #[x_kube(validation = Rule::new("duration(self) >= duration('0s')").message("grace must not be negative"))]
    pub grace: String,
}

impl Default for RemoveAfter {
    fn default() -> Self {
        Self {
            misses: default_misses(),
            grace: default_grace(),
        }
    }
}

fn default_misses() -> i32 {
    2
}
fn default_grace() -> String {
    "1h".into()
}

/// ReportOnly or AutoRemove.
#[derive(
    schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default,
)]
pub enum PolicyMode {
    /// Record states and warn; never remove.
    #[default]
    ReportOnly,
    /// Remove stale declared registrations through the single removal path.
    AutoRemove,
}

/// Kinds of registrable objects.
#[derive(
    schemars::JsonSchema,
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
)]
pub enum RegistrationKind {
    Schema,
    Table,
    View,
    Topic,
}

/// How a round probes the catalog.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProbeSettings {
    /// Timeout of each probe, as a Go duration.
    #[serde(default = "default_probe_timeout")]
    #[x_kube(validation = Rule::new("duration(self) > duration('0s') && duration(self) <= duration('5m')").message("probe.timeout must be in (0s, 5m]"))]
    pub timeout: String,
    /// Probes in flight at once.
    #[serde(default = "default_concurrency")]
    #[schemars(range(min = 1, max = 64))]
    pub concurrency: i32,
    /// Names per batched probe query.
    #[serde(default = "default_batch_size")]
    #[schemars(range(min = 1, max = 5000))]
    pub batch_size: i32,
}

impl Default for ProbeSettings {
    fn default() -> Self {
        Self {
            timeout: default_probe_timeout(),
            concurrency: default_concurrency(),
            batch_size: default_batch_size(),
        }
    }
}

fn default_true() -> bool {
    true
}
fn default_interval() -> String {
    "1h".into()
}
fn default_jitter() -> f64 {
    0.2
}
fn default_kinds() -> Vec<RegistrationKind> {
    vec![
        RegistrationKind::Schema,
        RegistrationKind::Table,
        RegistrationKind::View,
        RegistrationKind::Topic,
    ]
}
fn default_probe_timeout() -> String {
    "5s".into()
}
fn default_concurrency() -> i32 {
    4
}
fn default_batch_size() -> i32 {
    200
}
fn default_max_removals() -> i32 {
    50
}

/// Observed state of a ReconcilePolicy.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ReconcilePolicyStatus {
    /// Generation of the spec this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Number of Catalogs whose effective policy this is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_count: Option<i64>,
    /// Current state: Ready (reason Overlap when another policy selects the same catalog).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an empty spec means is documented (`kubectl explain`, docs/design.md): every
    /// field's default, including the nested ones filled when their parent is absent or empty.
    #[test]
    fn an_empty_spec_gets_every_documented_default() {
        let want = ReconcilePolicySpec {
            enabled: true,
            mode: PolicyMode::ReportOnly,
            interval: "1h".into(),
            jitter: 0.2,
            catalog_selector: None,
            kinds: vec![
                RegistrationKind::Schema,
                RegistrationKind::Table,
                RegistrationKind::View,
                RegistrationKind::Topic,
            ],
            probe: ProbeSettings {
                timeout: "5s".into(),
                concurrency: 4,
                batch_size: 200,
            },
            max_removals_per_round: 50,
            remove_after: RemoveAfter {
                misses: 2,
                grace: "1h".into(),
            },
        };
        for text in [
            "{}",
            r#"{"probe": {}, "removeAfter": {}}"#,
            r#"{"enabled": true, "mode": "ReportOnly"}"#,
        ] {
            let spec: ReconcilePolicySpec = serde_json::from_str(text).unwrap();
            assert_eq!(spec, want, "{text}");
        }
        assert_eq!(ProbeSettings::default(), want.probe);
        assert_eq!(RemoveAfter::default(), want.remove_after);
    }
}
