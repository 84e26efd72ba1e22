//! Transport security for the one HTTP server (the page, the API and the monitors'
//! `/ws/monitor`): rustls with the certificate and key named in `[server.tls]`, or plain HTTP,
//! which is refused on anything but a loopback address unless
//! `server.allow_plain_http_on_network` says otherwise. The configurations are
//! [`core::tls`](crate::core::tls)'s, which the SDC consumer shares.
//!
//! [`listen`](crate::http::listen)'s accept loop runs each connection's [`handshake`] in the
//! connection's own task (bounded by a timeout, and holding one of `server.max_connections`
//! places), so a slow or silent client never holds up accepting. [`client_config`] builds the
//! client side for `holmes simulate --ca` and the tests.

use std::path::Path;
use std::sync::Arc;

use crate::config::{PlainHttpOnNetwork, TlsConfig};
pub(crate) use crate::core::tls::handshake;
use crate::core::tls::{self as files, Identity};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error(transparent)]
    Files(#[from] files::TlsError),
    #[error(transparent)]
    PlainOnNetwork(#[from] PlainHttpOnNetwork),
}

/// The server side: certificate chain and key from the PEM files. Blocking (reads them).
pub(crate) fn server_config(cfg: &TlsConfig) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let me = Identity {
        cert: &cfg.cert,
        key: &cfg.key,
    };
    Ok(files::server_config(me, None)?)
}

/// The client side, trusting only the CA certificates in `ca_pem` (a private CA, or a
/// self-signed server certificate). Blocking (reads the file).
pub fn client_config(ca_pem: &Path) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    Ok(files::client_config(ca_pem, None)?)
}
