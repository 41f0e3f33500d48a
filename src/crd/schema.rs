//! Schema fragments the derive macros cannot express: free-form `aiContext`, list-map keys.

use schemars::{Schema, SchemaGenerator, json_schema};

/// `aiContext` is a string or an object with any keys (Ossie `AIContext`). A structural schema
/// cannot say "one of two types", so the API server keeps it verbatim and a CEL rule checks the type.
pub fn ai_context(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "Context for AI tools: a string, or an object with `instructions`, `synonyms`, `examples` and any other keys.",
        "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-validations": [{
            "rule": "type(self) == string || type(self) == map",
            "message": "aiContext must be a string or an object"
        }]
    })
}

/// `properties`-style string maps.
pub fn string_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {"type": "string"}
    })
}
