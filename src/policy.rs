//! The example custom resource type, `xdsfed.policy.v1.Policy`.
//!
//! xdsfed federates any resource type that has a type URL and a decoder. The
//! policy type is defined by this project (see `proto/xdsfed/policy/v1`) and
//! registered with the client exactly as a user's own type would be:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use xdsfed::core::bootstrap::Bootstrap;
//! use xdsfed::client::XdsClient;
//! use xdsfed::policy::PolicyType;
//!
//! let client = XdsClient::builder(Bootstrap::from_file("bootstrap.yaml")?)
//!     .register::<PolicyType>()
//!     .build()?;
//! let mut limits = client.watch::<PolicyType>("xdstp://cloud.example/xdsfed.policy.v1.Policy/rate-limits")?;
//! # Ok(()) }
//! ```
//!
//! Packing a policy into an `Any` gives the type URL servers expect:
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

use prost::Message;
use xdsfed_core::types::{ResourceType, ValidationError};

pub use crate::proto::policy::v1::Policy;

/// The type URL of [`Policy`] inside an `Any`.
pub const POLICY_TYPE_URL: &str = "type.googleapis.com/xdsfed.policy.v1.Policy";

/// The policy resource type, for [`XdsClientBuilder::register`](xdsfed_client::client::XdsClientBuilder::register).
#[derive(Debug, Clone, Copy, Default)]
pub struct PolicyType;

impl ResourceType for PolicyType {
    const TYPE_URL: &'static str = POLICY_TYPE_URL;
    const SOTW_FULL_STATE: bool = false;
    type Resource = Policy;

    fn decode(bytes: &[u8]) -> Result<Policy, ValidationError> {
        let policy = Policy::decode(bytes)
            .map_err(|e| ValidationError(format!("not a valid xdsfed.policy.v1.Policy: {e}")))?;
        if policy.kind.is_empty() {
            return Err(ValidationError::field(
                "kind",
                "empty: a policy must say what it is",
            ));
        }
        Ok(policy)
    }

    fn name(resource: &Policy) -> Option<&str> {
        Some(resource.name.as_str()).filter(|n| !n.is_empty())
    }
}
