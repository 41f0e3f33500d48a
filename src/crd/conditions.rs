//! Conditions per the Kubernetes API conventions: the condition types and reasons semops writes
//! (typed, so status, Events, metric labels and docs/conditions.md cannot drift apart), and the
//! merge that computes a condition list purely from the previous one.
//!
//! `lastTransitionTime` moves only when a condition's status flips, so a reconcile that finds
//! nothing new produces exactly the previous list and the controller sends no write.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};
use smol_str::SmolStr;

/// A status condition: the fields, wire form and schema of Kubernetes' `meta/v1` Condition, with
/// its strings held as `SmolStr`, so a type, status, reason or message of up to 23 bytes lives in
/// the value instead of a heap block of its own (four per condition, four conditions per cached
/// model: docs/architecture.md, "the cached form").
/// A longer text (most messages) is held once for all objects that carry it ([`shared_text`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Required, as in `meta/v1` (the other strings default to empty when absent).
    pub last_transition_time: Time,
    #[serde(default, deserialize_with = "shared")]
    pub message: SmolStr,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, deserialize_with = "shared")]
    pub reason: SmolStr,
    #[serde(default, deserialize_with = "shared")]
    pub status: SmolStr,
    #[serde(rename = "type", default, deserialize_with = "shared")]
    pub type_: SmolStr,
}

/// How many distinct long condition texts [`shared_text`] holds at most.
const SHARED_TEXTS_MAX: usize = 4096;

/// Condition texts longer than `SmolStr`'s inline 23 bytes, each held once: a message is nearly
/// always one of a few sentences ("definition passed the contract and model-local checks") that
/// every one of 10,000 models repeats.
static SHARED_TEXTS: std::sync::LazyLock<SharedTexts> =
    std::sync::LazyLock::new(|| SharedTexts::new(SHARED_TEXTS_MAX));

/// `text` as a `SmolStr`: inline when short, else the one shared copy of it.
pub fn shared_text(text: &str) -> SmolStr {
    SHARED_TEXTS.share(text, || SmolStr::new(text))
}

/// A bounded set of long texts: when full it starts over (the texts objects already hold stay
/// valid; they are reference-counted), so a stream of distinct messages cannot grow it.
struct SharedTexts {
    texts: std::sync::Mutex<std::collections::HashSet<SmolStr>>,
    max: usize,
}

impl SharedTexts {
    fn new(max: usize) -> Self {
        SharedTexts {
            texts: Default::default(),
            max,
        }
    }

    /// The held copy of `text` if there is one; else `make()`, now held too (unless inline).
    fn share(&self, text: &str, make: impl FnOnce() -> SmolStr) -> SmolStr {
        if text.len() <= INLINE_MAX {
            return make();
        }
        let mut texts = self
            .texts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(held) = texts.get(text) {
            return held.clone();
        }
        if texts.len() >= self.max {
            texts.clear();
        }
        let made = make();
        texts.insert(made.clone());
        made
    }
}

/// The longest text a `SmolStr` holds in the value itself.
const INLINE_MAX: usize = 23;

fn shared<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<SmolStr, D::Error> {
    let text = SmolStr::deserialize(deserializer)?;
    let key = text.clone(); // the same Arc: no copy of the text
    Ok(SHARED_TEXTS.share(&key, move || text))
}

/// The schema is `meta/v1` Condition's, word for word: the CRDs do not change.
impl schemars::JsonSchema for Condition {
    fn schema_name() -> Cow<'static, str> {
        <k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition as schemars::JsonSchema>::schema_name()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition as schemars::JsonSchema>::json_schema(generator)
    }
}

/// The condition types semops writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConditionType {
    /// Summary of every kind: the object is usable as declared.
    Ready,
    /// SemanticModel: the definition passed the contract and model-local checks.
    Valid,
    /// SemanticModel: every source resolved to a table or view with the named columns.
    SourcesResolved,
    /// SemanticModel: the accepted associations still match their sources.
    SourcesCurrent,
    /// Catalog: the external system answers.
    Reachable,
    /// Catalog: every declared registration names an existing object.
    RegistrationsCurrent,
    /// kstatus: present (True) only while `Ready` waits on something that may still arrive.
    Reconciling,
    /// kstatus: present (True) only while `Ready` is False for a reason a person must fix.
    Stalled,
}

impl ConditionType {
    pub const ALL: [ConditionType; 8] = [
        ConditionType::Ready,
        ConditionType::Reconciling,
        ConditionType::Stalled,
        ConditionType::Valid,
        ConditionType::SourcesResolved,
        ConditionType::SourcesCurrent,
        ConditionType::Reachable,
        ConditionType::RegistrationsCurrent,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            ConditionType::Ready => "Ready",
            ConditionType::Valid => "Valid",
            ConditionType::SourcesResolved => "SourcesResolved",
            ConditionType::SourcesCurrent => "SourcesCurrent",
            ConditionType::Reachable => "Reachable",
            ConditionType::RegistrationsCurrent => "RegistrationsCurrent",
            ConditionType::Reconciling => "Reconciling",
            ConditionType::Stalled => "Stalled",
        }
    }
}

impl ConditionType {
    /// Which kinds carry it, and what it says.
    pub const fn doc(self) -> (&'static str, &'static str) {
        match self {
            ConditionType::Ready => (
                "SemanticModel, Catalog, ReconcilePolicy",
                "the summary: the object is usable as declared (`kubectl wait --for=condition=Ready`)",
            ),
            ConditionType::Valid => (
                "SemanticModel",
                "the definition passed the contract and model-local checks (levels 1-2 of [validation](design.md#validation-in-three-levels))",
            ),
            ConditionType::SourcesResolved => (
                "SemanticModel",
                "every source resolved live to a table or view with the named columns (level 3)",
            ),
            ConditionType::SourcesCurrent => (
                "SemanticModel",
                "the accepted associations still match their sources (drift, from check rounds)",
            ),
            ConditionType::Reachable => ("Catalog", "the external system answers"),
            ConditionType::RegistrationsCurrent => (
                "Catalog",
                "every declared registration names an existing object",
            ),
            ConditionType::Reconciling => (
                "SemanticModel, Catalog, ReconcilePolicy",
                "kstatus (Flux, kpt, cli-utils): present, True, only while `Ready` is not True for a reason that may clear on its own (a catalog not reachable or not found yet, a policy not created yet); carries `Ready`'s reason and message; kstatus reports InProgress",
            ),
            ConditionType::Stalled => (
                "SemanticModel, Catalog, ReconcilePolicy",
                "kstatus: present, True, only while `Ready` is False for a reason a person must fix (invalid spec, name conflict, refused credentials, a source that does not exist); carries `Ready`'s reason and message; kstatus reports Failed, so Flux fails fast instead of waiting out its timeout",
            ),
        }
    }
}

/// docs/conditions.md: every condition type and reason semops writes (generated by
/// `semops reference conditions`; a test fails when the committed file drifts).
pub fn reference() -> String {
    let mut out = String::from(
        "# Conditions and reasons\n\nGenerated by `semops reference conditions` (run `hack/generate`); do not edit by hand.\nEvery reason is also the Event reason of the flip it reports and the `reason` label of the\nerror metrics.\n\n## Condition types\n\n| type | kinds | meaning |\n| --- | --- | --- |\n",
    );
    for t in ConditionType::ALL {
        let (kinds, doc) = t.doc();
        out.push_str(&format!("| `{t}` | {kinds} | {doc} |\n"));
    }
    out.push_str("\n## Reasons\n\n| reason | meaning |\n| --- | --- |\n");
    for (text, doc) in Reason::DOCUMENTED {
        out.push_str(&format!("| `{text}` | {} |\n", doc.trim()));
    }
    out
}

impl fmt::Display for ConditionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A condition reason: one CamelCase word, also used as Event reason and metric label. Every
/// reason semops decides is a constant below; `Reason::kept` carries a reason read back from
/// a status written earlier (possibly by an older version) without inventing a new one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reason(Cow<'static, str>);

macro_rules! reasons {
    ($($(#[doc = $doc:literal])* $name:ident = $text:literal;)*) => {
        impl Reason {
            $($(#[doc = $doc])* pub const $name: Reason = Reason(Cow::Borrowed($text));)*

            /// Every reason semops decides, with its documentation (docs/conditions.md).
            pub const DOCUMENTED: &'static [(&'static str, &'static str)] = &[
                $(($text, concat!($($doc),*)),)*
            ];
        }
    };
}

reasons! {
    // SemanticModel
    /// Ready=True: the named revision passed all three validation levels and was committed.
    ACCEPTED = "Accepted";
    /// Valid=True: the definition passed the contract and model-local checks.
    VALID = "Valid";
    /// The spec nests deeper than semops decodes (64 levels); flatten the definition.
    SPEC_TOO_DEEP = "SpecTooDeep";
    /// Another model, created earlier, claims the same catalog.schema.name; rename or delete one.
    NAME_CONFLICT = "NameConflict";
    /// A catalog needed for resolution could not answer; acceptance waits and retries.
    CATALOG_UNREACHABLE = "CatalogUnreachable";
    /// SourcesResolved=True: every distinct source resolved.
    RESOLVED = "Resolved";
    /// SourcesCurrent=True: every association matches its source.
    CURRENT = "Current";
    /// SourcesCurrent=False: sources were renamed, replaced or dropped since acceptance; change spec.rebind to resolve again.
    SOURCE_DRIFT = "SourceDrift";
    /// A field is required and missing or empty.
    MISSING_VALUE = "MissingValue";
    /// A list that needs at least one entry is empty.
    EMPTY_LIST = "EmptyList";
    /// Two entries of one list share a name.
    DUPLICATE_NAME = "DuplicateName";
    /// A column list names the same column twice.
    DUPLICATE_COLUMN = "DuplicateColumn";
    /// A dataset source is not catalog.schema.object (Ossie quoting).
    INVALID_SOURCE = "InvalidSource";
    /// A relationship names a dataset this model does not have.
    UNKNOWN_DATASET = "UnknownDataset";
    /// fromColumns and toColumns differ in length.
    COLUMN_COUNT_MISMATCH = "ColumnCountMismatch";
    /// aiContext is neither a string nor an object.
    INVALID_AI_CONTEXT = "InvalidAiContext";
    /// A name holds characters semops refuses (control characters, invisible separators, NFC duplicates).
    INVALID_NAME = "InvalidName";
    /// A Catalog named by the model does not exist in its namespace (or is being deleted).
    CATALOG_NOT_FOUND = "CatalogNotFound";
    /// The home schema is not declared by the home Catalog.
    SCHEMA_NOT_FOUND = "SchemaNotFound";
    /// The object does not decode as the kind's schema (an older CRD admitted it).
    SCHEMA_MISMATCH = "SchemaMismatch";
    /// A source names no table or view in its catalog.
    SOURCE_NOT_FOUND = "SourceNotFound";
    /// A key or relationship column does not exist in its source.
    COLUMN_NOT_FOUND = "ColumnNotFound";
    /// A metric's renamedFrom names no metric of the accepted revision, names a metric still present, or is shared with another metric.
    INVALID_RENAME = "InvalidRename";
    /// A deprecated metric's replacement is not another metric of the model.
    UNKNOWN_REPLACEMENT = "UnknownReplacement";

    // Catalog
    /// Ready=True: configured; the message names the effective policy.
    CONFIGURED = "Configured";
    /// spec.reconcilePolicyRef names a policy that does not exist; periodic checks stay off.
    RECONCILE_POLICY_NOT_FOUND = "ReconcilePolicyNotFound";
    /// spec.registrations repeats an entry.
    DUPLICATE_REGISTRATION = "DuplicateRegistration";
    /// A managed catalog: nothing external to reach or probe.
    MANAGED = "Managed";
    /// Reachable=True: a connection was made and answered.
    CONNECTED = "Connected";
    /// The Catalog is being deleted and waits for the SemanticModels it hosts.
    DELETING = "Deleting";
    /// A Secret the Catalog names cannot be used for it: missing, not opted in (label `semops.io/catalog-credentials`), not allowing this Catalog, or without the keys (the message never says which).
    CREDENTIALS_INVALID = "CredentialsInvalid";
    /// The server could not be reached (connect failed, refused, DNS).
    UNREACHABLE = "Unreachable";
    /// The server refused the credentials.
    AUTH_FAILED = "AuthFailed";
    /// The account may not read what a probe needs; never taken as absence.
    PERMISSION_DENIED = "PermissionDenied";
    /// A connection or statement exceeded its deadline.
    TIMEOUT = "Timeout";
    /// The TLS handshake or certificate verification failed.
    TLS_FAILED = "TlsFailed";
    /// The server is shutting down, starting or out of connections.
    SERVER_UNAVAILABLE = "ServerUnavailable";
    /// The connection settings cannot work (bad database name, port, pool settings).
    MISCONFIGURED = "Misconfigured";
    /// The server answered something semops does not understand; never taken as absence.
    UNEXPECTED_REPLY = "UnexpectedReply";
    /// RegistrationsCurrent=True: every registration exists.
    ALL_LIVE = "AllLive";
    /// RegistrationsCurrent=Unknown: some registrations were not checked yet.
    NOT_CHECKED = "NotChecked";
    /// RegistrationsCurrent=False: registered objects were renamed; update the names in spec.
    RENAMED = "Renamed";
    /// RegistrationsCurrent=False: registrations name objects that no longer exist.
    STALE_REGISTRATIONS = "StaleRegistrations";
    /// RegistrationsCurrent=False: the policy removed entries that spec still lists; delete them from spec.
    REMOVED_ENTRIES_IN_SPEC = "RemovedEntriesInSpec";
    /// RegistrationsCurrent=False: registrations name objects the catalog cannot have (too long, forbidden characters).
    INVALID_REGISTRATIONS = "InvalidRegistrations";
    /// RegistrationsCurrent=False: the catalog answers as another server or database than the registrations were recorded on; nothing changes until `semops.io/accept-server` names it.
    CATALOG_CHANGED = "CatalogChanged";
    /// Reachable=True over a channel that may carry the password in clear (sslMode disable or prefer, written explicitly).
    INSECURE_TRANSPORT = "InsecureTransport";
    /// The server asked for the password in clear text (or as MD5 over an unencrypted channel); refused.
    INSECURE_AUTH_REFUSED = "InsecureAuthRefused";
    /// A destination of the Catalog is not one semops connects to: outside the operator's `--allowed-catalog-hosts`, or loopback, link-local (cloud metadata) or a kubelet port without an address entry naming it.
    HOST_NOT_ALLOWED = "HostNotAllowed";
    /// A Secret's annotation `semops.io/allowed-hosts` does not name a destination that would receive its values (database host, Kafka bootstrap server, Iceberg uri or OAuth2 token endpoint); nothing is sent.
    CREDENTIALS_NOT_FOR_HOST = "CredentialsNotForHost";

    // ReconcilePolicy
    /// The policy's spec has a value the controller refuses (the message names the field).
    INVALID_SPEC = "InvalidSpec";
    /// Another policy at the same level selects the same Catalog; the alphabetically first wins.
    OVERLAP = "Overlap";

    // Event reasons of check rounds (reported by semops-reconciler)
    /// Event: a registration's object no longer exists (once per transition to Stale).
    STALE_REGISTRATION = "StaleRegistration";
    /// Event: a registered object was renamed; its metadata is kept.
    REGISTRATION_RENAMED = "RegistrationRenamed";
    /// Event: a registered name now belongs to a different object (dropped and recreated).
    REGISTRATION_REPLACED = "RegistrationReplaced";
    /// Event: AutoRemove withdrew a registration whose object was dropped.
    REGISTRATION_REMOVED = "RegistrationRemoved";
    /// Event: a removed registration's object exists again and registers as new.
    REGISTRATION_RESTORED = "RegistrationRestored";
    /// Event: more registration changes in one round than Events are published for.
    CHECK_ROUND_SUMMARY = "CheckRoundSummary";
    /// Event: a registration names an object this catalog cannot have.
    INVALID_REGISTRATION = "InvalidRegistration";
    /// Event: the catalog answers as another server; every registration was found there (or it was accepted), so its ids were re-recorded.
    SERVER_ADOPTED = "ServerAdopted";
}

impl Reason {
    /// Whether `Ready=False` for this reason may clear without anyone changing anything: it waits
    /// on a server that may answer or an object that may still be created (Flux applies a
    /// Catalog and its models together). Every other `Ready=False` reason needs a person.
    pub fn waits(&self) -> bool {
        [
            Reason::CATALOG_UNREACHABLE,
            Reason::CATALOG_NOT_FOUND,
            Reason::SCHEMA_NOT_FOUND,
            Reason::RECONCILE_POLICY_NOT_FOUND,
            Reason::UNREACHABLE,
            Reason::TIMEOUT,
            Reason::SERVER_UNAVAILABLE,
            Reason::DELETING,
            Reason::NOT_CHECKED,
        ]
        .contains(self)
    }

    /// Reasons that warn although their condition is True (the Event is a Warning).
    pub fn warns_when_true(&self) -> bool {
        *self == Reason::INSECURE_TRANSPORT
    }

    /// A reason read back from an existing condition (kept as it was).
    pub fn kept(text: &str) -> Reason {
        Reason::DOCUMENTED
            .iter()
            .find(|(known, _)| *known == text)
            .map(|(known, _)| Reason(Cow::Borrowed(*known)))
            .unwrap_or_else(|| Reason(Cow::Owned(text.to_string())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// As a condition holds it: a documented reason is borrowed from the binary, never copied.
    fn to_smol_str(&self) -> SmolStr {
        match &self.0 {
            Cow::Borrowed(known) => SmolStr::new_static(known),
            Cow::Owned(text) => SmolStr::new(text),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for Reason {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// Tri-state condition status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    True,
    False,
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }
    pub fn from_bool(b: bool) -> Self {
        if b { Status::True } else { Status::False }
    }
    /// The status of a condition read back from the API ("True", "False", anything else).
    pub fn parse(text: &str) -> Self {
        match text {
            "True" => Status::True,
            "False" => Status::False,
            _ => Status::Unknown,
        }
    }
}

/// A condition as a controller decides it, before timestamps are attached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    pub type_: ConditionType,
    pub status: Status,
    pub reason: Reason,
    pub message: String,
}

impl Desired {
    pub fn new(
        type_: ConditionType,
        status: Status,
        reason: Reason,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            status,
            reason,
            message: message.into(),
        }
    }

    /// The same verdict under another condition type (e.g. Ready mirroring Reachable).
    pub fn as_type(&self, type_: ConditionType) -> Desired {
        Desired {
            type_,
            ..self.clone()
        }
    }

    /// A condition of `type_` carried forward from `conditions` unchanged (so merge keeps its
    /// transition time); `None` when there is none.
    pub fn kept(conditions: &[Condition], type_: ConditionType) -> Option<Desired> {
        find(conditions, type_).map(|c| Desired {
            type_,
            status: Status::parse(&c.status),
            reason: Reason::kept(&c.reason),
            message: c.message.to_string(),
        })
    }
}

/// The kstatus condition that `Ready` implies: none while it holds, `Stalled` when a person must
/// act, `Reconciling` otherwise (False for a reason that waits, or Unknown). Derived rather than
/// decided by each controller so the three kinds cannot disagree with their own `Ready`.
pub fn kstatus_of(ready: &Desired) -> Option<Desired> {
    let type_ = match ready.status {
        Status::True => return None,
        Status::False if !ready.reason.waits() => ConditionType::Stalled,
        Status::False | Status::Unknown => ConditionType::Reconciling,
    };
    Some(Desired::new(
        type_,
        Status::True,
        ready.reason.clone(),
        ready.message.clone(),
    ))
}

/// Builds the new condition list from the desired ones, keeping each previous
/// `lastTransitionTime` when the status did not flip. Order follows `desired`; a `Ready` is
/// followed by the kstatus condition it implies (`kstatus_of`).
pub fn merge(
    previous: &[Condition],
    desired: Vec<Desired>,
    generation: Option<i64>,
    now: &Time,
) -> Vec<Condition> {
    desired
        .into_iter()
        .flat_map(|d| {
            let implied = (d.type_ == ConditionType::Ready)
                .then(|| kstatus_of(&d))
                .flatten();
            std::iter::once(d).chain(implied)
        })
        .map(|d| {
            let old = find(previous, d.type_);
            let last_transition_time = match old {
                Some(c) if c.status == d.status.as_str() => c.last_transition_time.clone(),
                _ => now.clone(),
            };
            Condition {
                type_: SmolStr::new_static(d.type_.as_str()),
                status: SmolStr::new_static(d.status.as_str()),
                reason: d.reason.to_smol_str(),
                message: shared_text(&d.message),
                observed_generation: generation,
                last_transition_time,
            }
        })
        .collect()
}

/// Conditions of `previous` whose types semops does not own (another writer's), kept as they are.
/// Owning `Ready` owns the kstatus conditions it implies.
pub fn foreign(previous: &[Condition], owned: &[ConditionType]) -> Vec<Condition> {
    let implied: &[ConditionType] = if owned.contains(&ConditionType::Ready) {
        &[ConditionType::Reconciling, ConditionType::Stalled]
    } else {
        &[]
    };
    previous
        .iter()
        .filter(|c| !owned.iter().chain(implied).any(|t| t.as_str() == c.type_))
        .cloned()
        .collect()
}

/// The condition of `type_`, if present.
pub fn find(conditions: &[Condition], type_: ConditionType) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == type_.as_str())
}

/// Whether the condition of `type_` is present with status True.
pub fn is_true(conditions: &[Condition], type_: ConditionType) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}

/// Whether `after` differs from `before` in status or reason: the change worth an Event.
pub fn flipped(before: Option<&Condition>, after: &Condition) -> bool {
    before.is_none_or(|b| b.status != after.status || b.reason != after.reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    type UpstreamCondition = k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    proptest::proptest! {
        /// Any condition object (fields present or absent, short or long texts) decodes to the
        /// same thing as `meta/v1` Condition and encodes back to the same JSON, or is refused
        /// by both: the wire form did not change with the compact type.
        #[test]
        fn wire_form_is_meta_v1_conditions(
            texts in proptest::collection::vec(proptest::option::of("[ -~]{0,40}|é{0,30}"), 4),
            generation in proptest::option::of(proptest::num::i64::ANY),
            with_time in proptest::bool::ANY,
        ) {
            let mut object = serde_json::Map::new();
            for (key, text) in ["type", "status", "reason", "message"].iter().zip(&texts) {
                if let Some(text) = text {
                    object.insert(key.to_string(), text.clone().into());
                }
            }
            if let Some(g) = generation {
                object.insert("observedGeneration".into(), g.into());
            }
            if with_time {
                object.insert("lastTransitionTime".into(), "2026-12-03T06:00:00Z".into());
            }
            let json = serde_json::Value::Object(object);
            let ours = serde_json::from_value::<Condition>(json.clone());
            let upstream = serde_json::from_value::<UpstreamCondition>(json);
            match (ours, upstream) {
                (Ok(ours), Ok(upstream)) => proptest::prop_assert_eq!(
                    serde_json::to_string(&ours).unwrap(),
                    serde_json::to_string(&upstream).unwrap()
                ),
                (Err(_), Err(_)) => {}
                (ours, upstream) => proptest::prop_assert!(false, "ours {ours:?}, meta/v1 {upstream:?}"),
            }
        }

        /// A text is kept exactly, decoded or built; a long one is one copy however often it
        /// comes, until the bounded set starts over.
        #[test]
        fn shared_texts_keep_the_text_and_share_long_ones(
            texts in proptest::collection::vec("[ -~]{0,40}", 1..20),
            picks in proptest::collection::vec(0..12usize, 1..60),
        ) {
            for text in &texts {
                let decoded: Condition = serde_json::from_value(serde_json::json!({
                    "lastTransitionTime": "2026-12-03T06:00:00Z", "message": text,
                })).unwrap();
                proptest::prop_assert_eq!(decoded.message.as_str(), text.as_str());
                proptest::prop_assert_eq!(shared_text(text), text.as_str());
            }
            // Against a model of the set: the texts held since the last start-over.
            // Twelve texts, two thirds of them long, picked again and again.
            let pool: Vec<String> = (0..12)
                .map(|i| if i % 3 == 0 { format!("short {i}") } else { format!("a long condition message, number {i}") })
                .collect();
            let set = SharedTexts::new(8);
            let mut model: std::collections::HashMap<&str, *const u8> = Default::default();
            for text in picks.iter().map(|&i| &pool[i]) {
                let got = set.share(text, || SmolStr::new(text));
                proptest::prop_assert_eq!(got.as_str(), text.as_str());
                if text.len() > INLINE_MAX {
                    if let Some(first) = model.get(text.as_str()) {
                        proptest::prop_assert_eq!(*first, got.as_ptr(), "one copy of {}", text);
                    } else {
                        if model.len() >= 8 {
                            model.clear();
                        }
                        model.insert(text, got.as_ptr());
                    }
                }
                proptest::prop_assert_eq!(set.texts.lock().unwrap().len(), model.len());
            }
        }
    }

    #[test]
    fn the_committed_condition_reference_matches_the_code() {
        assert!(
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/conditions.md"))
                .unwrap()
                == reference(),
            "docs/conditions.md is stale; run hack/generate"
        );
    }

    #[test]
    fn schema_is_meta_v1_conditions() {
        let mut generator = schemars::SchemaGenerator::default();
        assert_eq!(
            <Condition as schemars::JsonSchema>::json_schema(&mut generator),
            <UpstreamCondition as schemars::JsonSchema>::json_schema(&mut generator)
        );
    }

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn transition_time_is_kept_while_status_holds_and_moves_on_a_flip() {
        let first = merge(
            &[],
            vec![Desired::new(
                ConditionType::Ready,
                Status::False,
                Reason::INVALID_SOURCE,
                "x",
            )],
            Some(1),
            &at(10),
        );
        assert_eq!(first[0].last_transition_time, at(10));

        let same_status_new_reason = merge(
            &first,
            vec![Desired::new(
                ConditionType::Ready,
                Status::False,
                Reason::NAME_CONFLICT,
                "y",
            )],
            Some(2),
            &at(20),
        );
        assert_eq!(same_status_new_reason[0].last_transition_time, at(10));
        assert_eq!(same_status_new_reason[0].reason, "NameConflict");
        assert_eq!(same_status_new_reason[0].observed_generation, Some(2));

        let flipped = merge(
            &same_status_new_reason,
            vec![Desired::new(
                ConditionType::Ready,
                Status::True,
                Reason::ACCEPTED,
                "",
            )],
            Some(2),
            &at(30),
        );
        assert_eq!(flipped[0].last_transition_time, at(30));
    }

    #[test]
    fn unchanged_desired_conditions_reproduce_the_previous_list_exactly() {
        let desired = || {
            vec![
                Desired::new(ConditionType::Ready, Status::True, Reason::ACCEPTED, "ok"),
                Desired::new(ConditionType::Valid, Status::True, Reason::VALID, ""),
            ]
        };
        let first = merge(&[], desired(), Some(3), &at(10));
        let again = merge(&first, desired(), Some(3), &at(99));
        assert_eq!(first, again);
    }

    #[test]
    fn a_kept_condition_merges_back_to_itself_even_with_a_reason_no_longer_decided() {
        let old = vec![Condition {
            type_: "SourcesCurrent".into(),
            status: "False".into(),
            reason: "SomethingAnOlderVersionWrote".into(),
            message: "m".into(),
            observed_generation: Some(1),
            last_transition_time: at(5),
        }];
        let kept = Desired::kept(&old, ConditionType::SourcesCurrent).unwrap();
        assert_eq!(merge(&old, vec![kept], Some(1), &at(50)), old);
        assert!(Desired::kept(&old, ConditionType::Ready).is_none());
    }

    #[test]
    fn reasons_are_distinct_camel_case_words_and_all_documented() {
        let mut seen = std::collections::HashSet::new();
        for (text, doc) in Reason::DOCUMENTED {
            assert!(seen.insert(*text), "{text} twice");
            assert!(
                text.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                    && text.chars().all(|c| c.is_ascii_alphanumeric()),
                "{text} is not CamelCase"
            );
            assert!(!doc.trim().is_empty(), "{text} has no documentation");
        }
        assert_eq!(Reason::kept("Accepted"), Reason::ACCEPTED);
    }

    fn types_of(conditions: &[Condition]) -> Vec<(&str, &str, &str)> {
        conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
            .collect()
    }

    #[test]
    fn ready_implies_stalled_for_what_a_person_must_fix_and_reconciling_for_what_waits() {
        let cases: Vec<(Status, Reason, Option<&str>)> = vec![
            (Status::True, Reason::ACCEPTED, None),
            (Status::True, Reason::CONFIGURED, None),
            (Status::False, Reason::INVALID_SOURCE, Some("Stalled")),
            (Status::False, Reason::NAME_CONFLICT, Some("Stalled")),
            (Status::False, Reason::AUTH_FAILED, Some("Stalled")),
            (Status::False, Reason::CREDENTIALS_INVALID, Some("Stalled")),
            (
                Status::False,
                Reason::CREDENTIALS_NOT_FOR_HOST,
                Some("Stalled"),
            ),
            (Status::False, Reason::HOST_NOT_ALLOWED, Some("Stalled")),
            (Status::False, Reason::SOURCE_NOT_FOUND, Some("Stalled")),
            (Status::False, Reason::INVALID_SPEC, Some("Stalled")),
            (Status::False, Reason::OVERLAP, Some("Stalled")),
            (
                Status::False,
                Reason::CATALOG_UNREACHABLE,
                Some("Reconciling"),
            ),
            (
                Status::False,
                Reason::CATALOG_NOT_FOUND,
                Some("Reconciling"),
            ),
            (Status::False, Reason::SCHEMA_NOT_FOUND, Some("Reconciling")),
            (
                Status::False,
                Reason::RECONCILE_POLICY_NOT_FOUND,
                Some("Reconciling"),
            ),
            (Status::False, Reason::UNREACHABLE, Some("Reconciling")),
            (Status::False, Reason::TIMEOUT, Some("Reconciling")),
            (Status::False, Reason::DELETING, Some("Reconciling")),
            (Status::Unknown, Reason::INVALID_SOURCE, Some("Reconciling")),
        ];
        for (status, reason, want) in cases {
            let ready = Desired::new(ConditionType::Ready, status, reason.clone(), "why");
            let got = kstatus_of(&ready);
            assert_eq!(
                got.as_ref().map(|d| d.type_.as_str()),
                want,
                "{status:?} {reason}"
            );
            if let Some(d) = got {
                assert_eq!(
                    (d.status, d.reason, d.message.as_str()),
                    (Status::True, reason, "why")
                );
            }
        }
    }

    #[test]
    fn merge_places_the_implied_condition_after_ready_and_drops_it_when_ready_holds() {
        let ready = |status, reason: Reason| {
            vec![
                Desired::new(ConditionType::Ready, status, reason, "m"),
                Desired::new(ConditionType::Valid, Status::True, Reason::VALID, ""),
            ]
        };
        let stalled = merge(
            &[],
            ready(Status::False, Reason::NAME_CONFLICT),
            Some(1),
            &at(10),
        );
        assert_eq!(
            types_of(&stalled),
            vec![
                ("Ready", "False", "NameConflict"),
                ("Stalled", "True", "NameConflict"),
                ("Valid", "True", "Valid"),
            ]
        );
        // Still stalled for another reason: the transition time stays.
        let again = merge(
            &stalled,
            ready(Status::False, Reason::INVALID_NAME),
            Some(2),
            &at(20),
        );
        assert_eq!(again[1].last_transition_time, at(10));
        assert_eq!(again[1].reason, "InvalidName");
        // Now waiting on a server: Stalled is gone, Reconciling starts now.
        let waiting = merge(
            &again,
            ready(Status::False, Reason::CATALOG_UNREACHABLE),
            Some(2),
            &at(30),
        );
        assert_eq!(
            types_of(&waiting)[..2],
            [
                ("Ready", "False", "CatalogUnreachable"),
                ("Reconciling", "True", "CatalogUnreachable"),
            ]
        );
        assert_eq!(waiting[1].last_transition_time, at(30));
        // Ready: neither kstatus condition remains.
        let done = merge(
            &waiting,
            ready(Status::True, Reason::ACCEPTED),
            Some(2),
            &at(40),
        );
        assert_eq!(
            types_of(&done),
            vec![("Ready", "True", "Accepted"), ("Valid", "True", "Valid")]
        );
    }

    #[test]
    fn owning_ready_owns_the_kstatus_conditions_it_implies() {
        let previous = merge(
            &[],
            vec![
                Desired::new(ConditionType::Ready, Status::False, Reason::AUTH_FAILED, ""),
                Desired::new(
                    ConditionType::Reachable,
                    Status::False,
                    Reason::AUTH_FAILED,
                    "",
                ),
            ],
            None,
            &at(1),
        );
        let mut theirs = previous.clone();
        theirs.push(Condition {
            type_: "Synced".into(),
            status: "True".into(),
            reason: "X".into(),
            message: Default::default(),
            observed_generation: None,
            last_transition_time: at(1),
        });
        assert_eq!(
            types_of(&foreign(&theirs, &[ConditionType::Ready])),
            vec![
                ("Reachable", "False", "AuthFailed"),
                ("Synced", "True", "X")
            ]
        );
        assert_eq!(
            types_of(&foreign(&theirs, &[ConditionType::Reachable])),
            vec![
                ("Ready", "False", "AuthFailed"),
                ("Stalled", "True", "AuthFailed"),
                ("Synced", "True", "X"),
            ]
        );
    }

    #[test]
    fn a_status_reads_back_as_it_is_written_and_anything_else_is_unknown() {
        for status in [Status::True, Status::False, Status::Unknown] {
            assert_eq!(Status::parse(status.as_str()), status);
        }
        assert_eq!(Status::parse("true"), Status::Unknown);
        assert_eq!(Status::parse(""), Status::Unknown);
        assert_eq!(
            (Status::from_bool(true), Status::from_bool(false)),
            (Status::True, Status::False)
        );
        let written: Vec<_> = ConditionType::ALL.iter().map(|t| t.to_string()).collect();
        assert_eq!(
            written,
            [
                "Ready",
                "Reconciling",
                "Stalled",
                "Valid",
                "SourcesResolved",
                "SourcesCurrent",
                "Reachable",
                "RegistrationsCurrent"
            ]
        );
    }

    #[test]
    fn a_reason_compares_prints_and_holds_its_text() {
        let kept = Reason::kept("SomethingAnOlderVersionWrote");
        for reason in [Reason::SOURCE_DRIFT, kept] {
            let text = reason.as_str().to_string();
            assert!(reason == *text.as_str() && reason == text.as_str());
            assert!(reason != *"Other" && reason != "Other");
            assert_eq!(reason.to_string(), text);
            assert_eq!(reason.to_smol_str(), text.as_str());
        }
        let warning: Vec<_> = Reason::DOCUMENTED
            .iter()
            .filter(|(text, _)| Reason::kept(text).warns_when_true())
            .map(|(text, _)| *text)
            .collect();
        assert_eq!(warning, ["InsecureTransport"]);
    }

    #[test]
    fn a_verdict_under_another_type_keeps_status_reason_and_message() {
        let reachable = Desired::new(
            ConditionType::Reachable,
            Status::False,
            Reason::TIMEOUT,
            "took too long",
        );
        assert_eq!(
            reachable.as_type(ConditionType::Ready),
            Desired::new(
                ConditionType::Ready,
                Status::False,
                Reason::TIMEOUT,
                "took too long"
            )
        );
    }

    #[test]
    fn is_true_needs_the_type_present_with_status_true() {
        let list = merge(
            &[],
            vec![
                Desired::new(ConditionType::Valid, Status::True, Reason::VALID, ""),
                Desired::new(
                    ConditionType::SourcesResolved,
                    Status::Unknown,
                    Reason::CATALOG_UNREACHABLE,
                    "",
                ),
            ],
            None,
            &at(1),
        );
        assert!(is_true(&list, ConditionType::Valid));
        assert!(!is_true(&list, ConditionType::SourcesResolved));
        assert!(!is_true(&list, ConditionType::Ready));
        assert_eq!(
            find(&list, ConditionType::SourcesResolved).map(|c| c.reason.as_str()),
            Some("CatalogUnreachable")
        );
    }

    /// `SmolStr` holds up to 23 bytes inline: those are never put in the shared set; from 24
    /// bytes on, a text is held once.
    #[test]
    fn only_texts_longer_than_the_inline_limit_are_held() {
        let set = SharedTexts::new(8);
        let inline = "x".repeat(INLINE_MAX);
        let long = "x".repeat(INLINE_MAX + 1);
        set.share(&inline, || SmolStr::new(&inline));
        assert_eq!(set.texts.lock().unwrap().len(), 0);
        let first = set.share(&long, || SmolStr::new(&long));
        let again = set.share(&long, || SmolStr::new(&long));
        assert_eq!(set.texts.lock().unwrap().len(), 1);
        assert_eq!(first.as_ptr(), again.as_ptr());
    }

    #[test]
    fn a_flip_is_a_change_of_status_or_reason_not_of_message() {
        let c = |status: &str, reason: &str, message: &str| Condition {
            type_: "Ready".into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: None,
            last_transition_time: at(1),
        };
        assert!(flipped(None, &c("True", "A", "")));
        assert!(flipped(Some(&c("True", "A", "")), &c("False", "A", "")));
        assert!(flipped(Some(&c("False", "A", "")), &c("False", "B", "")));
        assert!(!flipped(Some(&c("False", "A", "x")), &c("False", "A", "y")));
    }
}
