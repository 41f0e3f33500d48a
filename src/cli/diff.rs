//! `semops diff`: what applying SemanticModel files would do, before they are applied. The base
//! is the accepted revision in the cluster (read through the read API, with real metric ids), an
//! older file (`--base`), or the same files at a git revision (`--base-ref`, read with `git
//! show`). The prediction is the `change` room's, which uses the controller's own identity rule.
//! Exit 0 when nothing breaks, 3 when something does, 1 on any error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Value, json};

use super::query::{ApiArgs, Output, aligned};
use super::validate::{collect_files, parse_file};
use crate::change::{Base, ModelDiff, Verdict, diff_model, removed_model};
use crate::client::{Query, ReadApi};
use crate::crd::semantic_model::{MetricIdentity, SemanticModelSpec};
use crate::model::validate::parse_spec;

/// Exit code when a change breaks something.
pub const BREAKS: u8 = 3;

#[derive(clap::Args)]
pub struct DiffArgs {
    /// The changed SemanticModel files or directories (YAML, several documents per file).
    #[arg(short = 'f', long = "filename", required = true)]
    pub paths: Vec<PathBuf>,
    /// Compare with these files instead of the cluster (ids are then unknown; names stand in).
    #[arg(long, conflicts_with = "base_ref")]
    pub base: Vec<PathBuf>,
    /// Compare with the same files at this git revision (e.g. `origin/main`) instead of the
    /// cluster; a file the revision does not have is new.
    #[arg(long)]
    pub base_ref: Option<String>,
    #[command(flatten)]
    pub api: ApiArgs,
}

/// One SemanticModel read from a file.
#[derive(Clone, Debug)]
pub struct Input {
    pub namespace: Option<String>,
    pub object: String,
    pub spec: SemanticModelSpec,
}

impl Input {
    pub fn model_name(&self) -> &str {
        self.spec.name.as_deref().unwrap_or(&self.object)
    }
}

/// The SemanticModels of one YAML text; `Err` names the file, line, object and field.
pub fn read_models(file: &Path, text: &str) -> Result<Vec<Input>, String> {
    let mut findings = Vec::new();
    let docs = parse_file(file, text, &mut findings);
    if let Some(f) = findings.first() {
        return Err(f.to_string());
    }
    docs.into_iter()
        .filter(|d| d.kind == "SemanticModel")
        .map(|d| {
            let spec = parse_spec(&d.spec).map_err(|p| {
                format!(
                    "{}:{}: SemanticModel {}: {p}",
                    file.display(),
                    d.line,
                    d.name
                )
            })?;
            Ok(Input {
                namespace: d.namespace_given.then_some(d.namespace),
                object: d.name,
                spec,
            })
        })
        .collect()
}

fn read_paths(paths: &[PathBuf]) -> Result<Vec<(PathBuf, Vec<Input>)>, String> {
    let mut out = Vec::new();
    for path in paths {
        let files =
            collect_files(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        for file in files {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let models = read_models(&file, &text)?;
            out.push((file, models));
        }
    }
    Ok(out)
}

/// `file` as the git revision `rev` has it: `None` when the revision has no such file. Runs
/// in the file's directory, so any repository layout and working directory work.
pub fn git_show(rev: &str, file: &Path) -> Result<Option<String>, String> {
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = file
        .file_name()
        .ok_or_else(|| format!("{} is not a file", file.display()))?;
    let verify = std::process::Command::new("git")
        .current_dir(dir)
        .args([
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ])
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !verify.status.success() {
        return Err(format!(
            "git has no revision {rev:?} (in {})",
            dir.display()
        ));
    }
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .arg("show")
        .arg(format!("{rev}:./{}", name.to_string_lossy()))
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        return String::from_utf8(out.stdout)
            .map(Some)
            .map_err(|_| format!("{} at {rev} is not UTF-8", file.display()));
    }
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("does not exist in") || err.contains("exists on disk, but not in") {
        Ok(None)
    } else {
        Err(format!("git show {rev}:{}: {}", file.display(), err.trim()))
    }
}

/// A base model: its spec and, from the cluster, the accepted ids and revision.
struct BaseModel {
    name: String,
    spec: SemanticModelSpec,
    accepted: Option<(Vec<MetricIdentity>, i64)>,
}

type Key = (String, String);

/// Diffs every new model against its base; base models the input no longer has are removed
/// (file bases only: the cluster holds many models a file does not mention).
fn diff_all(
    inputs: &[(String, Input)],
    bases: &BTreeMap<Key, BaseModel>,
    removals: bool,
) -> Result<Vec<ModelDiff>, String> {
    let mut out = Vec::new();
    for (ns, input) in inputs {
        let key = (ns.clone(), input.object.clone());
        let base = bases.get(&key).map(|b| Base {
            name: &b.name,
            spec: &b.spec,
            accepted: b.accepted.as_ref().map(|(ids, r)| (ids.as_slice(), *r)),
        });
        let diff = diff_model(ns, &input.object, input.model_name(), &input.spec, base.as_ref())
            .map_err(|problems| {
                let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
                format!(
                    "SemanticModel {ns}/{}: acceptance would refuse it (the accepted revision keeps serving): {}",
                    input.object,
                    list.join("; ")
                )
            })?;
        out.push(diff);
    }
    if removals {
        for ((ns, object), b) in bases {
            if !inputs.iter().any(|(n, i)| n == ns && i.object == *object) {
                let base = Base {
                    name: &b.name,
                    spec: &b.spec,
                    accepted: None,
                };
                out.push(removed_model(ns, object, &base));
            }
        }
    }
    Ok(out)
}

fn file_bases(
    models: impl IntoIterator<Item = Input>,
    default_ns: &str,
) -> BTreeMap<Key, BaseModel> {
    models
        .into_iter()
        .map(|i| {
            let ns = i
                .namespace
                .clone()
                .unwrap_or_else(|| default_ns.to_string());
            let key = (ns, i.object.clone());
            let name = i.model_name().to_string();
            (
                key,
                BaseModel {
                    name,
                    spec: i.spec,
                    accepted: None,
                },
            )
        })
        .collect()
}

/// The accepted revision of `input` in the cluster, found by its model name, then by its object
/// name (a change that renames the model), then among the schema's models; `None` when the
/// cluster has no such object (a new model).
async fn cluster_base(api: &ReadApi, ns: &str, input: &Input) -> Result<Option<BaseModel>, String> {
    let ask = |name: String| Query::Models {
        catalog: input.spec.catalog.to_string(),
        schema: input.spec.schema.to_string(),
        name: Some(name),
    };
    let fetch = async |name: String| -> Result<Option<Value>, String> {
        match api
            .ask(ns, &ask(name.clone()))
            .await
            .map_err(|e| format!("{e:#}"))?
        {
            (200, body) if body["model"]["object"] == input.object.as_str() => Ok(Some(body)),
            (200 | 404, _) => Ok(None),
            (status, body) => Err(format!(
                "the read API answered {status} for model {name:?} in namespace {ns}: {}",
                body["message"].as_str().unwrap_or("no message")
            )),
        }
    };
    let mut tried = vec![input.model_name().to_string(), input.object.clone()];
    tried.dedup();
    let mut found = None;
    for name in tried.clone() {
        if let Some(body) = fetch(name).await? {
            found = Some(body);
            break;
        }
    }
    if found.is_none() {
        let list = Query::NamespaceModels {
            catalog: Some(input.spec.catalog.to_string()),
            schema: Some(input.spec.schema.to_string()),
        };
        let (_, body) = api.ask(ns, &list).await.map_err(|e| format!("{e:#}"))?;
        for id in body["identifiers"].as_array().into_iter().flatten() {
            let name = id["name"].as_str().unwrap_or_default().to_string();
            if !tried.contains(&name)
                && let Some(body) = fetch(name).await?
            {
                found = Some(body);
                break;
            }
        }
    }
    let Some(body) = found else { return Ok(None) };
    let model = &body["model"];
    let definition = serde_json::from_value(model["definition"].clone())
        .map_err(|e| format!("the read API sent a definition semops cannot read: {e}"))?;
    let ids: Vec<MetricIdentity> = serde_json::from_value(model["metricIds"].clone())
        .map_err(|e| format!("the read API sent metric ids semops cannot read: {e}"))?;
    let spec = SemanticModelSpec {
        catalog: input.spec.catalog.clone(),
        schema: input.spec.schema.clone(),
        name: model["name"].as_str().map(Into::into),
        comment: model["comment"].as_str().map(Into::into),
        properties: serde_json::from_value(model["properties"].clone()).unwrap_or_default(),
        rebind: None,
        definition,
    };
    Ok(Some(BaseModel {
        name: model["name"].as_str().unwrap_or_default().to_string(),
        spec,
        accepted: Some((ids, model["revision"].as_i64().unwrap_or(0))),
    }))
}

async fn run(args: &DiffArgs) -> Result<Vec<ModelDiff>, String> {
    let files = read_paths(&args.paths)?;
    let default_ns = || {
        args.api
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into())
    };
    if !args.base.is_empty() {
        let base = read_paths(&args.base)?.into_iter().flat_map(|(_, m)| m);
        let inputs = with_namespaces(&files, &default_ns());
        return diff_all(&inputs, &file_bases(base, &default_ns()), true);
    }
    if let Some(rev) = &args.base_ref {
        let mut base = Vec::new();
        for (file, _) in &files {
            if let Some(text) = git_show(rev, file)? {
                let at = PathBuf::from(format!("{} at {rev}", file.display()));
                base.extend(read_models(&at, &text)?);
            }
        }
        let inputs = with_namespaces(&files, &default_ns());
        return diff_all(&inputs, &file_bases(base, &default_ns()), true);
    }
    let api = ReadApi::connect(&args.api.connection())
        .await
        .map_err(|e| format!("{e:#}"))?;
    let inputs = with_namespaces(&files, &api.default_namespace);
    let mut bases = BTreeMap::new();
    for (ns, input) in &inputs {
        if let Some(b) = cluster_base(&api, ns, input).await? {
            bases.insert((ns.clone(), input.object.clone()), b);
        }
    }
    diff_all(&inputs, &bases, false)
}

fn with_namespaces(files: &[(PathBuf, Vec<Input>)], default_ns: &str) -> Vec<(String, Input)> {
    files
        .iter()
        .flat_map(|(_, models)| models)
        .map(|i| {
            (
                i.namespace
                    .clone()
                    .unwrap_or_else(|| default_ns.to_string()),
                i.clone(),
            )
        })
        .collect()
}

pub fn main(args: DiffArgs) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(run(&args)) {
        Ok(diffs) => {
            print!("{}", render(&diffs, args.api.output));
            if diffs.iter().any(|d| d.verdict == Verdict::Breaking) {
                ExitCode::from(BREAKS)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn overall(diffs: &[ModelDiff]) -> Verdict {
    diffs
        .iter()
        .map(|d| d.verdict)
        .max()
        .unwrap_or(Verdict::Safe)
}

/// The diff as JSON: the overall verdict and one entry per model.
pub fn to_json(diffs: &[ModelDiff]) -> Value {
    json!({"verdict": overall(diffs), "models": diffs})
}

fn counts(d: &ModelDiff) -> [usize; 5] {
    let m = &d.metrics;
    [
        m.kept.len(),
        m.minted.len(),
        m.retired.len(),
        m.renamed.len(),
        m.deprecated.len(),
    ]
}

pub fn render(diffs: &[ModelDiff], output: Output) -> String {
    match output {
        Output::Json => serde_json::to_string_pretty(&to_json(diffs)).unwrap_or_default() + "\n",
        Output::Yaml => serde_saphyr::to_string(&to_json(diffs)).unwrap_or_default(),
        Output::Markdown => markdown(diffs),
        Output::Table | Output::Dot | Output::Mermaid => table(diffs),
    }
}

fn table(diffs: &[ModelDiff]) -> String {
    if diffs.is_empty() {
        return "No SemanticModels in the input.\n".into();
    }
    let mut out = String::new();
    for d in diffs {
        let [kept, minted, retired, renamed, deprecated] = counts(d);
        out.push_str(&format!(
            "SemanticModel {}/{} ({}): {}, {} — ids: {kept} kept, {minted} minted, {retired} retired, {renamed} renamed, {deprecated} deprecated\n",
            d.namespace, d.object, d.name, d.state, d.verdict.as_str()
        ));
        if d.changes.is_empty() {
            out.push_str("  no changes\n");
            continue;
        }
        let header = ["VERDICT", "CHANGE", "SUBJECT", "DETAIL"]
            .map(String::from)
            .to_vec();
        let rows = d.changes.iter().map(|c| {
            vec![
                c.verdict.as_str().into(),
                c.what.clone(),
                c.subject.clone(),
                c.detail.clone(),
            ]
        });
        for line in aligned(std::iter::once(header).chain(rows)).lines() {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out
}

/// A Markdown cell: pipes escaped, newlines flattened, backticks kept out of code spans.
fn cell(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

fn markdown(diffs: &[ModelDiff]) -> String {
    let verdict = overall(diffs);
    let icon = match verdict {
        Verdict::Safe => "✅",
        Verdict::Risky => "⚠️",
        Verdict::Breaking => "❌",
    };
    let mut out = format!("### {icon} semops diff: {}\n\n", verdict.as_str());
    out.push_str("| Model | State | Verdict | Kept | Minted | Retired | Renamed | Deprecated |\n");
    out.push_str("|---|---|---|---|---|---|---|---|\n");
    for d in diffs {
        let [kept, minted, retired, renamed, deprecated] = counts(d);
        out.push_str(&format!(
            "| `{}/{}` ({}) | {} | **{}** | {kept} | {minted} | {retired} | {renamed} | {deprecated} |\n",
            cell(&d.namespace), cell(&d.object), cell(&d.name), d.state, d.verdict.as_str()
        ));
    }
    for d in diffs.iter().filter(|d| !d.changes.is_empty()) {
        out.push_str(&format!(
            "\n#### {}/{}\n\n| Verdict | Change | Subject | Detail |\n|---|---|---|---|\n",
            cell(&d.namespace),
            cell(&d.object)
        ));
        for c in &d.changes {
            out.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                c.verdict.as_str(),
                cell(&c.what),
                cell(&c.subject),
                cell(&c.detail)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(object: &str, metrics: &str) -> String {
        format!(
            "apiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {{name: {object}, namespace: team}}\nspec:\n  catalog: home\n  schema: semantic\n  definition:\n    datasets: [{{name: d, source: wh.app.t}}]\n    metrics: {metrics}\n"
        )
    }

    fn diffs(base: &str, next: &str) -> Vec<ModelDiff> {
        let base = read_models(Path::new("base.yaml"), base).unwrap();
        let next = read_models(Path::new("next.yaml"), next).unwrap();
        let inputs = with_namespaces(&[(PathBuf::from("next.yaml"), next)], "default");
        diff_all(&inputs, &file_bases(base, "default"), true).unwrap()
    }

    const A: &str =
        r#"[{name: "a|b", expression: {dialects: [{dialect: ANSI_SQL, expression: "SUM(d.x)"}]}}]"#;
    const B: &str =
        r#"[{name: c, expression: {dialects: [{dialect: ANSI_SQL, expression: "SUM(d.x)"}]}}]"#;

    #[test]
    fn every_format_carries_the_verdict_and_the_changes() {
        let d = diffs(&model("m", A), &model("m", B));
        assert_eq!(d[0].verdict, Verdict::Breaking);
        let t = table(&d);
        assert!(
            t.contains("SemanticModel team/m (m): changed, breaking"),
            "{t}"
        );
        assert!(t.contains("metric retired"), "{t}");
        let md = markdown(&d);
        assert!(md.starts_with("### ❌ semops diff: breaking\n"), "{md}");
        assert!(
            md.contains("| breaking | metric retired | a\\|b |"),
            "a pipe in a name stays in its cell: {md}"
        );
        let j = to_json(&d);
        assert_eq!(j["verdict"], "breaking");
        assert_eq!(j["models"][0]["metrics"]["retired"][0]["name"], "a|b");
        assert_eq!(j["models"][0]["metrics"]["minted"][0]["name"], "c");
    }

    #[test]
    fn models_the_input_no_longer_has_are_removed_and_new_ones_are_new() {
        let d = diffs(&model("old", A), &model("new", B));
        let states: Vec<(&str, &str)> = d.iter().map(|d| (d.object.as_str(), d.state)).collect();
        assert_eq!(states, [("new", "new"), ("old", "removed")]);
        assert_eq!(d[1].metrics.retired.len(), 1);
    }

    #[test]
    fn a_change_acceptance_would_refuse_is_an_error_naming_the_field() {
        let bad = r#"[{name: c, renamedFrom: c, expression: {dialects: [{dialect: ANSI_SQL, expression: "1"}]}}]"#;
        let base = read_models(Path::new("b"), &model("m", A)).unwrap();
        let next = read_models(Path::new("n"), &model("m", bad)).unwrap();
        let inputs = with_namespaces(&[(PathBuf::from("n"), next)], "default");
        let err = diff_all(&inputs, &file_bases(base, "default"), true).unwrap_err();
        assert!(
            err.contains("SemanticModel team/m")
                && err.contains("spec.definition.metrics[0].renamedFrom"),
            "{err}"
        );
    }

    #[test]
    fn a_shape_error_names_the_file_line_and_field() {
        let text = "apiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {name: m}\nspec: {catalog: home, schema: s, definition: {datasets: 3}}\n";
        let err = read_models(Path::new("x.yaml"), text).unwrap_err();
        assert!(
            err.starts_with("x.yaml:1: SemanticModel m: spec.definition.datasets"),
            "{err}"
        );
    }
}
