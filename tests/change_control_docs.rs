//! The CI examples of docs/change-control.md, run as written: the GitHub Actions workflow's
//! steps and the GitLab job's script on a real git repository (a clone of a local origin), with
//! `semops` on PATH; each posts its Markdown comment to a local server standing in for the
//! forge's API. Only the checkout and the install steps are left out.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::Value;

mod support;

use support::ROOT;
use support::change_cases::git;

/// The YAML block that follows `<!-- file: NAME -->` in the document.
fn block(doc: &str, name: &str) -> Value {
    let marker = format!("<!-- file: {name} -->\n```yaml\n");
    let start = doc
        .find(&marker)
        .unwrap_or_else(|| panic!("{name} in the doc"))
        + marker.len();
    let end = start + doc[start..].find("```").unwrap();
    serde_saphyr::from_str(&doc[start..end]).unwrap()
}

#[derive(Clone, Debug)]
struct Posted {
    target: String,
    headers: HashMap<String, String>,
    body: String,
}

/// A loopback server that records every request and answers 201.
fn forge() -> (String, Arc<Mutex<Vec<Posted>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let target = line.split(' ').nth(1).unwrap_or_default().to_string();
            let mut headers = HashMap::new();
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).unwrap();
                let h = h.trim_end();
                if h.is_empty() {
                    break;
                }
                let (k, v) = h.split_once(':').unwrap();
                headers.insert(k.to_ascii_lowercase(), v.trim().to_string());
            }
            let len: usize = headers
                .get("content-length")
                .map_or(0, |l| l.parse().unwrap());
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            log.lock().unwrap().push(Posted {
                target,
                headers,
                body: String::from_utf8(body).unwrap(),
            });
            stream
                .write_all(
                    b"HTTP/1.1 201 Created\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
                )
                .unwrap();
        }
    });
    (url, seen)
}

fn model(metrics: &[&str]) -> String {
    let metrics: Vec<String> = metrics
        .iter()
        .map(|m| format!("    - {{name: {m}, expression: {{dialects: [{{dialect: ANSI_SQL, expression: \"COUNT(*)\"}}]}}}}\n"))
        .collect();
    format!(
        "apiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {{name: people, namespace: team-a}}\nspec:\n  catalog: home\n  schema: semantic\n  definition:\n    datasets: [{{name: employees, source: wh.app.employees}}]\n    metrics:\n{}",
        metrics.concat()
    )
}

/// A clone of a local origin whose `main` has the model with `headcount` and `payroll`, checked
/// out on a branch whose model has `after`.
fn repository(after: &[&str]) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let (origin, seed, work) = (
        root.path().join("origin.git"),
        root.path().join("seed"),
        root.path().join("work"),
    );
    git(
        root.path(),
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            origin.to_str().unwrap(),
        ],
    );
    git(
        root.path(),
        &[
            "clone",
            "-q",
            origin.to_str().unwrap(),
            seed.to_str().unwrap(),
        ],
    );
    std::fs::create_dir(seed.join("models")).unwrap();
    std::fs::write(
        seed.join("models/people.yaml"),
        model(&["headcount", "payroll"]),
    )
    .unwrap();
    git(&seed, &["add", "."]);
    git(&seed, &["commit", "-q", "-m", "people"]);
    git(&seed, &["push", "-q", "origin", "HEAD:main"]);
    git(
        root.path(),
        &[
            "clone",
            "-q",
            origin.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    git(&work, &["checkout", "-q", "-b", "change"]);
    std::fs::write(work.join("models/people.yaml"), model(after)).unwrap();
    git(&work, &["commit", "-q", "-am", "change"]);
    root
}

/// A directory holding `semops` (this build) for PATH.
fn semops_on_path() -> (tempfile::TempDir, String) {
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_semops"), bin.path().join("semops")).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );
    (bin, path)
}

/// Runs a script as the runner would (bash, errexit, pipefail): exit code and output.
fn sh(dir: &Path, script: &str, env: &[(String, String)]) -> (i32, String) {
    let out = Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// The workflow's run steps in order, with the two expressions it uses filled in: the exit
/// code of each step until the first that fails (as a runner stops there).
fn github(work: &Path, forge_url: &str) -> Vec<(String, i32, String)> {
    let doc = std::fs::read_to_string(format!("{ROOT}/docs/change-control.md")).unwrap();
    let workflow = block(&doc, ".github/workflows/semops-diff.yaml");
    let (_bin, path) = semops_on_path();
    let summary = work.join("step-summary.md");
    let mut results = Vec::new();
    for step in workflow["jobs"]["diff"]["steps"].as_array().unwrap() {
        let name = step["name"].as_str().unwrap_or_default();
        let Some(run) = step["run"].as_str() else {
            continue;
        };
        if name == "Install semops" {
            continue;
        }
        let mut env = vec![
            ("PATH".into(), path.clone()),
            ("GITHUB_BASE_REF".into(), "main".into()),
            ("GITHUB_STEP_SUMMARY".into(), summary.display().to_string()),
            ("GITHUB_API_URL".into(), forge_url.into()),
            ("GITHUB_REPOSITORY".into(), "team/models".into()),
        ];
        for (k, v) in step["env"].as_object().into_iter().flatten() {
            let v = v
                .as_str()
                .unwrap()
                .replace("${{ github.token }}", "gh-token")
                .replace("${{ github.event.pull_request.number }}", "7");
            assert!(
                !v.contains("${{"),
                "an expression the test does not know: {v}"
            );
            env.push((k.clone(), v));
        }
        assert!(!run.contains("${{"), "expressions inside run: {run}");
        let (code, out) = sh(work, run, &env);
        results.push((name.to_string(), code, out));
        if code != 0 {
            break;
        }
    }
    results
}

fn gitlab(work: &Path, forge_url: &str) -> (i32, String) {
    let doc = std::fs::read_to_string(format!("{ROOT}/docs/change-control.md")).unwrap();
    let ci = block(&doc, ".gitlab-ci.yml");
    let lines: Vec<&str> = ci["semops-diff"]["script"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let (_bin, path) = semops_on_path();
    let env = [
        ("PATH", path.as_str()),
        ("CI_MERGE_REQUEST_TARGET_BRANCH_NAME", "main"),
        ("CI_API_V4_URL", &format!("{forge_url}/api/v4")),
        ("CI_PROJECT_ID", "42"),
        ("CI_MERGE_REQUEST_IID", "7"),
        ("SEMOPS_DIFF_TOKEN", "gl-token"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()));
    sh(work, &lines.join("\n"), &env)
}

fn form_value(body: &str, key: &str) -> String {
    let raw = body.strip_prefix(&format!("{key}=")).unwrap();
    let bytes = raw.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                out.push(u8::from_str_radix(&raw[i + 1..i + 3], 16).unwrap());
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap()
}

#[test]
fn the_github_workflow_comments_and_fails_on_a_breaking_change_and_passes_a_safe_one() {
    let (url, posted) = forge();
    let repo = repository(&["headcount"]);
    let work = repo.path().join("work");
    let steps = github(&work, &url);
    let names: Vec<(&str, i32)> = steps.iter().map(|(n, c, _)| (n.as_str(), *c)).collect();
    assert_eq!(
        names,
        [
            ("Validate", 0),
            ("Diff against the target branch", 0),
            ("Comment on the pull request", 0),
            ("Stop on breaking changes", 1)
        ],
        "{steps:#?}"
    );
    assert!(
        steps[3]
            .2
            .contains("::error::semops diff found breaking changes")
    );
    let markdown = std::fs::read_to_string(work.join("semops-diff.md")).unwrap();
    assert!(
        markdown.starts_with("### ❌ semops diff: breaking"),
        "{markdown}"
    );
    assert!(
        markdown.contains("| breaking | metric retired | payroll |"),
        "{markdown}"
    );
    assert_eq!(
        std::fs::read_to_string(work.join("step-summary.md")).unwrap(),
        markdown
    );
    let posted = posted.lock().unwrap().clone();
    assert_eq!(posted.len(), 1);
    assert_eq!(posted[0].target, "/repos/team/models/issues/7/comments");
    assert_eq!(posted[0].headers["authorization"], "Bearer gh-token");
    let body: Value = serde_json::from_str(&posted[0].body).unwrap();
    assert_eq!(body["body"], markdown.as_str());

    let (url, _) = forge();
    let repo = repository(&["headcount", "payroll", "overtime"]);
    let steps = github(&repo.path().join("work"), &url);
    assert!(
        steps.len() == 4 && steps.iter().all(|(_, c, _)| *c == 0),
        "{steps:#?}"
    );
}

#[test]
fn the_gitlab_job_comments_and_fails_on_a_breaking_change_and_passes_a_safe_one() {
    let (url, posted) = forge();
    let repo = repository(&["headcount"]);
    let work = repo.path().join("work");
    let (code, out) = gitlab(&work, &url);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("semops diff found breaking changes"), "{out}");
    let markdown = std::fs::read_to_string(work.join("semops-diff.md")).unwrap();
    let posted = posted.lock().unwrap().clone();
    assert_eq!(posted.len(), 1, "{out}");
    assert_eq!(
        posted[0].target,
        "/api/v4/projects/42/merge_requests/7/notes"
    );
    assert_eq!(posted[0].headers["private-token"], "gl-token");
    assert_eq!(form_value(&posted[0].body, "body"), markdown);
    assert!(markdown.contains("metric retired"));

    let (url, posted) = forge();
    let repo = repository(&["headcount", "payroll", "overtime"]);
    let (code, out) = gitlab(&repo.path().join("work"), &url);
    assert_eq!(code, 0, "{out}");
    assert_eq!(posted.lock().unwrap().len(), 1);

    // An invalid model is an error, not a pass: the job stops before commenting.
    let (url, posted) = forge();
    let repo = repository(&["headcount"]);
    let work = repo.path().join("work");
    std::fs::write(
        work.join("models/people.yaml"),
        model(&["headcount"]).replace("datasets: [", "datasets: 7 #["),
    )
    .unwrap();
    let (code, out) = gitlab(&work, &url);
    assert_ne!(code, 0, "{out}");
    assert!(posted.lock().unwrap().is_empty());
}
