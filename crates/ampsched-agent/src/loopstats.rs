//! Loop figures (`LoopStats`): what each period of the control loop cost,
//! gathered by observe/apply and printed for `--stats` and benchmarks. A leaf
//! module: it imports no other part of the agent.

use serde_json::{json, Value};
use std::time::Duration;

/// Loop figures gathered for `--stats` and benchmarks.
#[derive(Clone, Debug, Default)]
pub struct LoopStats {
    /// Periods run.
    pub periods: u64,
    /// CPU time of each period's work (not the sleep), ns.
    pub loop_cpu_ns: Vec<u64>,
    /// Wall time of each period's work, ns.
    pub loop_wall_ns: Vec<u64>,
    /// Largest number of threads managed at once.
    pub managed_max: usize,
    /// Affinity changes applied (or printed, in a dry run).
    pub changes: u64,
    /// Changes that moved a thread from a mask inside one CPU class to a mask inside another
    /// (a rotation's swap, a reaction's move): each migrates the thread, whose caches stay
    /// behind (docs/agent.md, "Where the remaining cost comes from").
    pub class_flips: u64,
    /// Thread `stat` files read (the costly ones; the run time is read for every thread every period).
    pub stat_reads: u64,
    /// Thread run times read from `schedstat` (the rest from task-clock counters, see `runclock`).
    pub schedstat_reads: u64,
    /// Thread-periods sampled (managed threads summed over periods).
    pub thread_samples: u64,
    /// Periods in which managed threads contended for the fast CPUs (the placer's masks
    /// applied); in the others every narrowed thread was widened (`cooperate`).
    pub contended_periods: u64,
    /// Light threads (ran < period / 8) kept from a placer's narrowing or given their own
    /// mask back in contended periods (`gate::cooperate::free_light`).
    pub light_freed: u64,
    /// Threads moved onto a free fast CPU in the period contention ended, before their
    /// widening (`gate::cooperate::move_released`: widening alone leaves a running thread
    /// where it runs).
    pub released_moves: u64,
    /// Periods in which some group was left to the kernel (a probe window, or backed off;
    /// see `backoff`).
    pub hands_off_periods: u64,
    /// Times a group backed off (its placement measured worse than the kernel's alone).
    pub backoffs: u64,
    /// Times a backed-off group came back under management.
    pub backoff_returns: u64,
    /// Rescans brought forward because a launched job forked a process (`forks`).
    pub fork_rescans: u64,
    /// Fresh tasks given their own mask back the moment their fork was read (they had
    /// inherited one the agent applied to their parent: `forks`).
    pub forks_freed: u64,
    /// Probes skipped: the policy window before them was saturated (`gate::backoff::saturated`).
    pub skipped_probes: u64,
    /// Fast-CPU idle switches the event source reported.
    pub idle_events: u64,
    /// Idle switches reacted to with no runnable thread kept from that CPU (only widened).
    pub idle_no_candidate: u64,
    /// Reaction times to an idle fast CPU: from the switch to the idle task to the move of a
    /// runnable thread onto it in force, ns.
    pub reaction_ns: Vec<u64>,
    /// Times the loop thread's own mask changed (`selfplace`: off CPUs with real-time load).
    pub loop_moves: u64,
    /// Failed changes (vanished or denied).
    pub errors: u64,
    /// Wall time of the whole loop.
    pub elapsed: Duration,
    /// CPU time of the whole agent process over the loop.
    pub process_cpu: Duration,
}

fn median(v: &[u64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    s[s.len() / 2] as f64
}

impl LoopStats {
    /// One JSON object with the summary figures (µs, %).
    pub fn to_json(&self) -> Value {
        let mean = |v: &[u64]| if v.is_empty() { 0.0 } else { v.iter().sum::<u64>() as f64 / v.len() as f64 };
        let p99 = |v: &[u64]| {
            if v.is_empty() {
                return 0.0;
            }
            let mut s = v.to_vec();
            s.sort_unstable();
            s[(s.len() * 99 / 100).min(s.len() - 1)] as f64
        };
        json!({
            "periods": self.periods,
            "managed_threads_max": self.managed_max,
            "changes": self.changes,
            "class_flips": self.class_flips,
            "class_flips_per_s": if self.elapsed.is_zero() { 0.0 } else {
                self.class_flips as f64 / self.elapsed.as_secs_f64()
            },
            "stat_reads_per_period": if self.periods == 0 { 0.0 } else { self.stat_reads as f64 / self.periods as f64 },
            "schedstat_reads_per_period": if self.periods == 0 { 0.0 } else { self.schedstat_reads as f64 / self.periods as f64 },
            "threads_per_period": if self.periods == 0 { 0.0 } else { self.thread_samples as f64 / self.periods as f64 },
            "contended_periods": self.contended_periods,
            "light_freed": self.light_freed,
            "released_moves": self.released_moves,
            "hands_off_periods": self.hands_off_periods,
            "backoffs": self.backoffs,
            "backoff_returns": self.backoff_returns,
            "skipped_probes": self.skipped_probes,
            "fork_rescans": self.fork_rescans,
            "forks_freed": self.forks_freed,
            "idle_events": self.idle_events,
            "idle_no_candidate": self.idle_no_candidate,
            "reactions": self.reaction_ns.len(),
            "reaction_us_p50": median(&self.reaction_ns) / 1e3,
            "reaction_us_p99": p99(&self.reaction_ns) / 1e3,
            "reaction_us_max": self.reaction_ns.iter().max().copied().unwrap_or(0) as f64 / 1e3,
            "loop_moves": self.loop_moves,
            "errors": self.errors,
            "loop_cpu_us_median": median(&self.loop_cpu_ns) / 1e3,
            "loop_cpu_us_mean": mean(&self.loop_cpu_ns) / 1e3,
            "loop_wall_us_median": median(&self.loop_wall_ns) / 1e3,
            "loop_wall_us_p99": p99(&self.loop_wall_ns) / 1e3,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "agent_cpu_pct_of_one_cpu": if self.elapsed.is_zero() { 0.0 } else {
                100.0 * self.process_cpu.as_secs_f64() / self.elapsed.as_secs_f64()
            },
        })
    }
}
