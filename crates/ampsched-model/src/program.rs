//! Workload programs: what a task (thread or vCPU) does, as a flat list of ops.
//!
//! Programs are compiled from `spec::OpSpec` (user units, nested loops) into this
//! flat form, which the simulator interprets with a program counter and a loop
//! stack. Work is measured in nanoseconds on a speed-1.0 core; a compute segment
//! with memory-stall fraction `m` takes `work × ((1 − m)/s + m)` on a core of
//! speed `s` (docs/design/workloads.md).

use crate::cpuset::CpuSet;
use crate::time::Nanos;
use serde::Serialize;

/// How a task waits for a barrier, lock or channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Wait {
    /// Block (the task becomes idle: the hypervisor sees an idle vCPU).
    Block,
    /// Spin (stay runnable and burn CPU until the condition holds).
    Spin,
    /// Spin for up to this much CPU time, then block (libgomp's default).
    SpinThenBlock(Nanos),
    /// Poll and call `sched_yield` between polls (an MPI rank's progress loop
    /// when oversubscribed): runnable like `Spin`, but a dispatcher that
    /// models `sched_yield` gives the CPU to a queued task that is not polling.
    Yield,
}

/// How a parallel loop's iterations are split among the tasks of its group.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Schedule {
    /// Each of the `n` tasks takes `work / n` up front.
    Static,
    /// Tasks take chunks of this size from a shared queue.
    Dynamic {
        /// Chunk size.
        chunk: Nanos,
    },
    /// Tasks take `max(remaining / n, min_chunk)` from a shared queue.
    Guided {
        /// Smallest chunk.
        min_chunk: Nanos,
    },
}

/// One compiled operation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Op {
    /// Run `work` (ns at speed 1.0) with memory-stall fraction `mem`.
    Compute {
        /// Work at speed 1.0.
        work: Nanos,
        /// Fraction of the time stalled on memory (does not scale with speed).
        mem: f64,
        /// Working set, KiB (for the migration refill cost).
        ws_kb: u32,
        /// Refill overlap factor (0 = streaming, misses anyway; 1 = full penalty).
        overlap: f64,
    },
    /// Wait until every task of the sync group has arrived at barrier `id`.
    Barrier {
        /// Barrier id within the sync group.
        id: u32,
        /// How to wait.
        wait: Wait,
    },
    /// Acquire lock `id`.
    Lock {
        /// Lock id within the sync group.
        id: u32,
        /// How to wait when it is held.
        wait: Wait,
    },
    /// Release lock `id`.
    Unlock {
        /// Lock id within the sync group.
        id: u32,
    },
    /// Block for a wall-clock duration (I/O).
    Sleep {
        /// Wall time.
        dur: Nanos,
    },
    /// An I/O of device time `dur`: a plain sleep, or, on a machine with an I/O
    /// back end (`Topology::io_backend`), a request through the back-end
    /// domain's vCPU, which works before and after the device's time.
    Io {
        /// The device's time.
        dur: Nanos,
    },
    /// Block for a random wall-clock duration, exponentially distributed with
    /// mean `mean` (Poisson arrivals); drawn from the run's seeded generator.
    SleepExp {
        /// Mean wall time.
        mean: Nanos,
    },
    /// Start of a loop body executed `count` times; `end` is the index of its `LoopEnd`.
    LoopStart {
        /// Iterations (≥ 1).
        count: u32,
        /// Index of the matching `LoopEnd`.
        end: u32,
    },
    /// End of a loop body; `start` is the index of its `LoopStart`.
    LoopEnd {
        /// Index of the matching `LoopStart`.
        start: u32,
    },
    /// A parallel loop of `work` split among the group by `schedule`; the tasks
    /// meet at an implicit barrier `barrier` afterwards.
    ParFor {
        /// Work-queue id within the sync group.
        id: u32,
        /// Total work of the loop at speed 1.0.
        work: Nanos,
        /// Partitioning.
        schedule: Schedule,
        /// Memory-stall fraction.
        mem: f64,
        /// Working set, KiB.
        ws_kb: u32,
        /// Refill overlap factor.
        overlap: f64,
        /// How to wait at the implicit barrier.
        wait: Wait,
    },
    /// Put one item into bounded channel `chan` (waits while it holds `capacity` items).
    Push {
        /// Channel id within the sync group.
        chan: u32,
        /// Capacity of the channel.
        capacity: u32,
        /// How to wait while full.
        wait: Wait,
    },
    /// Take one item from channel `chan` (waits while empty).
    Pop {
        /// Channel id within the sync group.
        chan: u32,
        /// How to wait while empty.
        wait: Wait,
    },
    /// Stay busy on the CPU until `dur` of wall time has passed since the op
    /// started, whatever the CPU's speed and however long the task waits for a
    /// CPU meanwhile (rt-app `runtime`).
    Runtime {
        /// Wall time.
        dur: Nanos,
    },
    /// Periodic timer `id` (rt-app `timer`): its next expiry is `start` plus one
    /// `period` per use; the task sleeps until then, or goes on at once when it
    /// is late (`relative`: the late timer restarts from now).
    Timer {
        /// Timer id within the sync group (shared by the tasks that use it).
        id: u32,
        /// Period.
        period: Nanos,
        /// When late, restart from now instead of keeping the absolute grid.
        relative: bool,
        /// Time of the timer's first reference point (the thread's start).
        start: Nanos,
    },
    /// Wait on condition variable `id` until it is signalled (no memory: a
    /// signal with no waiter is lost, as with `pthread_cond_signal`).
    CondWait {
        /// Condition id within the sync group.
        id: u32,
        /// How to wait.
        wait: Wait,
    },
    /// Signal condition `id`: wake its first waiter, or all of them (`broadcast`).
    CondSignal {
        /// Condition id within the sync group.
        id: u32,
        /// Wake every waiter instead of the first.
        broadcast: bool,
    },
    /// Barrier `id` with an explicit number of parties (instead of the whole sync group).
    BarrierN {
        /// Barrier id within the sync group.
        id: u32,
        /// How many arrivals release it (≥ 1).
        parties: u32,
        /// How to wait.
        wait: Wait,
    },
    /// Set the task's own hard affinity (rt-app `cpus`; the dispatcher is told).
    Affinity {
        /// The new affinity (not empty).
        mask: CpuSet,
    },
    /// The task is done.
    End,
}

/// A compiled program: ops ending with `Op::End`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Program {
    /// The ops; the last one is `Op::End`.
    pub ops: Vec<Op>,
}

impl Program {
    /// A program that ends at once (an idle vCPU).
    pub fn idle() -> Program {
        Program { ops: vec![Op::End] }
    }

    /// Total work at speed 1.0 this program computes (loops unrolled, ParFor
    /// counted whole, as if this one task did all of it): a size estimate.
    pub fn total_work(&self) -> Nanos {
        fn walk(ops: &[Op], i: &mut usize, stop: usize) -> u64 {
            let mut sum = 0u64;
            while *i < stop {
                match &ops[*i] {
                    Op::Compute { work, .. } | Op::ParFor { work, .. } => {
                        sum += work.0;
                        *i += 1;
                    }
                    Op::LoopStart { count, end } => {
                        let end = *end as usize;
                        let c = *count as u64;
                        *i += 1;
                        let body = walk(ops, i, end);
                        sum += body * c;
                        *i = end + 1;
                    }
                    _ => *i += 1,
                }
            }
            sum
        }
        let mut i = 0;
        Nanos(walk(&self.ops, &mut i, self.ops.len()))
    }

    /// Check structural validity: ends with `End`, loops matched, counts ≥ 1.
    pub fn validate(&self) -> Result<(), String> {
        if self.ops.last() != Some(&Op::End) {
            return Err("program must end with End".into());
        }
        for (i, op) in self.ops.iter().enumerate() {
            match op {
                Op::LoopStart { count, end } => {
                    if *count == 0 {
                        return Err(format!("op {i}: loop count must be ≥ 1"));
                    }
                    match self.ops.get(*end as usize) {
                        Some(Op::LoopEnd { start }) if *start as usize == i => {}
                        _ => return Err(format!("op {i}: loop end {end} does not match")),
                    }
                }
                Op::Compute { mem, .. } | Op::ParFor { mem, .. } if !(0.0..1.0).contains(mem) => {
                    return Err(format!("op {i}: mem must be in [0, 1), got {mem}"));
                }
                Op::BarrierN { parties: 0, .. } => return Err(format!("op {i}: a barrier needs at least one party")),
                Op::Affinity { mask } if mask.is_empty() => return Err(format!("op {i}: affinity must not be empty")),
                Op::Timer { period, .. } if period.0 == 0 => return Err(format!("op {i}: timer period must be > 0")),
                Op::SleepExp { mean } if mean.0 == 0 => return Err(format!("op {i}: sleep_exp mean must be > 0")),
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn total_work_unrolls_loops() {
        // loop 10 × (compute 5 ms) + compute 1 ms = 51 ms
        let p = Program {
            ops: vec![
                Op::LoopStart { count: 10, end: 2 },
                Op::Compute { work: Nanos::from_ms(5), mem: 0.0, ws_kb: 0, overlap: 1.0 },
                Op::LoopEnd { start: 0 },
                Op::Compute { work: Nanos::from_ms(1), mem: 0.0, ws_kb: 0, overlap: 1.0 },
                Op::End,
            ],
        };
        p.validate().unwrap();
        assert_eq!(p.total_work(), Nanos::from_ms(51));
    }

    #[test]
    fn validate_rejects_unmatched_loops() {
        let p = Program { ops: vec![Op::LoopStart { count: 1, end: 5 }, Op::End] };
        assert!(p.validate().is_err());
        assert!(Program { ops: vec![] }.validate().is_err());
    }
}
