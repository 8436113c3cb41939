//! A cursor over the generic document that knows its own path, so every
//! validation error can say exactly which field is wrong.

use serde_json::{Map, Value};

use super::error::{BootstrapError, FieldPath};

/// A value in the document and the path that leads to it.
#[derive(Debug, Clone)]
pub(crate) struct At<'a> {
    pub(crate) value: &'a Value,
    pub(crate) path: FieldPath,
}

pub(crate) type Result<T> = std::result::Result<T, BootstrapError>;

/// How error messages name a JSON type.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl<'a> At<'a> {
    /// The whole document.
    pub(crate) fn root(value: &'a Value) -> Self {
        At {
            value,
            path: FieldPath::default(),
        }
    }

    /// An error about this value.
    pub(crate) fn error(&self, problem: impl Into<String>) -> BootstrapError {
        BootstrapError::field(&self.path, problem)
    }

    /// An error about the absent field `key` of this object.
    pub(crate) fn missing(&self, key: &str, expected: &str) -> BootstrapError {
        BootstrapError::field(self.path.key(key), format!("required: expected {expected}"))
    }

    fn wrong_type(&self, expected: &str) -> BootstrapError {
        self.error(format!("expected {expected}, found {}", kind(self.value)))
    }

    /// This value as an object.
    pub(crate) fn object(&self) -> Result<&'a Map<String, Value>> {
        self.value
            .as_object()
            .ok_or_else(|| self.wrong_type("an object"))
    }

    /// The field `key` of this object; an absent or `null` field is `None`.
    pub(crate) fn get(&self, key: &str) -> Result<Option<At<'a>>> {
        Ok(self
            .object()?
            .get(key)
            .filter(|v| !v.is_null())
            .map(|value| At {
                value,
                path: self.path.key(key),
            }))
    }

    /// The field `key` of this object, which must be present.
    pub(crate) fn require(&self, key: &str, expected: &str) -> Result<At<'a>> {
        self.get(key)?.ok_or_else(|| self.missing(key, expected))
    }

    /// This value as a string.
    pub(crate) fn str(&self) -> Result<&'a str> {
        self.value
            .as_str()
            .ok_or_else(|| self.wrong_type("a string"))
    }

    /// This value as a boolean (JSON `true`/`false`; a string such as
    /// `"true"` is a wrong type, as in gRPC's bootstrap loader).
    pub(crate) fn boolean(&self) -> Result<bool> {
        self.value
            .as_bool()
            .ok_or_else(|| self.wrong_type("a boolean"))
    }

    /// The boolean field `key`; an absent or `null` field is `false`.
    pub(crate) fn opt_bool(&self, key: &str) -> Result<bool> {
        Ok(self
            .get(key)?
            .map(|at| at.boolean())
            .transpose()?
            .unwrap_or(false))
    }

    /// This value as a non-empty string.
    pub(crate) fn non_empty_str(&self) -> Result<&'a str> {
        let s = self.str()?;
        if s.is_empty() {
            return Err(self.error("expected a non-empty string"));
        }
        Ok(s)
    }

    /// The string field `key`, if present.
    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<&'a str>> {
        self.get(key)?.map(|at| at.str()).transpose()
    }

    /// This value as an array, each element with its path.
    pub(crate) fn array(&self) -> Result<Vec<At<'a>>> {
        let items = self
            .value
            .as_array()
            .ok_or_else(|| self.wrong_type("an array"))?;
        Ok(items
            .iter()
            .enumerate()
            .map(|(i, value)| At {
                value,
                path: self.path.index(i),
            })
            .collect())
    }

    /// This object's entries, each value with its path, in key order.
    pub(crate) fn entries(&self) -> Result<Vec<(&'a str, At<'a>)>> {
        Ok(self
            .object()?
            .iter()
            .map(|(k, value)| {
                (
                    k.as_str(),
                    At {
                        value,
                        path: self.path.key(k),
                    },
                )
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_type_names_expected_and_found() {
        let doc = serde_json::json!({"node": {"id": 7}});
        let root = At::root(&doc);
        let err = root
            .get("node")
            .ok()
            .flatten()
            .map(|node| node.opt_str("id"));
        assert_eq!(
            err.and_then(|r| r.err()).map(|e| e.to_string()),
            Some("node.id: expected a string, found a number".to_owned())
        );
    }

    #[test]
    fn null_fields_count_as_absent() {
        let doc = serde_json::json!({"a": null});
        assert!(matches!(At::root(&doc).get("a"), Ok(None)));
        assert_eq!(
            At::root(&doc)
                .require("a", "a string")
                .map_err(|e| e.to_string())
                .err(),
            Some("a: required: expected a string".to_owned())
        );
    }
}
