//! Kafka catalogs end to end, against a real control plane and a real Apache Kafka broker
//! (hack/kafka): topics registered, probed by topic id in check rounds; ReportOnly marks a
//! deleted topic Stale, AutoRemove withdraws it, a recreated topic is Live with a new id and
//! `RegistrationReplaced`; a wrong SASL password and a denied ACL change nothing and remove
//! nothing; the password never leaks; a model bound to a topic is found by the topic lookup.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::checks::{World, condition, state_of};
use support::db::unique;
use support::kafka::{ALICE, CAROL, kafka};
use support::{env, eventually};

const AUTO: &str =
    "enabled: false, mode: AutoRemove, removeAfter: {misses: 1, grace: 0s}, kinds: [Schema, Topic]";
const REPORT: &str = "enabled: false, mode: ReportOnly, kinds: [Schema, Topic]";

/// A Secret `ev-sasl` for `user` and a SCRAM-SHA-256 Catalog `ev` over SASL_SSL with the
/// broker's CA, registering the schema `default` and `topics`.
fn objects(user: (&str, &str), topics: &[String]) -> String {
    let b = kafka();
    let regs: Vec<String> = std::iter::once("{kind: Schema, name: default}".to_string())
        .chain(
            topics
                .iter()
                .map(|t| format!("{{kind: Topic, schema: default, name: {t}, owner: streaming}}")),
        )
        .collect();
    let ca = b.ca_pem().replace('\n', "\\n");
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: ev-sasl, namespace: NS, labels: {{semops.io/catalog-credentials: \"true\"}}, annotations: {{semops.io/allowed-hosts: \"localhost,127.0.0.0/8,::1\"}}}}\nstringData: {{username: {}, password: {}}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: ev-ca, namespace: NS, labels: {{semops.io/catalog-credentials: \"true\"}}}}\nstringData: {{ca.crt: \"{ca}\"}}\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: ev, namespace: NS}}\nspec:\n  provider: kafka\n  connection:\n    bootstrapServers: [\"{}\"]\n    sslMode: verify-full\n    tls: {{caSecretRef: {{name: ev-ca}}}}\n    sasl: {{mechanism: SCRAM-SHA-256}}\n    credentialsSecretRef: {{name: ev-sasl}}\n  registrations: [{}]\n",
        user.0,
        user.1,
        b.sasl_ssl.replace("127.0.0.1", "localhost"),
        regs.join(", ")
    )
}

fn topics(prefix: &str, n: usize) -> Vec<String> {
    let u = unique();
    (0..n).map(|i| format!("{prefix}{u}-{i}")).collect()
}

fn wait_deleted(names: &[&str]) {
    kafka().delete(names);
    eventually(Duration::from_secs(30), "topics deleted", || {
        kafka()
            .describe(names)
            .values()
            .all(|id| id == "absent")
            .then_some(())
    });
}

fn set_policy(w: &World, policy: &str) {
    env().apply_ok(&format!(
        "apiVersion: semops.io/v1alpha1\nkind: ReconcilePolicy\nmetadata: {{name: p, namespace: {}}}\nspec: {{{policy}}}\n",
        w.ns()
    ));
}

#[test]
fn deleted_topics_go_stale_then_removed_and_a_recreated_topic_is_replaced() {
    let t = topics("orders", 3);
    let ids = kafka().create(&t.iter().map(String::as_str).collect::<Vec<_>>());
    let w = World::with_objects("kafka", &objects(ALICE, &t), REPORT, &[]);
    let s = w.check("ev");
    assert_eq!(s["lastCheck"]["result"], "Completed", "{s}");
    assert!(
        s["server"].as_str().unwrap().starts_with("kafka cluster "),
        "{s}"
    );
    for name in &t {
        assert_eq!(
            state_of(&s, name),
            ("Live".into(), format!("kafka:{}", ids[name])),
            "recorded ids are the broker's topic ids"
        );
    }
    assert_eq!(state_of(&s, "default").0, "Live");
    assert_eq!(
        condition(&s, "Reachable"),
        ("True".into(), "Connected".into())
    );

    // ReportOnly: a deleted topic is Stale, warned once, nothing removed.
    wait_deleted(&[&t[1]]);
    let s = w.check("ev");
    assert_eq!(state_of(&s, &t[1]).0, "Stale");
    assert_eq!(
        condition(&s, "RegistrationsCurrent"),
        ("False".into(), "StaleRegistrations".into())
    );
    let (code, report) = w.api(
        "GET",
        &format!("/api/metalakes/{}/catalogs/ev/stale-entities", w.ns()),
        None,
    );
    assert_eq!(code, 200, "{report}");
    let entities = report["staleEntities"].as_array().unwrap();
    assert_eq!(entities.len(), 1, "{report}");
    assert_eq!(
        (entities[0]["kind"].as_str(), entities[0]["name"].as_str()),
        (Some("Topic"), Some(t[1].as_str()))
    );
    let reasons = |w: &World| -> Vec<String> { w.events("ev").into_iter().map(|e| e.0).collect() };
    assert_eq!(
        reasons(&w)
            .iter()
            .filter(|r| *r == "StaleRegistration")
            .count(),
        1
    );

    // AutoRemove withdraws it through the one removal path; spec is never edited.
    set_policy(&w, AUTO);
    let s = w.check("ev");
    assert_eq!(state_of(&s, &t[1]).0, "Removed", "{s}");
    assert_eq!(s["lastCheck"]["removed"], 1);
    assert!(reasons(&w).iter().any(|r| r == "RegistrationRemoved"));
    let spec = w.catalog("ev")["spec"]["registrations"].clone();
    assert_eq!(spec.as_array().unwrap().len(), 4, "spec untouched");

    // Deleted and recreated under the same name: another topic, never taken for the old one.
    wait_deleted(&[&t[2]]);
    let again = kafka().create(&[&t[2]]);
    let s = w.check("ev");
    assert_eq!(
        state_of(&s, &t[2]),
        ("Live".into(), format!("kafka:{}", again[&t[2]]))
    );
    assert_ne!(again[&t[2]], ids[&t[2]]);
    assert!(
        reasons(&w).iter().any(|r| r == "RegistrationReplaced"),
        "{:?}",
        w.events("ev")
    );
    assert_eq!(state_of(&s, &t[0]).0, "Live");
}

#[test]
fn a_wrong_password_or_a_denied_acl_changes_nothing_and_removes_nothing() {
    let t = topics("guarded", 2);
    kafka().create(&t.iter().map(String::as_str).collect::<Vec<_>>());
    let w = World::with_objects("kafkadoubt", &objects(ALICE, &t), AUTO, &[]);
    let before = w.check("ev");
    assert_eq!(state_of(&before, &t[0]).0, "Live");
    wait_deleted(&[&t[0]]);

    let canary = format!("canary-{}-pw", unique());
    // (user, password, Reachable reason)
    let cases = [
        (ALICE.0, canary.as_str(), "AuthFailed"),
        (CAROL.0, CAROL.1, "PermissionDenied"),
    ];
    for (user, password, reason) in cases {
        env().kubectl_ok(&[
            "patch",
            "secret",
            "ev-sasl",
            "-n",
            w.ns(),
            "--type=merge",
            "-p",
            &format!(r#"{{"stringData":{{"username":"{user}","password":"{password}"}}}}"#),
        ]);
        let s = w.check("ev");
        assert_eq!(
            s["lastCheck"]["result"], "CatalogUnreachable",
            "{user}: {s}"
        );
        assert_eq!(
            condition(&s, "Reachable"),
            ("False".into(), reason.into()),
            "{user}"
        );
        assert_eq!(
            state_of(&s, &t[0]),
            state_of(&before, &t[0]),
            "{user}: no state changes on doubt"
        );
        assert_eq!(w.removed_metric(), 0.0, "{user}: zero removals");
    }
    let everything = format!(
        "{}{}{}",
        serde_json::to_string(&w.catalog("ev")).unwrap(),
        serde_json::to_string(&w.events("ev")).unwrap(),
        w.op.logs()
    );
    assert!(!everything.contains(&canary), "the password leaked");
}

#[test]
fn a_model_bound_to_a_topic_is_found_by_the_topic_lookup_in_utf16_order() {
    let t = topics("clicks", 1);
    kafka().create(&[&t[0]]);
    let w = World::with_objects("kafkalookup", &objects(ALICE, &t), REPORT, &[]);
    let ns = w.ns().to_string();
    // Dataset names whose UTF-16 order differs from their code point order.
    env().apply_ok(&format!(
        "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: analytics, namespace: {ns}}}\nspec: {{provider: managed, registrations: [{{kind: Schema, name: semantic}}]}}\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {{name: m, namespace: {ns}}}\nspec:\n  catalog: analytics\n  schema: semantic\n  definition:\n    datasets: [{{name: \"\u{ff5e}wide\", source: ev.default.{t0}, primaryKey: [not_a_field]}}, {{name: \"\u{1f600}emoji\", source: ev.default.{t0}}}, {{name: plain, source: ev.default.{t0}}}]\n",
        t0 = t[0]
    ));
    eventually(Duration::from_secs(60), "the model is accepted", || {
        let m = env().kubectl_ok(&["get", "semanticmodel", "m", "-n", &ns, "-o", "json"]);
        let v: Value = serde_json::from_str(&m).unwrap();
        (condition(&v["status"], "Ready") == ("True".into(), "Accepted".into())).then_some(())
    });
    let (code, body) = w.api(
        "GET",
        &format!(
            "/api/metalakes/{ns}/objects/topic/ev.default.{}/semantic-model-datasets",
            t[0]
        ),
        None,
    );
    assert_eq!(code, 200, "{body}");
    let names: Vec<&str> = body["identifiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["plain", "\u{1f600}emoji", "\u{ff5e}wide"],
        "UTF-16 order"
    );
    let (code, _) = w.api(
        "GET",
        &format!(
            "/api/metalakes/{ns}/objects/table/ev.default.{}/semantic-model-datasets",
            t[0]
        ),
        None,
    );
    assert_eq!(code, 404, "a topic is not a table");
}

#[test]
fn mutual_tls_authenticates_with_the_client_certificate_of_an_opted_in_secret() {
    let b = kafka();
    let t = topics("mtls", 1);
    kafka().create(&[&t[0]]);
    let json = |s: String| serde_json::to_string(&s).unwrap();
    let read = |f: &str| std::fs::read_to_string(b.dir.join("tls").join(f)).unwrap();
    let key = read("client.key");
    let objects = format!(
        "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/tls\nmetadata: {{name: mt-client, namespace: NS, labels: {{semops.io/catalog-credentials: \"true\"}}, annotations: {{semops.io/allowed-hosts: \"localhost,127.0.0.0/8,::1\"}}}}\nstringData: {{tls.crt: {}, tls.key: {}}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: mt-ca, namespace: NS, labels: {{semops.io/catalog-credentials: \"true\"}}}}\nstringData: {{ca.crt: {}}}\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: mt, namespace: NS}}\nspec:\n  provider: kafka\n  connection:\n    bootstrapServers: [\"{}\"]\n    sslMode: verify-full\n    tls: {{caSecretRef: {{name: mt-ca}}, clientCertificateSecretRef: {{name: mt-client}}}}\n  registrations: [{{kind: Topic, schema: default, name: {}}}]\n",
        json(read("client.crt")),
        json(key.clone()),
        json(b.ca_pem()),
        b.mtls.replace("127.0.0.1", "localhost"),
        t[0]
    );
    let w = World::with_objects("kafkamtls", &objects, REPORT, &[]);
    let s = w.check("mt");
    assert_eq!(condition(&s, "Reachable").0, "True", "{s}");
    assert_eq!(state_of(&s, &t[0]).0, "Live", "{s}");

    // Without the opt-in label the Secret is not read: the catalog is not reachable, the topic
    // keeps its state, and the message names the field and the fix.
    env().kubectl_ok(&[
        "label",
        "secret",
        "mt-client",
        "-n",
        w.ns(),
        "semops.io/catalog-credentials-",
    ]);
    let s = w.check("mt");
    let (status, reason) = condition(&s, "Reachable");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "CredentialsInvalid"),
        "{s}"
    );
    let message = s["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Reachable")
        .unwrap()["message"]
        .to_string();
    assert!(message.contains("clientCertificateSecretRef"), "{message}");
    assert_eq!(state_of(&s, &t[0]).0, "Live", "no state change on doubt");

    // The private key appears nowhere semops writes.
    let everything = format!(
        "{}{}{}",
        serde_json::to_string(&w.catalog("mt")).unwrap(),
        serde_json::to_string(&w.events("mt")).unwrap(),
        w.op.logs()
    );
    assert!(
        !key.lines()
            .filter(|l| !l.starts_with("-----"))
            .any(|l| everything.contains(l)),
        "the private key leaked"
    );
}
