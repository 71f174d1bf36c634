//! Unit tests of the engine built directly from a `SimConfig` (no scenario
//! file): a tiny first-come-first-served dispatcher whose behaviour is
//! obvious, so each expected time below is plain arithmetic.

use super::*;
use crate::results::{RunResult, TaskResult};
use ampsched_model::spec::{CoschedType, PriorityClass};
use ampsched_model::{CpuSet, Program, Wait};
use ampsched_policy::{Pick, SysView};
use std::sync::Arc;

const MS: u64 = 1_000_000;

/// First come, first served over one global queue; a running task keeps its
/// CPU until it blocks, or until `slice` ends if one is set (then it goes to
/// the back of the queue). A wake-up kicks the lowest idle CPU not yet kicked.
struct Fcfs {
    queue: VecDeque<TaskId>,
    kicked: Vec<bool>,
    slice: Nanos,
}

impl Fcfs {
    fn boxed(slice: Nanos) -> Box<dyn Dispatcher> {
        Box::new(Fcfs { queue: VecDeque::new(), kicked: Vec::new(), slice })
    }
}

impl Dispatcher for Fcfs {
    fn name(&self) -> &'static str {
        "fcfs"
    }
    fn tick_period(&self) -> Nanos {
        Nanos::ZERO
    }
    fn account_period(&self) -> Nanos {
        Nanos::ZERO
    }
    fn init(&mut self, v: &SysView) {
        self.kicked = vec![false; v.topo.ncpus()];
    }
    fn wake(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        self.queue.push_back(t);
        let aff = v.tasks[t.idx()].affinity;
        if let Some(c) =
            (0..v.curr.len()).find(|&c| v.curr[c].is_none() && !self.kicked[c] && aff.contains(CpuId(c as u32)))
        {
            self.kicked[c] = true;
            fx.resched(CpuId(c as u32));
        }
    }
    fn block(&mut self, _v: &SysView, _t: TaskId, _cpu: CpuId, _fx: &mut Effects) {}
    fn tick(&mut self, _v: &SysView, _cpu: CpuId, _fx: &mut Effects) {}
    fn account(&mut self, _v: &SysView, _fx: &mut Effects) {}
    fn pick_next(
        &mut self,
        v: &SysView,
        cpu: CpuId,
        prev: Option<TaskId>,
        prev_runnable: bool,
        _fx: &mut Effects,
    ) -> Pick {
        self.kicked[cpu.idx()] = false;
        let slice = self.slice;
        if let (Some(p), true) = (prev, prev_runnable) {
            if slice == Nanos::MAX || self.queue.is_empty() {
                return Pick { task: Some(p), slice };
            }
            self.queue.push_back(p);
        }
        match self.queue.iter().position(|t| v.tasks[t.idx()].affinity.contains(cpu)) {
            Some(i) => Pick { task: self.queue.remove(i), slice },
            None => Pick::IDLE,
        }
    }
    fn affinity_changed(&mut self, _v: &SysView, _t: TaskId, _fx: &mut Effects) {}
}

/// A machine of `speeds` (class per distinct speed, fastest first), one memory domain.
fn machine(speeds: &[f64]) -> Topology {
    let n_fast = speeds.iter().filter(|s| **s == speeds[0]).count();
    let slow = speeds.last().copied().unwrap_or(1.0);
    Topology::fast_slow(n_fast, speeds[0], speeds.len() - n_fast, slow, speeds.len())
}

fn compute(ms: u64) -> Op {
    Op::Compute { work: Nanos(ms * MS), mem: 0.0, ws_kb: 0, overlap: 1.0 }
}

/// One domain whose tasks (one per program) share sync group 0.
fn config(topo: Topology, programs: Vec<Vec<Op>>, slice: Nanos) -> SimConfig {
    let n = programs.len() as u32;
    let tasks: Vec<TaskInit> = programs
        .into_iter()
        .enumerate()
        .map(|(i, ops)| TaskInit {
            domain: DomainId(0),
            vcpu: i as u32,
            program: Arc::new(Program { ops }),
            affinity: topo.all,
            group: 0,
            rank: i as u32,
            name: None,
            background: false,
        })
        .collect();
    let domain = DomainView {
        name: "d".into(),
        weight: 256,
        cap: 0,
        priority: PriorityClass::default(),
        fast_vcpus: None,
        cosched: CoschedType::default(),
        tasks: (0..n).map(TaskId).collect(),
    };
    SimConfig {
        name: "unit".into(),
        topo,
        domains: vec![domain],
        tasks,
        dispatcher: Fcfs::boxed(slice),
        placer: None,
        agent: None,
        seed: 1,
        stop: Stop::AllDone { max: Nanos(10_000 * MS) },
        stats_interval: Nanos::ZERO,
        wake_latency: true,
        events: Vec::new(),
    }
}

fn run(topo: Topology, programs: Vec<Vec<Op>>) -> RunResult {
    Sim::new(config(topo, programs, Nanos::MAX)).run()
}

fn done_ms(t: &TaskResult) -> f64 {
    t.completion_ns.expect("task finished") as f64 / MS as f64
}

#[test]
fn tasks_wake_in_id_order_and_queue_first_come_first_served() {
    // One CPU at speed 1: task 0 (10 ms) is picked first, task 1 (5 ms) waits
    // for it: done at 10 ms and 10 + 5 = 15 ms; task 1 waited 10 ms runnable.
    let r = run(machine(&[1.0]), vec![vec![compute(10), Op::End], vec![compute(5), Op::End]]);
    assert!(r.all_done && !r.truncated);
    assert_eq!(done_ms(&r.tasks[0]), 10.0);
    assert_eq!(done_ms(&r.tasks[1]), 15.0);
    assert_eq!(r.tasks[1].wait_ns, 10 * MS);
    assert_eq!(r.tasks[0].wait_ns, 0);
    assert_eq!(r.end_ns, 15 * MS);
}

#[test]
fn a_compute_ending_at_a_slice_end_completes_before_the_preemption() {
    // Slice 10 ms on one CPU. Task 0's compute ends exactly when its slice
    // does (t = 10 ms): the SliceEnd event was queued first (at the pick,
    // before the compute's OpDone), yet the compute completes first, so task
    // 0 reaches `End` at 10 ms instead of being preempted with nothing left
    // and finishing only when it runs again after task 1 (at 20 ms).
    let cfg = config(machine(&[1.0]), vec![vec![compute(10), Op::End], vec![compute(10), Op::End]], Nanos(10 * MS));
    let r = Sim::new(cfg).run();
    assert_eq!(done_ms(&r.tasks[0]), 10.0);
    assert_eq!(done_ms(&r.tasks[1]), 20.0);
    assert_eq!(r.tasks[0].computes_done, 1);
}

#[test]
fn work_is_charged_by_speed_memory_share_and_noise() {
    // 10 ms of work with a quarter memory-bound on a CPU of speed 2 with
    // constant noise 0.2: each unit of work takes (1 − 0.25)/2 + 0.25 = 0.625
    // of CPU time, and the CPU gives the task 1 − 0.2 = 0.8 of its time:
    // wall = 10 × 0.625 / 0.8 = 7.8125 ms. Of that the CPU was busy
    // 7.8125 × 0.8 = 6.25 ms and lost 1.5625 ms to noise; the task's CPU
    // time counts the whole 7.8125 ms on the fast class.
    let mut topo = machine(&[2.0]);
    topo.cpus[0].noise = NoiseSpec::Constant { fraction: 0.2 };
    let op = Op::Compute { work: Nanos(10 * MS), mem: 0.25, ws_kb: 0, overlap: 1.0 };
    let r = run(topo, vec![vec![op, Op::End]]);
    assert_eq!(r.tasks[0].completion_ns, Some(7_812_500));
    assert_eq!(r.cpus[0].busy_ns, 6_250_000);
    assert_eq!(r.cpus[0].noise_ns, 1_562_500);
    assert_eq!(r.cpus[0].idle_ns, 0);
    assert_eq!(r.tasks[0].cpu_ns.values, vec![7_812_500, 0]);
}

#[test]
fn a_migration_pays_the_cache_refill_at_half_the_cycles() {
    // Task 0 computes 1 ms on CPU 0 then 4 ms pinned to CPU 1 (same memory
    // domain, LLC refill): a 512 KiB working set at 7 GB/s costs
    // 524288 / 7 = 74898 ns (rounded). While refilling, half the cycles do
    // work, so the 4 ms take 2 × 74898 (refill paid, 74898 of work done)
    // + (4 ms − 74898) = 4 ms + 74898 ns: done at 1 ms + 4 ms + 74898 ns.
    // The zero-length sleep after the affinity change lets FCFS requeue it
    // (it wakes on the idle CPU its new affinity allows).
    let op = |ms: u64| Op::Compute { work: Nanos(ms * MS), mem: 0.0, ws_kb: 512, overlap: 1.0 };
    let mask = CpuSet::from_cpus([CpuId(1)]);
    let prog = vec![op(1), Op::Affinity { mask }, Op::Sleep { dur: Nanos::ZERO }, op(4), Op::End];
    let mut cfg = config(machine(&[1.0, 1.0]), vec![prog], Nanos::MAX);
    cfg.tasks[0].affinity = CpuSet::from_cpus([CpuId(0)]);
    let r = Sim::new(cfg).run();
    assert_eq!(r.tasks[0].migrations_local, 1);
    assert_eq!(r.tasks[0].completion_ns, Some(5 * MS + 74_898));
}

#[test]
fn a_barrier_releases_everyone_when_the_last_arrives() {
    // Three tasks on three CPUs compute 10, 20 and 30 ms, meet at a blocking
    // barrier, then compute 5 ms: the last arrives at 30 ms, so all finish at
    // 35 ms; the first waited blocked 20 ms, the second 10 ms, the last 0.
    let prog = |ms| vec![compute(ms), Op::Barrier { id: 0, wait: Wait::Block }, compute(5), Op::End];
    let r = run(machine(&[1.0, 1.0, 1.0]), vec![prog(10), prog(20), prog(30)]);
    for t in &r.tasks {
        assert_eq!(done_ms(t), 35.0);
    }
    let blocked: Vec<u64> = r.tasks.iter().map(|t| t.blocked_ns / MS).collect();
    assert_eq!(blocked, vec![20, 10, 0]);
}

#[test]
fn a_spinning_barrier_burns_cpu_instead_of_blocking() {
    // The same with spinning waiters: the 20 and 10 ms of waiting are spin
    // time on the CPU (counted as CPU time), and nothing is blocked.
    let prog = |ms| vec![compute(ms), Op::Barrier { id: 0, wait: Wait::Spin }, compute(5), Op::End];
    let r = run(machine(&[1.0, 1.0, 1.0]), vec![prog(10), prog(20), prog(30)]);
    let spin: Vec<u64> = r.tasks.iter().map(|t| t.spin_ns / MS).collect();
    assert_eq!(spin, vec![20, 10, 0]);
    assert!(r.tasks.iter().all(|t| t.blocked_ns == 0 && t.cpu_ns.values[0] == 35 * MS));
}

#[test]
fn a_lock_is_handed_to_its_waiters_in_arrival_order() {
    // Task 0 takes lock 0 at 0 and holds it for 10 ms. Task 1 asks at 1 ms,
    // task 2 at 2 ms; both block. Unlock hands the lock straight to the first
    // waiter (task 1: holds 10–15 ms), whose unlock hands it to task 2
    // (15–20 ms). Blocked: task 1 from 1 to 10 ms (9), task 2 from 2 to 15 (13).
    let holder = vec![Op::Lock { id: 0, wait: Wait::Block }, compute(10), Op::Unlock { id: 0 }, Op::End];
    let waiter =
        |ms| vec![compute(ms), Op::Lock { id: 0, wait: Wait::Block }, compute(5), Op::Unlock { id: 0 }, Op::End];
    let r = run(machine(&[1.0, 1.0, 1.0]), vec![holder, waiter(1), waiter(2)]);
    let done: Vec<f64> = r.tasks.iter().map(done_ms).collect();
    assert_eq!(done, vec![10.0, 15.0, 20.0]);
    let blocked: Vec<u64> = r.tasks.iter().map(|t| t.blocked_ns / MS).collect();
    assert_eq!(blocked, vec![0, 9, 13]);
}

#[test]
fn a_preempted_lock_holder_delays_its_waiters() {
    // Lock-holder preemption emerges: one CPU, slice 5 ms. Task 0 takes the
    // lock and needs 10 ms inside it; at 5 ms it is preempted; task 1 (wants
    // the lock, spins) runs its 5 ms slice spinning; task 0 resumes at 10 ms,
    // unlocks at 15 ms and ends; task 1 then gets the lock and computes 1 ms.
    let holder = vec![Op::Lock { id: 0, wait: Wait::Block }, compute(10), Op::Unlock { id: 0 }, Op::End];
    let waiter = vec![Op::Lock { id: 0, wait: Wait::Spin }, compute(1), Op::Unlock { id: 0 }, Op::End];
    let cfg = config(machine(&[1.0]), vec![holder, waiter], Nanos(5 * MS));
    let r = Sim::new(cfg).run();
    assert_eq!(done_ms(&r.tasks[0]), 15.0);
    assert_eq!(done_ms(&r.tasks[1]), 16.0);
    assert_eq!(r.tasks[1].spin_ns, 5 * MS);
}

#[test]
fn wake_up_latency_runs_from_the_wake_up_to_the_first_run() {
    // One CPU, FCFS. At 0 both tasks wake (start): task 0 runs at once
    // (latency 0), task 1 waits for it; task 0 computes 10 ms, sleeps 5 ms,
    // computes 1 ms. Task 1 first runs at 10 ms (latency 10 ms), computes
    // 20 ms, ending at 30 ms. Task 0 woke at 15 ms and ran only at 30 ms
    // (latency 15 ms); being preempted is no wake-up (no slice here anyway).
    let t0 = vec![compute(10), Op::Sleep { dur: Nanos(5 * MS) }, compute(1), Op::End];
    let t1 = vec![compute(20), Op::End];
    let r = run(machine(&[1.0]), vec![t0, t1]);
    let w0 = &r.tasks[0].wake_latency;
    assert_eq!(w0.count(), 2);
    assert_eq!(w0.quantile(0.5), Some(0));
    // 15 ms = 15_000_000: e = 23 (2^23 = 8_388_608), width 2^18 = 262_144,
    // (15_000_000 − 8_388_608) / 262_144 = 25.2 → 8_388_608 + 25·262_144.
    assert_eq!(w0.quantile(1.0), Some(8_388_608 + 25 * 262_144));
    let w1 = &r.tasks[1].wake_latency;
    assert_eq!(w1.count(), 1);
    // 10 ms: e = 23, (10_000_000 − 8_388_608) / 262_144 = 6.1 → + 6·262_144.
    assert_eq!(w1.quantile(0.5), Some(8_388_608 + 6 * 262_144));
    assert_eq!(done_ms(&r.tasks[0]), 31.0);
}

#[test]
fn a_periodic_task_reports_rt_app_slack_and_deadline_misses() {
    // rt-app's slack (src/rt-app.c, case rtapp_timer): at a timer event the
    // timer's next activation (t_next += period) minus now; negative = a miss.
    // Two tasks on one CPU, each `loop 2 { run 6 ms; timer 10 ms }` on its own
    // relative timer (rt-app's default mode: an overrun re-anchors at now).
    //   A runs 0-6: t_next 10, slack +4 ms; sleeps to 10.
    //   B runs 6-12: t_next 10, slack −2 ms (miss), re-anchored at 12, no sleep;
    //   B runs 12-18: t_next 22, slack +4 ms; sleeps.
    //   A (woken at 10) runs 18-24: t_next 20, slack −4 ms (miss); ends at 24.
    //   B (woken at 22) ends at 24.
    // A: 2 periods, 1 miss, slack −4/0/+4 ms (min/mean/max); B: −2/+1/+4 ms.
    let periodic = |id| {
        vec![
            Op::LoopStart { count: 2, end: 3 },
            compute(6),
            Op::Timer { id, period: Nanos(10 * MS), relative: true, start: Nanos::ZERO },
            Op::LoopEnd { start: 0 },
            Op::End,
        ]
    };
    let r = run(machine(&[1.0]), vec![periodic(0), periodic(1)]);
    let ms = MS as i64;
    let p: Vec<_> = r.tasks.iter().map(|t| t.periodic.clone().expect("periodic")).collect();
    assert_eq!((p[0].periods, p[0].deadline_misses), (2, 1));
    assert_eq!((p[0].slack_min_ns, p[0].slack_mean_ns, p[0].slack_max_ns), (-4 * ms, 0, 4 * ms));
    assert_eq!((p[1].periods, p[1].deadline_misses), (2, 1));
    assert_eq!((p[1].slack_min_ns, p[1].slack_mean_ns, p[1].slack_max_ns), (-2 * ms, ms, 4 * ms));
    assert_eq!((done_ms(&r.tasks[0]), done_ms(&r.tasks[1])), (24.0, 24.0));
    // A task without timers reports no periodic statistics (and its JSON no field).
    let r = run(machine(&[1.0]), vec![vec![compute(1), Op::End]]);
    assert!(r.tasks[0].periodic.is_none());
}

#[test]
fn superseded_plans_count_the_same_whether_a_run_ends_by_time_or_when_all_are_done() {
    // Two tasks of 40 ms on one CPU, 20 µs slices: each switch-in plans a
    // completion (now + work left) that the next preemption supersedes and
    // withdraws from the queue, about 4000 plans. A fixed-length run counts
    // each as the stale event it would have been when it is withdrawn; a run
    // that ends when all are done counts those keyed before its last event.
    // Both end at the same event (80 ms), so both count the same events, with
    // thousands of superseded plans outstanding at once.
    let progs = || vec![vec![compute(40), Op::End], vec![compute(40), Op::End]];
    let all_done = Sim::new(config(machine(&[1.0]), progs(), Nanos(20_000))).run();
    assert!(all_done.all_done);
    assert_eq!(all_done.end_ns, 80 * MS);
    let mut cfg = config(machine(&[1.0]), progs(), Nanos(20_000));
    cfg.stop = Stop::Duration(Nanos(80 * MS));
    let timed = Sim::new(cfg).run();
    assert!(all_done.events > 4000, "{}", all_done.events);
    assert_eq!(all_done.events, timed.events);
    // 80 ms / 20 µs = 4000 switch-ins, each planning a completion; all but
    // the two that complete are superseded. The queue never holds them: the
    // plans 33.6 ms or more ahead (the first ~13 ms of each task's run) wait
    // behind the task's one far-heap entry, the nearer ones are withdrawn
    // from the ring. It holds at most a slice end, End, a far entry per
    // task and the running task's completion.
    assert_eq!(timed.engine.superseded, 3998);
    assert!(timed.engine.queue_peak <= 5, "{}", timed.engine.queue_peak);
}

/// Bursty noise on CPU 0: free for 9 ms, then a 2 ms burst at noise 0.5,
/// fixed lengths (bursts at 9-11, 20-22, 31-33, 42-44, 53-55 ms, …).
fn bursts(topo: &mut Topology, stall: bool) {
    topo.cpus[0].noise = NoiseSpec::Bursty {
        fraction_on: 0.5,
        fraction_off: 0.0,
        on: Nanos(2 * MS),
        off: Nanos(9 * MS),
        random: false,
        stall,
    };
}

#[test]
fn a_slice_ending_inside_a_stall_ends_at_the_stall_and_the_next_one_runs_from_there() {
    // One CPU, FCFS with 10 ms slices, tasks A and B of 25 ms each, the
    // bursts above. A burst does half the work per ms.
    // Plain bursts: slices end on the 10 ms grid. A 0-10 (9 + 0.5 = 9.5 ms
    // of work), B 10-20 (0.5 + 9 = 9.5), A 20-30 (1 + 8: 18.5), B 30-40
    // (1 + 1 + 7: 18.5), A from 40 needs 6.5: 40-42 gives 2, 42-44 1, then
    // 3.5 more: done at 47.5.
    // Stalls: a slice end due inside a burst is decided at its end, and the
    // next slice runs 10 ms from there (Xen's `now + prev->next_time`).
    // A 0-11 (due at 10, inside 9-11: 9 + 1 = 10), B 11-22 (due 21, inside
    // 20-22: 9 + 1 = 10), A 22-33 (due 32, inside 31-33: 20), B 33-44 (due
    // 43, inside 42-44: 20), A 44-49 (its last 5 ms), B 49-55 (49-53 gives
    // 4, the last 1 ms takes the burst 53-55).
    let progs = || vec![vec![compute(25), Op::End], vec![compute(25), Op::End]];
    let mut done = Vec::new();
    for stall in [false, true] {
        let mut topo = machine(&[1.0]);
        bursts(&mut topo, stall);
        let r = Sim::new(config(topo, progs(), Nanos(10 * MS))).run();
        done.push((done_ms(&r.tasks[0]), done_ms(&r.tasks[1])));
    }
    assert_eq!(done, vec![(47.5, 55.0), (49.0, 55.0)]);
}

/// FCFS with a dispatcher tick every `period` that records when it ran.
struct Ticking {
    fcfs: Fcfs,
    period: Nanos,
    ran: Arc<std::sync::Mutex<Vec<u64>>>,
}

impl Dispatcher for Ticking {
    fn name(&self) -> &'static str {
        "ticking"
    }
    fn tick_period(&self) -> Nanos {
        self.period
    }
    fn account_period(&self) -> Nanos {
        Nanos::ZERO
    }
    fn init(&mut self, v: &SysView) {
        self.fcfs.init(v);
    }
    fn wake(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        self.fcfs.wake(v, t, fx);
    }
    fn block(&mut self, _v: &SysView, _t: TaskId, _cpu: CpuId, _fx: &mut Effects) {}
    fn tick(&mut self, v: &SysView, _cpu: CpuId, _fx: &mut Effects) {
        self.ran.lock().expect("tick log").push(v.now.0);
    }
    fn account(&mut self, _v: &SysView, _fx: &mut Effects) {}
    fn pick_next(&mut self, v: &SysView, cpu: CpuId, prev: Option<TaskId>, runnable: bool, fx: &mut Effects) -> Pick {
        self.fcfs.pick_next(v, cpu, prev, runnable, fx)
    }
    fn affinity_changed(&mut self, _v: &SysView, _t: TaskId, _fx: &mut Effects) {}
}

#[test]
fn a_tick_due_inside_a_stall_runs_at_its_end_and_the_next_comes_a_period_later() {
    // One task of 27.5 ms on CPU 0 with the bursts above and a 5 ms tick:
    // it loses 1 ms of work to each of the bursts 9-11 and 20-22, so it
    // ends at 29.5 ms either way.
    // Plain bursts: ticks at 5, 10, 15, 20, 25 (the one at 30 finds the CPU idle).
    // Stalls: the tick due at 10 runs at the burst's end, 11, and the next
    // is a period after it ran (credit's `set_timer(&spc->ticker, NOW() + …)`):
    // 16, then 21 → 22 (inside 20-22), 27.
    let mut seen = Vec::new();
    for stall in [false, true] {
        let mut topo = machine(&[1.0]);
        bursts(&mut topo, stall);
        let mut cfg = config(topo, vec![vec![compute_us(27_500), Op::End]], Nanos::MAX);
        let ran = Arc::new(std::sync::Mutex::new(Vec::new()));
        let fcfs = Fcfs { queue: VecDeque::new(), kicked: Vec::new(), slice: Nanos::MAX };
        cfg.dispatcher = Box::new(Ticking { fcfs, period: Nanos(5 * MS), ran: ran.clone() });
        let r = Sim::new(cfg).run();
        assert_eq!(r.tasks[0].completion_ns, Some(29_500_000));
        let ms: Vec<f64> = ran.lock().expect("tick log").iter().map(|t| *t as f64 / MS as f64).collect();
        seen.push(ms);
    }
    assert_eq!(seen, vec![vec![5.0, 10.0, 15.0, 20.0, 25.0], vec![5.0, 11.0, 16.0, 22.0, 27.0]]);
}

fn compute_us(us: u64) -> Op {
    Op::Compute { work: Nanos(us * 1_000), mem: 0.0, ws_kb: 0, overlap: 1.0 }
}

#[test]
fn a_run_that_ends_when_all_are_done_does_not_wait_for_a_background_task() {
    // Two CPUs at speed 1: task 0 computes 10 ms; task 1, of a background domain (a
    // testbed's dom0), computes 1 ms then sleeps 1 s, 100 times. The run ends when task 0
    // does, at 10 ms, all done, not truncated; the background task is left unfinished.
    // Without the flag the run would last until the background task's end (~99 s).
    let bg = vec![
        Op::LoopStart { count: 100, end: 3 },
        compute(1),
        Op::Sleep { dur: Nanos(1000 * MS) },
        Op::LoopEnd { start: 0 },
        Op::End,
    ];
    let mut cfg = config(machine(&[1.0, 1.0]), vec![vec![compute(10), Op::End], bg], Nanos::MAX);
    cfg.tasks[1].background = true;
    let r = Sim::new(cfg).run();
    assert!(r.all_done && !r.truncated);
    assert_eq!(r.end_ns, 10 * MS);
    assert_eq!(done_ms(&r.tasks[0]), 10.0);
    assert_eq!(r.tasks[1].completion_ns, None);
    assert_eq!(r.tasks[1].cpu_ns.total(), MS);
    assert!(r.domains[0].background);
}

/// FCFS on 2 CPUs whose CPU 1 asks CPU 0 to reschedule at each of its 5 ms
/// ticks (credit's tickle, a co-scheduler's signal: an IPI), with a 7 ms
/// accounting timer on CPU 0 (credit's `master_ticker`); logs when CPU 0
/// picked and when the accounting ran.
struct Remote {
    fcfs: Fcfs,
    picks: Arc<std::sync::Mutex<Vec<u64>>>,
    accounts: Arc<std::sync::Mutex<Vec<u64>>>,
}

impl Dispatcher for Remote {
    fn name(&self) -> &'static str {
        "remote"
    }
    fn tick_period(&self) -> Nanos {
        Nanos(5 * MS)
    }
    fn account_period(&self) -> Nanos {
        Nanos(7 * MS)
    }
    fn account_cpu(&self) -> Option<CpuId> {
        Some(CpuId(0))
    }
    fn init(&mut self, v: &SysView) {
        self.fcfs.init(v);
    }
    fn wake(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        self.fcfs.wake(v, t, fx);
    }
    fn block(&mut self, _v: &SysView, _t: TaskId, _cpu: CpuId, _fx: &mut Effects) {}
    fn tick(&mut self, _v: &SysView, cpu: CpuId, fx: &mut Effects) {
        if cpu == CpuId(1) {
            fx.resched(CpuId(0));
        }
    }
    fn account(&mut self, v: &SysView, _fx: &mut Effects) {
        self.accounts.lock().expect("account log").push(v.now.0 / MS);
    }
    fn pick_next(&mut self, v: &SysView, cpu: CpuId, prev: Option<TaskId>, runnable: bool, fx: &mut Effects) -> Pick {
        if cpu == CpuId(0) {
            self.picks.lock().expect("pick log").push(v.now.0 / MS);
        }
        self.fcfs.pick_next(v, cpu, prev, runnable, fx)
    }
    fn affinity_changed(&mut self, _v: &SysView, _t: TaskId, _fx: &mut Effects) {}
}

/// Run `programs` on 2 CPUs under `Remote` for `ms`, CPU 0 with the bursts above:
/// CPU 0's pick times and the accounting times, in ms.
fn remote_run(programs: Vec<Vec<Op>>, stall: bool, ms: u64) -> (Vec<u64>, Vec<u64>) {
    let mut topo = machine(&[1.0, 1.0]);
    bursts(&mut topo, stall);
    let mut cfg = config(topo, programs, Nanos::MAX);
    cfg.stop = Stop::Duration(Nanos(ms * MS));
    let (picks, accounts) = (Arc::new(std::sync::Mutex::new(Vec::new())), Arc::new(std::sync::Mutex::new(Vec::new())));
    let fcfs = Fcfs { queue: VecDeque::new(), kicked: Vec::new(), slice: Nanos::MAX };
    cfg.dispatcher = Box::new(Remote { fcfs, picks: picks.clone(), accounts: accounts.clone() });
    Sim::new(cfg).run();
    let picks = picks.lock().expect("pick log").clone();
    let accounts = accounts.lock().expect("account log").clone();
    (picks, accounts)
}

#[test]
fn a_reschedule_asked_of_a_busy_stalled_cpu_and_its_accounting_wait_for_the_stall_end() {
    // Two 40 ms tasks: A on CPU 0 (bursts 9-11, 20-22 ms, ...), B on CPU 1.
    // CPU 1's ticks at 5, 10, 15, 20, 25 ms each ask CPU 0 to reschedule.
    // Plain bursts: CPU 0 picks at once, at 0 (A's start), 5, 10, 15, 20, 25;
    // the accounting runs every 7 ms: 7, 14, 21, 28.
    // Stalls: the request at 10 (inside 9-11) is taken at 11, the one at 20
    // at 22 (Xen: the IPI is handled when the pCPU's thread runs again). The
    // accounting due at 21 (inside 20-22) runs at 22, before that pick, and
    // the next one 7 ms after it ran (`set_timer(&prv->master_ticker, NOW() +
    // tslice)`): 29.
    let progs = || vec![vec![compute(40), Op::End], vec![compute(40), Op::End]];
    let plain = remote_run(progs(), false, 30);
    let stalled = remote_run(progs(), true, 30);
    assert_eq!(plain, (vec![0, 5, 10, 15, 20, 25], vec![7, 14, 21, 28]));
    assert_eq!(stalled, (vec![0, 5, 11, 15, 22, 25], vec![7, 14, 22, 29]));
}

#[test]
fn an_idle_cpu_inside_a_stall_is_woken_at_once() {
    // Task A sleeps 10 ms and then computes 5 ms; it may run on CPU 0 only. Task
    // B keeps CPU 1 busy. A's wake-up at 10 ms, inside CPU 0's burst 9-11,
    // asks idle CPU 0 to pick: at once, with or without stalls (an idle
    // pCPU's QEMU thread sleeps in a halt and the kick wakes it).
    let a = vec![Op::Sleep { dur: Nanos(10 * MS) }, compute(5), Op::End];
    let progs = || vec![a.clone(), vec![compute(20), Op::End]];
    for stall in [false, true] {
        let mut topo = machine(&[1.0, 1.0]);
        bursts(&mut topo, stall);
        let mut cfg = config(topo, progs(), Nanos::MAX);
        cfg.tasks[0].affinity = CpuSet::single(CpuId(0));
        cfg.tasks[1].affinity = CpuSet::single(CpuId(1));
        let r = Sim::new(cfg).run();
        // A runs from 10: 10-11 at half speed (0.5 ms of work), then 4.5 ms: done at 15.5.
        assert_eq!(done_ms(&r.tasks[0]), 15.5, "stall = {stall}");
    }
}

#[test]
fn equal_programs_share_one_allocation_across_domains_and_keep_their_groups_objects() {
    // Tasks 0-3 run A, B, A, B (four allocations); 0 and 1 are sync group 0,
    // 2 and 3 group 1. The run keeps one A and one B; the objects are
    // numbered as met: group 0's lock 1 is object 0, its barrier 0 object 1,
    // group 1's lock and barrier objects 2 and 3.
    let a = vec![Op::Lock { id: 1, wait: Wait::Block }, Op::Unlock { id: 1 }, Op::End];
    let b = vec![Op::Barrier { id: 0, wait: Wait::Block }, Op::End];
    let mut cfg = config(machine(&[1.0]), vec![a.clone(), b.clone(), a, b], Nanos::MAX);
    for (i, t) in cfg.tasks.iter_mut().enumerate() {
        t.group = i as u32 / 2;
    }
    assert!(!Arc::ptr_eq(&cfg.tasks[0].program, &cfg.tasks[2].program));
    let sim = Sim::new(cfg);
    let tk = &sim.tasks;
    assert!(Arc::ptr_eq(&tk[0].prog, &tk[2].prog) && Arc::ptr_eq(&tk[1].prog, &tk[3].prog));
    assert!(!Arc::ptr_eq(&tk[0].prog, &tk[1].prog));
    let none = sync::NONE;
    assert_eq!(&*tk[0].sync, &[[0, none], [0, none], [none, none]]);
    assert_eq!(&*tk[1].sync, &[[1, none], [none, none]]);
    assert_eq!(&*tk[2].sync, &[[2, none], [2, none], [none, none]]);
    assert_eq!(&*tk[3].sync, &[[3, none], [none, none]]);
    assert_eq!(sim.sync.len(), 4);
}
