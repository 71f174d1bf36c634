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
//! - [`actuate`]: reading and setting affinities (real or dry run);
//! - [`state`]: the state file and `restore`;
//! - [`metrics`]: the loopback Prometheus endpoint;
//! - [`config`]: the daemon's configuration file;
//! - [`trace`]: a Perfetto trace of the decisions (`--trace`);
//! - [`control`]: the control loop tying them together.

#![warn(missing_docs)]

pub mod actuate;
pub mod config;
pub mod control;
pub mod discovery;
pub mod error;
pub mod metrics;
pub mod procfs;
pub mod qmp;
pub mod report;
pub mod runclock;
pub mod sampler;
pub mod signals;
pub mod state;
pub mod trace;

pub use control::{Agent, AgentOptions, LoopStats, Outcome};
pub use discovery::{discover, Discovered, Overrides};
pub use error::AgentError;
