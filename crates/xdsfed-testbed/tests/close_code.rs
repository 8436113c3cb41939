//! The `close_code` fault in scenario files: a code name in any case or a
//! number; anything else is bad input naming the field.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tonic::Code;
use xdsfed_testbed::scenario::Scenario;

fn scenario(code: &str) -> String {
    format!(
        r#"
servers: [{{name: a, authorities: [a.example]}}]
schedule:
  - at: 0s
    faults: {{server: a, close_after_responses: 1, close_code: {code}}}
"#
    )
}

#[tokio::test]
async fn close_code_ok_is_applied_from_a_scenario() {
    let running = Scenario::from_yaml(&scenario("ok"))
        .unwrap()
        .start()
        .await
        .unwrap();
    let faults = running.testbed().servers()[0].faults();
    assert_eq!(faults.close_after_responses, Some(1));
    assert_eq!(faults.close_code, Some(Code::Ok));
}

#[test]
fn unknown_close_code_is_bad_input_naming_the_field() {
    let err = Scenario::from_yaml(&scenario("SOMETIMES")).unwrap_err();
    assert!(err.is_bad_input());
    let text = err.to_string();
    assert!(
        text.contains("close_code") && text.contains("SOMETIMES"),
        "{text}"
    );
}
