//! Exact scheduling facts of a real run from the kernel's sched tracepoints
//! (tracefs), as the simulator counts them: per thread, run time on each CPU,
//! migrations, wake-up latencies, first run and last switch-out.
//!
//! Why tracing and not `/proc/<pid>/task/<tid>/schedstat` sampling: a
//! sampler every 2 ms misses moves shorter than its period (migrations are a
//! lower bound), cannot see when a woken thread first runs (wake-up latency),
//! and under the agent it raced with the workload's exits so per-thread CPU
//! time read low (the last samples of a thread are lost when it exits between
//! two samples: `schedstat` of an exited thread is gone). The tracepoints
//! are the kernel's own record of each event (kernel/sched/core.c:
//! `__schedule` emits `sched_switch` with prev/next pid and prev_state;
//! `try_to_wake_up` emits `sched_waking` once the task's state matched, i.e.
//! for a real wake-up; `wake_up_new_task` emits `sched_wakeup_new`).
//!
//! Set-up (kernel/trace/trace_events.c, Documentation/trace/events.rst): a
//! private tracing instance `instances/ampsched-validate-<pid>` (the global
//! buffer is left alone), clock `mono`, buffer 16 MiB per CPU without
//! overwrite, events `sched_switch`, `sched_waking`, `sched_wakeup_new`,
//! filtered by `set_event_pid` = validate itself with the `event-fork`
//! option, so every process and thread it starts afterwards (rt-app, the
//! agent, their threads) is traced and nothing else (a switch is recorded
//! when either side is traced). tracefs is mounted at /sys/kernel/tracing if
//! it was not, and unmounted again; the instance is removed on drop.
//!
//! The accounting (`parse`):
//! - `sched_switch` at t on CPU c: prev's running segment since its
//!   switch-in is charged to its CPU; next starts a segment on c, counts a
//!   migration if its previous segment was on another CPU (as the
//!   simulator's `start_on`), and if it was woken since its last run the
//!   latency t − t_woken is recorded.
//! - `sched_waking`/`sched_wakeup_new` at t: t_woken = t, unless the task
//!   is on a CPU (a wake-up racing its own switch-out: it never left).
//! - Waiting (runnable, not running; the simulator's `wait_ns`): from a
//!   wake-up, or from a switch-out with `prev_state=R` (preempted), to the
//!   next switch-in.
//!
//! - A switch-in the buffer does not hold (seen on this machine's 6.1
//!   kernel, 1 run in 5-10: a thread created by `clone` and woken with
//!   `sched_wakeup_new` onto an idle CPU, whose first `sched_switch` there
//!   is missing although every later event of it is recorded — whole
//!   threads then read as never run) is recovered from the thread's own
//!   later lines: every line's header names the task current on its CPU
//!   (kernel/trace/trace_output.c, `comm-pid [cpu]`), so a line in the
//!   context of a thread with no open segment proves a switch-in the
//!   trace lacks (only for tasks created while tracing, known by their
//!   `sched_wakeup_new`: a waking issued from an untraced task's context
//!   names that task, which is not one of ours). The segment starts at the latest time it cannot have
//!   started before: its last wake-up, its last switch-out, and the last
//!   recorded switch on that CPU; its wake-up latency and wait are recorded
//!   at that start, i.e. at their lower bounds (the wake-up happened, its
//!   moment is not known). `inferred` counts them.
//!
//! Events lost (the header's entries-in-buffer < entries-written) make the
//! figures unreliable: `parse` reports it and validate falls back to the
//! sampler.

use ampsched_sim::latency::LatencyHist;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const TRACEFS: &str = "/sys/kernel/tracing";

/// Scheduling facts of one thread.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadTrace {
    /// Last seen command name.
    pub comm: String,
    /// Run time per CPU, ns.
    pub run_by_cpu: BTreeMap<u32, u64>,
    /// Switch-ins on another CPU than the previous one.
    pub migrations: u64,
    /// First switch-in, ns (trace clock).
    pub first_ns: Option<u64>,
    /// Last switch-out, ns (trace clock).
    pub last_ns: u64,
    /// Wake-up latencies.
    pub wake: LatencyHist,
    /// Time runnable but not running (woken or preempted, until switched in), ns.
    pub wait_ns: u64,
}

/// A parsed trace.
#[derive(Clone, Debug, Default)]
pub struct Parsed {
    /// Per thread id.
    pub threads: BTreeMap<u32, ThreadTrace>,
    /// The buffer dropped events.
    pub lost: bool,
    /// Switch-ins the trace lacks, recovered from a later line in the thread's context.
    pub inferred: u64,
}

/// A private tracing instance; removed on drop.
pub struct Tracer {
    dir: PathBuf,
    mounted: bool,
}

fn put(dir: &Path, file: &str, v: &str) -> Result<(), String> {
    std::fs::write(dir.join(file), v).map_err(|e| format!("{}: {e}", dir.join(file).display()))
}

impl Tracer {
    /// Start tracing every task validate starts from now on.
    pub fn start() -> Result<Tracer, String> {
        let root = Path::new(TRACEFS);
        let mut mounted = false;
        if !root.join("instances").is_dir() {
            let st = std::process::Command::new("mount")
                .args(["-t", "tracefs", "nodev", TRACEFS])
                .stderr(std::process::Stdio::null())
                .status()
                .map_err(|e| format!("mount tracefs: {e}"))?;
            if !st.success() || !root.join("instances").is_dir() {
                return Err(format!("tracefs is not available at {TRACEFS} (root needed)"));
            }
            mounted = true;
        }
        let dir = root.join("instances").join(format!("ampsched-validate-{}", std::process::id()));
        if !dir.is_dir() {
            std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let t = Tracer { dir, mounted };
        put(&t.dir, "tracing_on", "0")?;
        put(&t.dir, "buffer_size_kb", "16384")?;
        put(&t.dir, "trace_clock", "mono")?;
        put(&t.dir, "options/overwrite", "0")?;
        put(&t.dir, "options/event-fork", "1")?;
        put(&t.dir, "set_event_pid", &std::process::id().to_string())?;
        for ev in ["sched_switch", "sched_waking", "sched_wakeup_new"] {
            put(&t.dir, &format!("events/sched/{ev}/enable"), "1")?;
        }
        put(&t.dir, "trace", "")?;
        put(&t.dir, "tracing_on", "1")?;
        Ok(t)
    }

    /// Stop and return the trace text.
    pub fn finish(&self) -> Result<String, String> {
        put(&self.dir, "tracing_on", "0")?;
        std::fs::read_to_string(self.dir.join("trace")).map_err(|e| format!("{}: {e}", self.dir.display()))
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        let _ = put(&self.dir, "tracing_on", "0");
        let _ = std::fs::remove_dir(&self.dir);
        if self.mounted {
            let _ = std::process::Command::new("umount").arg(TRACEFS).status();
        }
    }
}

/// `key=` value in `s` as a number.
fn num(s: &str, key: &str) -> Option<u64> {
    let i = s.find(key)? + key.len();
    let d: String = s[i..].chars().take_while(|c| c.is_ascii_digit()).collect();
    d.parse().ok()
}

/// `key=` value in `s` up to the next space.
fn word<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let i = s.find(key)? + key.len();
    s[i..].split(' ').next()
}

/// "12345.678901" (s.µs) → ns.
fn stamp(s: &str) -> Option<u64> {
    let (a, b) = s.split_once('.')?;
    let frac: String = b.chars().chain(std::iter::repeat('0')).take(9).collect();
    Some(a.parse::<u64>().ok()? * 1_000_000_000 + frac.parse::<u64>().ok()?)
}

/// One line: (cpu, t_ns, the pid current on that CPU, event, body).
fn line(l: &str) -> Option<(u32, u64, u32, &str, &str)> {
    let at = l.find(": sched_")?;
    let head = &l[..at];
    let rest = &l[at + 2..];
    let (ev, body) = rest.split_once(": ")?;
    let t = stamp(head.split_whitespace().next_back()?)?;
    let lb = head.rfind('[')?;
    let rb = lb + head[lb..].find(']')?;
    let cpu = head[lb + 1..rb].parse().ok()?;
    // `comm-pid` before the CPU (a comm may hold '-' itself: the pid is after the last one).
    let cur = head[..lb].trim().rsplit_once('-')?.1.parse().ok()?;
    Some((cpu, t, cur, ev, body))
}

/// Account a trace's text (see the module essay).
pub fn parse(text: &str) -> Parsed {
    let mut p = Parsed::default();
    let mut on_cpu: BTreeMap<u32, (u32, u64)> = BTreeMap::new();
    let mut last_cpu: BTreeMap<u32, u32> = BTreeMap::new();
    let mut woke: BTreeMap<u32, u64> = BTreeMap::new();
    let mut runnable: BTreeMap<u32, u64> = BTreeMap::new();
    // Per CPU, the time of its last recorded switch.
    let mut switched: BTreeMap<u32, u64> = BTreeMap::new();
    // Tasks created while tracing (`sched_wakeup_new`: every process and thread
    // validate starts): only their missing switch-ins are recovered, so an
    // untraced task current when a traced one is woken is not taken for one.
    let mut born: std::collections::BTreeSet<u32> = std::collections::BTreeSet::new();
    for l in text.lines() {
        if let Some(h) = l.strip_prefix("# entries-in-buffer/entries-written: ") {
            let mut it = h.split_whitespace().next().unwrap_or("").split('/');
            let (a, b) = (it.next().and_then(|x| x.parse::<u64>().ok()), it.next().and_then(|x| x.parse::<u64>().ok()));
            p.lost |= matches!((a, b), (Some(a), Some(b)) if a < b);
            continue;
        }
        let Some((cpu, t, cur, ev, body)) = line(l) else { continue };
        // A line in the context of a thread that has no open segment: its
        // switch-in is missing (module essay). Open it at the latest bound.
        if born.contains(&cur) && !on_cpu.contains_key(&cur) {
            let th = p.threads.entry(cur).or_default();
            let (w, r) = (woke.remove(&cur), runnable.remove(&cur));
            let start =
                [w, r, Some(th.last_ns), switched.get(&cpu).copied()].into_iter().flatten().max().unwrap_or(t).min(t);
            // The wake-up happened; its latency and wait are known only from below.
            if let Some(w) = w {
                th.wake.record(start - w);
            }
            if let Some(r) = r {
                th.wait_ns += start - r;
            }
            if last_cpu.get(&cur).is_some_and(|c| *c != cpu) {
                th.migrations += 1;
            }
            last_cpu.insert(cur, cpu);
            on_cpu.insert(cur, (cpu, start));
            th.first_ns.get_or_insert(start);
            p.inferred += 1;
        }
        match ev {
            "sched_switch" => {
                let Some((prev, next)) = body.split_once(" ==> ") else { continue };
                switched.insert(cpu, t);
                if let Some(pp) = num(prev, "prev_pid=").filter(|x| *x != 0) {
                    let pp = pp as u32;
                    let th = p.threads.entry(pp).or_default();
                    if let Some((c, since)) = on_cpu.remove(&pp) {
                        *th.run_by_cpu.entry(c).or_default() += t.saturating_sub(since);
                    }
                    th.last_ns = t;
                    if word(prev, "prev_state=").is_some_and(|st| st.starts_with('R')) {
                        runnable.insert(pp, t);
                    }
                    if let Some(c) = word(prev, "prev_comm=") {
                        th.comm = c.to_string();
                    }
                }
                if let Some(np) = num(next, "next_pid=").filter(|x| *x != 0) {
                    let np = np as u32;
                    let th = p.threads.entry(np).or_default();
                    if last_cpu.get(&np).is_some_and(|c| *c != cpu) {
                        th.migrations += 1;
                    }
                    last_cpu.insert(np, cpu);
                    on_cpu.insert(np, (cpu, t));
                    th.first_ns.get_or_insert(t);
                    if let Some(w) = woke.remove(&np) {
                        th.wake.record(t.saturating_sub(w));
                    }
                    if let Some(r) = runnable.remove(&np) {
                        th.wait_ns += t.saturating_sub(r);
                    }
                    if let Some(c) = word(next, "next_comm=") {
                        th.comm = c.to_string();
                    }
                }
            }
            "sched_waking" | "sched_wakeup_new" => {
                if let Some(pid) = num(body, " pid=").or_else(|| num(body, "pid=")) {
                    let pid = pid as u32;
                    if ev == "sched_wakeup_new" {
                        born.insert(pid);
                    }
                    if !on_cpu.contains_key(&pid) {
                        woke.entry(pid).or_insert(t);
                        runnable.entry(pid).or_insert(t);
                    }
                }
            }
            _ => {}
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines in the kernel's text format (kernel/trace/trace_output.c: comm-pid,
    // [cpu], irq flags, timestamp; then the event's TP_printk).
    const TRACE: &str = "\
# tracer: nop
#
# entries-in-buffer/entries-written: 7/7   #P:2
#
            sh-100     [000] d..2.  100.000000: sched_wakeup_new: comm=sh pid=101 prio=120 target_cpu=001
          <idle>-0       [001] d..2.  100.000010: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=worker next_pid=101 next_prio=120
          worker-101     [001] d..2.  100.004010: sched_switch: prev_comm=worker prev_pid=101 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
            sh-100     [000] d..2.  100.010000: sched_waking: comm=worker pid=101 prio=120 target_cpu=000
            sh-100     [000] d..2.  100.010250: sched_switch: prev_comm=sh prev_pid=100 prev_prio=120 prev_state=S ==> next_comm=worker next_pid=101 next_prio=120
          worker-101     [000] d.h2.  100.011000: sched_waking: comm=worker pid=101 prio=120 target_cpu=000
          worker-101     [000] d..2.  100.013250: sched_switch: prev_comm=worker prev_pid=101 prev_prio=120 prev_state=X ==> next_comm=swapper/0 next_pid=0 next_prio=120
";

    #[test]
    fn a_thread_s_runs_moves_and_wake_ups_are_read_from_switch_and_waking() {
        let p = parse(TRACE);
        assert!(!p.lost);
        let w = &p.threads[&101];
        assert_eq!(w.comm, "worker");
        // Ran 100.000010 → 100.004010 on CPU 1 (4 ms) and 100.010250 →
        // 100.013250 on CPU 0 (3 ms): one migration.
        assert_eq!(w.run_by_cpu.get(&1), Some(&4_000_000));
        assert_eq!(w.run_by_cpu.get(&0), Some(&3_000_000));
        assert_eq!(w.migrations, 1);
        assert_eq!(w.first_ns, Some(100_000_010_000));
        assert_eq!(w.last_ns, 100_013_250_000);
        // Wake-ups: new at 100.000000, first run 10 µs later (10_000 ns: e =
        // 13, width 256, 8192 + 7·256 = 9984); woken at
        // 100.010000, run at 100.010250 (250 µs = 250_000 ns: e = 17, width
        // 2^12 = 4096, (250000 − 131072) / 4096 = 29.03 → 131072 + 29·4096
        // = 249_856). The waking at 100.011000 came while it was on the CPU:
        // not a wake-up latency.
        assert_eq!(w.wake.count(), 2);
        assert_eq!(w.wake.quantile(0.5), Some(9984));
        assert_eq!(w.wake.quantile(1.0), Some(249_856));
        // Waiting: 10 µs + 250 µs (it never was preempted here).
        assert_eq!(w.wait_ns, 260_000);
    }

    /// A real trace of validate's speed probe (28 Nov 2026, Debian 12's 6.1
    /// kernel), cut to the probe's lines: rt-app (19279) creates the probe
    /// thread (19280) onto CPU 1, and the buffer holds no `sched_switch` into
    /// 19280 — its first line is a softirq's waking in its context at
    /// 88289.292030, its last its exit at 88289.608799.
    const MISSED: &str = "\
# entries-in-buffer/entries-written: 6/6   #P:2
          rt-app-19279   [000] d..2. 88289.283833: sched_wakeup_new: comm=rt-app pid=19280 prio=120 target_cpu=001
          rt-app-19279   [000] d..2. 88289.283869: sched_switch: prev_comm=rt-app prev_pid=19279 prev_prio=120 prev_state=S ==> next_comm=ampsched next_pid=19264 next_prio=120
           probe-19280   [001] d.s3. 88289.292030: sched_waking: comm=rcu_preempt pid=15 prio=120 target_cpu=000
           probe-19280   [001] d..2. 88289.608746: sched_waking: comm=rt-app pid=19279 prio=120 target_cpu=000
          <idle>-0       [000] d..2. 88289.608780: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=rt-app next_pid=19279 next_prio=120
           probe-19280   [001] d..2. 88289.608799: sched_switch: prev_comm=probe prev_pid=19280 prev_prio=120 prev_state=X ==> next_comm=swapper/1 next_pid=0 next_prio=120
";

    #[test]
    fn a_switch_in_the_buffer_lacks_is_recovered_from_the_thread_s_own_lines() {
        let p = parse(MISSED);
        let w = &p.threads[&19280];
        // Its line at 88289.292030 proves it ran on CPU 1 before then; it
        // cannot have started before its creation's wake-up at
        // 88289.283833 (CPU 1 has no earlier recorded switch): it ran from
        // then to its exit, 608799 − 283833 = 324 966 µs.
        assert_eq!(p.inferred, 1);
        assert_eq!(w.first_ns, Some(88_289_283_833_000));
        assert_eq!(w.run_by_cpu.get(&1), Some(&324_966_000));
        assert_eq!(w.comm, "probe");
        // Its creation's wake-up counts, at its lower bound (0: it started
        // at the wake-up, the latest bound), and so does the wait.
        assert_eq!(w.wake.count(), 1);
        assert_eq!(w.wake.quantile(1.0), Some(0));
        assert_eq!(w.wait_ns, 0);
        // rcu_preempt, woken from the probe's context, is not taken for a
        // traced task; rt-app's own switches are recorded and need nothing.
        assert!(!p.threads.contains_key(&15));
        assert_eq!(p.threads[&19279].first_ns, Some(88_289_608_780_000));
        // The complete trace infers nothing.
        assert_eq!(parse(TRACE).inferred, 0);
    }

    #[test]
    fn lost_events_are_reported() {
        let p = parse("# entries-in-buffer/entries-written: 5/9   #P:2\n");
        assert!(p.lost);
    }
}
