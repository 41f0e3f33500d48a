//! The read API's TLS: the serving certificate from files (a mounted Secret), re-read when they
//! change so a rotation needs no restart, and, when the API server announces a front proxy,
//! optional client certificates verified against its request-header CA. A connection whose
//! certificate verified and names an allowed front proxy is trusted to name its user.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

use super::front_proxy::{self, FrontProxy};

/// How often the certificate files and the front-proxy ConfigMap are re-read.
pub const REFRESH_EVERY: Duration = Duration::from_secs(15);

/// What a handshake uses: the config and the front proxy it verifies client certificates for.
pub struct Current {
    pub config: Arc<ServerConfig>,
    pub front_proxy: Option<Arc<FrontProxy>>,
}

/// The serving side of the read API's TLS.
pub struct Serving {
    cert_file: PathBuf,
    key_file: PathBuf,
    current: ArcSwap<Current>,
    /// What the current config was built from (files' bytes and the front proxy).
    built_from: Mutex<(Vec<u8>, Vec<u8>, Option<FrontProxy>)>,
    /// Bumped on every new config: a connection made under an older one is closed gracefully,
    /// because what it trusts (the front proxy) was fixed at its handshake. The API server keeps
    /// its connections for hours; one opened before the front-proxy settings were read would
    /// otherwise answer every aggregated request 401.
    generation: tokio::sync::watch::Sender<u64>,
    /// Whether the front-proxy settings were read once (or are not needed): before that the
    /// read API is not ready, so no Service routes the API server to it.
    settled: tokio::sync::watch::Sender<bool>,
}

impl Serving {
    /// Loads the certificate chain and key; an error names the file and the fix.
    pub fn load(cert_file: PathBuf, key_file: PathBuf) -> Result<Arc<Serving>, String> {
        let (cert, key) = read_pair(&cert_file, &key_file)?;
        let config = build(&cert, &key, None)?;
        Ok(Arc::new(Serving {
            cert_file,
            key_file,
            current: ArcSwap::from_pointee(Current {
                config: Arc::new(config),
                front_proxy: None,
            }),
            built_from: Mutex::new((cert, key, None)),
            generation: tokio::sync::watch::Sender::new(0),
            settled: tokio::sync::watch::Sender::new(false),
        }))
    }

    pub fn current(&self) -> Arc<Current> {
        self.current.load_full()
    }

    /// Fires when the config changes after this call; a connection takes it before its handshake.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Records that the front-proxy settings were read (or that there is nothing to read).
    pub fn mark_settled(&self) {
        self.settled.send_replace(true);
    }

    /// Waits until [`Serving::mark_settled`].
    pub async fn settled(&self) {
        let mut rx = self.settled.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    /// Re-reads the files and takes `front_proxy`; rebuilds only when something changed.
    /// Returns whether it did. On an error the config in use stays.
    pub fn refresh(&self, front_proxy: Option<FrontProxy>) -> Result<bool, String> {
        let (cert, key) = read_pair(&self.cert_file, &self.key_file)?;
        let mut built = self.built_from.lock().expect("tls state poisoned");
        if built.0 == cert && built.1 == key && built.2 == front_proxy {
            return Ok(false);
        }
        let config = build(&cert, &key, front_proxy.as_ref())?;
        self.current.store(Arc::new(Current {
            config: Arc::new(config),
            front_proxy: front_proxy.clone().map(Arc::new),
        }));
        *built = (cert, key, front_proxy);
        self.generation.send_modify(|g| *g += 1);
        Ok(true)
    }
}

fn read_pair(cert_file: &PathBuf, key_file: &PathBuf) -> Result<(Vec<u8>, Vec<u8>), String> {
    let read = |p: &PathBuf, flag: &str| {
        std::fs::read(p).map_err(|e| {
            format!(
                "{flag} {}: {e}; point it at a readable PEM file (the chart mounts the semops-api-tls Secret)",
                p.display()
            )
        })
    };
    Ok((
        read(cert_file, "--api-tls-cert-file")?,
        read(key_file, "--api-tls-key-file")?,
    ))
}

/// A server config for this certificate and key, asking for (never requiring) a client
/// certificate signed by the front proxy's CA when there is one.
pub fn build(
    cert_pem: &[u8],
    key_pem: &[u8],
    front_proxy: Option<&FrontProxy>,
) -> Result<ServerConfig, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--api-tls-cert-file: not a PEM certificate chain: {e:?}"))?;
    if certs.is_empty() {
        return Err("--api-tls-cert-file: no certificate in the file".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|_| "--api-tls-key-file: no PEM private key in the file".to_string())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match front_proxy {
        None => builder.with_no_client_auth(),
        Some(fp) => {
            let mut roots = rustls::RootCertStore::empty();
            for ca in CertificateDer::pem_slice_iter(fp.client_ca_pem.as_bytes()) {
                let ca = ca.map_err(|e| {
                    format!(
                        "{}: requestheader-client-ca-file: {e:?}",
                        front_proxy::CONFIG_MAP_NAME
                    )
                })?;
                roots.add(ca).map_err(|e| {
                    format!(
                        "{}: requestheader-client-ca-file: {e}",
                        front_proxy::CONFIG_MAP_NAME
                    )
                })?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .allow_unauthenticated()
            .build()
            .map_err(|e| {
                format!(
                    "{}: requestheader-client-ca-file: {e}",
                    front_proxy::CONFIG_MAP_NAME
                )
            })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("--api-tls-cert-file/--api-tls-key-file: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The front proxy a handshaken connection speaks for: its verified certificate names an
/// allowed front proxy. Anything else (no certificate, another name) is a plain client.
pub fn front_proxy_of(
    current: &Current,
    conn: &rustls::ServerConnection,
) -> Option<Arc<FrontProxy>> {
    let fp = current.front_proxy.as_ref()?;
    let leaf = conn.peer_certificates()?.first()?;
    fp.allows(front_proxy::common_name(leaf).as_deref())
        .then(|| fp.clone())
}

/// How long until the next refresh after `failures` failed ones in a row: 1, 2, 4, 8 s, then
/// every [`REFRESH_EVERY`]. A replica that starts before its RoleBinding on the front-proxy
/// ConfigMap takes effect would otherwise answer aggregated requests 401 for a whole period,
/// while its twin, started a moment later, answers them.
pub fn next_refresh(failures: u32) -> Duration {
    match failures {
        0 => REFRESH_EVERY,
        n => Duration::from_secs(1 << (n - 1).min(3)).min(REFRESH_EVERY),
    }
}

/// Keeps `serving` in step with its files and, with a client, the API server's front-proxy
/// settings; logs a change once and a failure once until it changes.
pub async fn keep_fresh(
    serving: Arc<Serving>,
    client: Option<kube::Client>,
    shutdown: CancellationToken,
) {
    let mut last_problem = String::new();
    let mut front: Option<FrontProxy> = None;
    let mut failures: u32 = 0;
    loop {
        let mut problem = String::new();
        if let Some(client) = &client {
            let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
                kube::Api::namespaced(client.clone(), front_proxy::CONFIG_MAP_NAMESPACE);
            match api.get_opt(front_proxy::CONFIG_MAP_NAME).await {
                Ok(cm) => match FrontProxy::from_data(&cm.and_then(|c| c.data).unwrap_or_default())
                {
                    Ok(fp) => front = fp,
                    Err(e) => problem = e,
                },
                // Keep the last settings: an API server hiccup must not drop the aggregated API.
                Err(e) => {
                    problem = format!(
                        "reading {}/{}: {e} (the chart binds the extension-apiserver-authentication-reader Role)",
                        front_proxy::CONFIG_MAP_NAMESPACE,
                        front_proxy::CONFIG_MAP_NAME
                    )
                }
            }
        }
        match serving.refresh(front.clone()) {
            Ok(true) => tracing::info!(
                front_proxy = front.is_some(),
                "read API TLS configuration (re)loaded"
            ),
            Ok(false) => {}
            Err(e) => problem = e,
        }
        if problem != last_problem {
            if !problem.is_empty() {
                tracing::warn!(problem = %problem, "read API TLS settings not refreshed; the previous ones stay in use");
            }
            last_problem = problem;
        }
        failures = if last_problem.is_empty() {
            serving.mark_settled();
            0
        } else {
            failures + 1
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(next_refresh(failures)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_refresh_is_retried_soon_then_at_the_normal_period() {
        let secs: Vec<u64> = (0..7).map(|n| next_refresh(n).as_secs()).collect();
        assert_eq!(secs, [15, 1, 2, 4, 8, 8, 8]);
        assert_eq!(next_refresh(u32::MAX), Duration::from_secs(8));
    }
}
