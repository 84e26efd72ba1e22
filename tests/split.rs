//! The committed patient-wise split: disjoint, patients kept whole, positives from every
//! database in every part, and exactly what `Split::generate` makes from the data.

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
    assert_eq!(seen.len(), 22 + 35 + 48, "every record is assigned");
    assert_eq!(s.of("mitdb/201"), s.of("mitdb/202"));
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
        for db in Database::ALL {
            let pos = ds
                .windows
                .iter()
                .filter(|w| w.label)
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
        Split::generate(&ds),
        s,
        "the committed split is what `holmes split` makes"
    );
}
