//! `holmes profile`: each model's latency per batch size on each accelerator, stored; the
//! beat counter's reading of a window on the CPU, when the config serves one; and with
//! `--ingest` (or `--all`) what the monitors' streams cost the daemon's CPU, stored for the
//! composer's utilisation.

use anyhow::Result;

use super::ConfigArgs;
use crate::zoo;

#[derive(Debug, clap::Args)]
pub struct ProfileArgs {
    /// Models to profile: names, or empty for the ensemble's members (and the beat counter,
    /// when the config serves one); with `--ingest` and no names, none.
    #[arg(long)]
    models: Vec<String>,
    /// Profile every model in the zoo (and the beat counter, when the config serves one), and
    /// measure the ingest.
    #[arg(long)]
    all: bool,
    /// Measure what the ingest costs: the daemon (a child process, scoring off) under
    /// `--ingest-beds` simulated monitors for `--ingest-secs`, its CPU stored per bed (alone,
    /// unless `--models` names models too).
    #[arg(long)]
    ingest: bool,
    /// Monitors the ingest is measured under [default: the config's ward.max_beds].
    #[arg(long)]
    ingest_beds: Option<usize>,
    /// Seconds the ingest is measured over [default: 30].
    #[arg(long)]
    ingest_secs: Option<f64>,
    /// Largest batch (the bed count the appliance serves).
    #[arg(long, default_value_t = 64)]
    max_batch: usize,
    /// Timed runs per batch size at least.
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    #[command(flatten)]
    config: ConfigArgs,
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(a: ProfileArgs) -> Result<()> {
    let ProfileArgs {
        models,
        all,
        ingest,
        ingest_beds,
        ingest_secs,
        max_batch,
        repeats,
        config,
        json,
    } = a;
    if !(ingest || all) && (ingest_beds.is_some() || ingest_secs.is_some()) {
        anyhow::bail!("--ingest-beds and --ingest-secs go with --ingest (or --all)");
    }
    let cfg = config.load()?;
    let db = crate::serving::store::Db::open(&cfg.storage.db, &crate::appliance::schema::WARD)?;
    let ingest_only = ingest && !all && models.is_empty();
    let counter = if all || (models.is_empty() && !ingest_only) {
        crate::serving::engine::counter::served_counter(&cfg)?
    } else {
        None
    };
    let names: Vec<String> = if all {
        zoo::model_dirs(&cfg.ensemble.models_dir)?
            .iter()
            .filter_map(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect()
    } else if ingest_only {
        Vec::new()
    } else if models.is_empty() {
        cfg.ensemble.members.clone()
    } else {
        models
    };
    let opts = crate::serving::engine::profile::ProfileOptions {
        max_batch,
        warmup: 2,
        min_repeats: repeats,
        max_repeats: repeats.max(30),
        budget: std::time::Duration::from_secs(2),
    };
    let mut out = Vec::new();
    for dev in crate::serving::engine::accelerator::discover() {
        for name in &names {
            let p = crate::serving::engine::profile::profile_model(
                &cfg.ensemble.models_dir.join(name),
                &dev,
                &opts,
            )?;
            crate::serving::engine::profile::store_profile(&db, &p)?;
            if !json {
                println!("{} on {} ({}):", p.model, p.device, p.hardware);
                for pt in &p.points {
                    println!(
                        "  batch {:>4}: p50 {:>9.2} ms  p95 {:>9.2} ms  p99 {:>9.2} ms  ({} runs)  {:>8.1} windows/s",
                        pt.batch,
                        pt.p50_ms,
                        pt.p95_ms,
                        pt.p99_ms,
                        pt.repeats,
                        pt.batch as f64 * 1000.0 / pt.p50_ms
                    );
                }
                let [a, b, c] = p.quadratic;
                println!("  fit: p50(b) = {a:.4} b^2 + {b:.3} b + {c:.3} ms");
            }
            out.push(p);
        }
    }
    if let Some(c) = &counter {
        let p = crate::serving::engine::profile::profile_counter(c, cfg.ward.window_secs, &opts);
        crate::serving::engine::profile::store_profile(&db, &p)?;
        if !json {
            let pt = &p.points[0];
            println!(
                "the beat counter on cpu ({}), one {} s window: p50 {:.2} ms  p95 {:.2} ms  p99 {:.2} ms  ({} runs)",
                p.hardware, cfg.ward.window_secs, pt.p50_ms, pt.p95_ms, pt.p99_ms, pt.repeats
            );
        }
        out.push(p);
    }
    let ingest = if ingest || all {
        let beds = ingest_beds.unwrap_or(cfg.ward.max_beds).max(1);
        let c = crate::tools::bench::measure_ingest(&cfg, beds, ingest_secs.unwrap_or(30.0))?;
        crate::serving::ingest::cost::store(&db, &c)?;
        if !json {
            println!(
                "the ingest on cpu ({}), {} monitors over {:.0} s: {:.3} cores ({:.3} ms a bed each second)",
                c.hardware,
                c.beds,
                c.seconds,
                c.cpu_cores,
                c.ms_per_bed_second()
            );
        }
        Some(c)
    } else {
        None
    };
    if json {
        /// The measurement as the JSON gives it: with its figure a bed.
        #[derive(serde::Serialize)]
        struct IngestJson<'a> {
            #[serde(flatten)]
            cost: &'a crate::serving::ingest::cost::IngestCost,
            ms_per_bed_second: f64,
        }
        let ingest = ingest.as_ref().map(|cost| IngestJson {
            cost,
            ms_per_bed_second: cost.ms_per_bed_second(),
        });
        let v = serde_json::json!({ "profiles": out, "ingest": ingest });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("stored in {}", db.path().display());
    }
    Ok(())
}
