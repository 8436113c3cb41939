//! `server_uri`: the targets this client's transport can dial, checked
//! when the bootstrap is read, so that a server that can never be reached
//! is a bootstrap error naming the field rather than a retry loop.
//!
//! ```text
//! host:port                 127.0.0.1:18000, xds.example.com:443, [::1]:18000
//! dns:///host:port          gRPC's form of the same: the system resolver
//! http://host[:port]        plaintext (the default port is 80)
//! https://host[:port]       TLS (the default port is 443)
//! ```
//!
//! gRPC accepts more target schemes (`unix:`, `ipv4:`, `xds:`, `dns:` naming
//! a DNS server …); this client's transport dials TCP host:port only, so it
//! refuses them here with what to write instead.

/// gRPC target schemes the transport does not dial, as they appear
/// before the first `:` (`unix:/path`, `dns:///host:port`).
const GRPC_SCHEMES: &[&str] = &[
    "dns",
    "unix",
    "unix-abstract",
    "vsock",
    "ipv4",
    "ipv6",
    "xds",
    "passthrough",
];

/// What the error messages offer instead.
const EXPECTED: &str =
    "expected host:port, dns:///host:port, http://host:port or https://host:port";

/// gRPC's DNS target with no DNS server named: the system resolver, as
/// for `host:port`.
const DNS_SYSTEM_RESOLVER: &str = "dns:///";

/// What the transport dials for `uri`: `dns:///host:port` is `host:port`;
/// anything else is itself.
///
/// ```
/// use xdsfed_core::bootstrap::dial_target;
/// assert_eq!(dial_target("dns:///xds.example.com:443"), "xds.example.com:443");
/// assert_eq!(dial_target("https://xds.example.com"), "https://xds.example.com");
/// ```
pub fn dial_target(uri: &str) -> &str {
    let n = DNS_SYSTEM_RESOLVER.len();
    match uri.get(..n) {
        Some(scheme) if scheme.eq_ignore_ascii_case(DNS_SYSTEM_RESOLVER) => {
            uri.get(n..).unwrap_or(uri)
        }
        _ => uri,
    }
}

/// Checks `uri`; the problem in words when the transport cannot dial it.
pub fn check_server_uri(uri: &str) -> Result<(), String> {
    let uri = dial_target(uri);
    if let Some(c) = uri.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("contains {c:?}: {EXPECTED}"));
    }
    let (scheme, rest) = match uri.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, uri),
    };
    match scheme {
        Some(s) if s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https") => {}
        Some(other) => return Err(unsupported(other)),
        None => {
            if let Some((prefix, _)) = uri.split_once(':')
                && GRPC_SCHEMES.contains(&prefix.to_ascii_lowercase().as_str())
            {
                return Err(unsupported(prefix));
            }
        }
    }
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.contains(['/', '?', '#', '@']) {
        return Err(format!(
            "has a path, query or user part: {EXPECTED}, nothing more"
        ));
    }
    let (host, port) = split_host_port(authority)?;
    check_host(host)?;
    match port {
        Some(port) => check_port(port),
        None if scheme.is_some() => Ok(()),
        None => Err(format!("has no port: {EXPECTED}")),
    }
}

fn unsupported(scheme: &str) -> String {
    let lower = scheme.to_ascii_lowercase();
    if lower.starts_with("unix") {
        format!(
            "{scheme}: targets (Unix domain sockets) are not supported by this client's transport: {EXPECTED}"
        )
    } else {
        format!("the {scheme:?} scheme is not supported by this client's transport: {EXPECTED}")
    }
}

/// `host` and the text after its `:`, if any; IPv6 hosts in brackets.
fn split_host_port(authority: &str) -> Result<(&str, Option<&str>), String> {
    if let Some(rest) = authority.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err(format!("has an unclosed '[': {EXPECTED}"));
        };
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("{host:?} is not an IPv6 address"));
        }
        // `[` + host + `]`, checked: the host check lets it through.
        let bracketed = &authority[..host.len() + 2];
        return match after {
            "" => Ok((bracketed, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((bracketed, Some(port))),
                None => Err(format!("has text after ']': {EXPECTED}")),
            },
        };
    }
    match authority.rsplit_once(':') {
        Some((host, _)) if host.contains(':') => Err(format!(
            "an IPv6 address needs brackets, as in [::1]:18000: {EXPECTED}"
        )),
        Some((host, port)) => Ok((host, Some(port))),
        None => Ok((authority, None)),
    }
}

fn check_host(host: &str) -> Result<(), String> {
    if host.starts_with('[') {
        return Ok(());
    }
    if host.is_empty() {
        return Err(format!("has no host: {EXPECTED}"));
    }
    if host.len() > 253 {
        return Err(format!(
            "has a host of {} bytes: a host name has at most 253",
            host.len()
        ));
    }
    if let Some(c) = host
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
    {
        return Err(format!("has {c:?} in its host name: {EXPECTED}"));
    }
    Ok(())
}

fn check_port(port: &str) -> Result<(), String> {
    match port.parse::<u16>() {
        Ok(0) => Err("has port 0: expected a port from 1 to 65535".to_owned()),
        Ok(_) => Ok(()),
        Err(_) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            Err(format!("has port {port}: expected a port from 1 to 65535"))
        }
        Err(_) => Err(format!(
            "has port {port:?}: expected a number from 1 to 65535"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_and_http_targets_are_accepted() {
        for uri in [
            "127.0.0.1:18000",
            "xds.example.com:443",
            "s:1",
            "[::1]:18000",
            "http://127.0.0.1:18000",
            "https://xds.cloud.example:443",
            "HTTPS://xds.cloud.example",
            "http://[::1]:8080/",
            "traffic_director-1.example:443",
            "dns:///xds.example.com:443",
            "DNS:///127.0.0.1:18000",
        ] {
            assert_eq!(check_server_uri(uri), Ok(()), "{uri}");
        }
    }

    #[test]
    fn targets_the_transport_cannot_dial_are_refused() {
        for (uri, says) in [
            ("127.0.0.1:99999", "port 99999"),
            ("127.0.0.1:0", "port 0"),
            ("127.0.0.1:http", "\"http\""),
            ("127.0.0.1", "no port"),
            ("not a uri!!", "' '"),
            ("garbage!!:1", "'!'"),
            ("unix:/run/xds.sock", "Unix domain sockets"),
            ("unix:///run/xds.sock", "Unix domain sockets"),
            ("dns://8.8.8.8/xds.example.com:443", "\"dns\""),
            ("dns:///xds.example.com", "no port"),
            ("ftp://host:21", "\"ftp\""),
            ("http://host:1/path", "path"),
            ("http://user@host:1", "user"),
            ("::1:18000", "brackets"),
            ("[::1:18000", "unclosed"),
            ("[nope]:1", "IPv6"),
            (":1", "no host"),
            ("a\nb:1", "'\\n'"),
        ] {
            let error = check_server_uri(uri).expect_err(uri);
            assert!(error.contains(says), "{uri}: {error}");
        }
        let long = format!("{}:1", "a".repeat(300));
        assert!(check_server_uri(&long).is_err());
    }
}
