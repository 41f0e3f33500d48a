//! PostgreSQL provider: single-object probes against pg_catalog, batched into one query per
//! batch (a VALUES list joined to the catalog, never a listing). Visibility in pg_catalog does
//! not depend on table privileges, so an unprivileged role still sees objects exist.
//!
//! Native ids: `pg:<system_identifier>:<database oid>:n<namespace oid>` for schemas and
//! `...:r<relation oid>` for tables and views. Oids survive `ALTER ... RENAME`, a drop and
//! recreate allocates a new oid, and the system identifier + database oid keep ids distinct
//! across servers and databases.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::sync::OnceCell;
use tokio_postgres::error::SqlState;

use super::{
    CatalogProvider, ConnectionSettings, Found, ObjectType, Probe, ProbeTarget, ProviderError,
    with_deadline,
};
use crate::crd::catalog::SslMode;

const RELKINDS: &str = "('r','p','f','v','m')";

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
        let tls = tokio_postgres_rustls::MakeRustlsConnect::new(tls_config(settings.ssl_mode));
        let manager = Manager::from_config(
            cfg,
            tls,
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
            let msg = scrub(db.message());
            let code = db.code();
            return if *code == SqlState::INVALID_PASSWORD
                || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
            {
                ProviderError::AuthFailed(msg)
            } else if *code == SqlState::INSUFFICIENT_PRIVILEGE {
                ProviderError::PermissionDenied(msg)
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
                ProviderError::ServerUnavailable(msg)
            } else if *code == SqlState::INVALID_CATALOG_NAME {
                ProviderError::Misconfigured(format!("{msg}; check spec.connection.database"))
            } else {
                ProviderError::Protocol(format!("{} ({})", msg, code.code()))
            };
        }
        let text = scrub(&error_chain(e));
        let lower = text.to_lowercase();
        if lower.contains("tls") || lower.contains("certificate") || lower.contains("handshake") {
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
                let row = client
                    .query_one(
                        "SELECT (SELECT system_identifier FROM pg_catalog.pg_control_system())::text, \
                         (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())::bigint",
                        &[],
                    )
                    .await
                    .map_err(|e| self.classify(&e))?;
                Ok::<_, ProviderError>(format!("pg:{}:{}", row.get::<_, String>(0), row.get::<_, i64>(1)))
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
            let rows = client
                .query(
                    "SELECT n.oid::bigint FROM unnest($1::text[]) WITH ORDINALITY AS t(s, ord) \
                     LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = t.s ORDER BY t.ord",
                    &[&schema_names],
                )
                .await
                .map_err(|e| self.classify(&e))?;
            expect_rows(rows.len(), schema_names.len())?;
            for (row, &i) in rows.iter().zip(&schema_idx) {
                if let Some(oid) = row.get::<_, Option<i64>>(0) {
                    answers[i] = Probe::Present {
                        object_type: ObjectType::Schema,
                        native_id: format!("{prefix}:n{oid}"),
                    };
                }
            }
        }
        if !rel_names.is_empty() {
            let rows = client
                .query(
                    &format!(
                        "SELECT c.oid::bigint, c.relkind::text FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(s, r, ord) \
                         LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = t.s \
                         LEFT JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = t.r AND c.relkind IN {RELKINDS} \
                         ORDER BY t.ord"
                    ),
                    &[&rel_schemas, &rel_names],
                )
                .await
                .map_err(|e| self.classify(&e))?;
            expect_rows(rows.len(), rel_names.len())?;
            for (row, &i) in rows.iter().zip(&rel_idx) {
                if let Some(oid) = row.get::<_, Option<i64>>(0) {
                    let kind: String = row.get(1);
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
        let (tag, oid) = local.split_at(1);
        let Ok(oid) = oid.parse::<i64>() else {
            return Ok(None);
        };
        match tag {
            "n" => {
                let rows = client
                    .query("SELECT nspname::text FROM pg_catalog.pg_namespace WHERE oid = $1::bigint::oid", &[&oid])
                    .await
                    .map_err(|e| self.classify(&e))?;
                Ok(rows.first().map(|r| Found {
                    target: ProbeTarget::schema(r.get::<_, String>(0)),
                    object_type: ObjectType::Schema,
                }))
            }
            "r" => {
                let rows = client
                    .query(
                        &format!(
                            "SELECT n.nspname::text, c.relname::text, c.relkind::text FROM pg_catalog.pg_class c \
                             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1::bigint::oid AND c.relkind IN {RELKINDS}"
                        ),
                        &[&oid],
                    )
                    .await
                    .map_err(|e| self.classify(&e))?;
                match rows.first() {
                    None => Ok(None),
                    Some(r) => Ok(Some(Found {
                        target: ProbeTarget::relation(r.get::<_, String>(0), r.get::<_, String>(1)),
                        object_type: relkind_type(&r.get::<_, String>(2))?,
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
    ) -> Result<Option<Vec<String>>, ProviderError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT c.oid::bigint, a.attname::text FROM pg_catalog.pg_class c \
                     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                     LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
                     WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN {RELKINDS} ORDER BY a.attnum"
                ),
                &[&schema, &name],
            )
            .await
            .map_err(|e| self.classify(&e))?;
        if rows.is_empty() {
            return Ok(None);
        }
        Ok(Some(
            rows.iter()
                .filter_map(|r| r.get::<_, Option<String>>(1))
                .collect(),
        ))
    }
}

impl CatalogProvider for PostgresProvider {
    async fn check_connection(&self) -> Result<(), ProviderError> {
        with_deadline(self.deadline(), async {
            let client = self.client().await?;
            client
                .simple_query("SELECT 1")
                .await
                .map_err(|e| self.classify(&e))?;
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
    ) -> Result<Option<Vec<String>>, ProviderError> {
        with_deadline(self.deadline(), self.columns_inner(schema, name)).await
    }
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

/// rustls settings per sslMode: prefer/require encrypt without verifying (libpq semantics);
/// verify-ca and verify-full verify against the Mozilla roots (rustls always checks the host).
fn tls_config(mode: SslMode) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions");
    match mode {
        SslMode::VerifyCa | SslMode::VerifyFull => {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        _ => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(EncryptOnly(provider)))
            .with_no_client_auth(),
    }
}

/// Accepts any server certificate but still checks handshake signatures: encryption without
/// authentication, exactly what libpq's `prefer` and `require` promise.
#[derive(Debug)]
struct EncryptOnly(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
