//! The container image `hack/image` builds, inspected as a registry or a runtime would see it:
//! the OCI archive's index, manifest and config (user 65532, entrypoint, labels), a root
//! filesystem with no shell and nothing but the binary, glibc, libgcc and CA certificates, the
//! binary running from that root filesystem, and the SBOM beside the archive.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The archive (built by hack/image when it is missing or stale).
fn archive() -> PathBuf {
    let out = Command::new(format!("{ROOT}/hack/image"))
        .arg("--print")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hack/image: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

struct Unpacked {
    _dir: tempfile::TempDir,
    layout: PathBuf,
    rootfs: PathBuf,
    manifest: Value,
    config: Value,
}

fn blob(layout: &Path, digest: &str) -> PathBuf {
    layout
        .join("blobs/sha256")
        .join(digest.strip_prefix("sha256:").unwrap())
}

fn unpack() -> Unpacked {
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    let rootfs = dir.path().join("rootfs");
    std::fs::create_dir_all(&layout).unwrap();
    std::fs::create_dir_all(&rootfs).unwrap();
    let ok = Command::new("tar")
        .args(["-xf", archive().to_str().unwrap(), "-C"])
        .arg(&layout)
        .status()
        .unwrap();
    assert!(ok.success());
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    assert_eq!(index["manifests"].as_array().unwrap().len(), 1);
    let digest = index["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(blob(&layout, &digest)).unwrap()).unwrap();
    let config: Value = serde_json::from_slice(
        &std::fs::read(blob(
            &layout,
            manifest["config"]["digest"].as_str().unwrap(),
        ))
        .unwrap(),
    )
    .unwrap();
    for layer in manifest["layers"].as_array().unwrap() {
        let ok = Command::new("tar")
            .arg("-xzf")
            .arg(blob(&layout, layer["digest"].as_str().unwrap()))
            .arg("-C")
            .arg(&rootfs)
            .status()
            .unwrap();
        assert!(ok.success());
    }
    Unpacked {
        _dir: dir,
        layout,
        rootfs,
        manifest,
        config,
    }
}

#[test]
fn the_config_runs_semops_as_uid_65532_with_oci_labels() {
    let image = unpack();
    let c = &image.config["config"];
    assert_eq!(c["User"], "65532:65532");
    assert_eq!(c["Entrypoint"], serde_json::json!(["/semops"]));
    assert_eq!(c["Cmd"], serde_json::json!(["run"]));
    let version = env!("CARGO_PKG_VERSION");
    for (label, want) in [
        (
            "org.opencontainers.image.source",
            Some("https://github.com/semops/semops"),
        ),
        ("org.opencontainers.image.version", Some(version)),
        ("org.opencontainers.image.licenses", Some("Apache-2.0")),
        ("org.opencontainers.image.revision", None),
    ] {
        let got = c["Labels"][label].as_str();
        assert!(got.is_some_and(|g| !g.is_empty()), "{label} missing");
        if let Some(want) = want {
            assert_eq!(got, Some(want), "{label}");
        }
        assert_eq!(
            image.manifest["annotations"][label], c["Labels"][label],
            "{label}: manifest annotation and config label agree"
        );
    }
    assert_eq!(image.config["os"], "linux");
    assert!(image.layout.join("oci-layout").exists());
}

#[test]
fn the_root_filesystem_holds_the_binary_glibc_libgcc_and_certificates_and_no_shell() {
    let image = unpack();
    let root = &image.rootfs;
    for shell in [
        "bin/sh",
        "bin/bash",
        "bin/dash",
        "usr/bin/sh",
        "bin/busybox",
        "usr/bin/env",
    ] {
        assert!(
            !root.join(shell).exists() && root.join(shell).symlink_metadata().is_err(),
            "{shell} is in the image"
        );
    }
    let mut top: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    top.sort();
    assert_eq!(
        top,
        ["etc", "home", "lib", "lib64", "semops", "tmp", "usr", "var"],
        "only the binary and its runtime"
    );
    for file in [
        "semops",
        "lib/x86_64-linux-gnu/libc.so.6",
        "lib/x86_64-linux-gnu/libgcc_s.so.1",
        "etc/ssl/certs/ca-certificates.crt",
    ] {
        assert!(root.join(file).exists(), "{file} missing");
    }
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).unwrap();
    assert!(passwd.contains("nonroot:x:65532:65532"), "{passwd}");
    let certs = std::fs::read_to_string(root.join("etc/ssl/certs/ca-certificates.crt")).unwrap();
    assert!(certs.matches("BEGIN CERTIFICATE").count() > 100);
    // Executables: only the binary and the dynamic loader.
    let found = Command::new("find")
        .arg(root)
        .args(["-type", "f", "-perm", "-u+x"])
        .output()
        .unwrap();
    let execs: Vec<String> = String::from_utf8(found.stdout)
        .unwrap()
        .lines()
        .map(|l| l.trim_start_matches(root.to_str().unwrap()).to_string())
        .filter(|l| !l.ends_with(".so") && !l.contains(".so."))
        .collect();
    assert_eq!(execs, ["/semops"], "executables besides /semops: {execs:?}");
}

#[test]
fn the_binary_runs_from_the_image_root_filesystem() {
    let image = unpack();
    // chroot needs root; elsewhere an unprivileged user namespace maps us to root.
    let mut cmd = if running_as_root() {
        let mut c = Command::new("chroot");
        c.arg(&image.rootfs);
        c
    } else {
        let mut c = Command::new("unshare");
        c.args(["--user", "--map-root-user", "chroot"])
            .arg(&image.rootfs);
        c
    };
    let out = cmd
        .args(["/semops", "version", "-o", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        v["commit"], image.config["config"]["Labels"]["org.opencontainers.image.revision"],
        "the binary and the label name the same commit"
    );
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .is_some_and(|l| l.split_whitespace().nth(1) == Some("0"))
}

#[test]
fn a_cyclonedx_sbom_lists_the_debian_packages_and_the_rust_crates() {
    let archive = archive();
    let sbom = archive.with_file_name(format!("semops-{}.cdx.json", env!("CARGO_PKG_VERSION")));
    let doc: Value = serde_json::from_slice(&std::fs::read(&sbom).unwrap()).unwrap();
    assert_eq!(doc["bomFormat"], "CycloneDX");
    let purls: Vec<&str> = doc["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["purl"].as_str())
        .collect();
    for deb in [
        "pkg:deb/debian/libc6@",
        "pkg:deb/debian/libgcc-s1@",
        "pkg:deb/debian/ca-certificates@",
    ] {
        assert!(purls.iter().any(|p| p.starts_with(deb)), "{deb} missing");
    }
    for krate in ["pkg:cargo/kube@", "pkg:cargo/tokio@", "pkg:cargo/rustls@"] {
        assert!(
            purls.iter().any(|p| p.starts_with(krate)),
            "{krate} missing"
        );
    }
}
