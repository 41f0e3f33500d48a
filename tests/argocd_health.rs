//! The Argo CD health checks in docs/argocd, in Argo CD's upstream layout
//! (`<group>/<Kind>/health.lua`, `health_test.yaml`, `testdata/`), run the way Argo CD runs
//! them: gopher-lua (Lua 5.1) with only the libraries Argo CD opens (`tools/argocd-health`,
//! built by `hack/gotool`). The testdata are objects captured from a real control plane by
//! `tests/e2e_kstatus.rs` (and a few derived from them by hand, named in each health_test.yaml).

mod support;

use std::collections::BTreeSet;
use std::process::Command;

use support::{ROOT, gotool, run_text};

fn run_tests(dir: &str) -> (bool, String) {
    let mut command = Command::new(gotool("argocd-health"));
    command.args(["test", dir]);
    run_text(command)
}

#[test]
fn every_upstream_health_test_passes_in_argocds_lua_sandbox() {
    let (ok, output) = run_tests(&format!("{ROOT}/docs/argocd"));
    assert!(ok, "{output}");
    // Each kind's suite shows every status its script can give.
    for (kind, statuses) in [
        ("SemanticModel", &["Healthy", "Progressing", "Degraded"][..]),
        ("Catalog", &["Healthy", "Progressing", "Degraded"]),
        ("ReconcilePolicy", &["Healthy", "Progressing", "Degraded"]),
    ] {
        let seen: BTreeSet<&str> = output
            .lines()
            .filter(|l| l.starts_with("ok ") && l.contains(&format!("/{kind}/testdata/")))
            .filter_map(|l| l.rsplit(": ").next())
            .collect();
        for status in statuses {
            assert!(
                seen.contains(status),
                "{kind}: no test ends {status}:\n{output}"
            );
        }
    }
}

/// The sandbox is Argo CD's, not a full Lua: a script that calls `string.format` (no string
/// library in Argo CD's health VM) fails here as it would in Argo CD, and a wrong expectation
/// fails the suite.
#[test]
fn a_script_argocd_could_not_run_or_a_wrong_expectation_fails() {
    let object =
        "apiVersion: semops.io/v1alpha1\nkind: Thing\nmetadata: {name: t, generation: 1}\n";
    for (script, want, error) in [
        (
            "return {status = string.format(\"%s\", \"Healthy\")}",
            "Healthy",
            "string",
        ),
        (
            "return {status = \"Healthy\"}",
            "Degraded",
            "got {Status:Healthy",
        ),
        (
            "return {status = \"Fine\"}",
            "Healthy",
            "invalid health status",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let kind_dir = dir.path().join("semops.io/Thing");
        std::fs::create_dir_all(kind_dir.join("testdata")).unwrap();
        std::fs::write(kind_dir.join("health.lua"), script).unwrap();
        std::fs::write(kind_dir.join("testdata/thing.yaml"), object).unwrap();
        std::fs::write(
            kind_dir.join("health_test.yaml"),
            format!(
                "tests:\n- healthStatus:\n    status: {want}\n  inputPath: testdata/thing.yaml\n"
            ),
        )
        .unwrap();
        let (ok, output) = run_tests(dir.path().to_str().unwrap());
        assert!(!ok, "{script}: passed:\n{output}");
        assert!(output.contains(error), "{script}: {output}");
    }
}
