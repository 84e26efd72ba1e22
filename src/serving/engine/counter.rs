//! The zoo's beat counter as the engine serves it beside the members: the name it is served,
//! listed and named in the alarm rules under ([`BEATS_NAME`]), how the rules name it
//! ([`counter_ref`]) and the counter a config serves ([`served_counter`]). Read by the engine's
//! stage and jobs, its profiles, its pooling and its ensembles, and by the units above.

use crate::signal::beats::BeatCounter;

/// The name the beat counter is served, listed and named in the alarm rules under.
pub const BEATS_NAME: &str = "beats";

/// The zoo's beat counter the config serves (`ensemble.count_beats`, read for the ward's hop),
/// when the zoo holds one. Blocking (reads `beats.json`).
pub(crate) fn served_counter(
    cfg: &crate::config::Config,
) -> Result<Option<BeatCounter>, crate::signal::beats::BeatsError> {
    if !cfg.ensemble.count_beats {
        return Ok(None);
    }
    BeatCounter::load(&cfg.ensemble.models_dir, cfg.ward.hop_secs)
}

/// The beat counter as the alarm rules name it.
pub(crate) fn counter_ref(c: &BeatCounter) -> crate::alarm::rules::MemberRef {
    crate::alarm::rules::MemberRef {
        name: BEATS_NAME.into(),
        sha256: c.sha256.clone(),
    }
}
