//! `semops lookup | metrics | models | history | lineage | stale`: the read API from a terminal (also
//! `kubectl semops …`). By default through the Kubernetes API server (the aggregated API) with
//! the kubeconfig's user, whatever it authenticates with; with `--server`, the direct port and
//! the bearer token of `--token` (or the kubeconfig user's). Every URL is filled in from the
//! route constants the server itself routes by.

use std::process::ExitCode;

use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::Value;

use crate::api::paths::{self, fill};

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
    Yaml,
    /// Graphviz DOT (lineage only).
    Dot,
    /// Mermaid flowchart (lineage only).
    Mermaid,
}

/// The root of a lineage graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LineageRoot {
    Model,
    Table,
    View,
}

/// A table or a view (a CLI argument, and an MCP tool argument: `table` or `view`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SourceType {
    Table,
    View,
}

impl SourceType {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceType::Table => "table",
            SourceType::View => "view",
        }
    }
}

/// Where and as whom the query verbs ask.
#[derive(clap::Args)]
pub struct ApiArgs {
    /// Namespace (the Gravitino metalake); defaults to the kubeconfig context's namespace.
    #[arg(short = 'n', long, env = "SEMOPS_NAMESPACE")]
    pub namespace: Option<String>,
    /// The direct port instead of the Kubernetes API server, e.g. `https://semops.semops-system.svc:8090`
    /// (or `http://127.0.0.1:8090` for a local `semops run`). Without it, queries go through the
    /// API server (aggregated API `query.semops.io`) as the kubeconfig's user, whatever it uses.
    #[arg(long, env = "SEMOPS_API")]
    pub server: Option<String>,
    /// CA certificate (PEM) that verifies an https `--server`; the chart's is in the
    /// `<release>-api-tls` Secret (`ca.crt`).
    #[arg(long, requires = "server")]
    pub ca: Option<std::path::PathBuf>,
    /// Bearer token for `--server` (`kubectl create token NAME --audience semops`); defaults to
    /// the kubeconfig user's token, if it has one. Never sent over plain HTTP except to loopback.
    #[arg(long, env = "SEMOPS_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Path of the kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// kubeconfig context to use (default: the current one).
    #[arg(long)]
    pub context: Option<String>,
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: Output,
}

/// One question to the read API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Query {
    Lookup {
        object_type: String,
        full_name: String,
    },
    Metrics {
        catalog: String,
        schema: String,
        details: bool,
    },
    Models {
        catalog: String,
        schema: String,
        name: Option<String>,
    },
    ModelLineage {
        catalog: String,
        schema: String,
        name: String,
    },
    /// Every model of the namespace, optionally of one catalog or schema.
    NamespaceModels {
        catalog: Option<String>,
        schema: Option<String>,
    },
    /// One metric by its stable id.
    Metric {
        id: String,
    },
    /// A model as a kept earlier revision accepted it.
    ModelRevision {
        catalog: String,
        schema: String,
        name: String,
        revision: i64,
    },
    /// A model's kept revisions and the metric ids each added and retired.
    History {
        catalog: String,
        schema: String,
        name: String,
    },
    SourceLineage {
        object_type: String,
        full_name: String,
    },
    Stale {
        catalog: String,
    },
    /// What breaks if `columns` (or, when empty, the whole object) went away.
    Impact {
        object_type: String,
        full_name: String,
        columns: Vec<String>,
    },
    Reconcile {
        catalog: String,
        dry_run: bool,
    },
}

impl Query {
    /// `lineage model C S N` or `lineage table|view C.S.N`; `Err` is the usage line.
    pub fn lineage(root: LineageRoot, names: Vec<String>) -> Result<Query, &'static str> {
        match (
            root,
            <[String; 3]>::try_from(names.clone()),
            names.as_slice(),
        ) {
            (LineageRoot::Model, Ok([catalog, schema, name]), _) => Ok(Query::ModelLineage {
                catalog,
                schema,
                name,
            }),
            (LineageRoot::Table | LineageRoot::View, _, [full]) => Ok(Query::SourceLineage {
                object_type: if root == LineageRoot::Table {
                    "table"
                } else {
                    "view"
                }
                .into(),
                full_name: full.clone(),
            }),
            _ => Err(
                "use `semops lineage model CATALOG SCHEMA NAME` or `semops lineage table|view CATALOG.SCHEMA.NAME`",
            ),
        }
    }

    /// Method, path (with query string) and JSON body of the request in namespace `ns`.
    pub fn request(&self, ns: &str) -> (&'static str, String, Option<Value>) {
        let get = |path: String| ("GET", path, None);
        match self {
            Query::Lookup {
                object_type,
                full_name,
            } => get(fill(
                paths::SOURCE_DATASETS,
                &[
                    ("ns", ns),
                    ("object_type", object_type),
                    ("full_name", full_name),
                ],
            )),
            Query::Metrics {
                catalog,
                schema,
                details,
            } => get(format!(
                "{}{}",
                fill(
                    paths::SCHEMA_METRICS,
                    &[("ns", ns), ("catalog", catalog), ("schema", schema)]
                ),
                details_query(*details)
            )),
            Query::Models {
                catalog,
                schema,
                name: None,
            } => get(fill(
                paths::MODELS,
                &[("ns", ns), ("catalog", catalog), ("schema", schema)],
            )),
            Query::Models {
                catalog,
                schema,
                name: Some(name),
            } => get(fill(
                paths::MODEL,
                &[
                    ("ns", ns),
                    ("catalog", catalog),
                    ("schema", schema),
                    ("name", name),
                ],
            )),
            Query::ModelLineage {
                catalog,
                schema,
                name,
            } => get(fill(
                paths::MODEL_LINEAGE,
                &[
                    ("ns", ns),
                    ("catalog", catalog),
                    ("schema", schema),
                    ("name", name),
                ],
            )),
            Query::NamespaceModels { catalog, schema } => {
                get(fill(paths::NS_MODELS, &[("ns", ns)]) + &filter_query(catalog, schema))
            }
            Query::Metric { id } => get(fill(paths::METRIC, &[("ns", ns), ("id", id)])),
            Query::ModelRevision {
                catalog,
                schema,
                name,
                revision,
            } => get(format!(
                "{}?revision={revision}",
                fill(
                    paths::MODEL,
                    &[
                        ("ns", ns),
                        ("catalog", catalog),
                        ("schema", schema),
                        ("name", name)
                    ]
                )
            )),
            Query::History {
                catalog,
                schema,
                name,
            } => get(fill(
                paths::MODEL_VERSIONS,
                &[
                    ("ns", ns),
                    ("catalog", catalog),
                    ("schema", schema),
                    ("name", name),
                ],
            )),
            Query::SourceLineage {
                object_type,
                full_name,
            } => get(fill(
                paths::SOURCE_LINEAGE,
                &[
                    ("ns", ns),
                    ("object_type", object_type),
                    ("full_name", full_name),
                ],
            )),
            Query::Stale { catalog } => get(fill(
                paths::STALE_ENTITIES,
                &[("ns", ns), ("catalog", catalog)],
            )),
            Query::Impact {
                object_type,
                full_name,
                columns,
            } => get(fill(
                paths::SOURCE_IMPACT,
                &[
                    ("ns", ns),
                    ("object_type", object_type),
                    ("full_name", full_name),
                ],
            ) + &columns_query(columns)),
            Query::Reconcile { catalog, dry_run } => (
                "POST",
                fill(paths::RECONCILE, &[("ns", ns), ("catalog", catalog)]),
                Some(serde_json::json!({ "dryRun": dry_run })),
            ),
        }
    }
}

impl Query {
    /// The same request on the aggregated API (through the Kubernetes API server): names are
    /// dotted, each part quoted the Ossie way when it needs it.
    pub fn aggregated_request(&self, ns: &str) -> (&'static str, String, Option<Value>) {
        use crate::ossie::source_ref::format_segment as q;
        let get = |path: String| ("GET", path, None);
        let source_route = |object_type: &str, tables, views| {
            if object_type == "view" { views } else { tables }
        };
        match self {
            Query::Lookup {
                object_type,
                full_name,
            } => get(fill(
                source_route(
                    object_type,
                    paths::AGG_TABLE_DATASETS,
                    paths::AGG_VIEW_DATASETS,
                ),
                &[("ns", ns), ("name", full_name)],
            )),
            Query::Metrics {
                catalog,
                schema,
                details,
            } => get(format!(
                "{}{}",
                fill(
                    paths::AGG_SCHEMA_METRICS,
                    &[
                        ("ns", ns),
                        ("name", &format!("{}.{}", q(catalog), q(schema)))
                    ]
                ),
                details_query(*details)
            )),
            Query::Models {
                catalog,
                schema,
                name: None,
            } => get(fill(
                paths::AGG_SCHEMA_MODELS,
                &[
                    ("ns", ns),
                    ("name", &format!("{}.{}", q(catalog), q(schema))),
                ],
            )),
            Query::Models {
                catalog,
                schema,
                name: Some(name),
            } => get(fill(
                paths::AGG_MODEL,
                &[
                    ("ns", ns),
                    ("name", &format!("{}.{}.{}", q(catalog), q(schema), q(name))),
                ],
            )),
            Query::ModelLineage {
                catalog,
                schema,
                name,
            } => get(fill(
                paths::AGG_MODEL_LINEAGE,
                &[
                    ("ns", ns),
                    ("name", &format!("{}.{}.{}", q(catalog), q(schema), q(name))),
                ],
            )),
            Query::NamespaceModels { catalog, schema } => {
                get(fill(paths::AGG_NS_MODELS, &[("ns", ns)]) + &filter_query(catalog, schema))
            }
            Query::Metric { id } => get(fill(paths::AGG_METRIC, &[("ns", ns), ("name", id)])),
            Query::ModelRevision {
                catalog,
                schema,
                name,
                revision,
            } => get(format!(
                "{}?revision={revision}",
                fill(
                    paths::AGG_MODEL,
                    &[
                        ("ns", ns),
                        ("name", &format!("{}.{}.{}", q(catalog), q(schema), q(name)))
                    ]
                )
            )),
            Query::History {
                catalog,
                schema,
                name,
            } => get(fill(
                paths::AGG_MODEL_VERSIONS,
                &[
                    ("ns", ns),
                    ("name", &format!("{}.{}.{}", q(catalog), q(schema), q(name))),
                ],
            )),
            Query::SourceLineage {
                object_type,
                full_name,
            } => get(fill(
                source_route(
                    object_type,
                    paths::AGG_TABLE_LINEAGE,
                    paths::AGG_VIEW_LINEAGE,
                ),
                &[("ns", ns), ("name", full_name)],
            )),
            Query::Stale { catalog } => get(fill(
                paths::AGG_STALE_ENTITIES,
                &[("ns", ns), ("name", catalog)],
            )),
            Query::Impact {
                object_type,
                full_name,
                columns,
            } => get(fill(
                source_route(object_type, paths::AGG_TABLE_IMPACT, paths::AGG_VIEW_IMPACT),
                &[("ns", ns), ("name", full_name)],
            ) + &columns_query(columns)),
            Query::Reconcile { catalog, dry_run } => (
                "POST",
                fill(paths::AGG_RECONCILE, &[("ns", ns), ("name", catalog)]),
                Some(serde_json::json!({ "dryRun": dry_run })),
            ),
        }
    }
}

/// `?details=true&ids=true` (definitions with their stable ids) or `?details=false`.
fn details_query(details: bool) -> &'static str {
    if details {
        "?details=true&ids=true"
    } else {
        "?details=false"
    }
}

/// `?catalog=C&schema=S` with the given ones (percent-encoded), or nothing.
fn filter_query(catalog: &Option<String>, schema: &Option<String>) -> String {
    let parts: Vec<String> = [("catalog", catalog), ("schema", schema)]
        .into_iter()
        .filter_map(|(k, v)| {
            v.as_ref()
                .map(|v| format!("{k}={}", paths::encode_segment(v)))
        })
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

/// `?columns=a,b` (each name percent-encoded), or nothing for the whole object.
fn columns_query(columns: &[String]) -> String {
    if columns.is_empty() {
        return String::new();
    }
    let encoded: Vec<String> = columns
        .iter()
        .map(|c| crate::api::paths::fill("{c}", &[("c", c)]))
        .collect();
    format!("?columns={}", encoded.join(","))
}

/// Exit code of `semops impact` when something would break (1 and 2 stay errors).
pub const BREAKS: u8 = 3;

/// Runs one query and prints the answer; exit code 1 when the API answers with an error, 2 when
/// it cannot be asked, 3 when an impact question finds something that would break.
pub fn main(api: &ApiArgs, query: Query) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(ask(api, &query)) {
        Ok((200, body)) => {
            print!("{}", render(&body, api.output));
            if body["breaks"] == true {
                ExitCode::from(BREAKS)
            } else {
                ExitCode::SUCCESS
            }
        }
        Ok((status, body)) => {
            let message = body
                .get("message")
                .and_then(|m| m.as_str())
                .unwrap_or("unexpected answer");
            let type_ = body
                .get("type")
                .or_else(|| body.get("reason"))
                .and_then(|m| m.as_str())
                .unwrap_or("");
            eprintln!("error: {status} {type_}: {message}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The kubeconfig the flags name (or the default one, or in-cluster).
async fn kube_config(api: &ApiArgs) -> anyhow::Result<kube::Config> {
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

/// Asks the API: through the Kubernetes API server by default, the direct port with `--server`.
pub async fn ask(api: &ApiArgs, query: &Query) -> anyhow::Result<(u16, Value)> {
    let read_api = ReadApi::connect(api).await?;
    let ns = read_api.default_namespace.clone();
    read_api.ask(&ns, query).await
}

/// Where the read API is asked, resolved once from the flags (the `mcp` server asks many times).
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
    pub async fn connect(api: &ApiArgs) -> anyhow::Result<ReadApi> {
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
                let (method, path, body) = query.aggregated_request(ns);
                through_api_server(client, method, &path, body.as_ref()).await
            }
            Target::Direct { server, tls, token } => {
                let (method, path, body) = query.request(ns);
                request_with(
                    server,
                    tls.as_deref().cloned(),
                    method,
                    &path,
                    token.as_deref(),
                    body.as_ref(),
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

/// The strings of a JSON array (the components of an identifier's namespace).
fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|s| s.as_str().unwrap_or_default().to_string())
        .collect()
}

/// Renders an API answer; identifiers become a table of their components.
/// An impact answer as a table: one line per model, dataset and column.
fn render_impacts(value: &Value) -> String {
    let impacts = value["impacts"].as_array().cloned().unwrap_or_default();
    let source = value["source"].as_str().unwrap_or_default();
    if impacts.is_empty() {
        let columns = strings(&value["columns"]);
        return if columns.is_empty() {
            format!("nothing uses {source} in the models you may see\n")
        } else {
            format!(
                "nothing uses {} of {source} in the models you may see\n",
                columns.join(", ")
            )
        };
    }
    let rows = impacts.iter().map(|i| {
        let ns = strings(&i["namespace"]);
        let text = |k: &str, default: &str| i[k].as_str().unwrap_or(default).to_string();
        vec![
            format!(
                "{}.{}",
                ns.iter().skip(1).cloned().collect::<Vec<_>>().join("."),
                text("model", "")
            ),
            text("dataset", ""),
            text("column", "*"),
            strings(&i["usedBy"]).join(", "),
        ]
    });
    let header = ["MODEL", "DATASET", "COLUMN", "USED BY"].map(String::from);
    aligned(std::iter::once(header.to_vec()).chain(rows))
}

/// One row per kept revision: `+name` for each id it added, `-name` for each it retired
/// (`?` when the revision before it is no longer kept).
fn render_versions(value: &Value) -> String {
    let versions = value["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        return "No revisions kept.\n".into();
    }
    let names = |v: &Value, sign: char| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|m| format!("{sign}{}", m["name"].as_str().unwrap_or_default()))
            .collect()
    };
    let rows = versions.iter().map(|v| {
        let mut changes = match v.get("metricsAdded") {
            Some(added) => names(added, '+'),
            None => vec!["?".into()],
        };
        changes.extend(names(&v["metricsRetired"], '-'));
        let hash = v["definitionHash"].as_str().unwrap_or_default();
        vec![
            v["revision"].to_string(),
            v["created"].as_str().unwrap_or_default().to_string(),
            hash.chars().take(12).collect(),
            if v["current"] == true { "*" } else { "" }.to_string(),
            changes.join(" "),
        ]
    });
    let header = ["REVISION", "CREATED", "DEFINITION", "CURRENT", "METRIC IDS"].map(String::from);
    aligned(std::iter::once(header.to_vec()).chain(rows))
}

/// Rows as left-aligned columns three spaces apart (the first row is the header).
fn aligned(rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let all: Vec<Vec<String>> = rows.into_iter().collect();
    let widths: Vec<usize> = (0..all.first().map_or(0, Vec::len))
        .map(|c| {
            all.iter()
                .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    all.iter()
        .map(|r| {
            r.iter()
                .enumerate()
                .map(|(i, s)| format!("{s:<w$}", w = widths[i]))
                .collect::<Vec<_>>()
                .join("   ")
                .trim_end()
                .to_string()
                + "\n"
        })
        .collect()
}

pub fn render(value: &Value, output: Output) -> String {
    let graph = value.get("graphKind").is_some();
    match output {
        Output::Json => serde_json::to_string_pretty(value).unwrap_or_default(),
        Output::Yaml => serde_saphyr::to_string(value).unwrap_or_default(),
        Output::Dot if graph => crate::lineage::render::dot(value),
        Output::Mermaid if graph => crate::lineage::render::mermaid(value),
        Output::Dot | Output::Mermaid => serde_saphyr::to_string(value).unwrap_or_default(),
        Output::Table if value.get("impacts").is_some() => render_impacts(value),
        Output::Table if value.get("versions").is_some() => render_versions(value),
        Output::Table => {
            let rows: Vec<Vec<String>> = if let Some(ids) =
                value.get("identifiers").and_then(Value::as_array)
            {
                ids.iter()
                    .map(|i| {
                        let mut row = strings(&i["namespace"]);
                        row.push(i["name"].as_str().unwrap_or_default().to_string());
                        row
                    })
                    .collect()
            } else if let Some(ms) = value.get("metrics").and_then(Value::as_array) {
                ms.iter()
                    .map(|m| {
                        let mut row = strings(&m["namespace"]);
                        row.push(m["metric"]["name"].as_str().unwrap_or_default().to_string());
                        row.push(
                            m["metric"]["expression"]["dialects"][0]["expression"]
                                .as_str()
                                .unwrap_or_default()
                                .to_string(),
                        );
                        row
                    })
                    .collect()
            } else if let (true, Some(ns)) = (graph, value.get("nodes").and_then(Value::as_array)) {
                ns.iter()
                    .map(|n| {
                        let text = |k: &str| n[k].as_str().unwrap_or_default().to_string();
                        vec![text("kind"), text("name"), text("id")]
                    })
                    .collect()
            } else if let Some(es) = value.get("staleEntities").and_then(Value::as_array) {
                if value["catalogUnreachable"] == true {
                    return format!(
                        "catalog {} is unreachable: nothing is known this round and nothing was changed\n",
                        value["catalog"].as_str().unwrap_or_default()
                    );
                }
                es.iter()
                    .map(|e| {
                        let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
                        vec![
                            text("kind"),
                            text("schema"),
                            text("name"),
                            text("state"),
                            text("renamedTo"),
                            text("detectedAt"),
                            e["removed"].as_bool().unwrap_or(false).to_string(),
                        ]
                    })
                    .collect()
            } else {
                return serde_saphyr::to_string(value).unwrap_or_default();
            };
            if rows.is_empty() {
                return "No resources found.\n".into();
            }
            let header: Vec<&str> = match rows[0].len() {
                3 => vec!["KIND", "NAME", "ID"],
                4 => vec!["NAMESPACE", "CATALOG", "SCHEMA", "NAME"],
                5 => vec!["NAMESPACE", "CATALOG", "SCHEMA", "MODEL", "NAME"],
                6 => vec![
                    "NAMESPACE",
                    "CATALOG",
                    "SCHEMA",
                    "MODEL",
                    "METRIC",
                    "EXPRESSION",
                ],
                7 => vec![
                    "KIND", "SCHEMA", "NAME", "STATE", "NOW", "DETECTED", "REMOVED",
                ],
                _ => vec![],
            };
            aligned(std::iter::once(header.iter().map(|s| s.to_string()).collect()).chain(rows))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_fills_a_route_the_server_serves() {
        let queries = [
            Query::Lookup {
                object_type: "table".into(),
                full_name: "hr.`a.b`.t x".into(),
            },
            Query::Metrics {
                catalog: "c".into(),
                schema: "s".into(),
                details: true,
            },
            Query::Models {
                catalog: "c".into(),
                schema: "s".into(),
                name: None,
            },
            Query::Models {
                catalog: "c".into(),
                schema: "s".into(),
                name: Some("m".into()),
            },
            Query::lineage(LineageRoot::Model, vec!["c".into(), "s".into(), "m".into()]).unwrap(),
            Query::lineage(LineageRoot::View, vec!["c.s.v".into()]).unwrap(),
            Query::Stale {
                catalog: "c".into(),
            },
            Query::Reconcile {
                catalog: "c".into(),
                dry_run: true,
            },
            Query::History {
                catalog: "c".into(),
                schema: "s".into(),
                name: "m x".into(),
            },
            Query::NamespaceModels {
                catalog: Some("c d".into()),
                schema: None,
            },
            Query::NamespaceModels {
                catalog: None,
                schema: None,
            },
            Query::Metric {
                id: "0190-a/b".into(),
            },
        ];
        let want = [
            (
                "GET",
                "/api/metalakes/ns/objects/table/hr.%60a.b%60.t%20x/semantic-model-datasets",
            ),
            (
                "GET",
                "/api/metalakes/ns/catalogs/c/schemas/s/semantic-model-metrics?details=true&ids=true",
            ),
            (
                "GET",
                "/api/metalakes/ns/catalogs/c/schemas/s/semantic-models",
            ),
            (
                "GET",
                "/api/metalakes/ns/catalogs/c/schemas/s/semantic-models/m",
            ),
            (
                "GET",
                "/api/metalakes/ns/catalogs/c/schemas/s/semantic-models/m/lineage",
            ),
            ("GET", "/api/metalakes/ns/objects/view/c.s.v/lineage"),
            ("GET", "/api/metalakes/ns/catalogs/c/stale-entities"),
            ("POST", "/api/metalakes/ns/catalogs/c/reconcile"),
            (
                "GET",
                "/api/metalakes/ns/catalogs/c/schemas/s/semantic-models/m%20x/versions",
            ),
            ("GET", "/api/metalakes/ns/semantic-models?catalog=c%20d"),
            ("GET", "/api/metalakes/ns/semantic-models"),
            ("GET", "/api/metalakes/ns/semantic-model-metrics/0190-a%2Fb"),
        ];
        for (q, (method, path)) in queries.iter().zip(want) {
            let (m, p, _) = q.request("ns");
            assert_eq!((m, p.as_str()), (method, path), "{q:?}");
        }
        assert!(Query::lineage(LineageRoot::Model, vec!["c.s.m".into()]).is_err());
        assert!(Query::lineage(LineageRoot::Table, vec!["c".into(), "s".into()]).is_err());
    }

    #[test]
    fn every_query_has_its_aggregated_twin_with_dotted_quoted_names() {
        let q = |catalog: &str, schema: &str, name: Option<&str>| Query::Models {
            catalog: catalog.into(),
            schema: schema.into(),
            name: name.map(str::to_string),
        };
        let agg = "/apis/query.semops.io/v1alpha1/namespaces/ns";
        let cases = [
            (
                Query::Lookup {
                    object_type: "view".into(),
                    full_name: "hr.`a.b`.v".into(),
                },
                "GET",
                format!("{agg}/views/hr.%60a.b%60.v/datasets"),
            ),
            (
                Query::Metrics {
                    catalog: "c".into(),
                    schema: "s".into(),
                    details: false,
                },
                "GET",
                format!("{agg}/schemas/c.s/metrics?details=false"),
            ),
            (
                q("c", "s", None),
                "GET",
                format!("{agg}/schemas/c.s/models"),
            ),
            (
                q("c", "a.b", Some("m")),
                "GET",
                format!("{agg}/models/c.%60a.b%60.m"),
            ),
            (
                Query::lineage(
                    LineageRoot::Model,
                    vec!["c".into(), "s".into(), "m`x".into()],
                )
                .unwrap(),
                "GET",
                format!("{agg}/models/c.s.%60m%60%60x%60/lineage"),
            ),
            (
                Query::lineage(LineageRoot::Table, vec!["c.s.t".into()]).unwrap(),
                "GET",
                format!("{agg}/tables/c.s.t/lineage"),
            ),
            (
                Query::Stale {
                    catalog: "c".into(),
                },
                "GET",
                format!("{agg}/catalogs/c/stale-entities"),
            ),
            (
                Query::NamespaceModels {
                    catalog: Some("c".into()),
                    schema: Some("a b".into()),
                },
                "GET",
                format!("{agg}/models?catalog=c&schema=a%20b"),
            ),
            (
                Query::Metric {
                    id: "0190-x".into(),
                },
                "GET",
                format!("{agg}/metrics/0190-x"),
            ),
            (
                Query::ModelRevision {
                    catalog: "c".into(),
                    schema: "s".into(),
                    name: "m".into(),
                    revision: 2,
                },
                "GET",
                format!("{agg}/models/c.s.m?revision=2"),
            ),
            (
                Query::Reconcile {
                    catalog: "c".into(),
                    dry_run: false,
                },
                "POST",
                format!("{agg}/catalogs/c/reconcile"),
            ),
            (
                Query::Impact {
                    object_type: "view".into(),
                    full_name: "c.s.v".into(),
                    columns: vec!["a b".into(), "c".into()],
                },
                "GET",
                format!("{agg}/views/c.s.v/impact?columns=a%20b,c"),
            ),
            (
                Query::Impact {
                    object_type: "table".into(),
                    full_name: "c.s.t".into(),
                    columns: vec![],
                },
                "GET",
                format!("{agg}/tables/c.s.t/impact"),
            ),
            (
                Query::History {
                    catalog: "c".into(),
                    schema: "a.b".into(),
                    name: "m".into(),
                },
                "GET",
                format!("{agg}/models/c.%60a.b%60.m/versions"),
            ),
        ];
        for (query, method, path) in cases {
            let (m, p, _) = query.aggregated_request("ns");
            assert_eq!((m, p), (method, path), "{query:?}");
        }
    }

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

    #[test]
    fn identifiers_render_as_an_aligned_table() {
        let v: Value = serde_json::from_str(r#"{"code":0,"identifiers":[{"namespace":["ex","analytics","semantic","employee_analysis"],"name":"employee"}]}"#).unwrap();
        assert_eq!(
            render(&v, Output::Table),
            "NAMESPACE   CATALOG     SCHEMA     MODEL               NAME\nex          analytics   semantic   employee_analysis   employee\n"
        );
        assert_eq!(
            render(
                &serde_json::json!({"code": 0, "identifiers": []}),
                Output::Table
            ),
            "No resources found.\n"
        );
    }

    #[test]
    fn impacts_render_one_line_per_model_dataset_and_column() {
        let v = serde_json::json!({"code": 0, "source": "wh.app.orders", "columns": ["gross"], "breaks": true,
            "impacts": [{"namespace": ["ns", "home", "semantic"], "model": "sales", "revision": 1, "dataset": "orders",
                "column": "gross", "usedBy": ["field amount", "metric revenue"], "metrics": []}]});
        assert_eq!(
            render(&v, Output::Table),
            "MODEL                 DATASET   COLUMN   USED BY\nhome.semantic.sales   orders    gross    field amount, metric revenue\n"
        );
        let none =
            serde_json::json!({"source": "wh.app.orders", "columns": ["a", "b"], "impacts": []});
        assert_eq!(
            render(&none, Output::Table),
            "nothing uses a, b of wh.app.orders in the models you may see\n"
        );
    }

    #[test]
    fn a_history_renders_one_row_per_revision_with_the_ids_it_added_and_retired() {
        let v = serde_json::json!({"code": 0, "versions": [
            {"revision": 2, "created": "2026-12-02T10:00:00Z", "definitionHash": "0123456789abcdef", "current": false,
             "metricsRetired": [{"name": "headcount", "id": "a"}]},
            {"revision": 3, "created": "2026-12-02T11:00:00Z", "definitionHash": "fedcba9876543210", "current": true,
             "metricsAdded": [{"name": "managers", "id": "c"}], "metricsRetired": []}
        ]});
        assert_eq!(
            render(&v, Output::Table),
            "REVISION   CREATED                DEFINITION     CURRENT   METRIC IDS\n\
             2          2026-12-02T10:00:00Z   0123456789ab             ? -headcount\n\
             3          2026-12-02T11:00:00Z   fedcba987654   *         +managers\n"
        );
        assert_eq!(
            render(
                &serde_json::json!({"code": 0, "versions": []}),
                Output::Table
            ),
            "No revisions kept.\n"
        );
    }

    #[test]
    fn stale_reports_render_as_a_table_and_unreachable_says_so() {
        let v = serde_json::json!({"code": 0, "catalog": "hr", "catalogUnreachable": false, "staleSchemas": [],
            "staleEntities": [{"kind": "Table", "schema": "public", "name": "t", "state": "Removed", "detectedAt": "2026-11-30T10:00:00Z", "removed": true}]});
        assert_eq!(
            render(&v, Output::Table),
            "KIND    SCHEMA   NAME   STATE     NOW   DETECTED               REMOVED\nTable   public   t      Removed         2026-11-30T10:00:00Z   true\n"
        );
        let down =
            serde_json::json!({"catalog": "hr", "catalogUnreachable": true, "staleEntities": []});
        assert!(render(&down, Output::Table).contains("catalog hr is unreachable"));
    }
}
