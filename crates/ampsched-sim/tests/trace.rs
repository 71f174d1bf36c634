//! Perfetto traces: decode the written bytes with a minimal protobuf reader and
//! check their structure (processes, threads, tracks, names) and their event
//! counts against the simulator's own figures (run time, migrations, noise).

use ampsched_model::Nanos;
use ampsched_sim::runner::{run_one, run_traced, run_traced_to, Job};
use ampsched_sim::trace::{TraceOptions, STREAM_CHUNK_BYTES};
use ampsched_sim::{Library, RunResult, Scenario};
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
enum V {
    Int(u64),
    Bytes(Vec<u8>),
    F64(f64),
}

/// Decode one protobuf message into (field, value) pairs, in order.
fn decode(mut b: &[u8]) -> Vec<(u32, V)> {
    fn varint(b: &mut &[u8]) -> u64 {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let byte = b[0];
            *b = &b[1..];
            v |= ((byte & 0x7f) as u64) << shift;
            if byte < 0x80 {
                return v;
            }
            shift += 7;
        }
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let k = varint(&mut b);
        let (field, wire) = ((k >> 3) as u32, k & 7);
        let v = match wire {
            0 => V::Int(varint(&mut b)),
            1 => {
                let x = f64::from_le_bytes(b[..8].try_into().unwrap());
                b = &b[8..];
                V::F64(x)
            }
            2 => {
                let n = varint(&mut b) as usize;
                let x = b[..n].to_vec();
                b = &b[n..];
                V::Bytes(x)
            }
            w => panic!("unexpected wire type {w}"),
        };
        out.push((field, v));
    }
    out
}

fn int(m: &[(u32, V)], f: u32) -> Option<u64> {
    m.iter().find_map(|(k, v)| match v {
        V::Int(x) if *k == f => Some(*x),
        _ => None,
    })
}
fn msg(m: &[(u32, V)], f: u32) -> Option<Vec<(u32, V)>> {
    m.iter().find_map(|(k, v)| match v {
        V::Bytes(x) if *k == f => Some(decode(x)),
        _ => None,
    })
}
fn msgs(m: &[(u32, V)], f: u32) -> Vec<Vec<(u32, V)>> {
    m.iter()
        .filter_map(|(k, v)| match v {
            V::Bytes(x) if *k == f => Some(decode(x)),
            _ => None,
        })
        .collect()
}
fn text(m: &[(u32, V)], f: u32) -> Option<String> {
    m.iter().find_map(|(k, v)| match v {
        V::Bytes(x) if *k == f => Some(String::from_utf8(x.clone()).unwrap()),
        _ => None,
    })
}

/// What the decoded trace holds.
#[derive(Default, Debug)]
struct Decoded {
    processes: Vec<(u64, String)>,
    /// tid → (tgid, name)
    threads: BTreeMap<u64, (u64, String)>,
    /// per CPU: (ts, prev_pid, prev_state, next_pid)
    switches: BTreeMap<u64, Vec<(u64, u64, u64, u64)>>,
    wakings: usize,
    /// per CPU: (ts, kHz)
    freqs: BTreeMap<u64, Vec<(u64, u64)>>,
    /// uuid → (name, parent)
    tracks: BTreeMap<u64, (String, Option<u64>)>,
    process_tracks: BTreeMap<u64, String>,
    thread_tracks: BTreeMap<u64, String>,
    /// counter uuid → values (ts, v)
    counters: BTreeMap<u64, Vec<(u64, f64)>>,
    first_seq_flags: Option<u64>,
}

fn read(bytes: &[u8]) -> Decoded {
    let mut d = Decoded::default();
    for (f, v) in decode(bytes) {
        assert_eq!(f, 1, "a Trace holds only packets");
        let V::Bytes(p) = v else { panic!("packet is not a message") };
        let p = decode(&p);
        if let Some(seq) = int(&p, 10) {
            assert_eq!(seq, 1);
            d.first_seq_flags.get_or_insert(int(&p, 13).unwrap());
        }
        if let Some(pt) = msg(&p, 2) {
            for pr in msgs(&pt, 1) {
                d.processes.push((int(&pr, 1).unwrap(), text(&pr, 3).unwrap()));
            }
            for th in msgs(&pt, 2) {
                d.threads.insert(int(&th, 1).unwrap(), (int(&th, 3).unwrap(), text(&th, 2).unwrap()));
            }
        }
        if let Some(b) = msg(&p, 1) {
            let cpu = int(&b, 1).unwrap();
            for e in msgs(&b, 2) {
                let ts = int(&e, 1).unwrap();
                if let Some(sw) = msg(&e, 4) {
                    let s = (ts, int(&sw, 2).unwrap(), int(&sw, 4).unwrap(), int(&sw, 6).unwrap());
                    d.switches.entry(cpu).or_default().push(s);
                } else if let Some(fq) = msg(&e, 11) {
                    assert_eq!(int(&fq, 2), Some(cpu));
                    d.freqs.entry(cpu).or_default().push((ts, int(&fq, 1).unwrap()));
                } else if msg(&e, 20).is_some() {
                    d.wakings += 1;
                } else {
                    panic!("unexpected ftrace event {e:?}");
                }
            }
        }
        if let Some(td) = msg(&p, 60) {
            let uuid = int(&td, 1).unwrap();
            if let Some(pd) = msg(&td, 3) {
                d.process_tracks.insert(uuid, text(&pd, 6).unwrap());
            } else if let Some(thd) = msg(&td, 4) {
                d.thread_tracks.insert(uuid, text(&thd, 5).unwrap());
            } else {
                assert!(msg(&td, 8).is_some(), "a named track is a counter track");
                d.tracks.insert(uuid, (text(&td, 2).unwrap(), int(&td, 5)));
            }
        }
        if let Some(te) = msg(&p, 11) {
            assert_eq!(int(&te, 9), Some(4), "TYPE_COUNTER");
            let uuid = int(&te, 11).unwrap();
            assert!(d.tracks.contains_key(&uuid), "counter value before its track descriptor");
            let v = te.iter().find_map(|(k, v)| if let (44, V::F64(x)) = (k, v) { Some(*x) } else { None }).unwrap();
            d.counters.entry(uuid).or_default().push((int(&p, 8).unwrap(), v));
        }
    }
    d
}

fn scenario(text: &str) -> Scenario {
    Scenario::parse(text, "trace-test.toml", "trace-test", &Library::builtin()).unwrap_or_else(|e| panic!("{e}"))
}

fn traced(sc: &Scenario, seed: u64) -> (RunResult, Vec<u8>) {
    run_traced(&Job { scenario: sc, seed, dispatcher: None, placer: None }, TraceOptions::default()).unwrap()
}

const SCENARIO: &str = r#"
stop = { duration_s = 1 }
[machine]
cpus = [{ class = "fast", count = 1 }, { class = "slow", count = 3 }]
noise = [{ cpus = "3", on_ms = 50, off_ms = 150, fraction_on = 0.5 }, { cpus = "2", fraction = 0.25 }]
[placer]
name = "aash"
[[domain]]
name = "vm1"
vcpus = 4
workload = { model = "fork-join" }
[[domain]]
name = "vm2"
vcpus = 2
workload = { model = "cpu-bound" }
[[domain]]
name = "idle"
vcpus = 1
"#;

#[test]
fn trace_structure_and_counts_match_the_simulation() {
    let sc = scenario(SCENARIO);
    let (r, bytes) = traced(&sc, 3);
    let d = read(&bytes);
    // The counter sequence opens with SEQ_INCREMENTAL_STATE_CLEARED (1).
    assert_eq!(d.first_seq_flags, Some(1));
    // 3 VMs → 3 processes; 4 + 2 + 1 vCPUs → 7 threads named vm/vN, each in its VM's process.
    assert_eq!(d.processes.iter().map(|p| p.1.as_str()).collect::<Vec<_>>(), ["vm1", "vm2", "idle"]);
    assert_eq!(d.threads.len(), 7);
    let pid_of: BTreeMap<&str, u64> = d.processes.iter().map(|(p, n)| (n.as_str(), *p)).collect();
    for (tgid, name) in d.threads.values() {
        let vm = name.split('/').next().unwrap();
        assert_eq!(pid_of[vm], *tgid, "{name}");
    }
    assert_eq!(d.process_tracks.len(), 3);
    assert_eq!(d.thread_tracks.values().filter(|n| n.starts_with("vm1/v")).count(), 4);
    // Thread ids in task order: task i ↔ the i-th thread.
    let tids: Vec<u64> = d.threads.keys().copied().collect();

    // Run time per task from the switches (a slice open at the end closes at end_ns)
    // equals the simulator's cpu_ns; switch-ins on another CPU = its migrations.
    let mut ran = vec![0u64; r.tasks.len()];
    let mut last_cpu: Vec<Option<u64>> = vec![None; r.tasks.len()];
    let mut migrations = vec![0u64; r.tasks.len()];
    let mut ins: Vec<(u64, u64, usize)> = Vec::new();
    for (cpu, sw) in &d.switches {
        let mut on: Option<(usize, u64)> = None;
        let mut t_prev = 0;
        for &(ts, prev, state, next) in sw {
            assert!(ts >= t_prev, "events in time order on a CPU");
            t_prev = ts;
            match on {
                Some((t, since)) => {
                    assert_eq!(prev, tids[t], "prev_pid is what ran");
                    ran[t] += ts - since;
                }
                None => assert_eq!(prev, 0, "from idle"),
            }
            assert!(state <= 16);
            on = tids.iter().position(|x| *x == next).map(|t| (t, ts));
            if let Some((t, _)) = on {
                ins.push((ts, *cpu, t));
            }
        }
        if let Some((t, since)) = on {
            ran[t] += r.end_ns - since;
        }
    }
    ins.sort();
    for (_, cpu, t) in ins {
        if last_cpu[t].is_some_and(|c| c != cpu) {
            migrations[t] += 1;
        }
        last_cpu[t] = Some(cpu);
    }
    for (i, t) in r.tasks.iter().enumerate() {
        assert_eq!(ran[i], t.cpu_ns.total(), "task {i}: run time from the trace");
        assert_eq!(migrations[i], t.migrations_local + t.migrations_remote, "task {i}: migrations");
    }
    assert!(d.wakings >= 6, "every busy vCPU woke at least once (at 0): {}", d.wakings);

    // CPU frequency: CPUs 0-1 constant (2 GHz, 1 GHz), CPU 2 at 1 GHz × (1 − 0.25) = 750 000 kHz.
    // CPU 3: bursty 150 ms off / 50 ms on: toggles at 150, 200, 350, …, 950 ms = 9, plus the
    // initial value: 10 events alternating 1 000 000 and 500 000 kHz.
    assert_eq!(d.freqs[&0], [(0, 2_000_000)]);
    assert_eq!(d.freqs[&1], [(0, 1_000_000)]);
    assert_eq!(d.freqs[&2], [(0, 750_000)]);
    let f3: Vec<u64> = d.freqs[&3].iter().map(|x| x.1).collect();
    assert_eq!(f3.len(), 10);
    assert!(f3.iter().enumerate().all(|(i, f)| *f == if i % 2 == 0 { 1_000_000 } else { 500_000 }));
    assert_eq!(d.freqs[&3][1].0, 150_000_000);

    // Counter tracks, sampled every 10 ms at 10, 20, …, 990 ms: 99 samples each.
    let named = |n: &str| d.tracks.iter().filter(|(_, (name, _))| name == n).map(|(u, _)| *u).collect::<Vec<_>>();
    // credit on the 6 busy vCPUs (children of their thread tracks), none on the idle one
    let credit = named("credit");
    assert_eq!(credit.len(), 6);
    for u in &credit {
        let parent = d.tracks[u].1.unwrap();
        assert!(d.thread_tracks.contains_key(&parent));
        assert_eq!(d.counters[u].len(), 99);
    }
    // a runqueue per CPU, fast share and active vCPUs per VM, dispatcher and placer counters
    for c in 0..4 {
        assert_eq!(named(&format!("cpu{c} runqueue")).len(), 1);
    }
    assert_eq!(named("fast share").len(), 3);
    assert_eq!(named("active vCPUs").len(), 3);
    for n in ["dispatcher.steals", "dispatcher.boosts", "dispatcher.accountings", "placer.affinity_changes"] {
        let u = named(n);
        assert_eq!(u.len(), 1, "{n}");
        assert_eq!(d.counters[&u[0]].len(), 99, "{n}");
    }
    // One fast CPU: the VMs' fast shares in a period add up to at most 1, and over the run
    // Σ share × 10 ms ≈ the fast time the simulator counted before 990 ms.
    let shares: Vec<&Vec<(u64, f64)>> = named("fast share").iter().map(|u| &d.counters[u]).collect();
    for k in 0..99 {
        let sum: f64 = shares.iter().map(|s| s[k].1).sum();
        assert!(sum <= 1.0 + 1e-9, "fast shares at sample {k} sum to {sum}");
    }
    let fast_total: f64 = shares.iter().map(|s| s.iter().map(|x| x.1 * 1e7).sum::<f64>()).sum();
    let fast_ns = r.cpus[0].busy_ns as f64;
    assert!(fast_total <= fast_ns + 1.0 && fast_total >= fast_ns - 10e6 - 1.0, "{fast_total} vs {fast_ns}");
    // the last placer sample is the simulator's count of affinity changes before 990 ms
    let pc = &d.counters[&named("placer.affinity_changes")[0]];
    assert!(pc.last().unwrap().1 as u64 <= r.placer_changes);
}

#[test]
fn tracing_changes_nothing_and_is_deterministic() {
    let sc = scenario(SCENARIO);
    let job = Job { scenario: &sc, seed: 5, dispatcher: None, placer: None };
    let plain = serde_json::to_string(&run_one(&job).unwrap()).unwrap();
    let (r1, t1) = traced(&sc, 5);
    let (_, t2) = traced(&sc, 5);
    assert_eq!(serde_json::to_string(&r1).unwrap(), plain, "a traced run has the same results");
    assert!(t1 == t2, "same scenario and seed → byte-identical trace");
}

#[test]
fn the_fair_dispatcher_has_runqueues_but_no_credit_and_sampling_is_configurable() {
    let sc = scenario(SCENARIO);
    let fair = ampsched_model::spec::PolicySpec { name: "fair".into(), params: Default::default() };
    let job = Job { scenario: &sc, seed: 1, dispatcher: Some(fair), placer: None };
    let (_, bytes) = run_traced(&job, TraceOptions { sample_period: Nanos::from_ms(100) }).unwrap();
    let d = read(&bytes);
    assert!(!d.tracks.values().any(|(n, _)| n == "credit"));
    let rq = d.tracks.iter().find(|(_, (n, _))| n == "cpu0 runqueue").map(|(u, _)| *u).unwrap();
    // samples at 100, 200, …, 900 ms (1000 ms is the end): 9
    assert_eq!(d.counters[&rq].len(), 9);
    let bad = run_traced(&job, TraceOptions { sample_period: Nanos::ZERO }).unwrap_err();
    assert!(bad.msg.contains("sampling period"));
}

#[test]
fn rt_app_threads_keep_their_names_in_results_and_trace_and_periodic_ones_report_slack() {
    // scenarios/rtapp/periodic.json: `render` (timer 16.667 ms), `decode` × 2
    // (a unique timer per instance), `hog` (no timer) on a 4-vCPU domain.
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/rtapp/periodic.toml");
    let sc = Scenario::load(&root, &Library::builtin()).unwrap_or_else(|e| panic!("{e}"));
    let (r, bytes) = traced(&sc, 1);
    let names: Vec<Option<&str>> = r.tasks.iter().map(|t| t.name.as_deref()).collect();
    assert_eq!(names, [Some("render"), Some("decode-0"), Some("decode-1"), Some("hog")]);
    let d = read(&bytes);
    let traced_names: Vec<&str> = d.threads.values().map(|(_, n)| n.as_str()).collect();
    assert_eq!(traced_names, ["render", "decode-0", "decode-1", "hog"]);
    // render: one timer event per frame over 5 s; the first comes after 6 ms of
    // work at most (faster on the fast CPU), so there are at least
    // ⌊5000 / 16.667⌋ − 1 = 298 periods, and slack never exceeds a period.
    let p = r.tasks[0].periodic.as_ref().expect("render is periodic");
    assert!(p.periods >= 298, "{p:?}");
    assert!(p.slack_max_ns < 16_667_000 && p.slack_min_ns <= p.slack_mean_ns, "{p:?}");
    assert!(p.deadline_misses <= p.periods);
    assert!(r.tasks[1].periodic.is_some() && r.tasks[2].periodic.is_some());
    assert!(r.tasks[3].periodic.is_none(), "hog has no timer");
    // The JSON carries both (a documented addition to `ampsched.sim/1`).
    let j = serde_json::to_value(&r.tasks[0]).unwrap();
    assert_eq!(j["name"], "render");
    assert_eq!(j["periodic"]["periods"], p.periods);
}

/// A writer recording every write it is given.
#[derive(Clone, Default)]
struct Chunks(std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>);

impl std::io::Write for Chunks {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().push(b.to_vec());
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_long_trace_is_streamed_in_bounded_chunks_with_the_same_bytes() {
    // 80 s of the test scenario: about 5 MiB of trace.
    let sc = scenario(&SCENARIO.replace("duration_s = 1", "duration_s = 80"));
    let job = Job { scenario: &sc, seed: 2, dispatcher: None, placer: None };
    let (r_mem, whole) = run_traced(&job, TraceOptions::default()).unwrap();
    let chunks = Chunks::default();
    let (r_stream, written) = run_traced_to(&job, TraceOptions::default(), Box::new(chunks.clone())).unwrap();
    written.unwrap();
    let parts = chunks.0.lock().unwrap().clone();
    let streamed: Vec<u8> = parts.concat();
    assert!(streamed == whole, "the streamed file is byte-identical to the in-memory trace");
    assert_eq!(serde_json::to_string(&r_stream).unwrap(), serde_json::to_string(&r_mem).unwrap());
    assert!(whole.len() > 3 * STREAM_CHUNK_BYTES, "long enough to need streaming: {} bytes", whole.len());
    // Handed over as the run went: several chunks, none much past the chunk size
    // (the threshold plus one 10 ms sampling period of packets).
    assert!(parts.len() >= 3, "{} writes", parts.len());
    let biggest = parts.iter().map(Vec::len).max().unwrap();
    assert!(biggest < STREAM_CHUNK_BYTES + STREAM_CHUNK_BYTES / 4, "a chunk of {biggest} bytes");
}

#[test]
fn a_failing_trace_writer_reports_its_error_and_the_run_still_completes() {
    struct Full;
    impl std::io::Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "disk full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let sc = scenario(SCENARIO);
    let job = Job { scenario: &sc, seed: 2, dispatcher: None, placer: None };
    let (r, written) = run_traced_to(&job, TraceOptions::default(), Box::new(Full)).unwrap();
    assert_eq!(written.unwrap_err().kind(), std::io::ErrorKind::StorageFull);
    assert_eq!(serde_json::to_string(&r).unwrap(), serde_json::to_string(&run_one(&job).unwrap()).unwrap());
}
