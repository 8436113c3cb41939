//! `kyverno.http.v1alpha1.ValidatingPolicy`: the policies a policy-stream
//! server distributes (see [`crate::policy_stream`]).
//!
//! A policy is checked before it is held, so that a sidecar never loads
//! one its evaluator would refuse later:
//!
//! - `name`: a Kubernetes object name (RFC 1123 subdomain: lower-case
//!   letters, digits, `-` and `.`, at most 253 characters, starting and
//!   ending with a letter or digit), since policies are Kubernetes objects
//!   and the name becomes the last segment of an `xdstp://` name;
//! - `spec` present, with at least one validation, each with a non-empty
//!   `expression`;
//! - `failure_policy`, when set: `Fail` or `Ignore`;
//! - `validation_actions`, when set: a comma-separated list of `Deny`,
//!   `Warn` and `Audit`;
//! - `evaluation_mode`: `Envoy` or `HTTP` (the modes an HTTP authorizer
//!   evaluates; a policy stream skips policies of other modes, or none,
//!   before they get here: [`is_considered`]);
//! - match conditions and variables: non-empty, unique names and non-empty
//!   expressions.
//!
//! A policy with `delete` set is not a policy to hold; the policy stream
//! treats it as absent from the snapshot, and decoding one here is an error.

use prost::Message;

use super::{ResourceType, ValidationError};
use crate::policy_stream::wire::{ValidatingPolicy, ValidatingPolicySpec};

/// The type URL of a [`ValidatingPolicy`].
pub const VALIDATING_POLICY_TYPE_URL: &str =
    "type.googleapis.com/kyverno.http.v1alpha1.ValidatingPolicy";

/// The message name, as it appears in `xdstp://` names.
pub const VALIDATING_POLICY_MESSAGE: &str = "kyverno.http.v1alpha1.ValidatingPolicy";

/// The longest Kubernetes object name.
const MAX_NAME: usize = 253;

/// The validating policies of the policy-distribution stream.
///
/// ```
/// use prost::Message;
/// use xdsfed_core::policy_stream::wire::{Validation, ValidatingPolicy, ValidatingPolicySpec};
/// use xdsfed_core::types::{ResourceType, ValidatingPolicyType};
///
/// let policy = ValidatingPolicy {
///     name: "require-auth".into(),
///     delete: false,
///     spec: Some(ValidatingPolicySpec {
///         validations: vec![Validation { expression: "has(object.attributes.request.http.headers.authorization)".into(), ..Default::default() }],
///         evaluation_mode: "Envoy".into(),
///         ..Default::default()
///     }),
/// };
/// let decoded = ValidatingPolicyType::decode(&policy.encode_to_vec()).unwrap();
/// assert_eq!(decoded.name, "require-auth");
///
/// let mut bad = policy.clone();
/// bad.spec.as_mut().unwrap().failure_policy = Some("Sometimes".into());
/// let error = ValidatingPolicyType::decode(&bad.encode_to_vec()).unwrap_err();
/// assert!(error.0.starts_with("spec.failure_policy:"), "{error}");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ValidatingPolicyType;

impl ResourceType for ValidatingPolicyType {
    const TYPE_URL: &'static str = VALIDATING_POLICY_TYPE_URL;
    // Every snapshot carries the whole set: absence is deletion.
    const SOTW_FULL_STATE: bool = true;
    type Resource = ValidatingPolicy;

    fn decode(bytes: &[u8]) -> Result<ValidatingPolicy, ValidationError> {
        let policy = ValidatingPolicy::decode(bytes).map_err(|e| {
            ValidationError(format!("not a valid {VALIDATING_POLICY_MESSAGE}: {e}"))
        })?;
        validate(&policy)?;
        Ok(policy)
    }

    fn name(resource: &ValidatingPolicy) -> Option<&str> {
        Some(&resource.name)
    }

    fn name_of_invalid(bytes: &[u8]) -> Option<String> {
        super::name_of_message::<ValidatingPolicy>(bytes, |p| &p.name)
    }
}

/// The evaluation modes this client evaluates: an HTTP authorizer's.
pub const EVALUATION_MODES: [&str; 2] = ["Envoy", "HTTP"];

/// Whether a policy of `spec` is for this client at all. A
/// `ValidatingPolicy` is generic, consumed by several evaluators; the
/// upstream plugin considers only those whose evaluation mode is its own
/// (one of [`EVALUATION_MODES`]), and a policy stream skips the others
/// instead of rejecting the snapshot (see [`crate::policy_stream`]).
pub fn is_considered(spec: &ValidatingPolicySpec) -> bool {
    EVALUATION_MODES.contains(&spec.evaluation_mode.as_str())
}

/// Checks one policy; the error names the field.
pub fn validate(policy: &ValidatingPolicy) -> Result<(), ValidationError> {
    check_name(&policy.name)?;
    if policy.delete {
        return Err(ValidationError::field(
            "delete",
            "set: a deletion marker is not a policy",
        ));
    }
    let Some(spec) = &policy.spec else {
        return Err(ValidationError::field("spec", "missing"));
    };
    check_spec(spec)
}

fn check_name(name: &str) -> Result<(), ValidationError> {
    if name.is_empty() {
        return Err(ValidationError::field("name", "empty"));
    }
    if name.len() > MAX_NAME {
        return Err(ValidationError::field(
            "name",
            format_args!("{} characters, more than {MAX_NAME}", name.len()),
        ));
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !name.chars().all(allowed) || !alnum(name.chars().next()) || !alnum(name.chars().last()) {
        return Err(ValidationError::field(
            "name",
            format_args!(
                "{:?} is not a Kubernetes object name (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit)",
                name.escape_debug().to_string()
            ),
        ));
    }
    Ok(())
}

fn check_spec(spec: &ValidatingPolicySpec) -> Result<(), ValidationError> {
    if spec.validations.is_empty() {
        return Err(ValidationError::field(
            "spec.validations",
            "empty: a policy must check something",
        ));
    }
    for (i, validation) in spec.validations.iter().enumerate() {
        if validation.expression.trim().is_empty() {
            return Err(ValidationError::field(
                format_args!("spec.validations[{i}].expression"),
                "empty",
            ));
        }
    }
    if let Some(policy) = &spec.failure_policy
        && !matches!(policy.as_str(), "Fail" | "Ignore")
    {
        return Err(ValidationError::field(
            "spec.failure_policy",
            format_args!("{policy:?}: expected \"Fail\" or \"Ignore\""),
        ));
    }
    check_actions(&spec.validation_actions)?;
    if !is_considered(spec) {
        return Err(ValidationError::field(
            "spec.evaluation_mode",
            format_args!("{:?}: expected \"Envoy\" or \"HTTP\"", spec.evaluation_mode),
        ));
    }
    let conditions = spec
        .match_conditions
        .iter()
        .map(|c| (c.name.as_str(), c.expression.as_str()));
    check_named("spec.match_conditions", conditions)?;
    let variables = spec
        .variables
        .iter()
        .map(|v| (v.name.as_str(), v.expression.as_str()));
    check_named("spec.variables", variables)
}

fn check_actions(actions: &str) -> Result<(), ValidationError> {
    if actions.is_empty() {
        return Ok(());
    }
    for action in actions.split(',').map(str::trim) {
        if !matches!(action, "Deny" | "Warn" | "Audit") {
            return Err(ValidationError::field(
                "spec.validation_actions",
                format_args!("{action:?}: expected \"Deny\", \"Warn\" or \"Audit\""),
            ));
        }
    }
    Ok(())
}

/// Named expressions: each name non-empty and unique, each expression
/// non-empty.
fn check_named<'a>(
    field: &str,
    entries: impl Iterator<Item = (&'a str, &'a str)>,
) -> Result<(), ValidationError> {
    let mut seen = crate::hash::HashSet::default();
    for (i, (name, expression)) in entries.enumerate() {
        if name.is_empty() {
            return Err(ValidationError::field(
                format_args!("{field}[{i}].name"),
                "empty",
            ));
        }
        if !seen.insert(name) {
            return Err(ValidationError::field(
                format_args!("{field}[{i}].name"),
                format_args!("{:?} appears twice", name.escape_debug().to_string()),
            ));
        }
        if expression.trim().is_empty() {
            return Err(ValidationError::field(
                format_args!("{field}[{i}].expression"),
                "empty",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy_stream::wire::{MatchCondition, Validation, Variable};

    fn good() -> ValidatingPolicy {
        ValidatingPolicy {
            name: "require-auth".into(),
            delete: false,
            spec: Some(ValidatingPolicySpec {
                validations: vec![Validation {
                    expression: "true".into(),
                    ..Default::default()
                }],
                failure_policy: Some("Fail".into()),
                validation_actions: "Deny, Audit".into(),
                evaluation_mode: "Envoy".into(),
                match_conditions: vec![MatchCondition {
                    name: "is-get".into(),
                    expression: "true".into(),
                }],
                variables: vec![Variable {
                    name: "user".into(),
                    expression: "'x'".into(),
                }],
            }),
        }
    }

    fn error_of(change: impl FnOnce(&mut ValidatingPolicy)) -> String {
        let mut policy = good();
        change(&mut policy);
        match ValidatingPolicyType::decode(&policy.encode_to_vec()) {
            Err(e) => e.0,
            Ok(_) => panic!("accepted"),
        }
    }

    fn spec(p: &mut ValidatingPolicy) -> &mut ValidatingPolicySpec {
        p.spec.as_mut().unwrap()
    }

    #[test]
    fn a_complete_policy_is_accepted() {
        let decoded = ValidatingPolicyType::decode(&good().encode_to_vec()).unwrap();
        assert_eq!(decoded, good());
    }

    #[test]
    fn each_invalid_field_is_named() {
        type Change = Box<dyn FnOnce(&mut ValidatingPolicy)>;
        let cases: Vec<(&str, Change)> = vec![
            ("name: empty", Box::new(|p| p.name.clear())),
            (
                "name: \"Bad_Name\"",
                Box::new(|p| p.name = "Bad_Name".into()),
            ),
            ("name: ", Box::new(|p| p.name = "x".repeat(254))),
            ("delete: set", Box::new(|p| p.delete = true)),
            ("spec: missing", Box::new(|p| p.spec = None)),
            (
                "spec.validations: empty",
                Box::new(|p| spec(p).validations.clear()),
            ),
            (
                "spec.validations[0].expression: empty",
                Box::new(|p| spec(p).validations[0].expression = " ".into()),
            ),
            (
                "spec.failure_policy: \"Retry\"",
                Box::new(|p| spec(p).failure_policy = Some("Retry".into())),
            ),
            (
                "spec.validation_actions: \"Block\"",
                Box::new(|p| spec(p).validation_actions = "Deny,Block".into()),
            ),
            (
                "spec.evaluation_mode: \"\"",
                Box::new(|p| spec(p).evaluation_mode.clear()),
            ),
            (
                "spec.match_conditions[1].name: \"is-get\" appears twice",
                Box::new(|p| {
                    let c = spec(p).match_conditions[0].clone();
                    spec(p).match_conditions.push(c);
                }),
            ),
            (
                "spec.variables[0].expression: empty",
                Box::new(|p| spec(p).variables[0].expression.clear()),
            ),
            (
                "spec.variables[0].name: empty",
                Box::new(|p| spec(p).variables[0].name.clear()),
            ),
        ];
        for (expected, change) in cases {
            let error = error_of(change);
            assert!(error.starts_with(expected), "{error:?} ≠ {expected:?}…");
        }
    }

    #[test]
    fn bytes_that_do_not_decode_are_refused() {
        let error = ValidatingPolicyType::decode(&[0x0f, 0xff]).unwrap_err();
        assert!(
            error
                .0
                .starts_with("not a valid kyverno.http.v1alpha1.ValidatingPolicy")
        );
    }
}
