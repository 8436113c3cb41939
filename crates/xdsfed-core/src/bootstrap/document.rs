//! Reading JSON or YAML text into one generic document.
//!
//! Both formats become a `serde_json::Value`, so that one validator with
//! exact field paths serves both. The conversion is done by our own
//! deserializer visitor rather than `serde_json::Value`'s, for one reason:
//! a JSON object with the same key twice would silently keep the last one,
//! and a bootstrap that names an authority twice is a mistake to report
//! (with its path), not to guess about.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::error::{BootstrapError, BootstrapErrorKind, FieldPath, Format};
use crate::text_limits::check_yaml_nesting;

/// Parses JSON text.
pub(crate) fn parse_json(text: &str) -> Result<Value, BootstrapError> {
    let duplicate = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let seed = ValueSeed {
        path: FieldPath::default(),
        duplicate: &duplicate,
    };
    let result = seed.deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    result.map_err(|e| {
        duplicate.take().unwrap_or_else(|| {
            BootstrapError::new(BootstrapErrorKind::Syntax {
                format: Format::Json,
                line: e.line(),
                column: e.column(),
                message: without_location(&e.to_string()),
            })
        })
    })
}

/// The deepest a YAML bootstrap may nest collections. A bootstrap nests
/// about 15 levels (an Envoy-style one's static clusters the most); the
/// YAML parser is quadratic in the depth, so the text is checked first.
const MAX_YAML_NESTING: usize = 64;

/// Parses YAML text (a single document).
pub(crate) fn parse_yaml(text: &str) -> Result<Value, BootstrapError> {
    check_yaml_nesting(text, MAX_YAML_NESTING).map_err(|too_deep| {
        BootstrapError::new(BootstrapErrorKind::Syntax {
            format: Format::Yaml,
            line: too_deep.line,
            column: too_deep.column,
            message: too_deep.to_string(),
        })
    })?;
    let duplicate = RefCell::new(None);
    let de = serde_norway::Deserializer::from_str(text);
    let seed = ValueSeed {
        path: FieldPath::default(),
        duplicate: &duplicate,
    };
    seed.deserialize(de).map_err(|e| {
        duplicate.take().unwrap_or_else(|| {
            let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
            BootstrapError::new(BootstrapErrorKind::Syntax {
                format: Format::Yaml,
                line,
                column,
                message: without_location(&e.to_string()),
            })
        })
    })
}

/// serde_json and serde_norway append " at line L column C"; the error
/// already carries both as fields.
fn without_location(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message.get(..i).unwrap_or(message).to_owned(),
        None => message.to_owned(),
    }
}

/// Deserializes any value into a `serde_json::Value`, refusing duplicate
/// keys. A refusal is recorded in `duplicate` with its path, because a serde
/// error can only carry a message.
struct ValueSeed<'a> {
    path: FieldPath,
    duplicate: &'a RefCell<Option<BootstrapError>>,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-compatible value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom(format!("{}: {v} is not a finite number", self.path)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let seed = ValueSeed {
                path: self.path.index(items.len()),
                duplicate: self.duplicate,
            };
            match seq.next_element_seed(seed)? {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = self.path.key(&key);
            if object.contains_key(&key) {
                let problem = "duplicate key: the same key appears twice in one object";
                *self.duplicate.borrow_mut() = Some(BootstrapError::field(&path, problem));
                return Err(de::Error::custom(format!("{path}: {problem}")));
            }
            let value = map.next_value_seed(ValueSeed {
                path,
                duplicate: self.duplicate,
            })?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_duplicate_key_is_a_field_error_with_its_path() {
        let err = parse_json(r#"{"authorities": {"a": {}, "b": {}, "a": {}}}"#);
        assert_eq!(
            err.as_ref().err().and_then(|e| e.field_path()),
            Some("authorities.a")
        );
    }

    #[test]
    fn yaml_duplicate_key_is_a_field_error_with_its_path() {
        let err = parse_yaml("authorities:\n  \"x.y\": {}\n  \"x.y\": {}\n");
        assert_eq!(
            err.as_ref().err().and_then(|e| e.field_path()),
            Some("authorities.\"x.y\"")
        );
    }

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let err = parse_json("{\n  \"a\": ,\n}").err();
        assert!(
            matches!(
                err.as_ref().map(BootstrapError::kind),
                Some(BootstrapErrorKind::Syntax {
                    format: Format::Json,
                    line: 2,
                    ..
                })
            ),
            "{err:?}"
        );
        let err = parse_yaml("a: [1, 2\nb: 3").err();
        assert!(
            matches!(
                err.as_ref().map(BootstrapError::kind),
                Some(BootstrapErrorKind::Syntax {
                    format: Format::Yaml,
                    ..
                })
            ),
            "{err:?}"
        );
    }

    #[test]
    fn json_trailing_garbage_is_refused() {
        assert!(parse_json("{} {}").is_err());
    }

    /// A YAML bootstrap nested deeper than the nesting limit (64) is
    /// refused before the parser sees it (the parser is quadratic in the
    /// nesting depth: a 200 KB file took 21 s), the error naming the limit
    /// and the line.
    #[test]
    fn deeply_nested_yaml_is_refused_by_the_nesting_limit() {
        let flow = format!("node:\n  id: {}", "[".repeat(200_000));
        let block = format!("node:\n  id: {}", "- ".repeat(100_000));
        for text in [flow, block] {
            let err = parse_yaml(&text).err();
            match err.as_ref().map(BootstrapError::kind) {
                Some(BootstrapErrorKind::Syntax {
                    format: Format::Yaml,
                    line: 2,
                    message,
                    ..
                }) => assert!(
                    message.contains("nested deeper than 64 levels")
                        && message.contains("nesting limit"),
                    "{message}"
                ),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn yaml_and_json_give_the_same_document() {
        let json = parse_json(r#"{"a": [1, "x", true, null, {"b": 2.5}]}"#);
        let yaml = parse_yaml("a:\n  - 1\n  - x\n  - true\n  - null\n  - b: 2.5\n");
        assert_eq!(json, yaml);
    }
}
