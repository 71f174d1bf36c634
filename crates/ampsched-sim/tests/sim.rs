//! Integration tests of the simulator: credit worked examples through the
//! engine, workload mechanics, determinism, and scenario validation.

use ampsched_sim::runner::{run_one, Job};
use ampsched_sim::{Library, RunResult, Scenario, SimOutput, SCHEMA};

fn scenario(text: &str) -> Scenario {
    Scenario::parse(text, "test.toml", "test", &Library::builtin()).unwrap_or_else(|e| panic!("{e}"))
}

fn run(text: &str, seed: u64) -> RunResult {
    let sc = scenario(text);
    run_one(&Job { scenario: &sc, seed, dispatcher: None, placer: None }).unwrap()
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

const ONE_CPU: &str = "[machine]\ncpus = [{ class = \"slow\" }]\n";

#[test]
fn credit_weights_256_512_share_one_cpu_one_third_two_thirds() {
    let r = run(
        &format!(
            "stop = {{ duration_s = 10 }}\n{ONE_CPU}\
             [[domain]]\nname = \"a\"\nvcpus = 1\nweight = 256\nworkload = {{ model = \"cpu-bound\" }}\n\
             [[domain]]\nname = \"b\"\nvcpus = 1\nweight = 512\nworkload = {{ model = \"cpu-bound\" }}\n"
        ),
        1,
    );
    // Pool 300 credits per 30 ms shared by weight: a earns 100, b 200 per period,
    // so over 10 s a runs ≈ 10 × 256/768 = 3.33 s and b ≈ 6.67 s (±2 % of the CPU = ±0.2 s).
    let a = secs(r.domains[0].cpu_ns.total());
    let b = secs(r.domains[1].cpu_ns.total());
    assert!((a - 10.0 / 3.0).abs() <= 0.2, "a ran {a:.3} s");
    assert!((b - 20.0 / 3.0).abs() <= 0.2, "b ran {b:.3} s");
    assert!((a + b - 10.0).abs() < 1e-6, "the CPU never idles: {a} + {b}");
}

#[test]
fn xen40_profile_shares_by_weight_too() {
    let r = run(
        &format!(
            "stop = {{ duration_s = 10 }}\n[dispatcher]\nname = \"xen40\"\n{ONE_CPU}\
             [[domain]]\nname = \"a\"\nvcpus = 1\nweight = 256\nworkload = {{ model = \"cpu-bound\" }}\n\
             [[domain]]\nname = \"b\"\nvcpus = 1\nweight = 512\nworkload = {{ model = \"cpu-bound\" }}\n"
        ),
        1,
    );
    let a = secs(r.domains[0].cpu_ns.total());
    assert!((a - 10.0 / 3.0).abs() <= 0.2, "a ran {a:.3} s");
    assert_eq!(r.dispatcher, "xen40");
}

#[test]
fn a_capped_domain_never_exceeds_its_cap() {
    // Two CPUs; a 2-vCPU CPU-bound VM capped at 50 % of one CPU, and an uncapped rival.
    let r = run(
        "stop = { duration_s = 10 }\nstats_interval_ms = 1000\n[machine]\ncpus = [{ class = \"slow\", count = 2 }]\n\
         [[domain]]\nname = \"capped\"\nvcpus = 2\ncap = 50\nworkload = { model = \"cpu-bound\" }\n\
         [[domain]]\nname = \"free\"\nvcpus = 1\nworkload = { model = \"cpu-bound\" }\n",
        1,
    );
    let capped = &r.domains[0];
    // Cap 50 → 150 credits per 30 ms period = 15 ms of CPU per 30 ms: 5 s in 10 s.
    // Parking happens at accounting, so a period can overrun by at most one
    // 30 ms period's worth at the start: allow 1 % of one CPU (0.1 s) in total.
    let total = secs(capped.cpu_ns.total());
    assert!(total <= 5.0 + 0.1, "capped VM ran {total:.3} s of 10 s (cap 50 %)");
    // And in every 1 s interval: ≤ 0.5 s plus what both vCPUs can run before the
    // first accounting parks them (2 vCPUs × one 30 ms period = 60 ms).
    for p in &capped.series {
        let s = p.class_ns.iter().sum::<u64>() as f64 / 1e9;
        assert!(s <= 0.5 + 0.06, "interval ending {} ran {s:.3} s", p.t_ns);
    }
    // The uncapped VM shares its pCPU with one capped vCPU (≤ 2.5 s of it) and gets the rest.
    assert!(secs(r.domains[1].cpu_ns.total()) >= 10.0 - 2.5 - 0.06);
}

#[test]
fn compute_time_scales_with_speed_except_memory_stalls() {
    // 1 s of work with m = 0.5 on a speed-2 core: 1 × (0.5/2 + 0.5) = 0.75 s.
    let r = run(
        "[machine]\ncpus = [{ class = \"fast\" }]\n[[domain]]\nname = \"a\"\nvcpus = 1\n\
         workload = { program = [{ compute = { ms = 1000, mem = 0.5 } }] }\n",
        1,
    );
    assert_eq!(r.domains[0].completion_ns, Some(750_000_000));
    assert!(r.all_done);
}

#[test]
fn constant_noise_slows_a_cpu_and_is_reported() {
    // 25 % noise on a speed-1 core: 300 ms of work takes 300 / 0.75 = 400 ms; noise 100 ms.
    let r = run(
        "[machine]\ncpus = [{ class = \"slow\" }]\nnoise = [{ cpus = \"0\", fraction = 0.25 }]\n\
         [[domain]]\nname = \"a\"\nvcpus = 1\nworkload = { program = [{ compute = { ms = 300 } }] }\n",
        1,
    );
    assert_eq!(r.domains[0].completion_ns, Some(400_000_000));
    assert_eq!(r.cpus[0].noise_ns, 100_000_000);
    assert_eq!(r.cpus[0].busy_ns, 300_000_000);
}

#[test]
fn spinning_barrier_burns_cpu_and_blocking_barrier_idles() {
    // Two vCPUs on two CPUs: vCPU 0 computes 100 ms, vCPU 1 computes 40 ms, then a barrier.
    // Spinning: vCPU 1 burns 100 − 40 = 60 ms spinning; blocking: it is blocked 60 ms instead.
    for (wait, spin_ms, blocked_ms) in [("spin", 60, 0), ("block", 0, 60)] {
        let r = run(
            &format!(
                "[machine]\ncpus = [{{ class = \"slow\", count = 2 }}]\n\
                 [[domain]]\nname = \"a\"\nvcpus = 2\ntasks = [\n\
                 {{ program = [{{ compute = {{ ms = 100 }} }}, {{ barrier = {{ id = 0, wait = \"{wait}\" }} }}] }},\n\
                 {{ program = [{{ compute = {{ ms = 40 }} }}, {{ barrier = {{ id = 0, wait = \"{wait}\" }} }}] }}]\n"
            ),
            1,
        );
        let t1 = &r.tasks[1];
        assert_eq!(t1.spin_ns, spin_ms * 1_000_000, "{wait}");
        assert_eq!(t1.blocked_ns, blocked_ms * 1_000_000, "{wait}");
        assert_eq!(r.domains[0].completion_ns, Some(100_000_000), "{wait}");
    }
}

#[test]
fn spin_then_block_spins_up_to_the_limit() {
    // Wait of 60 ms with a 10 ms spin limit: 10 ms spinning, then 50 ms blocked.
    let r = run(
        "[machine]\ncpus = [{ class = \"slow\", count = 2 }]\n\
         [[domain]]\nname = \"a\"\nvcpus = 2\ntasks = [\n\
         { program = [{ compute = { ms = 100 } }, { barrier = { id = 0, wait = \"spin-then-block\", spin_limit_us = 10000 } }] },\n\
         { program = [{ compute = { ms = 40 } }, { barrier = { id = 0, wait = \"spin-then-block\", spin_limit_us = 10000 } }] }]\n",
        1,
    );
    assert_eq!(r.tasks[1].spin_ns, 10_000_000);
    assert_eq!(r.tasks[1].blocked_ns, 50_000_000);
}

#[test]
fn lock_holder_preemption_makes_spinners_waste_cpu() {
    // Two vCPUs of one VM share ONE CPU with a spinning lock; a CPU-bound rival VM
    // competes. When the holder is preempted inside its critical section, the other
    // vCPU spins until the holder runs again: spin waste must appear mechanically.
    let r = run(
        "stop = { duration_s = 5 }\n[machine]\ncpus = [{ class = \"slow\" }]\n\
         [[domain]]\nname = \"locky\"\nvcpus = 2\nworkload = { program = [\
         { loop = { count = 100000, body = [{ lock = { id = 0, wait = \"spin\" } }, { compute = { ms = 3 } }, { unlock = { id = 0 } }, { compute = { ms = 1 } }] } }] }\n\
         [[domain]]\nname = \"rival\"\nvcpus = 1\nworkload = { model = \"cpu-bound\" }\n",
        1,
    );
    let spin = r.domains[0].spin_ns;
    assert!(spin > 100_000_000, "expected spin waste from lock-holder preemption, got {spin} ns");
}

#[test]
fn dynamic_work_queue_balances_where_static_does_not() {
    // 1 fast (speed 2) + 1 slow CPU, a 2-thread parallel loop of 1000 ms of work.
    // static: each thread takes 500 ms of work; the slow thread needs 500 ms: the loop ends at 500 ms.
    // dynamic (1 ms chunks): the pair processes 2 + 1 = 3 work-ms per ms: ≈ 1000/3 ≈ 334 ms.
    let prog = |sched: &str| {
        format!(
            "[machine]\ncpus = [{{ class = \"fast\" }}, {{ class = \"slow\" }}]\n[dispatcher]\nname = \"credit\"\ntick_migrate = false\n\
             [[domain]]\nname = \"omp\"\nvcpus = 2\naffinity = \"0-1\"\n\
             workload = {{ program = [{{ parfor = {{ id = 0, ms = 1000, schedule = \"{sched}\", chunk_ms = 1 }} }}] }}\n"
        )
    };
    let st = run(&prog("static"), 1).domains[0].completion_ns.unwrap();
    let dy = run(&prog("dynamic"), 1).domains[0].completion_ns.unwrap();
    assert_eq!(st, 500_000_000);
    assert!((330_000_000..=340_000_000).contains(&dy), "dynamic took {dy} ns");
}

#[test]
fn pipeline_channels_pass_every_item() {
    // Producer → consumer through a channel of capacity 2: 50 items of 2 ms each stage.
    let r = run(
        "[machine]\ncpus = [{ class = \"slow\", count = 2 }]\n\
         [[domain]]\nname = \"pipe\"\nvcpus = 2\ntasks = [\n\
         { program = [{ loop = { count = 50, body = [{ compute = { ms = 2 } }, { push = { chan = 0, capacity = 2 } }] } }] },\n\
         { program = [{ loop = { count = 50, body = [{ pop = { chan = 0 } }, { compute = { ms = 2 } }] } }] }]\n",
        1,
    );
    // The consumer lags the producer by one item: 50 × 2 + 2 = 102 ms.
    assert!(r.all_done);
    assert_eq!(r.domains[0].completion_ns, Some(102_000_000));
    assert_eq!(r.tasks[1].computes_done, 50);
}

#[test]
fn sleeping_task_blocks_for_wall_time() {
    let r = run(
        &format!("{ONE_CPU}[[domain]]\nname = \"io\"\nvcpus = 1\nworkload = {{ program = [{{ compute = {{ ms = 5 }} }}, {{ sleep = {{ ms = 20 }} }}, {{ compute = {{ ms = 5 }} }}] }}\n"),
        1,
    );
    assert_eq!(r.domains[0].completion_ns, Some(30_000_000));
    assert_eq!(r.tasks[0].blocked_ns, 20_000_000);
}

#[test]
fn idle_vcpus_never_run_and_do_not_block_completion() {
    let r = run(
        &format!("{ONE_CPU}[[domain]]\nname = \"half\"\nvcpus = 2\ntasks = [{{ program = [{{ compute = {{ ms = 10 }} }}] }}]\n"),
        1,
    );
    assert!(r.tasks[1].idle);
    assert_eq!(r.tasks[1].cpu_ns.total(), 0);
    assert_eq!(r.domains[0].completion_ns, Some(10_000_000));
}

const DET: &str = "name = \"det\"\nstop = { duration_s = 3 }\n[machine]\nmem_domain_size = 2\n\
    cpus = [{ class = \"fast\" }, { class = \"slow\", count = 3 }]\n\
    noise = [{ cpus = \"1\", on_ms = 40, off_ms = 60, fraction_on = 0.6, random = true }]\n\
    [[domain]]\nname = \"par\"\nvcpus = 3\nworkload = { model = \"blackscholes\" }\n\
    [[domain]]\nname = \"seq\"\nvcpus = 2\nworkload = { model = \"mcf\" }\n";

#[test]
fn same_scenario_and_seed_give_byte_identical_json() {
    let json = |seed| serde_json::to_string(&SimOutput { schema: SCHEMA, runs: vec![run(DET, seed)] }).unwrap();
    let a = json(7);
    let b = json(7);
    assert_eq!(a, b);
    // The seed drives the random noise bursts: another seed gives another run.
    assert_ne!(a, json(8));
}

#[test]
fn cpu_time_adds_up() {
    let r = run(DET, 3);
    // Per CPU: busy + idle + noise = simulated time (rounding of three f64 sums: ±3 ns).
    for c in &r.cpus {
        let sum = c.busy_ns + c.idle_ns + c.noise_ns;
        assert!(sum.abs_diff(r.end_ns) <= 3, "cpu {}: {sum} vs {}", c.id, r.end_ns);
    }
    // Tasks' run time (wall time on a CPU) ≥ CPU busy time (which excludes the noise
    // stolen while running), and the difference is at most the noise.
    let run_total: u64 = r.tasks.iter().map(|t| t.cpu_ns.total()).sum();
    let busy: u64 = r.cpus.iter().map(|c| c.busy_ns).sum();
    let noise: u64 = r.cpus.iter().map(|c| c.noise_ns).sum();
    assert!(run_total + 4 >= busy && run_total <= busy + noise + 4, "{run_total} vs {busy} + {noise}");
}

fn err(text: &str) -> String {
    Scenario::parse(text, "bad.toml", "bad", &Library::builtin()).unwrap_err().to_string()
}

#[test]
fn validation_errors_name_file_line_field_and_allowed_values() {
    let e = err("[machine]\ncpus = [{ class = \"slow\" }]\n[dispatcher]\nname = \"cfs-magic\"\n[[domain]]\nname = \"a\"\nvcpus = 1\nworkload = { model = \"mcf\" }\n");
    assert!(e.starts_with("bad.toml:4:"), "{e}");
    assert!(e.contains("dispatcher.name") && e.contains("known: credit"), "{e}");

    let e = err("[machine]\ncpus = [{ class = \"slow\" }]\n[[domain]]\nname = \"a\"\nvcpus = 1\nworkload = { model = \"mfc\" }\n");
    assert!(e.starts_with("bad.toml:6:"), "{e}");
    assert!(e.contains("domain[0].workload") && e.contains("mcf"), "{e}");

    let e = err("[machine]\ncpus = [{ class = \"slow\" }]\n[[domain]]\nname = \"a\"\nvcpuz = 1\n");
    assert!(e.starts_with("bad.toml:5:"), "{e}");
    assert!(e.contains("vcpuz") && e.contains("vcpus"), "{e}");

    let e = err("[machine]\nclasses = [{ name = \"big\", speed = -1 }]\ncpus = [{ class = \"big\" }]\n[[domain]]\nname = \"a\"\nvcpus = 1\nworkload = { model = \"mcf\" }\n");
    assert!(e.starts_with("bad.toml:2:") && e.contains("machine.classes[0].speed") && e.contains("[0.01, 100]"), "{e}");
    let e = err("[machine]\nclasses = [{ name = \"big\", speed = 1e-12 }]\ncpus = [{ class = \"big\" }]\n[[domain]]\nname = \"a\"\nvcpus = 1\nworkload = { model = \"mcf\" }\n");
    assert!(e.contains("`speed` = 1e-12 is out of range"), "{e}");

    let e = err("[machine]\ncpus = [{ class = \"medium\" }]\n[[domain]]\nname = \"a\"\nvcpus = 1\nworkload = { model = \"mcf\" }\n");
    assert!(e.starts_with("bad.toml:2:") && e.contains("known: fast, slow"), "{e}");

    let e = err("[machine]\ncpus = [{ class = \"slow\", count = 2 }]\n[[domain]]\nname = \"a\"\nvcpus = 1\naffinity = \"0-5\"\nworkload = { model = \"mcf\" }\n");
    assert!(e.contains("domain[0].affinity") && e.contains("does not exist"), "{e}");

    let e = err("[machine]\ncpus = [{ class = \"slow\" }]\n[[domain]]\nname = \"a\"\nvcpus = 1\nworkload = { program = [{ barrier = { id = 0, wait = \"maybe\" } }] }\n");
    assert!(e.contains("maybe") && e.contains("spin-then-block"), "{e}");

    let e = err("[machine]\ncpus = [{ class = \"slow\" }]\n[dispatcher]\nname = \"credit\"\ntslice_ms = 0\n[[domain]]\nname = \"a\"\nvcpus = 1\nworkload = { model = \"mcf\" }\n");
    assert!(e.contains("dispatcher.tslice_ms") && e.contains("[1, 1000]"), "{e}");

    let e = err("not toml at all [");
    assert!(e.starts_with("bad.toml:1:"), "{e}");
}

#[test]
fn the_shipped_examples_load_and_finish() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/examples");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let sc = Scenario::load(&path, &Library::builtin()).unwrap_or_else(|e| panic!("{e}"));
            let r = run_one(&Job { scenario: &sc, seed: sc.seed, dispatcher: None, placer: None }).unwrap();
            // No shipped example may hit its max_s bound with programs unfinished.
            assert!(!r.truncated, "{} stopped before its programs finished", path.display());
            n += 1;
        }
    }
    assert!(n >= 1);
}

#[test]
fn migrations_across_memory_domains_pay_a_cache_refill() {
    // Three CPU-bound 4 MiB-working-set tasks on two CPUs in different memory
    // domains: credit's work stealing moves them back and forth. With refills
    // from DRAM at 2.4 GB/s each remote migration stalls ≈ (512 + 2048) KiB /
    // 2.4 GB/s ≈ 1.1 ms; with an (unphysically) infinite bandwidth it costs 0.
    let text = |gbps: &str| {
        format!(
            "stop = {{ duration_s = 5 }}\n[machine]\ncpus = [{{ class = \"slow\", mem_domain = 0 }}, {{ class = \"slow\", mem_domain = 1 }}]\n\
             cache = {{ dram_refill_gbps = {gbps} }}\n\
             [[domain]]\nname = \"a\"\nvcpus = 3\n\
             workload = {{ program = [{{ loop = {{ count = 1000000, body = [{{ compute = {{ ms = 1, ws_kb = 4096 }} }}] }} }}] }}\n"
        )
    };
    let slow = run(&text("2.4"), 1);
    let free = run(&text("1e12"), 1);
    let remote: u64 = slow.tasks.iter().map(|t| t.migrations_remote).sum();
    assert!(remote > 10, "expected cross-domain migrations, got {remote}");
    let done = |r: &RunResult| r.tasks.iter().map(|t| t.computes_done).sum::<u64>();
    // Same CPU time, less work: every remote migration costs ≈ 1.09 ms of stall.
    let lost_ms = done(&free) as f64 - done(&slow) as f64;
    let expected_ms = remote as f64 * 1.09;
    assert!(
        lost_ms > 0.5 * expected_ms && lost_ms < 1.5 * expected_ms,
        "lost {lost_ms} ms of work for {remote} migrations"
    );
}

#[test]
fn stall_marks_bursty_noise_only() {
    let m = |noise: &str| {
        format!("[machine]\ncpus = [{{ class = \"slow\" }}]\nnoise = [{noise}]\n[[domain]]\nname = \"a\"\nvcpus = 1\nworkload = {{ model = \"mcf\" }}\n")
    };
    let sc = scenario(&m("{ cpus = \"0\", on_ms = 1, off_ms = 4, fraction_on = 0.95, stall = true }"));
    assert!(matches!(sc.topo.cpus[0].noise, ampsched_model::NoiseSpec::Bursty { stall: true, .. }));
    let e = err(&m("{ cpus = \"0\", fraction = 0.1, stall = true }"));
    assert!(e.contains("machine.noise[0].stall") && e.contains("bursty noise only"), "{e}");
}

#[test]
fn traffic_batches_take_the_whole_cpu_at_the_flood_rate() {
    // Traffic noise (engine/cpu.rs, "Traffic"): 1 000 interrupts/s, each a
    // 20 µs hard interrupt plus 3 µs per packet. At 1 000 000 packets/s a
    // batch's Poisson mean, 1 000, is far past the 100-descriptor ring, so
    // every batch is the full ring: 20 + 100 × 3 = 320 µs of the whole CPU
    // every 1 ms (32 %). The first interrupt comes at 1 ms. A task computing
    // 8.14 ms alone: 1 ms of work before the first batch, then 0.68 ms per
    // interval (10 intervals: 6.8 ms, at 11 ms), then the 11th batch (to
    // 11.32 ms) and the last 0.34 ms: it ends at 11.66 ms, with 11 batches
    // (3.52 ms) as noise and 8.14 ms busy.
    let m = |noise: &str, ms: f64| {
        format!(
            "[machine]\ncpus = [{{ class = \"slow\" }}]\nnoise = [{noise}]\n[[domain]]\nname = \"a\"\nvcpus = 1\n\
             workload = {{ program = [{{ compute = {{ ms = {ms} }} }}] }}\n"
        )
    };
    let full = "{ cpus = \"0\", traffic_pps = 1000000, packet_us = 3, irq_per_s = 1000, irq_us = 20, ring = 100 }";
    let r = run(&m(full, 8.14), 1);
    assert_eq!(r.domains[0].completion_ns, Some(11_660_000));
    assert_eq!(r.cpus[0].noise_ns, 3_520_000);
    assert_eq!(r.cpus[0].busy_ns, 8_140_000);
    // Below the ring the batches vary with the seed (Poisson counts of mean
    // 115 000 / 4 000 = 28.75 at 3.4 µs + 2 µs per interrupt: 39.9 % of the
    // CPU), and over 10 s of work the CPU loses that share to within 0.5 %.
    let flood = "{ cpus = \"0\", traffic_pps = 115000, packet_us = 3.4, irq_per_s = 4000, irq_us = 2 }";
    let sc = scenario(&m(flood, 10_000.0));
    assert!((sc.topo.cpus[0].noise.mean_fraction() - 0.399).abs() < 1e-3);
    let r = run(&m(flood, 10_000.0), 1);
    let share = r.cpus[0].noise_ns as f64 / r.end_ns as f64;
    assert!((share - 0.399).abs() < 0.005, "share {share}");
    assert_ne!(r.end_ns, run(&m(flood, 10_000.0), 2).end_ns, "the seed draws the batches");
}

#[test]
fn traffic_noise_errors_name_the_field() {
    let m = |noise: &str| {
        format!("[machine]\ncpus = [{{ class = \"slow\" }}]\nnoise = [{noise}]\n[[domain]]\nname = \"a\"\nvcpus = 1\nworkload = {{ model = \"mcf\" }}\n")
    };
    let e = err(&m("{ cpus = \"0\", traffic_pps = 1000, irq_per_s = 1000 }"));
    assert!(e.contains("machine.noise[0].packet_us") && e.contains("traffic noise needs"), "{e}");
    let e = err(&m("{ cpus = \"0\", traffic_pps = 1000, packet_us = 3 }"));
    assert!(e.contains("machine.noise[0].irq_per_s"), "{e}");
    let e = err(&m("{ cpus = \"0\", traffic_pps = 1000, packet_us = 3, irq_per_s = 1000, on_ms = 1 }"));
    assert!(e.contains("machine.noise[0].on_ms") && e.contains("takes `packet_us`"), "{e}");
    let e = err(&m("{ cpus = \"0\", fraction = 0.1, ring = 64 }"));
    assert!(e.contains("machine.noise[0].ring") && e.contains("traffic noise only"), "{e}");
    let e = err(&m("{ cpus = \"0\", traffic_pps = 1000, packet_us = 3, irq_per_s = 1000, ring = 4096 }"));
    assert!(e.contains("ring") && e.contains("3000"), "{e}");
    // 400 000 packets/s at 3 µs: 100 a batch (within the ring), 120 % of the CPU.
    let e = err(&m("{ cpus = \"0\", traffic_pps = 400000, packet_us = 3, irq_per_s = 4000 }"));
    assert!(e.contains("machine.noise[0].traffic_pps") && e.contains("120.0 %") && e.contains("ksoftirqd"), "{e}");
}
