//! `semops diff` without a cluster: every change case of tests/fixtures/change/cases.yaml
//! predicted from a file base and from an accepted base (ids minted by the controller's own
//! rule), and `--base-ref` against a real git repository.

mod support;

use std::path::Path;
use std::process::Command;

use semops::change::{Base, diff_model};
use semops::crd::semantic_model::{MetricIdentity, RetiredMetric, SemanticModelSpec};
use semops::model::identity::{Wanted, reconcile_metric_ids};
use support::change_cases::{Expect, cases, git, observed};

/// What acceptance would commit: the controller's reconciliation with fresh ids.
fn accept(
    spec: &SemanticModelSpec,
    live: &[MetricIdentity],
    retired: &[RetiredMetric],
    revision: i64,
) -> (Vec<MetricIdentity>, Vec<RetiredMetric>) {
    let metrics = spec.definition.metrics.as_deref().unwrap_or_default();
    reconcile_metric_ids(
        live,
        retired,
        &Wanted::of(metrics),
        revision,
        semops::model::identity::mint_metric_id,
    )
}

fn model_name<'a>(object: &'a str, spec: &'a SemanticModelSpec) -> &'a str {
    spec.name.as_deref().unwrap_or(object)
}

#[test]
fn every_case_is_predicted_the_same_from_a_file_and_from_the_accepted_revision() {
    let all = cases();
    assert!(all.len() >= 12, "the fixture's cases were read");
    let mut steps = 0;
    for case in all {
        let specs: Vec<SemanticModelSpec> = case
            .steps
            .iter()
            .map(|s| serde_json::from_value(s.spec.clone()).unwrap())
            .collect();
        let (mut live, mut retired) = accept(&specs[0], &[], &[], 1);
        for (i, step) in case.steps.iter().enumerate().skip(1) {
            let what = format!("{} (step {i})", case.name);
            let (prev, next) = (&specs[i - 1], &specs[i]);
            let want = step
                .expect
                .as_ref()
                .expect("every later step says what it does");
            let name = model_name("m", next);
            if step.recreate {
                (live, retired) = (vec![], vec![]);
            }
            let file_base = Base {
                name: model_name("m", prev),
                spec: prev,
                accepted: None,
            };
            let file_base = (!step.recreate).then_some(&file_base);
            let from_file = diff_model("ns", "m", name, next, file_base).unwrap();
            let from_file = observed(&serde_json::to_value(&from_file).unwrap());
            assert_eq!(&from_file, want, "{what}: from a file");

            let accepted = Base {
                name: model_name("m", prev),
                spec: prev,
                accepted: Some((&live, i as i64)),
            };
            let accepted = (!step.recreate).then_some(&accepted);
            let predicted = diff_model("ns", "m", name, next, accepted).unwrap();
            let json = serde_json::to_value(&predicted).unwrap();
            assert_eq!(&observed(&json), want, "{what}: from the accepted revision");

            // The ids the prediction names are the ids acceptance then commits.
            let (after, after_retired) = accept(next, &live, &retired, i as i64 + 1);
            let id_of = |ids: &[MetricIdentity], name: &str| {
                ids.iter()
                    .find(|m| m.name == name)
                    .map(|m| m.id.to_string())
            };
            for kept in predicted.metrics.kept.iter() {
                assert_eq!(
                    kept.id,
                    id_of(&after, &kept.name),
                    "{what}: kept {}",
                    kept.name
                );
                assert_eq!(
                    kept.id,
                    id_of(&live, &kept.name),
                    "{what}: kept {}",
                    kept.name
                );
            }
            for r in predicted.metrics.renamed.iter() {
                assert_eq!(r.id, id_of(&after, &r.to), "{what}: renamed {}", r.to);
                assert_eq!(r.id, id_of(&live, &r.from), "{what}: renamed {}", r.from);
            }
            for m in predicted.metrics.minted.iter() {
                let id = id_of(&after, &m.name).unwrap();
                assert!(
                    !live.iter().any(|l| l.id == id.as_str())
                        && !retired.iter().any(|r| r.id == id.as_str()),
                    "{what}: {} got a fresh id",
                    m.name
                );
            }
            let newly: Vec<Option<String>> = after_retired[retired.len()..]
                .iter()
                .map(|r| Some(r.id.to_string()))
                .collect();
            let said: Vec<Option<String>> = predicted
                .metrics
                .retired
                .iter()
                .map(|r| r.id.clone())
                .collect();
            assert_eq!(said, newly, "{what}: retired ids");
            (live, retired) = (after, after_retired);
            steps += 1;
        }
    }
    assert!(steps >= 15, "{steps} steps checked");
}

fn model_yaml(spec: &serde_json::Value) -> String {
    let doc = serde_json::json!({
        "apiVersion": "semops.io/v1alpha1",
        "kind": "SemanticModel",
        "metadata": {"name": "people", "namespace": "team-a"},
        "spec": spec,
    });
    serde_saphyr::to_string(&doc).unwrap()
}

fn diff(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_semops"))
        .current_dir(dir)
        .arg("diff")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// A repository with the model on `main` and a branch that changes it: `--base-ref main`
/// reads the old file with git from any working directory; a file main does not have is new;
/// an unknown revision is an error (exit 1), a breaking change exits 3, a safe one 0.
#[test]
fn base_ref_reads_the_base_from_a_real_git_repository() {
    let all = cases();
    let retire = all
        .iter()
        .find(|c| c.name.starts_with("a removed name is retired"))
        .unwrap();
    let repo = tempfile::tempdir().unwrap();
    let dir = repo.path();
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::create_dir(dir.join("models")).unwrap();
    let file = dir.join("models/people.yaml");
    std::fs::write(&file, model_yaml(&retire.steps[0].spec)).unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "people"]);
    git(dir, &["checkout", "-q", "-b", "change"]);
    std::fs::write(&file, model_yaml(&retire.steps[1].spec)).unwrap();
    std::fs::write(
        dir.join("models/new.yaml"),
        model_yaml(&retire.steps[0].spec).replace("name: people", "name: fresh"),
    )
    .unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "retire payroll"]);

    for (cwd, path) in [
        (dir.to_path_buf(), "models/people.yaml"),
        (dir.join("models"), "people.yaml"),
    ] {
        let (code, out, err) = diff(&cwd, &["--base-ref", "main", "-f", path, "-o", "json"]);
        assert_eq!(code, 3, "{out}{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let want = retire.steps[1].expect.as_ref().unwrap();
        assert_eq!(&observed(&v["models"][0]), want);
        assert_eq!(v["models"][0]["namespace"], "team-a");
    }
    // A directory: the file main lacks is a new model; the table names both.
    let (code, out, _) = diff(dir, &["--base-ref", "main", "-f", "models"]);
    assert_eq!(code, 3);
    assert!(
        out.contains("SemanticModel team-a/fresh (fresh): new, safe"),
        "{out}"
    );
    assert!(
        out.contains("SemanticModel team-a/people (people): changed, breaking"),
        "{out}"
    );
    assert!(out.contains("metric retired"), "{out}");

    // Nothing breaks against the branch itself: exit 0; Markdown for a comment.
    let (code, out, err) = diff(
        dir,
        &["--base-ref", "HEAD", "-f", "models", "-o", "markdown"],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("### ✅ semops diff: safe"), "{out}");

    let (code, _, err) = diff(dir, &["--base-ref", "no-such-branch", "-f", "models"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("git has no revision \"no-such-branch\""),
        "{err}"
    );
}

#[test]
fn an_expected_outcome_reads_back_from_the_fixture() {
    // The fixture's shorthand reads as intended: the loader is what the two tests trust.
    let all = cases();
    let rename = all
        .iter()
        .find(|c| c.name.starts_with("renamedFrom hands"))
        .unwrap();
    assert_eq!(
        rename.steps[1].expect,
        Some(Expect {
            kept: vec!["payroll".into()],
            renamed: vec!["headcount>staff_count".into()],
            verdict: "risky".into(),
            ..Default::default()
        })
    );
    assert_eq!(
        rename.steps[1].spec["definition"]["metrics"][0]["renamedFrom"],
        "headcount"
    );
}
