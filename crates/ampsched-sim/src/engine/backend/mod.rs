//! The I/O back end: a guest's I/O (`Op::Io`) served by the vCPUs of a
//! background domain, as Xen's split drivers run it (`Topology::io_backend`).
//!
//! **What Xen does.** A para-virtualised guest has no device of its own. Its
//! front end (Linux `xen-blkfront`/`netfront`) puts a request on a ring it
//! shares with the back end and notifies it through an event channel
//! (`notify_remote_via_irq` → the `EVTCHNOP_send` hypercall). Xen's
//! `evtchn_send` (`common/event_channel.c`) marks the port pending for the
//! back-end domain's vCPU the channel is bound to (`evtchn_set_pending` →
//! `vcpu_mark_events_pending`) and, when that vCPU is blocked, wakes it
//! (`vcpu_unblock` → `vcpu_wake` in `common/schedule.c` → the scheduler's
//! wake: credit's `csched_vcpu_wake`, which BOOSTs a vCPU that wakes UNDER —
//! so dom0 wakes because of the guests' I/O and competes with them for
//! pCPUs under the scheduler in force). In dom0, Linux's blkback takes the
//! interrupt (`xen_blkif_be_int` → `blkif_notify_work`, a wake-up of the
//! per-disk kernel thread `xen_blkif_schedule`, one thread per back end),
//! and that thread reads the ring (`do_block_io_op` → `__do_block_io_op`:
//! `RING_GET_REQUEST`, then `dispatch_rw_block_io`: grant-map the guest's
//! pages, `xen_blkbk_map`, and `submit_bio` to the real disk's driver). The
//! device takes its time. Its completion interrupt runs `end_block_io_op`
//! (grant unmap, `xen_blkbk_unmap`, a TLB shoot-down) and `make_response`,
//! which pushes the response on the ring and, when the front end asked to
//! be told (`RING_PUSH_RESPONSES_AND_CHECK_NOTIFY`), notifies it with
//! `notify_remote_via_irq` — the same event-channel path into the guest's
//! vCPU, whose front end (`blkif_interrupt`) completes the request and wakes
//! the thread that waited for it. (Sources: Linux
//! `drivers/block/xen-blkback/blkback.c`; Xen 4.0 `common/event_channel.c`,
//! `common/schedule.c`, `common/sched_credit.c`.)
//!
//! **The model.** An I/O of device time `D` by guest thread `g` costs, in
//! order: the back end's request work `Rq` (CPU work at speed 1.0) on one
//! vCPU of the back-end domain, the device's `D` (wall time, not CPU), the
//! back end's response work `Rs` on the same vCPU, then `g`'s wake-up.
//! The back-end vCPU is an ordinary task: it is woken through the
//! dispatcher (`Dispatcher::wake`, after the machine's wake-up latency when
//! one is set: the event channel is the path `hv.rs` models), waits for a
//! pCPU like any vCPU, can be preempted, and its work takes `work / speed`
//! on the CPU it gets. The guest's wake-up is a release by another vCPU
//! (`Sim::wake_released`: the wake-up latency applies, as for a sync
//! object's release). So with an idle back-end vCPU, a free pCPU and no
//! latency, `g` resumes `Rq/s + D + Rs/s` after its I/O began.
//!
//! Each guest domain's back end is one thread (`xen_blkif_schedule`
//! serves one virtual disk); the model binds it to one vCPU of the back-end
//! domain: the guest domains in declaration order take the back-end
//! domain's vCPUs in turn (round robin), as irqbalance spreads the back
//! ends' event-channel interrupts — without it every interrupt lands on
//! dom0's vCPU 0. A vCPU serves its jobs (requests and responses of every
//! guest bound to it) one at a time in arrival order (FIFO: one thread, one
//! ring). While it has jobs, its own program (a dom0's timer wake-ups) is
//! parked: a job that arrives while the program computes waits until the
//! program blocks or ends (the jobs then run before the vCPU blocks); a job
//! that arrives while it is blocked wakes it. When the queue is empty the
//! program takes over again where it was: blocked until its pending wake-up
//! (kept, or re-planned at its time), resumed at once when that time passed
//! during the service, or ended. The back-end domain's programs may only
//! compute, sleep and wait on timers (no sync objects, no I/O of their own:
//! the scenario checks it), so nothing else can wake a parked program.
//!
//! **Cost per I/O.** The scenario names it (`[machine.io_backend]
//! request_us`, `response_us`) with its source; the co-scheduling testbed's
//! figures are an estimate (scenarios/cosched/cosched-npb.toml and
//! docs/design/calibration.md).
//!
//! Off by default (`Topology::io_backend = None`): `Op::Io` is then a plain
//! sleep, and the engine's paths each pay one predictable branch (`io_on`).
//!
//! Rooms: `queues` (the back-end vCPUs, their jobs and the guests bound to
//! each; a bottom room that knows nothing of `Sim`) and this one (the
//! event-channel path on `Sim`).
//!
//! May import: `Sim`, the bottom rooms (`clock`, `task`) and the
//! interpreter's `Outcome`. Must never import the placer bridge or statistics.

pub(super) mod queues;

use super::clock::{key_time, Ev};
use super::interp::Outcome;
use super::task::{Act, St};
use super::Sim;
use ampsched_model::{CpuId, Nanos, TaskId};
use queues::{Job, Parked, NONE};

impl Sim {
    /// Guest thread `g` starts an I/O of device time `dur` (its program
    /// blocks): the front end's request goes to its domain's back-end vCPU.
    #[cold]
    #[inline(never)]
    pub(super) fn io_submit(&mut self, g: TaskId, dur: Nanos) {
        let io = self.io.as_deref_mut().expect("an I/O back end");
        io.device[g.idx()] = dur;
        let v = io.of_domain[self.tasks[g.idx()].domain.idx()];
        self.io_post(v, Job { guest: g, response: false });
    }

    /// The device finished guest `g`'s I/O (`Ev::Io`): its response goes to the back end.
    #[cold]
    #[inline(never)]
    pub(super) fn io_device_done(&mut self, g: TaskId) {
        let io = self.io.as_deref().expect("an I/O back end");
        let v = io.of_domain[self.tasks[g.idx()].domain.idx()];
        self.io_post(v, Job { guest: g, response: true });
    }

    /// Queue `job` at back-end vCPU `v` (the event channel's notification):
    /// an idle vCPU (its program blocked or ended) starts serving and is woken.
    fn io_post(&mut self, v: u32, job: Job) {
        let io = self.io.as_deref_mut().expect("an I/O back end");
        let vc = &mut io.vcpus[v as usize];
        vc.queue.push_back(job);
        if vc.serving.is_some() {
            return;
        }
        let b = vc.task;
        let parked = match self.tasks[b.idx()].st {
            St::Blocked => Parked::Until(key_time(self.tasks[b.idx()].wake_key)),
            St::Done => {
                // An ended program's vCPU still takes its event channel's interrupts.
                self.set_state(b, St::Blocked);
                Parked::Done
            }
            // Its program computes or waits for a pCPU: served when it blocks (`io_idle`).
            St::Running(_) | St::Runnable => return,
        };
        self.io.as_deref_mut().expect("an I/O back end").vcpus[v as usize].parked = parked;
        self.io_next(v);
        // `vcpu_wake` through the event channel: after the machine's wake-up latency.
        self.wake_released(b);
    }

    /// Start back-end vCPU `v`'s next job (its CPU work); `false` when none is queued.
    fn io_next(&mut self, v: u32) -> bool {
        let io = self.io.as_deref_mut().expect("an I/O back end");
        let vc = &mut io.vcpus[v as usize];
        vc.serving = vc.queue.pop_front();
        let Some(job) = vc.serving else { return false };
        let (b, work) = (vc.task, if job.response { io.response } else { io.request });
        self.start_compute(b, work, 0.0, 0, 0.0);
        true
    }

    /// Task `t`'s program on CPU `c` left the interpreter with `o`: a back-end
    /// vCPU whose program blocks or ends with jobs queued serves them first.
    #[cold]
    #[inline(never)]
    pub(super) fn io_idle(&mut self, t: TaskId, c: CpuId, o: Outcome) -> Outcome {
        if matches!(o, Outcome::Busy) {
            return o;
        }
        let io = self.io.as_deref().expect("an I/O back end");
        let v = io.slot[t.idx()];
        if v == NONE || io.vcpus[v as usize].queue.is_empty() {
            return o;
        }
        debug_assert!(io.vcpus[v as usize].serving.is_none(), "{t} blocks while serving");
        let parked = if let Outcome::Done = o {
            self.set_state(t, St::Running(c));
            Parked::Done
        } else {
            Parked::Until(key_time(self.tasks[t.idx()].wake_key))
        };
        self.io.as_deref_mut().expect("an I/O back end").vcpus[v as usize].parked = parked;
        self.io_next(v);
        Outcome::Busy
    }

    /// Task `t`'s compute on CPU `c` completed: when it is a back-end job, pass
    /// the I/O on (to the device, or to the guest) and go on with the next
    /// job or the parked program. `false`: not a back-end job.
    #[cold]
    #[inline(never)]
    pub(super) fn io_job_done(&mut self, t: TaskId, c: CpuId) -> bool {
        let io = self.io.as_deref().expect("an I/O back end");
        let v = io.slot[t.idx()];
        let Some(job) = io.vcpus.get(v as usize).and_then(|vc| vc.serving) else { return false };
        let (device, parked) = (io.device[job.guest.idx()], io.vcpus[v as usize].parked);
        let tk = &mut self.tasks[t.idx()];
        tk.work_left = 0;
        tk.act = Act::Ready;
        if job.response {
            // `make_response` → `notify_remote_via_irq`: the guest's vCPU is woken.
            self.wake_released(job.guest);
        } else {
            // `submit_bio`: the device's time.
            self.push(self.now + device, Ev::Io(job.guest));
        }
        if self.io_next(v) {
            return true;
        }
        match parked {
            Parked::Until(at) if at > self.now => {
                // Its wake-up is still ahead: kept when still planned, else planned anew.
                if key_time(self.tasks[t.idx()].wake_key) != at {
                    self.plan_wake(t, at);
                }
                self.block_running(t, c);
            }
            Parked::Until(_) => self.continue_on(t, c),
            Parked::Done => {
                self.set_state(t, St::Done);
                self.block_running(t, c);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::{Sim, SimConfig, Stop, TaskInit};
    use crate::results::RunResult;
    use ampsched_model::spec::{CoschedType, PriorityClass};
    use ampsched_model::{CpuId, CpuSet, DomainId, IoBackend, Nanos, Op, Program, TaskId, Topology};
    use ampsched_policy::{Dispatcher, DomainView, Effects, Pick, SysView};
    use std::sync::Arc;

    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;

    fn compute(us: u64) -> Op {
        Op::Compute { work: Nanos(us * US), mem: 0.0, ws_kb: 0, overlap: 0.0 }
    }

    /// Each task has a home CPU; a CPU runs the first runnable task of its
    /// home set in id order and is not preempted while its task runs (a
    /// wake-up asks it to reschedule only when idle).
    struct Homes {
        home: Vec<CpuId>,
        runnable: Vec<bool>,
    }

    impl Dispatcher for Homes {
        fn name(&self) -> &'static str {
            "homes"
        }
        fn tick_period(&self) -> Nanos {
            Nanos::ZERO
        }
        fn account_period(&self) -> Nanos {
            Nanos::ZERO
        }
        fn init(&mut self, v: &SysView) {
            self.runnable = vec![false; v.tasks.len()];
        }
        fn wake(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
            self.runnable[t.idx()] = true;
            let c = self.home[t.idx()];
            if v.curr[c.idx()].is_none() {
                fx.resched(c);
            }
        }
        fn block(&mut self, _v: &SysView, t: TaskId, _cpu: CpuId, _fx: &mut Effects) {
            self.runnable[t.idx()] = false;
        }
        fn tick(&mut self, _v: &SysView, _cpu: CpuId, _fx: &mut Effects) {}
        fn account(&mut self, _v: &SysView, _fx: &mut Effects) {}
        fn pick_next(&mut self, _v: &SysView, cpu: CpuId, prev: Option<TaskId>, pr: bool, _fx: &mut Effects) -> Pick {
            if let (Some(p), true) = (prev, pr) {
                return Pick { task: Some(p), slice: Nanos::MAX };
            }
            let task =
                (0..self.home.len()).find(|&i| self.home[i] == cpu && self.runnable[i]).map(|i| TaskId(i as u32));
            Pick { task, slice: Nanos::MAX }
        }
        fn affinity_changed(&mut self, _v: &SysView, _t: TaskId, _fx: &mut Effects) {}
    }

    /// Domain 0 = the back end (background, its tasks' programs `backend`),
    /// domains 1.. = one guest task each (`guests`); task i's home CPU is `home[i]`.
    fn run(backend: Vec<Vec<Op>>, guests: Vec<Vec<Op>>, home: Vec<u32>, io: Option<(u64, u64)>) -> RunResult {
        let ncpu = home.iter().max().map_or(1, |&m| m as usize + 1);
        let mut topo = Topology::fast_slow(ncpu, 1.0, 0, 1.0, ncpu);
        topo.io_backend =
            io.map(|(rq, rs)| IoBackend { domain: DomainId(0), request: Nanos(rq * US), response: Nanos(rs * US) });
        let nb = backend.len();
        let mut tasks = Vec::new();
        let mut domains = Vec::new();
        let view = |name: String, tasks: Vec<TaskId>| DomainView {
            name,
            weight: 256,
            cap: 0,
            priority: PriorityClass::default(),
            fast_vcpus: None,
            cosched: CoschedType::default(),
            tasks,
        };
        domains.push(view("dom0".into(), (0..nb as u32).map(TaskId).collect()));
        for (i, ops) in backend.into_iter().chain(guests).enumerate() {
            let d = if i < nb { 0 } else { (i - nb + 1) as u32 };
            if d > 0 {
                domains.push(view(format!("vm{d}"), vec![TaskId(i as u32)]));
            }
            tasks.push(TaskInit {
                domain: DomainId(d),
                vcpu: if d == 0 { i as u32 } else { 0 },
                program: Arc::new(Program { ops }),
                affinity: CpuSet::from_cpus([CpuId(home[i])]),
                group: d,
                rank: 0,
                name: None,
                background: d == 0,
            });
        }
        let home = home.into_iter().map(CpuId).collect();
        Sim::new(SimConfig {
            name: "backend".into(),
            topo,
            domains,
            tasks,
            dispatcher: Box::new(Homes { home, runnable: Vec::new() }),
            placer: None,
            agent: None,
            seed: 1,
            stop: Stop::AllDone { max: Nanos(10_000 * MS) },
            stats_interval: Nanos::ZERO,
            wake_latency: false,
            events: Vec::new(),
        })
        .run()
    }

    fn done_us(r: &RunResult, t: usize) -> u64 {
        r.tasks[t].completion_ns.expect("done") / US
    }

    fn io(ms: u64) -> Op {
        Op::Io { dur: Nanos(ms * MS) }
    }

    #[test]
    fn an_io_costs_request_device_and_response_on_an_idle_backend() {
        // dom0 has one vCPU (task 0, idle: its program ends at once) on CPU 1;
        // the guest (task 1) on CPU 0 computes 100 µs, does a 1 ms I/O, computes
        // 100 µs. The request (30 µs) runs on CPU 1 at 100-130 µs, the device
        // until 1130, the response (20 µs) until 1150, the guest then computes
        // until 1250 µs. Without a back end the I/O is a 1 ms sleep: 1200 µs.
        let guest = vec![compute(100), io(1), compute(100), Op::End];
        let r = run(vec![vec![Op::End]], vec![guest.clone()], vec![1, 0], Some((30, 20)));
        assert_eq!(done_us(&r, 1), 1250);
        let r = run(vec![vec![Op::End]], vec![guest], vec![1, 0], None);
        assert_eq!(done_us(&r, 1), 1200);
    }

    #[test]
    fn the_backend_vcpu_waits_for_a_pcpu_a_guest_holds() {
        // dom0's vCPU shares CPU 0 with guest A (task 1), which computes 5 ms
        // and is never preempted (the dispatcher's rule). Guest B (task 2) on
        // CPU 1 does a 1 ms I/O at 0: the request waits for CPU 0 until A
        // ends at 5000 µs, runs 5000-5030, the device until 6030, the
        // response 6030-6050; B ends at 6050. dom0's own CPU (CPU 2) would
        // have served it by 1050.
        let a = vec![compute(5000), Op::End];
        let b = vec![io(1), Op::End];
        let r = run(vec![vec![Op::End]], vec![a.clone(), b.clone()], vec![0, 0, 1], Some((30, 20)));
        assert_eq!((done_us(&r, 1), done_us(&r, 2)), (5000, 6050));
        let r = run(vec![vec![Op::End]], vec![a, b], vec![2, 0, 1], Some((30, 20)));
        assert_eq!((done_us(&r, 1), done_us(&r, 2)), (5000, 1050));
    }

    #[test]
    fn two_requests_queue_at_one_backend_vcpu_in_fifo_order() {
        // One dom0 vCPU serves two guests (tasks 1 and 2, on CPUs 0 and 1),
        // both doing a 1 ms I/O at time 0 (task 1's request is posted first).
        // Request work 100 µs, response 50 µs, on CPU 2: request 1 at 0-100,
        // request 2 at 100-200 (it waited in the queue); device 1 ends at 1100,
        // device 2 at 1200; response 1 at 1100-1150, response 2 at 1200-1250.
        let g = vec![io(1), Op::End];
        let r = run(vec![vec![Op::End]], vec![g.clone(), g.clone()], vec![2, 0, 1], Some((100, 50)));
        assert_eq!((done_us(&r, 1), done_us(&r, 2)), (1150, 1250));
        // With a device of 50 µs, response 1 (due at 150) waits behind
        // request 2 (100-200): 200-250; then response 2 (device done at 250) at 250-300.
        let g = vec![Op::Io { dur: Nanos(50 * US) }, Op::End];
        let r = run(vec![vec![Op::End]], vec![g.clone(), g], vec![2, 0, 1], Some((100, 50)));
        assert_eq!((done_us(&r, 1), done_us(&r, 2)), (250, 300));
    }

    #[test]
    fn the_backend_program_is_parked_and_resumes_its_timers() {
        // dom0's vCPU (task 0, CPU 1) sleeps 500 µs, computes 200 µs, ends. The
        // guest (task 1, CPU 0) does a 100 µs I/O at 0 with 100 µs request and
        // response work, then sleeps 1 ms (so that the run, which does not
        // wait for dom0, outlasts it): request 0-100 while dom0's program
        // sleeps (parked until 500), device to 200, response 200-300, then dom0
        // blocks again until 500 and computes 500-700. The guest ends at 1300.
        let dom0 = vec![Op::Sleep { dur: Nanos(500 * US) }, compute(200), Op::End];
        let guest = |dev_us: u64| vec![Op::Io { dur: Nanos(dev_us * US) }, Op::Sleep { dur: Nanos(MS) }, Op::End];
        let r = run(vec![dom0.clone()], vec![guest(100)], vec![1, 0], Some((100, 100)));
        assert_eq!((done_us(&r, 0), done_us(&r, 1)), (700, 1300));
        // A response due while dom0's program computes (a 400 µs device: the
        // response arrives at 500, dom0 computes 500-700) waits for the
        // program to end: 700-800.
        let r = run(vec![dom0.clone()], vec![guest(400)], vec![1, 0], Some((100, 100)));
        assert_eq!((done_us(&r, 0), done_us(&r, 1)), (700, 1800));
        // A service that outlasts the program's wake-up (request 600 µs: 0-600)
        // resumes the program at once: it computes 600-800 (the response is
        // queued at 700 and runs after it, 800-900).
        let r = run(vec![dom0], vec![guest(100)], vec![1, 0], Some((600, 100)));
        assert_eq!((done_us(&r, 0), done_us(&r, 1)), (800, 1900));
    }
}
