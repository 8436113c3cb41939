//! A server entry's `call_creds` (gRFC A97, "Configuring Call Credentials
//! in xDS Bootstrap File"): credentials added to every call to the server,
//! beside the channel's.
//!
//! ```json5
//! "call_creds": [{"type": "jwt_token_file", "config": {"jwt_token_file": "/var/run/token"}}]
//! ```
//!
//! The rules, from the gRFC:
//! - the list is optional; "the client will look through the entire list
//!   and use all types that it supports" and ignores the others;
//! - "if present, the config must pass whatever validation is appropriate
//!   for the call creds type; if it does not, the bootstrap config will be
//!   considered invalid";
//! - `jwt_token_file`: "Path to JWT token file. Required."
//!
//! And one the gRFC leaves to the credential: a bearer token over plaintext
//! is readable by anyone on the path. gRPC's credential requires a secure
//! transport (grpc-go's `RequireTransportSecurity` is true: a channel with
//! insecure credentials cannot carry it). Here that is found when the
//! bootstrap is read: a server whose channel is `insecure` and that lists a
//! supported call credential is an error naming the entry, rather than a
//! server every connection to which fails.

use std::fmt;
use std::path::PathBuf;

use super::server::ChannelCreds;
use super::walk::{At, Result};

/// The `type` of the JWT token file call credential.
pub const JWT_TOKEN_FILE: &str = "jwt_token_file";

/// One supported entry of a server's `call_creds`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CallCreds {
    /// `jwt_token_file`: a JWT read from `path`, sent as `authorization:
    /// Bearer <token>` on every call (gRFC A97 "JwtTokenFileCallCredentials").
    JwtTokenFile {
        /// The file holding the token.
        path: PathBuf,
    },
}

impl CallCreds {
    /// The bootstrap's name of the type.
    pub fn type_name(&self) -> &'static str {
        match self {
            CallCreds::JwtTokenFile { .. } => JWT_TOKEN_FILE,
        }
    }
}

/// The path, never a token: the configuration holds none.
impl fmt::Debug for CallCreds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallCreds::JwtTokenFile { path } => {
                f.debug_struct("JwtTokenFile").field("path", path).finish()
            }
        }
    }
}

/// Reads `call_creds` of the server entry `at`, whose channel has
/// `channel`: every supported entry, in order; others are skipped.
pub(crate) fn parse_call_creds(at: &At<'_>, channel: &ChannelCreds) -> Result<Vec<CallCreds>> {
    let Some(list) = at.get("call_creds")? else {
        return Ok(Vec::new());
    };
    let mut creds = Vec::new();
    for entry in list.array()? {
        entry.object()?;
        let kind = entry.require("type", "a string")?.str()?;
        let parsed = match kind {
            JWT_TOKEN_FILE => jwt_token_file(&entry)?,
            // "ignore any types that it does not support" (gRFC A97).
            _ => continue,
        };
        if *channel == ChannelCreds::Insecure {
            return Err(entry.error(format!(
                "{kind} call credentials need TLS channel credentials: a bearer token is \
                 never sent over an insecure channel"
            )));
        }
        creds.push(parsed);
    }
    Ok(creds)
}

/// `{"type": "jwt_token_file", "config": {"jwt_token_file": PATH}}`.
fn jwt_token_file(entry: &At<'_>) -> Result<CallCreds> {
    let Some(config) = entry.get("config")? else {
        return Err(entry.missing("config", "an object with \"jwt_token_file\" (a file path)"));
    };
    config.object()?;
    let path = config
        .require("jwt_token_file", "the path of the file holding the JWT")?
        .non_empty_str()?;
    Ok(CallCreds::JwtTokenFile {
        path: PathBuf::from(path),
    })
}
