//! Worked examples for the `linux` model, one per mechanism, each derived
//! from the kernel rule it follows (arithmetic in the comments).

use super::balance::IdleType;
use super::*;
use crate::testkit::World;
use ampsched_model::{CpuClass, CpuInfo, NoiseSpec};

/// A minimal driver doing what the simulator does: reschedule requests
/// call `pick_next`, `account` runs every account period, tasks are
/// CPU-bound unless blocked by the test.
struct Drive {
    w: World,
    l: Linux,
    now: Nanos,
}

impl Drive {
    fn new(w: World, p: LinuxParams) -> Drive {
        let mut l = Linux::new(p, &w.topo);
        l.init(&w.view(Nanos::ZERO));
        Drive { w, l, now: Nanos::ZERO }
    }

    fn with_topo(topo: Topology, ntasks: usize) -> Drive {
        let mut w = World::new(topo.ncpus(), &vec![256; ntasks]);
        for t in &mut w.tasks {
            t.affinity = topo.all;
        }
        w.topo = topo;
        let p = LinuxParams::defaults(w.topo.ncpus());
        Drive::new(w, p)
    }

    fn flush(&mut self, mut fx: Effects) {
        let mut guard = 0;
        while !fx.resched.is_empty() {
            guard += 1;
            assert!(guard < 10_000, "reschedule storm");
            let c = fx.resched.remove(0);
            let prev = self.w.curr[c.idx()];
            let mut more = Effects::default();
            let pick = self.l.pick_next(&self.w.view(self.now), c, prev, prev.is_some(), &mut more);
            self.w.curr[c.idx()] = pick.task;
            fx.resched.extend(more.resched);
        }
    }

    fn wake(&mut self, t: u32) {
        let mut fx = Effects::default();
        self.l.wake(&self.w.view(self.now), TaskId(t), &mut fx);
        self.flush(fx);
    }

    fn block(&mut self, t: u32) {
        let c = self.w.curr.iter().position(|x| *x == Some(TaskId(t))).expect("running");
        let mut fx = Effects::default();
        let cpu = CpuId(c as u32);
        self.l.block(&self.w.view(self.now), TaskId(t), cpu, &mut fx);
        let pick = self.l.pick_next(&self.w.view(self.now), cpu, Some(TaskId(t)), false, &mut fx);
        self.w.curr[c] = pick.task;
        self.flush(fx);
    }

    /// Run account periods up to `until`, calling `each` after every one.
    fn run(&mut self, until: Nanos, mut each: impl FnMut(&Drive)) {
        let p = self.l.account_period();
        while self.now.next_multiple(p) <= until {
            self.now = self.now.next_multiple(p);
            let mut fx = Effects::default();
            self.l.account(&self.w.view(self.now), &mut fx);
            self.flush(fx);
            each(self);
        }
    }

    fn cpu_of(&self, t: u32) -> CpuId {
        self.l.se[t as usize].cpu
    }

    fn pin_then_free(&mut self, t: u32, cpu: u32) {
        self.w.tasks[t as usize].affinity = CpuSet::single(CpuId(cpu));
        self.wake(t);
        self.w.tasks[t as usize].affinity = self.w.topo.all;
        let mut fx = Effects::default();
        self.l.affinity_changed(&self.w.view(self.now), TaskId(t), &mut fx);
        self.flush(fx);
    }
}

/// `n` equal CPUs in one LLC with an RT load on `rt_cpu` (spin/period ms).
fn equal_with_hog(n: usize, rt_cpu: u32, spin_ms: u64, period_ms: u64) -> Topology {
    let mut t = Topology::fast_slow(0, 1.0, n, 1.0, n);
    t.rt_loads.push(RtLoad {
        cpu: CpuId(rt_cpu),
        spin: Nanos::from_ms(spin_ms),
        period: Nanos::from_ms(period_ms),
        phase: Nanos::ZERO,
    });
    t
}

/// CPUs with the given speeds, one LLC.
fn speeds(s: &[f64]) -> Topology {
    let classes: Vec<CpuClass> =
        s.iter().enumerate().map(|(i, x)| CpuClass { name: format!("c{i}"), speed: *x }).collect();
    let cpus = (0..s.len())
        .map(|i| CpuInfo { id: CpuId(i as u32), class: i, speed: s[i], mem_domain: 0, numa: 0, noise: NoiseSpec::None })
        .collect();
    Topology::new(classes, cpus, Default::default())
}

#[test]
fn base_slice_scales_with_log2_cpus_and_params_are_checked() {
    // sysctl_sched_base_slice 0.75 ms × (1 + ilog2(min(n, 8))): 1 → 0.75, 2 → 1.5, 8 → 3, 64 → 3 ms.
    assert_eq!(LinuxParams::defaults(1).base_slice, Nanos::from_us(750));
    assert_eq!(LinuxParams::defaults(2).base_slice, Nanos::from_us(1500));
    assert_eq!(LinuxParams::defaults(8).base_slice, Nanos::from_ms(3));
    assert_eq!(LinuxParams::defaults(64).base_slice, Nanos::from_ms(3));
    let topo = Topology::fast_slow(0, 1.0, 2, 1.0, 2);
    let mut p = Params::new();
    p.insert("capacity".into(), ampsched_model::spec::ParamValue::Str("big".into()));
    let e = LinuxParams::from_params("linux", &p, &topo).unwrap_err();
    assert!(e.msg.contains("speed, equal"), "{}", e.msg);
}

#[test]
fn eevdf_two_equal_tasks_alternate_at_tick_granularity() {
    // One CPU, base slice 0.75 ms, tick 4 ms. A and B (nice 0) both wake at
    // 0: A first with deadline 0 + 0.75/2 (PLACE_DEADLINE_INITIAL); B is
    // placed at V = 0 (lag 0) with the same deadline, so A (lower id) runs.
    // A's deadline passes long before the first tick, so at every tick the
    // CPU switches: A runs [0,4), B [4,8), A [8,12)… equal shares.
    let w = World::new(1, &[256, 256]);
    let mut d = Drive::new(w, LinuxParams::defaults(1));
    d.wake(0);
    d.wake(1);
    assert_eq!(d.w.curr[0], Some(TaskId(0)));
    let mut ran = [0u64; 2];
    let mut switches = 0;
    let mut last = d.w.curr[0];
    d.run(Nanos::from_ms(400), |d| {
        if d.w.curr[0] != last {
            switches += 1;
        }
        last = d.w.curr[0];
        ran[d.w.curr[0].unwrap().idx()] += 1;
    });
    // 400 ms / 4 ms = 100 ticks, a switch at each.
    assert_eq!(switches, 100);
    assert_eq!(ran, [50, 50]);
}

#[test]
fn eevdf_weights_2_to_1_get_two_thirds() {
    // Weights 2048 and 1024 (domain weights 512, 256): vruntime advances
    // Δ/2 for the heavy task, Δ for the light one; EEVDF keeps both
    // vruntimes near V, so over time the heavy one runs 2/3 of ticks.
    let w = World::new(1, &[512, 256]);
    let mut d = Drive::new(w, LinuxParams::defaults(1));
    d.wake(0);
    d.wake(1);
    let mut ran = [0u64; 2];
    d.run(Nanos::from_ms(1200), |d| ran[d.w.curr[0].unwrap().idx()] += 1);
    let share = ran[0] as f64 / (ran[0] + ran[1]) as f64;
    assert!((share - 2.0 / 3.0).abs() < 0.02, "{ran:?}");
}

#[test]
fn eevdf_lag_is_kept_across_sleep_and_scaled_on_placement() {
    // place_entity with PLACE_LAG: a task with saved lag L joining a queue
    // of load W at mean vruntime V, own weight w, lands at V − L·(W + w)/W
    // (so that its lag after joining is L). update_entity_lag clamps the
    // saved lag to max(2·slice, tick) in virtual time.
    let w = World::new(1, &[256, 256, 256]);
    let mut d = Drive::new(w, LinuxParams::defaults(1));
    d.wake(0);
    d.run(Nanos::from_ms(12), |_| {});
    let v_a = d.l.se[0].vruntime;
    assert_eq!(v_a, Nanos::from_ms(12).0 as i64);
    // Task 1 carries a saved lag of +3 ms (owed service) and has run before.
    d.l.se[1].vlag = 3_000_000;
    d.l.se[1].started = true;
    d.wake(1);
    // V = 12 ms (A alone, W = 1024), w = 1024: 12 − 3 × (1024 + 1024)/1024 = 6 ms.
    assert_eq!(d.l.se[1].vruntime, 6_000_000);
    // Deadline one vslice (0.75 ms) later. A's vruntime (12 ms) is past its
    // protection (vprot ≤ its first deadline), B is eligible (6 < V) and its
    // deadline 6.75 ms is earlier than A's (≥ 12 ms): the wake-up preempts.
    assert_eq!(d.l.se[1].deadline, 6_750_000);
    assert_eq!(d.w.curr[0], Some(TaskId(1)));
    // Lag clamp: a lag beyond max(2 × 0.75 ms, 4 ms tick) = 4 ms is cut to 4 ms.
    d.l.se[2].vruntime = d.l.avg_vruntime(CpuId(0)) - 50_000_000;
    d.l.save_lag(CpuId(0), TaskId(2));
    assert_eq!(d.l.se[2].vlag, 4_000_000);
}

#[test]
fn wake_up_preemption_needs_an_earlier_eligible_deadline_and_respects_run_to_parity() {
    // A runs from 0 with base slice 3 ms (param), first deadline 1.5 ms
    // (half slice). At 1 ms B wakes with lag 0 at V = A's vruntime 1 ms,
    // first deadline 1 + 1.5 = 2.5 ms > A's 1.5 ms → pick_eevdf keeps A: no
    // preemption. With a saved lag of +1 ms, B lands at V − 1·2 = −1 ms,
    // deadline −1 + 1.5 = 0.5 ms < 1.5 ms and eligible → preempts, unless
    // RUN_TO_PARITY protects A (vruntime 1 ms < vprot 1.5 ms).
    for (lag, parity, preempt) in [(0, false, false), (1_000_000, false, true), (1_000_000, true, false)] {
        let w = World::new(1, &[256, 256]);
        let mut p = LinuxParams::defaults(1);
        p.base_slice = Nanos::from_ms(3);
        p.run_to_parity = parity;
        let mut d = Drive::new(w, p);
        d.wake(0);
        d.now = Nanos::from_ms(1);
        d.l.se[1].vlag = lag;
        d.wake(1);
        assert_eq!(d.l.se[0].vruntime, 1_000_000);
        assert_eq!(d.w.curr[0] == Some(TaskId(1)), preempt, "lag {lag} parity {parity}");
    }
}

#[test]
fn rt_pressure_lowers_capacity_of_to_about_half() {
    // A 5 ms / 10 ms SCHED_FIFO hog on CPU 1: its RT PELT signal oscillates
    // around 1024 × 0.5; after 300 ms (≈ 9 half-lives) capacity_of(1) =
    // 1024 − avg_rt lies in [440, 590] and is below 1024 × 100/117 ≈ 875
    // (check_cpu_capacity), while CPU 0 keeps 1024.
    let mut d = Drive::with_topo(equal_with_hog(2, 1, 5, 10), 0);
    assert_eq!(d.l.account_period(), Nanos::from_ms(1)); // gcd(4, 5, 10) ms
    d.run(Nanos::from_ms(300), |_| {});
    let c1 = d.l.capacity_of(CpuId(1));
    assert!((440..=590).contains(&c1), "{c1}");
    assert!(d.l.reduced_capacity(CpuId(1)));
    assert_eq!(d.l.capacity_of(CpuId(0)), 1024);
    assert!(!d.l.reduced_capacity(CpuId(0)));
}

#[test]
fn irq_noise_scales_the_remaining_capacity() {
    // scale_irq_capacity: constant noise 25 % → irq = 256; no RT:
    // (1024 − 0) × (1024 − 256) / 1024 = 768.
    let mut t = Topology::fast_slow(0, 1.0, 2, 1.0, 2);
    t.cpus[1].noise = NoiseSpec::Constant { fraction: 0.25 };
    let l = Linux::new(LinuxParams::defaults(2), &t);
    assert_eq!(l.capacity_of(CpuId(1)), 768);
}

#[test]
fn an_rt_window_preempts_the_fair_task_which_resumes_after_it() {
    // CPU-bound A alone on CPU 0 with a 2 ms / 10 ms hog there: A runs
    // [0,0)… the hog runs [0,2), A [2,10), hog [10,12), … so at 1 ms the
    // CPU runs no fair task, at 3 ms A; A's CPU time over 100 ms = 80 ms.
    let mut w = World::new(1, &[256]);
    w.topo = equal_with_hog(1, 0, 2, 10);
    let mut d = Drive::new(w, LinuxParams::defaults(1));
    d.wake(0);
    assert_eq!(d.w.curr[0], None, "the hog runs at 0");
    let mut fair_ms = 0; // in 2 ms periods
    d.run(Nanos::from_ms(100), |d| {
        if d.w.curr[0].is_some() {
            fair_ms += 1;
        }
    });
    // Account period gcd(4, 2, 10) = 2 ms; sampled after each: 40 of 50 periods.
    assert_eq!(d.l.account_period(), Nanos::from_ms(2));
    assert_eq!(fair_ms, 40);
    assert_eq!(d.l.stats.rt_preempts, 10); // windows at 10, 20, …, 100 ms (the one at 0 found A not yet running)
}

#[test]
fn an_idle_cpu_pulls_the_task_off_a_cpu_with_reduced_capacity_within_one_balance_interval() {
    // A runs on CPU 1 (hog 5/10 ms there), CPU 0 is idle. Until CPU 1's
    // capacity drops below 100/117 of 1024 nothing moves: CPU 1's group has
    // one fair task, so find_busiest_group is balanced (sum_h_nr_running =
    // 1). Once it drops, CPU 1's tick kicks the idle CPU 0 (a fair task on
    // reduced capacity), whose idle balance sees CPU 1 as misfit
    // (sched_reduced_capacity) → migrate_load; the task is pulled if it
    // waits behind the hog, else active-balanced (need_active_balance:
    // capacity_of(1) × 117 < capacity_of(0) × 100). Balance interval of an
    // idle CPU at MC level: 2 CPUs = 2 ms → one 4 ms tick.
    let mut d = Drive::with_topo(equal_with_hog(2, 1, 5, 10), 1);
    d.pin_then_free(0, 1);
    assert_eq!(d.cpu_of(0), CpuId(1));
    let mut reduced_at = None;
    let mut moved_at = None;
    d.run(Nanos::from_ms(200), |d| {
        if reduced_at.is_none() && d.l.reduced_capacity(CpuId(1)) {
            reduced_at = Some(d.now);
        }
        if moved_at.is_none() && d.cpu_of(0) == CpuId(0) {
            moved_at = Some(d.now);
        }
    });
    let (r, m) = (reduced_at.expect("capacity drops"), moved_at.expect("task moves"));
    // The RT signal first exceeds 149 (= 1024 − 875) during the second window.
    assert!(r >= Nanos::from_ms(10) && r <= Nanos::from_ms(16), "{r:?}");
    assert!(m >= r && m <= r + Nanos::from_ms(8), "reduced at {r:?}, moved at {m:?}");
    assert!(d.l.stats.pulls + d.l.stats.active_balances >= 1);
    // And it stays on the full-capacity CPU.
    assert_eq!(d.cpu_of(0), CpuId(0));
}

#[test]
fn a_misfit_task_on_a_small_cpu_moves_to_an_idle_big_one() {
    // Declared capacities 1024 (CPU 0) and 512 (CPU 1): SD_ASYM_CPUCAPACITY.
    // A CPU-bound task starts on CPU 1; its util (scaled by 512/1024) tends
    // to 512: 512 (1 − y^n) crosses the fit limit 512 × 0.8 = 409.6 when
    // y^n < 0.2, n > 32 × log2(5) ≈ 74.3 periods of 1.024 ms ≈ 76 ms. Then
    // it is misfit; CPU 1's tick kicks idle CPU 0 (misfit on a CPU below
    // the max capacity), migrate_misfit, active balance → CPU 0.
    let mut d = Drive::with_topo(speeds(&[1.0, 0.5]), 1);
    assert!(d.l.levels[0].asym);
    assert_eq!(d.l.cap_orig, vec![1024, 512]);
    d.pin_then_free(0, 1);
    let mut misfit_at = None;
    let mut moved_at = None;
    d.run(Nanos::from_ms(200), |d| {
        if misfit_at.is_none() && !fits_capacity(d.l.task_util(TaskId(0)), 512) {
            misfit_at = Some(d.now);
        }
        if moved_at.is_none() && d.cpu_of(0) == CpuId(0) {
            moved_at = Some(d.now);
        }
    });
    let (f, m) = (misfit_at.expect("becomes misfit"), moved_at.expect("moves up"));
    assert!(f >= Nanos::from_ms(72) && f <= Nanos::from_ms(84), "{f:?}");
    // Detected at the tick where it no longer fits; moved by the kicked idle balance at once.
    assert!(m >= f && m <= f + Nanos::from_ms(4), "misfit at {f:?}, moved at {m:?}");
    assert_eq!(d.l.stats.active_balances, 1);
    // On the biggest CPU it is never misfit (max_allowed_capacity), though
    // its util (→ 1024) exceeds 1024 × 0.8.
    assert!(d.l.task_util(TaskId(0)) > 820);
    assert_eq!(d.l.rq[0].misfit_load, 0);
    assert_eq!(d.cpu_of(0), CpuId(0));
}

#[test]
fn the_same_machine_without_declared_capacities_never_moves_it() {
    // capacity = "equal": both CPUs 1024, no asymmetry flag, no RT: a single
    // task on CPU 1 is never misfit and the group is balanced.
    let mut t = speeds(&[1.0, 0.5]);
    t.cpus[1].speed = 0.5;
    let mut w = World::new(2, &[256]);
    w.topo = t;
    let mut p = LinuxParams::defaults(2);
    p.capacity_from_speed = false;
    let mut d = Drive::new(w, p);
    assert!(!d.l.levels[0].asym);
    d.pin_then_free(0, 1);
    d.run(Nanos::from_ms(200), |_| {});
    assert_eq!(d.cpu_of(0), CpuId(1));
}

#[test]
fn wake_up_placement_symmetric_stays_in_the_llc() {
    // 4 CPUs, LLCs {0,1} and {2,3}. Task 0 last ran on CPU 2.
    // CPU 2 idle → 2. CPU 2 busy, 3 idle → 3 (first idle from 2 in its LLC).
    // 2 and 3 busy, 0 idle → stays on 2 (select_idle_sibling scans the LLC only).
    let topo = Topology::fast_slow(0, 1.0, 4, 1.0, 2);
    let mut d = Drive::with_topo(topo, 4);
    d.l.se[0].cpu = CpuId(2);
    d.l.se[0].started = true;
    assert_eq!(d.l.select_cpu(&d.w.view(d.now), TaskId(0)), CpuId(2));
    d.pin_then_free(1, 2);
    assert_eq!(d.l.select_cpu(&d.w.view(d.now), TaskId(0)), CpuId(3));
    d.pin_then_free(2, 3);
    assert_eq!(d.l.select_cpu(&d.w.view(d.now), TaskId(0)), CpuId(2));
}

#[test]
fn wake_up_placement_asymmetric_picks_an_idle_cpu_the_task_fits() {
    // Capacities 1024, 1024, 512, 512. Task util 600: fits 1024
    // (600 × 1280 = 768000 < 1048576) but not 512 (> 524288). Previous CPU 2
    // idle but too small → select_idle_capacity from 2: 3 (idle, too small),
    // 0 (idle, fits) → 0. A task of util 100 fits CPU 2 → stays.
    let mut d = Drive::with_topo(speeds(&[1.0, 1.0, 0.5, 0.5]), 3);
    for (t, u) in [(0usize, 600u64), (1, 100)] {
        let e = &mut d.l.se[t];
        e.cpu = CpuId(2);
        e.started = true;
        e.util_est = u;
    }
    assert_eq!(d.l.select_cpu(&d.w.view(d.now), TaskId(0)), CpuId(0));
    assert_eq!(d.l.select_cpu(&d.w.view(d.now), TaskId(1)), CpuId(2));
    // CPUs 0 and 1 busy: no idle CPU fits → the idle CPU of highest
    // capacity_of, first from the previous CPU on ties: 2.
    d.pin_then_free(1, 0);
    d.pin_then_free(2, 1);
    assert_eq!(d.l.select_cpu(&d.w.view(d.now), TaskId(0)), CpuId(2));
}

#[test]
fn fork_placement_takes_the_first_idle_cpu() {
    // Three new tasks on 2 CPUs: 0 → CPU 0, 1 → CPU 1, 2 → least loaded
    // (both 1 task, equal load) → CPU 0.
    let mut d = Drive::with_topo(Topology::fast_slow(0, 1.0, 2, 1.0, 2), 3);
    d.wake(0);
    d.wake(1);
    d.wake(2);
    assert_eq!((d.cpu_of(0), d.cpu_of(1), d.cpu_of(2)), (CpuId(0), CpuId(1), CpuId(0)));
}

#[test]
fn an_idle_cpu_pulls_half_the_difference_of_waiting_tasks() {
    // Four CPU-bound tasks forced onto CPU 0, CPU 1 idle. CPU 0's tick kicks
    // nohz balance (nr_running ≥ 2). CPU 1 (idle, MC level, groups of one
    // CPU): busiest group CPU 0 with 4 tasks, not overloaded yet (fresh PELT),
    // local has spare, group weight 1 → migrate_task, imbalance
    // ⌊(4 − 0)/2⌋ = 2: two waiting tasks move at the first tick (4 ms).
    let mut d = Drive::with_topo(Topology::fast_slow(0, 1.0, 2, 1.0, 2), 4);
    for t in 0..4 {
        d.pin_then_free(t, 0);
    }
    assert_eq!((d.l.cfs_nr(CpuId(0)), d.l.cfs_nr(CpuId(1))), (4, 0));
    d.run(Nanos::from_ms(4), |_| {});
    assert_eq!((d.l.cfs_nr(CpuId(0)), d.l.cfs_nr(CpuId(1))), (2, 2));
    assert_eq!(d.l.stats.pulls, 2);
    assert_eq!(d.l.stats.nohz_kicks, 1);
}

/// Tasks 0..k pinned to CPU 1 (hog 5/10 ms there) for 300 ms, then free:
/// at 300 ms the hog's window runs and they wait behind it (capacity_of(1)
/// ≈ 512 by then).
fn waiting_behind_the_hog(ntasks: usize, k: u32) -> Drive {
    let mut d = Drive::with_topo(equal_with_hog(2, 1, 5, 10), ntasks);
    for t in 0..k {
        d.w.tasks[t as usize].affinity = CpuSet::single(CpuId(1));
        d.wake(t);
    }
    d.run(Nanos::from_ms(300), |_| {});
    for t in 0..k {
        d.w.tasks[t as usize].affinity = d.w.topo.all;
    }
    assert!(d.l.rt_active(CpuId(1), d.now) && d.w.curr[1].is_none());
    assert_eq!(d.l.cfs_nr(CpuId(1)), k);
    d
}

#[test]
fn a_fair_task_waiting_behind_an_rt_task_makes_its_cpu_overloaded_and_an_idle_cpu_pulls_it() {
    // group_is_overloaded counts every class (sum_nr_running = rq->nr_running):
    // CPU 1 holds the hog and task 0, 2 > group_weight 1, and capacity
    // 512 × 117 = 59 904 < runnable ≈ 1024 × 100 → group_overloaded (not
    // misfit). CPU 0 (idle, has spare, 0 tasks): calculate_imbalance →
    // migrate_task, sibling_imbalance = (2 − 0) >> 1 = 1 → detach_tasks takes
    // the waiting task (src nr_running 2 > 1; it last ran 5 ms ago, cold).
    let mut d = waiting_behind_the_hog(1, 1);
    let mut fx = Effects::default();
    let moved = d.l.load_balance(&d.w.view(d.now), CpuId(0), 0, IdleType::Idle, &mut fx);
    assert_eq!(moved, 1);
    assert_eq!(d.cpu_of(0), CpuId(0));
}

#[test]
fn a_busy_cpu_s_periodic_balance_does_not_spread_tasks_by_count() {
    // CPU 1 holds the hog and tasks 0, 1 (sum_nr_running 3); CPU 0 runs
    // task 2, woken 1 ms ago (util ≈ 22: has spare, sum_nr_running 1). A
    // busy CPU's periodic balance (CPU_NOT_IDLE): CPU 1's group is
    // overloaded, local has spare, group weight 1 → migrate_task with
    // sibling_imbalance, which is 0 when !env->idle (an idle CPU 0 would
    // take (3 − 1) >> 1 = 1) → balanced, nothing moves: spreading by count
    // is left to idle and newly idle balance.
    let mut d = waiting_behind_the_hog(3, 2);
    d.w.tasks[2].affinity = CpuSet::single(CpuId(0));
    d.now = Nanos::from_ms(299);
    d.wake(2);
    d.now = Nanos::from_ms(300);
    assert_eq!(d.w.curr[0], Some(TaskId(2)));
    let mut fx = Effects::default();
    let moved = d.l.load_balance(&d.w.view(d.now), CpuId(0), 0, IdleType::NotIdle, &mut fx);
    assert_eq!(moved, 0);
    assert_eq!((d.cpu_of(0), d.cpu_of(1)), (CpuId(1), CpuId(1)));
}

#[test]
fn two_fair_tasks_on_a_reduced_cpu_are_not_a_misfit_group() {
    // sched_reduced_capacity is true only for exactly one fair task
    // (h_nr_running == 1); with two, group_overloaded covers the CPU. Two
    // fresh tasks (util ≈ 0) on CPU 1 with capacity ≈ 512 outside the
    // hog's window (305 ms): sum_nr_running 2 > 1 but util and runnable are
    // small → not overloaded; not misfit either → has_spare/fully busy with
    // 2 tasks: an idle CPU 0 takes (2 − 0) >> 1 = 1 by count (migrate_task),
    // the lighter path, not a misfit load migration (no active balance).
    let mut d = waiting_behind_the_hog(2, 1);
    d.w.tasks[1].affinity = CpuSet::single(CpuId(1));
    d.now = Nanos::from_ms(305);
    d.wake(1);
    let mut fx = Effects::default();
    d.l.account(&d.w.view(d.now), &mut fx);
    d.flush(fx);
    assert!(!d.l.rt_active(CpuId(1), d.now));
    assert_eq!(d.l.cfs_nr(CpuId(1)), 2);
    assert!(d.l.reduced_capacity(CpuId(1)));
    let mut fx = Effects::default();
    let before = d.l.stats.active_balances;
    d.l.load_balance(&d.w.view(d.now), CpuId(0), 0, IdleType::Idle, &mut fx);
    assert_eq!(d.l.stats.active_balances, before, "no active balance of a misfit");
}

#[test]
fn newidle_balance_pulls_one_waiting_task_when_a_cpu_runs_dry() {
    // Tasks 0, 1 on CPU 0 and 2 on CPU 1 (all CPU-bound); 2 blocks at 1 ms:
    // CPU 1 goes newly idle, the root domain is overloaded (CPU 0 has 2),
    // busiest CPU 0 has 2 → imbalance (2 − 0)/2 = 1 → pulls the waiting one
    // (cache-cold: it last ran ≥ 0.5 ms ago — never, in fact).
    let mut d = Drive::with_topo(Topology::fast_slow(0, 1.0, 2, 1.0, 2), 3);
    d.pin_then_free(0, 0);
    d.pin_then_free(1, 0);
    d.pin_then_free(2, 1);
    d.now = Nanos::from_ms(1);
    d.block(2);
    assert_eq!(d.l.stats.newidle_pulls, 1);
    assert_eq!(d.w.curr[1], Some(TaskId(1)));
}

#[test]
fn cache_hot_tasks_stay_until_balancing_has_failed_twice() {
    // can_migrate_task: a task that stopped running < 0.5 ms ago is hot and
    // is skipped while nr_balance_failed ≤ cache_nice_tries (1).
    let mut d = Drive::with_topo(Topology::fast_slow(0, 1.0, 2, 1.0, 2), 2);
    d.pin_then_free(0, 0);
    d.pin_then_free(1, 0);
    // Task 1 waited since 0; make it look as if it ran until 3.8 ms.
    d.now = Nanos::from_us(4000);
    d.l.se[1].last_ran = Nanos::from_us(3800);
    d.l.overloaded = true;
    let v = d.w.view(d.now);
    let mut fx = Effects::default();
    assert_eq!(d.l.load_balance(&v, CpuId(1), 0, IdleType::Idle, &mut fx), 0);
    d.l.rq[1].nr_balance_failed[0] = 2;
    assert_eq!(d.l.load_balance(&v, CpuId(1), 0, IdleType::Idle, &mut fx), 1);
}

#[test]
fn balance_intervals_follow_domain_weight_busy_factor_and_ticks() {
    // MC level of 2 CPUs: 2 ms; idle → ⌈2/4⌉ = 1 tick = 4 ms; busy → 2 × 16 =
    // 32 ms = 8 ticks. After failures it doubles up to 2 × 2 = 4 ms.
    let l = Linux::new(LinuxParams::defaults(2), &Topology::fast_slow(0, 1.0, 2, 1.0, 2));
    assert_eq!(l.levels.len(), 1);
    assert_eq!(l.levels[0].name, "MC");
    assert_eq!(l.rq[0].balance_interval[0], 2);
    // Two LLCs of 2: MC then PKG (groups = LLCs, prefer sibling).
    let l4 = Linux::new(LinuxParams::defaults(4), &Topology::fast_slow(0, 1.0, 4, 1.0, 2));
    assert_eq!(l4.levels.iter().map(|x| x.name).collect::<Vec<_>>(), vec!["MC", "PKG"]);
    assert_eq!(l4.levels[1].groups[2][0].to_list(), "2-3");
    assert!(l4.levels[1].prefer_sibling && l4.levels[1].top);
}

#[test]
fn the_two_thread_barrier_program_keeps_its_serial_thread_off_the_hog_cpu() {
    // The program on 2 equal CPUs, hog 5/10 ms on CPU 1: thread 0
    // runs serial phases alone. Whenever it is on CPU 1 while CPU 0 is idle
    // and CPU 1's capacity is reduced, it is moved to CPU 0 within a tick or
    // two; over a 36 ms serial phase it spends most of its time on CPU 0.
    let mut d = Drive::with_topo(equal_with_hog(2, 1, 5, 10), 2);
    d.run(Nanos::from_ms(200), |_| {}); // the RT signal settles
    d.pin_then_free(0, 1);
    let mut on0 = 0;
    let end = d.now + Nanos::from_ms(36);
    d.run(end, |d| {
        if d.w.curr[0] == Some(TaskId(0)) {
            on0 += 1;
        }
    });
    assert!(on0 >= 30, "{on0} of 36 ms on CPU 0");
}
