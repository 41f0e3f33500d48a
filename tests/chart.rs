//! The Helm chart without a cluster: `helm lint --strict`, `helm package`, and `helm template`
//! with every optional feature on, checked object by object (PDB, ServiceMonitor,
//! NetworkPolicy, least-privilege RBAC without wildcards, image by digest, the test hook, the
//! adopter values), plus what the values schema refuses.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn helm(args: &[&str]) -> Output {
    let bin = Command::new(format!("{ROOT}/hack/testenv"))
        .arg("bin-dir")
        .output()
        .unwrap();
    let dir = String::from_utf8(bin.stdout).unwrap().trim().to_string();
    let helm = PathBuf::from(&dir).join("helm");
    if !helm.exists() {
        // First use on a fresh machine: build the control-plane tools (helm among them).
        let built = Command::new(format!("{ROOT}/hack/testenv"))
            .status()
            .unwrap();
        assert!(built.success(), "hack/testenv failed");
    }
    Command::new(helm).args(args).output().unwrap()
}

fn chart() -> String {
    format!("{ROOT}/charts/semops")
}

/// `helm template` with `--set` values; the rendered objects as JSON.
fn render(sets: &[&str]) -> Vec<Value> {
    let chart = chart();
    let mut args = vec!["template", "semops", &chart, "-n", "semops-system"];
    for s in sets {
        args.extend(["--set", s]);
    }
    let out = helm(&args);
    assert!(
        out.status.success(),
        "helm template {sets:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    text.split("\n---")
        .filter_map(|doc| serde_yaml::from_str::<Value>(doc).ok())
        .filter(|v| v.is_object())
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

const ALL_ON: &[&str] = &[
    "serviceMonitor.enabled=true",
    "networkPolicy.enabled=true",
    "argocd.healthChecks.enabled=true",
    "podDisruptionBudget.enabled=true",
    "image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "extraArgs={--lineage-max-nodes=5000}",
    "extraEnv[0].name=RUST_BACKTRACE",
    "extraEnv[0].value=full",
    "priorityClassName=system-cluster-critical",
    "topologySpreadConstraints[0].maxSkew=1",
    "topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname",
    "topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
    "watchNamespace=team-a",
    "podAnnotations.example\\.com/owner=data",
    "global.imageRegistry=mirror.example.com",
];

#[test]
fn the_chart_lints_strictly_and_packages() {
    let lint = helm(&["lint", "--strict", &chart()]);
    assert!(
        lint.status.success(),
        "{}",
        String::from_utf8_lossy(&lint.stdout)
    );
    let sets: Vec<String> = ALL_ON.iter().map(|s| format!("--set={s}")).collect();
    let mut lint_all = vec!["lint".to_string(), "--strict".to_string(), chart()];
    lint_all.extend(sets);
    let refs: Vec<&str> = lint_all.iter().map(String::as_str).collect();
    let lint = helm(&refs);
    assert!(
        lint.status.success(),
        "every option on: {}",
        String::from_utf8_lossy(&lint.stdout)
    );
    let dir = tempfile::tempdir().unwrap();
    let out = helm(&[
        "package",
        &chart(),
        "--destination",
        dir.path().to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let chart_yaml: Value = serde_yaml::from_str(
        &std::fs::read_to_string(format!("{ROOT}/charts/semops/Chart.yaml")).unwrap(),
    )
    .unwrap();
    let archive = dir.path().join(format!(
        "semops-{}.tgz",
        chart_yaml["version"].as_str().unwrap()
    ));
    assert!(archive.exists(), "{archive:?}");
}

#[test]
fn every_optional_feature_renders_what_it_promises() {
    let objects = render(ALL_ON);
    let pdb = find(&objects, "PodDisruptionBudget");
    assert_eq!(pdb.len(), 1);
    assert_eq!(pdb[0]["spec"]["minAvailable"], 1);
    assert_eq!(
        pdb[0]["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"],
        "semops"
    );
    let sm = find(&objects, "ServiceMonitor");
    assert_eq!(sm.len(), 1);
    assert_eq!(sm[0]["spec"]["endpoints"][0]["port"], "metrics");
    let np = find(&objects, "NetworkPolicy");
    assert_eq!(np.len(), 1);
    assert_eq!(
        find(&objects, "ConfigMap").len(),
        1,
        "the Argo CD health checks"
    );

    let deploy = find(&objects, "Deployment")[0];
    let pod = &deploy["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(
        container["image"],
        "ghcr.io/semops/semops:0.2.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    );
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args.contains(&"--lineage-max-nodes=5000"), "{args:?}");
    assert!(args.contains(&"--watch-namespace=team-a"), "{args:?}");
    assert!(
        container["env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "RUST_BACKTRACE" && e["value"] == "full")
    );
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["terminationGracePeriodSeconds"], 30);
    let spread = &pod["topologySpreadConstraints"][0];
    assert_eq!(spread["maxSkew"], 1);
    assert_eq!(
        spread["labelSelector"]["matchLabels"]["app.kubernetes.io/instance"], "semops",
        "the chart's own Pods are matched when no selector is given"
    );
    assert_eq!(
        deploy["spec"]["template"]["metadata"]["annotations"]["example.com/owner"],
        "data"
    );
    // Restricted pod security.
    let sc = &container["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"][0], "ALL");
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );

    // The helm test hook asks /readyz with the binary's own verb.
    let test_pod = find(&objects, "Pod")
        .into_iter()
        .find(|p| p["metadata"]["annotations"]["helm.sh/hook"] == "test")
        .expect("a helm test Pod");
    let test_args = &test_pod["spec"]["containers"][0]["args"];
    assert_eq!(test_args[0], "healthcheck");
    assert!(
        test_args[1]
            .as_str()
            .unwrap()
            .ends_with("$(SEMOPS_SERVICE_HOST):8080/readyz"),
        "{test_args}"
    );
}

#[test]
fn rbac_is_least_privilege_without_wildcards() {
    let objects = render(&[]);
    for role in find(&objects, "ClusterRole")
        .into_iter()
        .chain(find(&objects, "Role"))
    {
        for rule in role["rules"].as_array().unwrap() {
            for field in ["apiGroups", "resources", "verbs"] {
                let values = rule[field].as_array().unwrap();
                assert!(
                    !values.iter().any(|v| v.as_str().unwrap().contains('*')),
                    "{} has a wildcard in {field}: {rule}",
                    role["metadata"]["name"]
                );
            }
            let resources = rule["resources"].as_array().unwrap();
            if resources.iter().any(|r| r == "secrets") {
                assert_eq!(
                    rule["verbs"],
                    serde_json::json!(["get"]),
                    "Secrets: get only"
                );
            }
        }
    }
}

/// `rbac.secretNamespaces`: Secrets and ControllerRevisions only through a Role in each listed
/// namespace, nowhere cluster-wide.
#[test]
fn secret_namespaces_move_secret_and_revision_access_into_roles() {
    let grants = |role: &Value, resource: &str| {
        role["rules"].as_array().unwrap().iter().any(|r| {
            r["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x == resource)
        })
    };
    let objects = render(&[]);
    let cluster = find(&objects, "ClusterRole")[0];
    assert!(grants(cluster, "secrets") && grants(cluster, "controllerrevisions"));

    let objects = render(&["rbac.secretNamespaces={team-a,team-b}"]);
    let cluster = find(&objects, "ClusterRole")[0];
    assert!(!grants(cluster, "secrets") && !grants(cluster, "controllerrevisions"));
    let roles: Vec<&Value> = find(&objects, "Role")
        .into_iter()
        .filter(|r| grants(r, "secrets"))
        .collect();
    let namespaces: Vec<&str> = roles
        .iter()
        .map(|r| r["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(namespaces, ["team-a", "team-b"]);
    assert!(roles.iter().all(|r| grants(r, "controllerrevisions")));
    let bound: Vec<&str> = find(&objects, "RoleBinding")
        .iter()
        .filter(|b| b["roleRef"]["name"] == roles[0]["metadata"]["name"])
        .map(|b| b["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(bound, ["team-a", "team-b"]);
}

/// The egress allow-list: the operator flag and the NetworkPolicy's egress rules.
#[test]
fn catalog_egress_is_limited_by_flag_and_network_policy() {
    let objects = render(&[
        "allowedCatalogHosts={10.0.0.0/8,*.db.svc.cluster.local}",
        "networkPolicy.enabled=true",
        "networkPolicy.egress[0].ports[0].port=5432",
    ]);
    let args =
        &find(&objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        args.as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--allowed-catalog-hosts=10.0.0.0/8,*.db.svc.cluster.local"),
        "{args}"
    );
    let policy = find(&objects, "NetworkPolicy")[0];
    assert_eq!(
        policy["spec"]["policyTypes"],
        serde_json::json!(["Ingress", "Egress"])
    );
    let egress = policy["spec"]["egress"].as_array().unwrap();
    assert_eq!(egress.len(), 2, "DNS, then the rule given: {egress:?}");
    assert_eq!(egress[1]["ports"][0]["port"], 5432);
    // Without egress rules, egress is not restricted (Ingress only).
    let objects = render(&["networkPolicy.enabled=true"]);
    assert_eq!(
        find(&objects, "NetworkPolicy")[0]["spec"]["policyTypes"],
        serde_json::json!(["Ingress"])
    );
}

#[test]
fn crds_follow_install_and_keep_and_the_image_tag_defaults_to_the_app_version() {
    let default = render(&[]);
    let crds = find(&default, "CustomResourceDefinition");
    assert_eq!(crds.len(), 3);
    for crd in &crds {
        assert_eq!(
            crd["metadata"]["annotations"]["helm.sh/resource-policy"],
            "keep"
        );
    }
    let deploy = find(&default, "Deployment")[0];
    assert_eq!(
        deploy["spec"]["template"]["spec"]["containers"][0]["image"],
        "ghcr.io/semops/semops:0.2.0"
    );
    assert!(find(&render(&["crds.install=false"]), "CustomResourceDefinition").is_empty());
    for crd in find(&render(&["crds.keep=false"]), "CustomResourceDefinition") {
        assert!(crd["metadata"]["annotations"]["helm.sh/resource-policy"].is_null());
    }
}

#[test]
fn the_values_schema_refuses_unknown_keys_and_bad_values() {
    for bad in [
        "nosuchkey=1",
        "image.digest=latest",
        "defaultPolicy.mode=Sometimes",
        "extraEnv[0].value=x",
    ] {
        let out = helm(&["template", "semops", &chart(), "--set", bad]);
        assert!(!out.status.success(), "{bad} was accepted");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("values don't meet the specifications"),
            "{bad}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
