//! `semops sql`: a metric question compiled by the read API (docs/queries.md). The SQL goes to
//! stdout (`-o json|yaml`: with its parameters, metric ids and revision). With `--execute` the
//! CLI runs it itself, with the caller's own connection (`--dsn`, or the PG*/MYSQL* environment)
//! and prints the rows: semops never runs a query with its credentials.

use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::query::{ApiArgs, Output};
use crate::client::{Query, ReadApi};
use crate::sql::{Filter, FilterOp, Question};

#[derive(clap::Args)]
pub struct SqlArgs {
    /// The model's catalog.
    pub catalog: String,
    /// The model's schema.
    pub schema: String,
    /// The model's name.
    pub model: String,
    /// A metric of the model (repeat for more).
    #[arg(short = 'm', long = "metric", required = true)]
    pub metrics: Vec<String>,
    /// `dataset.field` to group by, `:day|:week|:month|:quarter|:year` after a time field
    /// (repeat for more).
    #[arg(short = 'd', long = "dimension")]
    pub dimensions: Vec<String>,
    /// A condition applied before aggregation: `FIELD OP [VALUES]` (`orders.status in
    /// paid,shipped`, `orders.amount ge 100`, `customers.segment is_null`) or a JSON object
    /// `{"field": ..., "op": ..., "values": [...]}`. Values are bound as parameters.
    #[arg(short = 'w', long = "filter")]
    pub filters: Vec<String>,
    /// A requested metric or dimension to sort by, `-` in front for descending (repeat for more).
    #[arg(long = "order", allow_hyphen_values = true)]
    pub order: Vec<String>,
    /// At most this many rows.
    #[arg(long)]
    pub limit: Option<u64>,
    /// Run the SQL here with your own connection and print the rows.
    #[arg(long)]
    pub execute: bool,
    /// With --execute: `postgres://…` or `mysql://…` (default: the PG* environment for a
    /// PostgreSQL catalog, MYSQL_HOST/MYSQL_TCP_PORT/MYSQL_USER/MYSQL_PWD/MYSQL_DATABASE for a
    /// MySQL one).
    #[arg(long, requires = "execute", env = "SEMOPS_DSN", hide_env_values = true)]
    pub dsn: Option<String>,
    #[command(flatten)]
    pub api: ApiArgs,
}

/// `FIELD OP [VALUES]` or a JSON object as a [`Filter`]; `Err` says what to write instead.
pub fn parse_filter(text: &str) -> Result<Filter, String> {
    let text = text.trim();
    if text.starts_with('{') {
        return serde_json::from_str(text).map_err(|e| format!("not a filter object: {e}"));
    }
    let mut parts = text.splitn(3, char::is_whitespace);
    let (Some(field), Some(op)) = (parts.next(), parts.next()) else {
        return Err("write FIELD OP [VALUES], e.g. `orders.status in paid,shipped`".into());
    };
    let op: FilterOp = serde_json::from_value(json!(op)).map_err(|_| {
        format!(
            "unknown operator {op:?}; use eq, ne, lt, le, gt, ge, in, not_in, between, is_null or is_not_null"
        )
    })?;
    let rest = parts.next().map(str::trim).unwrap_or("");
    let values: Vec<Value> = match op {
        FilterOp::IsNull | FilterOp::IsNotNull => vec![],
        // Lists are comma-separated; a value holding a comma needs the JSON form.
        FilterOp::In | FilterOp::NotIn | FilterOp::Between => {
            rest.split(',').map(|v| json!(v.trim())).collect()
        }
        _ => vec![json!(rest)],
    };
    Ok(Filter {
        field: field.to_string(),
        op,
        values,
    })
}

impl SqlArgs {
    fn question(&self) -> Result<Question, String> {
        Ok(Question {
            metrics: self.metrics.clone(),
            dimensions: self.dimensions.clone(),
            filters: self
                .filters
                .iter()
                .enumerate()
                .map(|(i, f)| parse_filter(f).map_err(|e| format!("--filter #{}: {e}", i + 1)))
                .collect::<Result<_, _>>()?,
            order: self.order.clone(),
            limit: self.limit,
        })
    }
}

pub fn main(args: SqlArgs) -> ExitCode {
    let question = match args.question() {
        Ok(q) => q,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let query = Query::Sql {
        catalog: args.catalog.clone(),
        schema: args.schema.clone(),
        name: args.model.clone(),
        question: question.to_query(),
    };
    let asked = runtime.block_on(async {
        let api = ReadApi::connect(&args.api.connection()).await?;
        let ns = api.default_namespace.clone();
        api.ask(&ns, &query).await
    });
    let body = match asked {
        Ok((200, body)) => body,
        Ok((status, body)) => {
            let text = |k: &str| {
                body.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            let kind = if text("type").is_empty() {
                text("reason")
            } else {
                text("type")
            };
            eprintln!("error: {status} {kind}: {}", text("message"));
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    if !args.execute {
        match args.api.output {
            Output::Json | Output::Yaml => {
                print!("{}", super::query::render(&body, args.api.output))
            }
            _ => println!("{}", body["sql"].as_str().unwrap_or_default()),
        }
        return ExitCode::SUCCESS;
    }
    match runtime.block_on(execute::run(&body, args.dsn.as_deref())) {
        Ok(rows) => {
            print!("{}", execute::render(&body, &rows, args.api.output));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Running compiled SQL with the caller's connection.
mod execute {
    use super::*;

    /// The rows of the compiled answer `body` (each a JSON array in column order).
    pub async fn run(body: &Value, dsn: Option<&str>) -> anyhow::Result<Vec<Vec<Value>>> {
        let sql = body["sql"].as_str().context("the answer has no sql")?;
        let columns: Vec<String> = body["columns"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c.as_str().unwrap_or_default().to_string())
            .collect();
        let values: Vec<String> = body["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| p["value"].as_str().unwrap_or_default().to_string())
            .collect();
        match body["target"].as_str() {
            Some("postgres") => postgres(sql, &columns, &values, dsn).await,
            Some("mysql") => mysql(sql, &values, dsn).await,
            other => bail!(
                "--execute runs PostgreSQL and MySQL SQL; this catalog's SQL is {} (run the SQL with that engine's own client)",
                other.unwrap_or("unknown")
            ),
        }
    }

    /// A PostgreSQL connection from `--dsn` or the PG* environment, TLS as its sslmode says
    /// (verified against the web PKI roots and PGSSLROOTCERT).
    fn postgres_config(dsn: Option<&str>) -> anyhow::Result<tokio_postgres::Config> {
        if let Some(dsn) = dsn {
            return dsn
                .parse()
                .context("--dsn is not a PostgreSQL connection string");
        }
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let mut config = tokio_postgres::Config::new();
        let user = env("PGUSER")
            .or_else(|| env("USER"))
            .unwrap_or_else(|| "postgres".into());
        config
            .host(env("PGHOST").as_deref().unwrap_or("localhost"))
            .port(
                env("PGPORT")
                    .map(|p| p.parse())
                    .transpose()
                    .context("PGPORT is not a port")?
                    .unwrap_or(5432),
            )
            .dbname(env("PGDATABASE").as_deref().unwrap_or(&user))
            .user(&user);
        if let Some(password) = env("PGPASSWORD") {
            config.password(password);
        }
        config.ssl_mode(match env("PGSSLMODE").as_deref() {
            Some("disable") => tokio_postgres::config::SslMode::Disable,
            Some("require" | "verify-ca" | "verify-full") => {
                tokio_postgres::config::SslMode::Require
            }
            _ => tokio_postgres::config::SslMode::Prefer,
        });
        Ok(config)
    }

    fn tls() -> anyhow::Result<tokio_postgres_rustls::MakeRustlsConnect> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        if let Ok(path) = std::env::var("PGSSLROOTCERT") {
            let pem = std::fs::read(&path)
                .with_context(|| format!("cannot read PGSSLROOTCERT {path}"))?;
            for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(&pem) {
                roots.add(cert.context("PGSSLROOTCERT holds a bad certificate")?)?;
            }
        }
        let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
    }

    async fn postgres(
        sql: &str,
        columns: &[String],
        values: &[String],
        dsn: Option<&str>,
    ) -> anyhow::Result<Vec<Vec<Value>>> {
        let (client, connection) = postgres_config(dsn)?
            .connect(tls()?)
            .await
            .context("cannot connect to PostgreSQL")?;
        tokio::spawn(connection);
        // Every value goes as text; the compiled SQL casts it where the field has a type. Rows
        // come back as JSON so every column type prints as PostgreSQL itself writes it.
        let wrapped = format!("SELECT row_to_json(r)::text FROM (\n{sql}\n) AS r");
        let types = vec![tokio_postgres::types::Type::TEXT; values.len()];
        let statement = client.prepare_typed(&wrapped, &types).await?;
        let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = values
            .iter()
            .map(|v| v as &(dyn tokio_postgres::types::ToSql + Sync))
            .collect();
        let mut rows = Vec::new();
        for row in client.query(&statement, &params).await? {
            let object: serde_json::Map<String, Value> =
                serde_json::from_str(row.get::<_, &str>(0))?;
            rows.push(
                columns
                    .iter()
                    .map(|c| object.get(c).cloned().unwrap_or(Value::Null))
                    .collect(),
            );
        }
        Ok(rows)
    }

    fn mysql_opts(dsn: Option<&str>) -> anyhow::Result<mysql_async::Opts> {
        if let Some(dsn) = dsn {
            return mysql_async::Opts::from_url(dsn).context("--dsn is not a mysql:// URL");
        }
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let port = env("MYSQL_TCP_PORT")
            .map(|p| p.parse())
            .transpose()
            .context("MYSQL_TCP_PORT is not a port")?;
        Ok(mysql_async::OptsBuilder::default()
            .ip_or_hostname(env("MYSQL_HOST").unwrap_or_else(|| "localhost".into()))
            .tcp_port(port.unwrap_or(3306))
            .user(env("MYSQL_USER").or_else(|| env("USER")))
            .pass(env("MYSQL_PWD"))
            .db_name(env("MYSQL_DATABASE"))
            .into())
    }

    async fn mysql(
        sql: &str,
        values: &[String],
        dsn: Option<&str>,
    ) -> anyhow::Result<Vec<Vec<Value>>> {
        use mysql_async::prelude::Queryable;
        let mut conn = mysql_async::Conn::new(mysql_opts(dsn)?)
            .await
            .context("cannot connect to MySQL")?;
        let params: Vec<mysql_async::Value> = values.iter().map(|v| v.as_str().into()).collect();
        let rows: Vec<mysql_async::Row> = conn.exec(sql, params).await?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let decimal: Vec<bool> = row
                    .columns_ref()
                    .iter()
                    .map(|c| {
                        matches!(
                            c.column_type(),
                            mysql_async::consts::ColumnType::MYSQL_TYPE_NEWDECIMAL
                                | mysql_async::consts::ColumnType::MYSQL_TYPE_DECIMAL
                        )
                    })
                    .collect();
                row.unwrap()
                    .into_iter()
                    .zip(decimal)
                    .map(|(v, decimal)| mysql_value(v, decimal))
                    .collect()
            })
            .collect())
    }

    /// A MySQL value as JSON: numbers (decimals too) as numbers, dates as `YYYY-MM-DD`.
    fn mysql_value(v: mysql_async::Value, decimal: bool) -> Value {
        use mysql_async::Value as V;
        match v {
            V::NULL => Value::Null,
            V::Int(n) => json!(n),
            V::UInt(n) => json!(n),
            V::Float(n) => json!(n),
            V::Double(n) => json!(n),
            V::Bytes(b) => {
                let text = String::from_utf8_lossy(&b).into_owned();
                match text.parse::<f64>() {
                    Ok(n) if decimal => json!(n),
                    _ => json!(text),
                }
            }
            V::Date(y, m, d, 0, 0, 0, 0) => json!(format!("{y:04}-{m:02}-{d:02}")),
            V::Date(y, m, d, h, i, s, us) => {
                json!(format!("{y:04}-{m:02}-{d:02} {h:02}:{i:02}:{s:02}.{us:06}"))
            }
            V::Time(neg, d, h, i, s, us) => json!(format!(
                "{}{:02}:{i:02}:{s:02}.{us:06}",
                if neg { "-" } else { "" },
                u32::from(h) + d * 24
            )),
        }
    }

    /// Rows as a table (default) or as JSON/YAML objects keyed by column.
    pub fn render(body: &Value, rows: &[Vec<Value>], output: Output) -> String {
        let columns: Vec<String> = body["columns"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c.as_str().unwrap_or_default().to_string())
            .collect();
        match output {
            Output::Json | Output::Yaml => {
                let objects: Vec<Value> = rows
                    .iter()
                    .map(|r| {
                        Value::Object(columns.iter().cloned().zip(r.iter().cloned()).collect())
                    })
                    .collect();
                let out = json!({"columns": columns, "rows": objects, "metrics": body["metrics"], "revision": body["revision"]});
                super::super::query::render(&out, output)
            }
            _ => {
                let cell = |v: &Value| match v {
                    Value::Null => "NULL".to_string(),
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let header = columns.iter().map(|c| c.to_uppercase()).collect::<Vec<_>>();
                super::super::query::aligned(
                    std::iter::once(header)
                        .chain(rows.iter().map(|r| r.iter().map(cell).collect())),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_read_from_the_command_line() {
        for (text, want) in [
            (
                "orders.status in paid,shipped",
                json!({"field": "orders.status", "op": "in", "values": ["paid", "shipped"]}),
            ),
            (
                "orders.amount ge 100",
                json!({"field": "orders.amount", "op": "ge", "values": ["100"]}),
            ),
            (
                "customers.name eq Ada, Countess",
                json!({"field": "customers.name", "op": "eq", "values": ["Ada, Countess"]}),
            ),
            (
                "orders.ordered_at between 2025-01-01,2025-02-01",
                json!({"field": "orders.ordered_at", "op": "between", "values": ["2025-01-01", "2025-02-01"]}),
            ),
            (
                "customers.segment is_null",
                json!({"field": "customers.segment", "op": "is_null", "values": []}),
            ),
            (
                r#"{"field": "a.b", "op": "in", "values": ["x,y", 3]}"#,
                json!({"field": "a.b", "op": "in", "values": ["x,y", 3]}),
            ),
        ] {
            assert_eq!(
                serde_json::to_value(parse_filter(text).unwrap()).unwrap(),
                want,
                "{text}"
            );
        }
        for (text, says) in [
            ("orders.amount", "FIELD OP"),
            ("orders.amount like x", "unknown operator"),
            ("{nope", "not a filter object"),
        ] {
            let e = parse_filter(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn rows_render_as_a_table_or_objects_in_column_order() {
        let body = json!({"columns": ["region", "revenue"], "metrics": [{"name": "revenue", "id": "x"}], "revision": 3});
        let rows = vec![
            vec![json!("north"), json!(12.5)],
            vec![Value::Null, json!(1)],
        ];
        assert_eq!(
            execute::render(&body, &rows, Output::Table),
            "REGION   REVENUE\nnorth    12.5\nNULL     1\n"
        );
        let out: Value =
            serde_json::from_str(&execute::render(&body, &rows, Output::Json)).unwrap();
        assert_eq!(out["rows"][0], json!({"region": "north", "revenue": 12.5}));
        assert_eq!(out["revision"], 3);
    }
}
