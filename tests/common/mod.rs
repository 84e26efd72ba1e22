//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The PhysioNet folder (`HOLMES_DATA` or `../shared/data/physionet`), or `None` with the
/// reason printed, so data-dependent tests skip visibly when it is absent.
pub fn data_dir(test: &str) -> Option<PathBuf> {
    let dir = holmes::dataset::default_data_dir();
    if dir.join("vfdb").join("RECORDS").exists() {
        Some(dir)
    } else {
        println!(
            "SKIPPED {test}: PhysioNet data not found at {} (set HOLMES_DATA)",
            dir.display()
        );
        None
    }
}

/// The repository root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}
