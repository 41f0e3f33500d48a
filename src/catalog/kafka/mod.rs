//! Kafka provider: topics of the one schema `default`, probed with one Metadata request per
//! batch of names (never a listing, never auto-creating). The native id is the topic id
//! (`kafka:<uuid>`): a topic deleted and recreated under its name gets a new id, so it is
//! "replaced", never taken for the old one.
//!
//! Kafka cannot rename a topic. `find_by_id` still asks the broker (Metadata by topic id), but a
//! deleted topic's id is gone with it, so a registration whose name is absent is never found
//! elsewhere: `Renamed` is never produced for topics, only `Stale`.
//!
//! Only the bootstrap servers are ever connected to: any broker answers metadata, so the
//! brokers a cluster advertises are not needed (and stay out of the egress allow-list's way).

mod frame_check;
mod sasl;
mod wire;

use std::sync::{Arc, Mutex};

use kafka_protocol::error::{ParseResponseErrorCode, ResponseError};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::OnceCell;

use self::wire::{Conn, Dial};
use super::{
    CatalogProvider, Column, ConnectionSettings, Found, ObjectType, Probe, ProbeTarget,
    ProviderError, with_deadline,
};
use crate::crd::catalog::SslMode;

/// The one schema of a Kafka catalog (as in Gravitino's Kafka catalog).
pub const SCHEMA: &str = "default";
/// Metadata v10 added topic ids; v12 answers lookups by topic id alone.
const METADATA_MIN: i16 = 10;
const METADATA_MAX: i16 = 12;
const METADATA_BY_ID: i16 = 12;

pub struct KafkaProvider {
    settings: ConnectionSettings,
    tls: Option<Arc<rustls::ClientConfig>>,
    /// Authenticated connections not in use (at most `max_connections`).
    idle: Mutex<Vec<Conn>>,
    cluster_id: OnceCell<String>,
}

impl KafkaProvider {
    pub fn new(settings: ConnectionSettings) -> Result<Self, ProviderError> {
        let tls = match settings.ssl_mode {
            SslMode::Disable if settings.client_certificate.is_some() => {
                return Err(ProviderError::Misconfigured(
                    "spec.connection.tls.clientCertificateSecretRef needs TLS, but sslMode is disable; use verify-full (with tls.caSecretRef for a private CA)".into(),
                ));
            }
            SslMode::Disable => None,
            SslMode::Prefer => {
                return Err(ProviderError::Misconfigured(
                    "sslMode prefer cannot be honoured by Kafka (a listener speaks TLS or it does not); use verify-full, verify-ca, require, or disable for a plaintext listener".into(),
                ));
            }
            mode => Some(Arc::new(super::tls::tls_config(
                mode,
                settings.ca_pem.as_deref(),
                settings.client_certificate.as_ref(),
            )?)),
        };
        Ok(Self {
            settings,
            tls,
            idle: Mutex::default(),
            cluster_id: OnceCell::new(),
        })
    }

    fn servers(&self) -> Vec<(String, u16)> {
        if self.settings.bootstrap.is_empty() {
            vec![(self.settings.host.clone(), self.settings.port)]
        } else {
            self.settings.bootstrap.clone()
        }
    }

    /// An idle connection, or a new one to the first bootstrap server that accepts us. When
    /// none does, the most telling failure: a refusal of our credentials or TLS outranks an
    /// unreachable server.
    async fn conn(&self) -> Result<Conn, ProviderError> {
        if let Some(c) = self.idle.lock().expect("kafka pool poisoned").pop() {
            return Ok(c);
        }
        let mut failure: Option<ProviderError> = None;
        for (host, port) in self.servers() {
            let dial = Dial {
                host: &host,
                port,
                addresses: &self.settings.addresses,
                tls: self.tls.clone(),
                sasl: self.settings.sasl,
                credentials: &self.settings.credentials,
                timeout: self.settings.connect_timeout,
            };
            match Conn::open(&dial).await {
                Ok(c) => return Ok(c),
                Err(e) => {
                    let telling =
                        !matches!(e, ProviderError::Unreachable(_) | ProviderError::Timeout(_));
                    if failure.is_none() || telling {
                        failure = Some(e);
                    }
                    if telling {
                        break;
                    }
                }
            }
        }
        Err(failure.unwrap_or_else(|| {
            ProviderError::Misconfigured("spec.connection.bootstrapServers is empty".into())
        }))
    }

    fn release(&self, c: Conn) {
        let mut idle = self.idle.lock().expect("kafka pool poisoned");
        if idle.len() < self.settings.max_connections {
            idle.push(c);
        }
    }

    /// One Metadata request; a connection that failed is dropped, a good one kept.
    async fn metadata(
        &self,
        topics: Option<Vec<MetadataRequestTopic>>,
        min_version: i16,
    ) -> Result<MetadataResponse, ProviderError> {
        let mut c = self.conn().await?;
        let Some(version) = c.version::<MetadataRequest>(min_version, METADATA_MAX) else {
            return Err(ProviderError::Misconfigured(format!(
                "the broker does not speak Metadata v{min_version} or later (topic ids need Kafka 2.8, lookups by id 3.1)"
            )));
        };
        let request = MetadataRequest::default()
            .with_topics(topics)
            .with_allow_auto_topic_creation(false);
        let r = c
            .send(&request, version, self.settings.statement_timeout)
            .await?;
        self.release(c);
        if let Some(e) = r.error_code.err() {
            return Err(classify(e, "the metadata request"));
        }
        Ok(r)
    }

    fn deadline(&self) -> std::time::Duration {
        self.settings.connect_timeout + self.settings.statement_timeout * 2
    }

    async fn probe_batch(&self, targets: &[ProbeTarget]) -> Result<Vec<Probe>, ProviderError> {
        let names: Vec<String> = targets
            .iter()
            .filter_map(|t| match t {
                ProbeTarget::Relation { name, .. } => Some(name.clone()),
                ProbeTarget::Schema { .. } => None,
            })
            .collect();
        let cluster = self.cluster().await?;
        let response = if names.is_empty() {
            None
        } else {
            let topics = names
                .iter()
                .map(|n| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(n.clone()))))
                })
                .collect();
            Some(self.metadata(Some(topics), METADATA_MIN).await?)
        };
        answers(targets, response.as_ref(), &cluster)
    }

    async fn cluster(&self) -> Result<String, ProviderError> {
        self.cluster_id
            .get_or_try_init(|| async {
                let r = self.metadata(Some(vec![]), METADATA_MIN).await?;
                r.cluster_id
                    .map(|c| c.as_str().to_string())
                    .filter(|c| !c.is_empty())
                    .ok_or_else(|| ProviderError::Protocol("the broker names no cluster id".into()))
            })
            .await
            .cloned()
    }

    async fn find_by_id_inner(&self, native_id: &str) -> Result<Option<Found>, ProviderError> {
        let Some(id) = topic_id(native_id) else {
            return Ok(None);
        };
        let c = self.conn().await?;
        let supports_lookup = c
            .version::<MetadataRequest>(METADATA_BY_ID, METADATA_MAX)
            .is_some();
        self.release(c);
        if !supports_lookup {
            return Ok(None);
        }
        let r = self
            .metadata(
                Some(vec![MetadataRequestTopic::default().with_topic_id(id)]),
                METADATA_BY_ID,
            )
            .await?;
        match r.topics.first() {
            None => Err(ProviderError::Protocol("no answer for a topic id".into())),
            Some(t) => match t.error_code.err() {
                Some(ResponseError::UnknownTopicId | ResponseError::UnknownTopicOrPartition) => {
                    Ok(None)
                }
                Some(e) => Err(classify(e, &format!("topic id {id}"))),
                None => Ok(t.name.as_ref().map(|n| Found {
                    target: ProbeTarget::relation(SCHEMA, n.as_str()),
                    object_type: ObjectType::Topic,
                })),
            },
        }
    }
}

/// One answer per target, in order, from a Metadata response for the targets' topic names.
/// The schema `default` exists while the cluster answers; a topic is absent only when the
/// broker says it does not exist. A refusal to describe a topic is doubt, never absence: it
/// fails the batch.
fn answers(
    targets: &[ProbeTarget],
    response: Option<&MetadataResponse>,
    cluster: &str,
) -> Result<Vec<Probe>, ProviderError> {
    targets
        .iter()
        .map(|t| match t {
            ProbeTarget::Schema { name } if name == SCHEMA => Ok(Probe::Present {
                object_type: ObjectType::Schema,
                native_id: format!("kafka:cluster:{cluster}"),
            }),
            ProbeTarget::Schema { .. } => Ok(Probe::Absent),
            ProbeTarget::Relation { schema, .. } if schema != SCHEMA => Ok(Probe::Absent),
            ProbeTarget::Relation { name, .. } => {
                let topic = response
                    .and_then(|r| {
                        r.topics
                            .iter()
                            .find(|x| x.name.as_ref().is_some_and(|n| n.as_str() == name))
                    })
                    .ok_or_else(|| {
                        ProviderError::Protocol(format!(
                            "the broker did not answer for topic {name:?}"
                        ))
                    })?;
                match topic.error_code.err() {
                    None if topic.topic_id.is_nil() => Err(ProviderError::Protocol(format!(
                        "the broker gave topic {name:?} no topic id"
                    ))),
                    // Leadership moving does not make a topic any less there.
                    None | Some(ResponseError::LeaderNotAvailable) if !topic.topic_id.is_nil() => {
                        Ok(Probe::Present {
                            object_type: ObjectType::Topic,
                            native_id: native_id(&topic.topic_id),
                        })
                    }
                    Some(ResponseError::UnknownTopicOrPartition) => Ok(Probe::Absent),
                    Some(e) => Err(classify(e, &format!("topic {name:?}"))),
                    None => unreachable!("a nil topic id is refused above"),
                }
            }
        })
        .collect()
}

/// `kafka:<topic id>`, the id written the way Kafka's own tools print it (URL-safe base64 of
/// its 16 bytes, unpadded), so `kafka-topics --describe` shows the same text.
fn native_id(id: &uuid::Uuid) -> String {
    use base64::Engine;
    format!(
        "kafka:{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
    )
}

/// The topic id of a recorded native id; `None` for anything semops did not write.
fn topic_id(native: &str) -> Option<uuid::Uuid> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(native.strip_prefix("kafka:")?)
        .ok()?;
    uuid::Uuid::from_slice(&bytes).ok()
}

/// A broker error code as a failure category.
fn classify(e: ResponseError, what: &str) -> ProviderError {
    use ResponseError::*;
    match e {
        TopicAuthorizationFailed | ClusterAuthorizationFailed | GroupAuthorizationFailed => {
            ProviderError::PermissionDenied(format!(
                "the broker refused to describe {what} ({e:?}); grant the catalog's user Describe on the topics"
            ))
        }
        SaslAuthenticationFailed => ProviderError::AuthFailed(format!("{what}: {e:?}")),
        InvalidTopicException => ProviderError::Misconfigured(format!("{what}: {e:?}")),
        LeaderNotAvailable
        | NotLeaderOrFollower
        | BrokerNotAvailable
        | NotController
        | RequestTimedOut
        | NetworkException
        | CoordinatorNotAvailable => ProviderError::ServerUnavailable(format!("{what}: {e:?}")),
        _ => ProviderError::Protocol(format!("{what}: {e:?}")),
    }
}

/// Why Kafka cannot have a topic of this name (its own rules), or why a target is not a topic
/// of this catalog.
pub fn name_problem(target: &ProbeTarget) -> Option<String> {
    match target {
        ProbeTarget::Schema { name } if name == SCHEMA => None,
        ProbeTarget::Schema { name } => Some(format!(
            "a kafka catalog has one schema, {SCHEMA:?}, not {name:?}"
        )),
        ProbeTarget::Relation { schema, .. } if schema != SCHEMA => {
            Some(format!("topics live in schema {SCHEMA:?}, not {schema:?}"))
        }
        ProbeTarget::Relation { name, .. } => topic_name_problem(name),
    }
}

fn topic_name_problem(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > 249 {
        return Some(format!(
            "a Kafka topic name has 1 to 249 characters, not {}",
            name.len()
        ));
    }
    if name == "." || name == ".." {
        return Some(format!("{name:?} is not a legal Kafka topic name"));
    }
    name.chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        .map(|c| {
            format!(
                "a Kafka topic name holds only ASCII letters, digits, '.', '_' and '-', not {c:?}"
            )
        })
}

impl CatalogProvider for KafkaProvider {
    async fn check_connection(&self) -> Result<(), ProviderError> {
        with_deadline(self.deadline(), async {
            self.metadata(Some(vec![]), METADATA_MIN).await.map(|_| ())
        })
        .await
    }

    async fn probe(&self, targets: &[ProbeTarget]) -> Result<Vec<Probe>, ProviderError> {
        with_deadline(self.deadline(), self.probe_batch(targets)).await
    }

    async fn find_by_id(&self, native_id: &str) -> Result<Option<Found>, ProviderError> {
        with_deadline(self.deadline(), self.find_by_id_inner(native_id)).await
    }

    /// Topics have no columns semops can read (no schema registry is consulted): an existing
    /// topic answers an empty list.
    async fn columns(
        &self,
        schema: &str,
        name: &str,
    ) -> Result<Option<Vec<Column>>, ProviderError> {
        let target = ProbeTarget::relation(schema, name);
        match self.probe(std::slice::from_ref(&target)).await?.first() {
            Some(Probe::Present { .. }) => Ok(Some(vec![])),
            _ => Ok(None),
        }
    }

    async fn server_identity(&self) -> Result<String, ProviderError> {
        with_deadline(self.deadline(), async {
            Ok(format!("kafka cluster {}", self.cluster().await?))
        })
        .await
    }

    fn invalid_name(&self, target: &ProbeTarget) -> Option<String> {
        name_problem(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::metadata_response::MetadataResponseTopic;

    fn topic(name: &str, code: i16, id: u128) -> MetadataResponseTopic {
        MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(name.into()))))
            .with_error_code(code)
            .with_topic_id(uuid::Uuid::from_u128(id))
    }

    fn response(topics: Vec<MetadataResponseTopic>) -> MetadataResponse {
        MetadataResponse::default().with_topics(topics)
    }

    fn t(name: &str) -> ProbeTarget {
        ProbeTarget::relation(SCHEMA, name)
    }

    #[test]
    fn each_broker_answer_maps_to_a_probe_or_a_failure_category() {
        // (error code, topic id, expected: Ok(native id) | Ok("absent") | Err(category))
        let cases: [(i16, u128, Result<&str, &str>); 7] = [
            (0, 7, Ok("kafka:AAAAAAAAAAAAAAAAAAAABw")),
            (5, 7, Ok("kafka:AAAAAAAAAAAAAAAAAAAABw")),
            (3, 0, Ok("absent")),
            (29, 0, Err("PermissionDenied")),
            (0, 0, Err("UnexpectedReply")),
            (5, 0, Err("ServerUnavailable")),
            (17, 0, Err("Misconfigured")),
        ];
        for (code, id, want) in cases {
            let got = answers(
                &[t("orders")],
                Some(&response(vec![topic("orders", code, id)])),
                "c1",
            )
            .map(|p| match &p[0] {
                Probe::Present {
                    native_id,
                    object_type,
                } => {
                    assert_eq!(*object_type, ObjectType::Topic);
                    native_id.clone()
                }
                Probe::Absent => "absent".into(),
            })
            .map_err(|e| e.category().as_str().to_string());
            assert_eq!(
                got.as_ref().map(String::as_str).map_err(String::as_str),
                want,
                "error code {code}, id {id}"
            );
        }
    }

    #[test]
    fn answers_follow_the_targets_order_and_a_missing_answer_is_doubt() {
        let r = response(vec![topic("b", 3, 0), topic("a", 0, 1)]);
        let got = answers(
            &[t("a"), ProbeTarget::schema(SCHEMA), t("b")],
            Some(&r),
            "c1",
        )
        .unwrap();
        assert!(
            matches!(&got[0], Probe::Present { native_id, .. } if native_id == "kafka:AAAAAAAAAAAAAAAAAAAAAQ")
        );
        assert_eq!(
            got[1],
            Probe::Present {
                object_type: ObjectType::Schema,
                native_id: "kafka:cluster:c1".into()
            }
        );
        assert_eq!(got[2], Probe::Absent);
        assert!(matches!(
            answers(&[t("c")], Some(&r), "c1"),
            Err(ProviderError::Protocol(_))
        ));
    }

    #[test]
    fn one_denied_topic_fails_the_whole_batch() {
        let r = response(vec![
            topic("a", 0, 1),
            topic("secret", 29, 0),
            topic("gone", 3, 0),
        ]);
        assert!(matches!(
            answers(&[t("a"), t("secret"), t("gone")], Some(&r), "c1"),
            Err(ProviderError::PermissionDenied(_))
        ));
    }

    #[test]
    fn native_ids_round_trip_and_foreign_ids_are_ignored() {
        let id = uuid::Uuid::from_u128(0x0147acc1_a40f_4b22_a678_5183bf574962);
        // The form Kafka's tools print for this id.
        assert_eq!(native_id(&id), "kafka:AUeswaQPSyKmeFGDv1dJYg");
        assert_eq!(topic_id(&native_id(&id)), Some(id));
        for foreign in [
            "pg:1:2:r3",
            "kafka:",
            "kafka:not base64!",
            "kafka:AAAA",
            "AUeswaQPSyKmeFGDv1dJYg",
        ] {
            assert_eq!(topic_id(foreign), None, "{foreign}");
        }
    }

    #[test]
    fn names_kafka_cannot_hold_are_invalid() {
        let cases = [
            (t("orders.v1_x-2"), true),
            (t(&"a".repeat(249)), true),
            (t(&"a".repeat(250)), false),
            (t(""), false),
            (t("."), false),
            (t(".."), false),
            (t("with space"), false),
            (t("ünïcode"), false),
            (t("a/b"), false),
            (ProbeTarget::relation("public", "orders"), false),
            (ProbeTarget::schema(SCHEMA), true),
            (ProbeTarget::schema("public"), false),
        ];
        for (target, valid) in cases {
            assert_eq!(name_problem(&target).is_none(), valid, "{target:?}");
        }
    }
}
