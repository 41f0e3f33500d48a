//! A response frame is walked against the shape of the message semops asked for before
//! kafka-protocol decodes it. The decoder reserves `Vec::with_capacity(n)` for every array count
//! `n` a broker declares (up to 2^32), which a hostile broker turns into a multi-gigabyte
//! allocation that aborts the process where overcommit is strict. The walk proves every count,
//! string and byte length against the bytes that actually arrived, so what the decoder then
//! allocates is proportional to the frame, never to a declared number. Pure: no I/O.

/// One field of a response, as far as its length on the wire goes.
#[derive(Clone, Copy, Debug)]
enum F {
    I16,
    I32,
    I64,
    Bool,
    Uuid,
    /// A (nullable) string with an INT16 length.
    Str,
    /// A compact (nullable) string or byte array: an unsigned varint of length + 1.
    Compact,
    /// An array with an INT32 count of elements of this shape.
    Array(&'static [F]),
    /// A compact array: an unsigned varint of count + 1.
    CompactArray(&'static [F]),
    /// The tagged fields of a flexible struct: tags kafka-protocol decodes itself, with their shape.
    Tags(&'static [(u32, &'static [F])]),
}

use F::*;

const NO_TAGS: F = Tags(&[]);

const BROKER: &[F] = &[I32, Compact, I32, Compact, NO_TAGS];
const PARTITION: &[F] = &[
    I16,
    I32,
    I32,
    I32,
    CompactArray(&[I32]),
    CompactArray(&[I32]),
    CompactArray(&[I32]),
    NO_TAGS,
];
const TOPIC: &[F] = &[
    I16,
    Compact,
    Uuid,
    Bool,
    CompactArray(PARTITION),
    I32,
    NO_TAGS,
];
/// Metadata v10 still carries the cluster's authorized operations; v11 and v12 do not.
const METADATA_V10: &[F] = &[
    I32,
    CompactArray(BROKER),
    Compact,
    I32,
    CompactArray(TOPIC),
    I32,
    NO_TAGS,
];
const METADATA_V11: &[F] = &[
    I32,
    CompactArray(BROKER),
    Compact,
    I32,
    CompactArray(TOPIC),
    NO_TAGS,
];
const FEATURE: &[F] = &[Compact, I16, I16, NO_TAGS];
/// ApiVersions v3: kafka-protocol decodes tags 0–3 from the frame itself, ignoring their sizes,
/// so their contents are walked too (and must fill their declared size exactly).
const API_VERSIONS_V3: &[F] = &[
    I16,
    CompactArray(&[I16, I16, I16, NO_TAGS]),
    I32,
    Tags(&[
        (0, &[CompactArray(FEATURE)]),
        (1, &[I64]),
        (2, &[CompactArray(FEATURE)]),
        (3, &[Bool]),
    ]),
];
const SASL_HANDSHAKE_V1: &[F] = &[I16, Array(&[Str])];
const SASL_AUTHENTICATE_V2: &[F] = &[I16, Compact, Compact, I64, NO_TAGS];

/// The shape of the response to API `key` at `version`, for the requests semops sends; `None`
/// for any other (such a frame is refused rather than decoded unchecked).
fn body(key: i16, version: i16) -> Option<&'static [F]> {
    use kafka_protocol::messages::ApiKey;
    let key = ApiKey::try_from(key).ok()?;
    match (key, version) {
        (ApiKey::Metadata, 10) => Some(METADATA_V10),
        (ApiKey::Metadata, 11 | 12) => Some(METADATA_V11),
        (ApiKey::ApiVersions, 3) => Some(API_VERSIONS_V3),
        (ApiKey::SaslHandshake, 1) => Some(SASL_HANDSHAKE_V1),
        (ApiKey::SaslAuthenticate, 2) => Some(SASL_AUTHENTICATE_V2),
        _ => None,
    }
}

/// Checks a whole response frame (header and body) for API `key` at `version`, whose header is
/// flexible (has tagged fields) when `flexible_header`. Every declared length and count fits in
/// the bytes that follow it, and the frame ends exactly where the message does.
pub fn check(frame: &[u8], key: i16, version: i16, flexible_header: bool) -> Result<(), String> {
    let shape = body(key, version)
        .ok_or_else(|| format!("no response shape known for api {key} v{version}"))?;
    let mut r = Reader { bytes: frame };
    r.fixed(4)?; // correlation id
    if flexible_header {
        r.field(NO_TAGS)?;
    }
    r.fields(shape)?;
    match r.bytes.len() {
        0 => Ok(()),
        n => Err(format!("{n} bytes after the message")),
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    fn fixed(&mut self, n: usize) -> Result<&[u8], String> {
        if self.bytes.len() < n {
            return Err(format!(
                "a field of {n} bytes where {} remain",
                self.bytes.len()
            ));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    /// A length that must fit in what remains (each counted element takes at least a byte).
    fn within(&self, n: u64, what: &str) -> Result<usize, String> {
        usize::try_from(n)
            .ok()
            .filter(|n| *n <= self.bytes.len())
            .ok_or_else(|| {
                format!(
                    "{what} of {n} declared where {} bytes remain",
                    self.bytes.len()
                )
            })
    }

    fn varint(&mut self) -> Result<u32, String> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let b = self.fixed(1)?[0];
            value |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("an unsigned varint longer than 5 bytes".into())
    }

    fn i16(&mut self) -> Result<i16, String> {
        let b = self.fixed(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, String> {
        let b = self.fixed(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn fields(&mut self, shape: &[F]) -> Result<(), String> {
        shape.iter().try_for_each(|f| self.field(*f))
    }

    fn field(&mut self, f: F) -> Result<(), String> {
        match f {
            I16 => self.fixed(2).map(drop),
            I32 => self.fixed(4).map(drop),
            I64 => self.fixed(8).map(drop),
            Bool => self.fixed(1).map(drop),
            Uuid => self.fixed(16).map(drop),
            Str => match self.i16()? {
                -1 => Ok(()),
                n if n < -1 => Err(format!("a string length of {n}")),
                n => {
                    let n = self.within(n as u64, "a string")?;
                    self.fixed(n).map(drop)
                }
            },
            Compact => match self.varint()? {
                0 => Ok(()),
                n => {
                    let n = self.within(u64::from(n) - 1, "a string or byte length")?;
                    self.fixed(n).map(drop)
                }
            },
            Array(element) => {
                let n = self.i32()?;
                if n == -1 {
                    return Ok(());
                }
                if n < -1 {
                    return Err(format!("an array count of {n}"));
                }
                let n = self.within(n as u64, "an array count")?;
                (0..n).try_for_each(|_| self.fields(element))
            }
            CompactArray(element) => match self.varint()? {
                0 => Ok(()),
                n => {
                    let n = self.within(u64::from(n) - 1, "an array count")?;
                    (0..n).try_for_each(|_| self.fields(element))
                }
            },
            Tags(known) => {
                let n = self.varint()?;
                let n = self.within(u64::from(n), "a tagged field count")?;
                for _ in 0..n {
                    let tag = self.varint()?;
                    let size = self.varint()?;
                    let size = self.within(u64::from(size), "a tagged field")?;
                    let value = self.fixed(size)?;
                    if let Some((_, shape)) = known.iter().find(|(t, _)| *t == tag) {
                        let mut inner = Reader { bytes: value };
                        inner.fields(shape)?;
                        if !inner.bytes.is_empty() {
                            return Err(format!(
                                "tagged field {tag} is {} bytes longer than its value",
                                inner.bytes.len()
                            ));
                        }
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::messages::api_versions_response::{
        ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
    };
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::{
        ApiKey, ApiVersionsResponse, BrokerId, MetadataResponse, ResponseHeader,
        SaslAuthenticateResponse, SaslHandshakeResponse, TopicName,
    };
    use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
    use proptest::prelude::*;

    fn frame<M: Encodable + HeaderVersion>(m: &M, version: i16) -> (Vec<u8>, bool) {
        let flexible = M::header_version(version) >= 1;
        let mut b = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(7)
            .encode(&mut b, M::header_version(version))
            .unwrap();
        m.encode(&mut b, version).unwrap();
        (b.to_vec(), flexible)
    }

    fn s(x: &str) -> StrBytes {
        StrBytes::from_string(x.to_string())
    }

    fn metadata(topics: usize, partitions: usize, replicas: usize) -> MetadataResponse {
        MetadataResponse::default()
            .with_cluster_id(Some(s("cluster")))
            .with_brokers(vec![
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(1))
                    .with_host(s("broker-1"))
                    .with_port(9092)
                    .with_rack(Some(s("a"))),
            ])
            .with_topics(
                (0..topics)
                    .map(|t| {
                        MetadataResponseTopic::default()
                            .with_name(Some(TopicName(s(&format!("topic-{t}")))))
                            .with_partitions(
                                (0..partitions)
                                    .map(|p| {
                                        MetadataResponsePartition::default()
                                            .with_partition_index(p as i32)
                                            .with_replica_nodes(vec![BrokerId(1); replicas])
                                            .with_isr_nodes(vec![BrokerId(1); replicas])
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
    }

    fn api_versions(keys: usize, features: usize) -> ApiVersionsResponse {
        ApiVersionsResponse::default()
            .with_api_keys(
                (0..keys)
                    .map(|k| {
                        ApiVersion::default()
                            .with_api_key(k as i16)
                            .with_max_version(3)
                    })
                    .collect(),
            )
            .with_supported_features(
                (0..features)
                    .map(|f| SupportedFeatureKey::default().with_name(s(&format!("f{f}"))))
                    .collect(),
            )
            .with_finalized_features_epoch(3)
            .with_finalized_features(
                (0..features)
                    .map(|f| FinalizedFeatureKey::default().with_name(s(&format!("f{f}"))))
                    .collect(),
            )
    }

    /// Every frame kafka-protocol itself encodes for the requests semops sends passes the walk.
    fn encoded(
        topics: usize,
        partitions: usize,
        replicas: usize,
    ) -> Vec<(Vec<u8>, i16, i16, bool)> {
        let mut all = vec![];
        for v in 10..=12 {
            let (f, flex) = frame(&metadata(topics, partitions, replicas), v);
            all.push((f, ApiKey::Metadata as i16, v, flex));
        }
        let (f, flex) = frame(&api_versions(topics, partitions), 3);
        all.push((f, ApiKey::ApiVersions as i16, 3, flex));
        let (f, flex) = frame(
            &SaslHandshakeResponse::default()
                .with_mechanisms((0..topics).map(|i| s(&format!("M{i}"))).collect()),
            1,
        );
        all.push((f, ApiKey::SaslHandshake as i16, 1, flex));
        let (f, flex) = frame(
            &SaslAuthenticateResponse::default()
                .with_error_message(Some(s(&"x".repeat(partitions))))
                .with_auth_bytes(vec![1u8; replicas].into()),
            2,
        );
        all.push((f, ApiKey::SaslAuthenticate as i16, 2, flex));
        all
    }

    proptest! {
        #[test]
        fn what_kafka_protocol_encodes_passes_and_every_truncation_is_refused(
            topics in 0usize..6, partitions in 0usize..5, replicas in 0usize..4, cut in 0.0f64..1.0
        ) {
            for (f, key, version, flex) in encoded(topics, partitions, replicas) {
                prop_assert!(check(&f, key, version, flex).is_ok(), "api {key} v{version}");
                let at = ((f.len() - 1) as f64 * cut) as usize;
                prop_assert!(check(&f[..at], key, version, flex).is_err(), "api {key} v{version} cut at {at}");
                let mut longer = f.clone();
                longer.push(0);
                prop_assert!(check(&longer, key, version, flex).is_err());
            }
        }

        /// Whatever bytes arrive: a frame the walk passes decodes, or fails for its content (the
        /// shapes agree with the decoder's), and no frame makes the walk panic.
        #[test]
        fn arbitrary_bytes_never_panic_and_a_passed_frame_decodes(
            base in 0usize..3, flips in proptest::collection::vec((0usize..400, any::<u8>()), 0..6)
        ) {
            for (mut f, key, version, flex) in encoded(base + 1, base, base) {
                for (at, b) in &flips {
                    let n = f.len();
                    f[at % n] = *b;
                }
                if check(&f, key, version, flex).is_ok() {
                    let mut buf = bytes::Bytes::from(f.clone());
                    let decoded = ResponseHeader::decode(&mut buf, if flex { 1 } else { 0 }).and_then(|_| {
                        match ApiKey::try_from(key).unwrap() {
                            ApiKey::Metadata => MetadataResponse::decode(&mut buf, version).map(drop),
                            ApiKey::ApiVersions => ApiVersionsResponse::decode(&mut buf, version).map(drop),
                            ApiKey::SaslHandshake => SaslHandshakeResponse::decode(&mut buf, version).map(drop),
                            _ => SaslAuthenticateResponse::decode(&mut buf, version).map(drop),
                        }
                    });
                    // The walk checks lengths, not content or nullability: after a flip a
                    // string may be invalid UTF-8, or a null stand where the decoder wants a
                    // value. Lengths never disagree.
                    if let Err(e) = decoded {
                        let e = e.to_string();
                        prop_assert!(e.to_lowercase().contains("utf-8") || e.contains("negative"), "{e}");
                    }
                }
            }
        }
    }

    /// The attacks themselves: counts and lengths of 2^31 and 2^32 in each kind of length field.
    #[test]
    fn declared_lengths_past_the_frame_are_refused() {
        let metadata = ApiKey::Metadata as i16;
        // header (correlation id, no tags), throttle, then a compact broker count of 2^32 - 2.
        let mut f = BytesMut::new();
        f.put_i32(7);
        f.put_u8(0);
        f.put_i32(0);
        f.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        let e = check(&f, metadata, 12, true).unwrap_err();
        assert!(e.contains("an array count of 4294967294"), "{e}");

        let handshake = ApiKey::SaslHandshake as i16;
        let mut f = BytesMut::new();
        f.put_i32(7);
        f.put_i16(0);
        f.put_i32(i32::MAX);
        f.extend_from_slice(&[0; 64]);
        let e = check(&f, handshake, 1, false).unwrap_err();
        assert!(e.contains("an array count of 2147483647"), "{e}");

        // A known ApiVersions tag whose nested array count overruns its declared size.
        let versions = ApiKey::ApiVersions as i16;
        let mut f = BytesMut::new();
        f.put_i32(7);
        f.put_i16(0);
        f.put_u8(1); // no api keys
        f.put_i32(0);
        f.put_u8(1); // one tagged field
        f.put_u8(0); // tag 0: supported features
        f.put_u8(3); // of 3 bytes
        f.extend_from_slice(&[0xff, 0xff, 0x7f]);
        let e = check(&f, versions, 3, false).unwrap_err();
        assert!(e.contains("array count"), "{e}");

        // A varint that never ends, and a version semops never asks for.
        let mut f = BytesMut::new();
        f.put_i32(7);
        f.extend_from_slice(&[0x80; 16]);
        assert!(check(&f, metadata, 12, false).is_err());
        assert!(
            check(&[0; 8], metadata, 4, false)
                .unwrap_err()
                .contains("no response shape")
        );
    }

    /// Null (-1) and empty (0) strings and arrays pass; any other negative length is named.
    #[test]
    fn null_and_empty_lengths_pass_and_other_negative_ones_are_named() {
        let handshake = ApiKey::SaslHandshake as i16;
        // Correlation id, error code, then the mechanism array: count, then each INT16 length.
        let frame = |count: i32, lengths: &[i16]| {
            let mut f = BytesMut::new();
            f.put_i32(7);
            f.put_i16(0);
            f.put_i32(count);
            for n in lengths {
                f.put_i16(*n);
            }
            f
        };
        // (array count, string lengths, the error)
        let cases: [(i32, &[i16], Option<&str>); 7] = [
            (-1, &[], None),
            (0, &[], None),
            (1, &[0], None),
            (2, &[-1, 0], None),
            (-2, &[], Some("an array count of -2")),
            (i32::MIN, &[], Some("an array count of -2147483648")),
            (1, &[-2], Some("a string length of -2")),
        ];
        for (count, lengths, error) in cases {
            let result = check(&frame(count, lengths), handshake, 1, false);
            assert_eq!(result.err().as_deref(), error, "{count} {lengths:?}");
        }
    }
}
