//! Inventory: what the agent manages — domains (a launched command, a
//! process, a VM) and their threads — found by discovery (launch, rescans
//! for descendants, QMP and QEMU processes) and kept current by listing
//! thread directories (a thread count from one `fstat` of a kept-open
//! `/proc/PID/task`, a full relist every rescan interval).
//!
//! Mapping (docs/design/architecture.md): a target process or VM is a domain
//! ([`DomainId`], dense, never reused); each managed thread is a task
//! ([`TaskId`], dense in discovery order, stable for the run, never reused).
//! A process's threads are numbered 0, 1, … in discovery order (`vcpu`), a
//! VM's vCPU threads by their QEMU `cpu-index`; only a VM's vCPU threads are
//! managed, never its I/O or main threads.
//!
//! A thread's *original* affinity (its own mask, the placer contract's
//! `allowed`) is what it had when first seen; a thread born from a thread the
//! agent had pinned inherits the agent's mask, and its original is then the
//! domain's base mask (the root process's mask before any change).
//!
//! Everything here reads through `proc_root` and an [`Actuator`] (for the
//! current affinity), so tests run it on a fixture directory with a fake
//! actuator and no privileges; run-time counters (`runclock`) are used only
//! when `use_counters` is set.

use crate::actuate::Actuator;
use crate::config::{Target, TargetKind};
use crate::discovery::Discovered;
pub(crate) use crate::domain::DomKind;
pub use crate::domain::Domain;
use crate::export::Export;
use crate::procfs::{
    children, cmdline, list_pids, list_tids, parse_schedstat, parse_stat, parse_statm_anon_kb, parse_vcpu_thread_name,
    ProcFile, TaskDir,
};
use crate::qmp::query_vcpus;
use crate::runclock::RunClock;
use crate::signals;
use crate::trace::boottime_ns;
use crate::AgentError;
use ampsched_model::{CpuSet, DomainId, TaskId};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

/// How long launched commands get to exit after the agent forwards a signal.
pub const CHILD_GRACE: Duration = Duration::from_secs(5);

/// Where a thread's run time comes from.
pub(crate) enum RunSource {
    /// A task-clock counter (see `runclock`): run ns since it was opened.
    Clock(RunClock),
    /// Its kept-open `schedstat`: run ns, run-queue wait ns, time slices.
    Schedstat(ProcFile),
}

/// A managed thread.
pub(crate) struct Thread {
    pub(crate) dom: usize,
    pub(crate) tid: i32,
    pub(crate) pid: i32,
    pub(crate) vcpu: u32,
    pub(crate) stat: ProcFile,
    /// Where its run time is read each period.
    pub(crate) run: RunSource,
    pub(crate) children: Option<ProcFile>,
    /// Last (run, wait, slices) seen; from a clock, (run since opened, 0, 0).
    pub(crate) last_sched: (u64, u64, u64),
    pub(crate) state: char,
    pub(crate) processor: u32,
    pub(crate) starttime: u64,
    pub(crate) original: CpuSet,
    pub(crate) cur: CpuSet,
    pub(crate) touched: bool,
    pub(crate) in_state: bool,
}

/// The managed domains and threads.
pub struct Inventory {
    pub(crate) proc_root: PathBuf,
    pub(crate) targets: Vec<Target>,
    pub(crate) domains: Vec<Domain>,
    pub(crate) threads: BTreeMap<TaskId, Thread>,
    pub(crate) by_tid: HashMap<i32, TaskId>,
    task_dirs: HashMap<i32, TaskDir>,
    pid_threads: HashMap<i32, usize>,
    leader_stat: HashMap<i32, ProcFile>,
    next_task: u32,
    known_vms: HashSet<i32>,
    rescan_every: Duration,
    last_rescan: Option<Duration>,
    /// When thread lists were last reconciled with `/proc` in full.
    last_reconcile: Option<Duration>,
    /// Whether task-clock counters can be opened here (`None`: not tried yet).
    perf_ok: Option<bool>,
    /// Try task-clock counters for run time (else `schedstat`).
    pub(crate) use_counters: bool,
    /// The file limit launched commands get back (the agent raised its own).
    pub(crate) fd_limit: Option<libc::rlimit>,
    /// Threads removed since the last observation (reported `Done` once, then forgotten).
    pub(crate) ended: Vec<(TaskId, Thread)>,
    /// Resident anonymous memory per managed process, KiB (`RssAnon`, from its kept-open
    /// `statm`, re-read every period): its threads' `ws_kb` in the snapshot. Not read for VMs: a
    /// guest's memory says nothing of one vCPU's working set.
    pub(crate) anon_kb: HashMap<i32, u32>,
    /// `/proc/<pid>/statm` of each managed process, kept open (one `pread` a period).
    statm: HashMap<i32, ProcFile>,
    /// The page size in KiB (`statm` counts pages).
    page_kb: u64,
}

/// Process `pid`'s `/proc` file `name` from `files`, opened (and kept) on first use; `None`
/// when it cannot be opened (the process is gone).
fn kept_open<'a>(
    files: &'a mut HashMap<i32, ProcFile>,
    proc_root: &Path,
    pid: i32,
    name: &str,
) -> Option<&'a mut ProcFile> {
    match files.entry(pid) {
        std::collections::hash_map::Entry::Occupied(e) => Some(e.into_mut()),
        std::collections::hash_map::Entry::Vacant(v) => {
            ProcFile::open(&proc_root.join(pid.to_string()).join(name)).ok().map(|f| v.insert(f))
        }
    }
}

impl Inventory {
    /// An empty inventory of `targets`, read through `proc_root`.
    pub fn new(proc_root: PathBuf, targets: Vec<Target>, rescan_every: Duration) -> Inventory {
        Inventory {
            proc_root,
            targets,
            domains: Vec::new(),
            threads: BTreeMap::new(),
            by_tid: HashMap::new(),
            task_dirs: HashMap::new(),
            pid_threads: HashMap::new(),
            leader_stat: HashMap::new(),
            next_task: 0,
            known_vms: HashSet::new(),
            rescan_every,
            last_rescan: None,
            last_reconcile: None,
            perf_ok: None,
            use_counters: true,
            fd_limit: None,
            ended: Vec::new(),
            anon_kb: HashMap::new(),
            statm: HashMap::new(),
            page_kb: crate::procfs::page_kb(),
        }
    }

    /// Threads under management.
    pub fn managed(&self) -> usize {
        self.threads.len()
    }

    /// Whether `tid` is managed.
    pub fn manages(&self, tid: i32) -> bool {
        self.by_tid.contains_key(&tid)
    }

    /// Rescan when one is due at `now`, then list every domain's threads.
    pub fn update(&mut self, ex: &mut Export, act: &dyn Actuator, d: &Discovered, now: Duration) {
        if self.last_rescan.is_none_or(|t| now.saturating_sub(t) >= self.rescan_every) {
            self.rescan(ex, act);
            self.last_rescan = Some(now);
        }
        self.refresh_threads(ex, act, d);
    }

    /// Make the next [`Inventory::update`] rescan, whenever the last one was (a launched job
    /// forked a process: `crate::forks`).
    pub fn rescan_soon(&mut self) {
        self.last_rescan = None;
    }

    /// Whether the run is over: the first launched command ended (`stop_with_first`), or
    /// every domain ended and no target waits for VMs.
    pub fn finished(&self, stop_with_first: bool) -> bool {
        if stop_with_first {
            return self.domains.iter().find(|d| d.child.is_some()).is_some_and(|d| d.exit.is_some() || !d.alive);
        }
        let persistent = self.targets.iter().any(|t| matches!(t.kind, TargetKind::Qmp(_) | TargetKind::QemuAll));
        !persistent && self.domains.iter().all(|d| !d.alive)
    }

    /// Read the exit status of launched commands that ended, leaving them unreaped
    /// (`signals::exit_status`; reaped by [`Inventory::reap_zombies`] a period later).
    pub fn reap(&mut self) {
        for dom in &mut self.domains {
            dom.peek_exit();
        }
    }

    /// Reap the launched commands whose status was read in an earlier period (by then their
    /// threads have finished exiting: `signals` module doc), at the lowest nice.
    pub fn reap_zombies(&mut self) {
        for dom in self.domains.iter_mut().filter(|d| d.zombie) {
            if let Some(c) = dom.child.as_mut() {
                if !matches!(signals::reap_politely(c, dom.pidfd.as_ref()), Ok(None)) {
                    dom.zombie = false;
                }
            }
        }
    }

    /// Exit status of the first launched command, if it ended.
    pub fn first_command_exit(&self) -> Option<ExitStatus> {
        self.domains.iter().find(|d| d.child.is_some()).and_then(|d| d.exit)
    }

    // The outputs (log, trace) and the affinity reader travel with the domain's facts.
    #[allow(clippy::too_many_arguments)]
    fn new_domain(
        &mut self,
        ex: &mut Export,
        act: &dyn Actuator,
        target: usize,
        name: String,
        root: i32,
        kind: DomKind,
        child: Option<Child>,
    ) -> usize {
        let base_mask = act.get(root).unwrap_or_default();
        let id = DomainId(self.domains.len() as u32);
        let kind_s = match &kind {
            DomKind::Proc { .. } => "process",
            DomKind::Vm { qmp: Some(_), .. } => "vm (qmp)",
            DomKind::Vm { .. } => "vm (thread names)",
        };
        let ev = json!({"event": "domain", "domain": id.0, "name": name, "target": self.targets[target].name,
                        "kind": kind_s, "pid": root, "base_mask": base_mask.to_list()});
        self.domains.push(Domain {
            id,
            target,
            name,
            root,
            kind,
            pidfd: child.as_ref().and_then(|c| signals::pidfd_open(c.id() as i32).ok()),
            child,
            exit: None,
            zombie: false,
            base_mask,
            applied: Vec::new(),
            next_vcpu: 0,
            alive: true,
            fast_ns: 0,
            fisb_ns: 0,
            changes: 0,
            active: 0,
            threads: 0,
            hands_off: false,
            backed_off: false,
            backoffs: 0,
            progress_ratio: None,
        });
        ex.log(ev);
        if let Some(tr) = ex.trace.as_mut() {
            tr.add_process(boottime_ns(), root, &self.domains[id.idx()].name);
        }
        self.domains.len() - 1
    }

    /// Launch the targets' commands and take the given processes and VMs as domains.
    pub fn launch(&mut self, ex: &mut Export, act: &dyn Actuator) -> Result<(), AgentError> {
        for ti in 0..self.targets.len() {
            let t = self.targets[ti].clone();
            match &t.kind {
                TargetKind::Command(argv) => {
                    let mut cmd = Command::new(&argv[0]);
                    cmd.args(&argv[1..]);
                    if let Some(lim) = self.fd_limit {
                        use std::os::unix::process::CommandExt;
                        // SAFETY: setrlimit is async-signal-safe; `lim` is a plain copy.
                        unsafe {
                            cmd.pre_exec(move || {
                                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                                Ok(())
                            });
                        }
                    }
                    let child = cmd.spawn();
                    let child = match child {
                        Ok(c) => c,
                        Err(e) => {
                            self.stop_children(libc::SIGTERM);
                            return Err(AgentError::new(format!(
                                "target \"{}\": cannot launch `{}`: {e}",
                                t.name, argv[0]
                            )));
                        }
                    };
                    let pid = child.id() as i32;
                    self.new_domain(
                        ex,
                        act,
                        ti,
                        t.name.clone(),
                        pid,
                        DomKind::Proc { procs: BTreeSet::from([pid]) },
                        Some(child),
                    );
                }
                TargetKind::Pid(p) => {
                    self.new_domain(
                        ex,
                        act,
                        ti,
                        t.name.clone(),
                        *p,
                        DomKind::Proc { procs: BTreeSet::from([*p]) },
                        None,
                    );
                }
                TargetKind::QemuPid(p) => {
                    let vcpus = vcpus_by_name(&self.proc_root, *p);
                    self.new_domain(ex, act, ti, t.name.clone(), *p, DomKind::Vm { pid: *p, qmp: None, vcpus }, None);
                }
                TargetKind::Qmp(_) | TargetKind::QemuAll => {}
            }
        }
        Ok(())
    }

    /// The pidfds of launched commands still running (readable when one exits).
    pub fn child_fds(&self) -> impl Iterator<Item = i32> + '_ {
        use std::os::fd::AsRawFd;
        self.domains.iter().filter(|d| d.exit.is_none()).filter_map(|d| d.pidfd.as_ref().map(|f| f.as_raw_fd()))
    }

    /// Forward `sig` to launched commands that still run and wait for them (at most [`CHILD_GRACE`]).
    pub fn stop_children(&mut self, sig: i32) {
        for d in &mut self.domains {
            if let Some(c) = d.child.as_mut() {
                if d.exit.is_none() {
                    // SAFETY: signalling our own child by pid.
                    unsafe { libc::kill(c.id() as i32, sig) };
                }
            }
        }
        let deadline = signals::monotonic() + CHILD_GRACE;
        loop {
            self.reap();
            if self.domains.iter().all(|d| d.child.is_none() || d.exit.is_some()) {
                return;
            }
            // Woken by the first pidfd to turn readable (or every 10 ms without pidfds).
            let mut fds: Vec<libc::pollfd> =
                self.child_fds().map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
            let now = signals::monotonic();
            if now >= deadline {
                return;
            }
            let slice = if fds.is_empty() { Duration::from_millis(10) } else { deadline - now };
            // SAFETY: a valid pollfd array of its length (possibly empty).
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, slice.as_millis().max(1) as libc::c_int) };
        }
    }

    /// Direct children of process `p`: from the kept-open `children` files of its managed
    /// threads (one `pread` each), else by path for a process not managed yet.
    fn children_of(&mut self, p: i32, by_pid: &BTreeMap<i32, Vec<TaskId>>) -> Vec<i32> {
        let Some(tasks) = by_pid.get(&p) else { return children(&self.proc_root, p) };
        let mut out = Vec::new();
        for task in tasks {
            let Some(t) = self.threads.get_mut(task) else { continue };
            if t.children.is_none() {
                let path = self.proc_root.join(p.to_string()).join("task").join(t.tid.to_string()).join("children");
                t.children = ProcFile::open(&path).ok();
            }
            if let Some(text) = t.children.as_mut().and_then(|f| f.read().ok()) {
                out.extend(text.split_ascii_whitespace().filter_map(|x| x.parse::<i32>().ok()));
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Look for descendants, VMs and new QEMU processes.
    pub fn rescan(&mut self, ex: &mut Export, act: &dyn Actuator) {
        let mut by_pid: BTreeMap<i32, Vec<TaskId>> = BTreeMap::new();
        if self.domains.iter().any(|d| d.alive && self.targets[d.target].children) {
            for (id, t) in &self.threads {
                by_pid.entry(t.pid).or_default().push(*id);
            }
        }
        for di in 0..self.domains.len() {
            if !self.domains[di].alive {
                continue;
            }
            let ti = self.domains[di].target;
            let want_children = self.targets[ti].children;
            let root = self.domains[di].root;
            let proc_root = self.proc_root.clone();
            if want_children && matches!(self.domains[di].kind, DomKind::Proc { .. }) {
                let mut all = BTreeSet::new();
                let mut stack = vec![root];
                while let Some(p) = stack.pop() {
                    if all.insert(p) {
                        let kids = self.children_of(p, &by_pid);
                        stack.extend(kids);
                    }
                }
                all.retain(|p| proc_root.join(p.to_string()).exists());
                if !all.is_empty() || !proc_root.join(root.to_string()).exists() {
                    if let DomKind::Proc { procs } = &mut self.domains[di].kind {
                        *procs = all;
                    }
                }
            }
            match &mut self.domains[di].kind {
                DomKind::Proc { .. } => {}
                DomKind::Vm { pid, qmp, vcpus } => {
                    let pid = *pid;
                    let fresh = match qmp {
                        Some(path) => {
                            let gone = vcpus
                                .keys()
                                .any(|t| !proc_root.join(pid.to_string()).join("task").join(t.to_string()).exists());
                            if gone || vcpus.is_empty() {
                                query_vcpus(path)
                                    .ok()
                                    .filter(|vm| vm.pid == pid)
                                    .map(|vm| vm.vcpus.into_iter().map(|x| (x.thread_id, x.cpu_index)).collect())
                            } else {
                                None
                            }
                        }
                        None => Some(vcpus_by_name(&proc_root, pid)),
                    };
                    if let Some(f) = fresh {
                        *vcpus = f;
                    }
                }
            }
        }
        // New VMs: QMP targets without a live domain, and QEMU processes for `qemu = "all"`.
        for ti in 0..self.targets.len() {
            let t = self.targets[ti].clone();
            match &t.kind {
                TargetKind::Qmp(path) => {
                    if self.domains.iter().any(|d| d.target == ti && d.alive) {
                        continue;
                    }
                    match crate::qmp::probe_vcpus(path) {
                        Ok(Some(vm)) if !vm.vcpus.is_empty() => {
                            // The socket's owner (SO_PEERCRED); every vCPU thread was checked to be one of its threads.
                            let pid = vm.pid;
                            let vcpus = vm.vcpus.into_iter().map(|x| (x.thread_id, x.cpu_index)).collect();
                            self.new_domain(
                                ex,
                                act,
                                ti,
                                t.name.clone(),
                                pid,
                                DomKind::Vm { pid, qmp: Some(path.clone()), vcpus },
                                None,
                            );
                        }
                        // Not running (yet, or any more): looked for again at the next rescan.
                        Ok(_) => {}
                        Err(e) => ex.warn_once(format!("qmp:{ti}"), format!("target \"{}\": {e} (will retry)", t.name)),
                    }
                }
                TargetKind::QemuAll => {
                    for pid in list_pids(&self.proc_root) {
                        if self.known_vms.contains(&pid) {
                            continue;
                        }
                        let comm = std::fs::read_to_string(self.proc_root.join(pid.to_string()).join("comm"))
                            .unwrap_or_default();
                        let comm = comm.trim();
                        if !(comm.starts_with("qemu-system") || comm.starts_with("qemu-kvm") || comm == "kvm") {
                            continue;
                        }
                        let vcpus = vcpus_by_name(&self.proc_root, pid);
                        if vcpus.is_empty() {
                            ex.warn_once(
                                format!("nonames:{pid}"),
                                format!("QEMU process {pid} has no `CPU n/KVM|TCG` thread names (start it with -name …,debug-threads=on): not managed"),
                            );
                            continue;
                        }
                        self.known_vms.insert(pid);
                        let name = format!("{}/{}", t.name, guest_name(&self.proc_root, pid));
                        self.new_domain(ex, act, ti, name, pid, DomKind::Vm { pid, qmp: None, vcpus }, None);
                    }
                }
                _ => {}
            }
        }
    }

    /// Move threads read through `schedstat` to task-clock counters (their second observation:
    /// `observe` has just read their schedstat, the counter starts at 0 now). Never in the
    /// agent's first period: the first perf event the machine has opened in a second makes the
    /// kernel switch its scheduler hooks on and wait for an RCU grace period
    /// (kernel/events/core.c `account_event`: `static_branch_enable(&perf_sched_events)`,
    /// `synchronize_rcu()`), 8-17 ms on this machine when quiet and 50 ms at load 20: a job
    /// that ends within the first period (`ampsched run -- true`) must not wait for it. That
    /// first open happens on a thread of its own ([`warm_perf`]), so the loop does not wait
    /// either; threads are moved once it is done.
    pub(crate) fn upgrade_clocks(&mut self, ex: &mut Export, tasks: &[TaskId]) {
        if tasks.is_empty() || !self.wants_clocks() || !warm_perf() {
            return;
        }
        for task in tasks {
            let Some(tid) = self.threads.get(task).map(|t| t.tid) else { continue };
            if let Some(c) = self.open_clock(ex, tid) {
                if let Some(t) = self.threads.get_mut(task) {
                    t.run = RunSource::Clock(c);
                    t.last_sched = (0, 0, 0);
                }
            }
        }
    }

    /// Whether threads read through `schedstat` should move to counters.
    pub(crate) fn wants_clocks(&self) -> bool {
        self.use_counters && self.perf_ok != Some(false)
    }

    /// A run-time counter for `tid`, or `None` to read its `schedstat`: when perf
    /// events are refused here (decided on the first try, logged once) or this
    /// thread's counter cannot be opened (gone, out of file descriptors).
    fn open_clock(&mut self, ex: &mut Export, tid: i32) -> Option<RunClock> {
        if !self.use_counters || self.perf_ok == Some(false) {
            return None;
        }
        match RunClock::open(tid) {
            Ok(c) => {
                self.perf_ok = Some(true);
                Some(c)
            }
            Err(e) if self.perf_ok.is_none() && e.raw_os_error() != Some(libc::ESRCH) => {
                self.perf_ok = Some(false);
                let ev = json!({"event": "run-clock", "source": "schedstat", "reason": e.to_string()});
                ex.log(ev);
                None
            }
            Err(_) => None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn add_thread(
        &mut self,
        ex: &mut Export,
        act: &dyn Actuator,
        d: &Discovered,
        di: usize,
        pid: i32,
        tid: i32,
        vcpu: Option<u32>,
    ) {
        let dir = self.proc_root.join(pid.to_string()).join("task").join(tid.to_string());
        let Ok(mut stat) = ProcFile::open(&dir.join("stat")) else { return };
        let Some(st) = stat.read().ok().and_then(parse_stat).filter(|s| s.state != 'Z' && s.state != 'X') else {
            return;
        };
        let Ok(cur_lin) = act.get(tid) else { return };
        // Read through `schedstat` until its second observation ([`Inventory::upgrade_clocks`]).
        let Ok(mut sched) = ProcFile::open(&dir.join("schedstat")) else { return };
        let last_sched = sched.read().ok().and_then(parse_schedstat).unwrap_or_default();
        let run = RunSource::Schedstat(sched);
        let dom = &mut self.domains[di];
        let original = crate::forks::own_mask(&dom.applied, &dom.base_mask, &cur_lin).unwrap_or(cur_lin);
        let vcpu = vcpu.unwrap_or_else(|| {
            dom.next_vcpu += 1;
            dom.next_vcpu - 1
        });
        let task = TaskId(self.next_task);
        self.next_task += 1;
        let cur = d.from_linux(&cur_lin);
        let ev = json!({"event": "thread", "domain": self.domains[di].id.0, "target": self.domains[di].name,
                        "tid": tid, "pid": pid, "task": task.0, "vcpu": vcpu, "comm": st.comm,
                        "original": original.to_list(), "inherited": original != cur_lin});
        self.threads.insert(
            task,
            Thread {
                dom: di,
                tid,
                pid,
                vcpu,
                stat,
                run,
                children: None,
                last_sched,
                state: '?',
                processor: st.processor,
                starttime: st.starttime,
                original,
                cur,
                touched: original != cur_lin,
                in_state: false,
            },
        );
        self.by_tid.insert(tid, task);
        *self.pid_threads.entry(pid).or_insert(0) += 1;
        ex.log(ev);
        if let Some(tr) = ex.trace.as_mut() {
            let dom = &self.domains[di];
            let ts = boottime_ns();
            if pid != dom.root {
                // A child process of the target: its own process in the trace.
                tr.add_process(ts, pid, &format!("{}[{pid}]", dom.name));
            }
            let name = match dom.kind {
                DomKind::Vm { .. } => format!("{}/v{vcpu}", dom.name),
                DomKind::Proc { .. } => st.comm.clone(),
            };
            tr.add_thread(ts, pid, tid, &name);
        }
    }

    /// Stop managing a thread (it exited or vanished).
    pub fn remove_thread(&mut self, ex: &mut Export, task: TaskId, why: &str) {
        if let Some(t) = self.threads.remove(&task) {
            self.by_tid.remove(&t.tid);
            if let std::collections::hash_map::Entry::Occupied(mut e) = self.pid_threads.entry(t.pid) {
                *e.get_mut() -= 1;
                if *e.get() == 0 {
                    e.remove();
                }
            }
            self.ended.push((task, t));
            let t = &self.ended.last().expect("just pushed").1;
            let ev = json!({"event": "thread-gone", "tid": t.tid, "task": task.0, "reason": why});
            ex.log(ev);
            if let Some(tr) = ex.trace.as_mut() {
                tr.remove_thread(boottime_ns(), t.tid);
            }
        }
    }

    /// List every domain's threads; add new ones, drop vanished ones; notice ended domains.
    pub fn refresh_threads(&mut self, ex: &mut Export, act: &dyn Actuator, d: &Discovered) {
        // Threads read through a counter are not noticed exiting by a failed read: list every
        // process's threads in full once per rescan interval (and whenever a count changes).
        let now = signals::monotonic();
        let reconcile = self.last_reconcile.is_none_or(|t| now.saturating_sub(t) >= self.rescan_every);
        if reconcile {
            self.last_reconcile = Some(now);
        }
        self.reap_zombies();
        let mut vanished: Vec<TaskId> = Vec::new();
        for di in 0..self.domains.len() {
            if !self.domains[di].alive {
                continue;
            }
            let dom = &mut self.domains[di];
            dom.peek_exit();
            let mut want: Vec<(i32, i32, Option<u32>)> = Vec::new();
            let mut alive_procs = 0;
            match &self.domains[di].kind {
                DomKind::Proc { procs } => {
                    for &p in procs {
                        // List the threads only when the process's thread count (one `fstat` of
                        // its kept-open task directory) differs from the number managed.
                        let dir = match self.task_dirs.entry(p) {
                            std::collections::hash_map::Entry::Occupied(e) => Some(e.into_mut()),
                            std::collections::hash_map::Entry::Vacant(v) => {
                                TaskDir::open(&self.proc_root, p).ok().map(|f| v.insert(f))
                            }
                        };
                        let mut n = dir.map(|d| d.threads()).unwrap_or(0);
                        // One thread left may be a zombie leader whose threads all exited: gone.
                        if n == 1 {
                            let f = kept_open(&mut self.leader_stat, &self.proc_root, p, "stat");
                            if f.and_then(|f| f.read().ok().and_then(parse_stat)).is_none_or(|s| s.state == 'Z') {
                                n = 0;
                            }
                        }
                        if n == 0 {
                            self.task_dirs.remove(&p);
                            self.leader_stat.remove(&p);
                            self.anon_kb.remove(&p);
                            self.statm.remove(&p);
                            continue;
                        }
                        alive_procs += 1;
                        // Every period: a process's memory at its first listing is that of a
                        // program just started (xz: 4 KiB at 0 ms, 10 MB at 32 ms, 38 MB at
                        // 0.5 s), so a figure read once would call it cache-light for most of a
                        // short job (docs/agent.md, "Cache-hot grants").
                        let f = kept_open(&mut self.statm, &self.proc_root, p, "statm");
                        let kb = f.and_then(|f| f.read().ok().and_then(|t| parse_statm_anon_kb(t, self.page_kb)));
                        self.anon_kb.insert(p, kb.unwrap_or(0));
                        if reconcile || self.pid_threads.get(&p).copied().unwrap_or(0) as u64 != n {
                            let tids = list_tids(&self.proc_root, p);
                            vanished.extend(
                                self.threads
                                    .iter()
                                    .filter(|(_, t)| t.pid == p && t.dom == di && !tids.contains(&t.tid))
                                    .map(|(id, _)| *id),
                            );
                            want.extend(tids.into_iter().map(|t| (p, t, None)));
                        }
                    }
                }
                DomKind::Vm { pid, vcpus, .. } => {
                    if self.proc_root.join(pid.to_string()).exists() {
                        want.extend(vcpus.iter().map(|(t, i)| (*pid, *t, Some(*i))));
                    }
                }
            }
            // A launched command that was reaped has no threads even if /proc still lists a zombie.
            // (Checked only when nothing else is alive: a `stat` system call per domain per period saved.)
            let root_gone =
                || self.domains[di].exit.is_some() || !self.proc_root.join(self.domains[di].root.to_string()).exists();
            if want.is_empty() && alive_procs == 0 && root_gone() {
                self.domains[di].alive = false;
                vanished.extend(self.threads.iter().filter(|(_, t)| t.dom == di).map(|(id, _)| *id));
                let ev =
                    json!({"event": "domain-gone", "domain": self.domains[di].id.0, "name": self.domains[di].name});
                ex.log(ev);
                if let DomKind::Vm { pid, .. } = self.domains[di].kind {
                    self.known_vms.remove(&pid);
                }
                continue;
            }
            for (p, t, v) in want {
                if !self.by_tid.contains_key(&t) {
                    self.add_thread(ex, act, d, di, p, t, v);
                }
            }
        }
        for id in vanished {
            self.remove_thread(ex, id, "exited");
        }
    }
}

/// Whether perf events are switched on in the kernel for this process's lifetime: the first
/// call starts a thread that opens a task-clock counter of itself and keeps it open (so the
/// kernel's scheduler hooks stay on, and later opens cost µs); true once that open returned
/// (success or not: [`Inventory::open_clock`] then learns why from its own open).
fn warm_perf() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0: not started, 1: opening, 2: done.
    static WARM: AtomicU8 = AtomicU8::new(0);
    if WARM.compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
        let started = std::thread::Builder::new().name("ampsched-perf".into()).spawn(|| {
            if let Ok(c) = RunClock::open(signals::gettid()) {
                // Kept for the process's lifetime (closed at exit; CLOEXEC for children).
                std::mem::forget(c);
            }
            WARM.store(2, Ordering::SeqCst);
        });
        if started.is_err() {
            WARM.store(2, Ordering::SeqCst);
        }
    }
    WARM.load(Ordering::SeqCst) == 2
}

/// vCPU threads of a QEMU process found by name (`CPU n/KVM`, `CPU n/TCG`): tid → vCPU index.
pub fn vcpus_by_name(proc_root: &Path, pid: i32) -> BTreeMap<i32, u32> {
    let mut out = BTreeMap::new();
    for tid in list_tids(proc_root, pid) {
        let p = proc_root.join(pid.to_string()).join("task").join(tid.to_string()).join("comm");
        if let Some(i) = std::fs::read_to_string(p).ok().and_then(|c| parse_vcpu_thread_name(&c)) {
            out.insert(tid, i);
        }
    }
    out
}

/// A QEMU guest's name from `-name guest=X,…` or `-name X`, else its pid.
pub fn guest_name(proc_root: &Path, pid: i32) -> String {
    let args = cmdline(proc_root, pid);
    let name = args.iter().position(|a| a == "-name").and_then(|i| args.get(i + 1)).map(|v| {
        let first = v.split(',').next().unwrap_or(v);
        first.strip_prefix("guest=").unwrap_or(first).to_string()
    });
    name.filter(|n| !n.is_empty()).unwrap_or_else(|| format!("pid{pid}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_names_and_vcpu_threads_from_a_fixture_proc() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().join("77");
        std::fs::create_dir_all(&base).unwrap();
        std::fs::write(base.join("cmdline"), b"qemu-system-x86_64\0-name\0guest=web,debug-threads=on\0").unwrap();
        assert_eq!(guest_name(d.path(), 77), "web");
        for (tid, comm) in [(77, "qemu-system-x86"), (78, "CPU 0/TCG"), (79, "CPU 1/TCG"), (80, "worker")] {
            let t = base.join("task").join(tid.to_string());
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("comm"), format!("{comm}\n")).unwrap();
        }
        let v = vcpus_by_name(d.path(), 77);
        assert_eq!(v.into_iter().collect::<Vec<_>>(), vec![(78, 0), (79, 1)]);
        assert_eq!(guest_name(d.path(), 5), "pid5");
    }
}
