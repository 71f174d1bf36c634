//! ampsched-sim: a deterministic discrete-event simulator of asymmetric hosts
//! running VMs and parallel programs under a Dispatcher and an optional Placer.

#![warn(missing_docs)]

pub mod admission;
pub mod bench;
pub mod engine;
pub mod latency;
pub mod library;
pub mod results;
pub mod runner;
pub mod scenario;
pub mod trace;

pub use engine::place::{agent_decision, placer_decision};
pub use engine::{Sim, SimConfig, TaskInit};
pub use library::Library;
pub use results::{RunResult, SimOutput, SCHEMA};
pub use scenario::{Scenario, ScenarioError, Stop};
