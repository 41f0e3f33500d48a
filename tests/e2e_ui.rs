//! `semops ui` in a real headless Chromium (Debian's `chromium` and `chromium-driver`, driven
//! over WebDriver by the fantoccini client) against the real API server, operator and
//! PostgreSQL with the example models: every page shows what the read API answers, the lineage
//! picture has the graph's nodes and edges, the impact form lists what the API lists, RBAC
//! holds, axe-core finds no serious or critical accessibility violation, the guard refuses a
//! wrong token, host or origin, and hostile addresses get escaped 400/404 pages. Screenshots of
//! each page go to target/ui-screenshots (hack/generate copies them into docs/ui/).

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
// chromedriver listens on loopback over plain HTTP: no TLS stack for the WebDriver client.
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use support::*;

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// chromedriver in a process group of its own, killed with every browser it started when
/// dropped: a test that fails before closing its session leaves no Chromium behind.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.0.wait();
    }
}

/// `semops ui` for `token` (a ServiceAccount's) on the operator's direct port: the process and
/// the address it printed.
fn console(api_port: u16, token: &str, ns: &str) -> (Killed, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_semops"))
        .args([
            "ui",
            "--no-open",
            "--server",
            &format!("http://127.0.0.1:{api_port}"),
            "--token",
            token,
            "-n",
            ns,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.split_whitespace().last().unwrap().to_string();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.contains("/?token="),
        "{line}"
    );
    (Killed(child), url)
}

/// chromedriver on a free port and a headless Chromium session through it.
async fn browser() -> (Driver, Client) {
    let port = support::daemon_port();
    // Like every script that needs a Debian package, the test installs it when missing.
    let deps = Command::new(format!("{ROOT}/hack/deps"))
        .arg("ui")
        .status()
        .unwrap();
    assert!(deps.success(), "hack/deps ui");
    use std::os::unix::process::CommandExt;
    let driver = Command::new("chromedriver")
        .process_group(0)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver (hack/deps ui installs Debian's chromium-driver)");
    let driver = Driver(driver);
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"]}),
    );
    let mut last = None;
    for _ in 0..100 {
        match ClientBuilder::new(HttpConnector::new())
            .capabilities(caps.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            Ok(c) => return (driver, c),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no WebDriver session: {last:?}");
}

/// A read-API answer through the CLI as `token`.
fn read(api_port: u16, token: &str, ns: &str, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_semops"))
        .args(args)
        .args([
            "--server",
            &format!("http://127.0.0.1:{api_port}"),
            "--token",
            token,
            "-n",
            ns,
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    // `semops impact` exits 3 when something would break: an answer all the same.
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A raw request to the console: (status, body).
fn raw(base: &str, target: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let addr = base
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let mut s = TcpStream::connect(&addr).unwrap();
    let mut req = format!("GET {target} HTTP/1.1\r\nconnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split(' ').nth(1).unwrap().parse().unwrap();
    (status, out)
}

/// Visits the printed address without a browser: the console's base and the cookie it sets.
fn session(url: &str) -> (String, String) {
    let base = url.split("/?").next().unwrap().to_string();
    let (_, r) = raw(&base, &url[base.len()..], &[]);
    let line = r
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .expect("the token is traded for a cookie");
    let cookie = line
        .split_once(':')
        .unwrap()
        .1
        .trim()
        .split(';')
        .next()
        .unwrap();
    (base, cookie.to_string())
}

/// axe-core's serious and critical violations on the current page.
async fn violations(c: &Client, axe: &str) -> Vec<String> {
    c.execute(axe, vec![]).await.unwrap();
    let result = c
        .execute_async(
            "const done = arguments[arguments.length - 1]; axe.run(document).then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.length})))).catch(e => done([{id: 'axe failed: ' + e, impact: 'critical', nodes: 0}]));",
            vec![],
        )
        .await
        .unwrap();
    result
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["impact"] == "serious" || v["impact"] == "critical")
        .map(|v| format!("{} ({}, {} nodes)", v["id"], v["impact"], v["nodes"]))
        .collect()
}

async fn shot(c: &Client, name: &str) {
    let dir = std::path::Path::new(ROOT).join("target/ui-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(format!("{name}.png")),
        c.screenshot().await.unwrap(),
    )
    .unwrap();
}

/// Waits until the page's heading is `want` (a click only starts a navigation).
async fn heading(c: &Client, want: &str) {
    let mut last = String::new();
    for _ in 0..100 {
        if let Ok(h) = c.find(Locator::Css("h1")).await
            && let Ok(t) = h.text().await
        {
            if t == want {
                return;
            }
            last = t;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the page's heading stayed {last:?}, not {want:?}");
}

async fn texts(c: &Client, css: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in c.find_all(Locator::Css(css)).await.unwrap() {
        out.push(e.text().await.unwrap());
    }
    out
}

#[test]
fn every_page_shows_what_the_read_api_answers_in_a_real_browser() {
    let env = env();
    let ns = env.namespace("ui");
    let ns = ns.name.as_str();
    let op = Operator::for_namespace(env, ns);
    env.apply_ok(&examples_in(ns));
    wait_all_ready(env, ns);
    let reader = "[{apiGroups: [semops.io], resources: [catalogs, semanticmodels], verbs: [get]}, {apiGroups: [semops.io], resources: [catalogs/stale], verbs: [get]}]";
    let full = env.service_account_token(
        ns,
        "ui-full",
        reader,
        &[
            ("get", "catalogs.semops.io"),
            ("get", "semanticmodels.semops.io"),
        ],
    );
    let none = env.service_account_token(
        ns,
        "ui-none",
        "[{apiGroups: [semops.io], resources: [catalogs], verbs: [get]}]",
        &[("get", "catalogs.semops.io")],
    );
    let axe = std::fs::read_to_string(
        String::from_utf8(
            Command::new(format!("{ROOT}/hack/axe"))
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim(),
    )
    .unwrap();

    let (_ui, url) = console(op.api_port, &full, ns);
    let base = url.split("/?").next().unwrap().to_string();
    let models = read(op.api_port, &full, ns, &["models"]);
    let model = read(
        op.api_port,
        &full,
        ns,
        &["models", "analytics", "semantic", "employee_analysis"],
    );
    let graph = read(
        op.api_port,
        &full,
        ns,
        &[
            "lineage",
            "model",
            "analytics",
            "semantic",
            "employee_analysis",
        ],
    );
    let ids: Vec<(String, String)> = model["model"]["metricIds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().into(),
                m["id"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(!ids.is_empty());

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let (_driver, c) = browser().await;
        // The printed address trades its token for a cookie and lands on the namespace's models.
        c.goto(&url).await.unwrap();
        let here = c.current_url().await.unwrap();
        assert_eq!(here.path(), format!("/ns/{ns}"));
        assert!(here.query().is_none(), "the token left the address bar");
        let listed = texts(&c, "main table tbody tr td:first-child a").await;
        let want: Vec<String> = models["identifiers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(listed, want);
        assert!(
            texts(&c, "main table tbody tr td:nth-child(4)")
                .await
                .iter()
                .all(|s| s.starts_with("Ready"))
        );
        let mut pages = vec![("models", violations(&c, &axe).await)];
        shot(&c, "models").await;

        // A model: every metric id as the API has it, linked to the metric's page.
        c.find(Locator::LinkText("employee_analysis"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        heading(&c, "Model employee_analysis").await;
        let cells = texts(&c, "main table caption").await;
        assert!(cells.contains(&"Metrics".to_string()), "{cells:?}");
        let source = c.source().await.unwrap();
        for (name, id) in &ids {
            assert!(
                source.contains(&format!(">{id}</code>")),
                "metric {name}'s id {id}"
            );
        }
        assert!(source.contains("hr.public.employees"));
        // Each dataset's native id as the model's status recorded it.
        let status: Value = serde_json::from_str(&env.kubectl_ok(&[
            "get",
            "sm",
            "employee-analysis",
            "-n",
            ns,
            "-o",
            "json",
        ]))
        .unwrap();
        for a in status["status"]["sourceAssociations"].as_array().unwrap() {
            let id = a["id"].as_str().unwrap();
            assert!(
                source.contains(&format!("<code>{id}</code>")),
                "native id {id}"
            );
        }
        assert!(source.contains("Revision history"));
        pages.push(("model", violations(&c, &axe).await));
        shot(&c, "model").await;

        // A metric by id.
        let (name, id) = &ids[0];
        c.find(Locator::LinkText(id))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        heading(&c, &format!("Metric {name}")).await;
        assert!(c.source().await.unwrap().contains(id.as_str()));
        pages.push(("metric", violations(&c, &axe).await));
        shot(&c, "metric").await;

        // The lineage picture has the graph's nodes and edges.
        c.goto(&format!(
            "{base}/ns/{ns}/lineage/model/analytics/semantic/employee_analysis"
        ))
        .await
        .unwrap();
        let nodes = c.find_all(Locator::Css("svg g.node")).await.unwrap().len();
        let edges = c
            .find_all(Locator::Css("svg path.edge"))
            .await
            .unwrap()
            .len();
        assert_eq!(
            (nodes, edges),
            (
                graph["nodes"].as_array().unwrap().len(),
                graph["edges"].as_array().unwrap().len()
            )
        );
        assert!(nodes >= 4);
        pages.push(("lineage", violations(&c, &axe).await));
        shot(&c, "lineage").await;

        // Impact: the form lists what the API lists.
        let api = read(
            op.api_port,
            &full,
            ns,
            &["impact", "table", "hr.public.employees", "--columns=salary"],
        );
        c.goto(&format!("{base}/ns/{ns}/impact")).await.unwrap();
        c.find(Locator::Id("name"))
            .await
            .unwrap()
            .send_keys("hr.public.employees")
            .await
            .unwrap();
        c.find(Locator::Id("columns"))
            .await
            .unwrap()
            .send_keys("salary")
            .await
            .unwrap();
        c.find(Locator::Css("main form button"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        // The click starts the navigation; the answer page is the one whose address asks.
        for _ in 0..100 {
            let here = c.current_url().await.unwrap();
            if here.query().is_some_and(|q| q.contains("name=")) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        c.find(Locator::Css("main table")).await.unwrap();
        let rows = texts(&c, "main table tbody tr td:nth-child(5)").await;
        let want: Vec<String> = api["impacts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                i["metrics"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m["name"].as_str().unwrap())
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .collect();
        assert_eq!(rows, want, "{}", c.source().await.unwrap());
        assert!(!want.is_empty(), "salary is used");
        pages.push(("impact", violations(&c, &axe).await));
        shot(&c, "impact").await;

        // Search: metrics by name, and the models using a table.
        c.goto(&format!(
            "{base}/ns/{ns}/search?q={name}&table=hr.public.employees"
        ))
        .await
        .unwrap();
        let found = texts(&c, "main table tbody tr td:nth-child(2)").await;
        assert!(found.contains(name), "{found:?}");
        pages.push(("search", violations(&c, &axe).await));
        shot(&c, "search").await;

        // A catalog: its registrations, and its stale report.
        c.goto(&format!(
            "{base}/ns/{ns}/models/analytics/semantic/employee_analysis"
        ))
        .await
        .unwrap();
        c.find(Locator::LinkText("hr"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        heading(&c, "Catalog hr").await;
        let names = texts(&c, "main table tbody tr td:nth-child(3)").await;
        for table in ["employees", "departments"] {
            assert!(names.contains(&table.to_string()), "{names:?}");
        }
        shot(&c, "catalog").await;
        pages.push(("catalog", violations(&c, &axe).await));

        // Hostile and unknown addresses: escaped pages, the right status.
        c.goto(&format!(
            "{base}/ns/{ns}/models/analytics/semantic/%3Cscript%3Ealert(1)%3C%2Fscript%3E"
        ))
        .await
        .unwrap();
        let page = c.source().await.unwrap();
        assert!(!page.contains("<script>alert(1)"), "{page}");
        assert!(page.contains("Not found"));
        pages.push(("not found", violations(&c, &axe).await));
        shot(&c, "not-found").await;
        for (page, found) in &pages {
            assert!(found.is_empty(), "{page}: {found:?}");
        }
        c.close().await.unwrap();
    });

    // The guard: no token, a wrong token, another host or origin.
    let (_, cookie) = session(&url);
    let ok = [("cookie", cookie.as_str())];
    assert_eq!(raw(&base, &format!("/ns/{ns}"), &ok).0, 200);
    assert_eq!(raw(&base, &format!("/ns/{ns}"), &[]).0, 403);
    assert_eq!(raw(&base, "/?token=0000", &[]).0, 403);
    assert_eq!(
        raw(&base, &format!("/ns/{ns}"), &[("cookie", "semops_ui=0000")]).0,
        403
    );
    assert_eq!(
        raw(
            &base,
            &format!("/ns/{ns}"),
            &[ok[0], ("host", "evil.example:80")]
        )
        .0,
        400
    );
    assert_eq!(
        raw(
            &base,
            &format!("/ns/{ns}"),
            &[ok[0], ("origin", "http://evil.example")]
        )
        .0,
        403
    );
    let (status, body) = raw(&base, &format!("/ns/{}", "a".repeat(10_000)), &ok);
    assert_eq!(status, 400, "a 10 KB segment");
    assert!(!body.contains(&"a".repeat(10_000)));
    let (status, body) = raw(&base, "/ns/%3Cscript%3E", &ok);
    assert_eq!(status, 400);
    assert!(
        body.contains("&lt;script&gt;") && !body.contains("<script>"),
        "{body}"
    );
    assert_eq!(raw(&base, "/nothing/here", &ok).0, 404);

    // A user who may not get models sees none, and is told which verb is missing.
    let (_ui2, url2) = console(op.api_port, &none, ns);
    let (base2, cookie2) = session(&url2);
    let (status, body) = raw(&base2, &format!("/ns/{ns}"), &[("cookie", &cookie2)]);
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("0 model(s) you may read") && !body.contains("employee_analysis"),
        "{body}"
    );
    let (status, body) = raw(
        &base2,
        &format!("/ns/{ns}/models/analytics/semantic/employee_analysis"),
        &[("cookie", &cookie2)],
    );
    assert!(status == 403 || status == 404, "{status}: {body}");
    assert!(
        !body.contains(&ids[0].1),
        "no id of a model the user may not get"
    );
    // A question refused outright says so, with the API's message naming the permission: a
    // user who may not get catalogs asks for one.
    let (status, body) = raw(
        &base2,
        &format!("/ns/{ns}/catalogs/hr"),
        &[("cookie", &cookie2)],
    );
    assert_eq!(status, 200, "the none user may get catalogs: {body}");
    let nocat = env.service_account_token(
        ns,
        "ui-nocat",
        "[{apiGroups: [semops.io], resources: [semanticmodels], verbs: [get]}]",
        &[("get", "semanticmodels.semops.io")],
    );
    let (_ui3, url3) = console(op.api_port, &nocat, ns);
    let (base3, cookie3) = session(&url3);
    let (status, body) = raw(
        &base3,
        &format!("/ns/{ns}/catalogs/hr"),
        &[("cookie", &cookie3)],
    );
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("the API server refused it (403)") && body.contains("catalogs"),
        "{body}"
    );
}
