//! Schema fragments the derive macros cannot express: free-form `aiContext`, list-map keys.

use schemars::{Schema, SchemaGenerator, json_schema};

/// `aiContext` is a string or an object with any keys (Ossie `AIContext`). A structural schema
/// cannot say "one of two types" and CEL cannot type an untyped value, so the API server keeps it
/// verbatim and the controller's model-local check rejects anything but a string or an object.
pub fn ai_context(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "Context for AI tools: a string, or an object with `instructions`, `synonyms`, `examples` and any other keys.",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// `properties`-style string maps.
pub fn string_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {"type": "string"}
    })
}
