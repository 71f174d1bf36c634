//! A task's state and its work accounting: how much of a compute op is left
//! after running `dt` on a CPU of a given speed and noise, and how long the
//! rest will take.
//!
//! Units: work is nanoseconds at speed 1.0; `mem` is the memory-bound share
//! of the work (it does not speed up on a faster CPU); noise is the share of
//! a CPU's time stolen from the task. A cache refill owed after a migration
//! takes `REFILL_SHARE` of the cycles until it is paid (docs/design/workloads.md, "Cost
//! of migration").
//!
//! May import: `engine::config` (`TaskInit`) and the model. Must never
//! import the event loop, the dispatcher or placer bridges, or statistics:
//! the engine moves a task between states; this room only keeps its books.

use super::config::TaskInit;
use ampsched_model::{CpuId, DomainId, Nanos, Op, Program};
use std::sync::Arc;

/// Work left below this is done (absorbs floating-point residue).
pub(super) const EPS: f64 = 1e-6;
/// Share of a running task's cycles that go to cache misses while it still owes a
/// refill after a migration: a cold cache slows the code that touches the data
/// (misses interleave with work) rather than stalling it up front, so a short
/// critical section right after a migration is not held for the whole refill.
/// The total cost charged is unchanged (docs/design/workloads.md, "Cost of migration").
pub(super) const REFILL_SHARE: f64 = 0.5;

/// Where a task is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum St {
    Blocked,
    Runnable,
    Running(CpuId),
    Done,
}

/// What a task is doing on its CPU (or waiting for).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Act {
    /// Between ops: the next op at `pc` has not started.
    Ready,
    /// Computing; `work_left` and `refill_left` say how much is left.
    Compute,
    /// Spin-waiting; `limit` is the CPU time after which it blocks.
    Spin { limit: Option<Nanos> },
    /// Blocked on a sync object (waiting for a release).
    Wait,
    /// Busy on the CPU until this wall time (`Op::Runtime`).
    Busy { until: Nanos },
}

/// One task (a vCPU running a program): interpreter state, accounting and statistics.
pub(super) struct Task {
    pub(super) domain: DomainId,
    pub(super) prog: Arc<Program>,
    pub(super) pc: u32,
    pub(super) loops: Vec<u32>,
    pub(super) group: u32,
    pub(super) rank: u32,
    pub(super) st: St,
    pub(super) act: Act,
    pub(super) idle_vcpu: bool,
    pub(super) work_left: f64,
    pub(super) mem: f64,
    pub(super) ws_kb: u32,
    pub(super) overlap: f64,
    pub(super) refill_left: f64,
    pub(super) seg_start: Nanos,
    pub(super) gen: u32,
    pub(super) sleep_gen: u32,
    pub(super) spin_used: Nanos,
    pub(super) pf_static_done: bool,
    pub(super) last_cpu: Option<CpuId>,
    pub(super) state_since: Nanos,
    // statistics
    pub(super) run_by_class: Vec<u64>,
    pub(super) wait_ns: u64,
    pub(super) blocked_ns: u64,
    pub(super) spin_ns: u64,
    pub(super) mig_local: u64,
    pub(super) mig_remote: u64,
    pub(super) done_at: Option<Nanos>,
    pub(super) computes_done: u64,
    // placer sampling
    pub(super) period_run: Vec<u64>,
    pub(super) period_active: bool,
}

impl Task {
    /// A task as configured, blocked before its first op.
    pub(super) fn new(ti: &TaskInit, nclass: usize) -> Task {
        Task {
            domain: ti.domain,
            idle_vcpu: ti.program.ops.first() == Some(&Op::End),
            prog: ti.program.clone(),
            pc: 0,
            loops: Vec::new(),
            group: ti.group,
            rank: ti.rank,
            st: St::Blocked,
            act: Act::Ready,
            work_left: 0.0,
            mem: 0.0,
            ws_kb: 0,
            overlap: 1.0,
            refill_left: 0.0,
            seg_start: Nanos::ZERO,
            gen: 0,
            sleep_gen: 0,
            spin_used: Nanos::ZERO,
            pf_static_done: false,
            last_cpu: None,
            state_since: Nanos::ZERO,
            run_by_class: vec![0; nclass],
            wait_ns: 0,
            blocked_ns: 0,
            spin_ns: 0,
            mig_local: 0,
            mig_remote: 0,
            done_at: None,
            computes_done: 0,
            period_run: vec![0; nclass],
            period_active: false,
        }
    }

    /// Account `dt` ns of computing on a CPU of `speed` losing `noise` of its time:
    /// pay the refill owed first (at `REFILL_SHARE` of the cycles), then work.
    pub(super) fn advance_compute(&mut self, dt: u64, speed: f64, noise: f64) {
        let avail = dt as f64 * (1.0 - noise);
        let r = self.refill_left.min(avail * REFILL_SHARE);
        self.refill_left -= r;
        let rest = avail - r;
        let per_work = (1.0 - self.mem) / speed + self.mem;
        self.work_left -= rest / per_work;
        if self.work_left < EPS {
            self.work_left = 0.0;
        }
    }

    /// Wall time until the current compute ends on a CPU of `speed` losing `noise`.
    pub(super) fn compute_wall(&self, speed: f64, noise: f64) -> Nanos {
        let avail = 1.0 - noise;
        let per_work = (1.0 - self.mem) / speed + self.mem;
        // While refilling, (1 − REFILL_SHARE) of the cycles do work.
        let warm = self.refill_left / REFILL_SHARE;
        let work_during = warm * (1.0 - REFILL_SHARE) / per_work;
        let wall = if self.work_left <= work_during {
            self.work_left * per_work / (1.0 - REFILL_SHARE)
        } else {
            warm + (self.work_left - work_during) * per_work
        } / avail;
        Nanos(wall.ceil().max(0.0) as u64)
    }
}
