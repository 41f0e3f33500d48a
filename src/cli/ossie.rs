//! `semops ossie import|export`: Apache Ossie documents (0.1.0, 0.1.1, 0.2.0.dev0; wrapped or
//! one model at the root; YAML or JSON) <-> SemanticModel manifests, lossless (docs/ossie.md).
//! Nothing is written unless every document was read.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Subcommand;

use crate::ossie::document::{Ordered, Shape, Target};
use crate::ossie::interchange::{ImportTarget, export, import};

/// Largest file either verb reads: a semantic model is a few hundred KiB at most, and the
/// parsed form of a huge document would cost many times its size.
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Formats `export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Yaml,
    Json,
}

#[derive(Subcommand)]
pub enum OssieCommand {
    /// Ossie documents (YAML or JSON, several per file) -> SemanticModel manifests on stdout.
    Import {
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
        /// Home Catalog of the imported models.
        #[arg(long)]
        catalog: String,
        /// Home schema of the imported models.
        #[arg(long)]
        schema: String,
        /// Catalog of dataset sources written without one (`schema.object` or `object`).
        #[arg(long)]
        source_catalog: Option<String>,
        /// Schema of dataset sources written as a bare `object`.
        #[arg(long)]
        source_schema: Option<String>,
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
    /// SemanticModel manifests (file or directory) -> Ossie documents.
    Export {
        #[arg(short = 'f', long = "filename")]
        path: PathBuf,
        /// The Ossie version and shape to write: `0.2` (one model per document, the current
        /// shape), `0.1.1` or `0.1.0` (all models in one `semantic_model` list).
        #[arg(long, default_value = "0.2", value_parser = parse_target)]
        ossie_version: Target,
        /// `wrapped` (a `semantic_model` list) or `root` (one model per document); default: the
        /// version's own shape (root for 0.2, wrapped for 0.1.x).
        #[arg(long, value_parser = parse_shape)]
        shape: Option<Shape>,
        #[arg(short = 'o', long, value_enum, default_value = "yaml")]
        output: Format,
        /// Writes one file per document into this directory (named after the model in the
        /// 0.2 shape) instead of printing them.
        #[arg(long)]
        out_dir: Option<PathBuf>,
    },
}

fn parse_shape(s: &str) -> Result<Shape, String> {
    Shape::parse(s).ok_or_else(|| format!("{s:?}: write wrapped or root"))
}

fn parse_target(s: &str) -> Result<Target, String> {
    Target::parse(s).ok_or_else(|| format!("{s:?}: write 0.2, 0.1.1 or 0.1.0"))
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

/// A file's text, refused past [`MAX_FILE_BYTES`].
fn read_bounded(file: &Path) -> anyhow::Result<String> {
    let size = std::fs::metadata(file)
        .with_context(|| format!("reading {}", file.display()))?
        .len();
    if size > MAX_FILE_BYTES {
        anyhow::bail!(
            "{} is {} MiB; semops reads files of at most {} MiB (split the models into several files)",
            file.display(),
            size / (1024 * 1024),
            MAX_FILE_BYTES / (1024 * 1024)
        );
    }
    std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))
}

/// Writes to stdout; a reader that went away (`| head`) is not an error.
fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other.context("writing to stdout")?),
    }
}

fn run(cmd: OssieCommand) -> anyhow::Result<()> {
    match cmd {
        OssieCommand::Import {
            file,
            catalog,
            schema,
            source_catalog,
            source_schema,
            namespace,
        } => {
            let text = read_bounded(&file)?;
            let target = ImportTarget {
                namespace,
                catalog,
                schema,
                source_catalog,
                source_schema,
            };
            let mut models = Vec::new();
            for (line, doc) in super::validate::split_documents(&text) {
                let value: serde_json::Value = serde_saphyr::from_str(&doc).with_context(|| {
                    format!("{}:{line}: not valid YAML or JSON", file.display())
                })?;
                models.extend(
                    import(&value, &target)
                        .with_context(|| format!("{}:{line}", file.display()))?,
                );
            }
            // Two documents naming one model would become one object twice.
            let mut names = std::collections::BTreeSet::new();
            for m in &models {
                if !names.insert(m.metadata.name.clone()) {
                    anyhow::bail!(
                        "{}: two models become the object {:?}; rename one",
                        file.display(),
                        m.metadata.name.as_deref().unwrap_or_default()
                    );
                }
            }
            let mut out = String::new();
            for m in &models {
                out.push_str("---\n");
                out.push_str(&serde_saphyr::to_string(m)?);
            }
            emit(&out)?;
            eprintln!("imported {} model(s) from {}", models.len(), file.display());
        }
        OssieCommand::Export {
            path,
            ossie_version,
            shape,
            output,
            out_dir,
        } => {
            let ossie_version = shape.map_or(ossie_version, |s| ossie_version.with_shape(s));
            let mut models = Vec::new();
            for file in super::validate::collect_files(&path)? {
                let text = read_bounded(&file)?;
                for (line, doc) in super::validate::split_documents(&text) {
                    let value: serde_json::Value = serde_saphyr::from_str(&doc)
                        .with_context(|| format!("{}:{line}: not valid YAML", file.display()))?;
                    if value.get("kind").and_then(|k| k.as_str()) == Some("SemanticModel") {
                        let m: crate::crd::SemanticModel = serde_json::from_value(value)
                            .with_context(|| {
                                format!("{}:{line}: a SemanticModel", file.display())
                            })?;
                        models.push(m);
                    }
                }
            }
            let exported = export(&models, Some(ossie_version))?;
            for w in &exported.warnings {
                eprintln!("warning: {w}");
            }
            let render = |doc: &serde_json::Value| -> anyhow::Result<String> {
                Ok(match output {
                    Format::Yaml => serde_saphyr::to_string(&Ordered(doc))?,
                    Format::Json => serde_json::to_string_pretty(&Ordered(doc))? + "\n",
                })
            };
            match out_dir {
                Some(dir) => {
                    // Every file is rendered before the first is written.
                    let ext = match output {
                        Format::Yaml => "yaml",
                        Format::Json => "json",
                    };
                    let mut files = Vec::new();
                    for doc in &exported.documents {
                        let stem = doc
                            .get("name")
                            .and_then(|n| n.as_str())
                            .map(crate::ossie::interchange::object_name)
                            .unwrap_or_else(|| "semantic-models".into());
                        files.push((dir.join(format!("{stem}.ossie.{ext}")), render(doc)?));
                    }
                    std::fs::create_dir_all(&dir)
                        .with_context(|| format!("creating {}", dir.display()))?;
                    for (file, text) in &files {
                        std::fs::write(file, text)
                            .with_context(|| format!("writing {}", file.display()))?;
                        eprintln!("wrote {}", file.display());
                    }
                }
                None if output == Format::Json && exported.documents.len() > 1 => anyhow::bail!(
                    "{} documents: JSON holds one per file; pass --out-dir, or -o yaml",
                    exported.documents.len()
                ),
                None => {
                    let mut out = String::new();
                    for (i, doc) in exported.documents.iter().enumerate() {
                        if i > 0 && output == Format::Yaml {
                            out.push_str("---\n");
                        }
                        out.push_str(&render(doc)?);
                    }
                    emit(&out)?;
                }
            }
            eprintln!(
                "exported {} model(s) as Ossie {}",
                models.len(),
                ossie_version.version
            );
        }
    }
    Ok(())
}
