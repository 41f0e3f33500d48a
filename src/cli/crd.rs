//! `semops crd`: print the CRDs, or write one file per kind into a directory.

use std::path::Path;

use crate::crd::{all_crds, crd_yaml};

/// All CRDs as one multi-document YAML stream.
pub fn render_all() -> String {
    all_crds()
        .iter()
        .map(|(_, crd)| crd_yaml(crd))
        .collect::<Vec<_>>()
        .join("---\n")
}

/// Writes `<dir>/<kind>.yaml` for each CRD.
pub fn write_dir(dir: &Path) -> std::io::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for (file, crd) in all_crds() {
        let path = dir.join(format!("{file}.yaml"));
        std::fs::write(&path, crd_yaml(&crd))?;
        written.push(path.display().to_string());
    }
    Ok(written)
}
