//! `kubectl semops` as a krew plugin: the manifest passes krew's own validation code
//! (`validate-krew-manifest` v0.4.3, built from the Go module proxy), the release manifest made
//! by `hack/krew` installs with a real `kubectl krew` from an archive served on 127.0.0.1, and
//! the installed plugin runs and completes through kubectl.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::{ROOT, gotool, run_text as run};

/// A directory with kubectl (from the test control plane's tools) and kubectl-krew.
fn tool_path(dir: &Path) -> String {
    let tools = dir.join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    std::os::unix::fs::symlink(
        support::tool_bin_dir().join("kubectl"),
        tools.join("kubectl"),
    )
    .unwrap();
    std::os::unix::fs::symlink(gotool("krew"), tools.join("kubectl-krew")).unwrap();
    format!("{}:{}", tools.display(), std::env::var("PATH").unwrap())
}

fn validate(path: &str, manifest: &Path, skip_install: bool) -> (bool, String) {
    let mut c = Command::new(gotool("validate-krew-manifest"));
    c.arg("-manifest").arg(manifest).env("PATH", path);
    if skip_install {
        c.arg("-skip-install");
    }
    // The download goes to 127.0.0.1 only.
    c.env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy");
    run(c)
}

/// Serves `file` to every GET on 127.0.0.1 (krew downloads the archive from the manifest's uri).
fn serve(file: PathBuf) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let body = std::fs::read(&file).unwrap();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(&body);
        }
    });
    port
}

#[test]
fn the_manifest_passes_krews_validation_installs_and_the_plugin_runs_and_completes() {
    let dir = tempfile::tempdir().unwrap();
    let path = tool_path(dir.path());

    // The committed template: structure, platforms, selectors.
    let (ok, output) = validate(&path, Path::new(&format!("{ROOT}/krew/semops.yaml")), true);
    assert!(ok, "krew/semops.yaml:\n{output}");

    // The release manifest of hack/krew, its archive served locally: krew's full validation
    // installs it (download, sha256, LICENSE extracted).
    let out = dir.path().join("release");
    let archive = out.join("kubectl-semops_linux_amd64.tar.gz");
    std::fs::create_dir_all(&out).unwrap();
    let port = serve(archive.clone());
    let (ok, output) = run({
        let mut c = Command::new(format!("{ROOT}/hack/krew"));
        c.args(["--binary", env!("CARGO_BIN_EXE_semops")])
            .args(["--uri-base", &format!("http://127.0.0.1:{port}")])
            .arg(&out);
        c
    });
    assert!(ok, "hack/krew:\n{output}");
    let manifest = out.join("semops.yaml");
    let (ok, output) = validate(&path, &manifest, false);
    assert!(ok, "validate-krew-manifest (install):\n{output}");

    // A wrong checksum fails krew's install: the validation can fail.
    let text = std::fs::read_to_string(&manifest).unwrap();
    let sha_line = text
        .lines()
        .find(|l| l.trim_start().starts_with("sha256:"))
        .unwrap();
    let bad_dir = dir.path().join("bad");
    std::fs::create_dir_all(&bad_dir).unwrap();
    let bad = bad_dir.join("semops.yaml");
    std::fs::write(
        &bad,
        text.replace(sha_line, &format!("      sha256: \"{}\"", "1".repeat(64))),
    )
    .unwrap();
    let (ok, output) = validate(&path, &bad, false);
    assert!(
        !ok && output.contains("checksum"),
        "a wrong sha256 passed:\n{output}"
    );

    // As a user installs it from a downloaded archive.
    let krew_root = dir.path().join("krew-root");
    let krew = |args: &[&str]| {
        let mut c = Command::new(dir.path().join("tools/kubectl"));
        c.args(args)
            .env("PATH", format!("{}/bin:{path}", krew_root.display()))
            .env("KREW_ROOT", &krew_root);
        run(c)
    };
    let (ok, output) = krew(&[
        "krew",
        "install",
        "--manifest",
        manifest.to_str().unwrap(),
        "--archive",
        archive.to_str().unwrap(),
    ]);
    assert!(ok, "kubectl krew install:\n{output}");
    let (ok, output) = krew(&["semops", "version"]);
    assert!(
        ok && output.contains(env!("CARGO_PKG_VERSION")),
        "kubectl semops version:\n{output}"
    );
    // kubectl's plugin completion: `kubectl semops lo<Tab>` through kubectl_complete-semops,
    // linked onto PATH as the manifest's caveats say (krew links only the plugin binary).
    let (ok, output) = krew(&["__complete", "semops", "lo"]);
    assert!(
        ok && !output.lines().any(|l| l.starts_with("lookup")),
        "no helper yet: {output}"
    );
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    let caveats = std::fs::read_to_string(&manifest).unwrap();
    assert!(
        caveats.contains(&format!("/store/semops/{version}/kubectl_complete-semops")),
        "{caveats}"
    );
    std::os::unix::fs::symlink(
        krew_root.join(format!("store/semops/{version}/kubectl_complete-semops")),
        krew_root.join("bin/kubectl_complete-semops"),
    )
    .unwrap();
    let (ok, output) = krew(&["__complete", "semops", "lo"]);
    assert!(ok, "kubectl __complete:\n{output}");
    assert!(output.lines().any(|l| l.starts_with("lookup")), "{output}");
    assert!(
        !output.lines().any(|l| l.starts_with("lineage")),
        "{output}"
    );
    let (ok, output) = krew(&["__complete", "semops", "lineage", ""]);
    assert!(ok, "{output}");
    for root in ["model", "table", "view"] {
        assert!(
            output.lines().any(|l| l.starts_with(root)),
            "{root}: {output}"
        );
    }
}
