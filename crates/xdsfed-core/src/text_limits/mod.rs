//! Bounds on JSON and YAML text that hold before a parser sees it.
//!
//! A parser's cost is not its input's size: deeply nested YAML makes the
//! YAML parser quadratic, and a JSON value takes far more memory decoded
//! than written. These checks are linear scans of the text that refuse
//! such input up front, naming where it goes wrong, so that every caller
//! (bootstraps, file sources, REST and CDN bodies, the testbed's scenarios)
//! bounds the cost of parsing the same way.

mod json_budget;
mod yaml_nesting;

pub use json_budget::{JsonBudget, JsonOverBudget, MAX_JSON_DEPTH, check_json_budget};
pub use yaml_nesting::{TooDeep, check_yaml_nesting};
