//! `holmes evaluate`, the event-level evaluation of the zoo and of a classical baseline on a
//! split's records; this folder will hold it. For now: the EC57-style episode comparison
//! ([`episodes`]) it reports with.

pub mod episodes;
