//! A metric's id as the cache holds it. semops mints UUIDv7s written in their canonical text
//! (36 bytes, lower-case, hyphenated); held as text, each was a 48-byte heap block, ten per
//! model. `MetricId` keeps such an id in its 16 bytes and any other text (an id from an older
//! writer, a hand-edited status) as it is, so every value reads back exactly as written.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone, PartialEq, Eq, Hash)]
pub struct MetricId(Repr);

#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr {
    /// A UUID whose text is canonical (lower-case hyphenated): it prints back the same.
    Uuid([u8; 16]),
    /// Anything else, kept verbatim.
    Text(Box<str>),
}

impl MetricId {
    pub fn new(text: &str) -> MetricId {
        MetricId(match canonical_uuid(text) {
            Some(uuid) => Repr::Uuid(*uuid.as_bytes()),
            None => Repr::Text(text.into()),
        })
    }

    pub fn from_uuid(uuid: uuid::Uuid) -> MetricId {
        MetricId(Repr::Uuid(*uuid.as_bytes()))
    }

    /// The text, borrowed from `buffer` for a UUID (no allocation).
    pub fn as_str<'a>(&'a self, buffer: &'a mut [u8; 36]) -> &'a str {
        match &self.0 {
            Repr::Uuid(bytes) => uuid::Uuid::from_bytes(*bytes)
                .hyphenated()
                .encode_lower(buffer),
            Repr::Text(text) => text,
        }
    }
}

/// `text` as a UUID when it is exactly the canonical form a UUID prints as.
fn canonical_uuid(text: &str) -> Option<uuid::Uuid> {
    let uuid = uuid::Uuid::try_parse(text).ok()?;
    let mut buffer = [0u8; 36];
    (uuid.hyphenated().encode_lower(&mut buffer) == text).then_some(uuid)
}

impl fmt::Display for MetricId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str(&mut [0; 36]))
    }
}

impl fmt::Debug for MetricId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(&mut [0; 36]), f)
    }
}

impl PartialEq<str> for MetricId {
    fn eq(&self, other: &str) -> bool {
        self.as_str(&mut [0; 36]) == other
    }
}

impl PartialEq<&str> for MetricId {
    fn eq(&self, other: &&str) -> bool {
        self == *other
    }
}

impl PartialEq<String> for MetricId {
    fn eq(&self, other: &String) -> bool {
        self == other.as_str()
    }
}

impl From<&str> for MetricId {
    fn from(text: &str) -> MetricId {
        MetricId::new(text)
    }
}

impl From<String> for MetricId {
    fn from(text: String) -> MetricId {
        MetricId::new(&text)
    }
}

impl From<&MetricId> for String {
    fn from(id: &MetricId) -> String {
        id.to_string()
    }
}

impl Serialize for MetricId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str(&mut [0; 36]))
    }
}

impl<'de> Deserialize<'de> for MetricId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<MetricId, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = MetricId;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a metric id (string)")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<MetricId, E> {
                Ok(MetricId::new(text))
            }
        }
        deserializer.deserialize_str(Text)
    }
}

/// On the wire a metric id is a string, and the CRD says so (unchanged).
impl schemars::JsonSchema for MetricId {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        <String as schemars::JsonSchema>::schema_name()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <String as schemars::JsonSchema>::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Whatever the text (a minted id, upper case, braces, no hyphens, anything), it reads
        /// back, compares and encodes exactly as written.
        #[test]
        fn every_id_reads_back_exactly(
            text in r"[0-9a-fA-F-]{30,40}|[ -~]{0,40}|\{[0-9a-f-]{36}\}",
            bytes in proptest::array::uniform16(proptest::num::u8::ANY),
        ) {
            let minted = uuid::Uuid::from_bytes(bytes).hyphenated().to_string();
            for text in [text, minted.clone(), minted.to_uppercase()] {
                let id = MetricId::new(&text);
                proptest::prop_assert_eq!(id.to_string(), text.clone());
                proptest::prop_assert!(id == text.as_str());
                let json = serde_json::to_string(&id).unwrap();
                proptest::prop_assert_eq!(&json, &serde_json::to_string(&text).unwrap());
                let back: MetricId = serde_json::from_str(&json).unwrap();
                proptest::prop_assert_eq!(&back, &id);
                proptest::prop_assert_eq!(back.to_string(), text);
            }
            // A canonical UUID is held in 16 bytes; its upper-case spelling is not canonical.
            proptest::prop_assert!(matches!(MetricId::new(&minted).0, Repr::Uuid(_)));
            proptest::prop_assert!(matches!(MetricId::new(&minted.to_uppercase()).0, Repr::Text(_)) || minted == minted.to_uppercase());
        }
    }

    #[test]
    fn a_uuid_id_reads_as_its_canonical_text_and_is_no_bigger_than_a_string() {
        let uuid = uuid::Uuid::now_v7();
        let id = MetricId::from_uuid(uuid);
        assert_eq!(id.to_string(), uuid.hyphenated().to_string());
        assert_eq!(MetricId::new(&uuid.to_string()), id);
        assert_eq!(
            std::mem::size_of::<MetricId>(),
            std::mem::size_of::<String>()
        );
    }
}
