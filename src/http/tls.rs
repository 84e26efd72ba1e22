//! Transport security for the one HTTP server (the page, the API and the monitors'
//! `/ws/monitor`): rustls with the certificate and key named in `[server.tls]`, or plain HTTP,
//! which is refused on anything but a loopback address unless
//! `server.allow_plain_http_on_network` says otherwise.
//!
//! [`listen`](crate::http::listen)'s accept loop runs each connection's [`handshake`] in the
//! connection's own task (bounded by a timeout, and holding one of `server.max_connections`
//! places), so a slow or silent client never holds up accepting. [`client_config`] builds the
//! client side for `holmes simulate --ca` and the tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::config::{PlainHttpOnNetwork, TlsConfig};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {reason}")]
    Pem { path: PathBuf, reason: String },
    #[error("TLS settings: {0}")]
    Rustls(#[from] rustls::Error),
    #[error(transparent)]
    PlainOnNetwork(#[from] PlainHttpOnNetwork),
}

/// A client that has not finished its TLS handshake in this time is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The cryptography behind every TLS config we build (aws-lc-rs, rustls's default), named
/// explicitly so that another provider compiled in by a dependency cannot make the choice
/// ambiguous.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn pem_err(path: &Path) -> impl Fn(rustls::pki_types::pem::Error) -> TlsError + '_ {
    move |e| TlsError::Pem {
        path: path.to_owned(),
        reason: e.to_string(),
    }
}

/// Reads every certificate of a PEM file (at least one).
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(pem_err(path))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_err(path))?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            path: path.to_owned(),
            reason: "no CERTIFICATE block".into(),
        });
    }
    Ok(certs)
}

/// The server side: certificate chain and key from the PEM files. Blocking (reads them).
pub(crate) fn server_config(cfg: &TlsConfig) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let certs = certificates(&cfg.cert)?;
    let key = PrivateKeyDer::from_pem_file(&cfg.key).map_err(pem_err(&cfg.key))?;
    let mut c = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    // axum serves HTTP/1.1 (WebSocket upgrades included).
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(c))
}

/// The client side, trusting only the CA certificates in `ca_pem` (a private CA, or a
/// self-signed server certificate). Blocking (reads the file).
pub fn client_config(ca_pem: &Path) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certificates(ca_pem)? {
        roots.add(cert)?;
    }
    let c = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(c))
}

/// Runs the server side of a TLS handshake on an accepted connection; `None` when it fails
/// or takes longer than [`HANDSHAKE_TIMEOUT`] (port scanners and plain-HTTP clients end here:
/// counted, and logged at debug only).
pub(crate) async fn handshake<I>(acceptor: &TlsAcceptor, io: I) -> Option<TlsStream<I>>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(io)).await {
        Ok(Ok(stream)) => Some(stream),
        Ok(Err(e)) => {
            metrics::counter!("holmes_tls_handshake_failures_total").increment(1);
            tracing::debug!(error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            metrics::counter!("holmes_tls_handshake_failures_total").increment(1);
            tracing::debug!("TLS handshake timed out");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_or_empty_pem_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let cfg = TlsConfig {
            cert: empty.clone(),
            key: dir.path().join("absent.pem"),
        };
        let e = server_config(&cfg).unwrap_err().to_string();
        assert!(e.contains("empty.pem"), "{e}");
        let e = client_config(&dir.path().join("absent.pem"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("absent.pem"), "{e}");
    }
}
