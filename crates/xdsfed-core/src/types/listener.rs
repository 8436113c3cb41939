//! `envoy.config.listener.v3.Listener`, validated as gRPC validates it
//! (gRFC A27 for API listeners, A36 for server listeners).

use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::RouteSpecifier,
};

use super::{ResourceType, ValidationError, check_config_source, decode_message, unpack_any};
use crate::types::route::validate_route_configuration;

/// The LDS resource type.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListenerType;

impl ResourceType for ListenerType {
    const TYPE_URL: &'static str = "type.googleapis.com/envoy.config.listener.v3.Listener";
    const SOTW_FULL_STATE: bool = true;
    type Resource = Listener;

    fn decode(bytes: &[u8]) -> Result<Listener, ValidationError> {
        let listener: Listener = decode_message(bytes, "Listener")?;
        validate_listener(&listener)?;
        Ok(listener)
    }

    fn name(resource: &Listener) -> Option<&str> {
        Some(resource.name.as_str()).filter(|n| !n.is_empty())
    }

    fn name_of_invalid(bytes: &[u8]) -> Option<String> {
        super::name_of_message::<Listener>(bytes, |m| &m.name)
    }
}

/// The HttpConnectionManager of an API listener, or of the first filter chain
/// that has one.
///
/// Returns `Ok(None)` for listeners without one (e.g. plain TCP proxies).
pub fn http_connection_manager(
    listener: &Listener,
) -> Result<Option<HttpConnectionManager>, ValidationError> {
    if let Some(api) = listener.api_listener.as_ref() {
        let Some(any) = api.api_listener.as_ref() else {
            return Err(ValidationError::field(
                "api_listener.api_listener",
                "missing",
            ));
        };
        return unpack_any(any, "api_listener.api_listener").map(Some);
    }
    for (c, chain) in listener.filter_chains.iter().enumerate() {
        for (f, filter) in chain.filters.iter().enumerate() {
            if let Some(hcm) = hcm_of_filter(filter, c, f)? {
                return Ok(Some(hcm));
            }
        }
    }
    Ok(None)
}

fn hcm_of_filter(
    filter: &envoy_types::pb::envoy::config::listener::v3::Filter,
    chain: usize,
    index: usize,
) -> Result<Option<HttpConnectionManager>, ValidationError> {
    use envoy_types::pb::envoy::config::listener::v3::filter::ConfigType;
    use prost::Name;
    match &filter.config_type {
        Some(ConfigType::TypedConfig(any)) if any.type_url == HttpConnectionManager::type_url() => {
            let field = format!("filter_chains[{chain}].filters[{index}].typed_config");
            unpack_any(any, &field).map(Some)
        }
        _ => Ok(None),
    }
}

fn validate_listener(listener: &Listener) -> Result<(), ValidationError> {
    if listener.api_listener.is_none() && listener.address.is_none() {
        return Err(ValidationError(
            "neither api_listener nor address is set: the listener serves nothing".into(),
        ));
    }
    // Every HttpConnectionManager must say where its routes come from.
    if listener.api_listener.is_some()
        && let Some(hcm) = http_connection_manager(listener)?
    {
        validate_hcm(&hcm, "api_listener.api_listener")?;
    }
    for (c, chain) in listener.filter_chains.iter().enumerate() {
        for (f, filter) in chain.filters.iter().enumerate() {
            if let Some(hcm) = hcm_of_filter(filter, c, f)? {
                validate_hcm(
                    &hcm,
                    &format!("filter_chains[{c}].filters[{f}].typed_config"),
                )?;
            }
        }
    }
    Ok(())
}

fn validate_hcm(hcm: &HttpConnectionManager, at: &str) -> Result<(), ValidationError> {
    match &hcm.route_specifier {
        Some(RouteSpecifier::Rds(rds)) => {
            if rds.route_config_name.is_empty() {
                return Err(ValidationError::field(
                    format_args!("{at}.rds.route_config_name"),
                    "empty",
                ));
            }
            check_config_source(
                rds.config_source.as_ref(),
                &format!("{at}.rds.config_source"),
            )
        }
        Some(RouteSpecifier::RouteConfig(rc)) => validate_route_configuration(rc)
            .map_err(|e| ValidationError(format!("{at}.route_config.{}", e.0))),
        Some(RouteSpecifier::ScopedRoutes(_)) => Err(ValidationError::field(
            format_args!("{at}.scoped_routes"),
            "scoped routes are not supported",
        )),
        None => Err(ValidationError::field(
            format!("{at}.route_specifier"),
            "neither rds nor route_config is set",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::tests_support::*;
    use prost::Message;

    #[test]
    fn listener_with_rds_decodes() {
        let l = api_listener_rds("l", "routes");
        let out = ListenerType::decode(&l.encode_to_vec()).expect("valid");
        assert_eq!(ListenerType::name(&out), Some("l"));
    }

    #[test]
    fn listener_without_route_specifier_is_rejected_naming_the_field() {
        let l = api_listener_with(HttpConnectionManager::default());
        let err = ListenerType::decode(&l.encode_to_vec()).unwrap_err();
        assert!(
            err.0.contains("api_listener.api_listener.route_specifier"),
            "{err}"
        );
    }

    #[test]
    fn listener_with_wrong_any_type_is_rejected() {
        let mut l = api_listener_rds("l", "r");
        if let Some(api) = l.api_listener.as_mut()
            && let Some(any) = api.api_listener.as_mut()
        {
            any.type_url = "type.googleapis.com/google.protobuf.Empty".into();
        }
        let err = ListenerType::decode(&l.encode_to_vec()).unwrap_err();
        assert!(
            err.0
                .contains("expected type.googleapis.com/envoy.extensions"),
            "{err}"
        );
    }

    #[test]
    fn listener_garbage_bytes_are_rejected() {
        let err = ListenerType::decode(&[0xff, 0xff, 0xff]).unwrap_err();
        assert!(err.0.contains("not a valid Listener"), "{err}");
    }
}
