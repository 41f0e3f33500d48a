//! The MCP server (rmcp): read-only tools, model resources and the `write_sql` prompt, all
//! answered by asking the read API through a [`Reader`] as the caller. The read API's RBAC is
//! therefore the agent's: a model the caller may not get is a 404 or absent from a list here.

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    PaginatedRequestParams, Prompt, PromptArgument, PromptMessage, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate, Role,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use serde_json::Value;

use super::shape::{self, *};
use crate::client::Query;

/// Asks the read API as the caller: the kubeconfig's user (stdio) or the HTTP caller's token.
pub trait Reader: Send + Sync + 'static {
    /// `(status, body)` of one read-API question in namespace `ns`; `request` is the HTTP
    /// request that carried the MCP request (HTTP transport only): its `Authorization` header
    /// and its connection's peer are the caller's.
    fn ask<'a>(
        &'a self,
        request: Option<&'a hyper::http::request::Parts>,
        ns: &'a str,
        query: Query,
    ) -> BoxFuture<'a, anyhow::Result<(u16, Value)>>;
    /// The namespace whose models `resources/list` lists (the kubeconfig context's).
    fn default_namespace(&self) -> Option<String>;
}

/// The HTTP request carrying this MCP request (none on stdio).
fn http_request(ctx: &RequestContext<RoleServer>) -> Option<&hyper::http::request::Parts> {
    ctx.extensions.get::<hyper::http::request::Parts>()
}

/// `?namespace=` of the HTTP endpoint's URL (`/mcp?namespace=team-a`), for `resources/list`.
fn url_namespace(ctx: &RequestContext<RoleServer>) -> Option<String> {
    let query = ctx
        .extensions
        .get::<hyper::http::request::Parts>()?
        .uri
        .query()?;
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("namespace="))
        .filter(|ns| {
            !ns.is_empty()
                && ns
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        })
        .map(str::to_string)
}

const INSTRUCTIONS: &str = "semops governs semantic models (Apache Ossie) bound to real tables. \
Every metric has a stable id that survives revisions and is never reused (a rename mints a new \
id and retires the old one): cite ids, and resolve an id you kept with explain_metric. Lists are \
sorted and bounded (500 entries; `truncated` says so); lineage is never cut: past max_nodes it is \
refused with the counts. You only see models your Kubernetes identity may get.";

#[derive(Clone)]
pub struct SemopsMcp {
    reader: Arc<dyn Reader>,
    tool_router: ToolRouter<Self>,
}

/// A tool's failure as the agent reads it (an error result, not a protocol error).
fn failure(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text.into())])
}

/// The structured answer, or a refusal when it is past the byte bound.
fn answer<T: serde::Serialize>(out: &T) -> CallToolResult {
    match shape::bounded(out) {
        Ok(value) => CallToolResult::structured(value),
        Err(refusal) => failure(refusal),
    }
}

impl SemopsMcp {
    pub fn new(reader: Arc<dyn Reader>) -> Self {
        Self {
            reader,
            tool_router: Self::tool_router(),
        }
    }

    /// The 200 body, or the tool failure naming the API's status, type and message.
    async fn read(
        &self,
        ctx: &RequestContext<RoleServer>,
        ns: &str,
        query: Query,
    ) -> Result<Value, CallToolResult> {
        match self.reader.ask(http_request(ctx), ns, query).await {
            Ok((200, body)) => Ok(body),
            Ok((status, body)) => {
                let field = |k: &str| body.get(k).and_then(Value::as_str).unwrap_or("");
                // The envelope's type, or a Kubernetes Status's reason (aggregated API).
                let kind = match field("type") {
                    "" => field("reason"),
                    t => t,
                };
                Err(failure(format!(
                    "{status} {kind}: {}",
                    match field("message") {
                        "" => "unexpected answer",
                        m => m,
                    }
                )))
            }
            Err(e) => Err(failure(format!("cannot ask the semops read API: {e:#}"))),
        }
    }

    async fn model_body(
        &self,
        ctx: &RequestContext<RoleServer>,
        input: &ModelInput,
    ) -> Result<Value, CallToolResult> {
        let body = self
            .read(
                ctx,
                &input.namespace,
                Query::Models {
                    catalog: input.catalog.clone(),
                    schema: input.schema.clone(),
                    name: Some(input.name.clone()),
                },
            )
            .await?;
        match input.revision {
            None => Ok(body),
            Some(revision) => {
                self.read(
                    ctx,
                    &input.namespace,
                    Query::ModelRevision {
                        catalog: input.catalog.clone(),
                        schema: input.schema.clone(),
                        name: input.name.clone(),
                        revision,
                    },
                )
                .await
            }
        }
    }
}

#[tool_router]
impl SemopsMcp {
    #[tool(
        description = "Semantic models of a namespace you may read, optionally of one catalog or schema: catalog, schema, name and the resource URI of each (sorted; at most 500, `truncated` says when more matched).",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<ModelList>()
    )]
    async fn list_semantic_models(
        &self,
        Parameters(input): Parameters<ListModelsInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = Query::NamespaceModels {
            catalog: input.catalog,
            schema: input.schema,
        };
        Ok(match self.read(&ctx, &input.namespace, query).await {
            Ok(body) => answer(&shape::model_list(&body, MAX_LIST)),
            Err(f) => f,
        })
    }

    #[tool(
        description = "One semantic model as accepted: definition (datasets, fields, relationships, metrics with expressions per dialect), revision, metric ids, conditions and source drift; `revision` reads a kept earlier revision.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<ModelOut>()
    )]
    async fn get_semantic_model(
        &self,
        Parameters(input): Parameters<ModelInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.model_body(&ctx, &input).await {
            Ok(body) => answer(&ModelOut {
                uri: model_uri(&input.namespace, &input.catalog, &input.schema, &input.name),
                model: body["model"].clone(),
            }),
            Err(f) => f,
        })
    }

    #[tool(
        description = "Metrics of the semantic models of a schema with their stable ids (ids survive revisions and renames declared with renamedFrom; an undeclared rename mints a new one). A metric with `deprecated` set must not be cited: use the replacement it names. `search` filters by name, description or model; `details` adds each definition. Sorted by model then name; at most 500.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<MetricList>()
    )]
    async fn list_metrics(
        &self,
        Parameters(input): Parameters<ListMetricsInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = Query::Metrics {
            catalog: input.catalog,
            schema: input.schema,
            details: true,
        };
        Ok(match self.read(&ctx, &input.namespace, query).await {
            Ok(body) => answer(&shape::metric_list(
                &body,
                input.search.as_deref(),
                input.details,
                MAX_LIST,
            )),
            Err(f) => f,
        })
    }

    #[tool(
        description = "Which semantic-model datasets use a table or view (`catalog.schema.object`), checked live against the catalog: the answer to 'who uses this table?'.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<DatasetList>()
    )]
    async fn find_datasets_by_source(
        &self,
        Parameters(input): Parameters<FindDatasetsInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = Query::Lookup {
            object_type: input.object_type.as_str().into(),
            full_name: input.full_name,
        };
        Ok(match self.read(&ctx, &input.namespace, query).await {
            Ok(body) => answer(&DatasetList {
                datasets: body["identifiers"].clone(),
            }),
            Err(f) => f,
        })
    }

    #[tool(
        description = "A live report-only scan of a catalog: registrations whose objects were dropped (Stale), renamed or removed. Changes nothing.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<StaleOut>()
    )]
    async fn get_stale_report(
        &self,
        Parameters(input): Parameters<StaleInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = Query::Stale {
            catalog: input.catalog,
        };
        Ok(match self.read(&ctx, &input.namespace, query).await {
            Ok(mut body) => {
                if let Some(o) = body.as_object_mut() {
                    o.remove("code");
                }
                answer(&StaleOut { report: body })
            }
            Err(f) => f,
        })
    }

    #[tool(
        description = "The lineage graph of a model or of a table or view: whole (`truncated: false`) or refused with its node and edge counts when it has more than `max_nodes` nodes (default 500) — never a silently partial graph.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<LineageOut>()
    )]
    async fn get_lineage(
        &self,
        Parameters(input): Parameters<LineageInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = match input.root_type {
            LineageRootType::Model => {
                let parts = crate::ossie::source_ref::split_segments(&input.root)
                    .ok()
                    .and_then(|p| <[String; 3]>::try_from(p).ok());
                let Some([catalog, schema, name]) = parts else {
                    return Ok(failure(format!(
                        "root `{}` is not catalog.schema.model (quote a part containing a dot with backticks)",
                        input.root
                    )));
                };
                Query::ModelLineage {
                    catalog,
                    schema,
                    name,
                }
            }
            LineageRootType::Table | LineageRootType::View => Query::SourceLineage {
                object_type: if input.root_type == LineageRootType::Table {
                    "table"
                } else {
                    "view"
                }
                .into(),
                full_name: input.root,
            },
        };
        Ok(match self.read(&ctx, &input.namespace, query).await {
            Ok(graph) => match shape::lineage(graph, input.max_nodes) {
                Ok(out) => answer(&out),
                Err(refused) => failure(refused.to_string()),
            },
            Err(f) => f,
        })
    }

    #[tool(
        description = "Compiles a metric question (metrics, dimensions with an optional time grain, structured filters, order, limit) to SQL for the model's catalog, from the model's accepted revision: joins only along declared relationships, each metric aggregated at its own dataset's grain (no fan-out double counting), every value a bound parameter. semops never runs it. The answer names the metric ids and the revision: cite them with any number computed from the SQL.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<CompileOut>()
    )]
    async fn compile_metric_query(
        &self,
        Parameters(input): Parameters<CompileInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = Query::Sql {
            catalog: input.catalog.clone(),
            schema: input.schema.clone(),
            name: input.model.clone(),
            question: input.question().to_query(),
        };
        Ok(match self.read(&ctx, &input.namespace, query).await {
            Ok(body) => {
                let ids: Vec<String> = body["metrics"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|m| {
                        format!(
                            "{} = {}",
                            m["name"].as_str().unwrap_or(""),
                            m["id"].as_str().unwrap_or("")
                        )
                    })
                    .collect();
                answer(&CompileOut {
                    cite: format!(
                        "revision {} of {}.{}.{}; metric ids: {}",
                        body["revision"],
                        input.catalog,
                        input.schema,
                        input.model,
                        ids.join(", ")
                    ),
                    compiled: body,
                })
            }
            Err(f) => f,
        })
    }

    #[tool(
        description = "A metric by its stable id, also after it was retired (never reused): its model, current or last name, its former names (renames declared with renamedFrom keep the id), state, the new ids minted when it was retired, its expression per dialect, its deprecation (do not cite a deprecated metric; use its replacement) and its definition in each kept revision.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<ExplainOut>()
    )]
    async fn explain_metric(
        &self,
        Parameters(input): Parameters<ExplainMetricInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = Query::Metric { id: input.id };
        Ok(match self.read(&ctx, &input.namespace, query).await {
            Ok(body) => answer(&ExplainOut {
                metric: body["metric"].clone(),
            }),
            Err(f) => f,
        })
    }
}

const PROMPT: &str = "write_sql";

#[tool_handler(router = self.tool_router)]
impl ServerHandler for SemopsMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_prompts()
                .build(),
        )
        .with_server_info(Implementation::new("semops", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let Some(ns) = url_namespace(&ctx).or_else(|| self.reader.default_namespace()) else {
            return Ok(ListResourcesResult::with_all_items(vec![]));
        };
        let query = Query::NamespaceModels {
            catalog: None,
            schema: None,
        };
        let body = self.read(&ctx, &ns, query).await.map_err(|f| {
            ErrorData::internal_error(format!("cannot list models: {}", text_of(&f)), None)
        })?;
        let list = shape::model_list(&body, MAX_LIST);
        Ok(ListResourcesResult::with_all_items(
            list.models
                .into_iter()
                .map(|m| {
                    Resource::new(m.uri, format!("{}.{}.{}", m.catalog, m.schema, m.name))
                        .with_description("the accepted definition of a semantic model")
                        .with_mime_type("application/json")
                })
                .collect(),
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(
                "semops://{namespace}/{catalog}/{schema}/{model}",
                "semantic-model",
            )
            .with_description("the accepted definition of a semantic model (parts percent-encoded)")
            .with_mime_type("application/json"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let Some([namespace, catalog, schema, name]) = shape::parse_model_uri(&request.uri) else {
            return Err(ErrorData::invalid_params(
                format!(
                    "`{}` is not semops://{{namespace}}/{{catalog}}/{{schema}}/{{model}}",
                    request.uri
                ),
                None,
            ));
        };
        let input = ModelInput {
            namespace,
            catalog,
            schema,
            name,
            revision: None,
        };
        match self.model_body(&ctx, &input).await {
            Ok(body) => {
                let text = serde_json::to_string_pretty(&body["model"]).unwrap_or_default();
                Ok(ReadResourceResult::new(vec![
                    ResourceContents::text(text, request.uri).with_mime_type("application/json"),
                ])
                .into())
            }
            Err(f) => Err(ErrorData::resource_not_found(text_of(&f), None)),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let arg = |name: &str, description: &str, required: bool| {
            PromptArgument::new(name)
                .with_description(description)
                .with_required(required)
        };
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            PROMPT,
            Some(
                "How to write SQL from a semantic model: its datasets, relationships and metric expressions, with metric ids to cite",
            ),
            Some(vec![
                arg("namespace", "Kubernetes namespace", true),
                arg("catalog", "the model's catalog", true),
                arg("schema", "the model's schema", true),
                arg("model", "the model's name", true),
                arg(
                    "dialect",
                    "SQL dialect of the expressions to use (default ANSI_SQL)",
                    false,
                ),
                arg("question", "what the SQL should answer", false),
            ]),
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != PROMPT {
            return Err(ErrorData::invalid_params(
                format!("no prompt `{}` (there is `{PROMPT}`)", request.name),
                None,
            ));
        }
        let args = request.arguments.unwrap_or_default();
        let arg = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
        let required = |k: &str| {
            arg(k).ok_or_else(|| {
                ErrorData::invalid_params(format!("prompt {PROMPT} needs the argument `{k}`"), None)
            })
        };
        let input = ModelInput {
            namespace: required("namespace")?,
            catalog: required("catalog")?,
            schema: required("schema")?,
            name: required("model")?,
            revision: None,
        };
        let body = self
            .model_body(&ctx, &input)
            .await
            .map_err(|f| ErrorData::resource_not_found(text_of(&f), None))?;
        let dialect = arg("dialect").unwrap_or_else(|| "ANSI_SQL".into());
        let text = shape::sql_prompt(&body["model"], &dialect, arg("question").as_deref());
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
                .with_description(format!("SQL from the semantic model {}", input.name))
                .into(),
        )
    }
}

/// The text of a failure result.
fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join(" ")
}
