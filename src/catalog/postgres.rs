//! PostgreSQL provider: single-object probes against pg_catalog, batched into one query per
//! batch (a VALUES list joined to the catalog, never a listing). Visibility in pg_catalog does
//! not depend on table privileges, so an unprivileged role still sees objects exist.
//!
//! Native ids: `pg:<system_identifier>:<database oid>:n<namespace oid>` for schemas and
//! `...:r<relation oid>` for tables and views. Oids survive `ALTER ... RENAME`, a drop and
//! recreate allocates a new oid, and the system identifier + database oid keep ids distinct
//! across servers and databases.

use std::collections::HashMap;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use tokio::sync::OnceCell;
use tokio_postgres::error::SqlState;

use super::pg_guard::{AuthGuard, GuardedTls, Refuse};
use super::tls::tls_config;
use super::{
    CatalogProvider, Column, ConnectionSettings, Found, ObjectType, Probe, ProbeTarget,
    ProviderError, group_columns, relation_targets, with_deadline,
};
use crate::crd::catalog::SslMode;

const RELKINDS: &str = "('r','p','f','v','m')";
/// PostgreSQL's limit on the columns of one table: a column answer longer than this per
/// relation is not PostgreSQL's, and is not read further.
const MAX_COLUMNS: usize = 1600;

pub struct PostgresProvider {
    pool: Pool,
    settings: ConnectionSettings,
    /// `pg:<system_identifier>:<database oid>`, read once per pool.
    id_prefix: OnceCell<String>,
}

impl PostgresProvider {
    pub fn new(settings: ConnectionSettings) -> Result<Self, ProviderError> {
        let mut cfg = tokio_postgres::Config::new();
        cfg.host(&settings.host)
            .port(settings.port)
            .user(settings.credentials.username())
            .password(settings.credentials.expose_password())
            .dbname(settings.database.as_deref().unwrap_or("postgres"))
            .application_name("semops")
            .connect_timeout(settings.connect_timeout)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30))
            .options(format!(
                "-c statement_timeout={}",
                settings.statement_timeout.as_millis()
            ));
        cfg.ssl_mode(match settings.ssl_mode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                tokio_postgres::config::SslMode::Require
            }
        });
        let connect = GuardedConnect {
            host: settings.host.clone(),
            port: settings.port,
            addresses: settings.addresses.clone(),
            timeout: settings.connect_timeout,
            tls: tokio_postgres_rustls::MakeRustlsConnect::new(tls_config(
                settings.ssl_mode,
                settings.ca_pem.as_deref(),
                None,
            )?),
            refuse: refusals(settings.ssl_mode),
        };
        let manager = Manager::from_connect(
            cfg,
            connect,
            ManagerConfig {
                // Verified: a dead connection (server restart, killed backend) is never handed out.
                recycling_method: RecyclingMethod::Verified,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(settings.max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(settings.connect_timeout))
            .create_timeout(Some(settings.connect_timeout))
            .recycle_timeout(Some(settings.connect_timeout))
            .build()
            .map_err(|e| ProviderError::Misconfigured(e.to_string()))?;
        Ok(Self {
            pool,
            settings,
            id_prefix: OnceCell::new(),
        })
    }

    /// Upper bound for one operation: waiting for a connection plus running the statement.
    fn deadline(&self) -> Duration {
        self.settings.connect_timeout + self.settings.statement_timeout
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, ProviderError> {
        self.pool.get().await.map_err(|e| self.pool_error(e))
    }

    /// Runs `sql` as a statement prepared once per pooled connection. Acceptances, rounds and
    /// lookups ask the same few questions thousands of times; preparing each anew cost a round
    /// trip and a parse and plan on the server every time.
    async fn query_cached(
        &self,
        client: &deadpool_postgres::Object,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
        max_rows: usize,
    ) -> Result<Vec<tokio_postgres::Row>, ProviderError> {
        let statement = client
            .prepare_cached(sql)
            .await
            .map_err(|e| self.classify(&e))?;
        self.rows(client, &statement, params, max_rows).await
    }

    /// The rows of one query, read as they arrive and at most `max_rows` of them: a server that
    /// answers more is not PostgreSQL answering semops's question, and is not read further.
    async fn rows<T: ?Sized + tokio_postgres::ToStatement>(
        &self,
        client: &deadpool_postgres::Object,
        statement: &T,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
        max_rows: usize,
    ) -> Result<Vec<tokio_postgres::Row>, ProviderError> {
        use futures::TryStreamExt;
        let stream = client
            .query_raw(statement, params.iter().copied())
            .await
            .map_err(|e| self.classify(&e))?;
        let mut stream = std::pin::pin!(stream);
        let mut rows = Vec::new();
        while let Some(row) = stream.try_next().await.map_err(|e| self.classify(&e))? {
            if rows.len() == max_rows {
                return Err(ProviderError::Protocol(format!(
                    "the server answered more than {max_rows} rows to a catalog query"
                )));
            }
            rows.push(row);
        }
        Ok(rows)
    }

    fn pool_error(&self, e: PoolError) -> ProviderError {
        match e {
            PoolError::Timeout(_) => ProviderError::Timeout(self.settings.connect_timeout),
            PoolError::Backend(e) => self.classify(&e),
            other => {
                ProviderError::Unreachable(self.settings.credentials.scrub(&other.to_string()))
            }
        }
    }

    /// Maps a driver error to a category; anything unrecognized is a failure, never absence.
    fn classify(&self, e: &tokio_postgres::Error) -> ProviderError {
        let scrub = |s: &str| self.settings.credentials.scrub(s);
        if let Some(db) = e.as_db_error() {
            // The server's text may echo what it was sent: only the SQLSTATE leaves semops.
            let code = db.code();
            let said = |ours: &str| {
                self.settings.credentials.server_said(
                    ours,
                    &format!("SQLSTATE {}", code.code()),
                    db.message(),
                )
            };
            return if *code == SqlState::INVALID_PASSWORD
                || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
            {
                ProviderError::AuthFailed(said(
                    "the server refused the user name or password of spec.connection.credentialsSecretRef",
                ))
            } else if *code == SqlState::INSUFFICIENT_PRIVILEGE {
                ProviderError::PermissionDenied(said(
                    "the account may not read the system catalogs semops queries; grant it USAGE and SELECT",
                ))
            } else if *code == SqlState::QUERY_CANCELED {
                ProviderError::Timeout(self.settings.statement_timeout)
            } else if [
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
                SqlState::TOO_MANY_CONNECTIONS,
            ]
            .contains(code)
            {
                ProviderError::ServerUnavailable(said(
                    "the server is shutting down, starting or out of connections",
                ))
            } else if *code == SqlState::INVALID_CATALOG_NAME {
                ProviderError::Misconfigured(said(
                    "the database does not exist; check spec.connection.database",
                ))
            } else {
                ProviderError::Protocol(said("the server refused a query"))
            };
        }
        let text = scrub(&error_chain(e));
        let lower = text.to_lowercase();
        if let Some(why) = guard_refusal(e) {
            ProviderError::InsecureAuth(why)
        } else if lower.contains("tls")
            || lower.contains("certificate")
            || lower.contains("handshake")
        {
            ProviderError::Tls(text)
        } else if lower.contains("timed out") || lower.contains("timeout") {
            ProviderError::Timeout(self.settings.connect_timeout)
        } else {
            ProviderError::Unreachable(text)
        }
    }

    async fn id_prefix(&self, client: &deadpool_postgres::Object) -> Result<String, ProviderError> {
        self.id_prefix
            .get_or_try_init(|| async {
                let rows = self
                    .rows(
                        client,
                        "SELECT (SELECT system_identifier FROM pg_catalog.pg_control_system())::text, \
                         (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())::bigint",
                        &[],
                        1,
                    )
                    .await?;
                let row = rows.first().ok_or_else(|| {
                    ProviderError::Protocol("no answer to the server identity query".into())
                })?;
                Ok::<_, ProviderError>(format!("pg:{}:{}", col::<String>(row, 0)?, col::<i64>(row, 1)?))
            })
            .await
            .cloned()
    }

    async fn probe_batch(&self, targets: &[ProbeTarget]) -> Result<Vec<Probe>, ProviderError> {
        let client = self.client().await?;
        let prefix = self.id_prefix(&client).await?;
        let mut answers = vec![Probe::Absent; targets.len()];
        let (mut schema_idx, mut schema_names) = (Vec::new(), Vec::new());
        let (mut rel_idx, mut rel_schemas, mut rel_names) = (Vec::new(), Vec::new(), Vec::new());
        for (i, t) in targets.iter().enumerate() {
            match t {
                ProbeTarget::Schema { name } => {
                    schema_idx.push(i);
                    schema_names.push(name.as_str());
                }
                ProbeTarget::Relation { schema, name } => {
                    rel_idx.push(i);
                    rel_schemas.push(schema.as_str());
                    rel_names.push(name.as_str());
                }
            }
        }
        if !schema_names.is_empty() {
            let rows = self
                .query_cached(
                    &client,
                    "SELECT n.oid::bigint FROM unnest($1::text[]) WITH ORDINALITY AS t(s, ord) \
                     LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = t.s ORDER BY t.ord",
                    &[&schema_names],
                    schema_names.len(),
                )
                .await?;
            expect_rows(rows.len(), schema_names.len())?;
            for (row, &i) in rows.iter().zip(&schema_idx) {
                if let Some(oid) = col::<Option<i64>>(row, 0)? {
                    answers[i] = Probe::Present {
                        object_type: ObjectType::Schema,
                        native_id: format!("{prefix}:n{oid}"),
                    };
                }
            }
        }
        if !rel_names.is_empty() {
            let rows = self
                .query_cached(
                    &client,
                    &format!(
                        "SELECT c.oid::bigint, c.relkind::text FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(s, r, ord) \
                         LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = t.s \
                         LEFT JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = t.r AND c.relkind IN {RELKINDS} \
                         ORDER BY t.ord"
                    ),
                    &[&rel_schemas, &rel_names],
                    rel_names.len(),
                )
                .await?;
            expect_rows(rows.len(), rel_names.len())?;
            for (row, &i) in rows.iter().zip(&rel_idx) {
                if let Some(oid) = col::<Option<i64>>(row, 0)? {
                    let kind: String = col(row, 1)?;
                    answers[i] = Probe::Present {
                        object_type: relkind_type(&kind)?,
                        native_id: format!("{prefix}:r{oid}"),
                    };
                }
            }
        }
        Ok(answers)
    }

    async fn find_by_id_inner(&self, native_id: &str) -> Result<Option<Found>, ProviderError> {
        let client = self.client().await?;
        let prefix = self.id_prefix(&client).await?;
        let Some(local) = native_id
            .strip_prefix(&prefix)
            .and_then(|r| r.strip_prefix(':'))
        else {
            return Ok(None); // an id from another server or database
        };
        // Recorded ids come from status, which anyone with write access can edit: parse, never
        // index (an empty or non-ASCII id must not panic the operator).
        let Some((tag, oid)) = split_local_id(local) else {
            return Ok(None);
        };
        match tag {
            'n' => {
                let rows = self
                    .rows(&client, "SELECT nspname::text FROM pg_catalog.pg_namespace WHERE oid = $1::bigint::oid", &[&oid], 1)
                    .await?;
                match rows.first() {
                    None => Ok(None),
                    Some(r) => Ok(Some(Found {
                        target: ProbeTarget::schema(col::<String>(r, 0)?),
                        object_type: ObjectType::Schema,
                    })),
                }
            }
            'r' => {
                let rows = self
                    .rows(
                        &client,
                        &format!(
                            "SELECT n.nspname::text, c.relname::text, c.relkind::text FROM pg_catalog.pg_class c \
                             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1::bigint::oid AND c.relkind IN {RELKINDS}"
                        ),
                        &[&oid],
                        1,
                    )
                    .await?;
                match rows.first() {
                    None => Ok(None),
                    Some(r) => Ok(Some(Found {
                        target: ProbeTarget::relation(col::<String>(r, 0)?, col::<String>(r, 1)?),
                        object_type: relkind_type(&col::<String>(r, 2)?)?,
                    })),
                }
            }
            _ => Ok(None),
        }
    }

    async fn columns_inner(
        &self,
        schema: &str,
        name: &str,
    ) -> Result<Option<Vec<Column>>, ProviderError> {
        let client = self.client().await?;
        let rows = self
            .rows(
                &client,
                &format!(
                    "SELECT c.oid::bigint, a.attname::text, format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_class c \
                     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                     LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
                     WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN {RELKINDS} ORDER BY a.attnum"
                ),
                &[&schema, &name],
                MAX_COLUMNS + 1,
            )
            .await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let mut columns = Vec::new();
        for r in &rows {
            if let Some(name) = col::<Option<String>>(r, 1)? {
                columns.push(Column::new(
                    name,
                    col::<Option<String>>(r, 2)?.unwrap_or_default(),
                ));
            }
        }
        Ok(Some(columns))
    }

    /// Every column of every relation target, in one query.
    async fn columns_of_inner(
        &self,
        targets: &[ProbeTarget],
    ) -> Result<HashMap<ProbeTarget, Vec<Column>>, ProviderError> {
        let relations = relation_targets(targets);
        if relations.is_empty() {
            return Ok(HashMap::new());
        }
        let schemas: Vec<&str> = relations.iter().map(|r| r.0).collect();
        let names: Vec<&str> = relations.iter().map(|r| r.1).collect();
        let client = self.client().await?;
        let rows = self
            .query_cached(
                &client,
                &format!(
                    "SELECT t.ord::bigint, a.attname::text, format_type(a.atttypid, a.atttypmod) \
                     FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(s, r, ord) \
                     JOIN pg_catalog.pg_namespace n ON n.nspname = t.s \
                     JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = t.r AND c.relkind IN {RELKINDS} \
                     JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
                     ORDER BY t.ord, a.attnum"
                ),
                &[&schemas, &names],
                relations.len().saturating_mul(MAX_COLUMNS),
            )
            .await?;
        let columns = rows
            .iter()
            .map(|r| {
                Ok((
                    col::<i64>(r, 0)?,
                    Column::new(col::<String>(r, 1)?, col::<String>(r, 2)?),
                ))
            })
            .collect::<Result<Vec<_>, ProviderError>>()?;
        group_columns(&relations, columns)
    }
}

impl CatalogProvider for PostgresProvider {
    async fn check_connection(&self) -> Result<(), ProviderError> {
        with_deadline(self.deadline(), async {
            let client = self.client().await?;
            self.rows(&client, "SELECT 1", &[], 1).await?;
            self.id_prefix(&client).await.map(drop)
        })
        .await
    }

    async fn probe(&self, targets: &[ProbeTarget]) -> Result<Vec<Probe>, ProviderError> {
        with_deadline(self.deadline(), self.probe_batch(targets)).await
    }

    async fn find_by_id(&self, native_id: &str) -> Result<Option<Found>, ProviderError> {
        with_deadline(self.deadline(), self.find_by_id_inner(native_id)).await
    }

    async fn columns(
        &self,
        schema: &str,
        name: &str,
    ) -> Result<Option<Vec<Column>>, ProviderError> {
        with_deadline(self.deadline(), self.columns_inner(schema, name)).await
    }

    async fn columns_of(
        &self,
        targets: &[ProbeTarget],
    ) -> Result<HashMap<ProbeTarget, Vec<Column>>, ProviderError> {
        with_deadline(self.deadline(), self.columns_of_inner(targets)).await
    }

    async fn server_identity(&self) -> Result<String, ProviderError> {
        with_deadline(self.deadline(), async {
            let client = self.client().await?;
            self.id_prefix(&client).await
        })
        .await
    }

    fn invalid_name(&self, target: &ProbeTarget) -> Option<String> {
        let names: &[&str] = match target {
            ProbeTarget::Schema { name } => &[name],
            ProbeTarget::Relation { schema, name } => &[schema, name],
        };
        names.iter().find_map(|n| pg_name_problem(n))
    }
}

/// PostgreSQL identifiers are at most 63 bytes (NAMEDATALEN - 1; longer names are truncated
/// when created, so such a registration could never match) and cannot hold NUL (the server
/// rejects the whole statement, which would fail every probe of the round).
fn pg_name_problem(name: &str) -> Option<String> {
    if name.contains('\0') {
        Some(format!(
            "{name:?} contains a NUL character, which PostgreSQL names cannot hold"
        ))
    } else if name.len() > 63 {
        Some(format!(
            "{name:?} is {} bytes long; PostgreSQL names are at most 63 bytes",
            name.len()
        ))
    } else {
        None
    }
}

/// `n123` / `r456` → (tag, oid); anything else (empty, other tags, non-digits) → `None`.
fn split_local_id(local: &str) -> Option<(char, i64)> {
    let mut chars = local.chars();
    let tag = chars.next()?;
    let oid = chars.as_str();
    if oid.is_empty() || !oid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((tag, oid.parse().ok()?))
}

/// Column `i` of a row as `T`. The server describes its own answer, so a hostile one can send
/// other types than the query asks for: an error, never a panic.
fn col<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a tokio_postgres::Row,
    i: usize,
) -> Result<T, ProviderError> {
    row.try_get(i).map_err(|_| {
        ProviderError::Protocol(format!(
            "column {i} of the server's answer has an unexpected type"
        ))
    })
}

fn expect_rows(got: usize, want: usize) -> Result<(), ProviderError> {
    if got == want {
        Ok(())
    } else {
        Err(ProviderError::Protocol(format!(
            "expected {want} probe rows, got {got}"
        )))
    }
}

fn relkind_type(kind: &str) -> Result<ObjectType, ProviderError> {
    match kind {
        "r" | "p" | "f" => Ok(ObjectType::Table),
        "v" | "m" => Ok(ObjectType::View),
        other => Err(ProviderError::Protocol(format!(
            "unexpected relkind {other:?}"
        ))),
    }
}

/// The error and its sources, joined, so "connection refused" deep in the chain is classified.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.join(": ")
}

/// What the password guard refuses per sslMode: the `password` method always (unless TLS is
/// off by the user's explicit choice), MD5 where the channel does not authenticate the server
/// (an MD5 answer to a salt the attacker chose is an offline-crackable hash).
fn refusals(mode: SslMode) -> Refuse {
    match mode {
        SslMode::Disable => Refuse {
            cleartext: false,
            md5: false,
        },
        SslMode::Prefer | SslMode::Require => Refuse {
            cleartext: true,
            md5: true,
        },
        SslMode::VerifyCa | SslMode::VerifyFull => Refuse {
            cleartext: true,
            md5: false,
        },
    }
}

/// The guard's refusal in a driver error, if that is what failed the connection.
fn guard_refusal(e: &tokio_postgres::Error) -> Option<String> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::PermissionDenied
            && io.to_string().starts_with("the server asked for")
        {
            return Some(io.to_string());
        }
        source = s.source();
    }
    None
}

/// Connects to the catalog's server itself, so the password guard can read the server's side of
/// the startup exchange on the socket and inside TLS before tokio-postgres answers it.
struct GuardedConnect {
    host: String,
    port: u16,
    /// The checked addresses of `host:port` (never resolved again).
    addresses: super::Addresses,
    timeout: Duration,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    refuse: Refuse,
}

impl deadpool_postgres::Connect for GuardedConnect {
    fn connect(
        &self,
        pg_config: &tokio_postgres::Config,
    ) -> futures::future::BoxFuture<
        '_,
        Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), tokio_postgres::Error>,
    > {
        let pg_config = pg_config.clone();
        Box::pin(async move {
            let tcp = self
                .addresses
                .connect(&self.host, self.port, self.timeout)
                .await;
            let tcp = match tcp {
                Ok(tcp) => tcp,
                Err(e) => return Err(failed_with(&pg_config, e).await),
            };
            let _ = tcp.set_nodelay(true);
            let mut make = self.tls.clone();
            let tls = tokio_postgres::tls::MakeTlsConnect::<AuthGuard<tokio::net::TcpStream>>::make_tls_connect(
                &mut make, &self.host,
            )
            .expect("making a rustls connector cannot fail");
            let refuse = self.refuse;
            let connecting = pg_config.connect_raw(
                AuthGuard::socket(tcp, refuse),
                GuardedTls { inner: tls, refuse },
            );
            let (client, connection) = match tokio::time::timeout(self.timeout, connecting).await {
                Ok(result) => result?,
                Err(_) => {
                    let e = std::io::Error::new(std::io::ErrorKind::TimedOut, "startup timed out");
                    return Err(failed_with(&pg_config, e).await);
                }
            };
            let task = tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(error = %e, "catalog connection closed");
                }
            });
            Ok((client, task))
        })
    }
}

/// A tokio-postgres error carrying `e` (its errors cannot be built from outside): a plaintext
/// startup over a stream whose first write fails with `e`.
async fn failed_with(
    pg_config: &tokio_postgres::Config,
    e: std::io::Error,
) -> tokio_postgres::Error {
    let mut plain = pg_config.clone();
    plain.ssl_mode(tokio_postgres::config::SslMode::Disable);
    match plain
        .connect_raw(Failed(Some(e)), tokio_postgres::NoTls)
        .await
    {
        Err(e) => e,
        Ok(_) => unreachable!("a stream that fails every write cannot complete a startup"),
    }
}

/// A stream whose first write fails with a given error (see [`GuardedConnect`]).
struct Failed(Option<std::io::Error>);

impl tokio::io::AsyncRead for Failed {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

impl tokio::io::AsyncWrite for Failed {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::task::Poll::Ready(Err(self
            .0
            .take()
            .unwrap_or_else(|| std::io::Error::other("connection failed"))))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn recorded_ids_parse_or_are_ignored() {
        let cases = [
            ("n42", Some(('n', 42))),
            ("r7", Some(('r', 7))),
            ("", None),
            ("n", None),
            ("r-1", None),
            ("r+1", None),
            ("é12", Some(('é', 12))), // an unknown tag: ignored by the caller, never a panic
            ("r12x", None),
            ("r99999999999999999999999", None),
        ];
        for (id, want) in cases {
            assert_eq!(split_local_id(id), want, "{id:?}");
        }
    }

    #[test]
    fn names_postgres_cannot_hold_are_invalid() {
        assert!(pg_name_problem(&"x".repeat(64)).is_some());
        assert!(pg_name_problem(&"é".repeat(32)).is_some(), "64 bytes");
        assert!(pg_name_problem("a\0b").is_some());
        assert_eq!(pg_name_problem(&"x".repeat(63)), None);
        assert_eq!(pg_name_problem("Ünïcode ok"), None);
    }

    proptest! {
        // Recorded ids come from status, which anyone with write access may edit.
        #[test]
        fn no_recorded_id_panics_the_parser(id in ".{0,40}") {
            let _ = split_local_id(&id);
            let _ = pg_name_problem(&id);
        }
    }
}
