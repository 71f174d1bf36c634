//! `aash+pcs` and `aash+bcs`: co-scheduling on asymmetric cores.
//!
//! Design (beyond the seed: co-scheduling on heterogeneous multicores,
//! docs/design/cosched.md "Beyond the papers"; AASH per docs/design/aash.md, PCS/BCS per docs/design/cosched.md).
//! Three decisions, three owners, composed rather than merged:
//! - credit (`credit.rs`) decides *how much* each vCPU runs;
//! - AASH (`aash.rs`) decides *where*: fast credits go round-robin through
//!   the fast queue, so every vCPU gets an equal share of fast-core time,
//!   with at most one fast↔slow move per vCPU and period;
//! - PCS or BCS (`pcs.rs`, `bcs.rs` over `cosched.rs`) decides *when*: the
//!   vCPUs of a `CON` domain run at the same time. The co-scheduler only
//!   chooses among the vCPUs AASH placed on a pCPU's runqueue, so it never
//!   moves a vCPU across core classes.
//!
//! The new rule is about the gang. A barrier-synchronised gang runs at the
//! speed of its slowest vCPU: fast-core time given to one member for a
//! whole period is mostly spent waiting for the slow members at barriers.
//! AASH alone gives each member the fast core in turn, one accounting period
//! (30 ms) at a time, so within a period the gang's members run at
//! different speeds. **Gang rotation**: when the vCPU holding a fast grant
//! belongs to a `CON` domain, has held the fast core for `gang_quantum_ms`
//! and a sibling runs (co-scheduled) on a slow core with less fast-core
//! exposure so far, the grant and its unused fast credits pass to that
//! sibling and the two swap cores (at the tick, each at its deschedule).
//! Over a period the gang's members then get equal fast-core exposure
//! (within one quantum); the domain's total fast share is unchanged (the
//! grant moves inside the gang, the fast queue is untouched), so AASH's
//! fairness between domains holds. Two rotations within a barrier phase
//! let every member run part of it fast: a phase that would take `w` at
//! the slow speed then ends sooner (for two members and SF = 2, as soon as
//! `2w/3` when the swap falls in the middle). The cost is a cache refill per
//! swap (two migrations per quantum). `gang_quantum_ms = 0` turns the rule
//! off (plain AASH placement under PCS/BCS) to measure it alone.
//!
//! Invariants: as AASH (at most `n_fast` grants, credit's runqueue checks)
//! and as the scheme (PCS operations disjoint; BCS `COS` only while queued);
//! a gang rotation moves a grant only between two running vCPUs of the same
//! `CON` domain, fast CPU ↔ slow CPU, and only to a sibling with less
//! exposure. Units: ns; the quantum in ms on the command line.

use crate::aash::{Aash, AashParams};
use crate::cosched::CoBase;
use crate::credit::Credit;
use crate::dispatcher::{Dispatcher, Effects, Pick, SysView};
use crate::params::{Kind, ParamDoc, ParamReader, PolicyError};
use ampsched_model::spec::{CoschedType, Params};
use ampsched_model::{CpuId, CpuSet, DomainId, Nanos, TaskId, Topology};

/// Default gang quantum: one credit tick (10 ms), the finest step the tick
/// that checks it allows; a third of an accounting period.
pub const DEFAULT_GANG_QUANTUM: Nanos = Nanos::from_ms(10);

const GANG_QUANTUM: ParamDoc = ParamDoc {
    name: "gang_quantum_ms",
    kind: Kind::Ms { default: DEFAULT_GANG_QUANTUM, min: 0.0, max: 1000.0 },
    unit: "ms",
    doc: "a CON gang's fast grant moves to a less-exposed running sibling after this long on the fast core; 0 = off",
};

/// Parameters of `aash+pcs` / `aash+bcs`: AASH's, then the gang quantum and the
/// co-schedulers' signal cost (`signal_us`, `cosched.rs` "Signal cost": PCS's
/// signals pay it; BCS raises none, so under `aash+bcs` it costs nothing, as
/// under `bcs`).
pub const AASH_COSCHED_PARAMS: &[ParamDoc] =
    crate::aash::aash_dispatcher_param_docs!(GANG_QUANTUM, crate::cosched::SIGNAL_US);

/// The signal cost of `aash+pcs` / `aash+bcs` (`signal_us`; 0 when absent).
pub fn signal_cost(policy: &str, params: &Params) -> Result<Nanos, PolicyError> {
    let mut mine = Params::new();
    if let Some(v) = params.get(crate::cosched::SIGNAL_US.name) {
        mine.insert(crate::cosched::SIGNAL_US.name.to_string(), v.clone());
    }
    ParamReader::new(policy, &mine, AASH_COSCHED_PARAMS)?.duration(&crate::cosched::SIGNAL_US)
}

/// AASH with gang rotation: the base of `aash+pcs` and `aash+bcs`.
pub struct AashGang {
    aash: Aash,
    quantum: Nanos,
    fast: CpuSet,
    dom_of: Vec<DomainId>,
    /// Per task: on a fast CPU since (None: not on one).
    fast_since: Vec<Option<Nanos>>,
    /// Per task: fast-core time so far, ns.
    exposure: Vec<u64>,
    /// Grants handed over inside a gang.
    pub handovers: u64,
}

impl AashGang {
    /// Read AASH's parameters and the gang quantum; build for `topo`.
    pub fn from_params(policy: &str, params: &Params, topo: &Topology) -> Result<AashGang, PolicyError> {
        if let Some(k) = params.keys().find(|k| !AASH_COSCHED_PARAMS.iter().any(|d| d.name == k.as_str())) {
            let known: Vec<&str> = AASH_COSCHED_PARAMS.iter().map(|d| d.name).collect();
            return Err(PolicyError {
                param: k.clone(),
                msg: format!("unknown parameter of policy `{policy}`; known: {}", known.join(", ")),
            });
        }
        let mut rest = params.clone();
        let mut mine = Params::new();
        if let Some(q) = rest.remove(GANG_QUANTUM.name) {
            mine.insert(GANG_QUANTUM.name.to_string(), q);
        }
        // Read by `signal_cost` for the co-scheduling layer, not by AASH.
        rest.remove(crate::cosched::SIGNAL_US.name);
        let p = AashParams::from_params(policy, &rest, topo)?;
        let quantum = ParamReader::new(policy, &mine, AASH_COSCHED_PARAMS)?.duration(&GANG_QUANTUM)?;
        Ok(AashGang::new(p, quantum, topo))
    }

    /// AASH with parameters `p` and gang quantum `quantum` (0 = no rotation).
    pub fn new(p: AashParams, quantum: Nanos, topo: &Topology) -> AashGang {
        let aash = Aash::new(p, topo);
        AashGang {
            fast: aash.fast_cpus(),
            aash,
            quantum,
            dom_of: Vec::new(),
            fast_since: Vec::new(),
            exposure: Vec::new(),
            handovers: 0,
        }
    }

    /// Fast-core time of `t` so far (ns, up to its last deschedule).
    pub fn exposure(&self, t: TaskId) -> u64 {
        self.exposure[t.idx()]
    }

    /// The gang rule at a tick on fast `cpu` (see the module docs).
    fn rotate(&mut self, v: &SysView, cpu: CpuId, fx: &mut Effects) {
        let Some(x) = v.curr[cpu.idx()] else { return };
        let d = self.dom_of[x.idx()];
        if v.domains[d.idx()].cosched != CoschedType::Con || !self.aash.is_granted(x) {
            return;
        }
        let Some(since) = self.fast_since[x.idx()] else { return };
        let held = v.now.saturating_sub(since);
        if held < self.quantum {
            return;
        }
        let x_exp = self.exposure[x.idx()] + held.0;
        let mut best: Option<(u64, u32, TaskId)> = None;
        for (c, cur) in v.curr.iter().enumerate() {
            let Some(y) = *cur else { continue };
            if y == x || self.dom_of[y.idx()] != d || self.fast.contains(CpuId(c as u32)) {
                continue;
            }
            let key = (self.exposure[y.idx()], v.tasks[y.idx()].vcpu, y);
            if key.0 < x_exp && best.is_none_or(|b| key < b) {
                best = Some(key);
            }
        }
        if let Some((_, _, y)) = best {
            if self.aash.hand_over_grant(v, x, y, fx) {
                self.handovers += 1;
            }
        }
    }
}

impl Dispatcher for AashGang {
    fn name(&self) -> &'static str {
        "aash"
    }

    fn tick_period(&self) -> Nanos {
        self.aash.tick_period()
    }

    fn account_period(&self) -> Nanos {
        self.aash.account_period()
    }

    fn seed(&mut self, seed: u64) {
        self.aash.seed(seed);
    }

    fn account_cpu(&self) -> Option<CpuId> {
        self.aash.account_cpu()
    }

    fn init(&mut self, v: &SysView) {
        self.aash.init(v);
        self.dom_of = v.tasks.iter().map(|t| t.domain).collect();
        self.fast_since = vec![None; v.tasks.len()];
        self.exposure = vec![0; v.tasks.len()];
    }

    fn wake(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        self.aash.wake(v, t, fx);
    }

    fn block(&mut self, v: &SysView, t: TaskId, cpu: CpuId, fx: &mut Effects) {
        self.aash.block(v, t, cpu, fx);
    }

    fn tick(&mut self, v: &SysView, cpu: CpuId, fx: &mut Effects) {
        self.aash.tick(v, cpu, fx);
        if self.quantum.0 > 0 && self.fast.contains(cpu) {
            self.rotate(v, cpu, fx);
        }
    }

    fn account(&mut self, v: &SysView, fx: &mut Effects) {
        self.aash.account(v, fx);
    }

    fn pick_next(
        &mut self,
        v: &SysView,
        cpu: CpuId,
        prev: Option<TaskId>,
        prev_runnable: bool,
        fx: &mut Effects,
    ) -> Pick {
        let pick = self.aash.pick_next(v, cpu, prev, prev_runnable, fx);
        if self.fast.contains(cpu) {
            if let Some(p) = prev {
                if let Some(s) = self.fast_since[p.idx()].take() {
                    self.exposure[p.idx()] += v.now.saturating_sub(s).0;
                }
            }
            if let Some(t) = pick.task {
                self.fast_since[t.idx()] = Some(v.now);
            }
        }
        pick
    }

    fn affinity_changed(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        self.aash.affinity_changed(v, t, fx);
    }

    fn domain_changed(&mut self, v: &SysView, d: DomainId, fx: &mut Effects) {
        self.aash.domain_changed(v, d, fx);
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let mut c = self.aash.counters();
        c.push(("gang_handovers", self.handovers as f64));
        c
    }

    fn credit(&self, t: TaskId) -> Option<i64> {
        self.aash.credit(t)
    }

    fn runq_len(&self, cpu: CpuId) -> Option<u32> {
        self.aash.runq_len(cpu)
    }
}

impl CoBase for AashGang {
    fn cr(&self) -> &Credit {
        self.aash.credit_state()
    }

    fn cr_mut(&mut self) -> &mut Credit {
        self.aash.credit_state_mut()
    }

    fn home(&self, _v: &SysView, t: TaskId) -> CpuSet {
        self.aash.home_affinity(t)
    }
}

#[cfg(test)]
mod tests {
    //! Worked example: the fast grant of a CON gang moves to its slow sibling after a quantum.
    use super::*;
    use crate::testkit::World;

    /// Deliver reschedule requests the way the engine does: each CPU asked re-picks at once.
    fn drain(g: &mut AashGang, w: &mut World, now: Nanos, mut fx: Effects) {
        while let Some(c) = fx.resched.first().copied() {
            fx.resched.remove(0);
            let prev = w.curr[c.idx()];
            let mut more = Effects::default();
            let p = g.pick_next(&w.view(now), c, prev, prev.is_some(), &mut more);
            w.curr[c.idx()] = p.task;
            fx.resched.extend(more.resched);
        }
    }

    #[test]
    fn a_gang_grant_rotates_to_the_less_exposed_running_sibling() {
        // 1 fast (CPU 0) + 1 slow (CPU 1); domain 0 = CON {t0, t1}, both always runnable.
        let mut w = World::new(2, &[256, 256]);
        w.topo = Topology::fast_slow(1, 2.0, 1, 1.0, 2);
        w.tasks[1].domain = DomainId(0);
        w.tasks[1].vcpu = 1;
        for t in &mut w.tasks {
            t.affinity = w.topo.all;
        }
        w.domains[0].tasks = vec![TaskId(0), TaskId(1)];
        w.domains.truncate(1);
        w.domains[0].cosched = CoschedType::Con;
        let mut g = AashGang::from_params("aash+pcs", &Params::new(), &w.topo).unwrap();
        assert_eq!(g.quantum, Nanos::from_ms(10));
        g.init(&w.view(Nanos::ZERO));
        let mut fx = Effects::default();
        for t in [0u32, 1] {
            g.wake(&w.view(Nanos::ZERO), TaskId(t), &mut fx);
        }
        fx.resched.extend([CpuId(0), CpuId(1)]);
        drain(&mut g, &mut w, Nanos::ZERO, fx);
        // Ticks every 10 ms on both CPUs, accounting every 30 ms, for 120 ms.
        let mut handed = Vec::new();
        for k in 1..=12u64 {
            let now = Nanos::from_ms(10 * k);
            for c in 0..2u32 {
                let mut fx = Effects::default();
                let before = g.handovers;
                g.tick(&w.view(now), CpuId(c), &mut fx);
                if g.handovers > before {
                    handed.push(now);
                }
                drain(&mut g, &mut w, now, fx);
            }
            if k % 3 == 0 {
                let mut fx = Effects::default();
                g.account(&w.view(now), &mut fx);
                drain(&mut g, &mut w, now, fx);
            }
            assert!(w.curr[0].is_some() && w.curr[1].is_some(), "both run at {now:?}");
        }
        // The grant (given at the first accounting, 30 ms) moves inside the gang
        // whenever its holder is a quantum ahead in fast exposure.
        assert!(handed.len() >= 2, "handovers at {handed:?}");
        // Exposure counts fast time up to each vCPU's last deschedule: of the 120 ms
        // the fast CPU ran, all but the current holder's stint (≤ quantum + tick =
        // 20 ms), and the two differ by at most that much (here 60 and 40 ms, the
        // holder running its 20 ms since the handover at 100 ms).
        let e: Vec<u64> = (0..2).map(|i| g.exposure(TaskId(i))).collect();
        let total: u64 = e.iter().sum();
        assert!(total >= Nanos::from_ms(100).0, "{e:?}");
        assert!(e[0].abs_diff(e[1]) <= Nanos::from_ms(20).0, "unequal exposure {e:?}");
    }

    #[test]
    fn parameters_are_aash_s_plus_the_quantum() {
        let mine: Vec<&str> = AASH_COSCHED_PARAMS.iter().map(|d| d.name).collect();
        let mut aash: Vec<&str> = crate::aash::AASH_PARAMS.iter().map(|d| d.name).collect();
        aash.push(GANG_QUANTUM.name);
        aash.push(crate::cosched::SIGNAL_US.name);
        mine.iter().for_each(|m| assert!(aash.contains(m), "{m} is not an AASH parameter"));
        aash.iter().for_each(|a| assert!(mine.contains(a), "{a} missing from AASH_COSCHED_PARAMS"));
        let topo = Topology::fast_slow(1, 2.0, 3, 1.0, 4);
        let mut p = Params::new();
        p.insert("gang_quantum".into(), ampsched_model::spec::ParamValue::Int(5));
        let e = AashGang::from_params("aash+pcs", &p, &topo).err().expect("unknown");
        assert!(e.msg.contains("gang_quantum_ms") && e.msg.contains("tslice_ms"), "{}", e.msg);
    }

    #[test]
    fn the_quantum_is_validated() {
        let topo = Topology::fast_slow(1, 2.0, 3, 1.0, 4);
        let mut p = Params::new();
        p.insert("gang_quantum_ms".into(), ampsched_model::spec::ParamValue::Int(5000));
        let e = AashGang::from_params("aash+pcs", &p, &topo).err().expect("out of range");
        assert_eq!(e.param, "gang_quantum_ms");
        assert!(e.msg.contains("[0, 1000]"), "{}", e.msg);
    }
}
