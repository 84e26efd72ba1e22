//! Where an ensemble is prepared from ([`Sources`]): the zoo's folder, the profiles' database,
//! the ward's window and hop and the beat counter served beside the members. Read by
//! [`ensemble::prepare`](super::ensemble::prepare) and [`pooling`](super::pooling).

use std::path::Path;

use crate::config::EngineConfig;
use crate::serving::store::Db;
use crate::signal::beats::BeatCounter;

/// Where [`prepare`](super::ensemble::prepare) finds the members and their latency profiles, and the engine settings
/// the planner follows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sources<'a> {
    pub models_dir: &'a Path,
    /// The database holding `holmes profile`'s measurements.
    pub db: &'a Db,
    pub engine: &'a EngineConfig,
    /// The ward's window (`ward.window_secs`): no member may read more.
    pub window_secs: u32,
    /// The ward's hop (`ward.hop_secs`): the alarm rule that says how the members pool is
    /// the one for this hop and window.
    pub hop_secs: u32,
    /// The beat counter served beside the members, listed with them.
    pub beats: Option<&'a BeatCounter>,
}
