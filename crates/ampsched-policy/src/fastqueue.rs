//! The AASH fast queue: who holds fast credits next accounting period.
//! Shared by the `aash` dispatcher and the `aash` placer (docs/design/architecture.md:
//! shared logic lives once).
//!
//! Design (docs/design/aash.md, mechanisms 1, 3 and 4; Kazempour et al., VEE 2010, §3):
//! - The queue is a circular list of **share tokens**. With the per-vCPU
//!   share unit (the paper's default) every active vCPU owns one token; with
//!   the per-VM unit every active domain owns one. Two queues exist: the
//!   high-priority fast queue and the normal one.
//! - Distribution, once per accounting period, with `n_fast` fast slots:
//!   1. consume tokens from the head of the high queue, then of the normal
//!      queue, until `n_fast` vCPUs are granted or every token was consumed;
//!      each consumed token grants one vCPU (below), or nothing;
//!   2. rotate each queue by moving as many tokens as it had consumed from
//!      its **tail to its head** (docs/design/aash.md step 3). With a constant number
//!      consumed, consumption walks backwards round the circle: a strict
//!      round-robin, each token once every `len / n_fast` periods.
//! - A token grants its own vCPU (legacy guest, per-vCPU unit). Otherwise
//!   (aware guest, or per-VM unit) the *domain* spends it on its best active
//!   vCPU not yet granted this period: declared "fast" vCPUs before "slow"
//!   ones, then least recently granted, then lowest vCPU id. This is how we
//!   implement "an aware guest's slow vCPUs are left at the tail": the slow
//!   vCPU's *share* moves round the queue, the slow vCPU itself stays behind
//!   its fast siblings and rides a token only when all of them already hold
//!   one (a token reaching the head is never skipped, so then it does run
//!   fast, as the paper says). Departure from the paper's literal rule, on
//!   purpose: leaving the slow vCPU's queue entry at the tail loses its
//!   domain's share to other domains (e.g. A = 2 fast + 2 slow vCPUs,
//!   B = 4 vCPUs, 2 fast CPUs: A's fast vCPUs get 1/3 each instead of the
//!   1/2 that A's fair share of one fast CPU allows), which breaks the rule
//!   "the VM's fair share goes to its fast vCPUs first".
//! - Power saving: a declared "slow" vCPU is never granted; a token that
//!   finds no eligible vCPU is consumed for nothing and the next one is
//!   taken, so fast slots are not lost.
//! - Membership: tokens of vCPUs/domains that stopped being active leave
//!   their queue; new tokens enter at the *end of the line* (just after the
//!   head block about to be served, the position served last), in id order;
//!   surviving tokens keep their relative order.
//! - Passed over, not skipped: a token whose vCPU (or, for a domain's token,
//!   every active vCPU of the domain) is active but not *eligible* this
//!   period — for the `aash` dispatcher, off credit's active list, which
//!   credit leaves and re-joins between accountings — is not served and not
//!   counted as consumed, and goes back to the head of the line, so it is
//!   served first once eligible again. This is the paper's distribution as
//!   the repository's Xen patch does it (`aash_account`: "the first nfast
//!   runnable vCPUs from the head get fast credits", the others keep their
//!   place; `aash_rotate` moves only runnable vCPUs). Counting a passed-over
//!   token as served cost a CPU-bound vCPU its turn each time credit parked
//!   it, and up to 5.6 % of its equal fast share over 10 s (test
//!   `a_member_passed_over_keeps_its_place_in_line`).
//! - High priority: a domain is high when `coarse_priorities` and its class
//!   is `High`, or `low_parallelism` and its active vCPU count is at or below
//!   the threshold. `Normal` and `Low` both mean "not high" (the paper's two
//!   classes). The inverse-proportional variant instead gives each domain
//!   `⌈A_max / A_d⌉` tokens in the normal queue (A = active vCPUs), a share
//!   ∝ 1/A_d that redistributes whenever counts change (the paper's reason
//!   to prefer the threshold).
//! - `fair_sharing = false`: the normal queue grants nothing (only the high
//!   queue distributes fast credits).
//!
//! Invariants (debug-asserted): at most `n_fast` grants, no vCPU granted
//! twice, every granted vCPU active; each token in exactly one queue.
//! Determinism: vectors only, ties broken by ids.

use crate::params::{Kind, ParamDoc, ParamReader, PolicyError};
use ampsched_model::spec::{ParamValue, PriorityClass};
use ampsched_model::{CpuSet, DomainId, TaskId, Topology};

/// Default low-parallelism threshold: 1 active vCPU (the paper).
pub const DEFAULT_LOWPAR_THRESHOLD: u32 = 1;

/// Who a fair share of fast cycles belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareUnit {
    /// Each active vCPU an equal share (the paper's default).
    Vcpu,
    /// Each active VM an equal share, whatever its vCPU count.
    Vm,
}

/// How low parallelism raises a domain's fast-core priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LowParVariant {
    /// Active vCPUs ≤ threshold → high-priority queue (the paper).
    Threshold,
    /// Share inversely proportional to the active vCPU count (optional).
    InverseProportional,
}

/// Switches of the fast-queue mechanisms (docs/design/aash.md "each mechanism must be switchable").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastQueueConfig {
    /// Mechanism 1: round-robin fast credits among the normal queue.
    pub fair_sharing: bool,
    /// Mechanism 3: aware guests' fast vCPUs get the domain's share first.
    pub aware_guests: bool,
    /// Mechanism 4a: administrator `High` domains use the high-priority queue.
    pub coarse_priorities: bool,
    /// Mechanism 4b: low-parallelism domains are raised.
    pub low_parallelism: bool,
    /// Active vCPUs at or below which a domain has low parallelism.
    pub lowpar_threshold: u32,
    /// Threshold (paper) or inverse-proportional variant.
    pub lowpar_variant: LowParVariant,
    /// Per-vCPU or per-VM fair share.
    pub share_unit: ShareUnit,
    /// Never grant an aware guest's declared "slow" vCPUs.
    pub power_saving: bool,
}

impl Default for FastQueueConfig {
    fn default() -> Self {
        FastQueueConfig {
            fair_sharing: FAIR_SHARING.default_bool(),
            aware_guests: AWARE_GUESTS.default_bool(),
            coarse_priorities: COARSE_PRIORITIES.default_bool(),
            low_parallelism: LOW_PARALLELISM.default_bool(),
            lowpar_threshold: DEFAULT_LOWPAR_THRESHOLD,
            lowpar_variant: LowParVariant::Threshold,
            share_unit: ShareUnit::Vcpu,
            power_saving: POWER_SAVING.default_bool(),
        }
    }
}

/// One vCPU as the fast queue sees it.
#[derive(Clone, Copy, Debug)]
pub struct FqVcpu {
    /// The task.
    pub id: TaskId,
    /// Its domain.
    pub domain: DomainId,
    /// vCPU index within the domain.
    pub vcpu: u32,
    /// Takes part this period (the caller's rule; the `aash` dispatcher: runnable or ran in the last
    /// period): holds a place in line.
    pub active: bool,
    /// May be granted this period (the `aash` dispatcher: on credit's active list); an active but
    /// ineligible vCPU is passed over and keeps its place at the head of the line.
    pub eligible: bool,
}

/// One domain as the fast queue sees it.
#[derive(Clone, Debug)]
pub struct FqDomain {
    /// Administrator class.
    pub priority: PriorityClass,
    /// Aware guest's declared "fast" vCPU ids (`None` = legacy guest).
    pub fast_vcpus: Option<Vec<u32>>,
}

/// A share token: owned by a domain, homed at one vCPU (per-vCPU unit) or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Token {
    /// Owning domain.
    pub dom: DomainId,
    /// The vCPU it belongs to (per-vCPU unit), `None` for a domain token.
    pub home: Option<TaskId>,
    /// Index among the domain's domain tokens (inverse-proportional variant).
    pub k: u32,
}

/// The outcome of one distribution.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grant {
    /// vCPUs granted fast credits for the next period, in grant order.
    pub fast: Vec<TaskId>,
    /// Every active vCPU, next in line for fast credits first (after rotation).
    pub order: Vec<TaskId>,
    /// Domains in the high-priority queue this period, in id order.
    pub high: Vec<DomainId>,
}

/// The normal and high-priority fast queues.
#[derive(Clone, Debug)]
pub struct FastQueue {
    /// Mechanism switches.
    pub cfg: FastQueueConfig,
    /// High-priority fast queue, head first.
    pub high: Vec<Token>,
    /// Normal fast queue, head first.
    pub normal: Vec<Token>,
    last_grant: Vec<u64>,
    period: u64,
}

impl FastQueue {
    /// Empty queues.
    pub fn new(cfg: FastQueueConfig) -> FastQueue {
        FastQueue { cfg, high: Vec::new(), normal: Vec::new(), last_grant: Vec::new(), period: 0 }
    }

    /// Is `v` a declared "slow" vCPU of an aware guest (with aware guests on)?
    pub fn is_aware_slow(&self, v: &FqVcpu, doms: &[FqDomain]) -> bool {
        self.cfg.aware_guests && doms[v.domain.idx()].fast_vcpus.as_ref().is_some_and(|f| !f.contains(&v.vcpu))
    }

    /// May `v` ever hold fast credits (false only for power-saving slow vCPUs)?
    pub fn may_run_fast(&self, v: &FqVcpu, doms: &[FqDomain]) -> bool {
        !(self.cfg.power_saving && self.is_aware_slow(v, doms))
    }

    /// Run one distribution: grant up to `n_fast` vCPUs, then rotate.
    pub fn distribute(&mut self, n_fast: usize, vcpus: &[FqVcpu], doms: &[FqDomain]) -> Grant {
        self.period += 1;
        if let Some(max) = vcpus.iter().map(|v| v.id.idx() + 1).max() {
            if self.last_grant.len() < max {
                self.last_grant.resize(max, 0);
            }
        }
        // Active vCPUs per domain, in id order.
        let mut dom_active: Vec<Vec<FqVcpu>> = vec![Vec::new(); doms.len()];
        for v in vcpus.iter().filter(|v| v.active) {
            dom_active[v.domain.idx()].push(*v);
        }
        for l in &mut dom_active {
            l.sort_by_key(|v| v.id);
        }
        let cfg = self.cfg;
        let is_high = |d: usize| {
            let n = dom_active[d].len() as u32;
            n > 0
                && ((cfg.coarse_priorities && doms[d].priority == PriorityClass::High)
                    || (cfg.low_parallelism
                        && cfg.lowpar_variant == LowParVariant::Threshold
                        && n <= cfg.lowpar_threshold))
        };
        let high_doms: Vec<DomainId> = (0..doms.len()).filter(|&d| is_high(d)).map(|d| DomainId(d as u32)).collect();
        // Desired tokens per queue, in id order.
        let a_max = dom_active.iter().map(|l| l.len() as u32).max().unwrap_or(0);
        let mut want_high = Vec::new();
        let mut want_normal = Vec::new();
        for (d, list) in dom_active.iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            let dom = DomainId(d as u32);
            let inv = cfg.low_parallelism && cfg.lowpar_variant == LowParVariant::InverseProportional;
            let toks: Vec<Token> = match cfg.share_unit {
                ShareUnit::Vcpu if !inv => list.iter().map(|v| Token { dom, home: Some(v.id), k: 0 }).collect(),
                _ => {
                    let base = if cfg.share_unit == ShareUnit::Vcpu { list.len() as u32 } else { 1 };
                    let n = if inv { base * a_max.div_ceil(list.len() as u32) } else { base };
                    (0..n).map(|k| Token { dom, home: None, k }).collect()
                }
            };
            if is_high(d) {
                want_high.extend(toks);
            } else {
                want_normal.extend(toks);
            }
        }
        let slots_high = n_fast;
        reconcile(&mut self.high, &want_high, slots_high);
        let slots_normal = n_fast.saturating_sub(self.high.len());
        reconcile(&mut self.normal, &want_normal, slots_normal);
        debug_assert!(self.high.iter().all(|t| !self.normal.contains(t)), "a token in both fast queues");

        // 1-2. Consume from the head, high queue first.
        let mut granted: Vec<TaskId> = Vec::new();
        let (consumed_high, owed_high) = self.consume(true, n_fast, &dom_active, doms, &mut granted);
        let (consumed_normal, owed_normal) = if cfg.fair_sharing {
            self.consume(false, n_fast, &dom_active, doms, &mut granted)
        } else {
            (0, Vec::new())
        };
        for t in &granted {
            self.last_grant[t.idx()] = self.period;
        }
        // 3. Rotate: move as many tokens as were consumed from the tail to the head; the
        // passed-over tokens go back to the very head, in their order.
        rotate(&mut self.high, consumed_high, &owed_high);
        rotate(&mut self.normal, consumed_normal, &owed_normal);
        debug_assert!(granted.len() <= n_fast);
        debug_assert!(granted.iter().all(|t| vcpus.iter().any(|v| v.id == *t && v.active && v.eligible)));

        // Next-in-line order of every active vCPU: tokens in queue order, each
        // domain's vCPUs in its own preference order after its first token.
        let mut order: Vec<TaskId> = Vec::new();
        let queues: [&Vec<Token>; 2] = [&self.high, &self.normal];
        for q in queues {
            for tok in q.iter() {
                match tok.home {
                    Some(h) if !self.domain_spends(tok.dom, doms) => {
                        if !order.contains(&h) {
                            order.push(h);
                        }
                    }
                    _ => {
                        let mut mine: Vec<FqVcpu> = dom_active[tok.dom.idx()].clone();
                        mine.sort_by_key(|v| self.pref_key(v, doms));
                        for v in mine {
                            if !order.contains(&v.id) {
                                order.push(v.id);
                            }
                        }
                    }
                }
            }
        }
        for list in &dom_active {
            for v in list {
                if !order.contains(&v.id) {
                    order.push(v.id);
                }
            }
        }
        Grant { fast: granted, order, high: high_doms }
    }

    /// Does this domain spend its tokens itself (aware guest or per-VM unit)?
    fn domain_spends(&self, d: DomainId, doms: &[FqDomain]) -> bool {
        self.cfg.share_unit == ShareUnit::Vm || (self.cfg.aware_guests && doms[d.idx()].fast_vcpus.is_some())
    }

    /// Preference inside a domain: declared fast first, least recently granted, lowest id.
    fn pref_key(&self, v: &FqVcpu, doms: &[FqDomain]) -> (bool, u64, u32) {
        (self.is_aware_slow(v, doms), self.last_grant.get(v.id.idx()).copied().unwrap_or(0), v.vcpu)
    }

    /// Consume tokens from the head of one queue until `n_fast` grants; returns how many were
    /// consumed and the tokens passed over (active, none of their vCPUs eligible: module doc).
    fn consume(
        &self,
        high: bool,
        n_fast: usize,
        dom_active: &[Vec<FqVcpu>],
        doms: &[FqDomain],
        granted: &mut Vec<TaskId>,
    ) -> (usize, Vec<Token>) {
        let q = if high { &self.high } else { &self.normal };
        let mut consumed = 0;
        let mut owed = Vec::new();
        for tok in q.iter() {
            if granted.len() >= n_fast {
                break;
            }
            let mine = &dom_active[tok.dom.idx()];
            let home = tok.home.filter(|_| !self.domain_spends(tok.dom, doms));
            let eligible = match home {
                Some(h) => mine.iter().any(|v| v.id == h && v.eligible),
                None => mine.iter().any(|v| v.eligible),
            };
            if !eligible {
                owed.push(*tok);
                continue;
            }
            consumed += 1;
            let pick = match home {
                Some(h) => mine
                    .iter()
                    .find(|v| v.id == h)
                    .filter(|v| !granted.contains(&v.id) && self.may_run_fast(v, doms))
                    .map(|v| v.id),
                None => mine
                    .iter()
                    .filter(|v| v.eligible && !granted.contains(&v.id) && self.may_run_fast(v, doms))
                    .min_by_key(|v| self.pref_key(v, doms))
                    .map(|v| v.id),
            };
            if let Some(t) = pick {
                granted.push(t);
            }
        }
        (consumed, owed)
    }
}

/// The rotation of one queue (module doc): the passed-over tokens `owed` leave the line, the
/// rest moves `consumed` tokens from the tail to the head, and `owed` goes back to the very head.
fn rotate(q: &mut Vec<Token>, consumed: usize, owed: &[Token]) {
    q.retain(|t| !owed.contains(t));
    let n = q.len();
    q.rotate_right(consumed.min(n));
    q.splice(0..0, owed.iter().copied());
}

/// Keep the surviving tokens of `q` in order, drop the others, insert new
/// ones (in id order) at the end of the line: just after the first `slots`
/// tokens, which are served now.
fn reconcile(q: &mut Vec<Token>, want: &[Token], slots: usize) {
    q.retain(|t| want.contains(t));
    let new: Vec<Token> = want.iter().filter(|t| !q.contains(t)).copied().collect();
    let at = slots.min(q.len());
    q.splice(at..at, new);
}

/// The mechanism switches shared by the `aash` dispatcher and placer.
#[derive(Clone, Debug, PartialEq)]
pub struct AashSwitches {
    /// Fast-queue switches (mechanisms 1, 3, 4).
    pub fq: FastQueueConfig,
    /// Mechanism 2: fast CPUs never idle while a slow CPU has work they could run.
    pub fast_never_idle: bool,
    /// The CPUs treated as fast (default: the fastest class).
    pub fast: CpuSet,
}

/// Mechanism 1.
pub const FAIR_SHARING: ParamDoc = ParamDoc {
    name: "fair_sharing",
    kind: Kind::Bool { default: true },
    unit: "",
    doc: "mechanism 1: fast credits go round-robin through the fast queue, n_fast vCPUs per period",
};
/// Mechanism 2.
pub const FAST_NEVER_IDLE: ParamDoc = ParamDoc {
    name: "fast_never_idle",
    kind: Kind::Bool { default: true },
    unit: "",
    doc: "mechanism 2: an idle fast CPU steals (slow queues first) or pulls work before idling",
};
/// Mechanism 3.
pub const AWARE_GUESTS: ParamDoc = ParamDoc {
    name: "aware_guests",
    kind: Kind::Bool { default: true },
    unit: "",
    doc: "mechanism 3: an aware guest's fast share goes to its declared fast vCPUs first",
};
/// Mechanism 4a.
pub const COARSE_PRIORITIES: ParamDoc = ParamDoc {
    name: "coarse_priorities",
    kind: Kind::Bool { default: true },
    unit: "",
    doc: "mechanism 4a: domains of priority class high use the high-priority fast queue",
};
/// Mechanism 4b.
pub const LOW_PARALLELISM: ParamDoc = ParamDoc {
    name: "low_parallelism",
    kind: Kind::Bool { default: true },
    unit: "",
    doc: "mechanism 4b: domains with few active vCPUs are raised (see lowpar_*)",
};
/// Mechanism 4b's threshold (the paper's 1).
pub const LOWPAR_THRESHOLD: ParamDoc = ParamDoc {
    name: "lowpar_threshold",
    kind: Kind::Int { default: DEFAULT_LOWPAR_THRESHOLD as u64, min: 0, max: 4096 },
    unit: "vCPUs",
    doc: "active vCPUs at or below which a domain has low parallelism",
};
/// Mechanism 4b's variant.
pub const LOWPAR_VARIANT: ParamDoc = ParamDoc {
    name: "lowpar_variant",
    kind: Kind::Choice { default: "threshold", allowed: &["threshold", "inverse-proportional"] },
    unit: "",
    doc: "threshold (high-priority queue) or inverse-proportional (share ∝ 1/active vCPUs)",
};
/// Mechanism 1's fairness unit.
pub const SHARE_UNIT: ParamDoc = ParamDoc {
    name: "share_unit",
    kind: Kind::Choice { default: "vcpu", allowed: &["vcpu", "vm"] },
    unit: "",
    doc: "what gets an equal share of fast cycles",
};
/// The power-saving variant of mechanism 3.
pub const POWER_SAVING: ParamDoc = ParamDoc {
    name: "power_saving",
    kind: Kind::Bool { default: false },
    unit: "",
    doc: "never map an aware guest's declared slow vCPUs to fast CPUs",
};
/// The fast CPUs.
pub const FAST_CPUS: ParamDoc = ParamDoc {
    name: "fast_cpus",
    kind: Kind::CpuList { default: "(fastest class)" },
    unit: "",
    doc: "CPUs treated as fast, e.g. \"0\" (overhead experiment on an all-slow machine)",
};

/// The shared switches' declarations, after the `$extra` entries.
macro_rules! aash_param_docs {
    ($($extra:expr),* $(,)?) => {
        &[
            $($extra,)*
            $crate::fastqueue::FAIR_SHARING,
            $crate::fastqueue::FAST_NEVER_IDLE,
            $crate::fastqueue::AWARE_GUESTS,
            $crate::fastqueue::COARSE_PRIORITIES,
            $crate::fastqueue::LOW_PARALLELISM,
            $crate::fastqueue::LOWPAR_THRESHOLD,
            $crate::fastqueue::LOWPAR_VARIANT,
            $crate::fastqueue::SHARE_UNIT,
            $crate::fastqueue::POWER_SAVING,
            $crate::fastqueue::FAST_CPUS,
        ]
    };
}
pub(crate) use aash_param_docs;

/// Read the shared switches (documented by `aash_param_docs!`).
pub fn read_switches(r: &ParamReader, topo: &Topology) -> Result<AashSwitches, PolicyError> {
    let fq = FastQueueConfig {
        fair_sharing: r.bool(&FAIR_SHARING)?,
        aware_guests: r.bool(&AWARE_GUESTS)?,
        coarse_priorities: r.bool(&COARSE_PRIORITIES)?,
        low_parallelism: r.bool(&LOW_PARALLELISM)?,
        lowpar_threshold: r.int(&LOWPAR_THRESHOLD)? as u32,
        lowpar_variant: match r.choice(&LOWPAR_VARIANT)? {
            "threshold" => LowParVariant::Threshold,
            _ => LowParVariant::InverseProportional,
        },
        share_unit: match r.choice(&SHARE_UNIT)? {
            "vcpu" => ShareUnit::Vcpu,
            _ => ShareUnit::Vm,
        },
        power_saving: r.bool(&POWER_SAVING)?,
    };
    let fast = match r.cpu_list(&FAST_CPUS) {
        None => topo.fast_cpus,
        Some(v) => {
            let s = match v {
                ParamValue::Str(s) => s.clone(),
                ParamValue::Int(i) => i.to_string(),
                _ => {
                    return Err(PolicyError {
                        param: "fast_cpus".into(),
                        msg: format!("must be a CPU list such as \"0\" or \"0-1,4\", got {v:?}"),
                    })
                }
            };
            let set = CpuSet::parse_list(&s).map_err(|e| PolicyError { param: "fast_cpus".into(), msg: e })?;
            if let Some(bad) = set.iter().find(|c| c.idx() >= topo.ncpus()) {
                let msg = format!("CPU {} does not exist (the machine has 0-{})", bad.0, topo.ncpus() - 1);
                return Err(PolicyError { param: "fast_cpus".into(), msg });
            }
            if set.is_empty() {
                return Err(PolicyError { param: "fast_cpus".into(), msg: "must name at least one CPU".into() });
            }
            set
        }
    };
    Ok(AashSwitches { fq, fast_never_idle: r.bool(&FAST_NEVER_IDLE)?, fast })
}

#[cfg(test)]
mod tests {
    //! Worked examples of the fast queue.
    use super::*;

    fn legacy(n: usize) -> Vec<FqDomain> {
        vec![FqDomain { priority: PriorityClass::Normal, fast_vcpus: None }; n]
    }

    /// `per_dom[d]` vCPUs in domain d, ids assigned in order, all active.
    fn vcpus(per_dom: &[u32]) -> Vec<FqVcpu> {
        let mut out = Vec::new();
        for (d, &n) in per_dom.iter().enumerate() {
            for k in 0..n {
                out.push(FqVcpu {
                    id: TaskId(out.len() as u32),
                    domain: DomainId(d as u32),
                    vcpu: k,
                    active: true,
                    eligible: true,
                });
            }
        }
        out
    }

    fn ids(v: &[TaskId]) -> Vec<u32> {
        v.iter().map(|t| t.0).collect()
    }

    #[test]
    fn rotation_moves_the_tail_to_the_head() {
        // Five single-vCPU VMs a..e (tasks 0..4), two fast CPUs; low parallelism off
        // (each VM has 1 active vCPU ≤ threshold 1: it would put all of them in the high queue).
        let (vs, ds) = (vcpus(&[1, 1, 1, 1, 1]), legacy(5));
        let mut fq = FastQueue::new(FastQueueConfig { low_parallelism: false, ..Default::default() });
        // Queue [0,1,2,3,4]: the head {0,1} is granted; then tail {3,4} → head: [3,4,0,1,2].
        let g = fq.distribute(2, &vs, &ds);
        assert_eq!(ids(&g.fast), vec![0, 1]);
        assert_eq!(fq.normal.iter().map(|t| t.home.unwrap().0).collect::<Vec<_>>(), vec![3, 4, 0, 1, 2]);
        // Next: {3,4}, queue → [1,2,3,4,0]; then {1,2} → [4,0,1,2,3]; then {4,0}; then {2,3}.
        let mut seen = vec![0; 5];
        let mut grants = Vec::new();
        for _ in 0..5 {
            let g = fq.distribute(2, &vs, &ds);
            grants.push(ids(&g.fast));
            for t in g.fast {
                seen[t.idx()] += 1;
            }
        }
        assert_eq!(grants, vec![vec![3, 4], vec![1, 2], vec![4, 0], vec![2, 3], vec![0, 1]]);
        // 5 periods × 2 slots = 10 grants over 5 vCPUs: exactly 2 each.
        assert_eq!(seen, vec![2, 2, 2, 2, 2]);
    }

    #[test]
    fn a_member_passed_over_keeps_its_place_in_line() {
        // Five single-vCPU VMs (tasks 0..4), two fast CPUs, as above. Period 1 grants {0,1},
        // queue [3,4,0,1,2]. In period 2 task 3 is off credit's active list (credit parked it):
        // it is passed over, not served — {4,0} are granted, two tokens consumed — and goes
        // back to the head: the rest [4,0,1,2] rotates by 2 to [1,2,4,0], then 3 in front:
        // [3,1,2,4,0]. Period 3, eligible again, task 3 is served first, with task 1.
        let (mut vs, ds) = (vcpus(&[1, 1, 1, 1, 1]), legacy(5));
        let mut fq = FastQueue::new(FastQueueConfig { low_parallelism: false, ..Default::default() });
        let line = |fq: &FastQueue| fq.normal.iter().map(|t| t.home.unwrap().0).collect::<Vec<_>>();
        assert_eq!(ids(&fq.distribute(2, &vs, &ds).fast), vec![0, 1]);
        vs[3].eligible = false;
        let g = fq.distribute(2, &vs, &ds);
        assert_eq!(ids(&g.fast), vec![4, 0]);
        assert_eq!(line(&fq), vec![3, 1, 2, 4, 0]);
        vs[3].eligible = true;
        assert_eq!(ids(&fq.distribute(2, &vs, &ds).fast), vec![3, 1]);
        // Task 3 lost no turn: its token kept its place, so from here on the line serves every
        // token once per 5 periods (10 slots, 5 tokens: 2 grants each per 5 periods).
        let mut seen = [0u32; 5];
        for _ in 0..5 {
            for t in fq.distribute(2, &vs, &ds).fast {
                seen[t.idx()] += 1;
            }
        }
        assert_eq!(seen, [2, 2, 2, 2, 2]);
        // A member never eligible (a vCPU that credit never charges) holds the head and never
        // takes a slot: the others keep both fast CPUs every period.
        vs[0].eligible = false;
        for _ in 0..6 {
            let g = fq.distribute(2, &vs, &ds);
            assert_eq!(g.fast.len(), 2);
            assert!(!g.fast.contains(&TaskId(0)));
        }
    }

    #[test]
    fn aware_slow_vcpus_stay_behind_their_fast_siblings() {
        // A (tasks 0-3) is aware with fast vCPUs {0,1}; B (tasks 4-7) is legacy; 2 fast CPUs.
        let vs = vcpus(&[4, 4]);
        let mut ds = legacy(2);
        ds[0].fast_vcpus = Some(vec![0, 1]);
        let mut fq = FastQueue::new(FastQueueConfig::default());
        let mut fast_time = [0u32; 8];
        // 8 tokens, 2 consumed per period: over 8 periods each token is served twice,
        // so A's 4 tokens bring 8 grants, all spent on A's fast vCPUs 0 and 1.
        for _ in 0..8 {
            let g = fq.distribute(2, &vs, &ds);
            for t in &g.fast {
                fast_time[t.idx()] += 1;
            }
        }
        // A's share = 2 fast CPUs × 8 periods × 4/8 = 8 grants = 4 + 4 on its fast vCPUs;
        // its slow vCPUs 2, 3 get none; B's 8 grants are 2 per vCPU.
        assert_eq!(fast_time, [4, 4, 0, 0, 2, 2, 2, 2]);
        // The slow vCPUs are last of A's vCPUs in the next-in-line order.
        let g = fq.distribute(2, &vs, &ds);
        let pos = |t: u32| g.order.iter().position(|x| x.0 == t).unwrap();
        assert!(pos(0) < pos(2) && pos(1) < pos(2) && pos(1) < pos(3));
    }

    #[test]
    fn a_slow_vcpu_reaching_the_head_still_runs_fast_unless_power_saving() {
        // One aware VM with 3 vCPUs, fast = {0}; 2 fast CPUs: both tokens at the head
        // are A's; the first goes to vCPU 0, the second to a slow vCPU (not skipped).
        let vs = vcpus(&[3]);
        let ds = vec![FqDomain { priority: PriorityClass::Normal, fast_vcpus: Some(vec![0]) }];
        let mut cfg = FastQueueConfig { low_parallelism: false, ..Default::default() };
        let g = FastQueue::new(cfg).distribute(2, &vs, &ds);
        assert_eq!(ids(&g.fast), vec![0, 1]);
        // Power saving: slow vCPUs never get fast credits, the slot stays unused.
        cfg.power_saving = true;
        let g = FastQueue::new(cfg).distribute(2, &vs, &ds);
        assert_eq!(ids(&g.fast), vec![0]);
    }

    #[test]
    fn high_priority_queue_is_served_first() {
        // H (tasks 0,1) is High; N (tasks 2..5) normal; 1 fast CPU.
        let vs = vcpus(&[2, 4]);
        let mut ds = legacy(2);
        ds[0].priority = PriorityClass::High;
        let mut fq = FastQueue::new(FastQueueConfig::default());
        // H's two vCPUs share the one fast CPU round-robin; N gets nothing.
        let grants: Vec<Vec<u32>> = (0..4).map(|_| ids(&fq.distribute(1, &vs, &ds).fast)).collect();
        assert_eq!(grants, vec![vec![0], vec![1], vec![0], vec![1]]);
        // With 3 fast CPUs: H's 2, then 1 from the head of the normal queue.
        let g = fq.distribute(3, &vs, &ds);
        assert_eq!(g.fast.len(), 3);
        assert!(g.fast.contains(&TaskId(0)) && g.fast.contains(&TaskId(1)));
        assert_eq!(g.high, vec![DomainId(0)]);
    }

    #[test]
    fn low_parallelism_moves_a_domain_to_the_high_queue_and_back() {
        // S (task 0..3) has one active vCPU; P (tasks 4..7) four; 1 fast CPU.
        let mut vs = vcpus(&[4, 4]);
        for v in &mut vs[1..4] {
            v.active = false;
        }
        let ds = legacy(2);
        let mut fq = FastQueue::new(FastQueueConfig::default());
        // 1 active ≤ threshold 1 → S is high: its vCPU 0 holds the fast CPU every period.
        for _ in 0..3 {
            let g = fq.distribute(1, &vs, &ds);
            assert_eq!(ids(&g.fast), vec![0]);
            assert_eq!(g.high, vec![DomainId(0)]);
        }
        // S's parallel phase: 4 active > 1 → back to the normal queue, sharing with P.
        for v in &mut vs[1..4] {
            v.active = true;
        }
        let g = fq.distribute(1, &vs, &ds);
        assert!(g.high.is_empty());
        assert_eq!(fq.normal.len(), 8);
        // Switched off, S stays normal even with one active vCPU.
        for v in &mut vs[1..4] {
            v.active = false;
        }
        let mut fq = FastQueue::new(FastQueueConfig { low_parallelism: false, ..Default::default() });
        assert!(fq.distribute(1, &vs, &ds).high.is_empty());
    }

    #[test]
    fn per_vm_share_unit_splits_by_vm() {
        // A has 1 vCPU (task 0), B has 3 (tasks 1-3); 1 fast CPU, low parallelism off.
        let (vs, ds) = (vcpus(&[1, 3]), legacy(2));
        let cfg = FastQueueConfig { share_unit: ShareUnit::Vm, low_parallelism: false, ..Default::default() };
        let mut fq = FastQueue::new(cfg);
        let mut n = [0u32; 4];
        for _ in 0..12 {
            for t in fq.distribute(1, &vs, &ds).fast {
                n[t.idx()] += 1;
            }
        }
        // Two VM tokens alternate: A 6 of 12 periods; B's 6 spread over its 3 vCPUs, 2 each.
        assert_eq!(n, [6, 2, 2, 2]);
        // Per vCPU: 4 tokens, 3 of 12 periods each.
        let cfg = FastQueueConfig { low_parallelism: false, ..Default::default() };
        let mut fq = FastQueue::new(cfg);
        let mut n = [0u32; 4];
        for _ in 0..12 {
            for t in fq.distribute(1, &vs, &ds).fast {
                n[t.idx()] += 1;
            }
        }
        assert_eq!(n, [3, 3, 3, 3]);
    }

    #[test]
    fn inverse_proportional_variant_favours_small_domains() {
        // A: 1 active vCPU, B: 4; A_max = 4 → A holds ⌈4/1⌉ = 4 tokens, B 4 × ⌈4/4⌉ = 4.
        let (vs, ds) = (vcpus(&[1, 4]), legacy(2));
        let cfg = FastQueueConfig { lowpar_variant: LowParVariant::InverseProportional, ..Default::default() };
        let mut fq = FastQueue::new(cfg);
        let mut a = 0;
        for _ in 0..8 {
            a += fq.distribute(1, &vs, &ds).fast.iter().filter(|t| t.0 == 0).count();
        }
        // 8 tokens, 1 per period: A's 4 tokens → A runs fast 4 of 8 periods (B's vCPUs 1 each).
        assert_eq!(a, 4);
        assert!(fq.high.is_empty());
    }

    #[test]
    fn newcomers_enter_at_the_end_of_the_line() {
        let mut vs = vcpus(&[1, 1, 1, 1]);
        vs[3].active = false;
        let ds = legacy(4);
        let mut fq = FastQueue::new(FastQueueConfig { low_parallelism: false, ..Default::default() });
        // [0,1,2]: grant 0, rotate → [2,0,1].
        assert_eq!(ids(&fq.distribute(1, &vs, &ds).fast), vec![0]);
        // 3 joins after the head block [2]: [2,3,0,1]; grant 2, rotate → [1,2,3,0].
        vs[3].active = true;
        assert_eq!(ids(&fq.distribute(1, &vs, &ds).fast), vec![2]);
        let order: Vec<u32> = (0..4).map(|_| fq.distribute(1, &vs, &ds).fast[0].0).collect();
        // Served backwards round the circle: 1, 0, 3, 2; the newcomer waited its turn.
        assert_eq!(order, vec![1, 0, 3, 2]);
    }
}
