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

use super::clock::{Ev, Key};
use super::cpu::Cpu;
use super::task::{Act, St, NO_SPEED};
use super::{Sim, Stop};
use ampsched_model::{CpuId, Nanos, TaskId};
use std::cmp::Reverse;

impl Sim {
    /// Move task `t` to state `st`, accounting the time in the state it
    /// leaves (inlined: each caller's `st` is a constant, so only its own
    /// transition's tests remain).
    #[inline(always)]
    pub(super) fn set_state(&mut self, t: TaskId, st: St) {
        let now = self.now;
        let record_wake = self.wake_latency;
        let tk = &mut self.tasks[t.idx()];
        let dt = (now - tk.state_since).0;
        match tk.st {
            St::Runnable => tk.wait_ns += dt,
            St::Blocked => tk.blocked_ns += dt,
            _ => {}
        }
        tk.state_since = now;
        // Wake-up latency: from Blocked → Runnable to the next Running (a
        // preempted task, Running → Runnable, is not woken). Only when asked for.
        match (tk.st, st) {
            _ if !record_wake => {}
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
        let leaves_bus = tk.on_bus && !matches!(st, St::Running(_));
        let was_active = matches!(tk.st, St::Runnable | St::Running(_));
        let is_active = matches!(st, St::Runnable | St::Running(_));
        tk.st = st;
        if is_active {
            tk.period_active = true;
        }
        if was_active != is_active {
            self.series.active_changed(tk.domain.idx(), is_active, now);
        }
        if leaves_bus {
            self.bus_change(t, None);
        }
        if self.llc_on && !matches!(st, St::Running(_)) {
            self.llc_leave(t);
        }
    }

    /// Task `t` starts (`Some((speed, mem, cost alone))`) or stops (`None`) computing on a
    /// machine with a shared memory bus (`engine::bus`): the bus is divided
    /// anew, and every other member whose cost changes is settled at its old
    /// cost and re-planned at the new one (`t` itself is planned by the
    /// caller, or leaves). A change that moves nobody's cost touches nothing.
    fn bus_change(&mut self, t: TaskId, join: Option<(f64, f64, u64)>) {
        let Some(mut bus) = self.bus.take() else { return };
        match join {
            Some((speed, mem, alone)) => bus.join(t, speed, mem, alone),
            None => {
                bus.leave(t);
                let tk = &mut self.tasks[t.idx()];
                tk.on_bus = false;
                tk.cost_speed = NO_SPEED;
            }
        }
        bus.divide();
        let mut changed = std::mem::take(&mut bus.changed);
        for m in &bus.members {
            let tk = &self.tasks[m.task.idx()];
            if m.task == t {
                let tk = &mut self.tasks[t.idx()];
                (tk.on_bus, tk.cost_speed, tk.cost) = (true, m.speed.to_bits(), m.cost);
            } else if tk.cost != m.cost {
                changed.push((m.task, m.speed, m.cost));
            }
        }
        self.bus = Some(bus);
        self.recost(&changed);
        changed.clear();
        if let Some(b) = self.bus.as_mut() {
            b.changed = changed;
        }
    }

    /// The co-runners of a shared resource (the memory bus, an LLC) whose cost
    /// a change moved, each with its CPU's speed and new cost: each is settled
    /// at its old cost, given the new one, then re-planned at it.
    pub(super) fn recost(&mut self, changed: &[(TaskId, f64, u64)]) {
        for &(o, speed, cost) in changed {
            self.settle(o);
            let tk = &mut self.tasks[o.idx()];
            (tk.cost_speed, tk.cost) = (speed.to_bits(), cost);
        }
        for &(o, _, _) in changed {
            self.replan(o);
        }
    }

    /// Change the share CPU `ci` leaves its task (noise turning on or off, a
    /// seizure): the CPU's time and its task's progress are settled at the old
    /// share, `change` sets the new one, and the task is re-planned at it.
    #[inline]
    pub(super) fn reshare(&mut self, ci: usize, change: impl FnOnce(&mut Cpu)) {
        self.flush_cpu(ci);
        let curr = self.cpus[ci].curr;
        if let Some(t) = curr {
            self.settle(t);
        }
        change(&mut self.cpus[ci]);
        if let Some(t) = curr {
            self.replan(t);
        }
    }

    /// Account a running task's progress up to now.
    #[inline]
    pub(super) fn settle(&mut self, t: TaskId) {
        self.settle_with(t, true);
    }

    /// Account a running task's progress up to now; `work`: also the work
    /// left of a compute (false when it completes now and the caller zeroes
    /// it: the division that yields it is skipped, the refill still paid).
    pub(super) fn settle_with(&mut self, t: TaskId, work: bool) {
        self.settle_progress(t, work);
        // A compute completing now stops using the memory bus.
        if !work && self.tasks[t.idx()].on_bus {
            self.bus_change(t, None);
        }
        if !work && self.llc_on {
            self.llc_leave(t);
        }
    }

    /// `settle_with`'s accounting of the progress itself.
    #[inline]
    fn settle_progress(&mut self, t: TaskId, work: bool) {
        let now = self.now;
        let tk = &mut self.tasks[t.idx()];
        let St::Running(c) = tk.st else { return };
        let dt = (now - tk.seg_start).0;
        if dt == 0 {
            return;
        }
        tk.seg_start = now;
        let cpu = &mut self.cpus[c.idx()];
        tk.run_by_class.add(cpu.class as usize, dt);
        if self.placed {
            tk.period_run[cpu.class as usize] += dt;
        }
        let left = cpu.run_amount(dt, now);
        match tk.act {
            Act::Compute if work => {
                let cost = tk.cost_on(cpu.speed, &self.topo);
                tk.advance_compute(left, cost)
            }
            Act::Compute => {
                tk.pay_refill(left);
            }
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
        let md_new = self.mem_domain[c.idx()];
        let last = self.tasks[n.idx()].last_cpu;
        let tk = &mut self.tasks[n.idx()];
        tk.seg_start = now;
        self.cpus[c.idx()].run_starts(now);
        if let Some(l) = last {
            if l != c {
                let md_old = self.mem_domain[l.idx()];
                let across = md_old != md_new;
                if across {
                    tk.mig_remote += 1;
                } else {
                    tk.mig_local += 1;
                }
                self.series.mig[tk.domain.idx()] += 1;
                // What the new CPU's caches lack of the working set (`engine::trail`):
                // the debt replaces any left from the last move, which was the last cache's.
                let cache = &self.topo.cache;
                let local = tk.refill_cost(cache, false);
                let remote = if across { tk.refill_cost(cache, true) } else { 0 };
                let left = tk.refill_left;
                tk.refill_left = self.trails[n.idx()].arrive((l, md_old), (c, md_new), local, remote, left);
            }
        }
        tk.last_cpu = Some(c);
    }

    /// Re-plan the completion event of a running task (rate or state changed).
    pub(super) fn replan(&mut self, t: TaskId) {
        let tk = &mut self.tasks[t.idx()];
        let St::Running(c) = tk.st else { return };
        if self.llc_on && tk.act == Act::Compute {
            self.llc_join(t);
        }
        let tk = &mut self.tasks[t.idx()];
        if self.bus.is_some() && tk.act == Act::Compute && !tk.on_bus && tk.mem > 0.0 {
            // It starts computing on a machine whose memory bus it shares.
            let speed = self.cpus[c.idx()].speed;
            let (mem, alone) = (tk.mem, tk.cost_on(speed, &self.topo));
            self.bus_change(t, Some((speed, mem, alone)));
        }
        self.supersede(t);
        let tk = &mut self.tasks[t.idx()];
        let cpu = &mut self.cpus[c.idx()];
        let at = match tk.act {
            // A CPU that leaves a task no time (seized, or all of it to noise):
            // no progress, so no completion to plan until its share comes back (re-planned then).
            Act::Compute if cpu.avail == 0 => return,
            Act::Compute if cpu.has_traffic() => {
                // Traffic noise (`cpu::Traffic`): through its batches, or, past
                // those it looks at, a re-plan at the next one (`Ev::Noise`).
                let cost = tk.cost_on(cpu.speed, &self.topo);
                match cpu.traffic_reach(self.now, tk.compute_need(cost)) {
                    Ok(at) => {
                        cpu.check_at = Nanos::MAX;
                        at
                    }
                    Err(check) => {
                        cpu.check_at = check;
                        self.push(check, Ev::Noise(c));
                        return;
                    }
                }
            }
            Act::Compute => {
                let cost = tk.cost_on(cpu.speed, &self.topo);
                self.now + tk.compute_wall(cost, cpu.avail)
            }
            Act::Spin { limit: Some(l), .. } => self.now + l.saturating_sub(tk.spin_used),
            Act::Busy { until } => until.max(self.now),
            _ => return,
        };
        self.plan_op(t, at);
    }

    /// Task `t`'s current plan no longer holds (it was preempted, released, or
    /// is re-planned): a new generation, and its plan counted as the
    /// superseded event it would have been (`superseded_plan`) — withdrawn
    /// from the queue if the ring holds it; one in the far heap stays, pops
    /// and is found stale (`pop_op`).
    #[inline]
    pub(super) fn supersede(&mut self, t: TaskId) {
        let tk = &mut self.tasks[t.idx()];
        if cfg!(debug_assertions) {
            tk.gen = tk.gen.wrapping_add(1);
        }
        let k = tk.op_key;
        if std::mem::take(&mut tk.op_queued) {
            if self.events.cancel(k) {
                self.superseded_plan(k);
            }
        } else if std::mem::take(&mut tk.op_waiting) {
            self.superseded_plan(k);
        }
    }

    /// Plan task `t`'s completion at `at` (its previous plan was superseded:
    /// `supersede`). A plan the ring reaches gets its own entry there,
    /// withdrawn if superseded; one further ahead (the far heap, which cannot
    /// withdraw) gets its own entry only if earlier than the task's earliest
    /// entry there, `far_key`, else it waits for that entry to pop (stale) and
    /// queue it then. So the queue holds a few entries per task however
    /// often a task is switched, and `events` counts what a queue of every
    /// plan, each left to pop, would have popped.
    pub(super) fn plan_op(&mut self, t: TaskId, at: Nanos) {
        let key = self.events.key(at, Ev::OpDone(t));
        let near = self.events.near(key);
        let tk = &mut self.tasks[t.idx()];
        debug_assert!(!tk.op_queued && !tk.op_waiting, "a plan made over a live one");
        tk.op_key = key;
        if cfg!(debug_assertions) {
            tk.op_gen = tk.gen;
        }
        if near || !tk.far || key < tk.far_key {
            tk.op_queued = self.events.insert(key);
            if tk.op_queued && !near {
                (tk.far, tk.far_key) = (true, key);
            }
        } else {
            tk.op_waiting = self.events.before_horizon(key);
        }
    }

    /// A completion entry keyed `k` of task `t` popped: whether it is the
    /// task's live plan (then due now); otherwise it is counted superseded,
    /// and queues the task's waiting plan (`plan_op`).
    pub(super) fn pop_op(&mut self, t: TaskId, k: Key) -> bool {
        let tk = &mut self.tasks[t.idx()];
        if tk.far && k == tk.far_key {
            tk.far = false;
        }
        if k == tk.op_key && tk.op_queued {
            tk.op_queued = false;
            debug_assert_eq!(tk.op_gen, tk.gen, "a queued plan of an old generation");
            return true;
        }
        if tk.op_waiting {
            let pk = tk.op_key;
            debug_assert!(pk > k, "a waiting plan is keyed after the entry that queues it");
            let near = self.events.near(pk);
            if near || !tk.far || pk < tk.far_key {
                tk.op_waiting = false;
                tk.op_queued = self.events.insert(pk);
                if !near {
                    (tk.far, tk.far_key) = (true, pk);
                }
            }
        }
        self.superseded += 1;
        false
    }

    /// A plan keyed `k` withdrawn from the queue will not run: count it as
    /// the stale event it would have been, if the run gets that far.
    pub(super) fn superseded_plan(&mut self, k: Key) {
        if !self.events.before_horizon(k) {
            return;
        }
        self.superseded += 1;
        match self.stop {
            // A fixed-length run reaches its horizon.
            Stop::Duration(_) => self.events_done += 1,
            // A run that may end early counts those keyed before its last event (`finish`).
            // Kept in a min-heap and counted as the run passes them: a plan is
            // withdrawn before its key comes, so `k` is still ahead.
            Stop::AllDone { .. } => {
                self.ghosts.push(Reverse(k));
                while let Some(&Reverse(g)) = self.ghosts.peek() {
                    if g >= self.last_key {
                        break;
                    }
                    self.ghosts.pop();
                    self.events_done += 1;
                }
            }
        }
    }
}
