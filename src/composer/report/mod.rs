//! `holmes compose`: runs the chosen methods for every goal (latency budgets, or accuracy
//! floors for the dual) over the zoo, and reports them: the HOLMES section 4.2.1 table with
//! validation and test metrics, each method's gap to the exact optimum, the search
//! trajectories, and with `--measured` how far each latency estimator was from the engine.
//! Writes `report.json`, `report.md` and `pareto.svg` to the report folder.
//!
//! Its neighbours: [`compose`](super::compose) loads the zoo and runs one method;
//! [`measure`](super::measure) is the measured latency profiler; [`plot`](super::plot) draws
//! the figure; [`cli`](crate::cli) parses the flags into [`ComposeArgs`].

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use super::compose::{self, Beside, ComposeError, Estimator, LatencyModel, Row};
use super::plot;
use super::search::Goal;
use crate::serving::store::Db;

mod text;
use crate::config::Config;
use crate::config::HolmesParams;
use crate::zoo::LeadSets;
pub(crate) use text::{markdown, text};

/// What `holmes compose` asks for (the command line's flags).
#[derive(Debug, Clone)]
pub(crate) struct ComposeArgs {
    /// Latency budget(s) in ms (empty: the config's slo_ms; with method `all`, three budgets
    /// covering the zoo's range).
    pub(crate) budget_ms: Vec<f64>,
    /// Solve the dual (HOLMES appendix A.6) instead: the lowest latency whose validation
    /// ROC-AUC is at least this.
    pub(crate) min_accuracy: Vec<f64>,
    /// Beds served.
    pub(crate) beds: usize,
    /// holmes, holmes-ucb, rd, af, lf, npo, exact, or all.
    pub(crate) method: String,
    /// Profiler-call budget of HOLMES and NPO.
    pub(crate) calls: usize,
    /// The fast latency estimate.
    pub(crate) estimator: Estimator,
    /// Batches the simulation runs at full speed at once (None: this machine's cores).
    pub(crate) cores: Option<usize>,
    /// Measure each profiled ensemble through the real engine (slow).
    pub(crate) measured: bool,
    /// Folder for report.json, report.md and pareto.svg.
    pub(crate) report: PathBuf,
    /// Print the report as JSON (and no progress bar).
    pub(crate) json: bool,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ReportError {
    #[error("unknown method {0:?} (one of {all}, all)", all = crate::config::METHODS.join(", "))]
    UnknownMethod(String),
    #[error("--min-accuracy {0} is not a ROC-AUC in (0, 1]")]
    Floor(f64),
    #[error("--{0} must be positive")]
    NotPositive(&'static str),
    #[error(transparent)]
    Compose(#[from] ComposeError),
    #[error(transparent)]
    Zoo(#[from] crate::zoo::ZooError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("creating the measurer's scratch folder: {0}")]
    Scratch(#[source] std::io::Error),
    #[error("report JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// How far one estimator was from the measured engine over the ensembles profiled: relative
/// errors `(estimate - measured) / measured`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct EstimatorError {
    pub(crate) estimator: Estimator,
    /// `latency` (both end to end, the measured one being the measured service time plus the
    /// network-calculus bound) or `service` (one window alone).
    pub(crate) what: &'static str,
    pub(crate) ensembles: usize,
    pub(crate) median_abs: f64,
    /// The error of largest magnitude, with its sign.
    pub(crate) worst: f64,
}

/// One ensemble measured through the engine, with both estimators' figures (ms).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Measured {
    /// One character per zoo model, `1` a member.
    pub(crate) members: String,
    /// End to end as the measured profiler gives it: service time plus the queueing bound.
    pub(crate) measured_ms: f64,
    /// One window alone through the engine, p95.
    pub(crate) measured_service_ms: f64,
    pub(crate) des_ms: f64,
    pub(crate) des_service_ms: f64,
    pub(crate) netcalc_ms: f64,
    pub(crate) netcalc_service_ms: f64,
}

/// Everything `holmes compose` found; `report.json` is this.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    /// The zoo in order: character `i` of a trajectory step's `members` is model `i`.
    pub(crate) models: Vec<String>,
    /// Each model's batch-1 p95 service time on the CPU, ms.
    pub(crate) model_latency_ms: Vec<f64>,
    pub(crate) beds: usize,
    pub(crate) hop_s: f64,
    pub(crate) cores: usize,
    /// `measured` or the estimator's name.
    pub(crate) latency: String,
    pub(crate) estimator: Estimator,
    pub(crate) calls: usize,
    pub(crate) threshold_note: &'static str,
    /// The lead sets the zoo covers, which every feasible ensemble must cover.
    pub(crate) lead_sets: LeadSets,
    pub(crate) goals: Vec<Goal>,
    pub(crate) rows: Vec<Row>,
    pub(crate) estimator_errors: Vec<EstimatorError>,
    /// With `--measured`: every ensemble measured, against the estimators.
    pub(crate) measured: Vec<Measured>,
    /// The files written.
    pub(crate) files: Vec<PathBuf>,
}

const THRESHOLD_NOTE: &str = "F1 and accuracy at the Youden threshold chosen on the validation \
     ensemble and applied unchanged to test";

/// `holmes compose`: runs, writes the report files, prints the table (or the JSON).
pub(crate) fn main(cfg: &Config, db: &Db, args: &ComposeArgs) -> Result<(), ReportError> {
    let report = run(cfg, db, args)?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", text(&report));
    }
    Ok(())
}

/// Runs every method for every goal and writes the report files.
pub(crate) fn run(cfg: &Config, db: &Db, args: &ComposeArgs) -> Result<Report, ReportError> {
    let methods: Vec<&str> = if args.method == "all" {
        crate::config::METHODS.to_vec()
    } else if crate::config::METHODS.contains(&args.method.as_str()) {
        vec![args.method.as_str()]
    } else {
        return Err(ReportError::UnknownMethod(args.method.clone()));
    };
    if let Some(&a) = args
        .min_accuracy
        .iter()
        .find(|a| !(**a > 0.0 && **a <= 1.0))
    {
        return Err(ReportError::Floor(a));
    }
    if args.beds == 0 {
        return Err(ReportError::NotPositive("beds"));
    }
    if args.calls == 0 {
        return Err(ReportError::NotPositive("calls"));
    }
    if args.cores == Some(0) {
        return Err(ReportError::NotPositive("cores"));
    }
    let entries = compose::load_zoo(&cfg.ensemble.models_dir, db, cfg.ward.window_secs)?;
    let hop = cfg.ward.hop_secs as f64;
    // The members alone, as the measured engine runs them (`measure`: no beat counter), so the
    // estimators are judged against what was measured; the daemon's composer prices the
    // counter beside them.
    let mut model = LatencyModel::new(
        &entries,
        &cfg.engine,
        args.beds,
        hop,
        Beside::NONE,
        args.estimator,
    );
    if let Some(c) = args.cores {
        model.des.cores = c;
    }
    let goals: Vec<Goal> = if !args.min_accuracy.is_empty() {
        args.min_accuracy
            .iter()
            .map(|&a| Goal::MinLatency { min_accuracy: a })
            .collect()
    } else if !args.budget_ms.is_empty() {
        args.budget_ms.iter().map(|&b| Goal::from(b)).collect()
    } else if args.method == "all" {
        let covering = compose::fastest_covering(&entries);
        compose::default_budgets_by(&covering, &|b: &[bool]| model.estimate(b))
            .into_iter()
            .map(Goal::from)
            .collect()
    } else {
        vec![Goal::from(cfg.engine.slo_ms as f64)]
    };
    let params = HolmesParams {
        budget_calls: args.calls,
        ..Default::default()
    };
    let mut measurer = if args.measured {
        let (models, _) = crate::zoo::load_dir::<burn::backend::Flex>(
            &cfg.ensemble.models_dir,
            &Default::default(),
        )?;
        let manifests = models.into_iter().map(|m| m.manifest).collect();
        let m = super::measure::Measurer::new(&cfg.ensemble.models_dir, manifests, cfg.clone(), 10)
            .map_err(ReportError::Scratch)?;
        Some(m)
    } else {
        None
    };
    let bar = if args.json || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::new((goals.len() * methods.len()) as u64);
        b.set_style(
            ProgressStyle::with_template(
                "{elapsed:>4} [{bar:24}] {pos}/{len} searches  {wide_msg}",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        );
        b
    };
    // Measured mode: per ensemble, (measured latency, measured service time).
    let mut measured: HashMap<Vec<bool>, (f64, f64)> = HashMap::new();
    let mut rows = Vec::new();
    for &goal in &goals {
        for &m in &methods {
            let what = format!("{m} for {goal}");
            let mut on_call = |calls: usize, _a: f64, _l: f64| {
                bar.set_message(format!("{what}: {calls} calls"));
            };
            let row = match measurer.as_mut() {
                Some(me) => {
                    let mut lat = |x: &[bool]| {
                        let real = me.latency_ms(x, args.beds, hop);
                        measured.insert(x.to_vec(), (real, me.service_ms(x)));
                        real
                    };
                    compose::run_goal(&entries, m, goal, &params, &mut lat, &mut on_call)
                }
                None => compose::run_goal(
                    &entries,
                    m,
                    goal,
                    &params,
                    &mut |x: &[bool]| model.estimate(x),
                    &mut on_call,
                ),
            };
            rows.push(row);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    compose::set_gaps(&mut rows);
    let mut measured: Vec<Measured> = measured
        .into_iter()
        .map(|(b, (real, service))| Measured {
            members: b.iter().map(|&x| if x { '1' } else { '0' }).collect(),
            measured_ms: real,
            measured_service_ms: service,
            des_ms: model.by(Estimator::Des, &b),
            des_service_ms: model.service_ms(Estimator::Des, &b),
            netcalc_ms: model.by(Estimator::Netcalc, &b),
            netcalc_service_ms: model.service_ms(Estimator::Netcalc, &b),
        })
        .collect();
    measured.sort_by(|a, b| a.measured_ms.total_cmp(&b.measured_ms));
    let mut estimator_errors = Vec::new();
    if !measured.is_empty() {
        let pairs = |f: fn(&Measured) -> (f64, f64)| measured.iter().map(f);
        estimator_errors.extend(errors(
            Estimator::Des,
            "latency",
            pairs(|m| (m.des_ms, m.measured_ms)),
        ));
        estimator_errors.extend(errors(
            Estimator::Des,
            "service",
            pairs(|m| (m.des_service_ms, m.measured_service_ms)),
        ));
        estimator_errors.extend(errors(
            Estimator::Netcalc,
            "latency",
            pairs(|m| (m.netcalc_ms, m.measured_ms)),
        ));
        estimator_errors.extend(errors(
            Estimator::Netcalc,
            "service",
            pairs(|m| (m.netcalc_service_ms, m.measured_service_ms)),
        ));
    }
    let mut report = Report {
        models: entries.iter().map(|e| e.name.clone()).collect(),
        model_latency_ms: entries.iter().map(|e| e.latency_ms).collect(),
        beds: args.beds,
        hop_s: hop,
        cores: model.des.cores,
        latency: if args.measured {
            "measured".into()
        } else {
            args.estimator.as_str().into()
        },
        estimator: args.estimator,
        calls: args.calls,
        threshold_note: THRESHOLD_NOTE,
        lead_sets: compose::zoo_lead_sets(&entries),
        goals,
        rows,
        estimator_errors,
        measured,
        files: Vec::new(),
    };
    write(&mut report, &args.report)?;
    Ok(report)
}

/// Median absolute and worst relative error of `(estimate, measured)` pairs with a finite,
/// positive measurement.
fn errors(
    estimator: Estimator,
    what: &'static str,
    pairs: impl Iterator<Item = (f64, f64)>,
) -> Option<EstimatorError> {
    let mut rel: Vec<f64> = pairs
        .filter(|(e, m)| m.is_finite() && *m > 0.0 && e.is_finite())
        .map(|(e, m)| (e - m) / m)
        .collect();
    if rel.is_empty() {
        return None;
    }
    let worst = rel
        .iter()
        .copied()
        .fold(0.0f64, |w, e| if e.abs() > w.abs() { e } else { w });
    rel.iter_mut().for_each(|e| *e = e.abs());
    rel.sort_by(f64::total_cmp);
    Some(EstimatorError {
        estimator,
        what,
        ensembles: rel.len(),
        median_abs: crate::core::stats::percentile(&rel, 0.5),
        worst,
    })
}

/// Writes `report.json`, `report.md` and `pareto.svg` into `dir` (created if missing).
pub(crate) fn write(r: &mut Report, dir: &Path) -> Result<(), ReportError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| ReportError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let json = dir.join("report.json");
    let md = dir.join("report.md");
    let svg = dir.join("pareto.svg");
    r.files = vec![json.clone(), md.clone(), svg.clone()];
    std::fs::write(&json, serde_json::to_vec(r)?).map_err(io(&json))?;
    std::fs::write(&md, markdown(r)).map_err(io(&md))?;
    std::fs::write(
        &svg,
        plot::svg(&plot::figure(
            &r.rows,
            &r.goals,
            format!(
                "Profiled ensembles: validation ROC-AUC against latency ({} beds, {})",
                r.beds, r.latency
            ),
        )),
    )
    .map_err(io(&svg))?;
    Ok(())
}
