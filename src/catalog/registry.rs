//! One connection pool per Catalog, rebuilt when the Catalog's connection spec or its Secret
//! changes (detected by fingerprinting the resolved settings), and the lookup of a Catalog's
//! provider (its Secret read with `get` only) shared by the controllers and the read API.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, ResourceExt};

use super::egress::HostAllowList;
use super::fresh_reads::FreshReads;
use super::iceberg::{IcebergProvider, IcebergSettings, OAuth2};
use super::kafka::KafkaProvider;
use super::mysql::MysqlProvider;
use super::postgres::PostgresProvider;
use super::secrets;
use super::{
    CatalogProvider, ClientCertificate, Column, ConnectionSettings, Credentials, Found, Probe,
    ProbeTarget, ProviderError,
};
use crate::crd::Catalog;
use crate::crd::catalog::{Connection, Provider};
use crate::crd::conditions::Reason;

/// A live provider of either supported system.
pub enum AnyProvider {
    Postgres(PostgresProvider),
    Mysql(MysqlProvider),
    Kafka(KafkaProvider),
    Iceberg(IcebergProvider),
}

impl CatalogProvider for AnyProvider {
    async fn check_connection(&self) -> Result<(), ProviderError> {
        match self {
            AnyProvider::Postgres(p) => p.check_connection().await,
            AnyProvider::Mysql(p) => p.check_connection().await,
            AnyProvider::Kafka(p) => p.check_connection().await,
            AnyProvider::Iceberg(p) => p.check_connection().await,
        }
    }
    async fn probe(&self, targets: &[ProbeTarget]) -> Result<Vec<Probe>, ProviderError> {
        match self {
            AnyProvider::Postgres(p) => p.probe(targets).await,
            AnyProvider::Mysql(p) => p.probe(targets).await,
            AnyProvider::Kafka(p) => p.probe(targets).await,
            AnyProvider::Iceberg(p) => p.probe(targets).await,
        }
    }
    async fn find_by_id(&self, native_id: &str) -> Result<Option<Found>, ProviderError> {
        match self {
            AnyProvider::Postgres(p) => p.find_by_id(native_id).await,
            AnyProvider::Mysql(p) => p.find_by_id(native_id).await,
            AnyProvider::Kafka(p) => p.find_by_id(native_id).await,
            AnyProvider::Iceberg(p) => p.find_by_id(native_id).await,
        }
    }
    async fn columns(
        &self,
        schema: &str,
        name: &str,
    ) -> Result<Option<Vec<Column>>, ProviderError> {
        match self {
            AnyProvider::Postgres(p) => p.columns(schema, name).await,
            AnyProvider::Mysql(p) => p.columns(schema, name).await,
            AnyProvider::Kafka(p) => p.columns(schema, name).await,
            AnyProvider::Iceberg(p) => p.columns(schema, name).await,
        }
    }
    async fn columns_of(
        &self,
        targets: &[ProbeTarget],
    ) -> Result<HashMap<ProbeTarget, Vec<Column>>, ProviderError> {
        match self {
            AnyProvider::Postgres(p) => p.columns_of(targets).await,
            AnyProvider::Mysql(p) => p.columns_of(targets).await,
            AnyProvider::Kafka(p) => p.columns_of(targets).await,
            AnyProvider::Iceberg(p) => p.columns_of(targets).await,
        }
    }
    async fn server_identity(&self) -> Result<String, ProviderError> {
        match self {
            AnyProvider::Postgres(p) => p.server_identity().await,
            AnyProvider::Mysql(p) => p.server_identity().await,
            AnyProvider::Kafka(p) => p.server_identity().await,
            AnyProvider::Iceberg(p) => p.server_identity().await,
        }
    }
    fn invalid_name(&self, target: &ProbeTarget) -> Option<String> {
        match self {
            AnyProvider::Postgres(p) => p.invalid_name(target),
            AnyProvider::Mysql(p) => p.invalid_name(target),
            AnyProvider::Kafka(p) => p.invalid_name(target),
            AnyProvider::Iceberg(p) => p.invalid_name(target),
        }
    }
}

/// Builds a provider for a non-managed catalog.
pub fn build(
    provider: Provider,
    settings: ConnectionSettings,
) -> Result<AnyProvider, ProviderError> {
    match provider {
        Provider::Postgresql => Ok(AnyProvider::Postgres(PostgresProvider::new(settings)?)),
        Provider::Mysql => Ok(AnyProvider::Mysql(MysqlProvider::new(settings)?)),
        Provider::Kafka => Ok(AnyProvider::Kafka(KafkaProvider::new(settings)?)),
        Provider::IcebergRest => Ok(AnyProvider::Iceberg(IcebergProvider::new(settings)?)),
        Provider::Managed => Err(ProviderError::Misconfigured(
            "managed catalogs are never probed".into(),
        )),
    }
}

/// Defaults for every pool (docs/design.md#catalogs: bounded connections, connect and statement timeouts).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
pub const MAX_CONNECTIONS: usize = 4;

/// A Catalog's connection with the values read from its Secrets, as provider settings.
pub fn settings_from(
    connection: &Connection,
    credentials: Credentials,
    ca_pem: Option<Vec<u8>>,
    client_certificate: Option<ClientCertificate>,
) -> Result<ConnectionSettings, String> {
    let bootstrap = connection
        .bootstrap_servers
        .iter()
        .enumerate()
        .map(|(i, s)| {
            split_host_port(s).ok_or_else(|| {
                format!(
                    "spec.connection.bootstrapServers[{i}] {s:?} is not host:port; write it as broker.example:9092 (an IPv6 address as [::1]:9092)"
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let iceberg = match &connection.uri {
        None => None,
        Some(uri) => Some(iceberg_settings(connection, uri)?),
    };
    let (host, port) = match (&connection.host, connection.port, bootstrap.first()) {
        (None, None, None) if iceberg.is_some() => {
            url_host_port(connection.uri.as_deref().unwrap_or_default())
                .ok_or("spec.connection.uri is not a URL with a host")?
        }
        (Some(host), Some(port), None) => {
            let port = u16::try_from(port)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("spec.connection.port {port} is not a TCP port"))?;
            (host.clone(), port)
        }
        (None, None, Some(first)) => first.clone(),
        _ => {
            return Err(
                "spec.connection needs either host and port (postgresql, mysql), bootstrapServers (kafka) or uri (iceberg-rest)"
                    .into(),
            );
        }
    };
    Ok(ConnectionSettings {
        host,
        port,
        bootstrap,
        sasl: connection.sasl.as_ref().map(|s| s.mechanism),
        database: connection.database.clone(),
        iceberg,
        ssl_mode: connection.ssl_mode.unwrap_or_default(),
        ca_pem,
        client_certificate,
        credentials,
        connect_timeout: CONNECT_TIMEOUT,
        statement_timeout: STATEMENT_TIMEOUT,
        max_connections: MAX_CONNECTIONS,
        addresses: super::Addresses::Resolve,
    })
}

/// The Iceberg REST settings of a connection with `uri`: an http(s) URL with a host, no query,
/// no credentials in it; the token endpoint defaults to the spec's `{uri}/v1/oauth/tokens`.
fn iceberg_settings(connection: &Connection, uri: &str) -> Result<IcebergSettings, String> {
    let parsed: hyper::Uri = uri
        .parse()
        .map_err(|e| format!("spec.connection.uri is not a URL: {e}"))?;
    let scheme_ok = matches!(parsed.scheme_str(), Some("https" | "http"));
    let host_ok = parsed.host().is_some_and(|h| !h.is_empty());
    if !scheme_ok || !host_ok || parsed.query().is_some() || uri.contains('@') {
        // A URL with user info may carry a password: it is not repeated.
        let shown = if uri.contains('@') {
            String::new()
        } else {
            format!(" {uri:?}")
        };
        return Err(format!(
            "spec.connection.uri{shown} must be an https:// (or http://) URL with a host and no query or user info (credentials belong in credentialsSecretRef), e.g. https://catalog.example.com/api/catalog"
        ));
    }
    let base = uri.trim_end_matches('/');
    let oauth2 = connection.oauth2.as_ref().map(|o| OAuth2 {
        token_endpoint: o
            .token_endpoint
            .clone()
            .unwrap_or_else(|| format!("{base}/v1/oauth/tokens")),
        scope: o.scope.clone().unwrap_or_else(|| "catalog".into()),
    });
    if let Some(o) = &oauth2
        && !(o.token_endpoint.starts_with("https://") || o.token_endpoint.starts_with("http://"))
    {
        return Err(format!(
            "spec.connection.oauth2.tokenEndpoint {:?} must be an https:// URL",
            o.token_endpoint
        ));
    }
    Ok(IcebergSettings {
        uri: base.to_string(),
        warehouse: connection.warehouse.clone(),
        oauth2,
    })
}

/// A server that receives something from semops for a Catalog, and the field that names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destination {
    pub field: String,
    pub host: String,
    pub port: u16,
}

impl Destination {
    /// `host:port`, an IPv6 address in brackets.
    pub fn shown(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Every destination of `settings`: the database host; each Kafka bootstrap server; the
/// Iceberg `uri` and its OAuth2 token endpoint.
pub fn destinations(settings: &ConnectionSettings) -> Result<Vec<Destination>, String> {
    let at = |field: &str, host: &str, port: u16| Destination {
        field: field.to_string(),
        host: host.to_string(),
        port,
    };
    if let Some(iceberg) = &settings.iceberg {
        let mut out = vec![at("spec.connection.uri", &settings.host, settings.port)];
        if let Some(o) = &iceberg.oauth2 {
            let field = "spec.connection.oauth2.tokenEndpoint";
            let (host, port) = url_host_port(&o.token_endpoint).ok_or_else(|| {
                format!("{field} {:?} is not a URL with a host", o.token_endpoint)
            })?;
            out.push(at(field, &host, port));
        }
        return Ok(out);
    }
    if !settings.bootstrap.is_empty() {
        return Ok(settings
            .bootstrap
            .iter()
            .enumerate()
            .map(|(i, (h, p))| at(&format!("spec.connection.bootstrapServers[{i}]"), h, *p))
            .collect());
    }
    Ok(vec![at(
        "spec.connection.host",
        &settings.host,
        settings.port,
    )])
}

/// The host (brackets removed) and port of an http(s) URL, the port defaulting by scheme.
fn url_host_port(url: &str) -> Option<(String, u16)> {
    super::uri_host_port(&url.parse().ok()?)
}

/// `host:port` or `[v6]:port`; `None` for anything else (no port, port 0 or out of range).
pub fn split_host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = s.rsplit_once(':')?;
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.strip_suffix(']')?,
        None if host.contains(':') => return None,
        None => host,
    };
    let port = port.parse::<u16>().ok().filter(|p| *p > 0)?;
    (!host.is_empty() && !host.contains(char::is_whitespace)).then(|| (host.to_string(), port))
}

fn fingerprint(provider: Provider, s: &ConnectionSettings) -> u64 {
    let mut h = DefaultHasher::new();
    (
        provider as u8,
        &s.host,
        s.port,
        &s.bootstrap,
        s.sasl,
        &s.database,
        s.ssl_mode as u8,
        &s.iceberg,
    )
        .hash(&mut h);
    (s.credentials.username(), s.credentials.expose_password()).hash(&mut h);
    s.ca_pem.hash(&mut h);
    s.client_certificate.hash(&mut h);
    (s.connect_timeout, s.statement_timeout, s.max_connections).hash(&mut h);
    s.addresses.hash(&mut h);
    h.finish()
}

/// Pools by Catalog key (`namespace/name`), and where connections may go.
pub struct Registry {
    pools: Mutex<HashMap<String, (u64, Arc<AnyProvider>)>>,
    allowed_hosts: HostAllowList,
    /// Secrets by (namespace, name), None when absent. Concurrent reads share one GET that
    /// began after they asked; the read API also reuses one for [`SECRET_REUSE`], so a flood of
    /// lookups costs one Secret GET per Secret per interval, not one per request.
    secrets: FreshReads<(String, String), Option<Secret>>,
    /// Host names resolved for the destination checks, with when.
    resolved: Mutex<HashMap<(String, u16), Resolved>>,
}

/// When a name was resolved, and to what.
type Resolved = (std::time::Instant, Vec<std::net::IpAddr>);

/// How long a resolved name is reused: a changed answer reaches the checks (and a new pool,
/// since the addresses are part of the settings) within this.
pub const RESOLVED_REUSE: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a Secret read for the read API is reused (controllers read afresh).
pub const SECRET_REUSE: std::time::Duration = std::time::Duration::from_secs(10);
/// Secrets kept; past it, those no read is waiting for are dropped.
const SECRETS_KEPT: usize = 1000;
/// How long a Secret GET waits for more readers before it begins. At bring-up acceptances ask
/// for one Catalog's Secret ~100 times a second; a window about one GET long lets each GET
/// answer several of them (freshness unchanged, see `fresh_reads`).
pub const SECRET_GATHER: std::time::Duration = std::time::Duration::from_millis(20);

/// Whether a Secret may come from the read API's short cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretReads {
    /// From a GET that began after the read was asked (controllers: a rotation is seen at the
    /// next reconcile); concurrent reads share it.
    Fresh,
    /// A GET at most every [`SECRET_REUSE`] per Secret (the read API).
    Reused,
}

impl Default for Registry {
    fn default() -> Self {
        Self {
            pools: Mutex::default(),
            allowed_hosts: HostAllowList::default(),
            secrets: FreshReads::with_gather(SECRETS_KEPT, SECRET_GATHER),
            resolved: Mutex::default(),
        }
    }
}

impl Registry {
    /// A registry whose Catalogs may connect only to `allowed` hosts (empty: anywhere).
    pub fn with_allowed_hosts(allowed: HostAllowList) -> Self {
        Self {
            pools: Mutex::default(),
            allowed_hosts: allowed,
            ..Self::default()
        }
    }

    /// The addresses of `host:port`, resolved at most once per [`RESOLVED_REUSE`] (an address
    /// literal is itself); empty when the name does not resolve (not remembered).
    async fn resolve(&self, host: &str, port: u16) -> Vec<std::net::IpAddr> {
        if let Ok(ip) = host.parse::<std::net::IpAddr>() {
            return vec![ip];
        }
        let key = (host.to_string(), port);
        let now = std::time::Instant::now();
        if let Some((at, ips)) = self.resolved.lock().expect("resolved poisoned").get(&key)
            && now.duration_since(*at) < RESOLVED_REUSE
        {
            return ips.clone();
        }
        let ips: Vec<std::net::IpAddr> = match tokio::net::lookup_host((host, port)).await {
            Ok(found) => found.map(|a| a.ip()).collect(),
            Err(_) => vec![],
        };
        if !ips.is_empty() {
            let mut resolved = self.resolved.lock().expect("resolved poisoned");
            if resolved.len() >= SECRETS_KEPT {
                resolved.retain(|_, (at, _)| now.duration_since(*at) < RESOLVED_REUSE);
            }
            if resolved.len() < SECRETS_KEPT {
                resolved.insert(key, (now, ips.clone()));
            }
        }
        ips
    }

    /// The provider for `key`, reusing its pool unless the settings changed.
    pub fn provider_for(
        &self,
        key: &str,
        provider: Provider,
        settings: ConnectionSettings,
    ) -> Result<Arc<AnyProvider>, ProviderError> {
        let fp = fingerprint(provider, &settings);
        let mut pools = self.pools.lock().expect("provider registry poisoned");
        if let Some((old, p)) = pools.get(key)
            && *old == fp
        {
            return Ok(p.clone());
        }
        let built = Arc::new(build(provider, settings)?);
        pools.insert(key.to_string(), (fp, built.clone()));
        Ok(built)
    }

    /// Drops the pool of a deleted Catalog.
    pub fn remove(&self, key: &str) {
        self.pools
            .lock()
            .expect("provider registry poisoned")
            .remove(key);
    }

    pub fn len(&self) -> usize {
        self.pools.lock().expect("provider registry poisoned").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Key of a Catalog in the provider registry.
pub fn registry_key(cat: &Catalog) -> String {
    format!("{}/{}", cat.namespace().unwrap_or_default(), cat.name_any())
}

/// Why a probed catalog has no usable provider: a condition reason and a message naming the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoProvider {
    pub reason: Reason,
    pub message: String,
}

/// The provider of a probed (non-managed) Catalog and its `host:port`: reads its Secrets (get
/// only; used only when opted in), checks the host against the allow-list, and reuses or
/// rebuilds its pool. `Err` only when the API server could not be asked.
pub async fn provider_from(
    client: &kube::Client,
    providers: &Registry,
    cat: &Catalog,
) -> Result<Result<(Arc<AnyProvider>, String), NoProvider>, kube::Error> {
    provider_with(client, providers, cat, SecretReads::Fresh).await
}

/// [`provider_from`] for the read API: Secrets may come from the short cache.
pub async fn provider_for_reads(
    client: &kube::Client,
    providers: &Registry,
    cat: &Catalog,
) -> Result<Result<(Arc<AnyProvider>, String), NoProvider>, kube::Error> {
    provider_with(client, providers, cat, SecretReads::Reused).await
}

async fn provider_with(
    client: &kube::Client,
    providers: &Registry,
    cat: &Catalog,
    reads: SecretReads,
) -> Result<Result<(Arc<AnyProvider>, String), NoProvider>, kube::Error> {
    let no = |reason: Reason, message: String| Ok(Err(NoProvider { reason, message }));
    if cat.spec.provider == Provider::Managed {
        return no(
            Reason::MANAGED,
            "managed catalogs have no external system".into(),
        );
    }
    let Some(connection) = &cat.spec.connection else {
        return no(
            Reason::MISCONFIGURED,
            "spec.connection is required unless provider is managed".into(),
        );
    };
    let ns = cat.namespace().unwrap_or_default();
    let secrets = SecretSource {
        client,
        providers,
        reads,
        ns: &ns,
        catalog: &cat.name_any(),
    };
    let tls = connection.tls.as_ref();
    // Secrets whose values are sent to the servers: each must allow every destination.
    let mut sending: Vec<Sending> = Vec::new();
    // Kafka without SASL authenticates with TLS alone (or not at all): no Secret to read.
    let credentials = match &connection.credentials_secret_ref {
        None => Credentials::new("", ""),
        Some(r) => {
            // An Iceberg bearer token is one value: only the password key is read.
            let token_only =
                cat.spec.provider == Provider::IcebergRest && connection.oauth2.is_none();
            let keys: &[&str] = if token_only {
                &[r.password_key.as_str()]
            } else {
                &[r.username_key.as_str(), r.password_key.as_str()]
            };
            match secrets
                .require("spec.connection.credentialsSecretRef", &r.name, keys)
                .await?
            {
                Ok(opened) => {
                    sending.push(Sending {
                        name: r.name.clone(),
                        allowed_hosts: opened.allowed_hosts,
                    });
                    let mut v = opened.values.into_iter();
                    let first = v.next().unwrap_or_default();
                    match v.next() {
                        Some(password) => Credentials::new(first, password),
                        None => Credentials::new("", first),
                    }
                }
                Err(refused) => return Ok(Err(refused)),
            }
        }
    };
    // A CA bundle is only trusted, never sent: it needs no destinations.
    let ca_pem = match tls.and_then(|t| t.ca_secret_ref.as_ref()) {
        None => None,
        Some(ca) => match secrets
            .require("spec.connection.tls.caSecretRef", &ca.name, &[&ca.key])
            .await?
        {
            Ok(opened) => opened.values.into_iter().next().map(String::into_bytes),
            Err(refused) => return Ok(Err(refused)),
        },
    };
    let client_certificate = match tls.and_then(|t| t.client_certificate_secret_ref.as_ref()) {
        None => None,
        Some(r) => match secrets
            .require(
                "spec.connection.tls.clientCertificateSecretRef",
                &r.name,
                &["tls.crt", "tls.key"],
            )
            .await?
        {
            Ok(opened) => {
                sending.push(Sending {
                    name: r.name.clone(),
                    allowed_hosts: opened.allowed_hosts,
                });
                let [chain, key]: [String; 2] = opened
                    .values
                    .try_into()
                    .expect("two keys asked, two values");
                Some(ClientCertificate::new(chain, key))
            }
            Err(refused) => return Ok(Err(refused)),
        },
    };
    let mut settings = match settings_from(connection, credentials, ca_pem, client_certificate) {
        Ok(s) => s,
        Err(message) => return no(Reason::MISCONFIGURED, message),
    };
    let endpoint = format!("{}:{}", settings.host, settings.port);
    let destinations = match destinations(&settings) {
        Ok(d) => d,
        Err(message) => return no(Reason::MISCONFIGURED, message),
    };
    let mut checked = Vec::with_capacity(destinations.len());
    for d in destinations {
        let shown = d.shown();
        let addresses = providers.resolve(&d.host, d.port).await;
        if addresses.is_empty() {
            return no(
                Reason::UNREACHABLE,
                format!(
                    "{} {shown}: the name does not resolve; check the host name in {}",
                    d.field, d.field
                ),
            );
        }
        if let Err(why) = providers.allowed_hosts.decide(&d.host, d.port, &addresses) {
            return no(
                Reason::HOST_NOT_ALLOWED,
                format!(
                    "{} {shown}: {why}; nothing was sent. Point {} at an allowed host, or ask the operator's administrators to allow it",
                    d.field, d.field
                ),
            );
        }
        for secret in &sending {
            let permitted = matches!(&secret.allowed_hosts, Some(Ok(list)) if list.permits(&d.host, d.port, &addresses));
            if !permitted {
                return no(
                    Reason::CREDENTIALS_NOT_FOR_HOST,
                    secrets::not_for_host(
                        &secret.name,
                        &secret.allowed_hosts,
                        &d.field,
                        &d.host,
                        d.port,
                    ),
                );
            }
        }
        checked.push((d.host, d.port, addresses));
    }
    settings.addresses = super::Addresses::Checked(checked);
    match providers.provider_for(&registry_key(cat), cat.spec.provider, settings) {
        Ok(p) => Ok(Ok((p, endpoint))),
        Err(e) => no(e.category(), format!("{endpoint}: {e}")),
    }
}

/// Where a Catalog's Secrets are read from, for [`SecretSource::require`].
struct SecretSource<'a> {
    client: &'a kube::Client,
    providers: &'a Registry,
    reads: SecretReads,
    ns: &'a str,
    catalog: &'a str,
}

impl SecretSource<'_> {
    /// The values of `keys` in the opted-in Secret `name`, or the refusal naming `field` (the
    /// message never says which check failed, so it reveals nothing about the Secret).
    async fn require(
        &self,
        field: &str,
        name: &str,
        keys: &[&str],
    ) -> Result<Result<Opened, NoProvider>, kube::Error> {
        let values = opted_in(
            self.client,
            self.providers,
            self.reads,
            self.ns,
            name,
            self.catalog,
            keys,
        )
        .await?;
        Ok(values.ok_or_else(|| NoProvider {
            reason: Reason::CREDENTIALS_INVALID,
            message: secrets::unusable(field, name, keys, self.ns),
        }))
    }
}

/// The values of `keys` of Secret `name`, when it opted in to serve Catalog `catalog`. Every
/// other case is `None`, whatever the reason.
#[allow(clippy::too_many_arguments)]
async fn opted_in(
    client: &kube::Client,
    providers: &Registry,
    reads: SecretReads,
    ns: &str,
    name: &str,
    catalog: &str,
    keys: &[&str],
) -> Result<Option<Opened>, kube::Error> {
    let max_age = (reads == SecretReads::Reused).then_some(SECRET_REUSE);
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret = providers
        .secrets
        .read((ns.to_string(), name.to_string()), max_age, || {
            api.get_opt(name)
        })
        .await?;
    Ok(secret
        .filter(|s| secrets::serves(s, catalog))
        .and_then(|s| {
            let values = secrets::values(&s.data.clone().unwrap_or_default(), keys)?;
            Some(Opened {
                values,
                allowed_hosts: secrets::allowed_hosts(&s),
            })
        }))
}

/// An opted-in Secret's values, and the destinations its owner allows them to go to.
struct Opened {
    values: Vec<String>,
    allowed_hosts: Option<Result<HostAllowList, String>>,
}

/// A Secret whose values go to the Catalog's servers, for the destination check.
struct Sending {
    name: String,
    allowed_hosts: Option<Result<HostAllowList, String>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::catalog::{CredentialsSecretRef, SslMode};

    fn connection() -> Connection {
        Connection {
            host: Some("db".into()),
            port: Some(5432),
            bootstrap_servers: vec![],
            sasl: None,
            database: Some("hr".into()),
            uri: None,
            warehouse: None,
            oauth2: None,
            ssl_mode: Some(SslMode::Disable),
            tls: None,
            credentials_secret_ref: Some(CredentialsSecretRef {
                name: "creds".into(),
                username_key: "user".into(),
                password_key: "pass".into(),
            }),
        }
    }

    fn settings(password: &str) -> ConnectionSettings {
        settings_from(&connection(), Credentials::new("u", password), None, None).unwrap()
    }

    #[test]
    fn iceberg_uris_give_host_port_and_the_default_token_endpoint_and_bad_ones_name_the_fix() {
        let iceberg = |uri: &str, oauth2: bool| {
            let mut c = connection();
            (c.host, c.port, c.database) = (None, None, None);
            c.uri = Some(uri.into());
            c.oauth2 = oauth2.then(crate::crd::catalog::OAuth2Settings::default);
            settings_from(&c, Credentials::new("id", "secret"), None, None)
        };
        let s = iceberg("https://polaris.example.com/api/catalog/", true).unwrap();
        assert_eq!((s.host.as_str(), s.port), ("polaris.example.com", 443));
        let i = s.iceberg.unwrap();
        assert_eq!(i.uri, "https://polaris.example.com/api/catalog");
        let o = i.oauth2.unwrap();
        assert_eq!(
            (o.token_endpoint.as_str(), o.scope.as_str()),
            (
                "https://polaris.example.com/api/catalog/v1/oauth/tokens",
                "catalog"
            )
        );
        let s = iceberg("http://127.0.0.1:8181", false).unwrap();
        assert_eq!((s.host.as_str(), s.port), ("127.0.0.1", 8181));
        assert_eq!(s.iceberg.unwrap().oauth2, None);
        for bad in [
            "ftp://x",
            "polaris.example.com",
            "https://user:pw@x.example.com",
            "https://x.example.com/?a=b",
            "https:///path",
        ] {
            let e = iceberg(bad, false).unwrap_err();
            assert!(e.contains("spec.connection.uri"), "{bad}: {e}");
            assert!(
                !e.contains("pw"),
                "a password in the URL is not repeated: {e}"
            );
        }
        // A different catalog URL is a different pool.
        let a = iceberg("https://a.example.com", false).unwrap();
        let b = iceberg("https://a.example.com/other", false).unwrap();
        assert_ne!(
            fingerprint(Provider::IcebergRest, &a),
            fingerprint(Provider::IcebergRest, &b)
        );
    }

    #[test]
    fn the_default_ssl_mode_is_verify_full() {
        let mut c = connection();
        c.ssl_mode = None;
        let s = settings_from(&c, Credentials::new("u", "p"), None, None).unwrap();
        assert_eq!(s.ssl_mode, SslMode::VerifyFull);
    }

    #[test]
    fn a_changed_password_host_or_ca_changes_the_fingerprint() {
        let a = settings("p1");
        let b = settings("p2");
        let mut c = a.clone();
        c.host = "other".into();
        let mut d = a.clone();
        d.ca_pem = Some(b"-----BEGIN CERTIFICATE-----".to_vec());
        let fp = |s: &ConnectionSettings| fingerprint(Provider::Postgresql, s);
        assert_eq!(fp(&a), fp(&a.clone()));
        for other in [&b, &c, &d] {
            assert_ne!(fp(&a), fp(other));
        }
        assert_ne!(fp(&a), fingerprint(Provider::Mysql, &a));
    }

    #[tokio::test]
    async fn the_registry_reuses_a_pool_until_the_settings_change() {
        let reg = Registry::default();
        let first = reg
            .provider_for("ns/hr", Provider::Postgresql, settings("p1"))
            .unwrap();
        let again = reg
            .provider_for("ns/hr", Provider::Postgresql, settings("p1"))
            .unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        let rebuilt = reg
            .provider_for("ns/hr", Provider::Postgresql, settings("p2"))
            .unwrap();
        assert!(!Arc::ptr_eq(&first, &rebuilt));
        reg.remove("ns/hr");
        assert!(reg.is_empty());
    }

    #[test]
    fn destinations_name_every_server_that_receives_anything() {
        let shown = |s: &ConnectionSettings| -> Vec<(String, String)> {
            destinations(s)
                .unwrap()
                .iter()
                .map(|d| (d.field.clone(), d.shown()))
                .collect()
        };
        let pair = |f: &str, h: &str| (f.to_string(), h.to_string());
        assert_eq!(
            shown(&settings("p")),
            [pair("spec.connection.host", "db:5432")]
        );

        let mut kafka = connection();
        (kafka.host, kafka.port) = (None, None);
        kafka.bootstrap_servers = vec!["b1:9092".into(), "[fd00::2]:9093".into()];
        let s = settings_from(&kafka, Credentials::new("u", "p"), None, None).unwrap();
        assert_eq!(
            shown(&s),
            [
                pair("spec.connection.bootstrapServers[0]", "b1:9092"),
                pair("spec.connection.bootstrapServers[1]", "[fd00::2]:9093")
            ]
        );

        let mut lake = connection();
        (lake.host, lake.port, lake.database) = (None, None, None);
        lake.uri = Some("https://lake.example.com/api".into());
        lake.oauth2 = Some(crate::crd::catalog::OAuth2Settings {
            token_endpoint: Some("http://idp.example.com:8080/token".into()),
            ..Default::default()
        });
        let s = settings_from(&lake, Credentials::new("id", "secret"), None, None).unwrap();
        assert_eq!(
            shown(&s),
            [
                pair("spec.connection.uri", "lake.example.com:443"),
                pair(
                    "spec.connection.oauth2.tokenEndpoint",
                    "idp.example.com:8080"
                )
            ]
        );
        // The default token endpoint is the catalog itself: the same host, checked twice.
        lake.oauth2 = Some(Default::default());
        let s = settings_from(&lake, Credentials::new("id", "secret"), None, None).unwrap();
        assert_eq!(
            shown(&s)[1],
            pair(
                "spec.connection.oauth2.tokenEndpoint",
                "lake.example.com:443"
            )
        );
    }

    #[tokio::test]
    async fn names_resolve_once_per_interval_and_addresses_are_themselves() {
        let reg = Registry::default();
        assert_eq!(
            reg.resolve("127.0.0.1", 5432).await,
            ["127.0.0.1".parse::<std::net::IpAddr>().unwrap()]
        );
        assert_eq!(
            reg.resolve("::1", 5432).await,
            ["::1".parse::<std::net::IpAddr>().unwrap()]
        );
        assert!(reg.resolve("no-such-host.invalid", 5432).await.is_empty());
        assert!(
            reg.resolved.lock().unwrap().is_empty(),
            "failures and literals are not kept"
        );
        let local = reg.resolve("localhost", 5432).await;
        assert!(
            !local.is_empty() && local.iter().all(|a| a.is_loopback()),
            "{local:?}"
        );
        // A remembered answer is what the next check sees, without asking DNS again.
        let fake: std::net::IpAddr = "192.0.2.7".parse().unwrap();
        reg.resolved.lock().unwrap().insert(
            ("localhost".into(), 5432),
            (std::time::Instant::now(), vec![fake]),
        );
        assert_eq!(reg.resolve("localhost", 5432).await, [fake]);
        let old = std::time::Instant::now() - RESOLVED_REUSE;
        reg.resolved
            .lock()
            .unwrap()
            .insert(("localhost".into(), 5432), (old, vec![fake]));
        assert_ne!(
            reg.resolve("localhost", 5432).await,
            [fake],
            "an expired answer is asked again"
        );
    }
}
