//! A malformed or tampered model folder is refused with a message naming the file and the
//! problem; the other models still load.

mod common;

use std::path::{Path, PathBuf};

use holmes::zoo::{self, ZooModel};

type B = burn::backend::Flex;

/// Copies the smallest committed model into a fresh zoo folder.
fn scratch_zoo() -> (tempfile::TempDir, PathBuf) {
    let src = common::root().join("models");
    let first = zoo::model_dirs(&src)
        .unwrap()
        .into_iter()
        .min_by_key(|d| {
            std::fs::metadata(d.join(zoo::WEIGHTS_FILE))
                .map(|m| m.len())
                .unwrap_or(u64::MAX)
        })
        .expect("a committed model");
    let tmp = tempfile::tempdir().unwrap();
    let dst = tmp.path().join(first.file_name().unwrap());
    std::fs::create_dir_all(&dst).unwrap();
    for f in [zoo::MANIFEST_FILE, zoo::WEIGHTS_FILE] {
        std::fs::copy(first.join(f), dst.join(f)).unwrap();
    }
    (tmp, dst)
}

fn load_err(dir: &Path) -> String {
    ZooModel::<B>::load(dir, &Default::default())
        .unwrap_err()
        .to_string()
}

#[test]
fn intact_copy_loads() {
    let (_t, dir) = scratch_zoo();
    ZooModel::<B>::load(&dir, &Default::default()).unwrap();
}

#[test]
fn broken_json_names_the_manifest() {
    let (_t, dir) = scratch_zoo();
    let m = dir.join(zoo::MANIFEST_FILE);
    let text = std::fs::read_to_string(&m).unwrap();
    std::fs::write(&m, &text[..text.len() / 2]).unwrap();
    let e = load_err(&dir);
    assert!(
        e.contains("manifest.json") && e.contains("malformed manifest"),
        "{e}"
    );
}

#[test]
fn unknown_field_and_inconsistent_numbers_are_refused() {
    let (_t, dir) = scratch_zoo();
    let m = dir.join(zoo::MANIFEST_FILE);
    let orig = std::fs::read_to_string(&m).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&orig).unwrap();
    v["surprise"] = serde_json::json!(1);
    std::fs::write(&m, v.to_string()).unwrap();
    let e = load_err(&dir);
    assert!(
        e.contains("manifest.json") && e.contains("unknown field"),
        "{e}"
    );

    let mut v: serde_json::Value = serde_json::from_str(&orig).unwrap();
    v["parameters"] = serde_json::json!(v["parameters"].as_u64().unwrap() + 1);
    std::fs::write(&m, v.to_string()).unwrap();
    let e = load_err(&dir);
    assert!(e.contains("weights.mpk") && e.contains("parameters"), "{e}");
}

#[test]
fn tampered_weights_fail_the_checksum() {
    let (_t, dir) = scratch_zoo();
    let w = dir.join(zoo::WEIGHTS_FILE);
    let mut bytes = std::fs::read(&w).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&w, &bytes).unwrap();
    let e = load_err(&dir);
    assert!(
        e.contains("weights.mpk") && e.contains("checksum mismatch"),
        "{e}"
    );
}

#[test]
fn truncated_weights_with_a_matching_checksum_are_refused() {
    let (_t, dir) = scratch_zoo();
    let w = dir.join(zoo::WEIGHTS_FILE);
    let bytes = std::fs::read(&w).unwrap();
    let cut = &bytes[..bytes.len() / 3];
    std::fs::write(&w, cut).unwrap();
    let m = dir.join(zoo::MANIFEST_FILE);
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
    v["weights"]["sha256"] = serde_json::json!(zoo::sha256_hex(cut));
    std::fs::write(&m, v.to_string()).unwrap();
    let e = load_err(&dir);
    assert!(
        e.contains("weights.mpk") && e.contains("unusable weights"),
        "{e}"
    );
}

#[test]
fn missing_weights_name_the_file_and_the_rest_of_the_zoo_loads() {
    let (t, dir) = scratch_zoo();
    let other = t.path().join("zz-broken");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(dir.join(zoo::MANIFEST_FILE), other.join(zoo::MANIFEST_FILE)).unwrap();
    let (ok, bad) = zoo::load_dir::<B>(t.path(), &Default::default()).unwrap();
    assert_eq!(ok.len(), 1);
    assert_eq!(bad.len(), 1);
    let e = bad[0].to_string();
    assert!(e.contains("zz-broken") && e.contains("weights.mpk"), "{e}");
}
