//! Observe: one period's samples — per CPU busy/idle/noise
//! ([`crate::sampler`]), per managed thread its run time (task-clock counter
//! or `schedstat`), state and CPU (`stat`) — turned into the placer's
//! [`Snapshot`] as the contract in `ampsched_policy::placer_bridge` defines it:
//! - state: `R` → `Runnable` (`/proc` does not tell running from queued, so
//!   the agent never reports `Running`), other states → `Blocked`, a thread
//!   found gone this period → `Done` (in this snapshot only; it is then
//!   dropped);
//! - active: it ran (run time grew) or is runnable;
//! - run time per class: charged to the class of the CPU it is on at
//!   sampling time (exact when its mask holds one class, as placers' masks
//!   do; a short burst without a `stat` read is charged to its mask's class);
//! - `allowed`: its original affinity (topology ids); `affinity`: the
//!   effective mask in force; `ws_kb` its process's resident anonymous
//!   memory (`RssAnon`, an upper bound of the working set: a thread's own is
//!   not visible in `/proc`), 0 for a VM's vCPU and for an ended thread;
//! - `Snapshot::period`: the time that elapsed since the last sample.
//!
//! `stat` (state and CPU) costs several times a `schedstat` read and is read
//! only when the run time cannot tell ([`want_stat`]).

use crate::discovery::Discovered;
use crate::export::Export;
use crate::inventory::{Inventory, RunSource};
use crate::loopstats::LoopStats;
use crate::procfs::{parse_schedstat, parse_stat};
use crate::sampler::{CpuFigures, CpuSampler};
use ampsched_model::{CpuId, CpuSet, Nanos, TaskId};
use ampsched_policy::{CpuSample, DomainSample, Snapshot, TaskSample, TaskState};

/// A thread whose run + run-queue wait in a period is below `period / STAT_BURST_DIV`
/// (1/8: 3.75 ms of 30 ms) had a short burst: its `stat` is not read (it is taken to be
/// asleep again, and its run time is charged to its mask's class or its last CPU's).
pub const STAT_BURST_DIV: u64 = 8;
/// Every this many periods (staggered by task) a thread that did anything gets its `stat`
/// read anyway, so the CPU of a short-burst thread with a multi-class mask is never stale for long.
pub const STAT_REFRESH_EVERY: u64 = 8;

/// Whether a thread's `stat` (state and CPU; several times the cost of `schedstat`) must be
/// read this period. `state` is what the last read said ('?' = never read), `changed` whether
/// `schedstat` moved, `demand` its run + wait ns in the period, `one_class` whether its mask
/// lies in one CPU class. A thread that did nothing since a read saying it was asleep is still
/// asleep on the same CPU; a runnable one is read until it stops; a short burst is read only
/// when its mask leaves its CPU's class unknown, and then only every `STAT_REFRESH_EVERY`
/// periods.
pub fn want_stat(state: char, changed: bool, demand: u64, burst: u64, one_class: bool, period: u64, task: u32) -> bool {
    if state == '?' || state == 'R' {
        return true;
    }
    if !changed {
        return false;
    }
    if demand >= burst {
        return true;
    }
    !one_class && (period + task as u64).is_multiple_of(STAT_REFRESH_EVERY)
}

/// The class of every CPU in `mask` (topology ids) when they share one; `None` for an empty or mixed mask.
pub fn class_of_mask(topo: &ampsched_model::Topology, mask: &CpuSet) -> Option<usize> {
    let mut it = mask.iter().filter(|c| c.idx() < topo.cpus.len()).map(|c| topo.cpus[c.idx()].class);
    let first = it.next()?;
    it.all(|k| k == first).then_some(first)
}

/// One period's observation.
pub struct Observation {
    /// The placer's input.
    pub snap: Snapshot,
    /// For the trace: per CPU the managed thread that ran there longest (tracing only).
    pub on_cpu: Vec<Option<i32>>,
    /// For the trace: managed threads runnable at the end of the period, sorted (tracing only).
    pub runnable_tids: Vec<i32>,
}

/// Per-period sampling state.
pub struct Observer {
    cpu: CpuSampler,
    /// Last period's task samples, reused (no allocation per thread).
    pool: Vec<TaskSample>,
    /// Machine-wide fast-idle-while-slow-busy estimate, ns.
    pub fisb_machine_ns: u64,
    /// Per CPU, the last period's figures.
    pub last_cpu: Vec<CpuFigures>,
}

impl Observer {
    /// An observer sampling the CPUs through `cpu`.
    pub fn new(cpu: CpuSampler) -> Observer {
        Observer { cpu, pool: Vec::new(), fisb_machine_ns: 0, last_cpu: Vec::new() }
    }

    /// Give back a snapshot's task samples for reuse.
    pub fn recycle(&mut self, snap: Snapshot) {
        self.pool = snap.tasks;
    }

    /// Sample every managed thread and the CPUs: the snapshot at `now` (since the start),
    /// `elapsed` since the last sample; `nominal` is the loop's period. Threads found gone
    /// are reported `Done` and removed from the inventory.
    #[allow(clippy::too_many_arguments)]
    pub fn observe(
        &mut self,
        inv: &mut Inventory,
        d: &Discovered,
        ex: &mut Export,
        stats: &mut LoopStats,
        now: Nanos,
        elapsed: Nanos,
        nominal: Nanos,
    ) -> Observation {
        let by_tid = &inv.by_tid;
        let cpus = self.cpu.sample(&|tid| by_tid.contains_key(&tid));
        let topo = &d.topo;
        let ncls = topo.classes.len();
        let fast_idle: u64 =
            cpus.iter().enumerate().filter(|(i, _)| topo.is_fast(CpuId(*i as u32))).map(|(_, c)| c.idle.0).sum();
        let slow_busy: u64 =
            cpus.iter().enumerate().filter(|(i, _)| !topo.is_fast(CpuId(*i as u32))).map(|(_, c)| c.busy.0).sum();
        self.fisb_machine_ns += fast_idle.min(slow_busy);
        let mut nr_running = vec![0u32; topo.ncpus()];
        // Reuse last period's task samples (and their per-class vectors): no allocation per thread.
        let mut pool = std::mem::take(&mut self.pool);
        let mut tasks: Vec<TaskSample> = Vec::with_capacity(inv.threads.len());
        let mut gone = Vec::new();
        let mut slow_run = vec![0u64; inv.domains.len()];
        for dom in &mut inv.domains {
            dom.active = 0;
            dom.threads = 0;
        }
        let burst = nominal.0 / STAT_BURST_DIV;
        let period_no = stats.periods;
        // For the trace: per CPU the thread that ran there longest, and who is runnable.
        let tracing = ex.trace.is_some();
        let mut longest: Vec<Option<(u64, i32)>> = if tracing { vec![None; topo.ncpus()] } else { Vec::new() };
        let mut runnable_tids: Vec<i32> = Vec::new();
        let mut to_clock: Vec<TaskId> = Vec::new();
        let want_clocks = period_no > 0 && inv.wants_clocks();
        for (id, t) in inv.threads.iter_mut() {
            stats.thread_samples += 1;
            let ss = match &mut t.run {
                // The counter stays readable after the thread exits: exits are found by
                // `refresh_threads` (thread counts, a full relist every rescan) and `stat`.
                RunSource::Clock(c) => match c.read() {
                    Ok(run) => (run, 0, 0),
                    Err(_) => {
                        gone.push(*id);
                        continue;
                    }
                },
                RunSource::Schedstat(f) => {
                    stats.schedstat_reads += 1;
                    let Some(ss) = f.read().ok().and_then(parse_schedstat) else {
                        gone.push(*id);
                        continue;
                    };
                    if want_clocks {
                        to_clock.push(*id);
                    }
                    ss
                }
            };
            let delta = ss.0.saturating_sub(t.last_sched.0);
            let waited = ss.1.saturating_sub(t.last_sched.1);
            // Class of the CPU it ran on, known without `stat` when its mask lies in one class
            // (the placers' masks do).
            let mask_class = class_of_mask(topo, &t.cur);
            if want_stat(t.state, ss != t.last_sched, delta + waited, burst, mask_class.is_some(), period_no, id.0) {
                stats.stat_reads += 1;
                let Some(st) = t.stat.read().ok().and_then(parse_stat) else {
                    gone.push(*id);
                    continue;
                };
                t.state = st.state;
                t.processor = st.processor;
            } else if ss != t.last_sched {
                // A short burst (< period / STAT_BURST_DIV of run + wait) and no `stat`: it
                // ran and, with so little demand, is asleep again.
                t.state = 'S';
            }
            if t.state == 'Z' || t.state == 'X' {
                gone.push(*id);
                continue;
            }
            t.last_sched = ss;
            let mut cpu = d.topo_id(t.processor);
            let runnable = t.state == 'R';
            let mut by_class = pool.pop().map(|s| s.run_by_class).unwrap_or_default();
            by_class.clear();
            by_class.resize(ncls, Nanos::ZERO);
            // The CPU last seen is outside a single-class mask only when `stat` was skipped
            // after the mask changed: charge the mask's class then (its first CPU).
            if let (Some(k), Some(c)) = (mask_class, cpu) {
                if topo.cpus[c.idx()].class != k {
                    cpu = t.cur.iter().next();
                }
            }
            if let Some(c) = cpu {
                let cls = topo.cpus[c.idx()].class;
                by_class[cls] = Nanos(delta);
                if cls == topo.fast_class {
                    inv.domains[t.dom].fast_ns += delta;
                } else {
                    slow_run[t.dom] += delta;
                }
                if runnable {
                    nr_running[c.idx()] += 1;
                }
                if tracing && delta > 0 && longest[c.idx()].is_none_or(|(d, _)| delta > d) {
                    longest[c.idx()] = Some((delta, t.tid));
                }
            }
            if tracing && runnable {
                runnable_tids.push(t.tid);
            }
            let active = delta > 0 || runnable;
            let dom = &mut inv.domains[t.dom];
            dom.threads += 1;
            if active {
                dom.active += 1;
            }
            tasks.push(TaskSample {
                id: *id,
                domain: dom.id,
                vcpu: t.vcpu,
                active,
                state: if runnable { TaskState::Runnable } else { TaskState::Blocked },
                run_by_class: by_class,
                cpu,
                allowed: d.from_linux(&t.original),
                affinity: t.cur,
                ws_kb: inv.anon_kb.get(&t.pid).copied().unwrap_or(0),
            });
        }
        for id in gone {
            inv.remove_thread(ex, id, "exited");
        }
        // Read by schedstat up to now, by a counter from now on (`inventory`).
        to_clock.retain(|id| inv.threads.contains_key(id));
        inv.upgrade_clocks(ex, &to_clock);
        // Threads that ended since the last observation (found here or by the inventory):
        // `Done` in this snapshot, then forgotten.
        if !inv.ended.is_empty() {
            for (id, t) in inv.ended.drain(..) {
                let mut by_class = pool.pop().map(|s| s.run_by_class).unwrap_or_default();
                by_class.clear();
                by_class.resize(ncls, Nanos::ZERO);
                tasks.push(TaskSample {
                    id,
                    domain: inv.domains[t.dom].id,
                    vcpu: t.vcpu,
                    active: false,
                    state: TaskState::Done,
                    run_by_class: by_class,
                    cpu: d.topo_id(t.processor),
                    allowed: d.from_linux(&t.original),
                    affinity: t.cur,
                    ws_kb: 0,
                });
            }
            tasks.sort_by_key(|t| t.id);
        }
        for (di, dom) in inv.domains.iter_mut().enumerate() {
            dom.fisb_ns += fast_idle.min(slow_run[di]);
        }
        stats.managed_max = stats.managed_max.max(tasks.len());
        let snap = Snapshot {
            now,
            period: elapsed,
            cpus: cpus
                .iter()
                .enumerate()
                .map(|(i, c)| CpuSample {
                    id: CpuId(i as u32),
                    busy: c.busy,
                    idle: c.idle,
                    noise: c.noise,
                    nr_running: nr_running[i],
                })
                .collect(),
            tasks,
            domains: inv
                .domains
                .iter()
                .filter(|dom| dom.alive)
                .map(|dom| {
                    let t = &inv.targets[dom.target];
                    DomainSample {
                        id: dom.id,
                        weight: t.weight,
                        priority: t.priority,
                        fast_vcpus: t.fast_vcpus.clone(),
                    }
                })
                .collect(),
        };
        self.last_cpu = cpus;
        if tracing {
            runnable_tids.sort_unstable();
        }
        Observation { snap, on_cpu: longest.iter().map(|x| x.map(|(_, tid)| tid)).collect(), runnable_tids }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_is_read_only_when_schedstat_cannot_tell() {
        // Period 30 ms, burst threshold 30 / 8 = 3.75 ms.
        let burst = 30_000_000 / STAT_BURST_DIV;
        // Never read, or runnable at the last read: always.
        assert!(want_stat('?', false, 0, burst, true, 1, 0));
        assert!(want_stat('R', false, 0, burst, true, 1, 0));
        // Asleep and nothing moved: still asleep on the same CPU.
        assert!(!want_stat('S', false, 0, burst, false, 0, 0));
        // Woke and ran or waited ≥ 3.75 ms: may still be runnable.
        assert!(want_stat('S', true, 4_000_000, burst, true, 1, 0));
        // A 200 µs burst in a one-class mask: its class is the mask's, no read.
        assert!(!want_stat('S', true, 200_000, burst, true, 0, 0));
        // The same burst with a mask over both classes: read every 8th period, staggered by task:
        // (period 5 + task 3) = 8 ≡ 0 (mod 8) → read; period 6 → not.
        assert!(want_stat('S', true, 200_000, burst, false, 5, 3));
        assert!(!want_stat('S', true, 200_000, burst, false, 6, 3));
    }

    #[test]
    fn class_of_a_mask() {
        // 1 fast CPU (class 0) + 3 slow (class 1).
        let topo = ampsched_model::Topology::fast_slow(1, 2.0, 3, 1.0, 4);
        let ids = |v: &[u32]| CpuSet::from_cpus(v.iter().map(|c| CpuId(*c)));
        assert_eq!(class_of_mask(&topo, &ids(&[0])), Some(topo.fast_class));
        assert_eq!(class_of_mask(&topo, &ids(&[1, 3])), Some(topo.cpus[1].class));
        assert_eq!(class_of_mask(&topo, &ids(&[0, 1])), None);
        assert_eq!(class_of_mask(&topo, &CpuSet::new()), None);
    }
}
