//! AASH through the simulator: worked examples and property tests of the
//! invariants of docs/design/aash.md (fair sharing, fast never idle, one fast↔slow
//! migration per period, aware guests' fast vCPUs first).

use ampsched_model::{CpuId, Nanos, TaskId};
use ampsched_policy::{Dispatcher, Effects, Pick, SysView};
use ampsched_sim::{Library, RunResult, Scenario, Sim};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// One 10-s scenario text: `n_fast` fast (2.0) and `n_slow` slow (1.0) CPUs,
/// the aash dispatcher with `params`, and the given `[[domain]]` tables.
fn text(n_fast: usize, n_slow: usize, params: &str, domains: &str) -> String {
    format!(
        r#"name = "aash-test"
stats_interval_ms = 1000
[machine]
classes = [{{ name = "fast", speed = 2.0 }}, {{ name = "slow", speed = 1.0 }}]
cpus = [{{ class = "fast", count = {n_fast} }}, {{ class = "slow", count = {n_slow} }}]
[stop]
duration_s = 10
[dispatcher]
name = "aash"
{params}
{domains}"#
    )
}

/// A domain of `vcpus` CPU-bound vCPUs (1000 s of work: never done in 10 s).
fn busy_domain(name: &str, vcpus: u32, extra: &str) -> String {
    format!("[[domain]]\nname = \"{name}\"\nvcpus = {vcpus}\n{extra}\nworkload = {{ program = [{{ compute = {{ ms = 1000000 }} }}] }}\n")
}

fn scenario(text: &str) -> Scenario {
    Scenario::parse(text, "aash-test.toml", "aash-test", &Library::builtin()).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn run(text: &str) -> RunResult {
    Sim::new(scenario(text).config(1, None, None).expect("config")).run()
}

fn fast_ns(r: &RunResult, task: usize) -> u64 {
    r.tasks[task].cpu_ns.get("fast")
}

/// Wraps a dispatcher and records, per task and accounting period, the
/// fast↔slow changes between consecutive picks of the task.
struct Recorder {
    inner: Box<dyn Dispatcher>,
    log: Arc<Mutex<Log>>,
}

#[derive(Default)]
struct Log {
    period: u64,
    last_fast: BTreeMap<TaskId, bool>,
    /// (task, period) → fast↔slow migrations.
    moves: BTreeMap<(TaskId, u64), u32>,
    wakes: u64,
}

impl Dispatcher for Recorder {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn tick_period(&self) -> Nanos {
        self.inner.tick_period()
    }
    fn account_period(&self) -> Nanos {
        self.inner.account_period()
    }
    fn init(&mut self, v: &SysView) {
        self.inner.init(v)
    }
    fn wake(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        self.log.lock().unwrap().wakes += 1;
        self.inner.wake(v, t, fx)
    }
    fn block(&mut self, v: &SysView, t: TaskId, cpu: CpuId, fx: &mut Effects) {
        self.inner.block(v, t, cpu, fx)
    }
    fn tick(&mut self, v: &SysView, cpu: CpuId, fx: &mut Effects) {
        self.inner.tick(v, cpu, fx)
    }
    fn account(&mut self, v: &SysView, fx: &mut Effects) {
        self.log.lock().unwrap().period += 1;
        self.inner.account(v, fx)
    }
    fn pick_next(
        &mut self,
        v: &SysView,
        cpu: CpuId,
        prev: Option<TaskId>,
        prev_runnable: bool,
        fx: &mut Effects,
    ) -> Pick {
        let pick = self.inner.pick_next(v, cpu, prev, prev_runnable, fx);
        if let Some(t) = pick.task {
            let fast = v.topo.is_fast(cpu);
            let mut log = self.log.lock().unwrap();
            let period = log.period;
            if let Some(was) = log.last_fast.insert(t, fast) {
                if was != fast {
                    *log.moves.entry((t, period)).or_insert(0) += 1;
                }
            }
        }
        pick
    }
    fn affinity_changed(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        self.inner.affinity_changed(v, t, fx)
    }
    fn counters(&self) -> Vec<(&'static str, f64)> {
        self.inner.counters()
    }
}

fn run_recorded(text: &str) -> (RunResult, Arc<Mutex<Log>>) {
    let mut cfg = scenario(text).config(1, None, None).expect("config");
    let log = Arc::new(Mutex::new(Log::default()));
    let inner = std::mem::replace(
        &mut cfg.dispatcher,
        Box::new(ampsched_policy::credit::Credit::new(
            "credit",
            ampsched_policy::credit::CreditParams::defaults(ampsched_policy::credit::Profile::Current),
            &cfg.topo,
        )),
    );
    cfg.dispatcher = Box::new(Recorder { inner, log: log.clone() });
    (Sim::new(cfg).run(), log)
}

// ---- worked examples ------------------------------------------------------

#[test]
fn aash_is_registered_with_its_parameters() {
    let d = ampsched_policy::DISPATCHERS.iter().find(|p| p.name == "aash").expect("aash dispatcher");
    for name in [
        "tslice_ms",
        "fair_sharing",
        "fast_never_idle",
        "aware_guests",
        "coarse_priorities",
        "low_parallelism",
        "lowpar_threshold",
        "lowpar_variant",
        "share_unit",
        "power_saving",
        "fast_cpus",
    ] {
        assert!(d.params.iter().any(|p| p.name == name), "dispatcher param {name}");
    }
    let p = ampsched_policy::PLACERS.iter().find(|p| p.name == "aash").expect("aash placer");
    assert!(p.params.iter().any(|p| p.name == "period_ms"));
    // A bad value is named.
    let bad = text(1, 1, "lowpar_variant = \"sometimes\"", &busy_domain("a", 1, ""));
    let e = Scenario::parse(&bad, "x.toml", "x", &Library::builtin()).unwrap_err();
    assert!(e.path.contains("lowpar_variant") && e.msg.contains("inverse-proportional"), "{e}");
}

#[test]
fn four_vcpus_share_one_fast_cpu_round_robin() {
    // 1 fast + 3 slow CPUs, one VM with 4 CPU-bound vCPUs: 4 runnable vCPUs on 4 CPUs.
    // Equal share of the fast CPU: 10 s / 4 = 2.5 s each.
    let r = run(&text(1, 3, "", &busy_domain("vm", 4, "")));
    for t in 0..4 {
        let f = fast_ns(&r, t) as f64 / 1e9;
        assert!((f - 2.5).abs() <= 0.125, "vCPU {t}: {f} s on the fast CPU, want 2.5 s ± 5 %");
    }
    assert!(r.dispatcher_counters.iter().any(|(k, v)| k == "fast_swaps" && *v > 300.0), "{:?}", r.dispatcher_counters);
}

#[test]
fn a_background_vcpu_that_credit_never_charges_takes_no_fast_credits() {
    // Worked example (docs/design/aash.md mechanism 1, "only active vCPUs"; Xen credit's
    // active list): 2 fast + 2 slow CPUs, a dom0-like background domain of 4 vCPUs that wake
    // every 100 ms for 20 µs (model xen-dom0), and an aware VM of 4 CPU-bound vCPUs declaring
    // vCPUs 0-1 fast. AASH hands out fast credits at credit's accounting to the vCPUs on
    // credit's active list, which a vCPU joins only when a 10 ms tick finds it running
    // (`csched_vcpu_acct`): a 20 µs burst is at a tick with probability 20 µs / 10 ms = 0.2 %,
    // so over 10 s (4 × 100 bursts) the background is active for a period or two at most,
    // and the fast credits of both fast CPUs go to the VM's vCPUs 0-1 for the whole run:
    // each ≥ 9.7 s of 10 s on a fast CPU, vCPUs 2-3 ≤ 0.1 s. Counting every vCPU that ran
    // in the last period instead (each background vCPU wakes 3 times per 30 ms period) put
    // background tokens in the fast queue, and the VM lost a fast slot to its slow vCPU
    // 3 in one period of three: vCPU 1 6.97 s fast, vCPU 3 2.97 s.
    let domains = format!(
        "[[domain]]\nname = \"dom0\"\nvcpus = 4\nbackground = true\nworkload = {{ model = \"xen-dom0\" }}\n{}",
        busy_domain("vm", 4, "fast_vcpus = [0, 1]")
    );
    let r = run(&text(2, 2, "", &domains));
    for v in 0..2 {
        assert!(fast_ns(&r, 4 + v) >= 9_700_000_000, "vm.v{v} on fast CPUs {} ns", fast_ns(&r, 4 + v));
    }
    for v in 2..4 {
        assert!(fast_ns(&r, 4 + v) <= 100_000_000, "vm.v{v} on fast CPUs {} ns", fast_ns(&r, 4 + v));
    }
}

#[test]
fn a_sequential_phase_runs_on_the_fast_cpu() {
    // One VM, 1 vCPU busy, 3 idle vCPUs; 1 fast + 3 slow. Active = 1 ≤ n_fast: it runs
    // on the fast CPU all the time (its first pick already goes to the idle fast CPU).
    let r = run(&text(1, 3, "", &busy_domain("seq", 1, "")));
    assert_eq!(fast_ns(&r, 0), 10_000_000_000);
    assert_eq!(r.fast_idle_slow_busy_ns, 0);
}

#[test]
fn high_priority_vm_holds_the_fast_cpus() {
    // 2 fast + 2 slow; "gold" (2 vCPUs, priority high) and "bulk" (2 vCPUs).
    // The high-priority queue is served first: gold's 2 vCPUs take both fast CPUs
    // every period, so each runs ≈ 10 s fast; bulk ≈ 0.
    let doms = busy_domain("gold", 2, "priority = \"high\"") + &busy_domain("bulk", 2, "");
    let r = run(&text(2, 2, "", &doms));
    for t in 0..2 {
        assert!(fast_ns(&r, t) >= 9_900_000_000, "gold vCPU {t}: {}", fast_ns(&r, t));
    }
    for t in 2..4 {
        assert!(fast_ns(&r, t) <= 100_000_000, "bulk vCPU {t}: {}", fast_ns(&r, t));
    }
    // Coarse priorities off: the four share equally, 2 CPUs × 10 s / 4 = 5 s each (± 5 %).
    let r = run(&text(2, 2, "coarse_priorities = false", &doms));
    for t in 0..4 {
        let f = fast_ns(&r, t) as f64 / 1e9;
        assert!((f - 5.0).abs() <= 0.25, "vCPU {t}: {f}");
    }
}

#[test]
fn overhead_setup_all_slow_machine_told_cpu0_is_fast() {
    // Symmetric machine (all speed 1.0) with fast_cpus = "0": AASH still rotates the
    // 4 vCPUs through CPU 0 (one swap pair per 30 ms period ≈ 333 swaps in 10 s).
    let t = r#"name = "overhead"
[machine]
classes = [{ name = "slow", speed = 1.0 }]
cpus = [{ class = "slow", count = 4 }]
[stop]
duration_s = 10
[dispatcher]
name = "aash"
fast_cpus = "0"
"#
    .to_string()
        + &busy_domain("vm", 4, "");
    let r = run(&t);
    let swaps = r.dispatcher_counters.iter().find(|(k, _)| k == "fast_swaps").map(|x| x.1).unwrap();
    assert!(swaps > 300.0, "swaps {swaps}");
    let migrations: u64 = r.tasks.iter().map(|t| t.migrations_local + t.migrations_remote).sum();
    assert!(migrations > 600, "each swap moves two vCPUs: {migrations}");
}

#[test]
fn placer_rotates_masks_under_credit() {
    // The aash placer over plain credit: 1 fast + 3 slow, 4 CPU-bound single-vCPU VMs
    // (low parallelism off, else each 1-vCPU VM is high priority).
    let t = text(
        1,
        3,
        "",
        &(busy_domain("a", 1, "") + &busy_domain("b", 1, "") + &busy_domain("c", 1, "") + &busy_domain("d", 1, "")),
    )
    .replace("name = \"aash\"\n", "name = \"credit\"\n[placer]\nname = \"aash\"\nlow_parallelism = false\n");
    let r = run(&t);
    assert!(r.placer_changes > 300, "{}", r.placer_changes);
    for k in 0..4 {
        let f = fast_ns(&r, k) as f64 / 1e9;
        // 10 s / 4 = 2.5 s each; masks apply at the next deschedule, so allow ± 10 %.
        assert!((f - 2.5).abs() <= 0.25, "VM {k}: {f} s fast");
    }
}

#[test]
fn same_scenario_and_seed_give_identical_results() {
    // Blocking workload (compute 7 ms / sleep 3 ms) on 2 fast + 2 slow: every mechanism fires.
    let body = "workload = { program = [{ loop = { count = 100000, body = [{ compute = { ms = 7 } }, { sleep = { ms = 3 } }] } }] }\n";
    let doms = format!(
        "[[domain]]\nname = \"a\"\nvcpus = 3\nfast_vcpus = [0]\n{body}[[domain]]\nname = \"b\"\nvcpus = 3\n{body}"
    );
    let t = text(2, 2, "", &doms);
    let (a, b) = (run(&t), run(&t));
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
}

// ---- property tests ---------------------------------------------------------

/// Random CPU-bound layouts: (n_fast, n_slow, vCPUs per domain) with more
/// vCPUs than fast CPUs, at most 6 vCPUs per fast CPU and 2 per CPU.
fn layouts() -> impl Strategy<Value = (usize, usize, Vec<u32>)> {
    (1usize..=2, 1usize..=3, prop::collection::vec(1u32..=3, 1..=4)).prop_filter(
        "more vCPUs than fast CPUs",
        |(f, s, d)| {
            let n: u32 = d.iter().sum();
            n as usize > *f && n as usize <= 6 * f && n as usize <= 2 * (f + s)
        },
    )
}

fn domains_of(per: &[u32], extra: impl Fn(usize) -> String) -> String {
    per.iter().enumerate().map(|(i, n)| busy_domain(&format!("d{i}"), *n, &extra(i))).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20, .. ProptestConfig::default() })]

    /// (1) Fair sharing: N CPU-bound vCPUs, n_fast < N fast CPUs, 10 s. Each
    /// vCPU's fast-CPU time is within ±5 % *of the equal share* E = n_fast ×
    /// 10 s / N. Round-robin serves each vCPU ⌊or⌈333 × n_fast / N⌉ periods of
    /// 30 ms (≥ 55 periods at N/n_fast ≤ 6), so the rounding error is ≤ 1
    /// period = 30 ms ≤ 1.8 % of E, plus the first 30 ms before any grant.
    /// Low parallelism is off (a 1-vCPU domain would be high priority).
    #[test]
    fn fair_sharing_gives_equal_fast_time((nf, ns, per) in layouts()) {
        let r = run(&text(nf, ns, "low_parallelism = false", &domains_of(&per, |_| String::new())));
        let n: u32 = per.iter().sum();
        let e = nf as f64 * 10.0 / n as f64;
        for t in 0..n as usize {
            let f = fast_ns(&r, t) as f64 / 1e9;
            prop_assert!((f - e).abs() <= 0.05 * e, "vCPU {t}: {f:.3} s fast, equal share {e:.3} s ({nf} fast, {ns} slow, {per:?})");
        }
    }

    /// (2) Fast never idle: vCPUs that compute and sleep in random patterns.
    /// An "event" is a wake-up (each sleep ends in one); the time a fast CPU
    /// idles while a slow CPU is busy is at most one tick (10 ms) per event.
    /// With `pull = "immediate"` it is 0: every fill happens at the same instant.
    #[test]
    fn fast_cpus_never_idle_while_slow_cpus_work(
        (nf, ns, per) in layouts(),
        compute_ms in 1u32..=40, sleep_ms in 1u32..=40,
    ) {
        let body = format!("workload = {{ program = [{{ loop = {{ count = 100000, body = [{{ compute = {{ ms = {compute_ms} }} }}, {{ sleep = {{ ms = {sleep_ms} }} }}] }} }}] }}\n");
        let doms: String = per
            .iter()
            .enumerate()
            .map(|(i, n)| format!("[[domain]]\nname = \"d{i}\"\nvcpus = {n}\n{body}"))
            .collect();
        let (r, log) = run_recorded(&text(nf, ns, "", &doms));
        let events = log.lock().unwrap().wakes;
        prop_assert!(r.fast_idle_slow_busy_ns <= events * 10_000_000,
            "fast idle while slow busy {} ns > 10 ms × {events} wakes", r.fast_idle_slow_busy_ns);
        let (r, _) = run_recorded(&text(nf, ns, "pull = \"immediate\"", &doms));
        prop_assert_eq!(r.fast_idle_slow_busy_ns, 0);
    }

    /// (3) No blocking (CPU-bound only), so no stealing by idle fast CPUs after
    /// the first period: in every accounting period from the first on, each
    /// vCPU changes between a fast and a slow CPU at most once.
    #[test]
    fn at_most_one_fast_slow_migration_per_period((nf, ns, per) in layouts(), lowpar in any::<bool>()) {
        let params = format!("low_parallelism = {lowpar}");
        let (_r, log) = run_recorded(&text(nf, ns, &params, &domains_of(&per, |_| String::new())));
        let log = log.lock().unwrap();
        for ((t, period), n) in &log.moves {
            prop_assert!(*period == 0 || *n <= 1, "{t} moved fast↔slow {n} times in period {period}");
        }
    }

    /// (4) Aware guest A (4 vCPUs, declared fast = {0, 1}) next to legacy VMs.
    /// A's fair fast share is S = n_fast × 10 s × 4 / N (per-vCPU unit). Its
    /// fast vCPUs together get at least min(S, 2 × 10 s) (−5 %) before its slow
    /// vCPUs get any: when S fits in the fast vCPUs (S ≤ 20 s − 1 period) the slow
    /// vCPUs get ≤ 60 ms of fast time (two periods: the start-up grants).
    #[test]
    fn aware_fast_vcpus_get_the_domain_share_first((nf, ns, per) in layouts()) {
        let legacy = domains_of(&per, |_| String::new());
        let doms = busy_domain("aware", 4, "fast_vcpus = [0, 1]") + &legacy;
        let n = 4 + per.iter().sum::<u32>();
        prop_assume!((n as usize) <= 2 * (nf + ns) + 2);
        let r = run(&text(nf, ns, "low_parallelism = false", &doms));
        let share = nf as f64 * 10.0 * 4.0 / n as f64;
        let fast_sum = (fast_ns(&r, 0) + fast_ns(&r, 1)) as f64 / 1e9;
        let slow_sum = (fast_ns(&r, 2) + fast_ns(&r, 3)) as f64 / 1e9;
        prop_assert!(fast_sum >= 0.95 * share.min(20.0), "fast vCPUs {fast_sum:.3} s < share {share:.3} s");
        if share <= 20.0 - 0.03 {
            prop_assert!(slow_sum <= 0.06, "slow vCPUs got {slow_sum:.3} s fast while the share is {share:.3} s");
        }
    }
}
