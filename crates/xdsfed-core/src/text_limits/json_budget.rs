//! A bound on what a JSON text costs to decode, checked in one pass before
//! the parser sees it.
//!
//! Decoded through the protobuf JSON mapping, a value can take hundreds of
//! times the bytes it is written in: every message is a map of its own
//! (about 800 bytes however empty), and inside a `google.protobuf.Struct`
//! even a `0` is a message. A resource's tree is built whole, encoded, and
//! dropped before the next resource's, so what has to be bounded is what
//! one resource holds. This scan counts, outside strings, the characters
//! that start or separate values (`{`, `[`, `,` and `:`: each at most one
//! value) inside each *element*: each value two levels down, that is each
//! element of a top-level array (for a `DiscoveryResponse`, each resource)
//! or field of a top-level object. It refuses the text when one element
//! holds more values than its budget, when a top-level array holds more
//! elements than the budget (each element outlives its tree: a resource is
//! kept, encoded, in a message of about 900 bytes however short its text),
//! when the whole text holds more values than the budget (the parse's time
//! is about proportional to them), and when it nests deeper than
//! serde_json's own limit: the parser never starts on any of these.
//!
//! ```text
//! {"version_info": "1", "resources": [ {…one element…}, {…another…} ]}
//!  depth 1                            depth 2: elements start here
//! ```

/// The deepest nesting accepted: serde_json's own recursion limit.
pub const MAX_JSON_DEPTH: usize = 128;

/// What a JSON text may hold: elements of its top-level collection,
/// values in one element, values in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonBudget {
    /// Elements in one top-level array (or fields in one top-level object).
    pub elements: usize,
    /// Values in one element.
    pub values_per_element: usize,
    /// Values in the whole text.
    pub values: usize,
}

/// Why a JSON text is refused before parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JsonOverBudget {
    /// Arrays and objects nested deeper than [`MAX_JSON_DEPTH`].
    #[error("nested deeper than {MAX_JSON_DEPTH} levels at byte {offset}")]
    TooDeep {
        /// Byte offset of the `[` or `{` one level too deep.
        offset: usize,
    },
    /// A top-level array holds more elements than the budget.
    #[error(
        "a top-level array holds more than {budget} elements by byte {offset}: \
         too many to decode (the decoding budget)"
    )]
    TooManyElements {
        /// The budget passed.
        budget: usize,
        /// Byte offset where the count went over.
        offset: usize,
    },
    /// One element of a top-level array holds more values than the budget.
    #[error(
        "element {index} of a top-level array holds more than {budget} values \
         (counting `{{`, `[`, `,` and `:` outside strings) by byte {offset}: \
         too large to decode (the decoding budget)"
    )]
    TooManyValuesInElement {
        /// The element's index in its array.
        index: usize,
        /// The budget passed.
        budget: usize,
        /// Byte offset where the count went over.
        offset: usize,
    },
    /// The whole text holds more values than the budget.
    #[error(
        "the text holds more than {budget} values (counting `{{`, `[`, `,` and `:` \
         outside strings) by byte {offset}: too many to decode (the decoding budget)"
    )]
    TooManyValues {
        /// The budget passed.
        budget: usize,
        /// Byte offset where the count went over.
        offset: usize,
    },
}

/// The scanner's position: how deep, which element, how many values.
#[derive(Debug)]
struct Scan {
    budget: JsonBudget,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// The index of the current element in its top-level array.
    index: usize,
    /// Values counted in that element.
    element_values: usize,
    /// Values counted in the whole text.
    values: usize,
}

/// Checks that `text` nests at most [`MAX_JSON_DEPTH`] deep and holds no
/// more than `budget` allows. Linear, and
/// allocates nothing. Text that is not JSON passes or fails as it may: the
/// parser reports it.
///
/// ```
/// use xdsfed_core::text_limits::{JsonBudget, check_json_budget};
///
/// let body = br#"{"resources": [{"a": [1, 2]}, {"b": {}}]}"#;
/// let budget = JsonBudget { elements: 2, values_per_element: 4, values: 100 };
/// assert!(check_json_budget(body, budget).is_ok());
/// assert!(check_json_budget(body, JsonBudget { values_per_element: 3, ..budget }).is_err());
/// assert!(check_json_budget(body, JsonBudget { elements: 1, ..budget }).is_err());
/// ```
pub fn check_json_budget(text: &[u8], budget: JsonBudget) -> Result<(), JsonOverBudget> {
    let mut scan = Scan {
        budget,
        depth: 0,
        in_string: false,
        escaped: false,
        index: 0,
        element_values: 0,
        values: 0,
    };
    for (offset, &byte) in text.iter().enumerate() {
        scan.byte(byte, offset)?;
    }
    Ok(())
}

impl Scan {
    fn byte(&mut self, byte: u8, offset: usize) -> Result<(), JsonOverBudget> {
        if self.in_string {
            match (self.escaped, byte) {
                (true, _) => self.escaped = false,
                (false, b'\\') => self.escaped = true,
                (false, b'"') => self.in_string = false,
                _ => {}
            }
            return Ok(());
        }
        match byte {
            b'"' => self.in_string = true,
            b'[' | b'{' => {
                if self.depth == MAX_JSON_DEPTH {
                    return Err(JsonOverBudget::TooDeep { offset });
                }
                self.depth += 1;
                self.count(offset)?;
            }
            b']' | b'}' => {
                self.depth = self.depth.saturating_sub(1);
                if self.depth < 2 {
                    // A top-level array (or object) closed: the next one
                    // starts counting its elements afresh.
                    self.index = 0;
                    self.element_values = 0;
                }
            }
            b',' | b':' => {
                self.count(offset)?;
                if byte == b',' && self.depth == 2 {
                    self.next_element(offset)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Moves on to the next element of a top-level array.
    fn next_element(&mut self, offset: usize) -> Result<(), JsonOverBudget> {
        self.index += 1;
        self.element_values = 0;
        let budget = self.budget.elements;
        if self.index >= budget {
            return Err(JsonOverBudget::TooManyElements { budget, offset });
        }
        Ok(())
    }

    /// Counts one value: in the text, and in the element it is inside of.
    fn count(&mut self, offset: usize) -> Result<(), JsonOverBudget> {
        self.values += 1;
        if self.values > self.budget.values {
            let budget = self.budget.values;
            return Err(JsonOverBudget::TooManyValues { budget, offset });
        }
        if self.depth < 3 {
            return Ok(());
        }
        self.element_values += 1;
        let budget = self.budget.values_per_element;
        if self.element_values > budget {
            return Err(JsonOverBudget::TooManyValuesInElement {
                index: self.index,
                budget,
                offset,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLENTY: JsonBudget = JsonBudget {
        elements: usize::MAX,
        values_per_element: usize::MAX,
        values: usize::MAX,
    };

    fn per_element(values_per_element: usize) -> JsonBudget {
        JsonBudget {
            values_per_element,
            ..PLENTY
        }
    }

    #[test]
    fn values_are_counted_per_element_of_a_top_level_array() {
        let body = br#"{"version_info": "1", "resources": [{"a": [1, 2]}, {"b": {}, "c": 3}]}"#;
        // First element: `{`, `:`, `[`, `,` = 4; second: `{`, `:`, `{`, `,`, `:` = 5.
        assert_eq!(check_json_budget(body, per_element(5)), Ok(()));
        assert!(matches!(
            check_json_budget(body, per_element(4)),
            Err(JsonOverBudget::TooManyValuesInElement {
                index: 1,
                budget: 4,
                ..
            })
        ));
    }

    #[test]
    fn many_small_elements_do_not_add_up_per_element() {
        let body = format!(
            r#"{{"resources": [{}]}}"#,
            vec![r#"{"a": 1}"#; 10_000].join(",")
        );
        assert_eq!(check_json_budget(body.as_bytes(), per_element(2)), Ok(()));
    }

    #[test]
    fn elements_of_a_top_level_array_are_bounded() {
        let body = format!(r#"{{"resources": [{}]}}"#, vec!["{}"; 100].join(","));
        let budget = |elements| JsonBudget { elements, ..PLENTY };
        assert_eq!(check_json_budget(body.as_bytes(), budget(100)), Ok(()));
        assert!(matches!(
            check_json_budget(body.as_bytes(), budget(99)),
            Err(JsonOverBudget::TooManyElements { budget: 99, .. })
        ));
    }

    #[test]
    fn values_of_the_whole_text_are_bounded() {
        let body = br#"{"a": [1, 2], "b": 3}"#;
        // `{`, `:`, `[`, `,`, `,`, `:` = 6.
        let budget = |values| JsonBudget { values, ..PLENTY };
        assert_eq!(check_json_budget(body, budget(6)), Ok(()));
        assert!(matches!(
            check_json_budget(body, budget(5)),
            Err(JsonOverBudget::TooManyValues { budget: 5, .. })
        ));
    }

    #[test]
    fn structural_characters_in_strings_do_not_count() {
        let body = br#"{"resources": [{"a": "[{,:}] \" [{,:}]", "b": "\\"}]}"#;
        // `{`, `:`, `,`, `:`: the strings hold nothing that counts.
        assert_eq!(check_json_budget(body, per_element(4)), Ok(()));
    }

    #[test]
    fn nesting_deeper_than_serde_json_allows_is_refused() {
        let deep = "[".repeat(MAX_JSON_DEPTH + 1);
        assert_eq!(
            check_json_budget(deep.as_bytes(), PLENTY),
            Err(JsonOverBudget::TooDeep {
                offset: MAX_JSON_DEPTH
            })
        );
        assert_eq!(
            check_json_budget("[".repeat(MAX_JSON_DEPTH).as_bytes(), PLENTY),
            Ok(())
        );
    }

    #[test]
    fn a_second_top_level_array_counts_afresh() {
        let body = br#"{"a": [{"x": 1, "y": 2}], "b": [{"x": 1, "y": 2}]}"#;
        assert_eq!(check_json_budget(body, per_element(4)), Ok(()));
    }
}
