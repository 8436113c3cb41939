//! TLS and call credentials for end-to-end tests: a CA and a server
//! certificate for 127.0.0.1, and JWTs a `jwt_token_file` credential sends.

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use xdsfed::testbed::ServerTls;

/// The server's TLS settings and the CA's PEM that trusts them.
pub fn pki() -> (ServerTls, String) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("no names");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("key"))
        .expect("CA certificate");
    let key = KeyPair::generate().expect("key");
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .expect("IP SAN")
        .signed_by(&key, &ca)
        .expect("leaf certificate");
    let tls = ServerTls {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        client_ca_pem: None,
    };
    (tls, ca.pem())
}

/// Unpadded base64url.
fn b64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// An unsigned JWT for `subject`, expiring in an hour.
pub fn jwt(subject: &str) -> String {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    let claims = format!(r#"{{"sub": "{subject}", "exp": {exp}}}"#);
    format!(
        "{}.{}.sig",
        b64(br#"{"alg":"none"}"#),
        b64(claims.as_bytes())
    )
}
