//! The WFDB reader against values checked by hand in the PhysioNet files and the counts the
//! data README gives.

mod common;

use std::collections::BTreeMap;

use holmes::training::wfdb::{Record, read_annotations};

#[test]
fn first_samples_match_hand_decoded_bytes() {
    let Some(data) = common::data_dir("first_samples_match_hand_decoded_bytes") else {
        return;
    };
    // vfdb/418.dat starts 80 ff f2: 0xF80 = -128 and 0xFF2 = -14 (12-bit two's complement).
    let r = Record::open(&data.join("vfdb"), "418").unwrap();
    assert_eq!(r.len(), 525_000);
    assert_eq!((r.digital[0][0], r.digital[1][0]), (-128, -14));
    assert_eq!(r.physical(0)[0], -0.64); // -128 / 200 adu/mV
    // mitdb/100.dat starts e3 33 f3: 0x3E3 = 995, 0x3F3 = 1011; baseline 1024.
    let r = Record::open(&data.join("mitdb"), "100").unwrap();
    assert_eq!(r.len(), 650_000);
    assert_eq!(r.header.fs, 360.0);
    assert_eq!((r.digital[0][0], r.digital[1][0]), (995, 1011));
    assert!((r.physical(0)[0] - (-0.145)).abs() < 1e-6);
    assert_eq!(r.header.signals[0].description, "MLII");
    // cudb: one signal, gain 400.
    let r = Record::open(&data.join("cudb"), "cu01").unwrap();
    assert_eq!((r.len(), r.digital.len()), (127_232, 1));
    assert_eq!(r.header.signals[0].gain, 400.0);
}

#[test]
fn every_record_matches_its_header_checksums() {
    let Some(data) = common::data_dir("every_record_matches_its_header_checksums") else {
        return;
    };
    let keys = holmes::training::dataset::record_keys(&data).unwrap();
    assert_eq!(keys.len(), 22 + 35 + 48 + 78 + 12);
    for (db, name) in keys {
        let r = Record::open(&data.join(db.name()), &name).unwrap();
        for (i, s) in r.header.signals.iter().enumerate() {
            assert_eq!(
                Some(r.checksum(i)),
                s.checksum,
                "{}/{name} signal {i}",
                db.name()
            );
            assert_eq!(
                Some(r.digital[i][0]),
                s.initial_value,
                "{}/{name} signal {i}",
                db.name()
            );
        }
    }
}

fn symbol_counts(
    db: &str,
    data: &std::path::Path,
) -> (usize, BTreeMap<String, usize>, BTreeMap<i8, usize>) {
    let names = std::fs::read_to_string(data.join(db).join("RECORDS")).unwrap();
    let (mut total, mut by, mut noise_sub) = (0, BTreeMap::new(), BTreeMap::new());
    for name in names.lines().filter(|l| !l.trim().is_empty()) {
        let ann = read_annotations(&data.join(db).join(format!("{}.atr", name.trim()))).unwrap();
        total += ann.len();
        for a in &ann {
            *by.entry(a.symbol().to_owned()).or_insert(0) += 1;
            if a.symbol() == "~" {
                *noise_sub.entry(a.subtype).or_insert(0) += 1;
            }
        }
    }
    (total, by, noise_sub)
}

#[test]
fn annotation_counts_match_the_data_readme() {
    let Some(data) = common::data_dir("annotation_counts_match_the_data_readme") else {
        return;
    };
    let (total, by, _) = symbol_counts("vfdb", &data);
    assert_eq!((total, by.get("+").copied()), (592, Some(592)));

    let (total, by, sub) = symbol_counts("cudb", &data);
    assert_eq!(total, 19_792);
    for (sym, n) in [
        ("N", 19_534),
        ("[", 47),
        ("]", 39),
        ("~", 149),
        ("|", 3),
        ("+", 20),
    ] {
        assert_eq!(by.get(sym).copied(), Some(n), "cudb {sym}");
    }
    assert_eq!(sub, BTreeMap::from([(-1, 69), (0, 18), (1, 62)]));

    let (_, by, _) = symbol_counts("mitdb", &data);
    for (sym, n) in [
        ("N", 75_052),
        ("V", 7_130),
        ("/", 7_028),
        ("!", 472),
        ("+", 1_291),
        ("~", 616),
        ("\"", 437),
        ("[", 6),
    ] {
        assert_eq!(by.get(sym).copied(), Some(n), "mitdb {sym}");
    }
}

#[test]
fn rhythm_aux_strings_are_read() {
    let Some(data) = common::data_dir("rhythm_aux_strings_are_read") else {
        return;
    };
    // vfdb/418's rhythms are N and VFL only (data README, "Rhythm labels by record").
    let ann = read_annotations(&data.join("vfdb/418.atr")).unwrap();
    let rhythms: std::collections::BTreeSet<_> = ann.iter().filter_map(|a| a.aux.clone()).collect();
    assert_eq!(
        rhythms.into_iter().collect::<Vec<_>>(),
        vec!["(N".to_string(), "(VFL".to_string()]
    );
}
