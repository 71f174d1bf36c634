//! ampsched-agent: the simulator's placers on a real Linux machine.
//!
//! The agent runs only a [`ampsched_policy::Placer`] (Linux is the
//! dispatcher): every period it samples the machine and the managed threads,
//! builds the same [`ampsched_policy::Snapshot`] the simulator builds, runs
//! the placer and applies its [`ampsched_policy::AffinityChange`]s with
//! `sched_setaffinity`.
//!
//! Layers, bottom up:
//! - [`error`]: the agent's error type (every layer reports with it);
//! - [`procfs`]: parsing of `/proc` files and kept-open handles;
//! - [`discovery`]: CPUs, capacities and classes (sysfs, config, probe);
//! - [`sampler`]: per-CPU busy/idle/noise each period;
//! - [`qmp`]: QEMU vCPU threads through the monitor socket;
//! - [`runclock`]: per-thread run time from task-clock counters;
//! - [`events`]: scheduler events (a fast CPU going idle) through perf ring buffers;
//! - [`forks`]: a launched job's new processes from perf fork records;
//! - [`perfring`]: the perf ring buffer both read;
//! - [`selfplace`]: the loop thread kept off CPUs busy with real-time work;
//! - [`actuate`]: reading and setting affinities (real or dry run);
//! - [`state`]: the state file and `restore`;
//! - [`metrics`]: the loopback Prometheus endpoint;
//! - [`config`]: the daemon's configuration file;
//! - [`trace`]: a Perfetto trace of the decisions (`--trace`);
//! - the loop's parts: [`clock`], [`inventory`] (what is managed),
//!   [`observe`] (samples → the placer's snapshot), [`decide`] (the shared
//!   placer bridge), the gate ([`ampsched_policy::gate`]: the placer's masks only
//!   under contention for the fast CPUs, groups left to the kernel where the
//!   agent's placement measures worse), [`apply`] (affinities and their restore), [`export`]
//!   (log, metrics, trace, sample recording);
//! - [`control`]: the loop calling them.

#![warn(missing_docs)]

pub mod actuate;
pub mod apply;
pub mod clock;
pub mod config;
pub mod control;
pub mod decide;
pub mod discovery;
pub mod domain;
pub mod error;
pub mod events;
pub mod export;
pub mod forks;
pub mod inventory;
pub mod loopstats;
pub mod metrics;
pub mod observe;
pub mod perfring;
pub mod procfs;
pub mod qmp;
pub mod report;
pub mod runclock;
pub mod sampler;
pub mod selfplace;
pub mod signals;
pub mod state;
pub mod trace;

pub use control::{Agent, AgentOptions, Outcome};
pub use discovery::{discover, Discovered, Overrides};
pub use error::AgentError;
pub use loopstats::LoopStats;
