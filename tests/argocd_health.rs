//! The Argo CD health checks in docs/argocd run in a real Lua 5.4 interpreter against a table of
//! objects; each case names the status and message Argo CD must show.

use mlua::{Lua, LuaSerdeExt, Value};
use serde_json::{Value as Json, json};

fn health(kind: &str, obj: &Json) -> (String, String) {
    let path = format!(
        "{}/docs/argocd/semops.io/{kind}/health.lua",
        env!("CARGO_MANIFEST_DIR")
    );
    let script = std::fs::read_to_string(&path).unwrap();
    let lua = Lua::new();
    lua.globals()
        .set("obj", lua.to_value(obj).unwrap())
        .unwrap();
    // Argo CD runs the script as a function body with `obj` in scope.
    let result: Value = lua
        .load(format!("return (function()\n{script}\nend)()"))
        .eval()
        .unwrap_or_else(|e| panic!("{kind}: {e}"));
    let table = result.as_table().expect("health check returns a table");
    (
        table.get::<String>("status").unwrap(),
        table
            .get::<Option<String>>("message")
            .unwrap()
            .unwrap_or_default(),
    )
}

fn object(generation: i64, observed: Option<i64>, conditions: Json) -> Json {
    let mut status = json!({"conditions": conditions});
    if let Some(o) = observed {
        status["observedGeneration"] = json!(o);
    }
    json!({"metadata": {"name": "x", "generation": generation}, "status": status})
}

fn cond(type_: &str, status: &str, reason: &str, message: &str) -> Json {
    json!({"type": type_, "status": status, "reason": reason, "message": message})
}

#[test]
fn each_kind_maps_ready_and_observed_generation_to_argo_health() {
    let cases = [
        (
            "SemanticModel",
            json!({"metadata": {"generation": 1}}),
            "Progressing",
            "observe generation 1",
        ),
        (
            "SemanticModel",
            object(2, Some(1), json!([cond("Ready", "True", "Accepted", "ok")])),
            "Progressing",
            "observe generation 2",
        ),
        (
            "SemanticModel",
            object(
                2,
                Some(2),
                json!([cond("Ready", "True", "Accepted", "all good")]),
            ),
            "Healthy",
            "all good",
        ),
        (
            "SemanticModel",
            object(
                1,
                Some(1),
                json!([cond("Ready", "False", "NameConflict", "taken")]),
            ),
            "Degraded",
            "NameConflict: taken",
        ),
        (
            "SemanticModel",
            object(
                1,
                Some(1),
                json!([cond("Ready", "False", "CatalogUnreachable", "retrying")]),
            ),
            "Progressing",
            "CatalogUnreachable: retrying",
        ),
        (
            "SemanticModel",
            object(1, Some(1), json!([cond("Ready", "Unknown", "Pending", "")])),
            "Progressing",
            "Ready condition",
        ),
        (
            "SemanticModel",
            object(1, Some(1), json!([])),
            "Progressing",
            "Ready condition",
        ),
        (
            "Catalog",
            object(
                1,
                Some(1),
                json!([cond("Ready", "True", "Configured", "fine")]),
            ),
            "Healthy",
            "fine",
        ),
        (
            "Catalog",
            object(
                1,
                Some(1),
                json!([
                    cond("Ready", "True", "Configured", "fine"),
                    cond("Reachable", "False", "AuthFailed", "bad password")
                ]),
            ),
            "Degraded",
            "AuthFailed: bad password",
        ),
        (
            "Catalog",
            object(
                1,
                Some(1),
                json!([cond("Ready", "False", "ReconcilePolicyNotFound", "missing")]),
            ),
            "Degraded",
            "ReconcilePolicyNotFound",
        ),
        (
            "ReconcilePolicy",
            object(
                3,
                Some(3),
                json!([cond("Ready", "False", "Overlap", "overlaps with b")]),
            ),
            "Degraded",
            "Overlap: overlaps with b",
        ),
        (
            "ReconcilePolicy",
            object(
                3,
                Some(3),
                json!([cond("Ready", "True", "Valid", "selects 2 Catalog(s)")]),
            ),
            "Healthy",
            "selects 2",
        ),
        (
            "ReconcilePolicy",
            object(4, Some(3), json!([cond("Ready", "True", "Valid", "")])),
            "Progressing",
            "generation 4",
        ),
    ];
    for (kind, obj, want_status, want_message) in cases {
        let (status, message) = health(kind, &obj);
        assert_eq!(status, want_status, "{kind} {obj}");
        assert!(
            message.contains(want_message),
            "{kind}: message {message:?} lacks {want_message:?}"
        );
    }
}
