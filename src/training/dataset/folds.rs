//! Patient-wise folds for cross-validation: records dealt by patient group into K folds of
//! about even episodes, and the split that each fold's models learn and are chosen under.
//!
//! [`deal`] serves `holmes evaluate --folds` over the held-out parts and, over every record,
//! `holmes train --fold`: for fold `k` of K, [`fold_split`] puts fold `k` in the test part
//! (judged only), the next fold (cyclically) in the validation part (early stopping, the beat
//! classifier's epoch, the beat and alarm rules) and the other K-2 folds in the train part, so
//! that nothing about fold `k` is learnt or chosen on fold `k`.

use std::collections::BTreeMap;

use super::{Database, RecordData, Split};

/// A patient group weighs at most this many episodes when [`fold_split`] deals the folds:
/// one vfdb record holds 60 episodes, and dealt by its full count it would be a fold of its
/// own, a validation part of one patient.
pub(crate) const FOLD_EPISODE_CAP: usize = 10;

/// The fold of each record (0-based), as `holmes evaluate --folds` deals the held-out parts:
/// patient groups, those with the most episodes first, each to the fold with the fewest
/// episodes so far (then the fewest groups), so that every fold holds episodes to judge and
/// the others enough to choose on. Deterministic.
pub(crate) fn deal(recs: &[RecordData], k: usize) -> Vec<usize> {
    deal_with(recs, k, usize::MAX, false)
}

/// The fold of each record (0-based), as [`fold_split`] deals every record: as [`deal`], but
/// a group weighs at most [`FOLD_EPISODE_CAP`] episodes, and the groups without episodes go
/// each to the fold with the fewest groups, so that the folds hold about as many patients
/// (dealt by episodes alone, they would all go to the fold with fewest episodes).
pub(crate) fn deal_every_record(recs: &[RecordData], k: usize) -> Vec<usize> {
    deal_with(recs, k, FOLD_EPISODE_CAP, true)
}

fn deal_with(recs: &[RecordData], k: usize, cap: usize, spread_empty: bool) -> Vec<usize> {
    let k = k.max(1);
    let mut groups: BTreeMap<&str, (usize, Database)> = BTreeMap::new();
    for r in recs {
        let g = groups.entry(r.group.as_str()).or_insert((0, r.db));
        g.0 += r.episodes.len();
    }
    for g in groups.values_mut() {
        g.0 = g.0.min(cap);
    }
    let mut order: Vec<(&str, usize, Database)> =
        groups.iter().map(|(g, &(n, db))| (*g, n, db)).collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.2.cmp(&b.2)).then(a.0.cmp(b.0)));
    let mut load = vec![(0usize, 0usize); k];
    let mut fold: BTreeMap<&str, usize> = BTreeMap::new();
    for (g, n, _) in order {
        let f = if spread_empty && n == 0 {
            (0..k).min_by_key(|&f| (load[f].1, load[f].0, f))
        } else {
            (0..k).min_by_key(|&f| (load[f], f))
        }
        .expect("k >= 1");
        load[f].0 += n;
        load[f].1 += 1;
        fold.insert(g, f);
    }
    recs.iter().map(|r| fold[r.group.as_str()]).collect()
}

/// The split of fold `fold` (0-based) of `k` (at least 3) over `recs` dealt by
/// [`deal_every_record`]: that fold is the test part, the next one the validation part, the
/// rest the train part.
pub(crate) fn fold_split(recs: &[RecordData], k: usize, fold: usize) -> Split {
    let k = k.max(3);
    let of = deal_every_record(recs, k);
    let validation = (fold + 1) % k;
    let mut split = Split {
        train: Vec::new(),
        validation: Vec::new(),
        test: Vec::new(),
    };
    for (r, &f) in recs.iter().zip(&of) {
        let part = if f == fold {
            &mut split.test
        } else if f == validation {
            &mut split.validation
        } else {
            &mut split.train
        };
        part.push(r.key.clone());
    }
    for p in [&mut split.train, &mut split.validation, &mut split.test] {
        p.sort();
    }
    split
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::training::dataset::{Episode, EpisodeKind, SplitName, group_of};

    fn rec(db: Database, name: &str, episodes: usize) -> RecordData {
        let key = format!("{}/{name}", db.name());
        RecordData {
            db,
            group: group_of(&key),
            key,
            leads: vec![vec![0.0; 10]],
            episodes: (0..episodes as i64)
                .map(|i| Episode {
                    kind: EpisodeKind::Vt,
                    onset: i,
                    confirmed: i,
                    end: i + 1,
                })
                .collect(),
            noise: vec![Vec::new()],
            beats: Vec::new(),
            ectopy: Vec::new(),
            paced: false,
        }
    }

    fn records() -> Vec<RecordData> {
        vec![
            rec(Database::Vfdb, "418", 60),
            rec(Database::Mitdb, "201", 3),
            rec(Database::Mitdb, "202", 2),
            rec(Database::Mitdb, "118", 0),
            rec(Database::Nstdb, "118e06", 0),
            rec(Database::Cudb, "cu01", 1),
            rec(Database::Cudb, "cu02", 1),
            rec(Database::Svdb, "800", 4),
            rec(Database::Svdb, "801", 0),
            rec(Database::Mitdb, "207", 5),
            rec(Database::Svdb, "802", 3),
            rec(Database::Svdb, "803", 3),
            rec(Database::Svdb, "804", 3),
            rec(Database::Svdb, "805", 3),
            rec(Database::Svdb, "806", 3),
        ]
    }

    #[test]
    fn each_fold_is_the_test_part_once_and_never_learnt_or_chosen_on() {
        let recs = records();
        let k = 4;
        let of = deal_every_record(&recs, k);
        let mut tested = vec![0; recs.len()];
        for fold in 0..k {
            let s = fold_split(&recs, k, fold);
            for (i, r) in recs.iter().enumerate() {
                let part = s.of(&r.key).expect("every record placed");
                match part {
                    SplitName::Test => {
                        assert_eq!(of[i], fold);
                        tested[i] += 1;
                    }
                    SplitName::Validation => assert_eq!(of[i], (fold + 1) % k),
                    SplitName::Train => assert!(of[i] != fold && of[i] != (fold + 1) % k),
                }
            }
            let placed = s.train.len() + s.validation.len() + s.test.len();
            assert_eq!(placed, recs.len(), "each record in one part");
        }
        assert!(tested.iter().all(|&t| t == 1), "{tested:?}");
    }

    #[test]
    fn patient_groups_stay_in_one_fold() {
        let recs = records();
        for capped in [false, true] {
            let of = if capped {
                deal_every_record(&recs, 3)
            } else {
                deal(&recs, 3)
            };
            let fold = |key: &str| of[recs.iter().position(|r| r.key == key).unwrap()];
            assert_eq!(fold("mitdb/201"), fold("mitdb/202"));
            assert_eq!(fold("mitdb/118"), fold("nstdb/118e06"));
            // Uncapped, the record with most episodes is a fold of its own; capped, it shares.
            let big = fold("vfdb/418");
            let with_big = of.iter().filter(|&&f| f == big).count();
            assert_eq!(with_big == 1, !capped, "capped {capped}: {of:?}");
        }
        // Every record dealt, the folds hold about as many patient groups.
        let of = deal_every_record(&recs, 3);
        let mut groups = [
            std::collections::BTreeSet::new(),
            Default::default(),
            Default::default(),
        ];
        for (r, &f) in recs.iter().zip(&of) {
            groups[f].insert(r.group.clone());
        }
        let sizes: Vec<usize> = groups.iter().map(|g| g.len()).collect();
        assert!(
            sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1,
            "{sizes:?}"
        );
    }

    #[test]
    fn uncapped_the_folds_even_out_the_episodes() {
        let recs = vec![
            rec(Database::Mitdb, "201", 3),
            rec(Database::Mitdb, "202", 1),
            rec(Database::Mitdb, "205", 2),
            rec(Database::Vfdb, "418", 5),
            rec(Database::Vfdb, "419", 4),
            rec(Database::Vfdb, "420", 1),
        ];
        let f = deal(&recs, 3);
        assert_eq!(f[0], f[1], "mitdb 201 and 202 are one patient");
        let mut sizes = [0usize; 3];
        for &x in &f {
            sizes[x] += 1;
        }
        assert!(sizes.iter().all(|&n| n >= 1), "{sizes:?}");
        // The records with most episodes go to different folds, and the episodes even out.
        assert_ne!(f[3], f[4]);
        let mut episodes = [0usize; 3];
        for (r, &x) in recs.iter().zip(&f) {
            episodes[x] += r.episodes.len();
        }
        episodes.sort_unstable();
        assert_eq!(episodes, [5, 5, 6], "{f:?}");
    }
}
