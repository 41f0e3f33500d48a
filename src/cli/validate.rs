//! `semops validate -f PATH`: the contract and model-local checks, offline, for GitOps pipelines.
//! One line per problem: `file:line: Kind namespace/name: field.path: message [Reason]`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::crd::{CatalogSpec, ReconcilePolicySpec, catalog::Provider, policy::RegistrationKind};
use crate::model::validate::{self, Problem};

/// The kind of an Ossie document among the found documents (checked when parsed).
const OSSIE: &str = "OssieDocument";

/// A semops object (or an Ossie document) found in the input, with where it starts.
#[derive(Debug)]
pub struct Document {
    pub file: PathBuf,
    pub line: usize,
    pub kind: String,
    /// metadata.namespace, `default` when the document names none (as kubectl applies it).
    pub namespace: String,
    /// Whether the document names its namespace.
    pub namespace_given: bool,
    pub name: String,
    pub spec: Value,
}

/// A problem found by `validate`, printable as one line.
#[derive(Debug, PartialEq, Eq)]
pub struct Finding {
    pub file: String,
    pub line: usize,
    pub object: String,
    pub path: String,
    pub message: String,
    pub reason: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {}: {}: {} [{}]",
            self.file, self.line, self.object, self.path, self.message, self.reason
        )
    }
}

/// YAML and JSON files under `path` (a file, or a directory walked recursively), sorted.
pub fn collect_files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let p = entry?.path();
        if p.is_dir() {
            out.extend(collect_files(&p)?);
        } else if p
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// Splits a YAML stream into documents with their 1-based starting lines. A document starts
/// at `---` (content after it on the same line is kept, a lone `!tag` dropped) and ends at the
/// next `---` or at `...`; what follows `...` before the next `---` is a new document.
pub fn split_documents(text: &str) -> Vec<(usize, String)> {
    let mut docs = Vec::new();
    let mut current = String::new();
    let mut start = 1;
    let mut flush = |current: &mut String, start: usize| {
        if !current
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
        {
            docs.push((start, current.clone()));
        }
        current.clear();
    };
    for (i, line) in text.lines().enumerate() {
        let marker = line.trim_end();
        if marker == "---" || line.starts_with("--- ") {
            flush(&mut current, start);
            start = i + 1;
            let rest = marker.strip_prefix("---").unwrap_or_default().trim();
            // `--- !tag` tags the root node; manifests carry no meaning in it.
            if !rest.is_empty() && (!rest.starts_with('!') || rest.contains(' ')) {
                current.push_str(rest);
                current.push('\n');
            } else {
                start = i + 2;
            }
        } else if marker == "..." {
            flush(&mut current, start);
            start = i + 2;
        } else {
            if current.is_empty() && line.trim().is_empty() {
                start = i + 2;
                continue;
            }
            current.push_str(line);
            current.push('\n');
        }
    }
    flush(&mut current, start);
    docs
}

/// Parses the semops objects of one file; unparsable YAML becomes a finding.
pub fn parse_file(file: &Path, text: &str, findings: &mut Vec<Finding>) -> Vec<Document> {
    let mut out = Vec::new();
    for (line, doc) in split_documents(text) {
        let value: Value = match serde_saphyr::from_str(&doc) {
            Ok(v) => v,
            Err(e) => {
                let at = e.location().map_or(line, |l| line + l.line() as usize - 1);
                findings.push(Finding {
                    file: file.display().to_string(),
                    line: at,
                    object: "document".into(),
                    path: "-".into(),
                    message: format!("not valid YAML: {e}"),
                    reason: "InvalidYaml".into(),
                });
                continue;
            }
        };
        let api_version = value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !api_version.starts_with("semops.io/") {
            if crate::ossie::interchange::looks_like_ossie(&value) {
                let (models, problems) = crate::ossie::interchange::check(&value);
                out.push(Document {
                    file: file.to_path_buf(),
                    line,
                    kind: OSSIE.into(),
                    namespace: String::new(),
                    namespace_given: false,
                    name: format!("{models} model(s)"),
                    spec: Value::Null,
                });
                findings.extend(problems.into_iter().map(|p| Finding {
                    file: file.display().to_string(),
                    line,
                    object: format!("Ossie {}", p.object),
                    path: p.path,
                    message: p.message,
                    reason: p.reason,
                }));
            }
            continue;
        }
        let meta = value.get("metadata").cloned().unwrap_or(Value::Null);
        out.push(Document {
            file: file.to_path_buf(),
            line,
            kind: value
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            namespace: meta
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or("default")
                .to_string(),
            namespace_given: meta.get("namespace").is_some_and(Value::is_string),
            name: meta
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("<unnamed>")
                .to_string(),
            spec: value.get("spec").cloned().unwrap_or(Value::Null),
        });
    }
    out
}

/// Checks every document; Catalog references are checked when the input declares Catalogs for
/// the model's namespace (a GitOps directory usually holds both).
pub fn check(documents: &[Document]) -> Vec<Finding> {
    let mut catalogs: HashMap<&str, BTreeMap<String, Option<Vec<String>>>> = HashMap::new();
    for d in documents.iter().filter(|d| d.kind == "Catalog") {
        if let Ok(spec) = serde_json::from_value::<CatalogSpec>(d.spec.clone()) {
            let managed = (spec.provider == Provider::Managed).then(|| {
                spec.registrations
                    .iter()
                    .filter(|r| r.kind == RegistrationKind::Schema)
                    .map(|r| r.name.clone())
                    .collect()
            });
            catalogs
                .entry(d.namespace.as_str())
                .or_default()
                .insert(d.name.clone(), managed);
        }
    }
    let mut findings = Vec::new();
    for d in documents {
        let problems: Vec<Problem> = match d.kind.as_str() {
            "SemanticModel" => match validate::parse_spec(&d.spec) {
                Err(p) => vec![p],
                Ok(spec) => {
                    let mut ps = validate::validate_definition(&spec);
                    if let Some(known) = catalogs.get(d.namespace.as_str()) {
                        ps.extend(validate::validate_catalog_refs(&spec, known));
                    }
                    ps
                }
            },
            "Catalog" => catalog_problems(&d.spec),
            OSSIE => vec![],
            "ReconcilePolicy" => policy_problems(&d.spec),
            other => vec![Problem {
                reason: validate::Reason::SchemaMismatch,
                path: "kind".into(),
                message: format!(
                    "unknown semops kind {other:?}; expected SemanticModel, Catalog or ReconcilePolicy"
                ),
            }],
        };
        findings.extend(problems.into_iter().map(|p| Finding {
            file: d.file.display().to_string(),
            line: d.line,
            object: format!("{} {}/{}", d.kind, d.namespace, d.name),
            path: p.path,
            message: p.message,
            reason: p.reason.condition_reason().to_string(),
        }));
    }
    findings
}

fn shape_problem(e: serde_path_to_error::Error<serde_json::Error>) -> Problem {
    let inner = e.path().to_string();
    let path = if inner == "." {
        "spec".to_string()
    } else {
        format!("spec.{inner}")
    };
    Problem {
        reason: validate::Reason::SchemaMismatch,
        path,
        message: e.into_inner().to_string(),
    }
}

/// The Catalog contract: shape, connection unless managed, schema presence, no repeats.
fn catalog_problems(spec: &Value) -> Vec<Problem> {
    let spec: CatalogSpec = match serde_path_to_error::deserialize(spec) {
        Ok(s) => s,
        Err(e) => return vec![shape_problem(e)],
    };
    let mut out = Vec::new();
    let mismatch = |path: String, message: String| Problem {
        reason: validate::Reason::SchemaMismatch,
        path,
        message,
    };
    if spec.provider != Provider::Managed && spec.connection.is_none() {
        out.push(mismatch(
            "spec.connection".into(),
            "is required unless provider is managed".into(),
        ));
    }
    if spec.registrations.len() > crate::crd::catalog::MAX_REGISTRATIONS {
        out.push(mismatch(
            "spec.registrations".into(),
            format!(
                "has {} entries; at most 5000 per Catalog, split into several Catalogs",
                spec.registrations.len()
            ),
        ));
    }
    let mut seen = HashMap::new();
    for (i, r) in spec.registrations.iter().enumerate() {
        match (r.kind, &r.schema) {
            (RegistrationKind::Schema, Some(_)) => out.push(mismatch(
                format!("spec.registrations[{i}].schema"),
                "is not allowed for Schema registrations".into(),
            )),
            (k, None) if k != RegistrationKind::Schema => out.push(mismatch(
                format!("spec.registrations[{i}].schema"),
                format!("is required for {k:?} registrations"),
            )),
            _ => {}
        }
        if let Some(first) = seen.insert((r.kind, r.schema.clone(), r.name.clone()), i) {
            out.push(Problem {
                reason: validate::Reason::DuplicateName,
                path: format!("spec.registrations[{i}]"),
                message: format!("repeats spec.registrations[{first}]; remove one"),
            });
        }
    }
    out
}

fn policy_problems(spec: &Value) -> Vec<Problem> {
    let spec: ReconcilePolicySpec = match serde_path_to_error::deserialize(spec) {
        Ok(s) => s,
        Err(e) => return vec![shape_problem(e)],
    };
    crate::policy::spec::spec_problems(&spec)
        .into_iter()
        .map(|p| {
            let (path, message) = p
                .split_once(": ")
                .map_or((p.clone(), String::new()), |(a, b)| {
                    (a.to_string(), b.to_string())
                });
            Problem {
                reason: validate::Reason::SchemaMismatch,
                path,
                message,
            }
        })
        .collect()
}

/// `semops validate -f ...`: prints each finding; exit 1 on problems, 2 when a file cannot be read.
pub fn main(paths: &[PathBuf]) -> std::process::ExitCode {
    use std::process::ExitCode;
    let mut findings = Vec::new();
    let mut docs = Vec::new();
    for path in paths {
        let files = match collect_files(path) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("error: cannot read {}: {e}", path.display());
                return ExitCode::from(2);
            }
        };
        for file in files {
            match std::fs::read_to_string(&file) {
                Ok(text) => docs.extend(parse_file(&file, &text, &mut findings)),
                Err(e) => {
                    eprintln!("error: cannot read {}: {e}", file.display());
                    return ExitCode::from(2);
                }
            }
        }
    }
    findings.extend(check(&docs));
    for f in &findings {
        println!("{f}");
    }
    eprintln!(
        "{} semops object(s) and {} Ossie document(s) checked, {} problem(s)",
        docs.iter().filter(|d| d.kind != OSSIE).count(),
        docs.iter().filter(|d| d.kind == OSSIE).count(),
        findings.len()
    );
    if findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {

    /// YAML is read as kubectl reads it (YAML 1.1 booleans: an unquoted `yes` or `y` is a
    /// boolean), and what semops writes reads back as the same strings.
    #[test]
    fn yaml_reads_as_kubectl_and_written_strings_read_back_unchanged() {
        let read: serde_json::Value =
            serde_saphyr::from_str("a: yes\nb: y\nc: 'yes'\nd: on\n").unwrap();
        assert_eq!(
            read,
            serde_json::json!({"a": true, "b": true, "c": "yes", "d": true})
        );
        for text in [
            "y",
            "yes",
            "no",
            "on",
            "off",
            "n",
            "true",
            "null",
            "~",
            "",
            "1",
            "0x1f",
            "1e3",
            "010",
            "2026-12-01",
            "a: b",
            "- x",
            "#x",
            "x # y",
            "'q'",
            "`tick`.`x.y`",
            "line\nbreak",
            " lead",
        ] {
            let yaml = serde_saphyr::to_string(&serde_json::json!({ "k": text })).unwrap();
            let back: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
            assert_eq!(back["k"], text, "{text:?} written as {yaml:?}");
        }
    }

    #[test]
    fn documents_split_at_markers_with_their_first_lines() {
        let cases: &[(&str, &[(usize, &str)])] = &[
            ("a: 1\n", &[(1, "a: 1\n")]),
            ("---\na: 1\n---\nb: 2\n", &[(2, "a: 1\n"), (4, "b: 2\n")]),
            (
                "a: 1\n...\n---\nb: 2\n...\n",
                &[(1, "a: 1\n"), (4, "b: 2\n")],
            ),
            ("a: 1\n...\nb: 2\n", &[(1, "a: 1\n"), (3, "b: 2\n")]),
            ("--- !k8s\na: 1\n", &[(2, "a: 1\n")]),
            ("--- {a: 1}\n---\n", &[(1, "{a: 1}\n")]),
            ("# only a comment\n---\n\n\na: 1\n", &[(5, "a: 1\n")]),
            ("---\n---\n", &[]),
            ("a: |\n  ---x\n  ...y\n", &[(1, "a: |\n  ---x\n  ...y\n")]),
        ];
        for (text, want) in cases {
            let got = split_documents(text);
            let got: Vec<(usize, &str)> = got.iter().map(|(l, d)| (*l, d.as_str())).collect();
            assert_eq!(&got, want, "{text:?}");
        }
    }

    use super::*;

    fn run(text: &str) -> Vec<String> {
        let mut findings = Vec::new();
        let docs = parse_file(Path::new("x.yaml"), text, &mut findings);
        findings.extend(check(&docs));
        findings.iter().map(ToString::to_string).collect()
    }

    const CATALOGS: &str = "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {name: analytics, namespace: ex}\nspec: {provider: managed, registrations: [{kind: Schema, name: semantic}]}\n";

    #[test]
    fn reports_file_line_object_path_and_reason() {
        let text = format!(
            "{CATALOGS}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: ignored}}\n---\napiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {{name: m, namespace: ex}}\nspec:\n  catalog: analytics\n  schema: semantic\n  definition:\n    datasets: [{{name: a, source: analytics.semantic.t}}]\n    relationships: [{{name: r, from: a, to: mgr, fromColumns: [x], toColumns: [id]}}]\n"
        );
        assert_eq!(
            run(&text),
            vec![
                r#"x.yaml:10: SemanticModel ex/m: spec.definition.relationships[0].to: no dataset named "mgr" [UnknownDataset]"#
            ]
        );
    }

    #[test]
    fn catalog_references_are_checked_against_catalogs_in_the_input() {
        let text = format!(
            "{CATALOGS}---\napiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {{name: m, namespace: ex}}\nspec: {{catalog: analytics, schema: semantic, definition: {{datasets: [{{name: a, source: hr.public.t}}]}}}}\n"
        );
        let out = run(&text);
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].contains("[CatalogNotFound]"), "{out:?}");
    }

    #[test]
    fn catalogs_and_policies_are_checked_too() {
        let text = "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {name: hr, namespace: ex}\nspec: {provider: postgresql, registrations: [{kind: Table, name: t}]}\n---\napiVersion: semops.io/v1alpha1\nkind: ReconcilePolicy\nmetadata: {name: p, namespace: ex}\nspec: {interval: 10s}\n";
        let out = run(text);
        assert_eq!(
            out,
            vec![
                "x.yaml:1: Catalog ex/hr: spec.connection: is required unless provider is managed [SchemaMismatch]",
                "x.yaml:1: Catalog ex/hr: spec.registrations[0].schema: is required for Table registrations [SchemaMismatch]",
                "x.yaml:6: ReconcilePolicy ex/p: spec.interval: 10s is shorter than the 1m minimum [SchemaMismatch]",
            ]
        );
    }

    #[test]
    fn broken_yaml_is_a_finding_not_a_crash() {
        let out = run("apiVersion: semops.io/v1alpha1\nkind: [unclosed\n");
        assert_eq!(out.len(), 1);
        assert!(out[0].contains("[InvalidYaml]"), "{out:?}");
    }
}
