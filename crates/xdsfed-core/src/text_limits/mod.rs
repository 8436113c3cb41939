//! Bounds on JSON and YAML text that hold before a parser sees it.
//!
//! A parser's cost is not its input's size: deeply nested YAML makes the
//! YAML parser quadratic, and a JSON value takes far more memory decoded
//! than written. These checks are linear scans of the text that refuse
//! such input up front, naming where it goes wrong, so that every caller
//! (bootstraps, file sources, REST and CDN bodies, the testbed's scenarios)
//! bounds the cost of parsing the same way.

mod yaml_nesting;

pub use yaml_nesting::{TooDeep, check_yaml_nesting};
