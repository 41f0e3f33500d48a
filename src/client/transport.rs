//! Sends a question: through the Kubernetes API server (the aggregated API) with the
//! kubeconfig's user, whatever it authenticates with; or to the direct port with a bearer token,
//! https verified against a given CA (or the web PKI), and a token never over plain HTTP except
//! to loopback.

use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::query::Query;
use super::routes::Family;

/// Where and as whom to ask (the CLI's flags, the console's settings).
#[derive(Clone, Debug, Default)]
pub struct Connection {
    /// The namespace asked by default; else the kubeconfig context's.
    pub namespace: Option<String>,
    /// The direct port's URL; `None` goes through the Kubernetes API server.
    pub server: Option<String>,
    /// CA certificate (PEM) that verifies an https `server`.
    pub ca: Option<std::path::PathBuf>,
    /// Bearer token for `server`; defaults to the kubeconfig user's token, if it has one.
    pub token: Option<String>,
    /// Path of the kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    pub kubeconfig: Option<std::path::PathBuf>,
    /// kubeconfig context (default: the current one).
    pub context: Option<String>,
}

/// The kubeconfig the connection names (or the default one, or in-cluster).
async fn kube_config(api: &Connection) -> anyhow::Result<kube::Config> {
    let options = kube::config::KubeConfigOptions {
        context: api.context.clone(),
        ..Default::default()
    };
    let config = match &api.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| anyhow::anyhow!("--kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options).await?
        }
        None if api.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer().await?,
    };
    Ok(config)
}

/// Where the read API is asked, resolved once (the MCP server and the console ask many times).
pub struct ReadApi {
    target: Target,
    /// `-n`, else the kubeconfig context's namespace (`default` without a kubeconfig).
    pub default_namespace: String,
}

enum Target {
    /// The aggregated API, as the kubeconfig's user.
    ApiServer(kube::Client),
    /// The direct port with a bearer token.
    Direct {
        server: String,
        tls: Option<Box<rustls::ClientConfig>>,
        token: Option<String>,
    },
}

impl ReadApi {
    pub async fn connect(api: &Connection) -> anyhow::Result<ReadApi> {
        match &api.server {
            None => {
                let config = kube_config(api).await.map_err(|e| {
                    anyhow::anyhow!("no kubeconfig to reach the Kubernetes API server ({e}); use --kubeconfig, or --server for the direct port")
                })?;
                let default_namespace = api
                    .namespace
                    .clone()
                    .unwrap_or_else(|| config.default_namespace.clone());
                Ok(ReadApi {
                    target: Target::ApiServer(kube::Client::try_from(config)?),
                    default_namespace,
                })
            }
            Some(server) => {
                // The namespace still defaults to the kubeconfig's, when there is one.
                let default_namespace = match &api.namespace {
                    Some(ns) => ns.clone(),
                    None => kube_config(api)
                        .await
                        .map(|c| c.default_namespace)
                        .unwrap_or_else(|_| "default".into()),
                };
                let tls = match api.ca.as_deref() {
                    Some(ca) => Some(Box::new(tls_with_ca(ca)?)),
                    None => None,
                };
                Ok(ReadApi {
                    target: Target::Direct {
                        server: server.clone(),
                        tls,
                        token: api.token.clone().or_else(kubeconfig_token),
                    },
                    default_namespace,
                })
            }
        }
    }

    /// One question in namespace `ns`: `(status, body)`.
    pub async fn ask(&self, ns: &str, query: &Query) -> anyhow::Result<(u16, Value)> {
        match &self.target {
            Target::ApiServer(client) => {
                let r = query.request(ns, Family::Aggregated);
                through_api_server(client, r.method, &r.path, r.body.as_ref()).await
            }
            Target::Direct { server, tls, token } => {
                let r = query.request(ns, Family::Direct);
                request_with(
                    server,
                    tls.as_deref().cloned(),
                    r.method,
                    &r.path,
                    token.as_deref(),
                    r.body.as_ref(),
                )
                .await
            }
        }
    }
}

/// One request through the API server (aggregated API), as the kubeconfig's user.
pub async fn through_api_server(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> anyhow::Result<(u16, Value)> {
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(payload.into_bytes()))?;
    let resp = client
        .send(req)
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach the Kubernetes API server: {e}"))?;
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await?.to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into()));
    if status == 404 && value.get("kind").is_some_and(|k| k == "Status") {
        anyhow::bail!(
            "the API server does not serve query.semops.io/v1alpha1 here (is the chart installed with api.aggregated=true, and the APIService Available?)"
        );
    }
    Ok((status, value))
}

/// A client config trusting only the CA in `path`.
fn tls_with_ca(path: &std::path::Path) -> anyhow::Result<rustls::ClientConfig> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let pem = std::fs::read(path).map_err(|e| anyhow::anyhow!("--ca {}: {e}", path.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots
            .add(cert.map_err(|e| anyhow::anyhow!("--ca {}: {e:?}", path.display()))?)
            .map_err(|e| anyhow::anyhow!("--ca {}: {e}", path.display()))?;
    }
    if roots.is_empty() {
        anyhow::bail!("--ca {}: no PEM certificate in the file", path.display());
    }
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth())
}

/// Whether `host` (of a URL) is this machine's loopback.
pub fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// GETs `path` from the direct port; returns the status and the JSON body.
pub async fn get(server: &str, path: &str, token: Option<&str>) -> anyhow::Result<(u16, Value)> {
    request(server, "GET", path, token, None).await
}

/// Sends `method path` to the direct port (https verified by the web PKI roots).
pub async fn request(
    server: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> anyhow::Result<(u16, Value)> {
    request_with(server, None, method, path, token, body).await
}

/// Sends `method path` (with a JSON `body` when given) to the direct port at `server`; https is
/// verified with `tls` (default: the web PKI roots). A token never goes over plain HTTP to
/// anything but loopback.
pub async fn request_with(
    server: &str,
    tls: Option<rustls::ClientConfig>,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> anyhow::Result<(u16, Value)> {
    let uri: hyper::Uri = format!("{}{path}", server.trim_end_matches('/'))
        .parse()
        .map_err(|e| anyhow::anyhow!("--server {server:?} is not a URL: {e}"))?;
    let host = uri.host().unwrap_or_default().to_string();
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => anyhow::bail!("--server {server:?} must start with https:// or http://"),
    };
    if !https && token.is_some() && !is_loopback(&host) {
        anyhow::bail!(
            "refusing to send a bearer token over plain HTTP to {host}: use https:// (with --ca), or the API server (leave out --server)"
        );
    }
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(uri.path_and_query().map(|p| p.as_str()).unwrap_or("/"))
        .header("host", uri.authority().map(|a| a.as_str()).unwrap_or(&host))
        .header("content-type", "application/json");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let req = req.body(Full::new(Bytes::from(payload)))?;
    let unreachable =
        |e: &dyn std::fmt::Display| anyhow::anyhow!("cannot reach the semops API at {server}: {e}");
    let tcp =
        tokio::net::TcpStream::connect((host.trim_start_matches('[').trim_end_matches(']'), port))
            .await
            .map_err(|e| unreachable(&e))?;
    let resp = if https {
        let config = match tls {
            Some(c) => c,
            None => rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            })
            .with_no_client_auth(),
        };
        let name = rustls::pki_types::ServerName::try_from(
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
        )
        .map_err(|e| anyhow::anyhow!("--server host {host:?}: {e}"))?;
        let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| unreachable(&e))?;
        send(TokioIo::new(stream), req).await
    } else {
        send(TokioIo::new(tcp), req).await
    }
    .map_err(|e| unreachable(&e))?;
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await?.to_bytes();
    let value = serde_json::from_slice(&body)
        .unwrap_or(Value::String(String::from_utf8_lossy(&body).into()));
    Ok((status, value))
}

async fn send<I>(
    io: TokioIo<I>,
    req: hyper::Request<Full<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, hyper::Error>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await?;
    tokio::spawn(conn);
    sender.send_request(req).await
}

/// The bearer token of the current kubeconfig user, when it authenticates with one.
pub fn kubeconfig_token() -> Option<String> {
    let kc = kube::config::Kubeconfig::read().ok()?;
    let context = kc.current_context.as_ref()?;
    let user = kc
        .contexts
        .iter()
        .find(|c| &c.name == context)?
        .context
        .as_ref()?
        .user
        .clone()?;
    let auth = kc
        .auth_infos
        .iter()
        .find(|a| a.name == user)?
        .auth_info
        .as_ref()?;
    auth.token
        .as_ref()
        .map(|t| secrecy::ExposeSecret::expose_secret(t).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_goes_over_plain_http_only_to_loopback() {
        for (host, loopback) in [
            ("127.0.0.1", true),
            ("127.8.9.1", true),
            ("localhost", true),
            ("[::1]", true),
            ("10.0.0.5", false),
            ("semops.semops-system.svc", false),
            ("localhost.evil.example", false),
        ] {
            assert_eq!(is_loopback(host), loopback, "{host}");
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let refused = runtime
            .block_on(request(
                "http://10.0.0.5:8090",
                "GET",
                "/x",
                Some("secret"),
                None,
            ))
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("refusing to send a bearer token over plain HTTP"),
            "{refused}"
        );
        assert!(!refused.contains("secret"), "the token is never echoed");
        let bad = runtime
            .block_on(request("ftp://127.0.0.1", "GET", "/x", None, None))
            .unwrap_err()
            .to_string();
        assert!(bad.contains("https:// or http://"), "{bad}");
    }
}
