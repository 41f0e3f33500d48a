//! Every provider dials the address that passed the egress checks, never a second resolution of
//! the name: settings whose host is a name that cannot resolve (`.invalid`), pinned to a
//! listener this test runs, reach that listener; a name outside the checked destinations reaches
//! nothing. (The registry pins every destination it checks: tests/e2e_tenant.rs.)

use std::io::Read;
use std::net::{IpAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use semops::catalog::registry::build;
use semops::catalog::{Addresses, CatalogProvider, ConnectionSettings, Credentials};
use semops::crd::catalog::{Provider, SslMode};

const NAME: &str = "rebound.invalid";

/// A loopback listener that records every connection (and its first bytes); it never answers.
fn listener() -> (u16, Arc<Mutex<Vec<Vec<u8>>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let kept = seen.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            // Counted on accept: a MySQL client waits for the server to speak first.
            let at = {
                let mut seen = kept.lock().unwrap();
                seen.push(Vec::new());
                seen.len() - 1
            };
            let kept = kept.clone();
            std::thread::spawn(move || {
                c.set_read_timeout(Some(Duration::from_secs(2))).ok();
                let mut bytes = vec![0u8; 4096];
                let n = c.read(&mut bytes).unwrap_or(0);
                kept.lock().unwrap()[at] = bytes[..n].to_vec();
            });
        }
    });
    (port, seen)
}

fn settings(provider: Provider, port: u16, addresses: Addresses) -> ConnectionSettings {
    let bootstrap = if provider == Provider::Kafka {
        vec![(NAME.to_string(), port)]
    } else {
        vec![]
    };
    let iceberg =
        (provider == Provider::IcebergRest).then(|| semops::catalog::iceberg::IcebergSettings {
            uri: format!("http://{NAME}:{port}"),
            warehouse: None,
            oauth2: None,
        });
    ConnectionSettings {
        host: NAME.into(),
        port,
        bootstrap,
        sasl: None,
        database: Some("postgres".into()),
        iceberg,
        ssl_mode: SslMode::Disable,
        ca_pem: None,
        client_certificate: None,
        credentials: Credentials::new("u", ""),
        connect_timeout: Duration::from_secs(2),
        statement_timeout: Duration::from_secs(2),
        max_connections: 1,
        addresses,
    }
}

const PROVIDERS: [Provider; 4] = [
    Provider::Postgresql,
    Provider::Mysql,
    Provider::Kafka,
    Provider::IcebergRest,
];

#[tokio::test]
async fn each_provider_dials_the_checked_address_of_a_name_that_does_not_resolve() {
    for provider in PROVIDERS {
        let (port, seen) = listener();
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let pinned = Addresses::Checked(vec![(NAME.into(), port, vec![loopback])]);
        let p = build(provider, settings(provider, port, pinned)).unwrap();
        // The listener never answers: the check fails, after the connection was made.
        let result = p.check_connection().await;
        assert!(result.is_err(), "{provider:?}");
        let connections = seen.lock().unwrap().len();
        assert!(
            connections >= 1,
            "{provider:?}: no connection reached the checked address ({result:?})"
        );
    }
}

#[tokio::test]
async fn a_name_outside_the_checked_destinations_is_never_dialled() {
    for provider in PROVIDERS {
        let (port, seen) = listener();
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        // Checked for another port only: this destination was not checked.
        let pinned = Addresses::Checked(vec![(
            NAME.into(),
            port.wrapping_add(1).max(1),
            vec![loopback],
        )]);
        let result = match build(provider, settings(provider, port, pinned)) {
            Ok(p) => p.check_connection().await,
            Err(e) => Err(e),
        };
        assert!(result.is_err(), "{provider:?}");
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            seen.lock().unwrap().is_empty(),
            "{provider:?} dialled an unchecked destination"
        );
    }
}
