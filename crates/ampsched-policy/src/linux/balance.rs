//! Load balancing of the `linux` model (`sched_balance_rq` and its callers in
//! `kernel/sched/fair.c`; domain construction after `kernel/sched/topology.c`).
//! See the parent module's essay for the rules; this file follows them in
//! the kernel's order: statistics per group (`update_sg_lb_stats`), group
//! type (`group_classify`), busiest group (`update_sd_pick_busiest`,
//! `sched_balance_find_src_group`), imbalance (`calculate_imbalance`),
//! busiest queue (`sched_balance_find_src_rq`), `detach_tasks`, and active
//! balance (`need_active_balance`, `active_load_balance_cpu_stop`).

use super::domains::capacity_greater;
pub use super::domains::{GroupStats, GroupType, IdleType, Level, Migration};
use super::Linux;
use crate::dispatcher::{Effects, SysView};
use ampsched_model::{CpuId, CpuSet, Nanos, TaskId};

impl Linux {
    fn group_stats(&self, now: Nanos, lv: &Level, g: CpuSet, local: bool, idle: IdleType) -> (GroupStats, bool) {
        let mut s = GroupStats {
            cpus: g,
            load: 0,
            util: 0,
            runnable: 0,
            capacity: 0,
            min_capacity: u64::MAX,
            max_capacity: 0,
            nr: 0,
            nr_running: 0,
            idle_cpus: 0,
            weight: g.len() as u32,
            misfit_load: 0,
            avg_load: 0,
            ty: GroupType::HasSpare,
        };
        let mut overloaded = false;
        for c in g.iter() {
            let load = self.cpu_load(c);
            s.load += load;
            s.util += self.cpu_util(c);
            s.runnable += self.cpu_runnable(c);
            let cap = self.capacity_of(c);
            s.capacity += cap;
            s.min_capacity = s.min_capacity.min(cap);
            s.max_capacity = s.max_capacity.max(cap);
            s.nr += self.cfs_nr(c);
            s.nr_running += self.nr_running(c, now);
            if self.nr_running(c, now) > 1 {
                overloaded = true;
            }
            if self.idle_cpu(c, now) {
                s.idle_cpus += 1;
            }
            if local {
                continue;
            }
            if lv.asym {
                if self.rq[c.idx()].misfit_load > s.misfit_load {
                    s.misfit_load = self.rq[c.idx()].misfit_load;
                    overloaded = true;
                }
            } else if idle != IdleType::NotIdle && self.cfs_nr(c) == 1 && self.reduced_capacity(c) {
                // sched_reduced_capacity: exactly one fair task (with more,
                // group_overloaded already covers a CPU of reduced capacity).
                s.misfit_load = s.misfit_load.max(load.max(1));
            }
        }
        // group_is_overloaded / group_has_capacity count the tasks of every
        // class (sum_nr_running): a fair task waiting behind an RT task makes
        // a one-CPU group overloaded when its capacity is short.
        let pct = self.p.imbalance_pct;
        let is_overloaded =
            s.nr_running > s.weight && (s.capacity * 100 < s.util * pct || s.capacity * pct < s.runnable * 100);
        let has_capacity =
            s.nr_running < s.weight || (s.capacity * pct >= s.runnable * 100 && s.capacity * 100 > s.util * pct);
        s.ty = if is_overloaded {
            GroupType::Overloaded
        } else if s.misfit_load > 0 {
            GroupType::Misfit
        } else if !has_capacity {
            GroupType::FullyBusy
        } else {
            GroupType::HasSpare
        };
        if matches!(s.ty, GroupType::Overloaded | GroupType::FullyBusy) {
            s.avg_load = s.load * 1024 / s.capacity.max(1);
        }
        (s, overloaded)
    }

    /// `update_sd_pick_busiest`: should `s` replace `b` as the busiest group?
    fn pick_busiest(&self, lv: &Level, dst: CpuId, local: &GroupStats, s: &GroupStats, b: Option<&GroupStats>) -> bool {
        if s.nr == 0 {
            return false;
        }
        if lv.asym
            && s.ty == GroupType::Misfit
            && (!capacity_greater(self.capacity_of(dst), s.max_capacity) || local.ty != GroupType::HasSpare)
        {
            return false;
        }
        if let Some(b) = b {
            if s.ty != b.ty {
                return s.ty > b.ty;
            }
            let better = match s.ty {
                GroupType::Overloaded | GroupType::FullyBusy => s.avg_load >= b.avg_load,
                GroupType::Misfit => s.misfit_load >= b.misfit_load,
                GroupType::HasSpare => {
                    s.idle_cpus < b.idle_cpus || (s.idle_cpus == b.idle_cpus && s.nr_running > b.nr_running)
                }
            };
            if !better {
                return false;
            }
        }
        // Do not pull from bigger CPUs to a smaller one unless overloaded.
        !(lv.asym && s.ty <= GroupType::FullyBusy && capacity_greater(s.min_capacity, self.capacity_of(dst)))
    }

    /// `should_we_balance`: the first idle CPU of the local group, else its first CPU.
    fn should_we_balance(&self, lv: &Level, dst: CpuId, now: Nanos, idle: IdleType) -> bool {
        if idle == IdleType::NewlyIdle {
            return true;
        }
        let g = lv.groups[dst.idx()][0];
        let first = g.iter().find(|c| self.idle_cpu(*c, now)).or(g.first());
        first == Some(dst)
    }

    /// `sched_balance_rq` on `dst` at level `li`; returns tasks moved.
    pub fn load_balance(&mut self, v: &SysView, dst: CpuId, li: usize, idle: IdleType, fx: &mut Effects) -> u32 {
        let now = v.now;
        let lv = self.levels[li].clone();
        if !self.should_we_balance(&lv, dst, now, idle) {
            return 0;
        }
        self.sync_cpus(lv.span[dst.idx()], now);
        let mut stats = Vec::new();
        let mut overloaded = false;
        for (k, g) in lv.groups[dst.idx()].iter().enumerate() {
            let (s, o) = self.group_stats(now, &lv, *g, k == 0, idle);
            overloaded |= o;
            stats.push(s);
        }
        if lv.top {
            self.overloaded = overloaded;
        }
        let local = stats[0].clone();
        let mut busiest: Option<usize> = None;
        for k in 1..stats.len() {
            if self.pick_busiest(&lv, dst, &local, &stats[k], busiest.map(|b| &stats[b])) {
                busiest = Some(k);
            }
        }
        let plan = busiest.and_then(|b| self.find_imbalance(&lv, &local, &stats[b], &stats, idle).map(|p| (b, p)));
        let Some((b, (mig, imbalance))) = plan else {
            self.balanced(dst, li, idle);
            return 0;
        };
        let Some(src) = self.find_busiest_queue(&lv, dst, stats[b].cpus, mig, imbalance) else {
            self.balanced(dst, li, idle);
            return 0;
        };
        let moved = self.detach_tasks(v, src, dst, li, mig, imbalance, idle);
        if moved > 0 {
            self.rq[dst.idx()].nr_balance_failed[li] = 0;
            self.rq[dst.idx()].balance_interval[li] = lv.weight[dst.idx()] as u64;
            if idle == IdleType::NewlyIdle {
                // The caller (pick_next) picks at once.
            } else if self.rq[dst.idx()].curr.is_none() {
                fx.resched(dst);
            } else if let Some(t) = self.rq[dst.idx()].queue.last().copied() {
                self.check_preempt(dst, t, now, fx);
            }
            return moved;
        }
        if idle != IdleType::NewlyIdle {
            self.rq[dst.idx()].nr_balance_failed[li] += 1;
        }
        if self.need_active_balance(&lv, src, dst, li, mig, idle) {
            let movable = self.rq[src.idx()].curr.filter(|t| v.tasks[t.idx()].affinity.contains(dst));
            if movable.is_some() && !self.rt_active(src, now) && self.rq[src.idx()].push_to.is_none() {
                self.rq[src.idx()].push_to = Some(dst);
                self.stats.active_balances += 1;
                fx.resched(src);
                // After an active balance the failure count is set past cache_nice_tries.
                self.rq[dst.idx()].nr_balance_failed[li] = 2;
                self.rq[dst.idx()].balance_interval[li] = lv.weight[dst.idx()] as u64;
                return 0;
            }
        }
        self.grow_interval(dst, li, idle);
        0
    }

    fn balanced(&mut self, dst: CpuId, li: usize, idle: IdleType) {
        self.rq[dst.idx()].nr_balance_failed[li] = 0;
        self.grow_interval(dst, li, idle);
    }

    /// Tune up the balancing interval after a balance that moved nothing.
    fn grow_interval(&mut self, dst: CpuId, li: usize, idle: IdleType) {
        if idle == IdleType::NewlyIdle {
            return;
        }
        let max = 2 * self.levels[li].weight[dst.idx()] as u64;
        let iv = &mut self.rq[dst.idx()].balance_interval[li];
        if *iv < max {
            *iv *= 2;
        }
    }

    /// `sched_balance_find_src_group` + `calculate_imbalance`: the migration
    /// type and amount, or `None` when balanced.
    fn find_imbalance(
        &self,
        lv: &Level,
        local: &GroupStats,
        busiest: &GroupStats,
        all: &[GroupStats],
        idle: IdleType,
    ) -> Option<(Migration, u64)> {
        if busiest.nr == 0 {
            return None;
        }
        if busiest.ty == GroupType::Misfit {
            return Some(if lv.asym { (Migration::Misfit, 1) } else { (Migration::Load, busiest.misfit_load) });
        }
        if local.ty > busiest.ty {
            return None;
        }
        let total_load: u64 = all.iter().map(|s| s.load).sum();
        let total_cap: u64 = all.iter().map(|s| s.capacity).sum();
        let sds_avg = total_load * 1024 / total_cap.max(1);
        let local_avg = local.load * 1024 / local.capacity.max(1);
        if local.ty == GroupType::Overloaded {
            if local_avg >= busiest.avg_load || local_avg >= sds_avg {
                return None;
            }
            if 100 * busiest.avg_load <= self.p.imbalance_pct * local_avg {
                return None;
            }
        }
        if busiest.ty != GroupType::Overloaded {
            if idle == IdleType::NotIdle {
                return None;
            }
            if busiest.weight > 1 && local.idle_cpus <= busiest.idle_cpus + 1 {
                return None;
            }
            if busiest.nr == 1 {
                return None;
            }
        }
        // calculate_imbalance
        if local.ty == GroupType::HasSpare {
            if busiest.ty > GroupType::FullyBusy && !lv.share_llc {
                let imb = local.capacity.max(local.util) - local.util;
                if imb == 0 && idle != IdleType::NotIdle {
                    return Some((Migration::Task, 1));
                }
                return (imb > 0).then_some((Migration::Util, imb));
            }
            let imb = if busiest.weight == 1 || lv.prefer_sibling {
                // sibling_imbalance (equal cores): the difference of
                // sum_nr_running, RT tasks included, halved; 0 for a busy
                // CPU's periodic balance (`!env->idle`), which leaves
                // spreading to idle and newly idle CPUs.
                if idle == IdleType::NotIdle {
                    0
                } else {
                    (busiest.nr_running.saturating_sub(local.nr_running) / 2) as u64
                }
            } else {
                (local.idle_cpus.saturating_sub(busiest.idle_cpus) / 2) as u64
            };
            return (imb > 0).then_some((Migration::Task, imb));
        }
        // Local is busy: move load towards the domain average.
        if local_avg >= sds_avg || busiest.avg_load <= sds_avg {
            return None;
        }
        let imb = ((busiest.avg_load - sds_avg) * busiest.capacity).min((sds_avg - local_avg) * local.capacity) / 1024;
        (imb > 0).then_some((Migration::Load, imb))
    }

    /// `sched_balance_find_src_rq`.
    fn find_busiest_queue(&self, lv: &Level, dst: CpuId, g: CpuSet, mig: Migration, imbalance: u64) -> Option<CpuId> {
        let mut best: Option<(CpuId, u64, u64)> = None; // (cpu, value, capacity)
        for c in g.iter() {
            let nr = self.cfs_nr(c);
            if nr == 0 {
                continue;
            }
            let cap = self.capacity_of(c);
            let value = match mig {
                Migration::Load => {
                    if lv.asym && !capacity_greater(self.capacity_of(dst), cap) && nr == 1 {
                        continue;
                    }
                    let load = self.cpu_load(c);
                    if nr == 1 && load > imbalance && !self.reduced_capacity(c) {
                        continue;
                    }
                    // Highest load per capacity: compare load_a × cap_b > load_b × cap_a.
                    if let Some((_, bl, bc)) = best {
                        if (load as u128) * (bc as u128) <= (bl as u128) * (cap as u128) {
                            continue;
                        }
                    }
                    best = Some((c, load, cap));
                    continue;
                }
                Migration::Util => {
                    if nr <= 1 {
                        continue;
                    }
                    self.cpu_util(c)
                }
                Migration::Task => nr as u64,
                Migration::Misfit => self.rq[c.idx()].misfit_load,
            };
            if value > 0 && best.is_none_or(|b| value > b.1) {
                best = Some((c, value, cap));
            }
        }
        best.map(|b| b.0)
    }

    /// `detach_tasks` + `attach_tasks`: move waiting tasks from `src` to `dst`.
    #[allow(clippy::too_many_arguments)]
    fn detach_tasks(
        &mut self,
        v: &SysView,
        src: CpuId,
        dst: CpuId,
        li: usize,
        mig: Migration,
        mut imbalance: u64,
        idle: IdleType,
    ) -> u32 {
        let now = v.now;
        let failed = self.rq[dst.idx()].nr_balance_failed[li];
        // Least recently run first (the tail of cfs_tasks).
        let mut cands: Vec<(Nanos, TaskId)> =
            self.rq[src.idx()].queue.iter().map(|t| (self.se[t.idx()].last_ran, *t)).collect();
        cands.sort();
        let mut moved = 0;
        for (_, t) in cands {
            if idle != IdleType::NotIdle && self.nr_running(src, now) <= 1 {
                break;
            }
            // can_migrate_task
            if !v.tasks[t.idx()].affinity.contains(dst) {
                continue;
            }
            let hot = now.saturating_sub(self.se[t.idx()].last_ran) < self.p.migration_cost;
            if hot && failed <= 1 {
                continue;
            }
            match mig {
                Migration::Load => {
                    let load = self.task_load(t).max(1);
                    if (load >> failed.min(63)) > imbalance {
                        continue;
                    }
                    imbalance = imbalance.saturating_sub(load);
                }
                Migration::Util => {
                    let u = self.task_util(t);
                    if u > imbalance {
                        continue;
                    }
                    imbalance -= u;
                }
                Migration::Task => imbalance = imbalance.saturating_sub(1),
                Migration::Misfit => {
                    if self.task_fits(t, src) {
                        continue;
                    }
                    imbalance = 0;
                }
            }
            self.migrate(t, dst, now);
            moved += 1;
            if idle == IdleType::NewlyIdle || imbalance == 0 {
                break;
            }
        }
        moved
    }

    /// `need_active_balance`.
    fn need_active_balance(
        &self,
        lv: &Level,
        src: CpuId,
        dst: CpuId,
        li: usize,
        mig: Migration,
        idle: IdleType,
    ) -> bool {
        if mig == Migration::Task && self.rq[dst.idx()].nr_balance_failed[li] > 1 + 2 {
            return true;
        }
        if idle != IdleType::NotIdle
            && self.cfs_nr(src) == 1
            && self.reduced_capacity(src)
            && self.capacity_of(src) * self.p.imbalance_pct < self.capacity_of(dst) * 100
        {
            return true;
        }
        let _ = lv;
        mig == Migration::Misfit
    }

    /// `active_load_balance_cpu_stop` on `src`: push its least recently run
    /// movable waiting task (the preempted one included) to `dst`.
    pub(crate) fn active_push(&mut self, v: &SysView, src: CpuId, dst: CpuId, fx: &mut Effects) {
        let now = v.now;
        let mut cands: Vec<(Nanos, TaskId)> = self.rq[src.idx()]
            .queue
            .iter()
            .filter(|t| v.tasks[t.idx()].affinity.contains(dst))
            .map(|t| (self.se[t.idx()].last_ran, *t))
            .collect();
        cands.sort();
        if let Some((_, t)) = cands.first().copied() {
            self.migrate(t, dst, now);
            self.check_preempt(dst, t, now, fx);
        }
    }

    /// Balance interval of level `li` for `cpu`, in time (`get_sd_balance_interval`).
    fn interval(&self, cpu: CpuId, li: usize, busy: bool) -> Nanos {
        let mut ms = self.rq[cpu.idx()].balance_interval[li];
        if busy {
            ms *= self.p.busy_factor;
        }
        let tick = self.p.tick.0.max(1);
        let ticks = (ms * 1_000_000).div_ceil(tick).max(1);
        let max_ticks = (self.ncpus() as u64 * 100 * 1_000_000).div_ceil(tick).max(1);
        Nanos(ticks.min(max_ticks) * tick)
    }

    /// `sched_balance_domains` for `cpu` (periodic, or for an idle CPU in a nohz balance).
    pub(crate) fn rebalance_domains(&mut self, v: &SysView, cpu: CpuId, fx: &mut Effects) {
        let now = v.now;
        let mut idle = if self.idle_cpu(cpu, now) { IdleType::Idle } else { IdleType::NotIdle };
        for li in 0..self.levels.len() {
            let iv = self.interval(cpu, li, idle == IdleType::NotIdle);
            if now < self.rq[cpu.idx()].last_balance[li] + iv {
                continue;
            }
            let moved = self.load_balance(v, cpu, li, idle, fx);
            self.stats.pulls += moved as u64;
            if moved > 0 {
                idle = IdleType::NotIdle;
            }
            self.rq[cpu.idx()].last_balance[li] = now;
        }
    }

    /// When `cpu` is next due to balance as an idle CPU.
    fn next_balance(&self, cpu: CpuId) -> Nanos {
        (0..self.levels.len())
            .map(|li| self.rq[cpu.idx()].last_balance[li] + self.interval(cpu, li, false))
            .min()
            .unwrap_or(Nanos::MAX)
    }

    /// `nohz_balancer_kick` from busy `cpu`'s tick, then `_nohz_idle_balance`.
    pub(crate) fn nohz_balancer_kick(&mut self, v: &SysView, cpu: CpuId, fx: &mut Effects) {
        let now = v.now;
        let n = self.ncpus();
        let idle: Vec<CpuId> = (0..n).map(|c| CpuId(c as u32)).filter(|c| self.idle_cpu(*c, now)).collect();
        if idle.is_empty() || now < self.nohz_next || self.levels.is_empty() {
            return;
        }
        let c = cpu.idx();
        let llc = self.llc[c];
        let busy_in_llc = llc.iter().filter(|x| !self.idle_cpu(*x, now)).count();
        let kick = self.nr_running(cpu, now) >= 2
            || (self.levels.iter().any(|l| l.asym)
                && self.rq[c].misfit_load > 0
                && (self.cap_orig[c] < self.max_cap || self.reduced_capacity(cpu)))
            || (self.cfs_nr(cpu) >= 1 && self.reduced_capacity(cpu))
            || busy_in_llc > 1;
        if !kick {
            return;
        }
        self.stats.nohz_kicks += 1;
        for i in idle {
            if now >= self.next_balance(i) && self.idle_cpu(i, now) {
                self.rebalance_domains(v, i, fx);
            }
        }
        let next = (0..n)
            .map(|x| CpuId(x as u32))
            .filter(|x| self.idle_cpu(*x, now))
            .map(|x| self.next_balance(x))
            .min()
            .unwrap_or(now + self.p.tick);
        self.nohz_next = next.max(now + self.p.tick);
    }

    /// `sched_balance_newidle`: `cpu` has no fair work; pull one task, lowest level first.
    pub(crate) fn sched_balance_newidle(&mut self, v: &SysView, cpu: CpuId, fx: &mut Effects) {
        if !self.overloaded {
            return;
        }
        for li in 0..self.levels.len() {
            let moved = self.load_balance(v, cpu, li, IdleType::NewlyIdle, fx);
            self.stats.newidle_pulls += moved as u64;
            if moved > 0 || !self.rq[cpu.idx()].queue.is_empty() {
                break;
            }
        }
    }
}
