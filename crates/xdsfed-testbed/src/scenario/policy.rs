//! Policies for policy-stream servers, written in YAML:
//!
//! ```yaml
//! resources:
//!   - server: onprem                 # a server with `protocol: policy_stream`
//!     name: require-auth             # the policy's name
//!     policy:
//!       validations:
//!         - {expression: "has(object.attributes.request.http.headers.authorization)", message: "authorization required"}
//!       failure_policy: Fail         # optional
//!       validation_actions: Deny     # optional
//!       evaluation_mode: Envoy       # the default
//!       match_conditions: [{name: get, expression: "object.attributes.request.http.method == 'GET'"}]
//!       variables: [{name: path, expression: "object.attributes.request.http.path"}]
//! ```
//!
//! Fields are not checked here, so that a scenario can serve a policy a
//! client must NACK.

use prost::Message;
use serde::Deserialize;
use xdsfed_core::policy_stream::wire::{
    MatchCondition, ValidatingPolicy, ValidatingPolicySpec, Validation, Variable,
};
use xdsfed_core::types::VALIDATING_POLICY_TYPE_URL;

use envoy_types::pb::google::protobuf::Any;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PolicyEntry {
    #[serde(default)]
    validations: Vec<ValidationEntry>,
    #[serde(default)]
    failure_policy: Option<String>,
    #[serde(default)]
    validation_actions: String,
    #[serde(default = "envoy")]
    evaluation_mode: String,
    #[serde(default)]
    match_conditions: Vec<NamedEntry>,
    #[serde(default)]
    variables: Vec<NamedEntry>,
}

fn envoy() -> String {
    "Envoy".to_owned()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ValidationEntry {
    expression: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message_expression: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct NamedEntry {
    name: String,
    expression: String,
}

impl PolicyEntry {
    /// The policy named `name`, packed as it is stored.
    pub(crate) fn to_any(&self, name: &str) -> Any {
        let named = |entries: &[NamedEntry]| -> Vec<(String, String)> {
            entries
                .iter()
                .map(|e| (e.name.clone(), e.expression.clone()))
                .collect()
        };
        let policy = ValidatingPolicy {
            name: name.to_owned(),
            delete: false,
            spec: Some(ValidatingPolicySpec {
                validations: self
                    .validations
                    .iter()
                    .map(|v| Validation {
                        expression: v.expression.clone(),
                        message: v.message.clone(),
                        reason: v.reason.clone(),
                        message_expression: v.message_expression.clone(),
                    })
                    .collect(),
                failure_policy: self.failure_policy.clone(),
                match_conditions: named(&self.match_conditions)
                    .into_iter()
                    .map(|(name, expression)| MatchCondition { name, expression })
                    .collect(),
                variables: named(&self.variables)
                    .into_iter()
                    .map(|(name, expression)| Variable { name, expression })
                    .collect(),
                validation_actions: self.validation_actions.clone(),
                evaluation_mode: self.evaluation_mode.clone(),
            }),
        };
        Any {
            type_url: VALIDATING_POLICY_TYPE_URL.to_owned(),
            value: policy.encode_to_vec(),
        }
    }
}
