//! One HTTP/1.1 connection to the FHIR server, with hyper's client connection over TCP or
//! TLS (`tokio-rustls`, trusting `fhir.tls_ca`): connect within a limit, send one request at a
//! time, read the answer within a limit and up to a size. The link owns it and opens another
//! when it fails.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::bytes::Bytes;

use crate::config::BaseUrl;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    #[error("cannot connect to {server}: {reason}")]
    Connect { server: String, reason: String },
    #[error("the connection failed: {0}")]
    Transport(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("cannot build the request: {0}")]
    Request(String),
}

/// A connection's byte stream, plain or TLS.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// An open connection.
pub(crate) struct Conn {
    send: SendRequest<Full<Bytes>>,
    /// Drives the connection; aborted when the connection is dropped.
    driver: tokio::task::JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// A request to send.
pub(crate) struct Request<'a> {
    pub(crate) method: &'a str,
    /// Below the base URL's path, with its query: `/Observation`.
    pub(crate) path: &'a str,
    pub(crate) headers: &'a [(&'a str, &'a str)],
    pub(crate) body: Option<&'a str>,
}

/// The server's answer.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: Bytes,
}

/// Opens a connection to `base` within `limit`.
pub(crate) async fn connect(
    base: &BaseUrl,
    tls: Option<&Arc<rustls::ClientConfig>>,
    limit: Duration,
) -> Result<Conn, ClientError> {
    let fail = |reason: String| ClientError::Connect {
        server: base.address(),
        reason,
    };
    let open = async {
        let tcp = tokio::net::TcpStream::connect(base.address())
            .await
            .map_err(|e| fail(e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        let io: Box<dyn Io> = match tls {
            None => Box::new(tcp),
            Some(c) => {
                let name = rustls::pki_types::ServerName::try_from(base.host.clone())
                    .map_err(|e| fail(format!("TLS server name: {e}")))?;
                let s = tokio_rustls::TlsConnector::from(c.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| fail(format!("TLS: {e}")))?;
                Box::new(s)
            }
        };
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| fail(format!("HTTP: {e}")))?;
        let driver = tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "FHIR connection ended");
            }
        });
        Ok::<_, ClientError>(Conn { send, driver })
    };
    tokio::time::timeout(limit, open)
        .await
        .map_err(|_| fail(format!("no connection within {limit:?}")))?
}

impl Conn {
    /// The server closed the connection (an idle keep-alive run out, typically).
    pub(crate) fn is_closed(&self) -> bool {
        self.send.is_closed()
    }

    /// Sends `req` to `base` and reads the answer, all within `limit`, its body up to
    /// `max_body` bytes. Any failure leaves the connection unusable.
    pub(crate) async fn send(
        &mut self,
        base: &BaseUrl,
        req: Request<'_>,
        limit: Duration,
        max_body: usize,
    ) -> Result<Answer, ClientError> {
        let mut b = hyper::Request::builder()
            .method(req.method)
            .uri(format!("{}{}", base.path, req.path))
            .header(hyper::header::HOST, host_header(base))
            .header(hyper::header::ACCEPT, "application/fhir+json");
        for (k, v) in req.headers {
            b = b.header(*k, *v);
        }
        let body = match req.body {
            Some(text) => {
                b = b.header(hyper::header::CONTENT_TYPE, "application/fhir+json");
                Full::new(Bytes::copy_from_slice(text.as_bytes()))
            }
            None => Full::new(Bytes::new()),
        };
        let request = b
            .body(body)
            .map_err(|e| ClientError::Request(e.to_string()))?;
        let exchange = async {
            self.send
                .ready()
                .await
                .map_err(|e| ClientError::Transport(e.to_string()))?;
            let resp = self
                .send
                .send_request(request)
                .await
                .map_err(|e| ClientError::Transport(e.to_string()))?;
            let status = resp.status().as_u16();
            let body = Limited::new(resp.into_body(), max_body)
                .collect()
                .await
                .map_err(|e| ClientError::Transport(format!("reading the answer: {e}")))?
                .to_bytes();
            Ok(Answer { status, body })
        };
        tokio::time::timeout(limit, exchange)
            .await
            .map_err(|_| ClientError::Timeout(limit))?
    }
}

/// The `Host` header: the host, and the port where it is not the scheme's.
fn host_header(base: &BaseUrl) -> String {
    let default = if base.https { 443 } else { 80 };
    let host = if base.host.contains(':') {
        format!("[{}]", base.host)
    } else {
        base.host.clone()
    };
    if base.port == default {
        host
    } else {
        format!("{host}:{}", base.port)
    }
}
