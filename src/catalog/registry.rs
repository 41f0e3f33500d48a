//! One connection pool per Catalog, rebuilt when the Catalog's connection spec or its Secret
//! changes (detected by fingerprinting the resolved settings), and the lookup of a Catalog's
//! provider (its Secret read with `get` only) shared by the controllers and the read API.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, ResourceExt};

use super::mysql::MysqlProvider;
use super::postgres::PostgresProvider;
use super::{
    CatalogProvider, ConnectionSettings, Credentials, Found, Probe, ProbeTarget, ProviderError,
};
use crate::crd::Catalog;
use crate::crd::catalog::{Connection, Provider};
use crate::crd::conditions::Reason;

/// A live provider of either supported system.
pub enum AnyProvider {
    Postgres(PostgresProvider),
    Mysql(MysqlProvider),
}

impl CatalogProvider for AnyProvider {
    async fn check_connection(&self) -> Result<(), ProviderError> {
        match self {
            AnyProvider::Postgres(p) => p.check_connection().await,
            AnyProvider::Mysql(p) => p.check_connection().await,
        }
    }
    async fn probe(&self, targets: &[ProbeTarget]) -> Result<Vec<Probe>, ProviderError> {
        match self {
            AnyProvider::Postgres(p) => p.probe(targets).await,
            AnyProvider::Mysql(p) => p.probe(targets).await,
        }
    }
    async fn find_by_id(&self, native_id: &str) -> Result<Option<Found>, ProviderError> {
        match self {
            AnyProvider::Postgres(p) => p.find_by_id(native_id).await,
            AnyProvider::Mysql(p) => p.find_by_id(native_id).await,
        }
    }
    async fn columns(
        &self,
        schema: &str,
        name: &str,
    ) -> Result<Option<Vec<String>>, ProviderError> {
        match self {
            AnyProvider::Postgres(p) => p.columns(schema, name).await,
            AnyProvider::Mysql(p) => p.columns(schema, name).await,
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
        Provider::Managed => Err(ProviderError::Misconfigured(
            "managed catalogs are never probed".into(),
        )),
    }
}

/// Defaults for every pool (DESIGN 2: bounded connections, connect and statement timeouts).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
pub const MAX_CONNECTIONS: usize = 4;

/// Resolves a Catalog's connection and Secret data into settings; errors name the field to fix.
pub fn settings_from(
    connection: &Connection,
    secret_data: &BTreeMap<String, ByteString>,
) -> Result<ConnectionSettings, String> {
    let r = &connection.credentials_secret_ref;
    let read = |key: &str, field: &str| -> Result<String, String> {
        let bytes = secret_data.get(key).ok_or_else(|| {
            format!("Secret {:?} has no key {key:?} (spec.connection.credentialsSecretRef.{field}); add it or fix the key name", r.name)
        })?;
        String::from_utf8(bytes.0.clone())
            .map_err(|_| format!("Secret {:?} key {key:?} is not UTF-8", r.name))
    };
    let username = read(&r.username_key, "usernameKey")?;
    let password = read(&r.password_key, "passwordKey")?;
    let port = u16::try_from(connection.port)
        .map_err(|_| format!("spec.connection.port {} is not a TCP port", connection.port))?;
    Ok(ConnectionSettings {
        host: connection.host.clone(),
        port,
        database: connection.database.clone(),
        ssl_mode: connection.ssl_mode.unwrap_or_default(),
        credentials: Credentials::new(username, password),
        connect_timeout: CONNECT_TIMEOUT,
        statement_timeout: STATEMENT_TIMEOUT,
        max_connections: MAX_CONNECTIONS,
    })
}

fn fingerprint(provider: Provider, s: &ConnectionSettings) -> u64 {
    let mut h = DefaultHasher::new();
    (
        provider as u8,
        &s.host,
        s.port,
        &s.database,
        s.ssl_mode as u8,
    )
        .hash(&mut h);
    (s.credentials.username(), s.credentials.expose_password()).hash(&mut h);
    (s.connect_timeout, s.statement_timeout, s.max_connections).hash(&mut h);
    h.finish()
}

/// Pools by Catalog key (`namespace/name`).
#[derive(Default)]
pub struct Registry {
    pools: Mutex<HashMap<String, (u64, Arc<AnyProvider>)>>,
}

impl Registry {
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

/// The provider of a probed (non-managed) Catalog and its `host:port`: reads its Secret (get
/// only) and reuses or rebuilds its pool. `Err` only when the API server could not be asked.
pub async fn provider_from(
    client: &kube::Client,
    providers: &Registry,
    cat: &Catalog,
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
    let secret_name = &connection.credentials_secret_ref.name;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let Some(secret) = secrets.get_opt(secret_name).await? else {
        return no(
            Reason::SECRET_NOT_FOUND,
            format!(
                "Secret {secret_name:?} does not exist in namespace {ns:?}; create it or fix spec.connection.credentialsSecretRef.name"
            ),
        );
    };
    let settings = match settings_from(connection, &secret.data.unwrap_or_default()) {
        Ok(s) => s,
        Err(message) => return no(Reason::CREDENTIALS_INVALID, message),
    };
    let endpoint = format!("{}:{}", settings.host, settings.port);
    match providers.provider_for(&registry_key(cat), cat.spec.provider, settings) {
        Ok(p) => Ok(Ok((p, endpoint))),
        Err(e) => no(e.category(), format!("{endpoint}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::catalog::{CredentialsSecretRef, SslMode};

    fn connection() -> Connection {
        Connection {
            host: "db".into(),
            port: 5432,
            database: Some("hr".into()),
            ssl_mode: Some(SslMode::Disable),
            credentials_secret_ref: CredentialsSecretRef {
                name: "creds".into(),
                username_key: "user".into(),
                password_key: "pass".into(),
            },
        }
    }

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, ByteString> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
            .collect()
    }

    #[test]
    fn missing_secret_keys_name_the_field_to_fix() {
        let err = settings_from(&connection(), &data(&[("user", "u")])).unwrap_err();
        assert!(
            err.contains("no key \"pass\"") && err.contains("credentialsSecretRef.passwordKey"),
            "{err}"
        );
        let err = settings_from(&connection(), &data(&[("pass", "p")])).unwrap_err();
        assert!(err.contains("usernameKey"), "{err}");
    }

    #[test]
    fn a_changed_password_or_host_changes_the_fingerprint() {
        let a = settings_from(&connection(), &data(&[("user", "u"), ("pass", "p1")])).unwrap();
        let b = settings_from(&connection(), &data(&[("user", "u"), ("pass", "p2")])).unwrap();
        let mut c = a.clone();
        c.host = "other".into();
        assert_eq!(
            fingerprint(Provider::Postgresql, &a),
            fingerprint(Provider::Postgresql, &a.clone())
        );
        assert_ne!(
            fingerprint(Provider::Postgresql, &a),
            fingerprint(Provider::Postgresql, &b)
        );
        assert_ne!(
            fingerprint(Provider::Postgresql, &a),
            fingerprint(Provider::Postgresql, &c)
        );
        assert_ne!(
            fingerprint(Provider::Postgresql, &a),
            fingerprint(Provider::Mysql, &a)
        );
    }

    #[tokio::test]
    async fn the_registry_reuses_a_pool_until_the_settings_change() {
        let reg = Registry::default();
        let a = settings_from(&connection(), &data(&[("user", "u"), ("pass", "p1")])).unwrap();
        let first = reg
            .provider_for("ns/hr", Provider::Postgresql, a.clone())
            .unwrap();
        let again = reg
            .provider_for("ns/hr", Provider::Postgresql, a.clone())
            .unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        let b = settings_from(&connection(), &data(&[("user", "u"), ("pass", "p2")])).unwrap();
        let rebuilt = reg.provider_for("ns/hr", Provider::Postgresql, b).unwrap();
        assert!(!Arc::ptr_eq(&first, &rebuilt));
        reg.remove("ns/hr");
        assert!(reg.is_empty());
    }
}
