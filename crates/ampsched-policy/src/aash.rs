//! `aash`: the asymmetry-aware hypervisor scheduler, on top of Xen credit.
//!
//! Follows docs/design/aash.md (Kazempour, Kamali, Fedorova, VEE 2010, §3). Credit still
//! decides *how much* CPU each vCPU gets (weights, caps, BOOST, OVER/UNDER,
//! ratelimit: all of `credit.rs`, unchanged); AASH decides *where*, fast or
//! slow. How: credit runs over a view of the tasks whose affinity is
//! narrowed to each vCPU's home class — fast CPUs for a vCPU holding fast
//! credits this period, slow CPUs otherwise — so credit's own placement,
//! tickling, stealing and "not allowed here → migrate at deschedule" rules
//! keep every vCPU in its class. AASH adds:
//! - **Fast and slow credits** (mechanism 1). Each accounting period the
//!   fast queue (`fastqueue.rs`) grants `n_fast` vCPUs one period of fast
//!   credits each (`n_fast × tslice` in all: proportional to the fast CPUs);
//!   everyone else runs on slow credits (credit's pool minus that). Fast
//!   credits are kept in ns (1 credit = 100 µs) and burn while a vCPU runs
//!   on a fast CPU, granted or not; debt is clipped at one period.
//!   Regranting pairs each vCPU leaving a fast CPU with one entering from a
//!   slow CPU (next in line first): they swap CPUs, each move happening at
//!   the vCPU's deschedule, right before its new CPU runs it.
//! - **Expiry.** A grant whose debt (fast time used without credits, by
//!   stealing) eats the whole period expires at distribution and passes to
//!   the next in line before anyone moves. At a tick, a granted vCPU on a
//!   fast CPU whose fast credits are used up loses the grant; the next-in-
//!   line runnable vCPU on a slow CPU (that did not lose fast credits this
//!   period) gets the rest of the period's fast credits and the two swap.
//! - **Fast never idle** (mechanism 2). A waking vCPU takes an idle fast CPU;
//!   a fast CPU about to idle steals first, from slow CPUs' queues first;
//!   failing that it pulls a vCPU running on a slow CPU — at that slow
//!   CPU's next tick (`pull = tick`, default: Xen moves a running vCPU only
//!   from its pCPU's tick, via cpu_pick), or at once (`pull = immediate`).
//!   So a fast CPU idles at most one tick (10 ms) while a slow CPU runs a
//!   vCPU, and never while one waits. Pulling at once costs a cache refill
//!   every time a barrier-synchronised program's fast thread waits for the
//!   others (the aash-single-vm experiment shows it). Such a vCPU
//!   "borrows" the fast CPU: it stays there until a granted vCPU wants the
//!   CPU back (then it is kicked to a slow CPU) or the next accounting. A
//!   slow CPU never steals from a fast CPU while a fast CPU is idle.
//! - Only active vCPUs take part: runnable now or ran in the last period hold
//!   a place in the fast queue, and only those on credit's active list are
//!   granted (the others are passed over and keep their place at the head:
//!   `fastqueue.rs`, "Passed over, not skipped"). AASH hands out fast credits where credit hands
//!   out credits, in the accounting (`csched_acct`), which walks the active
//!   domains' active vCPUs; a vCPU joins that list only when a tick finds it
//!   running (`csched_vcpu_acct`, "it's consuming a non-negligeable amount of
//!   CPU") and leaves it when its credit passes one slice's worth. So a
//!   vCPU that wakes for µs between ticks (the testbed's dom0: 20 µs ten
//!   times a second) is not in the fast queue, where counting every vCPU
//!   that ran in the last period put dom0's four vCPUs there and cost an
//!   aware guest's fast vCPU a fast CPU one period in three (test
//!   `a_background_vcpu_that_credit_never_charges_takes_no_fast_credits`).
//!
//! Invariants: a vCPU is on at most one CPU (credit's checks, run after
//! every pick in debug builds); at most `n_fast` grants; grants change only
//! at accounting and at expiry, so outside blocking and stealing a vCPU
//! moves fast↔slow at most once per accounting period; with fast_never_idle
//! a fast CPU is never left idle while a slow CPU queues a vCPU it may run
//! (asserted after each pick), nor longer than a tick while one runs it.
//! Units: ns; credits as in credit.rs.
//! Steal order departs from credit's NUMA order on purpose (slow peers
//! first, as the paper's "preferably fast" stealing).

use crate::credit::{Credit, CreditParams, Profile, MIN_TIMER, PRI_IDLE, PRI_OVER};
use crate::dispatcher::{Dispatcher, Effects, Pick, SysView, TaskView};
use crate::fastqueue::{read_switches, AashSwitches, FastQueue, FqDomain, FqVcpu};
use crate::params::{Kind, ParamDoc, ParamReader, PolicyError};
use ampsched_model::spec::Params;
use ampsched_model::{CpuId, CpuSet, DomainId, Nanos, TaskId, Topology};

/// The `aash` dispatcher's parameter docs (credit's, `pull`, any `$extra`, then AASH's switches):
/// one list for `aash` and the dispatchers built on it (`aash+pcs`, `aash+bcs`).
macro_rules! aash_dispatcher_param_docs {
    ($($extra:expr),* $(,)?) => {
        $crate::fastqueue::aash_param_docs!(
            $crate::credit::TSLICE,
            $crate::aash::RATELIMIT,
            $crate::aash::TICK_MIGRATE,
            $crate::credit::MIGRATION_DELAY,
            $crate::aash::PULL,
            $($extra,)*
        )
    };
}
pub(crate) use aash_dispatcher_param_docs;

/// Parameters of `aash` as shown by `ampsched policies`: credit's, then AASH's switches.
pub const AASH_PARAMS: &[ParamDoc] = aash_dispatcher_param_docs!();

/// `ratelimit_us` under AASH: credit's, always on by default (no `xen40` profile here).
pub const RATELIMIT: ParamDoc = ParamDoc { doc: "minimum run before preemption; 0 = off", ..crate::credit::RATELIMIT };

/// `tick_migrate` under AASH: credit's rule 10, within the vCPU's class.
pub const TICK_MIGRATE: ParamDoc = ParamDoc {
    doc: "tick may move a running vCPU to an idle pCPU of its class in a less loaded memory domain",
    ..crate::credit::TICK_MIGRATE
};

/// `pull`. Default `tick`: Xen moves a running vCPU only at its pCPU's tick (csched_tick → cpu_pick),
/// so a fast CPU idles at most one tick before a running slow vCPU comes over; waiting vCPUs
/// are stolen at once either way. `immediate` pulls at once and pays a cache refill each time
/// a barrier-synchronised program's fast thread waits.
pub const PULL: ParamDoc = ParamDoc {
    name: "pull",
    kind: Kind::Choice { default: "tick", allowed: &["tick", "immediate"] },
    unit: "",
    doc: "when an idle fast CPU takes a vCPU RUNNING on a slow CPU: at that CPU's next tick (as Xen) or at once",
};

/// Tunables of `aash`.
#[derive(Clone, Debug)]
pub struct AashParams {
    /// The credit scheduler underneath.
    pub credit: CreditParams,
    /// AASH mechanism switches and the fast CPU set.
    pub sw: AashSwitches,
    /// Pull vCPUs running on slow CPUs at once (else at that CPU's tick).
    pub pull_immediate: bool,
}

impl AashParams {
    /// Read from scenario parameters.
    pub fn from_params(policy: &str, params: &Params, topo: &Topology) -> Result<AashParams, PolicyError> {
        let credit = CreditParams::from_params(policy, Profile::Current, params, AASH_PARAMS)?;
        let r = ParamReader::new(policy, params, AASH_PARAMS)?;
        let pull_immediate = r.choice(&PULL)? == "immediate";
        Ok(AashParams { credit, sw: read_switches(&r, topo)?, pull_immediate })
    }
}

/// Counters reported in results.
#[derive(Clone, Debug, Default)]
pub struct AashStats {
    /// vCPU-periods of fast credits granted by the fast queue.
    pub grants: u64,
    /// Leaving/entering pairs that swapped CPUs (accounting and expiry).
    pub swaps: u64,
    /// Grants that expired before the period ended.
    pub expiries: u64,
    /// Idle fast CPUs filled with a vCPU queued elsewhere.
    pub fills: u64,
    /// Idle fast CPUs that pulled a vCPU running on a slow CPU.
    pub pulls: u64,
    /// Borrowers sent back to slow CPUs for a granted vCPU.
    pub kicks: u64,
}

/// The `aash` dispatcher.
pub struct Aash {
    sw: AashSwitches,
    pull_immediate: bool,
    cr: Credit,
    fast: CpuSet,
    slow: CpuSet,
    tslice: Nanos,
    fq: FastQueue,
    /// Holds fast credits this period.
    granted: Vec<bool>,
    /// Runs (or may run) on a fast CPU without a grant, by mechanism 2.
    borrowed: Vec<bool>,
    /// Fast credits, ns (may be negative: debt).
    fbudget: Vec<i64>,
    fast_since: Vec<Option<Nanos>>,
    ran: Vec<bool>,
    /// Lost its fast credits this period (not re-granted before the next one).
    left_fast: Vec<bool>,
    order: Vec<TaskId>,
    rank: Vec<u32>,
    /// Per CPU: a vCPU on its way there, to run first.
    incoming: Vec<Option<TaskId>>,
    /// Per task: a move to this CPU is pending (at its deschedule).
    moving: Vec<Option<CpuId>>,
    /// Task views with home-class affinity (what credit sees).
    eff: Vec<TaskView>,
    /// Task views with the widest affinity mechanism 2 may use.
    wide: Vec<TaskView>,
    may_fast: Vec<bool>,
    next_acct: Nanos,
    /// Counters.
    pub stats: AashStats,
}

/// Run `$body` with `$view` = `$v` seen through `$s.$field` task views.
macro_rules! through {
    ($s:ident, $field:ident, $v:expr, |$view:ident| $body:expr) => {{
        let tv = std::mem::take(&mut $s.$field);
        let r = {
            let $view = SysView { now: $v.now, topo: $v.topo, tasks: &tv, domains: $v.domains, curr: $v.curr };
            $body
        };
        $s.$field = tv;
        r
    }};
}

impl Aash {
    /// An AASH dispatcher for `topo`.
    pub fn new(p: AashParams, topo: &Topology) -> Aash {
        let fast = p.sw.fast;
        Aash {
            fq: FastQueue::new(p.sw.fq),
            cr: Credit::new("aash", p.credit.clone(), topo),
            slow: topo.all.and_not(&fast),
            fast,
            tslice: p.credit.tslice,
            sw: p.sw,
            pull_immediate: p.pull_immediate,
            granted: Vec::new(),
            borrowed: Vec::new(),
            fbudget: Vec::new(),
            fast_since: Vec::new(),
            ran: Vec::new(),
            left_fast: Vec::new(),
            order: Vec::new(),
            rank: Vec::new(),
            incoming: vec![None; topo.ncpus()],
            moving: Vec::new(),
            eff: Vec::new(),
            wide: Vec::new(),
            may_fast: Vec::new(),
            next_acct: p.credit.tslice,
            stats: AashStats::default(),
        }
    }

    /// The vCPUs holding fast credits this period (for tests and tools).
    pub fn granted(&self) -> Vec<TaskId> {
        (0..self.granted.len()).filter(|&i| self.granted[i]).map(|i| TaskId(i as u32)).collect()
    }

    fn n_fast(&self) -> usize {
        self.fast.len()
    }

    fn refresh(&mut self, v: &SysView, t: TaskId) {
        let i = t.idx();
        let real = v.tasks[i].affinity;
        let home = if self.borrowed[i] && self.may_fast[i] {
            real
        } else if self.granted[i] {
            self.fast
        } else if !self.sw.fq.fair_sharing && self.may_fast[i] {
            v.topo.all
        } else {
            self.slow
        };
        let m = real.and(&home);
        self.eff[i].affinity = if m.is_empty() { real } else { m };
        let w = if self.may_fast[i] { real } else { self.eff[i].affinity };
        self.wide[i].affinity = w;
    }

    fn runnable(&self, t: TaskId) -> bool {
        self.cr.is_runnable(t) && !self.cr.is_parked(t)
    }

    /// Where `t` is: the CPU running it, or whose queue holds it.
    fn cpu_of(&self, v: &SysView, t: TaskId) -> Option<CpuId> {
        if let Some(c) = v.curr.iter().position(|x| *x == Some(t)) {
            return Some(CpuId(c as u32));
        }
        self.cr.is_queued(t).then_some(self.cr.cpu_of(t))
    }

    /// Charge fast credits for time run on a fast CPU.
    fn burn_fast(&mut self, t: TaskId, now: Nanos) {
        let i = t.idx();
        if let Some(s) = self.fast_since[i] {
            self.fbudget[i] = (self.fbudget[i] - (now.saturating_sub(s)).0 as i64).max(-(self.tslice.0 as i64));
            self.fast_since[i] = Some(now);
        }
    }

    /// An idle fast CPU in `aff` that nobody is heading to, `pref` first.
    fn idle_fast_cpu(&self, v: &SysView, aff: CpuSet, pref: CpuId) -> Option<CpuId> {
        let mut cand = CpuSet::new();
        for c in self.fast.and(&aff).and(&self.cr.idlers()).iter() {
            if v.curr[c.idx()].is_none() && self.cr.runq(c).is_empty() && self.incoming[c.idx()].is_none() {
                cand.insert(c);
            }
        }
        if cand.contains(pref) {
            Some(pref)
        } else {
            cand.cycle(pref)
        }
    }

    fn reserve(&mut self, c: CpuId, t: TaskId) {
        self.incoming[c.idx()] = Some(t);
        self.cr.set_idle(c, false);
    }

    /// Move queued `t` to `c`'s runqueue.
    fn requeue(&mut self, t: TaskId, c: CpuId) {
        self.cr.move_queued(t, c);
    }

    /// `t` leaves fast CPU `c`, `w` comes from its slow CPU to `c`; they swap.
    fn swap(&mut self, v: &SysView, t: TaskId, c: CpuId, w: TaskId, fx: &mut Effects) {
        self.stats.swaps += 1;
        let s = self.cpu_of(v, w).unwrap_or(self.cr.cpu_of(w));
        self.borrowed[t.idx()] = false;
        self.borrowed[w.idx()] = false;
        self.refresh(v, t);
        self.refresh(v, w);
        if v.curr[s.idx()] == Some(w) {
            self.cr.set_migrate_to(w, Some(c));
            self.moving[w.idx()] = Some(c);
            fx.resched(s);
        } else if self.cr.is_queued(w) {
            self.requeue(w, c);
        }
        self.incoming[c.idx()] = Some(w);
        let dest =
            if self.eff[t.idx()].affinity.contains(s) { s } else { self.eff[t.idx()].affinity.first().unwrap_or(s) };
        if v.curr[c.idx()] == Some(t) {
            self.cr.set_migrate_to(t, Some(dest));
            self.moving[t.idx()] = Some(dest);
        } else if self.cr.is_queued(t) {
            self.requeue(t, dest);
            through!(self, eff, v, |ev| self.cr.tickle(&ev, t, fx));
        }
        fx.resched(c);
    }

    /// Send `t` to its home class: now if queued, at its deschedule if running.
    fn send_home(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        self.refresh(v, t);
        through!(self, eff, v, |ev| self.cr.affinity_changed(&ev, t, fx));
    }

    /// A granted vCPU on fast CPU `c` used up its fast credits.
    fn expire(&mut self, v: &SysView, t: TaskId, c: CpuId, fx: &mut Effects) {
        self.stats.expiries += 1;
        self.granted[t.idx()] = false;
        self.left_fast[t.idx()] = true;
        let rest = self.next_acct.saturating_sub(v.now).0 as i64;
        let w = self.order.iter().copied().find(|&w| {
            let i = w.idx();
            w != t
                && !self.granted[i]
                && !self.left_fast[i]
                && self.may_fast[i]
                && self.runnable(w)
                && self.moving[i].is_none()
                && v.tasks[i].affinity.contains(c)
                && self.cpu_of(v, w).is_some_and(|x| !self.fast.contains(x))
                && self.fbudget[i].min(0) + rest > 0
        });
        if let Some(w) = w {
            self.granted[w.idx()] = true;
            self.fbudget[w.idx()] = self.fbudget[w.idx()].min(0) + rest;
            self.swap(v, t, c, w, fx);
        } else if self.sw.fast_never_idle {
            // Nobody waits on a slow CPU: keep the fast CPU busy.
            self.borrowed[t.idx()] = true;
            self.refresh(v, t);
        } else {
            self.send_home(v, t, fx);
        }
    }

    /// Kick borrowers for waiting granted vCPUs; fill idle fast CPUs (with a vCPU
    /// running on a slow CPU only if it runs on `tick_cpu`, or with `pull = immediate`).
    fn rebalance(&mut self, v: &SysView, fx: &mut Effects, tick_cpu: Option<CpuId>) {
        let fast: Vec<CpuId> = self.fast.iter().collect();
        // A granted vCPU waits (queued) while a fast CPU runs a vCPU without a grant.
        for &c in &fast {
            let Some(u) = v.curr[c.idx()] else { continue };
            if self.granted[u.idx()] || self.incoming[c.idx()].is_some() || self.moving[u.idx()].is_some() {
                continue;
            }
            let g = self.cr.runq(c).iter().copied().find(|g| self.granted[g.idx()]).or_else(|| {
                self.order.iter().copied().find(|&g| {
                    self.granted[g.idx()]
                        && self.cr.is_queued(g)
                        && self.moving[g.idx()].is_none()
                        && v.tasks[g.idx()].affinity.contains(c)
                        && !self.fast.contains(self.cr.cpu_of(g))
                })
            });
            if let Some(g) = g {
                self.stats.kicks += 1;
                self.requeue(g, c);
                self.reserve(c, g);
                self.borrowed[u.idx()] = false;
                self.refresh(v, u);
                fx.resched(c);
            }
        }
        if !self.sw.fast_never_idle {
            return;
        }
        for &c in &fast {
            let ci = c.idx();
            if v.curr[ci].is_some()
                || !self.cr.runq(c).is_empty()
                || self.incoming[ci].is_some()
                || !self.cr.idlers().contains(c)
            {
                continue;
            }
            // A vCPU queued elsewhere, slow CPUs' queues first, next in line first.
            let mut best: Option<((bool, u32, TaskId), TaskId)> = None;
            for p in 0..v.topo.ncpus() {
                // An idle peer is about to run its own queue.
                if p == ci || v.curr[p].is_none() {
                    continue;
                }
                for &t in self.cr.runq(CpuId(p as u32)) {
                    if self.wide[t.idx()].affinity.contains(c)
                        && self.moving[t.idx()].is_none()
                        && !self.cr.is_parked(t)
                        && !self.incoming.contains(&Some(t))
                    {
                        let key = (self.fast.contains(CpuId(p as u32)), self.rank[t.idx()], t);
                        if best.is_none_or(|(k, _)| key < k) {
                            best = Some((key, t));
                        }
                    }
                }
            }
            if let Some((_, t)) = best {
                self.stats.fills += 1;
                if !self.granted[t.idx()] {
                    self.borrowed[t.idx()] = true;
                }
                self.refresh(v, t);
                self.requeue(t, c);
                self.reserve(c, t);
                fx.resched(c);
                continue;
            }
            // A vCPU running on a slow CPU, next in line first.
            let mut best: Option<((u32, TaskId), TaskId, CpuId)> = None;
            for s in self.slow.iter() {
                if !self.pull_immediate && tick_cpu != Some(s) {
                    continue;
                }
                let Some(u) = v.curr[s.idx()] else { continue };
                if self.wide[u.idx()].affinity.contains(c) && self.moving[u.idx()].is_none() {
                    let key = (self.rank[u.idx()], u);
                    if best.is_none_or(|(k, _, _)| key < k) {
                        best = Some((key, u, s));
                    }
                }
            }
            if let Some((_, u, s)) = best {
                self.stats.pulls += 1;
                if !self.granted[u.idx()] {
                    self.borrowed[u.idx()] = true;
                }
                self.refresh(v, u);
                self.cr.set_migrate_to(u, Some(c));
                self.moving[u.idx()] = Some(c);
                self.reserve(c, u);
                fx.resched(s);
            }
        }
    }

    /// Steal for `cpu` from peers, slow CPUs first; a slow thief skips fast
    /// peers while a fast CPU is idle. A fast thief with an empty queue may
    /// take any vCPU allowed to run fast (it then borrows the CPU); with a
    /// queue (its head is OVER) it takes only vCPUs of its class, so a
    /// granted vCPU is not pushed aside by a borrower (AASH decides where,
    /// credit how much).
    fn steal(&mut self, v: &SysView, cpu: CpuId, pri: i8, own_queue_empty: bool) -> Option<TaskId> {
        let is_fast = self.fast.contains(cpu);
        let fast_idle = !self.fast.and(&self.cr.idlers()).is_empty();
        let mut peers: Vec<CpuId> = Vec::new();
        let mut add = |set: &CpuSet| {
            let mut p = cpu;
            for _ in 0..set.len() {
                let Some(n) = set.cycle(p) else { break };
                if n != cpu {
                    peers.push(n);
                }
                p = n;
            }
        };
        add(&self.slow);
        if is_fast || !fast_idle {
            add(&self.fast);
        }
        let wide = is_fast && self.sw.fast_never_idle && own_queue_empty;
        for peer in peers {
            if self.cr.nr_runnable(peer) <= 1 {
                continue;
            }
            let got = if wide {
                through!(self, wide, v, |wv| self.cr.steal_one(&wv, peer, cpu, pri))
            } else {
                through!(self, eff, v, |ev| self.cr.steal_one(&ev, peer, cpu, pri))
            };
            if let Some(t) = got {
                if is_fast && !self.granted[t.idx()] {
                    self.borrowed[t.idx()] = true;
                    self.refresh(v, t);
                }
                return Some(t);
            }
        }
        None
    }

    /// Fast-queue distribution and regrant, at accounting.
    fn distribute(&mut self, v: &SysView, fx: &mut Effects) {
        let n = v.tasks.len();
        let fqv: Vec<FqVcpu> = (0..n)
            .map(|i| FqVcpu {
                id: TaskId(i as u32),
                domain: v.tasks[i].domain,
                vcpu: v.tasks[i].vcpu,
                active: self.runnable(TaskId(i as u32)) || self.ran[i],
                eligible: self.cr.is_active(TaskId(i as u32)),
            })
            .collect();
        let doms: Vec<FqDomain> =
            v.domains.iter().map(|d| FqDomain { priority: d.priority, fast_vcpus: d.fast_vcpus.clone() }).collect();
        let g = self.fq.distribute(self.n_fast(), &fqv, &doms);
        self.stats.grants += g.fast.len() as u64;
        for i in 0..n {
            self.ran[i] = v.curr.contains(&Some(TaskId(i as u32)));
            self.rank[i] = u32::MAX;
        }
        for (k, t) in g.order.iter().enumerate() {
            self.rank[t.idx()] = k as u32;
        }
        self.order = g.order;
        let per = self.tslice.0 as i64;
        // A grant whose debt (fast time used without credits) eats the whole
        // period expires at once and passes to the next in line, before anyone
        // moves (expiring it at the next tick would move it twice this period).
        let mut fast_set = g.fast;
        let mut k = 0;
        while k < fast_set.len() {
            let t = fast_set[k];
            if self.fbudget[t.idx()].min(0) + per > 0 {
                k += 1;
                continue;
            }
            self.stats.expiries += 1;
            fast_set.remove(k);
            self.fbudget[t.idx()] = self.fbudget[t.idx()].min(0) + per;
            let w = self.order.iter().copied().find(|&w| {
                !fast_set.contains(&w)
                    && w != t
                    && self.may_fast[w.idx()]
                    && fqv[w.idx()].active
                    && self.fbudget[w.idx()].min(0) + per > 0
            });
            if let Some(w) = w {
                fast_set.insert(k, w);
                k += 1;
            }
        }
        for i in 0..n {
            let now_granted = fast_set.contains(&TaskId(i as u32));
            self.left_fast[i] = self.granted[i] && !now_granted;
            self.granted[i] = now_granted;
            self.fbudget[i] = if now_granted { self.fbudget[i].min(0) + per } else { self.fbudget[i].min(0) };
            debug_assert!(!now_granted || self.fbudget[i] > 0, "granted {i} without fast credits");
            self.borrowed[i] = false;
            self.refresh(v, TaskId(i as u32));
        }
        // Pair leavers (no grant, on a fast CPU) with entrants (granted, on a slow CPU).
        let mut leave: Vec<(CpuId, TaskId)> = Vec::new();
        let mut enter: Vec<(u32, TaskId)> = Vec::new();
        for i in 0..n {
            let t = TaskId(i as u32);
            if !self.runnable(t) {
                continue;
            }
            let Some(c) = self.cpu_of(v, t) else { continue };
            if !self.granted[i] && self.fast.contains(c) && !self.eff[i].affinity.contains(c) {
                leave.push((c, t));
            } else if self.granted[i] && !self.fast.contains(c) && !self.eff[i].affinity.contains(c) {
                enter.push((self.rank[i], t));
            }
        }
        leave.sort();
        enter.sort();
        let pairs = leave.len().min(enter.len());
        for k in 0..pairs {
            let ((c, t), (_, w)) = (leave[k], enter[k]);
            self.swap(v, t, c, w, fx);
        }
        for &(_, t) in &leave[pairs..] {
            if self.sw.fast_never_idle && self.may_fast[t.idx()] {
                self.borrowed[t.idx()] = true;
                self.refresh(v, t);
            } else {
                self.send_home(v, t, fx);
            }
        }
        for &(_, w) in &enter[pairs..] {
            self.send_home(v, w, fx);
        }
    }

    fn check(&self, v: &SysView, cpu: CpuId, next: Option<TaskId>) {
        if !cfg!(debug_assertions) {
            return;
        }
        let mut curr = v.curr.to_vec();
        curr[cpu.idx()] = next;
        let view = SysView { now: v.now, topo: v.topo, tasks: &self.eff, domains: v.domains, curr: &curr };
        self.cr.assert_invariants(&view);
        debug_assert!(self.granted.iter().filter(|g| **g).count() <= self.n_fast(), "more grants than fast CPUs");
        if self.sw.fast_never_idle && next.is_none() && self.fast.contains(cpu) && self.incoming[cpu.idx()].is_none() {
            // Fast never idle: nothing queued anywhere that could run here.
            for (p, q) in (0..v.topo.ncpus()).map(|p| (p, self.cr.runq(CpuId(p as u32)))) {
                if p == cpu.idx() || v.curr[p].is_none() {
                    continue;
                }
                for t in q {
                    debug_assert!(
                        !self.wide[t.idx()].affinity.contains(cpu)
                            || self.moving[t.idx()].is_some()
                            || self.incoming.contains(&Some(*t)),
                        "fast {cpu} idles while {t} waits"
                    );
                }
            }
        }
    }
}

/// Hooks for the co-scheduling composition (`aash+pcs`, `aash+bcs`: aash_cosched.rs).
impl Aash {
    /// The credit scheduler underneath (runqueues, priorities).
    pub fn credit_state(&self) -> &Credit {
        &self.cr
    }

    /// Mutable credit state (the co-scheduler reorders runqueues and raises priorities).
    pub fn credit_state_mut(&mut self) -> &mut Credit {
        &mut self.cr
    }

    /// The CPUs `t` may use this period (its home class; what credit sees as its affinity).
    pub fn home_affinity(&self, t: TaskId) -> CpuSet {
        self.eff[t.idx()].affinity
    }

    /// The fast CPUs.
    pub fn fast_cpus(&self) -> CpuSet {
        self.fast
    }

    /// Does `t` hold fast credits this period?
    pub fn is_granted(&self, t: TaskId) -> bool {
        self.granted[t.idx()]
    }

    /// Pass `from`'s fast grant, with its unused fast credits, to `to`: `from`
    /// runs on a fast CPU, `to` on a slow one; they swap CPUs, each at its
    /// deschedule (as an expiry does). False, and nothing changes, when that
    /// does not hold or either is already moving.
    pub fn hand_over_grant(&mut self, v: &SysView, from: TaskId, to: TaskId, fx: &mut Effects) -> bool {
        let (f, t) = (from.idx(), to.idx());
        let Some(c) = v.curr.iter().position(|x| *x == Some(from)).map(|c| CpuId(c as u32)) else { return false };
        let Some(s) = v.curr.iter().position(|x| *x == Some(to)).map(|s| CpuId(s as u32)) else { return false };
        if !self.fast.contains(c)
            || self.fast.contains(s)
            || !self.granted[f]
            || self.granted[t]
            || !self.may_fast[t]
            || self.moving[f].is_some()
            || self.moving[t].is_some()
            || self.incoming[c.idx()].is_some()
            || !v.tasks[t].affinity.contains(c)
            || !v.tasks[f].affinity.contains(s)
        {
            return false;
        }
        self.burn_fast(from, v.now);
        self.granted[f] = false;
        self.granted[t] = true;
        self.fbudget[t] = self.fbudget[t].min(0) + self.fbudget[f].max(0);
        self.fbudget[f] = self.fbudget[f].min(0);
        self.swap(v, from, c, to, fx);
        true
    }
}

impl Dispatcher for Aash {
    fn name(&self) -> &'static str {
        "aash"
    }

    fn tick_period(&self) -> Nanos {
        self.cr.tick_period()
    }

    fn account_period(&self) -> Nanos {
        self.cr.account_period()
    }

    fn seed(&mut self, seed: u64) {
        self.cr.seed(seed);
    }

    fn account_cpu(&self) -> Option<CpuId> {
        self.cr.account_cpu()
    }

    fn init(&mut self, v: &SysView) {
        let n = v.tasks.len();
        self.granted = vec![false; n];
        self.borrowed = vec![false; n];
        self.fbudget = vec![0; n];
        self.fast_since = vec![None; n];
        self.ran = vec![false; n];
        self.left_fast = vec![false; n];
        self.rank = (0..n as u32).collect();
        self.order = (0..n as u32).map(TaskId).collect();
        self.moving = vec![None; n];
        self.eff = v.tasks.to_vec();
        self.wide = v.tasks.to_vec();
        let fq = self.sw.fq;
        self.may_fast = v
            .tasks
            .iter()
            .map(|tv| {
                let declared_slow =
                    v.domains[tv.domain.idx()].fast_vcpus.as_ref().is_some_and(|f| !f.contains(&tv.vcpu));
                !(fq.power_saving && fq.aware_guests && declared_slow)
            })
            .collect();
        for i in 0..n {
            self.refresh(v, TaskId(i as u32));
        }
        through!(self, eff, v, |ev| self.cr.init(&ev));
    }

    fn wake(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        let i = t.idx();
        let fresh = !self.cr.is_queued(t) && !v.curr.contains(&Some(t)) && !self.cr.is_parked(t);
        if fresh && self.sw.fast_never_idle && !self.granted[i] && self.may_fast[i] {
            if let Some(c) = self.idle_fast_cpu(v, v.tasks[i].affinity, self.cr.cpu_of(t)) {
                self.borrowed[i] = true;
                self.refresh(v, t);
                self.cr.place(t, c);
            }
        }
        through!(self, eff, v, |ev| self.cr.wake(&ev, t, fx));
        self.rebalance(v, fx, None);
    }

    fn block(&mut self, v: &SysView, t: TaskId, cpu: CpuId, fx: &mut Effects) {
        through!(self, eff, v, |ev| self.cr.block(&ev, t, cpu, fx));
    }

    fn tick(&mut self, v: &SysView, cpu: CpuId, fx: &mut Effects) {
        if let Some(t) = v.curr[cpu.idx()] {
            self.burn_fast(t, v.now);
        }
        through!(self, eff, v, |ev| self.cr.tick(&ev, cpu, fx));
        if let Some(t) = v.curr[cpu.idx()] {
            let i = t.idx();
            if self.sw.fq.fair_sharing
                && self.fast.contains(cpu)
                && self.granted[i]
                && self.fbudget[i] <= 0
                && self.moving[i].is_none()
                && self.incoming[cpu.idx()].is_none()
            {
                self.expire(v, t, cpu, fx);
            }
        }
        self.rebalance(v, fx, Some(cpu));
    }

    fn account(&mut self, v: &SysView, fx: &mut Effects) {
        for c in self.fast.iter().collect::<Vec<_>>() {
            if let Some(t) = v.curr[c.idx()] {
                self.burn_fast(t, v.now);
            }
        }
        through!(self, eff, v, |ev| self.cr.account(&ev, fx));
        self.next_acct = v.now + self.tslice;
        self.distribute(v, fx);
        self.rebalance(v, fx, None);
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
        let ci = cpu.idx();
        let is_fast = self.fast.contains(cpu);
        if let Some(p) = prev {
            let pi = p.idx();
            self.burn_fast(p, now);
            self.fast_since[pi] = None;
            // Ratelimit, as credit, unless AASH moves p or wants the CPU for a granted vCPU.
            let rl = self.cr.params().ratelimit;
            let runtime = now.saturating_sub(self.cr.run_since(p));
            if rl.0 > 0
                && prev_runnable
                && !self.cr.is_parked(p)
                && self.moving[pi].is_none()
                && self.eff[pi].affinity.contains(cpu)
                && self.incoming[ci].is_none()
                && runtime < rl
            {
                self.cr.burn(p, now);
                self.fast_since[pi] = is_fast.then_some(now);
                let slice = if runtime < MIN_TIMER { MIN_TIMER } else { rl - runtime };
                return Pick { task: Some(p), slice };
            }
            if let Some(dest) = self.moving[pi].take() {
                if !prev_runnable && self.incoming[dest.idx()] == Some(p) {
                    // It blocked before moving: free the reservation.
                    self.incoming[dest.idx()] = None;
                    if v.curr[dest.idx()].is_none() && self.cr.runq(dest).is_empty() && dest != cpu {
                        self.cr.set_idle(dest, true);
                    }
                }
            }
            if !prev_runnable && self.borrowed[pi] {
                self.borrowed[pi] = false;
                self.refresh(v, p);
            }
            through!(self, eff, v, |ev| self.cr.put_prev(&ev, cpu, p, prev_runnable, fx));
        }
        let mut next = None;
        if let Some(w) = self.incoming[ci].take() {
            if self.cr.is_queued(w) && self.cr.cpu_of(w) == cpu {
                self.cr.take_to_run(w);
                next = Some(w);
            }
        }
        if next.is_none() {
            let head = self.cr.runq_head(cpu);
            let head_pri = head.map(|t| self.cr.pri_of(t)).unwrap_or(PRI_IDLE);
            next = if head_pri > PRI_OVER {
                self.cr.take_to_run(head.expect("head"));
                head
            } else if let Some(s) = self.steal(v, cpu, head_pri, head.is_none()) {
                Some(s)
            } else if let Some(h) = head {
                self.cr.take_to_run(h);
                Some(h)
            } else {
                None
            };
        }
        self.cr.set_idle(cpu, next.is_none());
        if let Some(n) = next {
            self.cr.start_running(n, now);
            self.ran[n.idx()] = true;
            self.fast_since[n.idx()] = is_fast.then_some(now);
        }
        let mut curr = v.curr.to_vec();
        curr[ci] = next;
        let pv = SysView { now, topo: v.topo, tasks: v.tasks, domains: v.domains, curr: &curr };
        self.rebalance(&pv, fx, None);
        self.check(v, cpu, next);
        Pick { task: next, slice: if next.is_some() { self.tslice } else { Nanos::MAX } }
    }

    fn affinity_changed(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        self.refresh(v, t);
        through!(self, eff, v, |ev| self.cr.affinity_changed(&ev, t, fx));
        self.rebalance(v, fx, None);
    }

    fn domain_changed(&mut self, v: &SysView, d: DomainId, fx: &mut Effects) {
        through!(self, eff, v, |ev| self.cr.domain_changed(&ev, d, fx));
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let mut c = self.cr.counters();
        c.extend([
            ("fast_grants", self.stats.grants as f64),
            ("fast_swaps", self.stats.swaps as f64),
            ("fast_expiries", self.stats.expiries as f64),
            ("fast_fills", self.stats.fills as f64),
            ("fast_pulls", self.stats.pulls as f64),
            ("fast_kicks", self.stats.kicks as f64),
        ]);
        c
    }

    fn credit(&self, t: TaskId) -> Option<i64> {
        self.cr.credit(t)
    }

    fn runq_len(&self, cpu: CpuId) -> Option<u32> {
        self.cr.runq_len(cpu)
    }
}
