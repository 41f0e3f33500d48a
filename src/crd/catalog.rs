//! `Catalog`: a real data system (or a managed one) and the objects it registers (docs/design.md#catalogs).
// `printcolumn(...)` repeats `type_ =` by design; clippy reads that as a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use crate::crd::conditions::Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::policy::{PolicyMode, RegistrationKind};

/// Largest number of registrations one Catalog may declare; status must stay well under the API
/// server's object size limit. Larger estates split into several Catalogs.
pub const MAX_REGISTRATIONS: usize = 5000;

/// A data catalog: a PostgreSQL or MySQL/MariaDB system semops probes, or a `managed` catalog that
/// only hosts semantic models.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "semops.io",
    version = "v1alpha1",
    kind = "Catalog",
    plural = "catalogs",
    namespaced,
    status = "CatalogStatus",
    shortname = "cat",
    category = "semops",
    doc = "A data catalog: a real system semops probes (postgresql, mysql) or a managed catalog that hosts semantic models, with the objects it registers.",
    printcolumn(name = "Provider", type_ = "string", json_path = ".spec.provider"),
    printcolumn(
        name = "Reachable",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Reachable\")].status"
    ),
    printcolumn(
        name = "Registrations",
        type_ = "integer",
        json_path = ".status.registrationCount"
    ),
    printcolumn(name = "Stale", type_ = "integer", json_path = ".status.staleCount"),
    printcolumn(
        name = "Policy",
        type_ = "string",
        json_path = ".status.effectivePolicy.name"
    ),
    printcolumn(
        name = "Last Check",
        type_ = "date",
        json_path = ".status.lastCheck.finishedAt"
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
#[x_kube(validation = Rule::new("self.provider == 'managed' || has(self.connection)").message("spec.connection is required unless provider is managed"))]
#[x_kube(validation = Rule::new("!has(self.connection) || self.provider != 'kafka' || (has(self.connection.bootstrapServers) && !has(self.connection.host) && !has(self.connection.port) && !has(self.connection.database))").message("a kafka catalog names its brokers in spec.connection.bootstrapServers (host:port entries); host, port and database are for postgresql and mysql"))]
#[x_kube(validation = Rule::new("!has(self.connection) || self.provider == 'kafka' || self.provider == 'iceberg-rest' || (has(self.connection.host) && has(self.connection.port) && has(self.connection.credentialsSecretRef) && !has(self.connection.bootstrapServers) && !has(self.connection.sasl))").message("postgresql and mysql catalogs need spec.connection.host, port and credentialsSecretRef; bootstrapServers and sasl are for kafka"))]
#[x_kube(validation = Rule::new("!has(self.connection) || self.provider != 'iceberg-rest' || (has(self.connection.uri) && !has(self.connection.host) && !has(self.connection.port) && !has(self.connection.database) && !has(self.connection.bootstrapServers) && !has(self.connection.sasl))").message("an iceberg-rest catalog names its REST endpoint in spec.connection.uri (https://...); host, port, database, bootstrapServers and sasl are for the other providers"))]
#[x_kube(validation = Rule::new("!has(self.connection) || self.provider == 'iceberg-rest' || (!has(self.connection.uri) && !has(self.connection.warehouse) && !has(self.connection.oauth2))").message("spec.connection.uri, warehouse and oauth2 are for iceberg-rest catalogs"))]
#[x_kube(validation = Rule::new("!has(self.connection) || !has(self.connection.oauth2) || has(self.connection.credentialsSecretRef)").message("spec.connection.oauth2 needs spec.connection.credentialsSecretRef: the Secret with the client id (username) and client secret (password)"))]
#[x_kube(validation = Rule::new("!has(self.connection) || !has(self.connection.tls) || !has(self.connection.tls.clientCertificateSecretRef) || self.provider == 'kafka'").message("spec.connection.tls.clientCertificateSecretRef is for kafka catalogs; client certificates for postgresql and mysql are not built, authenticate with credentialsSecretRef"))]
#[x_kube(validation = Rule::new("!has(self.connection) || !has(self.connection.sasl) || has(self.connection.credentialsSecretRef)").message("spec.connection.sasl needs spec.connection.credentialsSecretRef: the Secret with the SASL user name and password"))]
pub struct CatalogSpec {
    /// Kind of system: postgresql, mysql (MySQL and MariaDB), kafka or managed (no external
    /// system).
    pub provider: Provider,
    /// Free-text comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// How to reach the system. Never holds secrets inline: credentials come from a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<Connection>,
    /// Objects this catalog registers, with the metadata to attach. At most 5000 entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 5000))]
    pub registrations: Vec<Registration>,
    /// Per-catalog ReconcilePolicy; overrides selector-based and namespace-wide policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconcile_policy_ref: Option<PolicyRef>,
}

/// Kind of data system behind a Catalog.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// PostgreSQL (probed through pg_catalog).
    Postgresql,
    /// MySQL or MariaDB (probed through information_schema).
    Mysql,
    /// Apache Kafka (topics, probed with Metadata requests; the one schema is `default`).
    Kafka,
    /// An Apache Iceberg REST catalog (namespaces, tables and views, identified by the uuid of
    /// their metadata; `connection.uri`).
    #[serde(rename = "iceberg-rest")]
    IcebergRest,
    /// No external system; hosts semantic models only and is never probed.
    Managed,
}

/// Connection settings of a probed catalog.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    /// Host name or address of the server (postgresql, mysql).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub host: Option<String>,
    /// TCP port of the server (postgresql, mysql).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
    /// Base URL of an Iceberg REST catalog (iceberg-rest), e.g.
    /// `https://polaris.example.com/api/catalog`; requests go to `{uri}/v1/...`. https is
    /// verified like sslMode verify-full; http only with sslMode: disable when a secret is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub uri: Option<String>,
    /// Warehouse to ask `GET /v1/config` for (iceberg-rest; the server's prefix and defaults
    /// follow from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub warehouse: Option<String>,
    /// OAuth2 client credentials (iceberg-rest): the client id and secret are the user name and
    /// password of credentialsSecretRef. Without it, the password of credentialsSecretRef (if
    /// any) is sent as a bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth2: Option<OAuth2Settings>,
    /// Kafka brokers to ask, as `host:port`, tried in order (kafka). Only these are ever
    /// connected to: any broker answers the metadata semops asks for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 16), inner(length(min = 3, max = 261)))]
    #[x_kube(validation = Rule::new("self.all(s, s.matches('^[^\\\\s/:]+:[0-9]{1,5}$') || s.matches('^\\\\[[0-9a-fA-F:.]+\\\\]:[0-9]{1,5}$'))").message("every bootstrap server is host:port (an IPv6 address in brackets: [::1]:9092)"))]
    pub bootstrap_servers: Vec<String>,
    /// SASL authentication to Kafka with the user name and password of credentialsSecretRef
    /// (kafka; without it the connection authenticates with TLS only, or not at all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sasl: Option<SaslSettings>,
    /// Database to connect to (PostgreSQL: the database holding the schemas; MySQL: optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// TLS mode: verify-full (the default: a certificate chain to a trusted CA, for this host),
    /// verify-ca (chain only), require (encrypted, not verified), prefer or disable. With prefer
    /// and disable the password may travel in clear: they are used only when written here, and
    /// reported with a Warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssl_mode: Option<SslMode>,
    /// TLS trust: a CA bundle for servers with private CAs (CloudNativePG, cert-manager, RDS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSettings>,
    /// Secret in this namespace holding the user name and password. The Secret must carry the
    /// label `semops.io/catalog-credentials: "true"` (and, if it has the annotation
    /// `semops.io/allowed-catalogs`, name this Catalog there). Required for postgresql and mysql,
    /// and for kafka with sasl.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<CredentialsSecretRef>,
}

/// OAuth2 client-credentials settings of an Iceberg REST connection.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct OAuth2Settings {
    /// Token endpoint; default `{uri}/v1/oauth/tokens` (the REST spec's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub token_endpoint: Option<String>,
    /// Scope asked for; default `catalog`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub scope: Option<String>,
}

/// SASL settings of a Kafka connection.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SaslSettings {
    /// PLAIN (the password travels to the broker: use it over TLS), SCRAM-SHA-256 or
    /// SCRAM-SHA-512 (the password never leaves semops, and the broker proves it knows the user).
    pub mechanism: SaslMechanism,
}

/// A SASL mechanism semops speaks to Kafka.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    #[serde(rename = "PLAIN")]
    Plain,
    #[serde(rename = "SCRAM-SHA-256")]
    ScramSha256,
    #[serde(rename = "SCRAM-SHA-512")]
    ScramSha512,
}

impl SaslMechanism {
    /// The mechanism's name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

/// TLS trust settings of a catalog connection.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TlsSettings {
    /// A key of a Secret in this namespace holding PEM CA certificates to trust instead of the
    /// public roots. The Secret follows the same opt-in rule as the credentials Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_secret_ref: Option<SecretKeyRef>,
    /// A Secret in this namespace holding a client certificate chain and its private key under
    /// `tls.crt` and `tls.key` (the keys of a kubernetes.io/tls Secret, as cert-manager writes
    /// them), presented to brokers that require mutual TLS (kafka). The Secret follows the same
    /// opt-in rule as the credentials Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_certificate_secret_ref: Option<SecretRef>,
}

/// A Secret in the Catalog's namespace, by name.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// Secret name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// One key of a Secret in the Catalog's namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// Secret name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key in the Secret.
    #[serde(default = "default_ca_key")]
    pub key: String,
}

fn default_ca_key() -> String {
    "ca.crt".into()
}

/// TLS mode of a catalog connection.
#[derive(
    schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default,
)]
#[serde(rename_all = "kebab-case")]
pub enum SslMode {
    /// No TLS: the password travels in clear (explicit only; reported with a Warning).
    Disable,
    /// TLS when the server offers it, unverified, else plaintext (explicit only; Warning).
    Prefer,
    /// TLS, not verified: encrypted, but the server is not authenticated.
    Require,
    /// TLS with a verified certificate chain; the host name is not checked.
    VerifyCa,
    /// TLS with a verified chain issued for this host (the default).
    #[default]
    VerifyFull,
}

impl SslMode {
    /// Whether this mode may send credentials over a channel that is not encrypted.
    pub fn may_send_in_clear(self) -> bool {
        matches!(self, SslMode::Disable | SslMode::Prefer)
    }
}

/// Reference to the Secret with a catalog's credentials.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CredentialsSecretRef {
    /// Secret name, in the Catalog's namespace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key of the user name in the Secret.
    #[serde(default = "default_username_key")]
    pub username_key: String,
    /// Key of the password in the Secret.
    #[serde(default = "default_password_key")]
    pub password_key: String,
}

fn default_username_key() -> String {
    "username".into()
}
fn default_password_key() -> String {
    "password".into()
}

/// One object registered by a catalog, with its metadata.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.kind == 'Schema' ? !has(self.schema) : has(self.schema)").message("schema is required for Table, View and Topic registrations and not allowed for Schema registrations"))]
#[x_kube(validation = Rule::new("!self.name.matches('[\\x00-\\x1f\\x7f]') && (!has(self.schema) || !self.schema.matches('[\\x00-\\x1f\\x7f]'))").message("names must not contain control characters"))]
pub struct Registration {
    /// Kind of object: Schema, Table, View or Topic.
    pub kind: RegistrationKind,
    /// Schema holding the object (not set for Schema registrations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub schema: Option<String>,
    /// Exact, case-sensitive object name.
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// Owner to attach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub owner: Option<String>,
    /// Tags to attach.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub tags: Vec<String>,
    /// String properties to attach.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "crate::crd::schema::string_map")]
    pub properties: BTreeMap<String, String>,
}

/// Reference to a ReconcilePolicy in the same namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRef {
    /// ReconcilePolicy name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// Observed state of a Catalog.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct CatalogStatus {
    /// Generation of the spec this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Current state: Ready, Reachable, RegistrationsCurrent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The ReconcilePolicy settings in force for this catalog, and where they came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_policy: Option<EffectivePolicy>,
    /// The last stale-registration check round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_check: Option<LastCheck>,
    /// The last `semops.io/check-requested` token a round answered (so it runs once per token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_check_request: Option<String>,
    /// When the next periodic check is due; survives operator restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_check_at: Option<Time>,
    /// Number of declared registrations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration_count: Option<i64>,
    /// Number of registrations currently Stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_count: Option<i64>,
    /// Recorded native id and state of each declared registration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registrations: Vec<RegistrationStatus>,
    /// Identity of the server and database the registrations were recorded on (PostgreSQL:
    /// system identifier and database oid; MySQL: server_uuid; MariaDB: server_id). A round
    /// answered by another one changes nothing (`CatalogChanged`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// AutoRemove's cap counts per policy interval, not per round: removals in this window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removal_window: Option<RemovalWindow>,
}

/// Removals counted against `maxRemovalsPerRound` since `startedAt` (one policy interval).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RemovalWindow {
    pub started_at: Time,
    pub removed: i64,
}

/// Where the effective policy of a Catalog came from.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicySource {
    /// `spec.reconcilePolicyRef`.
    Reference,
    /// A policy whose non-empty catalogSelector matches the Catalog's labels.
    Selector,
    /// The namespace policy with an empty selector.
    Namespace,
    /// The operator-wide defaults (flags / helm values).
    OperatorDefault,
}

/// The policy settings in force for a Catalog.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EffectivePolicy {
    /// Name of the ReconcilePolicy; absent for operator defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Which rule chose it.
    pub source: PolicySource,
    /// ReportOnly or AutoRemove.
    pub mode: PolicyMode,
    /// Time between periodic checks.
    pub interval: String,
    /// Whether periodic checks run.
    pub enabled: bool,
}

/// Summary of one check round.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LastCheck {
    /// When the round started.
    pub started_at: Time,
    /// When the round finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// What started it: `periodic`, `annotation:<token>` or `api`.
    pub trigger: String,
    /// Completed, CatalogUnreachable, CatalogChanged or Skipped.
    pub result: CheckResult,
    /// The server and database that answered (see `status.server`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Objects probed.
    pub probed: i64,
    /// Registrations found stale.
    pub stale: i64,
    /// Registrations found renamed.
    pub renamed: i64,
    /// Registrations removed.
    pub removed: i64,
}

/// Outcome of a check round.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CheckResult {
    Completed,
    /// An infrastructure failure: nothing changed.
    CatalogUnreachable,
    /// The catalog answered as another server or database than the registrations were recorded
    /// on: nothing changed, nothing removed.
    CatalogChanged,
    Skipped,
}

/// State of one declared registration.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationStatus {
    /// Kind of object.
    pub kind: RegistrationKind,
    /// Schema holding the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Declared name.
    pub name: String,
    /// Recorded native id (survives renames, changes on drop + create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Pending, Live, Stale, Renamed or Removed.
    pub state: RegistrationState,
    /// When the registration entered this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// For Renamed: the object's current name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renamed_to: Option<String>,
    /// For Removed: when it was removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed_at: Option<Time>,
    /// Consecutive successful rounds that found the object missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub misses: Option<i64>,
    /// When the first of those rounds ran (removal waits for the policy's grace from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_since: Option<Time>,
    /// For Invalid: why this catalog cannot have such an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Lifecycle state of a registration.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegistrationState {
    /// Declared but not checked by a round yet.
    Pending,
    Live,
    Stale,
    Renamed,
    Removed,
    /// The name cannot exist in this catalog (too long, forbidden characters): never probed;
    /// the rest of the round goes on.
    Invalid,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sasl_mechanism_goes_on_the_wire_under_the_name_it_is_written_with() {
        for (written, mechanism) in [
            ("PLAIN", SaslMechanism::Plain),
            ("SCRAM-SHA-256", SaslMechanism::ScramSha256),
            ("SCRAM-SHA-512", SaslMechanism::ScramSha512),
        ] {
            let decoded: SaslMechanism = serde_json::from_value(written.into()).unwrap();
            assert_eq!((decoded, mechanism.name()), (mechanism, written));
        }
    }

    #[test]
    fn only_disable_and_prefer_may_send_a_password_in_clear() {
        for (mode, in_clear) in [
            ("disable", true),
            ("prefer", true),
            ("require", false),
            ("verify-ca", false),
            ("verify-full", false),
        ] {
            let mode: SslMode = serde_json::from_value(mode.into()).unwrap();
            assert_eq!(mode.may_send_in_clear(), in_clear, "{mode:?}");
        }
        assert!(!SslMode::default().may_send_in_clear());
    }

    #[test]
    fn secret_keys_default_to_the_names_their_documentation_gives() {
        let credentials: CredentialsSecretRef = serde_json::from_str(r#"{"name": "pg"}"#).unwrap();
        assert_eq!(
            (
                credentials.username_key.as_str(),
                credentials.password_key.as_str()
            ),
            ("username", "password")
        );
        let ca: SecretKeyRef = serde_json::from_str(r#"{"name": "ca"}"#).unwrap();
        assert_eq!(ca.key, "ca.crt");
    }
}
