//! Where the agent's own loop thread may run: off CPUs busy with real-time work.
//!
//! The loop thread reacts to an idle fast CPU ([`crate::events`]) and keeps the period; both
//! are late by however long the thread waits to run after its wake-up. On a CPU where a
//! real-time thread runs, that wait has no bound a nice value can shorten: Linux picks the
//! next task class by class (kernel/sched/core.c `__pick_next_task` walks `for_each_class`
//! from the stop and deadline classes through `rt_sched_class` to `fair_sched_class`), so a
//! CFS thread, at nice -20 or not, runs only once the CPU's `SCHED_FIFO`/`SCHED_RR` threads
//! sleep or are throttled (`sched_rt_runtime_us`). And CFS's wake-up placement takes such a
//! CPU as idle whenever its real-time thread happens to sleep at that instant
//! (`select_task_rq_fair` → `select_idle_sibling` → `available_idle_cpu`), so a thread that
//! last ran there is woken there again. Measured on the development machine (CPU 1 slowed by
//! `ampsched-hog`, 5 ms `SCHED_FIFO` spin every 10 ms): one run of 14 of `bench-agent.sh r`
//! had a reaction p99 of 3.66 ms — the loop thread woken on CPU 1 behind the spin — and
//! `sysbench cpu` under `aash` woke the loop on CPU 1 in 65 of 84 wake-ups, up to 5.8-8.8 ms
//! late (docs/agent.md).
//!
//! Rule ([`own_cpus`]), each period: the loop thread's affinity is its original mask less
//! every managed CPU whose real-time run time in the last period was at least
//! `period / RT_DIV` (the sampler's `rt` figure: the run time of every `SCHED_FIFO`, `RR`
//! and `DEADLINE` thread on that CPU); when that would leave nothing, the original mask.
//! CPUs the agent does not manage keep their place (their load is not measured). Only the
//! loop thread is confined (set on itself after the launch, so no job inherits it), and its
//! original mask is put back before the agent exits ([`OwnPlace::restore`]).
//!
//! Cost: on the development machine the loop then always runs on fast CPU 0, preempting
//! the thread holding it for the loop's ≈ 0.2 ms a period (nice -20) where before it was as
//! often on CPU 1; a wake-up there was waiting behind the spin instead.

use crate::sampler::CpuFigures;
use ampsched_model::{CpuId, CpuSet};

/// A managed CPU whose real-time threads ran at least `period / RT_DIV` of the last period
/// (3.75 ms of 30 ms; the hog's 15 ms is far above) is RT-loaded: the loop thread leaves it.
/// The same fraction as the gate's idle and light thresholds
/// (`ampsched_policy::gate::cooperate::IDLE_DIV`): below it, a CPU's RT time is noise at
/// the resolution one period measures.
pub const RT_DIV: u64 = 8;

/// The CPUs (Linux numbers) the loop thread may use: `original` less every managed CPU
/// (`linux_ids[i]` has the figures `cpus[i]`) whose real-time run time in the period
/// (`busy + idle + noise`) was at least a `1 / RT_DIV` share of it; `original` when that
/// leaves nothing (module doc).
pub fn own_cpus(original: &CpuSet, linux_ids: &[u32], cpus: &[CpuFigures]) -> CpuSet {
    let mut out = *original;
    for (l, f) in linux_ids.iter().zip(cpus) {
        let total = f.busy.0 + f.idle.0 + f.noise.0;
        if total > 0 && f.rt.0 * RT_DIV >= total {
            out.remove(CpuId(*l));
        }
    }
    if out.is_empty() {
        *original
    } else {
        out
    }
}

/// The loop thread's placement: its original mask, and the mask in force.
#[derive(Debug)]
pub struct OwnPlace {
    original: CpuSet,
    current: CpuSet,
    /// Times the mask changed.
    pub moves: u64,
}

impl OwnPlace {
    /// The calling thread's placement as it is now; `None` when its affinity cannot be read.
    pub fn of_this_thread() -> Option<OwnPlace> {
        let m = crate::actuate::get_affinity(0).ok()?;
        Some(OwnPlace { original: m, current: m, moves: 0 })
    }

    /// Apply [`own_cpus`] to the calling thread for the last period's figures; returns the
    /// new mask when it changed (and the change took).
    pub fn update(&mut self, linux_ids: &[u32], cpus: &[CpuFigures]) -> Option<CpuSet> {
        let want = own_cpus(&self.original, linux_ids, cpus);
        if want == self.current || crate::actuate::set_affinity(0, &want).is_err() {
            return None;
        }
        self.current = want;
        self.moves += 1;
        Some(want)
    }

    /// Put the calling thread's original mask back (before the agent exits).
    pub fn restore(&mut self) {
        if self.current != self.original && crate::actuate::set_affinity(0, &self.original).is_ok() {
            self.current = self.original;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ampsched_model::Nanos;

    fn fig(busy_ms: u64, idle_ms: u64, rt_ms: u64) -> CpuFigures {
        let ms = |x: u64| Nanos(x * 1_000_000);
        CpuFigures { busy: ms(busy_ms), idle: ms(idle_ms), noise: ms(rt_ms), rt: ms(rt_ms) }
    }

    #[test]
    fn the_loop_leaves_cpus_with_real_time_load() {
        let both = CpuSet::from_cpus([CpuId(0), CpuId(1)]);
        // The development machine over a 30 ms period: CPU 0 busy with a managed thread, CPU 1
        // with the hog's 5 ms of every 10 (15 ms RT ≥ 30 / 8 = 3.75 ms): the loop keeps to
        // CPU 0.
        let dev = [fig(30, 0, 0), fig(15, 0, 15)];
        assert_eq!(own_cpus(&both, &[0, 1], &dev).to_list(), "0");
        // 3.75 ms of RT in 30 ms is RT-loaded, 3.7 ms is not.
        let edge = |rt_us: u64| CpuFigures {
            busy: Nanos(30_000_000 - rt_us * 1000),
            idle: Nanos(0),
            noise: Nanos(rt_us * 1000),
            rt: Nanos(rt_us * 1000),
        };
        assert_eq!(own_cpus(&both, &[0, 1], &[fig(30, 0, 0), edge(3750)]).to_list(), "0");
        assert_eq!(own_cpus(&both, &[0, 1], &[fig(30, 0, 0), edge(3700)]).to_list(), "0-1");
        // Interrupt time is noise but not real-time threads: it does not count.
        let irq = CpuFigures { busy: Nanos(0), idle: Nanos(0), noise: Nanos(30_000_000), rt: Nanos(0) };
        assert_eq!(own_cpus(&both, &[0, 1], &[fig(30, 0, 0), irq]).to_list(), "0-1");
        // Every CPU RT-loaded: the original mask (the loop has to run somewhere).
        assert_eq!(own_cpus(&both, &[0, 1], &[fig(15, 0, 15), fig(15, 0, 15)]).to_list(), "0-1");
        // The first period (all zero figures): no change.
        assert_eq!(own_cpus(&both, &[0, 1], &[CpuFigures::default(); 2]).to_list(), "0-1");
        // Managed CPUs 2 and 3 (topology 0, 1) on a 4-CPU machine, the loop allowed 0-3: CPU 3
        // is left, 0 and 1 (not measured) stay.
        let all = CpuSet::from_cpus((0..4).map(CpuId));
        assert_eq!(own_cpus(&all, &[2, 3], &dev).to_list(), "0-2");
        // The loop's own mask never widens: allowed {1} only, CPU 1 RT-loaded → {1} still.
        assert_eq!(own_cpus(&CpuSet::single(CpuId(1)), &[0, 1], &dev).to_list(), "1");
    }

    #[test]
    fn the_loop_thread_is_placed_and_restored_on_itself_only() {
        // On a thread of its own: its mask changes, the test thread's does not.
        let me = crate::actuate::get_affinity(0).unwrap();
        let (moved, back, other) = std::thread::spawn(move || {
            let mut p = OwnPlace::of_this_thread().unwrap();
            let ids: Vec<u32> = p.original.iter().map(|c| c.0).collect();
            // Every CPU but the first RT-loaded (a machine with one CPU: nothing to leave).
            let figs: Vec<CpuFigures> =
                (0..ids.len()).map(|i| if i == 0 { fig(30, 0, 0) } else { fig(15, 0, 15) }).collect();
            let moved = p.update(&ids, &figs);
            let back = {
                p.restore();
                crate::actuate::get_affinity(0).unwrap()
            };
            (moved, back, p.original)
        })
        .join()
        .unwrap();
        if me.len() > 1 {
            assert_eq!(moved, Some(CpuSet::single(me.first().unwrap())));
        } else {
            assert_eq!(moved, None);
        }
        assert_eq!(back, other);
        assert_eq!(crate::actuate::get_affinity(0).unwrap(), me);
    }
}
