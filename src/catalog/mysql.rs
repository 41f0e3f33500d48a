//! MySQL / MariaDB provider. information_schema only shows objects the account has some
//! privilege on, so a missing row is never taken as absence: each candidate absence is confirmed
//! by a single-object statement whose error code separates "does not exist" (1146, 1049) from
//! "not allowed to know" (1142, 1044) — the latter is `PermissionDenied`, never `Absent`.
//!
//! Native ids (docs/providers.md): with the PROCESS privilege, InnoDB tables get their InnoDB
//! table id (`my:innodb:<id>`), which survives RENAME and changes on drop + create. Otherwise,
//! and always for views and schemas, the id is name-derived (`my:name:<schema>/<name>`): a
//! rename looks like drop + create, a recreate keeps it. Ids name no host: a pod rename changes
//! nothing, and which server they were recorded on is tracked apart (`server_identity`: MySQL's
//! `server_uuid`, MariaDB's `server_id`), so a failover is recognized instead of guessed.

use std::collections::HashMap;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Opts, OptsBuilder, Pool, PoolConstraints, PoolOpts, SslOpts};
use tokio::sync::OnceCell;

use super::{
    CatalogProvider, Column, ConnectionSettings, Found, ObjectType, Probe, ProbeTarget,
    ProviderError, group_columns, relation_targets, with_deadline,
};
use crate::crd::catalog::SslMode;

pub struct MysqlProvider {
    /// Built on first use (verify-ca first learns which name the certificate carries).
    pool: OnceCell<Pool>,
    settings: ConnectionSettings,
    server: OnceCell<ServerFacts>,
}

/// Ids name no server (see the module docs).
const ID_PREFIX: &str = "my";
/// Largest packet read from the server (what semops asks for answers in short rows).
const MAX_PACKET: usize = 4 << 20;
/// MySQL's limit on the columns of one table: a longer column answer per relation is not read.
const MAX_COLUMNS: usize = 4096;

/// What a server tells once per pool.
#[derive(Clone, Debug)]
struct ServerFacts {
    /// `mysql:<server_uuid>` or `mariadb:server_id=<n>`.
    identity: String,
    /// 0: names compared exactly; 1 or 2: compared in lower case.
    lower_case_table_names: u8,
    /// The InnoDB dictionary view this account may read (needs PROCESS), if any.
    innodb_view: Option<&'static str>,
}

/// Stored tables and views by their folded (schema, name): (table type, schema, name).
type StoredTables = HashMap<(String, String), (String, String, String)>;

/// Server error codes semops acts on.
mod code {
    pub const DB_ACCESS_DENIED: u16 = 1044;
    pub const ACCESS_DENIED: u16 = 1045;
    pub const BAD_DB: u16 = 1049;
    pub const SERVER_SHUTDOWN: u16 = 1053;
    pub const TOO_MANY_CONNECTIONS: u16 = 1040;
    pub const TABLE_ACCESS_DENIED: u16 = 1142;
    pub const COLUMN_ACCESS_DENIED: u16 = 1143;
    pub const NO_SUCH_TABLE: u16 = 1146;
    pub const SPECIFIC_ACCESS_DENIED: u16 = 1227;
    pub const STATEMENT_TIMEOUT_MARIADB: u16 = 1969;
    pub const STATEMENT_TIMEOUT_MYSQL: u16 = 3024;
}

impl MysqlProvider {
    pub fn new(settings: ConnectionSettings) -> Result<Self, ProviderError> {
        PoolConstraints::new(0, settings.max_connections.max(1))
            .ok_or_else(|| ProviderError::Misconfigured("bad pool size".into()))?;
        Ok(Self {
            pool: OnceCell::new(),
            settings,
            server: OnceCell::new(),
        })
    }

    /// Connection options to `address` (checked); `tls_name` pins the name the certificate must
    /// carry (verify-ca; verify-full checks the Catalog's host name).
    fn opts(&self, address: std::net::IpAddr, tls_name: Option<String>) -> Opts {
        let settings = &self.settings;
        let trusted = |ssl: SslOpts| match &settings.ca_pem {
            Some(pem) => ssl
                .with_root_certs(vec![pem.clone().into()])
                .with_disable_built_in_roots(true),
            None => ssl,
        };
        // mysql_async has no `prefer`: both explicit insecure modes go without TLS (reported).
        let ssl = match settings.ssl_mode {
            SslMode::Disable | SslMode::Prefer => None,
            SslMode::Require => Some(
                SslOpts::default()
                    .with_danger_accept_invalid_certs(true)
                    .with_danger_skip_domain_validation(true),
            ),
            SslMode::VerifyCa => {
                Some(trusted(SslOpts::default()).with_danger_tls_hostname_override(tls_name))
            }
            // Dialled by address: the certificate must still name the Catalog's host.
            SslMode::VerifyFull => Some(
                trusted(SslOpts::default())
                    .with_danger_tls_hostname_override(Some(settings.host.clone())),
            ),
        };
        let constraints =
            PoolConstraints::new(0, settings.max_connections.max(1)).expect("checked in new");
        OptsBuilder::default()
            .ip_or_hostname(address.to_string())
            .tcp_port(settings.port)
            .user(Some(settings.credentials.username()))
            .pass(Some(settings.credentials.expose_password()))
            .db_name(settings.database.clone())
            .ssl_opts(ssl)
            .prefer_socket(false)
            // Set here, so the server's own value (which a hostile one chooses) is not used:
            // no packet larger than this is buffered.
            .max_allowed_packet(Some(MAX_PACKET))
            .pool_opts(
                PoolOpts::default()
                    .with_constraints(constraints)
                    .with_inactive_connection_ttl(Duration::from_secs(60)),
            )
            .into()
    }

    /// The pool, built on first use. verify-ca checks the chain but not the host name; the
    /// driver cannot be told so, so a first connection verifies fully and, when only the name
    /// differs (the chain verified), the pool pins the name the certificate carries.
    async fn pool(&self) -> Result<&Pool, ProviderError> {
        self.pool
            .get_or_try_init(|| async {
                let (host, port) = (&self.settings.host, self.settings.port);
                let address = self
                    .settings
                    .addresses
                    .of(host, port)
                    .await
                    .ok()
                    .and_then(|a| a.first().map(|a| a.ip()))
                    .ok_or_else(|| {
                        ProviderError::Unreachable(format!("{host}:{port} has no address"))
                    })?;
                if self.settings.ssl_mode != SslMode::VerifyCa {
                    return Ok(Pool::new(self.opts(address, None)));
                }
                let name = match mysql_async::Conn::new(self.opts(address, None)).await {
                    Ok(conn) => {
                        let _ = conn.disconnect().await;
                        None
                    }
                    Err(e) => match certificate_name(&e.to_string()) {
                        Some(name) => Some(name),
                        None => return Err(self.classify(&e)),
                    },
                };
                Ok(Pool::new(self.opts(address, name)))
            })
            .await
    }

    fn deadline(&self) -> Duration {
        self.settings.connect_timeout + self.settings.statement_timeout
    }

    async fn conn(&self) -> Result<mysql_async::Conn, ProviderError> {
        let pool = tokio::time::timeout(self.settings.connect_timeout, self.pool())
            .await
            .map_err(|_| ProviderError::Timeout(self.settings.connect_timeout))??;
        tokio::time::timeout(self.settings.connect_timeout, pool.get_conn())
            .await
            .map_err(|_| ProviderError::Timeout(self.settings.connect_timeout))?
            .map_err(|e| self.classify(&e))
    }

    fn classify(&self, e: &mysql_async::Error) -> ProviderError {
        let scrub = |s: &str| self.settings.credentials.scrub(s);
        match e {
            mysql_async::Error::Server(s) => {
                // The server's text may echo what it was sent: only the error number leaves.
                let said = |ours: &str| {
                    self.settings.credentials.server_said(
                        ours,
                        &format!("MySQL error {}", s.code),
                        &s.message,
                    )
                };
                match s.code {
                    code::ACCESS_DENIED => ProviderError::AuthFailed(said(
                        "the server refused the user name or password of spec.connection.credentialsSecretRef",
                    )),
                    code::DB_ACCESS_DENIED
                    | code::TABLE_ACCESS_DENIED
                    | code::COLUMN_ACCESS_DENIED
                    | code::SPECIFIC_ACCESS_DENIED => ProviderError::PermissionDenied(said(
                        "the account may not read information_schema or the database; grant it SELECT",
                    )),
                    code::SERVER_SHUTDOWN | code::TOO_MANY_CONNECTIONS => {
                        ProviderError::ServerUnavailable(said(
                            "the server is shutting down or out of connections",
                        ))
                    }
                    code::STATEMENT_TIMEOUT_MARIADB | code::STATEMENT_TIMEOUT_MYSQL => {
                        ProviderError::Timeout(self.settings.statement_timeout)
                    }
                    code::BAD_DB => ProviderError::Misconfigured(said(
                        "the database does not exist; check spec.connection.database",
                    )),
                    _ => ProviderError::Protocol(said("the server refused a query")),
                }
            }
            mysql_async::Error::Io(io) => {
                let text = scrub(&io.to_string());
                if text.to_lowercase().contains("tls")
                    || text.to_lowercase().contains("certificate")
                {
                    ProviderError::Tls(text)
                } else {
                    ProviderError::Unreachable(text)
                }
            }
            mysql_async::Error::Url(u) => ProviderError::Misconfigured(scrub(&u.to_string())),
            other => ProviderError::Protocol(scrub(&other.to_string())),
        }
    }

    /// The rows of one statement, read as they arrive and at most `max_rows` of them, each
    /// converted to `T` without panicking (the server describes its own answer, so a hostile
    /// one can send other types than asked for, or more rows than any real answer has).
    async fn rows<T, Q, P>(
        &self,
        conn: &mut mysql_async::Conn,
        sql: Q,
        params: P,
        max_rows: usize,
    ) -> Result<Vec<T>, ProviderError>
    where
        T: mysql_async::prelude::FromRow + Send + 'static,
        Q: mysql_async::prelude::StatementLike,
        P: Into<mysql_async::Params> + Send,
    {
        let mut answer = conn
            .exec_iter(sql, params)
            .await
            .map_err(|e| self.classify(&e))?;
        let mut rows = Vec::new();
        while let Some(row) = answer.next().await.map_err(|e| self.classify(&e))? {
            if rows.len() == max_rows {
                return Err(ProviderError::Protocol(format!(
                    "the server answered more than {max_rows} rows to a catalog query"
                )));
            }
            rows.push(mysql_async::from_row_opt::<T>(row).map_err(|_| {
                ProviderError::Protocol("a row of the server's answer has unexpected types".into())
            })?);
        }
        Ok(rows)
    }

    async fn facts(&self, conn: &mut mysql_async::Conn) -> Result<ServerFacts, ProviderError> {
        if let Some(f) = self.server.get() {
            return Ok(f.clone());
        }
        let row: Option<(String, u64, u8)> = self
            .rows(
                conn,
                "SELECT VERSION(), @@server_id, @@lower_case_table_names",
                (),
                1,
            )
            .await?
            .pop();
        let (version, server_id, lctn) = row.ok_or_else(|| {
            ProviderError::Protocol("empty reply to the server facts query".into())
        })?;
        let mariadb = version.contains("MariaDB");
        let view = if mariadb {
            "INNODB_SYS_TABLES"
        } else {
            "INNODB_TABLES"
        };
        // MySQL keeps server_uuid in its data directory (it survives restarts and pod renames);
        // MariaDB has no persistent id, so its configured server_id stands in.
        let identity = if mariadb {
            format!("mariadb:server_id={server_id}")
        } else {
            let uuid: Option<String> = self.rows(conn, "SELECT @@server_uuid", (), 1).await?.pop();
            format!("mysql:{}", uuid.unwrap_or_default())
        };
        // Readable only with PROCESS, checked only when rows are read (LIMIT 0 passes without
        // it); without it ids fall back to names.
        let innodb_view = match conn
            .query_drop(format!(
                "SELECT TABLE_ID FROM information_schema.{view} LIMIT 1"
            ))
            .await
        {
            Ok(()) => Some(view),
            Err(mysql_async::Error::Server(s))
                if [
                    code::SPECIFIC_ACCESS_DENIED,
                    code::TABLE_ACCESS_DENIED,
                    code::DB_ACCESS_DENIED,
                ]
                .contains(&s.code) =>
            {
                None
            }
            Err(mysql_async::Error::Server(s)) if s.code == 1109 => None, // unknown table: another flavor
            Err(e) => return Err(self.classify(&e)),
        };
        let facts = ServerFacts {
            identity,
            lower_case_table_names: lctn,
            innodb_view,
        };
        let _ = self.server.set(facts.clone());
        Ok(facts)
    }

    async fn probe_batch(&self, targets: &[ProbeTarget]) -> Result<Vec<Probe>, ProviderError> {
        let mut conn = self.conn().await?;
        let facts = self.facts(&mut conn).await?;
        let lower = facts.lower_case_table_names != 0;
        let fold = |s: &str| fold(lower, s);
        let mut answers = vec![Probe::Absent; targets.len()];
        let pairs: Vec<(usize, String, String)> = targets
            .iter()
            .enumerate()
            .map(|(i, t)| match t {
                ProbeTarget::Schema { name } => (i, fold(name), String::new()),
                ProbeTarget::Relation { schema, name } => (i, fold(schema), fold(name)),
            })
            .collect();
        // Candidates by constant lists, matched byte-exactly here: the server prunes
        // information_schema by constants, while a join against a JSON list of names made it
        // compare every stored table with every name (0.4 s per 200 names at 10,000 tables).
        let tables = self.candidate_tables(&mut conn, lower, &pairs).await?;
        let schemas = self.candidate_schemas(&mut conn, lower, &pairs).await?;
        for (i, s, n) in &pairs {
            let present = match &targets[*i] {
                ProbeTarget::Schema { .. } => schemas
                    .contains(s)
                    .then(|| (ObjectType::Schema, format!("{ID_PREFIX}:name:{s}"))),
                ProbeTarget::Relation { .. } => {
                    tables
                        .get(&(s.clone(), n.clone()))
                        .map(|(table_type, t_schema, t_name)| {
                            let ty = if table_type.contains("VIEW") {
                                ObjectType::View
                            } else {
                                ObjectType::Table
                            };
                            (ty, format!("{ID_PREFIX}:name:{t_schema}/{t_name}"))
                        })
                }
            };
            answers[*i] = match present {
                Some((object_type, native_id)) => Probe::Present {
                    object_type,
                    native_id,
                },
                // Invisible is not absent: confirm with a statement that tells the two apart.
                None => self.confirm_absent(&mut conn, &targets[*i], s, n).await?,
            };
        }
        if let Some(view) = facts.innodb_view {
            self.attach_innodb_ids(&mut conn, view, &facts, targets, &mut answers)
                .await?;
        }
        Ok(answers)
    }

    /// The stored tables and views among the relation `pairs` (folded names).
    async fn candidate_tables(
        &self,
        conn: &mut mysql_async::Conn,
        lower: bool,
        pairs: &[(usize, String, String)],
    ) -> Result<StoredTables, ProviderError> {
        let wanted: Vec<mysql_async::Value> = pairs
            .iter()
            .filter(|(_, _, n)| !n.is_empty())
            .flat_map(|(_, s, n)| [s.as_str().into(), n.as_str().into()])
            .collect();
        if wanted.is_empty() {
            return Ok(HashMap::new());
        }
        let sql = format!(
            "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES \
             WHERE (TABLE_SCHEMA, TABLE_NAME) IN ({})",
            placeholders(wanted.len() / 2, "(?, ?)")
        );
        // Case-insensitive names may match more than one stored object per pair.
        let most = wanted.len() * 4;
        let rows: Vec<(String, String, String)> = self.rows(conn, sql, wanted, most).await?;
        Ok(rows
            .into_iter()
            .map(|(schema, name, ty)| {
                (
                    (fold(lower, &schema), fold(lower, &name)),
                    (ty, schema, name),
                )
            })
            .collect())
    }

    /// The stored schemas among the schema targets of `pairs`, folded.
    async fn candidate_schemas(
        &self,
        conn: &mut mysql_async::Conn,
        lower: bool,
        pairs: &[(usize, String, String)],
    ) -> Result<std::collections::HashSet<String>, ProviderError> {
        let wanted: Vec<mysql_async::Value> = pairs
            .iter()
            .filter(|(_, _, n)| n.is_empty())
            .map(|(_, s, _)| s.as_str().into())
            .collect();
        if wanted.is_empty() {
            return Ok(Default::default());
        }
        let sql = format!(
            "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME IN ({})",
            placeholders(wanted.len(), "?")
        );
        let most = wanted.len() * 4;
        let rows: Vec<String> = self.rows(conn, sql, wanted, most).await?;
        Ok(rows.iter().map(|s| fold(lower, s)).collect())
    }

    /// Absent only when the server says the object does not exist; a permission error fails.
    async fn confirm_absent(
        &self,
        conn: &mut mysql_async::Conn,
        target: &ProbeTarget,
        schema: &str,
        name: &str,
    ) -> Result<Probe, ProviderError> {
        let sql = match target {
            ProbeTarget::Schema { .. } => {
                format!("SHOW TABLES FROM {} LIKE ''", quote_ident(schema))
            }
            ProbeTarget::Relation { .. } => format!(
                "SELECT 1 FROM {}.{} LIMIT 0",
                quote_ident(schema),
                quote_ident(name)
            ),
        };
        match conn.query_drop(sql).await {
            Err(mysql_async::Error::Server(s))
                if s.code == code::NO_SUCH_TABLE || s.code == code::BAD_DB =>
            {
                Ok(Probe::Absent)
            }
            Err(e) => Err(self.classify(&e)),
            // It exists but information_schema did not show it: visible to a statement, hidden from the listing.
            Ok(()) => Err(ProviderError::PermissionDenied(format!(
                "{} exists but information_schema does not show it to this account; grant it SELECT or SHOW VIEW",
                target_label(target)
            ))),
        }
    }

    async fn attach_innodb_ids(
        &self,
        conn: &mut mysql_async::Conn,
        view: &str,
        facts: &ServerFacts,
        targets: &[ProbeTarget],
        answers: &mut [Probe],
    ) -> Result<(), ProviderError> {
        let mut wanted = Vec::new();
        for (i, (t, a)) in targets.iter().zip(answers.iter()).enumerate() {
            if let (
                ProbeTarget::Relation { schema, name },
                Probe::Present {
                    object_type: ObjectType::Table,
                    ..
                },
            ) = (t, a)
                && is_plain_identifier(schema)
                && is_plain_identifier(name)
            {
                let folded = if facts.lower_case_table_names == 0 {
                    format!("{schema}/{name}")
                } else {
                    format!("{schema}/{name}").to_lowercase()
                };
                wanted.push((i, folded));
            }
        }
        if wanted.is_empty() {
            return Ok(());
        }
        // A constant list (see `probe_batch`), matched byte-exactly here.
        let sql = format!(
            "SELECT NAME, TABLE_ID FROM information_schema.{view} WHERE NAME IN ({})",
            placeholders(wanted.len(), "?")
        );
        let params: Vec<mysql_async::Value> =
            wanted.iter().map(|(_, n)| n.as_str().into()).collect();
        let most = params.len() * 4;
        let rows: Vec<(String, u64)> = self.rows(conn, sql, params, most).await?;
        let ids: HashMap<String, u64> = rows.into_iter().collect();
        for (i, name) in &wanted {
            if let (Some(id), Probe::Present { native_id, .. }) = (ids.get(name), &mut answers[*i])
            {
                *native_id = format!("{ID_PREFIX}:innodb:{id}");
            }
        }
        Ok(())
    }

    async fn find_by_id_inner(&self, native_id: &str) -> Result<Option<Found>, ProviderError> {
        let mut conn = self.conn().await?;
        let facts = self.facts(&mut conn).await?;
        let Some(local) = native_id
            .strip_prefix(ID_PREFIX)
            .and_then(|r| r.strip_prefix(':'))
        else {
            return Ok(None);
        };
        if let Some(id) = local.strip_prefix("innodb:") {
            let (Some(view), Ok(id)) = (facts.innodb_view, id.parse::<u64>()) else {
                return Ok(None);
            };
            let name: Option<String> = self
                .rows(
                    &mut conn,
                    format!("SELECT NAME FROM information_schema.{view} WHERE TABLE_ID = ?"),
                    (id,),
                    1,
                )
                .await?
                .pop();
            return Ok(name.and_then(|n| {
                n.split_once('/').map(|(s, t)| Found {
                    target: ProbeTarget::relation(s, t),
                    object_type: ObjectType::Table,
                })
            }));
        }
        // Name-derived ids find only the object still carrying that name.
        let Some(rest) = local.strip_prefix("name:") else {
            return Ok(None);
        };
        let target = match rest.split_once('/') {
            Some((s, n)) => ProbeTarget::relation(s, n),
            None => ProbeTarget::schema(rest),
        };
        drop(conn);
        match self.probe_batch(std::slice::from_ref(&target)).await?.pop() {
            Some(Probe::Present {
                object_type,
                native_id: current,
            }) if current == native_id => Ok(Some(Found {
                target,
                object_type,
            })),
            _ => Ok(None),
        }
    }

    async fn columns_inner(
        &self,
        schema: &str,
        name: &str,
    ) -> Result<Option<Vec<Column>>, ProviderError> {
        // The probe confirms existence (or fails loudly) before columns are read.
        let target = ProbeTarget::relation(schema, name);
        if self
            .probe_batch(std::slice::from_ref(&target))
            .await?
            .first()
            == Some(&Probe::Absent)
        {
            return Ok(None);
        }
        Ok(Some(
            self.columns_of_inner(std::slice::from_ref(&target))
                .await?
                .remove(&target)
                .unwrap_or_default(),
        ))
    }

    /// Every column of every relation target, in one query (names compared the way the server
    /// compares table names).
    async fn columns_of_inner(
        &self,
        targets: &[ProbeTarget],
    ) -> Result<HashMap<ProbeTarget, Vec<Column>>, ProviderError> {
        let relations = relation_targets(targets);
        if relations.is_empty() {
            return Ok(HashMap::new());
        }
        let mut conn = self.conn().await?;
        let facts = self.facts(&mut conn).await?;
        let lower = facts.lower_case_table_names != 0;
        let folded: Vec<[String; 2]> = relations
            .iter()
            .map(|(s, n, _)| [fold(lower, s), fold(lower, n)])
            .collect();
        let json = serde_json::to_string(&folded).expect("strings serialize");
        // The constant list lets the server open only these tables (see `probe_batch`); the
        // join keeps the byte-exact match and the order.
        let sql = format!(
            "SELECT j.ord, c.COLUMN_NAME, c.COLUMN_TYPE FROM {JSON_PAIRS} \
             JOIN information_schema.COLUMNS c ON {} AND {} AND (c.TABLE_SCHEMA, c.TABLE_NAME) IN ({}) \
             ORDER BY j.ord, c.ORDINAL_POSITION",
            name_match(lower, "c.TABLE_SCHEMA", "j.s"),
            name_match(lower, "c.TABLE_NAME", "j.n"),
            placeholders(relations.len(), "(?, ?)"),
        );
        let mut params: Vec<mysql_async::Value> = vec![json.into()];
        params.extend(folded.into_iter().flatten().map(mysql_async::Value::from));
        let most = relations.len().saturating_mul(MAX_COLUMNS);
        let rows: Vec<(u64, String, String)> = self.rows(&mut conn, sql, params, most).await?;
        group_columns(
            &relations,
            rows.into_iter().map(|(ord, column, data_type)| {
                (
                    i64::try_from(ord).unwrap_or(0),
                    Column::new(column, data_type),
                )
            }),
        )
    }
}

/// `(schema, name)` pairs as a table: `j.ord`, `j.s`, `j.n` (utf8mb4: the server default,
/// latin1, would turn other scripts into '?').
const JSON_PAIRS: &str = "JSON_TABLE(?, '$[*]' COLUMNS(ord FOR ORDINALITY, s VARCHAR(1024) CHARACTER SET utf8mb4 PATH '$[0]', n VARCHAR(1024) CHARACTER SET utf8mb4 PATH '$[1]')) j";

/// `n` copies of a placeholder group, comma-separated.
fn placeholders(n: usize, one: &str) -> String {
    vec![one; n].join(", ")
}

/// A name as the server stores it: lower case when `lower_case_table_names` is set.
fn fold(lower: bool, s: &str) -> String {
    if lower {
        s.to_lowercase()
    } else {
        s.to_string()
    }
}

/// Byte-exact comparison of a stored name with a folded one.
fn name_match(lower: bool, column: &str, folded: &str) -> String {
    if lower {
        format!("BINARY LOWER({column}) = BINARY {folded}")
    } else {
        format!("BINARY {column} = BINARY {folded}")
    }
}

impl CatalogProvider for MysqlProvider {
    async fn check_connection(&self) -> Result<(), ProviderError> {
        with_deadline(self.deadline(), async {
            let mut conn = self.conn().await?;
            conn.query_drop("SELECT 1")
                .await
                .map_err(|e| self.classify(&e))?;
            self.facts(&mut conn).await.map(drop)
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
            let mut conn = self.conn().await?;
            Ok(self.facts(&mut conn).await?.identity)
        })
        .await
    }

    fn invalid_name(&self, target: &ProbeTarget) -> Option<String> {
        let names: &[&str] = match target {
            ProbeTarget::Schema { name } => &[name],
            ProbeTarget::Relation { schema, name } => &[schema, name],
        };
        names.iter().find_map(|n| mysql_name_problem(n))
    }
}

/// MySQL and MariaDB names: at most 64 characters, only Basic Multilingual Plane characters
/// except NUL, and no trailing space (the server refuses to create anything else).
fn mysql_name_problem(name: &str) -> Option<String> {
    if name.chars().count() > 64 {
        Some(format!(
            "{name:?} is {} characters long; MySQL names are at most 64",
            name.chars().count()
        ))
    } else if name.contains('\0') {
        Some(format!(
            "{name:?} contains NUL, which MySQL names cannot hold"
        ))
    } else if name.chars().any(|c| u32::from(c) > 0xFFFF) {
        Some(format!(
            "{name:?} has characters outside the Basic Multilingual Plane, which MySQL names cannot hold"
        ))
    } else if name.ends_with(' ') {
        Some(format!(
            "{name:?} ends with a space, which MySQL names cannot"
        ))
    } else {
        None
    }
}

/// The name a certificate carries, from rustls's "certificate not valid for name" error (its
/// first DNS name, or IP address); `None` for any other error.
fn certificate_name(error: &str) -> Option<String> {
    let (_, presented) = error.split_once("certificate not valid for name")?;
    let (_, names) = presented.split_once("is only valid for ")?;
    if let Some((_, rest)) = names.split_once("DnsName(\"") {
        let name = rest.split('"').next()?;
        // A wildcard names any one label in its place.
        return Some(match name.strip_prefix("*.") {
            Some(parent) => format!("semops.{parent}"),
            None => name.to_string(),
        });
    }
    let (_, rest) = names.split_once("IpAddress(")?;
    rest.split(')').next().map(str::to_string)
}

/// Backtick-quotes an identifier, doubling backticks inside.
fn quote_ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

/// Names InnoDB stores unencoded in its dictionary (`db/table`).
fn is_plain_identifier(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn target_label(t: &ProbeTarget) -> String {
    match t {
        ProbeTarget::Schema { name } => format!("schema {name:?}"),
        ProbeTarget::Relation { schema, name } => format!("{schema:?}.{name:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_mysql_cannot_hold_are_invalid_and_others_pass() {
        let long = "x".repeat(65);
        for bad in [long.as_str(), "a\0b", "emoji😀", "trailing "] {
            assert!(mysql_name_problem(bad).is_some(), "{bad:?}");
        }
        for good in ["x", &"é".repeat(64), "with space inside", "dots.and-dashes"] {
            assert_eq!(mysql_name_problem(good), None, "{good:?}");
        }
    }

    #[test]
    fn the_certificate_name_is_read_from_the_name_mismatch_error_only() {
        let cases = [
            (
                r#"invalid peer certificate: certificate not valid for name "127.0.0.1"; certificate is only valid for DnsName("db.internal") or IpAddress(10.0.0.5)"#,
                Some("db.internal"),
            ),
            (
                r#"certificate not valid for name "x"; certificate is only valid for DnsName("*.db.svc")"#,
                Some("semops.db.svc"),
            ),
            (
                r#"certificate not valid for name "x"; certificate is only valid for IpAddress(10.0.0.5)"#,
                Some("10.0.0.5"),
            ),
            (r#"invalid peer certificate: UnknownIssuer"#, None),
            (
                r#"certificate not valid for name "x"; certificate is not valid for any names (according to its subjectAltName extension)"#,
                None,
            ),
        ];
        for (error, want) in cases {
            assert_eq!(certificate_name(error).as_deref(), want, "{error}");
        }
    }

    #[test]
    fn identifiers_are_quoted_with_doubled_backticks() {
        assert_eq!(quote_ident("a`b"), "`a``b`");
        assert_eq!(quote_ident("x.y"), "`x.y`");
    }

    #[test]
    fn only_plain_names_map_to_innodb_dictionary_names() {
        assert!(is_plain_identifier("employees_2"));
        for s in ["", "a.b", "a-b", "ünï", "a b"] {
            assert!(!is_plain_identifier(s), "{s}");
        }
    }
}
