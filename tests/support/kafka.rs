//! A real Apache Kafka broker (KRaft, one combined node) per test binary, started by
//! hack/kafka from the jars Maven Central serves and stopped by its reaper when the binary
//! exits. Topics are made and dropped with confluent-kafka (librdkafka), a client nobody here
//! wrote, so what the tests expect does not come from semops' own client.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use semops::catalog::ClientCertificate;

use super::ROOT;

pub struct Broker {
    pub dir: PathBuf,
    /// `127.0.0.1:port` of each listener.
    pub plaintext: String,
    pub sasl_plaintext: String,
    pub sasl_ssl: String,
    /// TLS with a client certificate required (principal `CN=dave`, may describe every topic).
    pub mtls: String,
}

/// SCRAM-SHA-256 and SCRAM-SHA-512 user allowed to describe every topic.
pub const ALICE: (&str, &str) = ("alice", "alice-secret");
/// PLAIN user allowed to describe every topic.
pub const BOB: (&str, &str) = ("bob", "bob-secret");
/// SCRAM-SHA-256 user without ACLs: every topic is denied.
pub const CAROL: (&str, &str) = ("carol", "carol-secret");

static BROKER: OnceLock<Broker> = OnceLock::new();

pub fn kafka() -> &'static Broker {
    BROKER.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let dir = PathBuf::from(ROOT).join("target/e2e").join(format!(
            "{}-{}-kafka",
            exe.file_stem().unwrap().to_string_lossy(),
            std::process::id()
        ));
        let out = Command::new(format!("{ROOT}/hack/kafka"))
            .args(["up", dir.to_str().unwrap(), "--owner-pid"])
            .arg(std::process::id().to_string())
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(out.status.success(), "hack/kafka up failed");
        let env = std::fs::read_to_string(dir.join("env")).unwrap();
        let var = |k: &str| {
            env.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .unwrap_or_else(|| panic!("{k} missing from hack/kafka's env"))
                .to_string()
        };
        Broker {
            plaintext: var("KAFKA_PLAINTEXT"),
            sasl_plaintext: var("KAFKA_SASL_PLAINTEXT"),
            sasl_ssl: var("KAFKA_SASL_SSL"),
            mtls: var("KAFKA_MTLS"),
            dir,
        }
    })
}

impl Broker {
    /// The private CA (PEM) that signed the broker's certificate (for localhost, 127.0.0.1).
    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.dir.join("tls/ca.crt")).unwrap()
    }

    /// An unrelated CA (PEM), for "wrong CA" tests.
    pub fn other_ca_pem(&self) -> String {
        std::fs::read_to_string(self.dir.join("tls/other-ca.crt")).unwrap()
    }

    /// The client certificate and key (PEM) the broker's CA signed for `CN=dave`.
    pub fn client_certificate(&self) -> ClientCertificate {
        self.pem_pair("client")
    }

    /// A client certificate and key (PEM) for `CN=dave` from the unrelated CA.
    pub fn other_client_certificate(&self) -> ClientCertificate {
        self.pem_pair("other-client")
    }

    fn pem_pair(&self, name: &str) -> ClientCertificate {
        let read = |ext: &str| std::fs::read(self.dir.join(format!("tls/{name}.{ext}"))).unwrap();
        ClientCertificate::new(read("crt"), read("key"))
    }

    fn admin(&self, args: &[&str]) -> String {
        let out = Command::new(format!("{ROOT}/hack/kafka"))
            .args(["admin", self.dir.to_str().unwrap()])
            .args(args)
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(out.status.success(), "hack/kafka admin {args:?} failed");
        String::from_utf8(out.stdout).unwrap()
    }

    fn ids(text: &str) -> HashMap<String, String> {
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(n, id)| (n.to_string(), id.trim().to_string()))
            .collect()
    }

    /// Creates topics; returns each one's topic id as the broker reports it.
    pub fn create(&self, names: &[&str]) -> HashMap<String, String> {
        let mut args = vec!["create"];
        args.extend_from_slice(names);
        Self::ids(&self.admin(&args))
    }

    pub fn delete(&self, names: &[&str]) {
        let mut args = vec!["delete"];
        args.extend_from_slice(names);
        self.admin(&args);
    }

    /// Each topic's id, or `absent`.
    pub fn describe(&self, names: &[&str]) -> HashMap<String, String> {
        let mut args = vec!["describe"];
        args.extend_from_slice(names);
        Self::ids(&self.admin(&args))
    }
}
