//! Accounting on `Sim`: a task's time in each state (waiting, blocked) and
//! its domain's active count, its progress on its CPU up to now, a CPU's
//! busy/idle/noise time, migration costs, and when the current op of a
//! running task will complete.
//!
//! The arithmetic itself lives in the bottom rooms (`task`: work accounting,
//! `cpu`: CPU time); this room applies it at the right instants.
//!
//! May import: `Sim` and the bottom rooms. Must never import the dispatcher
//! or placer bridges, the interpreter, or statistics output.

use super::clock::Ev;
use super::fixed;
use super::task::{Act, St};
use super::Sim;
use ampsched_model::{CpuId, Nanos, TaskId};

impl Sim {
    pub(super) fn set_state(&mut self, t: TaskId, st: St) {
        let now = self.now;
        let tk = &mut self.tasks[t.idx()];
        let dt = (now - tk.state_since).0;
        match tk.st {
            St::Runnable => tk.wait_ns += dt,
            St::Blocked => tk.blocked_ns += dt,
            _ => {}
        }
        tk.state_since = now;
        // Wake-up latency: from Blocked → Runnable to the next Running (a
        // preempted task, Running → Runnable, is not woken).
        match (tk.st, st) {
            (St::Blocked, St::Runnable) => tk.woke_at = Some(now),
            (St::Blocked, St::Running(_)) => tk.wake_lat.record(0),
            (_, St::Running(_)) => {
                if let Some(w) = tk.woke_at.take() {
                    tk.wake_lat.record((now - w).0);
                }
            }
            (_, St::Blocked | St::Done) => tk.woke_at = None,
            _ => {}
        }
        let was_active = matches!(tk.st, St::Runnable | St::Running(_));
        let is_active = matches!(st, St::Runnable | St::Running(_));
        tk.st = st;
        if is_active {
            tk.period_active = true;
        }
        if was_active != is_active {
            self.series.active_changed(tk.domain.idx(), is_active, now);
        }
    }

    /// Account a running task's progress up to now.
    pub(super) fn settle(&mut self, t: TaskId) {
        let now = self.now;
        let tk = &mut self.tasks[t.idx()];
        let St::Running(c) = tk.st else { return };
        let dt = (now - tk.seg_start).0;
        if dt == 0 {
            return;
        }
        tk.seg_start = now;
        let cpu = &self.cpus[c.idx()];
        tk.run_by_class[cpu.class] += dt;
        tk.period_run[cpu.class] += dt;
        self.series.run[tk.domain.idx()][cpu.class] += dt;
        match tk.act {
            Act::Compute => tk.advance_compute(dt, fixed::cost(cpu.speed, tk.mem), cpu.avail),
            Act::Spin { .. } => {
                tk.spin_ns += dt;
                tk.spin_used += Nanos(dt);
            }
            _ => {}
        }
    }

    pub(super) fn flush_cpu(&mut self, ci: usize) {
        self.cpus[ci].flush(self.now);
    }

    pub(super) fn start_on(&mut self, n: TaskId, c: CpuId) {
        self.set_state(n, St::Running(c));
        let now = self.now;
        let md_new = self.topo.cpus[c.idx()].mem_domain;
        let last = self.tasks[n.idx()].last_cpu;
        let tk = &mut self.tasks[n.idx()];
        tk.seg_start = now;
        if let Some(l) = last {
            if l != c {
                let across = self.topo.cpus[l.idx()].mem_domain != md_new;
                if across {
                    tk.mig_remote += 1;
                } else {
                    tk.mig_local += 1;
                }
                self.series.mig[tk.domain.idx()] += 1;
                let cost = fixed::amount(self.topo.cache.refill_cost(tk.ws_kb, tk.overlap, across).0);
                tk.refill_left = tk.refill_left.max(cost);
            }
        }
        tk.last_cpu = Some(c);
    }

    /// Re-plan the completion event of a running task (rate or state changed).
    pub(super) fn replan(&mut self, t: TaskId) {
        let tk = &mut self.tasks[t.idx()];
        let St::Running(c) = tk.st else { return };
        tk.gen = tk.gen.wrapping_add(1);
        let g = tk.gen;
        let cpu = &self.cpus[c.idx()];
        match tk.act {
            Act::Compute => {
                let at = self.now + tk.compute_wall(fixed::cost(cpu.speed, tk.mem), cpu.avail);
                self.push(at, Ev::OpDone(t, g));
            }
            Act::Spin { limit: Some(l) } => {
                let left = l.saturating_sub(tk.spin_used);
                self.push(self.now + left, Ev::OpDone(t, g));
            }
            Act::Busy { until } => {
                let at = until.max(self.now);
                self.push(at, Ev::OpDone(t, g));
            }
            _ => {}
        }
    }
}
