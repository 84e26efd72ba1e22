//! `holmes bench`: the daemon (`holmes serve`, a child process) under a load of simulated
//! monitors on loopback, bounded in time. Reports ingest rates and loss, window outcomes,
//! end-to-end latency (last sample to commit) from the rows the daemon stored, the time spent
//! queueing, computing and committing from the daemon's own metrics, and the daemon's CPU and
//! resident memory. Scenarios: steady (staggered windows), aligned (every bed's windows close
//! together), a reconnect storm, an admission ramp, twice the planned beds, and ingest only;
//! `--capacity` searches for the most beds that stay within the budget. `--drain` ([`drain`])
//! times the daemon draining a receiver outage's backlog instead. With `--monitor-alarms` the
//! monitors also send the proxy monitor's VT/VF alarms, and the run reports Holmes's opinion
//! on them ([`opinion`]). `--pcd04` ([`pcd04`]) times a gateway's alarm reports in, and `--sdc`
//! ([`sdc`]) a ward of SDC devices beside the same ward over the WebSocket path.
//!
//! Neighbours: [`sim`](crate::tools::sim) plays the monitors in this process, [`daemon`] runs the
//! server, [`prom`] reads its metrics, the composer picks the members for `--composed`.

pub(crate) mod daemon;
pub(crate) mod drain;
pub(crate) mod opinion;
pub(crate) mod pcd04;
pub(crate) mod prom;
pub(crate) mod sdc;

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::{Config, Stagger};
use crate::core::stats::percentile;
use crate::tools::sim::{SimOptions, Source};
use daemon::Daemon;

#[derive(Debug, thiserror::Error)]
pub(crate) enum BenchError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("writing the report: {0}")]
    Json(#[from] serde_json::Error),
    #[error("benchmark configuration: {0}")]
    Config(String),
    #[error("the daemon exited during start-up ({0}); its log ends:\n{1}")]
    DaemonExited(String, String),
    #[error("the daemon did not answer within {0} s of starting")]
    NotReady(u64),
    #[error("talking to the daemon: {0}")]
    Http(String),
    #[error("reading the daemon's database: {0}")]
    Db(#[from] rusqlite::Error),
    #[error(transparent)]
    Sim(#[from] crate::tools::sim::SimError),
    #[error("composing the ensemble: {0}")]
    Compose(String),
    #[error(transparent)]
    Zoo(#[from] crate::zoo::ZooError),
    #[error(transparent)]
    Device(#[from] crate::serving::ingest::devices::DeviceError),
    #[error(
        "the daemon did not keep up with {beds} monitors ({ingested} of {sent} frames ingested, {gaps} gaps): measure at fewer beds"
    )]
    FellBehind {
        beds: usize,
        ingested: u64,
        sent: u64,
        gaps: u64,
    },
}

/// What the load does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Scenario {
    /// Every bed streams for the whole run; window closings spread over the hop.
    Steady,
    /// As steady, but every bed's windows close at the same moment (the worst-case burst).
    Aligned,
    /// Halfway through, every monitor drops its connection at once and comes back.
    Storm,
    /// Beds join one after another over the first third of the run.
    Ramp,
    /// Twice the beds the ensemble was chosen for.
    Overload,
    /// Ingest only: windows close but are not scored.
    Ingest,
}

/// What `holmes bench` asks for (the command line's flags).
#[derive(Debug, Clone)]
pub(crate) struct BenchArgs {
    /// Simulated beds: one run per count, or the start of a capacity search.
    pub(crate) beds: Vec<usize>,
    pub(crate) scenario: Scenario,
    /// Ensemble members (empty: the config's).
    pub(crate) members: Vec<String>,
    /// Serve the ensemble the composer picks for each bed count instead of fixed members.
    pub(crate) composed: bool,
    /// Every model in the zoo as a member (the memory test).
    pub(crate) whole_zoo: bool,
    /// Wall-clock seconds of load per run.
    pub(crate) duration: f64,
    /// Replay PhysioNet records instead of synthetic ECG.
    pub(crate) records: bool,
    /// Signal seconds per wall second.
    pub(crate) speed: f64,
    /// Find the most beds within the budget: double until a run fails, then bisect.
    pub(crate) capacity: bool,
    /// The records' beds also send the proxy monitor's alarms; the opinion on them is measured.
    pub(crate) monitor_alarms: bool,
    pub(crate) json: bool,
}

impl std::str::FromStr for Scenario {
    type Err = String;

    fn from_str(s: &str) -> Result<Scenario, String> {
        Ok(match s {
            "steady" => Scenario::Steady,
            "aligned" => Scenario::Aligned,
            "storm" => Scenario::Storm,
            "ramp" => Scenario::Ramp,
            "overload" => Scenario::Overload,
            "ingest" => Scenario::Ingest,
            _ => {
                return Err(format!(
                    "unknown scenario {s:?} (steady, aligned, storm, ramp, overload or ingest)"
                ));
            }
        })
    }
}

/// One run's plan.
#[derive(Debug, Clone)]
pub(crate) struct BenchOptions {
    pub(crate) scenario: Scenario,
    pub(crate) beds: usize,
    /// Ensemble members (zoo model names).
    pub(crate) members: Vec<String>,
    /// The composer's validation ROC-AUC for these members, when it picked them.
    pub(crate) val_roc_auc: Option<f64>,
    /// Wall-clock length of the load.
    pub(crate) duration: Duration,
    pub(crate) source: Source,
    /// Signal seconds per wall second (1 for a real load; more only for smoke tests).
    pub(crate) speed: f64,
    /// The monitors send the proxy monitor's alarms (records only).
    pub(crate) monitor_alarms: bool,
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct BenchReport {
    pub(crate) scenario: Scenario,
    pub(crate) beds: usize,
    pub(crate) members: Vec<String>,
    pub(crate) val_roc_auc: Option<f64>,
    /// Wall-clock seconds of load (rates and CPU are over this span).
    pub(crate) seconds: f64,
    /// Frames the monitors sent, and frames the daemon accepted into beds.
    pub(crate) frames_sent: u64,
    pub(crate) frames_ingested: u64,
    pub(crate) frames_per_sec: f64,
    pub(crate) samples_per_sec: f64,
    /// Largest delay of a monitor's frame behind its schedule (ms): the load generator or
    /// the daemon's back-pressure falling behind.
    pub(crate) max_send_lag_ms: f64,
    /// Gaps the ward recorded (samples that never arrived).
    pub(crate) gaps: u64,
    /// Connections beyond each monitor's first.
    pub(crate) reconnects: u64,
    pub(crate) windows_closed: u64,
    pub(crate) windows: usize,
    pub(crate) scored: usize,
    pub(crate) partial: usize,
    /// Partial windows that the beat counter did not read in time (`beats` missing).
    pub(crate) partial_uncounted: usize,
    pub(crate) superseded: usize,
    pub(crate) dropped: usize,
    pub(crate) insufficient: usize,
    pub(crate) latency_ms_p50: f64,
    pub(crate) latency_ms_p95: f64,
    pub(crate) latency_ms_p99: f64,
    pub(crate) latency_ms_max: f64,
    /// Mean wait in model queues and mean batch compute, ms (from the daemon's metrics).
    pub(crate) queue_ms_mean: f64,
    pub(crate) compute_ms_mean: f64,
    /// The beat counter's mean reading of a window, ms (NaN when none serves).
    pub(crate) beats_ms_mean: f64,
    /// SQLite commit latency per write transaction, ms.
    pub(crate) commit_ms_p50: f64,
    pub(crate) commit_ms_p95: f64,
    pub(crate) commit_ms_p99: f64,
    pub(crate) commits: u64,
    /// Daemon CPU seconds per wall second over the load (2.0 = both cores of this machine).
    pub(crate) daemon_cpu_cores: f64,
    /// The bench's own CPU over the load, per wall second: the simulated monitors, which
    /// share this machine's cores with the daemon (on a ward they are other machines).
    pub(crate) simulator_cpu_cores: f64,
    /// Largest resident memory sampled during the load, and the peak since start (MB).
    pub(crate) daemon_rss_mb: f64,
    pub(crate) daemon_peak_rss_mb: f64,
    pub(crate) slo_ms: u64,
    /// p95 within the budget, nothing superseded or dropped, nothing lost on the way in.
    pub(crate) within_budget: bool,
    /// The stage that dominates: `ingest`, `inference` or `sqlite`.
    pub(crate) bottleneck: &'static str,
    /// The opinion on the monitors' VT/VF alarms, where they sent them.
    pub(crate) monitor_alarms: Option<opinion::OpinionFigures>,
}

/// `holmes bench`.
pub(crate) fn main(cfg: Config, args: BenchArgs) -> Result<(), BenchError> {
    raise_open_files();
    let source = if args.records {
        Source::Records(crate::training::dataset::default_data_dir())
    } else {
        Source::Synthetic
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let plan = |n: usize| -> Result<BenchOptions, BenchError> {
        let (members, val_roc_auc) = members_for(&cfg, &args, n)?;
        let beds = if args.scenario == Scenario::Overload {
            2 * n
        } else {
            n
        };
        Ok(BenchOptions {
            scenario: args.scenario,
            beds,
            members,
            val_roc_auc,
            duration: Duration::from_secs_f64(args.duration),
            source: source.clone(),
            speed: args.speed,
            monitor_alarms: args.monitor_alarms,
        })
    };
    let mut reports = Vec::new();
    let show = |r: &BenchReport| {
        if !args.json {
            println!("{}", r.to_text());
        }
    };
    if args.capacity {
        let start = args.beds.first().copied().unwrap_or(16).max(1);
        let (mut lo, mut hi) = (0usize, 0usize);
        let mut n = start;
        loop {
            let r = rt.block_on(run(cfg.clone(), plan(n)?))?;
            show(&r);
            let ok = r.within_budget;
            reports.push(r);
            if ok {
                lo = n;
                if hi == 0 {
                    n *= 2;
                    if n > cfg.ward.max_beds.max(4096) {
                        break;
                    }
                    continue;
                }
            } else {
                hi = n;
            }
            let step = (lo / 8).max(4);
            if hi == 0 || hi - lo <= step {
                break;
            }
            n = (lo + hi) / 2;
        }
        if !args.json {
            let limit = reports
                .iter()
                .find(|r| r.beds == hi)
                .map_or("not reached", |r| r.bottleneck);
            println!(
                "capacity: {lo} beds within the {} ms budget (first failure at {hi} beds; limited by {limit})",
                cfg.engine.slo_ms
            );
        }
    } else {
        for &n in &args.beds {
            let r = rt.block_on(run(cfg.clone(), plan(n)?))?;
            show(&r);
            reports.push(r);
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    }
    Ok(())
}

/// Measures what the ingest costs the daemon on this machine (`holmes profile --ingest`):
/// `beds` synthetic monitors streaming for `secs` into a daemon with scoring off, as the
/// `ingest` scenario runs it. Refused when frames were lost on the way in, since the figure
/// would then price less than the beds' streams.
pub(crate) fn measure_ingest(
    cfg: &Config,
    beds: usize,
    secs: f64,
) -> Result<crate::serving::ingest::cost::IngestCost, BenchError> {
    if !(secs.is_finite() && secs >= 1.0) {
        return Err(BenchError::Config(format!(
            "the ingest is measured over at least a second (got {secs} s)"
        )));
    }
    raise_open_files();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let opts = BenchOptions {
        scenario: Scenario::Ingest,
        beds,
        members: cfg.ensemble.members.clone(),
        val_roc_auc: None,
        duration: Duration::from_secs_f64(secs),
        source: Source::Synthetic,
        speed: 1.0,
        monitor_alarms: false,
    };
    let r = rt.block_on(run(cfg.clone(), opts))?;
    if !r.within_budget {
        return Err(BenchError::FellBehind {
            beds,
            ingested: r.frames_ingested,
            sent: r.frames_sent,
            gaps: r.gaps,
        });
    }
    Ok(crate::serving::ingest::cost::IngestCost {
        hardware: crate::serving::engine::profile::hardware(),
        beds,
        seconds: r.seconds,
        cpu_cores: r.daemon_cpu_cores,
    })
}

/// The members for `n` planned beds, and the composer's validation ROC-AUC when it chose them.
fn members_for(
    cfg: &Config,
    args: &BenchArgs,
    n: usize,
) -> Result<(Vec<String>, Option<f64>), BenchError> {
    if args.whole_zoo {
        let names = crate::zoo::model_dirs(&cfg.ensemble.models_dir)?
            .iter()
            .filter_map(|d| Some(d.file_name()?.to_string_lossy().into_owned()))
            .collect();
        return Ok((names, None));
    }
    if args.composed {
        use crate::composer::planning;
        let hw = planning::hardware(&crate::serving::engine::accelerator::discover());
        // The counter the daemon will serve beside the members, as the daemon's composer
        // composes with it.
        let counter = crate::serving::engine::counter::served_counter(cfg)
            .map_err(|e| BenchError::Compose(e.to_string()))?;
        let db = crate::serving::store::Db::open(&cfg.storage.db, &crate::appliance::schema::WARD)
            .map_err(|e| BenchError::Compose(e.to_string()))?;
        let plan = planning::compose_plan(cfg, &db, n, &hw, 1.0, counter.as_ref())
            .map_err(|e| BenchError::Compose(e.to_string()))?;
        let r = &plan.rungs[0];
        eprintln!(
            "composed for {n} beds: {} members ({}), validation ROC-AUC {:.4}, estimated latency {:.1} ms (budget {:.0} ms), the ward {:.2} of a core (cap {})",
            r.members.len(),
            r.members.join(", "),
            r.val_roc_auc,
            r.latency_ms,
            r.budget_ms,
            r.utilisation,
            cfg.composer.max_utilisation
        );
        if let Some(why) = &plan.configured_note {
            eprintln!("the configured members do not serve: {why}");
        }
        return Ok((r.members.clone(), Some(r.val_roc_auc)));
    }
    if args.members.is_empty() {
        Ok((cfg.ensemble.members.clone(), None))
    } else {
        Ok((args.members.clone(), None))
    }
}

/// Monitors and the daemon each hold a socket per bed; a thousand beds need more than the
/// usual 1024 descriptors.
fn raise_open_files() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
    {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

/// Runs one benchmark with `base` as the configuration (database, beds and members are set
/// here; the composer is off so the members measured are the ones given).
pub(crate) async fn run(mut base: Config, opts: BenchOptions) -> Result<BenchReport, BenchError> {
    let dir = tempfile::tempdir()?;
    base.storage.db = dir.path().join("bench.db");
    base.ensemble.members = opts.members.clone();
    base.composer.enabled = false;
    base.ward.beds = (1..=opts.beds).map(|i| format!("bed-{i}")).collect();
    base.ward.max_beds = base.ward.max_beds.max(opts.beds);
    // Every monitor holds a connection: room for them all, and for the bench's own requests.
    base.server.max_connections = base.server.max_connections.max(opts.beds + 64);
    // One gateway device sends for every bed.
    base.auth.max_beds_per_gateway = base.auth.max_beds_per_gateway.max(opts.beds);
    // Aligned closes every window at once; the others keep the configuration's spreading
    // (the default is the wall clock), spreading on the wall clock where it says "off".
    base.ward.stagger = match (opts.scenario, base.ward.stagger) {
        (Scenario::Aligned, _) => Stagger::Off,
        (_, Stagger::Off) => Stagger::WallClock,
        (_, s) => s,
    };
    base.ward.scoring = opts.scenario != Scenario::Ingest;
    // The simulated monitors sign in as one gateway device, checked as in service.
    let db = base.storage.db.clone();
    let token = tokio::task::spawn_blocking(move || {
        let db = crate::serving::store::Db::open(&db, &crate::appliance::schema::WARD)?;
        crate::serving::ingest::devices::DeviceDb::new(db).add("bench", None)
    })
    .await
    .expect("issuing the bench's device token does not panic")?;
    // Models load and warm before the daemon answers; the whole zoo takes a while.
    let ready_within = Duration::from_secs(60 + 10 * opts.members.len() as u64);
    let daemon = Daemon::start(base.clone(), dir.path(), ready_within).await?;
    let m0 = daemon.scrape().await?;
    let (cpu0, t0) = (daemon.cpu_seconds(), Instant::now());
    let sim_cpu0 = daemon::proc_cpu_seconds(std::process::id());
    let rss_max = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sampler = {
        let (pid, rss_max) = (daemon.pid(), rss_max.clone());
        tokio::spawn(async move {
            loop {
                let kb = daemon::status_kb(pid, "VmRSS:") as u64;
                rss_max.fetch_max(kb, std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };
    let sim = SimOptions {
        duration: opts.duration,
        speed: opts.speed,
        start_secs: 0.0,
        token,
        device: Some("bench".into()),
        seed: 11,
        ramp: if opts.scenario == Scenario::Ramp {
            opts.duration / 3
        } else {
            Duration::ZERO
        },
        storm_at: (opts.scenario == Scenario::Storm).then_some(opts.duration / 2),
        monitor_alarms: opts.monitor_alarms,
        ..SimOptions::new(
            format!("ws://{}/ws/monitor", daemon.addr),
            opts.beds,
            opts.source.clone(),
        )
    };
    let sent = crate::tools::sim::run(sim).await?;
    let (cpu, secs) = (daemon.cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
    let sim_cpu = daemon::proc_cpu_seconds(std::process::id()) - sim_cpu0;
    // Let the last windows commit.
    tokio::time::sleep(Duration::from_millis(base.engine.slo_ms * 3 + 500)).await;
    let m = daemon.scrape().await?.since(&m0);
    sampler.abort();
    let (_, peak) = daemon.rss_mb();
    let rss = rss_max.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1024.0;
    let db = base.storage.db.clone();
    let (rows, gaps, partial_uncounted) = tokio::task::spawn_blocking(move || outcomes(&db))
        .await
        .expect("reading outcomes does not panic")?;
    let alarms_sent = sent.alarms_sent.load(std::sync::atomic::Ordering::Relaxed);
    let monitor_alarms = if opts.monitor_alarms {
        let db = base.storage.db.clone();
        Some(
            tokio::task::spawn_blocking(move || opinion::OpinionFigures::read(&db, alarms_sent))
                .await
                .expect("reading the monitor alarms does not panic")?,
        )
    } else {
        None
    };
    daemon.stop(Duration::from_secs(30)).await?;

    let count = |s: &str| rows.iter().filter(|r| r.0 == s).count();
    let mut lat: Vec<f64> = rows.iter().filter_map(|r| r.1).collect();
    lat.sort_by(f64::total_cmp);
    let load = std::sync::atomic::Ordering::Relaxed;
    let frames_sent = sent.frames_sent.load(load);
    let frames_ingested = m.value("holmes_ingested_frames_total") as u64;
    let ms = |s: f64| s * 1000.0;
    let mut r = BenchReport {
        scenario: opts.scenario,
        beds: opts.beds,
        members: opts.members,
        val_roc_auc: opts.val_roc_auc,
        seconds: secs,
        frames_sent,
        frames_ingested,
        frames_per_sec: frames_ingested as f64 / secs,
        samples_per_sec: m.value("holmes_ingested_samples_total") / secs,
        max_send_lag_ms: sent.max_lag_us.load(load) as f64 / 1000.0,
        gaps,
        reconnects: sent.connects.load(load).saturating_sub(opts.beds as u64),
        windows_closed: m.value("holmes_windows_closed_total") as u64,
        windows: rows.len(),
        scored: count("scored"),
        partial: count("partial"),
        partial_uncounted,
        superseded: count("superseded"),
        dropped: count("dropped"),
        insufficient: count("insufficient_signal"),
        latency_ms_p50: percentile(&lat, 0.5),
        latency_ms_p95: percentile(&lat, 0.95),
        latency_ms_p99: percentile(&lat, 0.99),
        latency_ms_max: lat.last().copied().unwrap_or(f64::NAN),
        queue_ms_mean: ms(m.mean("holmes_queue_seconds")),
        compute_ms_mean: ms(m.mean("holmes_compute_seconds")),
        beats_ms_mean: ms(m.mean("holmes_beats_seconds")),
        commit_ms_p50: ms(m.quantile("holmes_sqlite_commit_seconds", 0.5)),
        commit_ms_p95: ms(m.quantile("holmes_sqlite_commit_seconds", 0.95)),
        commit_ms_p99: ms(m.quantile("holmes_sqlite_commit_seconds", 0.99)),
        commits: m.value("holmes_sqlite_commit_seconds_count") as u64,
        daemon_cpu_cores: cpu / secs,
        simulator_cpu_cores: sim_cpu / secs,
        daemon_rss_mb: rss,
        daemon_peak_rss_mb: peak,
        slo_ms: base.engine.slo_ms,
        within_budget: false,
        bottleneck: "",
        monitor_alarms,
    };
    r.judge();
    Ok(r)
}

impl BenchReport {
    /// Sets `within_budget` and `bottleneck` from what was measured.
    fn judge(&mut self) {
        // A frame still in flight when the load stopped is not lost; a few per bed at most.
        let slack = 2 * self.beds as u64;
        let lost = self.frames_ingested + slack < self.frames_sent || self.gaps > 0;
        let latency_ok =
            self.scenario == Scenario::Ingest || self.latency_ms_p95 <= self.slo_ms as f64;
        let opinion_ok = self.monitor_alarms.as_ref().is_none_or(|o| o.within_budget);
        self.within_budget =
            !lost && latency_ok && opinion_ok && self.superseded == 0 && self.dropped == 0;
        let inference = self.queue_ms_mean.max(0.0) + self.compute_ms_mean.max(0.0);
        self.bottleneck = if lost || self.scenario == Scenario::Ingest {
            "ingest"
        } else if self.commit_ms_p95 > inference {
            "sqlite"
        } else {
            "inference"
        };
    }

    pub(crate) fn to_text(&self) -> String {
        let opinion = self
            .monitor_alarms
            .as_ref()
            .map_or(String::new(), |o| format!("; {}", o.to_text()));
        format!(
            "{scenario:?} {beds} beds, {n} members{auc}: {windows} windows ({scored} scored, {partial} partial{uncounted}, \
             {superseded} superseded, {dropped} dropped); latency p50 {p50:.1} / p95 {p95:.1} / p99 {p99:.1} / \
             max {max:.1} ms (budget {slo} ms); queue {q:.1} ms, compute {c:.1} ms{beats} (means); \
             SQLite commit p50 {c50:.2} / p95 {c95:.2} / p99 {c99:.2} ms over {commits} commits; \
             ingest {fps:.0} frames/s, {sps:.0} samples/s, {lost} frames lost, {gaps} gaps, \
             send lag max {lag:.0} ms, {rc} reconnects; daemon CPU {cpu:.2} cores, RSS {rss:.0} MB \
             (peak {peak:.0} MB), simulated monitors' CPU {sim:.2} cores{opinion}; {verdict}, limited by {limit}",
            scenario = self.scenario,
            beds = self.beds,
            n = self.members.len(),
            auc = self
                .val_roc_auc
                .map_or(String::new(), |a| format!(" (validation ROC-AUC {a:.4})")),
            windows = self.windows,
            scored = self.scored,
            partial = self.partial,
            uncounted = if self.partial_uncounted > 0 {
                format!(" ({} without the beat counter)", self.partial_uncounted)
            } else {
                String::new()
            },
            superseded = self.superseded,
            dropped = self.dropped,
            p50 = self.latency_ms_p50,
            p95 = self.latency_ms_p95,
            p99 = self.latency_ms_p99,
            max = self.latency_ms_max,
            slo = self.slo_ms,
            q = self.queue_ms_mean,
            c = self.compute_ms_mean,
            beats = if self.beats_ms_mean.is_finite() {
                format!(", beat counter {:.2} ms a window", self.beats_ms_mean)
            } else {
                String::new()
            },
            c50 = self.commit_ms_p50,
            c95 = self.commit_ms_p95,
            c99 = self.commit_ms_p99,
            commits = self.commits,
            fps = self.frames_per_sec,
            sps = self.samples_per_sec,
            lost = self.frames_sent.saturating_sub(self.frames_ingested),
            gaps = self.gaps,
            lag = self.max_send_lag_ms,
            rc = self.reconnects,
            cpu = self.daemon_cpu_cores,
            sim = self.simulator_cpu_cores,
            rss = self.daemon_rss_mb,
            peak = self.daemon_peak_rss_mb,
            verdict = if self.within_budget {
                "within budget"
            } else {
                "NOT within budget"
            },
            limit = self.bottleneck,
        )
    }
}

/// A stored window's status, and its latency (ms) when it has a score.
type Outcome = (String, Option<f64>);

/// Every stored window's status and latency (ms, for those with a score), the gaps the ward
/// recorded, and the partial windows the beat counter is missing from.
fn outcomes(db: &std::path::Path) -> Result<(Vec<Outcome>, u64, usize), BenchError> {
    let c = crate::serving::store::open_read_only(db)?;
    let mut st = c.prepare(
        "SELECT status, CASE WHEN score IS NULL THEN NULL ELSE latency_ms END FROM scores",
    )?;
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    let gaps: i64 = c.query_row("SELECT COUNT(*) FROM events WHERE kind = 'gap'", [], |r| {
        r.get(0)
    })?;
    let uncounted: i64 = c.query_row(
        "SELECT COUNT(*) FROM scores WHERE status = 'partial'
         AND EXISTS (SELECT 1 FROM json_each(scores.missing) WHERE value = 'beats')",
        [],
        |r| r.get(0),
    )?;
    Ok((rows, gaps as u64, uncounted as usize))
}
