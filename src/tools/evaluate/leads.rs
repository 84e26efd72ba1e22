//! Which of a record's leads an evaluation reads ([`LeadSet`]): all of them, as a monitor
//! sending both gives them, or one alone, as a monitor sending only lead II (the primary) or
//! only V (the secondary) gives it. A monitor sending V alone fills the window's secondary
//! slot, so the ensemble scores it with its secondary-lead members, as the ward would. Which
//! signal of a record is "V" is its header's order (the second signal: V1-V5 in mitdb, a chest
//! lead or ECG2 in svdb and vfdb).

use serde::Serialize;

use crate::training::dataset::RecordData;

/// The leads an evaluation reads of each record, on the validation part where rules are
/// chosen and on the part reported alike.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LeadSet {
    /// Every lead the record has.
    #[default]
    Both,
    /// The primary lead (lead II) alone.
    Primary,
    /// The secondary lead (V) alone: only records that have one.
    Secondary,
}

impl LeadSet {
    /// The window slot the first lead read fills (0 primary, 1 secondary).
    pub(crate) fn first_slot(self) -> usize {
        match self {
            LeadSet::Secondary => 1,
            LeadSet::Both | LeadSet::Primary => 0,
        }
    }

    /// Leaves each record the leads (and those leads' noise marks) this set reads; with
    /// [`LeadSet::Secondary`], records with one lead are dropped.
    pub(crate) fn select(self, recs: &mut Vec<RecordData>) {
        match self {
            LeadSet::Both => {}
            LeadSet::Primary => {
                for r in recs.iter_mut() {
                    r.leads.truncate(1);
                    r.noise.truncate(1);
                }
            }
            LeadSet::Secondary => {
                recs.retain(|r| r.leads.len() > 1);
                for r in recs.iter_mut() {
                    keep_second(&mut r.leads);
                    keep_second(&mut r.noise);
                }
            }
        }
    }

    /// The set's name, as `--leads` takes it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            LeadSet::Both => "both",
            LeadSet::Primary => "primary",
            LeadSet::Secondary => "secondary",
        }
    }

    /// How a report names the set.
    pub(crate) fn words(self) -> &'static str {
        match self {
            LeadSet::Both => "every lead",
            LeadSet::Primary => "the primary lead alone",
            LeadSet::Secondary => "the secondary lead alone",
        }
    }
}

/// Leaves `v` its second item alone (none where it has one).
fn keep_second<T>(v: &mut Vec<T>) {
    v.truncate(2);
    if !v.is_empty() {
        v.remove(0);
    }
    v.truncate(1);
}

impl std::str::FromStr for LeadSet {
    type Err = String;

    /// `both`, `primary` or `secondary`.
    fn from_str(s: &str) -> Result<LeadSet, String> {
        [LeadSet::Both, LeadSet::Primary, LeadSet::Secondary]
            .into_iter()
            .find(|set| set.as_str() == s)
            .ok_or_else(|| format!("{s:?}: one of both, primary, secondary"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::training::dataset::Database;

    fn record(leads: usize) -> RecordData {
        RecordData {
            db: Database::Mitdb,
            key: format!("mitdb/{leads}"),
            group: format!("mitdb/{leads}"),
            leads: (0..leads).map(|k| vec![k as f32 + 1.0; 10]).collect(),
            episodes: Vec::new(),
            noise: (0..leads).map(|k| vec![(k as i64, 5)]).collect(),
            beats: Vec::new(),
            paced: false,
            ectopy: Vec::new(),
        }
    }

    #[test]
    fn the_primary_lead_alone_keeps_that_lead_and_its_noise_marks() {
        let mut recs = vec![record(2), record(1)];
        LeadSet::Primary.select(&mut recs);
        assert_eq!(recs.len(), 2);
        for r in &recs {
            assert_eq!(r.leads, vec![vec![1.0; 10]]);
            assert_eq!(r.noise, vec![vec![(0, 5)]]);
        }
        assert_eq!(LeadSet::Primary.first_slot(), 0);
    }

    #[test]
    fn the_secondary_lead_alone_keeps_records_that_have_one_and_fills_its_slot() {
        let mut recs = vec![record(1), record(2)];
        LeadSet::Secondary.select(&mut recs);
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].key, "mitdb/2");
        assert_eq!(recs[0].leads, vec![vec![2.0; 10]]);
        assert_eq!(recs[0].noise, vec![vec![(1, 5)]]);
        assert_eq!(LeadSet::Secondary.first_slot(), 1);
    }

    #[test]
    fn both_leads_leave_the_records_as_they_are() {
        let mut recs = vec![record(2), record(1)];
        let before: Vec<_> = recs
            .iter()
            .map(|r| (r.leads.clone(), r.noise.clone()))
            .collect();
        LeadSet::Both.select(&mut recs);
        let after: Vec<_> = recs
            .iter()
            .map(|r| (r.leads.clone(), r.noise.clone()))
            .collect();
        assert_eq!(after, before);
    }

    #[test]
    fn a_lead_set_reads_from_its_name() {
        for set in [LeadSet::Both, LeadSet::Primary, LeadSet::Secondary] {
            let name = serde_json::to_value(set).unwrap();
            assert_eq!(name, set.as_str());
            assert_eq!(set.as_str().parse::<LeadSet>(), Ok(set));
        }
        assert!("v".parse::<LeadSet>().is_err());
    }
}
