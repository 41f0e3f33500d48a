//! The Kafka provider against a real Apache Kafka 4.4 broker (hack/kafka): topics probed by
//! name in one Metadata request per batch and identified by topic id; SASL PLAIN and SCRAM;
//! TLS with a private CA; every failure classified, never "absent" on doubt; nothing created by
//! a probe. Topics are made and dropped with confluent-kafka, not with semops' client.

mod support;

use std::time::Duration;

use semops::catalog::kafka::KafkaProvider;
use semops::catalog::registry::split_host_port;
use semops::catalog::{
    CatalogProvider, ClientCertificate, ConnectionSettings, Credentials, ObjectType, Probe,
    ProbeTarget, ProviderError,
};
use semops::crd::catalog::{SaslMechanism, SslMode};
use support::db::unique;
use support::kafka::{ALICE, BOB, CAROL, kafka};

fn settings(
    server: &str,
    ssl_mode: SslMode,
    sasl: Option<(SaslMechanism, (&str, &str))>,
    ca_pem: Option<String>,
) -> ConnectionSettings {
    let (host, port) = split_host_port(server).unwrap();
    let (user, password) = sasl.map(|(_, c)| c).unwrap_or(("", ""));
    ConnectionSettings {
        host: host.clone(),
        port,
        bootstrap: vec![(host, port)],
        sasl: sasl.map(|(m, _)| m),
        database: None,
        iceberg: None,
        ssl_mode,
        ca_pem: ca_pem.map(String::into_bytes),
        client_certificate: None,
        credentials: Credentials::new(user, password),
        connect_timeout: Duration::from_secs(5),
        statement_timeout: Duration::from_secs(10),
        max_connections: 2,
        addresses: Default::default(),
    }
}

fn scram_alice() -> KafkaProvider {
    KafkaProvider::new(settings(
        &kafka().sasl_plaintext,
        SslMode::Disable,
        Some((SaslMechanism::ScramSha256, ALICE)),
        None,
    ))
    .unwrap()
}

fn topic(name: &str) -> ProbeTarget {
    ProbeTarget::relation("default", name)
}

fn id_of(p: &Probe) -> String {
    match p {
        Probe::Present {
            object_type: ObjectType::Topic,
            native_id,
        } => native_id.clone(),
        other => panic!("expected a present topic, got {other:?}"),
    }
}

#[tokio::test]
async fn topics_are_identified_by_their_topic_id_and_a_recreated_topic_is_another_one() {
    let u = unique();
    let (a, b, never) = (format!("a{u}"), format!("b{u}"), format!("never{u}"));
    let ids = kafka().create(&[&a, &b]);
    let p = scram_alice();
    let answers = p
        .probe(&[topic(&a), topic(&never), topic(&b)])
        .await
        .unwrap();
    assert_eq!(id_of(&answers[0]), format!("kafka:{}", ids[&a]));
    assert_eq!(answers[1], Probe::Absent);
    assert_eq!(id_of(&answers[2]), format!("kafka:{}", ids[&b]));
    assert_eq!(
        kafka().describe(&[&never])[&never],
        "absent",
        "a probe never creates the topic it asks about"
    );

    // Found by id while it lives; gone with it; the same name later is another topic.
    let found = p.find_by_id(&id_of(&answers[0])).await.unwrap().unwrap();
    assert_eq!(
        (found.target, found.object_type),
        (topic(&a), ObjectType::Topic)
    );
    kafka().delete(&[&a]);
    // Deletion reaches the brokers' metadata a moment after the controller commits it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while p.probe(&[topic(&a)]).await.unwrap()[0] != Probe::Absent {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the topic is still there"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(p.find_by_id(&id_of(&answers[0])).await.unwrap(), None);
    let again = kafka().create(&[&a]);
    let now = p.probe(&[topic(&a)]).await.unwrap();
    assert_eq!(id_of(&now[0]), format!("kafka:{}", again[&a]));
    assert_ne!(
        id_of(&now[0]),
        id_of(&answers[0]),
        "a recreated topic has a new id"
    );
}

#[tokio::test]
async fn every_sasl_mechanism_authenticates_and_a_wrong_password_is_auth_failed_without_the_password()
 {
    let b = kafka();
    let u = unique();
    let name = format!("auth{u}");
    kafka().create(&[&name]);
    let cases = [
        (SaslMechanism::Plain, BOB),
        (SaslMechanism::ScramSha256, ALICE),
        (SaslMechanism::ScramSha512, ALICE),
    ];
    for (mechanism, user) in cases {
        let p = KafkaProvider::new(settings(
            &b.sasl_plaintext,
            SslMode::Disable,
            Some((mechanism, user)),
            None,
        ))
        .unwrap();
        let answers = p
            .probe(&[topic(&name)])
            .await
            .unwrap_or_else(|e| panic!("{mechanism:?}: {e}"));
        assert!(matches!(answers[0], Probe::Present { .. }), "{mechanism:?}");
        assert!(
            p.server_identity()
                .await
                .unwrap()
                .starts_with("kafka cluster ")
        );

        let canary = format!("canary-{u}-pw");
        let wrong = KafkaProvider::new(settings(
            &b.sasl_plaintext,
            SslMode::Disable,
            Some((mechanism, (user.0, &canary))),
            None,
        ))
        .unwrap();
        let e = wrong.probe(&[topic(&name)]).await.unwrap_err();
        assert!(
            matches!(e, ProviderError::AuthFailed(_)),
            "{mechanism:?}: {e:?}"
        );
        assert!(!e.to_string().contains(&canary), "{e}");
    }
}

#[tokio::test]
async fn a_user_without_describe_rights_gets_permission_denied_never_absent() {
    let u = unique();
    let (exists, missing) = (format!("denied{u}"), format!("denied-missing{u}"));
    kafka().create(&[&exists]);
    let p = KafkaProvider::new(settings(
        &kafka().sasl_plaintext,
        SslMode::Disable,
        Some((SaslMechanism::ScramSha256, CAROL)),
        None,
    ))
    .unwrap();
    p.check_connection().await.unwrap();
    for target in [topic(&exists), topic(&missing)] {
        let e = p.probe(std::slice::from_ref(&target)).await.unwrap_err();
        assert!(
            matches!(e, ProviderError::PermissionDenied(_)),
            "{target:?}: {e:?}"
        );
    }
}

#[tokio::test]
async fn tls_verifies_the_broker_against_the_catalogs_ca() {
    let b = kafka();
    let u = unique();
    let name = format!("tls{u}");
    kafka().create(&[&name]);
    let with = |mode, ca: Option<String>| {
        KafkaProvider::new(settings(
            &b.sasl_ssl.replace("127.0.0.1", "localhost"),
            mode,
            Some((SaslMechanism::ScramSha512, ALICE)),
            ca,
        ))
        .unwrap()
    };
    let answers = with(SslMode::VerifyFull, Some(b.ca_pem()))
        .probe(&[topic(&name)])
        .await
        .unwrap();
    assert!(matches!(answers[0], Probe::Present { .. }));
    let e = with(SslMode::VerifyFull, Some(b.other_ca_pem()))
        .probe(&[topic(&name)])
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::Tls(_)), "{e:?}");
    let e = with(SslMode::VerifyFull, None)
        .probe(&[topic(&name)])
        .await
        .unwrap_err();
    assert!(
        matches!(e, ProviderError::Tls(_)),
        "public roots do not trust a private CA: {e:?}"
    );
    assert!(
        with(SslMode::Require, None)
            .probe(&[topic(&name)])
            .await
            .is_ok(),
        "require encrypts without verifying"
    );
    // A plaintext client on a TLS listener, and TLS on a plaintext one, fail as such.
    let plain_on_tls = KafkaProvider::new(settings(
        &b.sasl_ssl,
        SslMode::Disable,
        Some((SaslMechanism::ScramSha256, ALICE)),
        None,
    ))
    .unwrap();
    assert!(plain_on_tls.probe(&[topic(&name)]).await.is_err());
}

#[tokio::test]
async fn mutual_tls_presents_the_client_certificate_the_broker_requires() {
    let b = kafka();
    let name = format!("mtls{}", unique());
    kafka().create(&[&name]);
    let with = |client: Option<ClientCertificate>| {
        let mut s = settings(
            &b.mtls.replace("127.0.0.1", "localhost"),
            SslMode::VerifyFull,
            None,
            Some(b.ca_pem()),
        );
        s.client_certificate = client;
        KafkaProvider::new(s).unwrap()
    };
    // The certificate is the only credential: its subject (CN=dave) is the principal the ACL
    // allows, so a Present answer proves the broker authenticated it.
    let answers = with(Some(b.client_certificate()))
        .probe(&[topic(&name)])
        .await
        .unwrap();
    assert!(matches!(answers[0], Probe::Present { .. }), "{answers:?}");
    for (what, client) in [
        ("no client certificate", None),
        (
            "a certificate from a CA the broker does not trust",
            Some(b.other_client_certificate()),
        ),
    ] {
        let e = with(client).probe(&[topic(&name)]).await.unwrap_err();
        assert!(
            matches!(e, ProviderError::Tls(_) | ProviderError::Unreachable(_)),
            "{what}: {e:?}"
        );
    }
    // A key that is not the certificate's, and a Secret holding no PEM, are settings errors
    // that name the Secret's keys and quote nothing from it.
    let mismatched = ClientCertificate::new(
        b.client_certificate().chain_pem,
        b.other_client_certificate().expose_key().to_vec(),
    );
    let mut s = settings(&b.mtls, SslMode::VerifyFull, None, Some(b.ca_pem()));
    s.client_certificate = Some(mismatched);
    let Err(ProviderError::Misconfigured(m)) = KafkaProvider::new(s) else {
        panic!("a mismatched key was accepted");
    };
    assert!(
        m.contains("tls.key is not the private key of tls.crt"),
        "{m}"
    );
    let mut s = settings(&b.mtls, SslMode::VerifyFull, None, Some(b.ca_pem()));
    s.client_certificate = Some(ClientCertificate::new("not pem", "hunter2-key"));
    let Err(ProviderError::Misconfigured(m)) = KafkaProvider::new(s) else {
        panic!("garbage was accepted as a certificate");
    };
    assert!(
        m.contains("tls.crt holds no PEM certificate") && !m.contains("hunter2"),
        "{m}"
    );
    let mut s = settings(&b.mtls, SslMode::Disable, None, None);
    s.client_certificate = Some(b.client_certificate());
    let Err(ProviderError::Misconfigured(m)) = KafkaProvider::new(s) else {
        panic!("a client certificate without TLS was accepted");
    };
    assert!(m.contains("needs TLS"), "{m}");
}

#[tokio::test]
async fn an_unreachable_broker_is_unreachable_and_the_next_bootstrap_server_is_tried() {
    let (port, _held) = support::refused_port();
    let refused = format!("127.0.0.1:{port}");
    let p = KafkaProvider::new(settings(&refused, SslMode::Disable, None, None)).unwrap();
    let e = p.check_connection().await.unwrap_err();
    assert!(matches!(e, ProviderError::Unreachable(_)), "{e:?}");

    let mut s = settings(&refused, SslMode::Disable, None, None);
    s.bootstrap
        .push(split_host_port(&kafka().plaintext).unwrap());
    let p = KafkaProvider::new(s).unwrap();
    p.check_connection().await.unwrap();
}

#[tokio::test]
async fn a_large_batch_is_answered_in_order() {
    let u = unique();
    let names: Vec<String> = (0..300).map(|i| format!("bulk{u}-{i:03}")).collect();
    let created: Vec<&str> = names.iter().step_by(3).map(String::as_str).collect();
    let ids = kafka().create(&created);
    let targets: Vec<ProbeTarget> = names.iter().map(|n| topic(n)).collect();
    let answers = scram_alice().probe(&targets).await.unwrap();
    for (n, a) in names.iter().zip(&answers) {
        match ids.get(n) {
            Some(id) => assert_eq!(id_of(a), format!("kafka:{id}"), "{n}"),
            None => assert_eq!(*a, Probe::Absent, "{n}"),
        }
    }
}
