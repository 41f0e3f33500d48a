//! The questions the read API answers, independent of the path family that carries them.

/// A table or a view (a CLI argument, and an MCP tool argument: `table` or `view`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SourceType {
    Table,
    View,
}

impl SourceType {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceType::Table => "table",
            SourceType::View => "view",
        }
    }
}

/// One question to the read API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Query {
    Lookup {
        object_type: String,
        full_name: String,
    },
    Metrics {
        catalog: String,
        schema: String,
        details: bool,
    },
    Models {
        catalog: String,
        schema: String,
        name: Option<String>,
    },
    ModelLineage {
        catalog: String,
        schema: String,
        name: String,
    },
    /// Every model of the namespace, optionally of one catalog or schema.
    NamespaceModels {
        catalog: Option<String>,
        schema: Option<String>,
    },
    /// One metric by its stable id.
    Metric {
        id: String,
    },
    /// A model as a kept earlier revision accepted it.
    ModelRevision {
        catalog: String,
        schema: String,
        name: String,
        revision: i64,
    },
    /// A model's kept revisions and the metric ids each added and retired.
    History {
        catalog: String,
        schema: String,
        name: String,
    },
    SourceLineage {
        object_type: String,
        full_name: String,
    },
    Stale {
        catalog: String,
    },
    /// A catalog's registrations with the state its check rounds recorded.
    Registrations {
        catalog: String,
    },
    /// What breaks if `columns` (or, when empty, the whole object) went away.
    Impact {
        object_type: String,
        full_name: String,
        columns: Vec<String>,
    },
    Reconcile {
        catalog: String,
        dry_run: bool,
    },
    /// A metric question compiled to SQL against a model; `question` is its URL form
    /// ([`crate::sql::Question::to_query`]).
    Sql {
        catalog: String,
        schema: String,
        name: String,
        question: String,
    },
}
