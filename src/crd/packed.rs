//! Texts of a fixed canonical form, held as the bytes they encode. semops writes two such texts
//! into every model's status: metric ids (UUIDv7, 36 bytes of text: ten per model) and the two
//! `sha256:` hashes (71 bytes). Held as `String`s, each was a heap block of its own in every
//! cached model. A [`Packed`] text keeps the canonical form in its bytes and any other text (an
//! older writer's, a hand-edited status) verbatim, so every value reads back exactly as written.

use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A canonical text form and the bytes it encodes.
pub trait Form {
    type Bytes: Copy + Eq + Hash;
    /// What the text is, for errors and docs.
    const WHAT: &'static str;
    /// The bytes of `text`, when `text` is exactly the canonical text of those bytes.
    fn parse(text: &str) -> Option<Self::Bytes>;
    /// The canonical text of `bytes`, written into `buffer`.
    fn write<'a>(bytes: &Self::Bytes, buffer: &'a mut [u8; BUFFER]) -> &'a str;
}

/// Room for the longest canonical text (a `sha256:` hash, 71 bytes).
pub const BUFFER: usize = 80;

pub struct Packed<F: Form>(Repr<F::Bytes>, PhantomData<F>);

#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr<B> {
    Canonical(B),
    Verbatim(Box<str>),
}

/// A metric's stable id: a UUIDv7 minted by semops.
pub type MetricId = Packed<Uuid>;
/// A `sha256:<64 hex digits>` hash of a definition or snapshot.
pub type Digest = Packed<Sha256>;

pub enum Uuid {}
pub enum Sha256 {}

impl Form for Uuid {
    type Bytes = [u8; 16];
    const WHAT: &'static str = "a metric id (string)";
    fn parse(text: &str) -> Option<[u8; 16]> {
        let uuid = uuid::Uuid::try_parse(text).ok()?;
        let mut buffer = [0u8; BUFFER];
        (Self::write(uuid.as_bytes(), &mut buffer) == text).then_some(*uuid.as_bytes())
    }
    fn write<'a>(bytes: &[u8; 16], buffer: &'a mut [u8; BUFFER]) -> &'a str {
        uuid::Uuid::from_bytes(*bytes)
            .hyphenated()
            .encode_lower(&mut buffer[..36])
    }
}

const SHA256_PREFIX: &str = "sha256:";

impl Form for Sha256 {
    type Bytes = [u8; 32];
    const WHAT: &'static str = "a sha256 hash (string)";
    fn parse(text: &str) -> Option<[u8; 32]> {
        let digits = text.strip_prefix(SHA256_PREFIX)?;
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(digits, &mut bytes).ok()?;
        // hex also reads upper case, which would not print back the same.
        (!digits.bytes().any(|b| b.is_ascii_uppercase())).then_some(bytes)
    }
    fn write<'a>(bytes: &[u8; 32], buffer: &'a mut [u8; BUFFER]) -> &'a str {
        let (prefix, digits) = buffer.split_at_mut(SHA256_PREFIX.len());
        prefix.copy_from_slice(SHA256_PREFIX.as_bytes());
        hex::encode_to_slice(bytes, &mut digits[..64]).expect("64 hex digits fit");
        std::str::from_utf8(&buffer[..SHA256_PREFIX.len() + 64]).expect("ASCII")
    }
}

impl<F: Form> Packed<F> {
    pub fn new(text: &str) -> Self {
        Packed(
            match F::parse(text) {
                Some(bytes) => Repr::Canonical(bytes),
                None => Repr::Verbatim(text.into()),
            },
            PhantomData,
        )
    }

    /// The text, written into `buffer` when packed (no allocation).
    pub fn as_str<'a>(&'a self, buffer: &'a mut [u8; BUFFER]) -> &'a str {
        match &self.0 {
            Repr::Canonical(bytes) => F::write(bytes, buffer),
            Repr::Verbatim(text) => text,
        }
    }
}

impl MetricId {
    pub fn from_uuid(uuid: uuid::Uuid) -> MetricId {
        Packed(Repr::Canonical(*uuid.as_bytes()), PhantomData)
    }
}

impl<F: Form> Clone for Packed<F> {
    fn clone(&self) -> Self {
        Packed(self.0.clone(), PhantomData)
    }
}

impl<F: Form> PartialEq for Packed<F> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl<F: Form> Eq for Packed<F> {}

impl<F: Form> Hash for Packed<F> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state)
    }
}

impl<F: Form> fmt::Display for Packed<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str(&mut [0; BUFFER]))
    }
}

impl<F: Form> fmt::Debug for Packed<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(&mut [0; BUFFER]), f)
    }
}

impl<F: Form> PartialEq<str> for Packed<F> {
    fn eq(&self, other: &str) -> bool {
        self.as_str(&mut [0; BUFFER]) == other
    }
}

impl<F: Form> PartialEq<&str> for Packed<F> {
    fn eq(&self, other: &&str) -> bool {
        self == *other
    }
}

impl<F: Form> PartialEq<String> for Packed<F> {
    fn eq(&self, other: &String) -> bool {
        self == other.as_str()
    }
}

impl<F: Form> From<&str> for Packed<F> {
    fn from(text: &str) -> Self {
        Packed::new(text)
    }
}

impl<F: Form> From<String> for Packed<F> {
    fn from(text: String) -> Self {
        Packed::new(&text)
    }
}

impl<F: Form> Serialize for Packed<F> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str(&mut [0; BUFFER]))
    }
}

impl<'de, F: Form> Deserialize<'de> for Packed<F> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text<F>(PhantomData<F>);
        impl<F: Form> serde::de::Visitor<'_> for Text<F> {
            type Value = Packed<F>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(F::WHAT)
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Packed<F>, E> {
                Ok(Packed::new(text))
            }
        }
        deserializer.deserialize_str(Text(PhantomData))
    }
}

/// On the wire a packed text is a string, and the CRD says so (unchanged).
impl<F: Form> schemars::JsonSchema for Packed<F> {
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

    fn reads_back_exactly<F: Form>(text: &str) -> Result<(), proptest::test_runner::TestCaseError> {
        let packed = Packed::<F>::new(text);
        proptest::prop_assert_eq!(packed.to_string(), text);
        proptest::prop_assert!(packed == text);
        let json = serde_json::to_string(&packed).unwrap();
        proptest::prop_assert_eq!(&json, &serde_json::to_string(text).unwrap());
        let back: Packed<F> = serde_json::from_str(&json).unwrap();
        proptest::prop_assert!(back == packed);
        proptest::prop_assert_eq!(back.to_string(), text);
        Ok(())
    }

    fn is_packed<F: Form>(text: &str) -> bool {
        matches!(Packed::<F>::new(text).0, Repr::Canonical(_))
    }

    proptest::proptest! {
        /// Whatever the text (canonical, upper case, braces, no hyphens, anything), it reads
        /// back, compares and encodes exactly as written; only the canonical form is packed.
        #[test]
        fn every_metric_id_reads_back_exactly(
            text in r"[0-9a-fA-F-]{30,40}|[ -~]{0,40}|\{[0-9a-f-]{36}\}",
            bytes in proptest::array::uniform16(proptest::num::u8::ANY),
        ) {
            let canonical = uuid::Uuid::from_bytes(bytes).hyphenated().to_string();
            for text in [&text, &canonical, &canonical.to_uppercase(), &uuid::Uuid::from_bytes(bytes).simple().to_string()] {
                reads_back_exactly::<Uuid>(text)?;
            }
            proptest::prop_assert!(is_packed::<Uuid>(&canonical));
            proptest::prop_assert_eq!(is_packed::<Uuid>(&canonical.to_uppercase()), canonical == canonical.to_uppercase());
            proptest::prop_assert!(MetricId::from_uuid(uuid::Uuid::from_bytes(bytes)) == MetricId::new(&canonical));
        }

        #[test]
        fn every_digest_reads_back_exactly(
            text in r"sha256:[0-9a-fA-F]{60,68}|[ -~]{0,80}",
            bytes in proptest::array::uniform32(proptest::num::u8::ANY),
        ) {
            let canonical = format!("sha256:{}", hex::encode(bytes));
            for text in [&text, &canonical, &canonical.to_uppercase(), &format!("sha256:{}", hex::encode_upper(bytes)), &hex::encode(bytes)] {
                reads_back_exactly::<Sha256>(text)?;
            }
            proptest::prop_assert!(is_packed::<Sha256>(&canonical));
            proptest::prop_assert!(!is_packed::<Sha256>(&hex::encode(bytes)));
        }
    }

    /// Every comparison and conversion agrees with the text, packed or verbatim; equal texts
    /// hash alike, so sets and maps keyed by ids see one entry.
    #[test]
    fn comparisons_conversions_and_hashes_follow_the_text() {
        let canonical = "01938d5e-7c1a-7b3e-8f00-0a1b2c3d4e5f";
        let other = String::from("other");
        for text in [canonical, "an id an older writer chose"] {
            let owned = text.to_string();
            let ids = [
                MetricId::new(text),
                MetricId::from(text),
                MetricId::from(owned.clone()),
            ];
            for id in &ids {
                assert!(*id == *text && *id == text && *id == owned);
                assert!(*id != *"other" && *id != "other" && *id != other);
                assert_eq!(format!("{id:?}"), format!("{text:?}"));
                assert_eq!(id.clone(), ids[0]);
            }
            let set: std::collections::HashSet<_> = ids.into_iter().collect();
            assert_eq!(set.len(), 1, "{text}");
        }
        let other = MetricId::new("01938d5e-7c1a-7b3e-8f00-0a1b2c3d4e50");
        assert!(MetricId::new(canonical) != other);
        let hash = |id: &MetricId| {
            let mut hasher = std::hash::DefaultHasher::new();
            id.hash(&mut hasher);
            std::hash::Hasher::finish(&hasher)
        };
        assert_ne!(hash(&MetricId::new(canonical)), hash(&other));
    }

    #[test]
    fn a_packed_text_that_is_not_a_string_is_refused_by_naming_its_form() {
        let error = serde_json::from_str::<MetricId>("7")
            .unwrap_err()
            .to_string();
        assert!(error.contains("a metric id (string)"), "{error}");
        let error = serde_json::from_str::<Digest>("{}")
            .unwrap_err()
            .to_string();
        assert!(error.contains("a sha256 hash (string)"), "{error}");
    }

    #[test]
    fn packed_texts_are_no_bigger_than_they_must_be() {
        assert_eq!(
            std::mem::size_of::<MetricId>(),
            std::mem::size_of::<String>()
        );
        assert_eq!(std::mem::size_of::<Option<Digest>>(), 40);
    }

    #[test]
    fn semops_hashes_are_packed() {
        let hash = crate::model::canonical::value_hash(&serde_json::json!({"a": 1}));
        assert!(is_packed::<Sha256>(&hash), "{hash}");
    }
}
