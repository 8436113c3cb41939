//! The example custom resource type, `xdsfed.policy.v1.Policy`.
//!
//! xdsfed federates any resource type that has a type URL and a decoder. The
//! policy type is defined by this project (see `proto/xdsfed/policy/v1`) and
//! registered with the client like any user's own type would be.
//!
//! ```
//! use prost::Name;
//! use xdsfed::proto::policy::v1::Policy;
//!
//! let policy = Policy { name: "rate-limits".into(), kind: "ratelimit".into(), ..Default::default() };
//! let any = prost_types::Any::from_msg(&policy).unwrap();
//! assert_eq!(any.type_url, "type.googleapis.com/xdsfed.policy.v1.Policy");
//! assert_eq!(Policy::type_url(), any.type_url);
//! ```

pub use crate::proto::policy::v1::Policy;

/// The type URL of [`Policy`] inside an `Any`.
pub const POLICY_TYPE_URL: &str = "type.googleapis.com/xdsfed.policy.v1.Policy";
