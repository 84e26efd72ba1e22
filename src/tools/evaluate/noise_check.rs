//! The noise stress check of the served zoo, run by `cargo test`: the configured ensemble and
//! its validated alarm rule, on test records with the test part's recorded electrode-motion
//! noise at 6 dB. A clean sinus record stays below the alarm threshold in at least 95 % of
//! its noisy windows, and a VT (or VF) episode under the same noise still raises the alarm.

use std::path::Path;

use super::replay::{Detectors, replay};
use crate::alarm::matching::{AlarmTiming, MatchOptions, timing};
use crate::alarm::rules::RuleBook;
use crate::alarm::{AlarmRule, alarm_episodes};
use crate::config::Config;
use crate::core::window::SAMPLE_RATE_HZ;
use crate::serving::engine::ensemble::Ensemble;
use crate::signal::beats::BeatCounter;
use crate::training::dataset::{
    self, Database, EpisodeKind, NoiseBank, RecordData, Span, Split, SplitName,
};

const SNR_DB: f32 = 6.0;

struct Served {
    ens: Ensemble,
    rule: AlarmRule,
    window: usize,
    hop: usize,
}

fn served(root: &Path) -> Served {
    let cfg = Config::load(None).expect("embedded defaults");
    let dir = root.join(&cfg.ensemble.models_dir);
    let beats = BeatCounter::load(&dir, cfg.ward.hop_secs).expect("the zoo's beat counter reads");
    let ens = Ensemble::load(&dir, &cfg.ensemble.members, cfg.ward.window_secs)
        .expect("the configured ensemble loads")
        .with_beats(beats.filter(|_| cfg.ensemble.count_beats))
        .pooled_as_served(
            &dir,
            cfg.engine.combine,
            cfg.ward.hop_secs,
            cfg.ward.window_secs,
        );
    let members = ens.member_refs();
    let book = RuleBook::load(&dir).expect("the zoo's alarm rules read");
    let validated = book
        .lookup(&members, cfg.ward.hop_secs, cfg.ward.window_secs)
        .expect("the configured ensemble has an alarm rule chosen on validation (holmes evaluate --save-rule)");
    assert_eq!(
        validated.primary_share,
        ens.primary_share(),
        "the ensemble pools as its rule was chosen"
    );
    let rule = validated.rule;
    Served {
        ens,
        rule,
        window: cfg.ward.window_secs as usize * SAMPLE_RATE_HZ,
        hop: cfg.ward.hop_secs as usize * SAMPLE_RATE_HZ,
    }
}

/// `rec` cut to samples `[a, b)`, its episodes moved along.
fn cut(rec: &RecordData, a: usize, b: usize) -> RecordData {
    let mut r = rec.clone();
    r.leads = rec.leads.iter().map(|l| l[a..b].to_vec()).collect();
    r.episodes = rec
        .episodes
        .iter()
        .filter(|e| e.end > a as i64 && e.onset < b as i64)
        .map(|e| {
            let mut e = *e;
            e.onset = (e.onset - a as i64).max(0);
            e.confirmed = (e.confirmed - a as i64).max(0);
            e.end = (e.end - a as i64).min((b - a) as i64);
            e
        })
        .collect();
    let shift = |spans: &[Span]| -> Vec<Span> {
        spans
            .iter()
            .filter(|&&(s, e)| e > a as i64 && s < b as i64)
            .map(|&(s, e)| ((s - a as i64).max(0), (e - a as i64).min((b - a) as i64)))
            .collect()
    };
    r.noise = rec.noise.iter().map(|v| shift(v)).collect();
    r.ectopy = shift(&rec.ectopy);
    r.beats = rec
        .beats
        .iter()
        .filter(|&&x| x >= a as i64 && x < b as i64)
        .map(|&x| x - a as i64)
        .collect();
    r
}

#[test]
fn the_served_zoo_holds_under_6_db_electrode_motion() {
    let data = dataset::default_data_dir();
    if !data.join("vfdb").join("RECORDS").exists() {
        println!(
            "SKIPPED the_served_zoo_holds_under_6_db_electrode_motion: PhysioNet data not found at {} (set HOLMES_DATA)",
            data.display()
        );
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let s = served(root);
    let split = Split::read(&root.join("config/split.toml")).unwrap();
    let keys: Vec<(Database, String)> = dataset::record_keys(&data)
        .unwrap()
        .into_iter()
        .filter(|(db, n)| split.of(&format!("{}/{n}", db.name())) == Some(SplitName::Test))
        .collect();
    let recs = dataset::load_keys(&data, &keys).unwrap();
    let bank = NoiseBank::load(&data, &[SplitName::Test])
        .unwrap()
        .pop()
        .unwrap();
    let det = Detectors {
        ensemble: Some(&s.ens),
        classical: false,
        beats: None,
        first_slot: 0,
    };
    let hop_ms = (s.hop * 1000 / SAMPLE_RATE_HZ) as i64;

    // A clean sinus record: the first mitdb test record without a reference episode.
    let sinus = recs
        .iter()
        .find(|r| r.db == Database::Mitdb && r.episodes.is_empty())
        .expect("a mitdb test record without VT/VF");
    let mut leads = sinus.leads.clone();
    let spans = bank.stress(&mut leads, 0, &sinus.beats, SNR_DB);
    let r = replay(sinus, &leads, s.window, s.hop, det).unwrap();
    let ms = |x: usize| (x * 1000 / SAMPLE_RATE_HZ) as i64;
    let window_ms = ms(s.window);
    // Windows wholly inside a noisy stretch.
    let noisy: Vec<f32> = r
        .ends_ms
        .iter()
        .zip(&r.ensemble)
        .filter(|&(&end, _)| {
            spans
                .iter()
                .any(|&(a, b)| end - window_ms >= ms(a) && end <= ms(b))
        })
        .filter_map(|(_, v)| *v)
        .collect();
    assert!(noisy.len() >= 20, "{} noisy windows scored", noisy.len());
    let below = noisy.iter().filter(|&&v| v < s.rule.on).count();
    let share = below as f64 / noisy.len() as f64;
    println!(
        "{}: {below} of {} noisy windows below {:.2} at {SNR_DB} dB",
        sinus.key,
        noisy.len(),
        s.rule.on
    );
    assert!(
        share >= 0.95,
        "{}: only {share:.3} below the threshold",
        sinus.key
    );

    // A VT episode (else VF) of a test record, at least 6 s long and 60 s into its record,
    // under the same noise from a minute before its onset.
    let pick = |kind| {
        recs.iter().find_map(|r| {
            r.episodes
                .iter()
                .find(|e| {
                    e.kind == kind
                        && e.end - e.onset >= 6 * SAMPLE_RATE_HZ as i64
                        && e.onset >= 60 * SAMPLE_RATE_HZ as i64
                })
                .map(|e| (r, *e))
        })
    };
    let (rec, ep) = pick(EpisodeKind::Vt)
        .or_else(|| pick(EpisodeKind::Vf))
        .expect("a VT or VF test episode");
    let hz = SAMPLE_RATE_HZ;
    let a = ep.onset as usize - 60 * hz;
    let b = (ep.onset as usize + 90 * hz).min(rec.leads[0].len());
    let part = cut(rec, a, b);
    let mut leads = part.leads.clone();
    bank.stress_from(&mut leads, 0, &part.beats, SNR_DB, 0);
    let r = replay(&part, &leads, s.window, s.hop, det).unwrap();
    let series: Vec<(i64, Option<f32>)> = r
        .ends_ms
        .iter()
        .copied()
        .zip(r.ensemble.iter().copied())
        .collect();
    let alarms = alarm_episodes(s.rule, hop_ms, &series).unwrap();
    let onset_ms = 60_000;
    let end_ms = ms((ep.end as usize).min(b) - a);
    let t = timing((onset_ms, end_ms), &alarms, MatchOptions::default());
    println!(
        "{} {:?} at {} s: {t:?} under {SNR_DB} dB",
        rec.key,
        ep.kind,
        ep.onset / hz as i64
    );
    assert!(
        matches!(t, AlarmTiming::Raised { .. }),
        "{}: the episode at {} s raised no alarm under noise ({t:?})",
        rec.key,
        ep.onset / hz as i64
    );
}
