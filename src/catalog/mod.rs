//! Catalog providers: the one question semops asks a real system — does this exact object
//! exist, and what is its identity? A wrong "absent" deletes someone's metadata, so every
//! infrastructure failure is an error with a category, never `Absent`.

pub mod credentials;
pub mod egress;
pub mod fresh_reads;
pub mod iceberg;
pub mod kafka;
pub mod mysql;
pub mod observe;
mod pg_guard;
pub mod postgres;
pub mod registry;
pub mod secrets;
pub mod tls;

use std::fmt;
use std::time::Duration;

pub use credentials::{ClientCertificate, Credentials};

use crate::crd::conditions::Reason;

/// What a probe asks about: a schema, or a relation (table or view) inside a schema. Names are
/// exact and case-sensitive.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeTarget {
    Schema { name: String },
    Relation { schema: String, name: String },
}

impl ProbeTarget {
    pub fn schema(name: impl Into<String>) -> Self {
        ProbeTarget::Schema { name: name.into() }
    }
    pub fn relation(schema: impl Into<String>, name: impl Into<String>) -> Self {
        ProbeTarget::Relation {
            schema: schema.into(),
            name: name.into(),
        }
    }
}

/// Kind of an existing object as the system reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjectType {
    Schema,
    Table,
    View,
    Topic,
}

impl ObjectType {
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectType::Schema => "SCHEMA",
            ObjectType::Table => "TABLE",
            ObjectType::View => "VIEW",
            ObjectType::Topic => "TOPIC",
        }
    }
}

/// Answer to one single-object probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    Present {
        object_type: ObjectType,
        native_id: String,
    },
    Absent,
}

/// A column of a table or view: its name and the type the system reports for it (`integer`,
/// `character varying(20)`, `decimal(10,2)`), compared as text to notice a type change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub data_type: String,
}

impl Column {
    pub fn new(name: impl Into<String>, data_type: impl Into<String>) -> Self {
        Column {
            name: name.into(),
            data_type: data_type.into(),
        }
    }
}

/// An object found by its native id (rename detection).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub target: ProbeTarget,
    pub object_type: ObjectType,
}

/// Infrastructure failures, classified for conditions, Events and metric labels. Messages are
/// scrubbed of credentials and never carry connection strings.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("cannot reach the server: {0}")]
    Unreachable(String),
    #[error("authentication failed: {0}")]
    AuthFailed(String),
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("TLS failed: {0}")]
    Tls(String),
    #[error("the server is shutting down or not accepting connections: {0}")]
    ServerUnavailable(String),
    #[error("the catalog is misconfigured: {0}")]
    Misconfigured(String),
    #[error("unexpected reply from the server: {0}")]
    Protocol(String),
    #[error("refused to send the password: {0}")]
    InsecureAuth(String),
}

impl ProviderError {
    /// Stable category: condition reason, Event reason, metric label.
    pub fn category(&self) -> Reason {
        match self {
            ProviderError::Unreachable(_) => Reason::UNREACHABLE,
            ProviderError::AuthFailed(_) => Reason::AUTH_FAILED,
            ProviderError::PermissionDenied(_) => Reason::PERMISSION_DENIED,
            ProviderError::Timeout(_) => Reason::TIMEOUT,
            ProviderError::Tls(_) => Reason::TLS_FAILED,
            ProviderError::ServerUnavailable(_) => Reason::SERVER_UNAVAILABLE,
            ProviderError::Misconfigured(_) => Reason::MISCONFIGURED,
            ProviderError::Protocol(_) => Reason::UNEXPECTED_REPLY,
            ProviderError::InsecureAuth(_) => Reason::INSECURE_AUTH_REFUSED,
        }
    }
}

/// Connection settings a provider needs, already resolved from the Catalog and its Secret.
#[derive(Clone, PartialEq, Eq)]
pub struct ConnectionSettings {
    /// The server (postgresql, mysql), or the first bootstrap server (kafka).
    pub host: String,
    pub port: u16,
    /// Kafka: every bootstrap server, in the order tried (the first is `host:port`).
    pub bootstrap: Vec<(String, u16)>,
    /// Kafka: the SASL mechanism, when the brokers want SASL.
    pub sasl: Option<crate::crd::catalog::SaslMechanism>,
    pub database: Option<String>,
    /// Iceberg REST: the catalog URL, warehouse and OAuth2 settings.
    pub iceberg: Option<iceberg::IcebergSettings>,
    pub ssl_mode: crate::crd::catalog::SslMode,
    /// PEM CA certificates to trust instead of the public roots (`tls.caSecretRef`).
    pub ca_pem: Option<Vec<u8>>,
    /// The client certificate for mutual TLS (`tls.clientCertificateSecretRef`; kafka).
    pub client_certificate: Option<ClientCertificate>,
    pub credentials: Credentials,
    pub connect_timeout: Duration,
    pub statement_timeout: Duration,
    pub max_connections: usize,
}

impl fmt::Debug for ConnectionSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionSettings")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("bootstrap", &self.bootstrap)
            .field("sasl", &self.sasl)
            .field("database", &self.database)
            .field("iceberg", &self.iceberg)
            .field("ssl_mode", &self.ssl_mode)
            .field("credentials", &self.credentials)
            .field("client_certificate", &self.client_certificate.is_some())
            .finish_non_exhaustive()
    }
}

/// The provider contract (DESIGN 2). Batches hold single-object probes answered in input order.
#[allow(async_fn_in_trait)]
pub trait CatalogProvider {
    /// Opens (or reuses) a connection and runs a trivial query.
    async fn check_connection(&self) -> Result<(), ProviderError>;
    /// One answer per target, in order; any failure fails the whole batch.
    async fn probe(&self, targets: &[ProbeTarget]) -> Result<Vec<Probe>, ProviderError>;
    /// Finds the object that currently carries `native_id`, whatever its name now.
    async fn find_by_id(&self, native_id: &str) -> Result<Option<Found>, ProviderError>;
    /// Columns of a table or view in ordinal order; `None` when it does not exist.
    async fn columns(&self, schema: &str, name: &str)
    -> Result<Option<Vec<Column>>, ProviderError>;
    /// Columns of many relations in one question where the system allows (column drift asks
    /// for every bound source of a catalog at once). Relations that do not exist, or have no
    /// columns, are left out; any failure fails the whole call.
    async fn columns_of(
        &self,
        targets: &[ProbeTarget],
    ) -> Result<std::collections::HashMap<ProbeTarget, Vec<Column>>, ProviderError> {
        let mut out = std::collections::HashMap::new();
        for t in targets {
            if let ProbeTarget::Relation { schema, name } = t
                && let Some(cols) = self.columns(schema, name).await?
                && !cols.is_empty()
            {
                out.insert(t.clone(), cols);
            }
        }
        Ok(out)
    }
    /// Which server and database answers (a removal only counts misses seen on the server the
    /// registrations were recorded on).
    async fn server_identity(&self) -> Result<String, ProviderError>;
    /// Why this system cannot have an object of this name (too long, forbidden characters);
    /// `None` when it can. Such a target is never probed: it could fail the whole round.
    fn invalid_name(&self, target: &ProbeTarget) -> Option<String>;
}

/// The relation targets of a batch as `(schema, name, target)`, in order: a batched column
/// query numbers its answers by position in this list (schemas have no columns).
pub(crate) fn relation_targets(targets: &[ProbeTarget]) -> Vec<(&str, &str, &ProbeTarget)> {
    targets
        .iter()
        .filter_map(|t| match t {
            ProbeTarget::Relation { schema, name } => Some((schema.as_str(), name.as_str(), t)),
            ProbeTarget::Schema { .. } => None,
        })
        .collect()
}

/// Groups the rows `(1-based position in relations, column)` of a batched column query by
/// target; a position that names no relation is an unexpected reply.
pub(crate) fn group_columns(
    relations: &[(&str, &str, &ProbeTarget)],
    rows: impl IntoIterator<Item = (i64, Column)>,
) -> Result<std::collections::HashMap<ProbeTarget, Vec<Column>>, ProviderError> {
    let mut out: std::collections::HashMap<ProbeTarget, Vec<Column>> = Default::default();
    for (ord, column) in rows {
        let Some((_, _, target)) = usize::try_from(ord)
            .ok()
            .and_then(|o| o.checked_sub(1))
            .and_then(|i| relations.get(i))
        else {
            return Err(ProviderError::Protocol(format!(
                "column row for unknown relation {ord}"
            )));
        };
        out.entry((*target).clone()).or_default().push(column);
    }
    Ok(out)
}

/// Runs `fut` under a client-side deadline so a blackholed socket cannot hang a round.
pub async fn with_deadline<T>(
    limit: Duration,
    fut: impl Future<Output = Result<T, ProviderError>>,
) -> Result<T, ProviderError> {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or(Err(ProviderError::Timeout(limit)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_are_distinct_and_stable() {
        let all = [
            ProviderError::Unreachable(String::new()),
            ProviderError::AuthFailed(String::new()),
            ProviderError::PermissionDenied(String::new()),
            ProviderError::Timeout(Duration::ZERO),
            ProviderError::Tls(String::new()),
            ProviderError::ServerUnavailable(String::new()),
            ProviderError::Misconfigured(String::new()),
            ProviderError::Protocol(String::new()),
            ProviderError::InsecureAuth(String::new()),
        ];
        let cats: std::collections::HashSet<_> = all.iter().map(ProviderError::category).collect();
        assert_eq!(cats.len(), all.len());
    }
}
