//! The files a bootstrap names for the channels to its servers (the `tls`
//! credentials' CA, certificate and key), checked before any connection is
//! tried: each must be a regular file within the PEM size limit holding
//! PEM of the right kind.
//!
//! Parsing stays free of I/O (a bootstrap may be parsed on one machine for
//! another); a program that is about to connect calls
//! [`Bootstrap::check_credential_files`] so that a missing CA, a directory
//! or a FIFO in its place is an error naming the field, not a server that
//! is retried forever. `certificate_providers` files are not checked: they
//! are re-read while the client runs and may appear later.

use std::path::Path;

use super::error::{BootstrapError, FieldPath};
use super::{Bootstrap, ChannelCreds, ServerConfig};
use crate::file::{PEM_LIMIT, PemKind, check_pem, read_bounded};

impl Bootstrap {
    /// Reads every TLS file the channel credentials of the servers and of
    /// the allowed gRPC services name, once,
    /// and checks that it holds PEM of the right kind. The error names the
    /// server's field (`xds_servers[0].channel_creds.config.ca_certificate_file`,
    /// `authorities."cloud.example".xds_servers[1]…`,
    /// `allowed_grpc_services."eds.example:443".channel_creds.config…`) and
    /// the file.
    pub fn check_credential_files(&self) -> Result<(), BootstrapError> {
        check_servers(&FieldPath::default().key("xds_servers"), &self.xds_servers)?;
        for (name, authority) in &self.authorities {
            let at = FieldPath::default()
                .key("authorities")
                .key(name)
                .key("xds_servers");
            check_servers(&at, &authority.xds_servers)?;
        }
        for (target, listed) in &self.allowed_grpc_services {
            let at = FieldPath::default()
                .key(super::allowed::ALLOWED_GRPC_SERVICES)
                .key(target)
                .key("channel_creds")
                .key("config");
            check_channel_creds(&at, &listed.channel_creds)?;
        }
        Ok(())
    }
}

fn check_servers(at: &FieldPath, servers: &[ServerConfig]) -> Result<(), BootstrapError> {
    for (i, server) in servers.iter().enumerate() {
        let config = at.index(i).key("channel_creds").key("config");
        check_channel_creds(&config, &server.channel_creds)?;
    }
    Ok(())
}

/// The TLS files of `creds`, whose `config` is at `config`.
fn check_channel_creds(config: &FieldPath, creds: &ChannelCreds) -> Result<(), BootstrapError> {
    let ChannelCreds::Tls {
        ca_certificate_file,
        certificate_file,
        private_key_file,
    } = creds
    else {
        return Ok(());
    };
    let files = [
        (
            "ca_certificate_file",
            ca_certificate_file,
            PemKind::Certificates,
        ),
        ("certificate_file", certificate_file, PemKind::Certificates),
        ("private_key_file", private_key_file, PemKind::PrivateKey),
    ];
    for (field, path, kind) in files {
        if let Some(path) = path {
            check_file(&config.key(field), path, kind)?;
        }
    }
    Ok(())
}

fn check_file(at: &FieldPath, path: &Path, kind: PemKind) -> Result<(), BootstrapError> {
    let problem = match read_bounded(path, PEM_LIMIT) {
        Ok(pem) => match check_pem(&pem, kind) {
            Ok(()) => return Ok(()),
            Err(problem) => problem,
        },
        Err(e) => format!("cannot be read: {e}"),
    };
    Err(BootstrapError::field(
        at,
        format!("the file {} {problem}", path.display()),
    ))
}
