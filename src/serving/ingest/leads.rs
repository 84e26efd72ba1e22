//! Which role (the primary or the secondary ECG slot of a window) each lead a monitor
//! announces takes, from the lead names of `[leads]`: what a hello's leads become.

use crate::config::LeadsConfig;

/// The role slot of each announced lead, in hello order, per the `[leads]` config (names
/// case-insensitive): the primary role goes to the sent lead that comes first in
/// `leads.primary`, the secondary to the one of the others that comes first in
/// `leads.secondary`; a role still empty then takes a remaining named lead of either list, in
/// hello order (a monitor sending I and II, or III and V, uses both). Leads named in neither
/// list, and leads beyond the two roles, take no slot.
pub(crate) fn lead_slots(leads: &LeadsConfig, sent: &[&str]) -> Vec<Option<usize>> {
    let rank =
        |names: &[String], lead: &str| names.iter().position(|n| n.eq_ignore_ascii_case(lead));
    let mut slots: Vec<Option<usize>> = vec![None; sent.len()];
    let best = |names: &[String], slots: &[Option<usize>]| {
        (0..sent.len())
            .filter(|&i| slots[i].is_none())
            .filter_map(|i| rank(names, sent[i]).map(|r| (r, i)))
            .min()
            .map(|(_, i)| i)
    };
    for (slot, names) in [(0, &leads.primary), (1, &leads.secondary)] {
        if let Some(i) = best(names, &slots) {
            slots[i] = Some(slot);
        }
    }
    for slot in 0..2 {
        if slots.contains(&Some(slot)) {
            continue;
        }
        if let Some(i) = (0..sent.len()).find(|&i| {
            slots[i].is_none()
                && (rank(&leads.primary, sent[i]).is_some()
                    || rank(&leads.secondary, sent[i]).is_some())
        }) {
            slots[i] = Some(slot);
        }
    }
    slots
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leads() -> LeadsConfig {
        crate::config::Config::load(None).unwrap().leads
    }

    #[test]
    fn every_lead_name_monitors_use_takes_a_role() {
        let l = leads();
        let cases: [(&[&str], &[Option<usize>]); 9] = [
            (&["II", "V"], &[Some(0), Some(1)]),
            (&["V", "II"], &[Some(1), Some(0)]),
            (&["II", "MCL1"], &[Some(0), Some(1)]),
            (&["II", "III"], &[Some(0), Some(1)]),
            (&["II", "aVR"], &[Some(0), Some(1)]),
            (&["I", "aVL"], &[Some(0), Some(1)]),
            // Both of the primary list: the better-ranked is primary, the other secondary.
            (&["I", "II"], &[Some(1), Some(0)]),
            // Both of the secondary list: the better-ranked is secondary, the other primary.
            (&["III", "V"], &[Some(0), Some(1)]),
            (&["V4", "pleth-like", "II"], &[Some(1), None, Some(0)]),
        ];
        for (sent, want) in cases {
            assert_eq!(lead_slots(&l, sent), want, "{sent:?}");
        }
    }

    #[test]
    fn one_lead_takes_its_own_role_and_unknown_names_none() {
        let l = leads();
        assert_eq!(lead_slots(&l, &["v1"]), [Some(1)]);
        assert_eq!(lead_slots(&l, &["mlii"]), [Some(0)]);
        assert_eq!(lead_slots(&l, &["x", "y"]), [None, None]);
        assert_eq!(
            lead_slots(&l, &["II", "V", "III"]),
            [Some(0), Some(1), None]
        );
    }
}
