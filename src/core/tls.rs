//! TLS configurations from PEM files, for every side of Holmes that speaks TLS: the HTTP
//! server (`[server.tls]`), `holmes simulate --ca`, and the SDC consumer, which both calls its
//! devices and takes their reports over mutual TLS (`[sdc] tls_ca`). One cryptography provider
//! (aws-lc-rs, rustls's default) named explicitly, and one bounded server handshake.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A PEM file that does not read, or settings rustls refuses.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {reason}")]
    Pem { path: PathBuf, reason: String },
    #[error("TLS settings: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("TLS client verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

/// A peer that has not finished its TLS handshake in this time is dropped.
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

/// The CA certificates of a PEM file, as a root store.
fn roots(ca_pem: &Path) -> Result<Arc<rustls::RootCertStore>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certificates(ca_pem)? {
        roots.add(cert)?;
    }
    Ok(Arc::new(roots))
}

/// A certificate chain (leaf first) and its private key (PKCS#8, PKCS#1 or SEC1), each a PEM
/// file: who this side is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Identity<'a> {
    pub(crate) cert: &'a Path,
    pub(crate) key: &'a Path,
}

impl Identity<'_> {
    fn read(&self) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
        let certs = certificates(self.cert)?;
        let key = PrivateKeyDer::from_pem_file(self.key).map_err(pem_err(self.key))?;
        Ok((certs, key))
    }
}

/// The server side, presenting `me`; with `client_ca`, every client must present a
/// certificate that one of its CAs signed (mutual TLS). HTTP/1.1 only. Blocking (reads the
/// files).
pub(crate) fn server_config(
    me: Identity<'_>,
    client_ca: Option<&Path>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let (certs, key) = me.read()?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?;
    let builder = match client_ca {
        Some(ca) => builder.with_client_cert_verifier(
            WebPkiClientVerifier::builder_with_provider(roots(ca)?, provider()).build()?,
        ),
        None => builder.with_no_client_auth(),
    };
    let mut c = builder.with_single_cert(certs, key)?;
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(c))
}

/// The client side, trusting only the CA certificates in `ca_pem` (a private CA, or a
/// self-signed server certificate); presenting `me` where the server asks for a client
/// certificate. Blocking (reads the files).
pub(crate) fn client_config(
    ca_pem: &Path,
    me: Option<Identity<'_>>,
) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots(ca_pem)?);
    let c = match me {
        Some(me) => {
            let (certs, key) = me.read()?;
            builder.with_client_auth_cert(certs, key)?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(c))
}

/// Runs the server side of a TLS handshake on an accepted connection; `None` when it fails
/// or takes longer than [`HANDSHAKE_TIMEOUT`] (port scanners, plain-HTTP clients and clients
/// without an accepted certificate end here: counted, and logged at debug only).
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
        let absent = dir.path().join("absent.pem");
        let me = Identity {
            cert: &empty,
            key: &absent,
        };
        let e = server_config(me, None).unwrap_err().to_string();
        assert!(e.contains("empty.pem"), "{e}");
        let e = client_config(&absent, None).unwrap_err().to_string();
        assert!(e.contains("absent.pem"), "{e}");
    }

    /// A client with the CA's certificate gets through a server that asks for one; a client
    /// without is refused.
    #[tokio::test]
    async fn mutual_tls_lets_in_only_a_client_with_a_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert, ck.cert.pem()).unwrap();
        std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
        let me = Identity {
            cert: &cert,
            key: &key,
        };
        let acceptor = TlsAcceptor::from(server_config(me, Some(&cert)).unwrap());
        for (client, admitted) in [
            (client_config(&cert, Some(me)).unwrap(), true),
            (client_config(&cert, None).unwrap(), false),
        ] {
            let (a, b) = tokio::io::duplex(64 * 1024);
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let connect = async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut s = tokio_rustls::TlsConnector::from(client)
                    .connect(name, a)
                    .await?;
                s.write_all(b"x").await?;
                let mut one = [0u8; 1];
                s.read_exact(&mut one).await?;
                Ok::<_, std::io::Error>(())
            };
            let accept = async {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut s = handshake(&acceptor, b).await?;
                let mut one = [0u8; 1];
                s.read_exact(&mut one).await.ok()?;
                s.write_all(b"y").await.ok()?;
                s.flush().await.ok()
            };
            let (c, s) = tokio::join!(connect, accept);
            assert_eq!(s.is_some(), admitted, "server side, admitted {admitted}");
            assert_eq!(c.is_ok(), admitted, "client side: {c:?}");
        }
    }
}
