//! rt-app workloads through the engine: `run` vs `runtime`, timers, condition
//! variables, barriers with explicit parties, semaphores, per-phase affinity,
//! `global.duration`, the shipped examples and the error messages.

use ampsched_sim::runner::{run_one, Job};
use ampsched_sim::{Library, RunResult, Scenario};
use std::path::{Path, PathBuf};

/// A scenario and its rt-app file in a fresh directory, removed when dropped
/// (the tests leave nothing behind in the temporary directory).
struct Files {
    dir: PathBuf,
    scenario: PathBuf,
}

impl std::ops::Deref for Files {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.scenario
    }
}

impl AsRef<Path> for Files {
    fn as_ref(&self) -> &Path {
        &self.scenario
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Write `json` and a scenario using it into a fresh directory; the scenario's path.
fn files(name: &str, machine: &str, extra: &str, vcpus: u32, json: &str) -> Files {
    let dir = std::env::temp_dir().join(format!("ampsched-rtapp-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("w.json"), json).unwrap();
    let toml = format!(
        "{extra}\n[machine]\n{machine}\n[[domain]]\nname = \"app\"\nvcpus = {vcpus}\nworkload = {{ rtapp = \"w.json\" }}\n"
    );
    let scenario = dir.join("s.toml");
    std::fs::write(&scenario, toml).unwrap();
    Files { dir, scenario }
}

fn load(p: &Path) -> Scenario {
    Scenario::load(p, &Library::builtin()).unwrap_or_else(|e| panic!("{e}"))
}

fn run(p: &Path) -> RunResult {
    let sc = load(p);
    run_one(&Job { scenario: &sc, seed: 1, dispatcher: None, placer: None }).unwrap()
}

const MS: u64 = 1_000_000;
/// CPU0 fast (speed 2), CPU1 slow (speed 1).
const FAST_SLOW: &str = "cpus = [{ class = \"fast\" }, { class = \"slow\" }]";
const TWO_SLOW: &str = "cpus = [{ class = \"slow\", count = 2 }]";
const ONE_SLOW: &str = "cpus = [{ class = \"slow\" }]";

#[test]
fn run_scales_with_speed_and_runtime_does_not() {
    // run 10000 µs calibrated on CPU0 (speed 2) = 20 ms of work at speed 1:
    // 20 ms on the slow CPU1, 10 ms on CPU0. runtime 10000 µs is 10 ms anywhere.
    let json = r#"{ "tasks": {
        "slow_run": { "cpus": [1], "loop": 1, "run": 10000 },
        "fast_run": { "cpus": [0], "loop": 1, "run": 10000 } } }"#;
    let r = run(&files("runspeed", FAST_SLOW, "", 2, json));
    assert_eq!(r.tasks[0].completion_ns, Some(20 * MS));
    assert_eq!(r.tasks[1].completion_ns, Some(10 * MS));
    let json = r#"{ "tasks": { "slow_runtime": { "cpus": [1], "loop": 1, "runtime": 10000 } } }"#;
    let r = run(&files("runtime", FAST_SLOW, "", 1, json));
    assert_eq!(r.tasks[0].completion_ns, Some(10 * MS));
    assert_eq!(r.tasks[0].cpu_ns.get("slow"), 10 * MS);
}

#[test]
fn runtime_counts_wall_time_while_preempted_run_counts_work() {
    // One CPU shared with a CPU hog (credit, 30 ms slices, equal weights).
    // `run 100000` needs 100 ms of CPU: it ends after ≈ 200 ms of wall time.
    // `runtime 100000` ends 100 ms of wall time after it started (plus at most one
    // slice if the deadline passes while it waits), having run far less than 100 ms.
    let hog = r#""hog": { "run": 1000000 }"#;
    let r = run(&files(
        "contend-run",
        ONE_SLOW,
        "stop = { duration_s = 1 }",
        2,
        &format!(r#"{{ "tasks": {{ "t": {{ "loop": 1, "run": 100000 }}, {hog} }} }}"#),
    ));
    let run_done = r.tasks[0].completion_ns.unwrap();
    assert_eq!(r.tasks[0].cpu_ns.total(), 100 * MS);
    assert!(run_done >= 170 * MS, "run ended at {run_done}");
    let r = run(&files(
        "contend-runtime",
        ONE_SLOW,
        "stop = { duration_s = 1 }",
        2,
        &format!(r#"{{ "tasks": {{ "t": {{ "loop": 1, "runtime": 100000 }}, {hog} }} }}"#),
    ));
    let done = r.tasks[0].completion_ns.unwrap();
    let cpu = r.tasks[0].cpu_ns.total();
    assert!((100 * MS..=130 * MS).contains(&done), "runtime ended at {done}");
    assert!(cpu <= 80 * MS, "runtime ran {cpu} ns of CPU while sharing it");
}

#[test]
fn a_timer_keeps_its_period_where_sleep_drifts() {
    // 5 × (run 2 ms, timer 10 ms): expiries at 10, 20, …, 50 ms → done at 50 ms.
    // 5 × (run 2 ms, sleep 10 ms): 12 ms per iteration → done at 60 ms.
    let timer = r#"{ "tasks": { "t": { "loop": 5, "run": 2000, "timer": { "ref": "tick", "period": 10000 } } } }"#;
    let r = run(&files("timer", ONE_SLOW, "", 1, timer));
    assert_eq!(r.tasks[0].completion_ns, Some(50 * MS));
    assert_eq!(r.tasks[0].cpu_ns.total(), 10 * MS);
    let sleep = r#"{ "tasks": { "t": { "loop": 5, "run": 2000, "sleep": 10000 } } }"#;
    let r = run(&files("sleep", ONE_SLOW, "", 1, sleep));
    assert_eq!(r.tasks[0].completion_ns, Some(60 * MS));
}

#[test]
fn a_late_timer_restarts_from_now_in_relative_mode_only() {
    // p0: run 25 ms then the timer (first expiry 10 ms: late). p1 twice: run 1 ms, timer.
    // relative: late → next from 25: expiries 35, 45 → done at 45 ms.
    // absolute: grid 10, 20 (late at 26), 30 (sleep from 27) → done at 30 ms.
    for (mode, end) in [("relative", 45), ("absolute", 30)] {
        let json = format!(
            r#"{{ "tasks": {{ "t": {{ "loop": 1, "phases": {{
                "p0": {{ "run": 25000, "timer": {{ "ref": "T", "period": 10000, "mode": "{mode}" }} }},
                "p1": {{ "loop": 2, "run": 1000, "timer": {{ "ref": "T", "period": 10000, "mode": "{mode}" }} }}
            }} }} }} }}"#
        );
        let r = run(&files(&format!("timer-{mode}"), ONE_SLOW, "", 1, &json));
        assert_eq!(r.tasks[0].completion_ns, Some(end * MS), "{mode}");
    }
}

#[test]
fn wait_and_signal_hand_over_under_the_mutex() {
    // consumer waits at 0; producer sleeps 5 ms, signals under the mutex; the
    // consumer wakes on the other (idle) CPU, re-takes the mutex and runs 1 ms: done at 6 ms.
    let json = r#"{ "tasks": {
        "consumer": { "loop": 1, "lock": "m", "wait": { "ref": "c", "mutex": "m" }, "unlock": "m", "run": 1000 },
        "producer": { "loop": 1, "sleep": 5000, "lock": "m", "signal": "c", "unlock": "m" } } }"#;
    let r = run(&files("cond", TWO_SLOW, "", 2, json));
    assert_eq!(r.tasks[0].completion_ns, Some(6 * MS));
    assert_eq!(r.tasks[0].blocked_ns, 5 * MS);
    // A signal nobody waits for is lost (pthread semantics): the consumer never ends.
    let json = r#"{ "tasks": {
        "consumer": { "loop": 1, "sleep": 5000, "lock": "m", "wait": { "ref": "c", "mutex": "m" }, "unlock": "m" },
        "producer": { "loop": 1, "lock": "m", "signal": "c", "unlock": "m" } } }"#;
    let r = run(&files("lost", TWO_SLOW, "stop = { max_s = 0.1 }", 2, json));
    assert_eq!(r.tasks[0].completion_ns, None);
    assert!(r.truncated);
}

#[test]
fn barrier_parties_come_from_the_file_and_broadcast_wakes_all() {
    // a runs 1 ms, b 5 ms, both then meet at B and run 1 ms more: both done at 6 ms.
    let json = r#"{ "tasks": {
        "a": { "loop": 1, "run": 1000, "barrier": "B", "run1": 1000 },
        "b": { "loop": 1, "run": 5000, "barrier": "B", "run1": 1000 } } }"#;
    let r = run(&files("barrier", TWO_SLOW, "", 2, json));
    assert_eq!(r.tasks[0].completion_ns, Some(6 * MS));
    assert_eq!(r.tasks[1].completion_ns, Some(6 * MS));
    // Two waiters (2 instances) on one condition, one broadcast at 3 ms: both end at 3 ms.
    let json = r#"{ "tasks": {
        "w": { "instance": 2, "loop": 1, "suspend": "go" },
        "k": { "loop": 1, "sleep": 3000, "resume": "go" } } }"#;
    let r = run(&files("broad", TWO_SLOW, "", 3, json));
    assert_eq!(r.tasks[0].completion_ns, Some(3 * MS));
    assert_eq!(r.tasks[1].completion_ns, Some(3 * MS));
}

#[test]
fn semaphores_remember_posts() {
    // The producer posts at 1, 2, 3 ms; the consumer takes each and runs 1 ms: done at 4 ms.
    let json = r#"{ "tasks": {
        "p": { "loop": 3, "run": 1000, "sem_post": "s" },
        "c": { "loop": 3, "sem_wait": "s", "run": 1000 } } }"#;
    let r = run(&files("sem", TWO_SLOW, "", 2, json));
    assert_eq!(r.tasks[1].completion_ns, Some(4 * MS));
}

#[test]
fn phase_cpus_move_the_thread() {
    // calibration CPU1 (speed 1): run 2000 µs = 2 ms of work. p0 on CPU0 (speed 2): 1 ms;
    // p1 on CPU1: 2 ms. One migration, done at 3 ms.
    let json = r#"{ "global": { "calibration": "CPU1" }, "tasks": { "t": { "loop": 1, "phases": {
        "p0": { "cpus": [0], "run": 2000 }, "p1": { "cpus": [1], "run": 2000 } } } } }"#;
    let r = run(&files("cpus", FAST_SLOW, "", 1, json));
    let t = &r.tasks[0];
    assert_eq!((t.cpu_ns.get("fast"), t.cpu_ns.get("slow")), (MS, 2 * MS));
    assert_eq!(t.completion_ns, Some(3 * MS));
    assert_eq!(t.migrations_local + t.migrations_remote, 1);
}

#[test]
fn global_duration_is_the_stop_unless_the_scenario_gives_one() {
    let json = r#"{ "global": { "duration": 2 }, "tasks": { "t": { "run": 1000, "sleep": 1000 } } }"#;
    let r = run(&files("duration", ONE_SLOW, "", 1, json));
    assert_eq!(r.end_ns, 2_000 * MS);
    let r = run(&files("duration2", ONE_SLOW, "stop = { duration_s = 0.5 }", 1, json));
    assert_eq!(r.end_ns, 500 * MS);
}

#[test]
fn shipped_examples_run_and_are_deterministic() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/rtapp");
    for name in ["periodic.toml", "prodcons.toml"] {
        let sc = load(&root.join(name));
        let job = Job { scenario: &sc, seed: 7, dispatcher: None, placer: None };
        let a = serde_json::to_string(&run_one(&job).unwrap()).unwrap();
        let b = serde_json::to_string(&run_one(&job).unwrap()).unwrap();
        assert_eq!(a, b, "{name} is not deterministic");
        let r = run_one(&job).unwrap();
        // every thread of the file got a vCPU and ran
        assert!(r.tasks.iter().all(|t| t.cpu_ns.total() > 0), "{name}: a thread never ran");
        if name == "prodcons.toml" {
            // producer 200 × (1.5 + 0.1) ms of work and 2 × 100 × (0.1 + 2.5) ms: all done
            assert!(r.all_done, "prodcons did not finish");
        } else {
            // global.duration = 5 s
            assert_eq!(r.end_ns, 5_000 * MS);
        }
    }
}

#[test]
fn errors_name_the_scenario_field_the_json_file_and_the_event() {
    let p = files("fork", ONE_SLOW, "", 1, "{ \"tasks\": {\n \"t\": { \"fork\": \"t\" } } }");
    let e = Scenario::load(&p, &Library::builtin()).unwrap_err().to_string();
    assert!(e.contains("domain[0].workload.rtapp"), "{e}");
    assert!(e.contains("w.json:2:") && e.contains("tasks.t.fork") && e.contains("`fork` is not supported"), "{e}");
    let p = files("toomany", ONE_SLOW, "", 1, r#"{ "tasks": { "t": { "instance": 3, "run": 1 } } }"#);
    let e = Scenario::load(&p, &Library::builtin()).unwrap_err().to_string();
    assert!(e.contains("3 threads") && e.contains("only 1 vCPUs"), "{e}");
    let dir = p.parent().unwrap();
    std::fs::write(dir.join("s2.toml"), "[machine]\ncpus = [{ class = \"slow\" }]\n[[domain]]\nname = \"a\"\nvcpus = 1\nworkload = { rtapp = \"missing.json\" }\n").unwrap();
    let e = Scenario::load(&dir.join("s2.toml"), &Library::builtin()).unwrap_err().to_string();
    assert!(e.contains("cannot read rt-app file") && e.contains("missing.json"), "{e}");
}

#[test]
fn an_ignored_global_key_reaches_the_scenario_as_a_warning() {
    let p = files(
        "warn",
        ONE_SLOW,
        "stop = { max_s = 1 }",
        1,
        r#"{ "global": { "frag": 1 }, "tasks": { "t": { "loop": 1, "run": 100 } } }"#,
    );
    let sc = load(&p);
    assert_eq!(sc.warnings.len(), 1, "{:?}", sc.warnings);
    let w = &sc.warnings[0];
    assert!(w.contains("w.json:1:") && w.contains("field `global.frag`") && w.contains("ignored"), "{w}");
    assert!(w.ends_with("(rt-app file of `domain[0].workload.rtapp`)"), "{w}");
    // A file without unknown keys: no warning.
    let q = files("nowarn", ONE_SLOW, "", 1, r#"{ "tasks": { "t": { "loop": 1, "run": 100 } } }"#);
    assert!(load(&q).warnings.is_empty());
}
