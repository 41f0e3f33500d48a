//! The console's HTTP side: the guard (host, origin, token), the routes, and the read-API
//! questions behind each page.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query as Params, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};

use super::html::{self, PAGE_SIZE, Page};
use crate::client::{Query, ReadApi};

/// Longest request target the console reads; longer is a 400 page.
const MAX_TARGET: usize = 2048;
const COOKIE: &str = "semops_ui";

/// What every handler shares.
pub struct Console {
    pub api: ReadApi,
    pub token: String,
    pub port: u16,
}

type Shared = State<Arc<Console>>;

/// A fresh token: 256 random bits, hex.
pub fn new_token() -> String {
    let bytes: [u8; 32] = rand::random();
    hex::encode(bytes)
}

fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn page(status: StatusCode, ns: &str, p: &Page) -> Response {
    let mut r = (status, html::document(ns, p)).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert(
        "content-security-policy",
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    );
    r
}

fn plain(status: StatusCode, message: &str) -> Response {
    let p = Page {
        title: status.canonical_reason().unwrap_or("Error").into(),
        body: format!(
            "<div class=\"error\" role=\"alert\"><p>{}</p></div>",
            crate::lineage::render::xml_escape(message)
        ),
    };
    page(status, "default", &p)
}

/// Host, origin and token before anything else.
async fn guard(State(c): Shared, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let hosts = [
        format!("127.0.0.1:{}", c.port),
        format!("localhost:{}", c.port),
    ];
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if !hosts.iter().any(|h| h == host) {
        return plain(
            StatusCode::BAD_REQUEST,
            "This console answers only at 127.0.0.1 or localhost on its own port",
        );
    }
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok())
        && !hosts.iter().any(|h| origin == format!("http://{h}"))
    {
        return plain(
            StatusCode::FORBIDDEN,
            "Requests from other origins are refused",
        );
    }
    let target = req.uri().path_and_query().map_or("", |p| p.as_str());
    if target.len() > MAX_TARGET {
        return plain(StatusCode::BAD_REQUEST, "The address is too long");
    }
    let from_query = req.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("token="))
            .map(str::to_string)
    });
    if let Some(t) = from_query {
        if !same(&t, &c.token) {
            return plain(
                StatusCode::FORBIDDEN,
                "Wrong token: open the address semops ui printed",
            );
        }
        // Trade the token in the address for a cookie, and drop it from the address.
        let mut r = Redirect::to(req.uri().path()).into_response();
        let cookie = format!("{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/", c.token);
        r.headers_mut().insert(
            header::SET_COOKIE,
            HeaderValue::from_str(&cookie).expect("hex is a header value"),
        );
        return r;
    }
    let cookie_ok = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| {
            kv.trim()
                .strip_prefix(&format!("{COOKIE}="))
                .map(str::to_string)
        })
        .any(|t| same(&t, &c.token));
    if !cookie_ok {
        return plain(
            StatusCode::FORBIDDEN,
            "No token: open the address semops ui printed",
        );
    }
    next.run(req).await
}

/// A namespace name as Kubernetes allows it (a DNS label).
fn valid_namespace(ns: &str) -> bool {
    !ns.is_empty()
        && ns.len() <= 63
        && ns
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !ns.starts_with('-')
        && !ns.ends_with('-')
}

fn bad_namespace(ns: &str) -> Response {
    let p = Page {
        title: "Not a namespace".into(),
        body: format!(
            "<div class=\"error\" role=\"alert\"><p>{} is not a namespace name (lower-case letters, digits and '-', at most 63).</p></div>",
            crate::lineage::render::xml_escape(ns)
        ),
    };
    page(StatusCode::BAD_REQUEST, "default", &p)
}

/// One question; `Err` carries the status (0: not reached) and the answer.
async fn ask(c: &Console, ns: &str, q: &Query) -> Result<Value, (u16, Value)> {
    match c.api.ask(ns, q).await {
        Ok((200, v)) => Ok(v),
        Ok((s, v)) => Err((s, v)),
        Err(e) => Err((0, json!({"message": format!("{e:#}")}))),
    }
}

fn failed(ns: &str, (status, answer): (u16, Value), what: &str) -> Response {
    let code = match status {
        0 => StatusCode::BAD_GATEWAY,
        s => StatusCode::from_u16(s).unwrap_or(StatusCode::BAD_GATEWAY),
    };
    page(code, ns, &html::error_page(status, &answer, what))
}

/// `[catalog, schema, name]` of every model of `ns` the caller may read, or the error page.
async fn namespace_models(c: &Console, ns: &str) -> Result<Vec<[String; 3]>, Response> {
    let all = Query::NamespaceModels {
        catalog: None,
        schema: None,
    };
    let list = ask(c, ns, &all)
        .await
        .map_err(|e| failed(ns, e, &format!("the models of namespace {ns}")))?;
    let part = |v: &Value| v.as_str().unwrap_or_default().to_string();
    Ok((list["identifiers"].as_array().into_iter().flatten())
        .map(|i| {
            [
                part(&i["namespace"][1]),
                part(&i["namespace"][2]),
                part(&i["name"]),
            ]
        })
        .collect())
}

#[derive(Deserialize, Default)]
struct Paging {
    #[serde(default)]
    page: Option<usize>,
}

async fn models(State(c): Shared, Path(ns): Path<String>, Params(p): Params<Paging>) -> Response {
    if !valid_namespace(&ns) {
        return bad_namespace(&ns);
    }
    let ids = match namespace_models(&c, &ns).await {
        Ok(ids) => ids,
        Err(r) => return r,
    };
    let page_no = p.page.unwrap_or(1).max(1) - 1;
    let mut rows = Vec::new();
    for id in ids.iter().skip(page_no * PAGE_SIZE).take(PAGE_SIZE) {
        let q = Query::Models {
            catalog: id[0].clone(),
            schema: id[1].clone(),
            name: Some(id[2].clone()),
        };
        let answer = ask(&c, &ns, &q)
            .await
            .map(|v| v["model"].clone())
            .map_err(|(s, _)| s);
        rows.push((id.to_vec(), answer));
    }
    page(
        StatusCode::OK,
        &ns,
        &html::models_page(&ns, &rows, page_no, ids.len()),
    )
}

async fn model(
    State(c): Shared,
    Path((ns, catalog, schema, name)): Path<(String, String, String, String)>,
) -> Response {
    if !valid_namespace(&ns) {
        return bad_namespace(&ns);
    }
    let q = Query::Models {
        catalog: catalog.clone(),
        schema: schema.clone(),
        name: Some(name.clone()),
    };
    let m = match ask(&c, &ns, &q).await {
        Ok(v) => v,
        Err(e) => return failed(&ns, e, &format!("model {catalog}.{schema}.{name}")),
    };
    let h = Query::History {
        catalog: catalog.clone(),
        schema: schema.clone(),
        name: name.clone(),
    };
    let versions = ask(&c, &ns, &h).await.ok().map(|v| v["versions"].clone());
    page(
        StatusCode::OK,
        &ns,
        &html::model_page(&ns, &catalog, &schema, &m["model"], versions.as_ref()),
    )
}

async fn metric(State(c): Shared, Path((ns, id)): Path<(String, String)>) -> Response {
    if !valid_namespace(&ns) {
        return bad_namespace(&ns);
    }
    match ask(&c, &ns, &Query::Metric { id: id.clone() }).await {
        Ok(v) => page(StatusCode::OK, &ns, &html::metric_page(&ns, &v["metric"])),
        Err(e) => failed(&ns, e, &format!("metric {id}")),
    }
}

async fn model_lineage(
    State(c): Shared,
    Path((ns, catalog, schema, name)): Path<(String, String, String, String)>,
) -> Response {
    if !valid_namespace(&ns) {
        return bad_namespace(&ns);
    }
    let q = Query::ModelLineage {
        catalog: catalog.clone(),
        schema: schema.clone(),
        name: name.clone(),
    };
    lineage(&c, &ns, &q, &format!("Lineage of model {name}")).await
}

async fn source_lineage(
    State(c): Shared,
    Path((ns, kind, full)): Path<(String, String, String)>,
) -> Response {
    if !valid_namespace(&ns) {
        return bad_namespace(&ns);
    }
    if kind != "table" && kind != "view" {
        return plain(
            StatusCode::NOT_FOUND,
            "Lineage is drawn from a model, a table or a view",
        );
    }
    let q = Query::SourceLineage {
        object_type: kind.clone(),
        full_name: full.clone(),
    };
    lineage(&c, &ns, &q, &format!("Lineage of {kind} {full}")).await
}

async fn lineage(c: &Console, ns: &str, q: &Query, title: &str) -> Response {
    match ask(c, ns, q).await {
        Ok(graph) => {
            let svg = crate::lineage::render::svg(&graph);
            page(StatusCode::OK, ns, &html::lineage_page(title, &graph, &svg))
        }
        Err(e) => failed(ns, e, &title.to_lowercase()),
    }
}

#[derive(Deserialize, Default)]
struct ImpactForm {
    #[serde(default, rename = "type")]
    object_type: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    columns: Option<String>,
}

async fn impact(
    State(c): Shared,
    Path(ns): Path<String>,
    Params(f): Params<ImpactForm>,
) -> Response {
    if !valid_namespace(&ns) {
        return bad_namespace(&ns);
    }
    let object_type = f
        .object_type
        .filter(|t| t == "view")
        .unwrap_or_else(|| "table".into());
    let name = f.name.unwrap_or_default();
    let columns = f.columns.unwrap_or_default();
    let answer = if name.trim().is_empty() {
        None
    } else {
        let cols: Vec<String> = columns
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect();
        let q = Query::Impact {
            object_type: object_type.clone(),
            full_name: name.trim().to_string(),
            columns: cols,
        };
        match ask(&c, &ns, &q).await {
            Ok(v) => Some(v),
            Err(e) => return failed(&ns, e, &format!("the impact on {name}")),
        }
    };
    page(
        StatusCode::OK,
        &ns,
        &html::impact_page(&ns, &object_type, &name, &columns, answer.as_ref()),
    )
}

async fn catalog(State(c): Shared, Path((ns, catalog)): Path<(String, String)>) -> Response {
    if !valid_namespace(&ns) {
        return bad_namespace(&ns);
    }
    let registrations = match ask(
        &c,
        &ns,
        &Query::Registrations {
            catalog: catalog.clone(),
        },
    )
    .await
    {
        Ok(v) => v,
        Err(e) => return failed(&ns, e, &format!("catalog {catalog}")),
    };
    // The stale report probes the catalog live; its refusal is shown in place.
    let stale = ask(
        &c,
        &ns,
        &Query::Stale {
            catalog: catalog.clone(),
        },
    )
    .await;
    let stale = match &stale {
        Ok(v) => Ok(v),
        Err((s, v)) => Err((*s, v)),
    };
    page(
        StatusCode::OK,
        &ns,
        &html::catalog_page(&catalog, &registrations, stale),
    )
}

#[derive(Deserialize, Default)]
struct SearchForm {
    #[serde(default)]
    q: Option<String>,
    #[serde(default)]
    table: Option<String>,
    #[serde(default)]
    page: Option<usize>,
}

/// Most metrics a search lists.
const MAX_FOUND: usize = 500;

async fn search(
    State(c): Shared,
    Path(ns): Path<String>,
    Params(f): Params<SearchForm>,
) -> Response {
    if !valid_namespace(&ns) {
        return bad_namespace(&ns);
    }
    let q = f.q.unwrap_or_default();
    let table_name = f.table.unwrap_or_default();
    let mut found = None;
    if !q.trim().is_empty() {
        let needle = q.trim().to_lowercase();
        let schemas: BTreeSet<(String, String)> = match namespace_models(&c, &ns).await {
            Ok(ids) => ids.into_iter().map(|[c, s, _]| (c, s)).collect(),
            Err(r) => return r,
        };
        let mut rows = Vec::new();
        for (catalog, schema) in schemas {
            let mq = Query::Metrics {
                catalog: catalog.clone(),
                schema: schema.clone(),
                details: true,
            };
            let Ok(v) = ask(&c, &ns, &mq).await else {
                continue;
            };
            for e in v["metrics"].as_array().into_iter().flatten() {
                let name = e["metric"]["name"].as_str().unwrap_or_default();
                let description = e["metric"]["description"].as_str().unwrap_or_default();
                if name.to_lowercase().contains(&needle)
                    || description.to_lowercase().contains(&needle)
                {
                    rows.push(vec![
                        catalog.clone(),
                        schema.clone(),
                        e["namespace"][3].as_str().unwrap_or_default().to_string(),
                        name.to_string(),
                        e["id"].as_str().unwrap_or_default().to_string(),
                        description.to_string(),
                    ]);
                }
            }
        }
        rows.truncate(MAX_FOUND);
        found = Some(rows);
    }
    let mut lookup = None;
    if !table_name.trim().is_empty() {
        let lq = Query::Lookup {
            object_type: "table".into(),
            full_name: table_name.trim().to_string(),
        };
        match ask(&c, &ns, &lq).await {
            Ok(v) => lookup = Some(v),
            Err(e) => return failed(&ns, e, &format!("table {table_name}")),
        }
    }
    page(
        StatusCode::OK,
        &ns,
        &html::search_page(
            &ns,
            &q,
            found.as_deref(),
            f.page.unwrap_or(1).max(1) - 1,
            &table_name,
            lookup.as_ref(),
        ),
    )
}

#[derive(Deserialize)]
struct Go {
    #[serde(default)]
    ns: String,
}

async fn go(Params(g): Params<Go>) -> Response {
    if !valid_namespace(&g.ns) {
        return bad_namespace(&g.ns);
    }
    Redirect::to(&format!("/ns/{}", g.ns)).into_response()
}

async fn not_found() -> Response {
    plain(StatusCode::NOT_FOUND, "No such page")
}

/// The console's router, guard included.
pub fn router(console: Arc<Console>) -> Router {
    let home = format!("/ns/{}", console.api.default_namespace);
    Router::new()
        .route("/", get(move || async move { Redirect::to(&home) }))
        .route("/go", get(go))
        .route("/ns/{ns}", get(models))
        .route("/ns/{ns}/models/{catalog}/{schema}/{name}", get(model))
        .route("/ns/{ns}/metrics/{id}", get(metric))
        .route(
            "/ns/{ns}/lineage/model/{catalog}/{schema}/{name}",
            get(model_lineage),
        )
        .route("/ns/{ns}/lineage/{kind}/{full}", get(source_lineage))
        .route("/ns/{ns}/impact", get(impact))
        .route("/ns/{ns}/catalogs/{catalog}", get(catalog))
        .route("/ns/{ns}/search", get(search))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(console.clone(), guard))
        .with_state(console)
}

/// Serves the console on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    console: Arc<Console>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(console))
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::HeaderMap;
    use tower::ServiceExt;

    async fn console() -> Arc<Console> {
        let api = ReadApi::connect(&crate::client::Connection {
            namespace: Some("team".into()),
            // Nothing listens here: the guard answers before any question is asked.
            server: Some("http://127.0.0.1:9".into()),
            token: Some("t".into()),
            ..Default::default()
        })
        .await
        .unwrap();
        Arc::new(Console {
            api,
            token: "a".repeat(64),
            port: 4000,
        })
    }

    async fn status(
        c: &Arc<Console>,
        target: &str,
        headers: &[(&str, &str)],
    ) -> (StatusCode, HeaderMap) {
        let mut req = axum::http::Request::get(target);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let r = router(c.clone())
            .oneshot(req.body(Body::empty()).unwrap())
            .await
            .unwrap();
        (r.status(), r.headers().clone())
    }

    #[tokio::test]
    async fn the_guard_wants_its_host_its_origin_and_its_token() {
        let c = console().await;
        let token = "a".repeat(64);
        let cookie = format!("semops_ui={token}");
        let host = ("host", "127.0.0.1:4000");
        let ok = [host, ("cookie", cookie.as_str())];
        type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, StatusCode);
        let cases: Vec<Case> = vec![
            ("/nowhere", ok.to_vec(), StatusCode::NOT_FOUND),
            (
                "/nowhere",
                vec![("host", "localhost:4000"), ok[1]],
                StatusCode::NOT_FOUND,
            ),
            (
                "/nowhere",
                vec![("host", "evil.example:4000"), ok[1]],
                StatusCode::BAD_REQUEST,
            ),
            (
                "/nowhere",
                vec![("host", "127.0.0.1:4001"), ok[1]],
                StatusCode::BAD_REQUEST,
            ),
            ("/nowhere", vec![host], StatusCode::FORBIDDEN),
            (
                "/nowhere",
                vec![host, ("cookie", "semops_ui=aaaa")],
                StatusCode::FORBIDDEN,
            ),
            (
                "/nowhere",
                vec![host, ("cookie", "other=1; semops_ui=bbbb")],
                StatusCode::FORBIDDEN,
            ),
            (
                "/nowhere",
                vec![ok[0], ok[1], ("origin", "http://evil.example")],
                StatusCode::FORBIDDEN,
            ),
            (
                "/nowhere",
                vec![ok[0], ok[1], ("origin", "http://127.0.0.1:4000")],
                StatusCode::NOT_FOUND,
            ),
            ("/?token=wrong", vec![host], StatusCode::FORBIDDEN),
            ("/ns/Not_A_Namespace", ok.to_vec(), StatusCode::BAD_REQUEST),
            ("/go?ns=%3Cx%3E", ok.to_vec(), StatusCode::BAD_REQUEST),
        ];
        for (target, headers, want) in cases {
            assert_eq!(
                status(&c, target, &headers).await.0,
                want,
                "{target} {headers:?}"
            );
        }
        let long = format!("/ns/{}", "a".repeat(MAX_TARGET));
        assert_eq!(status(&c, &long, &ok).await.0, StatusCode::BAD_REQUEST);

        // The token in the address becomes a cookie, and the address loses it.
        let (code, headers) = status(&c, &format!("/ns/team?token={token}"), &[host]).await;
        assert_eq!(code, StatusCode::SEE_OTHER);
        assert_eq!(headers[header::LOCATION], "/ns/team");
        let set = headers[header::SET_COOKIE].to_str().unwrap();
        assert!(
            set.starts_with(&cookie) && set.contains("HttpOnly") && set.contains("SameSite=Strict"),
            "{set}"
        );

        // An unreachable read API is a page that says so.
        let (code, headers) = status(&c, "/ns/team", &ok).await;
        assert_eq!(code, StatusCode::BAD_GATEWAY);
        assert!(
            headers["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("default-src 'none'")
        );
    }
}
