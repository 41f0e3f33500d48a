//! Probe benchmark (not a test): 10,000 names against a local PostgreSQL, 10,000 topic names
//! against a local Kafka broker and 10,000 table names against a local Iceberg REST catalog,
//! batched vs one by one. Run: `cargo bench --bench probe` — starts its own PostgreSQL
//! (hack/postgres), Kafka (hack/kafka) and Iceberg REST catalog (hack/iceberg) and prints
//! Markdown tables for BENCHMARKS.md. `SEMOPS_BENCH_PROVIDERS=kafka` (or `iceberg`) runs one.

use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt;
use semops::catalog::kafka::KafkaProvider;
use semops::catalog::postgres::PostgresProvider;
use semops::catalog::registry::split_host_port;
use semops::catalog::{CatalogProvider, ConnectionSettings, Credentials, Probe, ProbeTarget};
use semops::crd::catalog::{SaslMechanism, SslMode};

const NAMES: usize = 10_000;
const TABLES: usize = 5_000; // half the names exist, half do not
/// Topics that exist among the 10,000 names (a single local broker holds 1,000 partitions
/// comfortably; the other names are absent).
const TOPICS: usize = 1_000;

fn main() {
    let wanted = std::env::var("SEMOPS_BENCH_PROVIDERS").unwrap_or("postgres,kafka".into());
    if wanted.contains("postgres") {
        postgres();
    }
    if wanted.contains("kafka") {
        kafka();
    }
    if wanted.contains("iceberg") {
        iceberg();
    }
}

/// Iceberg tables that exist among the 10,000 names (each create writes a metadata file).
const ICEBERG_TABLES: usize = 2_000;

fn iceberg() {
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = format!("{root}/target/bench-iceberg");
    let _ = Command::new(format!("{root}/hack/iceberg"))
        .args(["down", &dir])
        .status();
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(format!("{root}/hack/iceberg"))
        .args(["up", &dir, "--owner-pid", &std::process::id().to_string()])
        .env("ICEBERG_CLIENTS", "bench:bench-secret")
        .env("ICEBERG_STATIC_TOKEN", "bench-admin")
        .output()
        .expect("hack/iceberg runs");
    assert!(out.status.success(), "hack/iceberg up failed");
    let env = std::fs::read_to_string(format!("{dir}/env")).unwrap();
    let uri = env
        .lines()
        .find_map(|l| l.strip_prefix("ICEBERG_URI="))
        .unwrap()
        .to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // The tables, through the REST API as the administrator (8 requests at once).
        let admin = |method: &str, path: String, body: serde_json::Value| {
            let (uri, method) = (uri.clone(), method.to_string());
            tokio::task::spawn_blocking(move || {
                let out = Command::new("curl")
                    .args(["-fsS", "-o", "/dev/null", "-X", &method])
                    .args(["-H", "Authorization: Bearer bench-admin"])
                    .args(["-H", "Content-Type: application/json", "-d", &body.to_string()])
                    .arg(format!("{uri}{path}"))
                    .status()
                    .unwrap();
                assert!(out.success(), "{method} {path}");
            })
        };
        admin("POST", "/v1/namespaces".into(), serde_json::json!({"namespace": ["bench"]}))
            .await
            .unwrap();
        let started = Instant::now();
        futures::stream::iter(0..ICEBERG_TABLES)
            .map(|i| {
                admin(
                    "POST",
                    "/v1/namespaces/bench/tables".into(),
                    serde_json::json!({"name": format!("t{i}"), "schema": {"type": "struct", "schema-id": 0,
                        "fields": [{"id": 1, "name": "id", "required": true, "type": "long"}]}}),
                )
            })
            .buffer_unordered(8)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .for_each(|created| created.expect("a table created"));
        eprintln!("created {ICEBERG_TABLES} tables in {:.1} s", started.elapsed().as_secs_f64());
        let mut settings = semops::catalog::registry::settings_from(
            &serde_json::from_value(serde_json::json!({
                "uri": uri, "sslMode": "disable", "oauth2": {}
            }))
            .unwrap(),
            Credentials::new("bench", "bench-secret"),
            None,
            None,
        )
        .unwrap();
        settings.statement_timeout = Duration::from_secs(30);
        let targets: Vec<ProbeTarget> = (0..NAMES)
            .map(|i| ProbeTarget::relation("bench", format!("t{i}")))
            .collect();
        let provider = semops::catalog::iceberg::IcebergProvider::new(settings).unwrap();
        provider.check_connection().await.unwrap();
        println!(
            "\nIceberg REST 1.11 (OAuth2, JDBC catalog on SQLite), {NAMES} table names ({ICEBERG_TABLES} exist):\n"
        );
        measure(&provider, &targets, ICEBERG_TABLES).await;
    });
    let _ = Command::new(format!("{root}/hack/iceberg"))
        .args(["down", &dir])
        .status();
}

fn postgres() {
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = format!("{root}/target/bench-postgres");
    let _ = Command::new(format!("{root}/hack/postgres"))
        .args(["down", &dir])
        .status();
    let out = Command::new(format!("{root}/hack/postgres"))
        .args(["up", &dir, "--owner-pid", &std::process::id().to_string()])
        .output()
        .expect("hack/postgres runs");
    assert!(out.status.success(), "hack/postgres up failed");
    let port: u16 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .lines()
        .last()
        .unwrap()
        .parse()
        .unwrap();
    let mut ddl = String::from("CREATE SCHEMA bench;");
    for i in 0..TABLES {
        ddl.push_str(&format!("CREATE TABLE bench.t{i}(id int);"));
    }
    // Through stdin: 5,000 statements exceed the argument-length limit.
    let mut psql = Command::new("psql")
        .env("PGPASSWORD", "postgres")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "postgres",
            "-q",
            "-f",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut psql.stdin.take().unwrap(), ddl.as_bytes()).unwrap();
    let status = psql.wait().unwrap();
    assert!(status.success());

    let settings = ConnectionSettings {
        host: "127.0.0.1".into(),
        port,
        bootstrap: vec![],
        sasl: None,
        database: Some("postgres".into()),
        iceberg: None,
        ssl_mode: SslMode::Disable,
        ca_pem: None,
        client_certificate: None,
        credentials: Credentials::new("postgres", "postgres"),
        connect_timeout: Duration::from_secs(5),
        statement_timeout: Duration::from_secs(30),
        max_connections: 4,
        addresses: Default::default(),
    };
    let targets: Vec<ProbeTarget> = (0..NAMES)
        .map(|i| ProbeTarget::relation("bench", format!("t{i}")))
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let provider = PostgresProvider::new(settings).unwrap();
        provider.check_connection().await.unwrap();
        println!("PostgreSQL 15, {NAMES} names ({TABLES} exist):\n");
        measure(&provider, &targets, TABLES).await;
    });
    let _ = Command::new(format!("{root}/hack/postgres"))
        .args(["down", &dir])
        .status();
}

fn kafka() {
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = format!("{root}/target/bench-kafka");
    let _ = Command::new(format!("{root}/hack/kafka"))
        .args(["down", &dir])
        .status();
    let out = Command::new(format!("{root}/hack/kafka"))
        .args(["up", &dir, "--owner-pid", &std::process::id().to_string()])
        .output()
        .expect("hack/kafka runs");
    assert!(out.status.success(), "hack/kafka up failed");
    let topics: Vec<String> = (0..TOPICS).map(|i| format!("t{i}")).collect();
    for chunk in topics.chunks(250) {
        let status = Command::new(format!("{root}/hack/kafka"))
            .args(["admin", &dir, "create"])
            .args(chunk)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "creating topics");
    }
    let env = std::fs::read_to_string(format!("{dir}/env")).unwrap();
    let server = env
        .lines()
        .find_map(|l| l.strip_prefix("KAFKA_SASL_PLAINTEXT="))
        .unwrap();
    let (host, port) = split_host_port(server).unwrap();
    let settings = ConnectionSettings {
        host: host.clone(),
        port,
        bootstrap: vec![(host, port)],
        sasl: Some(SaslMechanism::ScramSha256),
        database: None,
        iceberg: None,
        ssl_mode: SslMode::Disable,
        ca_pem: None,
        client_certificate: None,
        credentials: Credentials::new("alice", "alice-secret"),
        connect_timeout: Duration::from_secs(5),
        statement_timeout: Duration::from_secs(30),
        max_connections: 4,
        addresses: Default::default(),
    };
    let targets: Vec<ProbeTarget> = (0..NAMES)
        .map(|i| ProbeTarget::relation("default", format!("t{i}")))
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let provider = KafkaProvider::new(settings).unwrap();
        provider.check_connection().await.unwrap();
        println!("\nKafka 4.4 (SASL SCRAM-SHA-256), {NAMES} topic names ({TOPICS} exist):\n");
        measure(&provider, &targets, TOPICS).await;
    });
    let _ = Command::new(format!("{root}/hack/kafka"))
        .args(["down", &dir])
        .status();
}

/// Best of three for each batching mode; every answer checked against what exists.
async fn measure(provider: &impl CatalogProvider, targets: &[ProbeTarget], existing: usize) {
    let mut rows = Vec::new();
    for (label, batch, concurrency) in [
        ("one by one (batch 1, sequential)", 1, 1),
        ("batch 200, sequential", 200, 1),
        ("batch 200, concurrency 4 (policy default)", 200, 4),
        ("batch 1000, concurrency 4", 1000, 4),
    ] {
        let mut best = Duration::MAX;
        for _ in 0..3 {
            let started = Instant::now();
            let answers: Vec<Vec<Probe>> = futures::stream::iter(targets.chunks(batch))
                .map(|chunk| provider.probe(chunk))
                .buffered(concurrency)
                .map(|r| r.expect("probe"))
                .collect()
                .await;
            let elapsed = started.elapsed();
            let present: Vec<bool> = answers
                .iter()
                .flatten()
                .map(|a| matches!(a, Probe::Present { .. }))
                .collect();
            assert_eq!(present.len(), targets.len());
            assert!(
                present
                    .iter()
                    .enumerate()
                    .all(|(i, p)| *p == (i < existing)),
                "exactly the first {existing} names answered Present"
            );
            best = best.min(elapsed);
        }
        rows.push((label, best));
    }
    let baseline = rows[0].1;
    println!(
        "| mode | best of 3 ({} names) | names/s | speedup vs one by one |",
        targets.len()
    );
    println!("| --- | --- | --- | --- |");
    for (label, t) in rows {
        println!(
            "| {label} | {:.1} ms | {:.0} | {:.1}x |",
            t.as_secs_f64() * 1e3,
            targets.len() as f64 / t.as_secs_f64(),
            baseline.as_secs_f64() / t.as_secs_f64()
        );
    }
}
