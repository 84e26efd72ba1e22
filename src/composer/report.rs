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
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use super::compose::{self, ComposeError, Estimator, LatencyModel, Row};
use super::plot;
use super::search::Goal;
use crate::config::Config;
use crate::config::HolmesParams;
use crate::zoo::LeadSets;

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
pub(crate) fn main(cfg: &Config, args: &ComposeArgs) -> Result<(), ReportError> {
    let report = run(cfg, args)?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", text(&report));
    }
    Ok(())
}

/// Runs every method for every goal and writes the report files.
pub(crate) fn run(cfg: &Config, args: &ComposeArgs) -> Result<Report, ReportError> {
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
    let entries = compose::load_zoo(
        &cfg.ensemble.models_dir,
        &cfg.storage.db,
        cfg.ward.window_secs,
    )?;
    let hop = cfg.ward.hop_secs as f64;
    let mut model = LatencyModel::new(&entries, &cfg.engine, args.beds, hop, args.estimator);
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

fn opt(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.digits$}"),
        _ => "-".into(),
    }
}

fn num(x: f64, digits: usize) -> String {
    opt(Some(x), digits)
}

/// The rows' table cells: goal, method, metrics, latency, calls, seconds, gap (`>=` when the
/// exact search was cut short), members. An empty ensemble (none feasible) has no metrics.
fn cells(r: &Row) -> Vec<String> {
    let digits = match r.goal {
        Goal::MaxAccuracy { .. } => 4,
        Goal::MinLatency { .. } => 1,
    };
    let gap = match r.gap_to_exact {
        Some(g) if g.proven => num(g.value, digits),
        Some(g) => format!(">={}", num(g.value.max(0.0), digits)),
        None => "-".into(),
    };
    let some = !r.members.is_empty();
    let m = |x: f64, d: usize| if some { num(x, d) } else { "-".into() };
    vec![
        r.goal.to_string(),
        r.method.clone(),
        m(r.val_roc_auc, 4),
        m(r.val_pr_auc, 4),
        m(r.val_f1, 3),
        m(r.val_accuracy, 3),
        m(r.test_roc_auc, 4),
        m(r.test_pr_auc, 4),
        m(r.test_f1, 3),
        m(r.test_accuracy, 3),
        m(r.latency_ms, 1),
        r.profiler_calls.to_string(),
        num(r.seconds, 2),
        gap,
        format!(
            "{}{}",
            r.members.len(),
            if r.complete { "" } else { " (cut short)" }
        ),
    ]
}

const HEADER: [&str; 15] = [
    "goal", "method", "valAUC", "valPR", "valF1", "valAcc", "testAUC", "testPR", "testF1",
    "testAcc", "lat_ms", "calls", "secs", "gap", "members",
];

/// How latency was obtained, in words.
fn latency_words(r: &Report) -> String {
    match r.latency.as_str() {
        "measured" => "measured engine service time + network-calculus queueing bound".into(),
        "netcalc" => {
            "sum of profiled batch-1 p95 service times + network-calculus queueing bound".into()
        }
        _ => format!(
            "discrete-event simulation of the members' queues, batches and {} shared cores, p95",
            r.cores
        ),
    }
}

/// Per row: calls, feasible calls, the call that found the final best, and the best
/// objective after a quarter, half, three quarters and all of the calls.
fn trajectory_cells(r: &Row) -> Vec<String> {
    let t = &r.trajectory;
    let feasible = t.iter().filter(|s| s.feasible).count();
    let objective = |k: usize| {
        t.get(k.saturating_sub(1)).and_then(|s| match r.goal {
            Goal::MaxAccuracy { .. } => s.best_accuracy,
            Goal::MinLatency { .. } => s.best_latency_ms,
        })
    };
    let last = objective(t.len());
    let found = t
        .iter()
        .position(|s| {
            let o = match r.goal {
                Goal::MaxAccuracy { .. } => s.best_accuracy,
                Goal::MinLatency { .. } => s.best_latency_ms,
            };
            o.is_some() && o == last
        })
        .map_or("-".into(), |i| (i + 1).to_string());
    let digits = match r.goal {
        Goal::MaxAccuracy { .. } => 4,
        Goal::MinLatency { .. } => 1,
    };
    let mut v = vec![
        r.goal.to_string(),
        r.method.clone(),
        t.len().to_string(),
        feasible.to_string(),
        found,
    ];
    for q in [1, 2, 3, 4] {
        v.push(opt(objective((t.len() * q).div_ceil(4)), digits));
    }
    v
}

const TRAJECTORY_HEADER: [&str; 9] = [
    "goal", "method", "calls", "feasible", "best@", "25%", "50%", "75%", "100%",
];

fn aligned(out: &mut String, header: &[&str], rows: &[Vec<String>], left: &[usize]) {
    let mut w: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.len());
        }
    }
    let line = |cs: Vec<&str>| -> String {
        cs.iter()
            .enumerate()
            .map(|(i, c)| {
                if left.contains(&i) {
                    format!("{c:<w$}", w = w[i])
                } else {
                    format!("{c:>w$}", w = w[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let _ = writeln!(out, "{}", line(header.to_vec()));
    for r in rows {
        let _ = writeln!(out, "{}", line(r.iter().map(String::as_str).collect()));
    }
}

/// The gap lines: per goal, HOLMES against the exact optimum.
fn gap_lines(r: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for g in &r.goals {
        let of = |m: &str| r.rows.iter().find(|x| x.goal == *g && x.method == m);
        let (Some(h), Some(e)) = (of("holmes"), of("exact")) else {
            continue;
        };
        let Some(gap) = h.gap_to_exact else {
            continue;
        };
        let (what, holmes, exact, gap) = match g {
            Goal::MaxAccuracy { .. } => (
                "ROC-AUC",
                format!("{:.4}", h.val_roc_auc),
                format!("{:.4}", e.val_roc_auc),
                format!("{:.4}", gap.value),
            ),
            Goal::MinLatency { .. } => (
                "ms",
                format!("{:.1} ms", h.latency_ms),
                format!("{:.1} ms", e.latency_ms),
                format!("{:.1}", gap.value),
            ),
        };
        out.push(if e.complete {
            format!(
                "{}: HOLMES {holmes}, exact optimum {exact}: gap {gap} {what}",
                g
            )
        } else {
            format!(
                "{}: HOLMES {holmes}, exact search's best {exact} after {} ensembles (cut short, \
                 not a proven optimum): gap at least {gap} {what}",
                g, e.profiler_calls
            )
        });
    }
    out
}

fn error_lines(r: &Report) -> Vec<String> {
    r.estimator_errors
        .iter()
        .map(|e| {
            format!(
                "{} {} vs measured over {} ensembles: median |error| {:.0} %, worst {:+.0} %",
                e.estimator.as_str(),
                e.what,
                e.ensembles,
                100.0 * e.median_abs,
                100.0 * e.worst
            )
        })
        .collect()
}

/// The report as terminal text.
pub(crate) fn text(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} models, {} beds, hop {} s; latency: {}",
        r.models.len(),
        r.beds,
        r.hop_s,
        latency_words(r)
    );
    let _ = writeln!(s, "{}.", THRESHOLD_NOTE);
    let _ = match r.lead_sets.missing().join(", ") {
        m if m.is_empty() => writeln!(s, "Every ensemble covers lead II only, V only and both."),
        m => writeln!(
            s,
            "Every ensemble covers what the zoo covers; none scores {m}."
        ),
    };
    let rows: Vec<Vec<String>> = r.rows.iter().map(cells).collect();
    aligned(&mut s, &HEADER, &rows, &[0, 1]);
    let gaps = gap_lines(r);
    if !gaps.is_empty() {
        let _ = writeln!(s, "\nGap to the exact optimum:");
        for g in gaps {
            let _ = writeln!(s, "  {g}");
        }
    }
    let _ = writeln!(
        s,
        "\nSearch trajectories (best feasible {} after that share of the calls):",
        if matches!(r.goals.first(), Some(Goal::MinLatency { .. })) {
            "latency, ms,"
        } else {
            "validation ROC-AUC"
        }
    );
    let tr: Vec<Vec<String>> = r.rows.iter().map(trajectory_cells).collect();
    aligned(&mut s, &TRAJECTORY_HEADER, &tr, &[0, 1]);
    let _ = writeln!(s, "\nChosen members:");
    for row in &r.rows {
        let _ = writeln!(
            s,
            "  {} {}: {}",
            row.goal,
            row.method,
            if row.members.is_empty() {
                "(none feasible)".to_owned()
            } else {
                row.members.join(", ")
            }
        );
    }
    let errors = error_lines(r);
    if !errors.is_empty() {
        let _ = writeln!(s, "\nLatency estimators against the measured engine:");
        for e in errors {
            let _ = writeln!(s, "  {e}");
        }
    }
    let files: Vec<String> = r.files.iter().map(|f| f.display().to_string()).collect();
    let _ = writeln!(s, "\nWrote {}", files.join(", "));
    s
}

/// The report as Markdown (`report.md`).
pub(crate) fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Ensemble composition\n");
    let _ = writeln!(
        s,
        "{} models, {} beds, hop {} s, {} profiler calls for HOLMES and NPO. Latency: {}. {}.\n",
        r.models.len(),
        r.beds,
        r.hop_s,
        r.calls,
        latency_words(r),
        THRESHOLD_NOTE
    );
    let mut header: Vec<&str> = HEADER.to_vec();
    header.pop();
    header.push("members");
    let _ = writeln!(s, "| {} |", header.join(" | "));
    let _ = writeln!(s, "|{}", "---|".repeat(header.len()));
    for row in &r.rows {
        let mut c = cells(row);
        c.pop();
        c.push(if row.members.is_empty() {
            "(none feasible)".into()
        } else {
            format!(
                "{}{}",
                row.members.join(", "),
                if row.complete { "" } else { " (cut short)" }
            )
        });
        let _ = writeln!(s, "| {} |", c.join(" | "));
    }
    let gaps = gap_lines(r);
    if !gaps.is_empty() {
        let _ = writeln!(s, "\n## Gap to the exact optimum\n");
        for g in gaps {
            let _ = writeln!(s, "- {g}");
        }
    }
    let _ = writeln!(s, "\n## Search trajectories\n");
    let _ = writeln!(s, "| {} |", TRAJECTORY_HEADER.join(" | "));
    let _ = writeln!(s, "|{}", "---|".repeat(TRAJECTORY_HEADER.len()));
    for row in &r.rows {
        let _ = writeln!(s, "| {} |", trajectory_cells(row).join(" | "));
    }
    let errors = error_lines(r);
    if !errors.is_empty() {
        let _ = writeln!(s, "\n## Latency estimators against the measured engine\n");
        for e in errors {
            let _ = writeln!(s, "- {e}");
        }
    }
    let _ = writeln!(
        s,
        "\n![validation ROC-AUC against latency](pareto.svg)\n\nEvery call of every search is in `report.json` (`rows[].trajectory`)."
    );
    s
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
