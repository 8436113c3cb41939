//! ACK and NACK: what the client owes the server after each response.
//!
//! > The xDS client should ACK or NACK every DiscoveryResponse received from
//! > the management server. [...] NACK signifies unsuccessful configuration
//! > and is indicated by the presence of the error_detail field.
//! > (xds-protocol-v3, "ACK and NACK semantics summary")
//!
//! A response is NACKed when any of its resources is [`Rejected`]; the NACK's
//! `error_detail` is a `google.rpc.Status` with code `INVALID_ARGUMENT` whose
//! message lists every rejected resource and why. The valid resources of the
//! same response are still applied (gRFC A46).

use std::fmt::Write as _;
use std::sync::Arc;

use envoy_types::pb::google::rpc::Status;

use crate::name::NameError;
use crate::types::ValidationError;
use crate::version::Version;

/// `google.rpc.Code.INVALID_ARGUMENT`.
pub(crate) const INVALID_ARGUMENT: i32 = 3;

/// Why one resource of a response was rejected. Every variant names the
/// resource (or, when the name cannot be known, its position).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    /// The same name appears more than once in one response.
    #[error("{name}: appears {count} times in one response")]
    DuplicateName {
        /// The resource name as the server sent it.
        name: String,
        /// How many times.
        count: usize,
    },
    /// The name is not a valid resource name.
    #[error("{name:?}: {error}")]
    BadName {
        /// The name as the server sent it.
        name: String,
        /// Why it does not parse.
        error: NameError,
    },
    /// The resource failed to decode or validate.
    #[error("{name}: {error}")]
    Invalid {
        /// The resource name.
        name: String,
        /// Why.
        error: ValidationError,
    },
    /// A resource without a name the client could find failed (SotW without
    /// the `Resource` wrapper identifies resources by a name inside them).
    #[error("resource #{index}: {error}")]
    Unnamed {
        /// Its position in the response's `resources`.
        index: usize,
        /// Why.
        error: ValidationError,
    },
}

impl Rejected {
    /// The resource's name as the server sent it, when known.
    pub fn name(&self) -> Option<&str> {
        match self {
            Rejected::DuplicateName { name, .. }
            | Rejected::BadName { name, .. }
            | Rejected::Invalid { name, .. } => Some(name),
            Rejected::Unnamed { .. } => None,
        }
    }

    /// The rejection as a [`ValidationError`], for [`super::CoreEvent::Invalid`].
    pub fn to_validation_error(&self) -> ValidationError {
        match self {
            Rejected::Invalid { error, .. } | Rejected::Unnamed { error, .. } => error.clone(),
            Rejected::DuplicateName { count, .. } => {
                ValidationError(format!("appears {count} times in one response"))
            }
            Rejected::BadName { error, .. } => ValidationError(error.to_string()),
        }
    }
}

/// The `error_detail` of a NACK: `INVALID_ARGUMENT`, naming every rejected
/// resource of the response of type `type_url`.
pub(crate) fn error_detail(type_url: &str, rejected: &[Rejected]) -> Status {
    let mut message = format!(
        "{} rejected {type_url} resource{}: ",
        rejected.len(),
        if rejected.len() == 1 { "" } else { "s" }
    );
    for (i, r) in rejected.iter().enumerate() {
        if i > 0 {
            message.push_str("; ");
        }
        // Writing to a String cannot fail.
        let _ = write!(message, "{r}");
    }
    Status {
        code: INVALID_ARGUMENT,
        message,
        details: Vec::new(),
    }
}

/// The `error_detail` of a NACK of a response of type `type_url` rejected
/// as a whole, before any of its resources could be told apart (a
/// REST-JSON body that is not a `DiscoveryResponse` of the polled type):
/// `INVALID_ARGUMENT` and why.
pub(crate) fn response_error_detail(type_url: &str, error: &ValidationError) -> Status {
    Status {
        code: INVALID_ARGUMENT,
        message: format!("rejected {type_url} response: {error}"),
        details: Vec::new(),
    }
}

/// The answer owed to one response, waiting for `poll_transmit`.
#[derive(Debug, Clone)]
pub(crate) struct PendingAck {
    /// The resource type of the response.
    pub(crate) type_url: Arc<str>,
    /// The response's nonce (echoed in `response_nonce`).
    pub(crate) nonce: String,
    /// SotW: the version to send (`version_info` of the response for an ACK,
    /// the last ACKed one for a NACK). Unused in delta.
    pub(crate) version: Version,
    /// `Some` for a NACK.
    pub(crate) error: Option<Status>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_detail_is_invalid_argument_and_names_every_rejected_resource() {
        let detail = error_detail(
            "T",
            &[
                Rejected::DuplicateName {
                    name: "a".into(),
                    count: 2,
                },
                Rejected::Invalid {
                    name: "b".into(),
                    error: ValidationError::field("name", "empty"),
                },
                Rejected::Unnamed {
                    index: 4,
                    error: ValidationError("truncated".into()),
                },
            ],
        );
        assert_eq!(detail.code, INVALID_ARGUMENT);
        assert_eq!(
            detail.message,
            "3 rejected T resources: a: appears 2 times in one response; b: name: empty; resource #4: truncated"
        );
    }

    #[test]
    fn a_response_rejected_whole_is_invalid_argument_and_says_why() {
        let detail = response_error_detail("T", &ValidationError("not JSON".into()));
        assert_eq!(detail.code, INVALID_ARGUMENT);
        assert_eq!(detail.message, "rejected T response: not JSON");
    }
}
