//! `holmes compose`'s report as people read it: the aligned table printed on the terminal
//! ([`text`]) and `report.md` ([`markdown`]), both from one [`Report`]: per goal and method
//! the members, latency, validation and test metrics, the gap to the exact optimum, the
//! search trajectories, and the latency estimators' errors against the measured engine.

use std::fmt::Write as _;

use super::super::compose::Row;
use super::super::search::Goal;
use super::{Report, THRESHOLD_NOTE};

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
