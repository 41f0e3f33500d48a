//! The console's pages (pure): read-API answers (JSON) in, HTML out. Every text that came from
//! the cluster or the URL is escaped; links are built from escaped, percent-encoded segments.
//! Server-rendered, no script except the lineage picture's zoom.

use serde_json::Value;

use crate::lineage::render::xml_escape as esc;

/// A page: its title (also its `<h1>`) and body.
pub struct Page {
    pub title: String,
    pub body: String,
}

/// Percent-encodes one path segment or query value (RFC 3986 unreserved characters kept).
pub fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn list(v: &Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

const CSS: &str = "body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#111;background:#fff}\
header{background:#1d2b3a;padding:.6rem 1rem}header a{color:#fff;margin-right:1.2rem;text-decoration:underline}\
header form{display:inline}header label{color:#fff}main{padding:1rem 1.5rem;max-width:90rem}\
table{border-collapse:collapse;margin:.5rem 0 1.2rem}th,td{border:1px solid #999;padding:.25rem .5rem;text-align:left;vertical-align:top}\
th{background:#e8e8e8}code{font:13px ui-monospace,monospace;background:#f2f2f2;padding:0 .2rem}\
.ok{color:#145a20;font-weight:bold}.bad{color:#a00016;font-weight:bold}.warn{color:#7a4300;font-weight:bold}\
.error{border:2px solid #a00016;padding:.5rem 1rem;background:#fff0f0}.muted{color:#444}\
.picture{overflow:auto;border:1px solid #999;max-height:80vh}a{color:#0b4a9e}";

/// The whole document around a page, with the navigation of namespace `ns`.
pub fn document(ns: &str, page: &Page) -> String {
    let n = enc(ns);
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title} · semops</title><style>{CSS}</style></head><body>\
<header><nav aria-label=\"Main\"><a href=\"/ns/{n}\">Models</a><a href=\"/ns/{n}/search\">Search</a><a href=\"/ns/{n}/impact\">Impact</a>\
<form action=\"/go\" method=\"get\"><label for=\"ns\">Namespace </label><input id=\"ns\" name=\"ns\" value=\"{ns_text}\" size=\"16\"> <button type=\"submit\">Open</button></form></nav></header>\
<main><h1>{title}</h1>\n{body}\n</main></body></html>\n",
        title = esc(&page.title),
        ns_text = esc(ns),
        body = page.body,
    )
}

/// What a refused or failed read says to a person.
pub fn error_page(status: u16, answer: &Value, what: &str) -> Page {
    let message = answer["message"].as_str().unwrap_or_default();
    // `what` names things from the address: escaped like everything else.
    let what = esc(what);
    let body = match status {
        403 => format!(
            "<div class=\"error\" role=\"alert\"><p>You may not read {what}: the API server refused it (403).</p><p>{}</p><p class=\"muted\">Ask for the RBAC verb it names (the console asks as your kubeconfig's user).</p></div>",
            esc(message)
        ),
        404 => format!(
            "<div class=\"error\" role=\"alert\"><p>Not found: {what}.</p><p>{}</p></div>",
            esc(message)
        ),
        413 => format!(
            "<div class=\"error\" role=\"alert\"><p>The answer is too large to draw (413): {}</p><p class=\"muted\">Start from a narrower root.</p></div>",
            esc(message)
        ),
        503 => format!(
            "<div class=\"error\" role=\"alert\"><p>The semops read API is busy or past its deadline (503): {}</p><p class=\"muted\">Try again in a moment.</p></div>",
            esc(message)
        ),
        0 => format!(
            "<div class=\"error\" role=\"alert\"><p>The semops read API could not be reached.</p><p><code>{}</code></p></div>",
            esc(message)
        ),
        _ => format!(
            "<div class=\"error\" role=\"alert\"><p>The read API answered {status} for {what}.</p><p>{}</p></div>",
            esc(message)
        ),
    };
    Page {
        title: match status {
            403 => "Not allowed".into(),
            404 => "Not found".into(),
            0 => "Unreachable".into(),
            _ => format!("Error {status}"),
        },
        body,
    }
}

/// Rows of a table: `header` cells, then the rows (already HTML).
fn table(caption: &str, header: &[&str], rows: &[Vec<String>]) -> String {
    if rows.is_empty() {
        return format!(
            "<p class=\"muted\">No {}.</p>",
            esc(&caption.to_lowercase())
        );
    }
    let mut out = format!(
        "<table><caption class=\"muted\">{}</caption><thead><tr>",
        esc(caption)
    );
    for h in header {
        out.push_str(&format!("<th scope=\"col\">{}</th>", esc(h)));
    }
    out.push_str("</tr></thead><tbody>");
    for r in rows {
        out.push_str("<tr>");
        for c in r {
            out.push_str(&format!("<td>{c}</td>"));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

/// Page size of long lists.
pub const PAGE_SIZE: usize = 50;

/// Links to the pages of a list of `total` rows (`base` already has its `?` or `&`).
fn pager(base: &str, page: usize, total: usize) -> String {
    let pages = total.div_ceil(PAGE_SIZE).max(1);
    if pages == 1 {
        return String::new();
    }
    let mut out = format!(
        "<nav aria-label=\"Pages\"><p>Page {} of {pages}: ",
        page + 1
    );
    if page > 0 {
        out.push_str(&format!("<a href=\"{base}page={}\">previous</a> ", page));
    }
    if page + 1 < pages {
        out.push_str(&format!("<a href=\"{base}page={}\">next</a>", page + 2));
    }
    out.push_str("</p></nav>");
    out
}

fn model_href(ns: &str, catalog: &str, schema: &str, name: &str) -> String {
    format!(
        "/ns/{}/models/{}/{}/{}",
        enc(ns),
        enc(catalog),
        enc(schema),
        enc(name)
    )
}

fn metric_href(ns: &str, id: &str) -> String {
    format!("/ns/{}/metrics/{}", enc(ns), enc(id))
}

fn ready(conditions: &Value) -> (String, String) {
    let ready = list(conditions).into_iter().find(|c| c["type"] == "Ready");
    match ready {
        Some(c) => (text(&c["status"]), text(&c["reason"])),
        None => ("Unknown".into(), String::new()),
    }
}

fn state_cell(status: &str, reason: &str) -> String {
    let class = match status {
        "True" => "ok",
        "False" => "bad",
        _ => "warn",
    };
    let word = match status {
        "True" => "Ready",
        "False" => "Not ready",
        _ => "Unknown",
    };
    format!("<span class=\"{class}\">{word}</span> {}", esc(reason))
}

/// Models of a namespace: `models` are the `model` objects of the page's slice (or the error
/// status of each), `total` how many the namespace has.
pub fn models_page(
    ns: &str,
    models: &[(Vec<String>, Result<Value, u16>)],
    page: usize,
    total: usize,
) -> Page {
    let rows: Vec<Vec<String>> = models
        .iter()
        .map(|(id, answer)| {
            let (catalog, schema, name) = (&id[0], &id[1], &id[2]);
            let link = format!(
                "<a href=\"{}\">{}</a>",
                model_href(ns, catalog, schema, name),
                esc(name)
            );
            match answer {
                Ok(m) => {
                    let (status, reason) = ready(&m["conditions"]);
                    let drift = list(&m["sourceDrift"]).len();
                    vec![
                        link,
                        esc(catalog),
                        esc(schema),
                        state_cell(&status, &reason),
                        esc(&text(&m["revision"])),
                        list(&m["metricIds"]).len().to_string(),
                        if drift == 0 {
                            "none".into()
                        } else {
                            format!("<span class=\"warn\">{drift} source(s)</span>")
                        },
                    ]
                }
                Err(code) => vec![
                    link,
                    esc(catalog),
                    esc(schema),
                    format!("<span class=\"bad\">answer {code}</span>"),
                    String::new(),
                    String::new(),
                    String::new(),
                ],
            }
        })
        .collect();
    let mut catalogs: Vec<&String> = models.iter().map(|(id, _)| &id[0]).collect();
    catalogs.sort();
    catalogs.dedup();
    let catalog_links: Vec<String> = catalogs
        .iter()
        .map(|c| {
            format!(
                "<a href=\"/ns/{}/catalogs/{}\">{}</a>",
                enc(ns),
                enc(c),
                esc(c)
            )
        })
        .collect();
    let catalog_line = if catalog_links.is_empty() {
        String::new()
    } else {
        format!("<p>Catalogs: {}</p>", catalog_links.join(", "))
    };
    Page {
        title: format!("Models in {ns}"),
        body: format!(
            "<p>{total} model(s) you may read.</p>{catalog_line}{}{}",
            table(
                "Models",
                &[
                    "Model", "Catalog", "Schema", "State", "Revision", "Metrics", "Drift"
                ],
                &rows
            ),
            pager(&format!("/ns/{}?", enc(ns)), page, total)
        ),
    }
}

fn expressions(expr: &Value) -> String {
    list(&expr["dialects"])
        .iter()
        .map(|d| {
            format!(
                "<div><span class=\"muted\">{}</span> <code>{}</code></div>",
                esc(&text(&d["dialect"])),
                esc(&text(&d["expression"]))
            )
        })
        .collect()
}

/// One model: `model` is the read API's `model` object, `versions` its `versions` list.
pub fn model_page(
    ns: &str,
    catalog: &str,
    schema: &str,
    model: &Value,
    versions: Option<&Value>,
) -> Page {
    let name = text(&model["name"]);
    let def = &model["definition"];
    let (status, reason) = ready(&model["conditions"]);
    let mut body = format!(
        "<p>{} · revision {} · catalog <code>{}</code>, schema <code>{}</code> · <a href=\"/ns/{}/lineage/model/{}/{}/{}\">lineage picture</a></p>",
        state_cell(&status, &reason),
        esc(&text(&model["revision"])),
        esc(catalog),
        esc(schema),
        enc(ns),
        enc(catalog),
        enc(schema),
        enc(&name)
    );
    if let Some(c) = model["comment"].as_str() {
        body.push_str(&format!("<p>{}</p>", esc(c)));
    }
    let conditions: Vec<Vec<String>> = list(&model["conditions"])
        .iter()
        .map(|c| {
            vec![
                esc(&text(&c["type"])),
                esc(&text(&c["status"])),
                esc(&text(&c["reason"])),
                esc(&text(&c["message"])),
            ]
        })
        .collect();
    body.push_str("<h2>Conditions</h2>");
    body.push_str(&table(
        "Conditions",
        &["Type", "Status", "Reason", "Message"],
        &conditions,
    ));
    let drift: Vec<Vec<String>> = list(&model["sourceDrift"])
        .iter()
        .map(|d| {
            vec![
                esc(&text(&d["dataset"])),
                esc(&text(&d["kind"])),
                esc(&text(&d["column"])),
                esc(&text(&d["current"])),
            ]
        })
        .collect();
    if !drift.is_empty() {
        body.push_str("<h2>Source drift</h2>");
        body.push_str(&table(
            "Source drift",
            &["Dataset", "Kind", "Column", "Now"],
            &drift,
        ));
    }
    body.push_str("<h2>Datasets</h2>");
    let bound = list(&model["sourceAssociations"]);
    let datasets: Vec<Vec<String>> = list(&def["datasets"])
        .iter()
        .map(|d| {
            let binding = bound.iter().find(|a| a["dataset"] == d["name"]);
            let native = binding.map_or(String::new(), |a| {
                format!("{} <code>{}</code>", esc(&text(&a["type"])), esc(&text(&a["id"])))
            });
            let fields: Vec<String> = list(&d["fields"])
                .iter()
                .map(|f| {
                    format!(
                        "<div><code>{}</code>{}</div>",
                        esc(&text(&f["name"])),
                        expressions(&f["expression"])
                    )
                })
                .collect();
            let source = text(&d["source"]);
            vec![
                esc(&text(&d["name"])),
                format!(
                    "<a href=\"/ns/{}/lineage/table/{}\">{}</a>{}",
                    enc(ns),
                    enc(&source),
                    esc(&source),
                    crate::ossie::SourceRef::parse(&source)
                        .map(|r| format!(
                            " <span class=\"muted\">(catalog <a href=\"/ns/{}/catalogs/{}\">{}</a>)</span>",
                            enc(ns),
                            enc(&r.catalog),
                            esc(&r.catalog)
                        ))
                        .unwrap_or_default()
                ),
                native,
                esc(&list(&d["primaryKey"])
                    .iter()
                    .map(text)
                    .collect::<Vec<_>>()
                    .join(", ")),
                fields.concat(),
            ]
        })
        .collect();
    body.push_str(&table(
        "Datasets",
        &[
            "Dataset",
            "Source",
            "Bound to (native id)",
            "Primary key",
            "Fields",
        ],
        &datasets,
    ));
    let rels: Vec<Vec<String>> = list(&def["relationships"])
        .iter()
        .map(|r| {
            let cols = |k: &str| list(&r[k]).iter().map(text).collect::<Vec<_>>().join(", ");
            vec![
                esc(&text(&r["name"])),
                format!("{} ({})", esc(&text(&r["from"])), esc(&cols("fromColumns"))),
                format!("{} ({})", esc(&text(&r["to"])), esc(&cols("toColumns"))),
            ]
        })
        .collect();
    body.push_str("<h2>Relationships</h2>");
    body.push_str(&table(
        "Relationships",
        &["Relationship", "From (many)", "To (one)"],
        &rels,
    ));
    let ids = list(&model["metricIds"]);
    let metrics: Vec<Vec<String>> = list(&def["metrics"])
        .iter()
        .map(|m| {
            let mname = text(&m["name"]);
            let id = ids
                .iter()
                .find(|i| i["name"] == mname.as_str())
                .map(|i| text(&i["id"]))
                .unwrap_or_default();
            let mut note = String::new();
            if let Some(d) = m.get("deprecated").filter(|d| d.is_object()) {
                note = format!(
                    "<div class=\"warn\">Deprecated{}{}</div>",
                    d["replacement"]
                        .as_str()
                        .map(|r| format!(": use {}", esc(r)))
                        .unwrap_or_default(),
                    d["reason"]
                        .as_str()
                        .map(|r| format!(" ({})", esc(r)))
                        .unwrap_or_default()
                );
            }
            vec![
                format!("{}{note}", esc(&mname)),
                if id.is_empty() {
                    String::new()
                } else {
                    format!(
                        "<a href=\"{}\"><code>{}</code></a>",
                        metric_href(ns, &id),
                        esc(&id)
                    )
                },
                expressions(&m["expression"]),
                esc(&text(&m["description"])),
            ]
        })
        .collect();
    body.push_str("<h2>Metrics</h2>");
    body.push_str(&table(
        "Metrics",
        &["Metric", "Id", "Expression", "Description"],
        &metrics,
    ));
    if let Some(versions) = versions {
        let names = |v: &Value, sign: &str| -> Vec<String> {
            list(v)
                .iter()
                .map(|m| {
                    format!(
                        "{sign}<a href=\"{}\">{}</a>",
                        metric_href(ns, &text(&m["id"])),
                        esc(&text(&m["name"]))
                    )
                })
                .collect()
        };
        let rows: Vec<Vec<String>> = list(versions)
            .iter()
            .rev()
            .map(|v| {
                let mut changes = match v.get("metricsAdded") {
                    Some(a) => names(a, "+ "),
                    None => vec!["(earlier revision not kept)".into()],
                };
                changes.extend(names(&v["metricsRetired"], "− "));
                changes.extend(names(&v["metricsRenamed"], "→ "));
                vec![
                    format!(
                        "{}{}",
                        esc(&text(&v["revision"])),
                        if v["current"] == true {
                            " (current)"
                        } else {
                            ""
                        }
                    ),
                    esc(&text(&v["created"])),
                    changes.join("<br>"),
                ]
            })
            .collect();
        body.push_str("<h2>Revision history</h2>");
        body.push_str(&table(
            "Revisions, newest first",
            &[
                "Revision",
                "Accepted",
                "Metric ids minted (+), retired (−), renamed (→)",
            ],
            &rows,
        ));
    }
    Page {
        title: format!("Model {name}"),
        body,
    }
}

/// A metric by id: the read API's `metric` object.
pub fn metric_page(ns: &str, m: &Value) -> Page {
    let name = text(&m["name"]);
    let model = &m["model"];
    let path = list(&model["namespace"]);
    let (catalog, schema) = (
        path.get(1).map(text).unwrap_or_default(),
        path.get(2).map(text).unwrap_or_default(),
    );
    let state = text(&m["state"]);
    let mut body = format!(
        "<p>Id <code>{}</code> · <span class=\"{}\">{}</span> · model <a href=\"{}\">{}</a> (revision {})</p>",
        esc(&text(&m["id"])),
        if state == "CURRENT" || state == "Current" {
            "ok"
        } else {
            "warn"
        },
        esc(&state),
        model_href(ns, &catalog, &schema, &text(&model["name"])),
        esc(&text(&model["name"])),
        esc(&text(&m["modelRevision"])),
    );
    let former = list(&m["formerNames"]);
    if !former.is_empty() {
        body.push_str(&format!(
            "<p>Formerly: {}</p>",
            esc(&former.iter().map(text).collect::<Vec<_>>().join(", "))
        ));
    }
    if let Some(r) = m["retiredInRevision"].as_i64() {
        body.push_str(&format!("<p>Retired in revision {r}.</p>"));
    }
    let successors = list(&m["mintedWithRetirement"]);
    if !successors.is_empty() {
        let links: Vec<String> = successors
            .iter()
            .map(|s| {
                format!(
                    "<a href=\"{}\">{}</a>",
                    metric_href(ns, &text(&s["id"])),
                    esc(&text(&s["name"]))
                )
            })
            .collect();
        body.push_str(&format!(
            "<p>Minted when it was retired: {}</p>",
            links.join(", ")
        ));
    }
    if let Some(def) = m.get("metric").filter(|d| d.is_object()) {
        body.push_str("<h2>Definition</h2>");
        body.push_str(&expressions(&def["expression"]));
        if let Some(d) = def.get("deprecated").filter(|d| d.is_object()) {
            body.push_str(&format!(
                "<p class=\"warn\">Deprecated: {}</p>",
                esc(&text(&d["reason"]))
            ));
            if let Some(r) = d["replacement"].as_str() {
                body.push_str(&format!("<p>Use {} instead.</p>", esc(r)));
            }
        }
    }
    let rows: Vec<Vec<String>> = list(&m["revisions"])
        .iter()
        .map(|r| {
            vec![
                esc(&text(&r["revision"])),
                esc(&text(&r["metric"]["name"])),
                expressions(&r["metric"]["expression"]),
                if r["changed"] == true {
                    "changed".into()
                } else {
                    "same".into()
                },
            ]
        })
        .collect();
    body.push_str("<h2>In each kept revision</h2>");
    body.push_str(&table(
        "Kept revisions",
        &["Revision", "Name", "Expression", "Definition"],
        &rows,
    ));
    Page {
        title: format!("Metric {name}"),
        body,
    }
}

/// The lineage picture page around an SVG the lineage room drew.
pub fn lineage_page(title: &str, graph: &Value, svg: &str) -> Page {
    let (n, e) = (list(&graph["nodes"]).len(), list(&graph["edges"]).len());
    Page {
        title: title.into(),
        body: format!(
            "<p>{n} nodes, {e} edges.</p><p><button type=\"button\" id=\"zoom-in\">Zoom in</button> <button type=\"button\" id=\"zoom-out\">Zoom out</button></p>\
<div class=\"picture\" id=\"picture\">{svg}</div>\
<script>(function(){{var s=document.querySelector('#picture svg'),z=1,w=s.width.baseVal.value,h=s.height.baseVal.value;function f(k){{z=Math.max(0.2,Math.min(4,z*k));s.setAttribute('width',w*z);s.setAttribute('height',h*z);}}document.getElementById('zoom-in').onclick=function(){{f(1.25)}};document.getElementById('zoom-out').onclick=function(){{f(0.8)}};}})();</script>"
        ),
    }
}

/// The impact form and, once asked, what would break.
pub fn impact_page(
    ns: &str,
    object_type: &str,
    full_name: &str,
    columns: &str,
    answer: Option<&Value>,
) -> Page {
    let selected = |t: &str| if t == object_type { " selected" } else { "" };
    let mut body = format!(
        "<form action=\"/ns/{}/impact\" method=\"get\"><p><label for=\"type\">Kind</label> <select id=\"type\" name=\"type\"><option value=\"table\"{}>table</option><option value=\"view\"{}>view</option></select> \
<label for=\"name\">catalog.schema.name</label> <input id=\"name\" name=\"name\" value=\"{}\" size=\"40\"> \
<label for=\"columns\">Columns (comma-separated; empty for the whole object)</label> <input id=\"columns\" name=\"columns\" value=\"{}\" size=\"30\"> \
<button type=\"submit\">Show impact</button></p></form>",
        enc(ns),
        selected("table"),
        selected("view"),
        esc(full_name),
        esc(columns)
    );
    if let Some(a) = answer {
        let rows: Vec<Vec<String>> = list(&a["impacts"])
            .iter()
            .map(|i| {
                let metrics: Vec<String> = list(&i["metrics"])
                    .iter()
                    .map(|m| {
                        format!(
                            "<a href=\"{}\">{}</a>",
                            metric_href(ns, &text(&m["id"])),
                            esc(&text(&m["name"]))
                        )
                    })
                    .collect();
                vec![
                    esc(&text(&i["model"])),
                    esc(&text(&i["dataset"])),
                    esc(&text(&i["column"])),
                    esc(&list(&i["usedBy"])
                        .iter()
                        .map(text)
                        .collect::<Vec<_>>()
                        .join(", ")),
                    metrics.join(", "),
                ]
            })
            .collect();
        body.push_str(if a["breaks"] == true {
            "<p class=\"bad\">This change would break the models below.</p>"
        } else {
            "<p class=\"ok\">Nothing would break.</p>"
        });
        body.push_str(&table(
            "What would break",
            &["Model", "Dataset", "Column", "Used by", "Metrics"],
            &rows,
        ));
    }
    Page {
        title: "Impact of a change".into(),
        body,
    }
}

/// A catalog: its registrations with their recorded state, then its live stale report
/// (`stale`: the answer, or the status and answer of a refusal).
pub fn catalog_page(
    catalog: &str,
    registrations: &Value,
    stale: Result<&Value, (u16, &Value)>,
) -> Page {
    let rows: Vec<Vec<String>> = list(&registrations["registrations"])
        .iter()
        .map(|r| {
            let state = text(&r["state"]);
            let class = match state.as_str() {
                "Live" => "ok",
                "Stale" => "bad",
                _ => "warn",
            };
            vec![
                esc(&text(&r["kind"])),
                esc(&text(&r["schema"])),
                esc(&text(&r["name"])),
                format!("<span class=\"{class}\">{}</span>", esc(&state)),
                esc(&text(&r["currentName"])),
                match text(&r["id"]) {
                    id if id.is_empty() => String::new(),
                    id => format!("<code>{}</code>", esc(&id)),
                },
            ]
        })
        .collect();
    let mut body = String::from("<h2>Registrations</h2>");
    body.push_str(&table(
        "Registrations and the state the check rounds recorded",
        &["Kind", "Schema", "Name", "State", "Now named", "Native id"],
        &rows,
    ));
    body.push_str("<h2>Stale now</h2>");
    match stale {
        Ok(answer) => body.push_str(&stale_page(catalog, answer).body),
        Err((status, answer)) => body
            .push_str(&error_page(status, answer, &format!("the stale report of {catalog}")).body),
    }
    Page {
        title: format!("Catalog {catalog}"),
        body,
    }
}

/// A catalog's stale report (`staleEntities`).
pub fn stale_page(catalog: &str, answer: &Value) -> Page {
    let body = if answer["catalogUnreachable"] == true {
        "<div class=\"error\" role=\"alert\"><p>The catalog is unreachable: nothing is known this round and nothing was changed.</p></div>".to_string()
    } else {
        let rows: Vec<Vec<String>> = list(&answer["staleEntities"])
            .iter()
            .map(|e| {
                ["kind", "schema", "name", "state", "renamedTo", "detectedAt"]
                    .iter()
                    .map(|k| esc(&text(&e[*k])))
                    .collect()
            })
            .collect();
        table(
            "Registrations whose objects changed",
            &["Kind", "Schema", "Name", "State", "Now named", "Detected"],
            &rows,
        )
    };
    Page {
        title: format!("Stale registrations of {catalog}"),
        body,
    }
}

/// Search: metrics matching `q` (rows of `[catalog, schema, model, metric, id, description]`),
/// and the datasets using a table (`lookup`: the read API's answer).
pub fn search_page(
    ns: &str,
    q: &str,
    metrics: Option<&[Vec<String>]>,
    page: usize,
    table_name: &str,
    lookup: Option<&Value>,
) -> Page {
    let mut body = format!(
        "<form action=\"/ns/{n}/search\" method=\"get\"><p><label for=\"q\">Metric name or description</label> <input id=\"q\" name=\"q\" value=\"{}\" size=\"30\"> <button type=\"submit\">Search metrics</button></p></form>\
<form action=\"/ns/{n}/search\" method=\"get\"><p><label for=\"table\">Models using table (catalog.schema.name)</label> <input id=\"table\" name=\"table\" value=\"{}\" size=\"40\"> <button type=\"submit\">Look up</button></p></form>",
        esc(q),
        esc(table_name),
        n = enc(ns)
    );
    if let Some(found) = metrics {
        let rows: Vec<Vec<String>> = found
            .iter()
            .skip(page * PAGE_SIZE)
            .take(PAGE_SIZE)
            .map(|r| {
                vec![
                    format!(
                        "<a href=\"{}\">{}</a>",
                        model_href(ns, &r[0], &r[1], &r[2]),
                        esc(&r[2])
                    ),
                    esc(&r[3]),
                    if r[4].is_empty() {
                        String::new()
                    } else {
                        format!(
                            "<a href=\"{}\"><code>{}</code></a>",
                            metric_href(ns, &r[4]),
                            esc(&r[4])
                        )
                    },
                    esc(&r[5]),
                ]
            })
            .collect();
        body.push_str("<h2>Metrics</h2>");
        body.push_str(&table(
            "Matching metrics",
            &["Model", "Metric", "Id", "Description"],
            &rows,
        ));
        body.push_str(&format!("<p>{} metric(s) found.</p>", found.len()));
        body.push_str(&pager(
            &format!(
                "/ns/{}/search?q={}&amp;table={}&amp;",
                enc(ns),
                enc(q),
                enc(table_name)
            ),
            page,
            found.len(),
        ));
    }
    if let Some(l) = lookup {
        let rows: Vec<Vec<String>> = list(&l["identifiers"])
            .iter()
            .map(|i| {
                let path = list(&i["namespace"]).iter().map(text).collect::<Vec<_>>();
                let (c, s, m) = (
                    path.get(1).cloned().unwrap_or_default(),
                    path.get(2).cloned().unwrap_or_default(),
                    path.get(3).cloned().unwrap_or_default(),
                );
                vec![
                    format!("<a href=\"{}\">{}</a>", model_href(ns, &c, &s, &m), esc(&m)),
                    esc(&text(&i["name"])),
                ]
            })
            .collect();
        body.push_str("<h2>Datasets using the table</h2>");
        body.push_str(&table(
            "Datasets using the table",
            &["Model", "Dataset"],
            &rows,
        ));
    }
    Page {
        title: "Search".into(),
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hostile_names_are_escaped_everywhere_they_appear() {
        let evil = "<script>alert('x')</script>";
        let model = json!({"name": evil, "revision": 1, "definition": {"datasets": [{"name": evil, "source": evil}], "metrics": [{"name": evil, "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": evil}]}}]}, "metricIds": [{"name": evil, "id": evil}], "conditions": [{"type": "Ready", "status": "True", "reason": evil, "message": evil}]});
        let html = document(
            evil,
            &model_page(
                evil,
                evil,
                evil,
                &model,
                Some(
                    &json!([{"revision": 1, "current": true, "metricsAdded": [{"name": evil, "id": evil}], "metricsRetired": []}]),
                ),
            ),
        );
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(html.contains("&lt;script&gt;"));
        assert!(
            html.contains("href=\"/ns/%3Cscript%3Ealert%28%27x%27%29%3C%2Fscript%3E/metrics/"),
            "links are percent-encoded"
        );
        for status in [0, 403, 404, 413, 500, 503] {
            let page = error_page(status, &json!({"message": evil}), &format!("model {evil}"));
            assert!(!page.body.contains("<script>"), "{status}: {}", page.body);
        }
    }

    #[test]
    fn a_refusal_names_the_status_and_the_api_message() {
        let p = error_page(
            403,
            &json!({"message": "semanticmodels \"m\" is forbidden: User \"u\" cannot get resource \"semanticmodels\""}),
            "model m",
        );
        assert_eq!(p.title, "Not allowed");
        assert!(
            p.body
                .contains("cannot get resource &quot;semanticmodels&quot;"),
            "{}",
            p.body
        );
        assert!(
            error_page(0, &json!({"message": "connection refused"}), "x")
                .body
                .contains("could not be reached")
        );
        assert!(error_page(413, &json!({}), "x").body.contains("too large"));
    }

    #[test]
    fn search_results_page_fifty_at_a_time() {
        let rows: Vec<Vec<String>> = (0..120)
            .map(|i| {
                vec![
                    "c".into(),
                    "s".into(),
                    "m".into(),
                    format!("metric{i:03}"),
                    String::new(),
                    String::new(),
                ]
            })
            .collect();
        let p = search_page("ns", "a b", Some(&rows), 2, "", None);
        assert!(
            p.body.contains("metric100") && !p.body.contains("metric099"),
            "the third page"
        );
        assert!(p.body.contains("120 metric(s) found") && p.body.contains("Page 3 of 3"));
        assert!(
            p.body
                .contains("href=\"/ns/ns/search?q=a%20b&amp;table=&amp;page=2\">previous"),
            "{}",
            p.body
        );
    }

    #[test]
    fn long_lists_page() {
        assert_eq!(pager("/ns/a?", 0, 10), "");
        let p = pager("/ns/a?", 1, 120);
        assert!(
            p.contains("Page 2 of 3")
                && p.contains("page=1\">previous")
                && p.contains("page=3\">next"),
            "{p}"
        );
        assert_eq!(enc("a b/ü"), "a%20b%2F%C3%BC");
    }

    /// Asserts that a page's HTML holds each of `parts` verbatim.
    fn shows(html: &str, parts: &[&str]) {
        for part in parts {
            assert!(html.contains(part), "{part}\n{html}");
        }
    }

    #[test]
    fn each_refusal_has_its_title_and_its_words() {
        // (status, title, what the body says)
        let cases = [
            (
                403,
                "Not allowed",
                "You may not read model m: the API server refused it (403).",
            ),
            (404, "Not found", "Not found: model m."),
            (
                413,
                "Error 413",
                "The answer is too large to draw (413): why",
            ),
            (503, "Error 503", "busy or past its deadline (503): why"),
            (
                0,
                "Unreachable",
                "The semops read API could not be reached.",
            ),
            (500, "Error 500", "The read API answered 500 for model m."),
        ];
        for (status, title, says) in cases {
            let p = error_page(status, &json!({"message": "why"}), "model m");
            assert_eq!(p.title, title, "{status}");
            assert!(
                p.body.contains(says) && p.body.contains("why"),
                "{status}: {}",
                p.body
            );
        }
    }

    #[test]
    fn the_pager_links_only_to_pages_that_exist() {
        // (page, total rows, the links it shows)
        let cases = [
            (0, 0, None),
            (0, PAGE_SIZE, None),
            (
                0,
                PAGE_SIZE + 1,
                Some("Page 1 of 2: <a href=\"/b?page=2\">next</a>"),
            ),
            (
                1,
                PAGE_SIZE + 1,
                Some("Page 2 of 2: <a href=\"/b?page=1\">previous</a> </p>"),
            ),
            (
                1,
                3 * PAGE_SIZE,
                Some(
                    "Page 2 of 3: <a href=\"/b?page=1\">previous</a> <a href=\"/b?page=3\">next</a>",
                ),
            ),
            (
                2,
                3 * PAGE_SIZE,
                Some("Page 3 of 3: <a href=\"/b?page=2\">previous</a> </p>"),
            ),
        ];
        for (page, total, links) in cases {
            let p = pager("/b?", page, total);
            match links {
                None => assert_eq!(p, "", "{page}/{total}"),
                Some(links) => assert!(p.contains(links), "{page}/{total}: {p}"),
            }
        }
    }

    #[test]
    fn the_state_is_the_ready_conditions_in_words_and_colour() {
        for (conditions, cell) in [
            (
                json!([{"type": "Reconciling", "status": "False", "reason": "Busy"}, {"type": "Ready", "status": "True", "reason": "Fine"}]),
                "<span class=\"ok\">Ready</span> Fine",
            ),
            (
                json!([{"type": "Ready", "status": "False", "reason": "A&B"}]),
                "<span class=\"bad\">Not ready</span> A&amp;B",
            ),
            (
                json!([{"type": "Ready", "status": "Unknown", "reason": "Wait"}]),
                "<span class=\"warn\">Unknown</span> Wait",
            ),
            (json!(null), "<span class=\"warn\">Unknown</span> "),
        ] {
            let (status, reason) = ready(&conditions);
            assert_eq!(state_cell(&status, &reason), cell, "{conditions}");
        }
    }

    #[test]
    fn the_models_page_shows_each_model_or_the_refusal_of_it() {
        let id = |c: &str, n: &str| vec![c.to_string(), "s".to_string(), n.to_string()];
        let models = [
            (
                id("wh", "orders"),
                Ok(
                    json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Accepted"}], "revision": 3, "metricIds": [{}, {}], "sourceDrift": []}),
                ),
            ),
            (
                id("wh", "people"),
                Ok(json!({"revision": 1, "sourceDrift": [{}, {}]})),
            ),
            (id("lake", "hidden"), Err(403)),
        ];
        let p = models_page("n", &models, 0, 3);
        assert_eq!(p.title, "Models in n");
        let b = &p.body;
        shows(
            b,
            &[
                "<tr><td><a href=\"/ns/n/models/wh/s/orders\">orders</a></td><td>wh</td><td>s</td><td><span class=\"ok\">Ready</span> Accepted</td><td>3</td><td>2</td><td>none</td></tr>",
                "<tr><td><a href=\"/ns/n/models/wh/s/people\">people</a></td><td>wh</td><td>s</td><td><span class=\"warn\">Unknown</span> </td><td>1</td><td>0</td><td><span class=\"warn\">2 source(s)</span></td></tr>",
                "<td><span class=\"bad\">answer 403</span></td><td></td><td></td><td></td></tr>",
                "<p>3 model(s) you may read.</p><p>Catalogs: <a href=\"/ns/n/catalogs/lake\">lake</a>, <a href=\"/ns/n/catalogs/wh\">wh</a></p>",
            ],
        );
        assert!(!b.contains("Page "), "one page");
        assert!(
            models_page("n", &models, 0, 2 * PAGE_SIZE)
                .body
                .contains("Page 1 of 2")
        );
        assert!(models_page("n", &[], 0, 0).body.contains("No models."));
    }

    fn shop() -> Value {
        json!({
            "name": "shop", "revision": 4, "comment": "Sales & returns",
            "conditions": [{"type": "Ready", "status": "True", "reason": "Accepted", "message": "ok"}],
            "sourceAssociations": [
                {"dataset": "people", "type": "TABLE", "id": "oid-people"},
                {"dataset": "orders", "type": "VIEW", "id": "oid-orders"}
            ],
            "metricIds": [{"name": "revenue", "id": "m-rev"}, {"name": "buyers", "id": "m-buy"}],
            "definition": {
                "datasets": [
                    {"name": "orders", "source": "wh.s.orders", "primaryKey": ["id", "line"],
                     "fields": [{"name": "amount", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "price * qty"}]}}]},
                    {"name": "people", "source": "wh.s.people"}
                ],
                "relationships": [{"name": "buyer", "from": "orders", "fromColumns": ["person_id"], "to": "people", "toColumns": ["id"]}],
                "metrics": [
                    {"name": "buyers", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "COUNT(DISTINCT person_id)"}]},
                     "deprecated": {"replacement": "customers", "reason": "renamed"}},
                    {"name": "revenue", "description": "Money in"}
                ]
            }
        })
    }

    #[test]
    fn the_model_page_binds_each_dataset_and_metric_to_its_own_record() {
        let p = model_page("n", "wh", "s", &shop(), None);
        assert_eq!(p.title, "Model shop");
        let b = &p.body;
        shows(
            b,
            &[
                "<span class=\"ok\">Ready</span> Accepted · revision 4 · catalog <code>wh</code>, schema <code>s</code> · <a href=\"/ns/n/lineage/model/wh/s/shop\">lineage picture</a>",
                "<p>Sales &amp; returns</p>",
                "<td>Ready</td><td>True</td><td>Accepted</td><td>ok</td>",
                "<td>orders</td><td><a href=\"/ns/n/lineage/table/wh.s.orders\">wh.s.orders</a> <span class=\"muted\">(catalog <a href=\"/ns/n/catalogs/wh\">wh</a>)</span></td><td>VIEW <code>oid-orders</code></td><td>id, line</td><td><div><code>amount</code><div><span class=\"muted\">ANSI_SQL</span> <code>price * qty</code></div></div></td>",
                "<td>people</td><td><a href=\"/ns/n/lineage/table/wh.s.people\">wh.s.people</a> <span class=\"muted\">(catalog <a href=\"/ns/n/catalogs/wh\">wh</a>)</span></td><td>TABLE <code>oid-people</code></td>",
                "<td>buyer</td><td>orders (person_id)</td><td>people (id)</td>",
                "<td>buyers<div class=\"warn\">Deprecated: use customers (renamed)</div></td><td><a href=\"/ns/n/metrics/m-buy\"><code>m-buy</code></a></td><td><div><span class=\"muted\">ANSI_SQL</span> <code>COUNT(DISTINCT person_id)</code></div></td><td></td>",
                "<td>revenue</td><td><a href=\"/ns/n/metrics/m-rev\"><code>m-rev</code></a></td><td></td><td>Money in</td>",
            ],
        );
        assert!(!b.contains("Source drift") && !b.contains("Revision history"));
        let mut drifted = shop();
        drifted["sourceDrift"] =
            json!([{"dataset": "orders", "kind": "ColumnMissing", "column": "qty", "current": ""}]);
        let b = model_page("n", "wh", "s", &drifted, None).body;
        shows(
            &b,
            &[
                "<h2>Source drift</h2>",
                "<td>orders</td><td>ColumnMissing</td><td>qty</td><td></td>",
            ],
        );
    }

    #[test]
    fn the_revision_history_lists_newest_first_with_what_each_minted() {
        let versions = json!([
            {"revision": 1, "created": "t1"},
            {"revision": 2, "created": "t2", "metricsAdded": [], "metricsRetired": [{"name": "old", "id": "m-old"}]},
            {"revision": 3, "created": "t3", "current": true, "metricsAdded": [{"name": "revenue", "id": "m-rev"}], "metricsRenamed": [{"name": "buyers", "id": "m-buy"}]}
        ]);
        let b = model_page("n", "wh", "s", &shop(), Some(&versions)).body;
        let three = "<td>3 (current)</td><td>t3</td><td>+ <a href=\"/ns/n/metrics/m-rev\">revenue</a><br>→ <a href=\"/ns/n/metrics/m-buy\">buyers</a></td>";
        let two = "<td>2</td><td>t2</td><td>− <a href=\"/ns/n/metrics/m-old\">old</a></td>";
        let one = "<td>1</td><td>t1</td><td>(earlier revision not kept)</td>";
        let at = |row: &str| b.find(row).unwrap_or_else(|| panic!("{row}\n{b}"));
        assert!(at(three) < at(two) && at(two) < at(one));
    }

    #[test]
    fn the_metric_page_shows_its_history_only_where_there_is_one() {
        let m = json!({
            "id": "m-1", "name": "revenue", "state": "CURRENT", "modelRevision": 2,
            "model": {"namespace": ["n", "wh", "s"], "name": "shop"},
            "formerNames": ["sales", "income"],
            "mintedWithRetirement": [{"name": "net", "id": "m-2"}],
            "metric": {"expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "SUM(x)"}]},
                       "deprecated": {"reason": "too broad", "replacement": "net"}},
            "revisions": [{"revision": 1, "metric": {"name": "sales"}, "changed": true}, {"revision": 2, "metric": {"name": "revenue"}}]
        });
        let p = metric_page("n", &m);
        assert_eq!(p.title, "Metric revenue");
        shows(
            &p.body,
            &[
                "<p>Id <code>m-1</code> · <span class=\"ok\">CURRENT</span> · model <a href=\"/ns/n/models/wh/s/shop\">shop</a> (revision 2)</p>",
                "<p>Formerly: sales, income</p>",
                "<p>Minted when it was retired: <a href=\"/ns/n/metrics/m-2\">net</a></p>",
                "<code>SUM(x)</code>",
                "<p class=\"warn\">Deprecated: too broad</p><p>Use net instead.</p>",
                "<td>1</td><td>sales</td><td></td><td>changed</td>",
                "<td>2</td><td>revenue</td><td></td><td>same</td>",
            ],
        );
        let retired = json!({"id": "m-3", "name": "old", "state": "RETIRED", "retiredInRevision": 5, "model": {"namespace": ["n", "wh", "s"], "name": "shop"}});
        let b = metric_page("n", &retired).body;
        assert!(
            b.contains("<span class=\"warn\">RETIRED</span>")
                && b.contains("<p>Retired in revision 5.</p>"),
            "{b}"
        );
        assert!(
            !b.contains("Formerly") && !b.contains("Minted when") && !b.contains("Definition"),
            "{b}"
        );
    }

    #[test]
    fn the_impact_page_keeps_the_question_and_says_whether_anything_breaks() {
        let form = impact_page("n", "view", "wh.s.orders", "qty", None).body;
        assert!(
            form.contains("<option value=\"table\">table</option><option value=\"view\" selected>view</option>")
                && form.contains("value=\"wh.s.orders\"")
                && form.contains("value=\"qty\""),
            "{form}"
        );
        assert!(!form.contains("break"));
        let breaks = json!({"breaks": true, "impacts": [{"model": "shop", "dataset": "orders", "column": "qty", "usedBy": ["amount", "revenue"], "metrics": [{"name": "revenue", "id": "m-rev"}]}]});
        let b = impact_page("n", "table", "wh.s.orders", "qty", Some(&breaks)).body;
        assert!(b.contains("<option value=\"table\" selected>table</option><option value=\"view\">view</option>"), "{b}");
        assert!(
            b.contains("<p class=\"bad\">This change would break the models below.</p>"),
            "{b}"
        );
        assert!(
            b.contains("<td>shop</td><td>orders</td><td>qty</td><td>amount, revenue</td><td><a href=\"/ns/n/metrics/m-rev\">revenue</a></td>"),
            "{b}"
        );
        let fine = impact_page(
            "n",
            "table",
            "wh.s.orders",
            "",
            Some(&json!({"breaks": false})),
        )
        .body;
        shows(
            &fine,
            &[
                "<p class=\"ok\">Nothing would break.</p>",
                "No what would break.",
            ],
        );
    }

    #[test]
    fn the_catalog_page_colours_each_state_and_shows_the_stale_report_or_its_refusal() {
        let registrations = json!({"registrations": [
            {"kind": "Table", "schema": "s", "name": "a", "state": "Live", "id": "7"},
            {"kind": "Table", "schema": "s", "name": "b", "state": "Stale"},
            {"kind": "Table", "schema": "s", "name": "c", "state": "Renamed", "currentName": "s.d"}
        ]});
        let stale = json!({"staleEntities": [{"kind": "Table", "schema": "s", "name": "b", "state": "Stale", "detectedAt": "t"}]});
        let p = catalog_page("wh", &registrations, Ok(&stale));
        assert_eq!(p.title, "Catalog wh");
        shows(
            &p.body,
            &[
                "<td>Table</td><td>s</td><td>a</td><td><span class=\"ok\">Live</span></td><td></td><td><code>7</code></td>",
                "<td>Table</td><td>s</td><td>b</td><td><span class=\"bad\">Stale</span></td><td></td><td></td>",
                "<td><span class=\"warn\">Renamed</span></td><td>s.d</td>",
                "<td>Table</td><td>s</td><td>b</td><td>Stale</td><td></td><td>t</td>",
            ],
        );
        let refused = catalog_page("wh", &registrations, Err((403, &json!({"message": "no"}))));
        assert!(
            refused
                .body
                .contains("You may not read the stale report of wh"),
            "{}",
            refused.body
        );
        let p = stale_page(
            "wh",
            &json!({"catalogUnreachable": true, "staleEntities": [{"name": "b"}]}),
        );
        assert_eq!(p.title, "Stale registrations of wh");
        assert!(
            p.body.contains("The catalog is unreachable") && !p.body.contains("<table>"),
            "{}",
            p.body
        );
        let none = stale_page(
            "wh",
            &json!({"catalogUnreachable": false, "staleEntities": []}),
        )
        .body;
        assert!(
            none.contains("No registrations whose objects changed."),
            "{none}"
        );
    }

    #[test]
    fn the_lineage_page_counts_what_the_picture_shows() {
        let p = lineage_page(
            "Lineage of shop",
            &json!({"nodes": [{}, {}, {}], "edges": [{}, {}]}),
            "<svg></svg>",
        );
        assert_eq!(p.title, "Lineage of shop");
        assert!(
            p.body.starts_with("<p>3 nodes, 2 edges.</p>")
                && p.body
                    .contains("<div class=\"picture\" id=\"picture\"><svg></svg></div>")
        );
    }
}
