//! The cross-validation's figures as lines for a person: each fold's chosen rules and what
//! they reached there, then the pooled figures (all records, each database, the stress
//! condition), what the annotations say at the false alarms, and the spliced events.

use super::folds::{CrossValidation, Pooled, Scope};

/// The figures as lines for a person.
pub fn text(c: &CrossValidation) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "patient-wise {}-fold cross-validation {} (members: {}; window {} s, hop {} s; rules \
         chosen on {} for ESe {})",
        c.folds,
        match c.scope {
            Scope::HeldOutParts => "over the validation and test parts",
            Scope::EveryRecordRetrained => "over every record, the members retrained per fold",
        },
        c.members.join(", "),
        c.window_secs,
        c.hop_secs,
        match c.scope {
            Scope::HeldOutParts => "the other folds",
            Scope::EveryRecordRetrained => "the next fold",
        },
        c.target_sensitivity
    );
    let _ = writeln!(
        s,
        "\n  fold records epochs call bSQI   alarm rule        opinion on others det/epis FA   here det/epis FA (6 dB)"
    );
    for f in &c.per_fold {
        let _ = writeln!(
            s,
            "  {:>4} {:>7} {:>6} {:>4.2} {:>4.1}   {:<17} {:>7.2} {:>6}/{:<3} {:>4}    {:>4}/{:<3} {:>3} ({})",
            f.fold,
            f.records.len(),
            f.epochs
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join(","),
            f.beat_rule.call_at,
            f.beat_rule.min_bsqi,
            f.alarm_rule.words(),
            f.confirm_at,
            f.chosen_on_detected,
            f.chosen_on_episodes,
            f.chosen_on_false_alarms,
            f.detected,
            f.episodes,
            f.false_alarms,
            f.stressed_false_alarms
                .map_or("-".into(), |n| n.to_string())
        );
    }
    if let Some(m) = &c.served {
        let _ = writeln!(
            s,
            "  median           {:>4.2} {:>4.1}   {:<17} {:>7.2} (the served points --save-rule keeps)",
            m.beat_rule.call_at,
            m.beat_rule.min_bsqi,
            m.alarm_rule.words(),
            m.confirm_at,
        );
    }
    let line = |s: &mut String, name: &str, p: &Pooled| {
        let iv = |v: Option<[f64; 2]>| v.map_or("-".into(), |[a, b]| format!("{a:.2}-{b:.2}"));
        let g = &p.summary;
        let _ = writeln!(
            s,
            "  {name:<14} detected {}/{} ({}, {}); VT {}; VF {}; ESe {} E+P {} ({}); EC57 set ESe {} E+P {}; \
             FA/h {} ({} in {:.1} h); time to alarm median {} s, p90 {} s",
            p.detected.count,
            p.detected.of,
            p.detected.value.map_or("-".into(), |v| format!("{v:.3}")),
            iv(p.detected.interval),
            p.detected_by_kind
                .get("vt")
                .map_or("-".into(), |v| format!("{}/{}", v.count, v.of)),
            p.detected_by_kind
                .get("vf")
                .map_or("-".into(), |v| format!("{}/{}", v.count, v.of)),
            g.gross_figures.se.map_or("-".into(), |v| format!("{v:.3}")),
            g.gross_figures.pp.map_or("-".into(), |v| format!("{v:.3}")),
            iv(g.gross_intervals.pp),
            g.ec57_figures.se.map_or("-".into(), |v| format!("{v:.3}")),
            g.ec57_figures.pp.map_or("-".into(), |v| format!("{v:.3}")),
            g.false_alarms_per_hour
                .map_or("-".into(), |v| format!("{v:.2}")),
            g.false_alarms,
            g.monitored_ms as f64 / 3.6e6,
            g.time_to_alarm
                .median_s
                .map_or("-".into(), |v| format!("{v:.1}")),
            g.time_to_alarm
                .p90_s
                .map_or("-".into(), |v| format!("{v:.1}")),
        );
        let why = &p.false_alarm_causes;
        if why.total() > 0 {
            let _ = writeln!(s, "  {:<14} false alarms at {}", "", why.words());
        }
    };
    s.push_str("\npooled over the folds, clean:\n");
    line(&mut s, "all", &c.clean);
    for (db, p) in &c.clean_by_database {
        line(&mut s, db, p);
    }
    if let Some(p) = &c.stressed {
        s.push_str("pooled, 6 dB electrode motion:\n");
        line(&mut s, "all", p);
    }
    if let (Some(seed), Some(f)) = (c.splice_seed, &c.spliced) {
        let frac = |c: &super::Count| format!("{}/{}", c.detected, c.runs);
        let _ = writeln!(
            s,
            "spliced events (seed {seed}), each fold's under its rules: runs of 5-7 beats detected {}, of 8+ {}; alarms on salvos of 2-4 {}, \
             on bigeminy {}; fifth beat to alarm median {} s; runs ranked above salvos and bigeminy, ROC-AUC {}",
            frac(&f.runs_5_7),
            frac(&f.runs_8_plus),
            frac(&f.salvos_2_4),
            frac(&f.bigeminy),
            f.time_to_alarm_median_secs
                .map_or("-".into(), |v| format!("{v:.1}")),
            f.ranking_roc_auc.map_or("-".into(), |v| format!("{v:.3}")),
        );
    }
    if let Some(m) = &c.monitor_alarms {
        s.push_str(&super::monitor_alarms::text(m));
    }
    if let Some(a) = &c.spliced_adjudication {
        s.push_str(&super::spliced_alarms::text(a));
    }
    s.push_str(&super::spliced_alarms::pooled_text(&c.proxy_pooled));
    s.push_str(&super::textbook::text(&c.textbook_monitor));
    s.push_str(&super::listing::doubted_text(&c.alarms));
    s
}
