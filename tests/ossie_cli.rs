//! `semops ossie import|export` and `semops validate` on Ossie documents, as a user runs them:
//! several documents per file, every version and shape, chosen export versions and formats, and
//! bad input that must end with a clear message, exit code 1 and nothing written.

use std::path::Path;
use std::process::Output;

#[path = "support/semops_cli.rs"]
mod semops_cli;

use semops_cli::semops;

fn scratch(name: &str) -> std::path::PathBuf {
    semops_cli::scratch(&format!("ossie-cli-{name}"))
}

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ossie");

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn import(file: &Path) -> Output {
    semops(&[
        "ossie",
        "import",
        "-f",
        file.to_str().unwrap(),
        "--catalog",
        "analytics",
        "--schema",
        "semantic",
        "--source-catalog",
        "shop",
        "--source-schema",
        "public",
        "-n",
        "team-a",
    ])
}

/// Documents compare as YAML values.
fn yaml_values(text: &str) -> Vec<serde_json::Value> {
    semops::cli::validate::split_documents(text)
        .into_iter()
        .map(|(_, d)| {
            let v: serde_json::Value = serde_saphyr::from_str(&d).unwrap();
            serde_json::from_str(&semops::model::canonical::canonical_json(&v)).unwrap()
        })
        .collect()
}

#[test]
fn a_file_of_several_documents_in_both_shapes_imports_and_exports_per_model() {
    let dir = scratch("several");
    let mixed = dir.join("mixed.yaml");
    let read = |f: &str| std::fs::read_to_string(Path::new(FIXTURES).join(f)).unwrap();
    std::fs::write(
        &mixed,
        format!(
            "{}---\n{}",
            read("bike-shop-0.2.yaml"),
            read("bike-shop-0.1.1.yaml")
        ),
    )
    .unwrap();
    let out = import(&mixed);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let manifests = dir.join("models.yaml");
    std::fs::write(&manifests, &out.stdout).unwrap();
    assert!(
        text(&out.stderr).contains("imported 3 model(s)"),
        "{}",
        text(&out.stderr)
    );

    // The 0.2 shape: one file per model, named after it.
    let files = dir.join("out");
    let out = semops(&[
        "ossie",
        "export",
        "-f",
        manifests.to_str().unwrap(),
        "--out-dir",
        files.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut written: Vec<String> = std::fs::read_dir(&files)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(
        written,
        [
            "bike-shop-sales.ossie.yaml",
            "shop-bikes.ossie.yaml",
            "shop-orders.ossie.yaml"
        ]
    );
    assert_eq!(
        yaml_values(&std::fs::read_to_string(files.join("bike-shop-sales.ossie.yaml")).unwrap()),
        yaml_values(&read("bike-shop-0.2.yaml"))
    );
    // The document lists the 0.2 shape cannot hold are named, one warning each.
    assert_eq!(
        text(&out.stderr).matches("warning:").count(),
        4,
        "{}",
        text(&out.stderr)
    );

    // JSON of 0.1.0: one wrapped document with all three models.
    let out = semops(&[
        "ossie",
        "export",
        "-f",
        manifests.to_str().unwrap(),
        "--ossie-version",
        "0.1.0",
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["version"], "0.1.0");
    assert_eq!(doc["semantic_model"].as_array().unwrap().len(), 3);
    // Six datatypes of the 0.2 model have no place in 0.1.0, each named.
    assert_eq!(
        text(&out.stderr).matches("datatype dropped").count(),
        6,
        "{}",
        text(&out.stderr)
    );

    // Several 0.2 documents do not fit one JSON text: refused, nothing printed.
    let out = semops(&[
        "ossie",
        "export",
        "-f",
        manifests.to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(
        text(&out.stderr).contains("pass --out-dir"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn bad_input_is_refused_clearly_and_nothing_is_written() {
    let dir = scratch("bad");
    let good = std::fs::read_to_string(Path::new(FIXTURES).join("bike-shop-0.2.yaml")).unwrap();
    let huge = format!("{good}x_padding: \"{}\"\n", "a".repeat(10 * 1024 * 1024));
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "second-document-missing-name.yaml",
            format!("{good}---\nversion: 0.2.0.dev0\ndatasets: []\n"),
            "(<unnamed>): name: is required",
        ),
        (
            "number-for-a-name.yaml",
            "version: 0.2.0.dev0\nname: m\ndatasets:\n  - name: 42\n    source: a.b.c\n".into(),
            "(m): datasets[0].name:",
        ),
        (
            "two-models-in-a-list.yaml",
            "- {version: 0.2.0.dev0, name: a, datasets: []}\n- {version: 0.2.0.dev0, name: b, datasets: []}\n".into(),
            "a list at the top of the document",
        ),
        (
            "duplicate-keys.yaml",
            "version: 0.2.0.dev0\nname: a\nname: b\ndatasets: []\n".into(),
            "duplicate mapping key",
        ),
        ("huge.yaml", huge, "semops reads files of at most 4 MiB"),
    ];
    for (name, body, want) in cases {
        let file = dir.join(name);
        std::fs::write(&file, body).unwrap();
        let out = import(&file);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", text(&out.stderr));
        assert!(out.stdout.is_empty(), "{name}: nothing is written");
        let err = text(&out.stderr);
        assert!(err.contains(want), "{name}: {err}");
        assert!(
            err.contains(name),
            "{name}: the message names the file: {err}"
        );
    }
    for (name, want) in [
        ("ontology.yaml", "an Apache Ossie ontology document"),
        ("snowflake-semantic-view.yaml", "a Snowflake semantic view"),
        ("dbt-semantic-manifest.json", "a dbt semantic manifest"),
        ("unknown-version.yaml", "it reads 0.1.0, 0.1.1, 0.2.0.dev0"),
    ] {
        let out = import(&Path::new(FIXTURES).join("refused").join(name));
        assert_eq!(out.status.code(), Some(1), "{name}");
        assert!(out.stdout.is_empty());
        assert!(
            text(&out.stderr).contains(want),
            "{name}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn validate_checks_ossie_documents_with_json_paths() {
    let dir = scratch("validate");
    std::fs::write(
        dir.join("bad.yaml"),
        "version: \"0.1.1\"\nsemantic_model:\n  - name: ok\n    datasets: [{name: a, source: s.t.u}]\n  - name: broken\n    datasets: [{name: a, source: s.t.u}]\n    relationships: [{name: r, from: a, to: nowhere, from_columns: [a_id], to_columns: [id]}]\n",
    )
    .unwrap();
    std::fs::copy(
        Path::new(FIXTURES).join("bike-shop-0.1.0.json"),
        dir.join("good.json"),
    )
    .unwrap();
    let out = semops(&["validate", "-f", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let found = text(&out.stdout);
    assert!(
        found.contains(
            "bad.yaml:1: Ossie model broken: $.semantic_model[1].relationships[0].to: no dataset named \"nowhere\" [UnknownDataset]"
        ),
        "{found}"
    );
    assert_eq!(found.lines().count(), 1, "{found}");
    assert!(
        text(&out.stderr).contains("2 Ossie document(s) checked, 1 problem(s)"),
        "{}",
        text(&out.stderr)
    );
}
