//! ampsched-policy: the scheduling brains, pure and deterministic.
//!
//! Two levels of decision (docs/design/architecture.md): a [`Dispatcher`] decides which
//! task runs on a CPU now and for how long (simulator only); a [`Placer`]
//! periodically turns a [`Snapshot`] into affinity changes (simulator and the
//! real agent). Policies never read clocks or do I/O: time comes in as an
//! argument and effects go out as values.

#![warn(missing_docs)]

pub mod aash;
pub mod aash_cosched;
pub mod aash_placer;
pub mod bcs;
pub mod capability;
pub mod cds;
pub mod cosched;
pub mod credit;
pub mod cs;
pub mod dispatcher;
pub mod fair;
pub mod fastfirst;
pub mod fastqueue;
pub mod gate;
pub mod linux;
pub mod noop;
pub mod params;
pub mod pcs;
pub mod placer;
pub mod placer_bridge;
pub mod registry;
pub mod samples;
#[cfg(test)]
mod testkit;

pub use dispatcher::{Dispatcher, DomainView, Effects, Pick, SysView, TaskView};
pub use params::{ParamDoc, ParamReader, PolicyError};
pub use placer::{AffinityChange, CpuSample, DomainSample, Placer, Snapshot, TaskSample};
pub use placer_bridge::TaskState;
pub use registry::{dispatcher_by_name, placer_by_name, PolicyInfo, DISPATCHERS, PLACERS};
