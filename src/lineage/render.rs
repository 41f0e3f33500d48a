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

#[cfg(test)]
mod tests {
    use super::*;

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
