//! The `aash` placer: AASH's fast-core rotation as periodic affinity masks,
//! for the real agent (Linux is the dispatcher) and for the simulator.
//!
//! Follows docs/design/aash.md (Kazempour et al., VEE 2010, §3), with the same fast
//! queue as the `aash` dispatcher (`fastqueue.rs`). Every period (default
//! 30 ms, one credit accounting period) it:
//! 1. takes the active vCPUs (ran or were runnable in the period, or are
//!    runnable now) and runs one fast-queue distribution: up to `n_fast`
//!    vCPUs are granted the fast CPUs for the next period (round-robin,
//!    high-priority queue first, aware guests' fast vCPUs first);
//! 2. outputs masks of CPU classes: the fast set for granted vCPUs, the
//!    slow set for the other active ones;
//! 3. fast never idle (mechanism 2): when fewer granted vCPUs are runnable
//!    than there are fast CPUs (e.g. fewer active vCPUs than fast CPUs, or
//!    power saving left slots unused), the other active vCPUs get the
//!    all-CPU mask so the fast CPUs can be used; inactive vCPUs get the
//!    all-CPU mask too (they take no part; the next period places them).
//!    With `fast_never_idle = false` both get the slow set.
//!
//! Time credits (`time_credits`, off by default; the real agent turns it on):
//! a grant is a period of fast-CPU *time*, not a period of wall time. Each
//! grant adds one period to its holder's fast credit, fast-class run time
//! spends it, and the grant is held (no rotation) while the holders are
//! active and their mean credit is at least half a period, for at most
//! [`MAX_HOLD_PERIODS`]; credit carries over between grants, clamped to ±
//! one period. Where other load shares the fast CPUs (a real machine) turns
//! of equal length give unequal fast time; this evens it out. In the
//! simulator a holder gets its whole period, so it rotates as without.
//!
//! Cache-hot grants (time credits only): a rotation migrates the thread that
//! gets a fast CPU and the one that leaves it, and each loses its private
//! cache — its working set, up to the L2 (`CacheSpec::refill_cost`: the L2 is
//! private, the last level shared). When a contender's working set
//! (`TaskSample::ws_kb`; the agent gives a process's anonymous memory) does
//! not fit the L2 (`ws_kb > topo.cache.l2_kb`), a grant is
//! [`HOT_GRANT`] of fast time (120 ms; whole periods, at least one) instead
//! of one period: the holders get that much credit, the credit is clamped to
//! ± that much, and the grant is held up to that many periods +
//! [`MAX_HOLD_PERIODS`] − 1. Fast
//! time stays equal (the credit), in quanta long enough that two refills a
//! rotation are a small part of them. This follows the kernels' rule that a
//! task whose cache is hot is not worth moving for a short gain: Linux's
//! `task_hot()` (kernel/sched/fair.c; `can_migrate_task` skips a task that
//! ran within `sysctl_sched_migration_cost`), which before 2.6.23 was the
//! per-domain `cache_hot_time` measured at boot by migrating a buffer the size
//! of the cache (`measure_migration_cost`, kernel/sched.c), and Xen credit's
//! `__csched_vcpu_is_cache_hot` (`vcpu_migration_delay`). Measured on the
//! development machine (docs/agent.md): `xz -T2` (12-35 MB) lost 0.6-1 ms of
//! work per migration at a 30 ms rotation, while a spinning barrier (0.16 MB)
//! needs the rotation at its phase length (≈ 30 ms) and loses its gain at
//! 35-90 ms. Threads that fit the L2 (or whose working set is unknown, 0)
//! rotate every period as before.
//!
//! An aware guest's declared slow vCPUs under `power_saving` always get the
//! slow set. With `fair_sharing = false` the vCPUs without a grant get the
//! all-CPU mask (only the high-priority queue is managed).
//!
//! Invariants: at most `n_fast` vCPUs hold the fast mask; the masks change at
//! most once per period, so a vCPU moves fast↔slow at most once per period
//! because of the placer. Pure: the output depends only on the snapshots.

use crate::fastqueue::{aash_param_docs, read_switches, AashSwitches, FastQueue, FqDomain, FqVcpu};
use crate::params::{Kind, ParamDoc, ParamReader, PolicyError};
use crate::placer::RealMachineParam;
use crate::placer::{AffinityChange, Placer, Snapshot};
use ampsched_model::spec::{Params, PriorityClass};
use ampsched_model::{Nanos, Topology};

/// Default period: 30 ms, the credit accounting period AASH rotates at.
pub const DEFAULT_AASH_PLACER_PERIOD: Nanos = Nanos::from_ms(30);

/// Parameters of the `aash` placer as shown by `ampsched policies`.
pub const AASH_PLACER_PARAMS: &[ParamDoc] = aash_param_docs!(PERIOD, TIME_CREDITS);

/// `period_ms`: how often the rotation runs.
const PERIOD: ParamDoc = ParamDoc {
    name: "period_ms",
    kind: Kind::Ms { default: DEFAULT_AASH_PLACER_PERIOD, min: 1.0, max: 60_000.0 },
    unit: "ms",
    doc: "rotation period (one credit accounting period)",
};

/// `time_credits`: grants last a period of fast time rather than a period.
const TIME_CREDITS: ParamDoc = ParamDoc {
    name: "time_credits",
    kind: Kind::Bool { default: false },
    unit: "",
    doc: "a fast grant lasts until its holders ran one period on fast CPUs (120 ms if a contender's working set exceeds the L2; credit carried)",
};

/// Parameters the `aash` placer sets differently on a real machine: there other load shares
/// the fast CPUs, so a grant of a period of wall time gives unequal fast time (docs/agent.md).
pub const AASH_PLACER_REAL_MACHINE: &[RealMachineParam] = &[RealMachineParam {
    name: "time_credits",
    value: "true",
    why: "other load shares the fast CPUs: a grant is a period of fast time, not of wall time",
}];

/// Longest a grant is held under `time_credits`, in periods (bounds the wait of the others).
pub const MAX_HOLD_PERIODS: u32 = 3;

/// Under `time_credits`, the fast time a grant is worth when a contender's working set does not
/// fit the L2 (its cache is lost at every rotation): 120 ms, the rotation at which `xz -T2`
/// measured within noise of default Linux (docs/agent.md).
pub const HOT_GRANT: Nanos = Nanos::from_ms(120);

/// Periods of fast time one grant is worth at `period`: [`HOT_GRANT`] in whole periods (at
/// least one) when an active contender (a task that may run on a fast CPU) has a working set
/// larger than the private L2, else 1.
pub fn grant_periods(topo: &Topology, snap: &Snapshot, period: Nanos) -> u32 {
    let hot = snap.tasks.iter().any(|t| (t.active || t.runnable()) && t.ws_kb > topo.cache.l2_kb);
    if hot {
        HOT_GRANT.0.div_ceil(period.0.max(1)).clamp(1, u32::MAX as u64) as u32
    } else {
        1
    }
}

/// The `aash` placer.
pub struct AashPlacer {
    period: Nanos,
    sw: AashSwitches,
    fq: FastQueue,
    time_credits: bool,
    /// Fast credit per task (ns; time_credits only), clamped to ± one period.
    credit: Vec<i64>,
    /// The grant being held and for how many periods it has been.
    held: Vec<ampsched_model::TaskId>,
    held_for: u32,
}

impl AashPlacer {
    /// Read from scenario parameters.
    pub fn from_params(policy: &str, params: &Params, topo: &Topology) -> Result<AashPlacer, PolicyError> {
        let r = ParamReader::new(policy, params, AASH_PLACER_PARAMS)?;
        let period = r.duration(&PERIOD)?;
        let mut p = AashPlacer::new(period, read_switches(&r, topo)?);
        p.time_credits = r.bool(&TIME_CREDITS)?;
        Ok(p)
    }

    /// A placer with the given period and switches.
    pub fn new(period: Nanos, sw: AashSwitches) -> AashPlacer {
        AashPlacer {
            period,
            fq: FastQueue::new(sw.fq),
            sw,
            time_credits: false,
            credit: Vec::new(),
            held: Vec::new(),
            held_for: 0,
        }
    }

    /// Time credits: charge last period's fast run time and say whether the held grant stays
    /// (`quantum`: the periods of fast time a grant is worth, [`grant_periods`]).
    fn keep_grant(&mut self, topo: &Topology, snap: &Snapshot, fast: &ampsched_model::CpuSet, quantum: u32) -> bool {
        let p = self.period.0 as i64;
        let cap = p * quantum as i64;
        let fast_classes: Vec<usize> = fast.iter().map(|c| topo.cpus[c.idx()].class).collect();
        for t in &snap.tasks {
            if self.credit.len() <= t.id.idx() {
                self.credit.resize(t.id.idx() + 1, 0);
            }
            let mut ran: u64 = 0;
            for (k, ns) in t.run_by_class.iter().enumerate() {
                if fast_classes.contains(&k) {
                    ran += ns.0;
                }
            }
            let c = &mut self.credit[t.id.idx()];
            *c = (*c - ran as i64).clamp(-cap, cap);
        }
        if self.held.is_empty() || self.held_for >= quantum + MAX_HOLD_PERIODS - 1 {
            return false;
        }
        let mut sum = 0i64;
        for id in &self.held {
            match snap.tasks.iter().find(|t| t.id == *id) {
                Some(t) if t.active || t.runnable() => sum += self.credit[id.idx()],
                _ => return false,
            }
        }
        2 * sum >= p * self.held.len() as i64
    }
}

impl Placer for AashPlacer {
    fn name(&self) -> &'static str {
        "aash"
    }

    fn period(&self) -> Nanos {
        self.period
    }

    fn place(&mut self, topo: &Topology, snap: &Snapshot, out: &mut Vec<AffinityChange>) {
        let fast = self.sw.fast.and(&topo.all);
        let slow = if topo.all.and_not(&fast).is_empty() { topo.all } else { topo.all.and_not(&fast) };
        let nd = snap
            .domains
            .iter()
            .map(|d| d.id.idx() + 1)
            .chain(snap.tasks.iter().map(|t| t.domain.idx() + 1))
            .max()
            .unwrap_or(0);
        let mut doms = vec![FqDomain { priority: PriorityClass::Normal, fast_vcpus: None }; nd];
        for d in &snap.domains {
            doms[d.id.idx()] = FqDomain { priority: d.priority, fast_vcpus: d.fast_vcpus.clone() };
        }
        let vcpus: Vec<FqVcpu> = snap
            .tasks
            .iter()
            .map(|t| FqVcpu {
                id: t.id,
                domain: t.domain,
                vcpu: t.vcpu,
                active: t.active || t.runnable(),
                eligible: true,
            })
            .collect();
        let quantum = if self.time_credits { grant_periods(topo, snap, self.period) } else { 1 };
        let g = if self.time_credits && self.keep_grant(topo, snap, &fast, quantum) {
            self.held_for += 1;
            crate::fastqueue::Grant { fast: self.held.clone(), order: Vec::new(), high: Vec::new() }
        } else {
            let g = self.fq.distribute(fast.len(), &vcpus, &doms);
            if self.time_credits {
                let cap = self.period.0 as i64 * quantum as i64;
                for id in &g.fast {
                    let c = &mut self.credit[id.idx()];
                    *c = (*c + cap).clamp(-cap, cap);
                }
                self.held = g.fast.clone();
                self.held_for = 1;
            }
            g
        };
        debug_assert!(g.fast.len() <= fast.len(), "more grants than fast CPUs");
        let runnable_granted = snap.tasks.iter().filter(|t| t.runnable() && g.fast.contains(&t.id)).count();
        let borrow = self.sw.fast_never_idle && runnable_granted < fast.len();
        for (t, fv) in snap.tasks.iter().zip(&vcpus) {
            let may_fast = self.fq.may_run_fast(fv, &doms);
            let mask = if g.fast.contains(&t.id) {
                fast
            } else if !may_fast {
                slow
            } else if !fv.active {
                if self.sw.fast_never_idle {
                    topo.all
                } else {
                    slow
                }
            } else if borrow || !self.sw.fq.fair_sharing {
                topo.all
            } else {
                slow
            };
            if mask != t.affinity {
                out.push(AffinityChange { task: t.id, mask });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Worked examples of the placer's masks.
    use super::*;
    use crate::placer::TaskState;
    use crate::placer::{DomainSample, TaskSample};
    use ampsched_model::{DomainId, TaskId};

    fn snap(topo: &Topology, per_dom: &[u32], active: &[bool]) -> Snapshot {
        let mut tasks = Vec::new();
        let mut domains = Vec::new();
        for (d, &n) in per_dom.iter().enumerate() {
            domains.push(DomainSample {
                id: DomainId(d as u32),
                weight: 256,
                priority: PriorityClass::Normal,
                fast_vcpus: None,
            });
            for k in 0..n {
                let id = tasks.len();
                tasks.push(TaskSample {
                    id: TaskId(id as u32),
                    domain: DomainId(d as u32),
                    vcpu: k,
                    active: active[id],
                    state: if active[id] { TaskState::Running } else { TaskState::Blocked },
                    run_by_class: vec![Nanos::ZERO; topo.classes.len()],
                    cpu: None,
                    allowed: topo.all,
                    affinity: topo.all,
                    ws_kb: 0,
                });
            }
        }
        Snapshot { now: Nanos::from_ms(30), period: Nanos::from_ms(30), cpus: Vec::new(), tasks, domains }
    }

    fn placer(topo: &Topology) -> AashPlacer {
        AashPlacer::from_params("aash", &Params::new(), topo).unwrap()
    }

    #[test]
    fn granted_vcpus_get_the_fast_mask_the_others_the_slow_mask() {
        // 1 fast (CPU 0) + 3 slow; four single-vCPU VMs... with low parallelism off
        // (each VM has 1 active vCPU, which would make them all high priority).
        let topo = Topology::fast_slow(1, 2.0, 3, 1.0, 4);
        let mut params = Params::new();
        params.insert("low_parallelism".into(), ampsched_model::spec::ParamValue::Bool(false));
        let mut p = AashPlacer::from_params("aash", &params, &topo).unwrap();
        let s = snap(&topo, &[1, 1, 1, 1], &[true; 4]);
        let mut out = Vec::new();
        p.place(&topo, &s, &mut out);
        // Queue [0,1,2,3]: task 0 holds the fast CPU → mask "0"; the others "1-3".
        let masks: Vec<String> = out.iter().map(|c| c.mask.to_list()).collect();
        assert_eq!(masks, vec!["0", "1-3", "1-3", "1-3"]);
        // Next period: tail → head, task 3 gets the fast CPU.
        let mut out = Vec::new();
        p.place(&topo, &s, &mut out);
        let fast: Vec<u32> = out.iter().filter(|c| c.mask.to_list() == "0").map(|c| c.task.0).collect();
        assert_eq!(fast, vec![3]);
    }

    #[test]
    fn time_credits_hold_a_grant_until_a_period_of_fast_time_was_had() {
        // 1 fast (CPU 0, class 0) + 1 slow; two single-vCPU domains, both busy; low
        // parallelism off so both share the normal queue.
        let topo = Topology::fast_slow(1, 2.0, 1, 1.0, 4);
        let mut params = Params::new();
        params.insert("low_parallelism".into(), ampsched_model::spec::ParamValue::Bool(false));
        params.insert("time_credits".into(), ampsched_model::spec::ParamValue::Bool(true));
        let mut p = AashPlacer::from_params("aash", &params, &topo).unwrap();
        let mut s = snap(&topo, &[1, 1], &[true, true]);
        let fast_holder = |out: &[AffinityChange]| out.iter().find(|c| c.mask.to_list() == "0").map(|c| c.task.0);
        let mut place = |s: &mut Snapshot, ran_fast: [u64; 2]| {
            for (t, ms) in s.tasks.iter_mut().zip(ran_fast) {
                t.run_by_class = vec![Nanos::from_ms(ms), Nanos::ZERO];
            }
            let mut out = Vec::new();
            p.place(&topo, s, &mut out);
            for c in &out {
                s.tasks[c.task.idx()].affinity = c.mask;
            }
            out
        };
        // Period 1: task 0 is granted (credit 0 + 30 = 30 ms).
        assert_eq!(fast_holder(&place(&mut s, [0, 0])), Some(0));
        // Other load halved its fast CPU: it ran 15 ms there, 15 ms of credit left ≥ half a
        // period → the grant is held (no change is output for task 0).
        let out = place(&mut s, [15, 0]);
        assert_eq!(fast_holder(&out), None, "{out:?}");
        assert_eq!(s.tasks[0].affinity.to_list(), "0");
        // 15 more: credit 0 → rotate to task 1.
        assert_eq!(fast_holder(&place(&mut s, [15, 0])), Some(1));
        // Task 1 gets a full 30 ms: credit 0 → rotate back at once (equal turns when uncontended).
        assert_eq!(fast_holder(&place(&mut s, [0, 30])), Some(0));
    }

    #[test]
    fn cache_hot_contenders_rotate_every_four_periods_of_fast_time() {
        // 1 fast (CPU 0) + 1 slow, L2 512 KiB (the topology's default cache). Two busy
        // single-thread domains with time credits, each thread's working set 4 MiB: a rotation
        // would cost both their L2, so a grant is 120 ms (4 periods) of fast time.
        let topo = Topology::fast_slow(1, 2.0, 1, 1.0, 4);
        assert_eq!(topo.cache.l2_kb, 512);
        let mut params = Params::new();
        params.insert("low_parallelism".into(), ampsched_model::spec::ParamValue::Bool(false));
        params.insert("time_credits".into(), ampsched_model::spec::ParamValue::Bool(true));
        let mut p = AashPlacer::from_params("aash", &params, &topo).unwrap();
        let mut s = snap(&topo, &[1, 1], &[true, true]);
        for t in &mut s.tasks {
            t.ws_kb = 4096;
        }
        let ms30 = Nanos::from_ms(30);
        assert_eq!(grant_periods(&topo, &s, ms30), 4);
        // At a 15 ms period the same 120 ms is 8 periods; at 50 ms, 3 (whole periods).
        assert_eq!(grant_periods(&topo, &s, Nanos::from_ms(15)), 8);
        assert_eq!(grant_periods(&topo, &s, Nanos::from_ms(50)), 3);
        // The holder gets the whole fast CPU each period (30 ms), the other none.
        let mut holders = Vec::new();
        let mut holder = None::<u32>;
        for _ in 0..10 {
            for t in &mut s.tasks {
                let fast = if Some(t.id.0) == holder { 30 } else { 0 };
                t.run_by_class = vec![Nanos::from_ms(fast), Nanos::ZERO];
            }
            let mut out = Vec::new();
            p.place(&topo, &s, &mut out);
            for c in &out {
                s.tasks[c.task.idx()].affinity = c.mask;
            }
            holder = s.tasks.iter().find(|t| t.affinity.to_list() == "0").map(|t| t.id.0);
            holders.push(holder.unwrap());
        }
        // Credit 120 ms per grant, 30 spent a period: held while ≥ 15 ms is left (90, 60, 30),
        // handed over when it reaches 0: 4 periods each, equal fast time.
        assert_eq!(holders, vec![0, 0, 0, 0, 1, 1, 1, 1, 0, 0]);
        // Working sets that fit the L2 (or are unknown): one period, as before.
        for t in &mut s.tasks {
            t.ws_kb = 512;
        }
        assert_eq!(grant_periods(&topo, &s, ms30), 1);
        // A cache-hot thread that is not contending (blocked, ran nothing) does not count.
        s.tasks[1].ws_kb = 4096;
        s.tasks[1].active = false;
        s.tasks[1].state = TaskState::Blocked;
        assert_eq!(grant_periods(&topo, &s, ms30), 1);
    }

    #[test]
    fn fewer_active_vcpus_than_fast_cpus_all_run_fast() {
        // 2 fast + 2 slow; one 4-vCPU VM with only vCPU 0 active: it gets the fast mask,
        // and since 1 runnable grant < 2 fast CPUs nobody is confined to slow CPUs.
        let topo = Topology::fast_slow(2, 2.0, 2, 1.0, 4);
        let mut p = placer(&topo);
        let s = snap(&topo, &[4], &[true, false, false, false]);
        let mut out = Vec::new();
        p.place(&topo, &s, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!((out[0].task, out[0].mask.to_list()), (TaskId(0), "0-1".to_string()));
    }
}
