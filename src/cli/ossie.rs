//! `semops ossie import|export`: Apache Ossie YAML <-> SemanticModel manifests, lossless.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Subcommand;
use serde::Deserialize as _;

use crate::ossie::interchange::{ImportTarget, export, import};

#[derive(Subcommand)]
pub enum OssieCommand {
    /// Ossie YAML (semantic_model[]) -> SemanticModel manifests on stdout, one per model.
    Import {
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
        /// Home Catalog of the imported models.
        #[arg(long)]
        catalog: String,
        /// Home schema of the imported models.
        #[arg(long)]
        schema: String,
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
    /// SemanticModel manifests (file or directory) -> one Ossie YAML document on stdout.
    Export {
        #[arg(short = 'f', long = "filename")]
        path: PathBuf,
    },
}

pub fn main(cmd: OssieCommand) -> ExitCode {
    match run(cmd) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cmd: OssieCommand) -> anyhow::Result<()> {
    match cmd {
        OssieCommand::Import {
            file,
            catalog,
            schema,
            namespace,
        } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let doc: serde_json::Value = serde_yaml::from_str(&text)
                .with_context(|| format!("{} is not YAML", file.display()))?;
            let models = import(
                &doc,
                &ImportTarget {
                    namespace,
                    catalog,
                    schema,
                },
            )
            .with_context(|| format!("importing {}", file.display()))?;
            for m in &models {
                print!("---\n{}", serde_yaml::to_string(m)?);
            }
            eprintln!("imported {} model(s) from {}", models.len(), file.display());
        }
        OssieCommand::Export { path } => {
            let mut models = Vec::new();
            for file in super::validate::collect_files(&path)? {
                let text = std::fs::read_to_string(&file)?;
                for doc in serde_yaml::Deserializer::from_str(&text) {
                    let value = serde_json::Value::deserialize(doc)?;
                    if value.get("kind").and_then(|k| k.as_str()) == Some("SemanticModel") {
                        let m: crate::crd::SemanticModel = serde_json::from_value(value)
                            .with_context(|| format!("a SemanticModel in {}", file.display()))?;
                        models.push(m);
                    }
                }
            }
            print!("{}", serde_yaml::to_string(&export(&models))?);
            eprintln!("exported {} model(s)", models.len());
        }
    }
    Ok(())
}
