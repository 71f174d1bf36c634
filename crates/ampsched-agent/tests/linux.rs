//! Real-Linux tests of the agent (issue 6). They change real affinities,
//! start a SCHED_FIFO hog and boot a QEMU guest, so they run one at a time
//! (a global lock) and always clean up by PID (drop guards).
//!
//! Asymmetry is emulated on this 2-CPU machine: `ampsched-hog` spins 5 ms
//! and sleeps 5 ms at SCHED_FIFO on CPU 1, leaving CPU 1 about half speed
//! for normal threads; CPU 0 is declared fast (`--fast 0`).
//!
//! Prerequisites (installed by `.ci/run`): root (SCHED_FIFO, affinities of
//! other processes), 2+ CPUs, `qemu-system-x86_64`, `busybox` (static),
//! `cpio`, a `/boot/vmlinuz-*cloud*` kernel. A missing one fails the test
//! with the package to install. So that `cargo test` runs anywhere, every
//! test here is `#[ignore]`d with the reason printed; CI runs them with
//! `--include-ignored` (`AMPSCHED_MACHINE_TESTS=1 scripts/test.sh`), as root,
//! and requires them to pass. The `ampsched` binary must be built
//! (`cargo test --workspace` builds it; or set AMPSCHED_BIN).

use ampsched_agent::actuate::get_affinity;
use ampsched_agent::procfs::list_tids;
use ampsched_model::CpuSet;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// One machine test at a time, its process's autogroup at nice -20 meanwhile.
///
/// The spinners these tests manage run in a session of their own at autogroup nice -20
/// (`spinner3`), so other sessions' builds cannot starve them. This process (the QMP fake
/// server's thread) and the agents it spawns (same session) would then get about 1/87 of the
/// CPU behind them (autogroup weights 1024 against 88761, kernel/sched/autogroup.c): seen in
/// CI on 27 Nov, the agent's 2 s QMP deadline ran out before the server thread could send its
/// greeting. So the harness takes the same weight while a test runs, and gives the session its
/// old value back when the test ends (drop order: the boost before the lock).
struct Serial {
    _boost: AutogroupBoost,
    _lock: MutexGuard<'static, ()>,
}

fn serial() -> Serial {
    let lock = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    Serial { _boost: AutogroupBoost::new(-20), _lock: lock }
}

/// This session's autogroup nice set to a value, the previous one restored on drop
/// (nothing done where the kernel has no autogroup file or refuses the write).
struct AutogroupBoost(Option<i32>);

impl AutogroupBoost {
    fn new(nice: i32) -> AutogroupBoost {
        const F: &str = "/proc/self/autogroup";
        // The file reads "/autogroup-<id> nice <n>".
        let old = std::fs::read_to_string(F).ok().and_then(|s| s.split_whitespace().last()?.parse::<i32>().ok());
        match old {
            Some(o) if std::fs::write(F, nice.to_string()).is_ok() => AutogroupBoost(Some(o)),
            _ => AutogroupBoost(None),
        }
    }
}

impl Drop for AutogroupBoost {
    fn drop(&mut self) {
        if let Some(o) = self.0 {
            let _ = std::fs::write("/proc/self/autogroup", o.to_string());
        }
    }
}

const HOG: &str = env!("CARGO_BIN_EXE_ampsched-hog");
const WORKLOAD: &str = env!("CARGO_BIN_EXE_ampsched-workload");

fn ampsched() -> PathBuf {
    if let Some(p) = std::env::var_os("AMPSCHED_BIN") {
        return PathBuf::from(p);
    }
    // tests run from target/<profile>/deps/; the CLI binary is target/<profile>/ampsched.
    let exe = std::env::current_exe().unwrap();
    let p = exe.parent().unwrap().parent().unwrap().join("ampsched");
    assert!(
        p.exists(),
        "{} not found: build the CLI first (`cargo build -p ampsched-cli`; `cargo test --workspace` does it) or set AMPSCHED_BIN",
        p.display()
    );
    p
}

fn require_machine() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "these tests need root (SCHED_FIFO hog, other processes' affinities)");
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let n = CpuSet::parse_list(online.trim()).unwrap().len();
    assert!(n >= 2, "these tests need at least 2 online CPUs (have {n})");
}

/// A child process killed (SIGKILL, by PID) and reaped on drop.
struct Guard(Child);

impl Guard {
    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// Start the RT duty-cycle hog on CPU 1 (5 ms spin / 5 ms sleep).
fn start_hog() -> Guard {
    let mut c = Command::new(HOG)
        .args(["--cpu", "1", "--spin-ms", "5", "--sleep-ms", "5", "--secs", "300"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ampsched-hog");
    std::thread::sleep(Duration::from_millis(200));
    if let Ok(Some(st)) = c.try_wait() {
        let mut e = String::new();
        c.stderr.take().unwrap().read_to_string(&mut e).unwrap();
        panic!("ampsched-hog exited ({st}): {e}");
    }
    Guard(c)
}

fn out_text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn read_json(p: &Path) -> Value {
    let t = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(t.trim()).unwrap()
}

fn f(v: &Value, k: &str, i: usize) -> f64 {
    v[k].get(i).and_then(Value::as_f64).unwrap_or(0.0)
}

fn affinities(pid: i32) -> Vec<(i32, CpuSet)> {
    list_tids(Path::new("/proc"), pid).into_iter().filter_map(|t| get_affinity(t).ok().map(|m| (t, m))).collect()
}

fn wait_for(deadline: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

#[test]
#[ignore = "real machine: needs root and 2+ CPUs; run with `cargo test -- --include-ignored` (CI does)"]
fn fair_sharing_two_cpu_bound_processes_split_the_fast_cpu() {
    let _s = serial();
    require_machine();
    let _hog = start_hog();
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("agent.toml");
    let (o1, o2) = (d.path().join("p1.json"), d.path().join("p2.json"));
    std::fs::write(
        &cfg,
        format!(
            "fast = \"0\"\n[placer]\nname = \"aash\"\n\
             [[target]]\nname = \"p1\"\ncommand = [\"{WORKLOAD}\", \"spin\", \"--secs\", \"3\", \"--out\", \"{}\"]\n\
             [[target]]\nname = \"p2\"\ncommand = [\"{WORKLOAD}\", \"spin\", \"--secs\", \"3\", \"--out\", \"{}\"]\n",
            o1.display(),
            o2.display()
        ),
    )
    .unwrap();
    let state = d.path().join("state.json");
    let log = d.path().join("agent.log");
    let o = Command::new(ampsched())
        .args(["agent", "--config", cfg.to_str().unwrap(), "--state", state.to_str().unwrap()])
        .args(["--log", log.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", out_text(&o));
    let (a, b) = (read_json(&o1), read_json(&o2));
    // The fast CPU was handed to each process alone at least once (the rotation itself).
    let changes = log_events(&log, "change");
    for p in ["p1", "p2"] {
        assert!(
            changes.iter().any(|c| c["target"] == p && c["linux_mask"] == "0"),
            "{p} never got CPU 0 alone: {changes:?}"
        );
    }
    // Each process's run time on CPU 0, from its own samples.
    let (a0, b0) = (f(&a, "on_cpu_s", 0), f(&b, "on_cpu_s", 0));
    // AASH rotates the one fast CPU between the two single-thread processes
    // every 30 ms: over 3 s each holds it for ~1.5 s, i.e. 50 % of the CPU-0
    // time the pair gets (±10 %). (Linux alone keeps each on its own CPU:
    // ~100 % / 0 %.) Shares are of the pair's CPU-0 time, so other load on
    // the machine does not skew them.
    let share_a = a0 / (a0 + b0);
    eprintln!("CPU 0: p1 {a0:.3} s, p2 {b0:.3} s over 3 s → p1 share {share_a:.3}");
    assert!((0.4..=0.6).contains(&share_a), "p1 got {share_a:.3} of CPU 0 (p1 {a}, p2 {b})");
    // Both really ran on CPU 0. How much (≈ 3 s between them on an idle machine, less under
    // other load) is a figure of `scripts/bench-agent-figures.sh`, not a bound here.
    assert!(a0 > 0.0 && b0 > 0.0, "p1 {a0:.3} s, p2 {b0:.3} s on CPU 0");
    assert!(!state.exists(), "a clean exit removes the state file");
}

#[test]
#[ignore = "real machine: needs root and 2+ CPUs; run with `cargo test -- --include-ignored` (CI does)"]
fn sequential_phases_the_lone_active_thread_runs_on_the_fast_cpu() {
    let _s = serial();
    require_machine();
    let _hog = start_hog();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("phased.json");
    let state = d.path().join("state.json");
    // 3 threads, 12 phases of 250 ms: one thread works while the others block.
    let log = d.path().join("agent.log");
    let o = Command::new(ampsched())
        .args(["run", "--placer", "aash", "--fast", "0", "--state", state.to_str().unwrap()])
        .args(["--log", log.to_str().unwrap(), "--"])
        .args([WORKLOAD, "phased", "--threads", "3", "--phases", "12", "--phase-ms", "250", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", out_text(&o));
    // One thread works at a time: once the phases run, the agent never keeps it from the fast
    // CPU (every mask it gives from its second period on includes CPU 0); where it runs is then
    // Linux's choice. In the first period, while the program starts its threads, two of them can
    // be runnable at once (real contention for a few ms, seen since the agent's first sample comes
    // ~3 ms after start): a mask narrowed then must be widened again by the next period.
    let changes = log_events(&log, "change");
    let has0 =
        |c: &Value| CpuSet::parse_list(c["linux_mask"].as_str().unwrap()).unwrap().contains(ampsched_model::CpuId(0));
    let first_period_ms = 30.0;
    assert!(
        changes.iter().filter(|c| c["t_ms"].as_f64().unwrap() >= first_period_ms).all(has0),
        "a mask without CPU 0 after the start: {changes:?}"
    );
    let mut last: BTreeMap<u64, &Value> = BTreeMap::new();
    for c in &changes {
        last.insert(c["tid"].as_u64().unwrap(), c);
    }
    assert!(last.values().all(|c| has0(c)), "a start-up mask never widened: {changes:?}");
    for c in changes.iter().filter(|c| !has0(c)) {
        let (tid, t) = (c["tid"].as_u64().unwrap(), c["t_ms"].as_f64().unwrap());
        assert!(
            changes.iter().any(|w| w["tid"].as_u64() == Some(tid)
                && has0(w)
                && w["t_ms"].as_f64().unwrap() - t <= 2.0 * first_period_ms),
            "tid {tid} kept from CPU 0 for more than a period: {changes:?}"
        );
    }
    // The agent's loop thread left the hog's CPU (15 ms of real-time work in every 30 ms
    // period, above the 1/8 share `ampsched_agent::selfplace` allows) once the hog was found,
    // and kept to CPU 0 from then on.
    let moves = log_events(&log, "loop-cpus");
    assert_eq!(moves.last().map(|m| m["cpus"].clone()), Some(Value::from("0")), "loop-cpus: {moves:?}");
    let v = read_json(&out);
    let (on0, run) = (f(&v, "on_cpu_s", 0), v["run_s"].as_f64().unwrap());
    let samples0 = f(&v, "samples", 0);
    let samples: f64 = v["samples"].as_array().unwrap().iter().filter_map(Value::as_f64).sum();
    // How much of the work ran on CPU 0 (≈ 99 % on a quiet machine: Linux moves the lone
    // runnable thread off the hog's CPU by itself; at load 20+ from other sessions CPU 0 is
    // busy too and the figure falls) is a figure of `scripts/bench-agent-figures.sh`.
    eprintln!(
        "phased: {:.1} % of samples, {:.1} % of run time on CPU 0",
        100.0 * samples0 / samples,
        100.0 * on0 / run
    );
    assert!(samples > 0.0 && run > 0.0, "{v}");
}

/// `ampsched-workload spin --threads 3 --secs 60` in a session of its own whose autogroup has
/// nice -20 (as the benchmarks isolate their runs; kernel/sched/autogroup.c): other sessions'
/// builds then cannot starve the spinners below 1/8 of a period, where the agent's gate takes a
/// thread for light and leaves it to the kernel (`ampsched_policy::gate::cooperate::heavy`),
/// and a test that needs them narrowed would see nothing change. Seen at load 9.5 (27 Nov).
fn spinner3() -> Guard {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new("sh");
    c.args(["-c", "echo -20 > /proc/self/autogroup 2>/dev/null; exec \"$@\"", "sh", WORKLOAD])
        .args(["spin", "--threads", "3", "--secs", "60"])
        .stdout(Stdio::null());
    // SAFETY: setsid is async-signal-safe; a new session gets a new autogroup.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    Guard(c.spawn().unwrap())
}

/// Launch a 3-thread spinner as an existing process, and a bystander the agent must not touch.
fn spinners() -> (Guard, Guard) {
    let t = spinner3();
    let b = Guard(Command::new(WORKLOAD).args(["spin", "--secs", "60"]).stdout(Stdio::null()).spawn().unwrap());
    // Main thread + workers, both processes, before anyone records affinities.
    assert!(wait_for(Duration::from_secs(5), || list_tids(Path::new("/proc"), t.pid()).len() == 4
        && list_tids(Path::new("/proc"), b.pid()).len() == 2));
    (t, b)
}

fn agent_on_pid(cfg_dir: &Path, pid: i32, state: &Path, extra: &[&str]) -> Guard {
    let cfg = cfg_dir.join("pid.toml");
    std::fs::write(&cfg, format!("fast = \"0\"\n[[target]]\nname = \"spinner\"\npid = {pid}\n")).unwrap();
    Guard(
        Command::new(ampsched())
            .args(["agent", "--config", cfg.to_str().unwrap(), "--state", state.to_str().unwrap()])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

#[test]
#[ignore = "real machine: needs root and 2+ CPUs; run with `cargo test -- --include-ignored` (CI does)"]
fn restore_after_sigterm_and_after_kill9_then_restore() {
    let _s = serial();
    require_machine();
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("state.json");
    let (target, bystander) = spinners();
    let original = affinities(target.pid());
    let by_original = affinities(bystander.pid());
    let changed = |pid: i32, orig: &[(i32, CpuSet)]| affinities(pid).iter().zip(orig).any(|(a, b)| a.1 != b.1);
    // The scheduler event source (perf events on sched_switch) never writes tracefs: its
    // switches and filter read the same after every exit path.
    let tracefs = || {
        ["enable", "filter"]
            .map(|f| std::fs::read_to_string(format!("/sys/kernel/tracing/events/sched/sched_switch/{f}")).ok())
    };
    let tracefs_before = tracefs();
    // Where tracefs is not mounted the agent mounts it in a private mount namespace for its
    // reads: the machine's mount table is the same after every exit path.
    let mounts = || {
        let t = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        t.lines().map(|l| l.split(' ').take(5).collect::<Vec<_>>().join(" ")).collect::<Vec<_>>()
    };
    let mounts_before = mounts();
    let log = d.path().join("agent.log");

    // 1. SIGTERM: the agent restores every thread and removes its state file.
    let mut agent = agent_on_pid(d.path(), target.pid(), &state, &["--log", log.to_str().unwrap()]);
    assert!(wait_for(Duration::from_secs(5), || changed(target.pid(), &original)), "the agent changed nothing");
    assert!(state.exists(), "the state file is written before the first change");
    assert_eq!(affinities(bystander.pid()), by_original, "a thread not under management was touched");
    // The events attach a period or so after they are first wanted (their format is read off
    // the loop): the exit below is taken with them attached.
    assert!(wait_for(Duration::from_secs(10), || !log_events(&log, "events").is_empty()), "no events line");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(agent.pid(), libc::SIGTERM) };
    let st = agent.0.wait().unwrap();
    assert!(st.success(), "agent exit after SIGTERM: {st}");
    assert_eq!(affinities(target.pid()), original, "not restored after SIGTERM");
    assert!(!state.exists(), "state file left after a clean exit");
    drop(agent);
    // As root the event source attached (3 spinners keep one thread off the fast CPU, so it
    // was wanted), tracefs mounted or not; after the exit nothing of it is left in tracefs
    // or in the mount table.
    let ev = log_events(&log, "events");
    assert_eq!(ev.len(), 1, "one events line: {ev:?}");
    assert_eq!(ev[0]["source"], "sched_switch", "{ev:?}");
    assert_eq!(tracefs(), tracefs_before, "tracefs changed after SIGTERM");
    assert_eq!(mounts(), mounts_before, "the mount table changed after SIGTERM");

    // 2. kill -9: affinities stay changed; a new agent refuses; `restore` puts them back.
    let mut agent = agent_on_pid(d.path(), target.pid(), &state, &[]);
    assert!(wait_for(Duration::from_secs(5), || changed(target.pid(), &original)));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(agent.pid(), libc::SIGKILL) };
    agent.0.wait().unwrap();
    assert!(state.exists());
    assert!(changed(target.pid(), &original), "kill -9 cannot restore: the masks must still be changed");
    assert_eq!(tracefs(), tracefs_before, "tracefs changed after kill -9");
    assert_eq!(mounts(), mounts_before, "the mount table changed after kill -9");
    let again = agent_on_pid(d.path(), target.pid(), &state, &[]);
    let o = again.wait_with_output_guarded();
    assert_eq!(o.status.code(), Some(2), "{}", out_text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("did not exit cleanly"), "{}", out_text(&o));
    let o = Command::new(ampsched()).args(["restore", "--state", state.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", out_text(&o));
    // The state file records every managed thread (3 spinners, changed, and the main
    // thread waiting in join, unchanged): all 4 get their original back.
    assert!(String::from_utf8_lossy(&o.stdout).contains("restored 4 thread(s)"), "{}", out_text(&o));
    assert_eq!(affinities(target.pid()), original, "not restored by `ampsched restore`");
    assert_eq!(affinities(bystander.pid()), by_original);
    assert!(!state.exists());
}

trait WaitGuarded {
    fn wait_with_output_guarded(self) -> Output;
}

impl WaitGuarded for Guard {
    fn wait_with_output_guarded(mut self) -> Output {
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        self.0.stdout.take().unwrap().read_to_end(&mut stdout).unwrap();
        self.0.stderr.take().unwrap().read_to_end(&mut stderr).unwrap();
        let status = self.0.wait().unwrap();
        Output { status, stdout, stderr }
    }
}

#[test]
#[ignore = "real machine: needs root and 2+ CPUs; run with `cargo test -- --include-ignored` (CI does)"]
fn a_process_a_launched_job_forks_is_managed_without_waiting_for_the_rescan() {
    // Rescans every 10 minutes: the job's shell is found at the start, and the process it
    // forks 200 ms later only through the fork records (`forks`), which bring a rescan
    // forward to the next period.
    let _s = serial();
    require_machine();
    let d = tempfile::tempdir().unwrap();
    let (cfg, log) = (d.path().join("job.toml"), d.path().join("agent.log"));
    std::fs::write(
        &cfg,
        "fast = \"0\"\nrescan_ms = 600000\n[[target]]\nname = \"job\"\n\
         command = [\"sh\", \"-c\", \"sleep 0.2; sh -c 'sleep 0.3' & wait\"]\n",
    )
    .unwrap();
    let o = Command::new(ampsched())
        .args(["agent", "--config", cfg.to_str().unwrap(), "--state", d.path().join("s.json").to_str().unwrap()])
        .args(["--log", log.to_str().unwrap(), "--stats"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", out_text(&o));
    let threads = log_events(&log, "thread");
    let root = threads.first().map(|t| t["pid"].clone()).expect("the job's shell is managed");
    assert!(threads.iter().any(|t| t["pid"] != root), "the forked process was never managed: {threads:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("\"fork_rescans\":"), "{}", out_text(&o));
}

#[test]
#[ignore = "real machine: needs root and 2+ CPUs; run with `cargo test -- --include-ignored` (CI does)"]
fn dry_run_prints_decisions_and_changes_nothing() {
    let _s = serial();
    require_machine();
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("state.json");
    let (target, _by) = spinners();
    let original = affinities(target.pid());
    let mut agent = agent_on_pid(d.path(), target.pid(), &state, &["--dry-run"]);
    let mut lines = BufReader::new(agent.0.stdout.take().unwrap()).lines();
    let mut changes = 0;
    let end = Instant::now() + Duration::from_millis(800);
    while Instant::now() < end {
        let Some(Ok(l)) = lines.next() else { break };
        let v: Value = serde_json::from_str(&l).unwrap();
        if v["event"] == "change" {
            assert_eq!(v["result"], "dry-run", "{l}");
            changes += 1;
        }
        assert_eq!(affinities(target.pid()), original, "a dry run changed an affinity");
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(agent.pid(), libc::SIGTERM) };
    assert!(agent.0.wait().unwrap().success());
    // 3 busy threads, 1 fast CPU: every 30 ms the fast grant rotates, ≥ 2 changes per period.
    assert!(changes >= 4, "only {changes} decisions printed");
    assert_eq!(affinities(target.pid()), original);
    assert!(!state.exists(), "a dry run writes no state file");
}

#[test]
#[ignore = "real machine: needs root and 2+ CPUs; run with `cargo test -- --include-ignored` (CI does)"]
fn metrics_endpoint_serves_prometheus_text_on_loopback() {
    let _s = serial();
    require_machine();
    let d = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let log = d.path().join("log.jsonl");
    let agent = Guard(
        Command::new(ampsched())
            .args(["run", "--fast", "0", "--metrics", &addr, "--log", log.to_str().unwrap()])
            .args(["--state", d.path().join("s.json").to_str().unwrap(), "--"])
            .args([WORKLOAD, "spin", "--threads", "2", "--secs", "2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(1200));
    let mut c = std::net::TcpStream::connect(&addr).unwrap();
    c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).unwrap();
    drop(agent);
    assert!(text.starts_with("HTTP/1.0 200 OK"), "{text}");
    let value = |name: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name} in\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    // Two busy threads for ~1.2 s with CPU 0 fast: fast-core time accrues (how much depends on
    // the other load on CPU 0) and the grant rotates.
    assert!(value("ampsched_fast_core_seconds_total{target=\"ampsched-workload\"}") > 0.0, "{text}");
    assert!(value("ampsched_migrations_total{target=\"ampsched-workload\"}") >= 2.0, "{text}");
    assert!(value("ampsched_active_threads{target=\"ampsched-workload\"}") >= 1.0, "{text}");
    assert!(value("ampsched_periods_total") >= 10.0, "{text}");
    for name in [
        "ampsched_fast_idle_slow_busy_seconds_total",
        "ampsched_loop_duration_seconds",
        "ampsched_cpu_effective_capacity",
    ] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(log.lines().any(|l| l.contains("\"event\":\"change\"") && l.contains("\"result\":\"ok\"")), "{log}");
}

fn run_bad(args: &[&str]) -> Output {
    Command::new(ampsched()).args(args).output().unwrap()
}

#[test]
#[ignore = "real machine: needs root and 2+ CPUs; run with `cargo test -- --include-ignored` (CI does)"]
fn bad_input_fails_clearly_and_changes_nothing() {
    let _s = serial();
    require_machine();
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("state.json");
    let st = state.to_str().unwrap();
    let (_t, bystander) = spinners();
    let before = affinities(bystander.pid());
    let marker = d.path().join("launched");
    let check = |o: &Output, want: &str| {
        assert_eq!(o.status.code(), Some(2), "{}", out_text(o));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(want), "expected `{want}` in:\n{}", out_text(o));
        assert!(!state.exists(), "a state file was written");
        assert!(!marker.exists(), "the command was launched");
    };
    // Unknown placer: named, with the known ones; the command never starts.
    let o = run_bad(&["run", "--placer", "magic", "--state", st, "--", "touch", marker.to_str().unwrap()]);
    check(&o, "unknown placer `magic`; known: none, aash, capability, fast-first");
    // Malformed config: file, line and column.
    let cfg = d.path().join("bad.toml");
    std::fs::write(&cfg, "[[target]]\nname = \"x\"\npid = \"abc\"\n").unwrap();
    let o = run_bad(&["agent", "--config", cfg.to_str().unwrap(), "--state", st]);
    check(&o, &format!("{}:3:7", cfg.display()));
    // A PID that does not exist (pid_max is at most 4194304).
    std::fs::write(
        &cfg,
        format!(
            "[[target]]\nname = \"gone\"\npid = 4194304\n[[target]]\nname = \"t\"\ncommand = [\"touch\", \"{}\"]\n",
            marker.display()
        ),
    )
    .unwrap();
    let o = run_bad(&["agent", "--config", cfg.to_str().unwrap(), "--state", st]);
    check(&o, "target \"gone\": process 4194304 does not exist");
    // A socket that is not QEMU's QMP.
    let sock = d.path().join("not-qemu.sock");
    let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let h = std::thread::spawn(move || {
        if let Ok((mut s, _)) = l.accept() {
            let _ = s.write_all(b"SSH-2.0-OpenSSH_9.2\r\n");
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    std::fs::write(&cfg, format!("[[target]]\nname = \"vm\"\nqmp = \"{}\"\n", sock.display())).unwrap();
    let o = run_bad(&["agent", "--config", cfg.to_str().unwrap(), "--state", st]);
    check(&o, "not a QEMU QMP socket");
    h.join().unwrap();
    // A non-loopback metrics address.
    let o = run_bad(&["run", "--metrics", "0.0.0.0:9464", "--state", st, "--", "touch", marker.to_str().unwrap()]);
    check(&o, "refusing a non-loopback address");
    assert_eq!(affinities(bystander.pid()), before);
}

// ---- QEMU ------------------------------------------------------------------

fn which(cmd: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(cmd)).find(|p| p.exists())
}

fn cloud_kernel() -> PathBuf {
    let mut ks: Vec<PathBuf> =
        std::fs::read_dir("/boot").map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    ks.retain(|p| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("vmlinuz-") && n.contains("cloud"))
    });
    ks.sort();
    ks.pop().expect("no /boot/vmlinuz-*cloud* kernel: apt-get install linux-image-cloud-amd64 (.ci/run does)")
}

/// A busybox initramfs whose init starts a CPU loop per vCPU.
fn initramfs(dir: &Path) -> PathBuf {
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("no busybox: apt-get install busybox-static (.ci/run does)");
    let cpio = which("cpio").expect("no cpio: apt-get install cpio (.ci/run does)");
    let root = dir.join("root");
    for sub in ["bin", "proc", "dev", "sys"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::fs::copy(&busybox, root.join("bin/busybox")).unwrap();
    // One CPU loop pinned to each vCPU (busybox taskset with a hex mask; a plain loop if it fails),
    // so neither vCPU idles while the guest balances its load.
    let init =
        "#!/bin/busybox sh\n/bin/busybox --install -s /bin\nmount -t proc proc /proc\nmount -t devtmpfs dev /dev\n\
                for m in 1 2; do (taskset $m sh -c 'while :; do :; done' || while :; do :; done) & done\n\
                echo AMPSCHED_LOOPS_STARTED\nwhile :; do sleep 1000; done\n";
    std::fs::write(root.join("init"), init).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(root.join("init"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.join("initrd.cpio");
    let list = "bin\nbin/busybox\nproc\ndev\nsys\ninit\n";
    let mut c = Command::new(cpio)
        .args(["-o", "-H", "newc", "--quiet"])
        .current_dir(&root)
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&out).unwrap())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(list.as_bytes()).unwrap();
    assert!(c.wait().unwrap().success(), "cpio failed");
    out
}

fn processor_of(pid: i32, tid: i32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    ampsched_agent::procfs::parse_stat(&s).map(|s| s.processor)
}

#[test]
#[ignore = "real machine: needs root, 2+ CPUs and QEMU; run with `cargo test -- --include-ignored` (CI does)"]
fn a_qemu_guest_aware_vcpu0_runs_on_the_fast_cpu_found_by_qmp_and_by_names() {
    let _s = serial();
    require_machine();
    let qemu =
        which("qemu-system-x86_64").expect("no qemu-system-x86_64: apt-get install qemu-system-x86 (.ci/run does)");
    let kernel = cloud_kernel();
    let d = tempfile::tempdir().unwrap();
    let initrd = initramfs(d.path());
    let sock = d.path().join("qmp.sock");
    let console = d.path().join("console.log");
    let vm = Guard(
        Command::new(qemu)
            .args(["-accel", "tcg", "-smp", "2", "-m", "256", "-nographic", "-no-reboot"])
            .args(["-name", "guest=ampsched-test,debug-threads=on"])
            .arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", sock.display()))
            .arg("-kernel")
            .arg(&kernel)
            .arg("-initrd")
            .arg(&initrd)
            .args(["-append", "console=ttyS0 rdinit=/init panic=-1 quiet"])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&console).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let booted = wait_for(Duration::from_secs(240), || {
        std::fs::read_to_string(&console).unwrap_or_default().contains("AMPSCHED_LOOPS_STARTED")
    });
    assert!(
        booted,
        "guest did not start its loops in 240 s; console:\n{}",
        std::fs::read_to_string(&console).unwrap_or_default()
    );
    let found = ampsched_agent::qmp::query_vcpus(&sock).unwrap();
    assert_eq!(found.pid, vm.pid(), "the socket's owner (SO_PEERCRED) is the QEMU process");
    let vcpus = found.vcpus;
    assert_eq!(vcpus.len(), 2);
    let vcpu0 = vcpus[0].thread_id;
    // The guest's loops really keep vCPU 0 busy: its thread gains 100 ms of run time within
    // 30 s (a busy TCG vCPU wants a whole host CPU: 0.1-0.5 s at any load seen here; an idle
    // guest uses ~0.1 %, 30 ms in 30 s).
    let run = |t: i32| {
        let s = std::fs::read_to_string(format!("/proc/{}/task/{t}/schedstat", vm.pid())).unwrap_or_default();
        ampsched_agent::procfs::parse_schedstat(&s).map(|x| x.0).unwrap_or(0)
    };
    let (r0, t0) = (run(vcpu0), Instant::now());
    let busy = wait_for(Duration::from_secs(30), || run(vcpu0).saturating_sub(r0) >= 100_000_000);
    eprintln!("vCPU 0: 100 ms of run time in {:.0} ms", t0.elapsed().as_secs_f64() * 1e3);
    assert!(
        busy,
        "vCPU 0 ran only {} ms in 30 s: the guest's loops are not running",
        run(vcpu0).saturating_sub(r0) / 1_000_000
    );

    // Through thread names: a dry run of `qemu = "all"` finds the same vCPU threads.
    let cfg = d.path().join("names.toml");
    std::fs::write(&cfg, "fast = \"0\"\n[[target]]\nname = \"vms\"\nqemu = \"all\"\nfast_vcpus = [0]\n").unwrap();
    let mut agent = Guard(
        Command::new(ampsched())
            .args(["agent", "--dry-run", "--config", cfg.to_str().unwrap(), "--state"])
            .arg(d.path().join("s0.json"))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut found: Vec<(i64, i64)> = Vec::new();
    let mut lines = BufReader::new(agent.0.stdout.take().unwrap()).lines();
    while found.len() < 2 {
        let l = lines.next().expect("dry-run agent ended before finding the vCPUs").unwrap();
        let v: Value = serde_json::from_str(&l).unwrap();
        if v["event"] == "thread" && v["target"] == "vms/ampsched-test" {
            found.push((v["vcpu"].as_i64().unwrap(), v["tid"].as_i64().unwrap()));
        }
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(agent.pid(), libc::SIGTERM) };
    agent.0.wait().unwrap();
    found.sort();
    let by_qmp: Vec<(i64, i64)> = vcpus.iter().map(|v| (v.cpu_index as i64, v.thread_id as i64)).collect();
    assert_eq!(found, by_qmp, "thread names and QMP disagree");

    // Through QMP, for real: aware guest, vCPU 0 fast, hog on CPU 1.
    let _hog = start_hog();
    let orig = get_affinity(vcpu0).unwrap();
    let cfg = d.path().join("qmp.toml");
    std::fs::write(
        &cfg,
        format!("fast = \"0\"\n[[target]]\nname = \"vm\"\nqmp = \"{}\"\nfast_vcpus = [0]\n", sock.display()),
    )
    .unwrap();
    let state = d.path().join("s1.json");
    let log = d.path().join("vm-log.jsonl");
    let trace = d.path().join("vm.perfetto-trace");
    let mut agent = Guard(
        Command::new(ampsched())
            .args(["agent", "--config", cfg.to_str().unwrap(), "--state", state.to_str().unwrap()])
            .arg("--log")
            .arg(&log)
            .arg("--trace")
            .arg(&trace)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(wait_for(Duration::from_secs(5), || get_affinity(vcpu0).ok() == Some(CpuSet::parse_list("0").unwrap())));
    // Sample where vCPU 0's thread runs (stat field 39) every 5 ms for 3 s.
    let (mut on0, mut n) = (0, 0);
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end {
        if let Some(c) = processor_of(vm.pid(), vcpu0) {
            n += 1;
            on0 += (c == 0) as u32;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(agent.pid(), libc::SIGTERM) };
    assert!(agent.0.wait().unwrap().success());
    eprintln!("vCPU 0 on CPU 0 in {on0} of {n} samples");
    assert!(n > 100, "only {n} samples");
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    // The aware guest's vCPU 0 is mapped to the fast CPU: it runs there in most samples (Linux
    // alone would give it about half). Not all: when its thread idles, CPU 0 is lent to vCPU 1
    // (scheduler events, issue 15 D2) and both masks widen until the next period, so Linux may
    // place vCPU 0 on CPU 1 for a while (≈ 80 % on CPU 0 on a quiet machine with events, ≈ 95 %
    // without them): how much is a figure, not a bound (that the agent gave it CPU 0 alone is
    // checked above).
    assert!(on0 as f64 / n as f64 > 0.6, "vCPU 0 on CPU 0 in only {on0} of {n} samples; decisions:\n{log}");
    assert_eq!(get_affinity(vcpu0).unwrap(), orig, "vCPU 0 not restored");
    assert!(!state.exists());
    // The trace names the VM's vCPU threads `<target>/v<cpu-index>` under QEMU's pid, and
    // shows vCPU 0 on CPU 0's scheduling track.
    let r = ampsched_perfetto::read::read(&std::fs::read(&trace).unwrap()).expect("the trace decodes");
    let mut names: Vec<(u32, String)> =
        r.threads.iter().filter(|t| t.1 == vm.pid() as u32).map(|t| (t.0, t.2.clone())).collect();
    names.sort();
    let mut want: Vec<(u32, String)> =
        vcpus.iter().map(|v| (v.thread_id as u32, format!("vm/v{}", v.cpu_index))).collect();
    want.sort();
    assert_eq!(names, want, "{:?}", r.threads);
    assert!(r.switches.iter().any(|s| s.cpu == 0 && s.next_tid == vcpu0 as u32), "vCPU 0 never on CPU 0's track");
}

#[test]
#[ignore = "real machine: needs root and 2+ CPUs; run with `cargo test -- --include-ignored` (CI does)"]
fn a_denied_change_is_logged_and_skipped_never_fatal() {
    let _s = serial();
    require_machine();
    let setpriv = which("setpriv").expect("no setpriv: apt-get install util-linux");
    // The agent runs as `nobody` against a root-owned 3-thread spinner: every change is EPERM.
    let d = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    // World-writable and sticky, like /tmp: the agent refuses a state directory others may
    // write to unless it is sticky (docs/security.md).
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let (target, _by) = spinners();
    let original = affinities(target.pid());
    let cfg = d.path().join("pid.toml");
    std::fs::write(&cfg, format!("fast = \"0\"\n[[target]]\nname = \"spinner\"\npid = {}\n", target.pid())).unwrap();
    let (state, log) = (d.path().join("state.json"), d.path().join("log.jsonl"));
    let mut agent = Guard(
        Command::new(setpriv)
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(ampsched())
            .args(["agent", "--config", cfg.to_str().unwrap(), "--state", state.to_str().unwrap()])
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let denied = || std::fs::read_to_string(&log).unwrap_or_default().matches("\"result\":\"eperm\"").count();
    assert!(wait_for(Duration::from_secs(5), || denied() >= 1), "no denied change logged");
    // Still running a second later: never fatal.
    std::thread::sleep(Duration::from_millis(1000));
    assert!(agent.0.try_wait().unwrap().is_none(), "the agent stopped after a denied change");
    // SAFETY: signalling our own child (setpriv execs the agent: same pid).
    unsafe { libc::kill(agent.pid(), libc::SIGTERM) };
    let o = agent.wait_with_output_guarded();
    // Exit 0: nothing was changed, so nothing needed restoring and the state file is gone.
    assert!(o.status.success(), "{}", out_text(&o));
    assert_eq!(affinities(target.pid()), original, "a denied change changed something");
    assert!(!state.exists(), "state file left after a clean exit");
    // The fast grant kept rotating among the 3 busy threads (each period's new masks were
    // asked for and denied: several denials), and not one change went through.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(denied() >= 3, "{text}");
    assert!(!text.contains("\"result\":\"ok\""), "{text}");
    // `nobody` may not open perf counters on a root-owned thread either: the run times came
    // from `schedstat` (logged once), and the loop worked all the same.
    assert_eq!(text.matches("\"event\":\"run-clock\"").count(), 1, "{text}");
    assert!(text.contains("\"source\":\"schedstat\""), "{text}");
}

/// Start a paused QEMU (TCG, 2 vCPUs, no guest needed: vCPU threads exist from the start).
fn paused_qemu(name: &str, qmp: Option<&Path>) -> Guard {
    let qemu =
        which("qemu-system-x86_64").expect("no qemu-system-x86_64: apt-get install qemu-system-x86 (.ci/run does)");
    let mut c = Command::new(qemu);
    c.args(["-accel", "tcg", "-smp", "2", "-m", "64", "-S", "-nodefaults", "-display", "none"])
        .args(["-name", &format!("guest={name},debug-threads=on")]);
    if let Some(p) = qmp {
        c.arg("-qmp").arg(format!("unix:{},server=on,wait=off", p.display()));
    }
    Guard(c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap())
}

fn log_events(log: &Path, event: &str) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == event)
        .collect()
}

#[test]
#[ignore = "real machine: needs root, 2+ CPUs and QEMU; run with `cargo test -- --include-ignored` (CI does)"]
fn exiting_and_new_vms_are_picked_up_through_qmp_and_thread_names() {
    let _s = serial();
    require_machine();
    let d = tempfile::tempdir().unwrap();
    let sock = d.path().join("vm.qmp");
    // One daemon, started before any VM: a QMP target whose socket does not exist yet, and
    // `qemu = "all"` (thread names). rescan_ms = 100 to keep the test short.
    let cfg = d.path().join("vms.toml");
    std::fs::write(
        &cfg,
        format!(
            "fast = \"0\"\nrescan_ms = 100\n[[target]]\nname = \"web\"\nqmp = \"{}\"\n\
             [[target]]\nname = \"vms\"\nqemu = \"all\"\n",
            sock.display()
        ),
    )
    .unwrap();
    let log = d.path().join("log.jsonl");
    let agent = Guard(
        Command::new(ampsched())
            .args(["agent", "--dry-run", "--config", cfg.to_str().unwrap(), "--log", log.to_str().unwrap()])
            .arg("--state")
            .arg(d.path().join("s.json"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let domains = |name: &str| log_events(&log, "domain").into_iter().filter(|v| v["name"] == name).count();
    let gone = |name: &str| log_events(&log, "domain-gone").into_iter().filter(|v| v["name"] == name).count();
    // 1. A VM with a QMP socket starts: the QMP target picks it up (its 2 vCPU threads).
    let a = paused_qemu("first", Some(&sock));
    assert!(wait_for(Duration::from_secs(20), || domains("web") == 1), "QMP VM not picked up");
    // 2. A second VM without QMP: found by thread names as vms/second.
    let b = paused_qemu("second", None);
    assert!(wait_for(Duration::from_secs(20), || domains("vms/second") == 1), "named VM not picked up");
    let vcpus_of = |pid: i32| {
        let mut v: Vec<i64> = log_events(&log, "thread")
            .into_iter()
            .filter(|t| t["pid"] == pid)
            .map(|t| t["vcpu"].as_i64().unwrap())
            .collect();
        v.sort();
        v
    };
    assert_eq!(vcpus_of(b.pid()), vec![0, 1], "the named VM's vCPU threads");
    // 3. Both exit: both domains are dropped; the daemon keeps running.
    let (a_pid, b_pid) = (a.pid(), b.pid());
    drop(a);
    drop(b);
    assert!(
        wait_for(Duration::from_secs(10), || gone("web") == 1 && gone("vms/second") == 1),
        "exited VMs not dropped"
    );
    // 4. A new VM on the same QMP path (its predecessor left a stale socket): picked up again.
    let _ = std::fs::remove_file(&sock);
    let c = paused_qemu("third", Some(&sock));
    assert!(wait_for(Duration::from_secs(20), || domains("web") == 2), "a new VM on the QMP path not picked up");
    let web: Vec<Value> = log_events(&log, "domain").into_iter().filter(|v| v["name"] == "web").collect();
    assert_eq!((web[0]["pid"].as_i64(), web[1]["pid"].as_i64()), (Some(a_pid as i64), Some(c.pid() as i64)));
    assert_eq!(vcpus_of(c.pid()), vec![0, 1], "the new VM's vCPUs found through QMP");
    assert!(vcpus_of(b_pid).len() == 2);
    drop(c);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(agent.pid(), libc::SIGTERM) };
    let o = agent.wait_with_output_guarded();
    assert!(o.status.success(), "{}", out_text(&o));
}

#[test]
#[ignore = "real machine: needs root and 2+ CPUs; run with `cargo test -- --include-ignored` (CI does)"]
fn the_agent_records_its_decisions_as_a_perfetto_trace() {
    let _s = serial();
    require_machine();
    let d = tempfile::tempdir().unwrap();
    let (trace, out, state) =
        (d.path().join("agent.perfetto-trace"), d.path().join("spin.json"), d.path().join("s.json"));
    let boot = |_: ()| -> u64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec we own.
        unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    };
    let t0 = boot(());
    // 3 spinning threads, 1 fast CPU: AASH rotates the fast CPU among them every period.
    let o = Command::new(ampsched())
        .args(["run", "--placer", "aash", "--fast", "0", "--stats", "--state", state.to_str().unwrap()])
        .args(["--trace", trace.to_str().unwrap(), "--"])
        .args([WORKLOAD, "spin", "--threads", "3", "--secs", "1.5", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let t1 = boot(());
    assert!(o.status.success(), "{}", out_text(&o));
    let r = ampsched_perfetto::read::read(&std::fs::read(&trace).unwrap()).expect("the trace decodes");
    // The workload is one process; its managed threads are its threads in the trace.
    assert_eq!(r.processes.len(), 1, "{:?}", r.processes);
    let pid = r.processes[0].0;
    let tids: Vec<u32> = r.threads.iter().filter(|t| t.1 == pid).map(|t| t.0).collect();
    assert!(tids.len() >= 3, "the 3 spinners (and the main thread) are threads of pid {pid}: {:?}", r.threads);
    // Scheduling tracks: every switch names a managed thread or idle, in time order per CPU,
    // inside the run; spinners appear on both CPUs.
    assert!(!r.switches.is_empty());
    for s in &r.switches {
        assert!(s.next_tid == 0 || tids.contains(&s.next_tid), "{s:?}");
        assert!((t0..=t1).contains(&s.ts), "switch at {} outside the run [{t0}, {t1}]", s.ts);
    }
    for cpu in 0..2 {
        let ts: Vec<u64> = r.switches.iter().filter(|s| s.cpu == cpu).map(|s| s.ts).collect();
        assert!(ts.windows(2).all(|w| w[0] <= w[1]), "CPU {cpu} switches out of order");
        assert!(r.switches.iter().any(|s| s.cpu == cpu && s.next_tid != 0), "no managed thread seen on CPU {cpu}");
    }
    // Effective capacity per CPU as CPU frequency (1024 = 1 024 000 kHz at most).
    for cpu in 0..2 {
        assert!(r.frequencies.iter().any(|f| f.1 == cpu && f.2 > 0 && f.2 <= 1_024_000), "{:?}", r.frequencies);
    }
    // Decisions: a "mask fast" track per changed thread, the fast share of the mask's CPUs:
    // 1 (CPU 0 only), 0 (CPU 1 only) as AASH rotates, 0.5 (both: a thread let go); the change
    // counter ends at the agent's own count.
    let masks = r.tracks_named("mask fast");
    assert!(!masks.is_empty());
    let values: Vec<f64> = masks.iter().flat_map(|u| r.counters[u].iter().map(|x| x.1)).collect();
    assert!(values.iter().all(|v| [0.0, 0.5, 1.0].contains(v)), "{values:?}");
    assert!(values.contains(&1.0) && values.contains(&0.0), "the fast CPU rotated: {values:?}");
    let stats: Value = out_text(&o)
        .lines()
        .find_map(|l| l.split_once("ampsched: stats ").map(|(_, j)| serde_json::from_str(j).unwrap()))
        .expect("--stats line");
    let changes = r.tracks_named("agent.affinity_changes");
    assert_eq!(changes.len(), 1);
    let last = r.counters[&changes[0]].last().unwrap().1;
    assert_eq!(last, stats["changes"].as_f64().unwrap(), "{stats}");
    assert_eq!(values.len() as f64, last, "one mask step per change");
    // Fast share per target: its share of the fast CPU's time in each period, one value per
    // period. The agent charges a thread's run time in a period to the class of the CPU it was
    // last seen on (or its mask's), so a period in which the fast CPU changed hands can read
    // above 1 or below (two threads last seen on CPU 0). How close to 1 the mean is depends on
    // the other load on CPU 0: a figure of `scripts/bench-agent-figures.sh`, not a bound here.
    let fast = r.tracks_named("fast share");
    assert_eq!(fast.len(), 1);
    let shares: Vec<f64> = r.counters[&fast[0]].iter().skip(1).map(|x| x.1).collect();
    assert!(shares.len() + 1 >= stats["periods"].as_f64().unwrap() as usize / 2, "{shares:?} {stats}");
    assert!(shares.iter().all(|v| v.is_finite() && *v >= 0.0), "{shares:?}");
    assert!(shares.iter().any(|v| *v > 0.0), "the spinners never ran on the fast CPU: {shares:?}");
    let mean = shares.iter().sum::<f64>() / shares.len().max(1) as f64;
    eprintln!("mean fast share {mean:.3} over {} periods", shares.len());
    assert!(!state.exists(), "a clean exit removes the state file");
}

/// Issue 18 D5, in a separate process: SIGTERM while the agent waits in QMP
/// I/O ends it and restores every thread it changed within 1 s. The agent
/// manages a 3-thread spinner and has a QMP target whose socket appears only
/// once the agent runs; at the next rescan it connects, the fake server
/// sends half a greeting and stalls, holding the connection open. Without
/// signal handling in the QMP waits the agent would sit there until the 2 s
/// QMP deadline; with it, the wait returns "interrupted by signal 15" at its
/// next 50 ms slice and the agent restores and exits.
#[test]
#[ignore = "real machine: needs root and 2+ CPUs; run with `cargo test -- --include-ignored` (CI does)"]
fn sigterm_during_qmp_io_ends_the_agent_and_restores_within_1s() {
    let _s = serial();
    require_machine();
    let d = tempfile::tempdir().unwrap();
    let sock = d.path().join("vm.qmp");
    let state = d.path().join("state.json");
    let spinner = spinner3();
    let pid = spinner.pid();
    assert!(wait_for(Duration::from_secs(5), || list_tids(Path::new("/proc"), pid).len() == 4));
    let original = affinities(pid);
    let cfg = d.path().join("agent.toml");
    std::fs::write(
        &cfg,
        format!(
            "fast = \"0\"\nrescan_ms = 100\n[[target]]\nname = \"spinner\"\npid = {pid}\n\
             [[target]]\nname = \"vm\"\nqmp = \"{}\"\n",
            sock.display()
        ),
    )
    .unwrap();
    let changed = || affinities(pid).iter().zip(&original).any(|(a, b)| a.1 != b.1);
    // The QMP wait holds the agent's loop, so the masks in force while it waits are those of
    // the period in which it connected. If that period fell in a back-off probe window
    // (`gate::backoff`: the group is left to the kernel for 3 periods) the agent holds no
    // change while it waits, and a restore would prove nothing: such an attempt is ended
    // cleanly and run again with a fresh agent; the third attempt asserts.
    const ATTEMPTS: u32 = 3;
    for attempt in 1..=ATTEMPTS {
        let _ = std::fs::remove_file(&sock);
        let mut agent = Guard(
            Command::new(ampsched())
                .args(["agent", "--config", cfg.to_str().unwrap(), "--state", state.to_str().unwrap()])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        assert!(wait_for(Duration::from_secs(5), changed), "the agent changed nothing");

        // The VM "starts": a socket whose server stalls in the middle of its greeting.
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let (stalled_tx, stalled_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.write_all(br#"{"QMP": {"version": {"qemu": {"micro": 0, "#).unwrap();
            stalled_tx.send(()).unwrap();
            // Hold the connection open, saying nothing more, until the test ends.
            let _ = done_rx.recv_timeout(Duration::from_secs(30));
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
        });
        stalled_rx.recv_timeout(Duration::from_secs(5)).expect("the agent never connected to the QMP socket");
        std::thread::sleep(Duration::from_millis(200)); // well inside the agent's 2 s QMP wait
        let managing = changed();
        if !managing && attempt < ATTEMPTS {
            eprintln!("attempt {attempt}: the agent connected to QMP in a hands-off period; again");
            // SAFETY: signalling our own child.
            unsafe { libc::kill(agent.pid(), libc::SIGTERM) };
            let st = agent.0.wait().unwrap();
            let _ = done_tx.send(());
            server.join().unwrap();
            assert!(st.success(), "agent exit after SIGTERM: {st}");
            assert_eq!(affinities(pid), original, "not restored after SIGTERM (attempt {attempt})");
            continue;
        }
        assert!(managing, "still managing the spinner while it waits on QMP ({ATTEMPTS} attempts)");

        // SAFETY: signalling our own child.
        unsafe { libc::kill(agent.pid(), libc::SIGTERM) };
        let t0 = Instant::now();
        let status = loop {
            if let Some(st) = agent.0.try_wait().unwrap() {
                break Some(st);
            }
            if t0.elapsed() > Duration::from_secs(10) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let took = t0.elapsed();
        let _ = done_tx.send(());
        server.join().unwrap();
        let mut err = String::new();
        agent.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        let status = status.unwrap_or_else(|| panic!("the agent was still running 10 s after SIGTERM\n{err}"));
        eprintln!("SIGTERM during QMP I/O: agent exited after {:.0} ms", took.as_secs_f64() * 1e3);
        assert!(status.success(), "agent exit after SIGTERM: {status}\n{err}");
        // It was in QMP I/O when the signal came, and left it because of the signal.
        assert!(err.contains("interrupted by signal 15 while waiting for QMP greeting"), "{err}");
        assert_eq!(affinities(pid), original, "not restored after SIGTERM during QMP I/O");
        assert!(!state.exists(), "state file left after a clean exit");
        // Issue 18 D5's bound (the agent's QMP waits look at signals every 50 ms;
        // the old client sat out its 2 s deadline first).
        assert!(took < Duration::from_secs(1), "exit and restore took {took:?}\n{err}");
        return;
    }
}
