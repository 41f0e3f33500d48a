//! Build facts for `semops version` and the `semops_build_info` metric: the git commit and its
//! date (so the same commit builds the same binary), the compiler and the target. Each can be
//! given from outside (`SEMOPS_GIT_COMMIT`, `SOURCE_DATE_EPOCH`), e.g. by an image build that
//! has no `.git` directory.

use std::process::Command;

fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-env-changed=SEMOPS_GIT_COMMIT");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    // A new commit moves the branch HEAD names (or HEAD itself when detached).
    if let Ok(head) = std::fs::read_to_string(".git/HEAD") {
        println!("cargo:rerun-if-changed=.git/HEAD");
        if let Some(branch) = head.trim().strip_prefix("ref: ") {
            for path in [format!(".git/{branch}"), ".git/packed-refs".to_string()] {
                if std::path::Path::new(&path).exists() {
                    println!("cargo:rerun-if-changed={path}");
                }
            }
        }
    }
    let commit = std::env::var("SEMOPS_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| output("git", &["rev-parse", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    let epoch = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .or_else(|| output("git", &["log", "-1", "--format=%ct"]));
    let date = epoch
        .and_then(|e| {
            output(
                "date",
                &["-u", "-d", &format!("@{e}"), "+%Y-%m-%dT%H:%M:%SZ"],
            )
        })
        .unwrap_or_else(|| "unknown".into());
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc_version = output(&rustc, &["--version"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SEMOPS_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=SEMOPS_BUILD_DATE={date}");
    println!("cargo:rustc-env=SEMOPS_RUSTC={rustc_version}");
    println!(
        "cargo:rustc-env=SEMOPS_TARGET={}",
        std::env::var("TARGET").unwrap_or_default()
    );
}
