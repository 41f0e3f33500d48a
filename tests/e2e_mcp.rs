//! `semops mcp` end to end with MCP clients nobody here wrote: the official Python SDK (`mcp`
//! from PyPI) and TypeScript SDK (`@modelcontextprotocol/sdk` from npm), installed by
//! `hack/mcp-clients`, drive the stdio server against the real control plane and PostgreSQL.
//! Both SDKs validate every structured result against the tool's declared output schema.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::mcp::{Sdk, drive, drive_http};
use support::*;

fn call(tool: &str, args: Value) -> Value {
    json!({"op": "call", "tool": tool, "args": args})
}

/// The structured content of a successful, schema-validated tool result.
fn ok(result: &Value) -> &Value {
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["validated"], true, "{result}");
    &result["structuredContent"]
}

/// The text of a tool's error result.
fn failed(result: &Value) -> String {
    assert_eq!(result["isError"], true, "{result}");
    result["content"][0]["text"].as_str().unwrap().to_string()
}

#[test]
fn agents_read_models_through_mcp_with_the_python_and_typescript_sdks() {
    let env = env();
    let ns = env.namespace("mcp");
    let ns = ns.name.as_str();
    let op = Operator::for_namespace(env, ns); // --api-auth=kubernetes
    env.apply_ok(&examples_in(ns));
    wait_all_ready(env, ns);
    // A second model, to filter per model.
    let second = examples_in(ns)
        .split("\n---\n")
        .find(|d| d.contains("kind: SemanticModel"))
        .unwrap()
        .replace("name: employee-analysis", "name: headcount-model")
        .replace("name: employee_analysis", "name: headcount");
    env.apply_ok(&second);
    wait_all_ready(env, ns);
    let status_ids = |model: &str| -> Value {
        let out = env.kubectl_ok(&["get", "sm", model, "-n", ns, "-o", "json"]);
        serde_json::from_str::<Value>(&out).unwrap()["status"].clone()
    };
    let headcount_id = status_ids("employee-analysis")["metrics"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Revision 2 renames the metric: a new id, the old one retired.
    let metric = "      - name: headcount\n";
    assert!(
        examples_in(ns).contains(metric),
        "the example's metric moved"
    );
    env.apply_ok(&examples_in(ns).replace(metric, "      - name: staff\n"));
    let staff_id = eventually(Duration::from_secs(60), "revision 2", || {
        let s = status_ids("employee-analysis");
        (s["revision"] == 2).then(|| s["metrics"][0]["id"].as_str().unwrap().to_string())
    });
    assert_ne!(staff_id, headcount_id);

    let full = env.service_account_token(
        ns,
        "agent-full",
        "[{apiGroups: [semops.io], resources: [catalogs, semanticmodels], verbs: [get]}]",
        &[
            ("get", "catalogs.semops.io"),
            ("get", "semanticmodels.semops.io"),
        ],
    );
    let one_model = env.service_account_token(
        ns,
        "agent-one",
        "[{apiGroups: [semops.io], resources: [catalogs], verbs: [get]}, {apiGroups: [semops.io], resources: [semanticmodels], resourceNames: [headcount-model], verbs: [get]}]",
        &[
            ("get", "catalogs.semops.io"),
            ("get", "semanticmodels.semops.io/headcount-model"),
        ],
    );
    let server = |token: &str| -> Vec<String> {
        [
            "--server",
            &format!("http://127.0.0.1:{}", op.api_port),
            "--token",
            token,
            "-n",
            ns,
        ]
        .map(String::from)
        .to_vec()
    };
    let model = |name: &str| json!({"namespace": ns, "catalog": "analytics", "schema": "semantic", "name": name});
    let uri = format!("semops://{ns}/analytics/semantic/employee_analysis");
    let ops = vec![
        json!({"op": "tools"}),
        call("list_semantic_models", json!({"namespace": ns})),
        call(
            "list_semantic_models",
            json!({"namespace": ns, "catalog": "analytics", "schema": "nothing"}),
        ),
        call("get_semantic_model", model("employee_analysis")),
        call("get_semantic_model", {
            let mut m = model("employee_analysis");
            m["revision"] = json!(1);
            m
        }),
        call(
            "list_metrics",
            json!({"namespace": ns, "catalog": "analytics", "schema": "semantic"}),
        ),
        call(
            "list_metrics",
            json!({"namespace": ns, "catalog": "analytics", "schema": "semantic", "search": "STAFF", "details": true}),
        ),
        call(
            "find_datasets_by_source",
            json!({"namespace": ns, "type": "table", "full_name": "hr.public.employees"}),
        ),
        call(
            "get_stale_report",
            json!({"namespace": ns, "catalog": "hr"}),
        ),
        call(
            "get_lineage",
            json!({"namespace": ns, "root_type": "model", "root": "analytics.semantic.employee_analysis"}),
        ),
        call(
            "get_lineage",
            json!({"namespace": ns, "root_type": "table", "root": "hr.public.employees", "max_nodes": 2}),
        ),
        call(
            "explain_metric",
            json!({"namespace": ns, "id": headcount_id}),
        ),
        call(
            "explain_metric",
            json!({"namespace": ns, "id": "0190aaaa-no-such"}),
        ),
        call("get_semantic_model", model("no_such_model")),
        json!({"op": "resources"}),
        json!({"op": "templates"}),
        json!({"op": "read", "uri": uri}),
        json!({"op": "prompts"}),
        json!({"op": "prompt", "name": "write_sql", "args": {"namespace": ns, "catalog": "analytics", "schema": "semantic", "model": "employee_analysis", "question": "staff per manager"}}),
        call(
            "compile_metric_query",
            json!({"namespace": ns, "catalog": "analytics", "schema": "semantic", "model": "employee_analysis",
                   "metrics": ["staff"], "filters": [{"field": "employee.salary", "op": "ge", "values": [1000]}]}),
        ),
        call(
            "compile_metric_query",
            json!({"namespace": ns, "catalog": "analytics", "schema": "semantic", "model": "employee_analysis",
                   "metrics": ["staff"], "dimensions": ["employee.salary:month"]}),
        ),
    ];
    // stdio (`semops mcp`) and streamable HTTP (`/mcp` on the API port), each with both SDKs.
    let url = format!("http://127.0.0.1:{}/mcp?namespace={ns}", op.api_port);
    let answers = [
        ("Python stdio", drive(Sdk::Python, &server(&full), &ops)),
        (
            "TypeScript stdio",
            drive(Sdk::TypeScript, &server(&full), &ops),
        ),
        (
            "Python HTTP",
            drive_http(Sdk::Python, &url, Some(&full), &ops),
        ),
        (
            "TypeScript HTTP",
            drive_http(Sdk::TypeScript, &url, Some(&full), &ops),
        ),
    ];
    for (what, r) in &answers {
        // Eight read-only tools, each with input and output schemas.
        let mut tools: Vec<(String, Value, bool)> = r[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["name"].as_str().unwrap().to_string(),
                    t["annotations"]["readOnlyHint"].clone(),
                    t["outputSchema"]["type"] == "object" && t["inputSchema"]["type"] == "object",
                )
            })
            .collect();
        tools.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            tools,
            [
                "compile_metric_query",
                "explain_metric",
                "find_datasets_by_source",
                "get_lineage",
                "get_semantic_model",
                "get_stale_report",
                "list_metrics",
                "list_semantic_models"
            ]
            .map(|n| (n.to_string(), json!(true), true)),
            "{what}"
        );
        let listed: Vec<(&str, &str)> = ok(&r[1])["models"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["name"].as_str().unwrap(), m["uri"].as_str().unwrap()))
            .collect();
        assert_eq!(
            listed,
            [
                ("employee_analysis", uri.as_str()),
                (
                    "headcount",
                    format!("semops://{ns}/analytics/semantic/headcount").as_str()
                )
            ],
            "{what}"
        );
        assert_eq!(ok(&r[1])["truncated"], false);
        assert_eq!(ok(&r[2])["total"], 0, "{what}: another schema has none");

        let current = &ok(&r[3])["model"];
        assert_eq!(current["revision"], 2, "{what}");
        assert_eq!(current["metricIds"][0]["id"], staff_id.as_str());
        let ready = current["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(ready["status"], "True", "{what}: conditions are served");
        assert_eq!(ok(&r[3])["uri"], uri.as_str());
        let first = &ok(&r[4])["model"];
        assert_eq!(first["revision"], 1);
        assert_eq!(first["definition"]["metrics"][0]["name"], "headcount");

        let metrics: Vec<(&str, &str, &str)> = ok(&r[5])["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["model"].as_str().unwrap(),
                    m["name"].as_str().unwrap(),
                    m["id"].as_str().unwrap(),
                )
            })
            .collect();
        let headcount_model_id = status_ids("headcount-model")["metrics"][0]["id"].clone();
        assert_eq!(
            metrics,
            [
                ("employee_analysis", "staff", staff_id.as_str()),
                (
                    "headcount",
                    "headcount",
                    headcount_model_id.as_str().unwrap()
                ),
            ],
            "{what}"
        );
        assert!(ok(&r[5])["metrics"][0].get("definition").is_none());
        let searched = ok(&r[6])["metrics"].as_array().unwrap();
        assert_eq!(searched.len(), 1, "{what}");
        assert_eq!(
            searched[0]["definition"]["expression"]["dialects"][0]["expression"],
            "COUNT(employee.id)"
        );

        let datasets: Vec<String> = ok(&r[7])["datasets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                format!(
                    "{}/{}",
                    d["namespace"][3].as_str().unwrap(),
                    d["name"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            datasets,
            [
                "employee_analysis/employee",
                "employee_analysis/manager",
                "headcount/employee",
                "headcount/manager"
            ],
            "{what}"
        );
        assert!(ok(&r[8])["report"].is_object(), "{what}");

        let lineage = ok(&r[9]);
        assert_eq!(lineage["truncated"], false);
        assert_eq!(
            lineage["nodeCount"].as_u64(),
            Some(lineage["graph"]["nodes"].as_array().unwrap().len() as u64),
            "{what}: {lineage}"
        );
        let refusal = failed(&r[10]);
        assert!(
            refusal.contains("max_nodes = 2") && refusal.contains("nodes and"),
            "{what}: {refusal}"
        );

        // The old id of the renamed metric, with its successor.
        let explained = &ok(&r[11])["metric"];
        assert_eq!(explained["name"], "headcount", "{what}: {explained}");
        assert_eq!(explained["state"], "retired");
        assert_eq!(explained["retiredInRevision"], 2);
        assert_eq!(
            explained["mintedWithRetirement"][0]["id"],
            staff_id.as_str()
        );
        assert_eq!(explained["revisions"][0]["revision"], 1);
        assert_eq!(
            explained["metric"]["expression"]["dialects"][0]["expression"],
            "COUNT(employee.id)"
        );
        assert!(failed(&r[12]).contains("404 NO_SUCH_METRIC"), "{what}");
        assert!(failed(&r[13]).contains("404"), "{what}");

        let resources: Vec<&str> = r[14]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["uri"].as_str().unwrap())
            .collect();
        assert_eq!(resources[0], uri, "{what}");
        assert_eq!(
            r[15]["resourceTemplates"][0]["uriTemplate"],
            "semops://{namespace}/{catalog}/{schema}/{model}"
        );
        let read: Value =
            serde_json::from_str(r[16]["contents"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(read["revision"], 2, "{what}");
        assert_eq!(r[17]["prompts"][0]["name"], "write_sql");
        let prompt = r[18]["messages"][0]["content"]["text"].as_str().unwrap();
        assert!(
            prompt.contains(&format!("staff [id {staff_id}]"))
                && prompt.contains("reports_to: employee (manager_id) -> manager (id)")
                && prompt.contains("Question: staff per manager"),
            "{what}: {prompt}"
        );
        // A metric question compiled for the tables' PostgreSQL, with the id and revision to cite;
        // a grain on a decimal field is refused naming the dimension.
        let compiled = &ok(&r[19])["compiled"];
        assert_eq!(compiled["target"], "postgres", "{what}");
        assert_eq!(compiled["metrics"][0]["id"], json!(staff_id), "{what}");
        assert_eq!(
            compiled["parameters"],
            json!([{"type": "decimal", "value": "1000"}]),
            "{what}"
        );
        let sql = compiled["sql"].as_str().unwrap();
        assert!(
            sql.contains("\"public\".\"employees\"") && sql.contains("$1"),
            "{what}: {sql}"
        );
        assert!(
            ok(&r[19])["cite"]
                .as_str()
                .unwrap()
                .contains(&format!("staff = {staff_id}")),
            "{what}: {}",
            r[19]
        );
        let refused = failed(&r[20]);
        assert!(
            refused.starts_with(
                "400 WRONG_TYPE: dimensions[0]: grain month needs a date or timestamp field"
            ),
            "{what}: {refused}"
        );
    }
    // Every SDK and transport saw the same answers.
    let structured = |r: &[Value]| -> Vec<Value> {
        r[1..=13]
            .iter()
            .map(|x| x["structuredContent"].clone())
            .collect()
    };
    for (what, r) in &answers[1..] {
        assert_eq!(structured(&answers[0].1), structured(r), "{what}");
    }

    // A caller without get on employee-analysis: the model does not exist for the agent.
    let restricted_ops = vec![
        call("list_semantic_models", json!({"namespace": ns})),
        call("get_semantic_model", model("employee_analysis")),
        call(
            "explain_metric",
            json!({"namespace": ns, "id": headcount_id}),
        ),
        call("explain_metric", json!({"namespace": ns, "id": staff_id})),
        call(
            "find_datasets_by_source",
            json!({"namespace": ns, "type": "table", "full_name": "hr.public.employees"}),
        ),
        call(
            "list_metrics",
            json!({"namespace": ns, "catalog": "analytics", "schema": "semantic"}),
        ),
        json!({"op": "read", "uri": uri}),
    ];
    for (sdk, r) in [
        (
            Sdk::Python,
            drive(Sdk::Python, &server(&one_model), &restricted_ops),
        ),
        (
            Sdk::TypeScript,
            drive(Sdk::TypeScript, &server(&one_model), &restricted_ops),
        ),
        (
            Sdk::Python,
            drive_http(Sdk::Python, &url, Some(&one_model), &restricted_ops),
        ),
        (
            Sdk::TypeScript,
            drive_http(Sdk::TypeScript, &url, Some(&one_model), &restricted_ops),
        ),
    ] {
        let names: Vec<&str> = ok(&r[0])["models"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["headcount"], "{sdk:?}");
        assert!(failed(&r[1]).contains("404"), "{sdk:?}");
        assert!(failed(&r[2]).contains("404 NO_SUCH_METRIC"), "{sdk:?}");
        assert!(failed(&r[3]).contains("404 NO_SUCH_METRIC"), "{sdk:?}");
        let models: Vec<&str> = ok(&r[4])["datasets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["namespace"][3].as_str().unwrap())
            .collect();
        assert_eq!(models, ["headcount", "headcount"], "{sdk:?}");
        let metric_models: Vec<&str> = ok(&r[5])["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["model"].as_str().unwrap())
            .collect();
        assert_eq!(metric_models, ["headcount"], "{sdk:?}");
        assert!(
            r[6].get("protocolError").is_some(),
            "{sdk:?}: reading a hidden model's resource is refused: {}",
            r[6]
        );
    }

    // Over HTTP without a token: the tools are listed, every answer is refused.
    for sdk in [Sdk::Python, Sdk::TypeScript] {
        let r = drive_http(
            sdk,
            &url,
            None,
            &[
                json!({"op": "tools"}),
                call("list_semantic_models", json!({"namespace": ns})),
            ],
        );
        assert_eq!(r[0]["tools"].as_array().unwrap().len(), 8, "{sdk:?}");
        assert!(failed(&r[1]).starts_with("401"), "{sdk:?}: {}", r[1]);
    }
}
