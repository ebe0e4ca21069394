//! The tools' input schemas as every MCP client takes them, and the arguments as
//! clients send them.
//!
//! schemars writes what JSON Schema allows; clients take less. Ajv (draft-07, strict)
//! throws on `$schema` of 2020-12 and on unknown `format`s; Gemini rejects `$ref`,
//! `anyOf`, type arrays and `additionalProperties`; OpenAI rejects an object schema
//! without `properties`; Anthropic's strict mode rejects `minimum` on integers; MCP
//! Inspector 0.15 sends every number and boolean as a string when a property's type
//! is an array. So each schema is made flat: one `type` per property, optional
//! properties are simply not `required`, enums are `enum`s of strings, and ranges are
//! said in descriptions. The server still refuses unknown arguments (serde), naming
//! them.
//!
//! Clients also send what their schema language makes of a number: Python writes
//! `30.0`, a form field `"30"`, a checkbox `"true"`. [`coerce`] takes those as the
//! integers, numbers and booleans the schema says.

use rmcp::model::JsonObject;
use serde_json::{Map, Value};

/// Keys no listed client needs and at least one rejects.
const DROPPED_KEYS: &[&str] = &[
    "$schema",
    "$defs",
    "definitions",
    "title",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "additionalProperties",
    "default",
];

/// The flat input schema of `T`'s arguments.
pub fn flat_schema<T: rmcp::schemars::JsonSchema + 'static>() -> JsonObject {
    let schema = rmcp::handler::server::common::schema_for_type::<T>();
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut flat = flatten(&Value::Object((*schema).clone()), &defs);
    let object = flat
        .as_object_mut()
        .expect("a tool's arguments are an object");
    object.remove("description");
    object
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    object.insert("type".to_owned(), Value::String("object".to_owned()));
    object.clone()
}

/// `value` with references inlined, nullable unions reduced to their one type, and
/// the dropped keys gone.
fn flatten(value: &Value, defs: &Map<String, Value>) -> Value {
    let Value::Object(object) = value else {
        return value.clone();
    };
    let mut out = Map::new();
    // `{"$ref": "#/$defs/X"}`, or `{"anyOf": [{"$ref": ...} | {...}, {"type": "null"}]}`:
    // the referenced or only non-null schema, with this one's description.
    let inner = object
        .get("$ref")
        .and_then(|r| resolve(r, defs))
        .or_else(|| {
            let variants = object.get("anyOf").or_else(|| object.get("oneOf"))?;
            let non_null: Vec<&Value> = variants
                .as_array()?
                .iter()
                .filter(|v| v.get("type").and_then(Value::as_str) != Some("null"))
                .collect();
            match non_null.as_slice() {
                [only] => Some(match only.get("$ref") {
                    Some(reference) => resolve(reference, defs)?,
                    None => (*only).clone(),
                }),
                _ => None,
            }
        });
    if let Some(inner) = inner {
        if let Value::Object(inner) = flatten(&inner, defs) {
            out.extend(inner);
        }
        if let Some(description) = object.get("description") {
            out.insert("description".to_owned(), description.clone());
        }
        return Value::Object(out);
    }
    for (key, item) in object {
        if DROPPED_KEYS.contains(&key.as_str()) || key == "$ref" {
            continue;
        }
        let item = match key.as_str() {
            // `["integer", "null"]`: optional is not being `required`.
            "type" => match item {
                Value::Array(types) => {
                    let mut non_null = types.iter().filter(|t| t.as_str() != Some("null"));
                    match (non_null.next(), non_null.next()) {
                        (Some(only), None) => only.clone(),
                        _ => item.clone(),
                    }
                }
                _ => item.clone(),
            },
            // Null is no value a client needs to send.
            "enum" => match item {
                Value::Array(values) => {
                    Value::Array(values.iter().filter(|v| !v.is_null()).cloned().collect())
                }
                _ => item.clone(),
            },
            "properties" => match item {
                Value::Object(properties) => Value::Object(
                    properties
                        .iter()
                        .map(|(name, schema)| (name.clone(), flatten(schema, defs)))
                        .collect(),
                ),
                _ => item.clone(),
            },
            _ => flatten(item, defs),
        };
        out.insert(key.clone(), item);
    }
    Value::Object(out)
}

/// The schema `#/$defs/Name` names.
fn resolve(reference: &Value, defs: &Map<String, Value>) -> Option<Value> {
    let name = reference.as_str()?.strip_prefix("#/$defs/")?;
    defs.get(name).cloned()
}

/// Takes each argument as the type its property's schema says, when a client sent it
/// in another form that means the same: a whole-number float (`30.0`) or a numeric
/// string (`"30"`) for an integer, a numeric string for a number, `"true"`/`"false"`
/// for a boolean. Anything else is left for serde to refuse, naming the argument.
pub fn coerce(arguments: &mut Map<String, Value>, schema: &JsonObject) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, value) in arguments.iter_mut() {
        let kind = properties
            .get(name)
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str);
        let taken = match (kind, &*value) {
            (Some("integer"), Value::Number(n)) if !n.is_i64() && !n.is_u64() => {
                n.as_f64().and_then(whole)
            }
            (Some("integer"), Value::String(text)) => {
                let text = text.trim();
                text.parse::<u64>()
                    .map(Value::from)
                    .or_else(|_| text.parse::<i64>().map(Value::from))
                    .ok()
                    .or_else(|| text.parse::<f64>().ok().and_then(whole))
            }
            (Some("number"), Value::String(text)) => text
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|n| n.is_finite())
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number),
            (Some("boolean"), Value::String(text)) => match text.trim() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            _ => None,
        };
        if let Some(taken) = taken {
            *value = taken;
        }
    }
}

/// `30.0` as the integer 30; `None` for a number with a fraction or out of range.
fn whole(n: f64) -> Option<Value> {
    if !n.is_finite() || n.fract() != 0.0 || n.abs() > 9_007_199_254_740_992.0 {
        return None;
    }
    Some(if n >= 0.0 {
        Value::from(n as u64)
    } else {
        Value::from(n as i64)
    })
}

/// Where a schema breaks the flat rules, as sentences; empty when it keeps them.
#[cfg(test)]
pub fn flat_rule_breaks(schema: &JsonObject) -> Vec<String> {
    let mut breaks = Vec::new();
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        breaks.push("the schema is not of type object".to_owned());
    }
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        breaks.push("no `properties` (an empty object is needed)".to_owned());
        return breaks;
    };
    walk(&Value::Object(schema.clone()), "", &mut breaks);
    for (name, property) in properties {
        let plain = |kind: Option<&Value>| {
            kind.and_then(Value::as_str)
                .is_some_and(|kind| ["string", "integer", "number", "boolean"].contains(&kind))
        };
        match property.get("type") {
            kind if plain(kind) => {}
            // A list of one plain type (`keys` of bash_send): every listed client takes it.
            Some(Value::String(kind))
                if kind == "array"
                    && plain(property.get("items").and_then(|items| items.get("type"))) => {}
            other => breaks.push(format!("`{name}` has type {other:?}, not one plain type")),
        }
        if property
            .get("description")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            breaks.push(format!("`{name}` is not described"));
        }
        if let Some(values) = property.get("enum") {
            let strings = values
                .as_array()
                .is_some_and(|v| !v.is_empty() && v.iter().all(Value::is_string));
            if !strings || property.get("type").and_then(Value::as_str) != Some("string") {
                breaks.push(format!("`{name}`'s enum is not a list of strings"));
            }
        }
    }
    if let Some(required) = schema.get("required") {
        let known = required.as_array().is_some_and(|names| {
            names
                .iter()
                .all(|n| n.as_str().is_some_and(|n| properties.contains_key(n)))
        });
        if !known {
            breaks.push("`required` names something that is not a property".to_owned());
        }
    }
    breaks
}

/// Every key anywhere in the schema that a listed client rejects.
#[cfg(test)]
fn walk(value: &Value, at: &str, breaks: &mut Vec<String>) {
    match value {
        Value::Object(object) => {
            for (key, item) in object {
                let here = format!("{at}/{key}");
                let rejected = DROPPED_KEYS.contains(&key.as_str())
                    || ["$ref", "anyOf", "oneOf", "allOf", "not", "nullable"]
                        .contains(&key.as_str());
                if rejected {
                    breaks.push(format!("{here} is there"));
                }
                if key == "type" && !item.is_string() {
                    breaks.push(format!("{here} is not one type"));
                }
                // Property names are no keywords.
                if key != "properties" || !item.is_object() {
                    walk(item, &here, breaks);
                } else if let Value::Object(properties) = item {
                    for (name, schema) in properties {
                        walk(schema, &format!("{here}/{name}"), breaks);
                    }
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                walk(item, at, breaks);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use rmcp::schemars::JsonSchema;
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize, JsonSchema)]
    #[schemars(crate = "rmcp::schemars")]
    #[serde(rename_all = "snake_case")]
    enum Color {
        Red,
        Blue,
    }

    /// Arguments.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[schemars(crate = "rmcp::schemars")]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Example {
        /// A name.
        name: String,
        /// A count.
        count: Option<u32>,
        /// A share.
        share: Option<f64>,
        /// A switch.
        on: Option<bool>,
        /// A color.
        color: Option<Color>,
    }

    /// None.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[schemars(crate = "rmcp::schemars")]
    struct Nothing {}

    #[test]
    fn schemas_come_out_flat() {
        let schema = flat_schema::<Example>();
        assert_eq!(
            flat_rule_breaks(&schema),
            Vec::<String>::new(),
            "{schema:?}"
        );
        assert_eq!(
            Value::Object(schema),
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "A name."},
                    "count": {"type": "integer", "description": "A count."},
                    "share": {"type": "number", "description": "A share."},
                    "on": {"type": "boolean", "description": "A switch."},
                    "color": {"type": "string", "enum": ["red", "blue"], "description": "A color."},
                },
                "required": ["name"],
            })
        );
        let empty = flat_schema::<Nothing>();
        assert_eq!(
            Value::Object(empty),
            json!({"type": "object", "properties": {}})
        );
    }

    #[test]
    fn schemars_own_output_breaks_the_rules() {
        let raw = rmcp::handler::server::common::schema_for_type::<Example>();
        let breaks = flat_rule_breaks(&raw);
        for expected in ["/$schema is there", "/$defs is there", "is not one type"] {
            assert!(
                breaks.iter().any(|b| b.contains(expected)),
                "{expected}: {breaks:?}"
            );
        }
    }

    #[test]
    fn arguments_come_in_the_forms_clients_write() {
        let schema = flat_schema::<Example>();
        let mut arguments = json!({
            "name": "x", "count": 30.0, "share": "0.5", "on": "true"
        })
        .as_object()
        .unwrap()
        .clone();
        coerce(&mut arguments, &schema);
        let example: Example = serde_json::from_value(Value::Object(arguments)).unwrap();
        assert_eq!(
            (example.count, example.share, example.on),
            (Some(30), Some(0.5), Some(true))
        );
        for (count, taken) in [
            (json!("12"), json!(12)),
            (json!(" 7 "), json!(7)),
            (json!("3.0"), json!(3)),
            (json!(2.5), json!(2.5)),
            (json!("soon"), json!("soon")),
            (json!(-1.0), json!(-1)),
        ] {
            let mut arguments = json!({"count": count}).as_object().unwrap().clone();
            coerce(&mut arguments, &schema);
            assert_eq!(arguments["count"], taken);
        }
    }
}
