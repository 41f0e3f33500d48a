//! The official MCP client SDKs (Python `mcp`, TypeScript `@modelcontextprotocol/sdk`),
//! installed by `hack/mcp-clients`, driving `semops mcp` with the plans of tests/mcp/.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::{Value, json};

use super::ROOT;

/// The SDKs' directory (installed once per machine, shared by test binaries).
pub fn clients() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = Command::new(format!("{ROOT}/hack/mcp-clients"))
            .stderr(Stdio::inherit())
            .output()
            .expect("hack/mcp-clients runs");
        assert!(out.status.success(), "hack/mcp-clients failed");
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

#[derive(Clone, Copy, Debug)]
pub enum Sdk {
    Python,
    TypeScript,
}

/// Runs `ops` against a `semops mcp` started with `server_args`, through `sdk`.
pub fn drive(sdk: Sdk, server_args: &[String], ops: &[Value]) -> Vec<Value> {
    let mut command_line = vec![env!("CARGO_BIN_EXE_semops").to_string(), "mcp".into()];
    command_line.extend_from_slice(server_args);
    run_plan(sdk, json!({"command": command_line, "ops": ops}))
}

/// Runs `ops` against the streamable-HTTP endpoint at `url` with a bearer `token`.
pub fn drive_http(sdk: Sdk, url: &str, token: Option<&str>, ops: &[Value]) -> Vec<Value> {
    run_plan(sdk, json!({"url": url, "token": token, "ops": ops}))
}

fn run_plan(sdk: Sdk, plan: Value) -> Vec<Value> {
    let expected = plan["ops"].as_array().map_or(0, Vec::len);
    let plan = plan.to_string();
    let dir = clients();
    let mut cmd = match sdk {
        Sdk::Python => {
            let mut c = Command::new(dir.join("py/bin/python"));
            c.arg(format!("{ROOT}/tests/mcp/client.py"));
            c
        }
        Sdk::TypeScript => {
            // ES modules resolve packages next to the script: run a copy beside node_modules.
            let script = dir.join("node/client.mjs");
            std::fs::copy(format!("{ROOT}/tests/mcp/client.mjs"), &script).unwrap();
            let mut c = Command::new("node");
            c.arg(script);
            c
        }
    };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the client starts");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(plan.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{sdk:?} client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{sdk:?} client output is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(results.len(), expected);
    results
}
