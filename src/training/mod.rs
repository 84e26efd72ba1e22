//! The training side, offline: PhysioNet records ([`wfdb`]) become labelled windows and the
//! patient-wise split ([`dataset`]), from which [`train`] fits the zoo's models and writes
//! their folders. Nothing on the serving side imports this.

pub(crate) mod beats;
pub mod dataset;
pub(crate) mod train;
pub mod wfdb;
