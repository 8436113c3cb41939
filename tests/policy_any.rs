//! The project's own protos compile with type names that xDS peers expect.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use prost::{Message, Name};
use prost_types::Any;
use xdsfed::policy::{POLICY_TYPE_URL, Policy};

#[test]
fn policy_packs_into_any_with_googleapis_type_url_and_round_trips() {
    let mut spec = prost_types::Struct::default();
    spec.fields.insert(
        "requests_per_second".into(),
        prost_types::Value {
            kind: Some(prost_types::value::Kind::NumberValue(250.0)),
        },
    );
    let policy = Policy {
        name: "xdstp://cloud.example/xdsfed.policy.v1.Policy/rate-limits".into(),
        kind: "ratelimit".into(),
        spec: Some(spec),
        labels: [("team".to_string(), "payments".to_string())].into(),
    };

    let any = Any::from_msg(&policy).expect("encoding into a Vec cannot fail");
    assert_eq!(any.type_url, "type.googleapis.com/xdsfed.policy.v1.Policy");
    assert_eq!(Policy::type_url(), POLICY_TYPE_URL);

    let back: Policy = any.to_msg().expect("the Any holds a Policy");
    assert_eq!(back, policy);
    assert_eq!(
        Policy::decode(any.value.as_slice()).expect("valid bytes"),
        policy
    );
}
