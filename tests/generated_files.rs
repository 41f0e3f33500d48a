//! Generated and copied files stay in step with their source: the chart's README and Argo CD
//! checks, and the CRDs' shape as kubectl shows it. Regenerate with `hack/generate`. (`crds/`,
//! docs/conditions.md and docs/openapi.json are compared with the code by the unit tests beside
//! the code that generates them.)

use std::path::Path;

use semops::crd::all_crds;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}; run hack/generate"))
}

#[test]
fn the_chart_readme_matches_its_values_yaml() {
    assert_eq!(
        read("charts/semops/README.md"),
        semops::cli::reference::chart_readme(
            &read("charts/semops/values.yaml"),
            env!("CARGO_PKG_VERSION")
        )
        .unwrap(),
        "charts/semops/README.md is stale; run hack/generate"
    );
}

#[test]
fn chart_argocd_health_checks_match_the_documented_ones() {
    for kind in ["SemanticModel", "Catalog", "ReconcilePolicy"] {
        assert_eq!(
            read(&format!("charts/semops/files/argocd/{kind}.lua")),
            read(&format!("docs/argocd/semops.io/{kind}/health.lua")),
            "{kind}: chart copy differs from docs; run hack/generate"
        );
    }
}

#[test]
fn crds_carry_short_names_category_printer_columns_and_status() {
    let want = [
        (
            "semanticmodels.semops.io",
            "sm",
            vec![
                "Catalog", "Schema", "Model", "Datasets", "Metrics", "Revision", "Ready", "Age",
            ],
        ),
        (
            "catalogs.semops.io",
            "cat",
            vec![
                "Provider",
                "Reachable",
                "Registrations",
                "Stale",
                "Policy",
                "Last Check",
                "Age",
            ],
        ),
        (
            "reconcilepolicies.semops.io",
            "rpol",
            vec!["Mode", "Interval", "Enabled", "Catalogs", "Age"],
        ),
    ];
    for (name, short, columns) in want {
        let (_, crd) = all_crds()
            .into_iter()
            .find(|(_, c)| c.metadata.name.as_deref() == Some(name))
            .unwrap();
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(
            crd.spec.names.short_names,
            Some(vec![short.to_string()]),
            "{name}"
        );
        assert_eq!(
            crd.spec.names.categories,
            Some(vec!["semops".to_string()]),
            "{name}"
        );
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            "{name} needs a status subresource"
        );
        let got: Vec<String> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .filter(|c| c.priority.unwrap_or(0) == 0)
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(got, columns, "{name} printer columns");
    }
}

#[test]
fn keyed_lists_are_list_maps_so_the_api_server_rejects_duplicate_names() {
    let yaml = read("crds/semanticmodel.yaml");
    let list_maps = yaml.matches("x-kubernetes-list-type: map").count();
    // datasets, fields, relationships, metrics, dialects (field and metric expressions), conditions
    assert!(list_maps >= 7, "found {list_maps} list-maps");
    for rule in [
        "self == oldSelf",
        "size(self.fromColumns) == size(self.toColumns)",
    ] {
        assert!(yaml.contains(rule), "missing CEL rule {rule}");
    }
}
