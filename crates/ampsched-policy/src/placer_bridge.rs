//! The placer contract: what a [`Placer`] sees and how its decision becomes
//! per-task masks — one definition for both bodies that run placers, the
//! simulator (its engine's placer bridge) and the Linux agent (its `decide`
//! part). The same placer given the same samples decides the same in both;
//! `ampsched-cli/tests/placer_conformance.rs` replays a recording from a
//! real agent run through both bridges and checks it.
//!
//! # What a placer sees
//!
//! A [`Snapshot`] per period. Each [`TaskSample`] gives:
//! - its state at the end of the period ([`TaskState`]: running, runnable
//!   (queued), blocked, done). A body that cannot tell running from queued
//!   reports `Runnable` — the agent reading `/proc` sees one state `R` for
//!   both — so no placer may treat `Running` as more than "runnable";
//! - `active`: it ran or was runnable during the period;
//! - `allowed`: the task's own affinity, the CPUs it may use by its own (or
//!   its user's) choice: in the simulator the scenario's mask or the last
//!   mask its program set; in the agent the thread's affinity when it was
//!   first seen (or its domain's base mask when it inherited a placer mask);
//! - `affinity`: the mask in force now (the last effective mask, below);
//! - run time in the period per CPU class, and `ws_kb` where known (0 =
//!   unknown: the agent cannot see a thread's working set);
//! - `Snapshot::period` is the time that actually elapsed since the last
//!   decision (a late period is longer), never the nominal period.
//!
//! # How a decision becomes masks
//!
//! A placer outputs [`AffinityChange`]s. [`resolve`] turns them into the
//! masks each body applies: the *effective mask* of a decision `d` for a task
//! whose own mask is `a` is `d ∩ a`, or `a` when the intersection is empty
//! ([`effective_mask`]). A placer narrows a task within what it allows
//! itself and never widens it; a decision that would leave the task nowhere
//! to run is replaced by the task's own mask (its choice wins), never
//! skipped, so the placer's view (`affinity`) always equals what is in
//! force. A change whose effective mask equals the mask in force is dropped;
//! an empty decision is dropped; when a placer outputs several changes for a
//! task the last one counts. The output keeps the placer's order (of each
//! task's first change): the simulator's dispatcher hears of changes one by
//! one, and the order is part of a run's result.
//!
//! Parameters a placer wants set differently on a real machine are declared
//! by the placer ([`crate::registry::PolicyInfo::real_machine`]) and applied
//! by [`real_machine_params`]; no body enables a parameter by a placer's
//! name.
//!
//! # Recording
//!
//! [`Recording`]: a JSON-lines file whose first line is a [`RecordingHeader`]
//! (schema, topology, placer) and every other line one [`Snapshot`], as the
//! agent's `--record-samples FILE` writes it; [`Recording::read`] parses one
//! with errors naming the line.

use crate::params::PolicyError;
use crate::placer::{AffinityChange, Placer, Snapshot, TaskSample};
use crate::registry::PolicyInfo;
use ampsched_model::spec::{ParamValue, Params};
use ampsched_model::{CpuSet, TaskId, Topology};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub use crate::placer::{RealMachineParam, TaskState};

/// The mask a decision `decision` puts in force for a task whose own mask is `allowed`:
/// `decision ∩ allowed`, or `allowed` when they do not meet.
pub fn effective_mask(decision: &CpuSet, allowed: &CpuSet) -> CpuSet {
    let m = decision.and(allowed);
    if m.is_empty() {
        *allowed
    } else {
        m
    }
}

/// Turn a placer's `changes` into the effective masks to apply (see the module doc): one
/// per task at most, in the placer's order, only where the effective mask differs from the
/// task's `affinity`. `tasks` must be in id order (a [`Snapshot`]'s are).
///
/// `out` itself holds each task's last change while they are gathered, so a decision
/// allocates nothing once `out` has grown; only a large decision (more than
/// [`SMALL_DECISION`] changes) that names some task twice, or out of id order, looks
/// tasks up in a map instead of along `out`.
pub fn resolve(changes: &[AffinityChange], tasks: &[TaskSample], out: &mut Vec<AffinityChange>) {
    out.clear();
    let given = || changes.iter().filter(|c| !c.mask.is_empty());
    // Tasks in strictly increasing id order: each named once, nothing to merge.
    let mut prev = None;
    let ordered = given().all(|c| prev.replace(c.task).is_none_or(|p| p < c.task));
    if ordered || changes.len() <= SMALL_DECISION {
        for ch in given() {
            let named = if ordered { None } else { out.iter_mut().find(|o| o.task == ch.task) };
            match named {
                Some(o) => o.mask = ch.mask,
                None => out.push(ch.clone()),
            }
        }
    } else {
        let mut at: BTreeMap<TaskId, usize> = BTreeMap::new();
        for ch in given() {
            match at.get(&ch.task) {
                Some(&i) => out[i].mask = ch.mask,
                None => {
                    at.insert(ch.task, out.len());
                    out.push(ch.clone());
                }
            }
        }
    }
    out.retain_mut(|ch| {
        let Ok(i) = tasks.binary_search_by_key(&ch.task, |t| t.id) else { return false };
        let t = &tasks[i];
        ch.mask = effective_mask(&ch.mask, &t.allowed);
        ch.mask != t.affinity
    });
}

/// Up to this many changes, [`resolve`] finds a task named twice by a scan along its output.
pub const SMALL_DECISION: usize = 64;

/// One decision: run `placer` on `snap` and resolve its output into `out` (`scratch`
/// holds the raw changes; both are reused between periods).
pub fn decide(
    placer: &mut dyn Placer,
    topo: &Topology,
    snap: &Snapshot,
    scratch: &mut Vec<AffinityChange>,
    out: &mut Vec<AffinityChange>,
) {
    scratch.clear();
    placer.place(topo, snap, scratch);
    resolve(scratch, &snap.tasks, out);
}

/// `params` with the placer's declared real-machine values added where the user set none.
pub fn real_machine_params(info: &PolicyInfo, params: &Params) -> Result<Params, PolicyError> {
    let mut out = params.clone();
    for p in info.real_machine {
        let v = match p.value {
            "true" => ParamValue::Bool(true),
            "false" => ParamValue::Bool(false),
            s => match s.parse::<f64>() {
                Ok(x) => ParamValue::Float(x),
                Err(_) => ParamValue::Str(s.to_string()),
            },
        };
        out.entry(p.name.to_string()).or_insert(v);
    }
    Ok(out)
}

/// Schema of a sample recording's header line.
pub const RECORDING_SCHEMA: &str = "ampsched.samples/1";

/// First line of a sample recording.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RecordingHeader {
    /// [`RECORDING_SCHEMA`].
    pub schema: String,
    /// The machine as the placer saw it.
    pub topology: Topology,
    /// The placer that ran (informative: a recording replays through any placer).
    pub placer: String,
}

/// A sample recording: the header and the snapshots in order.
#[derive(Clone, Debug)]
pub struct Recording {
    /// Header.
    pub header: RecordingHeader,
    /// One snapshot per period.
    pub snapshots: Vec<Snapshot>,
}

impl Recording {
    /// Parse a recording's text; `name` names it in errors.
    pub fn parse(name: &str, text: &str) -> Result<Recording, String> {
        let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
        let (_, first) = lines.next().ok_or_else(|| format!("{name}: empty recording (no header line)"))?;
        let header: RecordingHeader =
            serde_json::from_str(first).map_err(|e| format!("{name}:1: not a recording header: {e}"))?;
        if header.schema != RECORDING_SCHEMA {
            return Err(format!("{name}:1: schema `{}`; expected `{RECORDING_SCHEMA}`", header.schema));
        }
        let mut snapshots = Vec::new();
        for (i, l) in lines {
            let s: Snapshot = serde_json::from_str(l).map_err(|e| format!("{name}:{}: not a snapshot: {e}", i + 1))?;
            snapshots.push(s);
        }
        Ok(Recording { header, snapshots })
    }

    /// Read a recording file.
    pub fn read(path: &Path) -> Result<Recording, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Recording::parse(&path.display().to_string(), &text)
    }

    /// The header line's JSON text.
    pub fn header_line(topology: &Topology, placer: &str) -> String {
        let h = RecordingHeader { schema: RECORDING_SCHEMA.into(), topology: topology.clone(), placer: placer.into() };
        serde_json::to_string(&h).expect("a header serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ampsched_model::{CpuId, DomainId, Nanos};

    fn ids(v: &[u32]) -> CpuSet {
        CpuSet::from_cpus(v.iter().map(|c| CpuId(*c)))
    }

    fn task(id: u32, allowed: &[u32], affinity: &[u32]) -> TaskSample {
        TaskSample {
            id: TaskId(id),
            domain: DomainId(0),
            vcpu: id,
            active: true,
            state: TaskState::Runnable,
            run_by_class: vec![Nanos::ZERO; 2],
            cpu: None,
            allowed: ids(allowed),
            affinity: ids(affinity),
            ws_kb: 0,
        }
    }

    #[test]
    fn a_decision_narrows_within_the_own_mask_and_never_leaves_a_task_nowhere() {
        // Own mask {1,2,3}: decision {0,1} → {0,1} ∩ {1,2,3} = {1}.
        assert_eq!(effective_mask(&ids(&[0, 1]), &ids(&[1, 2, 3])), ids(&[1]));
        // Decision {0} meets nothing of {1,2,3}: the task keeps its own mask.
        assert_eq!(effective_mask(&ids(&[0]), &ids(&[1, 2, 3])), ids(&[1, 2, 3]));
        // Decision wider than the own mask: never widens.
        assert_eq!(effective_mask(&ids(&[0, 1, 2, 3]), &ids(&[2])), ids(&[2]));
    }

    #[test]
    fn resolve_drops_no_ops_keeps_the_last_change_in_the_placers_order() {
        let tasks = vec![task(0, &[0, 1, 2, 3], &[0, 1, 2, 3]), task(1, &[2, 3], &[2, 3]), task(2, &[0, 1], &[0])];
        let ch = |t: u32, m: &[u32]| AffinityChange { task: TaskId(t), mask: ids(m) };
        let mut out = Vec::new();
        resolve(
            &[
                // t2: {1} then {0}: the last counts; {0} ∩ {0,1} = {0} = in force → dropped.
                ch(2, &[1]),
                ch(2, &[0]),
                // t1: {0} ∩ {2,3} = ∅ → own mask {2,3} = in force → dropped.
                ch(1, &[0]),
                // t0: {0} → {0}.
                ch(0, &[0]),
                // t1 again, {3}: {3} ∩ {2,3} = {3} — the last change counts, in t1's first place.
                ch(1, &[3]),
                // Unknown task 9 and an empty mask: dropped.
                ch(9, &[0]),
                AffinityChange { task: TaskId(0), mask: CpuSet::new() },
            ],
            &tasks,
            &mut out,
        );
        assert_eq!(out, vec![ch(1, &[3]), ch(0, &[0])]);
    }

    #[test]
    fn resolve_merges_the_same_way_in_order_out_of_order_small_and_large() {
        // Reference: the contract spelled out with a map — each task's last non-empty
        // change, at its first change's place; then effective masks that differ.
        fn reference(changes: &[AffinityChange], tasks: &[TaskSample]) -> Vec<AffinityChange> {
            let mut order: Vec<TaskId> = Vec::new();
            let mut last: BTreeMap<TaskId, CpuSet> = BTreeMap::new();
            for c in changes.iter().filter(|c| !c.mask.is_empty()) {
                if last.insert(c.task, c.mask).is_none() {
                    order.push(c.task);
                }
            }
            let mut out = Vec::new();
            for t in order {
                let Some(s) = tasks.iter().find(|s| s.id == t) else { continue };
                let eff = effective_mask(&last[&t], &s.allowed);
                if eff != s.affinity {
                    out.push(AffinityChange { task: t, mask: eff });
                }
            }
            out
        }
        // 100 tasks on 8 CPUs, each allowed on {t % 8, (t + 1) % 8} and now on its first.
        let tasks: Vec<TaskSample> = (0..100u32).map(|t| task(t, &[t % 8, (t + 1) % 8], &[t % 8])).collect();
        let mut x = 12345u64;
        let mut next = |m: u64| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        let mut out = Vec::new();
        // Sizes on both sides of SMALL_DECISION; ordered (one change per task, by id) and
        // shuffled with repeats, empty masks and unknown tasks.
        for (n, ordered) in [(10usize, true), (10, false), (60, false), (200, true), (200, false), (500, false)] {
            let changes: Vec<AffinityChange> = if ordered {
                (0..n.min(100) as u32)
                    .map(|t| AffinityChange { task: TaskId(t), mask: ids(&[next(8) as u32]) })
                    .collect()
            } else {
                (0..n)
                    .map(|_| {
                        let t = next(120) as u32; // ids 100..120 are unknown
                        let mask = if next(10) == 0 { CpuSet::new() } else { ids(&[next(8) as u32, next(8) as u32]) };
                        AffinityChange { task: TaskId(t), mask }
                    })
                    .collect()
            };
            resolve(&changes, &tasks, &mut out);
            let want = reference(&changes, &tasks);
            assert!(!want.is_empty(), "size {n}: the case exercises nothing");
            assert_eq!(out, want, "size {n}, ordered {ordered}");
        }
    }

    #[test]
    fn real_machine_values_are_added_only_where_unset() {
        let info = crate::registry::PLACERS.iter().find(|p| !p.real_machine.is_empty()).expect("a declaring placer");
        let d = info.real_machine[0];
        let got = real_machine_params(info, &Params::new()).unwrap();
        assert!(got.contains_key(d.name));
        let mut mine = Params::new();
        mine.insert(d.name.to_string(), ParamValue::Str("mine".into()));
        assert_eq!(real_machine_params(info, &mine).unwrap()[d.name], ParamValue::Str("mine".into()));
        // Every declared name is a parameter of its placer (declared values parse).
        for p in crate::registry::PLACERS {
            let params = real_machine_params(p, &Params::new()).unwrap();
            let topo = Topology::fast_slow(1, 2.0, 1, 1.0, 2);
            crate::registry::placer_by_name(p.name, &params, &topo).unwrap();
        }
    }

    #[test]
    fn recordings_round_trip_and_bad_lines_are_named() {
        let topo = Topology::fast_slow(1, 2.0, 1, 1.0, 2);
        let snap = Snapshot {
            now: Nanos::from_ms(30),
            period: Nanos::from_ms(31),
            cpus: Vec::new(),
            tasks: vec![task(0, &[0, 1], &[0, 1])],
            domains: Vec::new(),
        };
        let text = format!("{}\n{}\n", Recording::header_line(&topo, "aash"), serde_json::to_string(&snap).unwrap());
        let r = Recording::parse("rec", &text).unwrap();
        assert_eq!(r.snapshots.len(), 1);
        assert_eq!(r.snapshots[0].tasks[0].allowed, ids(&[0, 1]));
        assert_eq!(r.snapshots[0].period, Nanos::from_ms(31));
        let e =
            Recording::parse("rec", &format!("{}\n{{\"now\": 1}}\n", Recording::header_line(&topo, "x"))).unwrap_err();
        assert!(e.starts_with("rec:2: not a snapshot"), "{e}");
        assert!(Recording::parse("rec", "").unwrap_err().contains("empty"));
    }
}
