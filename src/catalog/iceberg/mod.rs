//! Apache Iceberg REST catalogs (Polaris, Unity Catalog, Gravitino's Iceberg REST service,
//! Nessie, Glue, ...): a thin client of the REST protocol. Namespaces are schemas (levels
//! separated by dots), tables and views are relations, and an object's native id is the uuid
//! its metadata carries (`table-uuid`, `view-uuid`): a rename keeps it, a drop + create changes
//! it. Only an explicit 404 is an absence; 401/403, 5xx, timeouts and malformed metadata are
//! errors (doubt). Authentication: OAuth2 client credentials (a token from the token endpoint,
//! replaced after 80% of its life and once more on a 401) or a static bearer token.

pub mod wire;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use self::wire::{Endpoint, Token};
use super::{
    CatalogProvider, Column, ConnectionSettings, Credentials, Found, ObjectType, Probe,
    ProbeTarget, ProviderError,
};

/// Most tables (or views) of one namespace whose metadata a rename search loads; past it the
/// search answers an error (doubt), never "not found".
pub const MAX_RENAME_CANDIDATES: usize = 500;
/// Largest answer read from the catalog (metadata of a table with a long history is big even
/// with `snapshots=refs`). Bodies are parsed into typed values that keep only what semops
/// reads, so an answer's cost in memory stays close to this.
pub const MAX_BODY: usize = 16 * 1024 * 1024;
/// Largest error answer read: only its `error.type` is used.
pub const MAX_ERROR_BODY: usize = 64 * 1024;

/// Iceberg REST settings of a Catalog (`spec.connection.uri`, `warehouse`, `oauth2`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IcebergSettings {
    /// Base URL of the catalog; requests go to `{uri}/v1/...`.
    pub uri: String,
    pub warehouse: Option<String>,
    pub oauth2: Option<OAuth2>,
}

/// OAuth2 client credentials: the client id and secret are the credentials Secret's user name
/// and password.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OAuth2 {
    pub token_endpoint: String,
    pub scope: String,
}

type HttpClient = Client<
    hyper_rustls::HttpsConnector<CheckedConnector<HttpConnector<CheckedResolver>>>,
    Full<Bytes>,
>;

/// Refuses a URL whose host and port are not a checked destination (a redirect elsewhere, or
/// the same name on another port) before the connector resolves or dials anything.
#[derive(Clone)]
struct CheckedConnector<C> {
    inner: C,
    addresses: std::sync::Arc<super::Addresses>,
}

impl<C> tower::Service<hyper::Uri> for CheckedConnector<C>
where
    C: tower::Service<hyper::Uri> + Clone + Send + 'static,
    C::Future: Send + 'static,
    C::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = C::Response;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: hyper::Uri) -> Self::Future {
        let (host, port) = super::uri_host_port(&uri).unwrap_or_default();
        let checked = match &*self.addresses {
            super::Addresses::Checked(all) => all.iter().any(|(h, p, _)| *h == host && *p == port),
            super::Addresses::Resolve => true,
        };
        let connecting = checked.then(|| self.inner.call(uri));
        Box::pin(async move {
            match connecting {
                Some(f) => f.await.map_err(Into::into),
                None => Err(format!("{host}:{port} is not a checked destination").into()),
            }
        })
    }
}

/// Names resolve to the addresses that passed the egress checks (the catalog's and the token
/// endpoint's), never through DNS again; a name outside them (a redirect) resolves to nothing.
#[derive(Clone)]
struct CheckedResolver(std::sync::Arc<super::Addresses>);

impl tower::Service<hyper_util::client::legacy::connect::dns::Name> for CheckedResolver {
    type Response = std::vec::IntoIter<std::net::SocketAddr>;
    type Error = std::io::Error;
    type Future = futures::future::BoxFuture<'static, std::io::Result<Self::Response>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: hyper_util::client::legacy::connect::dns::Name) -> Self::Future {
        let addresses = self.0.clone();
        Box::pin(async move {
            // The connector puts the URL's port on each address.
            Ok(addresses.of_host(name.as_str()).await?.into_iter())
        })
    }
}

pub struct IcebergProvider {
    settings: IcebergSettings,
    /// `uri` without a trailing slash.
    base: String,
    credentials: Credentials,
    client: HttpClient,
    timeout: Duration,
    /// Requests of one batch in flight at once (the pool's size).
    in_flight: usize,
    /// From `GET /v1/config`, read once per pool (again after a failure).
    endpoint: tokio::sync::Mutex<Option<Endpoint>>,
    /// The OAuth2 token and when to replace it.
    token: Mutex<Option<(String, Option<Instant>)>>,
}

/// How a request authenticates.
enum Auth {
    None,
    Bearer,
    OAuth2,
}

impl IcebergProvider {
    pub fn new(settings: ConnectionSettings) -> Result<Self, ProviderError> {
        let iceberg = settings.iceberg.clone().ok_or_else(|| {
            ProviderError::Misconfigured("spec.connection.uri is required for iceberg-rest".into())
        })?;
        let https = iceberg.uri.starts_with("https://");
        let has_secret = !settings.credentials.expose_password().is_empty();
        if !https && has_secret && settings.ssl_mode != crate::crd::catalog::SslMode::Disable {
            return Err(ProviderError::InsecureAuth(
                "spec.connection.uri is http:// and a token or client secret would travel in clear; use https://, or write sslMode: disable to accept that".into(),
            ));
        }
        let clear_token_endpoint = iceberg
            .oauth2
            .as_ref()
            .is_some_and(|o| !o.token_endpoint.starts_with("https://"));
        if clear_token_endpoint
            && has_secret
            && settings.ssl_mode != crate::crd::catalog::SslMode::Disable
        {
            return Err(ProviderError::InsecureAuth(
                "spec.connection.oauth2.tokenEndpoint is http:// and the client secret would travel in clear; use https://, or write sslMode: disable to accept that".into(),
            ));
        }
        let tls = super::tls::tls_config(settings.ssl_mode, settings.ca_pem.as_deref(), None)?;
        let addresses = std::sync::Arc::new(settings.addresses.clone());
        let mut http = HttpConnector::new_with_resolver(CheckedResolver(addresses.clone()));
        http.enforce_http(false);
        http.set_connect_timeout(Some(settings.connect_timeout));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(CheckedConnector {
                inner: http,
                addresses,
            });
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(settings.max_connections)
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Ok(IcebergProvider {
            base: iceberg.uri.trim_end_matches('/').to_string(),
            settings: iceberg,
            credentials: settings.credentials,
            client,
            timeout: settings.statement_timeout,
            in_flight: settings.max_connections.max(1),
            endpoint: tokio::sync::Mutex::new(None),
            token: Mutex::new(None),
        })
    }

    fn auth(&self) -> Auth {
        if self.settings.oauth2.is_some() {
            Auth::OAuth2
        } else if !self.credentials.expose_password().is_empty() {
            Auth::Bearer
        } else {
            Auth::None
        }
    }

    /// One HTTP exchange with the timeout; the body read whole (bounded).
    async fn exchange(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<(StatusCode, Bytes), ProviderError> {
        let what = request.uri().path().to_string();
        let work = async {
            let response = self.client.request(request).await.map_err(|e| {
                let text = error_chain(&e);
                if text.contains("certificate") || text.contains("tls") || text.contains("TLS") {
                    ProviderError::Tls(self.credentials.scrub(&text))
                } else {
                    ProviderError::Unreachable(self.credentials.scrub(&text))
                }
            })?;
            let status = response.status();
            let limit = if status.is_success() {
                MAX_BODY
            } else {
                MAX_ERROR_BODY
            };
            let body = match http_body_util::Limited::new(response.into_body(), limit)
                .collect()
                .await
            {
                Ok(body) => body.to_bytes(),
                // An error answer is classified by its status alone when its body is too long.
                Err(e) if !status.is_success() && e.is::<http_body_util::LengthLimitError>() => {
                    Bytes::new()
                }
                Err(e) => {
                    return Err(ProviderError::Protocol(format!(
                        "{what}: reading the answer (at most {limit} bytes): {e}"
                    )));
                }
            };
            Ok((status, body))
        };
        tokio::time::timeout(self.timeout, work)
            .await
            .map_err(|_| ProviderError::Timeout(self.timeout))?
    }

    /// A fresh OAuth2 token from the token endpoint.
    async fn fetch_token(&self, oauth: &OAuth2) -> Result<Token, ProviderError> {
        let form = format!(
            "grant_type=client_credentials&client_id={}&client_secret={}&scope={}",
            wire::encode(self.credentials.username()),
            wire::encode(self.credentials.expose_password()),
            wire::encode(&oauth.scope)
        );
        let request = Request::builder()
            .method(Method::POST)
            .uri(&oauth.token_endpoint)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Full::new(Bytes::from(form)))
            .map_err(|e| {
                ProviderError::Misconfigured(format!("spec.connection.oauth2.tokenEndpoint: {e}"))
            })?;
        let (status, body) = self.exchange(request).await?;
        match status.as_u16() {
            200 => wire::token(&body),
            400 | 401 | 403 => Err(ProviderError::AuthFailed(format!(
                "the token endpoint refused the client credentials (HTTP {status})"
            ))),
            s => Err(wire::classify(
                s,
                &body,
                "the token endpoint",
                &self.credentials,
            )),
        }
    }

    /// The bearer to send: the static token, or a current OAuth2 token (fetched when missing,
    /// due, or `renew`ed after a 401).
    async fn bearer(&self, renew: bool) -> Result<Option<String>, ProviderError> {
        match (self.auth(), &self.settings.oauth2) {
            (Auth::None, _) => Ok(None),
            (Auth::Bearer, _) => Ok(Some(self.credentials.expose_password().to_string())),
            (Auth::OAuth2, Some(oauth)) => {
                if !renew
                    && let Some((token, due)) = self.token.lock().expect("token lock").clone()
                    && due.is_none_or(|d| Instant::now() < d)
                {
                    return Ok(Some(token));
                }
                let fresh = self.fetch_token(oauth).await?;
                let due = fresh
                    .expires_in
                    .map(|ttl| Instant::now() + wire::refresh_after(ttl));
                *self.token.lock().expect("token lock") = Some((fresh.access_token.clone(), due));
                Ok(Some(fresh.access_token))
            }
            (Auth::OAuth2, None) => Ok(None),
        }
    }

    /// `method path` with authentication; a 401 with an OAuth2 token renews it and asks once more.
    async fn send(&self, method: Method, path: &str) -> Result<(StatusCode, Bytes), ProviderError> {
        let mut renew = false;
        loop {
            let mut request = Request::builder()
                .method(method.clone())
                .uri(format!("{}{path}", self.base))
                .header("accept", "application/json");
            if let Some(token) = self.bearer(renew).await? {
                request = request.header("authorization", format!("Bearer {token}"));
            }
            let request = request
                .body(Full::new(Bytes::new()))
                .map_err(|e| ProviderError::Misconfigured(format!("spec.connection.uri: {e}")))?;
            let (status, body) = self.exchange(request).await?;
            if status == StatusCode::UNAUTHORIZED && matches!(self.auth(), Auth::OAuth2) && !renew {
                renew = true;
                continue;
            }
            return Ok((status, body));
        }
    }

    /// The catalog's endpoint (prefix, separator), from `GET /v1/config` once.
    async fn endpoint(&self) -> Result<Endpoint, ProviderError> {
        let mut cached = self.endpoint.lock().await;
        if let Some(e) = cached.as_ref() {
            return Ok(e.clone());
        }
        let path = match &self.settings.warehouse {
            Some(w) => format!("/v1/config?warehouse={}", wire::encode(w)),
            None => "/v1/config".into(),
        };
        let (status, body) = self.send(Method::GET, &path).await?;
        if status != StatusCode::OK {
            return Err(wire::classify(
                status.as_u16(),
                &body,
                "GET /v1/config",
                &self.credentials,
            ));
        }
        let endpoint = wire::endpoint_from_config(&body)?;
        *cached = Some(endpoint.clone());
        Ok(endpoint)
    }

    /// A table or view loaded (`None`: 404), with the smallest answer the server offers.
    async fn load(
        &self,
        endpoint: &Endpoint,
        levels: &[&str],
        kind: ObjectType,
        name: &str,
    ) -> Result<Option<wire::Loaded>, ProviderError> {
        let mut path = endpoint.object_path(levels, kind, name);
        if kind == ObjectType::Table {
            path.push_str("?snapshots=refs");
        }
        let (status, body) = self.send(Method::GET, &path).await?;
        match status.as_u16() {
            200 if kind == ObjectType::Table => wire::loaded_table(&body).map(Some),
            200 => wire::loaded_view(&body).map(Some),
            404 => Ok(None),
            s => Err(wire::classify(
                s,
                &body,
                &format!("loading {name}"),
                &self.credentials,
            )),
        }
    }

    /// The table, else the view, named `schema.name`.
    async fn relation(
        &self,
        endpoint: &Endpoint,
        schema: &str,
        name: &str,
    ) -> Result<Option<(ObjectType, wire::Loaded)>, ProviderError> {
        let levels = levels_of(schema)?;
        for kind in [ObjectType::Table, ObjectType::View] {
            if let Some(loaded) = self.load(endpoint, &levels, kind, name).await? {
                return Ok(Some((kind, loaded)));
            }
        }
        Ok(None)
    }

    /// Names of a namespace's tables or views, every page, at most `limit` (past it: an error).
    async fn list(
        &self,
        endpoint: &Endpoint,
        levels: &[&str],
        kind: ObjectType,
        limit: usize,
    ) -> Result<Option<Vec<String>>, ProviderError> {
        let mut names = Vec::new();
        let mut page: Option<String> = None;
        loop {
            let path = endpoint.list_path(levels, kind, page.as_deref());
            let (status, body) = self.send(Method::GET, &path).await?;
            match status.as_u16() {
                200 => {}
                404 => return Ok(None),
                s => {
                    return Err(wire::classify(
                        s,
                        &body,
                        "listing a namespace",
                        &self.credentials,
                    ));
                }
            }
            let (more, next) = wire::identifiers(&body)?;
            names.extend(more);
            if names.len() > limit {
                return Err(ProviderError::Protocol(format!(
                    "more than {limit} objects in the namespace: rename detection does not search it"
                )));
            }
            match next {
                Some(n) if Some(&n) != page.as_ref() => page = Some(n),
                _ => return Ok(Some(names)),
            }
        }
    }
}

impl IcebergProvider {
    async fn probe_one(
        &self,
        endpoint: &Endpoint,
        t: &ProbeTarget,
    ) -> Result<Probe, ProviderError> {
        Ok(match t {
            ProbeTarget::Schema { name } => {
                let path = endpoint.namespace_path(&levels_of(name)?);
                let (status, body) = self.send(Method::HEAD, &path).await?;
                match status.as_u16() {
                    200 | 204 => Probe::Present {
                        object_type: ObjectType::Schema,
                        native_id: format!("namespace:{name}"),
                    },
                    404 => Probe::Absent,
                    s => {
                        return Err(wire::classify(
                            s,
                            &body,
                            &format!("namespace {name}"),
                            &self.credentials,
                        ));
                    }
                }
            }
            ProbeTarget::Relation { schema, name } => {
                match self.relation(endpoint, schema, name).await? {
                    Some((kind, loaded)) => Probe::Present {
                        object_type: kind,
                        native_id: native_id(kind, &loaded.uuid, schema),
                    },
                    None => Probe::Absent,
                }
            }
        })
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn levels_of(schema: &str) -> Result<Vec<&str>, ProviderError> {
    wire::levels(schema).ok_or_else(|| {
        ProviderError::Misconfigured(format!("{schema:?} has an empty namespace level"))
    })
}

/// `table:{uuid}@{schema}` / `view:{uuid}@{schema}`: the uuid says which object; the namespace
/// says where a rename search looks (a rename inside a namespace keeps the id; a move to
/// another namespace reads as a drop there).
pub fn native_id(kind: ObjectType, uuid: &str, schema: &str) -> String {
    let kind = if kind == ObjectType::View {
        "view"
    } else {
        "table"
    };
    format!("{kind}:{uuid}@{schema}")
}

/// The parts of a [`native_id`].
pub fn parse_native_id(id: &str) -> Option<(ObjectType, &str, &str)> {
    let (kind, rest) = id.split_once(':')?;
    let kind = match kind {
        "table" => ObjectType::Table,
        "view" => ObjectType::View,
        _ => return None,
    };
    let (uuid, schema) = rest.split_once('@')?;
    (!uuid.is_empty() && !schema.is_empty()).then_some((kind, uuid, schema))
}

impl CatalogProvider for IcebergProvider {
    async fn check_connection(&self) -> Result<(), ProviderError> {
        self.endpoint().await.map(|_| ())
    }

    /// One request (two for a name that is not a table) per target, `max_connections` at once;
    /// answers in input order, and the first failure fails the batch.
    async fn probe(&self, targets: &[ProbeTarget]) -> Result<Vec<Probe>, ProviderError> {
        use futures::StreamExt;
        let endpoint = self.endpoint().await?;
        let endpoint = &endpoint;
        // Boxed with one named lifetime: a closure returning the bare future trips the
        // "FnOnce is not general enough" limit once callers need the future to be Send.
        let one = |t: ProbeTarget| -> futures::future::BoxFuture<'_, Result<Probe, ProviderError>> {
            Box::pin(async move { self.probe_one(endpoint, &t).await })
        };
        futures::stream::iter(targets.iter().cloned())
            .map(one)
            .buffered(self.in_flight)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect()
    }

    async fn find_by_id(&self, id: &str) -> Result<Option<Found>, ProviderError> {
        let Some((kind, uuid, schema)) = parse_native_id(id) else {
            return Ok(None);
        };
        let endpoint = self.endpoint().await?;
        let levels = levels_of(schema)?;
        let Some(names) = self
            .list(&endpoint, &levels, kind, MAX_RENAME_CANDIDATES)
            .await?
        else {
            return Ok(None);
        };
        for name in names {
            if let Some(loaded) = self.load(&endpoint, &levels, kind, &name).await?
                && loaded.uuid == uuid
            {
                return Ok(Some(Found {
                    target: ProbeTarget::relation(schema, name),
                    object_type: kind,
                }));
            }
        }
        Ok(None)
    }

    async fn columns(
        &self,
        schema: &str,
        name: &str,
    ) -> Result<Option<Vec<Column>>, ProviderError> {
        let endpoint = self.endpoint().await?;
        Ok(self
            .relation(&endpoint, schema, name)
            .await?
            .map(|(_, l)| l.columns))
    }

    async fn server_identity(&self) -> Result<String, ProviderError> {
        let endpoint = self.endpoint().await?;
        Ok(format!(
            "{} warehouse={} prefix={}",
            self.base,
            self.settings.warehouse.as_deref().unwrap_or("-"),
            endpoint.prefix.as_deref().unwrap_or("-")
        ))
    }

    fn invalid_name(&self, target: &ProbeTarget) -> Option<String> {
        let schema = match target {
            ProbeTarget::Schema { name } => name,
            ProbeTarget::Relation { schema, name } if name.is_empty() => {
                return Some(format!("an empty name in namespace {schema:?}"));
            }
            ProbeTarget::Relation { schema, .. } => schema,
        };
        wire::levels(schema).is_none().then(|| {
            format!("{schema:?} has an empty namespace level (levels are separated by dots)")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_ids_round_trip_and_refuse_anything_else() {
        for (kind, uuid, schema) in [
            (ObjectType::Table, "1c00-aa", "sales"),
            (ObjectType::View, "v-1", "sales.eu@x"),
        ] {
            let id = native_id(kind, uuid, schema);
            assert_eq!(parse_native_id(&id), Some((kind, uuid, schema)), "{id}");
        }
        for bad in [
            "",
            "table:",
            "table:@s",
            "table:u@",
            "topic:u@s",
            "u@s",
            "12345",
        ] {
            assert_eq!(parse_native_id(bad), None, "{bad}");
        }
    }
}
