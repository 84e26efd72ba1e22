//! An IEEE 11073 SDC consumer (`[sdc]`): each configured device (a bedside monitor, by its
//! address: no WS-Discovery) is asked for its hosted services and its MDIB, subscribed to for
//! its waveforms, metrics and alert reports, and fed into its bed as a WebSocket monitor's
//! stream is: the same bed task, windows and data-quality states (a device that stops sending
//! shows as stale, then lost). Its ECG leads take the `[leads]` roles by their 11073-10101 codes
//! and are brought to 250 Hz (a 500 or 1,000 Hz lead by averaging each 2 or 4 samples, a
//! low-pass before the decimation); its heart rate becomes the `hr` vital; an alert condition
//! whose presence turns true is the monitor's own alarm (its kind by the condition's code, as
//! [`pcd04::kind_of`] reads it), a VT or VF one judged by the adjudicator, and its clearing the
//! alarm's end. The wire format is [`protocol::sdc`](crate::protocol::sdc)'s.
//!
//! One task per device: request (WS-Transfer Get, Subscribe, GetMdib), then reports as the
//! device pushes them to the notification sink (one HTTP listener for every device, each at
//! its own path; a report that finds its device's queue full is dropped and counted), a
//! Renew every `renew_secs`. Any failure (a request unanswered or faulted, the device ending
//! the subscription, a renewal refused) detaches the bed and starts again after a back-off.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::leads::lead_slots;
use crate::config::{LeadsConfig, SdcConfig, SdcDevice};
use crate::core::time::now_ms;
use crate::core::window::{MAX_LEADS, SAMPLE_RATE_HZ};
use crate::protocol::pcd04;
use crate::protocol::sdc::{self, Mdib, Report};
use crate::serving::ward::{AlarmMsg, BedCmd, Claim, SampleFrame, Ward};

/// Reports queued for one device's task.
const QUEUE: usize = 256;
/// A subscription asked for this long; devices grant what they allow (15 s is common).
const SUBSCRIBE_SECS: u32 = 60;

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
}

/// Why a session with a device ended.
#[derive(Debug, thiserror::Error)]
enum SessionError {
    #[error("{0}")]
    Http(String),
    #[error(transparent)]
    Sdc(#[from] sdc::SdcError),
    #[error("the device offers no {0}")]
    NoService(&'static str),
    #[error("lead {0}: a sample period of {1} ms does not divide 4 ms (250 Hz)")]
    Rate(String, f64),
    #[error("the ward refused the bed: {0}")]
    Refused(String),
    #[error("{0}")]
    Ended(&'static str),
}

/// Starts the notification sink and one task per device; returns the sink's address.
pub(crate) async fn start(
    cfg: &SdcConfig,
    leads: &LeadsConfig,
    ward: &Ward,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
) -> Result<SocketAddr, SdcConsumerError> {
    let addr = cfg.addr().map_err(SdcConsumerError::Config)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| SdcConsumerError::Bind { addr, source })?;
    let bound = listener.local_addr().unwrap_or(addr);
    let host = if cfg.notify_host.is_empty() {
        bound.ip().to_string()
    } else {
        cfg.notify_host.clone()
    };
    let base = format!("http://{host}:{}", bound.port());
    let (senders, receivers): (Vec<_>, Vec<_>) = cfg
        .devices
        .iter()
        .map(|_| mpsc::channel::<Bytes>(QUEUE))
        .unzip();
    let app = Router::new()
        .route("/sdc/{device}/{what}", post(notified))
        .with_state(Arc::new(senders));
    let token = shutdown.clone();
    tracker.spawn(async move {
        let serve = axum::serve(listener, app).with_graceful_shutdown(token.cancelled_owned());
        if let Err(e) = serve.await {
            tracing::error!(error = %e, "SDC: the notification sink stopped");
        }
    });
    for (i, (dev, rx)) in cfg.devices.iter().zip(receivers).enumerate() {
        let consumer = Consumer {
            cfg: cfg.clone(),
            device: dev.clone(),
            leads: leads.clone(),
            notify: format!("{base}/sdc/{i}"),
            ward: ward.clone(),
            http: Client::builder(TokioExecutor::new()).build_http(),
        };
        tracker.spawn(consumer.run(rx, shutdown.clone()));
    }
    tracing::info!(addr = %bound, devices = cfg.devices.len(), "Consuming SDC devices");
    Ok(bound)
}

/// A device's report, handed to its task; 202 with an empty body, as devices expect.
async fn notified(
    State(senders): State<Arc<Vec<mpsc::Sender<Bytes>>>>,
    Path((device, _what)): Path<(usize, String)>,
    body: Bytes,
) -> StatusCode {
    let Some(tx) = senders.get(device) else {
        return StatusCode::NOT_FOUND;
    };
    if tx.try_send(body).is_err() {
        metrics::counter!("holmes_sdc_reports_dropped_total").increment(1);
    }
    StatusCode::ACCEPTED
}

struct Consumer {
    cfg: SdcConfig,
    device: SdcDevice,
    leads: LeadsConfig,
    /// This device's path on the notification sink.
    notify: String,
    ward: Ward,
    http: Client<HttpConnector, Full<Bytes>>,
}

impl Consumer {
    async fn run(self, mut rx: mpsc::Receiver<Bytes>, shutdown: CancellationToken) {
        let mut backoff = self.cfg.retry_min_ms;
        loop {
            let started = Instant::now();
            match self.session(&mut rx, &shutdown).await {
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
    async fn request(&self, to: &str, body: String) -> Result<String, SessionError> {
        let req = axum::http::Request::post(to)
            .header("content-type", "application/soap+xml; charset=utf-8")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| SessionError::Http(format!("{to}: {e}")))?;
        let wait = Duration::from_secs_f64(self.cfg.request_timeout_secs);
        let answer = tokio::time::timeout(wait, async {
            let res = self.http.request(req).await.map_err(|e| e.to_string())?;
            let bytes = res.into_body().collect().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(bytes.to_bytes())
        })
        .await
        .map_err(|_| SessionError::Http(format!("{to}: no answer within {wait:?}")))?
        .map_err(|e| SessionError::Http(format!("{to}: {e}")))?;
        Ok(String::from_utf8_lossy(&answer).into_owned())
    }

    /// One session: subscribed, attached, fed until it fails or the daemon stops (`Ok`).
    async fn session(
        &self,
        rx: &mut mpsc::Receiver<Bytes>,
        shutdown: &CancellationToken,
    ) -> Result<(), SessionError> {
        let x = &self.device.xaddr;
        let hosted = sdc::hosted(&self.request(x, sdc::transfer_get(x)).await?)?;
        let service = |t: &'static str| {
            hosted
                .iter()
                .find(|h| h.types.iter().any(|n| n == t))
                .map(|h| h.address.clone())
                .ok_or(SessionError::NoService(t))
        };
        let (get, waves, events) = (
            service("GetService")?,
            service("WaveformService")?,
            service("StateEventService")?,
        );
        // Reports a device sent an earlier session are stale.
        while rx.try_recv().is_ok() {}
        let (reports, end) = (
            format!("{}/reports", self.notify),
            format!("{}/end", self.notify),
        );
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
        let mdib = sdc::mdib(&self.request(&get, sdc::get_mdib(&get)).await?)?;
        let result = self.feed(&mdib, rx, &managers, shutdown).await;
        for m in &managers {
            let _ = self.request(m, sdc::unsubscribe(m)).await;
        }
        result
    }

    /// Attaches the bed and feeds it the device's reports, renewing the subscriptions.
    async fn feed(
        &self,
        mdib: &Mdib,
        rx: &mut mpsc::Receiver<Bytes>,
        managers: &[String],
        shutdown: &CancellationToken,
    ) -> Result<(), SessionError> {
        let names: Vec<&str> = mdib.leads.iter().map(|l| l.name.as_str()).collect();
        let slots = lead_slots(&self.leads, &names);
        let mut announced: [Option<String>; MAX_LEADS] = Default::default();
        let mut streams = Vec::new();
        for (lead, slot) in mdib.leads.iter().zip(&slots) {
            let Some(slot) = *slot else { continue };
            let step = 1000.0 / SAMPLE_RATE_HZ as f64;
            let k = step / lead.period_ms;
            if (k - k.round()).abs() > 1e-6 || k.round() < 1.0 {
                return Err(SessionError::Rate(lead.name.clone(), lead.period_ms));
            }
            announced[slot] = Some(lead.name.clone());
            streams.push(Stream {
                handle: lead.handle.clone(),
                slot,
                every: k.round() as usize,
                carry: Vec::new(),
            });
        }
        let vitals = mdib.heart_rate.iter().map(|_| "hr".to_string()).collect();
        let (out, mut replies) = mpsc::channel(64);
        let device = format!("sdc {}", self.device.xaddr)
            .chars()
            .take(128)
            .collect::<String>();
        let claim = Claim {
            bound: true,
            max_beds: None,
        };
        let bed = &self.device.bed;
        let attach = self
            .ward
            .attach(bed, &device, claim, announced.clone(), vitals, out)
            .await
            .map_err(|e| SessionError::Refused(e.reason))?;
        let mut fed = Fed {
            samples_seq: attach.next_samples_seq,
            vitals_seq: attach.next_vitals_seq,
            streams,
            open: Vec::new(),
        };
        let mut kicked = attach.kicked;
        let mut renew = tokio::time::interval(Duration::from_secs_f64(self.cfg.renew_secs));
        renew.tick().await;
        let result = loop {
            tokio::select! {
                _ = shutdown.cancelled() => break Ok(()),
                _ = &mut kicked => break Err(SessionError::Ended("the bed was taken over")),
                r = replies.recv() => if r.is_none() {
                    break Err(SessionError::Ended("the bed's task stopped"));
                },
                _ = renew.tick() => {
                    let mut failed = None;
                    for m in managers {
                        let done = self.request(m, sdc::renew(m, SUBSCRIBE_SECS)).await;
                        if let Err(e) = done.and_then(|a| sdc::check(&a).map_err(SessionError::from)) {
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
                        break Err(SessionError::Ended("the device ended the subscription"));
                    }
                    let cmds = fed.commands(report, mdib, &announced);
                    let mut gone = false;
                    for c in cmds {
                        if attach.tx.send(c).await.is_err() {
                            gone = true;
                            break;
                        }
                    }
                    if gone {
                        break Err(SessionError::Ended("the bed's task stopped"));
                    }
                }
            }
        };
        self.ward.detach(bed, attach.conn).await;
        result
    }
}

/// One ECG lead on its way to 250 Hz: its slot, how many device samples make one, and the
/// samples of a group a report cut.
struct Stream {
    handle: String,
    slot: usize,
    every: usize,
    carry: Vec<f32>,
}

/// A frame's samples, per lead slot.
type Leads = [Option<Vec<Option<f32>>>; MAX_LEADS];

/// A session's state between reports.
struct Fed {
    samples_seq: u64,
    vitals_seq: u64,
    streams: Vec<Stream>,
    /// The alert conditions present: handle, the alarm's id and its onset.
    open: Vec<(String, String, i64)>,
}

impl Fed {
    /// What a report becomes for the bed.
    fn commands(
        &mut self,
        report: Report,
        mdib: &Mdib,
        names: &[Option<String>; MAX_LEADS],
    ) -> Vec<BedCmd> {
        let arrived = Instant::now();
        match report {
            Report::Waveform(parts) => {
                let mut frames = Vec::new();
                for (handle, t0, samples) in parts {
                    let Some(s) = self.streams.iter_mut().find(|s| s.handle == handle) else {
                        continue;
                    };
                    // The first whole group's time: the carried samples came before t0.
                    let period = 1000.0 / (SAMPLE_RATE_HZ as f64 * s.every as f64);
                    let start = t0 - (s.carry.len() as f64 * period).round() as i64;
                    s.carry.extend(samples);
                    let whole = s.carry.len() / s.every * s.every;
                    let out: Vec<Option<f32>> = s.carry[..whole]
                        .chunks(s.every)
                        .map(|c| {
                            let m = c.iter().sum::<f32>() / c.len() as f32;
                            m.is_finite().then_some(m)
                        })
                        .collect();
                    s.carry.drain(..whole);
                    if out.is_empty() {
                        continue;
                    }
                    let mut leads: Leads = Default::default();
                    let n = out.len();
                    leads[s.slot] = Some(out);
                    frames.push((start, n, leads));
                }
                // Leads of one report that start together and are as long go in one frame.
                let mut merged: Vec<(i64, usize, Leads)> = Vec::new();
                for (t, n, leads) in frames {
                    match merged.iter_mut().find(|m| m.0 == t && m.1 == n) {
                        Some(m) => {
                            for (k, l) in leads.into_iter().enumerate() {
                                if l.is_some() {
                                    m.2[k] = l;
                                }
                            }
                        }
                        None => merged.push((t, n, leads)),
                    }
                }
                merged
                    .into_iter()
                    .map(|(t_ms, n, leads)| {
                        self.samples_seq += 1;
                        BedCmd::Samples(SampleFrame {
                            seq: self.samples_seq - 1,
                            t_ms,
                            n,
                            leads,
                            lead_off: [false; MAX_LEADS],
                            arrived,
                        })
                    })
                    .collect()
            }
            Report::Metrics(values) => {
                let Some(hr) = &mdib.heart_rate else {
                    return Vec::new();
                };
                let Some((_, v)) = values.into_iter().find(|(h, _)| h == hr) else {
                    return Vec::new();
                };
                self.vitals_seq += 1;
                vec![BedCmd::Vitals {
                    seq: self.vitals_seq - 1,
                    t_ms: now_ms(),
                    values: vec![("hr".into(), v.filter(|x| x.is_finite()))],
                    arrived,
                }]
            }
            Report::Alerts(changes) => {
                let mut out = Vec::new();
                for (handle, present, when) in changes {
                    let t_ms = when.unwrap_or_else(now_ms);
                    let open = self.open.iter().position(|o| o.0 == handle);
                    match (present, open) {
                        (true, None) => {
                            let code = mdib
                                .alerts
                                .iter()
                                .find(|a| a.0 == handle)
                                .map_or("", |a| a.1.as_str());
                            let id = format!("{handle}@{t_ms}");
                            self.open.push((handle, id.clone(), t_ms));
                            out.push(BedCmd::MonitorAlarm(AlarmMsg {
                                id,
                                kind: pcd04::kind_of(code, "", ""),
                                t_ms,
                                names: names.clone(),
                                arrived,
                                received_ms: now_ms(),
                            }));
                        }
                        (false, Some(i)) => {
                            let (_, id, _) = self.open.remove(i);
                            out.push(BedCmd::MonitorAlarmEnd { id, t_ms });
                        }
                        _ => {}
                    }
                }
                out
            }
            Report::End | Report::Other(_) => Vec::new(),
        }
    }
}
