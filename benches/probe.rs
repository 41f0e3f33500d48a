//! Probe benchmark (not a test): 10,000 names against a local PostgreSQL, batched vs one by one.
//! Run: `cargo bench --bench probe` — starts its own PostgreSQL through hack/postgres and prints
//! a Markdown table for BENCHMARKS.md.

use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt;
use semops::catalog::postgres::PostgresProvider;
use semops::catalog::{CatalogProvider, ConnectionSettings, Credentials, Probe, ProbeTarget};
use semops::crd::catalog::SslMode;

const NAMES: usize = 10_000;
const TABLES: usize = 5_000; // half the names exist, half do not

fn main() {
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
        database: Some("postgres".into()),
        ssl_mode: SslMode::Disable,
        ca_pem: None,
        credentials: Credentials::new("postgres", "postgres"),
        connect_timeout: Duration::from_secs(5),
        statement_timeout: Duration::from_secs(30),
        max_connections: 4,
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
                let present = answers
                    .iter()
                    .flatten()
                    .filter(|a| matches!(a, Probe::Present { .. }))
                    .count();
                assert_eq!(present, TABLES, "every existing table answered Present");
                best = best.min(elapsed);
            }
            rows.push((label, best));
        }
        let baseline = rows[0].1;
        println!("| mode | best of 3 (10,000 names) | names/s | speedup vs one by one |");
        println!("| --- | --- | --- | --- |");
        for (label, t) in rows {
            println!(
                "| {label} | {:.1} ms | {:.0} | {:.1}x |",
                t.as_secs_f64() * 1e3,
                NAMES as f64 / t.as_secs_f64(),
                baseline.as_secs_f64() / t.as_secs_f64()
            );
        }
    });
    let _ = Command::new(format!("{root}/hack/postgres"))
        .args(["down", &dir])
        .status();
}
