//! A lineage graph for people: Graphviz DOT and Mermaid, from the API's JSON body. Labels are
//! escaped for each syntax (names may hold quotes, brackets or newlines).

use serde_json::Value;

fn items(v: &Value, key: &str) -> Vec<Value> {
    v[key].as_array().cloned().unwrap_or_default()
}

fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_string()
}

fn label(node: &Value) -> String {
    format!("{} {}", text(node, "kind"), text(node, "name"))
}

fn dot_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| match c {
            '"' => vec!['\\', '"'],
            '\\' => vec!['\\', '\\'],
            '\n' => vec!['\\', 'n'],
            c => vec![c],
        })
        .collect()
}

fn shape(kind: &str) -> &'static str {
    match kind {
        "SOURCE" => "cylinder",
        "DATASET" => "box",
        "METRIC" => "ellipse",
        _ => "folder",
    }
}

/// Graphviz: `semops lineage … -o dot | dot -Tsvg > lineage.svg`.
pub fn dot(graph: &Value) -> String {
    let mut out = String::from("digraph lineage {\n  rankdir=LR;\n");
    let unavailable: Vec<String> = items(graph, "warnings")
        .iter()
        .map(|w| text(w, "nodeId"))
        .collect();
    for n in items(graph, "nodes") {
        let id = text(&n, "id");
        let style = if unavailable.contains(&id) {
            ", style=dashed, color=red"
        } else {
            ""
        };
        out.push_str(&format!(
            "  \"{}\" [label=\"{}\", shape={}{style}];\n",
            dot_escape(&id),
            dot_escape(&label(&n)),
            shape(&text(&n, "kind"))
        ));
    }
    for e in items(graph, "edges") {
        out.push_str(&format!(
            "  \"{}\" -> \"{}\" [label=\"{}\"];\n",
            dot_escape(&text(&e, "source")),
            dot_escape(&text(&e, "target")),
            text(&e, "kind")
        ));
    }
    out.push_str("}\n");
    out
}

/// Mermaid flowchart text: node ids are positional (`n0`, `n1`, …) because Mermaid ids cannot
/// hold arbitrary characters; labels are quoted with `#quot;` for quotes.
pub fn mermaid(graph: &Value) -> String {
    let nodes = items(graph, "nodes");
    let index = |id: &str| nodes.iter().position(|n| n["id"] == id);
    let mut out = String::from("flowchart LR\n");
    for (i, n) in nodes.iter().enumerate() {
        let l = label(n)
            .replace('"', "#quot;")
            .replace('\n', " ")
            .replace('<', "#lt;")
            .replace('>', "#gt;");
        let (open, close) = match text(n, "kind").as_str() {
            "SOURCE" => ("[(", ")]"),
            "METRIC" => ("([", "])"),
            _ => ("[", "]"),
        };
        out.push_str(&format!("  n{i}{open}\"{l}\"{close}\n"));
    }
    for e in items(graph, "edges") {
        if let (Some(s), Some(t)) = (index(&text(&e, "source")), index(&text(&e, "target"))) {
            out.push_str(&format!("  n{s} -->|{}| n{t}\n", text(&e, "kind")));
        }
    }
    out
}

/// Text for SVG and HTML: `&`, `<`, `>`, `"` and `'` escaped; control characters dropped.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Column of each kind, left to right: what contains, what is contained, what is bound to.
const COLUMNS: [&str; 4] = ["MODEL", "METRIC", "DATASET", "SOURCE"];
const COLUMN_WIDTH: usize = 300;
const ROW_HEIGHT: usize = 28;
const BOX_WIDTH: usize = 240;
const BOX_HEIGHT: usize = 22;
/// Longest label drawn, in characters (the full name is in the node's title).
const LABEL_CHARS: usize = 34;

/// The nodes in the order they are drawn: models, metrics and datasets as the answer lists them;
/// sources by the mean row of the datasets bound to them, so binding edges cross as little as
/// the datasets' order allows (a source no dataset binds keeps its place at the end).
fn in_drawing_order(nodes: Vec<Value>, edges: &[Value]) -> Vec<Value> {
    let (sources, mut others): (Vec<Value>, Vec<Value>) =
        nodes.into_iter().partition(|n| text(n, "kind") == "SOURCE");
    let row: std::collections::HashMap<String, usize> = others
        .iter()
        .filter(|n| text(n, "kind") == "DATASET")
        .enumerate()
        .map(|(i, n)| (text(n, "id"), i))
        .collect();
    // (sum of rows, count) of the datasets bound to each source, in one pass over the edges.
    let mut bound: std::collections::HashMap<String, (usize, usize)> =
        std::collections::HashMap::new();
    for e in edges {
        if let Some(r) = row.get(&text(e, "source")) {
            let entry = bound.entry(text(e, "target")).or_default();
            *entry = (entry.0 + r, entry.1 + 1);
        }
    }
    let key = |source: &Value| -> f64 {
        match bound.get(&text(source, "id")) {
            Some((sum, n)) if *n > 0 => *sum as f64 / *n as f64,
            _ => f64::MAX,
        }
    };
    let mut keyed: Vec<(f64, Value)> = sources.into_iter().map(|s| (key(&s), s)).collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
    others.extend(keyed.into_iter().map(|(_, s)| s));
    others
}

/// An SVG picture of a lineage graph laid out by semops: one column per node kind (models,
/// metrics, datasets, sources), nodes in answer order within a column, edges as curves. Every
/// node is a `<g class="node">` with its kind, id and full name (a `<title>`), every edge a
/// `<path class="edge">`, so the picture can be checked against the graph it draws; unavailable
/// sources are dashed. Readable at 500 nodes: one row per node, scrolled or zoomed by the page.
pub fn svg(graph: &Value) -> String {
    let nodes = in_drawing_order(items(graph, "nodes"), &items(graph, "edges"));
    let unavailable: Vec<String> = items(graph, "warnings")
        .iter()
        .map(|w| text(w, "nodeId"))
        .collect();
    let mut rows = [0usize; 4];
    let mut at: std::collections::HashMap<String, (usize, usize)> =
        std::collections::HashMap::new();
    let mut body = String::new();
    for n in &nodes {
        let kind = text(n, "kind");
        let col = COLUMNS.iter().position(|k| *k == kind).unwrap_or(3);
        let (x, y) = (20 + col * COLUMN_WIDTH, 40 + rows[col] * ROW_HEIGHT);
        rows[col] += 1;
        let id = text(n, "id");
        at.insert(id.clone(), (x, y));
        let name = text(n, "name");
        let shown: String = if name.chars().count() > LABEL_CHARS {
            name.chars().take(LABEL_CHARS - 1).chain(['…']).collect()
        } else {
            name.clone()
        };
        let dashed = if unavailable.contains(&id) {
            " unavailable"
        } else {
            ""
        };
        let rx = match kind.as_str() {
            "METRIC" => 11,
            "SOURCE" => 6,
            _ => 2,
        };
        body.push_str(&format!(
            "<g class=\"node {k}{dashed}\" data-kind=\"{kind}\" data-id=\"{id}\"><title>{kind} {title}</title><rect x=\"{x}\" y=\"{y}\" width=\"{BOX_WIDTH}\" height=\"{BOX_HEIGHT}\" rx=\"{rx}\"/><text x=\"{tx}\" y=\"{ty}\">{label}</text></g>\n",
            k = kind.to_lowercase(),
            kind = xml_escape(&kind),
            id = xml_escape(&id),
            title = xml_escape(&name),
            tx = x + 8,
            ty = y + 15,
            label = xml_escape(&shown),
        ));
    }
    let mut lines = String::new();
    for e in items(graph, "edges") {
        let (Some(&(sx, sy)), Some(&(tx, ty))) =
            (at.get(&text(&e, "source")), at.get(&text(&e, "target")))
        else {
            continue;
        };
        // From the right side of the left box to the left side of the right one; edges within
        // one column (RELATES) bow out to the right.
        let (x1, y1, x2, y2) = if sx < tx {
            (sx + BOX_WIDTH, sy + BOX_HEIGHT / 2, tx, ty + BOX_HEIGHT / 2)
        } else if sx > tx {
            (sx, sy + BOX_HEIGHT / 2, tx + BOX_WIDTH, ty + BOX_HEIGHT / 2)
        } else {
            (
                sx + BOX_WIDTH,
                sy + BOX_HEIGHT / 2,
                tx + BOX_WIDTH,
                ty + BOX_HEIGHT / 2,
            )
        };
        let bend = if sx == tx { 40 } else { x2.abs_diff(x1) / 2 };
        let (c1, c2) = if sx == tx {
            (x1 + bend, x2 + bend)
        } else if sx < tx {
            (x1 + bend, x2 - bend)
        } else {
            (x1 - bend, x2 + bend)
        };
        lines.push_str(&format!(
            "<path class=\"edge {k}\" data-kind=\"{kind}\" d=\"M{x1},{y1} C{c1},{y1} {c2},{y2} {x2},{y2}\"><title>{kind}</title></path>\n",
            k = text(&e, "kind").to_lowercase(),
            kind = xml_escape(&text(&e, "kind")),
        ));
    }
    let height = 60 + rows.iter().max().copied().unwrap_or(0) * ROW_HEIGHT;
    let width = 40 + COLUMNS.len() * COLUMN_WIDTH;
    let headers: String = COLUMNS
        .iter()
        .enumerate()
        .map(|(i, k)| {
            format!(
                "<text class=\"column\" x=\"{}\" y=\"24\">{}s</text>",
                20 + i * COLUMN_WIDTH,
                k[..1].to_string() + &k[1..].to_lowercase()
            )
        })
        .collect();
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"lineage\" role=\"img\" aria-label=\"Lineage graph: {n} nodes, {e} edges\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\">\n<style>.node rect{{fill:#eef3fb;stroke:#1d4f91}}.node.metric rect{{fill:#eefaf0;stroke:#1b6b30}}.node.source rect{{fill:#fdf3e6;stroke:#8a4b00}}.node.model rect{{fill:#f1ecfa;stroke:#4b2c85}}.node.unavailable rect{{stroke:#b00020;stroke-dasharray:4 3}}.node text{{font:12px sans-serif;fill:#111}}.column{{font:bold 13px sans-serif;fill:#111}}.edge{{fill:none;stroke:#555;stroke-width:1}}</style>\n{headers}\n{lines}{body}</svg>\n",
        n = nodes.len(),
        e = items(graph, "edges").len(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At the lineage bound (500 nodes) every node is drawn in its own row: nothing overlaps.
    #[test]
    fn five_hundred_nodes_get_five_hundred_rows_in_their_columns() {
        let nodes: Vec<Value> = (0..500)
            .map(|i| serde_json::json!({"id": format!("d{i}"), "kind": if i % 2 == 0 { "DATASET" } else { "METRIC" }, "name": format!("n{i}")}))
            .collect();
        let s = svg(&serde_json::json!({"nodes": nodes, "edges": []}));
        assert_eq!(s.matches("<g class=\"node").count(), 500);
        let mut ys: Vec<(String, String)> = s
            .match_indices("<rect x=\"")
            .map(|(i, _)| {
                let rest = &s[i + 9..];
                let x = rest.split('"').next().unwrap().to_string();
                let y = rest
                    .split("y=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .to_string();
                (x, y)
            })
            .collect();
        ys.sort();
        ys.dedup();
        assert_eq!(ys.len(), 500, "no two boxes share a place");
        assert!(s.contains(&format!("height=\"{}\"", 60 + 250 * ROW_HEIGHT)));
    }

    /// Sources follow the datasets bound to them, at the mean row of those datasets (not their
    /// sum or product), so binding edges cross as little as they can; a source nothing binds
    /// comes last.
    #[test]
    fn sources_are_ordered_by_the_mean_row_of_the_datasets_that_bind_them() {
        let node = |id: &str, kind: &str| serde_json::json!({"id": id, "kind": kind, "name": id});
        let binds = |dataset: &str, source: &str| serde_json::json!({"kind": "BINDS", "source": dataset, "target": source});
        let cases = [
            (
                vec![
                    node("s1", "SOURCE"),
                    node("s2", "SOURCE"),
                    node("lonely", "SOURCE"),
                    node("a", "DATASET"),
                    node("b", "DATASET"),
                ],
                vec![binds("a", "s2"), binds("b", "s1")],
                vec!["a", "b", "s2", "s1", "lonely"],
            ),
            // wide: rows 0 and 3, mean 1.5 (sum 3, product 6); late: row 2.
            (
                vec![
                    node("late", "SOURCE"),
                    node("wide", "SOURCE"),
                    node("a", "DATASET"),
                    node("b", "DATASET"),
                    node("c", "DATASET"),
                    node("d", "DATASET"),
                ],
                vec![binds("a", "wide"), binds("d", "wide"), binds("c", "late")],
                vec!["a", "b", "c", "d", "wide", "late"],
            ),
        ];
        for (nodes, edges, want) in cases {
            let order: Vec<String> = in_drawing_order(nodes, &edges)
                .iter()
                .map(|n| text(n, "id"))
                .collect();
            assert_eq!(order, want);
        }
    }

    /// Every box and curve where the layout's constants put it, worked out by hand: a box at
    /// x = 20 + 300 × column, y = 40 + 28 × row, 240 × 22, corners by kind; a curve leaves the
    /// right side of a box (the left side when it goes back a column) at half its height and
    /// bends halfway between the two boxes, or 40 to the right of a column it stays in.
    #[test]
    fn boxes_and_curves_are_drawn_where_the_layout_puts_them() {
        let g = serde_json::json!({
            "nodes": [
                {"id": "o", "kind": "MODEL", "name": "orders"},
                {"id": "m0", "kind": "METRIC", "name": "revenue"},
                {"id": "m1", "kind": "METRIC", "name": "x".repeat(LABEL_CHARS)},
                {"id": "e", "kind": "DATASET", "name": "y".repeat(LABEL_CHARS + 1)},
                {"id": "f", "kind": "DATASET", "name": "f"},
                {"id": "s", "kind": "SOURCE", "name": "hr.public.emp"}
            ],
            "edges": [
                {"kind": "CONTAINS", "source": "o", "target": "m1"},
                {"kind": "RELATES", "source": "e", "target": "f"},
                {"kind": "BINDS", "source": "s", "target": "f"}
            ]
        });
        let s = svg(&g);
        let drawn = |id: &str| {
            s.lines()
                .find(|l| l.contains(&format!("data-id=\"{id}\"")))
                .unwrap_or_else(|| panic!("{id} is not drawn: {s}"))
                .to_string()
        };
        let x34 = "x".repeat(LABEL_CHARS);
        let y33 = "y".repeat(LABEL_CHARS - 1);
        let y35 = "y".repeat(LABEL_CHARS + 1);
        let cut = format!("{y33}…");
        for (id, kind, x, y, rx, title, label) in [
            ("o", "MODEL", 20, 40, 2, "orders", "orders"),
            ("m0", "METRIC", 320, 40, 11, "revenue", "revenue"),
            ("m1", "METRIC", 320, 68, 11, x34.as_str(), x34.as_str()),
            ("e", "DATASET", 620, 40, 2, y35.as_str(), cut.as_str()),
            ("f", "DATASET", 620, 68, 2, "f", "f"),
            ("s", "SOURCE", 920, 40, 6, "hr.public.emp", "hr.public.emp"),
        ] {
            assert_eq!(
                drawn(id),
                format!(
                    "<g class=\"node {k}\" data-kind=\"{kind}\" data-id=\"{id}\"><title>{kind} {title}</title><rect x=\"{x}\" y=\"{y}\" width=\"240\" height=\"22\" rx=\"{rx}\"/><text x=\"{tx}\" y=\"{ty}\">{label}</text></g>",
                    k = kind.to_lowercase(),
                    tx = x + 8,
                    ty = y + 15,
                )
            );
        }
        let curves: Vec<&str> = s
            .lines()
            .filter(|l| l.starts_with("<path"))
            .map(|l| l.split(" d=\"").nth(1).unwrap().split('"').next().unwrap())
            .collect();
        assert_eq!(
            curves,
            [
                // model (column 0, row 0) to the second metric (column 1, row 1)
                "M260,51 C290,51 290,79 320,79",
                // dataset to dataset, both in column 2: out of and back into the right sides
                "M860,51 C900,51 900,79 860,79",
                // source (column 3) back to a dataset (column 2): left side to right side
                "M920,51 C890,51 890,79 860,79",
            ]
        );
        assert!(
            s.contains("width=\"1240\" height=\"116\" viewBox=\"0 0 1240 116\""),
            "four columns, two rows: {s}"
        );
    }

    #[test]
    fn the_svg_draws_every_node_and_edge_and_escapes_names() {
        let g = serde_json::json!({
            "nodes": [
                {"id": "model:u", "kind": "MODEL", "name": "orders"},
                {"id": "metric:u/r", "kind": "METRIC", "name": "<script>alert(1)</script>"},
                {"id": "dataset:u/e", "kind": "DATASET", "name": "e"},
                {"id": "dataset:u/f", "kind": "DATASET", "name": "f"},
                {"id": "source:hr/1", "kind": "SOURCE", "name": "hr.public.emp"}
            ],
            "edges": [
                {"kind": "CONTAINS", "source": "model:u", "target": "metric:u/r"},
                {"kind": "CONTAINS", "source": "model:u", "target": "dataset:u/e"},
                {"kind": "RELATES", "source": "dataset:u/e", "target": "dataset:u/f"},
                {"kind": "BINDS", "source": "dataset:u/e", "target": "source:hr/1"},
                {"kind": "BINDS", "source": "dataset:u/f", "target": "missing"}
            ],
            "warnings": [{"code": "SOURCE_UNAVAILABLE", "nodeId": "source:hr/1"}]
        });
        let s = svg(&g);
        assert_eq!(s.matches("<g class=\"node").count(), 5);
        assert_eq!(
            s.matches("<path class=\"edge").count(),
            4,
            "an edge to no node is not drawn"
        );
        assert!(!s.contains("<script>"), "{s}");
        assert!(s.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(s.contains("class=\"node source unavailable\""));
        assert!(s.contains("aria-label=\"Lineage graph: 5 nodes, 5 edges\""));
        assert_eq!(xml_escape("a\"b'c&\u{0}"), "a&quot;b&#39;c&amp;");
    }

    fn graph() -> Value {
        serde_json::json!({
            "nodes": [
                {"id": "source:hr/TABLE/pg:1", "kind": "SOURCE", "name": "hr.public.\"emp\""},
                {"id": "dataset:u/e", "kind": "DATASET", "name": "e"}
            ],
            "edges": [{"kind": "BINDS", "source": "dataset:u/e", "target": "source:hr/TABLE/pg:1"}],
            "warnings": [{"code": "SOURCE_UNAVAILABLE", "nodeId": "source:hr/TABLE/pg:1"}]
        })
    }

    #[test]
    fn dot_escapes_labels_and_marks_unavailable_sources() {
        let d = dot(&graph());
        assert!(d.starts_with("digraph lineage {"));
        assert!(
            d.contains(r#"label="SOURCE hr.public.\"emp\"", shape=cylinder, style=dashed"#),
            "{d}"
        );
        assert!(d.contains(r#""dataset:u/e" -> "source:hr/TABLE/pg:1" [label="BINDS"];"#));
    }

    #[test]
    fn every_kind_of_node_has_its_own_shape() {
        let g = serde_json::json!({"nodes": [
            {"id": "s", "kind": "SOURCE", "name": "s"},
            {"id": "d", "kind": "DATASET", "name": "d"},
            {"id": "m", "kind": "METRIC", "name": "m"},
            {"id": "o", "kind": "MODEL", "name": "o"}
        ]});
        let d = dot(&g);
        for (id, shape) in [
            ("s", "cylinder"),
            ("d", "box"),
            ("m", "ellipse"),
            ("o", "folder"),
        ] {
            assert!(d.contains(&format!("\"{id}\" [label=\"")), "{d}");
            assert!(
                d.lines().any(|l| l.starts_with(&format!("  \"{id}\""))
                    && l.contains(&format!("shape={shape}]"))),
                "{id}: {d}"
            );
        }
        assert_eq!(
            mermaid(&g),
            "flowchart LR\n  n0[(\"SOURCE s\")]\n  n1[\"DATASET d\"]\n  n2([\"METRIC m\"])\n  n3[\"MODEL o\"]\n"
        );
    }

    #[test]
    fn mermaid_uses_positional_ids_and_quoted_labels() {
        let m = mermaid(&graph());
        assert_eq!(
            m,
            "flowchart LR\n  n0[(\"SOURCE hr.public.#quot;emp#quot;\")]\n  n1[\"DATASET e\"]\n  n1 -->|BINDS| n0\n"
        );
    }
}
