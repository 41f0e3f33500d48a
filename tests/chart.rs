//! The Helm chart without a cluster: `helm lint --strict`, `helm package`, and `helm template`
//! with every optional feature on, checked object by object (PDB, ServiceMonitor,
//! NetworkPolicy, least-privilege RBAC without wildcards, image by digest, the test hook, the
//! adopter values), plus what the values schema refuses.

mod support;

use std::process::{Command, Output};

use serde_json::Value;
use support::{ROOT, gotool, run_text};

fn helm(args: &[&str]) -> Output {
    Command::new(support::tool_bin_dir().join("helm"))
        .args(args)
        .output()
        .unwrap()
}

fn chart() -> String {
    format!("{ROOT}/charts/semops")
}

/// `helm template` with `--set` values; the rendered objects as JSON.
fn render(sets: &[&str]) -> Vec<Value> {
    render_release("semops", sets)
}

fn render_release(release: &str, sets: &[&str]) -> Vec<Value> {
    let chart = chart();
    let mut args = vec!["template", release, &chart, "-n", "semops-system"];
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
        .filter_map(|doc| serde_saphyr::from_str::<Value>(doc).ok())
        .filter(|v| v.is_object())
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

const ALL_ON: &[&str] = &[
    "serviceMonitor.enabled=true",
    "prometheusRule.enabled=true",
    "grafanaDashboard.enabled=true",
    "networkPolicy.enabled=true",
    "argocd.healthChecks.enabled=true",
    "podDisruptionBudget.enabled=true",
    "admission.protectModels=true",
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
    let chart_yaml: Value = serde_saphyr::from_str(
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
    assert_eq!(sm[0]["spec"]["endpoints"][0]["port"], "https");
    assert_eq!(sm[0]["spec"]["endpoints"][0]["scheme"], "https");
    assert!(sm[0]["spec"]["endpoints"][0]["bearerTokenFile"].is_string());
    let np = find(&objects, "NetworkPolicy");
    assert_eq!(np.len(), 1);
    let policy = find(&objects, "ValidatingAdmissionPolicy");
    let binding = find(&objects, "ValidatingAdmissionPolicyBinding");
    assert_eq!((policy.len(), binding.len()), (1, 1));
    assert_eq!(
        binding[0]["spec"]["policyName"],
        policy[0]["metadata"]["name"]
    );
    assert_eq!(
        binding[0]["spec"]["validationActions"],
        serde_json::json!(["Deny"])
    );
    let off = render(&[]);
    assert!(
        find(&off, "ValidatingAdmissionPolicy").is_empty()
            && find(&off, "ValidatingAdmissionPolicyBinding").is_empty(),
        "the guard renders only when admission.protectModels is on"
    );
    let maps: Vec<&str> = find(&objects, "ConfigMap")
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        maps,
        ["semops-argocd-health", "semops-dashboard"],
        "the Argo CD health checks and the Grafana dashboard"
    );
    assert_eq!(find(&objects, "PrometheusRule").len(), 1);

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
            if rule.get("nonResourceURLs").is_some() {
                assert_eq!(rule["nonResourceURLs"], serde_json::json!(["/metrics"]));
                assert_eq!(rule["verbs"], serde_json::json!(["get"]));
                continue;
            }
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

/// `rbac.aggregate` (on by default): view/edit/admin ClusterRoles labelled for the built-in
/// roles; view reads exactly what the aggregated discovery lists with get/list, edit writes only
/// SemanticModels, admin Catalogs, ReconcilePolicies and check rounds; off renders none.
#[test]
fn namespace_roles_aggregate_into_view_edit_and_admin() {
    let objects = render(&[]);
    let aggregated = |label: &str| -> Vec<Value> {
        find(&objects, "ClusterRole")
            .into_iter()
            .filter(|r| r["metadata"]["labels"][label] == "true")
            .flat_map(|r| r["rules"].as_array().unwrap().clone())
            .collect()
    };
    let grants = |rules: &[Value], group: &str| -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = rules
            .iter()
            .filter(|r| {
                r["apiGroups"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|g| g == group)
            })
            .flat_map(|r| {
                let verbs = r["verbs"].as_array().unwrap().clone();
                r["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .flat_map(move |res| {
                        let verbs = verbs.clone();
                        verbs.into_iter().map(move |v| {
                            (
                                res.as_str().unwrap().to_string(),
                                v.as_str().unwrap().to_string(),
                            )
                        })
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        out.sort();
        out
    };
    let view = aggregated("rbac.authorization.k8s.io/aggregate-to-view");
    let edit = aggregated("rbac.authorization.k8s.io/aggregate-to-edit");
    let admin = aggregated("rbac.authorization.k8s.io/aggregate-to-admin");

    // view: every read discovery lists, and nothing it does not.
    let discovery = semops::api::aggregated::resource_list();
    let mut reads: Vec<(String, String)> = discovery["resources"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| {
            let name = r["name"].as_str().unwrap().to_string();
            r["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|v| *v == "get" || *v == "list")
                .map(move |_| name.clone())
                .collect::<Vec<_>>()
        })
        .flat_map(|name| {
            [
                (name.clone(), "get".to_string()),
                (name, "list".to_string()),
            ]
        })
        .collect();
    reads.sort();
    reads.dedup();
    assert_eq!(grants(&view, "query.semops.io"), reads);
    let view_kinds = grants(&view, "semops.io");
    for kind in ["semanticmodels", "catalogs", "reconcilepolicies"] {
        for sub in [kind.to_string(), format!("{kind}/status")] {
            for verb in ["get", "list", "watch"] {
                assert!(
                    view_kinds.contains(&(sub.clone(), verb.into())),
                    "view {verb} {sub}"
                );
            }
        }
    }
    assert!(
        view_kinds
            .iter()
            .all(|(_, v)| ["get", "list", "watch"].contains(&v.as_str())),
        "view only reads: {view_kinds:?}"
    );
    // edit: SemanticModels only; admin: Catalogs, ReconcilePolicies, check rounds.
    let written = |rules: &[Value]| -> Vec<String> {
        let mut r: Vec<String> = ["semops.io", "query.semops.io"]
            .into_iter()
            .flat_map(|g| {
                grants(rules, g)
                    .into_iter()
                    .map(move |(res, _)| format!("{g} {res}"))
            })
            .collect();
        r.sort();
        r.dedup();
        r
    };
    assert_eq!(written(&edit), ["semops.io semanticmodels"]);
    assert_eq!(
        written(&admin),
        [
            "query.semops.io catalogs/reconcile",
            "semops.io catalogs",
            "semops.io catalogs/reconcile",
            "semops.io reconcilepolicies"
        ]
    );
    for rule in edit.iter().chain(&admin) {
        let resources = rule["resources"].as_array().unwrap();
        assert!(
            !resources
                .iter()
                .any(|r| r.as_str().unwrap().ends_with("/status")),
            "no status writes for people: {rule}"
        );
    }

    let off = render(&["rbac.aggregate=false"]);
    assert!(
        find(&off, "ClusterRole")
            .iter()
            .all(|r| r["metadata"]["labels"]
                .as_object()
                .unwrap()
                .keys()
                .all(|k| !k.starts_with("rbac.authorization.k8s.io/aggregate"))),
        "rbac.aggregate=false renders no aggregated role"
    );
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
    let operator_role = |objects: &Vec<Value>| {
        find(objects, "ClusterRole")
            .into_iter()
            .find(|r| r["metadata"]["name"] == "semops")
            .unwrap()
            .clone()
    };
    let objects = render(&[]);
    let cluster = &operator_role(&objects);
    assert!(grants(cluster, "secrets") && grants(cluster, "controllerrevisions"));

    let objects = render(&["rbac.secretNamespaces={team-a,team-b}"]);
    let cluster = &operator_role(&objects);
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

/// The read API's TLS and the aggregated API: the generated certificate names the Service the
/// API server calls and is signed by the CA the APIService trusts; the Deployment serves with it;
/// cert-manager replaces the generated pair; `api.aggregated=false` renders no APIService.
#[test]
fn the_aggregated_api_and_its_certificate_render_consistently() {
    let objects = render(&[]);
    let secret = find(&objects, "Secret")
        .into_iter()
        .find(|s| s["metadata"]["name"] == "semops-api-tls")
        .expect("the generated serving Secret");
    let apiservice = find(&objects, "APIService")[0];
    assert_eq!(apiservice["metadata"]["name"], "v1alpha1.query.semops.io");
    assert_eq!(apiservice["spec"]["service"]["name"], "semops");
    assert_eq!(apiservice["spec"]["service"]["namespace"], "semops-system");
    assert_eq!(apiservice["spec"]["caBundle"], secret["data"]["ca.crt"]);
    // The certificate verifies against that CA for the Service's DNS name.
    let dir = std::env::temp_dir().join(format!("semops-chart-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (key, file) in [("ca.crt", "ca.pem"), ("tls.crt", "tls.pem")] {
        let b64 = secret["data"][key].as_str().unwrap();
        let out = std::process::Command::new("base64")
            .arg("-d")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(b64.as_bytes())?;
                c.wait_with_output()
            })
            .unwrap();
        std::fs::write(dir.join(file), out.stdout).unwrap();
    }
    let verify = std::process::Command::new("openssl")
        .args([
            "verify",
            "-verify_hostname",
            "semops.semops-system.svc",
            "-CAfile",
        ])
        .arg(dir.join("ca.pem"))
        .arg(dir.join("tls.pem"))
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    let reader = find(&objects, "RoleBinding")
        .into_iter()
        .find(|b| b["roleRef"]["name"] == "extension-apiserver-authentication-reader")
        .expect("the front-proxy settings readable");
    assert_eq!(reader["metadata"]["namespace"], "kube-system");

    let deployment = find(&objects, "Deployment")[0];
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    for flag in [
        "--api-tls-cert-file=/etc/semops/api-tls/tls.crt",
        "--api-tls-key-file=/etc/semops/api-tls/tls.key",
        "--api-token-audiences=semops",
        "--metrics-auth=kubernetes",
        "--api-front-proxy=true",
    ] {
        assert!(args.contains(flag), "{flag} in {args}");
    }

    let off = render(&["api.aggregated=false"]);
    assert!(find(&off, "APIService").is_empty());
    // Without the aggregated API no connection is the front proxy, and the replica does not
    // wait (forever, without the RoleBinding) to read its settings before it is ready.
    let off_args = find(&off, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
        .to_string();
    assert!(off_args.contains("--api-front-proxy=false"), "{off_args}");
    assert!(
        !find(&off, "RoleBinding")
            .iter()
            .any(|b| b["metadata"]["namespace"] == "kube-system")
    );

    let managed = render(&[
        "api.tls.certManagerIssuer.name=corp-ca",
        "api.tls.certManagerIssuer.kind=ClusterIssuer",
    ]);
    assert!(
        !find(&managed, "Secret")
            .iter()
            .any(|s| s["metadata"]["name"] == "semops-api-tls"),
        "cert-manager writes the Secret"
    );
    let cert = find(&managed, "Certificate")[0];
    assert_eq!(cert["spec"]["secretName"], "semops-api-tls");
    assert_eq!(cert["spec"]["issuerRef"]["name"], "corp-ca");
    assert!(
        cert["spec"]["dnsNames"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d == "semops.semops-system.svc")
    );
    let apiservice = find(&managed, "APIService")[0];
    assert_eq!(
        apiservice["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "semops-system/semops-api-tls"
    );
    assert!(apiservice["spec"].get("caBundle").is_none());
    std::fs::remove_dir_all(&dir).ok();
}

/// promtool built from the Go module proxy (`hack/gotool promtool`).
fn promtool(dir: &std::path::Path, args: &[&str]) -> (bool, String) {
    let mut command = Command::new(gotool("promtool"));
    command.args(args).current_dir(dir);
    run_text(command)
}

fn rendered_rules(release: &str) -> Value {
    let objects = render_release(release, &["prometheusRule.enabled=true"]);
    let rules = find(&objects, "PrometheusRule");
    assert_eq!(rules.len(), 1, "one PrometheusRule");
    rules[0]["spec"].clone()
}

fn alerts(rules: &Value) -> Vec<(String, String)> {
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| {
            (
                r["alert"].as_str().unwrap().to_string(),
                r["expr"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn the_prometheus_rule_passes_promtool_check_and_every_alert_has_unit_tests() {
    let spec = rendered_rules("semops");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rules.yaml"),
        serde_saphyr::to_string(&spec).unwrap(),
    )
    .unwrap();
    let tests =
        std::fs::read_to_string(format!("{ROOT}/tests/prometheus/rules_test.yaml")).unwrap();
    std::fs::write(dir.path().join("rules_test.yaml"), &tests).unwrap();

    let (ok, output) = promtool(dir.path(), &["check", "rules", "rules.yaml"]);
    assert!(ok, "promtool check rules:\n{output}");
    let (ok, output) = promtool(dir.path(), &["test", "rules", "rules_test.yaml"]);
    assert!(ok, "promtool test rules:\n{output}");

    // Each alert is tested firing and silent.
    let tests: Value = serde_saphyr::from_str(&tests).unwrap();
    let cases: Vec<&Value> = tests["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().unwrap())
        .collect();
    let names = alerts(&spec);
    assert!(names.len() >= 7, "{names:?}");
    // The reconcile-error alert selects exactly the categories the operator starts at 0.
    let categories = format!(
        "category=~\"{}\"",
        semops::controller::ALERTED_CATEGORIES.join("|")
    );
    assert!(
        names
            .iter()
            .any(|(a, e)| a == "SemopsReconcileErrors" && e.contains(&categories)),
        "SemopsReconcileErrors does not select {categories}"
    );
    for (alert, _) in &names {
        let of = |firing: bool| {
            cases.iter().any(|c| {
                c["alertname"] == alert.as_str()
                    && c["exp_alerts"]
                        .as_array()
                        .is_some_and(|a| a.is_empty() != firing)
            })
        };
        assert!(of(true), "{alert}: no promtool test where it fires");
        assert!(of(false), "{alert}: no promtool test where it stays silent");
    }
}

#[test]
fn the_prometheus_rule_selects_only_its_releases_scrape_job() {
    let spec = rendered_rules("data");
    for (alert, expr) in alerts(&spec) {
        assert!(expr.contains("job=\"data-semops\""), "{alert}: {expr}");
        assert!(!expr.contains("job=\"semops\""), "{alert}: {expr}");
    }
    assert!(find(&render(&[]), "PrometheusRule").is_empty(), "opt-in");
}

#[test]
fn the_grafana_dashboard_is_a_sidecar_configmap_whose_queries_parse() {
    assert!(
        find(&render(&[]), "ConfigMap")
            .iter()
            .all(|c| !c["metadata"]["name"]
                .as_str()
                .unwrap()
                .ends_with("-dashboard")),
        "opt-in"
    );
    let objects = render(&[
        "grafanaDashboard.enabled=true",
        "grafanaDashboard.namespace=monitoring",
    ]);
    let map = find(&objects, "ConfigMap")
        .into_iter()
        .find(|c| c["metadata"]["name"] == "semops-dashboard")
        .expect("the dashboard ConfigMap");
    assert_eq!(map["metadata"]["namespace"], "monitoring");
    assert_eq!(map["metadata"]["labels"]["grafana_dashboard"], "1");
    let dashboard: Value =
        serde_json::from_str(map["data"]["semops.json"].as_str().unwrap()).unwrap();
    assert_eq!(dashboard["uid"], "semops-overview");

    // Every query as a recording rule: promtool parses each one (Grafana's $job variable is a
    // regex of jobs; any literal stands in for it).
    let exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap())
        .map(|t| t["expr"].as_str().unwrap().replace("$job", "semops"))
        .collect();
    assert!(exprs.len() >= 10, "{exprs:?}");
    let rules = serde_json::json!({"groups": [{"name": "dashboard", "rules": exprs
        .iter()
        .enumerate()
        .map(|(i, e)| serde_json::json!({"record": format!("semops:dashboard_query_{i}"), "expr": e}))
        .collect::<Vec<_>>()}]});
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dashboard.yaml"), rules.to_string()).unwrap();
    let (ok, output) = promtool(dir.path(), &["check", "rules", "dashboard.yaml"]);
    assert!(ok, "promtool check rules (dashboard queries):\n{output}");
}
