//! Catalog providers: the one question semops asks a real system — does this exact object
//! exist, and what is its identity? A wrong "absent" deletes someone's metadata, so every
//! infrastructure failure is an error with a category, never `Absent`.

pub mod coalesce;
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
    /// Where connections go: the addresses that passed the egress checks.
    pub addresses: Addresses,
}

/// The host (brackets removed) and port of an http(s) URI, the port defaulting by scheme;
/// `None` without a host.
pub fn uri_host_port(uri: &hyper::Uri) -> Option<(String, u16)> {
    let host = uri
        .host()?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    (!host.is_empty()).then_some((host, port))
}

/// The addresses a provider connects to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Addresses {
    /// Settings built from a Catalog: every destination (host, port) with the addresses that
    /// passed the checks. Only these are dialled, on every (re)connect; a name is never
    /// resolved again, so a DNS answer that changes after the check reaches nothing.
    Checked(Vec<(String, u16, Vec<std::net::IpAddr>)>),
    /// Settings built by hand (provider tests, benchmarks): names resolve when dialled.
    #[default]
    Resolve,
}

impl Addresses {
    /// The socket addresses to dial for `host:port`, in order.
    pub async fn of(&self, host: &str, port: u16) -> std::io::Result<Vec<std::net::SocketAddr>> {
        match self {
            Addresses::Checked(all) => all
                .iter()
                .find(|(h, p, _)| h == host && *p == port)
                .map(|(_, _, ips)| {
                    ips.iter()
                        .map(|ip| std::net::SocketAddr::new(*ip, port))
                        .collect()
                })
                .ok_or_else(|| {
                    std::io::Error::other(format!("{host}:{port} is not a checked destination"))
                }),
            Addresses::Resolve => Ok(tokio::net::lookup_host((host, port)).await?.collect()),
        }
    }

    /// Every checked address of `host` whatever the port (an HTTP connector asks by name).
    pub async fn of_host(&self, host: &str) -> std::io::Result<Vec<std::net::SocketAddr>> {
        match self {
            Addresses::Checked(all) => {
                let found: Vec<std::net::SocketAddr> = all
                    .iter()
                    .filter(|(h, _, _)| h == host)
                    .flat_map(|(_, port, ips)| {
                        ips.iter().map(|ip| std::net::SocketAddr::new(*ip, *port))
                    })
                    .collect();
                if found.is_empty() {
                    return Err(std::io::Error::other(format!(
                        "{host} is not a checked destination"
                    )));
                }
                Ok(found)
            }
            Addresses::Resolve => Ok(tokio::net::lookup_host((host, 0)).await?.collect()),
        }
    }

    /// A TCP connection to `host:port` through [`Addresses::of`], each address tried in turn
    /// within `timeout` altogether.
    pub async fn connect(
        &self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> std::io::Result<tokio::net::TcpStream> {
        let work = async {
            let mut last = None;
            for addr in self.of(host, port).await? {
                match tokio::net::TcpStream::connect(addr).await {
                    Ok(tcp) => return Ok(tcp),
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("{host} has no address"),
                )
            }))
        };
        tokio::time::timeout(timeout, work)
            .await
            .unwrap_or_else(|_| {
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "connect timed out",
                ))
            })
    }
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

/// The provider contract (docs/design.md#catalogs). Batches hold single-object probes answered in input order.
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

impl ProviderError {
    /// Whether this failure may belong to one object of a batch rather than to the catalog
    /// (one namespace the credential may not read, one reply the client did not expect); a
    /// catalog that is down, slow, misconfigured or refusing the login fails every object alike.
    pub fn may_belong_to_one_target(&self) -> bool {
        matches!(
            self,
            ProviderError::PermissionDenied(_) | ProviderError::Protocol(_)
        )
    }

    /// What an ask gets when its coalesced batch returned fewer answers than targets.
    pub fn batch_answered_short() -> Self {
        ProviderError::Protocol("the catalog answered a probe batch short".into())
    }
}

/// Probes `targets` together and answers each on its own: when the batch fails in a way that may
/// belong to one target, each target is probed alone, so one object's failure does not fail the
/// others it was batched with; a failure of the catalog itself fails the batch (without a retry
/// per target, which an outage would multiply).
pub async fn probe_each<P: CatalogProvider>(
    provider: &P,
    targets: &[ProbeTarget],
) -> Result<Vec<Result<Probe, ProviderError>>, ProviderError> {
    match provider.probe(targets).await {
        Ok(answers) => Ok(answers.into_iter().map(Ok).collect()),
        Err(e) if targets.len() > 1 && e.may_belong_to_one_target() => {
            let alone = targets.iter().map(|t| async move {
                let answers = provider.probe(std::slice::from_ref(t)).await?;
                answers.into_iter().next().ok_or_else(|| {
                    ProviderError::Protocol("the catalog answered a probe with nothing".into())
                })
            });
            Ok(futures::future::join_all(alone).await)
        }
        Err(e) => Err(e),
    }
}

/// A probe's answer with the columns of a present table or view (`None` for a topic, and for a
/// relation left out of the column question: dropped since the probe, or its column read failed
/// in a way that may be its own; its asker then asks for it alone).
pub type ProbedColumns = (Probe, Option<Vec<Column>>);

/// What an acceptance asks of a catalog for many sources at once: the probes (`probe_each`, so
/// one target's failure stays its own), then every column list of the present relations in one
/// more question. A failure of the catalog itself fails the batch.
pub async fn probe_with_columns<P: CatalogProvider>(
    provider: &P,
    targets: &[ProbeTarget],
) -> Result<Vec<Result<ProbedColumns, ProviderError>>, ProviderError> {
    let probes = probe_each(provider, targets).await?;
    let present: Vec<ProbeTarget> = targets
        .iter()
        .zip(&probes)
        .filter(|(_, a)| {
            matches!(a, Ok(Probe::Present { object_type, .. }) if *object_type != ObjectType::Topic)
        })
        .map(|(t, _)| t.clone())
        .collect();
    let mut columns = match present.is_empty() {
        true => Default::default(),
        false => match provider.columns_of(&present).await {
            Ok(c) => c,
            Err(e) if e.may_belong_to_one_target() => Default::default(),
            Err(e) => return Err(e),
        },
    };
    Ok(targets
        .iter()
        .zip(probes)
        .map(|(t, probe)| probe.map(|p| (p, columns.remove(t))))
        .collect())
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

    /// A catalog in a test: `forbidden` targets fail any batch holding them with a permission
    /// error, `down` fails every batch; counts the probe calls.
    #[derive(Default)]
    struct Fake {
        forbidden: Vec<ProbeTarget>,
        down: bool,
        calls: std::sync::atomic::AtomicUsize,
        /// Probed as topics (no columns).
        topics: Vec<ProbeTarget>,
        /// Fails every column question (the catalog went down after the probe).
        columns_down: bool,
        /// Probed fine, but their columns may not be read.
        columns_forbidden: Vec<ProbeTarget>,
        column_calls: std::sync::atomic::AtomicUsize,
    }

    impl CatalogProvider for Fake {
        async fn check_connection(&self) -> Result<(), ProviderError> {
            Ok(())
        }
        async fn probe(&self, targets: &[ProbeTarget]) -> Result<Vec<Probe>, ProviderError> {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if self.down {
                return Err(ProviderError::Unreachable("connection refused".into()));
            }
            if targets.iter().any(|t| self.forbidden.contains(t)) {
                return Err(ProviderError::PermissionDenied("namespace".into()));
            }
            Ok(targets
                .iter()
                .map(|t| Probe::Present {
                    object_type: match self.topics.contains(t) {
                        true => ObjectType::Topic,
                        false => ObjectType::Table,
                    },
                    native_id: format!("{t:?}"),
                })
                .collect())
        }
        async fn find_by_id(&self, _: &str) -> Result<Option<Found>, ProviderError> {
            Ok(None)
        }
        async fn columns(
            &self,
            schema: &str,
            name: &str,
        ) -> Result<Option<Vec<Column>>, ProviderError> {
            let target = ProbeTarget::relation(schema, name);
            if self.forbidden.contains(&target) || self.columns_forbidden.contains(&target) {
                return Err(ProviderError::PermissionDenied("table".into()));
            }
            Ok(Some(vec![Column::new(name, "integer")]))
        }
        async fn columns_of(
            &self,
            targets: &[ProbeTarget],
        ) -> Result<std::collections::HashMap<ProbeTarget, Vec<Column>>, ProviderError> {
            self.column_calls
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if self.columns_down {
                return Err(ProviderError::Unreachable("connection reset".into()));
            }
            let mut out = std::collections::HashMap::new();
            for t in targets {
                if let ProbeTarget::Relation { schema, name } = t
                    && let Some(cols) = self.columns(schema, name).await?
                {
                    out.insert(t.clone(), cols);
                }
            }
            Ok(out)
        }
        async fn server_identity(&self) -> Result<String, ProviderError> {
            Ok("fake".into())
        }
        fn invalid_name(&self, _: &ProbeTarget) -> Option<String> {
            None
        }
    }

    fn targets(n: usize) -> Vec<ProbeTarget> {
        (0..n)
            .map(|i| ProbeTarget::relation("s", format!("t{i}")))
            .collect()
    }

    #[tokio::test]
    async fn one_forbidden_target_fails_only_itself_not_the_batch() {
        let all = targets(5);
        let fake = Fake {
            forbidden: vec![all[2].clone()],
            ..Default::default()
        };
        let answers = probe_each(&fake, &all)
            .await
            .expect("the batch is answered");
        assert_eq!(answers.len(), 5);
        for (i, a) in answers.iter().enumerate() {
            match i {
                2 => assert!(
                    matches!(a, Err(ProviderError::PermissionDenied(_))),
                    "{a:?}"
                ),
                _ => assert!(matches!(a, Ok(Probe::Present { .. })), "{i}: {a:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_catalog_that_is_down_fails_the_batch_once_without_a_probe_per_target() {
        let fake = Fake {
            down: true,
            ..Default::default()
        };
        let answer = probe_each(&fake, &targets(50)).await;
        assert!(
            matches!(answer, Err(ProviderError::Unreachable(_))),
            "{answer:?}"
        );
        assert_eq!(fake.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_healthy_batch_is_one_probe() {
        let fake = Fake::default();
        let answers = probe_each(&fake, &targets(50)).await.unwrap();
        assert!(answers.iter().all(Result::is_ok));
        assert_eq!(fake.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    /// Whether an answer is present with the columns `{name: integer}` of its own table.
    fn has_own_columns(
        target: &ProbeTarget,
        answer: &Result<ProbedColumns, ProviderError>,
    ) -> bool {
        let ProbeTarget::Relation { name, .. } = target else {
            return false;
        };
        matches!(answer, Ok((Probe::Present { .. }, Some(cols))) if *cols == vec![Column::new(name.as_str(), "integer")])
    }

    #[tokio::test]
    async fn probes_and_columns_of_a_batch_are_two_questions_and_each_target_gets_its_own() {
        let all = targets(6);
        let fake = Fake {
            topics: vec![all[4].clone()],
            ..Default::default()
        };
        let answers = probe_with_columns(&fake, &all).await.unwrap();
        assert_eq!(answers.len(), 6);
        for (i, (t, a)) in all.iter().zip(&answers).enumerate() {
            match i {
                4 => assert!(
                    matches!(
                        a,
                        Ok((
                            Probe::Present {
                                object_type: ObjectType::Topic,
                                ..
                            },
                            None
                        ))
                    ),
                    "a topic has no columns: {a:?}"
                ),
                _ => assert!(has_own_columns(t, a), "{i}: {a:?}"),
            }
        }
        let calls =
            |c: &std::sync::atomic::AtomicUsize| c.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!((calls(&fake.calls), calls(&fake.column_calls)), (1, 1));
    }

    #[tokio::test]
    async fn a_forbidden_target_fails_alone_and_leaves_the_others_their_columns() {
        let all = targets(5);
        let fake = Fake {
            forbidden: vec![all[1].clone()],
            ..Default::default()
        };
        let answers = probe_with_columns(&fake, &all).await.unwrap();
        for (i, (t, a)) in all.iter().zip(&answers).enumerate() {
            match i {
                1 => assert!(
                    matches!(a, Err(ProviderError::PermissionDenied(_))),
                    "{a:?}"
                ),
                _ => assert!(has_own_columns(t, a), "{i}: {a:?}"),
            }
        }
    }

    #[tokio::test]
    async fn columns_one_target_may_not_read_are_left_to_each_asker_alone() {
        let all = targets(3);
        let fake = Fake {
            columns_forbidden: vec![all[0].clone()],
            ..Default::default()
        };
        let answers = probe_with_columns(&fake, &all).await.unwrap();
        assert!(
            answers
                .iter()
                .all(|a| matches!(a, Ok((Probe::Present { .. }, None)))),
            "probed, columns left to the askers: {answers:?}"
        );
    }

    #[tokio::test]
    async fn a_catalog_that_fails_the_column_question_fails_the_batch() {
        let fake = Fake {
            columns_down: true,
            ..Default::default()
        };
        let answer = probe_with_columns(&fake, &targets(3)).await;
        assert!(
            matches!(answer, Err(ProviderError::Unreachable(_))),
            "{answer:?}"
        );
    }

    #[tokio::test]
    async fn a_batch_of_absent_objects_and_topics_asks_no_column_question() {
        let all = targets(2);
        let fake = Fake {
            topics: all.clone(),
            ..Default::default()
        };
        let answers = probe_with_columns(&fake, &all).await.unwrap();
        assert!(
            answers.iter().all(|a| matches!(a, Ok((_, None)))),
            "{answers:?}"
        );
        assert_eq!(
            fake.column_calls.load(std::sync::atomic::Ordering::SeqCst),
            0
        );
    }
}
