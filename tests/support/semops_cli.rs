//! The `semops` binary of this build run as a user runs it, and a scratch directory per test
//! (shared by suites that need nothing else of `support`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `semops ARGS`; the outcome, success or not.
pub fn semops(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_semops"))
        .args(args)
        .output()
        .expect("semops runs")
}

/// Runs `semops ARGS`, asserting success.
pub fn semops_ok(args: &[&str]) -> Output {
    let out = semops(args);
    assert!(
        out.status.success(),
        "semops {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// An empty directory `NAME` under the test build's temporary directory.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
