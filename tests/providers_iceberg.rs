//! The Iceberg REST provider against a real Apache Iceberg REST catalog (hack/iceberg):
//! namespaces, tables and views identified by their metadata uuid; a rename found by uuid, a
//! drop + create seen as another object; columns with nested fields; OAuth2 client credentials
//! with tokens that expire (refreshed before expiry), a static bearer token, TLS with a private
//! CA; every failure classified, never "absent" on doubt. Objects are made through the REST API
//! itself as the administrator (tests/support/iceberg.rs).

mod support;

use std::time::Duration;

use semops::catalog::iceberg::IcebergProvider;
use semops::catalog::registry::settings_from;
use semops::catalog::{
    CatalogProvider, ConnectionSettings, Credentials, ObjectType, Probe, ProbeTarget, ProviderError,
};
use semops::crd::catalog::{Connection, OAuth2Settings, SslMode};
use support::db::unique;
use support::iceberg::{ADMIN_TOKEN, CLIENT, FORBIDDEN, TOKEN_TTL_SECONDS, iceberg};

fn connection(uri: &str, oauth2: bool, ssl_mode: SslMode) -> Connection {
    serde_json::from_value(serde_json::json!({
        "uri": uri,
        "sslMode": ssl_mode,
        "oauth2": if oauth2 { Some(OAuth2Settings::default()) } else { None },
    }))
    .unwrap()
}

fn settings(
    uri: &str,
    oauth2: bool,
    ssl_mode: SslMode,
    credentials: Credentials,
    ca: Option<String>,
) -> ConnectionSettings {
    let mut s = settings_from(
        &connection(uri, oauth2, ssl_mode),
        credentials,
        ca.map(String::into_bytes),
        None,
    )
    .unwrap();
    s.statement_timeout = Duration::from_secs(10);
    s
}

/// The provider as semops configures it: OAuth2 client credentials over plain HTTP on loopback.
fn oauth() -> IcebergProvider {
    IcebergProvider::new(settings(
        &iceberg().uri,
        true,
        SslMode::Disable,
        Credentials::new(CLIENT.0, CLIENT.1),
        None,
    ))
    .unwrap()
}

fn present(p: &Probe) -> (ObjectType, String) {
    match p {
        Probe::Present {
            object_type,
            native_id,
        } => (*object_type, native_id.clone()),
        Probe::Absent => panic!("expected present, got absent"),
    }
}

#[tokio::test]
async fn tables_views_and_namespaces_are_probed_and_identified_by_their_uuid() {
    let srv = iceberg();
    let ns = format!("sales{}", unique());
    let nested = format!("{ns}.eu");
    srv.create_namespace(&ns);
    srv.create_namespace(&nested);
    let t = srv.create_table(&ns, "orders");
    let v = srv.create_view(&ns, "revenue");
    let deep = srv.create_table(&nested, "orders");
    let p = oauth();
    let answers = p
        .probe(&[
            ProbeTarget::schema(&ns),
            ProbeTarget::relation(&ns, "orders"),
            ProbeTarget::relation(&ns, "revenue"),
            ProbeTarget::relation(&ns, "never"),
            ProbeTarget::schema(format!("{ns}.never")),
            ProbeTarget::relation(&nested, "orders"),
            ProbeTarget::relation(format!("{ns}.never"), "orders"),
        ])
        .await
        .unwrap();
    assert_eq!(present(&answers[0]).0, ObjectType::Schema);
    assert_eq!(
        present(&answers[1]),
        (ObjectType::Table, format!("table:{t}@{ns}"))
    );
    assert_eq!(
        present(&answers[2]),
        (ObjectType::View, format!("view:{v}@{ns}"))
    );
    assert_eq!(answers[3], Probe::Absent);
    assert_eq!(answers[4], Probe::Absent);
    assert_eq!(
        present(&answers[5]),
        (ObjectType::Table, format!("table:{deep}@{nested}"))
    );
    assert_eq!(
        answers[6],
        Probe::Absent,
        "a table of a missing namespace is absent"
    );

    let cols: Vec<(String, String)> = p
        .columns(&ns, "orders")
        .await
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|c| (c.name, c.data_type))
        .collect();
    assert_eq!(
        cols,
        [
            ("id", "long"),
            ("amount", "double"),
            ("customer", "struct"),
            ("customer.name", "string")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    assert_eq!(
        p.columns(&ns, "revenue").await.unwrap().unwrap()[0].name,
        "total"
    );
    assert_eq!(p.columns(&ns, "never").await.unwrap(), None);
    assert!(p.server_identity().await.unwrap().starts_with(&srv.uri));
}

#[tokio::test]
async fn a_renamed_table_is_found_by_its_uuid_and_a_recreated_one_is_another_object() {
    let srv = iceberg();
    let ns = format!("ren{}", unique());
    srv.create_namespace(&ns);
    let uuid = srv.create_table(&ns, "orders");
    srv.create_table(&ns, "other");
    let p = oauth();
    let id = present(
        &p.probe(&[ProbeTarget::relation(&ns, "orders")])
            .await
            .unwrap()[0],
    )
    .1;

    srv.rename_table(&ns, "orders", "orders_v2");
    assert_eq!(
        p.probe(&[ProbeTarget::relation(&ns, "orders")])
            .await
            .unwrap(),
        [Probe::Absent]
    );
    let found = p.find_by_id(&id).await.unwrap().expect("found by uuid");
    assert_eq!(found.target, ProbeTarget::relation(&ns, "orders_v2"));
    assert_eq!(found.object_type, ObjectType::Table);
    let again = present(
        &p.probe(&[ProbeTarget::relation(&ns, "orders_v2")])
            .await
            .unwrap()[0],
    )
    .1;
    assert_eq!(again, id, "a rename keeps the uuid");
    assert!(again.contains(&uuid));

    // Dropped and created again under the same name: a new uuid, the old one nowhere.
    srv.drop_table(&ns, "orders_v2");
    srv.create_table(&ns, "orders_v2");
    let recreated = present(
        &p.probe(&[ProbeTarget::relation(&ns, "orders_v2")])
            .await
            .unwrap()[0],
    )
    .1;
    assert_ne!(recreated, id);
    assert_eq!(p.find_by_id(&id).await.unwrap(), None);
    // Ids of other systems or malformed ones find nothing (and ask nothing).
    assert_eq!(p.find_by_id("kafka:abc").await.unwrap(), None);
}

#[tokio::test]
async fn oauth2_tokens_are_refreshed_before_they_expire_and_bad_credentials_fail_as_auth() {
    let srv = iceberg();
    let ns = format!("tok{}", unique());
    srv.create_namespace(&ns);
    let p = oauth();
    let before = srv.tokens_issued();
    let refused_before = srv.expired_refusals();
    p.check_connection().await.unwrap();
    // Several token lifetimes of steady probing: every answer is right, and new tokens were
    // fetched. Whether a token was replaced before it expired (at 80% of its life) is decided
    // by `refresh_after`, unit-tested; here a request that took longer than the margin may meet
    // a 401, which renews the token and retries, so no clock window decides the outcome.
    let until = std::time::Instant::now() + Duration::from_secs(TOKEN_TTL_SECONDS * 3);
    let mut probes = 0;
    while std::time::Instant::now() < until {
        let a = p.probe(&[ProbeTarget::schema(&ns)]).await.unwrap();
        assert_eq!(present(&a[0]).0, ObjectType::Schema);
        probes += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let issued = srv.tokens_issued() - before;
    let refused = srv.expired_refusals() - refused_before;
    // Renewed, and not once per probe: tokens are reused while they live.
    assert!(
        (3..probes).contains(&issued),
        "{issued} tokens for {probes} probes over {}s of {TOKEN_TTL_SECONDS}s tokens ({refused} refused as expired)",
        TOKEN_TTL_SECONDS * 3
    );

    let wrong = IcebergProvider::new(settings(
        &srv.uri,
        true,
        SslMode::Disable,
        Credentials::new(CLIENT.0, "not-the-secret"),
        None,
    ))
    .unwrap();
    let e = wrong.probe(&[ProbeTarget::schema(&ns)]).await.unwrap_err();
    assert!(matches!(e, ProviderError::AuthFailed(_)), "{e:?}");
    assert!(!e.to_string().contains("not-the-secret"), "{e}");
    // No credentials at all against a secured catalog: authentication, not absence.
    let anonymous = IcebergProvider::new(settings(
        &srv.uri,
        false,
        SslMode::Disable,
        Credentials::new("", ""),
        None,
    ))
    .unwrap();
    let e = anonymous
        .probe(&[ProbeTarget::schema(&ns)])
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::AuthFailed(_)), "{e:?}");
}

#[tokio::test]
async fn a_static_bearer_token_works_and_tls_is_verified_with_the_catalog_ca() {
    let srv = iceberg();
    let ns = format!("tls{}", unique());
    srv.create_namespace(&ns);
    srv.create_table(&ns, "t");
    let bearer = |uri: &str, ssl: SslMode, ca: Option<String>| {
        IcebergProvider::new(settings(
            uri,
            false,
            ssl,
            Credentials::new("", ADMIN_TOKEN),
            ca,
        ))
    };
    let p = bearer(&srv.tls_uri, SslMode::VerifyFull, Some(srv.ca_pem())).unwrap();
    assert_eq!(
        present(&p.probe(&[ProbeTarget::relation(&ns, "t")]).await.unwrap()[0]).0,
        ObjectType::Table
    );
    // The wrong CA, and the public roots: a TLS failure.
    for ca in [Some(srv.other_ca_pem()), None] {
        let p = bearer(&srv.tls_uri, SslMode::VerifyFull, ca).unwrap();
        let e = p.probe(&[ProbeTarget::schema(&ns)]).await.unwrap_err();
        assert!(matches!(e, ProviderError::Tls(_)), "{e:?}");
    }
    // A token over plain HTTP is refused unless sslMode: disable says so.
    match bearer(&srv.uri, SslMode::VerifyFull, None) {
        Err(ProviderError::InsecureAuth(m)) => assert!(m.contains("sslMode: disable"), "{m}"),
        other => panic!("expected InsecureAuth, got {:?}", other.err()),
    }
}

#[tokio::test]
async fn a_forbidden_table_an_outage_and_an_unreachable_server_are_errors_never_absence() {
    let srv = iceberg();
    srv.create_namespace(FORBIDDEN.0);
    let (status, _) = srv.admin("GET", "/v1/config", None);
    assert_eq!(status, 200);
    let p = oauth();
    let e = p
        .probe(&[ProbeTarget::relation(FORBIDDEN.0, FORBIDDEN.1)])
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::PermissionDenied(_)), "{e:?}");
    assert!(!e.to_string().contains("stack"), "{e}");

    p.check_connection().await.unwrap();
    srv.outage(true);
    let e = p
        .probe(&[ProbeTarget::schema(FORBIDDEN.0)])
        .await
        .unwrap_err();
    srv.outage(false);
    assert!(matches!(e, ProviderError::ServerUnavailable(_)), "{e:?}");

    let (port, _socket) = support::refused_port();
    let gone = IcebergProvider::new(settings(
        &format!("http://127.0.0.1:{port}"),
        false,
        SslMode::Disable,
        Credentials::new("", ""),
        None,
    ))
    .unwrap();
    let e = gone.probe(&[ProbeTarget::schema("x")]).await.unwrap_err();
    assert!(matches!(e, ProviderError::Unreachable(_)), "{e:?}");
    // Names the protocol cannot carry are refused before anything is asked.
    assert!(p.invalid_name(&ProbeTarget::schema("a..b")).is_some());
    assert!(p.invalid_name(&ProbeTarget::relation("a.b", "t")).is_none());
}
