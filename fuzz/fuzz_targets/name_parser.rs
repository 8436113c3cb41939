//! Fuzzes the resource name parser and checks its invariants:
//! canonical names are fixed points, the Display form parses back to the same
//! name, and percent-encoded template text always makes a valid path.

#![no_main]

use libfuzzer_sys::fuzz_target;
use xdsfed_core::name::{ResourceName, XdstpName, authority_of, canonical_key, encode_path};

fuzz_target!(|data: &[u8]| {
    // Any bytes, percent-encoded, make a valid id.
    if !data.is_empty() {
        let name = format!("xdstp://a/T/{}", encode_path(data));
        if let Err(e) = XdstpName::parse(&name) {
            panic!("encoded path {name:?} does not parse: {e}");
        }
    }

    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let strict = ResourceName::parse_user_supplied(text);
    let Ok(parsed) = ResourceName::parse(text) else {
        assert!(
            strict.is_err(),
            "user-supplied parse is laxer than wire parse: {text:?}"
        );
        return;
    };

    let canonical = parsed.canonical().into_owned();
    assert_eq!(canonical_key(text).as_deref(), Ok(canonical.as_str()));
    let reparsed = match ResourceName::parse(&canonical) {
        Ok(r) => r,
        Err(e) => panic!("canonical {canonical:?} of {text:?} does not parse: {e}"),
    };
    assert_eq!(
        reparsed.canonical(),
        canonical,
        "canonical is not a fixed point"
    );
    assert_eq!(authority_of(&canonical), parsed.authority());

    let shown = parsed.to_string();
    match ResourceName::parse(&shown) {
        Ok(again) => assert_eq!(again, parsed, "Display does not round-trip"),
        Err(e) => panic!("Display {shown:?} of {text:?} does not parse: {e}"),
    }

    if let ResourceName::Xdstp(n) = &parsed {
        let _ = n.check_type("type.googleapis.com/envoy.config.cluster.v3.Cluster");
        let _ = n.id_segments().count();
        let _ = n.context_params().count();
        let _ = n.is_glob();
    }
});
