//! `holmes score`: a recording scored offline, window by window, as the daemon would.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::config::Config;
use crate::core::monitor_alarm::MonitorAlarmKind;
use crate::training::dataset;

#[derive(Debug, clap::Args)]
pub struct ScoreArgs {
    /// WFDB record path without extension, e.g. ../shared/data/physionet/vfdb/418
    #[arg(long)]
    record: PathBuf,
    /// First second to score.
    #[arg(long, default_value_t = 0.0)]
    from: f64,
    /// Last second to score [default: the end].
    #[arg(long)]
    to: Option<f64>,
    /// Config file for the ensemble and windows [default: embedded defaults].
    #[arg(long)]
    config: Option<PathBuf>,
    /// The risk alarm rule as `on,off,k,n` [default: the one the zoo's alarm_rules.json holds
    /// for the configured members, hop and window; else one derived from the zoo's validated
    /// ensembles; else the config's fallback].
    #[arg(long)]
    rule: Option<String>,
    /// A monitor's own alarm to adjudicate, as `SECS:KIND` (its onset, seconds from the
    /// record's start, and its kind: vt, vf, asystole, brady, tachy, other): Holmes's opinion
    /// from the samples up to the onset is printed beside the windows (with --json, the
    /// windows go under `windows` and the opinion under `adjudication`).
    #[arg(long, value_name = "SECS:KIND")]
    monitor_alarm: Option<String>,
    #[arg(long)]
    json: bool,
}

/// `SECS:KIND` of `--monitor-alarm`.
fn parse_alarm(s: &str) -> Result<(f64, MonitorAlarmKind)> {
    let (secs, kind) = s
        .split_once(':')
        .context("--monitor-alarm takes SECS:KIND, e.g. 291.5:vt")?;
    let secs: f64 = secs
        .trim()
        .parse()
        .ok()
        .filter(|t: &f64| t.is_finite() && *t >= 0.0)
        .with_context(|| format!("--monitor-alarm: {secs:?} is not a time in seconds"))?;
    Ok((secs, kind.parse()?))
}

pub fn run(a: ScoreArgs) -> Result<()> {
    let ScoreArgs {
        record,
        from,
        to,
        config,
        rule,
        monitor_alarm,
        json,
    } = a;
    let monitor_alarm = monitor_alarm.as_deref().map(parse_alarm).transpose()?;
    let cfg = Config::load(config.as_deref())?;
    let dir = record.parent().unwrap_or(std::path::Path::new("."));
    let name = record
        .file_name()
        .context("--record needs a record path")?
        .to_string_lossy()
        .into_owned();
    let signals = dataset::read_signals(dir, &name)?;
    let beats = crate::serving::engine::counter::served_counter(&cfg)?;
    let ens = crate::serving::engine::ensemble::Ensemble::load(
        &cfg.ensemble.models_dir,
        &cfg.ensemble.members,
        cfg.ward.window_secs,
    )?
    .with_beats(beats)
    .pooled_as_served(
        &cfg.ensemble.models_dir,
        cfg.engine.combine,
        cfg.ward.hop_secs,
        cfg.ward.window_secs,
    );
    let adjudication = match monitor_alarm {
        Some((secs, kind)) => {
            let counter = ens
                .beats
                .as_ref()
                .context("--monitor-alarm needs the zoo's beat counter (ensemble.count_beats and models/beats.json)")?;
            let risk = crate::tools::score::risk_before(
                &ens,
                &signals,
                secs,
                cfg.ward.window_secs,
                cfg.ward.hop_secs,
            );
            let opinion =
                crate::tools::score::adjudicate_at(&counter.file, &signals, secs, kind, risk)?;
            if opinion.is_none() {
                eprintln!("{kind} alarms are not judged: stored and shown as received");
            }
            Some(opinion)
        }
        None => None,
    };
    let hop_ms = i64::from(cfg.ward.hop_secs) * 1000;
    let (rule, why) = match rule {
        Some(s) => (
            s.parse::<crate::alarm::AlarmRule>()
                .map_err(|e| anyhow::anyhow!("--rule {e}"))?,
            "given with --rule",
        ),
        None => {
            let served = crate::composer::rule::for_ensemble(&cfg, &ens)?;
            (served.rule, crate::composer::rule::basis(&served))
        }
    };
    let mut rows = crate::tools::score::score_signals(
        &ens,
        &signals,
        cfg.ward.window_secs,
        cfg.ward.hop_secs,
        from,
        to,
    );
    crate::tools::score::mark_alarms(&mut rows, rule, hop_ms)?;
    let said = format!("risk alarm: {}; {why}", rule.words());
    if json {
        eprintln!("{said}");
        let out = match &adjudication {
            Some(a) => serde_json::json!({ "windows": rows, "adjudication": a }),
            None => serde_json::to_value(&rows)?,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        if let Some(Some(a)) = &adjudication {
            println!(
                "monitor's {} alarm: {} ({:.2}): {}",
                a.kind.as_str().to_uppercase(),
                if a.confirmed { "confirmed" } else { "doubted" },
                a.probability,
                a.reason
            );
        }
        println!("{said}");
        println!(
            "{:>8} {:>8}  {:<20} {:>6}  {:<7}  members",
            "from_s", "to_s", "status", "risk", "alarm"
        );
        for r in rows {
            let mut members: Vec<String> = r
                .members
                .iter()
                .map(|m| {
                    format!(
                        "{}={}",
                        m.name,
                        m.prob.map_or("-".into(), |p| format!("{p:.3}"))
                    )
                })
                .collect();
            match (r.run_level, r.run_onset_secs) {
                (Some(_), Some(t)) => members.push(format!("beats=VT run from {t:.1} s")),
                (Some(l), None) => members.push(format!("beats={l:.2}")),
                _ => {}
            }
            println!(
                "{:>8.1} {:>8.1}  {:<20} {:>6}  {:<7}  {}",
                r.start_secs,
                r.end_secs,
                r.status.as_str(),
                r.score.map_or("-".into(), |s| format!("{s:.3}")),
                r.alarm,
                members.join(" ")
            );
        }
    }
    Ok(())
}
