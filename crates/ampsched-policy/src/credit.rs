//! `credit` and `xen40`: the Xen credit scheduler (credit1), the baseline.
//!
//! Design (docs/design/credit.md; Xen `xen/common/sched/credit.c`, and `sched_credit.c`
//! of Xen 4.0 for the `xen40` profile):
//! - Each vCPU holds credits; 1 credit = 100 µs of running (10 credits/ms).
//!   Running burns credits exactly, with a sub-credit residual carried over
//!   (`xen40`: rounded to the nearest credit, remainder carried in the start
//!   time).
//! - Every accounting period (= the 30 ms timeslice) a pool of
//!   `300 × ncpus` credits is shared among *active* domains in proportion to
//!   weight × active vCPUs (`xen40`: weight once per domain), each domain
//!   capped at `300 × active vCPUs` (and by its cap), surplus handed on.
//!   Afterwards credit < 0 → OVER (clipped at −300; a capped vCPU below
//!   −cap is parked), credit ≥ 0 → UNDER, credit > 300 → leaves the active
//!   list with its credit halved (`xen40`: reset to 0).
//!   The accounting runs from one timer on the pool's first pCPU, the
//!   master (`master_ticker`, set up by `init_pdata`; re-armed `tslice` after
//!   `csched_acct` ran): [`Credit::account_cpu`], so a stalled master
//!   accounts late (the engine's stalls).
//! - A per-CPU tick (every slice / 3 = 10 ms) on a busy CPU burns credit,
//!   drops BOOST to UNDER and (re)activates the vCPU: only a tick that finds
//!   a vCPU running makes it active, so a vCPU that always blocks before a
//!   tick earns no credit. The tick may also move the vCPU to a better pCPU
//!   (an idle one in a less loaded memory domain: rule 10, without SMT):
//!   `csched_unit_acct` asks `_csched_cpu_pick` and, when the answer differs,
//!   flags the vCPU migrating and reschedules its pCPU; the move happens at
//!   that deschedule, with no BOOST ([`Credit::cpu_pick`], `put_prev`).
//! - `_csched_cpu_pick` ([`Credit::cpu_pick`]): keep the current pCPU if
//!   allowed, else the next allowed one; it counts as idle when the vCPU is
//!   the only one there (`is_runq_idle`); a busy choice gives way to the next
//!   idle pCPU of the idle mask, and another memory domain (Xen: socket) wins
//!   only with more than twice as many idle pCPUs.
//! - New vCPUs, in creation order (the scenario's domains in order, each
//!   domain's vCPUs by id): `sched_select_initial_cpu` (Xen 4.17
//!   `common/sched/core.c`) puts vCPU 0 on the first pCPU of its mask and
//!   vCPU i on the next pCPU after vCPU i−1's, and `csched_unit_insert` asks
//!   the same `_csched_cpu_pick` (all pCPUs idle at creation, so it keeps
//!   them). `xen40`: `XEN_DOMCTL_max_vcpus` (Xen 4.0 `common/domctl.c`) puts
//!   vCPU 0 on `default_vcpu0_location`'s least-populated pCPU (ties to the
//!   highest-numbered) and vCPU i after vCPU i−1's, with no pick at creation.
//!   So every domain's vCPU 0 starts on the first pCPU (current) and the
//!   first tick that finds another vCPU queued behind it moves it to an idle
//!   one: the placement is Xen's, not "vCPU i on pCPU i".
//! - Waking UNDER vCPUs become BOOST and are queued on the pCPU they last ran
//!   on; the waker tickles that pCPU if it is idle (or, with no idlers, if
//!   BOOST beats what runs there), else one idle pCPU in the vCPU's affinity,
//!   rotating (`xen40`: preempt when higher priority, and tickle all idlers,
//!   the own pCPU first: its softirq runs before an IPI'd idler looks for work,
//!   so the idler steals the vCPU the waker preempted). **The idlers' race**
//!   (`xen40`): Xen 4.0.1's `__runq_tickle` ORs every idler into one mask and
//!   `cpumask_raise_softirq` IPIs them together; whichever leaves `hlt` first
//!   and wins `csched_load_balance`'s trylock on the peer steals the queued
//!   vCPU, the others find nothing. Which one that is depends on wake-up
//!   latencies the model does not have, so the idlers' reschedules run in an
//!   order drawn from the run's seed (pCPU order rotated to a uniform start;
//!   stream `seed ^ IDLER_RACE_SALT`). Taking them in pCPU order instead let
//!   the lowest-numbered idler win every race, which kept an idling guest's
//!   vCPUs on pCPUs 0-1 (docs/design/calibration.md, "The idlers' race").
//!   Current Xen tickles one idler, rotating (`tickle_one_idle_cpu`, from
//!   Xen 4.1), so it has no race to draw.
//! - Runqueues are ordered by priority (BOOST > UNDER > OVER), FIFO within
//!   one; a pCPU whose head is OVER or that would idle steals the first
//!   strictly-higher-priority, not-running, allowed vCPU from a peer with
//!   more than one runnable vCPU, same NUMA node first, rotating the start
//!   (`xen40`: one pass from cpu+1). A chosen vCPU runs one full timeslice
//!   whatever its credit; ratelimit (1 ms) keeps a vCPU that ran less than
//!   that (`xen40`: no ratelimit).
//!
//! Invariants (debug-asserted after every pick, [`Credit::invariant_violation`]):
//! a vCPU is on at most one runqueue, on its own pCPU's, and never queued
//! while running or parked; `nr_runnable[c]` = queued + running on `c`; each
//! queue's priority bound is its best queued priority; each NUMA node counts
//! its steal candidates (overloaded, not idling; and of those with an
//! UNDER-or-better vCPU queued) right, so a steal skips empty nodes; each domain's active
//! count, the active-domain list and the total weight agree with the vCPUs
//! on the active list. **Credit conservation** (after every accounting,
//! [`AcctAudit::conserved`]): the active vCPUs receive at most the pool plus
//! last period's deficit, up to rounding (one credit per domain for its fair
//! share and its surplus, one per vCPU for the per-vCPU split), and all of it
//! when no domain is limited by its peak or cap; afterwards every active
//! vCPU's credit is within ±300 (one slice). A property test drives random
//! event sequences (wake, block, tick, accounting, reschedule, time) through
//! both profiles and checks all of these after every event.
//!
//! State is private: AASH and the co-schedulers use the narrow interface
//! below ("credit of", "set priority", "move between queues", "place",
//! "take to run" / "unpick"), each of which keeps the runqueues, counts and
//! bounds consistent, so the invariants are held by this file alone.
//!
//! Departure from the source, on purpose: the current Xen `burn_credits`
//! both advances `start_time` by the credited time and keeps a residual, so
//! the sub-credit remainder is charged twice; we charge it once (exact).

use crate::dispatcher::{Dispatcher, Effects, Pick, SysView};
use crate::params::{Kind, ParamDoc, ParamReader, PolicyError};
use ampsched_model::cpuset::{cycle_visit, MAX_CPUS};
use ampsched_model::spec::Params;
use ampsched_model::{CpuId, CpuSet, DomainId, Nanos, TaskId, Topology};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Words of a CPU bitmask.
const WORDS: usize = MAX_CPUS / 64;

/// Co-scheduling priority (BCS), above BOOST.
pub const PRI_COS: i8 = 1;
/// Time-share waking up.
pub const PRI_BOOST: i8 = 0;
/// Time-share with credits.
pub const PRI_UNDER: i8 = -1;
/// Time-share without credits.
pub const PRI_OVER: i8 = -2;
/// The idle vCPU.
pub const PRI_IDLE: i8 = -64;

/// Credits earned per millisecond of a period (Xen CSCHED_CREDITS_PER_MSEC).
pub const CREDITS_PER_MSEC: u64 = 10;
/// Default timeslice and accounting period: Xen's 30 ms.
pub const DEFAULT_TSLICE: Nanos = Nanos::from_ms(30);
/// Default ratelimit: Xen's 1000 µs minimum run before preemption.
pub const DEFAULT_RATELIMIT: Nanos = Nanos::from_us(1000);
/// Xen never sets a scheduling timer shorter than this (CSCHED_MIN_TIMER = 100 µs).
pub const MIN_TIMER: Nanos = Nanos::from_us(100);
/// Default vCPU migration delay: 0, as in Xen (no cache-hot check).
pub const DEFAULT_MIGRATION_DELAY: Nanos = Nanos::ZERO;

/// Which Xen's rules to follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// Current Xen (default).
    Current,
    /// Xen 4.0, as run by the seed papers (see module docs).
    Xen40,
}

/// Tunables of the credit scheduler.
#[derive(Clone, Debug)]
pub struct CreditParams {
    /// Timeslice = accounting period.
    pub tslice: Nanos,
    /// Minimum run before preemption (0 = off; always off in `xen40`).
    pub ratelimit: Nanos,
    /// Rule profile.
    pub profile: Profile,
    /// Let the tick move a running vCPU to a better pCPU (rule 10).
    pub tick_migrate: bool,
    /// A vCPU that ran this recently is cache-hot and not stolen.
    pub migration_delay: Nanos,
}

/// `tslice_ms`: the timeslice, which is also the accounting period.
pub const TSLICE: ParamDoc = ParamDoc {
    name: "tslice_ms",
    kind: Kind::Ms { default: DEFAULT_TSLICE, min: 1.0, max: 1000.0 },
    unit: "ms",
    doc: "timeslice and accounting period (Xen: 1..1000)",
};
/// `ratelimit_us`: the minimum run before preemption.
pub const RATELIMIT: ParamDoc = ParamDoc {
    name: "ratelimit_us",
    kind: Kind::Us { default: DEFAULT_RATELIMIT, min: 0.0, max: 500_000.0 },
    unit: "µs",
    doc: "minimum run before preemption; 0 = off (xen40: always off)",
};
/// `tick_migrate`: Xen rule 10 at the tick.
pub const TICK_MIGRATE: ParamDoc = ParamDoc {
    name: "tick_migrate",
    kind: Kind::Bool { default: true },
    unit: "",
    doc: "tick may move a running vCPU to an idle pCPU in a less loaded memory domain",
};
/// `migration_delay_us`: the cache-hot window of stealing.
pub const MIGRATION_DELAY: ParamDoc = ParamDoc {
    name: "migration_delay_us",
    kind: Kind::Us { default: DEFAULT_MIGRATION_DELAY, min: 0.0, max: 1_000_000.0 },
    unit: "µs",
    doc: "a vCPU that ran within this time is cache-hot and not stolen",
};

/// The tunables of `credit` / `xen40` (and of the co-schedulers built on it).
pub const CREDIT_PARAMS: &[ParamDoc] = &[TSLICE, RATELIMIT, TICK_MIGRATE, MIGRATION_DELAY];

impl CreditParams {
    /// Defaults for a profile.
    pub fn defaults(profile: Profile) -> CreditParams {
        CreditParams {
            tslice: DEFAULT_TSLICE,
            ratelimit: if profile == Profile::Xen40 { Nanos::ZERO } else { DEFAULT_RATELIMIT },
            profile,
            tick_migrate: TICK_MIGRATE.default_bool(),
            migration_delay: DEFAULT_MIGRATION_DELAY,
        }
    }

    /// Read from scenario parameters.
    pub fn from_params(
        policy: &str,
        profile: Profile,
        params: &Params,
        docs: &'static [ParamDoc],
    ) -> Result<CreditParams, PolicyError> {
        let xen40 = profile == Profile::Xen40;
        let r = ParamReader::new(policy, params, docs)?;
        let tslice = r.duration(&TSLICE)?;
        // xen40 has no ratelimit: a value given is checked, the default is 0.
        let ratelimit = if xen40 && !r.is_set(&RATELIMIT) { Nanos::ZERO } else { r.duration(&RATELIMIT)? };
        if ratelimit > tslice {
            return Err(PolicyError { param: "ratelimit_us".into(), msg: "must not exceed the timeslice".into() });
        }
        Ok(CreditParams {
            tslice,
            ratelimit: if xen40 { Nanos::ZERO } else { ratelimit },
            profile,
            tick_migrate: r.bool(&TICK_MIGRATE)?,
            migration_delay: r.duration(&MIGRATION_DELAY)?,
        })
    }

    /// Ticks per timeslice: 3, or 1 when the slice is shorter than 3 ms (Xen).
    pub fn ticks_per_tslice(&self) -> u64 {
        if self.tslice < Nanos::from_ms(3) {
            1
        } else {
            3
        }
    }
}

/// Per-vCPU scheduler state (Xen `struct csched_unit`). Private: other
/// policies read and change it only through [`Credit`]'s methods.
#[derive(Clone, Debug)]
struct Vcpu {
    /// Credit balance.
    credit: i32,
    residual: u64,
    /// Charged up to here while running.
    start: Nanos,
    /// When it was last picked (for ratelimit).
    run_since: Nanos,
    /// When it last stopped running (for the cache-hot check).
    last_sched: Nanos,
    /// On its domain's active list.
    active: bool,
    /// A better pCPU chosen at tick: move there at the next deschedule.
    migrate_to: Option<CpuId>,
}

/// The per-vCPU state that wake-ups, runqueue edits, tickles and steals
/// read, 8 bytes apart from [`Vcpu`]'s times and credit, so that a queue scan
/// or a steal reads one small record per vCPU and the rest stays cold.
#[derive(Clone, Copy, Debug)]
struct Hot {
    /// Its pCPU (runqueue it is or will be on).
    cpu: CpuId,
    /// Its priority (`PRI_*`).
    pri: i8,
    /// On a runqueue.
    on_runq: bool,
    /// Runnable as far as the scheduler knows.
    runnable: bool,
    /// Parked: over its cap, not runnable until credit ≥ 0.
    parked: bool,
}

/// Counters reported in results.
#[derive(Clone, Debug, Default)]
pub struct CreditStats {
    /// vCPUs taken from a peer's runqueue.
    pub steals: u64,
    /// vCPUs moved by the tick's placement check.
    pub tick_migrations: u64,
    /// BOOSTs granted on wake.
    pub boosts: u64,
    /// Accounting periods run.
    pub accountings: u64,
}

/// The credit scheduler's state (Xen `struct csched_private` and friends).
pub struct Credit {
    /// Tunables.
    p: CreditParams,
    name: &'static str,
    credits_per_tslice: i32,
    /// The tick period, `tslice / ticks_per_tslice` (asked at every busy start).
    tick: Nanos,
    /// Per task.
    vc: Vec<Vcpu>,
    /// Per task its pCPU, priority and queue state ([`Hot`]), apart from `vc`
    /// so that runqueue scans, wake-ups and steals read 8 bytes per vCPU.
    hot: Vec<Hot>,
    dom_active: Vec<u32>,
    dom_weight: Vec<u32>,
    dom_cap: Vec<u32>,
    dom_listed: Vec<bool>,
    active_doms: Vec<DomainId>,
    /// Per CPU: queued vCPUs, highest priority first.
    runq: Vec<Vec<TaskId>>,
    /// Per CPU: its counts, bound, flags, memory domain and node in one small
    /// record ([`CpuSt`]), so a steal or a count change reads one line for a peer.
    cpu: Vec<CpuSt>,
    runq_sort_last: Vec<u32>,
    runq_sort: u32,
    /// Scratch of `runq_sort` (kept to reuse its allocation).
    sort_scratch: Vec<TaskId>,
    /// Scratch of the accounting: the active domains as the period began.
    acct_doms: Vec<DomainId>,
    /// pCPUs idling (and not yet tickled); change only through `set_idle`.
    idlers: CpuSet,
    /// Number of idlers per memory domain (kept in step with `idlers`).
    idle_per_md: Vec<u32>,
    /// Number of idlers in all (kept in step with `idlers`): "any idler?" without a scan.
    nidle: u32,
    /// The steal candidates (overloaded, not idling), and of those the ones
    /// with an UNDER-or-better vCPU queued (the peers worth a look for a pCPU
    /// whose own best is OVER), as bitmaps (CPU `c` at bit `c % 64` of word
    /// `c / 64`) kept in step with the flags.
    cand: [[u64; WORDS]; 2],
    /// Per NUMA node, how many of its pCPUs are in each `cand` set; and as
    /// bitmaps over nodes, the nodes where that count is not 0. Kept in step
    /// by `sync` (once per operation and pCPU touched), so a steal visits only the
    /// nodes with something to give, not every node.
    node_cand: Vec<[u32; 2]>,
    nodes_with: [Vec<u64>; 2],
    /// Per NUMA node, where its CPU bitmap lies (`node_mask`) and where its
    /// next steal starts (`balance_bias`): one small record read per node visited.
    node_span: Vec<NodeSpan>,
    /// The NUMA nodes' CPU bitmaps, each only the words its CPUs occupy.
    node_mask: Vec<u64>,
    weight_total: u64,
    credit_pool: u32,
    credit_balance: i32,
    last_tickle: CpuId,
    /// `xen40`: which of the idlers one wake-up IPIs reaches the runqueues first
    /// ([`Credit::tickle`]); seeded from the run's seed ([`IDLER_RACE_SALT`]).
    race: ChaCha8Rng,
    /// Words of the machine's CPU bitmasks (`ncpus / 64`, rounded up): the
    /// steal, tickle and pick masks are combined word by word, never built as sets.
    nw: usize,
    /// Counters.
    stats: CreditStats,
    /// What the last accounting handed out (checked for conservation).
    last_acct: AcctAudit,
}

/// Salt of the idler race's stream (`seed ^ IDLER_RACE_SALT`), apart from the
/// simulator's and from `fair`'s placement stream.
pub const IDLER_RACE_SALT: u64 = 0x1d1e_7ace;

/// `flags` bit: more than one runnable vCPU (Xen: a peer worth stealing from).
const F_OVERLOADED: u8 = 1;
/// `flags` bit: idling (in `idlers`).
const F_IDLE: u8 = 2;
/// `flags` bit: an UNDER-or-better vCPU is queued (`q_hi ≥ PRI_UNDER`).
const F_Q_UNDER: u8 = 4;

/// Per flags value, its steal candidacy: bit 0 a candidate (overloaded, not
/// idling), bit 1 a candidate with an UNDER-or-better vCPU queued.
const CAND: [u8; 8] = {
    let mut t = [0u8; 8];
    let mut f = 0;
    while f < 8 {
        let c = (f as u8) & (F_OVERLOADED | F_IDLE) == F_OVERLOADED;
        t[f] = c as u8 | ((c && (f as u8) & F_Q_UNDER != 0) as u8) << 1;
        f += 1;
    }
    t
};

/// The small per-pCPU state read together by steals, wake-ups and count changes.
#[derive(Clone, Copy, Debug)]
struct CpuSt {
    /// vCPUs runnable here: queued plus the one running.
    nr: u32,
    /// Its memory domain.
    md: u16,
    /// Its NUMA node.
    node: u16,
    /// The highest priority of its queued vCPUs (`PRI_IDLE` when none): a
    /// steal skips a peer that has no better vCPU without touching its queue.
    /// Exact: raised on every insert and every raise of a queued vCPU's
    /// priority, recomputed when the highest leaves the queue or a queued
    /// vCPU's priority is lowered.
    q_hi: i8,
    /// [`F_OVERLOADED`], [`F_IDLE`] and [`F_Q_UNDER`]: one byte tells whether
    /// the pCPU is a steal candidate. What the candidate bitmaps hold: brought
    /// in line with `nr`, `q_hi` and `idle` by `sync` at the end of each operation.
    flags: u8,
    /// Idling (in `idlers`).
    idle: bool,
}

/// Where a NUMA node's CPU bitmap lies and where its next steal starts.
#[derive(Clone, Copy, Debug)]
struct NodeSpan {
    /// First word of the machine's bitmasks its CPUs occupy.
    lo: u16,
    /// How many words from `lo`.
    n: u16,
    /// Its words' offset in `node_mask`.
    off: u32,
    /// Xen `balance_bias`: the peer its last steal took from (the next starts after it).
    bias: CpuId,
}

/// One accounting period's books (Xen `csched_acct`): what the pool held and
/// what the active vCPUs received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AcctAudit {
    /// Credits to share: the pool (`300 × ncpus` at 30 ms), plus last period's deficit.
    pub total: i64,
    /// Credits the active vCPUs received in all.
    pub handed: i64,
    /// Upper bound of what rounding may add: per domain, its fair share and
    /// its surplus are rounded up once each and its per-vCPU share once per vCPU.
    pub rounding: i64,
    /// Part of the pool may go unclaimed: some domain's fair share exceeded
    /// its peak or cap, or no domain was active.
    pub limited: bool,
}

impl AcctAudit {
    /// Credit conservation: accounting never hands out more than the pool
    /// (up to rounding), and hands out all of it when no domain is limited.
    pub fn conserved(&self) -> bool {
        self.handed <= self.total + self.rounding && (self.limited || self.handed >= self.total)
    }
}

impl Credit {
    /// A credit scheduler for `topo`.
    pub fn new(name: &'static str, p: CreditParams, topo: &Topology) -> Credit {
        let n = topo.ncpus();
        let credits_per_tslice = (CREDITS_PER_MSEC * p.tslice.0 / 1_000_000) as i32;
        let mut c = Credit {
            name,
            credits_per_tslice,
            tick: p.tslice / p.ticks_per_tslice(),
            vc: Vec::new(),
            hot: Vec::new(),
            dom_active: Vec::new(),
            dom_weight: Vec::new(),
            dom_cap: Vec::new(),
            dom_listed: Vec::new(),
            active_doms: Vec::new(),
            runq: vec![Vec::new(); n],
            cpu: topo
                .cpus
                .iter()
                .map(|c| CpuSt {
                    nr: 0,
                    md: c.mem_domain as u16,
                    node: c.numa as u16,
                    q_hi: PRI_IDLE,
                    flags: F_IDLE,
                    idle: true,
                })
                .collect(),
            runq_sort_last: vec![0; n],
            runq_sort: 0,
            sort_scratch: Vec::new(),
            acct_doms: Vec::new(),
            idlers: topo.all,
            idle_per_md: topo.mem_domains.iter().map(|s| s.len() as u32).collect(),
            nidle: n as u32,
            cand: [[0; WORDS]; 2],
            node_cand: vec![[0; 2]; topo.numa_nodes.len().max(1)],
            nodes_with: [0, 1].map(|_| vec![0u64; topo.numa_nodes.len().max(1).div_ceil(64)]),
            node_span: Vec::new(),
            node_mask: Vec::new(),
            weight_total: 0,
            credit_pool: credits_per_tslice as u32 * n as u32,
            credit_balance: 0,
            last_tickle: CpuId(0),
            race: ChaCha8Rng::seed_from_u64(IDLER_RACE_SALT),
            nw: n.div_ceil(64).max(1),
            stats: CreditStats::default(),
            last_acct: AcctAudit::default(),
            p,
        };
        for set in &topo.numa_nodes {
            let nw = c.nw;
            let lo = (0..nw).find(|&i| set.word(i) != 0).unwrap_or(0);
            let hi = (0..nw).rev().find(|&i| set.word(i) != 0).unwrap_or(0).max(lo);
            let off = c.node_mask.len() as u32;
            c.node_mask.extend((lo..=hi).map(|i| set.word(i)));
            let bias = set.first().unwrap_or(CpuId(0));
            c.node_span.push(NodeSpan { lo: lo as u16, n: (hi - lo + 1) as u16, off, bias });
        }
        c
    }

    /// Credits handed out per vCPU-timeslice (300 at 30 ms).
    pub fn credits_per_tslice(&self) -> i32 {
        self.credits_per_tslice
    }

    // ---- The narrow interface for the policies built on credit (AASH, the
    // co-schedulers) and for tests. Reads are free; every change goes through
    // a method that keeps the runqueues, counts and bounds consistent. ----

    /// The tunables.
    pub fn params(&self) -> &CreditParams {
        &self.p
    }

    /// The counters.
    pub fn stats(&self) -> &CreditStats {
        &self.stats
    }

    /// The books of the last accounting period.
    pub fn last_accounting(&self) -> AcctAudit {
        self.last_acct
    }

    /// `t`'s credit balance.
    pub fn credit_of(&self, t: TaskId) -> i32 {
        self.vc[t.idx()].credit
    }

    /// `t`'s priority (`PRI_*`).
    pub fn pri_of(&self, t: TaskId) -> i8 {
        self.hot[t.idx()].pri
    }

    /// `t`'s pCPU: where it runs, is queued, or will be queued when it wakes.
    pub fn cpu_of(&self, t: TaskId) -> CpuId {
        self.hot[t.idx()].cpu
    }

    /// `t` waits in its pCPU's runqueue.
    pub fn is_queued(&self, t: TaskId) -> bool {
        self.hot[t.idx()].on_runq
    }

    /// `t` is over its cap and not runnable until its credit is positive again.
    pub fn is_parked(&self, t: TaskId) -> bool {
        self.hot[t.idx()].parked
    }

    /// `t` is runnable as far as the scheduler knows (woken and not blocked; it may be parked).
    pub fn is_runnable(&self, t: TaskId) -> bool {
        self.hot[t.idx()].runnable
    }

    /// `t` is on its domain's active list (earns credit at accounting).
    pub fn is_active(&self, t: TaskId) -> bool {
        self.vc[t.idx()].active
    }

    /// The vCPUs queued on `cpu`, highest priority first.
    pub fn runq(&self, cpu: CpuId) -> &[TaskId] {
        &self.runq[cpu.idx()]
    }

    /// vCPUs runnable on `cpu`: queued there plus the one running there.
    pub fn nr_runnable(&self, cpu: CpuId) -> u32 {
        self.cpu[cpu.idx()].nr
    }

    /// The pCPUs idling (and not yet tickled).
    pub fn idlers(&self) -> CpuSet {
        self.idlers
    }

    /// Set `t`'s priority (BOOST, COS, or back), keeping its runqueue ordered
    /// and the queue's priority bound exact if it is queued.
    pub fn set_pri(&mut self, t: TaskId, pri: i8) {
        debug_assert!([PRI_COS, PRI_BOOST, PRI_UNDER, PRI_OVER].contains(&pri), "priority {pri} of {t}");
        if self.hot[t.idx()].pri == pri {
            return;
        }
        let queued = self.hot[t.idx()].on_runq;
        if queued {
            self.runq_remove_raw(t);
        }
        self.hot[t.idx()].pri = pri;
        if queued {
            self.runq_insert_raw(t);
            self.sync(self.hot[t.idx()].cpu);
        }
    }

    /// Move queued `t` to `cpu`'s runqueue (counted there instead; no tickle,
    /// see [`Credit::tickle`]).
    pub fn move_queued(&mut self, t: TaskId, cpu: CpuId) {
        debug_assert!(self.hot[t.idx()].on_runq, "{t} moved between queues but not queued");
        if self.hot[t.idx()].cpu != cpu {
            self.runq_remove(t);
            self.hot[t.idx()].cpu = cpu;
            self.runq_insert(t);
        }
    }

    /// Choose the pCPU of `t`, neither queued nor running: it is queued there when it wakes.
    pub fn place(&mut self, t: TaskId, cpu: CpuId) {
        debug_assert!(!self.hot[t.idx()].on_runq, "{t} placed while queued");
        self.hot[t.idx()].cpu = cpu;
    }

    /// Queue runnable `t` (neither queued nor running) on its pCPU and count
    /// it there, with no BOOST and no tickle (Xen `runq_insert`; [`Dispatcher::wake`]
    /// is the full wake-up).
    pub fn enqueue(&mut self, t: TaskId) {
        self.hot[t.idx()].runnable = true;
        self.runq_insert(t);
    }

    /// Put `t`, just taken off its pCPU's queue to run ([`Credit::take_to_run`]),
    /// back at its place in that queue; it stays counted there.
    pub fn unpick(&mut self, t: TaskId) {
        self.runq_insert_raw(t);
        self.sync(self.hot[t.idx()].cpu);
    }

    /// Mark a pCPU idle or not, keeping the per-memory-domain counts.
    pub fn set_idle(&mut self, cpu: CpuId, idle: bool) {
        if self.mark_idle(cpu, idle) {
            self.sync(cpu);
        }
    }

    /// [`Credit::set_idle`] without the candidacy update (a [`Credit::sync`] of
    /// `cpu` follows); whether its idleness changed.
    #[inline]
    fn mark_idle(&mut self, cpu: CpuId, idle: bool) -> bool {
        let st = &mut self.cpu[cpu.idx()];
        if st.idle == idle {
            return false;
        }
        st.idle = idle;
        let md = st.md as usize;
        if idle {
            self.idlers.insert(cpu);
            self.idle_per_md[md] += 1;
            self.nidle += 1;
        } else {
            self.idlers.remove(cpu);
            self.idle_per_md[md] -= 1;
            self.nidle -= 1;
        }
        true
    }

    /// Bring `cpu`'s flags in line with its count, queue bound and idleness,
    /// updating the candidate bitmaps and node counts where its candidacy
    /// changed. The primitives that change those (`mark_idle`, the count and
    /// queue edits) leave this to one call at the end of each operation, so a
    /// switch or a steal updates a pCPU's candidacy once, not once per edit.
    #[inline(always)]
    fn sync(&mut self, cpu: CpuId) {
        let st = &mut self.cpu[cpu.idx()];
        let was = st.flags;
        let now = if st.idle { F_IDLE } else { 0 }
            | if st.nr > 1 { F_OVERLOADED } else { 0 }
            | if st.q_hi >= PRI_UNDER { F_Q_UNDER } else { 0 };
        if now != was {
            self.set_flags(cpu, now);
        }
    }

    /// Whether a CPU with `flags` is a steal candidate (overloaded, not idling),
    /// and one with an UNDER-or-better vCPU queued.
    #[inline]
    fn candidate(flags: u8) -> [bool; 2] {
        let c = CAND[flags as usize & 7];
        [c & 1 != 0, c & 2 != 0]
    }

    /// Change `cpu`'s flags to `now`, updating the candidate bitmaps, its
    /// node's counts and the node bitmaps where its candidacy changed.
    #[inline(never)]
    fn set_flags(&mut self, cpu: CpuId, now: u8) {
        let st = &mut self.cpu[cpu.idx()];
        let diff = CAND[st.flags as usize & 7] ^ CAND[now as usize & 7];
        st.flags = now;
        self.flip_candidacy(cpu, diff);
    }

    /// `cpu`'s candidacy changed in the sets of the bits of `diff`: flip its
    /// bit there and count it in or out of its node. Without a branch on the
    /// data (which set changed, in or out, the node's first or last): these
    /// flip at random in a run, and a mispredicted branch costs more than the
    /// few instructions that write both sets whatever changed.
    #[inline]
    fn flip_candidacy(&mut self, cpu: CpuId, diff: u8) {
        let c = cpu.idx();
        let n = self.cpu[c].node as usize;
        let (w, bit, nw, nbit) = (c / 64, c % 64, n / 64, n % 64);
        for k in 0..2 {
            let m = u64::from((diff >> k) & 1);
            let word = &mut self.cand[k][w];
            *word ^= m << bit;
            // +1 if it came in, -1 if it left, 0 if unchanged: m · (2·in − 1).
            let now_in = ((*word >> bit) & 1) as u32;
            let cnt = &mut self.node_cand[n][k];
            *cnt = cnt.wrapping_add((m as u32).wrapping_mul((2 * now_in).wrapping_sub(1)));
            let nodes = &mut self.nodes_with[k][nw];
            *nodes = (*nodes & !(1u64 << nbit)) | (u64::from(*cnt != 0) << nbit);
        }
    }

    /// One more vCPU runnable on `cpu` (a `sync` follows).
    #[inline]
    fn inc_nr(&mut self, cpu: CpuId) {
        self.cpu[cpu.idx()].nr += 1;
    }
    /// One vCPU fewer runnable on `cpu` (a `sync` follows).
    #[inline]
    fn dec_nr(&mut self, cpu: CpuId) {
        let st = &mut self.cpu[cpu.idx()];
        debug_assert!(st.nr >= 1, "nr_runnable underflow on {cpu}");
        st.nr = st.nr.saturating_sub(1);
    }

    /// Xen `__runq_insert`: before the first vCPU of strictly lower priority
    /// (a `sync` of its pCPU follows).
    fn runq_insert_raw(&mut self, t: TaskId) {
        let h = self.hot[t.idx()];
        debug_assert!(!h.on_runq, "{t} queued twice");
        let (cpu, pri) = (h.cpu, h.pri);
        let hot = &self.hot;
        let q = &mut self.runq[cpu.idx()];
        let pos = q.iter().position(|o| pri > hot[o.idx()].pri).unwrap_or(q.len());
        // Queues are short (under one vCPU waiting on average): shift the
        // tail by one in a plain loop rather than a `memmove` call.
        q.push(t);
        let mut i = q.len() - 1;
        while i > pos {
            q[i] = q[i - 1];
            i -= 1;
        }
        q[pos] = t;
        self.hot[t.idx()].on_runq = true;
        self.raise_q_hi(cpu, pri);
    }

    /// Raise `cpu`'s queue bound to `pri` if higher (a `sync` follows).
    #[inline]
    fn raise_q_hi(&mut self, cpu: CpuId, pri: i8) {
        let st = &mut self.cpu[cpu.idx()];
        if pri > st.q_hi {
            st.q_hi = pri;
        }
    }

    /// Set `cpu`'s queue bound to the highest priority queued there (a `sync` follows).
    fn refresh_q_hi(&mut self, cpu: CpuId) {
        let hot = &self.hot;
        let hi = self.runq[cpu.idx()].iter().map(|t| hot[t.idx()].pri).max().unwrap_or(PRI_IDLE);
        self.cpu[cpu.idx()].q_hi = hi;
    }

    /// Xen `runq_insert`: queue and count as runnable on its pCPU.
    fn runq_insert(&mut self, t: TaskId) {
        self.runq_insert_raw(t);
        let cpu = self.hot[t.idx()].cpu;
        self.inc_nr(cpu);
        self.sync(cpu);
    }

    /// Take `t` off its pCPU's runqueue (a `sync` of that pCPU follows).
    fn runq_remove_raw(&mut self, t: TaskId) {
        let cpu = self.hot[t.idx()].cpu;
        let pos = self.runq[cpu.idx()].iter().position(|o| *o == t).expect("vCPU on its runqueue");
        self.runq_remove_at(cpu, pos);
    }

    /// Take the vCPU at `pos` off `cpu`'s runqueue (its own pCPU's; a `sync` follows).
    fn runq_remove_at(&mut self, cpu: CpuId, pos: usize) {
        let q = &mut self.runq[cpu.idx()];
        // Short queues: shift by swaps rather than a `memmove` call.
        for i in pos + 1..q.len() {
            q.swap(i - 1, i);
        }
        let t = q.pop().expect("a vCPU at pos");
        if q.is_empty() {
            self.cpu[cpu.idx()].q_hi = PRI_IDLE;
        } else if self.hot[t.idx()].pri == self.cpu[cpu.idx()].q_hi {
            self.refresh_q_hi(cpu);
        }
        self.hot[t.idx()].on_runq = false;
    }

    /// Xen `runq_remove`: dequeue and stop counting it on its pCPU.
    fn runq_remove(&mut self, t: TaskId) {
        self.runq_remove_raw(t);
        let cpu = self.hot[t.idx()].cpu;
        self.dec_nr(cpu);
        self.sync(cpu);
    }

    /// Charge run time since the last charge.
    pub fn burn(&mut self, t: TaskId, now: Nanos) {
        let xen40 = self.p.profile == Profile::Xen40;
        let v = &mut self.vc[t.idx()];
        if now <= v.start {
            return;
        }
        let delta = (now - v.start).0;
        if xen40 {
            let credits = (delta * CREDITS_PER_MSEC + 500_000) / 1_000_000;
            v.credit -= credits as i32;
            v.start += Nanos(credits * 1_000_000 / CREDITS_PER_MSEC);
        } else {
            let val = delta * CREDITS_PER_MSEC + v.residual;
            v.residual = val % 1_000_000;
            v.credit -= (val / 1_000_000) as i32;
            v.start = now;
        }
    }

    fn acct_start(&mut self, v: &SysView, t: TaskId) {
        if self.vc[t.idx()].active {
            return;
        }
        let d = v.tasks[t.idx()].domain.idx();
        self.vc[t.idx()].active = true;
        self.dom_active[d] += 1;
        if self.p.profile == Profile::Xen40 {
            if self.dom_active[d] == 1 {
                self.weight_total += self.dom_weight[d] as u64;
            }
        } else {
            self.weight_total += self.dom_weight[d] as u64;
        }
        if !self.dom_listed[d] {
            self.dom_listed[d] = true;
            self.active_doms.insert(0, DomainId(d as u32));
        }
    }

    fn acct_stop(&mut self, v: &SysView, t: TaskId) {
        debug_assert!(self.vc[t.idx()].active);
        let d = v.tasks[t.idx()].domain.idx();
        self.vc[t.idx()].active = false;
        self.dom_active[d] -= 1;
        if self.p.profile == Profile::Xen40 {
            if self.dom_active[d] == 0 {
                self.weight_total -= self.dom_weight[d] as u64;
            }
        } else {
            self.weight_total -= self.dom_weight[d] as u64;
        }
        if self.dom_active[d] == 0 {
            self.dom_listed[d] = false;
            self.active_doms.retain(|x| x.idx() != d);
        }
    }

    /// Xen `__runq_tickle`: which pCPUs must reschedule for newly queued `t`.
    pub fn tickle(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        let cpu = self.hot[t.idx()].cpu;
        let new_pri = self.hot[t.idx()].pri;
        let cur_pri = v.curr[cpu.idx()].map(|c| self.hot[c.idx()].pri).unwrap_or(PRI_IDLE);
        let aff = &v.tasks[t.idx()].affinity;
        if self.p.profile == Profile::Xen40 {
            // `cpumask_raise_softirq` marks SCHEDULE_SOFTIRQ pending on every pCPU of the mask
            // and sends the others an event-check IPI: `t`'s own pCPU, where the wake-up is
            // handled, runs `schedule()` on its way out of the interrupt, before an idler woken
            // from `hlt` by the IPI looks for work. So the own pCPU reschedules first: it takes
            // `t` and queues the vCPU it preempted, which the idlers then steal
            // (`csched_load_balance`) — how a busy pCPU's vCPU reaches an idle one in Xen 4.0.
            if new_pri > cur_pri {
                fx.resched(cpu);
            }
            if cur_pri > PRI_IDLE {
                let first = fx.resched.len();
                for c in self.idlers.and(aff).iter() {
                    if c != cpu {
                        fx.resched(c);
                    }
                }
                // The idlers race: one IPI reaches them all at once, and whichever leaves `hlt`
                // first takes the queued vCPU (`csched_load_balance` trylocks the peer), so the
                // engine's order of their reschedules is drawn, uniform over the idlers.
                let n = fx.resched.len() - first;
                if n > 1 {
                    let r = self.race.gen_range(0..n);
                    fx.resched[first..].rotate_left(r);
                }
            }
            return;
        }
        // At most one pCPU is tickled (Xen's mask holds one).
        let mut tickled = None;
        if cur_pri == PRI_IDLE || (self.nidle == 0 && new_pri > cur_pri) {
            tickled = Some(cpu);
        } else if self.nidle != 0 {
            // The next idler after the last one tickled, in `t`'s affinity.
            let mut suitable = [0u64; WORDS];
            for (i, w) in suitable[..self.nw].iter_mut().enumerate() {
                *w = self.idlers.word(i) & aff.word(i);
            }
            match cycle_visit(&suitable[..self.nw], self.last_tickle, |_| true) {
                None => {
                    if new_pri > cur_pri {
                        tickled = Some(cpu);
                    }
                }
                Some(c) => {
                    self.last_tickle = c;
                    tickled = Some(c);
                }
            }
        }
        if let Some(c) = tickled {
            self.set_idle(c, false);
            fx.resched(c);
        }
    }

    /// Xen `_csched_cpu_pick` without SMT: keep `t`'s pCPU unless it is busy
    /// and an idle one exists in its memory domain, or another memory domain
    /// has more than twice as many idle pCPUs. **xen40**: `t`'s pCPU always
    /// counts as idle, and another memory domain wins with more idle pCPUs.
    pub fn cpu_pick(&self, v: &SysView, t: TaskId) -> CpuId {
        let topo = v.topo;
        let aff = &v.tasks[t.idx()].affinity;
        let here = self.hot[t.idx()].cpu;
        let mut cpu = if aff.contains(here) { here } else { aff.cycle(here).unwrap_or(here) };
        if self.nidle == 0 {
            return cpu;
        }
        // `here` counts as idle when only t would run there (Xen `is_runq_idle`). Xen 4.0
        // counts it idle whatever waits there (`cpu_set(cpu, idlers)` before the scan), so
        // within one memory domain (equal idle siblings, no SMT) a vCPU never moves, and a
        // domain is left for another with strictly more idlers (`weight_cpu < weight_nxt`;
        // the "twice as many" factor came later).
        let xen40 = self.p.profile == Profile::Xen40;
        let bonus = cpu == here && (xen40 || self.runq[here.idx()].is_empty()) && !self.idlers.contains(here);
        let factor = if xen40 { 1 } else { 2 };
        let idle_in = |m: usize, c: CpuId| {
            self.idle_per_md[m] + (bonus && self.cpu[here.idx()].md as usize == m && c == here) as u32
        };
        let md = |c: CpuId| self.cpu[c.idx()].md as usize;
        // Same memory domain: an idle pCPU beats a busy one.
        let cpu_idle = self.idlers.contains(cpu) || (bonus && cpu == here);
        // The next idler after `c` in `t`'s affinity and memory domain `m` (`cycle`).
        let next_idle_in = |m: usize, c: CpuId| {
            let mut w = [0u64; WORDS];
            for (i, x) in w[..self.nw].iter_mut().enumerate() {
                *x = self.idlers.word(i) & aff.word(i) & topo.mem_domains[m].word(i);
            }
            cycle_visit(&w[..self.nw], c, |_| true)
        };
        if !cpu_idle {
            if let Some(c) = next_idle_in(md(cpu), cpu) {
                cpu = c;
            }
        }
        // Other memory domains, in cyclic order: move when twice as idle.
        let nmd = topo.mem_domains.len();
        let start = md(cpu);
        for k in 1..nmd {
            let m = (start + k) % nmd;
            let other = self.idle_per_md[m];
            if other == 0 || idle_in(md(cpu), cpu) * factor >= other {
                continue;
            }
            if let Some(c) = next_idle_in(m, cpu) {
                cpu = c;
            }
        }
        cpu
    }

    /// Where Xen puts the vCPUs of newly created domains, in creation order
    /// (the scenario's domain order, each domain's vCPUs by id). `Current`:
    /// `sched_select_initial_cpu` (vCPU 0 on the first pCPU of its mask,
    /// vCPU i on the next pCPU after vCPU i−1's, cyclically), then
    /// `csched_unit_insert` asks [`Credit::cpu_pick`] for a better (idle) one.
    /// `Xen40`: `XEN_DOMCTL_max_vcpus` puts vCPU 0 on
    /// `default_vcpu0_location`'s least-populated pCPU and vCPU i after vCPU
    /// i−1's, with no pick at creation (4.0's `csched_vcpu_init` has none).
    fn place_new_vcpus(&mut self, v: &SysView) {
        let mut per_cpu = vec![0u32; v.topo.ncpus()];
        for d in v.domains {
            let mut prev: Option<CpuId> = None;
            for &t in &d.tasks {
                let aff = &v.tasks[t.idx()].affinity;
                let first = aff.first().unwrap_or(CpuId(0));
                let cpu = match prev {
                    Some(p) => aff.cycle(p).unwrap_or(first),
                    None if self.p.profile == Profile::Xen40 => least_populated(*aff, &per_cpu).unwrap_or(first),
                    None => first,
                };
                self.hot[t.idx()].cpu = cpu;
                if self.p.profile == Profile::Current {
                    let c = self.cpu_pick(v, t);
                    self.hot[t.idx()].cpu = c;
                }
                let c = self.hot[t.idx()].cpu;
                per_cpu[c.idx()] += 1;
                prev = Some(c);
            }
        }
    }

    /// Xen `csched_runq_sort`: UNDER (and better) before OVER, stable.
    fn runq_sort(&mut self, cpu: CpuId) {
        if self.runq_sort_last[cpu.idx()] == self.runq_sort {
            return;
        }
        self.runq_sort_last[cpu.idx()] = self.runq_sort;
        let hot = &self.hot;
        let q = &mut self.runq[cpu.idx()];
        // A stable partition with no allocation: the OVER vCPUs set aside in order.
        let over = &mut self.sort_scratch;
        over.clear();
        q.retain(|&t| {
            let keep = hot[t.idx()].pri >= PRI_UNDER;
            if !keep {
                over.push(t);
            }
            keep
        });
        q.extend_from_slice(over);
    }

    /// Xen `csched_load_balance`: steal the first strictly-higher-priority,
    /// not-running, allowed vCPU from a busy peer.
    ///
    /// The candidates are the peers with more than one runnable vCPU, not
    /// idling, and (when `cpu`'s own best is OVER) with an UNDER-or-better
    /// vCPU queued: their bitmaps are combined a word at a time per NUMA node
    /// and visited in `cycle` order, so a steal touches only peers that may
    /// have something to give, with no set built.
    pub fn steal(&mut self, v: &SysView, cpu: CpuId, pri: i8) -> Option<TaskId> {
        // Only a peer with an UNDER-or-better vCPU queued can have one better than OVER.
        let k = (pri >= PRI_OVER) as usize;
        // Where to steal is found first, reading only; then the one vCPU is moved.
        let (peer, pos, t) = if self.p.profile == Profile::Xen40 {
            // One pass over the workers from cpu + 1.
            let nw = self.nw;
            let mut workers = [0u64; WORDS];
            workers[..nw].copy_from_slice(&self.cand[k][..nw]);
            workers[cpu.idx() / 64] &= !(1u64 << (cpu.idx() % 64));
            self.steal_visit(v, &workers[..nw], 0, cpu, cpu, pri)?
        } else {
            self.steal_by_node(v, k, cpu, pri)?
        };
        Some(self.steal_take(peer, pos, t, cpu))
    }

    /// The current profile's search: the nodes with a candidate in the set
    /// `k`, from `cpu`'s own node on, cyclically (`cycle` after the node
    /// before it); in each, the peers from the node's bias on. The node where
    /// the vCPU is found has its bias moved to that peer.
    fn steal_by_node(&mut self, v: &SysView, k: usize, cpu: CpuId, pri: i8) -> Option<(CpuId, usize, TaskId)> {
        let nnodes = self.node_cand.len();
        let node = self.cpu[cpu.idx()].node as usize;
        let before = CpuId(if node == 0 { nnodes - 1 } else { node - 1 } as u32);
        // `cpu` itself is never a peer.
        let (own_w, own_bit) = (cpu.idx() / 64, 1u64 << (cpu.idx() % 64));
        let mut got = None;
        let n = cycle_visit(&self.nodes_with[k], before, |n| {
            let sp = self.node_span[n.idx()];
            let (lo, len, off) = (sp.lo as usize, sp.n as usize, sp.off as usize);
            // The node's peers, as words `lo..lo + len`: visited from the bias on
            // (all of them in order when the bias lies outside these words).
            let (base, span) = (lo * 64, len * 64);
            let b = sp.bias.idx();
            let from = if b >= base && b < base + span { b - base } else { span - 1 };
            let cand = &self.cand[k];
            got = if len == 1 {
                // One word (a node of up to 64 pCPUs, aligned): no mask built.
                let own = if own_w == lo { own_bit } else { 0 };
                self.steal_word(v, cand[lo] & self.node_mask[off] & !own, base, from, cpu, pri)
            } else {
                let mut w = [0u64; WORDS];
                for (j, x) in w[..len].iter_mut().enumerate() {
                    *x = cand[lo + j] & self.node_mask[off + j];
                }
                if (lo..lo + len).contains(&own_w) {
                    w[own_w - lo] &= !own_bit;
                }
                self.steal_visit(v, &w[..len], base, CpuId(from as u32), cpu, pri)
            };
            got.is_some()
        })?;
        let got = got?;
        self.node_span[n.idx()].bias = got.0;
        Some(got)
    }

    /// [`Credit::steal_visit`] over one word: the peers of `bits` (CPU `base + i`
    /// at bit `i`) after bit `from`, then those up to it (`cycle_visit`'s order).
    #[inline]
    fn steal_word(
        &self,
        v: &SysView,
        bits: u64,
        base: usize,
        from: usize,
        cpu: CpuId,
        pri: i8,
    ) -> Option<(CpuId, usize, TaskId)> {
        let start = if from >= 63 { 0 } else { from + 1 };
        let low = (1u64 << start) - 1;
        for mut b in [bits & !low, bits & low] {
            while b != 0 {
                let peer = CpuId((base + b.trailing_zeros() as usize) as u32);
                if self.cpu[peer.idx()].q_hi > pri {
                    if let Some((pos, t)) = self.steal_find(v, peer, cpu, pri) {
                        return Some((peer, pos, t));
                    }
                }
                b &= b - 1;
            }
        }
        None
    }

    /// Try the peers of the bitmask `peers` (CPU `base + i` at bit `i`) in
    /// `cycle` order after `from` (relative to `base`), those whose queue
    /// bound beats `pri`: the first vCPU `cpu` may steal, from whom and where
    /// it stands in that peer's queue.
    fn steal_visit(
        &self,
        v: &SysView,
        peers: &[u64],
        base: usize,
        from: CpuId,
        cpu: CpuId,
        pri: i8,
    ) -> Option<(CpuId, usize, TaskId)> {
        let mut got = None;
        let peer = cycle_visit(peers, from, |p| {
            let peer = CpuId((base + p.idx()) as u32);
            if self.cpu[peer.idx()].q_hi > pri {
                got = self.steal_find(v, peer, cpu, pri);
            }
            got.is_some()
        })?;
        got.map(|(pos, t)| (CpuId((base + peer.idx()) as u32), pos, t))
    }

    /// The vCPU `cpu` may steal from `peer` (Xen `csched_runq_steal`), and its
    /// place in `peer`'s queue: among the vCPUs better than `pri` at the head
    /// of the queue (Xen stops at the first one not better), the first allowed
    /// on `cpu` and not cache-hot.
    fn steal_find(&self, v: &SysView, peer: CpuId, cpu: CpuId, pri: i8) -> Option<(usize, TaskId)> {
        // An idle peer is about to pick from its own queue: leave it alone.
        v.curr[peer.idx()]?;
        let now = v.now;
        let hot_window = self.p.migration_delay;
        for (pos, &t) in self.runq[peer.idx()].iter().enumerate() {
            if self.hot[t.idx()].pri <= pri {
                // Nothing better at the head: the bound is exact, so this happens
                // only in a queue not re-sorted since an accounting.
                return None;
            }
            let hot = hot_window.0 > 0 && now.saturating_sub(self.vc[t.idx()].last_sched) < hot_window;
            if !hot && v.tasks[t.idx()].affinity.contains(cpu) {
                return Some((pos, t));
            }
        }
        None
    }

    /// Move `t`, at `pos` in `peer`'s queue, to `cpu` (counted there, not
    /// queued: it runs next). `peer` is synced; `cpu` is left to the caller's `sync`.
    fn steal_take(&mut self, peer: CpuId, pos: usize, t: TaskId, cpu: CpuId) -> TaskId {
        self.runq_remove_at(peer, pos);
        self.dec_nr(peer);
        self.sync(peer);
        self.hot[t.idx()].cpu = cpu;
        self.inc_nr(cpu);
        self.stats.steals += 1;
        t
    }

    fn steal_from(&mut self, v: &SysView, peer: CpuId, cpu: CpuId, pri: i8) -> Option<TaskId> {
        let (pos, t) = self.steal_find(v, peer, cpu, pri)?;
        let t = self.steal_take(peer, pos, t, cpu);
        self.sync(cpu);
        Some(t)
    }

    /// Queue a runnable vCPU that is not running and not queued, on its pCPU
    /// (moved into its affinity if needed), and tickle.
    pub fn enqueue_and_tickle(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        let aff = &v.tasks[t.idx()].affinity;
        if !aff.contains(self.hot[t.idx()].cpu) {
            let c = self.cpu_pick(v, t);
            self.hot[t.idx()].cpu = c;
        }
        self.runq_insert(t);
        self.tickle(v, t, fx);
    }

    /// The head of `cpu`'s runqueue.
    pub fn runq_head(&self, cpu: CpuId) -> Option<TaskId> {
        self.runq[cpu.idx()].first().copied()
    }

    /// Pick per Xen `csched_schedule` once `prev` has been handled: the head
    /// if better than OVER, else steal, else the head, else idle.
    pub fn pick_from_queues(&mut self, v: &SysView, cpu: CpuId) -> Option<TaskId> {
        let head = self.runq_head(cpu);
        let head_pri = head.map(|t| self.hot[t.idx()].pri).unwrap_or(PRI_IDLE);
        let next = if head_pri > PRI_OVER {
            self.runq_remove_at(cpu, 0);
            head
        } else if let Some(s) = self.steal(v, cpu, head_pri) {
            Some(s)
        } else if head.is_some() {
            self.runq_remove_at(cpu, 0);
            head
        } else {
            None
        };
        self.mark_idle(cpu, next.is_none());
        self.sync(cpu);
        next
    }

    /// Put `prev` (just descheduled from `cpu`) back: on the local queue, on
    /// another pCPU (tick migration or affinity), or nowhere (blocked/parked).
    pub fn put_prev(&mut self, v: &SysView, cpu: CpuId, prev: TaskId, prev_runnable: bool, fx: &mut Effects) {
        let now = v.now;
        self.burn(prev, now);
        self.vc[prev.idx()].last_sched = now;
        self.hot[prev.idx()].runnable = prev_runnable;
        let migrate_to = self.vc[prev.idx()].migrate_to.take();
        if !prev_runnable || self.hot[prev.idx()].parked {
            self.dec_nr(cpu);
            self.sync(cpu);
        } else if migrate_to.is_some_and(|c| c != cpu) || !v.tasks[prev.idx()].affinity.contains(cpu) {
            // vcpu_migrate: leave this pCPU, queue on the new one, no BOOST.
            self.dec_nr(cpu);
            self.sync(cpu);
            let dest = match migrate_to {
                Some(c) if v.tasks[prev.idx()].affinity.contains(c) => c,
                _ => self.cpu_pick(v, prev),
            };
            self.hot[prev.idx()].cpu = dest;
            self.stats.tick_migrations += migrate_to.is_some() as u64;
            self.runq_insert(prev);
            self.tickle(v, prev, fx);
        } else {
            self.runq_insert_raw(prev);
            self.sync(cpu);
        }
    }

    /// Hook (AASH): move `t` to `cpu` at its next deschedule, like the tick's migration.
    pub fn set_migrate_to(&mut self, t: TaskId, cpu: Option<CpuId>) {
        self.vc[t.idx()].migrate_to = cpu;
    }

    /// Hook (AASH): when `t` was last picked (for ratelimit).
    pub fn run_since(&self, t: TaskId) -> Nanos {
        self.vc[t.idx()].run_since
    }

    /// Hook (AASH): take queued `t` off its pCPU's runqueue to run it there (stays counted).
    pub fn take_to_run(&mut self, t: TaskId) {
        self.runq_remove_raw(t);
        self.sync(self.hot[t.idx()].cpu);
    }

    /// Hook (AASH): try to steal from one peer (see `steal`).
    pub fn steal_one(&mut self, v: &SysView, peer: CpuId, cpu: CpuId, pri: i8) -> Option<TaskId> {
        self.steal_from(v, peer, cpu, pri)
    }

    /// Hook (AASH): debug-check the runqueue invariants with `v.curr` as what runs.
    pub fn assert_invariants(&self, v: &SysView) {
        self.check_invariants(v);
    }

    /// Mark `t` as now running on `cpu` from `now`.
    pub fn start_running(&mut self, t: TaskId, now: Nanos) {
        let vc = &mut self.vc[t.idx()];
        vc.start = now;
        vc.run_since = now;
    }

    fn check_invariants(&self, v: &SysView) {
        if !cfg!(debug_assertions) {
            return;
        }
        if let Some(e) = self.invariant_violation(v) {
            panic!("credit invariant broken at {:?}: {e}", v.now);
        }
    }

    /// The first broken invariant, with `v.curr` as what runs, or `None`.
    /// Runqueues: a vCPU is on at most one runqueue, never queued while
    /// running or parked, queued on its own pCPU; each queue's priority bound
    /// is its best queued priority; `nr_runnable` = queued + running; each NUMA node's
    /// steal-candidate counts and bits agree with the sets. Accounting state:
    /// each domain's active count is its vCPUs on the active list, the
    /// active-domain list holds exactly the domains with an active vCPU, and
    /// the total weight is theirs (× active vCPUs, `xen40`: once per domain).
    pub fn invariant_violation(&self, v: &SysView) -> Option<String> {
        let mut queued = 0usize;
        for (c, q) in self.runq.iter().enumerate() {
            let cpu = CpuId(c as u32);
            let st = self.cpu[c];
            let f = st.flags;
            let bit = |on: bool, flag: u8| if on { flag } else { 0 };
            let want = bit(st.nr > 1, F_OVERLOADED)
                | bit(self.idlers.contains(cpu), F_IDLE)
                | bit(st.q_hi >= PRI_UNDER, F_Q_UNDER);
            if f != want || st.idle != self.idlers.contains(cpu) {
                return Some(format!("flags of cpu{c} are {f:#x} (idle {}), its state says {want:#x}", st.idle));
            }
            let cand = Self::candidate(f);
            let in_set = |k: usize| self.cand[k][c / 64] >> (c % 64) & 1 == 1;
            if cand != [in_set(0), in_set(1)] {
                return Some(format!("cpu{c} is a steal candidate {cand:?} but not in the candidate bitmaps"));
            }
            let running = v.curr[c].is_some() as u32;
            if st.nr != q.len() as u32 + running {
                return Some(format!("nr_runnable of cpu{c} is {}, queued {} + running {running}", st.nr, q.len()));
            }
            let hi = q.iter().map(|t| self.hot[t.idx()].pri).max().unwrap_or(PRI_IDLE);
            if st.q_hi != hi {
                return Some(format!("cpu{c}'s queue bound is {} but its best queued priority is {hi}", st.q_hi));
            }
            for t in q {
                let vc = &self.hot[t.idx()];
                if vc.cpu.idx() != c || !vc.on_runq {
                    return Some(format!("{t} queued on cpu{c} but its pCPU is {} (on_runq {})", vc.cpu, vc.on_runq));
                }
                if v.curr.contains(&Some(*t)) {
                    return Some(format!("{t} queued while running"));
                }
                if vc.parked {
                    return Some(format!("{t} queued while parked"));
                }
            }
            queued += q.len();
        }
        if self.nidle as usize != self.idlers.len() {
            return Some(format!("{} idlers counted, {} in the set", self.nidle, self.idlers.len()));
        }
        let mut cand = vec![[0u32; 2]; self.node_cand.len()];
        for c in 0..self.runq.len() {
            let [a, b] = Self::candidate(self.cpu[c].flags);
            let n = self.cpu[c].node as usize;
            cand[n][0] += a as u32;
            cand[n][1] += b as u32;
        }
        for (n, k) in cand.iter().enumerate() {
            for (j, &count) in k.iter().enumerate() {
                let bit = self.nodes_with[j][n / 64] >> (n % 64) & 1 == 1;
                if self.node_cand[n][j] != count || bit != (count > 0) {
                    return Some(format!("node {n} counts {:?} steal candidates, has {k:?}", self.node_cand[n]));
                }
            }
        }
        let flagged = self.hot.iter().filter(|x| x.on_runq).count();
        if flagged != queued {
            return Some(format!("{flagged} vCPUs flagged queued, {queued} queue entries"));
        }
        let mut active = vec![0u32; self.dom_active.len()];
        for (i, x) in self.vc.iter().enumerate() {
            active[v.tasks[i].domain.idx()] += x.active as u32;
        }
        let xen40 = self.p.profile == Profile::Xen40;
        let mut weight = 0u64;
        for (d, &n) in active.iter().enumerate() {
            if self.dom_active[d] != n {
                return Some(format!("domain {d} counts {} active vCPUs, has {n}", self.dom_active[d]));
            }
            let listed = self.active_doms.iter().filter(|x| x.idx() == d).count();
            if self.dom_listed[d] != (n > 0) || listed != (n > 0) as usize {
                return Some(format!("domain {d} with {n} active vCPUs is listed {listed} times"));
            }
            if n > 0 {
                weight += self.dom_weight[d] as u64 * if xen40 { 1 } else { n as u64 };
            }
        }
        if weight != self.weight_total {
            return Some(format!("total weight {} but the active domains weigh {weight}", self.weight_total));
        }
        None
    }

    /// Xen `csched_acct`: share the credit pool among active domains.
    fn do_account(&mut self, v: &SysView, fx: &mut Effects) {
        self.stats.accountings += 1;
        let cpt = self.credits_per_tslice as i64;
        let xen40 = self.p.profile == Profile::Xen40;
        let weight_total = self.weight_total as i64;
        let mut credit_total = self.credit_pool as i64;
        if self.credit_balance < 0 {
            credit_total -= self.credit_balance as i64;
        }
        if weight_total == 0 {
            self.credit_balance = 0;
            // No active domain: the pool goes unclaimed.
            self.last_acct = AcctAudit { total: credit_total, limited: true, ..AcctAudit::default() };
            return;
        }
        let mut audit = AcctAudit { total: credit_total, ..AcctAudit::default() };
        let mut weight_left = weight_total;
        let mut credit_balance: i64 = 0;
        let mut credit_xtra = false;
        // The list as the period began (the loop reorders it and drops domains).
        let mut doms = std::mem::take(&mut self.acct_doms);
        doms.clear();
        doms.extend_from_slice(&self.active_doms);
        for &d in &doms {
            let di = d.idx();
            let active = self.dom_active[di] as i64;
            let weight = self.dom_weight[di] as i64;
            let cap = self.dom_cap[di] as i64;
            let dom_w = if xen40 { weight } else { weight * active };
            weight_left -= dom_w;
            let mut credit_peak = active * cpt;
            if self.credit_balance < 0 {
                credit_peak += ((-(self.credit_balance as i64)) * dom_w + (weight_total - 1)) / weight_total;
            }
            let mut credit_cap = 0i64;
            if cap != 0 {
                credit_cap = (cap * cpt + 99) / 100;
                if credit_cap < credit_peak {
                    credit_peak = credit_cap;
                }
                credit_cap = (credit_cap + (active - 1)) / active;
            }
            let mut credit_fair = (credit_total * dom_w + (weight_total - 1)) / weight_total;
            audit.rounding += active + 1;
            audit.limited |= credit_fair > credit_peak;
            if credit_fair < credit_peak {
                credit_xtra = true;
            } else {
                if weight_left != 0 {
                    credit_total += ((credit_fair - credit_peak) * weight_total + (weight_left - 1)) / weight_left;
                }
                if credit_xtra {
                    // keep domains with extra credits at the head of the list
                    self.active_doms.retain(|x| *x != d);
                    self.active_doms.insert(0, d);
                }
                credit_fair = credit_peak;
            }
            let per_vcpu = ((credit_fair + (active - 1)) / active) as i32;
            for &t in &v.domains[di].tasks {
                if !self.vc[t.idx()].active {
                    continue;
                }
                let vc = &mut self.vc[t.idx()];
                vc.credit += per_vcpu;
                audit.handed += per_vcpu as i64;
                let mut credit = vc.credit;
                let h = self.hot[t.idx()];
                let (was, queued, cpu) = (h.pri, h.on_runq, h.cpu);
                if credit < 0 {
                    self.hot[t.idx()].pri = PRI_OVER;
                    if queued && was > PRI_OVER {
                        self.refresh_q_hi(cpu);
                        self.sync(cpu);
                    }
                    if cap != 0 && credit < -(credit_cap as i32) && !self.hot[t.idx()].parked {
                        self.hot[t.idx()].parked = true;
                        self.park(v, t, fx);
                    }
                    let vc = &mut self.vc[t.idx()];
                    if credit < -self.credits_per_tslice {
                        credit = -self.credits_per_tslice;
                        vc.credit = credit;
                    }
                } else {
                    self.hot[t.idx()].pri = PRI_UNDER;
                    if queued && was > PRI_UNDER {
                        self.refresh_q_hi(cpu);
                        self.sync(cpu);
                    } else if queued {
                        self.raise_q_hi(cpu, PRI_UNDER);
                        self.sync(cpu);
                    }
                    if self.hot[t.idx()].parked {
                        self.hot[t.idx()].parked = false;
                        self.unpark(v, t, fx);
                    }
                    if credit > self.credits_per_tslice {
                        self.acct_stop(v, t);
                        credit = if xen40 { 0 } else { credit / 2 };
                        self.vc[t.idx()].credit = credit;
                    }
                }
                credit_balance += credit as i64;
            }
        }
        self.acct_doms = doms;
        self.credit_balance = credit_balance.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
        self.runq_sort = self.runq_sort.wrapping_add(1);
        self.last_acct = audit;
        debug_assert!(audit.conserved(), "credit not conserved by accounting: {audit:?}");
        debug_assert!(
            self.vc
                .iter()
                .filter(|x| x.active)
                .all(|x| (-self.credits_per_tslice..=self.credits_per_tslice).contains(&x.credit)),
            "an active vCPU left accounting with credit outside ±{}",
            self.credits_per_tslice
        );
    }

    fn park(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        let cpu = self.hot[t.idx()].cpu;
        if v.curr[cpu.idx()] == Some(t) {
            fx.resched(cpu);
        } else if self.hot[t.idx()].on_runq {
            self.runq_remove(t);
        }
    }

    fn unpark(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        let h = self.hot[t.idx()];
        if h.runnable && !h.on_runq && v.curr[h.cpu.idx()] != Some(t) {
            self.enqueue_and_tickle(v, t, fx);
        }
    }
}

/// Xen 4.0 `default_vcpu0_location` without SMT: start from the first pCPU
/// of `mask`, then walk the others in order and take each whose vCPU count
/// is at most the current choice's, so the least-populated pCPU wins and a
/// tie goes to the highest-numbered one.
fn least_populated(mask: CpuSet, per_cpu: &[u32]) -> Option<CpuId> {
    let mut it = mask.iter();
    let mut cpu = it.next()?;
    for i in it {
        if per_cpu[i.idx()] <= per_cpu[cpu.idx()] {
            cpu = i;
        }
    }
    Some(cpu)
}

impl Dispatcher for Credit {
    fn name(&self) -> &'static str {
        self.name
    }

    fn tick_period(&self) -> Nanos {
        self.tick
    }

    fn account_period(&self) -> Nanos {
        self.p.tslice
    }

    fn account_cpu(&self) -> Option<CpuId> {
        // `csched_acct` runs from `master_ticker` on the pool's first pCPU (`init_pdata`).
        Some(CpuId(0))
    }

    fn seed(&mut self, seed: u64) {
        self.race = ChaCha8Rng::seed_from_u64(seed ^ IDLER_RACE_SALT);
    }

    fn init(&mut self, v: &SysView) {
        self.vc = v
            .tasks
            .iter()
            .map(|_| Vcpu {
                credit: 0,
                residual: 0,
                start: Nanos::ZERO,
                run_since: Nanos::ZERO,
                last_sched: Nanos::ZERO,
                active: false,
                migrate_to: None,
            })
            .collect();
        self.hot = v
            .tasks
            .iter()
            .map(|tv| Hot {
                cpu: tv.affinity.first().unwrap_or(CpuId(0)),
                pri: PRI_UNDER,
                on_runq: false,
                runnable: false,
                parked: false,
            })
            .collect();
        self.place_new_vcpus(v);
        let nd = v.domains.len();
        self.dom_active = vec![0; nd];
        self.dom_listed = vec![false; nd];
        self.dom_weight = v.domains.iter().map(|d| d.weight.max(1)).collect();
        self.dom_cap = v.domains.iter().map(|d| d.cap).collect();
    }

    fn wake(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        let h = &mut self.hot[t.idx()];
        h.runnable = true;
        debug_assert!(!v.curr.contains(&Some(t)), "{t} woken while running");
        if h.on_runq || h.parked {
            return;
        }
        if h.pri == PRI_UNDER {
            h.pri = PRI_BOOST;
            self.stats.boosts += 1;
        }
        self.enqueue_and_tickle(v, t, fx);
    }

    fn block(&mut self, _v: &SysView, t: TaskId, _cpu: CpuId, _fx: &mut Effects) {
        self.hot[t.idx()].runnable = false;
    }

    fn tick(&mut self, v: &SysView, cpu: CpuId, fx: &mut Effects) {
        if let Some(t) = v.curr[cpu.idx()] {
            // csched_unit_acct
            if self.hot[t.idx()].pri == PRI_BOOST {
                self.hot[t.idx()].pri = PRI_UNDER;
            }
            self.burn(t, v.now);
            if !self.vc[t.idx()].active {
                self.acct_start(v, t);
            } else if self.p.tick_migrate {
                let new_cpu = self.cpu_pick(v, t);
                if new_cpu != cpu {
                    self.vc[t.idx()].migrate_to = Some(new_cpu);
                    fx.resched(cpu);
                }
            }
        }
        self.runq_sort(cpu);
    }

    fn account(&mut self, v: &SysView, fx: &mut Effects) {
        self.do_account(v, fx);
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
        if let Some(p) = prev {
            // Ratelimit: keep a runnable vCPU that has run for less than it.
            let vc = &self.vc[p.idx()];
            let runtime = now.saturating_sub(vc.run_since);
            if self.p.ratelimit.0 > 0
                && prev_runnable
                && runtime < self.p.ratelimit
                && !self.hot[p.idx()].parked
                && vc.migrate_to.is_none()
                && v.tasks[p.idx()].affinity.contains(cpu)
            {
                self.burn(p, now);
                let slice = if runtime < MIN_TIMER { MIN_TIMER } else { self.p.ratelimit - runtime };
                return Pick { task: Some(p), slice };
            }
            self.put_prev(v, cpu, p, prev_runnable, fx);
        }
        let next = self.pick_from_queues(v, cpu);
        if let Some(t) = next {
            self.start_running(t, now);
        }
        let pick = Pick { task: next, slice: if next.is_some() { self.p.tslice } else { Nanos::MAX } };
        // Check invariants with the pick already "running" on cpu.
        if cfg!(debug_assertions) {
            let mut curr = v.curr.to_vec();
            curr[cpu.idx()] = next;
            let view = SysView { now, topo: v.topo, tasks: v.tasks, domains: v.domains, curr: &curr };
            self.check_invariants(&view);
        }
        pick
    }

    fn affinity_changed(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        let aff = &v.tasks[t.idx()].affinity;
        let cpu = self.hot[t.idx()].cpu;
        if aff.contains(cpu) {
            return;
        }
        if v.curr[cpu.idx()] == Some(t) {
            // Running where it may no longer run: deschedule, requeue elsewhere.
            fx.resched(cpu);
        } else if self.hot[t.idx()].on_runq {
            self.runq_remove(t);
            let c = self.cpu_pick(v, t);
            self.hot[t.idx()].cpu = c;
            self.runq_insert(t);
            self.tickle(v, t, fx);
        } else {
            let c = self.cpu_pick(v, t);
            self.hot[t.idx()].cpu = c;
        }
    }

    fn domain_changed(&mut self, v: &SysView, d: DomainId, _fx: &mut Effects) {
        let di = d.idx();
        let new_w = v.domains[di].weight.max(1);
        if self.dom_listed[di] {
            let old = self.dom_weight[di] as u64;
            let k = if self.p.profile == Profile::Xen40 { 1 } else { self.dom_active[di] as u64 };
            self.weight_total = self.weight_total - old * k + new_w as u64 * k;
        }
        self.dom_weight[di] = new_w;
        self.dom_cap[di] = v.domains[di].cap;
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("steals", self.stats.steals as f64),
            ("tick_migrations", self.stats.tick_migrations as f64),
            ("boosts", self.stats.boosts as f64),
            ("accountings", self.stats.accountings as f64),
        ]
    }

    fn credit(&self, t: TaskId) -> Option<i64> {
        self.vc.get(t.idx()).map(|v| v.credit as i64)
    }

    fn runq_len(&self, cpu: CpuId) -> Option<u32> {
        self.runq.get(cpu.idx()).map(|q| q.len() as u32)
    }
}

#[cfg(test)]
mod tests {
    //! Worked examples driving the credit scheduler directly, hook by hook.
    use super::*;

    use crate::testkit::World;

    fn credit(w: &World) -> Credit {
        let mut c = Credit::new("credit", CreditParams::defaults(Profile::Current), &w.topo);
        c.init(&w.view(Nanos::ZERO));
        c
    }

    /// A machine of `ncpus` CPUs; one domain per `(weight, cap, vcpus)`.
    fn world(ncpus: usize, doms: &[(u32, u32, u32)]) -> World {
        let mut w = World::new(ncpus, &vec![256; doms.len()]);
        w.tasks.clear();
        for (d, &(weight, cap, n)) in doms.iter().enumerate() {
            let dom = &mut w.domains[d];
            (dom.weight, dom.cap) = (weight, cap);
            dom.tasks.clear();
            for k in 0..n {
                dom.tasks.push(TaskId(w.tasks.len() as u32));
                w.tasks.push(crate::dispatcher::TaskView { domain: DomainId(d as u32), vcpu: k, affinity: w.topo.all });
            }
        }
        w
    }

    #[test]
    fn new_vcpus_start_where_sched_select_initial_cpu_puts_them() {
        // Domains of 2, 3 and 1 vCPUs on 4 idle CPUs, created in that order.
        // vCPU 0 → the first CPU of its mask, vCPU i → the CPU after vCPU i−1's;
        // every CPU idle, so csched_unit_insert's pick keeps it:
        // d0: 0, 1; d1: 0, 1, 2; d2: 0.
        let w = world(4, &[(256, 0, 2), (256, 0, 3), (256, 0, 1)]);
        let c = credit(&w);
        let cpus: Vec<u32> = (0..6).map(|t| c.cpu_of(TaskId(t)).0).collect();
        assert_eq!(cpus, vec![0, 1, 0, 1, 2, 0]);
        // With d1 confined to CPUs {2, 3}: vCPU 0 → 2, vCPU 1 → 3, vCPU 2 → 2 (cyclic).
        let mut w = world(4, &[(256, 0, 2), (256, 0, 3), (256, 0, 1)]);
        for t in 2..5 {
            w.tasks[t].affinity = CpuSet::from_cpus([CpuId(2), CpuId(3)]);
        }
        let c = credit(&w);
        let cpus: Vec<u32> = (0..6).map(|t| c.cpu_of(TaskId(t)).0).collect();
        assert_eq!(cpus, vec![0, 1, 2, 3, 2, 0]);
    }

    #[test]
    fn xen40_puts_vcpu0_on_the_least_populated_cpu_highest_on_a_tie() {
        // Xen 4.0 default_vcpu0_location, same three domains on 4 CPUs:
        // d0.v0: counts [0,0,0,0] → tie → CPU 3; d0.v1 → after 3 → CPU 0. Counts [1,0,0,1].
        // d1.v0: from CPU 0 (1): CPU 1 (0 ≤ 1), CPU 2 (0 ≤ 0), not CPU 3 (1 > 0) → CPU 2;
        //        v1 → 3, v2 → 0. Counts [2,0,1,2].
        // d2.v0: from CPU 0 (2): CPU 1 (0 ≤ 2); not 2 (1 > 0), not 3 (2 > 0) → CPU 1.
        let w = world(4, &[(256, 0, 2), (256, 0, 3), (256, 0, 1)]);
        let mut c = Credit::new("xen40", CreditParams::defaults(Profile::Xen40), &w.topo);
        c.init(&w.view(Nanos::ZERO));
        let cpus: Vec<u32> = (0..6).map(|t| c.cpu_of(TaskId(t)).0).collect();
        assert_eq!(cpus, vec![3, 0, 2, 3, 0, 1]);
    }

    #[test]
    fn the_tick_moves_a_running_vcpu_off_a_shared_cpu_to_an_idle_one() {
        // Two single-vCPU domains on 2 CPUs both start on CPU 0 (vCPU 0 of each).
        let mut w = World::new(2, &[256, 256]);
        let mut c = credit(&w);
        let (a, b) = (TaskId(0), TaskId(1));
        assert_eq!((c.cpu_of(a), c.cpu_of(b)), (CpuId(0), CpuId(0)));
        // Both wake at 0: queued on CPU 0, which is idle, so only CPU 0 is tickled.
        let mut fx = Effects::default();
        c.wake(&w.view(Nanos::ZERO), a, &mut fx);
        c.wake(&w.view(Nanos::ZERO), b, &mut fx);
        assert_eq!(fx.resched, vec![CpuId(0), CpuId(0)]);
        let p = c.pick_next(&w.view(Nanos::ZERO), CpuId(0), None, false, &mut Effects::default());
        assert_eq!(p.task, Some(a));
        w.curr[0] = Some(a);
        // First tick (10 ms): A was not active, so csched_unit_acct only starts its accounting.
        let mut fx = Effects::default();
        c.tick(&w.view(Nanos::from_ms(10)), CpuId(0), &mut fx);
        assert!(fx.resched.is_empty() && c.is_active(a));
        // Second tick (20 ms): B waits on CPU 0, so CPU 0 is not idle for A, and CPU 1
        // is: _csched_cpu_pick answers CPU 1, CPU 0 reschedules.
        c.tick(&w.view(Nanos::from_ms(20)), CpuId(0), &mut fx);
        assert_eq!(fx.resched, vec![CpuId(0)]);
        // The reschedule moves A to CPU 1 (tickled, no BOOST) and runs B on CPU 0.
        let mut fx = Effects::default();
        let p = c.pick_next(&w.view(Nanos::from_ms(20)), CpuId(0), Some(a), true, &mut fx);
        assert_eq!(p.task, Some(b));
        assert_eq!((c.cpu_of(a), c.runq(CpuId(1))), (CpuId(1), &[a][..]));
        assert_eq!(fx.resched, vec![CpuId(1)]);
        assert_eq!(c.stats().tick_migrations, 1);
        // Alone on CPU 1 with CPU 0 busy, A stays at the next tick (CPU 1 counts as idle for it).
        w.curr[0] = Some(b);
        let p = c.pick_next(&w.view(Nanos::from_ms(20)), CpuId(1), None, false, &mut Effects::default());
        assert_eq!(p.task, Some(a));
        w.curr[1] = Some(a);
        let mut fx = Effects::default();
        c.tick(&w.view(Nanos::from_ms(30)), CpuId(1), &mut fx);
        assert!(fx.resched.is_empty());
    }

    #[test]
    fn xen40_wake_on_a_busy_cpu_preempts_there_first_and_an_idler_steals_the_preempted() {
        // Xen 4.0 on 2 CPUs: guest vCPU A runs on CPU 1 (its wake-up BOOST dropped to UNDER
        // by the tick at 10 ms), CPU 0 idles. dom0's vCPU D, last on CPU 1, wakes at 15 ms:
        // UNDER → BOOST (0) > A's UNDER (−1), so `__runq_tickle`'s mask is {CPU 1 (preempt),
        // CPU 0 (an idler)}; CPU 1's softirq runs first.
        let mut w = world(2, &[(256, 0, 1), (256, 0, 1)]);
        let mut c = Credit::new("xen40", CreditParams::defaults(Profile::Xen40), &w.topo);
        c.init(&w.view(Nanos::ZERO));
        let (d, a) = (TaskId(0), TaskId(1));
        c.place(d, CpuId(1));
        c.place(a, CpuId(1));
        let mut fx = Effects::default();
        c.wake(&w.view(Nanos::ZERO), a, &mut fx);
        assert_eq!(c.pick_next(&w.view(Nanos::ZERO), CpuId(1), None, false, &mut fx).task, Some(a));
        w.curr[1] = Some(a);
        assert!(c.idlers().contains(CpuId(0)) && !c.idlers().contains(CpuId(1)));
        c.tick(&w.view(Nanos::from_ms(10)), CpuId(1), &mut Effects::default());
        assert_eq!(c.pri_of(a), PRI_UNDER);
        let now = Nanos::from_ms(15);
        let mut fx = Effects::default();
        c.wake(&w.view(now), d, &mut fx);
        assert_eq!(fx.resched, vec![CpuId(1), CpuId(0)]);
        // CPU 1 reschedules: D (BOOST) runs, A goes back to CPU 1's queue.
        let p = c.pick_next(&w.view(now), CpuId(1), Some(a), true, &mut Effects::default());
        assert_eq!(p.task, Some(d));
        w.curr[1] = Some(d);
        assert_eq!(c.runq(CpuId(1)), &[a][..]);
        // CPU 0, idle, finds nothing of its own and steals A (UNDER > IDLE) from CPU 1, which
        // has 2 runnable: the busy pCPU's vCPU reaches the idle one.
        let p = c.pick_next(&w.view(now), CpuId(0), None, false, &mut Effects::default());
        assert_eq!(p.task, Some(a));
        assert_eq!(c.cpu_of(a), CpuId(0));
        assert!(c.runq(CpuId(1)).is_empty());
    }

    #[test]
    fn xen40_an_idle_guest_vcpu_waking_behind_dom0_is_stolen_by_an_idler_and_stays_there() {
        // What re-places a vCPU of an idle guest under Xen 4.0 (calibration.md, "A booted
        // guest's idle time"): 4 CPUs of one memory domain, dom0's vCPU D and the guest's idle
        // vCPU G both last ran on CPU 1. D wakes at 0 (CPU 1 idle → tickled) and runs, BOOST.
        let mut w = world(4, &[(256, 0, 1), (256, 0, 1)]);
        let mut c = Credit::new("xen40", CreditParams::defaults(Profile::Xen40), &w.topo);
        c.init(&w.view(Nanos::ZERO));
        let (d, g) = (TaskId(0), TaskId(1));
        c.place(d, CpuId(1));
        c.place(g, CpuId(1));
        let mut fx = Effects::default();
        c.wake(&w.view(Nanos::ZERO), d, &mut fx);
        assert_eq!(fx.resched, vec![CpuId(1)]);
        assert_eq!(c.pick_next(&w.view(Nanos::ZERO), CpuId(1), None, false, &mut fx).task, Some(d));
        w.curr[1] = Some(d);
        // G's timer fires 10 µs later, inside D's 20 µs burst. `csched_vcpu_wake` queues it on
        // CPU 1 (no placement choice at wake-up) as BOOST, which does not beat D's BOOST: CPU 1
        // is not preempted; `__runq_tickle` (4.0) IPIs every idler: CPUs 0, 2, 3.
        let now = Nanos::from_us(10);
        let mut fx = Effects::default();
        c.wake(&w.view(now), g, &mut fx);
        assert_eq!(c.pri_of(g), PRI_BOOST);
        assert_eq!(c.runq(CpuId(1)), &[g][..]);
        // Which idler reschedules first is the race's draw ([`Credit::tickle`]): the three in
        // pCPU order, rotated.
        let rotation = |r: usize| {
            let mut v = vec![CpuId(0), CpuId(2), CpuId(3)];
            v.rotate_left(r);
            v
        };
        assert!((0..3).any(|r| fx.resched == rotation(r)), "not a rotation of the idlers: {:?}", fx.resched);
        let (first, second) = (fx.resched[0], fx.resched[1]);
        // The first idler to run `csched_schedule` has nothing of its own, and
        // `csched_load_balance` → `csched_runq_steal` takes G (BOOST > IDLE) from CPU 1,
        // which has 2 runnable. The later idlers find nothing.
        let p = c.pick_next(&w.view(now), first, None, false, &mut Effects::default());
        assert_eq!(p.task, Some(g));
        assert_eq!(c.cpu_of(g), first);
        w.curr[first.idx()] = Some(g);
        assert_eq!(c.pick_next(&w.view(now), second, None, false, &mut Effects::default()).task, None);
        // G handles its tick and blocks; D ends its burst. G's next wake-up is queued on the
        // pCPU that stole it, where it last ran: the collision moved it for good.
        let later = Nanos::from_us(30);
        c.block(&w.view(later), g, first, &mut Effects::default());
        c.block(&w.view(later), d, CpuId(1), &mut Effects::default());
        assert_eq!(c.pick_next(&w.view(later), first, Some(g), false, &mut Effects::default()).task, None);
        w.curr[first.idx()] = None;
        assert_eq!(c.pick_next(&w.view(later), CpuId(1), Some(d), false, &mut Effects::default()).task, None);
        w.curr[1] = None;
        let mut fx = Effects::default();
        c.wake(&w.view(Nanos::from_ms(10)), g, &mut fx);
        assert_eq!((c.cpu_of(g), fx.resched.clone()), (first, vec![first]));
        // A wake-up that finds its own pCPU idle never moves: only a collision re-places it.
        assert_eq!(c.stats().steals, 1);
    }

    #[test]
    fn xen40_the_idlers_race_for_a_queued_vcpu_and_each_wins_about_as_often() {
        // Xen 4.0.1 `__runq_tickle` ORs every idler into the mask and `cpumask_raise_softirq`
        // IPIs them together; each leaves `hlt`, runs `csched_schedule` and, finding its own
        // queue empty, `csched_load_balance`, which trylocks the peer and steals the queued
        // vCPU. Who gets there first is the hardware's race, so the engine's order of the
        // idlers' reschedules is drawn from the run's seed, uniform over the idlers.
        // Setting: 4 CPUs, dom0's D runs BOOST on CPU 1; the guest's G, last on CPU 1, wakes
        // behind it (BOOST does not beat BOOST), so the mask is the idlers {0, 2, 3}.
        let race = |seed: u64| {
            let mut w = world(4, &[(256, 0, 1), (256, 0, 1)]);
            let mut c = Credit::new("xen40", CreditParams::defaults(Profile::Xen40), &w.topo);
            c.seed(seed);
            c.init(&w.view(Nanos::ZERO));
            let (d, g) = (TaskId(0), TaskId(1));
            c.place(d, CpuId(1));
            c.place(g, CpuId(1));
            c.wake(&w.view(Nanos::ZERO), d, &mut Effects::default());
            assert_eq!(c.pick_next(&w.view(Nanos::ZERO), CpuId(1), None, false, &mut Effects::default()).task, Some(d));
            w.curr[1] = Some(d);
            let mut fx = Effects::default();
            c.wake(&w.view(Nanos::from_us(10)), g, &mut fx);
            // The winner is the first of the mask to reschedule: it steals G.
            let first = fx.resched[0];
            let p = c.pick_next(&w.view(Nanos::from_us(10)), first, None, false, &mut Effects::default());
            assert_eq!((p.task, c.cpu_of(g)), (Some(g), first));
            fx.resched
        };
        // The same seed, the same winner (a run repeats byte for byte).
        assert_eq!(race(7), race(7));
        // Over 300 seeds each idler wins about a third of the races (binomial, n = 300,
        // p = 1/3: mean 100, sd 8.2; 70..130 is beyond 3.5 sd), never CPU 1 (busy), and
        // the mask is always the three idlers in pCPU order, rotated.
        let mut wins = [0u32; 4];
        for seed in 0..300 {
            let order = race(seed);
            let i = order.iter().position(|&c| c == CpuId(0)).unwrap();
            let mut unrotated = order.clone();
            unrotated.rotate_left(i);
            assert_eq!(unrotated, vec![CpuId(0), CpuId(2), CpuId(3)]);
            wins[order[0].idx()] += 1;
        }
        assert_eq!(wins[1], 0);
        for c in [0, 2, 3] {
            assert!((70..=130).contains(&wins[c]), "CPU {c} won {} of 300 races: {wins:?}", wins[c]);
        }
    }

    #[test]
    fn xen40_tick_pick_counts_its_own_pcpu_idle_and_leaves_a_domain_for_strictly_more_idlers() {
        // `_csched_cpu_pick` on 4 CPUs in two memory domains {0, 1} and {2, 3}; vCPU A runs on
        // CPU 0. Xen 4.0: `cpu_set(cpu, idlers)` (A's own pCPU is idle for the scan whatever
        // waits there), then another domain wins on `weight_cpu < weight_nxt`. Current Xen: the
        // own pCPU is idle only if its runqueue is empty (`is_runq_idle`), and another domain
        // needs twice the idlers.
        let setup = |profile: Profile, queued_b: bool, busy_1: bool| {
            let mut w = world(4, &[(256, 0, 1), (256, 0, 1), (256, 0, 1)]);
            w.topo = Topology::fast_slow(0, 2.0, 4, 1.0, 2);
            let mut c = Credit::new("c", CreditParams::defaults(profile), &w.topo);
            c.init(&w.view(Nanos::ZERO));
            let (a, b, x) = (TaskId(0), TaskId(1), TaskId(2));
            for (t, cpu) in [(a, 0), (b, 0), (x, 1)] {
                c.place(t, CpuId(cpu));
            }
            for (t, cpu, on) in [(a, 0, true), (x, 1, busy_1)] {
                if on {
                    c.wake(&w.view(Nanos::ZERO), t, &mut Effects::default());
                    let p = c.pick_next(&w.view(Nanos::ZERO), CpuId(cpu), None, false, &mut Effects::default());
                    assert_eq!(p.task, Some(t));
                    w.curr[cpu as usize] = Some(t);
                }
            }
            if queued_b {
                c.wake(&w.view(Nanos::ZERO), b, &mut Effects::default());
                assert_eq!(c.runq(CpuId(0)), &[b][..]);
            }
            c.cpu_pick(&w.view(Nanos::ZERO), a)
        };
        // (1) B waits on CPU 0, CPUs 1-3 idle. 4.0: idle siblings 1 (CPU 0, counted) = 1 (CPU 1),
        // domains 2 = 2: A stays. Current: CPU 0 is busy, and B's wake-up tickled CPU 1 and took
        // it off the idle mask, so domain {0, 1} has no idler and {2, 3} two: A moves to CPU 2.
        assert_eq!(setup(Profile::Xen40, true, false), CpuId(0));
        assert_eq!(setup(Profile::Current, true, false), CpuId(2));
        // (2) A alone on CPU 0, CPU 1 busy, CPUs 2-3 idle. 4.0: domain {0, 1} has 1 idler
        // (CPU 0, counted) < 2: A leaves for CPU 2. Current: 1 × 2 ≥ 2: A stays.
        assert_eq!(setup(Profile::Xen40, false, true), CpuId(2));
        assert_eq!(setup(Profile::Current, false, true), CpuId(0));
    }

    #[test]
    fn boost_on_wake_preempts_an_over_vcpu() {
        let mut w = World::new(1, &[256, 256]);
        let mut c = credit(&w);
        let (a, b) = (TaskId(0), TaskId(1));
        let mut fx = Effects::default();
        c.wake(&w.view(Nanos::ZERO), a, &mut fx);
        let p = c.pick_next(&w.view(Nanos::ZERO), CpuId(0), None, false, &mut fx);
        assert_eq!(p.task, Some(a));
        w.curr[0] = Some(a);
        // A has overspent: credit −100 → OVER (as accounting would set it).
        c.vc[0].credit = -100;
        c.hot[0].pri = PRI_OVER;
        // B wakes at 5 ms: UNDER → BOOST (0) > OVER (−2), so B's pCPU is tickled…
        let now = Nanos::from_ms(5);
        let mut fx = Effects::default();
        c.wake(&w.view(now), b, &mut fx);
        assert_eq!(c.hot[1].pri, PRI_BOOST);
        assert_eq!(fx.resched, vec![CpuId(0)]);
        // …and the reschedule runs B, A going back to the queue (A ran 5 ms > ratelimit 1 ms).
        let p = c.pick_next(&w.view(now), CpuId(0), Some(a), true, &mut fx);
        assert_eq!(p.task, Some(b));
        assert_eq!(c.runq[0], vec![a]);
        // A burned 5 ms = 50 credits: −100 − 50 = −150.
        assert_eq!(c.vc[0].credit, -150);
    }

    #[test]
    fn a_vcpu_that_always_blocks_before_a_tick_earns_no_credit() {
        let mut w = World::new(1, &[256]);
        let mut c = credit(&w);
        let t = TaskId(0);
        // Ten 30 ms periods: run 0..5 ms of each 10 ms tick window, block before the tick.
        for period in 0..10u64 {
            for tick in 0..3u64 {
                let base = Nanos::from_ms(period * 30 + tick * 10);
                let mut fx = Effects::default();
                c.wake(&w.view(base), t, &mut fx);
                let p = c.pick_next(&w.view(base), CpuId(0), None, false, &mut fx);
                assert_eq!(p.task, Some(t));
                w.curr[0] = Some(t);
                let end = base + Nanos::from_ms(5);
                c.block(&w.view(end), t, CpuId(0), &mut fx);
                let p = c.pick_next(&w.view(end), CpuId(0), Some(t), false, &mut fx);
                assert_eq!(p.task, None);
                w.curr[0] = None;
                // The tick finds the CPU idle: no activation, no burn.
                c.tick(&w.view(base + Nanos::from_ms(10)), CpuId(0), &mut fx);
            }
            c.account(&w.view(Nanos::from_ms(period * 30 + 30)), &mut Effects::default());
        }
        // Never on the active list, so accounting never credited it:
        // 30 runs × 5 ms × 10 credits/ms = 1500 credits burned, nothing earned.
        assert!(!c.vc[0].active);
        assert_eq!(c.vc[0].credit, -1500);
        // Boosted on its first wake; only a tick finding it running (or accounting
        // of an active vCPU) would lower BOOST, so it stays BOOST: one boost in all.
        assert_eq!(c.hot[0].pri, PRI_BOOST);
        assert_eq!(c.stats.boosts, 1);
    }

    #[test]
    fn an_idle_cpu_steals_the_first_higher_priority_vcpu() {
        let mut w = World::new(2, &[256, 256, 256, 256]);
        let mut c = credit(&w);
        let now = Nanos::from_ms(1);
        // CPU 1 runs X and queues Y (UNDER) and Z (OVER): nr_runnable = 3.
        let (x, y, z, o) = (TaskId(0), TaskId(1), TaskId(2), TaskId(3));
        for t in [x, y, z] {
            c.hot[t.idx()].cpu = CpuId(1);
            c.hot[t.idx()].runnable = true;
        }
        c.hot[z.idx()].pri = PRI_OVER;
        c.runq_insert(y);
        c.runq_insert(z);
        c.inc_nr(CpuId(1)); // x running
        c.sync(CpuId(1));
        w.curr[1] = Some(x);
        c.set_idle(CpuId(1), false);
        // CPU 0's own queue holds only O, which is OVER: it looks for better work.
        c.hot[o.idx()].cpu = CpuId(0);
        c.hot[o.idx()].pri = PRI_OVER;
        c.hot[o.idx()].runnable = true;
        c.runq_insert(o);
        let mut fx = Effects::default();
        let p = c.pick_next(&w.view(now), CpuId(0), None, false, &mut fx);
        // Y is the first vCPU on CPU 1 strictly better than OVER: stolen, not Z.
        assert_eq!(p.task, Some(y));
        assert_eq!(c.hot[y.idx()].cpu, CpuId(0));
        assert_eq!(c.runq[1], vec![z]);
        assert_eq!(c.runq[0], vec![o]);
        assert_eq!(c.stats.steals, 1);
        // nr_runnable: CPU 1 = X + Z = 2; CPU 0 = Y running + O queued = 2.
        assert_eq!([c.nr_runnable(CpuId(1)), c.nr_runnable(CpuId(0))], [2, 2]);
    }

    #[test]
    fn accounting_shares_the_pool_by_weight() {
        // Two active single-vCPU domains, weights 256 and 512, one pCPU:
        // pool = 300; fair shares ⌈300×256/768⌉ = 100 and ⌈300×512/768⌉ = 200.
        let w = World::new(1, &[256, 512]);
        let mut c = credit(&w);
        let v = w.view(Nanos::ZERO);
        c.acct_start(&v, TaskId(0));
        c.acct_start(&v, TaskId(1));
        c.account(&v, &mut Effects::default());
        assert_eq!(c.vc[0].credit, 100);
        assert_eq!(c.vc[1].credit, 200);
        assert_eq!((c.hot[0].pri, c.hot[1].pri), (PRI_UNDER, PRI_UNDER));
    }

    #[test]
    fn burn_keeps_a_sub_credit_residual() {
        let w = World::new(1, &[256]);
        let mut c = credit(&w);
        // 150 µs = 1.5 credits: charge 1, keep 0.5; another 150 µs: 2 (1.5 + 0.5), keep 0.
        c.start_running(TaskId(0), Nanos::ZERO);
        c.burn(TaskId(0), Nanos::from_us(150));
        assert_eq!(c.vc[0].credit, -1);
        c.burn(TaskId(0), Nanos::from_us(300));
        assert_eq!(c.vc[0].credit, -3);
    }

    mod random_events {
        //! Random event sequences through the credit scheduler: every invariant
        //! holds after every event, and every accounting period conserves credit.
        use super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Ev {
            Wake(usize),
            Block(usize),
            Tick(usize),
            Account,
            Resched(usize),
            Advance(u64),
        }

        fn ev() -> impl Strategy<Value = Ev> {
            prop_oneof![
                3 => (0..12usize).prop_map(Ev::Wake),
                2 => (0..3usize).prop_map(Ev::Block),
                3 => (0..3usize).prop_map(Ev::Tick),
                1 => Just(Ev::Account),
                1 => (0..3usize).prop_map(Ev::Resched),
                4 => (1..15_000u64).prop_map(Ev::Advance),
            ]
        }

        struct Run {
            w: World,
            c: Credit,
            now: Nanos,
            /// The engine's view: woken and not blocked.
            runnable: Vec<bool>,
        }

        impl Run {
            fn pick(&mut self, cpu: CpuId, fx: &mut Effects) {
                let prev = self.w.curr[cpu.idx()];
                let keep = prev.is_some_and(|p| self.runnable[p.idx()]);
                let p = self.c.pick_next(&self.w.view(self.now), cpu, prev, keep, fx);
                self.w.curr[cpu.idx()] = p.task;
            }

            /// Deliver reschedule requests as the engine does (bounded: each request re-picks once).
            fn drain(&mut self, mut fx: Effects) {
                for _ in 0..64 {
                    let Some(c) = fx.resched.first().copied() else { return };
                    fx.resched.remove(0);
                    let mut more = Effects::default();
                    self.pick(c, &mut more);
                    fx.resched.extend(more.resched);
                }
            }

            fn step(&mut self, e: &Ev) {
                let n = self.w.curr.len();
                let mut fx = Effects::default();
                match *e {
                    Ev::Wake(t) => {
                        let t = t % self.runnable.len();
                        if self.runnable[t] {
                            return;
                        }
                        self.runnable[t] = true;
                        self.c.wake(&self.w.view(self.now), TaskId(t as u32), &mut fx);
                    }
                    Ev::Block(c) => {
                        let c = CpuId((c % n) as u32);
                        let Some(t) = self.w.curr[c.idx()] else { return };
                        self.runnable[t.idx()] = false;
                        self.c.block(&self.w.view(self.now), t, c, &mut fx);
                        self.pick(c, &mut fx);
                    }
                    Ev::Tick(c) => self.c.tick(&self.w.view(self.now), CpuId((c % n) as u32), &mut fx),
                    Ev::Account => self.c.account(&self.w.view(self.now), &mut fx),
                    Ev::Resched(c) => fx.resched(CpuId((c % n) as u32)),
                    Ev::Advance(us) => self.now += Nanos::from_us(us),
                }
                self.drain(fx);
            }

            /// Everything the essay promises, beyond `invariant_violation`.
            fn check(&self) -> Result<(), String> {
                if let Some(e) = self.c.invariant_violation(&self.w.view(self.now)) {
                    return Err(e);
                }
                for (i, &r) in self.runnable.iter().enumerate() {
                    let t = TaskId(i as u32);
                    let running = self.w.curr.iter().filter(|x| **x == Some(t)).count();
                    let queued = self.c.is_queued(t);
                    if running > 1 || (running == 1 && queued) {
                        return Err(format!("{t} on two CPUs or queued while running"));
                    }
                    if !r && (queued || running > 0) {
                        return Err(format!("blocked {t} queued or running"));
                    }
                    if r && !self.c.is_parked(t) && !queued && running == 0 {
                        return Err(format!("runnable {t} neither queued nor running"));
                    }
                }
                Ok(())
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]
            #[test]
            fn invariants_hold_and_accounting_conserves_credit(
                ncpus in 1..4usize,
                doms in prop::collection::vec((1..1024u32, prop_oneof![3 => Just(0u32), 1 => 10..150u32], 1..4u32), 1..5),
                xen40 in any::<bool>(),
                events in prop::collection::vec(ev(), 1..300),
            ) {
                let w = world(ncpus, &doms);
                let profile = if xen40 { Profile::Xen40 } else { Profile::Current };
                let mut c = Credit::new("credit", CreditParams::defaults(profile), &w.topo);
                c.init(&w.view(Nanos::ZERO));
                let runnable = vec![false; w.tasks.len()];
                let mut r = Run { w, c, now: Nanos::ZERO, runnable };
                let mut periods = 0;
                for e in &events {
                    r.step(e);
                    prop_assert_eq!(r.check(), Ok(()), "after {:?}", e);
                    if matches!(e, Ev::Account) {
                        let a = r.c.last_accounting();
                        prop_assert!(a.conserved(), "accounting {:?}", a);
                        periods += 1;
                    }
                }
                prop_assert_eq!(r.c.stats().accountings, periods);
            }
        }
    }
}
