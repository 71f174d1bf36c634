//! ampsched-model: the vocabulary shared by every ampsched crate.
//!
//! Ids, integer-nanosecond time, CPU sets, the machine topology, workload
//! programs and the scenario specification. No I/O, no clocks, no randomness.

#![warn(missing_docs)]

pub mod cpuset;
pub mod error;
pub mod ids;
pub mod program;
pub mod rtapp;
pub mod spec;
pub mod time;
pub mod topology;

pub use cpuset::CpuSet;
pub use error::ModelError;
pub use ids::{CpuId, DomainId, TaskId};
pub use program::{Op, Program, Schedule, Wait};
pub use time::Nanos;
pub use topology::{CpuClass, CpuInfo, IoBackend, MemoryBus, NoiseSpec, RtLoad, Topology};
