//! `holmes evaluate`: the serving ensemble's alarms on a split's records, beside a classical
//! detector, clean and under the noise stress test.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::alarm::{AlarmRule, DelayLimits};
use crate::config::{Combine, Config};
use crate::tools::evaluate::Pooling;
use crate::tools::evaluate::{self, EvaluateOptions, LeadSet, report};
use crate::training::beats::Fitting;
use crate::training::dataset::{self, SplitName};

#[derive(Debug, clap::Args)]
pub struct EvaluateArgs {
    /// Folder holding vfdb/, cudb/, mitdb/, svdb/ and nstdb/ [default: $HOLMES_DATA or ../shared/data/physionet]
    #[arg(long)]
    data: Option<PathBuf>,
    /// The patient-wise split.
    #[arg(long, default_value = "config/split.toml")]
    split: PathBuf,
    /// The part reported: test, validation or train.
    #[arg(long, default_value = "test")]
    part: String,
    /// Config file for the zoo, the members, the window and the hop [default: embedded defaults].
    #[arg(long)]
    config: Option<PathBuf>,
    /// Members to evaluate instead of the config's (comma-separated).
    #[arg(long, value_delimiter = ',')]
    members: Vec<String>,
    /// How the members' probabilities pool: `served` (as the daemon pools them: the lead share
    /// of their alarm rule in the zoo, else the plain mean), `mean`, `choose` (the plain mean
    /// and the shares 0.3-0.9 tried on the validation part, each with its rule: the one with
    /// the fewest false alarms whose rule reaches the target, by EC57's overlap too), or the
    /// primary ECG lead's
    /// share of the score, from 0.01 to 0.99 (e.g. `0.9`: the primary lead's members
    /// carry 0.9 together, the secondary's 0.1). A rule saved with `--save-rule` keeps it.
    #[arg(long, default_value = "served")]
    pooling: String,
    /// The ensemble's alarm rule as `on,off,k,n` instead of choosing it on the validation part.
    #[arg(long)]
    rule: Option<String>,
    /// Episode sensitivity the alarm rules are chosen for on the validation part.
    #[arg(long, default_value_t = 0.95)]
    target_sensitivity: f64,
    /// Electrode-motion SNRs of the noise stress test, dB (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        allow_negative_numbers = true,
        default_value = "24,18,12,6,0,-6"
    )]
    noise_db: Vec<f32>,
    /// Skip the noise stress test.
    #[arg(long)]
    no_noise: bool,
    /// Skip the classical baseline detector.
    #[arg(long)]
    no_classical: bool,
    /// Also evaluate the ensemble beside a count of ventricular beats: a beat classifier
    /// fitted on the train part's annotated beats (which it reads), and the larger of the
    /// ensemble's score and the beat run's (a run of five scores 1), its rule chosen on
    /// validation.
    #[arg(long)]
    beats: bool,
    /// How many fits from consecutive seeds the beat classifier averages, wherever one is
    /// fitted (`--beats`, `--cross-database`, `--folds`); the served counter's is the default.
    #[arg(
        long,
        value_name = "N",
        default_value_t = crate::training::beats::FITS,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=16)
    )]
    beat_fits: usize,
    /// Batches of 256 beats in each of a fit's 8 epochs, wherever the beat classifier is
    /// fitted; the served counter's is the default, fewer make a quicker smoke check.
    #[arg(
        long,
        value_name = "N",
        default_value_t = crate::training::beats::BATCHES,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000)
    )]
    beat_batches: usize,
    /// The leads read of every record, as a monitor sending them gives them: `both`,
    /// `primary` (lead II alone) or `secondary` (V alone, in the window's secondary slot; only
    /// records that have one), on the validation part where rules are chosen and on the
    /// reported part alike (with `--beats` the classifier is fitted so too). Only `both` with
    /// `--save-rule` (the zoo's rules are chosen on the records as they are) and with
    /// `--pooling choose` (one lead's members cannot be weighed against the other's).
    #[arg(long, value_name = "both|primary|secondary", default_value = "both")]
    leads: LeadSet,
    /// Also splice runs of 5-30 ventricular beats at 100-250/min, salvos of 2-4 and bigeminy,
    /// each from the patient's own annotated ventricular beats placed into its sinus rhythm,
    /// into every record of the reported part that holds such beats (mitdb, svdb, nstdb), and
    /// report how many runs the ensemble and the classical detector detect (an alarm raised
    /// from the run's first beat to 10 s after its fifth) and how many hard negatives draw an
    /// alarm, under their rules chosen on validation; in a second copy of each record, runs
    /// shaped as real monitors' missed true alarms are (under way 3 s into the run at the
    /// alarm, slow at 100-130/min, bursts at 200-300/min, after a flat start), reported by
    /// shape with the runs in paced records; where a beat classifier serves, Holmes's opinion
    /// on a proxy monitor's VT alarm at each event too; `--report` adds `spliced.svg`.
    #[arg(long)]
    spliced: bool,
    /// The seed the spliced events are drawn from.
    #[arg(long, default_value_t = 1, requires = "spliced")]
    splice_seed: u64,
    /// Only the N shortest records of each part (a smoke check).
    #[arg(long)]
    max_records: Option<usize>,
    /// Report folder: evaluation.json and the SVG figures.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Keep the ensemble's rule chosen on validation in the zoo's alarm_rules.json, for the
    /// daemon to serve this ensemble, hop and window with. With --folds K (not --fold-zoos):
    /// keep the median of the folds' beat rules as the zoo's beat counter's and of their alarm
    /// rules as the served members' and counter's, each fold's chosen on the other folds.
    #[arg(long, conflicts_with = "rule")]
    save_rule: bool,
    /// Instead of evaluating: choose again on the validation part, and keep in place of the
    /// old, the rule of every validated ensemble in the zoo's alarm_rules.json that no longer
    /// holds because a member was retrained or the beat counter refitted (its members, hop,
    /// window, counter, target and time-to-alarm bound; pooling and rule as `--pooling choose
    /// --save-rule` choose them, the plain mean where the engine does not weigh members).
    /// Rules with a member or the counter missing or unreadable are left, and listed. With
    /// `--folds K`: by patient-wise K-fold cross-validation over the validation and test parts
    /// instead, every rule not chosen by folds yet (each fold's pooling and rule chosen on the
    /// other folds; the book keeps the pooling most folds chose and the median of their rules
    /// for it, with the pooled out-of-fold figures); each rule is kept as it is chosen, and a
    /// run stopped part-way resumes with the rules left.
    #[arg(
        long,
        conflicts_with_all = [
            "members", "pooling", "rule", "save_rule", "beats", "report", "part",
            "target_sensitivity", "noise_db", "no_noise", "no_classical", "leads",
            "spliced",
        ]
    )]
    revalidate: bool,
    /// Instead of evaluating alarms: fit the beat classifier without svdb and judge it beat by
    /// beat on svdb, then without mitdb and on mitdb, then on mitdb, svdb and nstdb and on
    /// qtdb, which no part of the split holds (each beat called once, in the first ward window
    /// that finds it, matched to the annotated beats within 150 ms), beside the QRS detector's
    /// own sensitivity on ventricular beats and the published inter-patient anchor.
    #[arg(
        long,
        conflicts_with_all = [
            "members", "pooling", "rule", "save_rule", "beats", "report", "part",
            "target_sensitivity", "noise_db", "no_noise", "no_classical", "leads",
            "spliced", "revalidate",
        ]
    )]
    cross_database: bool,
    /// Instead of evaluating on one part: patient-wise K-fold (5 when K is left out)
    /// cross-validation over the
    /// validation and test parts (the records the members never trained on). For each fold
    /// the beat classifier's epoch (fitted on the train part), the beat rule and the alarm
    /// rule are chosen on the other folds, as `--beats` chooses them on validation, and
    /// judged on the fold; episodes detected, EC57 figures with 95 % intervals, false alarms
    /// per hour and time to alarm are pooled over the folds, per database and kind, clean and
    /// at 6 dB electrode motion (none with `--no-noise`), beside each fold's rules. With
    /// `--spliced`, each fold's spliced events are judged under its rules too.
    #[arg(
        long,
        value_name = "K",
        num_args = 0..=1,
        default_missing_value = "5",
        conflicts_with_all = [
            "pooling", "rule", "beats", "report", "part", "no_classical",
            "cross_database",
        ]
    )]
    folds: Option<usize>,
    /// With --folds K: fold over every record of the split instead, judging fold k with the
    /// zoo DIR/fold-k (`holmes train --fold k --folds K --out DIR/fold-k`), whose members
    /// learnt from the other folds but the next; the beat classifier is fitted on the same
    /// folds, and its epoch, the beat rule and the alarm rule are chosen on that next fold.
    #[arg(
        long,
        value_name = "DIR",
        requires = "folds",
        conflicts_with = "revalidate"
    )]
    fold_zoos: Option<PathBuf>,
    /// Print the evaluation as JSON instead of tables.
    #[arg(long)]
    json: bool,
}

pub fn run(a: EvaluateArgs) -> Result<()> {
    if a.save_rule && a.leads != LeadSet::Both {
        anyhow::bail!(
            "--save-rule keeps rules chosen on the records as they are, not with --leads {}",
            a.leads.as_str()
        );
    }
    let cfg = Config::load(a.config.as_deref())?;
    let part = SplitName::ALL
        .into_iter()
        .find(|p| p.as_str() == a.part)
        .with_context(|| format!("--part {:?}: one of train, validation, test", a.part))?;
    let rule = match &a.rule {
        None => None,
        Some(s) => Some(
            s.parse::<AlarmRule>()
                .map_err(|e| anyhow::anyhow!("--rule {e}"))?,
        ),
    };
    let pooling = match a.pooling.parse::<Pooling>() {
        // The daemon pools by the plain mean when its engine does not weigh members.
        Ok(Pooling::AsServed) if cfg.engine.combine == Combine::Mean => Pooling::Mean,
        Ok(p) => p,
        Err(e) => anyhow::bail!("--pooling {e}"),
    };
    if pooling == Pooling::Choose && a.leads != LeadSet::Both {
        anyhow::bail!(
            "--pooling choose weighs the two leads' members against each other; with --leads {} \
             one lead's members score alone, and every share pools them the same",
            a.leads.as_str()
        );
    }
    let opts = EvaluateOptions {
        data: a.data.unwrap_or_else(dataset::default_data_dir),
        split: a.split,
        part,
        models_dir: cfg.ensemble.models_dir.clone(),
        members: if a.members.is_empty() {
            cfg.ensemble.members.clone()
        } else {
            a.members
        },
        pooling,
        window_secs: cfg.ward.window_secs,
        hop_secs: cfg.ward.hop_secs,
        rule,
        target_sensitivity: a.target_sensitivity,
        delay_limits: Some(DelayLimits::BEDSIDE),
        noise_db: if a.no_noise { Vec::new() } else { a.noise_db },
        classical: !a.no_classical,
        max_records: a.max_records,
        beats: a.beats,
        beat_fitting: Fitting {
            fits: a.beat_fits,
            batches: a.beat_batches,
        },
        leads: a.leads,
        count_beats: cfg.ensemble.count_beats,
        spliced: a.spliced.then_some(a.splice_seed),
    };
    if let Some(k) = a.folds
        && k < 2
    {
        anyhow::bail!("--folds {k}: at least 2");
    }
    if a.revalidate {
        let weighs = cfg.engine.combine == Combine::WeightedMean;
        let done = evaluate::revalidate(&opts, weighs, a.folds).context("revalidation failed")?;
        print_as(a.json, done.as_slice(), evaluate::revalidation_text)?;
        let failed = done
            .iter()
            .filter(|r| matches!(r.outcome, evaluate::RevalidationOutcome::Failed { .. }))
            .count();
        anyhow::ensure!(
            failed == 0,
            "{failed} rule(s) could not be chosen again and were kept as they were"
        );
        return Ok(());
    }
    if let Some(k) = a.folds {
        let c = match &a.fold_zoos {
            Some(dir) if k < 3 => anyhow::bail!(
                "--folds {k} --fold-zoos {}: at least 3 (one judged, one chosen on, one learnt)",
                dir.display()
            ),
            Some(dir) => evaluate::cross_validate_retrained(&opts, k, dir),
            None => evaluate::cross_validate(&opts, k),
        }
        .context("cross-validation failed")?;
        print_as(a.json, &c, evaluate::cross_validation_text)?;
        if a.save_rule {
            let m = evaluate::save_folds_rule(&c, &opts.models_dir)?;
            eprintln!(
                "Kept the folds' median in {}: beats called at {}, bSQI gate {}; alarm on {}, off {}, {} of {}; opinion confirmed at {}",
                opts.models_dir.display(),
                m.beat_rule.call_at,
                m.beat_rule.min_bsqi,
                m.alarm_rule.on,
                m.alarm_rule.off,
                m.alarm_rule.k,
                m.alarm_rule.n,
                m.confirm_at
            );
        }
        return Ok(());
    }
    if a.cross_database {
        let c = evaluate::cross_database(&opts).context("cross-database evaluation failed")?;
        print_as(a.json, &c, evaluate::cross_database_text)?;
        return Ok(());
    }
    let e = evaluate::evaluate(&opts).context("evaluation failed")?;
    if let Some(dir) = &a.report {
        report::write_folder(&e, dir)?;
    }
    if a.save_rule {
        evaluate::save_rule(&e, &cfg.ensemble.models_dir)?;
        eprintln!(
            "alarm rule saved to {}",
            cfg.ensemble
                .models_dir
                .join(crate::alarm::rules::RULES_FILE)
                .display()
        );
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&e)?);
    } else {
        print!("{}", report::text(&e));
        if let Some(dir) = &a.report {
            println!("\nreport: {}", dir.display());
        }
    }
    Ok(())
}

/// Prints `value` as JSON, or as `text` gives it for a person.
fn print_as<T: serde::Serialize + ?Sized>(
    json: bool,
    value: &T,
    text: fn(&T) -> String,
) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(value)?);
    } else {
        print!("{}", text(value));
    }
    Ok(())
}
