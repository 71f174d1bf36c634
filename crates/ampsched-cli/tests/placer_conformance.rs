//! One placer contract (issue 13, D1): a recording of a real agent run
//! (`tests/data/agent-samples.jsonl`: `ampsched run --record-samples`, 2
//! vCPUs, CPU 1 slowed by `ampsched-hog`, `make -j2` of 6 generated C files
//! (scripts/bench_agent_real.py's project): two compilers contending next to
//! the light `make` and `cc` processes, `aash`; 27 Nov 10:53) replayed through the simulator's placer bridge and the agent's
//! `decide` part gives identical decisions, period by period, for every
//! registered placer. Each body keeps its own view of the masks in force
//! (its decisions applied), as it would when running; a task first seen has
//! its own mask in force.
//!
//! The same holds after the agent's body (`ampsched_policy::gate::body`: the
//! contention gate, spreading, back-off, ordering): the simulator's
//! `agent_decision` (a scenario's `[agent]`) and the agent's period
//! (`Decider::decide`, then `Body::period`, as `Agent::step` runs them) put
//! the same changes in force, in the same order.

use ampsched_agent::decide::{agent_params, Decider};
use ampsched_model::spec::PolicySpec;
use ampsched_model::{CpuSet, TaskId};
use ampsched_policy::gate::backoff::BackoffParams;
use ampsched_policy::gate::body::Body;
use ampsched_policy::placer_bridge::Recording;
use ampsched_policy::{placer_by_name, AffinityChange, Snapshot, PLACERS};
use std::collections::BTreeMap;
use std::path::Path;

fn recording() -> Recording {
    Recording::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/agent-samples.jsonl")).unwrap()
}

/// `snap` with each task's mask in force taken from `cur` (its own mask when first seen).
fn in_force(snap: &Snapshot, cur: &mut BTreeMap<TaskId, CpuSet>) -> Snapshot {
    let mut s = snap.clone();
    for t in &mut s.tasks {
        t.affinity = *cur.entry(t.id).or_insert(t.allowed);
    }
    s
}

#[test]
fn a_recorded_agent_run_gets_identical_decisions_from_both_bridges_for_every_placer() {
    let rec = recording();
    let topo = rec.header.topology.clone();
    assert!(rec.snapshots.len() >= 20, "a recording of at least 20 periods");
    let mut changed = BTreeMap::new();
    for info in PLACERS {
        let spec = PolicySpec { name: info.name.to_string(), params: Default::default() };
        // Both bodies build the placer with the agent's parameters (the samples are the agent's).
        let mut agent = Decider::new(&spec, 30.0, &topo).unwrap();
        let mut sim_placer = placer_by_name(info.name, &agent_params(&spec, 30.0).unwrap(), &topo).unwrap();
        let (mut agent_cur, mut sim_cur) = (BTreeMap::new(), BTreeMap::new());
        let (mut scratch, mut sim_out) = (Vec::new(), Vec::new());
        let mut n = 0;
        for (k, snap) in rec.snapshots.iter().enumerate() {
            let a_snap = in_force(snap, &mut agent_cur);
            let s_snap = in_force(snap, &mut sim_cur);
            let a_out: Vec<AffinityChange> = agent.decide(&topo, &a_snap).to_vec();
            ampsched_sim::placer_decision(sim_placer.as_mut(), &topo, &s_snap, &mut scratch, &mut sim_out);
            assert_eq!(a_out, sim_out, "placer {} period {k}", info.name);
            for ch in &a_out {
                let t = snap.tasks.iter().find(|t| t.id == ch.task).expect("a change names a sampled task");
                // The contract: never outside the task's own mask, never empty.
                assert!(!ch.mask.is_empty() && ch.mask.and_not(&t.allowed).is_empty(), "{} {k}: {ch:?}", info.name);
                agent_cur.insert(ch.task, ch.mask);
                sim_cur.insert(ch.task, ch.mask);
            }
            n += a_out.len();
        }
        changed.insert(info.name, n);
    }
    // The replay is not vacuous: the placers that move threads did so on this recording.
    for p in ["aash", "capability", "fast-first"] {
        assert!(changed[p] > 0, "{p} made no change on the recording: {changed:?}");
    }
    assert_eq!(changed["none"], 0);
}

#[test]
fn a_recorded_agent_run_gets_identical_changes_from_both_agent_bodies_for_every_placer() {
    let rec = recording();
    let topo = rec.header.topology.clone();
    let (mut contended, mut calm, mut dropped) = (0, 0, 0);
    for info in PLACERS {
        let spec = PolicySpec { name: info.name.to_string(), params: Default::default() };
        let mut agent = Decider::new(&spec, 30.0, &topo).unwrap();
        let mut agent_body = Body::new(Some(BackoffParams::default()));
        let mut sim_placer = placer_by_name(info.name, &agent_params(&spec, 30.0).unwrap(), &topo).unwrap();
        let mut sim_body = Body::new(Some(BackoffParams::default()));
        let (mut agent_cur, mut sim_cur) = (BTreeMap::new(), BTreeMap::new());
        let (mut scratch, mut a_out, mut s_out) = (Vec::new(), Vec::new(), Vec::new());
        for (k, snap) in rec.snapshots.iter().enumerate() {
            let a_snap = in_force(snap, &mut agent_cur);
            let s_snap = in_force(snap, &mut sim_cur);
            let decided = agent.decide(&topo, &a_snap).to_vec();
            let p = agent_body.period(&topo, &a_snap, &decided, None, &mut a_out);
            ampsched_sim::agent_decision(sim_placer.as_mut(), &mut sim_body, &topo, &s_snap, &mut scratch, &mut s_out);
            assert_eq!(a_out, s_out, "placer {} period {k}", info.name);
            if info.name == "aash" {
                if p.contended {
                    contended += 1;
                } else {
                    calm += 1;
                }
                // A decided narrowing that the gate did not put in force.
                dropped += decided.iter().filter(|d| !a_out.contains(d)).count();
            }
            for ch in &a_out {
                agent_cur.insert(ch.task, ch.mask);
                sim_cur.insert(ch.task, ch.mask);
            }
        }
    }
    // Not vacuous: on this recording aash's masks went in force in some periods and the gate
    // held them back in others.
    assert!(contended > 0 && calm > 0 && dropped > 0, "contended {contended}, calm {calm}, dropped {dropped}");
}

#[test]
fn the_recording_is_a_real_agent_run_with_every_state_the_agent_reports() {
    let rec = recording();
    let states: std::collections::BTreeSet<String> =
        rec.snapshots.iter().flat_map(|s| s.tasks.iter().map(|t| format!("{:?}", t.state))).collect();
    // /proc cannot tell running from queued: the agent reports runnable, blocked and done.
    assert_eq!(states.into_iter().collect::<Vec<_>>(), vec!["Blocked", "Done", "Runnable"]);
    assert_eq!(rec.header.placer, "aash");
    // Periods are elapsed times, not the nominal 30 ms everywhere.
    assert!(rec.snapshots.iter().any(|s| s.period.0 != 30_000_000));
}
