//! The gate between a placer's decision and the machine: which of a placer's
//! affinity changes are put in force, and for which groups at all.
//!
//! A placer decides masks every period; on a real machine the kernel's own
//! balancer already places well whenever there is no contention for the fast
//! CPUs, and on some programs the placer's rule does worse than the kernel
//! alone. The gate holds the two checks the agent applies after the placer
//! (issue 15 D2 and D3), pure so the simulator can apply the same gate:
//! - [`cooperate`]: the placer's masks only while managed threads contend for
//!   the fast CPUs (Linux's capacity-aware balancing, `update_cpu_capacity` /
//!   `newidle_balance` in kernel/sched/fair.c, handles the rest);
//! - [`backoff`]: each group's progress measured managed and hands-off in
//!   interleaved windows; a group whose placement measures worse is left to
//!   the kernel.
//!
//! [`body`] runs both, in the agent's order, as one period of the agent's
//! body: the agent's control loop calls it, and so does the simulator's
//! placer body for a scenario with `[agent]` (docs/validation.md, "The
//! placer's body").

pub mod backoff;
pub mod body;
pub mod cooperate;
#[cfg(test)]
mod fixtures;
