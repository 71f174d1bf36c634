//! Shared co-scheduling machinery: the layer that turns a credit-based
//! dispatcher into `cs`, `cds`, `pcs`, `bcs`, `aash+pcs` or `aash+bcs`.
//!
//! Design (docs/design/cosched.md; Weng et al., VEE 2009 for CS, co-descheduling as in
//! VMware's strict co-scheduling for CDS, Yu et al., IJPEDS 2013 for PCS and
//! BCS, all patches of Xen 4.0's credit scheduler). Credit decides *how
//! much* every vCPU runs (credits, weights, BOOST/UNDER/OVER, ratelimit),
//! the co-scheduler decides *when* the vCPUs of a `CON` domain run: at the
//! same time. So a scheme never copies credit: [`CoSched`] wraps a base
//! dispatcher that exposes its credit state ([`CoBase`]: `credit` itself, or
//! AASH, which is credit plus placement) and a [`Scheme`] (one per file:
//! `cs.rs`, `cds.rs`, `pcs.rs`, `bcs.rs`) that acts around the base's picks:
//! - a **normal pick** is the base's own `pick_next`; the scheme looks at the
//!   result (a vCPU of a `CON` domain?) and raises signals or priorities;
//! - a **forced pick** answers a co-scheduling signal: run the first queued
//!   vCPU of the co-scheduled domain, else the first `HIT` vCPU, else idle
//!   ([`forced_pick`]). It is still made by the base: the chosen vCPU is
//!   lifted to the head of the runqueue with the `COS` priority for the
//!   duration of the base's pick, so credit's own put-back, burn, idlers and
//!   invariant checks stay in one place. Forcing idle takes the base's pick
//!   back off the CPU ([`unpick`]).
//!
//! Shared rules:
//! - **Scatter** (all schemes): when a domain becomes `CON` (at start or by a
//!   scenario event), each of its vCPUs in order goes to the runqueue of the
//!   pCPU (in its allowed set) holding the fewest vCPUs of this domain, ties
//!   to the fewest `CON` vCPUs overall, then the lowest id. Queued vCPUs move
//!   at once, running ones at their next deschedule, blocked ones wake there.
//! - **Held pCPUs.** A pCPU that answered domain D's signal without running
//!   one of D's vCPUs (it ran a `HIT` vCPU or idled while other vCPUs waited
//!   in its queue) is *held for D*. The hold ends when D has no running vCPU
//!   left, or one timeslice after it began (checked at every tick and
//!   accounting, so within 10 ms): a co-scheduled domain owns the pCPUs it
//!   displaced for one time slot, as in gang scheduling. Then held pCPUs
//!   that idle with a non-empty queue are asked to reschedule. Without this,
//!   a vCPU of another `CON` domain could wait in an idle pCPU's queue for
//!   as long as D keeps one vCPU running (idle peers are never stolen from).
//!   The paper does not say; this is the smallest rule that keeps the
//!   schemes live.
//! - **Ratelimit.** A signalled pCPU whose vCPU ran less than the ratelimit
//!   keeps it (credit's rule 7) and answers the signal at the end of the
//!   ratelimit slice; the request stays pending meanwhile.
//! - **Credit's rules underneath** (`rules`, [`credit_params`]). The
//!   schemes are patches of Xen 4.0.1's credit scheduler (Yu et al.,
//!   IJPEDS 2013, "implemented in the Credit Scheduler in Xen 4.0.1"), so
//!   `rules = "xen40"` runs them over credit's `xen40` profile (credit.rs:
//!   vCPU placement at creation by `default_vcpu0_location`, a wake-up that
//!   preempts its own pCPU when strictly higher and tickles every idler, no
//!   ratelimit), as the co-scheduling study's testbed ran; the default,
//!   `current`, is today's credit (the Xen lab's 4.17 port of the patches).
//! - **Measurements.** `cosched_ops` counts co-scheduling operations (CS/CDS
//!   signals, CDS co-deschedules, PCS operations, BCS raise steps),
//!   `cosched_signals` the pCPUs asked
//!   to reschedule by them; the sample stream `sibling_start_diff_ns` holds,
//!   for each sibling a co-scheduling request wanted to run, the time from
//!   the request (its sibling's start) to its own start.
//!
//! - **Signal cost** (`signal_us`, default 0: free). A co-scheduling
//!   signal is Xen's `cpumask_raise_softirq(mask, SCHEDULE_SOFTIRQ)`: an IPI
//!   to each target pCPU, which takes the interrupt, runs `schedule()` (here
//!   the forced pick) and switches context, whether or not the vCPU it
//!   runs changes. Every pCPU a CS or PCS signal or a CDS co-deschedule
//!   reaches is charged that time (`CoCore::signal` → `Effects::stall`; the
//!   engine has the vCPU that runs there next pay it, `engine/hv.rs`). BCS
//!   raises no signal (its siblings start at their pCPUs' own next
//!   decisions), so it pays nothing: the "cheaper than PCS" of the paper's
//!   BCS section. Magnitude: a vCPU context switch of Xen's era is 1.4-9
//!   µs (Whitaker et al., "Scale and performance in the Denali isolation
//!   kernel", OSDI 2002, §6), plus the interrupt and the scheduler pass.
//!
//! Invariants: every pick is made or confirmed by the base (credit's
//! runqueue invariants are checked after each pick in debug builds);
//! `running[d]` equals the number of CPUs running a vCPU of domain d (the
//! engine changes what runs only through `pick_next`); a vCPU holds `COS`
//! only inside one pick (forced picks: the vCPU lifted to the head) or, under
//! BCS, from the raise until its next pick. Units: ns; priorities as in
//! credit.rs.

use crate::credit::{
    Credit, CreditParams, Profile, MIGRATION_DELAY, PRI_COS, PRI_IDLE, RATELIMIT, TICK_MIGRATE, TSLICE,
};
use crate::dispatcher::{Dispatcher, Effects, Pick, SysView, TaskView};
use crate::params::{Kind, ParamDoc, ParamReader, PolicyError};
use ampsched_model::spec::{CoschedType, Params};
use ampsched_model::{CpuId, CpuSet, DomainId, Nanos, TaskId};

/// `rules`: which credit scheduler the scheme patches (module docs).
pub const RULES: ParamDoc = ParamDoc {
    name: "rules",
    kind: Kind::Choice { default: "current", allowed: &["current", "xen40"] },
    unit: "",
    doc: "credit underneath: current Xen, or Xen 4.0's rules (the papers' Xen 4.0.1)",
};

/// `signal_us`: the hypervisor time each pCPU a co-scheduling signal reaches
/// spends taking it (module docs, "Signal cost").
pub const SIGNAL_US: ParamDoc = ParamDoc {
    name: "signal_us",
    kind: Kind::Us { default: Nanos::ZERO, min: 0.0, max: 10_000.0 },
    unit: "µs",
    doc: "time a signalled pCPU spends in the hypervisor per signal (IPI, schedule(), switch); 0 = free",
};

/// The tunables of `cs`, `cds`, `pcs` and `bcs`: credit's, which credit, and what a signal costs.
pub const COSCHED_PARAMS: &[ParamDoc] = &[TSLICE, RATELIMIT, TICK_MIGRATE, MIGRATION_DELAY, RULES, SIGNAL_US];

/// The signal cost of co-scheduler `policy` (`signal_us`).
pub fn signal_cost(policy: &str, params: &Params) -> Result<Nanos, PolicyError> {
    ParamReader::new(policy, params, COSCHED_PARAMS)?.duration(&SIGNAL_US)
}

/// The credit parameters of co-scheduler `policy`: its `rules` choose the
/// profile, the rest are read as credit reads them.
pub fn credit_params(policy: &str, params: &Params) -> Result<CreditParams, PolicyError> {
    let profile = match ParamReader::new(policy, params, COSCHED_PARAMS)?.choice(&RULES)? {
        "xen40" => Profile::Xen40,
        _ => Profile::Current,
    };
    CreditParams::from_params(policy, profile, params, COSCHED_PARAMS)
}

/// A credit-based dispatcher the co-scheduling layer can drive.
pub trait CoBase: Dispatcher {
    /// The credit scheduler state underneath (runqueues, priorities).
    fn cr(&self) -> &Credit;
    /// Mutable credit state.
    fn cr_mut(&mut self) -> &mut Credit;
    /// CPUs where `t` may be placed when its domain is scattered (its hard
    /// affinity; AASH: its home class this period).
    fn home(&self, v: &SysView, t: TaskId) -> CpuSet {
        v.tasks[t.idx()].affinity
    }
}

impl CoBase for Credit {
    fn cr(&self) -> &Credit {
        self
    }
    fn cr_mut(&mut self) -> &mut Credit {
        self
    }
}

/// Counters of the co-scheduling layer.
#[derive(Clone, Debug, Default)]
pub struct CoStats {
    /// Co-scheduling operations (CS/CDS signals, CDS co-deschedules, PCS operations, BCS raise steps).
    pub ops: u64,
    /// pCPUs asked to reschedule by co-scheduling operations.
    pub signals: u64,
    /// Forced picks that idled a pCPU (nothing of the domain, no `HIT` vCPU).
    pub forced_idle: u64,
    /// Picks where the scheme could not do what it wanted (PCS partners busy,
    /// the base ran something else than the vCPU a forced pick lifted).
    pub fallbacks: u64,
    /// Domains scattered.
    pub scatters: u64,
    /// Requests whose sibling was never started (superseded by another domain).
    pub unmet: u64,
}

/// State every scheme shares: domain types, who runs, held pCPUs, samples.
pub struct CoCore {
    /// Per domain: `CON` as last seen (to detect HIT → CON).
    pub con: Vec<bool>,
    /// Per task: its domain.
    pub dom_of: Vec<DomainId>,
    /// Per domain: vCPUs running now.
    pub running: Vec<u32>,
    /// Per CPU: held for this domain's co-scheduling (see module docs).
    pub held: Vec<Option<DomainId>>,
    /// Per CPU: since when it is held.
    held_since: Vec<Nanos>,
    /// Per task: a co-scheduling request has wanted it to run since then.
    pub want: Vec<Option<Nanos>>,
    /// Sibling start-time differences, ns, in the order they happened
    /// (bounded: evenly thinned past `samples::MAX_SAMPLES`).
    pub skew: crate::samples::Samples,
    /// Where the last scatter put each vCPU of its domain.
    pub placed: Vec<(TaskId, CpuId)>,
    /// Counters.
    pub stats: CoStats,
    /// Hypervisor time charged to each pCPU a signal reaches (`signal_us`).
    pub signal_cost: Nanos,
}

impl CoCore {
    fn new() -> CoCore {
        CoCore {
            con: Vec::new(),
            dom_of: Vec::new(),
            running: Vec::new(),
            held: Vec::new(),
            held_since: Vec::new(),
            want: Vec::new(),
            skew: Default::default(),
            placed: Vec::new(),
            stats: CoStats::default(),
            signal_cost: Nanos::ZERO,
        }
    }

    /// Signal `cpu`: it reschedules now, and spends the signal cost in the
    /// hypervisor (`Effects::stall`) when there is one.
    pub fn signal(&self, cpu: CpuId, fx: &mut Effects) {
        fx.resched(cpu);
        if self.signal_cost.0 > 0 {
            fx.stall(cpu, self.signal_cost);
        }
    }

    /// Is `t` a vCPU of a `CON` domain (as the view says now)?
    pub fn is_con(&self, v: &SysView, t: TaskId) -> bool {
        v.domains[self.dom_of[t.idx()].idx()].cosched == CoschedType::Con
    }

    /// The domain of `t`.
    pub fn dom(&self, t: TaskId) -> DomainId {
        self.dom_of[t.idx()]
    }

    /// Note that a request wants `t` to run (keeps the earliest time).
    pub fn want(&mut self, t: TaskId, now: Nanos) {
        self.want[t.idx()].get_or_insert(now);
    }

    /// Drop the pending wants of domain `d`'s vCPUs (its request was superseded).
    pub fn drop_wants(&mut self, v: &SysView, d: DomainId) {
        for &t in &v.domains[d.idx()].tasks {
            if self.want[t.idx()].take().is_some() {
                self.stats.unmet += 1;
            }
        }
    }

    /// Count an operation that signalled `n` pCPUs.
    pub fn op(&mut self, n: usize) {
        self.stats.ops += 1;
        self.stats.signals += n as u64;
    }

    /// Hold `cpu` for domain `d` from now (None: release it).
    pub fn hold(&mut self, cpu: CpuId, d: Option<DomainId>, now: Nanos) {
        if d.is_some() && self.held[cpu.idx()] != d {
            self.held_since[cpu.idx()] = now;
        }
        self.held[cpu.idx()] = d;
    }

    /// End holds older than `slot`; held pCPUs idling with queued work reschedule.
    fn expire_holds<B: CoBase>(&mut self, b: &B, v: &SysView, slot: Nanos, fx: &mut Effects) {
        for p in 0..self.held.len() {
            if self.held[p].is_some() && v.now.saturating_sub(self.held_since[p]) >= slot {
                self.held[p] = None;
                if v.curr[p].is_none() && !b.cr().runq(CpuId(p as u32)).is_empty() {
                    fx.resched(CpuId(p as u32));
                }
            }
        }
    }

    /// Bookkeeping after every pick on `cpu` (`prev` ran there until now).
    fn after_pick<B: CoBase>(
        &mut self,
        b: &B,
        v: &SysView,
        cpu: CpuId,
        prev: Option<TaskId>,
        pick: &Pick,
        fx: &mut Effects,
    ) {
        if let Some(p) = prev {
            let d = self.dom(p).idx();
            debug_assert!(self.running[d] > 0, "running count of domain {d} underflows");
            self.running[d] = self.running[d].saturating_sub(1);
        }
        if let Some(t) = pick.task {
            let d = self.dom(t).idx();
            self.running[d] += 1;
            if let Some(since) = self.want[t.idx()].take() {
                self.skew.push((v.now - since).0);
            }
        }
        // Release pCPUs held for domains that no longer run anything.
        for p in 0..self.held.len() {
            let Some(d) = self.held[p] else { continue };
            if self.running[d.idx()] > 0 {
                continue;
            }
            self.held[p] = None;
            let idle = if p == cpu.idx() { pick.task.is_none() } else { v.curr[p].is_none() };
            if idle && !b.cr().runq(CpuId(p as u32)).is_empty() {
                fx.resched(CpuId(p as u32));
            }
        }
    }
}

/// Would the base keep `prev` on `cpu` for the ratelimit (credit rule 7)?
pub fn ratelimit_keeps<B: CoBase>(b: &B, v: &SysView, cpu: CpuId, prev: Option<TaskId>, prev_runnable: bool) -> bool {
    let Some(p) = prev else { return false };
    let cr = b.cr();
    let rl = cr.params().ratelimit;
    rl.0 > 0
        && prev_runnable
        && !cr.is_parked(p)
        && v.tasks[p.idx()].affinity.contains(cpu)
        && v.now.saturating_sub(cr.run_since(p)) < rl
}

/// Put a vCPU the base just picked for `cpu` back at its place in `cpu`'s
/// runqueue (it stays counted as runnable there).
pub fn unpick<B: CoBase>(b: &mut B, cpu: CpuId, t: TaskId) {
    let cr = b.cr_mut();
    debug_assert_eq!(cr.cpu_of(t), cpu, "{t} unpicked from a CPU it is not on");
    cr.unpick(t);
}

/// A view equal to `v` but with `cpu` idle (for a second pick at the same instant).
fn with_idle<'a>(v: &SysView<'a>, curr: &'a [Option<TaskId>]) -> SysView<'a> {
    SysView { now: v.now, topo: v.topo, tasks: v.tasks, domains: v.domains, curr }
}

/// Make the base run queued `t` on `cpu` now (nothing running there): lift it
/// to `COS` at the head of the queue, let the base pick, restore. Returns the
/// base's pick (normally `t`).
fn run_queued<B: CoBase>(b: &mut B, v: &SysView, cpu: CpuId, t: TaskId, fx: &mut Effects) -> Pick {
    let pri = b.cr().pri_of(t);
    b.cr_mut().set_pri(t, PRI_COS);
    let mut curr = v.curr.to_vec();
    curr[cpu.idx()] = None;
    let pick = b.pick_next(&with_idle(v, &curr), cpu, None, false, fx);
    b.cr_mut().set_pri(t, pri);
    pick
}

/// The result of a forced pick.
pub enum Forced {
    /// The ratelimit kept the current vCPU: the request stays pending.
    Kept(Pick),
    /// The request was answered with this pick.
    Done(Pick),
}

/// A forced pick on `cpu` (see the module docs): run the first vCPU, in
/// runqueue order with `prev` put back, for which `want` holds; else the
/// first for which `fallback` holds; else idle.
#[allow(clippy::too_many_arguments)]
pub fn forced_pick<B: CoBase>(
    core: &mut CoCore,
    b: &mut B,
    v: &SysView,
    cpu: CpuId,
    prev: Option<TaskId>,
    prev_runnable: bool,
    fx: &mut Effects,
    want: impl Fn(TaskId) -> bool,
    fallback: impl Fn(TaskId) -> bool,
) -> Forced {
    if ratelimit_keeps(b, v, cpu, prev, prev_runnable) {
        let pick = b.pick_next(v, cpu, prev, prev_runnable, fx);
        if pick.task == prev {
            return Forced::Kept(pick);
        }
        // The base did not keep it after all: redo the pick as forced.
        core.stats.fallbacks += 1;
        return Forced::Done(repick(core, b, v, cpu, pick, fx, &want, &fallback));
    }
    // Candidates: the queue with prev put back (before the first strictly lower priority).
    let target = {
        let cr = b.cr();
        let mut order: Vec<TaskId> = cr.runq(cpu).to_vec();
        if let Some(p) = prev.filter(|&p| prev_runnable && !cr.is_parked(p)) {
            let pri = cr.pri_of(p);
            let pos = order.iter().position(|&o| pri > cr.pri_of(o)).unwrap_or(order.len());
            order.insert(pos, p);
        }
        order.iter().copied().find(|&t| want(t)).or_else(|| order.iter().copied().find(|&t| fallback(t)))
    };
    match target {
        Some(t) => {
            let pri = b.cr().pri_of(t);
            b.cr_mut().set_pri(t, PRI_COS);
            let pick = b.pick_next(v, cpu, prev, prev_runnable, fx);
            b.cr_mut().set_pri(t, pri);
            if pick.task == Some(t) {
                return Forced::Done(pick);
            }
            // The base ran something else (its tick migration moved `t` to an
            // idle peer, say): that pick must still obey the request.
            core.stats.fallbacks += 1;
            Forced::Done(repick(core, b, v, cpu, pick, fx, &want, &fallback))
        }
        None => {
            let pick = b.pick_next(v, cpu, prev, prev_runnable, fx);
            Forced::Done(repick(core, b, v, cpu, pick, fx, &want, &fallback))
        }
    }
}

/// The base picked `pick` on `cpu`; keep it if `want` or `fallback` allows it,
/// else run the first allowed queued vCPU instead, else idle.
#[allow(clippy::too_many_arguments)]
fn repick<B: CoBase>(
    core: &mut CoCore,
    b: &mut B,
    v: &SysView,
    cpu: CpuId,
    pick: Pick,
    fx: &mut Effects,
    want: &impl Fn(TaskId) -> bool,
    fallback: &impl Fn(TaskId) -> bool,
) -> Pick {
    let Some(x) = pick.task else { return pick };
    if want(x) || fallback(x) {
        return pick;
    }
    unpick(b, cpu, x);
    let q = &b.cr().runq(cpu);
    let target = q.iter().copied().find(|&t| want(t)).or_else(|| q.iter().copied().find(|&t| fallback(t)));
    if let Some(t) = target {
        return run_queued(b, v, cpu, t, fx);
    }
    // Nothing allowed here: steal an allowed vCPU from a busy peer (credit's
    // rules, over a view where the vCPUs not allowed may run nowhere).
    let filtered: Vec<TaskView> = (0..v.tasks.len())
        .map(|i| {
            let t = TaskId(i as u32);
            let mut tv = v.tasks[i].clone();
            tv.affinity = if want(t) || fallback(t) { b.home(v, t) } else { CpuSet::new() };
            tv
        })
        .collect();
    let fv = SysView { now: v.now, topo: v.topo, tasks: &filtered, domains: v.domains, curr: v.curr };
    if let Some(t) = b.cr_mut().steal(&fv, cpu, PRI_IDLE) {
        unpick(b, cpu, t);
        return run_queued(b, v, cpu, t, fx);
    }
    core.stats.forced_idle += 1;
    b.cr_mut().set_idle(cpu, true);
    if cfg!(debug_assertions) {
        let mut curr = v.curr.to_vec();
        curr[cpu.idx()] = None;
        b.cr().assert_invariants(&with_idle(v, &curr));
    }
    Pick::IDLE
}

/// The base picked `x` (a `CON` vCPU) on `cpu` but the scheme wants `h`
/// (queued on `cpu`) instead: put `x` back and run `h`.
pub fn replace<B: CoBase>(b: &mut B, v: &SysView, cpu: CpuId, x: TaskId, h: TaskId, fx: &mut Effects) -> Pick {
    unpick(b, cpu, x);
    run_queued(b, v, cpu, h, fx)
}

/// The first vCPU queued on `cpu` for which `f` holds.
pub fn first_queued<B: CoBase>(b: &B, cpu: CpuId, f: impl Fn(TaskId) -> bool) -> Option<TaskId> {
    b.cr().runq(cpu).iter().copied().find(|&t| f(t))
}

/// vCPUs of domain `d` waiting in a runqueue (runnable, not running), except `but`.
pub fn queued_siblings<B: CoBase>(b: &B, v: &SysView, d: DomainId, but: TaskId) -> Vec<TaskId> {
    v.domains[d.idx()].tasks.iter().copied().filter(|&t| t != but && b.cr().is_queued(t)).collect()
}

/// vCPUs of domain `d` that are active — waiting in a runqueue, or running on
/// a CPU other than `cpu` (which is picking now) — except `but`.
pub fn active_siblings<B: CoBase>(b: &B, v: &SysView, d: DomainId, but: TaskId, cpu: CpuId) -> Vec<TaskId> {
    let running = |t: TaskId| v.curr.iter().enumerate().any(|(c, x)| c != cpu.idx() && *x == Some(t));
    v.domains[d.idx()].tasks.iter().copied().filter(|&t| t != but && (b.cr().is_queued(t) || running(t))).collect()
}

/// Scatter domain `d`'s vCPUs (see the module docs).
pub fn scatter<B: CoBase>(core: &mut CoCore, b: &mut B, v: &SysView, d: DomainId, fx: &mut Effects) {
    let n = v.topo.ncpus();
    let mut mine = vec![0u32; n];
    let mut con = vec![0u32; n];
    for (i, tv) in v.tasks.iter().enumerate() {
        if tv.domain != d && v.domains[tv.domain.idx()].cosched == CoschedType::Con {
            con[b.cr().cpu_of(TaskId(i as u32)).idx()] += 1;
        }
    }
    core.placed.clear();
    for &t in &v.domains[d.idx()].tasks {
        let home = b.home(v, t);
        let Some(best) = home.iter().min_by_key(|p| (mine[p.idx()], con[p.idx()], p.0)) else { continue };
        mine[best.idx()] += 1;
        con[best.idx()] += 1;
        core.placed.push((t, best));
        move_to(b, v, t, best, fx);
    }
    core.stats.scatters += 1;
}

/// Move `t` to `cpu`'s runqueue: now if queued or blocked, at its next deschedule if running.
fn move_to<B: CoBase>(b: &mut B, v: &SysView, t: TaskId, cpu: CpuId, fx: &mut Effects) {
    let cr = b.cr_mut();
    if let Some(q) = v.curr.iter().position(|x| *x == Some(t)) {
        if q != cpu.idx() {
            cr.set_migrate_to(t, Some(cpu));
            fx.resched(CpuId(q as u32));
        }
    } else if cr.is_queued(t) {
        if cr.cpu_of(t) != cpu {
            cr.move_queued(t, cpu);
            cr.tickle(v, t, fx);
        }
    } else {
        cr.place(t, cpu);
    }
}

/// A co-scheduling scheme (CS, CDS, PCS, BCS): what happens around the base's picks.
pub trait Scheme: Send {
    /// Size per-CPU and per-domain state.
    fn init(&mut self, v: &SysView);
    /// Choose what `cpu` runs next (see [`Dispatcher::pick_next`]).
    #[allow(clippy::too_many_arguments)]
    fn pick<B: CoBase>(
        &mut self,
        core: &mut CoCore,
        b: &mut B,
        v: &SysView,
        cpu: CpuId,
        prev: Option<TaskId>,
        prev_runnable: bool,
        fx: &mut Effects,
    ) -> Pick;
    /// After the base's accounting (which resets priorities).
    fn after_account<B: CoBase>(&mut self, _core: &mut CoCore, _b: &mut B, _v: &SysView) {}
    /// Domain `d` stopped being `CON`.
    fn became_hit<B: CoBase>(&mut self, _core: &mut CoCore, _b: &mut B, _v: &SysView, _d: DomainId) {}
    /// Scheme-specific counters.
    fn counters(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}

/// A co-scheduling dispatcher: scheme `S` over base `B`.
pub struct CoSched<S: Scheme, B: CoBase> {
    name: &'static str,
    /// Shared state.
    pub core: CoCore,
    /// The scheme.
    pub scheme: S,
    /// The base dispatcher.
    pub base: B,
}

impl<S: Scheme, B: CoBase> CoSched<S, B> {
    /// Scheme `scheme` over `base`, registered as `name`.
    pub fn new(name: &'static str, scheme: S, base: B) -> Self {
        CoSched { name, core: CoCore::new(), scheme, base }
    }

    /// Charge each pCPU a signal reaches `cost` of hypervisor time (`signal_us`).
    pub fn with_signal_cost(mut self, cost: Nanos) -> Self {
        self.core.signal_cost = cost;
        self
    }
}

impl<S: Scheme, B: CoBase> Dispatcher for CoSched<S, B> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn tick_period(&self) -> Nanos {
        self.base.tick_period()
    }

    fn account_period(&self) -> Nanos {
        self.base.account_period()
    }

    fn seed(&mut self, seed: u64) {
        self.base.seed(seed);
    }

    fn account_cpu(&self) -> Option<CpuId> {
        self.base.account_cpu()
    }

    fn init(&mut self, v: &SysView) {
        self.base.init(v);
        let c = &mut self.core;
        c.dom_of = v.tasks.iter().map(|t| t.domain).collect();
        c.con = v.domains.iter().map(|d| d.cosched == CoschedType::Con).collect();
        c.running = vec![0; v.domains.len()];
        c.held = vec![None; v.topo.ncpus()];
        c.held_since = vec![Nanos::ZERO; v.topo.ncpus()];
        c.want = vec![None; v.tasks.len()];
        self.scheme.init(v);
        let mut fx = Effects::default();
        for d in 0..v.domains.len() {
            if self.core.con[d] {
                scatter(&mut self.core, &mut self.base, v, DomainId(d as u32), &mut fx);
            }
        }
        debug_assert!(fx.resched.is_empty(), "scatter at init moved a running vCPU");
    }

    fn wake(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        self.base.wake(v, t, fx);
    }

    fn block(&mut self, v: &SysView, t: TaskId, cpu: CpuId, fx: &mut Effects) {
        self.base.block(v, t, cpu, fx);
    }

    fn tick(&mut self, v: &SysView, cpu: CpuId, fx: &mut Effects) {
        self.base.tick(v, cpu, fx);
        let slot = self.base.cr().params().tslice;
        self.core.expire_holds(&self.base, v, slot, fx);
    }

    fn account(&mut self, v: &SysView, fx: &mut Effects) {
        self.base.account(v, fx);
        self.scheme.after_account(&mut self.core, &mut self.base, v);
        let slot = self.base.cr().params().tslice;
        self.core.expire_holds(&self.base, v, slot, fx);
    }

    fn pick_next(
        &mut self,
        v: &SysView,
        cpu: CpuId,
        prev: Option<TaskId>,
        prev_runnable: bool,
        fx: &mut Effects,
    ) -> Pick {
        let pick = self.scheme.pick(&mut self.core, &mut self.base, v, cpu, prev, prev_runnable, fx);
        self.core.after_pick(&self.base, v, cpu, prev, &pick, fx);
        pick
    }

    fn affinity_changed(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        self.base.affinity_changed(v, t, fx);
    }

    fn domain_changed(&mut self, v: &SysView, d: DomainId, fx: &mut Effects) {
        self.base.domain_changed(v, d, fx);
        let now_con = v.domains[d.idx()].cosched == CoschedType::Con;
        let was_con = std::mem::replace(&mut self.core.con[d.idx()], now_con);
        if now_con && !was_con {
            scatter(&mut self.core, &mut self.base, v, d, fx);
        } else if was_con && !now_con {
            self.scheme.became_hit(&mut self.core, &mut self.base, v, d);
        }
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let mut c = self.base.counters();
        let s = &self.core.stats;
        c.extend([
            ("cosched_ops", s.ops as f64),
            ("cosched_signals", s.signals as f64),
            ("cosched_forced_idle", s.forced_idle as f64),
            ("cosched_fallbacks", s.fallbacks as f64),
            ("cosched_scatters", s.scatters as f64),
            ("cosched_unmet", s.unmet as f64),
        ]);
        c.extend(self.scheme.counters());
        c
    }

    fn samples(&self) -> Vec<(&'static str, Vec<u64>)> {
        vec![("sibling_start_diff_ns", self.core.skew.values.clone())]
    }

    fn credit(&self, t: TaskId) -> Option<i64> {
        self.base.credit(t)
    }

    fn runq_len(&self, cpu: CpuId) -> Option<u32> {
        self.base.runq_len(cpu)
    }
}

#[cfg(test)]
mod tests {
    //! The credit rules under a scheme (`rules`); the worked example is in pcs.rs.
    use super::*;
    use ampsched_model::spec::ParamValue;

    fn params(rules: Option<&str>) -> Params {
        let mut p = Params::new();
        if let Some(r) = rules {
            p.insert("rules".into(), ParamValue::Str(r.into()));
        }
        p
    }

    #[test]
    fn rules_choose_the_credit_profile_and_reject_other_words() {
        let cur = credit_params("pcs", &params(None)).unwrap();
        assert_eq!((cur.profile, cur.ratelimit), (Profile::Current, Nanos::from_us(1000)));
        let x = credit_params("pcs", &params(Some("xen40"))).unwrap();
        assert_eq!((x.profile, x.ratelimit), (Profile::Xen40, Nanos::ZERO));
        let e = credit_params("pcs", &params(Some("xen41"))).unwrap_err();
        assert_eq!(e.param, "rules");
        assert!(e.msg.contains("current, xen40"), "{}", e.msg);
    }
}
