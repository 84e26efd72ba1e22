//! The patient-wise split: every record (patient group) wholly in train, validation or test.
//!
//! [`Split::generate`] is deterministic. Groups (patients; see [`group_of`](super::group_of))
//! that an earlier split placed keep their part, so a grown data set does not move a test
//! patient into training; a group whose records an earlier split had put in different parts
//! goes to train (nothing trained on enters test). Per database, the other groups holding
//! positive windows are dealt out largest first to the split furthest below its share of
//! positives (60/20/20), with validation and test guaranteed at least one positive group each
//! where there are three; the remaining groups are dealt the same way by window count. The
//! result is committed as `config/split.toml`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Database, Dataset, DatasetError};

/// The three parts of the split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SplitName {
    Train,
    Validation,
    Test,
}

impl SplitName {
    pub const ALL: [SplitName; 3] = [SplitName::Train, SplitName::Validation, SplitName::Test];
    const SHARE: [f64; 3] = [0.6, 0.2, 0.2];

    pub fn as_str(self) -> &'static str {
        match self {
            SplitName::Train => "train",
            SplitName::Validation => "validation",
            SplitName::Test => "test",
        }
    }
}

/// Record keys (`db/name`) per split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Split {
    /// Records the models learn from.
    pub train: Vec<String>,
    /// Records for early stopping and the composer's accuracy profiles.
    pub validation: Vec<String>,
    /// Records kept for the final report only.
    pub test: Vec<String>,
}

impl Split {
    /// Which split holds record `key`.
    pub fn of(&self, key: &str) -> Option<SplitName> {
        SplitName::ALL
            .into_iter()
            .find(|&n| self.part(n).iter().any(|k| k == key))
    }

    pub fn part(&self, name: SplitName) -> &[String] {
        match name {
            SplitName::Train => &self.train,
            SplitName::Validation => &self.validation,
            SplitName::Test => &self.test,
        }
    }

    /// Builds the split from a data set's windows, keeping `previous` placements (see the
    /// module doc).
    pub fn generate(ds: &Dataset, previous: Option<&Split>) -> Split {
        // group -> (database, positive windows, windows, records)
        let mut groups: BTreeMap<String, (Database, usize, usize, Vec<String>)> = BTreeMap::new();
        for r in &ds.records {
            let g = groups
                .entry(r.group.clone())
                .or_insert((r.db, 0, 0, Vec::new()));
            g.3.push(r.key.clone());
        }
        for w in &ds.windows {
            let r = &ds.records[w.record];
            let g = groups.get_mut(&r.group).expect("group of a loaded record");
            g.2 += 1;
            g.1 += usize::from(w.positive());
        }
        let mut parts: [Vec<String>; 3] = Default::default();
        if let Some(prev) = previous {
            groups.retain(|_, g| {
                let placed: Vec<SplitName> = g.3.iter().filter_map(|k| prev.of(k)).collect();
                let Some(&first) = placed.first() else {
                    return true;
                };
                let to = if placed.iter().all(|&p| p == first) {
                    first
                } else {
                    SplitName::Train
                };
                parts[to as usize].extend(g.3.iter().cloned());
                false
            });
        }
        for db in Database::ALL {
            let mut pos: Vec<_> = groups.iter().filter(|g| g.1.0 == db && g.1.1 > 0).collect();
            let mut neg: Vec<_> = groups
                .iter()
                .filter(|g| g.1.0 == db && g.1.1 == 0)
                .collect();
            pos.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(a.0.cmp(b.0)));
            neg.sort_by(|a, b| b.1.2.cmp(&a.1.2).then(a.0.cmp(b.0)));
            deal(&pos, |g| g.1, true, &mut parts);
            deal(&neg, |g| g.2, false, &mut parts);
        }
        for p in &mut parts {
            p.sort();
        }
        let [train, validation, test] = parts;
        Split {
            train,
            validation,
            test,
        }
    }

    /// Windows and positive windows per split and database, as a text table.
    pub(crate) fn summary(&self, ds: &Dataset) -> String {
        let mut counts: BTreeMap<(SplitName, Database), [usize; 3]> = BTreeMap::new();
        let first = ds.spec.first_end_secs as usize * crate::core::window::SAMPLE_RATE_HZ;
        for w in &ds.windows {
            let r = &ds.records[w.record];
            if let Some(s) = self.of(&r.key) {
                let c = counts.entry((s, r.db)).or_default();
                c[0] += 1;
                c[1] += usize::from(w.positive());
                c[2] += usize::from(ds.lead_usable(w, 1, first));
            }
        }
        let mut out = String::from("split       db     windows positives with-2nd-lead\n");
        for ((s, db), [n, p, l2]) in counts {
            out += &format!(
                "{:<11} {:<6} {n:>7} {p:>9} {l2:>13}\n",
                s.as_str(),
                db.name()
            );
        }
        out
    }

    /// Reads a split file and checks it.
    pub fn read(path: &Path) -> Result<Split, DatasetError> {
        let split = Split::read_unchecked(path)?;
        split.check().map_err(|reason| DatasetError::Split {
            path: path.to_owned(),
            reason,
        })?;
        Ok(split)
    }

    /// Reads a split file as it is (a split made under other grouping rules may tear a group
    /// apart; [`Split::generate`] mends that).
    pub(crate) fn read_unchecked(path: &Path) -> Result<Split, DatasetError> {
        let text = std::fs::read_to_string(path).map_err(|source| DatasetError::Io {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| DatasetError::Split {
            path: path.to_owned(),
            reason: e.to_string(),
        })
    }

    /// Writes the split with a header comment.
    pub(crate) fn write(&self, path: &Path) -> Result<(), DatasetError> {
        let body = toml::to_string(self).expect("a split serialises");
        let text = format!(
            "# Patient-wise split of vfdb, cudb, mitdb, svdb and nstdb records (mitdb 201 and 202\n\
             # are one patient; mitdb 118, 119 and nstdb's noisy copies of them share patients and\n\
             # recorded noise: each group stays together). Generated by `holmes split`, which keeps\n\
             # the placements of the split it replaces; deterministic.\n{body}"
        );
        std::fs::write(path, text).map_err(|source| DatasetError::Io {
            path: path.to_owned(),
            source,
        })
    }

    /// No record in two splits, and records of one patient in one split.
    pub fn check(&self) -> Result<(), String> {
        let mut seen: BTreeMap<&str, SplitName> = BTreeMap::new();
        let mut groups: BTreeMap<String, SplitName> = BTreeMap::new();
        for name in SplitName::ALL {
            for k in self.part(name) {
                if let Some(prev) = seen.insert(k, name) {
                    return Err(format!(
                        "record {k} is in both {} and {}",
                        prev.as_str(),
                        name.as_str()
                    ));
                }
                if let Some(prev) = groups.insert(super::group_of(k), name)
                    && prev != name
                {
                    return Err(format!(
                        "patient of record {k} is split across {} and {}",
                        prev.as_str(),
                        name.as_str()
                    ));
                }
            }
        }
        Ok(())
    }
}

type Group<'a> = (&'a String, &'a (Database, usize, usize, Vec<String>));

/// Deals groups (sorted largest first) to the split furthest below its share of `weight`.
fn deal<'a>(
    groups: &[Group<'a>],
    weight: impl Fn(&(Database, usize, usize, Vec<String>)) -> usize,
    ensure_each: bool,
    parts: &mut [Vec<String>; 3],
) {
    let total: usize = groups.iter().map(|g| weight(g.1)).sum();
    let mut got = [0usize; 3];
    let mut has = [false; 3];
    for (i, g) in groups.iter().enumerate() {
        let remaining = groups.len() - i;
        let lacking: Vec<usize> = (0..3).filter(|&s| !has[s]).collect();
        let candidates: Vec<usize> =
            if ensure_each && !lacking.is_empty() && remaining <= lacking.len() {
                lacking
            } else {
                (0..3).collect()
            };
        let deficit = |s: usize| SplitName::SHARE[s] * total as f64 - got[s] as f64;
        let s = *candidates
            .iter()
            .max_by(|&&a, &&b| deficit(a).total_cmp(&deficit(b)).then(b.cmp(&a)))
            .expect("three splits");
        got[s] += weight(g.1);
        has[s] = true;
        parts[s].extend(g.1.3.iter().cloned());
    }
}
