//! Authentication (TokenReview) and authorization (SubjectAccessReview), each cached briefly in
//! a bounded map; `--api-auth=none` allows everything for local use. A review that errors fails
//! closed: the request (or, for per-model checks, the model) is refused.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};
use sha2::{Digest, Sha256};

/// How long a review answer is reused.
pub const CACHE_TTL: Duration = Duration::from_secs(10);
/// Most answers kept per cache; the map is cleared when full (reviews are cheap to redo).
pub const CACHE_LIMIT: usize = 10_000;

/// A bounded map with a time-to-live per entry.
pub struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
    ttl: Duration,
    limit: usize,
}

impl<K: std::hash::Hash + Eq, V: Clone> TtlCache<K, V> {
    fn new() -> Self {
        Self::with(CACHE_TTL, CACHE_LIMIT)
    }
    fn with(ttl: Duration, limit: usize) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            ttl,
            limit,
        }
    }
    fn get(&self, k: &K) -> Option<V> {
        self.get_at(k, Instant::now())
    }
    /// The answer for `k` if it is younger than the TTL at `now`.
    fn get_at(&self, k: &K, now: Instant) -> Option<V> {
        let map = self.entries.lock().expect("cache poisoned");
        map.get(k)
            .filter(|(_, at)| now.saturating_duration_since(*at) < self.ttl)
            .map(|(v, _)| v.clone())
    }
    fn put(&self, k: K, v: V) {
        self.put_at(k, v, Instant::now());
    }
    fn put_at(&self, k: K, v: V, now: Instant) {
        let mut map = self.entries.lock().expect("cache poisoned");
        if map.len() >= self.limit {
            map.retain(|_, (_, at)| now.saturating_duration_since(*at) < self.ttl);
            if map.len() >= self.limit {
                map.clear();
            }
        }
        map.insert(k, (v, now));
    }
}

/// Who is asking.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Caller {
    pub username: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    /// The authenticator's extra attributes (scopes, the node a ServiceAccount token is bound
    /// to, …): passed on in every SubjectAccessReview, since authorizers and webhooks decide on
    /// them.
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

/// TokenReviews in flight at once; more wait up to [`REVIEW_WAIT`], then get 503.
pub const REVIEWS_IN_FLIGHT: usize = 16;
pub const REVIEW_WAIT: Duration = Duration::from_secs(2);

/// The Kubernetes-backed reviewer with its caches.
pub struct KubeAuth {
    /// Its own client (own connection pool), never the one that renews the Lease: a flood of
    /// reviews cannot delay a renewal.
    client: Client,
    /// Audiences a bearer token must be issued for (`semops` by default): a token made for the
    /// API server is refused here, and one made for semops is useless against the API server.
    audiences: Vec<String>,
    reviews: tokio::sync::Semaphore,
    failures: PeerFailures,
    /// Tokens seen valid lately (by hash): still reviewed from a peer over its failure limit,
    /// so users behind one address (a NAT) keep working while an attacker there is refused.
    known_valid: TtlCache<[u8; 32], ()>,
    /// Valid and invalid tokens alike (by hash): a repeated random token costs one review.
    tokens: TtlCache<[u8; 32], Option<Caller>>,
    decisions: TtlCache<(Caller, String, String, String), bool>,
}

/// Failed TokenReviews a peer may cause per [`FAILURE_WINDOW`] before it is refused without
/// one (429) until the window ends; tokens already known valid are still served.
pub const FAILURES_PER_PEER: u32 = 50;
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// How long a token once valid is still reviewed from a peer over its failure limit.
pub const KNOWN_VALID_FOR: Duration = Duration::from_secs(600);
const PEERS_KEPT: usize = 10_000;

/// Failed reviews per peer in fixed windows.
#[derive(Default)]
pub struct PeerFailures {
    peers: Mutex<HashMap<std::net::IpAddr, (Instant, u32)>>,
}

impl PeerFailures {
    /// Whether `peer` used up its failures in the current window at `now`.
    pub fn blocked_at(&self, peer: std::net::IpAddr, now: Instant) -> bool {
        let peers = self.peers.lock().expect("failures poisoned");
        peers.get(&peer).is_some_and(|(start, n)| {
            now.saturating_duration_since(*start) < FAILURE_WINDOW && *n >= FAILURES_PER_PEER
        })
    }

    /// Counts one failed review of `peer` at `now`.
    pub fn fail_at(&self, peer: std::net::IpAddr, now: Instant) {
        let mut peers = self.peers.lock().expect("failures poisoned");
        if peers.len() >= PEERS_KEPT && !peers.contains_key(&peer) {
            peers.retain(|_, (start, _)| now.saturating_duration_since(*start) < FAILURE_WINDOW);
            if peers.len() >= PEERS_KEPT {
                peers.clear();
            }
        }
        let entry = peers.entry(peer).or_insert((now, 0));
        if now.saturating_duration_since(entry.0) >= FAILURE_WINDOW {
            *entry = (now, 0);
        }
        entry.1 += 1;
    }
}

/// Why a caller could not be established.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("too many token reviews in flight")]
    Busy,
    #[error("too many failed token reviews from this peer")]
    TooManyFailures,
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

pub enum Auth {
    /// `--api-auth=none`: every request is allowed (local use only).
    None,
    Kubernetes(Box<KubeAuth>),
}

impl Auth {
    /// `audiences`: what a token must be issued for; empty means the API server's own.
    pub fn kubernetes(client: Client, audiences: Vec<String>) -> Self {
        Auth::Kubernetes(Box::new(KubeAuth {
            client,
            audiences,
            reviews: tokio::sync::Semaphore::new(REVIEWS_IN_FLIGHT),
            failures: PeerFailures::default(),
            known_valid: TtlCache::with(KNOWN_VALID_FOR, CACHE_LIMIT),
            tokens: TtlCache::new(),
            decisions: TtlCache::new(),
        }))
    }

    /// The caller of a bearer token; `Ok(None)` when the token is missing or not valid.
    /// `peer`: the connection's address; a peer with too many failed reviews is refused
    /// without one for a while (tokens already known valid still pass).
    pub async fn authenticate(
        &self,
        bearer: Option<&str>,
        peer: Option<std::net::IpAddr>,
    ) -> Result<Option<Caller>, AuthError> {
        let Auth::Kubernetes(k) = self else {
            return Ok(Some(Caller {
                username: "anonymous".into(),
                uid: None,
                groups: vec![],
                extra: Default::default(),
            }));
        };
        let (client, tokens) = (&k.client, &k.tokens);
        let Some(token) = bearer.filter(|t| !t.is_empty()) else {
            return Ok(None);
        };
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(hit) = tokens.get(&key) {
            return Ok(hit);
        }
        if let Some(p) = peer
            && k.failures.blocked_at(p, Instant::now())
            && k.known_valid.get(&key).is_none()
        {
            return Err(AuthError::TooManyFailures);
        }
        let Ok(Ok(_permit)) = tokio::time::timeout(REVIEW_WAIT, k.reviews.acquire()).await else {
            return Err(AuthError::Busy);
        };
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: (!k.audiences.is_empty()).then(|| k.audiences.clone()),
            },
            ..Default::default()
        };
        let api: Api<TokenReview> = Api::all(client.clone());
        let answer = api.create(&PostParams::default(), &review).await?;
        let audiences = &k.audiences;
        let caller = answer
            .status
            .filter(|s| s.authenticated == Some(true))
            // The API server says which of our audiences the token is for; none is a refusal.
            .filter(|s| {
                audiences.is_empty()
                    || s.audiences
                        .as_ref()
                        .is_some_and(|a| a.iter().any(|x| audiences.contains(x)))
            })
            .and_then(|s| s.user)
            .map(|u: UserInfo| Caller {
                username: u.username.unwrap_or_default(),
                uid: u.uid,
                groups: u.groups.unwrap_or_default(),
                extra: u.extra.unwrap_or_default(),
            });
        tokens.put(key, caller.clone());
        match (&caller, peer) {
            (Some(_), _) => k.known_valid.put(key, ()),
            (None, Some(p)) => k.failures.fail_at(p, Instant::now()),
            (None, None) => {}
        }
        Ok(caller)
    }

    /// Whether `caller` may `get` `resource/name` of group semops.io in `namespace`.
    pub async fn may_get(
        &self,
        caller: &Caller,
        namespace: &str,
        resource: &str,
        name: &str,
    ) -> Result<bool, kube::Error> {
        self.may(caller, "get", namespace, resource, name).await
    }

    /// Whether `caller` may `verb` `resource/name` of group semops.io in `namespace`; `resource`
    /// may name a subresource (`catalogs/reconcile`).
    pub async fn may(
        &self,
        caller: &Caller,
        verb: &str,
        namespace: &str,
        resource: &str,
        name: &str,
    ) -> Result<bool, kube::Error> {
        let Auth::Kubernetes(k) = self else {
            return Ok(true);
        };
        let key = (
            caller.clone(),
            namespace.to_string(),
            format!("{verb} {resource}"),
            name.to_string(),
        );
        let (resource, subresource) = match resource.split_once('/') {
            Some((r, sub)) => (r, Some(sub.to_string())),
            None => (resource, None),
        };
        let attributes = ResourceAttributes {
            namespace: Some(namespace.to_string()),
            verb: Some(verb.into()),
            group: Some("semops.io".into()),
            resource: Some(resource.to_string()),
            subresource,
            // No name: the namespace-wide question ("every model here?").
            name: (!name.is_empty()).then(|| name.to_string()),
            ..Default::default()
        };
        k.decide(key, caller, Some(attributes), None).await
    }
}

impl KubeAuth {
    /// One SubjectAccessReview for `caller` about a resource or a non-resource URL, answered
    /// from the decision cache when it can be.
    async fn decide(
        &self,
        key: (Caller, String, String, String),
        caller: &Caller,
        resource: Option<ResourceAttributes>,
        non_resource: Option<k8s_openapi::api::authorization::v1::NonResourceAttributes>,
    ) -> Result<bool, kube::Error> {
        if let Some(hit) = self.decisions.get(&key) {
            return Ok(hit);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(caller.username.clone()),
                uid: caller.uid.clone(),
                groups: Some(caller.groups.clone()),
                extra: (!caller.extra.is_empty()).then(|| caller.extra.clone()),
                resource_attributes: resource,
                non_resource_attributes: non_resource,
            },
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let allowed = api
            .create(&PostParams::default(), &review)
            .await?
            .status
            .is_some_and(|s| s.allowed);
        self.decisions.put(key, allowed);
        Ok(allowed)
    }
}

impl Auth {
    /// Whether `caller` may `verb` the non-resource URL `path` (`get /metrics`: the
    /// kube-rbac-proxy convention, granted by a ClusterRole with `nonResourceURLs`).
    pub async fn may_non_resource(
        &self,
        caller: &Caller,
        verb: &str,
        path: &str,
    ) -> Result<bool, kube::Error> {
        let Auth::Kubernetes(k) = self else {
            return Ok(true);
        };
        let key = (
            caller.clone(),
            String::new(),
            format!("{verb} {path}"),
            "(non-resource)".to_string(),
        );
        let attributes = k8s_openapi::api::authorization::v1::NonResourceAttributes {
            path: Some(path.to_string()),
            verb: Some(verb.to_string()),
        };
        k.decide(key, caller, None, Some(attributes)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_users_extra_goes_from_the_token_review_into_every_access_review() {
        use serde_json::json;
        let review = |extra: serde_json::Value| {
            (
                201,
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {},
                    "status": {"authenticated": true, "audiences": ["semops"],
                        "user": {"username": "alice", "groups": ["team-a"], "extra": extra}}}),
            )
        };
        let allowed = (
            201,
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {}, "status": {"allowed": true}}),
        );
        let (client, seen) = crate::mock_api::client(vec![
            review(json!({"scopes": ["read"], "authentication.kubernetes.io/node-name": ["n1"]})),
            allowed.clone(),
        ]);
        let auth = Auth::kubernetes(client, vec!["semops".into()]);
        let caller = auth.authenticate(Some("t"), None).await.unwrap().unwrap();
        assert_eq!(caller.extra["scopes"], ["read"]);
        assert!(
            auth.may_get(&caller, "ns", "semanticmodels", "m")
                .await
                .unwrap()
        );
        let seen = seen.seen();
        assert_eq!(seen.len(), 2);
        assert!(
            seen[1]
                .path
                .starts_with("/apis/authorization.k8s.io/v1/subjectaccessreviews")
        );
        assert_eq!(
            seen[1].body["spec"]["extra"],
            json!({"scopes": ["read"], "authentication.kubernetes.io/node-name": ["n1"]})
        );
        assert_eq!(seen[1].body["spec"]["user"], "alice");

        // Without extra attributes the review carries none (not an empty map).
        let (client, seen) = crate::mock_api::client(vec![review(json!(null)), allowed]);
        let auth = Auth::kubernetes(client, vec!["semops".into()]);
        let caller = auth.authenticate(Some("t"), None).await.unwrap().unwrap();
        assert!(
            auth.may_get(&caller, "ns", "semanticmodels", "m")
                .await
                .unwrap()
        );
        assert!(seen.seen()[1].body["spec"].get("extra").is_none());
    }

    #[test]
    fn a_cached_answer_is_served_until_its_ttl_and_never_after() {
        let c: TtlCache<u32, bool> = TtlCache::with(Duration::from_secs(10), 100);
        let t0 = Instant::now();
        c.put_at(1, true, t0);
        assert_eq!(c.get_at(&1, t0), Some(true));
        assert_eq!(c.get_at(&1, t0 + Duration::from_millis(9_999)), Some(true));
        assert_eq!(c.get_at(&1, t0 + Duration::from_secs(10)), None, "expired");
        assert_eq!(c.get_at(&2, t0), None);
    }

    #[test]
    fn a_peer_is_refused_after_its_failures_until_the_window_ends_and_others_are_not() {
        let f = PeerFailures::default();
        let (a, b): (std::net::IpAddr, std::net::IpAddr) =
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t0 = Instant::now();
        for i in 0..FAILURES_PER_PEER {
            assert!(!f.blocked_at(a, t0), "after {i} failures");
            f.fail_at(a, t0);
        }
        assert!(f.blocked_at(a, t0 + Duration::from_secs(59)));
        assert!(!f.blocked_at(b, t0), "another peer is not affected");
        let later = t0 + FAILURE_WINDOW;
        assert!(!f.blocked_at(a, later), "a new window");
        f.fail_at(a, later);
        assert!(!f.blocked_at(a, later), "the count starts again");
    }

    #[test]
    fn a_full_cache_drops_expired_answers_first_and_never_grows_past_its_limit() {
        let c: TtlCache<u32, bool> = TtlCache::with(Duration::from_secs(10), 4);
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(11);
        for i in 0..3 {
            c.put_at(i, false, t0);
        }
        c.put_at(3, true, later);
        c.put_at(4, true, later); // full: the three expired answers go, the fresh one stays
        assert_eq!(c.get_at(&3, later), Some(true));
        assert_eq!(c.entries.lock().unwrap().len(), 2);
        for i in 10..30 {
            c.put_at(i, true, later);
            assert!(c.entries.lock().unwrap().len() <= 4);
        }
    }
}

/// A user the Kubernetes API server authenticated and proxied here (front-proxy headers on a
/// connection whose client certificate verified; see `api::front_proxy`). Only the connection
/// layer inserts it: clients cannot set request extensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proxied(pub Caller);

/// How a request says who asks: a user the API server proxied, or a bearer token to review.
#[derive(Clone, Debug, Default)]
pub struct Asker {
    pub proxied: Option<Caller>,
    pub bearer: Option<String>,
    /// The connection's peer address (set by the listener).
    pub peer: Option<std::net::IpAddr>,
}

/// The peer address of a request's connection; only the listener inserts it.
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub std::net::IpAddr);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Asker {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Asker {
            proxied: parts.extensions.get::<Proxied>().map(|p| p.0.clone()),
            peer: parts.extensions.get::<Peer>().map(|p| p.0),
            bearer: parts
                .headers
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::to_string),
        })
    }
}
