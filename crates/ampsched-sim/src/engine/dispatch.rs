//! The dispatcher bridge: every call from the engine into the `Dispatcher`
//! (`wake`, `block`, `pick_next`, `tick`, `account`, `affinity_changed`,
//! `domain_changed`) goes through a `SysView` built here, and the effects it
//! asks for (rescheduling CPUs) are queued to run at the same instant.
//! Also here: switching a CPU to a task, slice timers, and carrying on with
//! what a task was doing when it is put on a CPU.
//!
//! May import: `Sim`, the bottom rooms and the interpreter's `Outcome`. Must
//! never import the placer bridge or statistics.

use super::clock::{Ev, Pending};
use super::interp::Outcome;
use super::task::{Act, St};
use super::Sim;
use ampsched_model::{CpuId, Nanos, TaskId};

/// A `SysView` over the engine's fields (a macro so the borrow is per field).
macro_rules! view {
    ($s:ident) => {
        ampsched_policy::SysView { now: $s.now, topo: &$s.topo, tasks: &$s.views, domains: &$s.domains, curr: &$s.curr }
    };
}

impl Sim {
    /// Take the effects the dispatcher asked for (most calls ask none: the
    /// test is inlined, the work is not).
    #[inline]
    pub(super) fn flush_fx(&mut self) {
        if !self.fx.resched.is_empty() || !self.fx.stall.is_empty() {
            self.flush_fx_some();
        }
    }

    #[inline(never)]
    fn flush_fx_some(&mut self) {
        for i in 0..self.fx.resched.len() {
            let c = self.fx.resched[i];
            if self.cpus[c.idx()].busy_stalled() {
                // Xen's IPI waits for the stall's end (`Sim::stall_ended`; engine essay).
                self.cpus[c.idx()].resched_owed = true;
                continue;
            }
            if !self.cpus[c.idx()].resched_pending {
                self.cpus[c.idx()].resched_pending = true;
                self.pending.push_back(Pending::Resched(c));
            }
        }
        self.fx.resched.clear();
        if !self.fx.stall.is_empty() {
            self.take_stalls();
        }
    }

    pub(super) fn drain(&mut self) {
        while let Some(p) = self.pending.pop_front() {
            match p {
                Pending::Resched(c) => {
                    self.cpus[c.idx()].resched_pending = false;
                    self.schedule(c);
                    if self.owes {
                        self.pay_stall(c);
                    }
                }
                Pending::Continue(t) => {
                    if let St::Running(c) = self.tasks[t.idx()].st {
                        if self.tasks[t.idx()].act == Act::Ready {
                            self.continue_on(t, c);
                        }
                    }
                }
            }
        }
    }

    pub(super) fn set_curr(&mut self, c: CpuId, t: Option<TaskId>) {
        let ci = c.idx();
        if self.trace.is_some() {
            self.trace_switch(c, t);
        }
        let was_busy = self.cpus[ci].curr.is_some();
        let busy = t.is_some();
        if was_busy != busy {
            self.flush_cpu(ci);
            self.fisb.changed(self.cpus[ci].fast, busy, self.now);
            if was_busy && self.gate.is_some() {
                self.cpu_went_idle(c);
            }
        }
        self.cpus[ci].curr = t;
        self.curr[ci] = t;
        if busy && !self.cpus[ci].tick_armed {
            let p = self.disp.tick_period();
            if p.0 > 0 {
                self.cpus[ci].tick_armed = true;
                self.push(self.now.next_multiple(p), Ev::Tick(c));
            }
        }
    }

    pub(super) fn schedule(&mut self, c: CpuId) {
        let mut prev = self.cpus[c.idx()].curr;
        loop {
            let prev_runnable = match prev {
                Some(p) => {
                    self.settle(p);
                    self.tasks[p.idx()].st == St::Running(c)
                }
                None => false,
            };
            let pick = self.disp.pick_next(&view!(self), c, prev, prev_runnable, &mut self.fx);
            self.cpus[c.idx()].slice_at = Nanos::MAX;
            if pick.task != prev {
                if let Some(p) = prev {
                    if prev_runnable {
                        self.set_state(p, St::Runnable);
                    }
                    self.supersede(p);
                }
                self.set_curr(c, pick.task);
            }
            self.flush_fx();
            let Some(n) = pick.task else { return };
            if pick.task != prev {
                debug_assert_eq!(self.tasks[n.idx()].st, St::Runnable, "picked {n} is not runnable");
                debug_assert!(
                    !self.curr.iter().enumerate().any(|(i, x)| *x == Some(n) && i != c.idx()),
                    "{n} on two CPUs"
                );
                self.start_on(n, c);
            }
            if pick.slice != Nanos::MAX {
                self.set_slice(c, self.now + pick.slice);
            }
            if pick.task == prev {
                self.replan(n);
                return;
            }
            match self.resume(n, c) {
                Outcome::Busy => return,
                Outcome::Blocked | Outcome::Done => {
                    self.mark_blocked(n, c);
                    prev = Some(n);
                }
            }
        }
    }

    /// Arm `c`'s slice timer for `at`, pushing an event only if none fires by then.
    pub(super) fn set_slice(&mut self, c: CpuId, at: Nanos) {
        let cpu = &mut self.cpus[c.idx()];
        cpu.slice_at = at;
        if at < cpu.slice_ev_at {
            cpu.slice_ev_at = at;
            self.push(at, Ev::SliceEnd(c));
        }
    }

    /// A task was just put on CPU `c`: carry on with what it was doing.
    pub(super) fn resume(&mut self, t: TaskId, c: CpuId) -> Outcome {
        match self.tasks[t.idx()].act {
            Act::Compute | Act::Spin { .. } | Act::Busy { .. } => {
                self.replan(t);
                Outcome::Busy
            }
            Act::Ready => self.exec(t, c),
            Act::Wait => unreachable!("a blocked waiter was picked"),
        }
    }

    /// Continue a running task from its pc; block/end it on its CPU if needed.
    pub(super) fn continue_on(&mut self, t: TaskId, c: CpuId) {
        match self.exec(t, c) {
            Outcome::Busy => {}
            Outcome::Blocked | Outcome::Done => self.block_running(t, c),
        }
    }

    /// The task running on `c` blocked or ended: record it and tell the dispatcher.
    pub(super) fn mark_blocked(&mut self, t: TaskId, c: CpuId) {
        if self.tasks[t.idx()].st == St::Running(c) {
            self.set_state(t, St::Blocked);
        }
        self.disp.block(&view!(self), t, c, &mut self.fx);
        self.flush_fx();
    }

    pub(super) fn block_running(&mut self, t: TaskId, c: CpuId) {
        self.mark_blocked(t, c);
        // The CPU still has t as curr; schedule() sees it not runnable.
        self.schedule(c);
    }

    pub(super) fn wake(&mut self, t: TaskId) {
        if let Some(tr) = self.trace.as_deref_mut() {
            tr.waking(self.now, self.tasks[t.idx()].last_cpu.unwrap_or(CpuId(0)), t);
        }
        self.set_state(t, St::Runnable);
        self.disp.wake(&view!(self), t, &mut self.fx);
        self.flush_fx();
    }
}
