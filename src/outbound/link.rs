//! The link to the receiver: one tokio task that connects out (TCP, or TLS where `hl7.tls_ca`
//! is set), sends the outbox's oldest message, and waits for the answer whose MSA-2 is that
//! message's MSH-10 before it sends the next (one message in flight, so a late answer is never
//! taken for the next message's). Accepted (AA/CA): done. Refused (AE/AR, CE/CR): parked with
//! the receiver's reason, never sent again. No answer within `hl7.ack_timeout_secs`: the same
//! message, same MSH-10, is sent again after a back-off doubling from `hl7.retry_min_ms` to
//! `hl7.retry_max_ms`; an observation that grows older than `hl7.max_observation_age_secs`
//! meanwhile is dropped and counted. Answers to other messages and frames that are not HL7
//! answers are skipped and counted; bytes outside a frame, a frame over the limit, or a closed
//! socket end the connection, and the link reconnects with the same back-off. When the outbox
//! is empty a keep-alive goes out every `hl7.keepalive_secs` and must be answered in time.
//!
//! The link only reads the outbox through its thread ([`Outbox`]) and publishes what it sees
//! in [`LinkStatus`]; nothing upstream waits on it, so a stuck receiver never slows scoring.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;

use super::LinkStatus;
use super::backoff::Backoff;
use super::message::{Ack, Verdict, keep_alive, parse_ack};
use super::outbox::{Cmd, Final, Outbox, Pending};
use crate::config::Hl7Config;
use crate::core::time::now_ms;
use crate::protocol::mllp::{Mllp, MllpError};

#[derive(Debug, thiserror::Error)]
pub(crate) enum LinkError {
    #[error("cannot connect to {receiver}: {reason}")]
    Connect { receiver: String, reason: String },
    #[error("the receiver closed the connection")]
    Closed,
    #[error("the receiver broke the framing: {0}")]
    Framing(#[from] MllpError),
    #[error("the receiver did not answer the keep-alive in time")]
    KeepAlive,
    #[error("the receiver refused the keep-alive ({0})")]
    KeepAliveRefused(String),
    #[error("the receiver left {UNANSWERED_IN_A_ROW} sends in a row unanswered")]
    Unanswered,
    #[error("the receiver did not take a message within the answer timeout")]
    WriteStalled,
    #[error("stopping")]
    Stopping,
}

/// Sends left unanswered in a row after which the connection is dropped and made again (a
/// receiver whose TCP is up but whose application hangs).
const UNANSWERED_IN_A_ROW: u32 = 3;

/// A connection's byte stream, plain or TLS.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

type Conn = Framed<Box<dyn Io>, Mllp>;

/// What the link task is given.
pub(crate) struct Link {
    pub(crate) cfg: Hl7Config,
    pub(crate) outbox: Outbox,
    pub(crate) status: Arc<LinkStatus>,
    /// Woken by the outbox thread when a message is queued.
    pub(crate) wake: Arc<Notify>,
    /// Set when `hl7.tls_ca` is.
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
    pub(crate) shutdown: CancellationToken,
}

impl Link {
    fn set_error(&self, e: &LinkError) {
        *self.status.last_error.lock().expect("status lock") = Some(e.to_string());
    }

    fn set_connected(&self, on: bool) {
        self.status.connected.store(on, Ordering::Relaxed);
        metrics::gauge!("holmes_hl7_connected").set(if on { 1.0 } else { 0.0 });
    }

    /// Connects, serves, and reconnects after a back-off until shutdown.
    pub(crate) async fn run(self) {
        let mut backoff = Backoff::new(self.cfg.retry_min_ms, self.cfg.retry_max_ms);
        let mut failing = false;
        loop {
            let res = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                r = self.connect() => r,
            };
            let res = match res {
                Ok(conn) => {
                    self.set_connected(true);
                    if failing {
                        tracing::debug!(receiver = %self.cfg.receiver, "HL7 link connected");
                    } else {
                        tracing::info!(receiver = %self.cfg.receiver, "HL7 link connected");
                    }
                    let acked = self.status.last_ack_ms.load(Ordering::Relaxed);
                    let r = self.serve(conn, &mut backoff).await;
                    self.set_connected(false);
                    // An outage ends with an acceptance, not a connection: a receiver that
                    // takes connections and refuses or ignores every message is one episode,
                    // logged once.
                    if self.status.last_ack_ms.load(Ordering::Relaxed) != acked {
                        failing = false;
                    }
                    r
                }
                Err(e) => Err(e),
            };
            if self.shutdown.is_cancelled() {
                return;
            }
            if let Err(e) = res {
                metrics::counter!("holmes_hl7_connection_failures_total").increment(1);
                // Loud once per outage, quiet while it lasts.
                if failing {
                    tracing::debug!(error = %e, "HL7 link down");
                } else {
                    tracing::warn!(error = %e, receiver = %self.cfg.receiver, "HL7 link down; messages wait in the outbox");
                    failing = true;
                }
                self.set_error(&e);
            }
            if !backoff.wait(&self.shutdown).await {
                return;
            }
        }
    }

    async fn connect(&self) -> Result<Conn, LinkError> {
        let receiver = self.cfg.receiver.clone();
        let fail = |reason: String| LinkError::Connect {
            receiver: receiver.clone(),
            reason,
        };
        let limit = Duration::from_secs_f64(self.cfg.connect_timeout_secs);
        let open = async {
            let tcp = tokio::net::TcpStream::connect(&receiver)
                .await
                .map_err(|e| fail(e.to_string()))?;
            let _ = tcp.set_nodelay(true);
            let io: Box<dyn Io> = match &self.tls {
                None => Box::new(tcp),
                Some(c) => {
                    let host =
                        self.cfg.tls_server_name.clone().unwrap_or_else(|| {
                            receiver.rsplit_once(':').map_or("", |h| h.0).into()
                        });
                    let name = rustls::pki_types::ServerName::try_from(host)
                        .map_err(|e| fail(format!("TLS server name: {e}")))?;
                    let tls = tokio_rustls::TlsConnector::from(c.clone())
                        .connect(name, tcp)
                        .await
                        .map_err(|e| fail(format!("TLS: {e}")))?;
                    Box::new(tls)
                }
            };
            Ok::<_, LinkError>(Framed::new(io, Mllp::new(self.cfg.max_frame_bytes)))
        };
        tokio::time::timeout(limit, open)
            .await
            .map_err(|_| fail(format!("no connection within {limit:?}")))?
    }

    /// Sends the outbox's messages on `conn`, one at a time, until the connection fails
    /// (`Err`) or shutdown (`Err(Stopping)`).
    async fn serve(&self, mut conn: Conn, backoff: &mut Backoff) -> Result<(), LinkError> {
        let keepalive = Duration::from_secs_f64(self.cfg.keepalive_secs);
        let mut quiet_since = Instant::now();
        loop {
            let Some(p) = self.outbox.next().await else {
                tokio::select! {
                    _ = self.shutdown.cancelled() => return Err(LinkError::Stopping),
                    _ = self.wake.notified() => {}
                    _ = tokio::time::sleep_until(quiet_since + keepalive) => {
                        self.keep_alive(&mut conn).await?;
                        quiet_since = Instant::now();
                    }
                    r = conn.next() => self.unsolicited(r)?,
                }
                continue;
            };
            self.deliver(&mut conn, &p, backoff).await?;
            quiet_since = Instant::now();
        }
    }

    /// A frame that arrived while nothing was in flight: skipped; a closed or broken
    /// connection ends it.
    fn unsolicited(
        &self,
        r: Option<Result<tokio_util::bytes::BytesMut, MllpError>>,
    ) -> Result<(), LinkError> {
        match r {
            None => Err(LinkError::Closed),
            Some(Err(e)) => Err(e.into()),
            Some(Ok(_)) => {
                metrics::counter!("holmes_hl7_unmatched_answers_total").increment(1);
                tracing::debug!("An HL7 frame with nothing in flight; skipped");
                Ok(())
            }
        }
    }

    /// Sends `p` until the receiver answers it (or, for an observation, it grows too old).
    async fn deliver(
        &self,
        conn: &mut Conn,
        p: &Pending,
        backoff: &mut Backoff,
    ) -> Result<(), LinkError> {
        let control_id = p.control_id();
        let max_age_ms = (self.cfg.max_observation_age_secs * 1000.0) as i64;
        let mut first = true;
        let mut unanswered = 0;
        loop {
            if p.observation && now_ms() - p.created_ms > max_age_ms {
                return self.finish(Final::Expired(p.id), backoff).await;
            }
            self.write(conn, p.body.as_bytes()).await?;
            self.outbox.tell(Cmd::Sent(p.id)).await;
            if first {
                metrics::counter!("holmes_hl7_sent_total").increment(1);
                first = false;
            } else {
                metrics::counter!("holmes_hl7_resent_total").increment(1);
            }
            match self.answer(conn, &control_id).await? {
                Some(a) => return self.finish(verdict(p.id, a), backoff).await,
                None => {
                    unanswered += 1;
                    if unanswered >= UNANSWERED_IN_A_ROW {
                        return Err(LinkError::Unanswered);
                    }
                    tracing::debug!(control_id = %control_id, "No HL7 answer in time; sending it again");
                    backoff.resend(&self.shutdown, LinkError::Stopping).await?;
                }
            }
        }
    }

    /// Records a message's final state; one the outbox cannot write leaves the message
    /// pending, so the link backs off before it goes again (no tight loop of resends while the
    /// database refuses).
    async fn finish(&self, f: Final, backoff: &mut Backoff) -> Result<(), LinkError> {
        let written = self.outbox.finish(f).await;
        backoff
            .settle(written, &self.shutdown, LinkError::Stopping)
            .await
    }

    /// Writes one frame; a receiver that does not read (its socket full) for the answer
    /// timeout costs the connection, never the shutdown.
    async fn write(&self, conn: &mut Conn, msg: &[u8]) -> Result<(), LinkError> {
        let limit = Duration::from_secs_f64(self.cfg.ack_timeout_secs);
        tokio::select! {
            _ = self.shutdown.cancelled() => Err(LinkError::Stopping),
            r = tokio::time::timeout(limit, conn.send(msg)) => match r {
                Ok(r) => Ok(r?),
                Err(_) => Err(LinkError::WriteStalled),
            },
        }
    }

    async fn keep_alive(&self, conn: &mut Conn) -> Result<(), LinkError> {
        let now = now_ms();
        let control_id = format!("KA{now}");
        self.write(conn, keep_alive(&self.cfg, &control_id, now).as_bytes())
            .await?;
        metrics::counter!("holmes_hl7_keepalives_total").increment(1);
        match self.answer(conn, &control_id).await? {
            // Only an accepting answer shows the receiver's application is taking messages.
            Some(a) if a.verdict == Verdict::Accepted => {
                self.status.last_ack_ms.store(now_ms(), Ordering::Relaxed);
                Ok(())
            }
            Some(a) => Err(LinkError::KeepAliveRefused(a.code)),
            None => Err(LinkError::KeepAlive),
        }
    }

    /// The answer to `control_id` (`None`: none within the timeout). Answers to other
    /// messages (late ones) and frames that are not answers are skipped.
    async fn answer(&self, conn: &mut Conn, control_id: &str) -> Result<Option<Ack>, LinkError> {
        let deadline = Instant::now() + Duration::from_secs_f64(self.cfg.ack_timeout_secs);
        loop {
            let r = tokio::select! {
                _ = self.shutdown.cancelled() => return Err(LinkError::Stopping),
                r = tokio::time::timeout_at(deadline, conn.next()) => r,
            };
            let frame = match r {
                Err(_) => return Ok(None),
                Ok(None) => return Err(LinkError::Closed),
                Ok(Some(Err(e))) => return Err(e.into()),
                Ok(Some(Ok(f))) => f,
            };
            match parse_ack(&frame) {
                Ok(a) if a.control_id == control_id => return Ok(Some(a)),
                Ok(a) => {
                    metrics::counter!("holmes_hl7_unmatched_answers_total").increment(1);
                    tracing::debug!(answers = %a.control_id, waiting_for = %control_id, "An HL7 answer to another message; skipped");
                }
                Err(e) => {
                    metrics::counter!("holmes_hl7_unmatched_answers_total").increment(1);
                    tracing::debug!(error = %e, "An HL7 frame that is no answer; skipped");
                }
            }
        }
    }
}

fn verdict(id: i64, a: Ack) -> Final {
    match a.verdict {
        Verdict::Accepted => Final::Acked { id, code: a.code },
        Verdict::Refused => Final::Parked {
            id,
            reason: if a.reason.is_empty() {
                "(no reason given)".into()
            } else {
                a.reason
            },
            code: a.code,
        },
    }
}

#[cfg(test)]
mod tests;
