//! `linux`: a model of today's Linux fair class (EEVDF, PELT, capacity-aware
//! placement and load balancing) with the RT class above it — the baseline
//! for predictions about a current host, where `fair` stays the 2005
//! asymmetry-unaware baseline of the capability and study reproductions.
//!
//! It follows `kernel/sched/fair.c`, `pelt.c`, `topology.c` and `sched.h` of
//! Linux 6.18 (the kernel of the validation machine), function by function,
//! at the granularity of a scheduler decision. Pure and deterministic: time
//! comes in through the hooks, effects go out as reschedule requests.
//!
//! **EEVDF** (`pick_eevdf`, `place_entity`, `update_entity_lag`,
//! `update_deadline`, `avg_vruntime`, `vruntime_eligible`). Each task has a
//! vruntime advancing by `Δ·1024/weight` while it runs, a virtual deadline
//! `vruntime + base_slice·1024/weight`, and a lag. The queue's zero point is
//! the load-weighted mean vruntime `V` of the queued tasks and the running
//! one; a task is eligible when `Σ wᵢ(vᵢ − v) ≥ 0` (`v ≤ V`, exact integer
//! form). A CPU runs the eligible task with the earliest deadline. When the
//! running task's vruntime passes its deadline the deadline moves one slice
//! on and, if others wait, the CPU reschedules — at the next tick, as
//! without HRTICK (`update_curr` from `sched_tick`). A blocking task keeps
//! its lag `V − v`, clamped to `max(2·slice, tick)·1024/w`; it comes back
//! (`place_entity`, PLACE_LAG) at `V − lag·(W + w)/W` with `W` the queue's
//! load, with deadline `v + vslice` (half a slice on its first wake-up,
//! PLACE_DEADLINE_INITIAL). A wake-up preempts when the woken task is what
//! `pick_eevdf` would choose now (`check_preempt_wakeup_fair`); with
//! RUN_TO_PARITY the running task is protected until it reaches its
//! deadline (`protect_slice`). `base_slice` is `sysctl_sched_base_slice`,
//! 0.75 ms × (1 + log₂ min(CPUs, 8)) (`get_update_sysctl_factor`, LOG
//! scaling). Weights: domain weight 256 (the scenario default) = nice-0 load
//! 1024. Not modelled: DELAY_DEQUEUE (a blocked task with negative lag
//! leaves at once), PREEMPT_SHORT (all tasks have the base slice).
//!
//! **PELT** ([`pelt`]): per task a running signal (`util_avg`) scaled by the
//! CPU's original capacity and a runnable signal (`runnable_avg`; load =
//! weight × runnable / 1024); per CPU an RT signal (`avg_rt`). A CPU's cfs
//! load, utilisation and runnable are the sums over tasks attached to it
//! (blocked ones too, decaying: the kernel's blocked load). UTIL_EST: at
//! dequeue the task's estimate follows its `util_avg` up at once and down by
//! a ¼ EWMA (`util_est_update`); `task_util_est = max(util_avg, estimate)`.
//!
//! **Capacity** (`arch_scale_cpu_capacity`, `scale_rt_capacity`,
//! `update_cpu_capacity`): original capacity = 1024 × speed / fastest speed
//! when the host declares capacities (`capacity = "speed"`, the default),
//! else 1024 everywhere (`"equal"`: a host whose CPUs differ in speed but
//! which does not tell the kernel). `capacity_of(cpu)` = (original − RT
//! util) × (original − IRQ util) / original, at least 1, where RT util is the
//! CPU's RT PELT signal and IRQ util the mean fraction of the CPU's noise ×
//! 1024 (noise stands for interrupt time). Computed when read (the kernel
//! refreshes it at load balance; the RT signal it reads is updated every
//! tick here, as `task_tick_rt` does). `check_cpu_capacity`: capacity_of ×
//! imbalance_pct < original × 100, i.e. below 100/117 of the original.
//! `fits_capacity(u, c)`: u × 1280 < c × 1024. SD_ASYM_CPUCAPACITY is set
//! on a domain whose CPUs' original capacities differ.
//!
//! **Wake-up placement** (`select_task_rq_fair` without wake_affine: the
//! model does not know the waker). Symmetric capacity: `select_idle_sibling`
//! — the previous CPU if idle, else the first idle allowed CPU of its LLC
//! (memory domain) scanning from the previous one, else the previous CPU.
//! Asymmetric: the previous CPU if idle and the task fits it, else
//! `select_idle_capacity` — over all CPUs from the previous one, the first
//! idle CPU the task fits, else the idle CPU of highest capacity_of, else the
//! previous CPU. A first wake-up (fork) goes to the idlest CPU
//! (`sched_balance_find_dst_cpu`): the first idle allowed CPU, else the one
//! with the fewest fair tasks, then the least load. "Idle" = no fair task
//! running or queued and no RT task running (`available_idle_cpu`).
//!
//! **Load balancing** ([`balance`]): scheduling domains from the topology —
//! MC over each memory domain (LLC, groups of one CPU) and PKG over the
//! machine (groups = memory domains) — each with `imbalance_pct` 117,
//! `cache_nice_tries` 1, `balance_interval` = its CPU count in ms
//! (doubling on failure up to twice that, back on success), × `busy_factor`
//! 16 on a busy CPU, at least one tick. Periodic balance at the tick
//! (`sched_balance_domains`), newidle balance when a CPU runs out of fair
//! work (`sched_balance_newidle`, gated by the root domain's overloaded
//! flag, not by avg_idle), and nohz idle balance: a busy CPU's tick kicks
//! the idle CPUs when it has ≥ 2 tasks, a misfit task, a fair task on
//! reduced capacity, or a busy LLC sibling (`nohz_balancer_kick`). Each
//! balance follows `sched_balance_rq`: group statistics and classification
//! (has_spare < fully_busy < misfit_task < overloaded, `group_classify`;
//! `group_is_overloaded` and `group_has_capacity` count the tasks of every
//! class, `sum_nr_running`, so a fair task waiting behind an RT task makes a
//! one-CPU group overloaded when its capacity is short),
//! busiest group (`update_sd_pick_busiest`), imbalance and migration type
//! load / util / task / misfit (`calculate_imbalance`; spreading by count
//! is `sibling_imbalance`, half the difference of `sum_nr_running`, and 0 in
//! a busy CPU's periodic balance), busiest queue
//! (`sched_balance_find_src_rq`), detaching waiting tasks that may move
//! (`can_migrate_task`: affinity, not running, not cache-hot unless
//! balancing failed more than cache_nice_tries times), and, when nothing
//! could move, active balance of the running task (`need_active_balance`:
//! the source has one fair task on reduced capacity and the destination
//! has more than imbalance_pct more capacity; a misfit task; or repeated
//! failure to spread tasks). A lone running fair task (exactly one,
//! `h_nr_running == 1`) with reduced capacity under it counts as a misfit
//! for an idle balancer (`sched_reduced_capacity`).
//! Active balance is the stopper (`active_load_balance_cpu_stop`): the
//! source CPU reschedules and hands its least recently run movable task to
//! the destination. Not modelled: SMT, asym packing, NUMA levels, pinned
//! group (`group_imbalanced`), energy-aware placement (no energy model).
//!
//! **RT class**: the machine's RT loads ([`ampsched_model::RtLoad`], e.g. the
//! SCHED_FIFO duty-cycle hog) run above the fair class on their CPU: at a
//! window's start the fair task there is preempted (stays queued, can be
//! pulled), during the window the CPU runs no fair task (the simulator sees
//! it idle), at its end the CPU reschedules (and balances newidle if it has
//! no fair work). Their running time is the CPU's RT PELT signal, i.e. RT
//! pressure in capacity_of. Windows are followed by the `account` hook,
//! whose period is the gcd of the tick and every RT spin, period and phase;
//! the ticks of every busy CPU (fair or RT) are run from it.

pub mod balance;
pub mod domains;
pub mod pelt;
#[cfg(test)]
mod tests;

use crate::dispatcher::{Dispatcher, Effects, Pick, SysView};
use crate::params::{Kind, ParamDoc, ParamReader, PolicyError};
use ampsched_model::spec::Params;
use ampsched_model::{CpuId, CpuSet, DomainId, Nanos, RtLoad, TaskId, Topology};
pub use domains::capacity_greater;
use domains::Level;
use pelt::{Pelt, SCALE};

/// Nice-0 load weight (`NICE_0_LOAD` after `scale_load_down`).
pub const NICE_0_LOAD: u64 = 1024;
/// Domain weight that maps to nice 0 (the scenario default, Xen's 256).
pub const DOMAIN_WEIGHT_NICE_0: u64 = 256;
/// Unscaled `sysctl_sched_base_slice`, 0.75 ms.
pub const BASE_SLICE_UNSCALED: Nanos = Nanos::from_us(750);
/// Tick: HZ = 250 (Debian's configuration).
pub const DEFAULT_TICK: Nanos = Nanos::from_ms(4);
/// `sysctl_sched_migration_cost`: a task that ran this recently is cache-hot.
pub const DEFAULT_MIGRATION_COST: Nanos = Nanos::from_us(500);

/// Tunables of the linux dispatcher.
#[derive(Clone, Debug)]
pub struct LinuxParams {
    /// `sysctl_sched_base_slice` after scaling by CPU count.
    pub base_slice: Nanos,
    /// Scheduler tick period (1/HZ).
    pub tick: Nanos,
    /// RUN_TO_PARITY: a running task is not preempted by a wake-up before its deadline.
    pub run_to_parity: bool,
    /// `sd->imbalance_pct`.
    pub imbalance_pct: u64,
    /// `sysctl_sched_migration_cost`.
    pub migration_cost: Nanos,
    /// `sd->busy_factor`.
    pub busy_factor: u64,
    /// Original capacities follow CPU speeds (declared capacities), else all 1024.
    pub capacity_from_speed: bool,
}

/// `base_slice_ms` (`sysctl_sched_base_slice`). Declared unscaled; when not
/// given it is scaled by 1 + log2 min(CPUs, 8), as the kernel does at boot.
pub const BASE_SLICE: ParamDoc = ParamDoc {
    name: "base_slice_ms",
    kind: Kind::Ms { default: BASE_SLICE_UNSCALED, min: 0.05, max: 1000.0 },
    unit: "ms",
    doc: "EEVDF base slice (sysctl_sched_base_slice); default scaled by 1 + log2 min(CPUs, 8)",
};
/// `tick_ms` (1/HZ).
pub const TICK: ParamDoc = ParamDoc {
    name: "tick_ms",
    kind: Kind::Ms { default: DEFAULT_TICK, min: 0.1, max: 100.0 },
    unit: "ms",
    doc: "scheduler tick (1/HZ)",
};
/// `run_to_parity` (the RUN_TO_PARITY feature).
pub const RUN_TO_PARITY: ParamDoc = ParamDoc {
    name: "run_to_parity",
    kind: Kind::Bool { default: true },
    unit: "",
    doc: "a running task keeps the CPU against wake-ups until its deadline",
};
/// `imbalance_pct` (`sd->imbalance_pct` of the MC/PKG domains).
pub const IMBALANCE_PCT: ParamDoc = ParamDoc {
    name: "imbalance_pct",
    kind: Kind::Int { default: 117, min: 101, max: 1000 },
    unit: "%",
    doc: "load-balance threshold of every domain",
};
/// `migration_cost_ms` (`sysctl_sched_migration_cost`).
pub const MIGRATION_COST: ParamDoc = ParamDoc {
    name: "migration_cost_ms",
    kind: Kind::Ms { default: DEFAULT_MIGRATION_COST, min: 0.0, max: 1000.0 },
    unit: "ms",
    doc: "a task that ran this recently is cache-hot",
};
/// `busy_factor` (`sd->busy_factor`).
pub const BUSY_FACTOR: ParamDoc = ParamDoc {
    name: "busy_factor",
    kind: Kind::Int { default: 16, min: 1, max: 1000 },
    unit: "",
    doc: "balance interval multiplier on a busy CPU",
};
/// `capacity`: where original capacities come from.
pub const CAPACITY: ParamDoc = ParamDoc {
    name: "capacity",
    kind: Kind::Choice { default: "speed", allowed: &["speed", "equal"] },
    unit: "",
    doc: "original capacities: `speed` (declared, 1024 × speed / fastest) or `equal` (all 1024)",
};

/// The tunables of `linux` (shown by `ampsched policies`).
pub const LINUX_PARAMS: &[ParamDoc] =
    &[BASE_SLICE, TICK, RUN_TO_PARITY, IMBALANCE_PCT, MIGRATION_COST, BUSY_FACTOR, CAPACITY];

impl LinuxParams {
    /// Defaults for a machine of `ncpus` CPUs.
    pub fn defaults(ncpus: usize) -> LinuxParams {
        let factor = 1 + (ncpus.clamp(1, 8) as u64).ilog2() as u64;
        LinuxParams {
            base_slice: Nanos(BASE_SLICE_UNSCALED.0 * factor),
            tick: DEFAULT_TICK,
            run_to_parity: RUN_TO_PARITY.default_bool(),
            imbalance_pct: IMBALANCE_PCT.default_int(),
            migration_cost: DEFAULT_MIGRATION_COST,
            busy_factor: BUSY_FACTOR.default_int(),
            capacity_from_speed: CAPACITY.default_choice() == "speed",
        }
    }

    /// Read from scenario parameters.
    pub fn from_params(policy: &str, params: &Params, topo: &Topology) -> Result<LinuxParams, PolicyError> {
        let d = LinuxParams::defaults(topo.ncpus());
        let r = ParamReader::new(policy, params, LINUX_PARAMS)?;
        Ok(LinuxParams {
            base_slice: if r.is_set(&BASE_SLICE) { r.duration(&BASE_SLICE)? } else { d.base_slice },
            tick: r.duration(&TICK)?,
            run_to_parity: r.bool(&RUN_TO_PARITY)?,
            imbalance_pct: r.int(&IMBALANCE_PCT)?,
            migration_cost: r.duration(&MIGRATION_COST)?,
            busy_factor: r.int(&BUSY_FACTOR)?,
            capacity_from_speed: r.choice(&CAPACITY)? == "speed",
        })
    }
}

/// Per-task state (`struct sched_entity` and its `sched_avg`).
#[derive(Clone, Debug)]
pub struct Ent {
    /// Load weight.
    pub weight: u64,
    /// Virtual runtime.
    pub vruntime: i64,
    /// Virtual deadline.
    pub deadline: i64,
    /// Lag saved at dequeue (`se->vlag`).
    pub vlag: i64,
    /// RUN_TO_PARITY protection: protected while vruntime < vprot.
    pub vprot: i64,
    /// CPU it is queued on, runs on, or last ran on.
    pub cpu: CpuId,
    /// Waiting in its CPU's queue (not running).
    pub on_rq: bool,
    /// Runnable (queued or running).
    pub runnable: bool,
    /// Has been placed once (fork placement done).
    pub started: bool,
    exec_start: Nanos,
    /// When it last stopped running (cache-hot test, detach order).
    pub last_ran: Nanos,
    /// Running signal (`util_avg`).
    pub util: Pelt,
    /// Runnable signal (`runnable_avg`).
    pub runnable_avg: Pelt,
    /// UTIL_EST estimate.
    pub util_est: u64,
}

/// Per-CPU state (`struct rq` and its `cfs_rq`).
#[derive(Clone, Debug, Default)]
pub struct Rq {
    /// Waiting fair tasks.
    pub queue: Vec<TaskId>,
    /// The fair task it runs.
    pub curr: Option<TaskId>,
    /// Zero point of vruntime when the queue is empty (last `V`).
    pub vbase: i64,
    /// RT PELT signal (`avg_rt`).
    pub rt_util: Pelt,
    /// `rq->misfit_task_load`.
    pub misfit_load: u64,
    /// Pending active balance: the CPU the stopper pushes to.
    pub push_to: Option<CpuId>,
    /// Per domain level: last balance time.
    pub last_balance: Vec<Nanos>,
    /// Per domain level: current balance interval, ms.
    pub balance_interval: Vec<u64>,
    /// Per domain level: `sd->nr_balance_failed`.
    pub nr_balance_failed: Vec<u32>,
}

/// Counters reported in results.
#[derive(Clone, Debug, Default)]
pub struct LinuxStats {
    /// Tasks moved by periodic and nohz idle balance.
    pub pulls: u64,
    /// Tasks moved by newidle balance.
    pub newidle_pulls: u64,
    /// Running tasks moved by active balance.
    pub active_balances: u64,
    /// Nohz idle balances kicked.
    pub nohz_kicks: u64,
    /// Wake-ups that preempted the running task.
    pub wake_preempts: u64,
    /// Fair tasks preempted by an RT window.
    pub rt_preempts: u64,
    /// Tasks moved because their affinity excluded their CPU.
    pub affinity_moves: u64,
}

/// The linux dispatcher's state.
pub struct Linux {
    /// Tunables.
    pub p: LinuxParams,
    /// Per task.
    pub se: Vec<Ent>,
    /// Per CPU.
    pub rq: Vec<Rq>,
    /// Original capacity per CPU (`arch_scale_cpu_capacity`).
    pub cap_orig: Vec<u64>,
    /// IRQ utilisation per CPU (noise fraction × 1024).
    pub irq_util: Vec<u64>,
    /// The RT load of each CPU, if any.
    pub rt: Vec<Option<RtLoad>>,
    /// Scheduling domain levels, lowest first.
    pub levels: Vec<Level>,
    /// Root domain overloaded flag (`rd->overloaded`).
    pub overloaded: bool,
    /// Earliest time of the next nohz idle balance.
    pub nohz_next: Nanos,
    /// Counters.
    pub stats: LinuxStats,
    account: Nanos,
    last_account: Nanos,
    llc: Vec<CpuSet>,
    max_cap: u64,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn weight_of(domain_weight: u32) -> u64 {
    (domain_weight.max(1) as u64 * NICE_0_LOAD / DOMAIN_WEIGHT_NICE_0).max(1)
}

/// `fits_capacity`: `util` leaves 20 % headroom on capacity `cap`.
pub fn fits_capacity(util: u64, cap: u64) -> bool {
    util * 1280 < cap * 1024
}

impl Linux {
    /// A linux dispatcher for `topo` (its RT loads included).
    pub fn new(p: LinuxParams, topo: &Topology) -> Linux {
        let n = topo.ncpus();
        let max_speed = topo.cpus.iter().map(|c| c.speed).fold(0.0, f64::max);
        let cap_orig: Vec<u64> = topo
            .cpus
            .iter()
            .map(|c| {
                if p.capacity_from_speed && max_speed > 0.0 {
                    ((SCALE as f64 * c.speed / max_speed).round() as u64).clamp(1, SCALE)
                } else {
                    SCALE
                }
            })
            .collect();
        let irq_util =
            topo.cpus.iter().map(|c| ((c.noise.mean_fraction() * SCALE as f64).round() as u64).min(SCALE)).collect();
        let mut rt = vec![None; n];
        let mut acct = p.tick.0.max(1);
        for l in &topo.rt_loads {
            if l.cpu.idx() < n && rt[l.cpu.idx()].is_none() {
                rt[l.cpu.idx()] = Some(l.clone());
                for x in [l.spin.0, l.period.0, l.phase.0] {
                    acct = gcd(acct, x);
                }
            }
        }
        let llc: Vec<CpuSet> = (0..n).map(|c| topo.mem_domains[topo.cpus[c].mem_domain as usize]).collect();
        let levels = domains::build_levels(topo, &cap_orig);
        let nl = levels.len();
        let rq = (0..n)
            .map(|c| Rq {
                last_balance: vec![Nanos::ZERO; nl],
                balance_interval: levels.iter().map(|l| l.weight[c] as u64).collect(),
                nr_balance_failed: vec![0; nl],
                ..Rq::default()
            })
            .collect();
        let max_cap = cap_orig.iter().copied().max().unwrap_or(SCALE);
        Linux {
            p,
            se: Vec::new(),
            rq,
            cap_orig,
            irq_util,
            rt,
            levels,
            overloaded: false,
            nohz_next: Nanos::ZERO,
            stats: LinuxStats::default(),
            account: Nanos(acct),
            last_account: Nanos::ZERO,
            llc,
            max_cap,
        }
    }

    fn ncpus(&self) -> usize {
        self.rq.len()
    }

    /// True when an RT window runs on `cpu` at `now`.
    pub fn rt_active(&self, cpu: CpuId, now: Nanos) -> bool {
        self.rt[cpu.idx()].as_ref().is_some_and(|r| r.active_at(now))
    }

    /// Fair tasks on `cpu`, running + waiting (`cfs.h_nr_running`).
    pub fn cfs_nr(&self, cpu: CpuId) -> u32 {
        self.rq[cpu.idx()].queue.len() as u32 + self.rq[cpu.idx()].curr.is_some() as u32
    }

    /// All tasks on `cpu` at `now`, RT included (`rq->nr_running`).
    pub fn nr_running(&self, cpu: CpuId, now: Nanos) -> u32 {
        self.cfs_nr(cpu) + self.rt_active(cpu, now) as u32
    }

    /// `available_idle_cpu`: nothing fair and no RT window.
    pub fn idle_cpu(&self, cpu: CpuId, now: Nanos) -> bool {
        self.cfs_nr(cpu) == 0 && !self.rt_active(cpu, now)
    }

    /// `capacity_of` (see the module docs).
    pub fn capacity_of(&self, cpu: CpuId) -> u64 {
        let c = cpu.idx();
        let max = self.cap_orig[c];
        let irq = self.irq_util[c];
        if irq >= max {
            return 1;
        }
        let used = self.rq[c].rt_util.avg;
        if used >= max {
            return 1;
        }
        ((max - used) * (max - irq) / max).max(1)
    }

    /// `check_cpu_capacity`: capacity_of below 100/imbalance_pct of the original.
    pub fn reduced_capacity(&self, cpu: CpuId) -> bool {
        self.capacity_of(cpu) * self.p.imbalance_pct < self.cap_orig[cpu.idx()] * 100
    }

    /// `task_util_est`.
    pub fn task_util(&self, t: TaskId) -> u64 {
        let e = &self.se[t.idx()];
        e.util.avg.max(e.util_est)
    }

    /// `task_fits_cpu`.
    pub fn task_fits(&self, t: TaskId, cpu: CpuId) -> bool {
        fits_capacity(self.task_util(t), self.capacity_of(cpu))
    }

    /// `task_h_load` for a flat hierarchy: weight × runnable / 1024.
    pub fn task_load(&self, t: TaskId) -> u64 {
        let e = &self.se[t.idx()];
        e.weight * e.runnable_avg.avg / SCALE
    }

    fn asym(&self) -> bool {
        self.levels.iter().any(|l| l.asym)
    }

    /// Bring `t`'s PELT signals to `now`.
    fn sync(&mut self, t: TaskId, now: Nanos) {
        let e = &self.se[t.idx()];
        let running = self.rq[e.cpu.idx()].curr == Some(t);
        let scale = self.cap_orig[e.cpu.idx()];
        let runnable = e.runnable;
        let e = &mut self.se[t.idx()];
        e.util.update(now.0, running, scale);
        e.runnable_avg.update(now.0, runnable, SCALE);
    }

    /// Bring every task attached to a CPU of `set` to `now`.
    fn sync_cpus(&mut self, set: CpuSet, now: Nanos) {
        for i in 0..self.se.len() {
            if set.contains(self.se[i].cpu) {
                self.sync(TaskId(i as u32), now);
            }
        }
    }

    /// Sum of a per-task quantity over tasks attached to `cpu`.
    fn attached_sum(&self, cpu: CpuId, f: impl Fn(&Linux, TaskId) -> u64) -> u64 {
        (0..self.se.len()).filter(|&i| self.se[i].cpu == cpu).map(|i| f(self, TaskId(i as u32))).sum()
    }

    /// `cpu_load`: the CPU's cfs load (blocked load included).
    pub fn cpu_load(&self, cpu: CpuId) -> u64 {
        self.attached_sum(cpu, |s, t| s.task_load(t))
    }

    /// `cpu_util_cfs`: utilisation, UTIL_EST of runnable tasks included, at most the original capacity.
    pub fn cpu_util(&self, cpu: CpuId) -> u64 {
        let avg = self.attached_sum(cpu, |s, t| s.se[t.idx()].util.avg);
        let est = self.attached_sum(cpu, |s, t| if s.se[t.idx()].runnable { s.se[t.idx()].util_est } else { 0 });
        avg.max(est).min(self.cap_orig[cpu.idx()])
    }

    /// `cpu_runnable`.
    pub fn cpu_runnable(&self, cpu: CpuId) -> u64 {
        self.attached_sum(cpu, |s, t| s.se[t.idx()].runnable_avg.avg)
    }

    // ---- EEVDF ------------------------------------------------------------

    fn vslice(&self, t: TaskId) -> i64 {
        (self.p.base_slice.0 as u128 * NICE_0_LOAD as u128 / self.se[t.idx()].weight as u128) as i64
    }

    /// Tasks competing on `cpu`: the waiting ones and the running one.
    fn members(&self, cpu: CpuId) -> impl Iterator<Item = TaskId> + '_ {
        let r = &self.rq[cpu.idx()];
        r.queue.iter().copied().chain(r.curr)
    }

    /// Total weight competing on `cpu`.
    pub fn load(&self, cpu: CpuId) -> u64 {
        self.members(cpu).map(|t| self.se[t.idx()].weight).sum()
    }

    /// `avg_vruntime`: load-weighted mean vruntime (floor), or the zero point of an empty queue.
    pub fn avg_vruntime(&self, cpu: CpuId) -> i64 {
        let load = self.load(cpu) as i128;
        if load == 0 {
            return self.rq[cpu.idx()].vbase;
        }
        let v0 = self.rq[cpu.idx()].vbase as i128;
        let s: i128 =
            self.members(cpu).map(|t| self.se[t.idx()].weight as i128 * (self.se[t.idx()].vruntime as i128 - v0)).sum();
        (v0 + s.div_euclid(load)) as i64
    }

    /// `vruntime_eligible`: Σ wᵢ(vᵢ − v) ≥ 0 over the CPU's competitors.
    pub fn eligible(&self, cpu: CpuId, t: TaskId) -> bool {
        let v = self.se[t.idx()].vruntime as i128;
        let s: i128 =
            self.members(cpu).map(|u| self.se[u.idx()].weight as i128 * (self.se[u.idx()].vruntime as i128 - v)).sum();
        s >= 0
    }

    /// `pick_eevdf`: the eligible competitor with the earliest deadline (ties
    /// by id); the running task while it is protected (RUN_TO_PARITY) when
    /// `protect`.
    pub fn pick_eevdf(&self, cpu: CpuId, protect: bool) -> Option<TaskId> {
        if let Some(c) = self.rq[cpu.idx()].curr {
            let e = &self.se[c.idx()];
            if protect && self.p.run_to_parity && e.vruntime < e.vprot {
                return Some(c);
            }
        }
        let best = self.members(cpu).filter(|t| self.eligible(cpu, *t)).min_by_key(|t| (self.se[t.idx()].deadline, *t));
        best.or_else(|| self.members(cpu).min_by_key(|t| (self.se[t.idx()].vruntime, *t)))
    }

    /// `update_curr`: charge the running task of `cpu` up to `now`; when its
    /// vruntime passes its deadline, move the deadline on and (others
    /// waiting) ask for a reschedule (`update_deadline`).
    fn update_curr(&mut self, cpu: CpuId, now: Nanos, fx: &mut Effects) {
        let Some(t) = self.rq[cpu.idx()].curr else { return };
        self.sync(t, now);
        let vs = self.vslice(t);
        let e = &mut self.se[t.idx()];
        let delta = now.saturating_sub(e.exec_start).0;
        e.exec_start = now;
        e.vruntime += (delta as u128 * NICE_0_LOAD as u128 / e.weight as u128) as i64;
        if e.vruntime >= e.deadline {
            e.deadline = e.vruntime + vs;
            if !self.rq[cpu.idx()].queue.is_empty() {
                fx.resched(cpu);
            }
        }
        self.rq[cpu.idx()].vbase = self.avg_vruntime(cpu);
    }

    /// `place_entity`: vruntime from the saved lag, deadline one vslice on.
    fn place(&mut self, cpu: CpuId, t: TaskId) {
        let v = self.avg_vruntime(cpu);
        let load = self.load(cpu) as i128;
        let w = self.se[t.idx()].weight as i128;
        let mut lag = self.se[t.idx()].vlag as i128;
        if load > 0 {
            lag = lag * (load + w) / load;
        }
        let mut vs = self.vslice(t);
        if !self.se[t.idx()].started {
            vs /= 2;
        }
        let e = &mut self.se[t.idx()];
        e.vruntime = v - lag as i64;
        e.deadline = e.vruntime + vs;
    }

    /// `update_entity_lag`: save `V − v`, clamped to ±max(2·slice, tick) in virtual time.
    fn save_lag(&mut self, cpu: CpuId, t: TaskId) {
        let v = self.avg_vruntime(cpu);
        let w = self.se[t.idx()].weight as u128;
        let limit = (self.p.base_slice.0.saturating_mul(2).max(self.p.tick.0) as u128 * NICE_0_LOAD as u128 / w) as i64;
        let e = &mut self.se[t.idx()];
        e.vlag = (v - e.vruntime).clamp(-limit, limit);
    }

    fn enqueue(&mut self, cpu: CpuId, t: TaskId, now: Nanos) {
        debug_assert!(!self.se[t.idx()].on_rq, "{t} queued twice");
        self.sync(t, now);
        self.place(cpu, t);
        let e = &mut self.se[t.idx()];
        e.on_rq = true;
        e.cpu = cpu;
        e.started = true;
        self.rq[cpu.idx()].queue.push(t);
        if self.nr_running(cpu, now) >= 2 {
            self.overloaded = true;
        }
    }

    /// Take a waiting task off its queue, saving its lag.
    fn dequeue(&mut self, t: TaskId, now: Nanos) {
        let cpu = self.se[t.idx()].cpu;
        debug_assert!(self.se[t.idx()].on_rq, "{t} not queued");
        self.sync(t, now);
        self.save_lag(cpu, t);
        self.se[t.idx()].on_rq = false;
        self.rq[cpu.idx()].queue.retain(|x| *x != t);
        if self.load(cpu) > 0 {
            self.rq[cpu.idx()].vbase = self.avg_vruntime(cpu);
        }
    }

    /// Move a waiting task to `dest`'s queue (detach + attach), keeping its lag.
    fn migrate(&mut self, t: TaskId, dest: CpuId, now: Nanos) {
        self.dequeue(t, now);
        self.se[t.idx()].cpu = dest;
        self.enqueue(dest, t, now);
    }

    /// `wakeup_preempt` after `t` was queued on `cpu`.
    fn check_preempt(&mut self, cpu: CpuId, t: TaskId, now: Nanos, fx: &mut Effects) {
        if self.rt_active(cpu, now) {
            return;
        }
        match self.rq[cpu.idx()].curr {
            None => fx.resched(cpu),
            Some(_) => {
                self.update_curr(cpu, now, fx);
                if self.pick_eevdf(cpu, true) == Some(t) {
                    self.stats.wake_preempts += 1;
                    fx.resched(cpu);
                }
            }
        }
    }

    /// `util_est_update` at dequeue of a sleeping task.
    fn util_est_update(&mut self, t: TaskId) {
        let e = &mut self.se[t.idx()];
        let u = e.util.avg;
        if u >= e.util_est {
            e.util_est = u;
        } else {
            e.util_est -= (e.util_est - u) / 4;
        }
    }

    /// `update_misfit_status` for the task running on `cpu`: misfit when it
    /// does not fit, may run elsewhere, and is not already on the biggest
    /// CPU it may use (`max_allowed_capacity`).
    fn update_misfit(&mut self, v: &SysView, cpu: CpuId) {
        let load = match self.rq[cpu.idx()].curr {
            Some(t) if self.asym() => {
                let aff = v.tasks[t.idx()].affinity;
                let max_allowed = aff.iter().map(|c| self.cap_orig[c.idx()]).max().unwrap_or(0);
                if aff.len() == 1 || self.cap_orig[cpu.idx()] == max_allowed || self.task_fits(t, cpu) {
                    0
                } else {
                    self.task_load(t).max(1)
                }
            }
            _ => 0,
        };
        self.rq[cpu.idx()].misfit_load = load;
    }

    // ---- placement ----------------------------------------------------------

    /// `select_task_rq_fair` for a wake-up (see the module docs).
    pub fn select_cpu(&self, v: &SysView, t: TaskId) -> CpuId {
        let aff = v.tasks[t.idx()].affinity;
        let now = v.now;
        let n = self.ncpus();
        let prev = self.se[t.idx()].cpu;
        let target = if aff.contains(prev) { prev } else { aff.cycle(prev).unwrap_or(prev) };
        let from = |start: CpuId| (0..n).map(move |k| CpuId(((start.idx() + k) % n) as u32));
        if !self.se[t.idx()].started {
            // sched_balance_find_dst_cpu: first idle, else fewest fair tasks, then least load.
            if let Some(c) = from(CpuId(0)).find(|c| aff.contains(*c) && self.idle_cpu(*c, now)) {
                return c;
            }
            return from(CpuId(0))
                .filter(|c| aff.contains(*c))
                .min_by_key(|c| (self.nr_running(*c, now), self.cpu_load(*c), *c))
                .unwrap_or(target);
        }
        if self.asym() {
            let util = self.task_util(t);
            if self.idle_cpu(target, now) && fits_capacity(util, self.capacity_of(target)) {
                return target;
            }
            // select_idle_capacity
            let mut best: Option<(u64, CpuId)> = None;
            for c in from(target).filter(|c| aff.contains(*c) && self.idle_cpu(*c, now)) {
                let cap = self.capacity_of(c);
                if fits_capacity(util, cap) {
                    return c;
                }
                if best.is_none_or(|(b, _)| cap > b) {
                    best = Some((cap, c));
                }
            }
            return best.map(|b| b.1).unwrap_or(target);
        }
        // select_idle_sibling: the target if idle, else the first idle CPU of its LLC.
        if self.idle_cpu(target, now) {
            return target;
        }
        let llc = self.llc[target.idx()];
        from(target).find(|c| llc.contains(*c) && aff.contains(*c) && self.idle_cpu(*c, now)).unwrap_or(target)
    }

    // ---- ticks and RT windows -------------------------------------------

    /// `sched_tick` on a busy CPU: charge, deadline, misfit, balance.
    fn tick_cpu(&mut self, v: &SysView, cpu: CpuId, fx: &mut Effects) {
        let now = v.now;
        if self.rq[cpu.idx()].curr.is_some() {
            self.update_curr(cpu, now, fx);
            self.update_misfit(v, cpu);
        }
        self.rebalance_domains(v, cpu, fx);
        self.nohz_balancer_kick(v, cpu, fx);
    }

    /// The RT task of `cpu` starts (preempts the fair task) or stops (the CPU reschedules).
    fn rt_edge(&mut self, cpu: CpuId, now: Nanos, fx: &mut Effects) {
        if self.rt_active(cpu, now) {
            if self.rq[cpu.idx()].curr.is_some() {
                self.overloaded = true;
                fx.resched(cpu);
            }
        } else {
            fx.resched(cpu);
        }
    }

    fn check_invariants(&self, v: &SysView) {
        if !cfg!(debug_assertions) {
            return;
        }
        let mut seen = vec![false; self.se.len()];
        for (c, r) in self.rq.iter().enumerate() {
            for t in r.queue.iter().chain(r.curr.iter()) {
                debug_assert!(!seen[t.idx()], "{t} on two runqueues");
                seen[t.idx()] = true;
                let e = &self.se[t.idx()];
                debug_assert!(e.runnable && e.cpu.idx() == c, "{t} queue state");
                debug_assert_eq!(e.on_rq, r.curr != Some(*t), "{t} on_rq flag");
            }
            for t in &r.queue {
                debug_assert!(v.tasks[t.idx()].affinity.contains(CpuId(c as u32)), "{t} queued outside its affinity");
            }
        }
    }
}

impl Dispatcher for Linux {
    fn name(&self) -> &'static str {
        "linux"
    }

    fn tick_period(&self) -> Nanos {
        Nanos::ZERO
    }

    fn models_rt_load(&self) -> bool {
        true
    }

    fn account_period(&self) -> Nanos {
        self.account
    }

    fn init(&mut self, v: &SysView) {
        let n = self.ncpus();
        self.se = v
            .tasks
            .iter()
            .enumerate()
            .map(|(i, tv)| {
                let mut c = CpuId((i % n) as u32);
                if !tv.affinity.contains(c) {
                    c = tv.affinity.cycle(c).unwrap_or(CpuId(0));
                }
                Ent {
                    weight: weight_of(v.domains[tv.domain.idx()].weight),
                    vruntime: 0,
                    deadline: 0,
                    vlag: 0,
                    vprot: 0,
                    cpu: c,
                    on_rq: false,
                    runnable: false,
                    started: false,
                    exec_start: Nanos::ZERO,
                    last_ran: Nanos::ZERO,
                    util: Pelt::default(),
                    runnable_avg: Pelt::default(),
                    util_est: 0,
                }
            })
            .collect();
    }

    fn wake(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        let e = &self.se[t.idx()];
        if e.runnable || self.rq[e.cpu.idx()].curr == Some(t) {
            return;
        }
        let now = v.now;
        self.sync(t, now);
        let dest = self.select_cpu(v, t);
        self.update_curr(dest, now, fx);
        self.se[t.idx()].cpu = dest;
        self.sync(t, now);
        self.se[t.idx()].runnable = true;
        self.enqueue(dest, t, now);
        self.check_preempt(dest, t, now, fx);
        self.check_invariants(v);
    }

    fn block(&mut self, _v: &SysView, _t: TaskId, _cpu: CpuId, _fx: &mut Effects) {
        // The dequeue happens in pick_next(prev_runnable = false), which follows at once.
    }

    fn tick(&mut self, _v: &SysView, _cpu: CpuId, _fx: &mut Effects) {}

    fn account(&mut self, v: &SysView, fx: &mut Effects) {
        let now = v.now;
        let last = self.last_account;
        self.last_account = now;
        for c in 0..self.ncpus() {
            let cpu = CpuId(c as u32);
            let was = self.rt_active(cpu, last);
            let scale = self.cap_orig[c];
            self.rq[c].rt_util.update(now.0, was && now > last, scale);
            if was != self.rt_active(cpu, now) {
                self.rt_edge(cpu, now, fx);
            }
        }
        if now.0.is_multiple_of(self.p.tick.0.max(1)) {
            for c in 0..self.ncpus() {
                let cpu = CpuId(c as u32);
                if !self.idle_cpu(cpu, now) {
                    self.tick_cpu(v, cpu, fx);
                }
            }
        }
        self.check_invariants(v);
    }

    fn pick_next(
        &mut self,
        v: &SysView,
        cpu: CpuId,
        prev: Option<TaskId>,
        prev_runnable: bool,
        fx: &mut Effects,
    ) -> Pick {
        let now = v.now;
        let c = cpu.idx();
        if let Some(p) = prev {
            debug_assert_eq!(self.rq[c].curr, Some(p), "prev {p} was not running on {cpu}");
            self.update_curr(cpu, now, fx);
            self.sync(p, now);
            self.rq[c].curr = None;
            self.se[p.idx()].last_ran = now;
            self.se[p.idx()].on_rq = true;
            self.rq[c].queue.push(p);
            if prev_runnable && self.rt_active(cpu, now) {
                self.stats.rt_preempts += 1;
            }
            if !prev_runnable {
                // dequeue_entity of a sleeping task.
                self.dequeue(p, now);
                self.se[p.idx()].runnable = false;
                self.util_est_update(p);
            } else if !v.tasks[p.idx()].affinity.contains(cpu) {
                // Its affinity changed while it ran (migration stopper).
                let dest = self.select_cpu(v, p);
                self.migrate(p, dest, now);
                self.stats.affinity_moves += 1;
                self.check_preempt(dest, p, now, fx);
            }
        }
        if let Some(dst) = self.rq[c].push_to.take() {
            self.active_push(v, cpu, dst, fx);
        }
        if self.rt_active(cpu, now) {
            return Pick::IDLE;
        }
        if self.rq[c].queue.is_empty() {
            self.sched_balance_newidle(v, cpu, fx);
        }
        let pick = match self.pick_eevdf(cpu, false) {
            Some(t) => {
                self.sync(t, now);
                self.rq[c].queue.retain(|x| *x != t);
                self.rq[c].curr = Some(t);
                let vs = self.vslice(t);
                let e = &mut self.se[t.idx()];
                e.on_rq = false;
                e.exec_start = now;
                e.vprot = e.deadline.min(e.vruntime + vs);
                self.update_misfit(v, cpu);
                let slice = match &self.rt[c] {
                    Some(r) => r.next_start(now) - now,
                    None => Nanos::MAX,
                };
                Pick { task: Some(t), slice }
            }
            None => {
                self.rq[c].misfit_load = 0;
                Pick::IDLE
            }
        };
        self.check_invariants(v);
        pick
    }

    fn affinity_changed(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        let aff = v.tasks[t.idx()].affinity;
        let cpu = self.se[t.idx()].cpu;
        if aff.contains(cpu) {
            return;
        }
        if self.rq[cpu.idx()].curr == Some(t) {
            fx.resched(cpu);
        } else if self.se[t.idx()].on_rq {
            let dest = self.select_cpu(v, t);
            self.migrate(t, dest, v.now);
            self.stats.affinity_moves += 1;
            self.check_preempt(dest, t, v.now, fx);
        }
    }

    fn domain_changed(&mut self, v: &SysView, d: DomainId, _fx: &mut Effects) {
        let w = weight_of(v.domains[d.idx()].weight);
        for t in &v.domains[d.idx()].tasks {
            if let Some(e) = self.se.get_mut(t.idx()) {
                e.weight = w;
            }
        }
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let s = &self.stats;
        vec![
            ("pulls", s.pulls as f64),
            ("newidle_pulls", s.newidle_pulls as f64),
            ("active_balances", s.active_balances as f64),
            ("nohz_kicks", s.nohz_kicks as f64),
            ("wake_preempts", s.wake_preempts as f64),
            ("rt_preempts", s.rt_preempts as f64),
            ("affinity_moves", s.affinity_moves as f64),
        ]
    }

    fn runq_len(&self, cpu: CpuId) -> Option<u32> {
        self.rq.get(cpu.idx()).map(|r| r.queue.len() as u32)
    }
}
