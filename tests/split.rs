//! The committed patient-wise split: disjoint, groups kept whole, positives from every
//! VT/VF database in every part, and stable under `Split::generate`.

mod common;

use std::collections::BTreeSet;

use holmes::training::dataset::{self, Database, Dataset, Split, SplitName, WindowSpec};

fn committed() -> Split {
    Split::read(&common::root().join("config/split.toml")).expect("config/split.toml reads")
}

#[test]
fn no_record_is_in_two_splits_and_patients_stay_whole() {
    let s = committed();
    s.check().unwrap();
    let mut seen = BTreeSet::new();
    for name in SplitName::ALL {
        for k in s.part(name) {
            assert!(seen.insert(k.clone()), "{k} appears twice");
        }
    }
    assert_eq!(
        seen.len(),
        22 + 35 + 48 + 78 + 12,
        "every record is assigned"
    );
    assert_eq!(s.of("mitdb/201"), s.of("mitdb/202"));
    // The noise stress test records share patients and recorded noise with mitdb 118/119.
    for k in ["mitdb/118", "mitdb/119", "nstdb/118e06", "nstdb/119e_6"] {
        assert_eq!(s.of(k), Some(SplitName::Train), "{k}");
    }
}

#[test]
fn a_split_that_tears_a_patient_apart_is_refused() {
    let mut s = committed();
    let from = s.of("mitdb/201").unwrap();
    let to = if from == SplitName::Test {
        SplitName::Train
    } else {
        SplitName::Test
    };
    match from {
        SplitName::Train => s.train.retain(|k| k != "mitdb/201"),
        SplitName::Validation => s.validation.retain(|k| k != "mitdb/201"),
        SplitName::Test => s.test.retain(|k| k != "mitdb/201"),
    }
    match to {
        SplitName::Train => s.train.push("mitdb/201".into()),
        _ => s.test.push("mitdb/201".into()),
    }
    let err = s.check().unwrap_err();
    assert!(err.contains("mitdb/20"), "{err}");
}

#[test]
fn every_split_holds_positives_from_every_database_and_is_reproducible() {
    let Some(data) = common::data_dir("every_split_holds_positives_from_every_database") else {
        return;
    };
    let ds = Dataset::new(dataset::load_all(&data).unwrap(), WindowSpec::default());
    let s = committed();
    for name in SplitName::ALL {
        for db in [Database::Vfdb, Database::Cudb, Database::Mitdb] {
            let pos = ds
                .windows
                .iter()
                .filter(|w| w.positive())
                .filter(|w| ds.records[w.record].db == db)
                .filter(|w| s.of(&ds.records[w.record].key) == Some(name))
                .count();
            assert!(
                pos > 0,
                "{} has no positive window from {}",
                name.as_str(),
                db.name()
            );
        }
    }
    assert_eq!(
        Split::generate(&ds, Some(&s)),
        s,
        "`holmes split` keeps the committed split as it is"
    );
    // Dealt afresh, the split is still whole and keeps the groups together.
    let fresh = Split::generate(&ds, None);
    fresh.check().unwrap();
    assert_eq!(fresh.of("mitdb/118"), fresh.of("nstdb/119e24"));
}
