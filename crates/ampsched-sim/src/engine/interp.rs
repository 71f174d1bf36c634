//! The program interpreter: runs a task's ops from its pc until it needs CPU
//! time (compute, spin, busy), waits (sleep, timer, a sync object), or ends;
//! and releases the tasks a sync object hands over to.
//!
//! Blocking waits make a task not runnable (an idle vCPU); spinning waits
//! keep it runnable and burn CPU; lock-holder preemption emerges because the
//! engine knows who holds what. A `yield` wait spins too, and tells the
//! dispatcher when it starts and ends (`Dispatcher::yielding`): the poll
//! loop's `sched_yield` calls are the dispatcher's to model (`fair` follows
//! CFS's `yield_task_fair`), at the granularity of its picks rather than one
//! event per µs-long poll.
//!
//! May import: `Sim`, the bottom rooms (`sync`, `task`, `clock`, `random`).
//! Must never import the placer bridge or statistics.

use super::clock::Pending;
use super::fixed;
use super::random;
use super::task::{Act, St, NO_REFILL, NO_SPEED};
use super::{Sim, Stop};
use ampsched_model::{CpuId, Nanos, Op, Schedule, TaskId, Wait};

/// How a task left the interpreter.
pub(super) enum Outcome {
    /// It is using its CPU (computing, spinning or busy).
    Busy,
    /// It waits, not runnable.
    Blocked,
    /// Its program ended.
    Done,
}

impl Sim {
    /// Start `work` (ns at speed 1.0) of computing with these memory traits: a
    /// compute op, or a chunk of a parallel loop.
    pub(super) fn start_compute(&mut self, t: TaskId, work: u64, mem: f64, ws_kb: u32, overlap: f64) -> Outcome {
        let tk = &mut self.tasks[t.idx()];
        tk.work_left = fixed::amount(work);
        if tk.mem.to_bits() != mem.to_bits() {
            tk.mem = mem;
            tk.cost_speed = NO_SPEED;
        }
        if tk.ws_kb != ws_kb || tk.overlap.to_bits() != overlap.to_bits() {
            tk.ws_kb = ws_kb;
            tk.overlap = overlap;
            tk.refill = [NO_REFILL; 2];
        }
        tk.act = Act::Compute;
        self.replan(t);
        Outcome::Busy
    }

    /// Interpret ops from pc until the task needs time, waits, or ends; a
    /// back-end vCPU with I/O work queued serves it before it blocks (`backend`).
    #[inline]
    pub(super) fn exec(&mut self, t: TaskId, c: CpuId) -> Outcome {
        let o = self.exec_ops(t);
        if self.io_on {
            return self.io_idle(t, c, o);
        }
        o
    }

    /// Interpret ops from pc until the task needs time, waits, or ends.
    fn exec_ops(&mut self, t: TaskId) -> Outcome {
        loop {
            let tk = &mut self.tasks[t.idx()];
            // Matched in place: an arm copies only its own fields (an op is up to
            // 144 bytes, a compute's fields 32), and the program is never cloned;
            // the arms that use sync objects read their indices (`tk.sync`).
            match tk.prog.ops[tk.pc as usize] {
                Op::Compute { work, mem, ws_kb, overlap } => {
                    if work.0 == 0 {
                        tk.pc += 1;
                        continue;
                    }
                    return self.start_compute(t, work.0, mem, ws_kb, overlap);
                }
                Op::LoopStart { count, .. } => {
                    // The innermost counter stays in the task; the ones around it go beside.
                    if tk.loop_depth > 0 {
                        tk.loops.push(tk.loop_top);
                    }
                    tk.loop_depth += 1;
                    tk.loop_top = count;
                    tk.pc += 1;
                }
                Op::LoopEnd { start } => {
                    assert!(tk.loop_depth > 0, "loop stack");
                    tk.loop_top -= 1;
                    if tk.loop_top > 0 {
                        tk.pc = start + 1;
                    } else {
                        tk.loop_depth -= 1;
                        if tk.loop_depth > 0 {
                            tk.loop_top = tk.loops.pop().expect("loop stack");
                        }
                        tk.pc += 1;
                    }
                }
                Op::Sleep { dur } => {
                    tk.pc += 1;
                    self.plan_wake(t, self.now + dur);
                    return Outcome::Blocked;
                }
                Op::Io { dur } => {
                    tk.pc += 1;
                    if self.io_on {
                        self.io_submit(t, dur);
                    } else {
                        self.plan_wake(t, self.now + dur);
                    }
                    return Outcome::Blocked;
                }
                Op::SleepExp { mean } => {
                    tk.pc += 1;
                    // Exponential by inversion from the run's seeded generator.
                    let dur = random::exponential(&mut self.rng, mean);
                    self.plan_wake(t, self.now + dur);
                    return Outcome::Blocked;
                }
                Op::End => {
                    self.set_state(t, St::Done);
                    self.tasks[t.idx()].done_at = Some(self.now);
                    if !self.tasks[t.idx()].background {
                        self.live -= 1;
                        if self.live == 0 {
                            if let Stop::AllDone { .. } = self.stop {
                                self.finished = true;
                            }
                        }
                    }
                    return Outcome::Done;
                }
                Op::Barrier { wait, .. } => {
                    let obj = tk.sync[tk.pc as usize][0];
                    if let Some(o) = self.barrier_arrive(t, obj, wait) {
                        return o;
                    }
                }
                Op::BarrierN { parties, wait, .. } => {
                    let obj = tk.sync[tk.pc as usize][0];
                    if let Some(o) = self.barrier_arrive_n(t, obj, parties, wait) {
                        return o;
                    }
                }
                Op::Runtime { dur } => {
                    if dur.0 == 0 {
                        tk.pc += 1;
                        continue;
                    }
                    tk.act = Act::Busy { until: self.now + dur };
                    self.replan(t);
                    return Outcome::Busy;
                }
                Op::Timer { period, relative, start, .. } => {
                    let obj = tk.sync[tk.pc as usize][0];
                    let now = self.now;
                    let obj = &mut self.sync[obj as usize];
                    if !obj.init {
                        obj.init = true;
                        obj.at = start;
                    }
                    obj.at += period;
                    let at = obj.at;
                    tk.slack.record(at.0 as i64 - now.0 as i64);
                    if now >= at && relative {
                        obj.at = now;
                    }
                    tk.pc += 1;
                    if now < at {
                        self.plan_wake(t, at);
                        return Outcome::Blocked;
                    }
                }
                Op::CondWait { wait, .. } => {
                    let obj = tk.sync[tk.pc as usize][0];
                    let obj = &mut self.sync[obj as usize];
                    obj.waiters.push_back(t);
                    return self.enter_wait(t, wait);
                }
                Op::CondSignal { broadcast, .. } => {
                    let obj = tk.sync[tk.pc as usize][0];
                    tk.pc += 1;
                    let obj = &mut self.sync[obj as usize];
                    let n = if broadcast { obj.waiters.len() } else { obj.waiters.len().min(1) };
                    let ws: Vec<TaskId> = obj.waiters.drain(..n).collect();
                    for w in ws {
                        self.release(w);
                    }
                }
                Op::Affinity { mask } => {
                    tk.pc += 1;
                    // The program's own choice: it replaces the mask in force (as a thread's
                    // sched_setaffinity does on Linux) and bounds later placer decisions.
                    self.own[t.idx()] = mask;
                    if self.views[t.idx()].affinity != mask {
                        self.views[t.idx()].affinity = mask;
                        self.disp.affinity_changed(&view!(self), t, &mut self.fx);
                        self.flush_fx();
                    }
                }
                Op::Lock { wait, .. } => {
                    let obj = tk.sync[tk.pc as usize][0];
                    let obj = &mut self.sync[obj as usize];
                    if obj.owner.is_none() {
                        obj.owner = Some(t);
                        self.tasks[t.idx()].pc += 1;
                    } else {
                        debug_assert_ne!(obj.owner, Some(t), "{t} re-locks a lock it holds");
                        obj.waiters.push_back(t);
                        return self.enter_wait(t, wait);
                    }
                }
                Op::Unlock { .. } => {
                    let obj = tk.sync[tk.pc as usize][0];
                    tk.pc += 1;
                    let obj = &mut self.sync[obj as usize];
                    debug_assert_eq!(obj.owner, Some(t), "{t} unlocks a lock it does not hold");
                    obj.owner = obj.waiters.pop_front();
                    if let Some(w) = obj.owner {
                        self.release(w);
                    }
                }
                Op::Push { capacity, wait, .. } => {
                    let obj = tk.sync[tk.pc as usize][0];
                    let obj = &mut self.sync[obj as usize];
                    if let Some(w) = obj.waiters.pop_front() {
                        // a consumer is waiting: hand the item over
                        self.tasks[t.idx()].pc += 1;
                        self.release(w);
                    } else if obj.count < capacity as u64 {
                        obj.count += 1;
                        self.tasks[t.idx()].pc += 1;
                    } else {
                        obj.push_waiters.push_back(t);
                        return self.enter_wait(t, wait);
                    }
                }
                Op::Pop { wait, .. } => {
                    let obj = tk.sync[tk.pc as usize][0];
                    let obj = &mut self.sync[obj as usize];
                    if obj.count > 0 {
                        obj.count -= 1;
                        self.tasks[t.idx()].pc += 1;
                        // a producer waiting for room puts its item in
                        if let Some(p) = obj.push_waiters.pop_front() {
                            obj.count += 1;
                            self.release(p);
                        }
                    } else if let Some(p) = obj.push_waiters.pop_front() {
                        self.tasks[t.idx()].pc += 1;
                        self.release(p);
                    } else {
                        obj.waiters.push_back(t);
                        return self.enter_wait(t, wait);
                    }
                }
                Op::ParFor { work, schedule, mem, ws_kb, overlap, wait, .. } => {
                    let [obj, obj2] = tk.sync[tk.pc as usize];
                    let n = self.group_size[tk.group as usize] as u64;
                    let rank = tk.rank as u64;
                    let obj = &mut self.sync[obj as usize];
                    if !obj.init {
                        obj.init = true;
                        obj.remaining = work.0;
                    }
                    let take = match schedule {
                        Schedule::Static => {
                            if tk.pf_static_done {
                                0
                            } else {
                                tk.pf_static_done = true;
                                work.0 / n + u64::from(rank < work.0 % n)
                            }
                        }
                        Schedule::Dynamic { chunk } => chunk.0.min(obj.remaining),
                        Schedule::Guided { min_chunk } => obj.remaining.div_ceil(n).max(min_chunk.0).min(obj.remaining),
                    };
                    if !matches!(schedule, Schedule::Static) {
                        obj.remaining -= take;
                    }
                    if take > 0 {
                        return self.start_compute(t, take, mem, ws_kb, overlap);
                    }
                    // This task is out of work: leave the loop, then the implicit barrier.
                    self.tasks[t.idx()].pf_static_done = false;
                    obj.exited += 1;
                    if obj.exited as u64 == n {
                        obj.init = false;
                        obj.exited = 0;
                    }
                    if let Some(o) = self.barrier_arrive(t, obj2, wait) {
                        return o;
                    }
                }
            }
        }
    }

    /// Arrive at barrier object `obj`: `None` when it completed (pc advanced), else how the task waits.
    pub(super) fn barrier_arrive(&mut self, t: TaskId, obj: u32, wait: Wait) -> Option<Outcome> {
        let n = self.group_size[self.tasks[t.idx()].group as usize];
        self.barrier_arrive_n(t, obj, n, wait)
    }

    /// Arrive at a barrier of `n` parties (see `barrier_arrive`).
    pub(super) fn barrier_arrive_n(&mut self, t: TaskId, obj: u32, n: u32, wait: Wait) -> Option<Outcome> {
        let o = &mut self.sync[obj as usize];
        o.arrived += 1;
        if o.arrived >= n {
            o.arrived = 0;
            // Release the waiters in arrival order; their queue is lent out and
            // handed back (nothing waits here meanwhile) so no release allocates.
            let mut ws = std::mem::take(&mut o.waiters);
            self.tasks[t.idx()].pc += 1;
            for &w in &ws {
                self.release(w);
            }
            ws.clear();
            let o = &mut self.sync[obj as usize];
            if o.waiters.is_empty() {
                o.waiters = ws;
            }
            None
        } else {
            o.waiters.push_back(t);
            Some(self.enter_wait(t, wait))
        }
    }

    pub(super) fn enter_wait(&mut self, t: TaskId, wait: Wait) -> Outcome {
        let tk = &mut self.tasks[t.idx()];
        match wait {
            Wait::Block => {
                tk.act = Act::Wait;
                Outcome::Blocked
            }
            Wait::Spin => {
                tk.act = Act::Spin { limit: None, yields: false };
                tk.spin_used = Nanos::ZERO;
                Outcome::Busy
            }
            Wait::Yield => {
                tk.act = Act::Spin { limit: None, yields: true };
                tk.spin_used = Nanos::ZERO;
                self.tell_yielding(t, true);
                Outcome::Busy
            }
            Wait::SpinThenBlock(l) => {
                tk.act = Act::Spin { limit: Some(l), yields: false };
                tk.spin_used = Nanos::ZERO;
                if l.0 == 0 {
                    tk.act = Act::Wait;
                    return Outcome::Blocked;
                }
                self.replan(t);
                Outcome::Busy
            }
        }
    }

    /// Tell the dispatcher that `t` started (`on`) or stopped polling with
    /// `sched_yield` between polls (`Wait::Yield`); what it does with that is
    /// its own model of `sched_yield` (`Dispatcher::yielding`).
    fn tell_yielding(&mut self, t: TaskId, on: bool) {
        self.disp.yielding(&view!(self), t, on, &mut self.fx);
        self.flush_fx();
    }

    /// The condition `w` waited for holds: move it past its op and let it go on.
    pub(super) fn release(&mut self, w: TaskId) {
        let st = self.tasks[w.idx()].st;
        if let St::Running(_) = st {
            self.settle(w);
        }
        if let Act::Spin { yields: true, .. } = self.tasks[w.idx()].act {
            self.tell_yielding(w, false);
        }
        self.supersede(w);
        let tk = &mut self.tasks[w.idx()];
        tk.pc += 1;
        tk.act = Act::Ready;
        match st {
            St::Blocked => self.wake_released(w),
            St::Running(_) => self.pending.push_back(Pending::Continue(w)),
            St::Runnable => {}
            St::Done => unreachable!("a finished task was waiting"),
        }
    }
}
