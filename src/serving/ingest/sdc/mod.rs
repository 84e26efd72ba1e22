//! An IEEE 11073 SDC consumer (`[sdc]`): each configured device (a bedside monitor, by its
//! address: no WS-Discovery) is asked for its hosted services and its MDIB, subscribed to for
//! its waveforms, metrics and alert reports, and fed into its bed as a WebSocket monitor's
//! stream is: the same bed task, windows and data-quality states (a device that stops sending
//! shows as stale, then lost). Its ECG leads take the `[leads]` roles by their 11073-10101
//! codes; what its reports become for the bed ([`feed`]: 250 Hz frames on one grid, the `hr`
//! and `spo2` vitals, the monitor's own alarms) is sans-IO. The wire format is
//! [`protocol::sdc`](crate::protocol::sdc)'s.
//!
//! One task per device: request (WS-Transfer Get, Subscribe, GetMdib), then reports as the
//! device pushes them to the notification [`sink`] (one listener for every device, each
//! session at a path of its own), a Renew every `renew_secs`. With `[sdc] tls_ca` both
//! directions are mutual TLS: Holmes calls each device over HTTPS, showing its certificate
//! and trusting only the CA's, and the sink takes HTTPS from the CA's devices only. Any
//! failure (a request unanswered or faulted, the device ending the subscription, a renewal
//! refused) detaches the bed and starts again after a back-off; alarms open when a session
//! ends are reconciled with the next session's MDIB. The bed is held as a configured device
//! (`Claim::configured`): device tokens do not apply to it.

mod feed;
mod sink;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use self::feed::{Feed, Open, Stream};
use super::leads::lead_slots;
use crate::config::{LeadsConfig, SdcConfig, SdcDevice};
use crate::core::window::MAX_LEADS;
use crate::protocol::sdc::{self, Mdib, Report};
use crate::serving::ward::{Claim, Ward};

/// The device name an SDC device holds its bed under (the prefix is refused to WebSocket
/// monitors).
pub(crate) const DEVICE_PREFIX: &str = "sdc ";
/// Reports queued for one device's task.
const QUEUE: usize = 256;
/// The ECG sample periods taken, ms (2,000 Hz down to 100 Hz; below it a QRS is a few
/// samples).
const MIN_PERIOD_MS: f64 = 0.5;
const MAX_PERIOD_MS: f64 = 10.0;
/// A subscription asked for this long; devices grant what they allow (15 s is common).
const SUBSCRIBE_SECS: u32 = 60;

/// Why the consumer cannot start, or a session with a device ended.
#[derive(Debug, thiserror::Error)]
pub enum SdcConsumerError {
    #[error("sdc: {0}")]
    Config(String),
    #[error("sdc: cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Http(String),
    #[error(transparent)]
    Sdc(#[from] sdc::SdcError),
    #[error("the device offers no {0}")]
    NoService(&'static str),
    #[error("lead {0}: a sample period of {1} ms is outside 0.5-10 ms (2,000-100 Hz)")]
    Rate(String, f64),
    #[error("the ward refused the bed: {0}")]
    Refused(String),
    #[error("{0}")]
    Ended(&'static str),
}

/// The consumer's TLS, where `[sdc] tls_ca` asks for it: the client side (trusting the
/// devices' CA, showing Holmes's certificate) and the sink's server side (the same
/// certificate, asking each device for one the CA signed).
pub(crate) struct SdcTls {
    pub(crate) client: Arc<rustls::ClientConfig>,
    pub(crate) server: Arc<rustls::ServerConfig>,
}

/// Starts the notification sink and one task per device; returns the sink's address.
pub(crate) async fn start(
    cfg: &SdcConfig,
    tls: Option<SdcTls>,
    (leads, ranges): (&LeadsConfig, &BTreeMap<String, [f64; 2]>),
    ward: &Ward,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
) -> Result<SocketAddr, SdcConsumerError> {
    let addr = cfg.addr().map_err(SdcConsumerError::Config)?;
    if cfg.tls_ca.is_some() != tls.is_some() {
        return Err(SdcConsumerError::Config(
            "sdc.tls_ca and the TLS settings disagree".into(),
        ));
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| SdcConsumerError::Bind { addr, source })?;
    let bound = listener.local_addr().unwrap_or(addr);
    let host = if cfg.notify_host.is_empty() {
        bound.ip().to_string()
    } else {
        cfg.notify_host.clone()
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let base = format!("{scheme}://{host}:{}", bound.port());
    let (slots, receivers): (Vec<_>, Vec<_>) = cfg
        .devices
        .iter()
        .map(|_| {
            let (tx, rx) = mpsc::channel::<Bytes>(QUEUE);
            let token = Arc::new(std::sync::Mutex::new(String::new()));
            ((tx, token.clone()), (rx, token))
        })
        .unzip();
    let (client, acceptor) = match tls {
        Some(t) => (
            Some((*t.client).clone()),
            Some(tokio_rustls::TlsAcceptor::from(t.server)),
        ),
        None => (None, None),
    };
    sink::serve(listener, bound, acceptor, slots, shutdown.clone(), tracker);
    let http = match client {
        // One pool for every device: a device's connection is kept between its requests.
        Some(c) => HttpsConnectorBuilder::new()
            .with_tls_config(c)
            .https_only()
            .enable_http1()
            .build(),
        None => HttpsConnectorBuilder::new()
            .with_tls_config(no_tls())
            .https_or_http()
            .enable_http1()
            .build(),
    };
    let http = Client::builder(TokioExecutor::new()).build(http);
    for (i, (dev, (rx, token))) in cfg.devices.iter().zip(receivers).enumerate() {
        let consumer = Consumer {
            cfg: cfg.clone(),
            device: dev.clone(),
            leads: leads.clone(),
            ranges: ranges.clone(),
            notify: format!("{base}/sdc/{i}"),
            token,
            ward: ward.clone(),
            http: http.clone(),
        };
        tracker.spawn(consumer.run(rx, shutdown.clone()));
    }
    tracing::info!(addr = %bound, devices = cfg.devices.len(), tls = scheme == "https", "Consuming SDC devices");
    Ok(bound)
}

/// The client side where TLS is off: trusts no one, so an `https://` address a device names
/// fails at its handshake (the config refuses one in `[sdc]` itself).
fn no_tls() -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("aws-lc-rs supports TLS 1.2 and 1.3")
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth()
}

struct Consumer {
    cfg: SdcConfig,
    device: SdcDevice,
    leads: LeadsConfig,
    /// `ingest.vital_ranges`.
    ranges: BTreeMap<String, [f64; 2]>,
    /// This device's path on the notification sink, and its session's token there.
    notify: String,
    token: Arc<std::sync::Mutex<String>>,
    ward: Ward,
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl Consumer {
    async fn run(self, mut rx: mpsc::Receiver<Bytes>, shutdown: CancellationToken) {
        let mut backoff = self.cfg.retry_min_ms;
        // The device's alarms raised and not yet ended, across sessions.
        let mut open = Open::new();
        loop {
            let started = Instant::now();
            let session = tokio::select! {
                _ = shutdown.cancelled() => return,
                r = self.session(&mut rx, &mut open, &shutdown) => r,
            };
            match session {
                Ok(()) => return,
                Err(e) => {
                    tracing::warn!(device = %self.device.xaddr, error = %e, "SDC: the device's session ended; starting again");
                    metrics::counter!("holmes_sdc_sessions_ended_total").increment(1);
                }
            }
            if started.elapsed() > Duration::from_secs(60) {
                backoff = self.cfg.retry_min_ms;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(backoff)) => {}
            }
            backoff = (backoff * 2).min(self.cfg.retry_max_ms);
        }
    }

    /// POSTs a SOAP request; the answer's body.
    async fn request(&self, to: &str, body: String) -> Result<String, SdcConsumerError> {
        let req = axum::http::Request::post(to)
            .header("content-type", "application/soap+xml; charset=utf-8")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| SdcConsumerError::Http(format!("{to}: {e}")))?;
        let wait = Duration::from_secs_f64(self.cfg.request_timeout_secs);
        let answer = tokio::time::timeout(wait, async {
            let res = self.http.request(req).await.map_err(|e| e.to_string())?;
            let bytes = res.into_body().collect().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(bytes.to_bytes())
        })
        .await
        .map_err(|_| SdcConsumerError::Http(format!("{to}: no answer within {wait:?}")))?
        .map_err(|e| SdcConsumerError::Http(format!("{to}: {e}")))?;
        Ok(String::from_utf8_lossy(&answer).into_owned())
    }

    /// One session: subscribed, attached, fed until it fails or the daemon stops (`Ok`).
    async fn session(
        &self,
        rx: &mut mpsc::Receiver<Bytes>,
        open: &mut Open,
        shutdown: &CancellationToken,
    ) -> Result<(), SdcConsumerError> {
        let x = &self.device.xaddr;
        let hosted = sdc::hosted(&self.request(x, sdc::transfer_get(x)).await?)?;
        let service = |t: &'static str| {
            hosted
                .iter()
                .find(|h| h.types.iter().any(|n| n == t))
                .map(|h| h.address.clone())
                .ok_or(SdcConsumerError::NoService(t))
        };
        let (get, waves, events) = (
            service("GetService")?,
            service("WaveformService")?,
            service("StateEventService")?,
        );
        // A new token: reports of an earlier session are refused at the sink.
        let token: String = {
            let b: [u8; 16] = rand::random();
            b.iter().map(|x| format!("{x:02x}")).collect()
        };
        *self.token.lock().expect("lock") = token.clone();
        while rx.try_recv().is_ok() {}
        let base = format!("{}/{token}", self.notify);
        let (reports, end) = (format!("{base}/reports"), format!("{base}/end"));
        let mut managers = Vec::new();
        for (to, actions) in [
            (&waves, vec![sdc::WAVEFORM_STREAM]),
            (
                &events,
                vec![sdc::EPISODIC_ALERT_REPORT, sdc::EPISODIC_METRIC_REPORT],
            ),
        ] {
            let req = sdc::subscribe(to, &reports, &end, &actions, SUBSCRIBE_SECS);
            managers.push(sdc::subscription_manager(&self.request(to, req).await?)?);
        }
        let result = match self.request(&get, sdc::get_mdib(&get)).await {
            Ok(answer) => match sdc::mdib(&answer) {
                Ok(mdib) => self.feed(&mdib, rx, open, &managers, shutdown).await,
                Err(e) => Err(e.into()),
            },
            Err(e) => Err(e),
        };
        *self.token.lock().expect("lock") = String::new();
        // Best effort, at once: the device lets an unrenewed subscription expire anyway.
        let bye = managers
            .iter()
            .map(|m| self.request(m, sdc::unsubscribe(m)));
        let _ =
            tokio::time::timeout(Duration::from_secs(1), futures_util::future::join_all(bye)).await;
        result
    }

    /// Attaches the bed and feeds it the device's reports, renewing the subscriptions.
    async fn feed(
        &self,
        mdib: &Mdib,
        rx: &mut mpsc::Receiver<Bytes>,
        open: &mut Open,
        managers: &[String],
        shutdown: &CancellationToken,
    ) -> Result<(), SdcConsumerError> {
        let names: Vec<&str> = mdib.leads.iter().map(|l| l.name.as_str()).collect();
        let slots = lead_slots(&self.leads, &names);
        let mut announced: [Option<String>; MAX_LEADS] = Default::default();
        let mut streams = Vec::new();
        for (lead, slot) in mdib.leads.iter().zip(&slots) {
            let Some(slot) = *slot else { continue };
            if !(MIN_PERIOD_MS..=MAX_PERIOD_MS).contains(&lead.period_ms) {
                return Err(SdcConsumerError::Rate(lead.name.clone(), lead.period_ms));
            }
            announced[slot] = Some(lead.name.clone());
            streams.push(Stream::new(lead.handle.clone(), slot, lead.period_ms));
        }
        let vitals = mdib.vitals.iter().map(|(_, n)| n.to_string()).collect();
        let (out, mut replies) = mpsc::channel(64);
        let device = format!("{DEVICE_PREFIX}{}", self.device.xaddr)
            .chars()
            .take(128)
            .collect::<String>();
        let claim = Claim {
            bound: true,
            max_beds: None,
            configured: true,
        };
        let bed = &self.device.bed;
        let attach = self
            .ward
            .attach(bed, &device, claim, announced.clone(), vitals, out)
            .await
            .map_err(|e| SdcConsumerError::Refused(e.reason))?;
        let seqs = (attach.next_samples_seq, attach.next_vitals_seq);
        let mut fed = Feed::new(streams, announced.clone(), seqs, self.ranges.clone());
        // Alarms that began or ended while no session held the device.
        for c in fed.alarms(mdib.presence.clone(), mdib, open, Instant::now()) {
            if attach.tx.send(c).await.is_err() {
                break;
            }
        }
        let mut kicked = attach.kicked;
        let mut renew = tokio::time::interval(Duration::from_secs_f64(self.cfg.renew_secs));
        renew.tick().await;
        let result = loop {
            tokio::select! {
                _ = shutdown.cancelled() => break Ok(()),
                _ = &mut kicked => break Err(SdcConsumerError::Ended("the bed was taken over")),
                r = replies.recv() => if r.is_none() {
                    break Err(SdcConsumerError::Ended("the bed's task stopped"));
                },
                _ = renew.tick() => {
                    let mut failed = None;
                    for m in managers {
                        let done = self.request(m, sdc::renew(m, SUBSCRIBE_SECS)).await;
                        if let Err(e) = done.and_then(|a| sdc::check(&a).map_err(SdcConsumerError::from)) {
                            failed = Some(e);
                            break;
                        }
                    }
                    if let Some(e) = failed {
                        break Err(e);
                    }
                }
                got = rx.recv() => {
                    let Some(body) = got else { break Ok(()) };
                    let text = String::from_utf8_lossy(&body);
                    let report = match sdc::report(&text) {
                        Ok(r) => r,
                        Err(e) => {
                            tracing::warn!(device = %self.device.xaddr, error = %e, "SDC: a report does not read");
                            metrics::counter!("holmes_sdc_reports_unread_total").increment(1);
                            continue;
                        }
                    };
                    if report == Report::End {
                        break Err(SdcConsumerError::Ended("the device ended the subscription"));
                    }
                    let cmds = fed.commands(report, mdib, open);
                    let mut gone = false;
                    for c in cmds {
                        if attach.tx.send(c).await.is_err() {
                            gone = true;
                            break;
                        }
                    }
                    if gone {
                        break Err(SdcConsumerError::Ended("the bed's task stopped"));
                    }
                }
            }
        };
        self.ward.detach(bed, attach.conn).await;
        result
    }
}
