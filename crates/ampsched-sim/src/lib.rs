//! ampsched-sim: a deterministic discrete-event simulator of asymmetric hosts.

pub mod library;
